# SPDX-License-Identifier: 0BSD
"""echo_asyncio_buffered.py reads every chunk into a buffer it reuses, and echo_asyncio.py into one it
borrows: the echo must stay exact when a send cannot go at once, on every Python (3.12+ keep a view of the
buffer in transport.write()), also while other clients read."""
import contextlib
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from helpers import recv_exactly

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


@pytest.mark.parametrize("script", ["echo_asyncio_buffered.py", "echo_asyncio.py"])
def test_a_stalled_reader_keeps_its_echo_while_another_client_reads(start_server, script):
    """Both servers share their read buffers between clients (one shared buffer, or a pool lent a chunk at a
    time): while a stalled client's echo waits in a transport (3.12+: a view of the buffer it was read into),
    another client's reads must land elsewhere, or the stalled one gets the other's bytes."""
    server = start_server(script, "-q")
    stalled_payload, other_payload = os.urandom(4 << 20), os.urandom(64 << 10)
    with socket.socket() as stalled, socket.socket() as other:
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)  # its echo stalls after kilobytes
        for sock in (stalled, other):
            sock.settimeout(BOUND)
            sock.connect(("127.0.0.1", server.port))

        def send_stalled():
            with contextlib.suppress(OSError):  # the test gave up and closed the socket
                stalled.sendall(stalled_payload)
        writer = threading.Thread(target=send_stalled, daemon=True)
        writer.start()
        time.sleep(0.2)  # the stalled echo fills the socket buffers, and the server keeps the rest
        for _ in range(32):  # meanwhile the other client's chunks are read, and echoed exactly
            other.sendall(other_payload)
            assert recv_exactly(other, len(other_payload)) == other_payload
        received = recv_exactly(stalled, len(stalled_payload))
        writer.join(BOUND)
    first_bad = next((i for i in range(0, len(received), 4096)
                      if received[i:i + 4096] != stalled_payload[i:i + 4096]), None)
    assert first_bad is None, "the stalled echo differs in the 4 KiB block at byte {}".format(first_bad)
