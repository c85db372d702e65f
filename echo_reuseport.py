# SPDX-License-Identifier: 0BSD
"""Multiple processes, single thread each, multiple clients (SO_REUSEPORT, Linux).

The one idea: each worker process has a listening socket of its own, all bound
to one port with SO_REUSEPORT, and the kernel spreads new connections across
them: no shared accept lock as in echo_prefork.py. Each worker runs the
non-blocking loop of echo_selectors.py, so every core serves many clients.
The parent opens the sockets (so --port 0 gives one port to all) and keeps
them: a worker that dies is replaced, and its queued connections wait for it.
Trade-off: Linux only; the kernel balances by a hash of the connection, not by
load, so one busy worker can be handed more than its share. A second server
on the same port joins the first without a word and takes its share of new
connections (half, with as many workers): that is how a restart without
downtime works, and how a forgotten server splits a measurement.
Run: python3 echo_reuseport.py [--port 7777] [--workers N], then python3 client.py
Builds on: echo_selectors.py (and echo_prefork.py's pool of workers, below the banner).
"""
import argparse
import atexit
import collections
import contextlib
import errno
import itertools
import math
import os
import select
import selectors
import signal
import socket
import sys
import time
import traceback

if sys.version_info < (3, 10):  # the oldest the pack supports: older ones fail further on, with a traceback
    sys.exit("{}: needs Python 3.10 or newer; this is Python {}".format(sys.argv[0], sys.version.split()[0]))

BACKLOG = 256  # the article's backlog; --backlog sets another
BUFSIZE = 65536  # the article read 512 bytes; 64 KiB moves big payloads in fewer calls
LOG_BYTES = 64  # a log line shows at most this much of a chunk
MAX_BUFFER = 1 << 20  # stop reading a client while this much waits to go back to it
ACCEPTS_PER_WAKEUP = 100  # as asyncio: drain the listen queue, but let clients run in between


class Client:
    """A connection's state: the bytes to go back, whether it sent EOF, its stop ("", "sending", "half-closed")."""

    def __init__(self, sock):
        self.sock, self.outgoing, self.eof, self.stop = sock, bytearray(), False, ""


def create_server_socket(host, port, backlog):
    # The host decides the family: 127.0.0.1 is IPv4, ::1 is IPv6, a name what it resolves to.
    family, _, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    # proto as getaddrinfo() says (TCP, not 0): asyncio sets TCP_NODELAY only on a socket that says TCP.
    server_sock = socket.socket(family, socket.SOCK_STREAM, proto)
    # Lets a restarted server bind at once while old connections sit in TIME_WAIT.
    server_sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Lets every worker's socket bind the same port; the kernel shares connections among them.
    server_sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    keep_alive(server_sock)  # every accepted connection inherits it
    server_sock.bind(address)
    server_sock.listen(backlog)
    return server_sock


def accept_loop(server_sock):
    log("Ready For Accept")
    server_sock.setblocking(False)  # accept() until the queue is empty, never waiting
    selector = selectors.DefaultSelector()
    selector.register(server_sock, selectors.EVENT_READ)
    signals = wake_on_stop_signals(selector)
    deadlines = SelectorDeadlines(selector, TIMEOUT)
    while deadlines or deadlines.grace_end == math.inf:  # once stopping, until the last client is closed
        if first_stop_signal_in_worker(deadlines):  # the handler's note, read before each wait
            accept_clients(selector, server_sock, deadlines, time.monotonic())  # those queued get EOF, not a reset
            stop_and_flush_buffers(selector, server_sock, deadlines)
            continue
        ready = selector.select(deadlines.next_wakeup())
        now = time.monotonic()
        for key, events in ready:
            if key.data:
                deadlines.touch(key.fd, now)  # level-triggered: an event means bytes to read or room to send
                if (wanted := send_recv(key.data, events)) != key.events:
                    apply_wanted(selector, key, wanted, deadlines)
            elif key.fileobj is server_sock:
                accept_clients(selector, server_sock, deadlines, now)
            elif key.fileobj == signals:
                signals.recv(256)
        # Expire after the ready events: a loop that was busy never cuts a client whose bytes wait.
        deadlines.close_expired(now)


def accept_clients(selector, server_sock, deadlines, now):
    """Take the connections waiting in the listen queue."""
    for _ in range(ACCEPTS_PER_WAKEUP):  # the article took one per wake-up: a storm of connects overflows the queue
        try:
            new_sock, address = server_sock.accept()
        except BlockingIOError:
            return
        except OSError as e:
            shed_connection(server_sock, e)
            return
        new_sock.setblocking(False)
        selector.register(new_sock, selectors.EVENT_READ, Client(new_sock))
        deadlines.add(new_sock.fileno(), now)
        log("[FD:{}]Accept:{}", new_sock.fileno(), peer(address))


def send_recv(client, events):
    """Read what is ready and send what the kernel takes; return the events the
    client wants next: read while its buffer has room, write while bytes wait.
    Once the server stops: send what is left, half-close, then read and drop."""
    sock, fd = client.sock, client.sock.fileno()
    try:
        if events & selectors.EVENT_READ:
            data = sock.recv(BUFSIZE)
            if not data:  # EOF: send what remains, then close
                log("[FD:{}]Recv:EOF", fd)
                client.eof = True
            elif not client.stop:
                log("[FD:{}]Recv:{!r}", fd, data[:LOG_BYTES])
                sum(range(WORK))  # --work: the CPU cost of handling a chunk
                client.outgoing += data
        if client.outgoing:
            # Try at once, no wait for "writable"; send() may take only part (the article assumed all).
            sent = sock.send(client.outgoing)
            del client.outgoing[:sent]
        if client.stop == "sending" and not client.outgoing:
            half_close_flushed(client)
    except BlockingIOError:
        pass  # the kernel's send buffer is full: the rest waits for "writable"
    except OSError as e:  # a reset or vanished client ends only its own connection
        log("[FD:{}]Error:{}", fd, e.strerror)
        client.eof, client.outgoing = True, bytearray()
    # A full buffer stops reading (backpressure); so does the stop, until the last echo is out.
    want_read = not client.eof and len(client.outgoing) < MAX_BUFFER and client.stop != "sending"
    want_write = bool(client.outgoing)
    return (selectors.EVENT_READ if want_read else 0) | (selectors.EVENT_WRITE if want_write else 0)


def apply_wanted(selector, key, wanted, active):
    """The one place that applies what a connection wants next."""
    if not wanted:
        del active[key.fd]
        selector.unregister(key.fileobj)
        key.fileobj.close()
    elif wanted != key.events:
        selector.modify(key.fileobj, wanted, key.data)


# ---- Below, to main(), the plumbing: each function is the same in every echo_*.py that has it. ----

QUIET, WORK, TIMEOUT, GRACE = False, 0, 120.0, 2.0  # the flags -q, --work, --timeout and --grace (start_listening())
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM) + ((signal.SIGBREAK,) if hasattr(signal, "SIGBREAK") else ())
stop_signals = []  # each of them (Ctrl-C, SIGTERM, Windows' Ctrl-Break), as its handler noted it (start_listening())
log_prefix = ""  # a worker process's log lines begin with its PID
log_token = spare_fd = None  # start_listening(): the log's token (print_line()), a descriptor to shed on EMFILE
KEEPALIVE_IDLE = 60  # keep_alive(): seconds quiet before the first probe,
KEEPALIVE_INTERVAL = 15  # seconds between probes,
KEEPALIVE_COUNT = 4  # probes unanswered before the peer is dropped
FORK_RETRY = 1  # seconds before a parent whose fork() failed tries again
# What a parent waits for: it blocks these and takes them in take_signal(), never in a handler
# (none where there is no SIGCHLD: main() says in a line that the pattern cannot run there).
PARENT_SIGNALS = STOP_SIGNALS + ((signal.SIGCHLD,) if hasattr(signal, "SIGCHLD") else ())
children = {}  # pid of each child -> the arguments it was started with


class SelectorDeadlines(collections.OrderedDict):
    """fileno -> time.monotonic() of each client's last progress, oldest first (an OrderedDict finds
    its first entry at once; a dict skips the holes its deletions left), and the loop's clock: when
    select() must wake for the oldest client's deadline or for the end of the stop's grace."""

    def __init__(self, selector, limit):
        super().__init__()
        self.selector, self.limit = selector, limit or math.inf  # --timeout 0: no deadline
        # due: the earliest moment the oldest client (or the grace) can be due. Progress only moves that
        # later, so it is worked out again only once reached, not at every wake-up.
        self.due, self.grace_end = math.inf, math.inf
        self.now = time.monotonic()  # the time of the last wake-up

    def touch(self, fd, now):
        """Progress: the client's deadline moves on, and it goes to the end of the line."""
        self[fd] = now
        self.move_to_end(fd)

    def add(self, fd, now):
        """A newcomer: due at now + limit, so select() may have to wake sooner."""
        self[fd] = now
        self.due = min(self.due, now + self.limit)

    def start_grace(self, now):
        """The first stop signal: every client has GRACE seconds left, then the loop ends."""
        self.grace_end = now + GRACE
        self.due = min(self.due, self.grace_end)

    def next_wakeup(self):
        """select()'s timeout: until the oldest client or the grace may be due; None: no deadline."""
        return self.due - self.now if self.due < math.inf else None  # due > now: close_expired() saw to it

    def close_expired(self, now):
        """Close, with a log line, each client on which nothing moved for limit seconds (all of
        them once the grace is over); then work out when the oldest left is due."""
        self.now = now
        if self.due > now:  # the oldest (the others are newer) and the grace are not due: most wake-ups
            return
        idle = self.limit if now < self.grace_end else 0
        # The oldest come first, so this stops at the first one not due: no wake-up scans them all.
        expired = [fd for fd, last in itertools.takewhile(lambda item: item[1] + idle <= now, self.items())]
        for fd in expired:
            key = self.selector.get_key(fd)
            # Linux says "writable" once a third of the send buffer is free: a slow reader draining less
            # never wakes select(). So a last send() (none once the grace is over): bytes taken are progress.
            unsent = len(key.data.outgoing)
            wanted = send_recv(key.data, 0) if idle else 0
            if len(key.data.outgoing) < unsent:
                self.touch(fd, now)
            else:
                log("[FD:{}]Timeout", fd)
                wanted = 0
            apply_wanted(self.selector, key, wanted, self)
        self.due = min(next(iter(self.values()), math.inf) + idle, self.grace_end)


def first_stop_signal_in_worker(deadlines):
    """Read the note (stop_signals): True at the first stop signal, which starts the grace. The
    parent acts on a second one (it stops the workers that are left)."""
    if not stop_signals or deadlines.grace_end < math.inf:
        return False  # no stop signal, or a stop already under way
    deadlines.start_grace(time.monotonic())
    return True


def stop_and_flush_buffers(selector, listener, deadlines):
    """The first stop signal: accept no more, and flush each client's send buffer, then EOF.
    A flag, not an exception: one raised inside a send would lose count of what was sent."""
    log("Shutdown")
    with contextlib.suppress(KeyError):  # a listener another poll watches (EPOLLEXCLUSIVE) is not here
        selector.unregister(listener)
    listener.close()
    for key in [selector.get_key(fd) for fd in deadlines]:
        key.data.stop = "sending"
        apply_wanted(selector, key, send_recv(key.data, 0), deadlines)


def half_close_flushed(client):
    """The stop, once a client's send buffer is empty: TCP's half-close; what it still sends is
    read and dropped until it closes (or the grace ends)."""
    client.sock.shutdown(socket.SHUT_WR)
    client.stop = "half-closed"


def wake_on_stop_signals(selector):
    """The signal pipe, watched by the selector. A forked worker's stop signals, blocked since its
    fork() (fork_worker()), reach their handler from here: Python drops a signal that its newborn
    child takes before it can run the handler, so the mask kept it pending until the pipe was set."""
    signals = signal_pipe()
    selector.register(signals, selectors.EVENT_READ)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    return signals


def log(fmt, *args):
    """Print one of the article's log lines, unless -q, or the log has ended (print_line())."""
    if not QUIET:
        print_line(log_prefix + fmt.format(*args))


def print_line(line):
    """Write a line to stdout in one write, so that lines from several workers do not interleave. A write that
    fails (the log's reader gone, a full disk) ends the log, in one line on stderr: a server serves on without it."""
    global QUIET
    try:
        print(line + "\n", end="", flush=True)
    except OSError as e:
        QUIET = True  # log() writes no more, as with -q
        with contextlib.suppress(OSError):  # out of descriptors, or stderr gone too
            # What stays in stdout's buffer goes to os.devnull at exit, not into "Exception ignored".
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
            if os.read(log_token, 1):  # the first thread or worker process whose write failed says so
                print("{}: cannot write the log: {}; no more log lines, serving goes on".format(
                    sys.argv[0], e.strerror or e), file=sys.stderr, flush=True)


def peer(address):
    """A peer's address as the log writes it: host:port, an IPv6 host in brackets ([::1]:45696);
    ?:? where the system could not tell (asyncio's peername is None if the peer reset first)."""
    host, port = address[:2] if address else ("?", "?")
    return ("[{}]:{}" if ":" in host else "{}:{}").format(host, port)


def shed_connection(server_sock, error):
    """accept() failed. Out of descriptors, close a waiting client with the spare one: it hears at once, and
    accept() does not spin on a connection it can never take. Any other error (a client that left, ENOBUFS,
    EPROTO...) is one log line: accept(2) says to try again."""
    global spare_fd
    if error.errno not in (errno.EMFILE, errno.ENFILE):
        log("Accept:{}: trying again", error.strerror)
    elif select.select([server_sock], [], [], 0)[0]:  # only a client that waits: Linux says EMFILE before it looks
        os.close(spare_fd)
        with contextlib.suppress(OSError):  # the client left before we took it
            server_sock.accept()[0].close()
            log("Accept:{}: connection shed", error.strerror)
        spare_fd = os.open(os.devnull, os.O_RDONLY)
    elif server_sock.getblocking():  # none waits: accept() would fail at once, so wait for one, then try again
        select.select([server_sock], [], [])


def number(low, high, unit=""):
    """An argparse type: a whole number from low to high, or with a unit ("seconds") one with fractions."""
    def parse(text):
        with contextlib.suppress(ValueError):  # not a number at all
            value = float(text)  # nan and inf are in no range
            if low <= value <= high and (unit or text.removeprefix("-").isdecimal()):
                return value if unit else int(text)
        raise argparse.ArgumentTypeError("expected {} from {} to {}, got {!r}".format(
            unit or "a whole number", low, high, text))
    return parse


def argument_parser():
    """The flags every server takes; a lesson adds its own before parse_args()."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # A bad argument is one line on stderr, not argparse's usage block.
    parser.error = lambda message: parser.exit(2, "{}: error: {}\n".format(parser.prog, message))
    seconds = number(0, 10**6, "seconds")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on, IPv4 or IPv6 (::1); 0.0.0.0 or "
                        ":: exposes the server to your network (default: %(default)s)")
    parser.add_argument("--port", type=number(0, 65535), default=7777,
                        help="TCP port; 0 picks any free one (default: %(default)s)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the port line")
    parser.add_argument("--work", type=number(0, 10**9), default=0, metavar="N", help="compute sum(range(N)) per "
                        "chunk: a CPU load whose cost depends on the interpreter and its build (default: %(default)s)")
    parser.add_argument("--backlog", type=number(1, 65535), default=BACKLOG, metavar="N", help="connections the "
                        "kernel queues for accept(), capped by net.core.somaxconn (default: %(default)s)")
    parser.add_argument("--timeout", type=seconds, default=TIMEOUT, metavar="SECONDS", help="close a connection on "
                        "which no byte has moved either way for this long; 0: never (default: %(default)s)")
    parser.add_argument("--grace", type=seconds, default=GRACE, metavar="SECONDS", help="after Ctrl-C or SIGTERM, "
                        "time for the clients' last echoes; a second signal ends it at once (default: %(default)s)")
    return parser


def keep_alive(sock):
    """TCP keepalive on sock and the connections accepted from it (Linux, BSD, macOS) frees a peer that vanished
    without FIN or RST (a laptop shut, a NAT that forgot it) in 2 minutes, even with --timeout 0 (Go: 15 s)."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    # The idle time is TCP_KEEPIDLE on Linux and most others, TCP_KEEPALIVE on macOS.
    idle = getattr(socket, "TCP_KEEPIDLE", getattr(socket, "TCP_KEEPALIVE", None))
    for option, value in ((idle, KEEPALIVE_IDLE), (getattr(socket, "TCP_KEEPINTVL", None), KEEPALIVE_INTERVAL),
                          (getattr(socket, "TCP_KEEPCNT", None), KEEPALIVE_COUNT)):
        if option is not None:  # a platform without it keeps its own default
            sock.setsockopt(socket.IPPROTO_TCP, option, value)


def start_listening(args):
    """Apply the flags, have Ctrl-C and SIGTERM noted, and listen (print_port_line()
    then says so). A port in use or an unknown host is one line and exit status 1."""
    global QUIET, WORK, TIMEOUT, GRACE, spare_fd, log_token
    QUIET, WORK, TIMEOUT, GRACE = args.quiet, args.work, args.timeout, args.grace
    # Ctrl-C and SIGTERM (kill, systemd, docker stop) end the server, even where a shell started it with SIGINT
    # ignored. Their handler only notes them: the loop that waits does the stop, and sees one that came before it.
    for signum in STOP_SIGNALS:
        signal.signal(signum, lambda signum, frame: stop_signals.append(signum))
    try:
        server_sock = create_server_socket(args.host, args.port, args.backlog)
    except OSError as e:
        reason = "Address already in use" if e.errno == errno.EADDRINUSE else e.strerror or e  # Windows says it oddly
        sys.exit("{}: cannot listen on {}:{}: {}".format(sys.argv[0], args.host, args.port, reason))
    spare_fd = os.open(os.devnull, os.O_RDONLY)
    # One byte, its write end closed: the first read gets it, any later one b"" (threads, and worker
    # processes forked later, share the pipe): print_line() says once that the log has ended.
    log_token, token_end = os.pipe()
    os.write(token_end, b"x")
    os.close(token_end)
    return server_sock


def print_port_line(server_sock):
    """Say the server can serve, on the port read back (--port 0 picks one); with TLS, once the certificate loaded."""
    print_line("Server Run Port:{}".format(server_sock.getsockname()[1]))


def usable_cpu_count():
    """How many CPUs this process may run on: taskset's or a container's cpuset, where os.cpu_count() counts the
    machine's (a server pinned to 2 cores of 64 would start 64 workers)."""
    if hasattr(os, "process_cpu_count"):  # 3.13+: the affinity where there is one, and -X cpu_count
        return os.process_cpu_count() or 1
    if hasattr(os, "sched_getaffinity"):  # Linux before 3.13
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1  # elsewhere: the machine's


def fork_worker(serve, *args):
    """Fork a worker that runs serve(*args) and leaves with os._exit(), never running the
    parent's code; return its pid. A failed fork() (out of processes) is one log line and
    returns None: the parent goes on with the workers it has and tries again later."""
    global log_prefix
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # caught, not ignored: a worker's end is heard
    # Signals held across fork(): the parent takes them once it has noted the pid, the child inside try.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, PARENT_SIGNALS)
    try:
        pid = os.fork()
    except OSError as e:  # the article's else: (Fork Fail) expected a pid below 0; os.fork() raises instead
        log("Fork:{}: trying again in {} s", e.strerror, FORK_RETRY)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return None
    if pid == 0:
        try:
            log_prefix = "[PID:{}]".format(os.getpid())
            # A worker's signals must not go into its parent's wake-up pipe (echo_selectors_process.py's has one).
            signal.set_wakeup_fd(-1)
            # Ctrl-C reaches the whole group: the parent relays it as SIGTERM, so a worker counts one stop.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            # SIGTERM waits for serve()'s handler: sooner, it would end the worker before its queued clients.
            signal.pthread_sigmask(signal.SIG_UNBLOCK, set(PARENT_SIGNALS) - set(STOP_SIGNALS))
            serve(*args)
        except KeyboardInterrupt:
            pass
        except Exception:  # a bug: say where, not silently; the parent starts another worker
            traceback.print_exc()
            os._exit(1)
        finally:
            os._exit(0)
    children[pid] = args
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    return pid


def finished_children():
    """Reap every child that has ended (the article never did: zombies piled up), and
    say which: [(pid, status, the arguments it was started with), ...]."""
    ended = []
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:  # no child left at all: any still listed was reaped already
            children.clear()
            break
        if pid == 0:
            break  # the others are still running
        ended.append((pid, status, children.pop(pid, ())))
    return ended


def run_workers(serve, jobs):
    """The parent: fork a worker for each job (a tuple of arguments for serve), replace each
    one that ends, and raise KeyboardInterrupt on Ctrl-C or SIGTERM. It blocks its signals
    and takes them in take_signal(): no handler has to run, so none can be missed."""
    signal.pthread_sigmask(signal.SIG_BLOCK, PARENT_SIGNALS)
    waiting = list(jobs)
    while True:
        while waiting and fork_worker(serve, *waiting[-1]):
            waiting.pop()
        # Noted before the block, or taken now; a fork that failed is tried again after FORK_RETRY s.
        if stop_signals or take_signal(FORK_RETRY if waiting else None) in STOP_SIGNALS:
            raise KeyboardInterrupt
        for pid, status, args in finished_children():
            log("[PID:{}]Exit:{}: starting another worker", pid, status)
            waiting.append(args)  # the same arguments: a worker on a socket of its own gets it back


def signal_pipe():
    """A socket that receives a byte (the signal's number) for each signal that has a handler, so
    a loop waiting in select() wakes for it, even one that came just before the wait: the stop
    signals (start_listening()'s handler notes them), and SIGCHLD where fork_worker() catches it. The C-level
    handler writes it (signal.set_wakeup_fd). A socket pair: Windows' select() and set_wakeup_fd() take only sockets."""
    read_end, write_end = socket.socketpair()
    write_end.setblocking(False)  # set_wakeup_fd() asks for it: a full buffer drops the byte
    signal.set_wakeup_fd(write_end.detach())
    atexit.register(read_end.close)
    # Runs first at exit (the last registered): a later signal is only noted, no byte to a closed pair.
    atexit.register(lambda: socket.close(signal.set_wakeup_fd(-1)))
    return read_end


def take_signal(timeout=None):
    """Take the next of PARENT_SIGNALS, which the parent blocks, with no handler to run (none can be
    missed): its number, or None after timeout seconds (None: no limit). No SIGALRM to end the wait."""
    if timeout is None:
        return signal.sigwait(PARENT_SIGNALS)
    if hasattr(signal, "sigtimedwait"):
        taken = signal.sigtimedwait(PARENT_SIGNALS, max(timeout, 0))
        return taken and taken.si_signo
    end = time.monotonic() + timeout  # macOS has no sigtimedwait(): what is pending, every 10 ms
    while not signal.sigpending() & set(PARENT_SIGNALS):
        if time.monotonic() >= end:
            return None
        time.sleep(0.01)
    return signal.sigwait(PARENT_SIGNALS)


def stop_children():
    """Shut down: ask every child to finish (each gives its clients GRACE seconds to take their
    last echoes) and wait for them; one still there a second after that is killed outright, and
    a second Ctrl-C or SIGTERM kills them all at once (exit status 1). It blocks its signals and
    takes them in a wait whose timeout is its clock (take_signal()), never in a handler."""
    signal.pthread_sigmask(signal.SIG_BLOCK, PARENT_SIGNALS)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # no reaping handler: reaped here
    log("Shutdown")
    for pid in children:
        with contextlib.suppress(ProcessLookupError):  # it finished meanwhile
            os.kill(pid, signal.SIGTERM)
    deadline, again = time.monotonic() + GRACE + 1, len(stop_signals) > 1  # two noted before the block
    while not again:
        finished_children()
        left = deadline - time.monotonic()
        if not children or left <= 0:
            break
        again = take_signal(left) in STOP_SIGNALS  # SIGCHLD, or the time up: look again
    for pid in children:
        with contextlib.suppress(ProcessLookupError):  # it finished meanwhile
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    if again:
        sys.exit(1)


def main():
    parser = argument_parser()
    parser.add_argument("--workers", type=number(1, 10000), default=usable_cpu_count(), metavar="N",
                        help="worker processes (default: one per CPU it may run on, %(default)s)")
    args = parser.parse_args()
    if not (sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")):
        sys.exit("{}: SO_REUSEPORT load balancing is Linux-only; try {}".format(
            sys.argv[0], "echo_prefork.py" if hasattr(os, "fork") else "echo_selectors.py"))
    server_sock = start_listening(args)
    print_port_line(server_sock)
    # One socket per worker, all on the port the first one got: --port 0 gives one port to all.
    port = server_sock.getsockname()[1]
    try:
        server_socks = [server_sock] + [create_server_socket(args.host, port, args.backlog)
                                        for _ in range(args.workers - 1)]
    except OSError as e:  # --workers past the descriptor limit, say
        sys.exit("{}: cannot listen on {}:{}: {}".format(sys.argv[0], args.host, port, e.strerror or e))
    try:
        # Each worker on a socket of its own; one that ends is replaced on the same socket.
        run_workers(accept_loop, [(sock,) for sock in server_socks])
    except KeyboardInterrupt:
        for sock in server_socks:
            sock.close()  # the workers' copies close as each stops: then new clients are refused
        stop_children()


if __name__ == "__main__":
    main()
