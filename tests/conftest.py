import pytest

from helpers import Server


@pytest.fixture
def start_server(tmp_path):
    """start_server(script, *args, rlimits=None) -> a running Server; all are killed at the end."""
    started = []

    def start(script, *args, rlimits=None):
        folder = tmp_path / "run{}".format(len(started))
        folder.mkdir()
        server = Server(script, folder, args, rlimits)
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
