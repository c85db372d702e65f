"""echo_asyncio_buffered.py reuses one buffer for every read: the echo must stay exact when
transport.write() cannot send at once, on every Python (3.12+ keep a view of the buffer)."""
import os
import socket
import threading
import time

from helpers import TIMEOUT


def test_a_slow_reader_gets_a_large_stream_back_exact(start_server):
    server = start_server("echo_asyncio_buffered.py", "-q")
    payload = os.urandom(8 << 20)
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)  # small, so the server's sends stall
        sock.settimeout(TIMEOUT)
        sock.connect(("127.0.0.1", server.port))
        # The writer runs ahead while this thread reads slowly: the server's writes are partial,
        # and the transport holds bytes while the next reads arrive.
        writer = threading.Thread(target=sock.sendall, args=(payload,), daemon=True)
        writer.start()
        received, deadline = bytearray(), time.monotonic() + TIMEOUT
        while len(received) < len(payload) and time.monotonic() < deadline:
            data = sock.recv(16384)
            if not data:
                break
            received += data
            time.sleep(0.0005)  # a slow reader: the server's send buffer fills
        writer.join(TIMEOUT)
    assert len(received) == len(payload) and received == payload
