"""Single process, multiple threads, multiple clients (prethread).

The one idea: start the threads before any client arrives; each loops on
accept() under a shared lock and then serves its client with the blocking
loop of echo_simple.py. No thread is created per connection.
Trade-off: at most --workers clients are served at once; the next waits in
the backlog until a thread is free.
Run: python3 echo_prethread.py [--port 7777] [--workers 40], then python3 client.py
Builds on: echo_thread.py and echo_prefork.py.
"""
import argparse
import contextlib
import errno
import os
import signal
import socket
import sys
import threading

BACKLOG = 256  # the article's backlog
BUFSIZE = 65536  # the article read 512 bytes; 64 KiB moves big payloads in fewer calls
LOG_BYTES = 64  # a log line shows at most this much of a chunk
WORKERS = 40  # the article's number of threads
LOCK = threading.Lock()  # held by the one thread waiting in accept()

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


def accept_thread(server_sock):
    ident = threading.get_ident()  # the article's currentThread() is deprecated
    while True:
        log("<{}>Start", ident)
        # One thread at a time waits in accept(); the others wait for the lock.
        with LOCK:
            log("<{}>Get Lock", ident)
            try:
                new_sock, (remote_host, remote_port) = server_sock.accept()
            except OSError as e:
                shed_connection(server_sock, e)
                continue
        log("<{}>Release Lock", ident)
        log("<{}>Accept:{}:{}", ident, remote_host, remote_port)
        with new_sock:
            send_recv_loop(ident, new_sock)


def send_recv_loop(ident, sock):
    try:
        while True:
            data = sock.recv(BUFSIZE)
            if not data:  # b"" is EOF: the client closed its side
                log("<{}>Recv:EOF", ident)
                return
            log("<{}>Recv:{!r}", ident, data[:LOG_BYTES])
            sum(range(WORK))  # --work: the CPU cost of handling a chunk
            sock.sendall(data)  # the article's send() could send only part of it
    except OSError as e:  # a reset or vanished client ends only its own connection
        log("<{}>Error:{}", ident, e.strerror)


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
                        help="threads serving clients (default: %(default)s)")
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
    log("Ready For Accept")
    # Daemon threads: Ctrl-C need not wait for clients that stay connected.
    threads = [threading.Thread(target=accept_thread, args=(server_sock,), daemon=True)
               for _ in range(args.workers)]
    with server_sock:
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()  # Ctrl-C interrupts this wait
        except KeyboardInterrupt:
            log("Shutdown")


if __name__ == "__main__":
    main()
