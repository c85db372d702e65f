"""Multiple processes, single thread each, multiple clients (a fork per connection).

The one idea: the parent only accepts; each connection gets a child process
of its own (os.fork) that runs the blocking loop of echo_simple.py, and the
parent reaps finished children on SIGCHLD so none lingers as a zombie.
Trade-off: simple code and real isolation, but a fork per connection is
costly, and thousands of clients mean thousands of processes.
Run: python3 echo_fork.py [--port 7777], then python3 client.py
Builds on: echo_simple.py.
"""
import argparse
import contextlib
import errno
import os
import signal
import socket
import sys

BACKLOG = 256  # the article's backlog
BUFSIZE = 65536  # the article read 512 bytes; 64 KiB moves big payloads in fewer calls
LOG_BYTES = 64  # a log line shows at most this much of a chunk
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}  # what ends the server
STOP_GRACE = 1  # seconds the children get to finish on shutdown

QUIET = False
WORK = 0
spare_fd = None  # a descriptor kept in reserve to shed connections on EMFILE
children = set()  # pids of the children still serving


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
        # Hold Ctrl-C/SIGTERM across fork(): each side takes them only once its
        # bookkeeping is done (the parent has noted the pid, the child is in try).
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            pid = os.fork()
        except OSError as e:  # the article tested pid < 0; os.fork() raises instead
            log("Fork:{}: connection shed", e.strerror)
            pid = None
        if pid == 0:
            # Child process: serve this one client, then leave with os._exit() so
            # the parent's loop and clean-up never run here.
            server_sock.close()
            # Logged here, not in the parent: the child could serve a quick client first.
            log("[PID:{}]Accept:{}:{}", os.getpid(), remote_host, remote_port)
            try:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
                send_recv_loop(new_sock)
            except KeyboardInterrupt:
                pass
            finally:
                os._exit(0)
        if pid:
            children.add(pid)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        new_sock.close()  # the child has its own copy


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


def reap_children(signum, frame):
    """SIGCHLD: collect every finished child (the article never did: zombies piled up)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)


def stop_children():
    """Ask every child to finish and wait for all of them. One still there after
    STOP_GRACE seconds (busy, or it missed the signal) is killed outright."""
    def kill_the_rest(signum, frame):
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGALRM, kill_the_rest)
    signal.alarm(STOP_GRACE)
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    with contextlib.suppress(ChildProcessError):
        while True:
            children.discard(os.wait()[0])
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
    parser.add_argument("--work", type=number(0, 10**9), default=0, metavar="N",
                        help="compute sum(range(N)) for each chunk received: a CPU-bound load (default: %(default)s)")
    # A bad argument is one line on stderr, not argparse's usage block.
    parser.error = lambda message: parser.exit(2, "{}: error: {}\n".format(parser.prog, message))
    return parser.parse_args()


def main():
    global QUIET, WORK, spare_fd
    args = parse_args()
    if not hasattr(os, "fork"):
        sys.exit("{}: needs os.fork(), which this platform lacks; try echo_thread.py".format(sys.argv[0]))
    QUIET, WORK = args.quiet, args.work
    # Ctrl-C and SIGTERM (kill, systemd, docker stop) both end the server cleanly,
    # even where a shell started it with SIGINT ignored.
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.default_int_handler)
    signal.signal(signal.SIGCHLD, reap_children)
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
            for signum in STOP_SIGNALS:  # a second Ctrl-C must not cut the clean-up short
                signal.signal(signum, signal.SIG_IGN)
            log("Shutdown")
            stop_children()


if __name__ == "__main__":
    main()
