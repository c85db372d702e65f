# SPDX-License-Identifier: 0BSD
"""Servers at the edge of their resources: descriptors, threads, FD_SETSIZE, dead children."""
import os
import resource
import select
import signal
import socket
import time

import pytest

from helpers import (POOL_SERVERS, PROCESS_SERVERS, SELECT_SERVERS, SERVERS, TLS_SERVERS, children_of, client_json,
                     echoes, exchange, group_fds, group_pids, roundtrip, settled_fds, steady, wait_for_workers, wait_until)

pytestmark = pytest.mark.slow  # every test here starts a server and loads it

# In these one process holds every connection, so a low RLIMIT_NOFILE is reached by
# connections alone. echo_simple holds one at a time; the fork servers' parents hold none.
HOLDERS = [s for s in SERVERS if s != "echo_simple.py" and s not in PROCESS_SERVERS - {"echo_reuseport.py", "echo_shared_socket.py"}]


def open_connections(server, count, timeout=2.0):
    """Open up to count connections and send a byte on each; return the ones that connected."""
    socks = []
    for _ in range(count):
        try:
            sock = server.connect(timeout=timeout)
            sock.sendall(b"x")
        except OSError:
            continue
        socks.append(sock)
    return socks


def answered(sock):
    sock.settimeout(1)  # a shed client hears at once; a served one within a millisecond or so
    try:
        return sock.recv(1) == b"x"
    except OSError:
        return False


def cpu_while_idle(server, seconds=0.5):
    before = server.cpu_seconds()
    time.sleep(seconds)  # measuring a rate over a window, not waiting for an event
    return server.cpu_seconds() - before


@pytest.mark.parametrize("script", HOLDERS)
def test_out_of_descriptors_sheds_then_recovers(script, start_server):
    if script in TLS_SERVERS:
        pytest.skip("a shed TLS client fails its handshake inside connect(), so open_connections() never holds it "
                    "to count; the shedding is echo_selectors.py's code, unchanged")
    server = start_server(script, rlimits={resource.RLIMIT_NOFILE: 32})
    socks = open_connections(server, 120)
    served = sum(answered(sock) for sock in socks)
    assert 0 < served < len(socks), "some clients are served, the ones past the limit are not"
    assert server.proc.poll() is None
    assert cpu_while_idle(server) < 0.25, "no busy loop while out of descriptors"
    assert "connection shed" in server.stdout()
    for sock in socks:
        sock.close()
    assert wait_until(lambda: echoes(server, b"back again"))


def exhaust_by_rlimit(pgid):
    """Lower each process's soft RLIMIT_NOFILE to its lowest free descriptor: the next
    one it opens fails with EMFILE. Returns what to restore."""
    saved = {}
    for pid in group_pids(pgid):
        try:
            fds = {int(fd) for fd in os.listdir("/proc/{}/fd".format(pid))}
            soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
            lowest_free = min(set(range(len(fds) + 1)) - fds)
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (lowest_free, hard))
        except OSError:
            continue  # the process ended while we looked
        saved[pid] = (soft, hard)
    return saved


def restore_rlimits(saved):
    for pid, limits in saved.items():
        try:
            resource.prlimit(pid, resource.RLIMIT_NOFILE, limits)
        except OSError:
            pass  # the process ended meanwhile


@pytest.mark.parametrize("script", SERVERS)
def test_the_very_next_client_after_running_out_of_descriptors_is_served(script, start_server):
    if script in TLS_SERVERS:
        pytest.skip("a shed TLS client fails its handshake inside connect(), so open_connections() never holds it "
                    "to count; the shedding is echo_selectors.py's code, unchanged")
    """The one client that comes once descriptors are free again must be served, not shed
    (a blocking accept() that waited for it after EMFILE used to take and close it)."""
    if script in HOLDERS:
        # Connections alone reach a low RLIMIT_NOFILE: the episode of the test above.
        server = start_server(script, rlimits={resource.RLIMIT_NOFILE: 32})
        assert roundtrip(server, b"warm-up")[0] == b"warm-up"
        baseline = settled_fds(server.pid)
        socks = open_connections(server, 120)
        assert sum(answered(sock) for sock in socks) < len(socks), "some clients are shed"
    else:
        # The process that accepts holds no connection (a child or a worker does, or it
        # serves one at a time): take its descriptors away while it runs, then give them back.
        server = start_server(script)
        assert roundtrip(server, b"warm-up")[0] == b"warm-up"
        baseline = settled_fds(server.pid)
        saved = exhaust_by_rlimit(server.pid)
        socks = []
        for _ in range(3):  # the first may be served on a descriptor accept() had already reserved
            sock = server.connect()
            sock.sendall(b"x")
            sock.close()
        shed = wait_until(lambda: "connection shed" in server.stdout() or server.proc.poll() is not None)
        restore_rlimits(saved)
        assert shed and server.proc.poll() is None, server.stderr()
    for sock in socks:
        sock.close()
    assert wait_until(lambda: group_fds(server.pid) <= baseline), "the server's descriptors are free again"
    # Exactly one connect, and no retry: that client is served at once.
    with server.connect(timeout=5) as sock:
        assert exchange(sock, b"the very next client") == b"the very next client"
    assert server.proc.poll() is None


def test_no_thread_left_sheds_then_recovers(start_server):
    # Each thread reserves an 8 MiB stack: a 200 MiB address space holds only a few.
    server = start_server("echo_thread.py", rlimits={resource.RLIMIT_AS: 200 << 20})
    socks = open_connections(server, 60)
    served = sum(answered(sock) for sock in socks)
    assert 0 < served < len(socks)
    assert "can't start new thread: connection shed" in server.stdout()
    for sock in socks:
        sock.close()
    assert wait_until(lambda: echoes(server, b"back again"))


@pytest.mark.parametrize("script", sorted(SELECT_SERVERS & set(SERVERS)))
def test_select_servers_refuse_clients_past_fd_setsize(script, start_server):
    server = start_server(script, rlimits={resource.RLIMIT_NOFILE: 4096})
    socks = open_connections(server, 1100)
    assert len(socks) == 1100
    assert answered(socks[0]) and answered(socks[900])
    assert not answered(socks[-1]), "a descriptor past 1023 is refused"
    assert "[FD:1024]Refused: select() watches 1024 descriptors at most" in server.stdout()
    for sock in socks:
        sock.close()
    assert wait_until(lambda: echoes(server, b"ok"))


@pytest.mark.parametrize("script", [s for s in HOLDERS if s not in SELECT_SERVERS and s != "echo_prethread.py"])
def test_serves_more_than_1024_clients_at_once(script, start_server):
    server = start_server(script, "-q", rlimits={resource.RLIMIT_NOFILE: 4096})
    socks = open_connections(server, 1100)
    assert len(socks) == 1100
    assert all(answered(sock) for sock in socks)
    for sock in socks:
        sock.close()


def test_fork_leaves_no_zombies(start_server):
    server = start_server("echo_fork.py", "-q")
    for n in range(30):
        message = b"%d" % n
        assert roundtrip(server, message) == (message, True)
    assert wait_until(lambda: not children_of(server.pid, states="RSDZ")), "finished children are reaped"


@pytest.mark.parametrize("script", sorted(POOL_SERVERS))
def test_a_killed_worker_is_replaced(script, start_server):
    server = start_server(script, "-q", "--workers", "3")
    victim = wait_for_workers(server.pid, 3)[0]
    os.kill(victim, signal.SIGKILL)

    def replaced():
        now = children_of(server.pid)
        return len(now) == 3 and victim not in now

    assert wait_until(replaced), "the parent starts a new worker"
    for n in range(30):  # enough connections to reach every worker
        message = b"after %d" % n
        assert roundtrip(server, message) == (message, True)
    assert server.stop(signal.SIGTERM) == 0


@pytest.mark.parametrize("script", sorted(POOL_SERVERS))
def test_a_stopped_workers_connections_are_served_once_it_resumes(script, start_server):
    server = start_server(script, "-q", "--workers", "2")
    workers = wait_for_workers(server.pid, 2)
    os.kill(workers[0], signal.SIGSTOP)
    try:
        socks = [server.connect() for _ in range(20)]  # some are handed to (or hashed to) the stopped one
        for n, sock in enumerate(socks):
            sock.sendall(b"while stopped %d" % n)
        # The running worker has echoed all it will while the other is stopped: the rest wait for it.
        steady(lambda: len(select.select(socks, [], [], 0)[0]), interval=0.05)
    finally:
        os.kill(workers[0], signal.SIGCONT)
    for n, sock in enumerate(socks):
        with sock:
            message = b"while stopped %d" % n
            assert sock.recv(len(message), socket.MSG_WAITALL) == message  # nothing lost, in order


def channel_capacity():
    """How many descriptors a Unix stream socket holds unread here, one send_fds() each, as
    echo_selectors_process.py passes them (278 with Linux's default 212,992-byte buffer)."""
    channel, other = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with channel, other, socket.socket() as passed:
        channel.setblocking(False)
        for n in range(100000):
            try:
                socket.send_fds(channel, [b"c"], [passed.fileno()])
            except BlockingIOError:
                return n
    return n


def test_the_acceptor_passes_over_a_worker_that_stopped_reading(start_server):
    """echo_selectors_process.py: once a stopped worker's channel is full (a few hundred
    descriptors), its turns go to the next worker instead of shedding the clients."""
    capacity = channel_capacity()
    if 2 * capacity + 200 > 4000:
        pytest.skip("a Unix socket here holds {} descriptors: too many connections to fill one".format(capacity))
    server = start_server("echo_selectors_process.py", "--workers", "2")  # logged: "shed" must not appear
    workers = wait_for_workers(server.pid, 2)
    os.kill(workers[0], signal.SIGSTOP)
    socks, by_fd, echoed, poller = [], {}, set(), select.poll()
    deadline = time.monotonic() + 30

    def collect(target):
        """Wait (bounded) until target connections have their echo; a shed one is reset, or at EOF."""
        while len(echoed) < target and time.monotonic() < deadline:
            for fd, _ in poller.poll(100):
                try:
                    if by_fd[fd].recv(1, socket.MSG_PEEK) == b"x":
                        echoed.add(fd)
                except OSError:
                    pass
                poller.unregister(fd)

    try:
        count = 2 * capacity + 200  # the stopped worker's channel fills, with turns to spare
        while len(socks) < count:
            batch = open_connections(server, min(50, count - len(socks)))
            for sock in batch:
                by_fd[sock.fileno()] = sock
                poller.register(sock, select.POLLIN)
            socks += batch
            # Dealt every other connection until the stopped one's channel is full, then all, the
            # running worker must have echoed about this many: wait for it, so that its own channel
            # never fills on a busy machine (with every channel full, the clients would wait).
            n = len(socks)
            collect(n - min((n + 1) // 2, capacity) - 10)
            if not batch or time.monotonic() > deadline:
                break
        assert len(socks) == count, "{} of {} clients opened within the bound: the running worker's " \
            "echoes stopped at {}".format(len(socks), count, len(echoed))
        collect(count - capacity - 10)
        # Dealt in turn alone, half would wait for the stopped worker (or be shed once its channel is full).
        assert len(echoed) > count // 2, "the running worker takes the stopped one's turns"
    finally:
        os.kill(workers[0], signal.SIGCONT)
    unanswered = sum(not answered(sock) for sock in socks)
    for sock in socks:
        sock.close()
    log = server.stdout()
    assert unanswered == 0, "{} clients unanswered after the resume, {} shed by the log".format(
        unanswered, log.count("connection shed"))
    assert "connection shed" not in log


def test_the_acceptor_holds_back_a_burst_no_worker_has_room_for(start_server):
    """echo_selectors_process.py with its log on (workers slower than the acceptor) under a
    burst of 1,000 clients, 5 connections each: every worker's channel fills, and the acceptor
    stops accepting until one has room (the clients wait in the listen queue) instead of shedding
    the connections it took (133 to 287 of the 5,000 were, before)."""
    server = start_server("echo_selectors_process.py", "--workers", "2")
    wait_for_workers(server.pid, 2)
    figures, _ = client_json("--port", str(server.port), "--clients", "1000", "--connects", "5", "--messages", "50")
    assert figures["errors"] == 0 and figures["messages"] == 1000 * 5 * 50, figures
    assert "connection shed" not in server.stdout()
