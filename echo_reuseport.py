"""Multiple processes, single thread each, multiple clients (SO_REUSEPORT, Linux).

The one idea: each worker process has a listening socket of its own, all bound
to one port with SO_REUSEPORT, and the kernel spreads new connections across
them: no shared accept lock as in echo_prefork.py. Each worker runs the
non-blocking loop of echo_selectors.py, so every core serves many clients.
The parent opens the sockets (so --port 0 gives one port to all) and keeps
them: a worker that dies is replaced, and its queued connections wait for it.
Trade-off: Linux only; the kernel balances by a hash of the connection, not by
load, so one busy worker can be handed more than its share.
Run: python3 echo_reuseport.py [--port 7777] [--workers N], then python3 client.py
Builds on: echo_selectors.py and echo_prefork.py.
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
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}  # what ends the server
STOP_GRACE = 1  # seconds the children get to finish on shutdown
MAX_BUFFER = 1 << 20  # stop reading a client while this much waits to go back to it
WORKERS = os.cpu_count() or 1  # one worker per core

QUIET = False
WORK = 0
spare_fd = None  # a descriptor kept in reserve to shed connections on EMFILE
children = {}  # worker pid -> the listening socket it serves
accepted = 0  # connections this worker took


def log(fmt, *args):
    """Print one of the article's log lines, unless -q."""
    if not QUIET:  # one write per line: lines from several workers do not interleave
        print(fmt.format(*args) + "\n", end="", flush=True)


def create_server_socket(host, port):
    server_sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # Lets a restarted server bind at once while old connections sit in TIME_WAIT.
    server_sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Lets every worker's socket bind the same port; the kernel shares connections among them.
    server_sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
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
    global accepted
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
                accepted += 1
                new_sock.setblocking(False)
                selector.register(new_sock, selectors.EVENT_READ, Client(new_sock))
                log("[PID:{}][FD:{}]Accept:{}:{}", os.getpid(), new_sock.fileno(), remote_host, remote_port)
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


def start_worker(server_sock):
    """Fork one worker for this socket; it leaves with os._exit(), never running the parent's code.
    It inherits the other workers' sockets too, but never accepts on them."""
    # Hold Ctrl-C/SIGTERM across fork(): each side takes them only once its
    # bookkeeping is done (the parent has noted the pid, the child is in try).
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    pid = os.fork()
    if pid == 0:
        try:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
            accept_loop(server_sock)
        except KeyboardInterrupt:
            # How many connections this worker took: the spread across workers.
            print("[PID:{}]Accepted:{}\n".format(os.getpid(), accepted), end="", file=sys.stderr, flush=True)
        finally:
            os._exit(0)
    children[pid] = server_sock
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def stop_children():
    """Ask every child to finish and wait for all of them. One still there after
    STOP_GRACE seconds (busy, or it missed the signal) is killed outright."""
    def kill_the_rest(signum, frame):
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    signal.signal(signal.SIGALRM, kill_the_rest)
    signal.alarm(STOP_GRACE)
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    with contextlib.suppress(ChildProcessError):
        while True:
            children.pop(os.wait()[0], None)
    signal.alarm(0)  # all finished in time


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
    parser.add_argument("--workers", type=number(1, 10000), default=WORKERS, metavar="N",
                        help="worker processes, each with its own listening socket (default: %(default)s)")
    parser.add_argument("--work", type=number(0, 10**9), default=0, metavar="N",
                        help="compute sum(range(N)) for each chunk received: a CPU-bound load (default: %(default)s)")
    # A bad argument is one line on stderr, not argparse's usage block.
    parser.error = lambda message: parser.exit(2, "{}: error: {}\n".format(parser.prog, message))
    return parser.parse_args()


def main():
    global QUIET, WORK, spare_fd
    args = parse_args()
    if not (sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")):
        sys.exit("{}: SO_REUSEPORT load balancing is Linux-only; try echo_prefork.py".format(sys.argv[0]))
    QUIET, WORK = args.quiet, args.work
    # Ctrl-C and SIGTERM (kill, systemd, docker stop) both end the server cleanly,
    # even where a shell started it with SIGINT ignored.
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.default_int_handler)
    try:
        # One socket per worker, the first on the port asked for, the others on the port it got.
        server_socks = [create_server_socket(args.host, args.port)]
        port = server_socks[0].getsockname()[1]
        server_socks += [create_server_socket(args.host, port) for _ in range(args.workers - 1)]
    except OSError as e:
        sys.exit("{}: cannot listen on {}:{}: {}".format(sys.argv[0], args.host, args.port, e.strerror or e))
    spare_fd = open(os.devnull, "rb")
    # Every socket already listens: connections wait in its backlog until its worker takes them.
    print("Server Run Port:{}".format(port), flush=True)
    log("Ready For Accept")
    try:
        for server_sock in server_socks:
            start_worker(server_sock)
        while True:
            pid, status = os.wait()
            log("[PID:{}]Exit:{}: starting another worker", pid, status)
            start_worker(children.pop(pid))
    except KeyboardInterrupt:
        for signum in STOP_SIGNALS:  # a second Ctrl-C must not cut the clean-up short
            signal.signal(signum, signal.SIG_IGN)
        log("Shutdown")
        stop_children()

if __name__ == "__main__":
    main()
