# SPDX-License-Identifier: 0BSD
"""What the tests share: starting a server, talking to it, and looking at its processes."""
import functools
import json
import os
import shlex
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

try:
    import resource  # Server's rlimits; Windows' CPython has no resource module
except ImportError:
    resource = None

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import client as client_py  # noqa: E402  known once, in client.py: the TLS servers, the server's CPU (/proc)
SERVERS = sorted(p.name for p in ROOT.glob("echo_*.py"))
PROCESS_SERVERS = {"echo_fork.py", "echo_prefork.py", "echo_reuseport.py", "echo_selectors_process.py",
                   "echo_shared_socket.py"}
POOL_SERVERS = PROCESS_SERVERS - {"echo_fork.py"}  # a parent and a pool of worker processes
SELECT_SERVERS = {"echo_select.py", "echo_select_pool.py"}
TIMEOUT = 10.0  # the bound on any single wait in the tests
# The interpreter that runs the servers and client.py: ECHO_PYTHON, a command (the Windows lane:
# "wine /path/to/python.exe", see DEVELOPMENT.md), else the one running the tests. The tests
# themselves always run here, on Linux: they read /proc, set rlimits and signal process groups.
PYTHON = shlex.split(os.environ.get("ECHO_PYTHON", "")) or [sys.executable]
# Wine's CPython cannot start with a file as a standard stream (init_sys_streams: WinError 6): it gets
# pipes, which threads copy to the files the tests read.
PIPED = PYTHON[0] != sys.executable
WINE = any(os.path.basename(word) in ("wine", "wine64") for word in PYTHON)
# The patterns that need what only Unix has (fork, epoll, SCM_RIGHTS, SO_REUSEPORT...): where the
# interpreter lacks it, each says so in one line and exits 1 before listening.
UNIX_ONLY = {"echo_epoll.py", "echo_fork.py", "echo_prefork.py", "echo_reuseport.py", "echo_selectors_process.py",
             "echo_shared_socket.py"}
# Servers that speak only TLS (client.py's list): Server passes them the test certificate, and connect() wraps.
TLS_SERVERS = client_py.TLS_SERVERS
CERT, KEY = ROOT / "tests" / "tls" / "cert.pem", ROOT / "tests" / "tls" / "key.pem"  # tests/tls/README


def needs_proc(what="/proc"):
    """Skip the rest of the test, with the reason, where there is no /proc (macOS): the checks
    that read it are Linux's; what the test checked before this still held."""
    if not os.path.isdir("/proc/self"):
        import pytest  # here, not above: the benchmarks import this module without pytest
        pytest.skip("reads {}, which this system does not have".format(what))


def skip_where_unavailable(script, args=()):
    """Skip the test where script's pattern cannot run (the server would say so in one line and
    exit: test_missing_platform_feature_is_one_clear_line); never on Linux, which has them all."""
    import select
    if script == "echo_epoll.py" and not hasattr(select, "epoll"):
        missing = "epoll"
    elif script == "echo_reuseport.py" and not sys.platform.startswith("linux"):
        missing = "Linux's SO_REUSEPORT"
    elif script == "echo_shared_socket.py" and "exclusive" in args and not hasattr(select, "EPOLLEXCLUSIVE"):
        missing = "EPOLLEXCLUSIVE"
    else:
        return
    import pytest
    pytest.skip("{} needs {}, which this system does not have".format(script, missing))


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


def tls_args(script):
    """The flags that give a TLS server the test certificate (none for the others)."""
    return ["--cert", str(CERT), "--key", str(KEY)] if script in TLS_SERVERS else []


class TLSClient:
    """A TLS client on a TCP socket, used as the tests use a TCP one: one thread may send while
    another reads (exchange() does; an SSLSocket must not be used so: its SSL object is not safe
    from two threads at once, and crashed here), shutdown(SHUT_WR) is TLS's half-close
    (close_notify, then reading goes on), and the server's close_notify reads as EOF. The TLS is
    an ssl.SSLObject on memory buffers: no call of it touches the socket, so none can read the
    echo that SSLSocket.unwrap() would take as data after close_notify (and fail on). Other
    methods (settimeout, setsockopt, close...) are the TCP socket's."""

    def __init__(self, sock, context, server_hostname):
        self.sock, self.lock, self.send_lock = sock, threading.Lock(), threading.Lock()
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_hostname=server_hostname)
        self.plain, self.eof, self.unsent = bytearray(), False, b""  # decrypted, not yet returned
        try:
            while True:
                try:
                    self.tls.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    self._flush()
                    self._take(self.sock.recv(65536), during_handshake=True)
        finally:
            self._flush()  # the last flight, or the alert that says why it failed

    def __getattr__(self, name):
        return getattr(self.sock, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.sock.close()

    def _flush(self):
        """Send what the TLS object wrote (after what a non-blocking send() could not)."""
        with self.lock:
            self.unsent += self.outgoing.read()
        while self.unsent:
            sent = self.sock.send(self.unsent)  # BlockingIOError on a non-blocking socket: kept
            self.unsent = self.unsent[sent:]

    def _take(self, data, during_handshake=False):
        if not data:
            if during_handshake:
                raise ConnectionResetError("the server closed during the handshake")
            self.eof = True  # TCP's EOF without close_notify: EOF all the same here
        with self.lock:
            self.incoming.write(data)

    def sendall(self, data):
        with self.send_lock:
            with self.lock:
                self.tls.write(data)
            self._flush()

    def send(self, data):
        """All of data is taken (at most 16 KiB); what the kernel could not take waits for the next send()."""
        data = bytes(data[:16384])
        with self.send_lock:
            if self.unsent:
                self._flush()  # raises BlockingIOError while the kernel has no room: nothing taken
            with self.lock:
                self.tls.write(data)
            try:
                self._flush()
            except BlockingIOError:
                pass
        return len(data)

    def recv(self, buflen, flags=0):
        """Up to buflen bytes, as many as have come (a read of the TLS object returns one record)."""
        while True:
            with self.lock:
                while len(self.plain) < buflen and not self.eof:
                    try:
                        data = self.tls.read(buflen - len(self.plain))
                    except ssl.SSLWantReadError:
                        break
                    except ssl.SSLZeroReturnError:
                        data = b""
                    self.plain += data
                    self.eof = not data
                if self.plain or self.eof:
                    data, self.plain = bytes(self.plain[:buflen]), self.plain[buflen:]
                    return data
            self._take(self.sock.recv(max(buflen, 65536)))  # waits outside the lock: the sender goes on

    def shutdown(self, how):
        if how != socket.SHUT_WR:
            return self.sock.shutdown(how)
        with self.send_lock:
            with self.lock:
                while True:  # first what came: unwrap() must find no echo still to decrypt
                    try:
                        self.plain += self.tls.read(65536)
                    except (ssl.SSLWantReadError, ssl.SSLZeroReturnError):
                        break
                try:
                    self.tls.unwrap()
                except ssl.SSLWantReadError:
                    pass  # close_notify is written; the server's comes later
            self._flush()


def tls_wrap(sock, server_hostname="127.0.0.1", cafile=CERT):
    """sock after a TLS handshake with a server that the test certificate (cafile) vouches for,
    trusting nothing else (never the system's store: the tests stay hermetic)."""
    return TLSClient(sock, ssl.create_default_context(cafile=str(cafile)), server_hostname)


def wait_until(predicate, timeout=TIMEOUT, interval=0.01):
    """Poll predicate() until it returns something true, at most timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def steady(read, readings=5, interval=0.1, timeout=TIMEOUT):
    """read()'s value once it has not changed for that many readings in a row, interval seconds
    apart (polled at most timeout seconds); None if it never settled."""
    values = []

    def settled():
        values.append(read())
        return len(values) >= readings and len(set(values[-readings:])) == 1
    return values[-1] if wait_until(settled, timeout, interval) else None


def kill_group(pgid):
    """SIGKILL a process group (one started in a session of its own), if anything is left of it."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


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


class Server:
    """One echo server started as a subprocess from a copy of its script in an empty folder."""

    def __init__(self, script, folder, args=(), rlimits=None, prelude=None, source=None, wrap=(), python=()):
        """source: the file to copy (default: ROOT / script), e.g. a changed copy to try out;
        wrap: a command that execs the server (`ip netns exec NS`), so that it keeps the pid;
        python: the interpreter's own flags (`-X dev`)."""
        skip_where_unavailable(script, args)
        self.script = script
        self.tls = script in TLS_SERVERS or "--cert" in args  # connect() wraps its sockets
        copy = Path(folder) / script
        shutil.copy(source or ROOT / script, copy)  # proves the file runs alone
        self.out_path, self.err_path = Path(folder) / "stdout", Path(folder) / "stderr"
        def limit():  # runs in the child before exec: {resource.RLIMIT_X: soft limit}
            for which, soft in (rlimits or {}).items():
                resource.setrlimit(which, (soft, resource.getrlimit(which)[1]))
        command = [str(copy), "--port", "0", *tls_args(script), *args]
        if prelude:  # Python code that patches the standard library, run before the server
            command = ["-c", "{}\nimport runpy, sys\nsys.argv = {!r}\nrunpy.run_path({!r}, run_name='__main__')".format(
                prelude, command, str(copy))]
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            streams = (subprocess.PIPE, subprocess.PIPE) if PIPED else (out, err)
            self.proc = subprocess.Popen([*wrap, *PYTHON, *python, *command], cwd=folder,
                                         stdin=subprocess.DEVNULL, stdout=streams[0], stderr=streams[1],
                                         start_new_session=True, preexec_fn=limit)
        self.pid = self.proc.pid
        self.copiers = [copier(pipe, path) for pipe, path in ((self.proc.stdout, self.out_path),
                                                              (self.proc.stderr, self.err_path)) if pipe]

    def wait_for_port(self):
        """Read the port from the server's first line, waiting a bounded time for it."""
        wait_until(lambda: "\n" in self.stdout() or self.proc.poll() is not None)
        line = self.stdout().split("\n", 1)[0]
        assert line.startswith("Server Run Port:"), "no port line from {}: {!r} {!r}".format(
            self.script, self.stdout(), self.stderr())
        self.port = int(line.split(":")[1])
        return self

    def stdout(self):
        return self.out_path.read_text(errors="replace")

    def stderr(self):
        return self.err_path.read_text(errors="replace")

    def connect(self, timeout=TIMEOUT):
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        return tls_wrap(sock) if self.tls else sock

    def stop(self, signum=signal.SIGTERM, timeout=TIMEOUT):
        """Send signum; return the exit status, or None if it did not exit in time."""
        self.proc.send_signal(signum)
        return self.wait(timeout)

    def wait(self, timeout=TIMEOUT):
        """The exit status, or None if it has not exited within timeout seconds."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self):
        """SIGKILL the server's whole process group (it was started as its own session)."""
        kill_group(self.pid)
        self.proc.wait(TIMEOUT)
        for thread in self.copiers:
            thread.join(TIMEOUT)

    def cpu_seconds(self):
        return group_cpu_seconds(self.pid)

    def cpu(self):
        """The CPU of the server's process group so far, with its resolution (client.py's CPU)."""
        needs_proc()
        return client_py.group_cpu(self.pid, settle=0.1)


def copier(pipe, path):
    """A thread that copies what comes on pipe to the file at path as it comes, until EOF."""
    def copy():
        with pipe, open(path, "ab", buffering=0) as f:
            for data in iter(lambda: os.read(pipe.fileno(), 65536), b""):
                f.write(data)
    thread = threading.Thread(target=copy, daemon=True)
    thread.start()
    return thread


def proc_stats():
    """(pid, ppid, pgrp, state) for every process on the machine (client.py's reading of /proc)."""
    needs_proc()
    return [(p.pid, p.ppid, p.pgrp, p.state) for p in client_py.processes() or ()]


def group_pids(pgid):
    return [pid for pid, _, pgrp, _ in proc_stats() if pgrp == pgid]


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


def group_gone(pgid, timeout=3.0):
    """True once no process is left in the group (bounded wait). After the leader has exited, its
    children are no longer its children (they are re-parented): the group still holds them."""
    return wait_until(lambda: not group_pids(pgid), timeout)


def children_of(pid, states="RSD"):
    return sorted(p for p, ppid, _, state in proc_stats() if ppid == pid and state in states)


def wait_for_workers(pid, count):
    """The pids of a pool server's count workers, once all are up (bounded wait; asserts)."""
    workers = wait_until(lambda: len(children_of(pid)) == count and children_of(pid))
    assert workers, "{} workers wanted, the parent has {}".format(count, children_of(pid))
    return workers


def group_cpu_seconds(pgid):
    """The CPU seconds of process group pgid so far: client.py's group_cpu(), the one counter."""
    needs_proc()
    return client_py.group_cpu(pgid).seconds


def exchange(sock, payload, chunk=65536):
    """Write payload in chunks from a thread while reading here: return what came
    back (stopping at len(payload) bytes, EOF, or the socket's timeout)."""
    view = memoryview(payload)
    return send_while_reading(sock, [view[start:start + chunk] for start in range(0, len(view), chunk)])


def send_while_reading(sock, pieces):
    """One sendall() per piece from a thread, none waiting for a reply, while this
    thread reads until every byte came back, EOF, or the socket's timeout."""
    total = sum(map(len, pieces))

    def writer():
        try:
            for piece in pieces:
                sock.sendall(piece)
        except OSError:
            pass
    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    received = bytearray()
    try:
        while len(received) < total:
            data = sock.recv(1 << 20)
            if not data:
                break
            received += data
    except OSError:
        pass
    thread.join(TIMEOUT)
    return bytes(received)


def read_to_eof(sock, timeout=TIMEOUT):
    """Everything until EOF; raises what recv() raises (a reset, a timeout)."""
    sock.settimeout(timeout)
    received = bytearray()
    while True:
        data = sock.recv(1 << 20)
        if not data:
            return bytes(received)
        received += data


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


def reset(sock):
    """Close sock with a TCP reset instead of the orderly FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


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

