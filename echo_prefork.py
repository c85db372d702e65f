"""Multiple processes, single thread each, multiple clients (prefork).

The one idea: fork the workers before any client arrives; they share the one
listening socket, and a file lock lets one worker at a time wait in accept(),
so a new connection wakes one worker, not all of them (the thundering herd).
The parent only replaces workers that die, and stops them all on Ctrl-C.
Trade-off: no fork per connection, but at most --workers clients are served
at once; the next waits in the backlog until a worker is free.
Run: python3 echo_prefork.py [--port 7777] [--workers 10], then python3 client.py
Builds on: echo_fork.py.
"""
import argparse
import contextlib
import errno
import os
import signal
import socket
import sys
import tempfile

try:
    import fcntl  # POSIX only: main() says so where it is missing
except ImportError:
    fcntl = None

BACKLOG = 256  # the article's backlog
BUFSIZE = 65536  # the article read 512 bytes; 64 KiB moves big payloads in fewer calls
LOG_BYTES = 64  # a log line shows at most this much of a chunk
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}  # what ends the server
STOP_GRACE = 1  # seconds the children get to finish on shutdown
WORKERS = 10  # the article's number of children

QUIET = False
WORK = 0
spare_fd = None  # a descriptor kept in reserve to shed connections on EMFILE
children = set()  # pids of the workers
lock_file = None  # the accept lock shared by the workers
accepted = 0  # connections this worker took


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
            children.discard(os.wait()[0])
    signal.alarm(0)  # all finished in time


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
    global accepted
    pid = os.getpid()
    while True:
        log("[PID:{}]Get Start", pid)
        fcntl.lockf(lock_file, fcntl.LOCK_EX)
        try:
            log("[PID:{}]Get Lock", pid)
            new_sock, (remote_host, remote_port) = server_sock.accept()
        except OSError as e:
            shed_connection(server_sock, e)
            continue
        finally:
            fcntl.lockf(lock_file, fcntl.LOCK_UN)
            log("[PID:{}]Unlock", pid)
        accepted += 1
        log("[PID:{}]Accept:{}:{}", pid, remote_host, remote_port)
        with new_sock:
            send_recv_loop(new_sock)


def send_recv_loop(sock):
    pid = os.getpid()
    try:
        while True:
            data = sock.recv(BUFSIZE)
            if not data:  # b"" is EOF: the client closed its side
                log("[PID:{}]Recv:EOF", pid)
                return
            log("[PID:{}]Recv:{!r}", pid, data[:LOG_BYTES])
            sum(range(WORK))  # --work: the CPU cost of handling a chunk
            sock.sendall(data)  # the article's send() could send only part of it
    except OSError as e:  # a reset or vanished client ends only its own connection
        log("[PID:{}]Error:{}", pid, e.strerror)


def start_worker(server_sock):
    """Fork one worker; it leaves with os._exit() so it never runs the parent's code."""
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
    children.add(pid)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


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
                        help="worker processes (default: %(default)s)")
    # A bad argument is one line on stderr, not argparse's usage block.
    parser.error = lambda message: parser.exit(2, "{}: error: {}\n".format(parser.prog, message))
    return parser.parse_args()


def main():
    global QUIET, WORK, spare_fd, lock_file
    args = parse_args()
    if not (hasattr(os, "fork") and fcntl):
        sys.exit("{}: needs os.fork() and fcntl, which this platform lacks; try echo_prethread.py".format(
            sys.argv[0]))
    QUIET, WORK = args.quiet, args.work
    # Ctrl-C and SIGTERM (kill, systemd, docker stop) both end the server cleanly,
    # even where a shell started it with SIGINT ignored.
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.default_int_handler)
    try:
        server_sock = create_server_socket(args.host, args.port)
    except OSError as e:
        sys.exit("{}: cannot listen on {}:{}: {}".format(sys.argv[0], args.host, args.port, e.strerror or e))
    spare_fd = open(os.devnull, "rb")
    # The article made ./mprocess.lock in the working directory; a temporary file has no name to clash.
    lock_file = tempfile.TemporaryFile()
    # The socket already listens: connections wait in its backlog until a worker takes them.
    print("Server Run Port:{}".format(server_sock.getsockname()[1]), flush=True)
    log("Ready For Accept")
    with server_sock:
        try:
            for _ in range(args.workers):
                start_worker(server_sock)
            while True:
                # The article waited for one child only; wait for each, and replace it.
                pid, status = os.wait()
                children.discard(pid)
                log("[PID:{}]Exit:{}: starting another worker", pid, status)
                start_worker(server_sock)
        except KeyboardInterrupt:
            for signum in STOP_SIGNALS:  # a second Ctrl-C must not cut the clean-up short
                signal.signal(signum, signal.SIG_IGN)
            log("Shutdown")
            stop_children()


if __name__ == "__main__":
    main()
