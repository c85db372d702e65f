"""Single process, single thread, multiple clients (asyncio streams).

The one idea: asyncio.start_server() accepts for us and runs one coroutine per
client with a StreamReader and a StreamWriter: read(), write(), and
`await drain()`, which waits while the client is slow to read, so memory
stays bounded. This is what most asyncio code uses.
Trade-off: the most comfortable asyncio form, and the stream layer costs CPU
on top of the event loop's.
Run: python3 echo_asyncio_streams.py [--port 7777], then python3 client.py
Builds on: echo_asyncio.py.
"""
import argparse
import asyncio
import errno
import os
import select
import signal
import socket
import sys

BACKLOG = 256  # the article's backlog; --backlog sets another
BUFSIZE = 65536  # the article read 512 bytes; 64 KiB moves big payloads in fewer calls
LOG_BYTES = 64  # a log line shows at most this much of a chunk


async def accept_loop(server_sock, backlog):
    loop = asyncio.get_running_loop()
    # Ctrl-C and SIGTERM cancel this task from inside the loop: a KeyboardInterrupt
    # raised at any bytecode could leave a task half-suspended, and asyncio.run() hang.
    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, asyncio.current_task().cancel)
    loop.set_exception_handler(lambda loop, context: on_loop_error(server_sock, context))
    # asyncio's Server calls listen() again, with a backlog of 100 unless told: keep the
    # article's (or --backlog's). Each wake-up it accepts up to that many waiting clients.
    server = await asyncio.start_server(send_recv, sock=server_sock, limit=BUFSIZE, backlog=backlog)
    log("Ready For Accept")
    try:
        await asyncio.Event().wait()  # serve until cancelled
    finally:
        # Not serve_forever() or wait_closed(): since Python 3.12 they wait for every
        # client to leave; asyncio.run() cancels the client tasks instead.
        server.close()


async def send_recv(reader, writer):
    fd = writer.get_extra_info("socket").fileno()
    log("[FD:{}]Accept:{}:{}", fd, *writer.get_extra_info("peername")[:2])
    try:
        while True:
            data = await reader.read(BUFSIZE)
            if not data:  # b"" is EOF: the client closed its side
                log("[FD:{}]Recv:EOF", fd)
                return
            log("[FD:{}]Recv:{!r}", fd, data[:LOG_BYTES])
            sum(range(WORK))  # --work: the CPU cost of handling a chunk
            writer.write(data)
            await writer.drain()  # waits while the client is slow to read
    except OSError as e:  # a reset or vanished client ends only its own connection
        log("[FD:{}]Error:{}", fd, e.strerror)
        # asyncio keeps this exception (a future, the reader), and its traceback this frame
        # with its last chunk: a cycle that lasts until the next full garbage collection.
        e.__traceback__ = None
    finally:
        writer.close()


# ---- Below, to main(), every echo_*.py is the same: logging, shedding, arguments, socket set-up. ----

QUIET = False  # -q
WORK = 0  # --work N
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # what ends the server
log_prefix = ""  # a worker process's log lines begin with its PID
spare_fd = None  # a descriptor kept in reserve to shed connections on EMFILE


def log(fmt, *args):
    """Print one of the article's log lines, unless -q."""
    if not QUIET:  # one write per line: lines from several workers do not interleave
        print(log_prefix + fmt.format(*args) + "\n", end="", flush=True)


def shed_connection(server_sock, error):
    """accept() failed. Out of descriptors, take a client that is waiting with the
    spare descriptor and close it: it hears at once, and accept() does not spin on
    a connection it can never take. Any other error (a client that left, ENOBUFS,
    EPROTO...) is one log line: accept(2) says to try again."""
    global spare_fd
    if error.errno not in (errno.EMFILE, errno.ENFILE):
        log("Accept:{}: trying again", error.strerror)
        return
    # Linux reports EMFILE before it looks for a client: shed only one that is waiting.
    if not select.select([server_sock], [], [], 0)[0]:
        if server_sock.getblocking():  # accept() would fail at once again: wait for a client
            select.select([server_sock], [], [])
        return  # and accept() tries again: descriptors may be free by then
    os.close(spare_fd)
    try:
        server_sock.accept()[0].close()
        log("Accept:{}: connection shed", error.strerror)
    except OSError:
        pass  # the client left before we took it
    finally:
        spare_fd = os.open(os.devnull, os.O_RDONLY)


def number(low, high):
    """An argparse type: a whole number from low to high."""
    def parse(text):
        if not (text.removeprefix("-").isdecimal() and low <= int(text) <= high):
            raise argparse.ArgumentTypeError("expected a whole number from {} to {}, got {!r}".format(low, high, text))
        return int(text)
    return parse


def parse_args(workers=None, uvloop=False, accept=False):
    """The flags every server takes, and --workers, --uvloop and --accept where main() asks for them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on, IPv4 or IPv6 (::1); 0.0.0.0 or :: exposes the server "
                             "to your network (default: %(default)s)")
    parser.add_argument("--port", type=number(0, 65535), default=7777,
                        help="TCP port; 0 picks any free one (default: %(default)s)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the port line")
    parser.add_argument("--work", type=number(0, 10**9), default=0, metavar="N",
                        help="compute sum(range(N)) for each chunk received: a CPU-bound load (default: %(default)s)")
    parser.add_argument("--backlog", type=number(1, 65535), default=BACKLOG, metavar="N",
                        help="connections the kernel queues for accept(), capped by net.core.somaxconn "
                             "(default: %(default)s)")
    if workers:
        parser.add_argument("--workers", type=number(1, 10000), default=workers, metavar="N",
                            help="worker processes or threads (default: %(default)s)")
    if uvloop:
        parser.add_argument("--uvloop", action="store_true",
                            help="run on uvloop (pip install uvloop; the pack itself needs only the standard library)")
    if accept:
        parser.add_argument("--accept", choices=["all", "one", "exclusive"], default="all",
                            help="how a woken worker takes connections: everything queued, one, or everything "
                                 "with the socket registered EPOLLEXCLUSIVE (default: %(default)s)")
    # A bad argument is one line on stderr, not argparse's usage block.
    parser.error = lambda message: parser.exit(2, "{}: error: {}\n".format(parser.prog, message))
    return parser.parse_args()


def create_server_socket(host, port, backlog):
    # The host decides the family: 127.0.0.1 is IPv4, ::1 is IPv6, a name what it resolves to.
    family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    server_sock = socket.socket(family, socket.SOCK_STREAM)
    # Lets a restarted server bind at once while old connections sit in TIME_WAIT.
    server_sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server_sock.bind(address)
    server_sock.listen(backlog)
    return server_sock


def start_listening(args):
    """Apply the flags, make Ctrl-C and SIGTERM end the server, listen, and print
    the port line. A port in use or an unknown host is one line and exit status 1."""
    global QUIET, WORK, spare_fd
    QUIET, WORK = args.quiet, args.work
    # Ctrl-C and SIGTERM (kill, systemd, docker stop) both raise KeyboardInterrupt,
    # even where a shell started the server with SIGINT ignored.
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.default_int_handler)
    try:
        server_sock = create_server_socket(args.host, args.port, args.backlog)
    except OSError as e:
        sys.exit("{}: cannot listen on {}:{}: {}".format(sys.argv[0], args.host, args.port, e.strerror or e))
    spare_fd = os.open(os.devnull, os.O_RDONLY)
    print("Server Run Port:{}".format(server_sock.getsockname()[1]), flush=True)
    return server_sock


def on_loop_error(server_sock, context):
    """asyncio passes here what it would print as a traceback. Out of descriptors,
    its accept() pauses for a second: meanwhile shed a client that is waiting.
    Anything else is one log line."""
    error = context.get("exception")
    if isinstance(error, OSError) and error.errno in (errno.EMFILE, errno.ENFILE):
        shed_connection(server_sock, error)
    else:
        log("Error:{}: {}", context["message"], error or "")


def main():
    args = parse_args()
    server_sock = start_listening(args)
    with server_sock:
        try:
            asyncio.run(accept_loop(server_sock, args.backlog))
        except (KeyboardInterrupt, asyncio.CancelledError):
            log("Shutdown")


if __name__ == "__main__":
    main()
