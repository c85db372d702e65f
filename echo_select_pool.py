"""Single process, multiple threads, multiple clients (select + a pool of senders).

The one idea: select() only accepts and reads; every chunk read goes on a queue
to a pool of threads that send it, so a client slow to read holds up one
sender thread, not the select() loop and every other client.
While a sender holds one of its chunks, a client leaves the read set: its bytes
go back in order, and at most one chunk per client waits in memory.
Trade-off: two thread hand-offs per chunk, and like echo_select.py it refuses
descriptors past FD_SETSIZE (1024).
Run: python3 echo_select_pool.py [--port 7777] [--workers 40], then python3 client.py
Builds on: echo_select.py.
"""
import argparse
import collections
import contextlib
import errno
import os
import queue
import select
import signal
import socket
import sys
import threading

BACKLOG = 256  # the article's backlog; --backlog sets another
BUFSIZE = 65536  # the article read 512 bytes; 64 KiB moves big payloads in fewer calls
LOG_BYTES = 64  # a log line shows at most this much of a chunk
FD_SETSIZE = 1024  # select() fails on a descriptor at or above this
ACCEPTS_PER_WAKEUP = 100  # as asyncio: drain the listen queue, but let clients run in between
WORKERS = 40  # the article's number of sender threads

send_queue = queue.Queue()  # (client, chunk) for the sender threads (the article's Queue module is Python 2)
sent_back = collections.deque()  # clients whose chunk has been sent, to read again
waker_r, waker_w = socket.socketpair()  # a sender writes a byte to wake select()
waker_w.setblocking(False)
# Buffers the senders have finished with, read into again: a fresh 64 KiB object per recv(),
# shrunk, then freed by another thread, fragments the heap (see RESULTS.md). There are only ever
# as many as chunks in flight, one per client at most.
spare_buffers = []


def accept_loop(server_sock):
    log("Ready For Accept")
    server_sock.setblocking(False)  # accept() until the queue is empty, never waiting
    descriptors = [server_sock, waker_r]
    while True:
        log("Descriptor Count:{}", len(descriptors) - 2)
        readable, _, _ = select.select(descriptors, [], [])
        for sock in readable:
            if sock is server_sock:
                accept_clients(server_sock, descriptors)
            elif sock is waker_r:  # senders are done with these clients: read them again
                waker_r.recv(BUFSIZE)
                while sent_back:
                    descriptors.append(sent_back.popleft())
            else:
                descriptors.remove(sock)
                data = recv(sock)
                if data:
                    send_queue.put((sock, data))
                else:
                    sock.close()


def accept_clients(server_sock, descriptors):
    """Take the connections waiting in the listen queue. The article took one per
    wake-up: under a storm of connects the queue overflows and clients wait on retries."""
    for _ in range(ACCEPTS_PER_WAKEUP):
        try:
            new_sock, address = server_sock.accept()
        except BlockingIOError:
            return  # the queue is empty
        except OSError as e:
            shed_connection(server_sock, e)
            return
        # The article's max_descriptor closed the listening socket; refuse just this client.
        if new_sock.fileno() >= FD_SETSIZE:
            log("[FD:{}]Refused: select() cannot watch descriptors past {}", new_sock.fileno(), FD_SETSIZE)
            new_sock.close()
            continue
        descriptors.append(new_sock)
        log("[FD:{}]Accept:{}:{}", new_sock.fileno(), *address[:2])


def recv(sock):
    """One chunk from a client; b"" once it has closed or failed."""
    fd = sock.fileno()
    buffer = spare_buffers.pop() if spare_buffers else bytearray(BUFSIZE)
    try:
        data = memoryview(buffer)[:sock.recv_into(buffer)]
        if data:
            return data  # the sender gives its buffer back
        log("[FD:{}]Recv:EOF", fd)  # The article compared with '' (str), so it never saw EOF.
    except OSError as e:  # a reset or vanished client ends only its own connection
        log("[FD:{}]Error:{}", fd, e.strerror)
    spare_buffers.append(buffer)
    return b""


def send_thread():
    # The article's SendQueue sentinel yielded twice; daemon threads need no sentinel at all.
    ident = threading.get_ident()
    while True:
        sock, data = send_queue.get()
        try:
            log("[FD:{}]<{}>Recv:{!r}", sock.fileno(), ident, bytes(data[:LOG_BYTES]))
            sum(range(WORK))  # --work: the CPU cost of handling a chunk
            sock.sendall(data)  # the article's send() could send only part of it
        except OSError as e:  # a reset or vanished client ends only its own connection
            log("[FD:{}]<{}>Error:{}", sock.fileno(), ident, e.strerror)
            sock.close()  # out of the read set while here: nobody else holds it
            continue
        finally:
            spare_buffers.append(data.obj)
        sent_back.append(sock)
        with contextlib.suppress(BlockingIOError):  # full: a wake-up is pending anyway
            waker_w.send(b"\0")


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
    args = parse_args(workers=WORKERS)
    server_sock = start_listening(args)
    # Daemon threads: Ctrl-C need not wait for a send to a client that stopped reading.
    for _ in range(args.workers):
        threading.Thread(target=send_thread, daemon=True).start()
    with server_sock:
        try:
            accept_loop(server_sock)
        except KeyboardInterrupt:
            log("Shutdown")


if __name__ == "__main__":
    main()
