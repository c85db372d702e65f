# SPDX-License-Identifier: 0BSD
"""Single process, single thread, multiple clients (selectors, non-blocking, TLS).

The one idea: TLS in a non-blocking loop with the stdlib's ssl module. Each accepted
socket is wrapped without its handshake, which the loop then drives; a TLS call that
must first read or write (SSLWantReadError, SSLWantWriteError) says which event the
connection waits for; recv() returns at most one TLS record and keeps the rest where
select() cannot see it, so pending() is drained; a handshake must end within --timeout
of the accept, so a client that never finishes it holds nobody; once the last echo
is out, TLS's own close (close_notify).
Trade-off: CPU for a handshake per connection and for every byte (asyncio: ssl=).
Run: python3 echo_selectors_tls.py --cert cert.pem --key key.pem [--port 7777]
Builds on: echo_selectors.py.
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
import ssl
import sys
import time

if sys.version_info < (3, 10):  # the oldest the pack supports: older ones fail further on, with a traceback
    sys.exit("{}: needs Python 3.10 or newer; this is Python {}".format(sys.argv[0], sys.version.split()[0]))

BACKLOG = 256  # the article's backlog; --backlog sets another
# Less than a TLS record (up to 16 KiB): recv() returns at most one record, and what it leaves
# waits decrypted in the SSL object, unseen by select(). Reading less keeps that path in use here.
BUFSIZE = 4096
LOG_BYTES = 64  # a log line shows at most this much of a chunk
MAX_BUFFER = 1 << 20  # stop reading a client while this much waits to go back to it
ACCEPTS_PER_WAKEUP = 100  # as asyncio: drain the listen queue, but let clients run in between
# Where the selector is select() (Windows), it takes 512 sockets at most: clients past that are refused.
MAX_SOCKETS = 512 if selectors.DefaultSelector is selectors.SelectSelector else math.inf
HANDSHAKE_TIMEOUT = 60.0  # with --timeout 0 a handshake still has a limit: asyncio's default
NO_CERT = ("--cert FILE --key FILE are needed; to try it, make a self-signed pair: openssl req -x509 -newkey ec "
           "-pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 -subj /CN=localhost "
           "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout key.pem -out cert.pem")


class Client:
    """A connection's state: the bytes to go back, whether it sent EOF, its stop ("", "sending", "half-closed")."""

    def __init__(self, sock):
        self.sock, self.outgoing, self.eof, self.stop = sock, bytearray(), False, ""
        self.handshaking = True


def accept_loop(server_sock):
    log("Ready For Accept")
    server_sock.setblocking(False)  # accept() until the queue is empty, never waiting
    selector = selectors.DefaultSelector()
    selector.register(server_sock, selectors.EVENT_READ)
    signals = wake_on_stop_signals(selector)
    deadlines = SelectorDeadlines(selector, TIMEOUT)
    # Each handshake's accept, while it lasts: a total, so bytes that trickle in do not extend it.
    handshakes = SelectorDeadlines(selector, TIMEOUT or HANDSHAKE_TIMEOUT)
    while deadlines or handshakes or deadlines.grace_end == math.inf:  # once stopping, until the last is closed
        if first_stop_signal(deadlines):  # the handler's note, read before each wait
            stop_and_flush_buffers(selector, server_sock, deadlines)
            for fd in list(handshakes):  # nothing was echoed yet: nothing to lose
                apply_wanted(selector, selector.get_key(fd), 0, handshakes)
            continue
        due = min(deadlines.due, handshakes.due)
        ready = selector.select(due - deadlines.now if due < math.inf else None)
        now = time.monotonic()
        for key, events in ready:
            if key.data and not key.data.handshaking:
                deadlines.touch(key.fd, now)  # level-triggered: an event means bytes to read or room to send
                if (wanted := send_recv(key.data, events)) != key.events:
                    apply_wanted(selector, key, wanted, deadlines)
            elif key.data:
                wanted = send_recv(key.data, events)
                if not key.data.handshaking:  # done: from now on its deadline is the idle time's
                    del handshakes[key.fd]
                    deadlines.add(key.fd, now)
                apply_wanted(selector, key, wanted, handshakes if key.data.handshaking else deadlines)
            elif key.fileobj is server_sock:
                accept_clients(selector, server_sock, handshakes, now)
            elif key.fileobj == signals:
                signals.recv(256)
        # Expire after the ready events: a loop that was busy never cuts a client whose bytes wait.
        deadlines.close_expired(now)
        handshakes.close_expired(now)


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
        if selector_has_room(selector, new_sock):  # Windows' select() watches 512 sockets at most
            new_sock.setblocking(False)
            selector.register(new_sock, selectors.EVENT_READ, Client(new_sock))
            deadlines.add(new_sock.fileno(), now)
            log("[FD:{}]Accept:{}", new_sock.fileno(), peer(address))


def send_recv(client, events):
    """Take the handshake a step, read what is ready and send what the kernel takes; return
    the events the client wants next: read while its buffer has room, write while bytes
    wait, and what a TLS call asked for. Once the last echo is out: close_notify; if the
    server stops, then read and drop until the client closes."""
    sock, fd, tls_wants = client.sock, client.sock.fileno(), 0
    try:
        if client.handshaking:
            sock.do_handshake()
            client.handshaking = False
            log("[FD:{}]Handshake:{}", fd, sock.version())
        while events & selectors.EVENT_READ:
            try:
                data = sock.recv(BUFSIZE)
            except ssl.SSLWantReadError:
                break  # only part of a record has come: the rest wakes select()
            except ssl.SSLZeroReturnError:
                data = b""  # the client's close_notify, after ours (the stop)
            if not data:  # EOF: send what remains, then close
                log("[FD:{}]Recv:EOF", fd)
                client.eof = True
            elif not client.stop:
                log("[FD:{}]Recv:{!r}", fd, data[:LOG_BYTES])
                sum(range(WORK))  # --work: the CPU cost of handling a chunk
                client.outgoing += data
            if not sock.pending():  # else the rest of the record: select() would never say so
                break
        if client.outgoing:
            # Try at once, no wait for "writable"; send() may take only part (the article assumed all).
            sent = sock.send(client.outgoing)
            del client.outgoing[:sent]
        if (client.stop == "sending" or client.eof) and not client.outgoing and client.stop != "half-closed":
            close_notify(sock)
            client.stop = "half-closed"
    except (ssl.SSLWantReadError, ssl.SSLWantWriteError) as e:
        tls_wants = selectors.EVENT_WRITE if isinstance(e, ssl.SSLWantWriteError) else selectors.EVENT_READ
    except OSError as e:  # a reset or vanished client ends only its own connection
        log("[FD:{}]Error:{}", fd, e.strerror)
        client.eof, client.outgoing = True, bytearray()
    # A full buffer stops reading (backpressure); so does the stop, until the last echo is out.
    want_read = not client.eof and len(client.outgoing) < MAX_BUFFER and client.stop != "sending"
    want_write = bool(client.outgoing)
    return (selectors.EVENT_READ if want_read else 0) | (selectors.EVENT_WRITE if want_write else 0) | tls_wants


def close_notify(sock):
    """TLS's own close: send close_notify, and do not wait for the client's, which comes later
    (read and dropped) or never. Where it cannot go, or TLS failed after it, TCP's half-close:
    what comes then is read and dropped as bytes."""
    try:
        sock.unwrap()
    except ssl.SSLWantWriteError:
        raise  # no room in the kernel yet: again once writable
    except ssl.SSLWantReadError:
        pass  # ours is out
    except OSError:  # one that closed or reset; or ours went out, then unwrap() read data (the stop)
        with contextlib.suppress(OSError):  # ENOTCONN: a peer that reset it; nothing is left to half-close
            sock.shutdown(socket.SHUT_WR)


def apply_wanted(selector, key, wanted, active):
    """The one place that applies what a connection wants next."""
    if not wanted:
        del active[key.fd]
        selector.unregister(key.fileobj)
        key.fileobj.close()
    elif wanted != key.events:
        selector.modify(key.fileobj, wanted, key.data)


def tls_listener(server_sock, cert, key):
    """The listening socket wrapped: accept() returns TLS sockets whose handshake waits for the loop."""
    # No Nagle (inherited; asyncio sets it too): the first echo would wait for the tickets' delayed ACK.
    server_sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return tls_context(cert, key).wrap_socket(server_sock, server_side=True, do_handshake_on_connect=False)


# ---- Below, to main(), the plumbing: each function is the same in every echo_*.py that has it. ----

QUIET, WORK, TIMEOUT, GRACE = False, 0, 120.0, 2.0  # the flags -q, --work, --timeout and --grace (start_listening())
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM) + ((signal.SIGBREAK,) if hasattr(signal, "SIGBREAK") else ())
stop_signals = []  # each of them (Ctrl-C, SIGTERM, Windows' Ctrl-Break), as its handler noted it (start_listening())
log_prefix = ""  # a worker process's log lines begin with its PID
log_token = spare_fd = None  # start_listening(): the log's token (print_line()), a descriptor to shed on EMFILE
KEEPALIVE_IDLE = 60  # keep_alive(): seconds quiet before the first probe,
KEEPALIVE_INTERVAL = 15  # seconds between probes,
KEEPALIVE_COUNT = 4  # probes unanswered before the peer is dropped


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


def first_stop_signal(deadlines):
    """Read the note (stop_signals): True at the first stop signal, which starts the grace. A
    second one, or two at once, ends the server here, whatever is left unsent."""
    if len(stop_signals) > 1:
        os._exit(1)
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


def selector_has_room(selector, sock):
    """True where the selector can watch one more socket; else the client is refused, with a log line."""
    if len(selector.get_map()) < MAX_SOCKETS:
        return True
    log("[FD:{}]Refused: select() cannot watch more than {} sockets", sock.fileno(), MAX_SOCKETS)
    sock.close()
    return False


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


def main():
    parser = argument_parser()
    parser.add_argument("--cert", metavar="FILE", help="the server's certificate chain, PEM (required)")
    parser.add_argument("--key", metavar="FILE", help="its private key, PEM (required)")
    args = parser.parse_args()
    if not (args.cert and args.key):
        parser.error(NO_CERT)
    server_sock = start_listening(args)  # before the certificate is read: "port in use" reads the same
    with server_sock, tls_listener(server_sock, args.cert, args.key) as server_sock:
        print_port_line(server_sock)
        accept_loop(server_sock)


if __name__ == "__main__":
    main()
