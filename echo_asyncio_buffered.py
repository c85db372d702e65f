# SPDX-License-Identifier: 0BSD
"""Single process, single thread, multiple clients (an asyncio BufferedProtocol).

The one idea: read into memory you already have. The stock transport calls
sock.recv(256 KiB) for every read: a fresh bytes object each time, then shrunk.
A BufferedProtocol hands asyncio a view of one preallocated buffer in
get_buffer(), the kernel copies straight into it, and buffer_updated(n) writes
those n bytes back. Everything else is echo_asyncio_protocol.py's. What that
saves depends on malloc: where each 256 KiB object is an mmap() and munmap()
(glibc's way until a larger block has been freed), this server did several
times the stock transport's messages per CPU-second at 4 KiB; where malloc keeps
such blocks on its heap, about the same (RESULTS.md, "Message sizes").
Every client reads into the same buffer, so an idle one holds none.
Trade-off: the buffer is yours to guard. While a transport still holds bytes
of it, it must not be read into again: a slow client takes it with its unsent
echo, and a fresh one takes its place.
Run: python3 echo_asyncio_buffered.py [--port 7777] [--uvloop], then python3 client.py
Builds on: echo_asyncio_protocol.py.
"""
import argparse
import asyncio
import contextlib
import errno
import os
import select
import signal
import socket
import ssl
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

stopping = False  # set by the first Ctrl-C or SIGTERM: each client then finishes and half-closes
connections = set()  # the clients' protocols, which a stop waits for
shared_buffer = memoryview(bytearray(BUFSIZE))  # every client's reads land here, one at a time


async def accept_loop(server_sock, backlog, context):
    """Serves until cancelled. asyncio's Server calls listen() again (a backlog of 100 unless told:
    the article's here) and accepts up to backlog waiting clients a wake-up. With --cert, it does the
    TLS handshake before our code sees the client, within --timeout (0 it refuses: None, its default)."""
    global stopping
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda loop, context: on_loop_error(server_sock, context))
    handshake = (TIMEOUT or None) if context else None
    server = await loop.create_server(EchoProtocol, sock=server_sock, backlog=backlog, ssl=context,
                                      ssl_handshake_timeout=handshake)
    # A stop signal's note cancels this task once it waits, from inside the loop: no KeyboardInterrupt.
    on_stop_signals(asyncio.current_task())
    log("Ready For Accept")
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        log("Shutdown")
    # Not serve_forever() or wait_closed() to wait for the clients: since 3.12 they do, before not.
    stopping = True
    server.close()
    for client in list(connections):
        client.stop()
    try:
        if connections:
            await asyncio.wait([client.closed for client in connections], timeout=GRACE)
    finally:  # the grace is over, or a second signal cut it short
        for client in list(connections):
            client.transport.abort()


class EchoProtocol(asyncio.BufferedProtocol):
    def connection_made(self, transport):
        self.transport = transport
        self.fd = transport.get_extra_info("socket").fileno()
        self.closed = asyncio.get_running_loop().create_future()
        # One timer per connection, stamped per chunk, not a call_later() per chunk: that costs far more.
        self.deadline = Deadline(self.fd, transport.abort, transport.get_write_buffer_size)
        connections.add(self)
        log("[FD:{}]Accept:{}", self.fd, peer(transport.get_extra_info("peername")))
        if stopping:  # accepted as the stop came
            self.stop()

    def get_buffer(self, sizehint):
        # Every client's reads land in one buffer: asyncio fills it and calls buffer_updated() at once.
        return shared_buffer

    def buffer_updated(self, nbytes):
        global shared_buffer
        self.deadline.moved = time.monotonic()
        if stopping:  # half-closed: what the client still sends is read only to be dropped
            return
        data = shared_buffer[:nbytes]
        log("[FD:{}]Recv:{!r}", self.fd, bytes(data[:LOG_BYTES]))
        sum(range(WORK))  # --work: the CPU cost of handling a chunk
        self.transport.write(data)
        # The trap: write() keeps what it cannot send, on 3.12+ as a view of *this* buffer (3.9-3.11: a copy),
        # which the next read, this client's or another's, would overwrite: leave it to the transport.
        if self.transport.get_write_buffer_size() > 0:
            shared_buffer = memoryview(bytearray(BUFSIZE))

    def pause_writing(self):  # the buffer passed its high-water mark: the client reads slowly
        self.transport.pause_reading()

    def resume_writing(self):
        """Read again. Stopping, every echo sent: half-close first, and read on only to discard
        (unless the client closed first: the transport is closing)."""
        if stopping and not self.transport.is_closing():
            with contextlib.suppress(OSError):  # a client that reset meanwhile
                half_close(self.transport)
        self.transport.resume_reading()

    def stop(self):
        """Stop reading until every echo is sent: with a high-water mark of 0, the transport
        calls pause_writing() while it holds a byte, and resume_writing() once it holds none.
        Not close(): with unread input, it would send RST."""
        self.transport.set_write_buffer_limits(0)
        if not self.transport.get_write_buffer_size():
            self.resume_writing()

    def eof_received(self):
        log("[FD:{}]Recv:EOF", self.fd)
        return False

    def connection_lost(self, exc):
        self.transport.abort()  # gone already; but 3.10's TLS transport, closed by the client, would warn
        connections.discard(self)
        self.deadline.cancel()
        self.closed.set_result(None)
        if exc is not None:  # a reset or vanished client ends only its own connection
            log("[FD:{}]Error:{}", self.fd, exc)


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


def half_close(writer):
    """TCP's half-close, once the transport has sent what it holds. asyncio has none for TLS:
    close() sends close_notify after what it holds, then waits for the client's (a second
    close() would drop the transport's hold on it). writer: a StreamWriter or a transport."""
    if writer.can_write_eof():
        writer.write_eof()
    elif not writer.is_closing():
        writer.close()


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


def tls_context(cert, key):
    """A server's TLS: 1.2 at least, the context's defaults otherwise. A certificate or key that
    cannot be loaded is one line, which says which and why, and exit status 1."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except ssl.SSLError as e:  # OpenSSL's words ("PEM lib", KEY_VALUES_MISMATCH) in the user's
        if e.reason in ("KEY_VALUES_MISMATCH", "NO_CERTIFICATE_ASSIGNED"):  # the latter: a key of another type
            sys.exit("{}: cannot load --cert {} --key {}: the key does not match the certificate".format(
                sys.argv[0], cert, key))
        try:  # "PEM lib": the certificate or the key. The certificate alone tells which.
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cert)
        except ssl.SSLError:
            sys.exit("{}: cannot load --cert {}: not a PEM file holding a certificate".format(sys.argv[0], cert))
        sys.exit("{}: cannot load --key {}: not a PEM file holding a private key".format(sys.argv[0], key))
    except OSError as e:  # the file is missing, unreadable, a folder...
        sys.exit("{}: cannot load --cert {} --key {}: {}".format(sys.argv[0], cert, key, e.strerror or e))
    return context


def on_loop_error(server_sock, context):
    """asyncio passes here what it would print as a traceback. Out of descriptors,
    its accept() pauses for a second: meanwhile shed a client that is waiting.
    Anything else is one log line."""
    error = context.get("exception")
    if isinstance(error, OSError) and error.errno in (errno.EMFILE, errno.ENFILE):
        shed_connection(server_sock, error)
    else:
        log("Error:{}: {}", context["message"], error or "")


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


def main():
    parser = argument_parser()
    parser.add_argument("--uvloop", action="store_true",
                        help="run on uvloop (pip install uvloop; the pack itself needs only the standard library)")
    parser.add_argument("--cert", metavar="FILE",
                        help="serve TLS with this certificate chain (PEM) and --key; a handshake must end "
                             "within --timeout (with 0, asyncio's default: 60 s) (default: plain TCP)")
    parser.add_argument("--key", metavar="FILE", help="the certificate's private key (PEM)")
    args = parser.parse_args()
    if bool(args.cert) != bool(args.key):
        parser.error("--cert and --key go together")
    run = asyncio.run
    if args.uvloop:
        try:
            import uvloop
        except ImportError:
            sys.exit("{}: --uvloop needs the uvloop package: pip install uvloop".format(sys.argv[0]))
        run = uvloop.run
    server_sock = start_listening(args)  # before the certificate is read: "port in use" reads the same
    with server_sock:
        try:
            context = tls_context(args.cert, args.key) if args.cert else None
            print_port_line(server_sock)
            run(accept_loop(server_sock, args.backlog, context))
        except asyncio.CancelledError:  # a second signal cut the grace short
            sys.exit(1)


if __name__ == "__main__":
    main()
