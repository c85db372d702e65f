# SPDX-License-Identifier: 0BSD
"""Every server is clean in Python's development mode (`python3 -X dev -W error`): through start,
clients (an exchange, one mid-stream, one idle), a stop and the clients' close, nothing on stderr:
no ResourceWarning for something left unclosed, no DeprecationWarning, no "Exception ignored",
no traceback. asyncio's debug notes about slow callbacks depend on the machine's load: not counted."""
import signal
import socket

import pytest

from helpers import SERVERS, TIMEOUT, exchange, read_to_eof

pytestmark = pytest.mark.slow  # every test here starts a server and loads it

DEV = ("-X", "dev", "-W", "error")


@pytest.mark.parametrize("script", SERVERS)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_clean_in_development_mode(script, signum, start_server):
    server = start_server(script, python=DEV)
    with server.connect() as done, server.connect() as streaming, server.connect() as idle:
        assert exchange(done, b"x" * 100000) == b"x" * 100000
        done.shutdown(socket.SHUT_WR)
        read_to_eof(done)
        streaming.sendall(b"y" * 300000)
        server.proc.send_signal(signum)
        for sock in (streaming, idle):
            read_to_eof(sock)
    assert server.proc.wait(TIMEOUT) == 0, server.stderr()
    lines = [line for line in server.stderr().splitlines()
             if not (line.startswith("Executing <") and "took" in line)]  # asyncio's slow-callback notes
    assert not lines, "\n".join(lines)
