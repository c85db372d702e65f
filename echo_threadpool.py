# SPDX-License-Identifier: 0BSD
"""Single process, a thread pool, multiple clients (selector + ThreadPoolExecutor).

The one idea: the main thread accepts and watches every connection with a
selector; when one is readable, its receive-and-echo runs as a callback in a
concurrent.futures.ThreadPoolExecutor, and the connection leaves the selector
until that callback is done, so one callback per connection at a time and the
bytes stay in order. The pool runs callbacks, not whole connections: 10,000
clients need not hold 10,000 threads.
Trade-off: two thread hand-offs per chunk, and a client slow to read holds one
pool thread while its send waits, for up to --timeout. Under the GIL (any
CPython but a free-threaded build) it gets slower on more cores, not faster,
as the GIL passes between them: pin it to one.
Run: python3 echo_threadpool.py [--port 7777] [--workers 40], then python3 client.py
Builds on: echo_select_pool.py.
"""
import argparse
import atexit
import collections
import concurrent.futures
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
import threading
import time

if sys.version_info < (3, 10):  # the oldest the pack supports: older ones fail further on, with a traceback
    sys.exit("{}: needs Python 3.10 or newer; this is Python {}".format(sys.argv[0], sys.version.split()[0]))

BACKLOG = 256  # the article's backlog; --backlog sets another
BUFSIZE = 65536  # the article read 512 bytes; 64 KiB moves big payloads in fewer calls
LOG_BYTES = 64  # a log line shows at most this much of a chunk
ACCEPTS_PER_WAKEUP = 100  # as asyncio: drain the listen queue, but let clients run in between
WORKERS = 40  # pool threads, as many as the article's prethread server
# Where the selector is select() (Windows), it takes 512 sockets at most: clients past that are refused.
MAX_SOCKETS = 512 if selectors.DefaultSelector is selectors.SelectSelector else math.inf

sent_back = collections.deque()  # clients whose chunk has been sent, to read again
in_pool = set()  # the callbacks not done yet: each holds a client out of the selector
waker_r = waker_w = None  # main()'s socket pair: a callback writes a byte to wake the selector
thread_state = threading.local()  # each pool thread's own read buffer


def give_buffer():
    """A pool thread's start: one buffer it reads into again and again. A fresh 64 KiB
    object per recv(), shrunk to what came, fragments a long-lived server's heap (see RESULTS.md)."""
    thread_state.buffer = memoryview(bytearray(BUFSIZE))


def accept_loop(server_sock, pool):
    log("Ready For Accept")
    server_sock.setblocking(False)
    # A byte per Ctrl-C or SIGTERM wakes the selector: the loop reads the note (stop_noted()).
    wakeup_pipe()
    selector = selectors.DefaultSelector()
    selector.register(server_sock, selectors.EVENT_READ)
    selector.register(wakeup_sock, selectors.EVENT_READ)
    selector.register(waker_r, selectors.EVENT_READ)
    deadlines = Deadlines()  # while a callback holds a client, send_or_time_out() keeps its deadline
    now, listening = time.monotonic(), True
    while deadlines or listening:
        if stop_noted() and listening:
            log("Shutdown")
            selector.unregister(server_sock)
            server_sock.close()
            wait_for_senders(lambda: in_pool)  # the callbacks send every chunk read: the grace at most
            take_back(selector, deadlines, time.monotonic())
            half_close_all(selector.get_key(fileno).fileobj for fileno in deadlines)
            listening = False
            continue  # the loop ends here if no client is left
        ready = selector.select(within_grace(deadlines.wait(now)))
        now = time.monotonic()
        for key, _ in ready:
            fileno = key.fd
            if fileno == server_sock.fileno():
                accept_clients(selector, server_sock, deadlines, now)
            elif key.fileobj is wakeup_sock:
                wakeup_sock.recv(512)  # it only wakes the loop: stop_noted() reads the note
            elif fileno == waker_r.fileno():
                waker_r.recv(BUFSIZE)
                take_back(selector, deadlines, now)
            elif stopping:  # what a client sends once the server stops is read and dropped, here
                del deadlines[fileno]
                if read_and_drop(key.fileobj):
                    deadlines[fileno] = now
                else:
                    selector.unregister(fileno).fileobj.close()
            else:
                del deadlines[fileno]
                # One callback per connection at a time: out of the selector until it is done.
                callback = pool.submit(send_recv, selector.unregister(fileno).fileobj)
                in_pool.add(callback)  # for the stop's wait, and for select()'s count (Windows)
                callback.add_done_callback(done_in_pool)
        for fileno in deadlines.expired(now):  # after the ready events: bytes that wait are progress
            selector.unregister(fileno).fileobj.close()


def accept_clients(selector, server_sock, deadlines, now):
    """Take the connections waiting in the listen queue. The article took one per
    wake-up: under a storm of connects the queue overflows and clients wait on retries."""
    for _ in range(ACCEPTS_PER_WAKEUP):
        try:
            new_sock, address = server_sock.accept()
        except BlockingIOError:
            return
        except OSError as e:
            shed_connection(server_sock, e)
            return
        # The clients out of the selector come back to it: they count too.
        if len(selector.get_map()) + len(in_pool) + len(sent_back) >= MAX_SOCKETS:
            log("[FD:{}]Refused: select() cannot watch more than {} sockets", new_sock.fileno(), MAX_SOCKETS)
            new_sock.close()
            continue
        new_sock.setblocking(False)
        selector.register(new_sock, selectors.EVENT_READ)
        deadlines[new_sock.fileno()] = now
        log("[FD:{}]Accept:{}", new_sock.fileno(), peer(address))


def take_back(selector, deadlines, now):
    """Read again the clients whose chunk has been sent."""
    while sent_back:
        sock = sent_back.popleft()
        selector.register(sock, selectors.EVENT_READ)
        deadlines[sock.fileno()] = now


def send_recv(sock):
    """In a pool thread: echo one chunk, then hand the client back, or close it."""
    fd, buffer = sock.fileno(), thread_state.buffer
    try:
        data = buffer[:sock.recv_into(buffer)]
        if not data:  # nothing read is EOF: the client closed its side
            log("[FD:{}]Recv:EOF", fd)
        else:
            log("[FD:{}]<{}>Recv:{!r}", fd, threading.get_ident(), bytes(data[:LOG_BYTES]))
            sum(range(WORK))  # --work: the CPU cost of handling a chunk
            send_or_time_out(sock, data)  # blocks this pool thread only
            sent_back.append(sock)
            return
    except TimeoutError:
        log("[FD:{}]Timeout", fd)
    except OSError as e:  # a reset or vanished client ends only its own connection
        log("[FD:{}]Error:{}", fd, e.strerror)
    sock.close()


# ---- Below, to main(), the plumbing: each function is the same in every echo_*.py that has it. ----

QUIET, WORK, TIMEOUT, GRACE = False, 0, 120.0, 2.0  # the flags -q, --work, --timeout and --grace (start_listening())
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM) + ((signal.SIGBREAK,) if hasattr(signal, "SIGBREAK") else ())
stop_signals = []  # each of them (Ctrl-C, SIGTERM, Windows' Ctrl-Break), as its handler noted it (start_listening())
log_prefix = ""  # a worker process's log lines begin with its PID
log_token = spare_fd = None  # start_listening(): the log's token (print_line()), a descriptor to shed on EMFILE
stopping, grace_end = False, math.inf  # the first Ctrl-C or SIGTERM sets both: see stop_noted()
wakeup_sock = None  # the socket a signal writes a byte to (wakeup_pipe()): the loop's wait watches it
KEEPALIVE_IDLE = 60  # keep_alive(): seconds quiet before the first probe,
KEEPALIVE_INTERVAL = 15  # seconds between probes,
KEEPALIVE_COUNT = 4  # probes unanswered before the peer is dropped


class Deadlines(collections.OrderedDict):
    """The loop's clock: fileno -> time.monotonic() of each connection's last progress, the oldest
    first. The loop stamps progress itself (deadlines[fd] = now, then move_to_end(fd)): no call
    of ours per chunk. An OrderedDict finds its first entry at once; a dict skips the holes its
    deletions left."""
    # When the oldest may be due: progress only moves that later, so it is worked out once reached.
    due = math.inf

    def wait(self, now):
        """The selector's timeout: it wakes the loop when the oldest connection may be due."""
        if self.due < math.inf:
            return self.due - now
        if self:  # the first since none was left (--timeout 0: never due)
            self.due = next(iter(self.values())) + (TIMEOUT or math.inf)
        return self.due - now if self.due < math.inf else None

    def expired(self, now):
        """Each connection on which nothing moved for TIMEOUT, logged and dropped from here, for
        the loop to close. The oldest come first, so no wake-up scans them all."""
        if self.due > now:
            return ()
        idle = TIMEOUT or math.inf
        expired = [fd for fd, last in itertools.takewhile(lambda item: item[1] + idle <= now, self.items())]
        for fd in expired:
            log("[FD:{}]Timeout", fd)
            del self[fd]
        self.due = next(iter(self.values()), math.inf) + idle
        return expired


def half_close_all(clients):
    """The stop's last step for clients that have had all their echoes: after SHUT_WR each reads
    them, then EOF. close() instead would send RST while its bytes wait unread, and lose them."""
    for sock in clients:
        with contextlib.suppress(OSError):  # it has reset already
            sock.shutdown(socket.SHUT_WR)


def send_or_time_out(sock, data):
    """Send all of data from a thread of its own: sendall() with a timeout bounds the whole call
    (Python 3.5+), so here one send() at a time waits at most TIMEOUT for room, and a slow reader
    that drains its echo is never cut. TimeoutError once it took nothing for TIMEOUT."""
    stalled = False
    while data:
        try:
            data = data[sock.send(data):]  # the article's send() could send only part of it
            stalled = False
        except BlockingIOError:  # its buffers are full (settimeout() would poll() before every send())
            if stalled:
                raise TimeoutError from None
            # poll() says writable once a third of the buffer is free; the send() after it counts any room.
            if hasattr(select, "poll"):  # not select(): echo_threadpool.py's descriptors go past FD_SETSIZE
                waiter = select.poll()
                waiter.register(sock, select.POLLOUT)
                stalled = not waiter.poll(TIMEOUT * 1000 or None)
            else:  # Windows: no poll(), and its select() takes any socket
                stalled = not select.select([], [sock], [], TIMEOUT or None)[1]


def read_and_drop(sock):
    """Once the server stops, read what a client still sends, and drop it: close() with unread
    input would send RST, and the client could lose its last echoes. False at EOF or an error."""
    with contextlib.suppress(OSError):
        return bool(sock.recv(BUFSIZE))
    return False


def stop_noted():
    """True once a stop signal is noted (stop_signals): the first sets `stopping` and starts the grace; a
    second, or two at once, ends the server here, exit status 1 (log() flushed every line)."""
    global stopping, grace_end
    if len(stop_signals) > 1:
        os._exit(1)
    if stop_signals and not stopping:
        stopping, grace_end = True, time.monotonic() + GRACE
    return stopping


def within_grace(timeout):
    """A wait's timeout (seconds; None: no limit), cut to what is left of the grace once stopping. Once
    it is over, the server ends here, exit status 0: what is left is dropped, the kernel closes it."""
    left = grace_end - time.monotonic() if stopping else math.inf  # no clock read while serving
    if left <= 0:
        os._exit(0)
    return min(math.inf if timeout is None else timeout, left) if stopping else timeout


def wait_for_senders(busy):
    """The stop's wait for the chunks the senders hold, until busy() is false (a sender wakes waker_r as
    it finishes one): a second stop signal ends it (exit status 1), and so does the grace's end (0)."""
    while busy():
        readable, _, _ = select.select([wakeup_sock, waker_r], [], [], within_grace(None))
        for sock in readable:
            sock.recv(BUFSIZE)
        stop_noted()


def done_in_pool(callback):
    """A callback is done: out of in_pool, and the loop woken (take_back(), or the stop's wait)."""
    in_pool.discard(callback)
    with contextlib.suppress(OSError):  # full: a wake-up is pending anyway; closed: the server has ended
        waker_w.send(b"\0")


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


def main():
    global waker_r, waker_w
    parser = argument_parser()
    parser.add_argument("--workers", type=number(1, 10000), default=WORKERS, metavar="N",
                        help="pool threads (default: %(default)s)")
    args = parser.parse_args()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=args.workers, initializer=give_buffer)
    server_sock = start_listening(args)
    print_port_line(server_sock)
    waker_r, waker_w = socket.socketpair()  # made here, so that an exit before it leaves none open
    waker_w.setblocking(False)
    # Leaving waits for the pool (nothing is left in it), then closes the waker, then the server.
    with server_sock, waker_r, waker_w, pool:
        accept_loop(server_sock, pool)


if __name__ == "__main__":
    main()
