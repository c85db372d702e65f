# SPDX-License-Identifier: 0BSD
"""What the tests share: the harness the benchmarks share too (bench/common.py: starting a server, talking
to it, and looking at its processes), and what only the tests use: the Unix-only patterns, client.py run as
a command, the echo processes of this test run."""
import functools
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))  # the harness, one module: bench/common.py
from common import (CERT, KEY, PIPED, PROCESS_SERVERS, PYTHON, ROOT, SERVERS, TIMEOUT, TLS_SERVERS,  # noqa: E402, F401
                    Server, children_of, exchange, group_gone, group_pids, kill_group, needs_proc, proc_stats,
                    read_to_eof, recv_exactly, reset, send_while_reading, skip_where_unavailable, steady, tls_args,
                    tls_wrap, wait_for_workers, wait_until, pending, stop_under_load)

POOL_SERVERS = PROCESS_SERVERS - {"echo_fork.py"}  # a parent and a pool of worker processes
SELECT_SERVERS = {"echo_select.py", "echo_select_pool.py"}
WINE = any(os.path.basename(word) in ("wine", "wine64") for word in PYTHON)  # the Windows lane under Wine
# The patterns that need what only Unix has (fork, epoll, SCM_RIGHTS, SO_REUSEPORT...): where the
# interpreter lacks it, each says so in one line and exits 1 before listening.
UNIX_ONLY = {"echo_epoll.py", "echo_fork.py", "echo_prefork.py", "echo_reuseport.py", "echo_selectors_process.py",
             "echo_shared_socket.py"}


@functools.lru_cache(maxsize=None)
def unix_interpreter():
    """Whether the servers' interpreter is a Unix one (it has os.fork): where it is not (Windows), the
    UNIX_ONLY patterns refuse to start, and the others run without what only Unix has."""
    if not PIPED:
        return hasattr(os, "fork")
    result = subprocess.run([*PYTHON, "-c", "import os; print(hasattr(os, 'fork'))"], stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=60)  # a new Wine prefix takes seconds
    assert result.returncode == 0, "the interpreter {} does not run: {}".format(PYTHON, result.stderr)
    return result.stdout.strip() == "True"


def started_and_stopped(make, stop, ready=lambda thing: thing):
    """The body of a fixture that starts things: it yields start(*args, **kwargs), which makes
    one with make(*args, **kwargs) and returns ready(it); at the end each one made is stopped
    with stop(it), every one even if stopping another failed."""
    started = []

    def start(*args, **kwargs):
        started.append(make(*args, **kwargs))  # stopped at the end even if ready() fails
        return ready(started[-1])

    yield start
    errors = []
    for thing in started:
        try:
            stop(thing)
        except Exception as e:  # noqa: BLE001 - reported below, after the others are stopped
            errors.append(e)
    assert not errors, errors


# The state a stop signal leaves when it comes just before accept() or recv() enters the kernel: its
# C-level handler has run (here in another thread, as the main thread blocks it), and nothing
# interrupts the main thread's wait; only the byte the handler writes to the wake-up pipe can end it.
HANDLED_IN_ANOTHER_THREAD = """
import signal, threading
STOPS = {signal.SIGINT, signal.SIGTERM}
threading.Thread(target=threading.Event().wait, daemon=True).start()  # the stop signals reach this thread
signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)  # and never the main thread, which may not unblock them
unpatched = signal.pthread_sigmask
signal.pthread_sigmask = lambda how, mask: unpatched(how, set(mask) - STOPS if how == signal.SIG_UNBLOCK else mask)
"""


def group_fds(pgid):
    """How many descriptors the processes of the server's group hold."""
    total = 0
    for pid in group_pids(pgid):
        try:
            total += len(os.listdir("/proc/{}/fd".format(pid)))
        except OSError:
            pass  # the process ended while we looked
    return total


def settled_fds(pgid):
    """The group's descriptor count once it has not changed for a few readings
    (workers forked after the port line are running, a finished child has left)."""
    count = steady(lambda: group_fds(pgid))
    assert count is not None, "the group's descriptors never settled: {}".format(group_fds(pgid))
    return count


def roundtrip(server, payload):
    """Connect, echo payload, half-close; return (echoed bytes, whether the server then closed)."""
    with server.connect() as sock:
        echoed = exchange(sock, payload)
        sock.shutdown(socket.SHUT_WR)
        try:
            closed = sock.recv(1) == b""
        except OSError:
            closed = False
    return echoed, closed


def port_is_free(port):
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def client(*args, timeout=TIMEOUT * 6, prelude=None):
    """Run client.py with args and return its CompletedProcess. Past timeout it gets
    SIGINT (so that --all stops the servers it started), then its group is killed.
    prelude: Python code run first, in the same process (to patch client.py or the
    standard library); client.py's worker processes are forked and inherit it."""
    command = [str(ROOT / "client.py"), *args]
    if prelude:
        command = ["-c", "import sys; sys.path.insert(0, {!r}); sys.argv = {!r}\n{}\nimport client\n"
                         "sys.exit(client.main())".format(str(ROOT), command, prelude)]
    env = dict(os.environ, ECHO_TESTS_RUN=RUN)  # inherited by the servers --all starts: see echo_processes()
    proc = subprocess.Popen([*PYTHON, *command], stdin=subprocess.DEVNULL, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            pass
        kill_group(proc.pid)  # its worker processes too
        proc.communicate()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def client_json(*args, timeout=TIMEOUT * 6, prelude=None):
    """client.py with args and --json, which must succeed without a traceback: (figures, stderr)."""
    result = client(*args, "--json", timeout=timeout, prelude=prelude)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), result.stderr


def python_with_client(code, timeout=TIMEOUT):
    """Run code in a python3 of its own that has imported client.py (as `client`): its CompletedProcess."""
    return subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, {!r}); import client\n{}".format(
        str(ROOT), code)], capture_output=True, text=True, timeout=timeout)


RUN = str(os.getpid())  # marks what this test run's client.py started, apart from any other suite's


def echo_processes():
    """The pids of the echo_ scripts that a client.py of this test run started (its
    environment carries ECHO_TESTS_RUN): another suite on the machine does not count."""
    found, mark = set(), "ECHO_TESTS_RUN={}".format(RUN).encode() + b"\0"
    for pid, *_ in proc_stats():
        try:
            with open("/proc/{}/cmdline".format(pid), "rb") as f:
                named = b"echo_" in f.read()
            with open("/proc/{}/environ".format(pid), "rb") as f:
                if named and mark in f.read() + b"\0":
                    found.add(pid)
        except OSError:
            pass
    return found


def echoes(server, payload):
    """True when a fresh connection gets payload back exactly and then EOF."""
    try:
        return roundtrip(server, payload) == (payload, True)
    except OSError:
        return False



def held_row(server, failed=None, kib=None, kernel=None, held=None, connect=None, memory_unread=None):
    """A row of client.py --all --json for a held run, made up (HELD_SCHEMA's figures): the server's KiB a held
    connection, the kernel's, the connections held and the seconds they took to connect."""
    if failed:
        return {"server": server, "failed": failed}
    before = 10240
    return {"server": server, "failed": None, "held_connections": held, "connect_phase_s": connect,
            "server_memory_kind": "PSS", "server_memory_before_kib": before,
            "server_memory_held_kib": None if kib is None else before + kib * held,
            "server_kib_per_held": kib, "kernel_memory_kind": "slabinfo", "kernel_slab_before_kib": 50000,
            "kernel_slab_held_kib": None if kernel is None else 50000 + kernel * held, "kernel_kib_per_held": kernel,
            "memory_unread": memory_unread, "client_memory_kib": 30000, "errors": 0}


def held_record():
    """bench/held.py's records, made up: held-10k on five servers, then 1,000 for the three that did not hold it, the
    most under a 20,000 descriptor limit for the single process that did, and c100k for the worker processes (after
    held-10k again, as client.py runs it)."""
    def run(n, scenario, rows):
        return {"held": n, "command": "python3 client.py --all ...", "servers": [r["server"] for r in rows],
                "results": {"machine": "Some CPU, 2 cores, Python 3.11.7, Linux", "sweeps": [], "tables": [
                    {"scenario": scenario, "workload": {}, "server_work": 0, "rows": rows}]}}
    fork = "a process per connection: thousands of forks, about 1 MB each"
    record = {"machine": "Some CPU, 2 cores, Python 3.11.7, Linux", "python": "3.11.7", "linux": "6.1",
            "when": "2026-12-01 23:00 UTC", "commit": "abc1234", "changed": [], "descriptors": 20000, "seconds": 600,
            "not_run": {"echo_epoll.py": "one process may hold 20,000 descriptors here (its hard limit), not 100,000 "
                                         "connections: held at 19,000 instead"},
            "runs": [run(10000, "held-10k", [
                held_row("echo_epoll.py", kib=0.12, kernel=4.6, held=10000, connect=0.9),
                held_row("echo_reuseport.py", kib=1.4, kernel=4.5, held=10000, connect=1.1),
                held_row("echo_fork.py", failed="9,000 of 20,000 messages echoed; 1,000 reset; the pattern's limit: "
                                               + fork),
                held_row("echo_select.py", failed="2,048 of 20,000 messages echoed; 8,976 closed by the server; the "
                                                 "pattern's limit: select() watches descriptors below 1024 only"),
                held_row("echo_simple.py", failed="1 of 20,000 messages echoed; 9,999 no echo within 30 s; the "
                                                 "pattern's limit: it serves one client at a time")]),
                run(1000, "custom", [
                    held_row("echo_fork.py", kib=1277.4, kernel=4.7, held=1000, connect=2.5),
                    held_row("echo_select.py", kib=0.31, kernel=4.6, held=1000, connect=0.1),
                    held_row("echo_simple.py", failed="1 of 2,000 messages echoed; 999 no echo within 10 s; the "
                                                     "pattern's limit: it serves one client at a time")]),
                run(19000, "custom", [held_row("echo_epoll.py", kib=0.11, kernel=4.6, held=19000, connect=1.8)]),
                run(100000, "c100k", [held_row("echo_reuseport.py --workers 7", kib=0.63, kernel=4.4, held=100000,
                                               connect=19.6)])]}
    # client.py runs held-10k again before c100k, on the same servers: its run keeps both tables, c100k's last.
    again = held_row("echo_reuseport.py --workers 7", kib=1.5, kernel=4.5, held=10000, connect=1.2)
    record["runs"][-1]["results"]["tables"].insert(0, {"scenario": "held-10k", "workload": {}, "server_work": 0,
                                                       "rows": [again]})
    return record


def queue_capacity(backlog):
    """How many connections this kernel completes for a listener of that backlog that accepts none."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(backlog)
        probes = [socket.socket() for _ in range(backlog + 8)]
        try:
            for probe in probes:
                probe.setblocking(False)
                probe.connect_ex(listener.getsockname())
            # Loopback handshakes take microseconds and a dropped SYN waits 1 s: the count settles at once.
            return steady(lambda: len(selectors_writable(probes)), interval=0.02)
        finally:
            for probe in probes:
                probe.close()


def selectors_writable(socks):
    with selectors.DefaultSelector() as selector:
        for sock in socks:
            selector.register(sock, selectors.EVENT_WRITE)
        return [key.fileobj for key, _ in selector.select(0)]
