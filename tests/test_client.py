# SPDX-License-Identifier: 0BSD
"""client.py against a correct echo server and deliberately broken ones, all started here."""
import ast
import json
import os
import random
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET

import pytest

from helpers import (CERT, KEY, PYTHON, ROOT, RUN, SERVERS, TIMEOUT, UNIX_ONLY, WINE, children_of, client, client_json,
                     echo_processes, group_gone, kill_group, python_with_client, queue_capacity, started_and_stopped,
                     steady, unix_interpreter, wait_until)
from common import pin  # bench/common.py (helpers put bench/ on the path): the one way a process is pinned

import draw  # bench/draw.py (helpers put bench/ on the path): the Markdown of --all's records

WORKLOAD = ["--clients", "3", "--connects", "2", "--messages", "7", "--size", "100", "--procs", "2"]


@pytest.mark.windows
@pytest.mark.slow
def test_exact_counts_against_a_correct_server(echo_server):
    figures, _ = client_json("--port", str(echo_server()), *WORKLOAD)
    assert figures["messages"] == 3 * 2 * 7 and figures["connections"] == 6 and figures["errors"] == 0
    for key in ("connect_s", "echo_s", "total_s", "msgs_per_s", "mb_per_s", "p50_ms", "p99_ms"):
        assert figures[key] > 0
    assert figures["total_s"] == pytest.approx(figures["connect_s"] + figures["echo_s"])


@pytest.mark.slow
def test_text_report_has_the_articles_three_figures(echo_server):
    result = client("--port", str(echo_server()), *WORKLOAD)
    assert result.returncode == 0
    for word in ("connect", "echo", "total", "msgs/s", "MB/s", "p99", "errors     0"):
        assert word in result.stdout


@pytest.mark.windows
@pytest.mark.slow
@pytest.mark.parametrize("fault, kind", [("corrupt", "mismatch"), ("drop", "timeout"), ("extra", "extra bytes"),
                                         ("close", "closed early")])
def test_every_fault_is_counted_and_fails_the_run(echo_server, fault, kind):
    started = time.monotonic()
    result = client("--port", str(echo_server(fault)), *WORKLOAD, "--timeout", "1", "--json")
    assert result.returncode != 0
    figures = json.loads(result.stdout)
    assert figures["errors"] > 0 and figures["error_kinds"].get(kind)
    assert figures["messages"] < 3 * 2 * 7
    assert time.monotonic() - started < 30, "a broken server never makes the client hang"


def text_has(stdout, m):
    """Whether client.py's text report writes the figure declared with metadata m: on the line its
    declaration names, by its title less that line's name."""
    title = m["title"][len(m["line"]) + 1:] if m["title"].startswith(m["line"] + " ") else \
        "" if m["title"] == m["line"] else m["title"]
    return any(line.split(None, 1)[0] == m["line"] and title in line for line in stdout.splitlines())


@pytest.mark.windows
@pytest.mark.slow
@pytest.mark.parametrize("args", [WORKLOAD, ["--clients", "3", "--connects", "1", "--messages", "2", "--hold"],
                                  ["--rate", "40", "--duration", "0.5"]])
def test_text_and_json_carry_the_figures_the_record_declares(echo_server, client_module, args):
    """The text and the JSON are written from one record: each carries the same figures, the ones its
    record declares (less those that apply only sometimes: here the server's CPU, TLS, the other loop's)."""
    port = str(echo_server())
    figures, _ = client_json("--port", port, *args)
    text = client("--port", port, *args).stdout
    record = (client_module.Step if "--rate" in args else client_module.Run)(**figures)
    declared = client_module.figures_of(type(record))
    carried = {name for name, m in declared if not m["when"] or figures.get(name) is not None}
    assert set(figures) == carried
    assert {"errors", "p99_ms", "client_cpu_s"} <= carried and ("connect_phase_s" in carried) == ("--hold" in args)
    # The server's CPU is found, and enough of it counted, in one run and maybe not in the next (this server
    # is a thread of the test's process, whose ended threads count in ticks): the two runs may differ there.
    sometimes = {name for name, m in declared if m["line"] == "server"}
    for name, m in declared:
        if name not in sometimes:
            assert text_has(text, m) == (name in carried), (name, text)
    lines = {line.split(None, 1)[0] for line in text.splitlines()} - {"server"}
    assert lines == {m["line"] for name, m in declared if name in carried and name not in sometimes} | {"workload", "note"}


@pytest.mark.slow
def test_latency_reflects_a_known_delay(echo_server):
    figures, _ = client_json("--port", str(echo_server("delay")), "--clients", "2", "--connects", "1", "--messages", "5")
    assert figures["errors"] == 0
    assert 50 <= figures["p50_ms"] < 500


def test_nothing_listening_is_one_clear_line():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, not listening: connections are refused
        result = client("--port", str(port), "--timeout", "2")
    assert result.returncode != 0
    assert result.stderr.count("\n") == 1 and "cannot connect" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("args", [["--clients", "0"], ["--clients", "1000001"], ["--size", "-5"], ["--messages", "many"],
                                  ["--all", "--scenario", "nope"], ["--servers", "epoll"], ["--port", "0"],
                                  ["--cafile", str(CERT)], ["--tls-resume"], ["--all", "--tls"],
                                  ["--tls", "--cafile", "/nonexistent/ca.pem"], ["--tls", "--cafile", __file__]])
def test_bad_arguments_are_one_clear_line(args):
    result = client(*args)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "error" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_too_many_clients_for_the_descriptor_limit_says_so(echo_server):
    import resource
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY or hard > 10**6:
        pytest.skip("no finite descriptor limit to exceed")
    result = client("--port", str(echo_server()), "--clients", str(hard * 3), "--procs", "1")
    assert result.returncode != 0 and "descriptors" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.windows
@pytest.mark.slow
def test_all_names_every_server_and_leaves_no_process(tmp_path):
    before = echo_processes()
    measured, stderr = client_json("--all", "--clients", "3", "--connects", "1", "--messages", "3", "--repeat", "1",
                                   "--procs", "1", timeout=300)
    tables = measured["tables"]
    rows = {row["server"]: row for row in tables[0]["rows"]}
    # Where the interpreter is not a Unix one, the Unix-only patterns are skipped, each with its line.
    runs_here = {script for script in SERVERS if unix_interpreter() or script not in UNIX_ONLY}
    assert {name.split()[0] for name in rows} == runs_here  # and "<file> --uvloop" rows where uvloop is installed
    assert set(measured.get("skipped", {})) == set(SERVERS) - runs_here
    assert all(not row["failed"] and row["messages"] == 9 for row in rows.values()), rows
    assert "warm-up" in stderr and "run 1" in stderr  # progress
    text = draw.markdown(draw.from_json(measured))  # as bench/draw.py writes the records, here on Linux
    assert all(name in text for name in SERVERS)
    ET.fromstring(draw.chart(draw.from_json(measured)["tables"], []))  # well-formed SVG
    assert not echo_processes() - before, "client.py --all stops every server it started"


def offers_uvloop(script):
    return "--uvloop" in subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True,
                                        timeout=TIMEOUT).stdout


PARSER = 'import argparse\nparser = argparse.ArgumentParser(description="Run with --uvloop.")\n'


@pytest.mark.parametrize("source, offered", [
    (PARSER + 'parser.add_argument("--uvloop", action="store_true")\nparser.parse_args()\n', True),
    (PARSER + 'parser.add_argument("--uvloop", action="store_true", help="run on uvloop")\nparser.parse_args()\n',
     True),
    (PARSER + 'parser.add_argument("--work", help="not --uvloop")\nparser.parse_args()\n', False),
    ("UVLOOP = True\n" + PARSER + "parser.parse_args()\n", False),  # its source is never read
    ('"""A server; --uvloop some day."""\nimport sys\n', False), ("def broken(:\n", False)])
def test_uvloop_support_is_what_the_servers_help_offers(tmp_path, source, offered, client_module):
    """Whether a server takes --uvloop is asked of it (its --help lists the option), not read from its source:
    a docstring, a description or another option's help that names the flag does not count."""
    script = tmp_path / "echo_x.py"
    script.write_text(source)
    assert client_module.takes_uvloop([script]) == ([script] if offered else [])


def test_the_servers_help_is_read_without_colours(monkeypatch):
    """A user's FORCE_COLOR makes 3.14's argparse colour --help even into a pipe: what client.py reads of the servers'
    --help (--uvloop, the --workers default) is asked for plain (PYTHON_COLORS=0), so it reads the same."""
    monkeypatch.delenv("PYTHON_COLORS", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")
    code = ("print(client.workers_of(['echo_prefork.py']), client.pool_workers(client.HERE / 'echo_prefork.py'), "
            "[s.name for s in client.takes_uvloop([client.HERE / 'echo_asyncio_protocol.py'])])")
    result = python_with_client(code)
    assert result.stdout.split() == ["10", "10", "['echo_asyncio_protocol.py']"], result


def test_all_adds_a_uvloop_row_for_exactly_the_servers_that_offer_it(tmp_path, client_module):
    """With uvloop importable (faked here), --all adds "<file> --uvloop" for each server whose --help
    offers --uvloop, in a copy of the servers (client.py reads no server's source): the rows must be exactly
    the servers that take the flag."""
    offered = {name for name in SERVERS if offers_uvloop(ROOT / name)}
    assert "echo_asyncio_protocol.py" in offered
    assert {script.name for script in client_module.takes_uvloop([ROOT / name for name in SERVERS])} == offered
    for name in SERVERS:
        source = (ROOT / name).read_text()
        (tmp_path / name).write_text(source)
    code = ("import importlib.util, json\n"
            "client.HERE = client.Path({!r})\n"
            "real = importlib.util.find_spec\n"
            "importlib.util.find_spec = lambda name, *rest: real('json') if name == 'uvloop' else real(name, *rest)\n"
            "print(json.dumps([[script.name, *extra] for script, extra in "
            "client.server_entries(client.parse_args(['--all']))[0]]))").format(str(tmp_path))
    result = python_with_client(code)
    assert result.returncode == 0, result.stderr
    entries = json.loads(result.stdout)
    assert {name for name, *extra in entries if extra == ["--uvloop"]} == offered
    assert sorted(name for name, *extra in entries if not extra) == sorted(SERVERS)


def test_a_dead_server_counts_every_refusal_without_recursing():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))  # bound, not listening
        # measure() in a process of its own, single-threaded as client.py is when it forks.
        code = ("print(client.to_json(client.measure("
                "'127.0.0.1', {}, client.Workload(clients=2, connects=3000, messages=1, size=8, timeout=2, "
                "connect_timeout=2, budget=None, hold=False, connecting=100), 1)[0]))").format(probe.getsockname()[1])
        result = python_with_client(code, timeout=TIMEOUT * 6)
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)
    assert figures["messages"] == 0 and figures["error_kinds"] == {"refused": 6000}


class Counting:
    """A selectors echo server with a tiny listen backlog that counts the most connections open at once.
    With pause, it listens but accepts nothing for that many seconds: its listen queue overflows."""

    def __init__(self, backlog, family=socket.AF_INET, host="127.0.0.1", pause=0.0):
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind((host, 0))
        self.sock.listen(backlog)
        self.sock.setblocking(False)
        self.port, self.open, self.most = self.sock.getsockname()[1], 0, 0
        self.peers = set()  # the source addresses it accepted from
        self.accepted = 0  # connections accepted in all
        self.stopping, self.pause = False, pause
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        resume = time.monotonic() + self.pause
        while not self.stopping and time.monotonic() < resume:
            time.sleep(0.01)
        selector = selectors.DefaultSelector()
        selector.register(self.sock, selectors.EVENT_READ)
        while not self.stopping:
            for key, _ in selector.select(0.1):
                if key.fileobj is self.sock:
                    try:
                        while True:
                            conn, peer = self.sock.accept()
                            self.peers.add(peer[0])
                            self.accepted += 1
                            selector.register(conn, selectors.EVENT_READ)
                            self.open += 1
                            self.most = max(self.most, self.open)
                    except BlockingIOError:
                        continue  # the queue is empty
                try:
                    data = key.fileobj.recv(65536)
                except ConnectionResetError:  # a client stopped by a signal
                    data = b""
                if data:
                    key.fileobj.sendall(data)  # small messages: the kernel takes them at once
                else:
                    selector.unregister(key.fileobj)
                    key.fileobj.close()
                    self.open -= 1
        selector.close()

    def stop(self):
        self.stopping = True
        self.thread.join(TIMEOUT)
        self.sock.close()


@pytest.fixture
def counting_server():
    """counting_server(backlog, ...) -> a running Counting server; all stopped at the end."""
    yield from started_and_stopped(Counting, Counting.stop)


@pytest.mark.slow
def test_connections_are_ramped_held_and_reported_in_two_phases(counting_server):
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 5000 <= hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (5000, hard))
    elif soft < 5000:
        pytest.skip("needs 5,000 descriptors for 2,000 connections on each side")
    # Fewer connects in flight than the listen queue holds: a server that keeps accepting never drops one.
    server = counting_server(backlog=128)
    figures, _ = client_json("--port", str(server.port), "--clients", "2000", "--connects", "1", "--messages", "2",
                             "--hold", "--connect-concurrency", "32", "--timeout", "30")
    assert figures["errors"] == 0 and figures["messages"] == 4000
    assert figures["max_open"] == 2000 and server.most == 2000, "the server saw them all open together"
    assert figures["connect_phase_s"] > 0 and figures["echo_phase_s"] > 0


@pytest.mark.slow
def test_no_syn_retry_against_a_server_whose_queue_cannot_fill(counting_server):
    server = counting_server(backlog=1024)  # more than there are connections: no SYN is dropped
    figures, _ = client_json("--port", str(server.port), "--clients", "300", "--connects", "1", "--messages", "1",
                             "--hold", "--procs", "1")
    assert figures["errors"] == 0 and figures["syn_retries"] == 0 and figures["connect_max_ms"] < 950
    assert 0 < figures["connect_p50_ms"] <= figures["connect_p99_ms"] <= figures["connect_max_ms"]


@pytest.mark.slow
def test_connects_that_waited_on_a_syn_retry_are_counted_apart(counting_server):
    """A listener of backlog 1 that accepts nothing for 1.5 s: the connects past what its
    queue holds have their SYNs dropped and retried (after 1 s: dropped again; after 3 s: in)."""
    clients = 8
    # client.py checks that something listens through /proc here, without a connection (CLIENT.md, "The
    # probe"): the queue's places are all the run's.
    queued = queue_capacity(1)
    server = counting_server(backlog=1, pause=1.5)
    started = time.monotonic()
    figures, _ = client_json("--port", str(server.port), "--clients", str(clients), "--connects", "1", "--messages",
                             "1", "--hold", "--connect-concurrency", str(clients), "--procs", "1", "--timeout", "10")
    assert figures["errors"] == 0 and figures["messages"] == clients
    assert figures["syn_retries"] == clients - queued, figures
    assert figures["connect_p50_ms"] >= 950 and figures["connect_max_ms"] < 8000
    text = client("--port", str(server.port), "--clients", "2", "--connects", "1", "--messages", "1", "--hold",
                  "--procs", "1").stdout
    assert "SYN retr" in text, text
    assert time.monotonic() - started < 20


@pytest.mark.slow
def test_ipv6_host(counting_server):
    try:
        server = counting_server(backlog=8, family=socket.AF_INET6, host="::1")
    except OSError:
        pytest.skip("this machine has no IPv6 loopback (::1)")
    assert client_json("--host", "::1", "--port", str(server.port), *WORKLOAD)[0]["messages"] == 3 * 2 * 7


def test_a_failed_row_says_why_in_words(client_module):
    w = client_module.Workload(timeout=30, connect_timeout=30, budget=120)
    result = client_module.Run(messages=90, expected=100, error_kinds={"timeout": 8, "connect timeout": 2})
    text = client_module.why_failed(result, w, "echo_select.py")
    assert text.startswith("90 of 100 messages echoed")
    assert "8 connections had no echo within 30 s" in text and "2 connections not connected within 30 s" in text
    assert "select() watches descriptors below 1024 only" in text
    assert "limit" not in client_module.why_failed(result, w, "echo_epoll.py")


def test_a_row_that_failed_in_the_warm_up_says_so_and_counts_with_nouns(client_module):
    """The warm-up's workload is not the table's: the line names it (the 44 failed connections had no noun)."""
    w = client_module.Workload(clients=100, connects=1, messages=10, timeout=10)
    result = client_module.Run(messages=560, expected=1000, error_kinds={"timeout": 44, "reset": 1})
    assert client_module.why_failed(result, w, "echo_simple.py", warm_up=True).startswith(
        "560 of 1,000 messages echoed in the warm-up (100 clients x 1 connections x 10 messages of 32 B); 44 "
        "connections had no echo within 10 s, 1 connection reset; the pattern's limit: ")
    assert "warm-up" not in client_module.why_failed(result, w, "echo_simple.py")


def test_a_figure_per_server_cpu_second_on_too_little_work_says_so(client_module, capsys):
    """The rule: at least 10 ms of server CPU (1 ns schedstat), and 20 times its resolution (10 ms ticks: 0.2 s).
    The text report marks the figure, explains client-bound and the resolution, and gives the article's times in
    ms like the rest."""
    client = client_module
    for cpu, resolution, scant in ((0.0009, 1e-9, True), (0.0099, 1e-9, True), (0.01, 1e-9, False),
                                   (0.19, 0.01, True), (0.2, 0.01, False), (None, None, False)):
        r = client.Run(messages=3000, server_cpu_s=cpu, server_cpu_resolution_s=resolution, client_cpu_s=0.001)
        if cpu:
            client.per_server_cpu(r)
        assert bool(client.scant(r)) is scant, (cpu, resolution)
    r = client.Run(messages=3, expected=3, wall_s=0.001, connections=1, msgs_per_s=3000, connect_s=0.000296,
                   echo_s=0.00064, total_s=0.00093, server_cpu_s=0.0009, server_cpu_resolution_s=1e-9, client_cpu_s=0.01,
                   errors=0, error_kinds={})
    client.per_server_cpu(r)
    client.report(r, client.Workload(clients=1, connects=1, messages=3), 1)
    lines = capsys.readouterr().out.splitlines()
    assert "article    connect 0.296 ms   echo 0.640 ms   total 0.930 ms" in lines, lines
    assert "msgs per server CPU-s 3,333 (too little work to mean much: 0.900 ms of server CPU, under 10 ms)   " \
           "client-bound yes" in next(line for line in lines if line.startswith("server ")), lines
    notes = " ".join(line for line in lines if line.startswith("note "))
    assert "resolution is what it may be short by: 1 ns" in notes and "client-bound: the client spent more" in notes
    r.server_cpu_s, r.client_cpu_s = 0.5, 0.001
    client.per_server_cpu(r)
    client.report(r, client.Workload(clients=1, connects=1, messages=3), 1)
    out = capsys.readouterr().out
    assert "too little work" not in out and "client-bound: " not in out and "client-bound no" in out, out
    step = client.Step(offered_rate=40, scheduled=20, connections=20, messages=20, expected=20, server_cpu_s=0.001,
                       server_cpu_resolution_s=1e-9, errors=0, error_kinds={})  # open loop: no figure per CPU-second
    assert client.scant(step) is None
    client.report(step, client.Workload(rate=40, duration=0.5), 1)
    assert "client-bound" not in capsys.readouterr().out


def test_a_rows_messages_per_server_cpu_second_is_the_median_of_its_runs(client_module):
    """As bench/draw.py's chart label says, for an odd and an even --repeat: not median(messages) / median(CPU)
    (2,000 and 1,667 here), which is no run's figure."""
    client = client_module
    for pairs, median in (([(1000, 1.0), (2000, 1.0), (3000, 3.0)], 1000), ([(1000, 1.0), (4000, 2.0)], 1500)):
        runs = [client.Run(messages=m, server_cpu_s=cpu, server_cpu_resolution_s=1e-9, client_cpu_s=0.5)
                for m, cpu in pairs]
        for r in runs:
            client.per_server_cpu(r)
        row = client.summarize("echo_x.py", runs, None, {})
        assert row.msgs_per_server_cpu_s == median and row.client_bound is False, row
        assert row.msgs_per_server_cpu_spread == (2000 - 1000) / 2 / median


def test_a_long_run_waits_for_its_workers_within_what_poll_takes(client_module):
    """A worker's bound grows with the messages asked of it, every wait at its own bound; past what a
    poll() takes (2**31 ms), --connects 10 --messages 50000 was a traceback (OverflowError)."""
    w = client_module.Workload(clients=1, connects=10, messages=50000)
    assert client_module.finish_bound(w) <= 2**31 / 1000
    assert client_module.finish_bound(client_module.Workload()) > 5 * 53 * 10  # a small run: every wait at its bound


@pytest.mark.slow
def test_held_connections_are_paced(counting_server):
    """--hold (and the held presets) start at most HELD_PACE connects a second: made 400 here."""
    server = counting_server(backlog=1024)
    figures, _ = client_json("--port", str(server.port), "--clients", "200", "--connects", "1", "--messages", "1",
                             "--hold", "--procs", "2", prelude="import client; client.HELD_PACE = 400")
    assert figures["errors"] == 0 and figures["messages"] == 200 and figures["syn_retries"] == 0
    # 200 connects at 400 a second: half a second, give or take a millisecond's catch-up.
    assert 0.45 <= figures["connect_phase_s"] < 3, figures["connect_phase_s"]


@pytest.mark.slow
def test_seconds_times_each_connection_instead_of_counting_messages(echo_server):
    started = time.monotonic()
    figures, _ = client_json("--port", str(echo_server()), "--clients", "4", "--connects", "1", "--seconds", "0.5",
                             "--procs", "2")
    assert figures["errors"] == 0 and figures["connections"] == 4 and figures["messages"] > 40
    assert figures["messages"] == figures["expected"]
    assert 0.5 <= figures["echo_s"] < 5  # each connection's exchanges, from its first to its close
    assert time.monotonic() - started < 30


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="each worker's CPU is read from /proc")
def test_all_measures_each_workers_cpu_in_the_measured_runs_alone():
    """Each worker's CPU, read from /proc before and after each measured run: the warm-up (here as
    much work as the measured run) is left out, so the workers' CPU fits within the server's CPU
    in that run, and SO_REUSEPORT's hash gives neither of 2 workers much more than half of 100
    connections, each a message that costs --work."""
    row = client_json("--all", "--servers", "reuseport", "--server-args", "--workers 2", "--clients", "100",
                      "--connects", "1", "--messages", "1", "--work", "1000000", "--repeat", "1",
                      timeout=TIMEOUT * 12)[0]["tables"][0]["rows"][0]
    assert row["server"] == "echo_reuseport.py --workers 2" and not row["failed"]
    workers, server = row["worker_cpu_s"], row["server_cpu_s"]
    assert len(workers) == 2 and row["even_share"] == 0.5, row
    assert server >= 0.2, "--work too small to measure here: {} s".format(server)
    assert server / 2 <= sum(workers) <= server + 0.05, (workers, server)  # with the warm-up: about 2 x server
    assert 0.5 <= row["busiest_cpu_share"] <= 0.75, workers


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux: the whole of 127/8 is the loopback")
def test_connections_to_the_loopback_take_their_source_addresses_in_turn(counting_server):
    """One source address runs short of local ports past about 14,000 new connections a second
    (SOURCES in client.py): against 127.x each connection takes the next of 16 source addresses."""
    server = counting_server(backlog=128)
    assert client_json("--port", str(server.port), "--clients", "8", "--connects", "4", "--messages", "1",
                       "--procs", "1")[0]["errors"] == 0
    assert server.peers == {"127.0.0.%d" % n for n in range(1, 17)}



def test_a_million_clients_are_asked_for_and_take_enough_source_addresses(client_module):
    """--clients goes up to a million (one more is refused: test_bad_arguments_are_one_clear_line); their
    connections take source addresses in 127.0.0.0/8, at most about 10,000 from each (past ~14,000 held from one
    address, each connect() scans the ports), and fewer clients keep the 16 of before."""
    import ipaddress
    assert client_module.parse_args(["--clients", "1000000"]).clients == 1000000
    addresses = client_module.source_addresses(1000000)
    assert len(set(addresses)) == len(addresses) and 1000000 / len(addresses) <= 15000
    assert all(ipaddress.ip_address(a) in ipaddress.ip_network("127.0.0.0/8") for a in addresses)
    assert client_module.source_addresses(50) == ["127.0.0.%d" % n for n in range(1, 17)]
    assert client_module.source_addresses(100000) == client_module.source_addresses(50)


# ---- TLS (--tls): hermetic, the test certificate alone is trusted (tests/tls/README)

TLS = ["--tls", "--cafile", str(CERT)]


@pytest.mark.windows
@pytest.mark.slow
@pytest.mark.parametrize("script", ["echo_selectors_tls.py", "echo_asyncio_streams.py", "echo_asyncio_protocol.py",
                                    "echo_asyncio_buffered.py"])
def test_tls_in_closed_and_open_loop_reports_the_handshakes(script, start_server):
    """Against every TLS server (the asyncio ones given the certificate; echo_selectors_tls.py has it always)."""
    certificate = [] if script == "echo_selectors_tls.py" else ["--cert", str(CERT), "--key", str(KEY)]
    port = str(start_server(script, "-q", *certificate).port)
    figures, _ = client_json("--port", port, *TLS, *WORKLOAD)
    assert figures["errors"] == 0 and figures["messages"] == 3 * 2 * 7 and figures["connections"] == 6
    assert figures["handshakes"] == 6 and figures["handshakes_resumed"] == 0, "a full handshake each by default"
    assert figures["handshakes_per_s"] > 0 and figures["tls_version"].startswith("TLSv1.")
    assert 0 < figures["handshake_p50_ms"] <= figures["handshake_p99_ms"] <= figures["handshake_max_ms"]
    figures, _ = client_json("--port", port, *TLS, "--rate", "100", "--duration", "0.5", "--messages", "3")
    assert figures["errors"] == 0 and figures["connections"] == figures["handshakes"] == 50
    assert figures["messages"] == 150 and 0 < figures["handshake_p50_ms"] <= figures["handshake_p99_ms"]
    # The name checked is --host's: the certificate names localhost too.
    text = client("--host", "localhost", "--port", port, *TLS, "--clients", "2", "--connects", "2").stdout
    assert "errors     0" in text and "handshakes 50" not in text and "handshakes 4 " in text, text
    assert "each a full handshake" in text and "handshake  p50" in text


@pytest.mark.slow
def test_tls_resume_resumes_the_first_session(start_server):
    port = str(start_server("echo_selectors_tls.py", "-q").port)
    figures, _ = client_json("--port", port, *TLS, "--tls-resume", "--clients", "1", "--connects", "4", "--procs",
                             "1", "--messages", "2")
    assert figures["errors"] == 0 and figures["handshakes"] == 4 and figures["handshakes_resumed"] == 3


@pytest.mark.slow
def test_tls_that_cannot_be_verified_is_one_line(start_server, tmp_path, monkeypatch):
    """Without --cafile the system's store is used: made empty here (SSL_CERT_FILE, SSL_CERT_DIR), so
    the test trusts nothing of the machine's, and the self-signed server cannot be verified."""
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "none.pem"))
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))
    port = str(start_server("echo_selectors_tls.py", "-q").port)
    for args in (["--tls"], ["--tls", "--rate", "10", "--duration", "0.5"]):
        result = client("--port", port, *args)
        assert result.returncode != 0 and result.stdout == "", result
        assert result.stderr.count("\n") == 1 and "cannot verify" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_a_plain_run_against_a_tls_server_says_so_in_one_line(start_server):
    """Naming --tls, in closed and open loop, text and JSON (it was a table of resets); a plain server that echoes
    nothing (it never accepts) is not taken for one."""
    port = str(start_server("echo_selectors_tls.py", "-q").port)
    for args in ([], ["--json"], ["--rate", "10", "--duration", "0.5"]):
        result = client("--port", port, *WORKLOAD, *args)
        assert (result.returncode, result.stdout) == (1, ""), result
        assert result.stderr == "client.py: error: 127.0.0.1:{} speaks TLS, and this run did not: add --tls (and " \
                                "--cafile FILE where the system's store does not hold its CA)\n".format(port)
    with socket.create_server(("127.0.0.1", 0)) as silent:
        result = client("--port", str(silent.getsockname()[1]), *WORKLOAD, "--timeout", "0.5")
    assert result.returncode == 1 and "by kind 6 timeout" in result.stdout and result.stderr == "", result


@pytest.mark.slow
@pytest.mark.parametrize("fault, kind", [("corrupt", "mismatch"), ("drop", "timeout"), ("extra", "extra bytes"),
                                         ("close", "closed early"), ("trailing", "extra bytes")])
def test_every_fault_over_tls_is_counted_and_fails_the_run(echo_server, fault, kind):
    result = client("--port", str(echo_server(fault, tls=True)), *TLS, *WORKLOAD, "--timeout", "1", "--json")
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    figures = json.loads(result.stdout)
    assert figures["errors"] > 0 and figures["error_kinds"].get(kind), figures["error_kinds"]
    assert figures["messages"] < 3 * 2 * 7 or fault == "trailing"


@pytest.mark.slow
def test_plain_run_has_no_tls_figures(echo_server):
    figures, _ = client_json("--port", str(echo_server()), *WORKLOAD)
    assert figures["errors"] == 0 and not any("handshake" in key for key in figures)
    assert "handshake" not in client("--port", str(echo_server()), *WORKLOAD).stdout


def test_client_md_explains_every_figure_the_records_declare(client_module):
    manual = (ROOT / "CLIENT.md").read_text()
    for record in (client_module.Run, client_module.Step):
        missing = [name for name, _ in client_module.figures_of(record) if "`{}`".format(name) not in manual]
        assert not missing, "CLIENT.md does not explain {}".format(missing)


def test_help_is_grouped_with_examples_and_no_empty_defaults():
    text = client("--help", timeout=TIMEOUT).stdout
    for group in ("what to measure:", "load shape: closed loop", "load shape: open loop", "output:", "advanced:",
                  "examples:"):
        assert group in text, group
    assert "(default: None)" not in text and "28,000" not in text and "14,000" in text
    assert "python3 client.py --all --scenario pingpong-sweep" in text


@pytest.mark.skipif(len(getattr(os, "sched_getaffinity", lambda pid: ())(0)) < 2, reason="pins to one of two CPUs")
def test_procs_defaults_to_the_cpus_it_may_run_on():
    """Pinned (taskset, a container's cpuset), one worker process per CPU it may use, not per CPU of the machine."""
    pinned = subprocess.run([*PYTHON, str(ROOT / "client.py"), "--help"], capture_output=True, text=True,
                            timeout=TIMEOUT, preexec_fn=pin([min(os.sched_getaffinity(0))]))
    assert "one per CPU it may run on, 1)" in " ".join(pinned.stdout.split()), pinned.stdout + pinned.stderr
    whole = client("--help", timeout=TIMEOUT).stdout
    assert "one per CPU it may run on, {})".format(len(os.sched_getaffinity(0))) in " ".join(whole.split())


# ---- --all: ranked by messages per server CPU-second, for a terminal of 100 columns

def all_table(client_module, rows, scenario="article-100"):
    w = client_module.Workload(clients=100, connects=5, messages=50)
    return {"scenario": scenario, "workload": w, "server_work": 0, "rows": client_module.rank(rows)}


def test_all_ranks_by_messages_per_server_cpu_second_and_says_so(client_module):
    """The order follows the CPU figure, not msgs/s (which moves with the client and the machine), and
    the table's title says so; where a server's CPU was not measured, msgs/s ranks, and the title says that."""
    run = client_module.Run
    rows = [run(server="echo_fast.py", msgs_per_s=90000.0, msgs_per_server_cpu_s=50000.0, server_cpu_s=0.5),
            run(server="echo_cheap.py", msgs_per_s=60000.0, msgs_per_server_cpu_s=120000.0, server_cpu_s=0.2),
            run(server="echo_broken.py", failed="2 reset"),
            run(server="echo_middle.py", msgs_per_s=70000.0, msgs_per_server_cpu_s=80000.0, server_cpu_s=0.3)]
    table = all_table(client_module, rows)
    assert [r.server for r in table["rows"]] == ["echo_cheap.py", "echo_middle.py", "echo_fast.py", "echo_broken.py"]
    heading = draw.table_markdown(table)[0]
    assert "ranked by messages per server CPU-second" in heading, heading
    text = client_module.terminal_text([table])
    assert "ranked by messages per server CPU-second" in " ".join(text.split())
    # A row is its rank, then its server: the header's wrapped lines (the command line, the machine) may begin with a number.
    order = [line.split()[1] for line in text.splitlines()
             if line.split()[:1] in (["1"], ["2"], ["3"]) and line.split()[1].endswith(".py")]
    assert order == ["echo_cheap.py", "echo_middle.py", "echo_fast.py"], text
    unmeasured = [run(server="echo_a.py", msgs_per_s=1.0), run(server="echo_b.py", msgs_per_s=2.0)]
    table = all_table(client_module, unmeasured)
    assert [r.server for r in table["rows"]] == ["echo_b.py", "echo_a.py"]
    assert "ranked by msgs/s" in draw.table_markdown(table)[0]


def test_all_fits_a_terminal_of_100_columns(client_module):
    """Every figure of every row stays in the Markdown (bench/draw.py); the terminal gets lines of 100 columns
    at most, even with long server names, a long failure and a sweep."""
    run = client_module.Run
    rows = [run(server="echo_shared_socket.py --accept exclusive --workers 16 --backlog 4096", msgs_per_s=123456.0,
                msgs_per_server_cpu_s=1234567.0, server_cpu_s=12.34, server_cpu_resolution_s=0.02, p99_ms=1234.0,
                connect_s=0.1, echo_s=0.2, total_s=0.3, client_cpu_s=1.0, connect_p99_ms=1.0, syn_retries=0,
                max_open=100, client_bound=True, worker_cpu_s=[0.5, 0.4], busiest_cpu_share=0.55, even_share=0.5),
            run(server="echo_selectors_tls.py (TLS)", msgs_per_s=1.0, msgs_per_server_cpu_s=2.0, server_cpu_s=1.0,
                server_cpu_resolution_s=1e-9, p99_ms=1.0),
            run(server="echo_simple.py", failed="12 of 25,000 messages echoed; 24,988 no echo within 10 s; the "
                "pattern's limit: it serves one client at a time " * 2)]
    sweep = dict(client_module.no_sweep("echo_asyncio_buffered.py --uvloop"), scenario="pingpong-sweep",
                 rates=[1000, 2000], workload=client_module.Workload(rate=1000, duration=1.0, messages=1))
    text = client_module.terminal_text([all_table(client_module, rows)], [sweep],
                                       {"echo_epoll.py": "echo_epoll.py needs epoll, which this system lacks " * 3})
    assert max(len(line) for line in text.splitlines()) <= 100, text
    assert "echo_simple.py failed" in text and "pingpong-sweep" in text and "echo_epoll.py" in text
    markdown = "\n".join(draw.table_markdown(all_table(client_module, rows)))
    assert max(len(line) for line in markdown.splitlines()) > 100  # the full table is the Markdown's


def test_a_single_sweep_says_why_it_stopped_in_a_terminals_width(client_module):
    """A single server's sweep (--rate A:B:STEP without --json): a line per step, then why it stopped early, the
    client's limit or the server's, and the local ports the client ran out of; 100 columns at most."""
    c = client_module
    steps = [c.Step(offered_rate=rate, achieved_rate=rate, reply_rate=rate / 2, p99_ms=250.0, errors=0,
                    client_ports_exhausted=1200) for rate in (1000, 2000)]
    sweep = dict(c.no_sweep("127.0.0.1:7777"), steps=steps, stopped_early=True, scenario="127.0.0.1:7777",
                 rates=[1000, 2000, 3000], workload=c.Workload(duration=1.0))
    for limited, why in ((False, "Stopped after 2,000/s: two steps in a row were past the limit."),
                         (True, "Stopped after 2,000/s: the client could not keep its schedule two steps in a row, so "
                                "higher rates were not offered; the server's knee may lie higher.")):
        text = c.terminal_text([], [dict(sweep, client_limited=limited)], steps=True)
        assert max(len(line) for line in text.splitlines()) <= 100, text
        said = " ".join(text.split())
        assert why in said and "out of local ports (EADDRNOTAVAIL) 2,400 times" in said, text
        assert "1,000 1,000 500 250 0" in said and "2,000 2,000 1,000 250 0" in said and "none" in said, text
    assert "offered/s" not in c.terminal_text([], [sweep])  # --all's sweeps: their knees; the steps are --json's
    failed = " ".join(c.terminal_text([], [dict(sweep, failed="cannot connect: refused")], steps=True).split())
    assert "Failed: cannot connect: refused." in failed, failed


def test_all_without_a_scenario_runs_the_readme_charts_and_says_so(client_module):
    """--all alone runs article-100, the scenario of the README's chart (results.svg); a load shape given
    (even the default's own numbers) runs as "custom"."""
    readme = (ROOT / "README.md").read_text()
    assert "results.svg" in readme and client_module.DEFAULT_SCENARIO == "article-100"
    assert "[results.svg](results.svg) draws article-100's" in (ROOT / "RESULTS.md").read_text()
    names = [name for name, _, _ in client_module.scenarios_from(client_module.parse_args(["--all"]))]
    assert names == ["article-100"]
    for shape in (["--clients", "50"], ["--messages", "3"], ["--hold", "--connects", "1"]):
        names = [name for name, _, _ in client_module.scenarios_from(client_module.parse_args(["--all", *shape]))]
        assert names == ["custom"], shape
    assert "article-100" in (ROOT / "CLIENT.md").read_text().split("## Every server: --all", 1)[1][:1500]


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/net/tcp says the port listens")
def test_the_server_sees_the_runs_connections_and_no_probe(counting_server):
    """Against a server on this machine, /proc says the port listens: client.py connects to nothing first, so
    "Try it" logs exactly its connections. Where /proc cannot say (faked here), one probe connection comes
    first, closed at once: what CLIENT.md's "The probe" and README's "Try it" tell the reader."""
    server = counting_server(backlog=128)
    shape = ["--port", str(server.port), "--clients", "2", "--connects", "3", "--messages", "1", "--procs", "1"]
    assert client_json(*shape)[0]["connections"] == 6
    assert wait_until(lambda: server.accepted == 6) and server.accepted == 6
    client_json(*shape, prelude="import client\nclient.listening_sockets = lambda port: None")
    assert wait_until(lambda: server.accepted == 6 + 7) and server.accepted == 13
    assert "#the-probe" in (ROOT / "README.md").read_text() and "## The probe" in (ROOT / "CLIENT.md").read_text()


def test_help_fits_a_screen():
    """At most 60 lines at 80 columns, its groups and examples kept: the long explanations are CLIENT.md's."""
    result = subprocess.run([sys.executable, str(ROOT / "client.py"), "--help"], capture_output=True, text=True,
                            timeout=TIMEOUT, env=dict(os.environ, COLUMNS="80"))
    assert result.returncode == 0 and len(result.stdout.splitlines()) <= 60, result.stdout
    assert "CLIENT.md" in result.stdout


# ---- a stop signal to client.py alone (kill PID; Ctrl-C reaches its whole group)

def stopped(signum, args, under_way):
    """client.py args, in a session of its own; once under_way(pid) says it runs, signum to its pid alone.
    (seconds from the signal to its exit, its CompletedProcess, whether its group was empty once it had exited);
    whatever is left of its group is killed."""
    proc = subprocess.Popen([*PYTHON, str(ROOT / "client.py"), *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env=dict(os.environ, ECHO_TESTS_RUN=RUN))
    try:
        assert wait_until(lambda: under_way(proc.pid), timeout=TIMEOUT * 3), "client.py never got under way"
        signalled = time.monotonic()
        os.kill(proc.pid, signum)
        out, err = proc.communicate(timeout=TIMEOUT)
        took = time.monotonic() - signalled
        return took, subprocess.CompletedProcess(proc.args, proc.returncode, out, err), group_gone(proc.pid, 0.5)
    finally:
        kill_group(proc.pid)
        proc.communicate()


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="its processes are read from /proc")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_to_the_client_ends_its_run_within_a_second(counting_server, signum):
    """Its worker processes stop with it: none left running, none orphaned (its process group is empty)."""
    server = counting_server(backlog=128)
    took, result, emptied = stopped(signum, ["--port", str(server.port), "--clients", "4", "--connects", "1",
                                             "--seconds", "60", "--procs", "2"],
                                    lambda pid: server.accepted >= 4 and len(children_of(pid)) == 2)
    assert result.returncode == 128 + signum, result
    assert "interrupted" in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert took < 1.5, took
    assert emptied, "its worker processes outlived it"


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="its processes are read from /proc")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_to_the_client_ends_all_and_stops_its_servers(signum):
    """--all: the servers it started are stopped too (and its workers)."""
    before = echo_processes()
    took, result, emptied = stopped(signum, ["--all", "--servers", "select,epoll", "--clients", "4", "--connects",
                                             "1", "--seconds", "20", "--repeat", "1", "--procs", "2"],
                                    lambda pid: len(children_of(pid)) == 4)  # its two servers, two workers
    assert result.returncode == 128 + signum, result
    assert "interrupted" in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert took < 1.5, took
    assert emptied, "its worker processes outlived it"
    assert not echo_processes() - before, "a server it started outlived it"


def test_a_stop_signal_while_a_server_starts_ends_the_run_once_it_can_be_stopped(client_module, monkeypatch, tmp_path):
    """The signal comes inside Popen (after the fork, before the server is kept in `started`): it is only noted, so
    the server is kept whole, and the wait for its port line ends the run; main()'s stop_servers() stops it."""
    client, popen, started = client_module, subprocess.Popen, []

    def signalled_inside(*args, **kwargs):
        proc = popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True,
                     stdout=subprocess.PIPE)
        started.append(proc)
        client.noted(signal.SIGTERM, None)  # what the handler does when the signal comes now
        return proc

    monkeypatch.setattr(client.subprocess, "Popen", signalled_inside)
    monkeypatch.setattr(client.RunningServer, "started", [])
    monkeypatch.setattr(client, "STOPS", [])
    try:
        with pytest.raises(KeyboardInterrupt) as stopped:
            client.RunningServer(tmp_path / "echo_any.py", 0)
        assert stopped.value.args == (signal.SIGTERM,)
        assert [server.proc for server in client.RunningServer.started] == started
        client.stop_servers(client.RunningServer.started, patience=0.5, stops=2)  # as main()'s finally does
        assert [proc.poll() for proc in started] == [-signal.SIGTERM], "the server it kept was not stopped"
    finally:
        for proc in started:
            proc.kill()
            proc.wait(10)
            proc.stdout.close()  # stop() closed it already, unless an assertion came first


def test_every_stop_signal_handler_of_the_client_only_notes():
    """Issue 48: each handler client.py installs for SIGINT or SIGTERM (a function of its own, not SIG_IGN or
    SIG_DFL) has assignments, counts and appends only: no other call, no raise, no default_int_handler."""
    tree = ast.parse((ROOT / "client.py").read_text())
    functions = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    installed = [call.args[1] for call in ast.walk(tree) if isinstance(call, ast.Call)
                 and ast.unparse(call.func) == "signal.signal" and ast.unparse(call.args[0]) in ("signal.SIGINT",
                                                                                                 "signal.SIGTERM")]
    handlers = {ast.unparse(h) for h in installed} - {"signal.SIG_IGN", "signal.SIG_DFL"}
    assert handlers == {"noted"}, handlers
    for statement in functions["noted"].body:
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue  # the docstring
        calls = [ast.unparse(c.func) for c in ast.walk(statement) if isinstance(c, ast.Call)]
        assert isinstance(statement, (ast.Assign, ast.AugAssign, ast.Expr)), ast.unparse(statement)
        assert all(call.endswith(".append") for call in calls), ast.unparse(statement)


# The signal comes inside Process.start(), after the fork and before multiprocessing keeps the child: noted, the
# worker kept, and measure()'s first wait ends the run and kills it. Run in a process of its own, single-threaded
# as client.py is when it forks, with main()'s handler.
WORKER_STARTS = """import multiprocessing, multiprocessing.context, os, signal, socket
forked, original = [], multiprocessing.context.ForkProcess._Popen

def signalled_inside(process):
    forked.append(original(process))
    os.kill(os.getpid(), signal.SIGTERM)
    return forked[-1]

multiprocessing.context.ForkProcess._Popen = staticmethod(signalled_inside)
signal.signal(signal.SIGTERM, client.noted)
try:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        try:
            client.measure("127.0.0.1", listening.getsockname()[1], client.Workload(clients=1, connects=1), 1)
        except KeyboardInterrupt as e:
            print("interrupted", e.args[0] == signal.SIGTERM)
    print("killed", len(forked) == 1 and forked[0].returncode == -signal.SIGKILL)
finally:
    for popen in forked:
        popen.kill()
        popen.wait(10)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the workers are forked here")
def test_a_stop_signal_while_a_worker_starts_ends_the_run_once_it_can_be_stopped():
    """The worker is killed, not left (it lived on, holding client.py's stdout and stderr, and a caller that read
    them to the end hung)."""
    result = python_with_client(WORKER_STARTS, timeout=TIMEOUT * 3)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["interrupted True", "killed True"], result.stdout


# A stop signal that comes as main()'s clean-up begins (here after a run refused with one line): it is noted, and
# neither raised nor left to cut the clean-up short. It comes inside the clean-up's first call.
SIGNAL_AS_THE_CLEAN_UP_BEGINS = """import multiprocessing, os, signal, socket
unpatched = multiprocessing.active_children
def patched():
    os.kill(os.getpid(), signal.SIGTERM)
    return unpatched()
multiprocessing.active_children = patched
with socket.socket() as unused:
    unused.bind(("127.0.0.1", 0))
    port = unused.getsockname()[1]  # closed: nothing listens there
client.main(["--port", str(port), "--clients", "1", "--messages", "1"])
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="a signal sent to itself (Unix)")
def test_a_stop_signal_as_the_client_cleans_up_is_not_raised_there():
    result = python_with_client(SIGNAL_AS_THE_CLEAN_UP_BEGINS)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 1 and result.stderr.startswith("client.py: error: cannot connect"), result.stderr


# A server that will not stop on SIGTERM: main()'s clean-up SIGKILLs its group once its patience is over.
STUBBORN = """import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("Server Run Port:1", flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="a server's group is SIGKILLed (Unix)")
def test_a_second_stop_signal_cuts_the_clean_up_short_and_still_stops_the_servers(client_module, monkeypatch,
                                                                                   tmp_path):
    """After one stop signal, a server that ignores SIGTERM is given the clean-up's patience; after a second, none:
    it is SIGKILLed at once."""
    client = client_module
    (tmp_path / "echo_stubborn.py").write_text(STUBBORN)
    monkeypatch.setattr(client.RunningServer, "started", [])
    for signals, patience in ((1, 0.5), (2, 60)):
        monkeypatch.setattr(client, "STOPS", [])
        server = client.RunningServer(tmp_path / "echo_stubborn.py", 0)
        assert server.port == 1, server.failed
        client.STOPS.extend([signal.SIGINT] * signals)
        began = time.monotonic()
        client.stop_servers([server], patience=patience, stops=2)  # as main()'s finally does
        took = time.monotonic() - began
        assert server.proc.returncode == -signal.SIGKILL
        assert took >= patience if signals == 1 else took < patience / 2, (signals, took)


def caught(pid, signum):
    """Whether process pid has a handler of its own for signum (/proc's SigCgt): client.py's once main() began."""
    try:
        with open("/proc/{}/status".format(pid)) as f:
            mask = next(line for line in f if line.startswith("SigCgt:")).split()[1]
        return bool(int(mask, 16) >> (signum - 1) & 1)
    except (OSError, StopIteration):
        return False


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="its processes are read from /proc")
def test_stop_signals_at_random_instants_of_a_small_all_leave_nothing_running():
    """20 stop signals, each at a random instant of a small --all from the moment its handler is in place: as it
    starts servers, starts workers, measures and cleans up; one in five is followed by a second. Each ends it
    within about a second, in one line (or it had ended already), and leaves no server, worker or orphan."""
    rng, before, span, interrupted = random.Random(), echo_processes(), None, 0
    args = [*PYTHON, str(ROOT / "client.py"), "--all", "--servers", "select,epoll", "--clients", "4", "--connects",
            "1", "--messages", "20", "--repeat", "1", "--procs", "2"]
    for n in range(21):
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True, env=dict(os.environ, ECHO_TESTS_RUN=RUN))
        try:
            assert wait_until(lambda: caught(proc.pid, signal.SIGTERM), timeout=TIMEOUT * 3), "no handler came"
            began = time.monotonic()
            if span is None:  # the first run is whole: how long one takes here, from its handler on
                out, err = proc.communicate(timeout=TIMEOUT * 6)
                assert proc.returncode == 0, err
                span = time.monotonic() - began
                continue
            time.sleep(rng.uniform(0, span))
            signum, signalled = rng.choice([signal.SIGINT, signal.SIGTERM]), time.monotonic()
            proc.send_signal(signum)
            if n % 5 == 0:
                time.sleep(rng.uniform(0, 0.2))
                proc.send_signal(rng.choice([signal.SIGINT, signal.SIGTERM]))
            out, err = proc.communicate(timeout=TIMEOUT)
            took, what = time.monotonic() - signalled, (n, signum, err)
            assert "Traceback" not in err, what
            if proc.returncode != 0:
                interrupted += 1
                assert proc.returncode == 128 + signum and err.endswith("client.py: interrupted\n"), what
                assert took < 1.5, (took, what)
            assert group_gone(proc.pid, 0.5), ("a worker outlived it", what)
            assert not echo_processes() - before, ("a server outlived it", what)
        finally:
            kill_group(proc.pid)
            proc.communicate()
    assert interrupted >= 10, interrupted  # most signals came before the run's end
@pytest.mark.windows
@pytest.mark.slow
def test_output_whose_reader_went_away_ends_quietly(echo_server):
    """Its reader gone (| head): not a word, exit 1, neither a traceback nor the exit's "Exception ignored"; on
    Windows too, where a write to a closed pipe fails with EINVAL, not EPIPE."""
    command = [*PYTHON, str(ROOT / "client.py"), "--port", str(echo_server()), *WORKLOAD]
    read, write = os.pipe()
    os.close(read)  # the reader went away before the first line was written
    try:
        for args in ([], ["--json"]):
            result = subprocess.run(command + args, stdin=subprocess.DEVNULL, stdout=write, stderr=subprocess.PIPE,
                                    text=True, timeout=TIMEOUT * 6)
            assert (result.returncode, result.stderr) == (1, ""), args
    finally:
        os.close(write)


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="a full disk is Linux's /dev/full")
def test_output_that_cannot_be_written_ends_in_one_line(echo_server):
    """A full disk (> /dev/full): one line, exit 1; no traceback, nor the exit's "Exception ignored"."""
    command = [*PYTHON, str(ROOT / "client.py"), "--port", str(echo_server()), *WORKLOAD]
    with open("/dev/full", "w") as full:
        for args in ([], ["--json"]):
            result = subprocess.run(command + args, stdin=subprocess.DEVNULL, stdout=full, stderr=subprocess.PIPE,
                                    text=True, timeout=TIMEOUT * 6)
            assert (result.returncode, result.stderr) == (1, "client.py: error: cannot write: No space left on "
                                                             "device\n"), args


# A server that reads a connection's first message and closes it without an echo: --all's warm-up fails it. It
# answers --help, as --all asks.
CLOSING = """import argparse, socket
parser = argparse.ArgumentParser()
for flag in ("--port", "--work"):
    parser.add_argument(flag)
parser.add_argument("-q", action="store_true")
parser.parse_args()
listener = socket.create_server(("127.0.0.1", 0))
print("Server Run Port:{}".format(listener.getsockname()[1]), flush=True)
while True:
    with listener.accept()[0] as conn:
        conn.recv(65536)
"""


@pytest.mark.slow
def test_all_says_which_runs_of_a_failed_server_it_skips_and_why(tmp_path):
    """Its progress counts every step: the steps of a server that failed are said to be skipped, with the reason."""
    (tmp_path / "echo_closing.py").write_text(CLOSING)
    (tmp_path / "echo_simple.py").write_text((ROOT / "echo_simple.py").read_text())
    code = ("client.HERE = client.Path({!r})\n"
            "client.main(['--all', '--clients', '2', '--connects', '1', '--messages', '2', '--repeat', '2', "
            "'--procs', '1', '--json'])").format(str(tmp_path))
    result = python_with_client(code, timeout=TIMEOUT * 6)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    rows = {row["server"]: row for row in json.loads(result.stdout)["tables"][0]["rows"]}
    failed = rows["echo_closing.py"]["failed"]
    assert failed.startswith("0 of 2 messages echoed") and not rows["echo_simple.py"]["failed"], rows
    progress = [line for line in result.stderr.splitlines() if line.startswith("client.py: [")]
    assert [line.split("]")[0] for line in progress] == ["client.py: [1/6", "client.py: [2/6", "client.py: [4/6",
                                                          "client.py: [6/6"], progress
    said = [line for line in result.stderr.splitlines() if "skipped" in line]
    assert said == ["client.py: custom echo_closing.py: steps 3, 5 skipped, as it failed: " + failed], said


def test_the_terminal_tables_plus_minus_is_the_spread_of_the_measured_runs(client_module):
    """+- beside messages per server CPU-second is half the measured runs' range of it, in % of the row's figure
    (not the CPU's resolution); with one run there is no spread to show."""
    c = client_module
    runs = [c.Run(messages=1000, server_cpu_s=cpu, client_cpu_s=0.1, msgs_per_s=5000.0) for cpu in (0.01, 0.0125,
                                                                                                     0.008)]
    for run in runs:
        c.per_server_cpu(run)
    row = c.summarize("echo_x.py", runs, None, {})
    assert row.msgs_per_server_cpu_s == pytest.approx(100000) and row.server_cpu_s == 0.01
    assert row.msgs_per_server_cpu_spread == pytest.approx((125000 - 80000) / 2 / 100000)
    assert c.summarize("echo_x.py", runs[:1], None, {}).msgs_per_server_cpu_spread is None
    text = c.terminal_text([all_table(c, [row])])
    head = next(line for line in text.splitlines() if line.startswith("rank"))
    assert head.split()[2:4] == ["msgs/CPU-s", "+-"] and "1 ns" not in text, text
    assert "22%" in next(line for line in text.splitlines() if "echo_x.py" in line), text
    assert "half the measured runs' range" in " ".join(text.split())


def test_the_uvloop_rows_are_an_option_said_at_the_end(client_module):
    """Without uvloop, --all says nothing of it at the start; its table ends with the rows uvloop would add."""
    result = python_with_client("import importlib.util, json\n"
                                "importlib.util.find_spec = lambda name, *rest: None\n"
                                "print(json.dumps(client.server_entries(client.parse_args(['--all']))[1]))")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    offered = sorted(name + " --uvloop" for name in SERVERS if offers_uvloop(ROOT / name))
    assert sorted(json.loads(result.stdout)) == offered
    text = client_module.terminal_text([all_table(client_module, [])], without=offered)
    assert " ".join(text.split()).endswith("With uvloop installed (pip install uvloop), {} more: {}.".format(
        len(offered), ", ".join(offered)))


def test_the_machine_is_named_without_wmi_where_there_is_no_uname(client_module):
    """Windows' platform.system() asks WMI, which Wine lacks: Wine ends the process there (issue 42 saw exit status
    0), and --all's table was never printed. Where there is no os.uname, client.py does not ask (faked here)."""
    result = python_with_client("import os, platform\ndel os.uname\n"
                                "platform.system = platform.uname = lambda *args: os._exit(0)\n"
                                "print(client.machine())")
    assert result.returncode == 0 and result.stdout.endswith(", Windows\n"), result


@pytest.mark.windows
@pytest.mark.slow
@pytest.mark.skipif(not WINE, reason="under Wine: its wineserver holds the sockets of the Windows programs it runs")
def test_a_linux_client_against_a_server_under_wine_never_reports_wineservers_cpu(start_server):
    """The process that holds the socket a Windows server listens on is wineserver64, not the server: client.py on
    Linux's Python says in the server line that it cannot tell the server's CPU (it reported wineserver64's)."""
    port = start_server("echo_selectors.py", "-q").port
    result = subprocess.run([sys.executable, str(ROOT / "client.py"), "--port", str(port), "--clients", "2",
                             "--connects", "1", "--messages", "5"], capture_output=True, text=True, timeout=TIMEOUT * 6)
    assert result.returncode == 0, result
    server = [line for line in result.stdout.splitlines() if line.startswith("server ")]
    assert len(server) == 1 and server[0].startswith("server     CPU not measured: the socket is Wine's wineserver's"), \
        result.stdout


@pytest.mark.slow
def test_a_worker_that_could_not_be_started_is_started_again(echo_server):
    """Wine once failed to spawn a worker (WinError 1359, from multiprocessing's popen_spawn_win32): client.py
    tries again, in a line on stderr, and the run goes on (the first start made to fail here)."""
    fail_once = ("import multiprocessing.process\nstart = multiprocessing.process.BaseProcess.start\nfailed = []\n"
                 "def fail_once(self):\n    if not failed:\n        failed.append(self)\n"
                 "        raise OSError(22, 'An internal error occurred')\n    return start(self)\n"
                 "multiprocessing.process.BaseProcess.start = fail_once")
    figures, err = client_json("--port", str(echo_server()), *WORKLOAD, prelude=fail_once)
    assert figures["messages"] == 3 * 2 * 7 and figures["errors"] == 0
    assert err.count("a worker process did not start ([Errno 22] An internal error occurred): trying again") == 1, err


# ---- held connections: what each costs the server (client.py's memory figures)

KEEPS = '''"""Keeps KEEP KiB a connection (written, so every page is touched) until its peer closes; echoes meanwhile."""
import selectors, socket, sys
KEEP = int(sys.argv[sys.argv.index("--keep") + 1]) * 1024
listener = socket.create_server(("127.0.0.1", int(sys.argv[sys.argv.index("--port") + 1])), backlog=1024)
print("Server Run Port:%d" % listener.getsockname()[1], flush=True)
chosen, kept = selectors.DefaultSelector(), {}
chosen.register(listener, selectors.EVENT_READ)
while True:
    for key, _ in chosen.select():
        if key.fileobj is listener:
            conn = listener.accept()[0]
            kept[conn] = b"k" * KEEP
            chosen.register(conn, selectors.EVENT_READ)
            continue
        data = key.fileobj.recv(65536)
        if data:
            key.fileobj.sendall(data)
        else:
            chosen.unregister(key.fileobj)
            del kept[key.fileobj]
            key.fileobj.close()
'''


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps_rollup"), reason="the server's PSS from /proc (Linux)")
@pytest.mark.parametrize("script, keep", [("echo_epoll.py", 0), ("echo_keeps.py", 100)])
def test_held_connections_cost_what_the_server_keeps_for_each(start_server, tmp_path, script, keep):
    """300 held, each echoed once (--idle): echo_epoll.py keeps next to nothing for one, a server that keeps 100 KiB
    for each about 100 KiB, within a page (4 KiB); the kernel's share and the client's own are there beside it."""
    source = tmp_path / "echo_keeps.py"
    source.write_text(KEEPS)
    server = start_server(script, *(["--keep", str(keep)] if keep else ["-q"]), source=source if keep else None)
    figures, _ = client_json("--port", str(server.port), "--clients", "300", "--connects", "1", "--messages", "2",
                             "--hold", "--idle", "0", "--procs", "1")
    assert figures["errors"] == 0 and figures["messages"] == 600 and figures["held_connections"] == 300 and "memory_unread" not in figures
    assert figures["server_memory_kind"] == "PSS"
    assert figures["server_memory_held_kib"] - figures["server_memory_before_kib"] == pytest.approx(
        300 * figures["server_kib_per_held"])
    assert keep - 0.5 <= figures["server_kib_per_held"] <= keep + 4, figures
    assert figures["kernel_kib_per_held"] > 0 and figures["client_memory_kib"] > 1000


def test_c100k_runs_after_held_10k_with_workers_and_procs_that_fit(client_module):
    """--scenario c100k runs held-10k first (c100k goes only to the servers that held it); a pool of worker processes
    gets enough --workers, and the client enough processes, for each share to fit under the descriptor limit."""
    args = client_module.parse_args(["--all", "--scenario", "c100k"])
    assert [(label, w.clients, w.messages, w.idle) for label, w, _ in client_module.scenarios_from(args)] == [
        ("held-10k", 10000, 2, 3.0), ("c100k", 100000, 2, 3.0)]
    import resource
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[1]  # fit_descriptors() raises it to the hard limit
    procs = client_module.fit_descriptors(100000, 2, grow=True)
    assert -(-100000 // procs) + 64 <= soft and procs >= 2
    workers = client_module.workers_for(ROOT / "echo_reuseport.py", (), 100000)
    if 1.25 * 100000 / (soft - 64) > 2:
        assert workers[0] == "--workers" and (int(workers[1]) - 1) * (soft - 64) < 1.25 * 100000 <= int(
            workers[1]) * (soft - 64)
    assert client_module.workers_for(ROOT / "echo_epoll.py", (), 100000) == ()  # one process: no --workers
    assert client_module.workers_for(ROOT / "echo_prethread.py", (), 100000) == ()  # threads share its limit
    assert client_module.workers_for(ROOT / "echo_reuseport.py", ("--workers", "3"), 100000) == ()  # as given


@pytest.mark.skipif(not os.path.exists("/proc/self/limits"), reason="the server's limit is read from /proc (Linux)")
def test_a_server_whose_descriptor_limit_is_too_low_is_refused_in_one_line_before_anything_starts(start_server):
    import resource
    server = start_server("echo_epoll.py", rlimits={resource.RLIMIT_NOFILE: 200})
    result = client("--port", str(server.port), "--clients", "300", "--connects", "1", "--hold")
    assert result.returncode == 1 and result.stdout == "" and result.stderr.count("\n") == 1, result.stderr
    assert "300 connections do not fit in one process: its descriptors are limited to 200 (ulimit -n" in result.stderr
    assert "]Accept:" not in server.stdout(), "nothing was started: not one connection"


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/smaps_rollup"), reason="the servers' PSS from /proc, SO_REUSEPORT "
                    "(Linux)")
def test_held_10k_holds_and_echoes_every_connection_twice_and_says_what_each_costs():
    """held-10k under --all against a single-process loop and a pool of worker processes (its memory summed over
    its tree): 10,000 held, each echoed twice, and the memory read in between."""
    figures, _ = client_json("--all", "--servers", "epoll,reuseport", "--scenario", "held-10k", "--repeat", "1",
                             timeout=300)
    rows = figures["tables"][0]["rows"]
    assert sorted(r["server"] for r in rows) == ["echo_epoll.py", "echo_reuseport.py"]
    for r in rows:
        assert r["failed"] is None and r["messages"] == r["expected"] == 20000 and r["held_connections"] == 10000, r
        assert r["server_memory_kind"] == "PSS" and 0 <= r["server_kib_per_held"] < 2, r
        assert r["server_memory_held_kib"] > r["server_memory_before_kib"] and r["kernel_kib_per_held"] > 0
        assert r["client_memory_kib"] > 0 and r["connect_phase_s"] > 0
