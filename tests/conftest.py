# SPDX-License-Identifier: 0BSD
import os
import signal
import socketserver
import ssl
import sys
import tempfile
import threading
import time

import pytest

from helpers import CERT, KEY, PIPED, ROOT, UNIX_ONLY, WINE, Server, started_and_stopped, unix_interpreter

# What the tests read of a program's --help is plain text: 3.14's argparse colours it where FORCE_COLOR asks.
os.environ["PYTHON_COLORS"] = "0"


def pytest_collection_modifyitems(config, items):
    """Where the servers' interpreter is not a Unix one (ECHO_PYTHON: the Windows lane), a UNIX_ONLY pattern
    is asked only what a test marked windows(unix_only=True) asks (its --help, its refusal); under Wine,
    what Wine cannot do is marked, with the reason."""
    if not PIPED:
        return  # the interpreter running the tests: nothing to probe, nothing to mark
    unix = unix_interpreter()
    for item in items:
        params = item.callspec.params if hasattr(item, "callspec") else {}
        lane = item.get_closest_marker("windows")
        if not unix and params.get("script") in UNIX_ONLY and not (lane and lane.kwargs.get("unix_only")):
            item.add_marker(pytest.mark.skip(reason="a Unix-only pattern: here it refuses to start, in one line"))
        if WINE and params.get("signum") == signal.SIGTERM:
            item.add_marker(pytest.mark.xfail(run=False, reason="Wine: SIGTERM ends a Windows process outright, as "
                                                                "TerminateProcess does (Windows has no SIGTERM from "
                                                                "outside); Ctrl-C (SIGINT) is the stop there"))


@pytest.fixture
def start_server(tmp_path):
    """start_server(script, *args, rlimits=None, prelude=None, source=None, wrap=(), python=(), cores=()) -> a
    running Server (see bench/common.py's Server); all are killed at the end."""
    def make(script, *args, rlimits=None, prelude=None, source=None, wrap=(), python=(), cores=()):
        folder = tempfile.mkdtemp(prefix="run", dir=tmp_path)
        return Server(script, folder, args, rlimits, prelude, source, wrap, python, cores)

    yield from started_and_stopped(make, Server.kill, ready=Server.wait_for_port)


@pytest.fixture(scope="session")
def client_module():
    """client.py imported as a module, for its functions (importing it runs nothing)."""
    sys.path.insert(0, str(ROOT))
    import client
    return client


class Echo(socketserver.BaseRequestHandler):
    """Echo each message back, except for the fault the server was started with."""

    def handle(self):
        fault, seen = self.server.fault, 0
        while True:
            data = self.request.recv(65536)
            if not data:
                return
            seen += 1
            if fault == "corrupt" and seen == 3:
                data = bytes([data[0] ^ 0xFF]) + data[1:]
            elif fault == "drop" and seen == 3:
                data = data[:-1]
            elif fault == "extra" and seen == 3:
                data += b"!"
            elif fault == "close" and seen == 3:
                return
            elif fault == "trailing" and seen == 7:  # the last of WORKLOAD's messages, then a byte apart
                self.request.sendall(data)
                data = b"!"
            elif fault == "delay":
                time.sleep(0.05)
            self.request.sendall(data)


class TLSEchoServer(socketserver.ThreadingTCPServer):
    """The same over TLS with the test certificate: each handshake in its connection's thread (its
    first recv()), and no close_notify at the end (a TCP close, which a TLS client reads as EOF)."""

    def __init__(self, address, handler):
        super().__init__(address, handler)
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(str(CERT), str(KEY))

    def get_request(self):
        sock, address = super().get_request()
        return self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address


def threaded_echo_server(fault=None, tls=False):
    server = (TLSEchoServer if tls else socketserver.ThreadingTCPServer)(("127.0.0.1", 0), Echo)
    server.daemon_threads = True
    server.fault = fault
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def stop_echo_server(server):
    server.shutdown()
    server.server_close()


@pytest.fixture
def echo_server():
    """echo_server(fault, tls=False) -> port of a threaded echo server with that fault (None: a correct one)."""
    yield from started_and_stopped(threaded_echo_server, stop_echo_server, ready=lambda server: server.server_address[1])
