import socketserver
import threading
import time

import pytest

from helpers import Server


@pytest.fixture
def start_server(tmp_path):
    """start_server(script, *args, rlimits=None, prelude=None, source=None, wrap=(), python=()) -> a running Server
    (see helpers.Server); all are killed at the end."""
    started = []

    def start(script, *args, rlimits=None, prelude=None, source=None, wrap=(), python=()):
        folder = tmp_path / "run{}".format(len(started))
        folder.mkdir()
        server = Server(script, folder, args, rlimits, prelude, source, wrap, python)
        started.append(server)  # killed at the end even if it never prints its port
        return server.wait_for_port()

    yield start
    errors = []
    for server in started:  # every one, even if killing another failed
        try:
            server.kill()
        except Exception as e:  # noqa: BLE001 - reported below, after the others are killed
            errors.append(e)
    assert not errors, errors


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
            elif fault == "delay":
                time.sleep(0.05)
            self.request.sendall(data)


@pytest.fixture
def echo_server():
    """echo_server(fault) -> port of a threaded echo server with that fault (None: a correct one)."""
    servers = []

    def start(fault=None):
        server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Echo)
        server.daemon_threads = True
        server.fault = fault
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server.server_address[1]

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()
