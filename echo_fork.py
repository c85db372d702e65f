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
import select
import signal
import socket
import sys
import time

BACKLOG = 256  # the article's backlog; --backlog sets another
BUFSIZE = 65536  # the article read 512 bytes; 64 KiB moves big payloads in fewer calls
LOG_BYTES = 64  # a log line shows at most this much of a chunk


def accept_loop(server_sock):
    log("Ready For Accept")
    while True:
        try:
            new_sock, address = server_sock.accept()
        except OSError as e:
            shed_connection(server_sock, e)
            continue
        with new_sock:  # closes the parent's copy: the child has its own
            start_worker(server_sock, new_sock, address)


def send_recv_loop(sock):
    # One buffer for the connection, read into again and again: a fresh 64 KiB object per
    # recv(), shrunk to what came, fragments a long-lived server's heap (see RESULTS.md).
    buffer = memoryview(bytearray(BUFSIZE))
    try:
        while True:
            data = buffer[:sock.recv_into(buffer)]
            if not data:  # nothing read is EOF: the client closed its side
                log("Recv:EOF")
                return
            log("Recv:{!r}", bytes(data[:LOG_BYTES]))
            sum(range(WORK))  # --work: the CPU cost of handling a chunk
            sock.sendall(data)  # the article's send() could send only part of it
    except OSError as e:  # a reset or vanished client ends only its own connection
        log("Error:{}", e.strerror)


def start_worker(server_sock, sock, address):
    """Fork a child to serve this client; it leaves with os._exit() so it never runs the parent's code."""
    global log_prefix
    # Hold the signals across fork(): each side takes them only once its bookkeeping
    # is done (the parent has noted the pid, the child is in try).
    signal.pthread_sigmask(signal.SIG_BLOCK, PARENT_SIGNALS)
    try:
        pid = os.fork()
    except OSError as e:  # the article tested pid < 0; os.fork() raises instead
        log("Fork:{}: connection shed", e.strerror)
        pid = None
    if pid == 0:
        try:
            log_prefix = "[PID:{}]".format(os.getpid())
            server_sock.close()
            # Logged here, not in the parent: the child could serve a quick client first.
            log("Accept:{}:{}", *address[:2])
            signal.pthread_sigmask(signal.SIG_UNBLOCK, PARENT_SIGNALS)
            send_recv_loop(sock)
        except KeyboardInterrupt:
            pass  # Ctrl-C or SIGTERM: this child stops serving and leaves below
        finally:
            os._exit(0)
    if pid:
        children[pid] = address
    signal.pthread_sigmask(signal.SIG_UNBLOCK, PARENT_SIGNALS)


# ---- Below, to main(), every echo_*.py is the same: logging, shedding, arguments, socket set-up. ----

QUIET = False  # -q
WORK = 0  # --work N
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # what ends the server
log_prefix = ""  # a worker process's log lines begin with its PID
spare_fd = None  # a descriptor kept in reserve to shed connections on EMFILE
STOP_GRACE = 1  # seconds the children get to finish on shutdown
# What a parent waits for: it blocks these and takes them with sigwait(), never in a handler.
PARENT_SIGNALS = STOP_SIGNALS + (signal.SIGCHLD, signal.SIGALRM)
children = {}  # pid of each child -> the arguments it was started with


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


def finished_children():
    """Reap every child that has ended (the article never did: zombies piled up), and
    say which: [(pid, status, the arguments it was started with), ...]."""
    ended = []
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:  # no child left at all: any still listed was reaped already
            children.clear()
            break
        if pid == 0:
            break  # the others are still running
        ended.append((pid, status, children.pop(pid, ())))
    return ended


def stop_children():
    """Shut down: ask every child to finish and wait for all of them; one still there
    after STOP_GRACE seconds (busy, or it missed the signal) is killed outright. The
    signals stay blocked and are taken with sigwait(), as in run_workers()."""
    signal.pthread_sigmask(signal.SIG_BLOCK, PARENT_SIGNALS)  # a second Ctrl-C must not cut this short
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # no reaping handler: reaped here
    log("Shutdown")
    for pid in children:
        with contextlib.suppress(ProcessLookupError):  # it finished meanwhile
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE
    while True:
        finished_children()
        grace = deadline - time.monotonic()
        if not children or grace <= 0:
            break
        signal.setitimer(signal.ITIMER_REAL, grace)  # SIGALRM when the grace is over
        signal.sigwait({signal.SIGCHLD, signal.SIGALRM})  # a SIGALRM left from a retry is harmless
    signal.setitimer(signal.ITIMER_REAL, 0)
    for pid in children:
        with contextlib.suppress(ProcessLookupError):  # it finished meanwhile
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def main():
    args = parse_args()
    if not hasattr(os, "fork"):
        sys.exit("{}: needs os.fork(), which this platform lacks; try echo_thread.py".format(sys.argv[0]))
    # Reap each child as it ends: the article never did, and zombies piled up.
    signal.signal(signal.SIGCHLD, lambda signum, frame: finished_children())
    server_sock = start_listening(args)
    with server_sock:
        try:
            accept_loop(server_sock)
        except KeyboardInterrupt:
            stop_children()


if __name__ == "__main__":
    main()
