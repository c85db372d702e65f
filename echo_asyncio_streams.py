"""Single process, single thread, multiple clients (asyncio streams).

The one idea: asyncio.start_server() accepts for us and runs one coroutine per
client with a StreamReader and a StreamWriter: read(), write(), and
`await drain()`, which waits while the client is slow to read, so memory
stays bounded. This is what most asyncio code uses.
Trade-off: the most comfortable asyncio form, and the stream layer costs CPU
on top of the event loop's.
Run: python3 echo_asyncio_streams.py [--port 7777], then python3 client.py
Builds on: echo_asyncio.py.
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


async def handle_client(reader, writer):
    fd = writer.get_extra_info("socket").fileno()
    remote_host, remote_port = writer.get_extra_info("peername")[:2]
    log("[FD:{}]Accept:{}:{}", fd, remote_host, remote_port)
    try:
        while True:
            data = await reader.read(BUFSIZE)
            if not data:  # b"" is EOF: the client closed its side
                log("[FD:{}]Recv:EOF", fd)
                return
            log("[FD:{}]Recv:{!r}", fd, data[:LOG_BYTES])
            sum(range(WORK))  # --work: the CPU cost of handling a chunk
            writer.write(data)
            await writer.drain()  # waits while the client is slow to read
    except OSError as e:  # a reset or vanished client ends only its own connection
        log("[FD:{}]Error:{}", fd, e.strerror)
    finally:
        writer.close()


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
    server = await asyncio.start_server(handle_client, sock=server_sock, limit=BUFSIZE)
    log("Ready For Accept")
    try:
        await asyncio.Event().wait()  # serve until cancelled
    finally:
        # Not serve_forever() or wait_closed(): since Python 3.12 they wait for every
        # client to leave; asyncio.run() cancels the client tasks instead.
        server.close()


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
            asyncio.run(serve(server_sock))
        except (KeyboardInterrupt, asyncio.CancelledError):
            log("Shutdown")


if __name__ == "__main__":
    main()
