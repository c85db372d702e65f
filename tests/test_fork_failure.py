# SPDX-License-Identifier: 0BSD
"""Out of processes: a process server whose fork() fails logs one line and goes on serving.
Running as root ignores RLIMIT_NPROC, so a prelude makes os.fork() fail inside the server."""
import signal

import pytest

from helpers import PROCESS_SERVERS, exchange, group_gone, roundtrip, wait_for_workers, wait_until

pytestmark = pytest.mark.slow  # every test here starts a server and loads it

FAILING = 2  # forks 2 and 3 fail: the server starts with one worker and retries twice


def failing_fork(calls):
    """A prelude: os.fork() raises EAGAIN on the calls numbered in calls, as when out of processes."""
    return ("import errno, os\n"
            "_fork, _calls = os.fork, [0]\n"
            "def fork():\n"
            "    _calls[0] += 1\n"
            "    if _calls[0] in {!r}:\n"
            "        raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN))\n"
            "    return _fork()\n"
            "os.fork = fork\n").format(set(calls))


def fork_lines(server):
    return [line for line in server.stdout().splitlines() if "Fork:" in line]


# The parent waits FORK_RETRY s for a signal before it tries again (take_signal(): sigtimedwait(), and where
# there is none, as on macOS, a look at what is pending every 10 ms: the prelude takes it away), with no SIGALRM.
WITHOUT_SIGTIMEDWAIT = "import signal\ndel signal.sigtimedwait\n"


@pytest.mark.parametrize("without", ["", WITHOUT_SIGTIMEDWAIT], ids=["sigtimedwait", "without-sigtimedwait"])
@pytest.mark.parametrize("script", sorted(PROCESS_SERVERS - {"echo_fork.py"}))
def test_a_failed_fork_is_one_line_and_the_pool_fills_up_again(script, without, start_server):
    server = start_server(script, "--workers", "3", prelude=without + failing_fork(range(2, 2 + FAILING)))
    with server.connect() as sock:
        assert exchange(sock, b"one worker serves") == b"one worker serves"
    # The parent tries again every second: the pool is whole once the failing forks are past.
    wait_for_workers(server.pid, 3)
    assert wait_until(lambda: len(fork_lines(server)) == FAILING)
    assert all(line.endswith("Fork:Resource temporarily unavailable: trying again in 1 s")
               for line in fork_lines(server)), fork_lines(server)
    for size in (1, 5000, 100000):
        assert roundtrip(server, bytes(range(256)) * (size // 256 + 1)) == (bytes(range(256)) * (size // 256 + 1), True)
    assert server.stop(signal.SIGTERM) == 0
    assert "Traceback" not in server.stderr()
    assert group_gone(server.pid), "a worker outlived the parent"


def test_fork_per_connection_sheds_only_the_client_whose_fork_failed(start_server):
    server = start_server("echo_fork.py", prelude=failing_fork({1}))
    with server.connect() as shed:
        shed.sendall(b"x")
        try:
            assert shed.recv(10) == b""  # closed: its child was never born
        except ConnectionResetError:
            pass  # or reset, if the x arrived after the parent closed it
    assert wait_until(lambda: fork_lines(server))
    assert fork_lines(server) == ["Fork:Resource temporarily unavailable: connection shed"]
    assert roundtrip(server, b"the next client") == (b"the next client", True)
    assert server.stop(signal.SIGTERM) == 0
    assert "Traceback" not in server.stderr()
