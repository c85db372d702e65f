# SPDX-License-Identifier: 0BSD
"""client.py --rate: open loop, against servers whose capacity and stalls are known.

Each test starts its own server here (one that serves one connection at a time, so
its capacity is set by how long it stays busy per connection), or asks client.py
--all to start real ones, and bounds every wait.
"""
import json
import os
import shlex
import socket
import subprocess
import sys
import threading
import time

import pytest

from helpers import ROOT, RUN, TIMEOUT, client, client_json, echo_processes, started_and_stopped


class OneAtATime:
    """Accepts one connection, echoes until EOF, closes it, then stays busy until
    `busy` seconds after the accept: so it sustains 1/busy connections per second,
    whatever its own overhead (as long as that is under `busy`). Once, `pause_at`
    seconds after its first accept, it stops answering for `pause_for` seconds;
    connections that arrive meanwhile wait in the listen backlog."""

    def __init__(self, busy=0.0, pause_at=None, pause_for=0.0):
        self.busy, self.pause_at, self.pause_for = busy, pause_at, pause_for
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1024)  # a queue, not refusals, while it is busy or paused
        self.listener.settimeout(0.05)  # accept() wakes up to see `stopping`
        self.port = self.listener.getsockname()[1]
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        first = None
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except socket.timeout:
                continue
            accepted = time.monotonic()
            first = first or accepted
            with conn:
                conn.settimeout(2.0)  # a client that went quiet cannot hold the only server thread
                try:
                    while True:
                        data = conn.recv(65536)
                        if not data:
                            break
                        conn.sendall(data)
                except OSError:
                    pass
            self.stopping.wait(max(0.0, accepted + self.busy - time.monotonic()))
            if self.pause_at is not None and time.monotonic() - first >= self.pause_at:
                self.pause_at = None
                self.stopping.wait(self.pause_for)

    def stop(self):
        self.stopping.set()
        self.thread.join(TIMEOUT)
        self.listener.close()


@pytest.fixture
def one_at_a_time():
    """one_at_a_time(busy=..., pause_at=..., pause_for=...) -> a running OneAtATime; all stopped at the end."""
    yield from started_and_stopped(OneAtATime, OneAtATime.stop)


def progress_lines(stderr):
    return [line for line in stderr.splitlines() if line.strip()]


SINGLE_FIELDS = ("offered_rate", "achieved_rate", "behind_ms", "reply_rate", "connections", "messages", "errors",
                 "error_kinds", "p50_ms", "p90_ms", "p99_ms", "max_ms", "connect_p50_ms", "connect_p99_ms",
                 "max_open", "client_cpu_s", "client_ports_exhausted", "responses_100ms_or_more",
                 "responses_1s_or_more")


@pytest.mark.slow
@pytest.mark.parametrize("messages", [None, 3])
def test_one_rate_reports_every_figure(echo_server, messages):
    rate, duration = 50, 2
    extra = ["--messages", str(messages)] if messages else []  # one exchange per connection by default
    started = time.monotonic()
    figures, _ = client_json("--port", str(echo_server()), "--rate", str(rate), "--duration", str(duration), *extra)
    elapsed = time.monotonic() - started
    assert set(SINGLE_FIELDS) <= set(figures), set(SINGLE_FIELDS) - set(figures)
    assert figures["offered_rate"] == rate
    assert abs(figures["connections"] - rate * duration) <= 1, "every scheduled connection completed"
    assert figures["messages"] == figures["connections"] * (messages or 1)
    assert figures["errors"] == 0 and not figures["error_kinds"] and not figures["client_ports_exhausted"]
    # At 50 connections/s the client keeps its schedule and a correct server keeps up.
    assert 0.8 * rate <= figures["achieved_rate"] <= 1.05 * rate
    assert 0 <= figures["behind_ms"] < 1000
    assert 0.9 * rate <= figures["reply_rate"] <= 1.1 * rate
    assert 0 < figures["p50_ms"] <= figures["p90_ms"] <= figures["p99_ms"] <= figures["max_ms"] < 5000
    assert 0 < figures["connect_p50_ms"] <= figures["connect_p99_ms"]
    assert 1 <= figures["max_open"] <= figures["connections"]
    # Some CPU was spent and counted, and no more than its worker processes could spend in the run's time.
    assert 0 < figures["client_cpu_s"] < elapsed * (os.cpu_count() or 1)


@pytest.mark.slow
@pytest.mark.parametrize("fault, kind", [("corrupt", "mismatch"), ("drop", "timeout"), ("extra", "extra bytes"),
                                         ("close", "closed early")])
def test_every_reply_is_verified(echo_server, fault, kind):
    """The test server's fault hits the third message of every connection: each one fails."""
    result = client("--port", str(echo_server(fault)), "--rate", "20", "--duration", "1", "--messages", "3",
                    "--timeout", "1", "--json", timeout=60)
    assert result.returncode == 1, result.stderr
    figures = json.loads(result.stdout)
    assert figures["connections"] == 0 and abs(figures["errors"] - 20) <= 1
    assert set(figures["error_kinds"]) == {kind}


@pytest.mark.slow
def test_sweep_names_a_knee_at_the_servers_capacity(one_at_a_time):
    busy = 0.02  # 50 connections/s
    server = one_at_a_time(busy=busy)
    sweep, stderr = client_json("--port", str(server.port), "--rate", "35:90:5", "--duration", "1")
    steps, knee = sweep["steps"], sweep["knee"]
    offered = [step["offered_rate"] for step in steps]
    assert offered == list(range(35, 95, 5))[:len(steps)], "one step per rate, in order"
    assert offered[-1] < 90, "the sweep stops once it is clearly past the limit"
    assert len(progress_lines(stderr)) >= len(steps), "one progress line per step"
    # The rule the README documents: no error, replies within 5 % of the offered rate, p99 at most 100 ms.
    assert sweep["knee_rule"] == {"max_errors": 0, "min_reply_ratio": 0.95, "max_p99_ms": 100.0}
    capacity = 1 / busy
    assert knee is not None and 0.8 * capacity <= knee <= 1.2 * capacity, (knee, steps)
    for step in steps:
        if step["offered_rate"] <= knee:
            assert step["errors"] == 0 and step["reply_rate"] >= 0.9 * step["offered_rate"], step
    past = [s for s in steps if s["offered_rate"] > knee]
    assert past and past[-1]["reply_rate"] < 0.9 * past[-1]["offered_rate"], "replies fall behind past capacity"


@pytest.mark.slow
def test_a_single_sweep_prints_text_for_a_terminal(echo_server):
    """Without --json, a single server's sweep is text, not Markdown: its knee as --all words a sweep's, a line per
    step (offered, started, replies, p99, errors), and where its every figure is."""
    port = str(echo_server())
    result = client("--port", port, "--rate", "20:40:20", "--duration", "0.5")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100 and not any(line.startswith(("|", "#")) for line in lines)
    said = " ".join(result.stdout.split())  # as wrapped at 100 columns
    assert "open loop, 20 to 40 in steps of 20 connections/s, 0.5 s each; the knee is the highest" in said
    knee = next(line.split() for line in lines if line.split()[:1] == ["1"])  # its rank, its server, its knee
    assert knee[1:3] == ["127.0.0.1:" + port, "40"], result.stdout
    head = lines.index(next(line for line in lines if line.split()[:1] == ["offered/s"]))
    assert lines[head].split() == ["offered/s", "started/s", "replies/s", "response", "p99", "ms", "errors"]
    assert [line.split()[0] for line in lines[head + 1:head + 3]] == ["20", "40"]
    assert all(line.split()[-1] == "0" for line in lines[head + 1:head + 3]), result.stdout  # no error
    assert "--json (bench/draw.py writes them as Markdown and SVG)" in said


@pytest.mark.slow
def test_a_stall_shows_in_p99_because_latency_counts_from_the_schedule(one_at_a_time):
    """Coordinated omission: while the server is silent, connections keep being
    scheduled; each waits until the stall ends, and that wait is its response time."""
    rate, duration, pause = 40, 3, 1.0
    server = one_at_a_time(pause_at=1.0, pause_for=pause)
    figures, _ = client_json("--port", str(server.port), "--rate", str(rate), "--duration", str(duration))
    pause_ms = pause * 1000
    assert figures["errors"] == 0
    assert abs(figures["connections"] - rate * duration) <= 1
    assert figures["max_open"] >= 0.5 * rate * pause, "open loop: connections kept starting during the stall"
    assert figures["achieved_rate"] >= 0.8 * rate, "the client kept its schedule during the stall"
    # A third of the connections were scheduled during the stall, and waited for up to all of it.
    assert 0.8 * pause_ms <= figures["max_ms"] < pause_ms + 1500
    assert figures["p99_ms"] >= 0.5 * pause_ms
    assert figures["p50_ms"] < 0.25 * pause_ms, "the connections outside the stall stay fast"
    # Those scheduled in the stall's first 0.9 s waited 100 ms or more; at most those in it waited a second.
    slow, slowest = figures["responses_100ms_or_more"], figures["responses_1s_or_more"]
    assert 0.5 * rate * pause <= slow <= 1.5 * rate * pause, figures
    assert slowest <= slow and (slowest > 0) == (figures["max_ms"] >= 1000), figures


def test_the_sweep_preset_is_offered():
    result = client("--help", timeout=TIMEOUT)
    words = "".join(result.stdout.split())  # argparse may wrap the help at a hyphen
    assert result.returncode == 0 and "pingpong-sweep" in words and "--rate" in words


@pytest.mark.parametrize("rate", ["0", "abc", "5:1:1", "1:5:0", "-5", "nan", "1:2", "1:2:3:4", "1:5:-1", "0.1"])
def test_a_bad_rate_is_one_clear_line(rate):
    result = client("--port", "7", "--rate", rate, timeout=TIMEOUT)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "argument --rate" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_running_out_of_local_ports_is_the_clients_limit_not_the_servers(echo_server):
    """EADDRNOTAVAIL (every local port in TIME_WAIT) is said, and not counted as the server's error."""
    prelude = ("import errno, socket\n"
               "socket.socket.connect_ex = lambda self, address: errno.EADDRNOTAVAIL")
    port = str(echo_server())
    figures = json.loads(client("--port", port, "--rate", "20", "--duration", "1", "--json", prelude=prelude).stdout)
    assert figures["client_ports_exhausted"] == 20 and figures["errors"] == 0 and figures["connections"] == 0
    text = client("--port", port, "--rate", "20", "--duration", "1", prelude=prelude)
    assert "local ports" in text.stdout and "not counted against the server" in text.stdout, text.stdout


@pytest.mark.slow
def test_a_client_that_falls_behind_its_schedule_says_so(echo_server):
    """Each connect made to take 20 ms: one worker can start 50 a second, not the 200 offered."""
    prelude = ("import time, client\n"
               "connect = client.Engine.connect\n"
               "client.Engine.connect = lambda self, c, now: (time.sleep(0.02), connect(self, c, now))[1]")
    args = ("--port", str(echo_server()), "--rate", "200", "--duration", "1", "--procs", "1")
    figures = json.loads(client(*args, "--json", prelude=prelude).stdout)
    assert not figures["kept_schedule"] and figures["achieved_rate"] < 0.95 * 200
    assert figures["behind_ms"] > 500 and figures["errors"] == 0
    text = client(*args, prelude=prelude).stdout
    assert "did not keep its schedule" in text and "lag" in text, text


def test_the_schedule_is_in_whole_milliseconds_and_never_starts_a_connection_early(client_module):
    """Connections due in the same millisecond start in one wake-up: each is scheduled at
    the start of the millisecond its k/rate falls in, and none starts before then."""

    class Recorder:
        by_fd = {}

        def __init__(self):
            self.started = []  # (connection, when its connect began)

        def connect(self, c, now):
            self.started.append((c, now))
            return True

    rate, duration, procs = 8000, 0.05, 2
    for index in range(procs):
        engine = Recorder()
        driver = client_module.OpenLoop(engine, client_module.Workload(rate=rate, duration=duration), index, procs)
        t0 = time.perf_counter()
        driver.start(t0)
        deadline = t0 + 5
        wait = driver.tick(t0)
        while wait is not None and time.perf_counter() < deadline:
            time.sleep(wait)
            wait = driver.tick(time.perf_counter())
        ks = list(range(index, round(rate * duration), procs))
        assert len(engine.started) == len(ks), "every connection of this worker's share started"
        for k, (c, began) in zip(ks, engine.started):
            assert c.scheduled == pytest.approx(t0 + (k * 1000 // rate) / 1000, abs=1e-9)
            assert began >= c.scheduled, "no connection starts before its scheduled time"
        slots = {c.scheduled for c, _ in engine.started}
        assert len(slots) == round(duration * 1000), "one wake-up's worth of connections per millisecond"


@pytest.mark.slow
@pytest.mark.skipif(len(getattr(os, "sched_getaffinity", lambda pid: ())(0)) < 2, reason="pins to two cores")
def test_the_pinned_sweep_gives_the_server_a_core_and_measures_the_clients_ceiling():
    """bench/pinned_sweep.py: the client's ceiling row (against any echo server command), then one
    row per server, each swept with the server on one core and the client on the others."""
    ceiling = shlex.join([sys.executable, str(ROOT / "echo_epoll.py")])
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "pinned_sweep.py"), "--rates", "500:1000:500",
                             "--ceiling", ceiling, "echo_selectors.py"],
                            capture_output=True, text=True, timeout=TIMEOUT * 30,
                            env=dict(os.environ, ECHO_TESTS_RUN=RUN))  # marks its servers: see echo_processes()
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ")][1:]
    assert len(rows) == 2, result.stdout
    assert rows[0].startswith("| the client's ceiling: ") and "| at least 1,000 |" in rows[0], rows
    assert rows[1].startswith("| echo_selectors.py | at least 1,000 |") and rows[1].endswith("| yes |"), rows
    assert not echo_processes()
