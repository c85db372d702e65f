# SPDX-License-Identifier: 0BSD
"""The contract every echo_*.py keeps, checked on each server started with --port 0."""
import asyncio
import glob
import importlib.util
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from helpers import (HANDLED_IN_ANOTHER_THREAD, POOL_SERVERS, PROCESS_SERVERS, PYTHON, ROOT, SERVERS, TIMEOUT,
                     UNIX_ONLY, Server, children_of, exchange, group_gone, port_is_free, read_to_eof, reset,
                     roundtrip, send_while_reading, skip_where_unavailable, steady, tls_args, tls_wrap,
                     unix_interpreter, wait_for_workers, wait_until)
from common import pin  # bench/common.py (helpers put bench/ on the path): the one way a process is pinned

every_server = pytest.mark.parametrize("script", SERVERS)
windows = pytest.mark.windows  # the Windows lane runs it, on the patterns that run there


def run_script(script, *args, timeout=TIMEOUT):
    return subprocess.run([*PYTHON, str(ROOT / script), *tls_args(script), *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.mark.windows(unix_only=True)
@every_server
def test_help_documents_every_flag(script):
    result = run_script(script, "--help")
    assert result.returncode == 0
    for flag in ("--host", "--port", "-q", "--work", "--timeout", "--grace", "127.0.0.1", "7777"):
        assert flag in result.stdout
    with open(ROOT / script) as f:
        if re.search(r"\bWORKERS\b|usable_cpu_count\(\)", f.read()):
            assert "--workers" in result.stdout


# The pool servers whose --workers defaults to one per CPU the process may run on.
PER_CPU = sorted(s for s in POOL_SERVERS if "usable_cpu_count()" in (ROOT / s).read_text())


@pytest.mark.skipif(len(getattr(os, "sched_getaffinity", lambda pid: ())(0)) < 2 or not os.path.isdir("/proc/self"),
                    reason="pins to one of two CPUs, reads /proc")
def test_the_harness_starts_a_server_on_another_interpreter_or_as_any_command_line(tmp_path, monkeypatch):
    """bench/common.py's Server as python_versions.py and pinned_sweep.py --ceiling start theirs: a copy of the script
    on the interpreter named (a folder it sees under the name inside=, as in a chroot) with only the environment
    given; or any echo server's command line, run where we are, --port 0 added. Each pinned by cores=, each echoes."""
    one = [min(os.sched_getaffinity(0))]
    monkeypatch.chdir(ROOT)  # a command line's relative paths are ours, as the user typed them
    for kind, more in (("interpreter", dict(interpreter=[sys.executable], inside=str(tmp_path / "interpreter"),
                                            env={"PATH": os.defpath, "ECHO_ONLY": "1"})),
                       ("program", dict(program=[sys.executable, "echo_epoll.py"]))):
        (tmp_path / kind).mkdir()
        server = Server("echo_epoll.py", tmp_path / kind, ["-q"], cores=one, **more)
        try:
            server.wait_for_port()
            assert roundtrip(server, b"pinned" * 1000) == (b"pinned" * 1000, True)
            assert os.sched_getaffinity(server.pid) == set(one)
            environment = Path("/proc/{}/environ".format(server.pid)).read_bytes().split(b"\0")
            assert (b"ECHO_ONLY=1" in environment) == (kind == "interpreter"), environment
            assert (tmp_path / kind / "echo_epoll.py").exists() == (kind == "interpreter")  # a copy, or none
        finally:
            server.kill()


@pytest.mark.skipif(len(getattr(os, "sched_getaffinity", lambda pid: ())(0)) < 2, reason="pins to one of two CPUs")
@pytest.mark.parametrize("script", PER_CPU)
def test_a_pinned_server_starts_a_worker_per_cpu_it_may_run_on(script, start_server):
    """taskset, or a container's cpuset, leaves a process fewer CPUs than the machine has:
    os.cpu_count() would start a worker for each of the machine's."""
    assert PER_CPU == ["echo_reuseport.py", "echo_selectors_process.py", "echo_shared_socket.py"]
    one = [min(os.sched_getaffinity(0))]
    pinned = subprocess.run([sys.executable, str(ROOT / script), "--help"], capture_output=True, text=True,
                            timeout=TIMEOUT, preexec_fn=pin(one))
    assert "one per CPU it may run on, 1)" in " ".join(pinned.stdout.split()), pinned.stdout + pinned.stderr
    server = start_server(script, "-q", cores=one)
    wait_for_workers(server.pid, 1)
    assert steady(lambda: len(children_of(server.pid))) == 1  # and no second one after it
    unpinned = start_server(script, "-q")
    wait_for_workers(unpinned.pid, len(os.sched_getaffinity(0)))


@windows
@pytest.mark.slow  # 136 interpreters started: most of the fast tier's time otherwise
@every_server
@pytest.mark.parametrize("args", [["--port", "abc"], ["--port", "70000"], ["--port", "-5"], ["--work", "x"],
                                  ["--timeout", "-1"], ["--timeout", "soon"], ["--grace", "nan"], ["--bogus"]])
def test_bad_argument_is_one_clear_line(script, args):
    result = run_script(script, *args)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "error" in lines[0] and "Traceback" not in result.stderr
    assert result.stdout == ""


@windows
@every_server
def test_port_in_use_is_one_clear_line(script):
    skip_where_unavailable(script)  # elsewhere it says so before it binds
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    with holder:
        result = run_script(script, "--port", str(holder.getsockname()[1]))
    assert result.returncode != 0
    assert result.stderr.count("\n") == 1 and "in use" in result.stderr and "Traceback" not in result.stderr


def older_python(version):
    """An interpreter older than the pack supports, where one is installed (pyenv's, or on the PATH)."""
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/{}.*/bin/python3".format(version))))
    return found[-1] if found else shutil.which("python" + version)


@pytest.mark.parametrize("version", ["3.8", "3.9"])
@pytest.mark.parametrize("script", SERVERS + ["client.py"])
def test_an_older_python_is_told_the_version_it_needs(script, version):
    """Issue 49: 3.8 ended in a traceback (str.removeprefix, in number()) and 3.9 ran, though the pack
    needs 3.10. Every file parses on both; each says so in one line, before it does anything."""
    python = older_python(version)
    if not python:
        pytest.skip("no Python {} here".format(version))
    result = subprocess.run([python, str(ROOT / script), "--port", "0"], capture_output=True, text=True,
                            timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    assert result.returncode == 1 and result.stdout == ""
    line = r"{}: needs Python 3\.10 or newer; this is Python {}\.\d+\n".format(re.escape(str(ROOT / script)),
                                                                          re.escape(version))
    assert re.fullmatch(line, result.stderr), result.stderr


@windows
@pytest.mark.slow
@every_server
def test_large_binary_stream_comes_back_exact(script, start_server):
    server = start_server(script, "-q")
    payload = os.urandom(4 * 1024 * 1024)
    echoed, closed = roundtrip(server, payload)
    assert len(echoed) == len(payload) and echoed == payload
    assert closed, "after a half-close the server sends what remains and closes"


@windows
@pytest.mark.slow
@every_server
def test_pipelined_messages_come_back_in_order(script, start_server):
    server = start_server(script, "-q")
    rng = random.Random(7)
    messages = [bytes([i % 251]) * rng.randint(1, 3000) for i in range(3000)]
    with server.connect() as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        echoed = send_while_reading(sock, messages)  # one send per message, none waiting
    assert echoed == b"".join(messages)


@windows
@pytest.mark.slow
@every_server
def test_half_close_gets_the_rest_then_eof(script, start_server):
    server = start_server(script, "-q")
    with server.connect() as sock:
        sock.sendall(b"last words")
        sock.shutdown(socket.SHUT_WR)
        assert read_to_eof(sock) == b"last words"


@windows
@pytest.mark.slow
@every_server
def test_concurrent_clients(script, start_server):
    server = start_server(script, "-q")
    # echo_simple serves one client at a time: more than its backlog would wait on SYN retries.
    count = 5 if script == "echo_simple.py" else 50
    results = {}

    def client(n):
        with server.connect() as sock:
            for round_ in range(5):
                message = "client {} round {} ".format(n, round_).encode() * 20
                results[n, round_] = exchange(sock, message) == message

    threads = [threading.Thread(target=client, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT * 2)
    assert len(results) == count * 5 and all(results.values())


@windows
@pytest.mark.slow
@pytest.mark.parametrize("script", [s for s in SERVERS if s != "echo_simple.py"])
def test_idle_client_does_not_block_others(script, start_server):
    server = start_server(script, "-q")
    with server.connect() as idle, server.connect() as busy:
        idle.sendall(b"x")  # half a conversation, then silence
        assert exchange(busy, b"hello") == b"hello"
        assert idle.recv(10) == b"x"


@pytest.mark.slow
def test_simple_serves_one_client_at_a_time(start_server):
    server = start_server("echo_simple.py", "-q")
    with server.connect() as first, server.connect(timeout=0.5) as second:
        assert exchange(first, b"first") == b"first"
        second.sendall(b"second")
        with pytest.raises(socket.timeout):
            second.recv(100)  # queued behind the first client
        first.close()
        second.settimeout(TIMEOUT)
        assert second.recv(len(b"second"), socket.MSG_WAITALL) == b"second"  # served once the first left
        assert exchange(second, b"and more") == b"and more"


@pytest.mark.slow
@every_server
def test_resets_and_vanishing_clients_do_not_stop_the_server(script, start_server):
    server = start_server(script, "-q")
    for _ in range(3):
        sock = server.connect()
        sock.sendall(b"a" * 1000)
        reset(sock)
    # A client that sends 2 MiB, reads a little of the reply and vanishes with a reset.
    sock = server.connect()
    sock.sendall(os.urandom(2 * 1024 * 1024))
    sock.recv(65536)
    reset(sock)
    # One that sends 4 MiB at once and reads it all.
    payload = os.urandom(4 * 1024 * 1024)
    echoed, _ = roundtrip(server, payload)
    assert echoed == payload
    assert server.proc.poll() is None
    assert roundtrip(server, b"still here") == (b"still here", True)


@windows
@pytest.mark.slow
@every_server
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signal_with_clients_connected_exits_cleanly(script, signum, start_server):
    """Each client gets its echoes, then EOF; the server exits 0 once they have closed."""
    server = start_server(script, "-q")
    clients = [server.connect() for _ in range(3)]
    assert exchange(clients[0], b"hi") == b"hi"
    clients[1].sendall(b"pending")
    server.proc.send_signal(signum)
    received = []
    for sock in clients:
        with sock:
            received.append(read_to_eof(sock))  # a reset here is the bug: a stop must not destroy echo
    started = time.monotonic()
    status = server.wait()
    elapsed = time.monotonic() - started
    assert received[1] in (b"", b"pending"), received  # echoed, unless the stop came before it was read
    assert status == 0, server.stderr()
    assert elapsed < 3, "once its clients have closed, a stopping server exits (this bound leaves room for a loaded machine)"
    assert "Traceback" not in server.stderr()
    assert group_gone(server.pid), "a child process was left behind"
    assert port_is_free(server.port)


# The server signals itself as soon as its port line is out: the earliest a stop can come from a
# client of the contract, before the lesson is ready for it (asyncio.run() has yet to make its loop).
# raise_signal(), not os.kill(): on Windows, os.kill() with a signal number ends the process.
SIGNALLED_AFTER_THE_PORT_LINE = """
import builtins, signal
unpatched = builtins.print
def print(*args, **kwargs):
    unpatched(*args, **kwargs)
    if str(args[0]).startswith("Server Run Port:"):
        signal.raise_signal(signal.{})
builtins.print = print
"""


@pytest.mark.slow
@windows
@every_server
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_right_after_the_port_line_stops_cleanly(script, signum, start_server):
    """start_listening() holds the stop signals until the lesson is ready to take them: no
    traceback from the middle of the set-up, the usual stop instead."""
    server = start_server(script, "-q", prelude=SIGNALLED_AFTER_THE_PORT_LINE.format(signal.Signals(signum).name),
                          python=("-X", "dev", "-W", "error"))
    assert server.wait() == 0, server.stderr()
    assert server.stderr() == ""
    assert group_gone(server.pid), "a child process was left behind"


# Not the process servers: their parents take the signals with sigwait(), which another thread that
# lets them through would defeat; their workers and children wait as echo_simple.py does.
@pytest.mark.slow
@pytest.mark.parametrize("script", [s for s in SERVERS if s not in PROCESS_SERVERS])
@pytest.mark.parametrize("waiting_in", ["accept", "recv"])
def test_a_stop_signal_that_does_not_interrupt_the_wait_still_stops(script, waiting_in, start_server):
    server = start_server(script, "-q", prelude=HANDLED_IN_ANOTHER_THREAD)
    client = server.connect()
    assert exchange(client, b"hi") == b"hi"  # served: the server is up and waits for its next chunk
    if waiting_in == "accept":
        client.close()
        client = None
        with server.connect() as second:  # served once the first has left: back in accept()
            assert exchange(second, b"hi") == b"hi"
    server.proc.send_signal(signal.SIGTERM)
    if client:
        with client:
            assert read_to_eof(client) == b"", "the stop half-closes the idle client"
    assert server.wait() == 0, server.stderr()
    assert "Traceback" not in server.stderr()



def test_asyncio_turns_nagle_off_on_the_listening_socket_s_connections():
    """create_server_socket() makes a socket that says TCP (getaddrinfo()'s proto, not 0): asyncio sets
    TCP_NODELAY only on such sockets, and without it an echo over TLS waited 40 ms behind a delayed ACK
    (p99 45 ms at 64 KiB against echo_selectors_tls.py's 4.5)."""
    spec = importlib.util.spec_from_file_location("streams", ROOT / "echo_asyncio_streams.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # defines, never runs: main() waits for __name__ == "__main__"

    async def nodelay_of_a_connection():
        loop = asyncio.get_running_loop()
        seen = loop.create_future()
        with module.create_server_socket("127.0.0.1", 0, 5) as sock:
            def served(reader, writer):
                seen.set_result(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                writer.close()
            server = await asyncio.start_server(served, sock=sock)
            _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
            try:
                return await asyncio.wait_for(seen, TIMEOUT)
            finally:
                writer.close()
                server.close()
    assert asyncio.run(nodelay_of_a_connection())

@pytest.mark.slow
@every_server
def test_quiet_prints_only_the_port_line(script, start_server):
    server = start_server(script, "-q")
    assert roundtrip(server, b"ping")[0] == b"ping"
    server.stop(signal.SIGTERM)
    assert server.stdout().splitlines() == ["Server Run Port:{}".format(server.port)]


@pytest.mark.slow
@every_server
def test_default_logs_follow_the_article(script, start_server):
    server = start_server(script)
    assert roundtrip(server, b"ping")[0] == b"ping"
    assert wait_until(lambda: "Recv:EOF" in server.stdout())
    out = server.stdout()
    assert out.startswith("Server Run Port:") and "Recv:b'ping'" in out
    assert re.search(r"Accept:127\.0\.0\.1:\d+$", out, re.MULTILINE), "an IPv4 peer is host:port, no brackets"


@pytest.mark.slow
@every_server
def test_work_flag_burns_cpu_and_still_echoes(script, start_server):
    # What sum(range(N)) costs depends on the interpreter and its build (2.6 ms on pyenv's unoptimized 3.11,
    # 1.2 ms on Debian's optimized 3.14 and 3.15), so it is measured here, on the interpreter the server runs:
    # the least CPU time of a few runs (the others include whatever interrupted this process).
    work, chunks = 200000, 100
    costs = []
    for _ in range(5):
        started = time.process_time()
        sum(range(work))
        costs.append(time.process_time() - started)
    expected = chunks * min(costs)
    server = start_server(script, "-q", "--work", str(work))
    before = server.cpu_seconds()
    with server.connect() as sock:
        for n in range(chunks):
            message = b"%05d" % n
            assert exchange(sock, message) == message
    # At least half of it per chunk. The server's CPU is read in clock ticks, and a forked child's
    # counts with its parent once reaped: wait (bounded) for it rather than read it once.
    burnt = []

    def enough():
        burnt.append(server.cpu_seconds() - before)
        return burnt[-1] >= expected / 2
    assert wait_until(enough, interval=0.1), "{:.3f} s of CPU for {} chunks, at least {:.3f} s expected".format(
        burnt[-1], chunks, expected / 2)


# What each platform-specific server needs, and how to take it away in a test.
MISSING = {
    "echo_epoll.py": "import select; del select.epoll",
    "echo_fork.py": "import os; del os.fork",
    "echo_prefork.py": "sys.modules['fcntl'] = None",
    "echo_reuseport.py": "sys.platform = 'darwin'",
    "echo_selectors_process.py": "import socket; del socket.send_fds",
    "echo_shared_socket.py": "import os; del os.fork",
}


@pytest.mark.parametrize("script", sorted(set(MISSING) & set(SERVERS)))
def test_missing_platform_feature_is_one_clear_line(script):
    code = "import runpy, sys; {}; sys.argv = [{!r}, '--port', '0']; runpy.run_path({!r}, run_name='__main__')".format(
        MISSING[script], script, str(ROOT / script))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode != 0 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and script in result.stderr and "Traceback" not in result.stderr


@pytest.mark.windows(unix_only=True)
@pytest.mark.parametrize("script", sorted(UNIX_ONLY & set(SERVERS)))
def test_a_unix_only_pattern_refuses_in_one_line_where_it_cannot_run(script):
    """Where the interpreter lacks what the pattern needs (Windows), it names one that runs there, in one line."""
    if unix_interpreter():
        pytest.skip("a Unix interpreter: the pattern runs (test_missing_platform_feature_is_one_clear_line fakes it)")
    result = run_script(script, "--port", "0")
    assert result.returncode == 1 and result.stdout == "", (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert script in lines[0] and any(other in lines[0] for other in set(SERVERS) - UNIX_ONLY), lines[0]


@pytest.mark.slow
def test_uvloop_flag_runs_on_uvloop_or_says_what_is_missing(start_server):
    if importlib.util.find_spec("uvloop") is None:
        result = run_script("echo_asyncio_protocol.py", "--port", "0", "--uvloop")
        assert result.returncode != 0 and result.stdout == ""
        assert result.stderr.count("\n") == 1 and "pip install uvloop" in result.stderr
        assert "Traceback" not in result.stderr
    else:
        server = start_server("echo_asyncio_protocol.py", "-q", "--uvloop")
        assert roundtrip(server, b"on uvloop") == (b"on uvloop", True)


# The article's own log line for each connection: "[PID:n]Accept:host:port", from the worker that
# took it ("[PID:n][FD:k]Accept:..." in the selector loops; echo_selectors_process.py's acceptor
# writes it with the pid of the worker it passes the connection to).
ACCEPT_LINE = re.compile(r"^\[PID:(\d+)\](?:\[FD:\d+\])?Accept:.*:\d+$", re.MULTILINE)


def accepts_per_worker(server):
    """{worker pid: connections it took}, counted from the server's log (started without -q)."""
    counts = {}
    for pid in ACCEPT_LINE.findall(server.stdout()):
        counts[int(pid)] = counts.get(int(pid), 0) + 1
    return counts


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(POOL_SERVERS))
def test_process_servers_log_each_accept_with_the_workers_pid(script, start_server):
    """The workers' Accept lines add up to the clients, and where the pattern deals the
    connections out (in turn, by SO_REUSEPORT's hash, or by a lock that the worker serving a
    client has passed on) more than one worker takes them."""
    server = start_server(script, "--workers", "3")
    workers = wait_for_workers(server.pid, 3)
    for n in range(12):
        message = b"%d" % n
        assert roundtrip(server, message) == (message, True)
    assert server.stop(signal.SIGTERM) == 0
    accepts = accepts_per_worker(server)
    assert set(accepts) <= set(workers) and sum(accepts.values()) == 12, accepts
    if script == "echo_selectors_process.py":
        assert sorted(accepts.values()) == [4, 4, 4], accepts  # dealt in turn
    elif script != "echo_shared_socket.py":  # there the spread follows who wakes first
        assert len(accepts) > 1, accepts


@pytest.mark.slow
@pytest.mark.parametrize("accept", ["all", "one", "exclusive"])
def test_shared_socket_takes_connections_each_way(accept, start_server):
    server = start_server("echo_shared_socket.py", "--workers", "3", "--accept", accept)
    workers = wait_for_workers(server.pid, 3)
    socks = [server.connect() for _ in range(40)]  # a burst: several wait in the queue at once
    for n, sock in enumerate(socks):
        message = b"%d" % n
        assert exchange(sock, message) == message
        sock.close()
    assert server.stop(signal.SIGTERM) == 0
    accepts = accepts_per_worker(server)
    assert set(accepts) <= set(workers) and sum(accepts.values()) == 40, accepts


def echoes_each(socks, seconds=10):
    """How many of socks have their b"x" back, within seconds in all (a shed client hears EOF or a reset)."""
    deadline, echoed = time.monotonic() + seconds, 0
    for sock in socks:
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        try:
            echoed += sock.recv(1) == b"x"
        except OSError:
            pass
    return echoed


@pytest.mark.slow
@pytest.mark.parametrize("accept", ["all", "one", "exclusive"])
def test_a_crowded_shared_socket_worker_leaves_new_clients_to_the_others(accept, start_server):
    """Issue 47: whoever wakes first takes a client, so one worker can reach its descriptor limit and shed clients
    while another has room (1,410 at c100k with --workers 7). A worker whose clients take 7/8 of its limit (350 of
    400 here) leaves new ones to the others, taking one itself every 10 ms. Made uneven on purpose: one worker is
    stopped (SIGSTOP) while the first 360 connect, so the other takes them all; then both race for 360 more."""
    import resource  # Linux's: the pattern needs fork()
    server = start_server("echo_shared_socket.py", "--workers", "2", "--accept", accept,
                          rlimits={resource.RLIMIT_NOFILE: 400})
    first, second = wait_for_workers(server.pid, 2)
    socks = []
    try:
        os.kill(second, signal.SIGSTOP)
        for _ in range(360):
            socks.append(server.connect())
            socks[-1].sendall(b"x")
        assert echoes_each(socks) == 360, "the first worker serves the first 360"
    finally:
        os.kill(second, signal.SIGCONT)
    for _ in range(360):
        socks.append(server.connect())
        socks[-1].sendall(b"x")
    echoed = echoes_each(socks[360:])
    assert echoed == 360 and "connection shed" not in server.stdout(), "{} of 360 echoed".format(echoed)
    for sock in socks:
        sock.close()


def has_ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
        return True
    except (AttributeError, OSError):  # no AF_INET6 in this Python, or no ::1 on this machine
        return False


@pytest.mark.slow
@every_server
@pytest.mark.skipif(not has_ipv6_loopback(), reason="this machine has no IPv6 loopback (::1) to listen on")
def test_ipv6_host_serves_an_echo(script, start_server):
    server = start_server(script, "--host", "::1")
    sock = socket.create_connection(("::1", server.port), timeout=TIMEOUT)
    accept = re.compile(r"Accept:\[::1\]:{}$".format(sock.getsockname()[1]), re.MULTILINE)
    with tls_wrap(sock, "::1") if server.tls else sock as sock:
        assert exchange(sock, b"over IPv6") == b"over IPv6"
    assert wait_until(lambda: accept.search(server.stdout())), "the log shows the client's IPv6 address in brackets"


# A wrapper that execs the server (it keeps the pid) with its stdout a pipe whose one reader takes the
# port line, then goes away, as `python3 echo_x.py | head -1` does: the server's next write fails.
HEAD_1 = """
import os, sys
r, w = os.pipe()
if os.fork() == 0:
    if os.fork() == 0:  # the reader: a grandchild, so that the server (a pool's parent) never reaps it
        os.close(w)
        line = b""
        while not line.endswith(b"\\n") and (byte := os.read(r, 1)):
            line += byte
        os.close(r)  # gone before the test sees the port line
        os.write(1, line)
    os._exit(0)
os.wait()
os.close(r)
os.dup2(w, 1)
os.close(w)
os.execvp(sys.argv[1], sys.argv[1:])
"""


@pytest.mark.slow
@every_server
@pytest.mark.parametrize("python", [(), ("-X", "dev", "-W", "error")], ids=["", "dev"])
def test_a_server_serves_on_once_its_log_s_reader_has_gone(script, python, start_server):
    """Issue 49: `python3 echo_selectors.py | head -2` died of BrokenPipeError in log() at its first
    client. Now the failed write ends the log, in one line on stderr, whichever thread or worker
    process met it first; clients are served exactly; the stop is clean (no "Exception ignored")."""
    server = start_server(script, wrap=(sys.executable, "-c", HEAD_1), python=python)
    socks = [server.connect() for _ in range(4)]  # at once: a pool's workers fail their Accept lines together
    for n, sock in enumerate(socks):  # served one after another (echo_simple.py serves one at a time)
        with sock:
            payload = os.urandom(100000 * n + 1)
            assert exchange(sock, payload) == payload
            sock.shutdown(socket.SHUT_WR)
            assert read_to_eof(sock) == b""
    assert server.stop(signal.SIGTERM) == 0, server.stderr()
    lines = [line for line in server.stderr().splitlines()
             if not (line.startswith("Executing <") and "took" in line)]  # asyncio's slow-callback notes
    assert lines == ["{}: cannot write the log: Broken pipe; no more log lines, serving goes on".format(
        Path(server.out_path).parent / script)], server.stderr()
    assert server.stdout() == "Server Run Port:{}\n".format(server.port)


@every_server
def test_a_peer_is_logged_as_a_reader_writes_it(script):
    """IPv4 host:port, IPv6 in brackets, and a peer the system could not name (asyncio's peername is
    None where getpeername() failed after a reset: macOS does) logged, not a TypeError in connection_made."""
    import ast
    tree = ast.parse((ROOT / script).read_text())
    found = {}
    exec(compile(ast.Module([n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "peer"], []),
                 script, "exec"), found)
    peer = found["peer"]
    assert peer(("127.0.0.1", 45696)) == "127.0.0.1:45696"
    assert peer(("::1", 45696, 0, 0)) == "[::1]:45696"
    assert peer(None) == "?:?"


def listen_backlogs(port):
    """The accept-queue limit of every TCP socket listening on port: what `ss -ltn`
    shows as Send-Q, asked of the Linux kernel over netlink (sock_diag)."""
    NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY, NLMSG_ERROR, NLMSG_DONE, TCP_LISTEN = 4, 20, 2, 3, 10
    found = []
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as diag:
        for family in (socket.AF_INET, socket.AF_INET6):
            # struct inet_diag_req_v2: family, protocol, ext, pad, states; an empty inet_diag_sockid matches all.
            request = struct.pack("=BBBxI48x", family, socket.IPPROTO_TCP, 0, 1 << TCP_LISTEN)
            # struct nlmsghdr: length, type, flags (NLM_F_REQUEST | NLM_F_DUMP), sequence, port id.
            diag.send(struct.pack("=IHHII", 16 + len(request), SOCK_DIAG_BY_FAMILY, 0x301, 1, 0) + request)
            done = False
            while not done:
                data, offset = diag.recv(1 << 16), 0
                while offset < len(data) and not done:
                    length, kind = struct.unpack_from("=IH", data, offset)
                    assert kind != NLMSG_ERROR, "the kernel refused the sock_diag request"
                    done = kind == NLMSG_DONE
                    # struct inet_diag_msg: 4 bytes, sockid (source port first, big-endian), expires, rqueue, wqueue.
                    if not done and struct.unpack_from("!H", data, offset + 16 + 4)[0] == port:
                        found.append(struct.unpack_from("=I", data, offset + 16 + 60)[0])
                    offset += (length + 3) & ~3
    return found


@pytest.mark.slow
@every_server
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the listen queue through Linux's sock_diag")
@pytest.mark.parametrize("backlog", [None, 7])
def test_backlog_flag_sets_the_listen_queue(script, backlog, start_server):
    assert "--backlog" in run_script(script, "--help").stdout
    default = int(re.search(r"^BACKLOG = (\d+)", (ROOT / script).read_text(), re.MULTILINE).group(1))
    server = start_server(script, "-q", *(["--backlog", str(backlog)] if backlog else []))
    assert roundtrip(server, b"serving")[0] == b"serving"  # asyncio listens again once it serves
    backlogs = listen_backlogs(server.port)
    assert backlogs and set(backlogs) == {backlog or default}, backlogs


# accept() fails once with ENOBUFS, an error accept(2) says to retry on; then it works.
ENOBUFS_ONCE = """
import errno, os, socket
real_accept = socket.socket.accept
def accept_failing_once(self):
    socket.socket.accept = real_accept
    raise OSError(errno.ENOBUFS, os.strerror(errno.ENOBUFS))
socket.socket.accept = accept_failing_once
"""


@pytest.mark.slow
@every_server
def test_accept_error_not_about_descriptors_is_logged_and_serving_goes_on(script, tmp_path):
    server = Server(script, tmp_path, prelude=ENOBUFS_ONCE)
    try:
        server.wait_for_port()
        assert roundtrip(server, b"after ENOBUFS") == (b"after ENOBUFS", True)
        assert wait_until(lambda: "No buffer space available" in server.stdout()), "the error is one log line"
        assert roundtrip(server, b"and on") == (b"and on", True)
        assert server.proc.poll() is None and "Traceback" not in server.stderr()
    finally:
        server.kill()
