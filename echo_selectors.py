"""Single process, single thread, multiple clients (selectors, non-blocking).

The one idea: non-blocking sockets and a send buffer per client. Whatever
send() could not take waits in the buffer; the loop asks for "writable" only
while a buffer holds bytes, and stops reading a client whose buffer is full,
so one slow reader stalls nobody and memory stays bounded.
selectors picks epoll, kqueue or poll: the code runs on any OS.
Trade-off: more bookkeeping than echo_epoll.py, still one core.
Run: python3 echo_selectors.py [--port 7777], then python3 client.py
Builds on: echo_epoll.py.
"""
import argparse
import contextlib
import errno
import os
import selectors
import signal
import socket
import sys

BACKLOG = 256  # the article's backlog
BUFSIZE = 65536  # the article read 512 bytes; 64 KiB moves big payloads in fewer calls
LOG_BYTES = 64  # a log line shows at most this much of a chunk
MAX_BUFFER = 1 << 20  # stop reading a client while this much waits to go back to it

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


class Client:
    """A connection's state: the bytes waiting to go back, and whether it sent EOF."""

    def __init__(self, sock):
        self.sock, self.outgoing, self.eof = sock, bytearray(), False


def accept_loop(server_sock):
    log("Ready For Accept")
    selector = selectors.DefaultSelector()
    selector.register(server_sock, selectors.EVENT_READ)
    while True:
        for key, events in selector.select():
            if key.data is None:
                try:
                    new_sock, (remote_host, remote_port) = server_sock.accept()
                except OSError as e:
                    shed_connection(server_sock, e)
                    continue
                new_sock.setblocking(False)
                selector.register(new_sock, selectors.EVENT_READ, Client(new_sock))
                log("[FD:{}]Accept:{}:{}", new_sock.fileno(), remote_host, remote_port)
            else:
                send_recv(selector, key.data, events)


def send_recv(selector, client, events):
    sock, fd = client.sock, client.sock.fileno()
    try:
        if events & selectors.EVENT_READ:
            data = sock.recv(BUFSIZE)
            if data:
                log("[FD:{}]Recv:{!r}", fd, data[:LOG_BYTES])
                sum(range(WORK))  # --work: the CPU cost of handling a chunk
                client.outgoing += data
            else:  # EOF: send what remains, then close
                log("[FD:{}]Recv:EOF", fd)
                client.eof = True
        if client.outgoing:
            # Try at once: usually the kernel takes it all, with no wait for "writable".
            sent = sock.send(client.outgoing)
            del client.outgoing[:sent]
    except BlockingIOError:
        pass
    except OSError as e:  # a reset or vanished client ends only its own connection
        log("[FD:{}]Error:{}", fd, e.strerror)
        client.eof, client.outgoing = True, bytearray()
    # Read while the buffer has room (backpressure); watch "writable" only while bytes wait.
    wanted = (0 if client.eof or len(client.outgoing) >= MAX_BUFFER else selectors.EVENT_READ) | (
        selectors.EVENT_WRITE if client.outgoing else 0)
    if not wanted:
        selector.unregister(sock)
        sock.close()
    elif wanted != selector.get_key(sock).events:
        selector.modify(sock, wanted, client)


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
