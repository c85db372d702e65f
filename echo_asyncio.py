"""Single process, single thread, multiple clients (asyncio).

The one idea: coroutines on one event loop, with the loop's socket API
(sock_accept, sock_recv, sock_sendall): each client gets a task that reads
like the blocking loop of echo_simple.py, and `await` hands the thread to
another task wherever this one would block.
Trade-off: no thread per client and no stall on a slow reader, but every
operation goes through the event loop's machinery, which costs CPU.
Run: python3 echo_asyncio.py [--port 7777], then python3 client.py
Builds on: echo_simple.py; echo_asyncio_streams.py is the usual high-level form.
"""
import argparse
import asyncio
import errno
import os
import signal
import socket
import sys

BACKLOG = 256  # the article's backlog
BUFSIZE = 65536  # the article read 512 bytes; 64 KiB moves big payloads in fewer calls
LOG_BYTES = 64  # a log line shows at most this much of a chunk

QUIET = False
WORK = 0
spare_fd = None  # a descriptor kept in reserve to shed connections on EMFILE


def log(fmt, *args):
    """Print one of the article's log lines, unless -q."""
    if not QUIET:  # one write per line: lines from several workers do not interleave
        print(fmt.format(*args) + "\n", end="", flush=True)


def create_server_socket(host, port):
    server_sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # Lets a restarted server bind at once while old connections sit in TIME_WAIT.
    server_sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server_sock.bind((host, port))
    server_sock.listen(BACKLOG)
    server_sock.setblocking(False)
    return server_sock


async def shed_connection(server_sock, error):
    """sock_accept() failed. Out of descriptors (Linux reports that even with no
    client waiting), free the spare, wait for the next connection with it and
    close it: the client hears at once, and this task does not spin."""
    global spare_fd
    if error.errno not in (errno.EMFILE, errno.ENFILE):
        if isinstance(error, ConnectionAbortedError):
            return  # the client left before we took it
        raise error
    log("Accept:{}: connection shed", error.strerror)
    spare_fd.close()
    try:
        new_sock, _ = await asyncio.get_running_loop().sock_accept(server_sock)
        new_sock.close()
    finally:
        spare_fd = open(os.devnull, "rb")


async def accept(server_sock):
    loop = asyncio.get_running_loop()
    # Ctrl-C and SIGTERM cancel this task from inside the loop: a KeyboardInterrupt
    # raised at any bytecode could leave a task half-suspended, and asyncio.run() hang.
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, asyncio.current_task().cancel)
    log("Ready For Accept")
    tasks = set()  # The article's ensure_future() kept no reference: a task could vanish mid-connection.
    while True:
        try:
            new_sock, (remote_host, remote_port) = await loop.sock_accept(server_sock)
        except OSError as e:
            await shed_connection(server_sock, e)
            continue
        log("[FD:{}]Accept:{}:{}", new_sock.fileno(), remote_host, remote_port)
        task = asyncio.create_task(recv_send(new_sock))
        tasks.add(task)
        task.add_done_callback(tasks.discard)


async def recv_send(sock):
    loop = asyncio.get_running_loop()
    fd = sock.fileno()
    sock.setblocking(False)  # the loop's socket API needs non-blocking sockets
    with sock:
        try:
            while True:
                data = await loop.sock_recv(sock, BUFSIZE)
                if not data:  # b"" is EOF: the client closed its side
                    log("[FD:{}]Recv:EOF", fd)
                    return
                log("[FD:{}]Recv:{!r}", fd, data[:LOG_BYTES])
                sum(range(WORK))  # --work: the CPU cost of handling a chunk
                await loop.sock_sendall(sock, data)
        except OSError as e:  # a reset or vanished client ends only its own connection
            log("[FD:{}]Error:{}", fd, e.strerror)


def number(low, high):
    """An argparse type: a whole number from low to high."""
    def parse(text):
        if not (text.removeprefix("-").isdecimal() and low <= int(text) <= high):
            raise argparse.ArgumentTypeError("expected a whole number from {} to {}, got {!r}".format(low, high, text))
        return int(text)
    return parse


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on; 0.0.0.0 exposes the server to your network (default: %(default)s)")
    parser.add_argument("--port", type=number(0, 65535), default=7777,
                        help="TCP port; 0 picks any free one (default: %(default)s)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the port line")
    parser.add_argument("--work", type=number(0, 10**9), default=0, metavar="N",
                        help="compute sum(range(N)) for each chunk received: a CPU-bound load (default: %(default)s)")
    # A bad argument is one line on stderr, not argparse's usage block.
    parser.error = lambda message: parser.exit(2, "{}: error: {}\n".format(parser.prog, message))
    return parser.parse_args()


def main():
    global QUIET, WORK, spare_fd
    args = parse_args()
    QUIET, WORK = args.quiet, args.work
    # Ctrl-C and SIGTERM (kill, systemd, docker stop) both end the server cleanly,
    # even where a shell started it with SIGINT ignored.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.default_int_handler)
    try:
        server_sock = create_server_socket(args.host, args.port)
    except OSError as e:
        sys.exit("{}: cannot listen on {}:{}: {}".format(sys.argv[0], args.host, args.port, e.strerror or e))
    spare_fd = open(os.devnull, "rb")
    print("Server Run Port:{}".format(server_sock.getsockname()[1]), flush=True)
    with server_sock:
        try:
            # The article's SelectorEventLoop + run_until_complete set-up is deprecated.
            asyncio.run(accept(server_sock))
        except (KeyboardInterrupt, asyncio.CancelledError):
            log("Shutdown")


if __name__ == "__main__":
    main()
