"""Single process, single thread, multiple clients (asyncio).

The one idea: coroutines on one event loop, with the loop's socket API
(sock_accept, sock_recv_into, sock_sendall): each client gets a task that reads
like the blocking loop of echo_simple.py, and `await` hands the thread to
another task wherever this one would block.
Trade-off: no thread per client and no stall on a slow reader, but every
operation goes through the event loop's machinery, which costs CPU.
Run: python3 echo_asyncio.py [--port 7777], then python3 client.py
Builds on: echo_simple.py (echo_asyncio_streams.py is the usual high-level form).
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
ACCEPTS_PER_WAKEUP = 100  # as asyncio: drain the listen queue, but let clients run in between


async def accept_loop(server_sock):
    loop = asyncio.get_running_loop()
    # Ctrl-C and SIGTERM cancel this task from inside the loop: a KeyboardInterrupt
    # raised at any bytecode could leave a task half-suspended, and asyncio.run() hang.
    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, asyncio.current_task().cancel)
    log("Ready For Accept")
    server_sock.setblocking(False)  # the loop's socket API needs non-blocking sockets
    tasks = set()  # The article's ensure_future() kept no reference: a task could vanish mid-connection.
    while True:
        for _ in range(ACCEPTS_PER_WAKEUP):
            try:
                new_sock, address = await loop.sock_accept(server_sock)
            except OSError as e:
                shed_connection(server_sock, e)
                # sock_accept() would fail again at once (Linux says EMFILE with no client
                # waiting): wait until a client is there, never spin.
                await readable(server_sock)
                continue
            log("[FD:{}]Accept:{}:{}", new_sock.fileno(), *address[:2])
            task = asyncio.create_task(send_recv(new_sock))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        # While clients queue, sock_accept() returns without letting another task run:
        # the article's loop could accept a whole storm before serving anyone.
        await asyncio.sleep(0)


async def readable(sock):
    """Wait until sock is readable: for a listening socket, until a client waits."""
    loop = asyncio.get_running_loop()
    ready = loop.create_future()
    loop.add_reader(sock, ready.set_result, None)
    try:
        await ready
    finally:
        loop.remove_reader(sock)


async def send_recv(sock):
    loop = asyncio.get_running_loop()
    fd = sock.fileno()
    sock.setblocking(False)  # the loop's socket API needs non-blocking sockets
    # One buffer for the connection, read into again and again: a fresh 64 KiB object per
    # recv(), shrunk to what came, fragments a long-lived server's heap (see RESULTS.md).
    buffer = memoryview(bytearray(BUFSIZE))
    with sock:
        try:
            while True:
                data = buffer[:await loop.sock_recv_into(sock, buffer)]
                if not data:  # nothing read is EOF: the client closed its side
                    log("[FD:{}]Recv:EOF", fd)
                    return
                log("[FD:{}]Recv:{!r}", fd, bytes(data[:LOG_BYTES]))
                sum(range(WORK))  # --work: the CPU cost of handling a chunk
                await loop.sock_sendall(sock, data)
        except OSError as e:  # a reset or vanished client ends only its own connection
            log("[FD:{}]Error:{}", fd, e.strerror)
            # asyncio keeps this exception (a future, the reader), and its traceback this frame
            # with its last chunk: a cycle that lasts until the next full garbage collection.
            e.__traceback__ = None


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


def main():
    server_sock = start_listening(parse_args())
    with server_sock:
        try:
            # The article's SelectorEventLoop + run_until_complete set-up is deprecated.
            asyncio.run(accept_loop(server_sock))
        except (KeyboardInterrupt, asyncio.CancelledError):
            log("Shutdown")


if __name__ == "__main__":
    main()
