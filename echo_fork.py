# SPDX-License-Identifier: 0BSD
"""Multiple processes, single thread each, multiple clients (a fork per connection).

The one idea: the parent only accepts; each connection gets a child process
of its own (os.fork) that runs the blocking loop of echo_simple.py, and the
parent reaps finished children on SIGCHLD so none lingers as a zombie.
Trade-off: simple code and real isolation, but a fork per connection is
costly, and thousands of clients mean thousands of processes.
Run: python3 echo_fork.py [--port 7777], then python3 client.py
Builds on: echo_simple.py.
"""
import argparse
import atexit
import contextlib
import errno
import math
import os
import select
import signal
import socket
import sys
import time

if sys.version_info < (3, 10):  # the oldest the pack supports: older ones fail further on, with a traceback
    sys.exit("{}: needs Python 3.10 or newer; this is Python {}".format(sys.argv[0], sys.version.split()[0]))

BACKLOG = 256  # the article's backlog; --backlog sets another
BUFSIZE = 65536  # the article read 512 bytes; 64 KiB moves big payloads in fewer calls
LOG_BYTES = 64  # a log line shows at most this much of a chunk

connections = {}  # each connection served -> True while it waits for a chunk, False while echoed


def accept_loop(server_sock):
    # Reap each child as it ends (waitpid(WNOHANG)): the article never did, and zombies piled up.
    signal.signal(signal.SIGCHLD, lambda signum, frame: finished_children())
    wakeup_pipe()
    log("Ready For Accept")
    while True:
        try:
            new_sock, address = wait_for_client(server_sock) and server_sock.accept()  # a stop signal ends this wait
        except OSError as e:
            shed_connection(server_sock, e)
            continue
        with new_sock:  # closes the parent's copy: the child has its own
            start_worker(server_sock, new_sock, address)


def send_recv_loop(sock):
    # One buffer, read into again and again: a fresh one per recv() fragments the heap (RESULTS.md).
    buffer = memoryview(bytearray(BUFSIZE))
    try:
        # The deadline is wait_ready()'s, not a socket timeout: recv() would wait on after a stop signal (PEP 475).
        # recv() returns b"" at EOF, as the article tested (data == b'').
        while wait_to_receive(sock) and (data := buffer[:sock.recv_into(buffer)]) and keep_echoing(sock):
            log("Recv:{!r}", bytes(data[:LOG_BYTES]))
            sum(range(WORK))
            while data:  # the article's send() could send only part of it
                try:
                    data = data[sock.send(data):]
                except BlockingIOError:
                    data = data[wait_for_room(sock, data):]
        log("Recv:EOF")
    except TimeoutError:
        log("Timeout")
    except OSError as e:
        log("Error:{}", e.strerror)


def start_worker(server_sock, sock, address):
    """Fork a child to serve this client; it leaves with os._exit() so it never runs the parent's code."""
    global log_prefix
    # Held across fork(): Python clears, in a new child, the signals that came before its handler: SIGTERM waits.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, PARENT_SIGNALS)
    try:
        pid = os.fork()
    except OSError as e:  # the article's else: (Fork Fail) expected a pid below 0; os.fork() raises instead
        log("Fork:{}: connection shed", e.strerror)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return
    if pid == 0:
        try:
            log_prefix = "[PID:{}]".format(os.getpid())
            server_sock.close()
            take_child_signals()
            # Logged here, not in the parent: the child could serve a quick client first.
            log("Accept:{}", peer(address))
            with serving(sock):
                send_recv_loop(sock)
        finally:
            os._exit(0)
    children[pid] = address
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)


# ---- Below, to main(), the plumbing: each function is the same in every echo_*.py that has it. ----

QUIET, WORK, TIMEOUT, GRACE = False, 0, 120.0, 2.0  # the flags -q, --work, --timeout and --grace (start_listening())
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM) + ((signal.SIGBREAK,) if hasattr(signal, "SIGBREAK") else ())
stop_signals = []  # each of them (Ctrl-C, SIGTERM, Windows' Ctrl-Break), as its handler noted it (start_listening())
log_prefix = ""  # a worker process's log lines begin with its PID
log_token = spare_fd = None  # start_listening(): the log's token (print_line()), a descriptor to shed on EMFILE
stopping, grace_end = False, math.inf  # the first Ctrl-C or SIGTERM sets both: see stop_noted()
wakeup_sock = None  # the socket a signal writes a byte to (wakeup_pipe()): every wait_ready() watches it
KEEPALIVE_IDLE = 60  # keep_alive(): seconds quiet before the first probe,
KEEPALIVE_INTERVAL = 15  # seconds between probes,
KEEPALIVE_COUNT = 4  # probes unanswered before the peer is dropped
# What a parent waits for: it blocks these and takes them in take_signal(), never in a handler
# (none where there is no SIGCHLD: main() says in a line that the pattern cannot run there).
PARENT_SIGNALS = STOP_SIGNALS + ((signal.SIGCHLD,) if hasattr(signal, "SIGCHLD") else ())
children = {}  # pid of each child -> the arguments it was started with


def take_child_signals():
    """A child's stop: its parent's SIGTERM, noted by stop_child(), ends wait_ready()'s waits through a
    wake-up pipe of the child's own (the parent's wakes the parent). Set while the signals are held (across
    fork()); then they come in, Ctrl-C ignored: the parent relays it as SIGTERM, so a worker counts one stop."""
    wakeup_pipe()
    stop_signals.clear()  # what the parent noted before it forked is the parent's to act on
    signal.signal(signal.SIGTERM, stop_child)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group
    signal.pthread_sigmask(signal.SIG_UNBLOCK, PARENT_SIGNALS)


def wait_for_client(server_sock):
    """True once a client is queued, after a wait a stop signal ends; once one is noted, KeyboardInterrupt
    when none is: the loop takes only the clients already queued."""
    if server_sock.getblocking():  # once: a blocking accept() would wait on after a stop signal (PEP 475)
        server_sock.setblocking(False)
    while not (stop_signals or wait_ready(server_sock)):
        pass
    if stop_signals and not select.select([server_sock], [], [], 0)[0]:
        raise KeyboardInterrupt
    return True


@contextlib.contextmanager
def serving(sock):
    """As `with sock:`, non-blocking (its waits are wait_ready()'s; a thread's socket gets a timeout instead),
    and out of `connections` (which the thread servers' cut() reads) before it is closed."""
    sock.setblocking(False)
    with sock:
        try:
            yield
        finally:
            connections.pop(sock, None)


def wait_to_receive(sock):
    """True once recv() has a chunk or EOF, after a wait a stop signal ends (a thread waits in recv() itself:
    the main thread's cut() ends it); TimeoutError after TIMEOUT s. Stopping, our write side is shut and
    what comes is dropped: False at EOF or the grace's end (the loop closes it, and takes any client
    still queued only to close it: a FIN, where an exit would have the kernel reset it)."""
    connections[sock] = True  # all its echo is sent: a stop may shut our write side from here on
    while True:
        if stop_noted():  # read first: a second stop signal ends the server here, even after the grace
            sock.shutdown(socket.SHUT_WR)
        if time.monotonic() >= grace_end:
            return False
        ready = sock.gettimeout() != 0 or wait_ready(sock, until_grace_end(TIMEOUT))
        if ready is None and not stopping:
            raise TimeoutError
        if ready and not stopping:
            return True
        if ready and not sock.recv(BUFSIZE):  # stopping: dropped; b"": the client has closed
            return False


def keep_echoing(sock):
    """True, to echo what recv() returned; False if a stop came meanwhile (wait_to_receive() drops the rest)."""
    connections[sock] = False  # in the middle of an echo: a stop lets it finish
    return not stopping or wait_to_receive(sock)


def wait_for_room(sock, data):
    """A send() found no room: wait for some in wait_ready(), at most TIMEOUT (once stopping, to the grace's
    end), and say 0 bytes went, for the loop to send again. Linux says "writable" only once a third of the
    buffer is free: at the deadline, one more send() decides, and what it sent is said; TimeoutError if
    nothing went."""
    stop_noted()  # a second stop signal ends the server here, a first starts the grace
    if wait_ready(sock, until_grace_end(TIMEOUT), write=True) is not None:
        return 0
    try:
        return sock.send(data)
    except BlockingIOError:
        raise TimeoutError from None


def stop_child(signum, frame):
    """A child's SIGTERM, from its parent's stop: noted once, for stop_noted() to start the grace. A
    second (a kill of the whole group, as systemd's) is the parent's to act on: it changes nothing here."""
    stop_signals[:] = [signum]


def until_grace_end(timeout):
    """A wait's timeout in seconds, None for none (as TIMEOUT's 0 says), cut to what is left of the grace
    once stopping (0 or less once it is over): a blocking loop ends the grace by its waits' timeouts."""
    left = grace_end - time.monotonic()  # math.inf until a stop
    return left if left < (timeout or math.inf) else timeout or None


def stop_noted():
    """True once a stop signal is noted (stop_signals): the first sets `stopping` and starts the grace; a
    second, or two at once, ends the server here, exit status 1 (log() flushed every line)."""
    global stopping, grace_end
    if len(stop_signals) > 1:
        os._exit(1)
    if stop_signals and not stopping:
        stopping, grace_end = True, time.monotonic() + GRACE
    return stopping


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


def create_server_socket(host, port, backlog):
    # The host decides the family: 127.0.0.1 is IPv4, ::1 is IPv6, a name what it resolves to.
    family, _, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    # proto as getaddrinfo() says (TCP, not 0): asyncio sets TCP_NODELAY only on a socket that says TCP.
    server_sock = socket.socket(family, socket.SOCK_STREAM, proto)
    # Lets a restarted server bind at once while old connections sit in TIME_WAIT. Windows' SO_REUSEADDR
    # would also let a second server take the port: SO_EXCLUSIVEADDRUSE there (it binds at once anyway).
    server_sock.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_EXCLUSIVEADDRUSE", socket.SO_REUSEADDR), 1)
    keep_alive(server_sock)  # every accepted connection inherits it
    server_sock.bind(address)
    server_sock.listen(backlog)
    return server_sock


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


def wakeup_pipe():
    """Have each signal that has a handler write a byte to a socket (signal.set_wakeup_fd; a
    socket pair, as Windows takes no pipe there): a wait that watches it ends even when the
    signal came just before it. A forked child calls it again: a pair of its own, its parent's closed."""
    global wakeup_sock
    read_end, write_end = socket.socketpair()
    read_end.setblocking(False)  # whoever waits on it empties it, never waiting
    write_end.setblocking(False)  # set_wakeup_fd() asks for it: a full buffer drops the byte
    parents = signal.set_wakeup_fd(write_end.detach())
    if wakeup_sock is None:
        atexit.register(lambda: wakeup_sock.close())
        # Runs first at exit (the last registered): a later signal is only noted, no byte to a closed pair.
        atexit.register(lambda: socket.close(signal.set_wakeup_fd(-1)))
    else:
        wakeup_sock.close()
        socket.close(parents)
    wakeup_sock = read_end


def wait_ready(sock, timeout=None, write=False):
    """Wait until sock is readable (writable, with write=True): True; False if only a signal's byte came;
    None after timeout seconds (None: no limit). A handler runs between two bytecodes, so a
    signal that came just before accept() or recv() entered the kernel would be heard only once
    that call returned, maybe never (PEP 475): its byte ends this wait."""
    timeout = None if timeout is None else max(timeout, 0)  # 0: a look, no wait (the grace is over)
    if hasattr(select, "poll"):  # not select(): descriptors may go past FD_SETSIZE
        poller = select.poll()
        poller.register(sock, select.POLLOUT if write else select.POLLIN)
        poller.register(wakeup_sock, select.POLLIN)
        ready = [fd for fd, _ in poller.poll(None if timeout is None else timeout * 1000)]
    else:  # Windows: select() takes sockets only, as these two are
        readable, writable, _ = select.select([wakeup_sock] + [sock] * (not write), [sock] * write, [], timeout)
        ready = [ready_sock.fileno() for ready_sock in readable + writable]
    if wakeup_sock.fileno() in ready:
        wakeup_sock.recv(512)  # emptied; the handler itself runs by the caller's next turn
    return sock.fileno() in ready if ready else None


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
    args = argument_parser().parse_args()
    if not hasattr(os, "fork"):
        sys.exit("{}: needs os.fork(), which this platform lacks; try echo_thread.py".format(sys.argv[0]))
    server_sock = start_listening(args)
    print_port_line(server_sock)
    with server_sock:
        try:
            accept_loop(server_sock)
        except KeyboardInterrupt:
            stop_children()


if __name__ == "__main__":
    main()
