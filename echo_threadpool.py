"""Single process, a thread pool, multiple clients (selector + ThreadPoolExecutor).

The one idea: the main thread accepts and watches every connection with a
selector; when one is readable, its receive-and-echo runs as a callback in a
concurrent.futures.ThreadPoolExecutor, and the connection leaves the selector
until that callback is done, so one callback per connection at a time and the
bytes stay in order. The pool runs callbacks, not whole connections: 10,000
clients need not hold 10,000 threads.
Trade-off: two thread hand-offs per chunk, and a client slow to read holds one
pool thread while its sendall() waits.
Run: python3 echo_threadpool.py [--port 7777] [--workers 40], then python3 client.py
Builds on: echo_select_pool.py and echo_prethread.py.
"""
import argparse
import collections
import concurrent.futures
import contextlib
import errno
import os
import selectors
import signal
import socket
import sys
import threading

BACKLOG = 256  # the article's backlog
BUFSIZE = 65536  # the article read 512 bytes; 64 KiB moves big payloads in fewer calls
LOG_BYTES = 64  # a log line shows at most this much of a chunk
WORKERS = 40  # pool threads, as many as the article's prethread server

QUIET = False
WORK = 0
spare_fd = None  # a descriptor kept in reserve to shed connections on EMFILE
clients = set()  # every open client, woken with shutdown() when the server stops
sent_back = collections.deque()  # clients whose callback is done, to watch again
waker_r, waker_w = socket.socketpair()  # a callback writes a byte to wake the selector
waker_w.setblocking(False)


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
    return server_sock


def shed_connection(server_sock, error):
    """accept() failed. Out of descriptors, free the spare, take the pending
    connection with it and close it: the client hears at once, and accept()
    does not spin on a connection it can never take."""
    global spare_fd
    if error.errno not in (errno.EMFILE, errno.ENFILE):
        if isinstance(error, (ConnectionAbortedError, BlockingIOError)):
            return  # the client left before we took it
        raise error
    log("Accept:{}: connection shed", error.strerror)
    spare_fd.close()
    with contextlib.suppress(OSError):
        server_sock.accept()[0].close()
    spare_fd = open(os.devnull, "rb")


def accept_loop(server_sock, pool):
    log("Ready For Accept")
    selector = selectors.DefaultSelector()
    selector.register(server_sock, selectors.EVENT_READ)
    selector.register(waker_r, selectors.EVENT_READ)
    while True:
        for key, _ in selector.select():
            sock = key.fileobj
            if sock is server_sock:
                try:
                    new_sock, (remote_host, remote_port) = server_sock.accept()
                except OSError as e:
                    shed_connection(server_sock, e)
                    continue
                log("[FD:{}]Accept:{}:{}", new_sock.fileno(), remote_host, remote_port)
                clients.add(new_sock)
                selector.register(new_sock, selectors.EVENT_READ)
            elif sock is waker_r:  # callbacks are done with these clients: watch them again
                waker_r.recv(BUFSIZE)
                while sent_back:
                    selector.register(sent_back.popleft(), selectors.EVENT_READ)
            else:
                # One callback per connection at a time: out of the selector until it is done.
                selector.unregister(sock)
                pool.submit(send_recv, sock)


def send_recv(sock):
    """In a pool thread: echo one chunk, then hand the client back, or close it."""
    fd = sock.fileno()
    try:
        data = sock.recv(BUFSIZE)
        if not data:  # b"" is EOF: the client closed its side
            log("[FD:{}]Recv:EOF", fd)
        else:
            log("[FD:{}]<{}>Recv:{!r}", fd, threading.get_ident(), data[:LOG_BYTES])
            sum(range(WORK))  # --work: the CPU cost of handling a chunk
            sock.sendall(data)
            sent_back.append(sock)
            with contextlib.suppress(BlockingIOError):  # full: a wake-up is pending anyway
                waker_w.send(b"\0")
            return
    except OSError as e:  # a reset or vanished client ends only its own connection
        log("[FD:{}]Error:{}", fd, e.strerror)
    clients.discard(sock)
    sock.close()


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
    parser.add_argument("--workers", type=number(1, 10000), default=WORKERS, metavar="N",
                        help="pool threads (default: %(default)s)")
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
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=args.workers)
    with server_sock:
        try:
            accept_loop(server_sock, pool)
        except KeyboardInterrupt:
            log("Shutdown")
            # Pool threads are joined at exit: wake any blocked on a client that stopped reading.
            for sock in list(clients):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            pool.shutdown(wait=False, cancel_futures=True)


if __name__ == "__main__":
    main()
