"""Single process, multiple threads, multiple clients (a thread per connection).

The one idea: the main thread only accepts; each connection gets a thread of
its own that runs the blocking loop of echo_simple.py.
Trade-off: cheaper than a process and easy to write, but thousands of clients
mean thousands of threads, and the GIL lets only one run Python at a time.
Run: python3 echo_thread.py [--port 7777], then python3 client.py
Builds on: echo_fork.py.
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


def accept_loop(server_sock):
    log("Ready For Accept")
    while True:
        try:
            new_sock, (remote_host, remote_port) = server_sock.accept()
        except OSError as e:
            shed_connection(server_sock, e)
            continue
        # A daemon thread: Ctrl-C need not wait for clients that stay connected.
        thread = threading.Thread(target=send_recv_thread, args=(new_sock, remote_host, remote_port), daemon=True)
        try:
            thread.start()
        except RuntimeError as e:  # "can't start new thread": out of memory or of threads
            log("Thread:{}: connection shed", e)
            new_sock.close()
            continue


def send_recv_thread(sock, remote_host, remote_port):
    ident = threading.get_ident()  # the article's currentThread() is deprecated
    # Logged here, not after start(): a quick client could be served before the main thread logs.
    log("<{}>Accept:{}:{}", ident, remote_host, remote_port)
    with sock:
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
            accept_loop(server_sock)
        except KeyboardInterrupt:
            log("Shutdown")


if __name__ == "__main__":
    main()
