# SPDX-License-Identifier: 0BSD
"""What the benchmarks share, and the harness the tests import from here: client.py (loaded from its file)
and its counter of a server's CPU; a server started from a copy of its script (Server) and looked at from
outside (its group's processes and workers), talked to over TCP or TLS; a client.py run's figures, messages
per server CPU-second with server and client pinned to a core each, a server file at a git revision, and a
table printed as it is measured. It imports nothing from tests/ (it hands a TLS server the test certificate,
tests/tls/), and nothing but client.py and the standard library: tests/helpers.py imports the harness from here and
adds what only the tests use."""
import importlib.util
import json
import os
import platform
import re
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
import unittest
from pathlib import Path

try:
    import resource  # Server's rlimits; Windows' CPython has no resource module
except ImportError:
    resource = None

ROOT = Path(__file__).resolve().parent.parent


def load_client():
    """client.py as a module, loaded from its file (the same module wherever it was imported first)."""
    if "client" not in sys.modules:
        spec = importlib.util.spec_from_file_location("client", ROOT / "client.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["client"] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:  # not a half-run module for the next importer: its own error again
            del sys.modules["client"]
            raise
    return sys.modules["client"]


client = load_client()

SERVERS = sorted(p.name for p in ROOT.glob("echo_*.py"))
PROCESS_SERVERS = {"echo_fork.py", "echo_prefork.py", "echo_reuseport.py", "echo_selectors_process.py",
                   "echo_shared_socket.py"}
TIMEOUT = 10.0  # the bound on any single wait of the harness
# The interpreter that runs the servers: ECHO_PYTHON, a command (the tests' Windows lane: "wine
# /path/to/python.exe", see DEVELOPMENT.md), else the one running this. The harness itself always runs
# here, on Linux: it reads /proc, sets rlimits and signals process groups.
PYTHON = shlex.split(os.environ.get("ECHO_PYTHON", "")) or [sys.executable]
# Wine's CPython cannot start with a file as a standard stream (init_sys_streams: WinError 6): it gets
# pipes, which threads copy to the files the harness reads.
PIPED = PYTHON[0] != sys.executable
# Servers that speak only TLS (client.py's list): Server passes them the test certificate, and connect() wraps.
TLS_SERVERS = client.TLS_SERVERS
CERT, KEY = client.TEST_CERT, client.TEST_KEY  # tests/tls/README


def needs_proc(what="/proc"):
    """Where there is no /proc (macOS), raise unittest.SkipTest with the reason: a test stops there,
    skipped (pytest takes SkipTest as its own skip; what it checked before still held), and so does a
    benchmark. The harness reads /proc only through this."""
    if not os.path.isdir("/proc/self"):
        raise unittest.SkipTest("reads {}, which this system does not have".format(what))


def skip_where_unavailable(script, args=()):
    """Raise unittest.SkipTest where script's pattern cannot run, as needs_proc() does (the server would
    say so in one line and exit: test_missing_platform_feature_is_one_clear_line); never on Linux, which
    has them all."""
    import select
    if script == "echo_epoll.py" and not hasattr(select, "epoll"):
        missing = "epoll"
    elif script == "echo_reuseport.py" and not sys.platform.startswith("linux"):
        missing = "Linux's SO_REUSEPORT"
    elif script == "echo_shared_socket.py" and "exclusive" in args and not hasattr(select, "EPOLLEXCLUSIVE"):
        missing = "EPOLLEXCLUSIVE"
    else:
        return
    raise unittest.SkipTest("{} needs {}, which this system does not have".format(script, missing))


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


def reset(sock):
    """Close sock with a TCP reset instead of the orderly FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def kill_group(pgid):
    """SIGKILL a process group (one started in a session of its own), if anything is left of it."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class Server:
    """One echo server started as a subprocess from a copy of its script in an empty folder."""

    def __init__(self, script, folder, args=(), rlimits=None, prelude=None, source=None, wrap=(), python=(),
                 cores=(), interpreter=None, inside=None, env=None, program=None):
        """source: the file to copy (default: ROOT / script), e.g. a changed copy to try out;
        wrap: a command that execs the server (`ip netns exec NS`, `chroot ROOT`), so that it keeps the pid;
        python: the interpreter's own flags (`-X dev`); cores: the CPUs it runs on, with every process and
        thread it starts (pin()); interpreter: the command that runs it, where not PYTHON (another Python);
        inside: folder as the server sees it (in a chroot); env: its whole environment, where not ours;
        program: a whole command line that serves instead of a copy of script (any echo server, e.g. one in C:
        pinned_sweep.py's --ceiling), run where we are with --port 0 and args added; script then only names it."""
        skip_where_unavailable(script, args)
        self.script = script
        self.tls = script in TLS_SERVERS or "--cert" in args  # connect() wraps its sockets
        copy = Path(folder) / script
        if not program:
            shutil.copy(source or ROOT / script, copy)  # proves the file runs alone
        self.out_path, self.err_path = Path(folder) / "stdout", Path(folder) / "stderr"
        pinned = pin(cores)

        def limit():  # runs in the child before exec: {resource.RLIMIT_X: soft limit}, then the cores
            for which, soft in (rlimits or {}).items():
                resource.setrlimit(which, (soft, resource.getrlimit(which)[1]))
            if pinned:
                pinned()
        path = str(Path(inside) / script if inside else copy)
        command = [path, "--port", "0", *tls_args(script), *args]
        if prelude:  # Python code that patches the standard library, run before the server
            command = ["-c", "{}\nimport runpy, sys\nsys.argv = {!r}\nrunpy.run_path({!r}, run_name='__main__')".format(
                prelude, command, path)]
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            streams = (subprocess.PIPE, subprocess.PIPE) if PIPED else (out, err)
            self.proc = subprocess.Popen([*program, "--port", "0", *args] if program else
                                         [*wrap, *(interpreter or PYTHON), *python, *command],
                                         cwd=None if program else folder, env=env,
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
        return client.group_cpu(self.pid, settle=0.1)


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
    return [(p.pid, p.ppid, p.pgrp, p.state) for p in client.processes() or ()]


def group_pids(pgid):
    return [pid for pid, _, pgrp, _ in proc_stats() if pgrp == pgid]


def group_gone(pgid, timeout=3.0):
    """True once no process is left in the group (bounded wait). After the leader has exited, its
    children are no longer its children (they are re-parented): the group still holds them."""
    return wait_until(lambda: not group_pids(pgid), timeout)


def children_of(pid, states="RSD"):
    return sorted(p for p, ppid, _, state in proc_stats() if ppid == pid and state in states)


def wait_for_workers(pid, count):
    """The pids of a pool server's count workers, once all are up (bounded wait; asserts)."""
    found = []

    def all_up():
        found[:] = children_of(pid)  # one /proc reading a poll
        return len(found) == count
    assert wait_until(all_up), "{} workers wanted, the parent has {}".format(count, found)
    return found


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


def recv_exactly(sock, size):
    """Read until size bytes arrived or EOF."""
    received = bytearray()
    while len(received) < size:
        data = sock.recv(min(size - len(received), 65536))
        if not data:
            break
        received += data
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


def group_cpu_seconds(pgid):
    """The CPU seconds that process group pgid (a server and every process it started) has used so far:
    client.py's group_cpu(), schedstat's nanoseconds for live threads, ticks for those that have exited."""
    needs_proc()
    return client.group_cpu(pgid).seconds


# The server on one core, client.py on the other; None where the system lets no process choose (macOS,
# where the tests import the harness too) or has no second core.
SERVER_CORE, CLIENT_CORE = (sorted(getattr(os, "sched_getaffinity", lambda pid: ())(0)) + [None, None])[:2]


def pin(cores):
    """The one way bench/ pins a process: a preexec_fn that puts the child, with every process and thread it
    starts, on cores (CPU numbers); None where none is named (unpinned, or a system that lets no process choose)."""
    cores = {core for core in cores or () if core is not None}
    return (lambda: os.sched_setaffinity(0, cores)) if cores else None


def provenance():
    """Where and with what a measurement ran, as its record names it: the machine (client.machine(): the CPU,
    cores, Python build), the Python, Linux, when, the commit and the files that differed from it."""
    return {"machine": client.machine(), "python": platform.python_version(), "linux": platform.release(),
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": git("rev-parse", "--short", "HEAD"),
            "changed": changed_files()}


class Measured:
    """A client.py run's record (run_client()): figures, what it printed with --json ({"failed": why} where it
    printed none); out and returncode, its output as printed and its exit status (negative: killed by a signal);
    command; cores, where it was pinned; wall_s and load_cpu_s, the time around it and the CPU of
    it and every process it waited for (getrusage); server_cpu_s and leader_cpu_s, the CPU of the server's
    process group meanwhile and of its first process alone (None where no server was named); provenance()."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


def run_client(args=(), cores=(), server=None, timeout=600, meanwhile=None, label=None, script=None, command=None,
               cwd=None, stderr=subprocess.PIPE):
    """The one way bench/ runs a measurement: `client.py ARGS --json` (script: another client.py file; command:
    a whole command line instead, another load that prints JSON) in a session of its own, pinned to cores (pin());
    meanwhile() runs first, while it measures; past timeout seconds, or if anything fails, its process group gets
    SIGINT (client.py --all stops its servers), then SIGKILL 10 s on; stderr=None leaves its stderr on ours. With
    server (a pid that leads its process group), that group's CPU is read before and after (client.py's counter:
    threads that have ended count too). With label, any failure, error or lost message ends the benchmark, named by
    label. Returns its record, a Measured."""
    command = command or [sys.executable, str(script or ROOT / "client.py"), *args, "--json"]
    children, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    if server:
        needs_proc()
        before = client.group_cpu(server)
    proc = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=stderr, text=True, start_new_session=True,
                            preexec_fn=pin(cores))
    out = err = ""
    try:
        if meanwhile:
            meanwhile()
        out, err = proc.communicate(timeout=timeout)
        try:
            figures = json.loads(out)
        except ValueError:
            figures = {"failed": "client.py printed no figures" + (
                ": " + err.strip()[-200:] if err is not None else " (its stderr says why)")}
    except subprocess.TimeoutExpired:
        figures = {"failed": "client.py did not finish in {:g} s".format(timeout)}
    finally:  # past its bound, or stopped: SIGINT first, as Ctrl-C, so that it stops what it started (--all's
        if proc.poll() is None:  # servers, each in a session of its own), then SIGKILL; what it printed is kept
            os.killpg(proc.pid, signal.SIGINT)
            try:
                out, err = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, err = proc.communicate()
    run = Measured(figures=figures, out=out, returncode=proc.returncode, command=command,
                   cores=sorted(c for c in cores or () if c is not None),
                   wall_s=time.monotonic() - started, server_cpu_s=None, leader_cpu_s=None, provenance=provenance())
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    run.load_cpu_s = after.ru_utime - children.ru_utime + after.ru_stime - children.ru_stime
    if server:
        after = client.group_cpu(server)
        run.server_cpu_s = after.seconds - before.seconds
        run.leader_cpu_s = dict((p, s) for p, _, s in after.each).get(server, 0.0) - dict(
            (p, s) for p, _, s in before.each).get(server, 0.0)
    if label and ("failed" in figures or figures["errors"] or figures["messages"] != figures["expected"]):
        sys.exit("{}: {}".format(label, figures.get("failed") or "{} errors, {} of {} messages".format(
            figures["errors"], figures["messages"], figures["expected"])))
    return run


def interpreter_name(where):
    """An interpreter as the documents name it, without this machine's paths: "pyenv's 3.11.7",
    "python3.15 in a chroot", or its file's name."""
    if where.startswith("chroot:"):
        return "{} in a chroot".format(os.path.basename(where.rsplit(":", 1)[1]))
    pyenv = re.search(r"/\.pyenv/versions/([^/]+)/", where)
    return "pyenv's {}".format(pyenv.group(1)) if pyenv else os.path.basename(where)


def without_paths(text):
    """bench/python_versions.py's text with no path of the machine it ran on: each --python's interpreter
    as PATH (chroot:ROOT:PATH), each interpreter named in parentheses by interpreter_name()."""
    text = re.sub(r"(--python [^=\s]+=)(chroot:)?[^\s`]+",
                  lambda m: m.group(1) + ("chroot:ROOT:PATH" if m.group(2) else "PATH"), text)
    return re.sub(r"\(`?((?:chroot:|/)[^`)\s]*)`?\)", lambda m: "({})".format(interpreter_name(m.group(1))), text)


def git(*args):
    """What git prints for args, run in the repository, stripped: the commit a measurement names, or what differs;
    "" where there is no git (a copy of the files, or CI's Debian root, which has none)."""
    try:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def changed_files():
    """The files of what a measurement runs (the servers, client.py, bench/'s scripts, the tests) that differ from
    the commit checked out (HEAD), by name: where there are any, the commit is not what ran."""
    return git("diff", "--name-only", "HEAD", "--", "echo_*.py", "client.py", "bench/*.py", "tests/*.py").split()


def file_at(revision, script, folder):
    """Write the repository's script as it was at revision into folder; return its path."""
    path = Path(folder) / script
    path.write_bytes(subprocess.run(["git", "-C", str(ROOT), "show", "{}:{}".format(revision, script)],
                                    capture_output=True, check=True).stdout)
    return path


def table(head, rows, markdown=None):
    """Print the head lines, then each Markdown row as it comes (rows is measured as it is read);
    with markdown, also write the whole table to that file."""
    lines = list(head)
    print("\n".join(lines), flush=True)
    for line in rows:
        print(line, flush=True)
        lines.append(line)
    if markdown:
        Path(markdown).write_text("\n".join(lines) + "\n")


STRESS_PATTERN = bytes(range(251)) * 1045  # 262 KB; a message is a slice of it at a random offset


def pending(pid, signum):
    """True while signum waits to be delivered to the process (or taken by its sigwait()); False where there is
    no /proc to ask."""
    try:
        with open("/proc/{}/status".format(pid)) as f:
            masks = [int(line.split()[1], 16) for line in f if line.startswith(("SigPnd:", "ShdPnd:"))]
    except OSError:
        return False
    return any(mask >> (signum - 1) & 1 for mask in masks)


def stop_under_load(script, folder, rng, second, clients=20, grace=10.0, python=()):
    """Issue 48's stress of the stop: clients echo messages of random sizes, each waiting for all of its
    echo before the next; 0-50 ms after they start, SIGTERM or SIGINT (one at random). With second, a
    second signal follows 0-100 ms later, and the clients hold their sockets until it went (0.1 s more). Returns None
    when the stop kept every promise, else what went wrong: each client's bytes before EOF are an exact
    prefix of what it sent, and EOF comes (a reset only after a second signal); one signal: exit status 0
    within a second of the last client's close; two: 1 within a second of the second; no traceback, no
    process left in the server's group."""
    # A backlog that holds every client: echo_simple.py serves one at a time, the others wait queued.
    server = Server(script, folder, ["-q", "--grace", str(grace), "--backlog", str(clients)], python=python)
    try:
        server.wait_for_port()
        socks = [server.connect() for _ in range(clients)]
        second_sent, problems, closed = threading.Event(), [], []

        def client(sock):
            sent, received = bytearray(), bytearray()
            try:
                with sock:
                    try:
                        while True:
                            start = rng.randrange(len(STRESS_PATTERN) - 1)
                            message = STRESS_PATTERN[start:start + rng.choice((1, 100, 4096, 65536, 200000))]
                            sock.sendall(message)
                            sent += message
                            while len(received) < len(sent):
                                data = sock.recv(1 << 20)
                                if not data:
                                    raise EOFError
                                received += data
                    except EOFError:
                        if second:  # and a moment more: the second is taken before the stop could end without it
                            second_sent.wait(TIMEOUT)
                            time.sleep(0.1)
            except OSError as e:
                if not second:
                    problems.append("a client got {!r} before EOF".format(e))
            finally:
                closed.append(time.monotonic())
            if received != sent[:len(received)]:
                problems.append("an echo not exact: {} bytes back, not a prefix of the {} sent".format(
                    len(received), len(sent)))

        for sock in socks:
            sock.settimeout(grace + 5)
        threads = [threading.Thread(target=client, args=(sock,), daemon=True) for sock in socks]
        for thread in threads:
            thread.start()
        time.sleep(rng.uniform(0, 0.050))
        first = rng.choice((signal.SIGTERM, signal.SIGINT))
        server.proc.send_signal(first)
        signalled = time.monotonic()
        if second:  # once the first was taken: two of one kind pending at once are one (a server blocks them)
            time.sleep(rng.uniform(0, 0.100))
            wait_until(lambda: not pending(server.pid, first))
            server.proc.send_signal(rng.choice((signal.SIGTERM, signal.SIGINT)))
            signalled = time.monotonic()
            second_sent.set()
        status = server.wait(grace + 5)
        exited = time.monotonic()
        for thread in threads:
            thread.join(TIMEOUT)
        if status is None:
            return "no exit within the grace and 5 s"
        if second and (status != 1 or exited - signalled > 1):
            return "exit status {} {:.2f} s after a second signal".format(status, exited - signalled)
        if not second and (status != 0 or exited - max(closed, default=exited) > 1 or exited - signalled > grace + 1):
            return "exit status {} {:.2f} s after its clients closed, {:.2f} s after the signal".format(
                status, exited - max(closed, default=exited), exited - signalled)
        if problems:
            return problems[0]
        if "Traceback" in server.stderr():
            return "a traceback: " + server.stderr()[-500:]
        if not group_gone(server.pid):
            return "a process left in its group"
        return None
    finally:
        server.kill()
