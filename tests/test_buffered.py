# SPDX-License-Identifier: 0BSD
"""echo_asyncio_buffered.py reads every chunk into a buffer it reuses: the echo must stay exact
when transport.write() cannot send at once, on every Python (3.12+ keep a view of the buffer)."""
import contextlib
import os
import socket
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # every test here starts a server and loads it


def send_buffer_max():
    """The most the kernel lets a TCP send buffer grow to (Linux autotunes it up to this)."""
    try:
        return int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
    except (OSError, IndexError, ValueError):
        return 4 << 20


# The server's write() keeps bytes only once its send buffer is full, so the stream is twice that
# (8 to 32 MiB): megabytes of partial writes, where a reused buffer would overwrite unsent bytes.
PAYLOAD = min(max(8 << 20, 2 * send_buffer_max()), 32 << 20)
BOUND = 12.0  # seconds for the whole stream, well inside the 15 s the test may take


def test_a_slow_reader_gets_a_large_random_stream_back_exact(start_server):
    server = start_server("echo_asyncio_buffered.py", "-q")
    payload = os.urandom(PAYLOAD)
    deadline = time.monotonic() + BOUND

    def send_all():  # from a thread, so the sending runs ahead of the slow reading below
        try:
            sock.sendall(payload)
        except OSError:
            pass  # the reader gave up and closed the socket: the assertions say why

    with socket.socket() as sock:
        # A small receive window: the server's sends stall after kilobytes, not after the megabytes
        # loopback's autotuned buffers would hold.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        sock.settimeout(BOUND)
        sock.connect(("127.0.0.1", server.port))
        writer = threading.Thread(target=send_all, daemon=True)
        writer.start()
        received, reads = bytearray(), 0
        while len(received) < PAYLOAD and time.monotonic() < deadline:
            sock.settimeout(max(deadline - time.monotonic(), 0.01))
            try:
                data = sock.recv(4096)
            except socket.timeout:
                break
            if not data:
                break
            received += data
            reads += 1
            if reads % 4 == 0:
                time.sleep(0.001)  # a slow reader: the server's sends stall and write() keeps bytes
        with contextlib.suppress(OSError):  # the server may have reset the connection
            sock.shutdown(socket.SHUT_RDWR)  # wakes a writer still blocked in sendall()
    writer.join(1)
    assert len(received) == PAYLOAD, "{} of {} bytes echoed in {} s".format(len(received), PAYLOAD, BOUND)
    # Not received == payload: on a mismatch pytest would print a diff of megabytes.
    first_bad = next((i for i in range(0, PAYLOAD, 4096) if received[i:i + 4096] != payload[i:i + 4096]), None)
    assert first_bad is None, "echo differs from the data sent in the 4 KiB block at byte {}".format(first_bad)
