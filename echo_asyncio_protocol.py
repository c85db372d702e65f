"""Single process, single thread, multiple clients (an asyncio Protocol).

The one idea: no coroutine per client at all. The event loop calls the
protocol's methods: data_received() writes the bytes straight back with
transport.write(); pause_writing()/resume_writing() stop and restart reading
while the client is slow to read (backpressure); eof_received() lets the
transport send what remains and close. --uvloop runs the same code on uvloop.
Trade-off: the fastest asyncio form, in callback style rather than async/await.
Run: python3 echo_asyncio_protocol.py [--port 7777] [--uvloop], then python3 client.py
Builds on: echo_asyncio_streams.py.
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
transports = set()  # the connected clients, dropped on shutdown


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


class EchoProtocol(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
        self.fd = transport.get_extra_info("socket").fileno()
        transports.add(transport)
        remote_host, remote_port = transport.get_extra_info("peername")[:2]
        log("[FD:{}]Accept:{}:{}", self.fd, remote_host, remote_port)

    def data_received(self, data):
        log("[FD:{}]Recv:{!r}", self.fd, data[:LOG_BYTES])
        sum(range(WORK))  # --work: the CPU cost of handling a chunk
        self.transport.write(data)  # sends now, or buffers what the kernel did not take

    def pause_writing(self):  # the buffer passed its high-water mark: the client reads slowly
        self.transport.pause_reading()

    def resume_writing(self):
        self.transport.resume_reading()

    def eof_received(self):
        log("[FD:{}]Recv:EOF", self.fd)
        return False  # the transport sends what remains, then closes

    def connection_lost(self, exc):
        transports.discard(self.transport)
        if exc is not None:  # a reset or vanished client ends only its own connection
            log("[FD:{}]Error:{}", self.fd, exc)


def on_loop_error(server_sock, context):
    """asyncio passes here what it would print as a traceback. Out of descriptors,
    its accept() pauses for a second: shed the waiting clients meanwhile, with a
    spare descriptor as echo_asyncio.py does. Anything else is one log line."""
    global spare_fd
    error = context.get("exception")
    if not (isinstance(error, OSError) and error.errno in (errno.EMFILE, errno.ENFILE)):
        log("Error:{}: {}", context["message"], error or "")
        return
    spare_fd.close()
    try:
        server_sock.accept()[0].close()
        log("Accept:{}: connection shed", error.strerror)
    except OSError:
        pass  # no client was waiting
    spare_fd = open(os.devnull, "rb")


async def serve(server_sock):
    loop = asyncio.get_running_loop()
    # Ctrl-C and SIGTERM cancel this task from inside the loop: a KeyboardInterrupt
    # raised at any bytecode could leave a task half-suspended, and asyncio.run() hang.
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, asyncio.current_task().cancel)
    loop.set_exception_handler(lambda loop, context: on_loop_error(server_sock, context))
    server = await loop.create_server(EchoProtocol, sock=server_sock)
    log("Ready For Accept")
    try:
        await asyncio.Event().wait()  # serve until cancelled
    finally:
        # Not serve_forever() or wait_closed(): since Python 3.12 they wait for every
        # client to leave. Close the listening socket and drop the clients.
        server.close()
        for transport in list(transports):
            transport.abort()


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
    parser.add_argument("--uvloop", action="store_true",
                        help="run on uvloop (pip install uvloop; the pack itself needs only the standard library)")
    parser.add_argument("--work", type=number(0, 10**9), default=0, metavar="N",
                        help="compute sum(range(N)) for each chunk received: a CPU-bound load (default: %(default)s)")
    # A bad argument is one line on stderr, not argparse's usage block.
    parser.error = lambda message: parser.exit(2, "{}: error: {}\n".format(parser.prog, message))
    return parser.parse_args()


def main():
    global QUIET, WORK, spare_fd
    args = parse_args()
    QUIET, WORK = args.quiet, args.work
    run = asyncio.run
    if args.uvloop:
        try:
            import uvloop
        except ImportError:
            sys.exit("{}: --uvloop needs the uvloop package: pip install uvloop".format(sys.argv[0]))
        run = uvloop.run
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
            run(serve(server_sock))
        except (KeyboardInterrupt, asyncio.CancelledError):
            log("Shutdown")


if __name__ == "__main__":
    main()
