# SPDX-License-Identifier: 0BSD
"""Single process, single thread, multiple clients (asyncio).

The one idea: coroutines on one event loop, with the loop's socket API
(sock_accept, sock_recv_into, and add_writer to wait for room to send): each
client gets a task that reads like the blocking loop of echo_simple.py, and
`await` hands the thread to another task wherever this one would block.
Trade-off: no thread per client and no stall on a slow reader, but every
operation goes through the event loop's machinery, which costs CPU.
Run: python3 echo_asyncio.py [--port 7777], then python3 client.py
Builds on: echo_simple.py (echo_asyncio_streams.py is the usual high-level form).
"""
import argparse
import asyncio
import contextlib
import errno
import os
import select
import signal
import socket
import sys
import time

if sys.version_info < (3, 10):  # the oldest the pack supports: older ones fail further on, with a traceback
    sys.exit("{}: needs Python 3.10 or newer; this is Python {}".format(sys.argv[0], sys.version.split()[0]))

try:  # POSIX: queued() reads the kernel's send queue with them, and says 0 elsewhere
    import fcntl
    import termios
except ImportError:
    fcntl = termios = None

BACKLOG = 256  # the article's backlog; --backlog sets another
BUFSIZE = 65536  # the article read 512 bytes; 64 KiB moves big payloads in fewer calls
LOG_BYTES = 64  # a log line shows at most this much of a chunk
ACCEPTS_PER_WAKEUP = 100  # as asyncio: drain the listen queue, but let clients run in between

stopping = False  # set by the first Ctrl-C or SIGTERM: each client then finishes and half-closes
waiting = set()  # the clients whose task waits for their next chunk
tasks = set()  # the clients' tasks, which a stop waits for
spare_buffers = []  # buffers lent to one chunk each, given back once it is sent (borrowed_buffer())
drained = memoryview(bytearray(BUFSIZE))  # what a stop drains is dropped: every client may read into this one


async def accept(server_sock):  # the article's accept(loop, sock): asyncio.run() makes the loop, so ask for it
    loop = asyncio.get_running_loop()
    # A stop signal's note cancels this task from inside the loop: no KeyboardInterrupt.
    on_stop_signals(asyncio.current_task())
    log("Ready For Accept")
    server_sock.setblocking(False)  # the loop's socket API needs non-blocking sockets
    try:
        while True:
            for _ in range(ACCEPTS_PER_WAKEUP):
                try:
                    new_sock, address = await loop.sock_accept(server_sock)
                except OSError as e:
                    shed_connection(server_sock, e)
                    # sock_accept() would fail again at once (EMFILE, even with no client): never spin.
                    await ready(server_sock, loop.add_reader, loop.remove_reader)
                    continue
                log("[FD:{}]Accept:{}", new_sock.fileno(), peer(address))
                # The article's ensure_future() kept no reference: a task could vanish mid-connection.
                task = asyncio.create_task(recv_send(loop, new_sock))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            # The accept storm: sock_accept() does not yield while clients queue, so let the others run.
            await asyncio.sleep(0)
    except asyncio.CancelledError:
        log("Shutdown")
    server_sock.close()
    await stop_clients(lambda sock: sock.shutdown(socket.SHUT_WR))


async def recv_send(loop, sock):  # the article's name and parameters
    fd = sock.fileno()
    sock.setblocking(False)
    # One timer per connection, stamped per chunk: asyncio.timeout() around each await costs far more.
    deadline = Deadline(fd, asyncio.current_task().cancel)
    try:
        # An idle client holds no buffer: it borrows one once it has sent something (False once a stop came).
        while await wait_for_chunk(ready(fd, loop.add_reader, loop.remove_reader), sock, deadline):
            with borrowed_buffer() as buffer:
                data = buffer[:await loop.sock_recv_into(sock, buffer)]
                if not data:  # nothing read is EOF, the client's close: the loop ends
                    break
                log("[FD:{}]Recv:{!r}", fd, bytes(data[:LOG_BYTES]))
                sum(range(WORK))  # --work: the CPU cost of handling a chunk
                await send_all(sock, data, deadline)
        if stopping:
            await half_close_then_drain(sock, drained, deadline)
        log("[FD:{}]Recv:EOF", fd)
    except OSError as e:  # a reset or vanished client ends only its own connection
        log("[FD:{}]Error:{}", fd, e.strerror)
        # asyncio keeps e, and its traceback this frame: a cycle that lasts until a full collection.
        e.__traceback__ = None
    finally:
        deadline.cancel()
        sock.close()


async def send_all(sock, data, deadline):
    """The article's sock_sendall(), as a loop of send(): while the kernel's buffers are full,
    wait until the client reads; each time it makes room, that is progress, so a client that
    takes its echo slowly is alive."""
    loop = asyncio.get_running_loop()
    while data:
        try:
            data = data[sock.send(data):]
        except BlockingIOError:
            await ready(sock, loop.add_writer, loop.remove_writer)
            deadline.moved = time.monotonic()


async def ready(sock, add, remove):
    """Wait until sock is ready: add and remove are the loop's add_reader and
    remove_reader (for a listening socket, until a client waits) or _writer; True.
    A client waiting for each chunk is given by number: asyncio spells out a
    socket object it does not watch yet (its repr()), at a cost each time."""
    future = asyncio.get_running_loop().create_future()
    add(sock, future.set_result, True)
    try:
        return await future
    finally:
        remove(sock)


# ---- Below, to main(), the plumbing: each function is the same in every echo_*.py that has it. ----

QUIET, WORK, TIMEOUT, GRACE = False, 0, 120.0, 2.0  # the flags -q, --work, --timeout and --grace (start_listening())
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM) + ((signal.SIGBREAK,) if hasattr(signal, "SIGBREAK") else ())
stop_signals = []  # each of them (Ctrl-C, SIGTERM, Windows' Ctrl-Break), as its handler noted it (start_listening())
signal_watcher = None  # the task that reads those notes (on_stop_signals())
log_prefix = ""  # a worker process's log lines begin with its PID
log_token = spare_fd = None  # start_listening(): the log's token (print_line()), a descriptor to shed on EMFILE
KEEPALIVE_IDLE = 60  # keep_alive(): seconds quiet before the first probe,
KEEPALIVE_INTERVAL = 15  # seconds between probes,
KEEPALIVE_COUNT = 4  # probes unanswered before the peer is dropped


async def wait_for_chunk(receiving, sock, deadline):
    """Await receiving, a read of sock's next chunk, where the stop finds the client; stamp the deadline.
    What it read, or 0 once a stop came: a chunk that came as the stop half-closed it is dropped."""
    if stopping:
        receiving.close()  # never to run: no "never awaited" warning
        return 0
    waiting.add(sock)  # where the stop finds it, to half-close it at once
    try:
        received = await receiving
    finally:
        waiting.discard(sock)
    deadline.moved = time.monotonic()
    return 0 if stopping else received


async def half_close_then_drain(sock, buffer, deadline):
    """Stopping, every echo written: half-close, then read and discard until the client closes or
    the grace ends (close() with unread input would send RST)."""
    sock.shutdown(socket.SHUT_WR)
    while await asyncio.get_running_loop().sock_recv_into(sock, buffer):
        deadline.moved = time.monotonic()


@contextlib.contextmanager
def borrowed_buffer():
    """A buffer lent for one chunk, given back once it is sent (as echo_select_pool.py's spare buffers):
    an idle client holds none, and no fresh object per recv(), shrunk to what came, fragments the heap."""
    buffer = spare_buffers.pop() if spare_buffers else memoryview(bytearray(BUFSIZE))
    try:
        yield buffer
    finally:
        spare_buffers.append(buffer)


async def stop_clients(shut):
    """The stop, by a flag, not a cancel (a task cancelled mid-send loses count of what it sent): shut(client)
    half-closes each client waiting for a chunk, which has every echo; the others half-close once they have
    sent what they read. The grace over, asyncio.run() cancels the tasks left; each closes its connection."""
    global stopping
    stopping = True
    for client in waiting:
        with contextlib.suppress(OSError):  # a client that reset meanwhile
            shut(client)
    if tasks:
        await asyncio.wait(tasks, timeout=GRACE)


class Deadline:
    """A connection's one timer (none with --timeout 0): it re-arms itself TIMEOUT after the last progress,
    or, if none came since, logs Timeout and calls expire(). Progress: a chunk read or sent (the connection
    stamps `moved`), or fewer bytes waiting for the client, in its buffer (held()) or the kernel's (queued())."""

    def __init__(self, fd, expire, held=lambda: 0):
        self.fd, self.expire, self.held, self.timer = fd, expire, held, None
        self.moved, self.left = time.monotonic(), (0, 0)
        if TIMEOUT:
            self.timer = asyncio.get_running_loop().call_later(TIMEOUT, self.check)

    def check(self):
        left = (self.held(), queued(self.fd))
        if any(now < before for now, before in zip(left, self.left)):  # the client took some echo
            self.moved = time.monotonic()
        self.left = left
        quiet = time.monotonic() - self.moved
        if quiet < TIMEOUT:
            self.timer = asyncio.get_running_loop().call_later(TIMEOUT - quiet, self.check)
        else:
            log("[FD:{}]Timeout", self.fd)
            self.expire()

    def cancel(self):
        if self.timer:
            self.timer.cancel()


def queued(fd):
    """The bytes the kernel holds until the client acknowledges them (Linux's SIOCOUTQ; 0 where the platform
    does not say). Linux says "writable" only with a third of the buffer free: the rest may drain unseen."""
    try:
        return int.from_bytes(fcntl.ioctl(fd, termios.TIOCOUTQ, bytes(4)), sys.byteorder)
    except (AttributeError, OSError):  # no fcntl (Windows), or not for sockets (macOS)
        return 0


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


def on_stop_signals(task):
    """Cancel task (the accept loop) at the first stop signal that start_listening()'s handler notes, and
    again a turn of the loop after a second: two cancels that come before the task runs count as one. Each
    signal writes a byte (signal.set_wakeup_fd) to a socket pair that wakes the loop, whichever it is (the
    proactor's too), and a task of the loop reads the note. No loop.add_signal_handler(): loop.close() would
    give SIGTERM its default action back, and a signal then would kill the server; noted, it changes nothing."""
    global signal_watcher
    loop = asyncio.get_running_loop()
    wake, woken = socket.socketpair()
    wake.setblocking(False)  # set_wakeup_fd() asks for it
    woken.setblocking(False)
    signal.set_wakeup_fd(wake.fileno(), warn_on_full_buffer=False)  # full: a byte waits already

    async def take_notes():
        try:  # asyncio.run() cancels this task once the server is done
            taken = 0
            while True:
                while taken < len(stop_signals):
                    taken += 1
                    if taken == 1:
                        task.cancel()
                    else:
                        loop.call_soon(task.cancel)
                await loop.sock_recv(woken, 512)
        finally:  # a later signal is only noted: no byte goes to a pair about to close ("Broken pipe")
            signal.set_wakeup_fd(-1)
            wake.close()
            woken.close()
    signal_watcher = asyncio.create_task(take_notes())


def run_selector_loop(coroutine):
    """asyncio.run(coroutine), on a selector loop: sock_sendall() as a loop of send() waits for room
    with add_writer(), which Windows' default loop (the proactor) lacks. Windows' selector loop does
    not hear a signal while it waits: on_stop_signals()'s socket pair, which a signal writes to, ends it."""
    if not hasattr(asyncio, "ProactorEventLoop"):  # elsewhere, asyncio's loop is a selector loop
        return asyncio.run(coroutine)
    if not hasattr(asyncio, "Runner"):  # Python 3.10: no loop factory for asyncio.run()
        coroutine.close()  # never to run: no "never awaited" warning
        sys.exit("{}: needs Python 3.11 or newer here; try echo_asyncio_streams.py".format(sys.argv[0]))
    with asyncio.Runner(loop_factory=asyncio.SelectorEventLoop) as runner:
        return runner.run(coroutine)


def main():
    server_sock = start_listening(argument_parser().parse_args())
    print_port_line(server_sock)
    with server_sock:
        try:
            # asyncio.run() for the article's SelectorEventLoop + run_until_complete(): it also ends the tasks left.
            run_selector_loop(accept(server_sock))
        except asyncio.CancelledError:  # a second signal cut the grace short
            sys.exit(1)


if __name__ == "__main__":
    main()
