# SPDX-License-Identifier: 0BSD
"""client.py: the one benchmark client for every echo_*.py, and an honest one.

The article's client averaged connect and send/receive time over WORKER_COUNT
threads x ACTION_COUNT connections x SEND_RECV_COUNT messages. This one keeps
those three numbers (--clients, --connects, --messages) and fixes what made
its figures meaningless: every message is sent (the article's range() was
empty), every echo is read in full and verified byte for byte, every error is
counted and fails the run, and every wait is bounded. Clients are spread over
worker processes, each multiplexing its connections, so that the client is
not the bottleneck.

  python3 client.py --port 7777                 measure one running server
  python3 client.py --all                       start every echo_*.py here and rank them
  python3 client.py --all --scenario article-100,c10k --json > r.json    every figure, for bench/draw.py
  python3 client.py --port 7777 --rate 2000     open loop: 2,000 new connections a second
  python3 client.py --port 7777 --tls --cafile cert.pem     over TLS, with the handshake's figures
  python3 client.py --all --scenario pingpong-sweep    every server's knee
"""
import argparse
import array
import bisect
import collections
import contextlib
import dataclasses
import errno
import importlib.util
import itertools
import json
import math
import multiprocessing
import os
import platform
import re
import select
import shlex
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import NamedTuple, Optional

if sys.version_info < (3, 10):  # the oldest the pack supports: older ones fail further on, with a traceback
    sys.exit("{}: needs Python 3.10 or newer; this is Python {}".format(sys.argv[0], sys.version.split()[0]))

try:
    import resource  # Unix: the client's descriptor limit
except ImportError:  # Windows: no limit to raise
    resource = None

HERE = Path(__file__).resolve().parent
# The errors counted, by kind, each of them a connection that failed, and in words with its bound after "N connections"
# (why_failed(), kinds_text()).
ERROR_WORDS = {"refused": "refused", "reset": "reset", "connect timeout": "not connected within {connect_timeout:g} s",
               "timeout": "had no echo within {timeout:g} s", "closed early": "closed by the server",
               "mismatch": "had wrong bytes echoed", "extra bytes": "had more bytes echoed than sent",
               "deadline": "cut at the run's {budget:g} s bound", "tls": "failed in TLS (a handshake or a record)",
               "other": "failed otherwise"}
# Bounds sized to the work, so that they never fail a correct server (CLIENT.md, "Why these defaults").
CONNECTING = 100  # default connects in flight: well inside the article's backlog of 256
HELD_PACE = 20000  # held connections start at most this many a second: fewer SYN retries against a full queue
CONNECT_FLOOR = 30.0  # seconds a held connect may take: the kernel's SYN retries come after 1, 3, 7, 15 s
SLOWEST = 10000  # msgs/s: a held run slower than this fails its bound
BUDGET = 30.0  # seconds any other run of --all may take before its server is shown as failed
SYN_RETRY = 0.95  # a connect this slow waited on a SYN retry (the first comes 1 s after the SYN)
SOURCES = 16  # one source address runs short of local ports past ~14,000 connects/s: take 127.0.0.1-16 in turn
PER_SOURCE = 10000  # and past ~14,000 held from one, each connect() scans the ports: more clients, more addresses
IP_BIND_ADDRESS_NO_PORT = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24)  # Linux: the port is chosen at connect()
# Linux's TCP_INFO starts with the socket's state; 1 is ESTABLISHED (elsewhere: wait to be told).
TCP_INFO = getattr(socket, "TCP_INFO", None) if sys.platform.startswith("linux") else None
TCP_ESTABLISHED = 1
# A non-blocking connect under way: Windows says so with its own code (WSAEWOULDBLOCK), which errno names apart.
IN_PROGRESS = (0, errno.EINPROGRESS, errno.EWOULDBLOCK, getattr(errno, "WSAEWOULDBLOCK", errno.EWOULDBLOCK))
# The client's own limits, with Windows' codes for them beside the others.
NO_PORT = {errno.EADDRNOTAVAIL, getattr(errno, "WSAEADDRNOTAVAIL", errno.EADDRNOTAVAIL)}
NO_DESCRIPTOR = {errno.EMFILE, errno.ENFILE, getattr(errno, "WSAEMFILE", errno.EMFILE)}
SPARE_DESCRIPTORS = 64  # a process's descriptors beside its connections (the interpreter's, pipes, a listener)
SELECT_MOST = 512  # sockets one select() takes on Windows (FD_SETSIZE), where there is neither epoll nor poll
TLS_RECORD = 16384  # the most plaintext one TLS record carries
# The kernel's caches of a TCP socket, as /proc/slabinfo names them (held connections: what the kernel keeps).
SOCKET_SLABS = {"TCP", "TCPv6", "sock_inode_cache", "request_sock_TCP", "request_sock_TCPv6"}
# Servers that speak only TLS: --all starts them with the test certificate and measures them with
# --tls, verifying them against it (tests/tls/README: made for the tests, never to serve anything).
TLS_SERVERS = {"echo_selectors_tls.py"}
TEST_CERT, TEST_KEY = HERE / "tests" / "tls" / "cert.pem", HERE / "tests" / "tls" / "key.pem"


@dataclasses.dataclass(frozen=True)
class Workload:
    """What one run asks of a server: clients x connects x messages of size bytes (closed
    loop), or rate new connections a second for duration seconds (open loop), and the
    bounds on every wait. Changed with dataclasses.replace(w, ...), never in place."""
    clients: int = 50
    connects: int = 5
    messages: int = 50
    size: int = 32
    timeout: float = 10.0  # seconds any one wait may take
    connect_timeout: float = 10.0
    budget: Optional[float] = None  # seconds the whole run may take (--all)
    hold: bool = False  # open every connection first, then send
    idle: Optional[float] = None  # with hold: each echoes once as it opens; all held, idle this long, send the rest
    connecting: int = CONNECTING  # connects in flight
    connect_pace: Optional[float] = None  # closed loop: connects started a second, at most
    seconds: Optional[float] = None  # closed loop: each connection exchanges messages this long (wrk), not `messages`
    rate: Optional[float] = None  # open loop: connections a second
    duration: float = 5.0  # open loop: seconds of arrivals
    tls: bool = False  # TLS on every connection, the server verified against cafile (None: the system's store)
    cafile: Optional[str] = None
    resume: bool = False  # TLS: resume the worker's first session (its tickets) instead of full handshakes


class Preset(NamedTuple):
    """A scenario of --all: a closed-loop table per size, or an open-loop sweep (CLIENT.md, "Scenarios")."""
    clients: int = 50
    connects: int = 1
    messages: int = 1
    sizes: tuple = (32,)  # one table per size
    work: int = 0  # the servers' --work
    held: bool = False  # every connection opened (at most HELD_PACE a second) and held, then the messages
    idle: Optional[float] = None  # held: each echoes once first, and all are held idle this long between
    after: Optional[str] = None  # --all runs it first, and this one only on the servers that passed it
    scaled: bool = False  # --scale shrinks its connects
    seconds: Optional[float] = None  # each connection exchanges messages this long instead (wrk)
    rates: Optional[str] = None  # an open-loop sweep, as --rate takes the rates
    duration: float = 1.0  # the sweep's seconds at each rate


PRESETS = {
    "article-50": Preset(50, 100, 50, scaled=True),  # the article's Mac tables: 50 and 150 clients
    "article-150": Preset(150, 100, 50, scaled=True),
    "article-100": Preset(100, 100, 50, scaled=True),  # its Linux tables: 100 and 1,000 clients
    "article-1000": Preset(1000, 100, 50, scaled=True),
    "c1k": Preset(1000, 1, 100, held=True),  # 1,000 / 10,000 concurrent connections, 100 messages each
    "c10k": Preset(10000, 1, 100, held=True),
    "c10k-cpu": Preset(10000, work=100000, held=True),
    # What a held connection costs (its memory): one echo each, all held idle 3 s, one more each.
    "held-10k": Preset(10000, 1, 2, held=True, idle=3.0),
    "c100k": Preset(100000, 1, 2, held=True, idle=3.0, after="held-10k"),
    "bulk": Preset(20, 5, 500, sizes=(1024, 4096, 65536)),  # messages of 1, 4 and 64 KB
    "pingpong": Preset(50, 40, 1),  # one message per connection: the connection rate
    # wrk's shape (-c100 -d10s in the 2017 shared-socket post): long-lived connections opened at once.
    "wrk": Preset(100, held=True, seconds=5.0),
    # The httperf ping-pong benchmark of 'Asynchronous Servers in Python': the connection rate stepped up.
    "pingpong-sweep": Preset(rates="1000:40000:1000"),
}
# What --all runs without --scenario and without a load shape: the README chart's scenario.
DEFAULT_SCENARIO = "article-100"
# A load shape, and its defaults: its flags default to None, so that one given (even --clients 50) is seen (--all
# then runs it as "custom"); --messages' default is the loop's (50 closed, 1 open).
SHAPE = {"clients": 50, "connects": 5, "messages": None, "size": 32, "seconds": None, "hold": False, "idle": None}
# Open loop (--rate). A sweep's knee: the highest offered rate whose step had no error, replies
# within 5 % of the offered rate, and a p99 response time (from the schedule) at most 100 ms.
KNEE_RULE = {"max_errors": 0, "min_reply_ratio": 0.95, "max_p99_ms": 100.0}
# Clearly past the limit: more than 1 % of the connections failed, or replies came back at
# under 80 % of the offered rate. Two steps in a row of that end a sweep.
PAST_ERROR_SHARE, PAST_REPLY_RATIO = 0.01, 0.8
TRACED = 2000, 100000  # --trace: a run a person can look at, at most this many connections and messages
KEPT_SCHEDULE = 0.95  # the client kept its schedule if it started at least 95 % of the offered rate
MAX_RATE, MAX_STEPS = 1000000, 1000  # connections/s, and steps in a sweep: a typo's guard


class Rates(NamedTuple):
    """--rate as parsed: the rates to offer, in order, and whether they were asked for
    as a sweep (A:B:STEP, a knee named even for one step) or as one rate (R)."""
    values: list
    sweep: bool


# Whether this interpreter, which runs the servers too, has the GIL on: False only on a free-threaded build
# running without it (sys._is_gil_enabled(), 3.13+).
GIL = getattr(sys, "_is_gil_enabled", lambda: True)()
# What a pattern cannot do, in words: said beside a failed row, never used to skip a server. {workers}: its
# --workers, as given or as its --help says by default (asked of the server: see workers_of()).
LIMITS = {
    "echo_simple.py": "it serves one client at a time",
    "echo_select.py": "select() watches descriptors below 1024 only",
    "echo_select_pool.py": "select() watches descriptors below 1024 only",
    "echo_prefork.py": "{workers} workers serve {workers} clients at a time",
    "echo_prethread.py": "{workers} threads serve {workers} clients at a time",
    "echo_fork.py": "a process per connection: thousands of forks, about 1 MB each",
    "echo_thread.py": "a thread per connection: thousands of threads take turns at the "
                      + ("GIL" if GIL else "cores"),
}


def die(message, status=1):
    """The one way client.py stops on an error: one line on stderr, no traceback."""
    sys.stderr.write("client.py: error: {}\n".format(message))
    raise SystemExit(status)


def note(message):
    """A line on stderr that is not an error (progress, a row left out)."""
    print("client.py: " + message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- one worker process: the engine

class Connection:
    """One TCP connection: what it sent, what has come back, and when. `owner` is its client's id (closed loop);
    `tag` makes its messages its own; `scheduled` is when it was due to start (open loop) or started."""
    __slots__ = ("sock", "fd", "owner", "tag", "connecting", "closing", "seq", "expected", "received", "unsent",
                 "scheduled", "started", "echo_started", "sent_at", "deadline", "handshake_at")

    def __init__(self, owner, tag, scheduled):
        self.owner, self.tag, self.scheduled = owner, tag, scheduled
        self.connecting, self.closing, self.seq, self.received, self.unsent = True, False, 0, b"", b""


class Engine:
    """A worker process's event loop. It connects each Connection, sends its messages one at a time, verifies every echo
    byte for byte, half-closes and expects EOF, and bounds every wait. Its handlers (connected, send, readable, fail)
    carry one connection each; the loop only dispatches. A driver decides when connections start: ClosedLoop (the
    article's clients, one connection after another) or OpenLoop (on a clock). The engine asks it
    driver.connected(c, now) -> send now?, tells it driver.ended(c, now, was_connecting), and calls driver.tick(now) ->
    seconds to sleep, or None when it is done."""

    def __init__(self, address, w):
        # epoll where there is one (poll elsewhere, select() on Windows), used directly: this
        # loop is the client's whole cost per message, and it must stay below the server's.
        if hasattr(select, "epoll"):
            self.poller, self.scale, self.READ, self.WRITE = select.epoll(), 1, select.EPOLLIN, select.EPOLLOUT
        elif hasattr(select, "poll"):
            self.poller, self.scale, self.READ, self.WRITE = select.poll(), 1000, select.POLLIN, select.POLLOUT
        else:
            self.poller, self.scale, self.READ, self.WRITE = SelectPoller(), 1, SelectPoller.READ, SelectPoller.WRITE
        self.family, self.sockaddr = address
        loopback = (sys.platform.startswith("linux") and self.family == socket.AF_INET
                    and self.sockaddr[0].startswith("127."))
        addresses = source_addresses(w.clients)
        self.sources = itertools.cycle(addresses) if loopback and binds_any(addresses[-1]) else None
        self.size, self.per_connection = w.size, w.messages
        self.seconds = w.seconds  # a timed connection ends its exchanges this long after its first
        self.timeout, self.connect_timeout = w.timeout, w.connect_timeout
        self.fill = bytes(range(256)) * (self.size // 256 + 1)
        self.cutoff = None  # with a time budget: when the run is cut
        self.by_fd = {}
        self.ready = []  # connects that completed inside connect(): handled at the next wake-up
        self.errors = dict.fromkeys(ERROR_WORDS, 0)
        self.client_limits = {"ports": 0, "descriptors": 0}  # the client's own failures, not the server's
        self.latencies = array.array("d")  # each message verified: sent -> echoed
        self.responses = array.array("d")  # each connection: scheduled -> its last echo
        self.connect_times = array.array("d")  # each connect: connect() -> connected
        self.handshakes = array.array("d")  # TLS (TLSEngine): each handshake, connected -> done
        self.echo_sum, self.connections, self.open, self.max_open = 0.0, 0, 0, 0
        self.last_done = None
        self.driver = None

    def connect(self, c, now):
        """Start c's connect; False if it failed at once (counted)."""
        c.started, c.deadline = now, now + self.connect_timeout
        try:
            sock = socket.socket(self.family, socket.SOCK_STREAM)
        except OSError as e:
            self.count(e)
            return False
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.sources:  # a source address in turn; connect() picks the port: see SOURCES
            try:
                sock.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
                sock.bind((next(self.sources), 0))
            except OSError as e:
                sock.close()
                self.count(e)
                return False
        # connect() binds a local port here, unless bind() did: see SOURCES.
        err = sock.connect_ex(self.sockaddr)
        if err not in IN_PROGRESS:
            sock.close()
            self.count(err)
            return False
        c.sock, c.fd = sock, sock.fileno()
        self.by_fd[c.fd] = c
        # On loopback the handshake is done before connect() returns: then there is no
        # "writable" to wait for, and a wake-up per connection is saved.
        if err == 0 or (TCP_INFO and sock.getsockopt(socket.IPPROTO_TCP, TCP_INFO, 1)[0] == TCP_ESTABLISHED):
            self.poller.register(c.fd, self.READ)
            self.ready.append(c)
        else:
            self.poller.register(c.fd, self.WRITE)
        return True

    def connected(self, c, now):
        """c's connect finished, as its socket turned writable: failed, or established."""
        err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            return self.fail(c, err)
        self.poller.modify(c.fd, self.READ)  # held or not, a server that closes or resets it is seen
        self.established(c, now)

    def established(self, c, now):
        """c's TCP connection is up."""
        self.connect_times.append(now - c.started)
        self.opened(c, now)

    def opened(self, c, now):
        """c is ready for its messages (with TLS: once its handshake is done)."""
        c.connecting = False
        self.open += 1
        self.max_open = max(self.max_open, self.open)
        if self.driver.connected(c, now):
            self.begin(c, now)

    def begin(self, c, now):
        c.echo_started = now
        self.next_message(c, now)

    def next_message(self, c, now):
        # Distinct per message: the sequence number's hex digits, lowest first, so
        # even a 1-byte message differs from the one before it.
        c.expected = c.unsent = ((b"%x" % c.seq)[::-1] + c.tag + self.fill)[:self.size]
        c.received = b""
        c.sent_at = now
        c.deadline = now + self.timeout
        self.send(c)

    def send(self, c):
        try:
            sent = c.sock.send(c.unsent)
        except BlockingIOError:
            sent = 0
        c.unsent = c.unsent[sent:]
        if c.unsent:  # the kernel took part of it: finish when the socket is writable
            self.poller.modify(c.fd, self.READ | self.WRITE)

    def readable(self, c, now):
        data = c.sock.recv(65536)
        if c.closing:
            if data:
                return self.fail(c, "extra bytes")
            self.echo_sum += now - c.echo_started
            self.connections += 1
            self.last_done = now
            return self.end(c, now)
        if not data:
            return self.fail(c, "closed early")
        received = c.received + data if c.received else data
        if len(received) < self.size:
            if c.expected[:len(received)] != received:
                return self.fail(c, "mismatch")
            c.received = received
            return
        if received != c.expected:
            return self.fail(c, "mismatch" if len(received) == self.size else "extra bytes")
        self.latencies.append(now - c.sent_at)
        c.seq += 1
        if (now - c.echo_started < self.seconds) if self.seconds else (c.seq < self.per_connection):
            return self.next_message(c, now)
        if self.driver.holds(c):  # echoed once, held until every connection has (--idle)
            return
        # All echoed: half-close, and the server must answer with EOF and nothing more.
        self.responses.append(now - c.scheduled)
        c.closing = True
        c.sock.shutdown(socket.SHUT_WR)

    def count(self, why):
        """Count an error by kind, and return the kind. The client's own limits (no local port left,
        no descriptor left) are kept apart: they are not the server's errors."""
        if isinstance(why, int):
            why = OSError(why, os.strerror(why))
        if isinstance(why, OSError) and (why.errno in NO_PORT or why.errno in NO_DESCRIPTOR):
            limit = "ports" if why.errno in NO_PORT else "descriptors"
            self.client_limits[limit] += 1
            return limit
        kind = ("refused" if isinstance(why, ConnectionRefusedError) else
                "reset" if isinstance(why, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)) else
                "tls" if isinstance(why, ssl.SSLError) else
                why if isinstance(why, str) else "other")
        self.errors[kind] += 1
        return kind

    def fail(self, c, why, now=None):
        self.count(why)
        self.end(c, now)

    def end(self, c, now):
        self.poller.unregister(c.fd)
        del self.by_fd[c.fd]
        c.sock.close()
        if not c.connecting:
            self.open -= 1
        self.driver.ended(c, now, c.connecting)

    def run(self, driver):
        """Dispatch events until the driver is done."""
        self.driver = driver
        poll, by_fd, clock, scale = self.poller.poll, self.by_fd, time.perf_counter, self.scale
        READ, WRITE = self.READ, self.WRITE
        next_check = clock() + 0.25
        wait = driver.tick(clock())
        while wait is not None:
            events = poll(0 if self.ready else wait * scale)
            now = clock()  # one timestamp per wake-up: every event in it had arrived by now
            if self.ready:  # the connects done when connect() returned, handled as if polled now
                ready, self.ready = self.ready, []
                for c in ready:
                    if by_fd.get(c.fd) is c:  # not failed meanwhile
                        try:
                            self.established(c, now)
                        except OSError as e:
                            self.fail(c, e, now)
            for fd, mask in events:
                c = by_fd.get(fd)
                if c is None:
                    continue
                try:
                    if c.connecting:
                        self.connected(c, now)
                        continue
                    c.deadline = now + self.timeout
                    if mask & WRITE:
                        self.send(c)
                        if not c.unsent:
                            self.poller.modify(fd, READ)
                        if not mask & ~WRITE:
                            continue
                    self.readable(c, now)
                except OSError as e:
                    self.fail(c, e, now)
            if now >= next_check:  # every wait is bounded: a silent connection fails after its bound
                next_check = now + 0.25
                late = self.cutoff and now > self.cutoff + self.timeout
                for c in [c for c in by_fd.values() if late or now > c.deadline]:
                    self.fail(c, "deadline" if late else "connect timeout" if c.connecting else "timeout", now)
            wait = driver.tick(now)

    def figures(self):
        """What the parent combines: counts, and the timings as bytes."""
        return {"messages": len(self.latencies), "connections": self.connections, "echo_sum": self.echo_sum,
                "connect_sum": sum(self.connect_times), "max_open": self.max_open, "errors": self.errors,
                "client_limits": self.client_limits, "last_done": self.last_done, "latencies": self.latencies.tobytes(),
                "responses": self.responses.tobytes(), "connect_times": self.connect_times.tobytes(),
                "handshakes": self.handshakes.tobytes(), "resumed": 0, "tls_version": None}


class SelectPoller:
    """poll()'s calls made with select(), where there is neither epoll nor poll (Windows): the
    engine's loop stays the same. Windows' select() takes sockets only, at most SELECT_MOST at
    once and never none, and says that a connect failed as an exception, not as writable."""
    READ, WRITE = 1, 4

    def __init__(self):
        self.wanted = {}  # fd: READ, WRITE or both

    def register(self, fd, mask):
        self.wanted[fd] = mask

    modify = register

    def unregister(self, fd):
        del self.wanted[fd]

    def poll(self, timeout):
        """[(fd, mask)] of the sockets ready, waiting at most timeout seconds."""
        fds = list(self.wanted)
        if not fds:
            time.sleep(timeout)
            return []
        # Past SELECT_MOST sockets, each slice is looked at without waiting, and the wait is short.
        wait = timeout if len(fds) <= SELECT_MOST else 0
        events = {}
        for start in range(0, len(fds), SELECT_MOST):
            part = fds[start:start + SELECT_MOST]
            writes = [fd for fd in part if self.wanted[fd] & self.WRITE]
            readable, writable, failed = select.select([fd for fd in part if self.wanted[fd] & self.READ], writes,
                                                       writes, wait)
            events.update(dict.fromkeys(readable, self.READ))
            for fd in writable + failed:
                events[fd] = events.get(fd, 0) | self.WRITE
        if not events and wait != timeout:
            time.sleep(min(timeout, 0.001))
        return list(events.items())


class TLSEngine(Engine):
    """The engine over TLS (--tls): all that TLS changes is here and in TLSSocket, so the plain engine pays nothing for
    it. Once TCP is up, the socket is wrapped without its handshake, which the loop drives: while it lasts the
    connection counts as connecting, and each event goes to connected(), where SSLWantReadError and SSLWantWriteError
    say which event it waits for. Each connection makes a full handshake, as a new client does, unless --tls-resume."""

    def __init__(self, address, w, server_name):
        super().__init__(address, w)
        self.context, self.server_name = tls_context(w.cafile), server_name
        self.context.sslsocket_class = TLSSocket
        self.resume, self.session, self.resumed, self.version = w.resume, None, 0, None

    def connected(self, c, now):
        if isinstance(c.sock, ssl.SSLSocket):  # TCP is up: the handshake goes on
            return self.handshake(c, now)
        super().connected(c, now)

    def opened(self, c, now):
        """TCP is up: the handshake's first step (the ClientHello)."""
        c.handshake_at = now
        c.sock = self.context.wrap_socket(c.sock, server_hostname=self.server_name, do_handshake_on_connect=False,
                                          session=self.session)
        self.handshake(c, now)

    def handshake(self, c, now):
        try:
            c.sock.do_handshake()
        except ssl.SSLWantReadError:
            return self.poller.modify(c.fd, self.READ)
        except ssl.SSLWantWriteError:
            return self.poller.modify(c.fd, self.WRITE)
        # Timed now, not from the wake-up: on loopback the server may answer within this call
        # (woken on this core, it runs first), and the handshake ends in its first step.
        done = time.perf_counter()
        self.poller.modify(c.fd, self.READ)
        self.handshakes.append(done - c.handshake_at)
        self.resumed += c.sock.session_reused
        self.version = self.version or "{} {}".format(c.sock.version(), c.sock.cipher()[0])
        super().opened(c, done)

    def send(self, c):
        try:
            super().send(c)
        except ssl.SSLWantWriteError:  # none of it went: again, the same bytes, once writable
            self.poller.modify(c.fd, self.READ | self.WRITE)

    def readable(self, c, now):
        try:
            super().readable(c, now)
        except ssl.SSLWantReadError:
            return  # no whole record yet, or only a session ticket: wait for more
        except ssl.SSLError as e:  # our close_notify's unwrap() read data the server sent after the last echo
            if e.reason != "APPLICATION_DATA_AFTER_CLOSE_NOTIFY":
                raise
            return self.fail(c, "extra bytes", now)
        if self.resume and not self.session:
            session = c.sock.session  # None once the connection is closed
            if session is not None and session.has_ticket:  # TLS 1.3's tickets come after the handshake
                self.session = session

    def figures(self):
        return dict(super().figures(), resumed=self.resumed, tls_version=self.version)


class TLSSocket(ssl.SSLSocket):
    """The SSLSocket the TLS engine's connections use: recv() and shutdown() as the engine uses a TCP socket's."""

    def recv(self, buflen=1024, flags=0):
        """What has come, decrypted; b"" at EOF, the server's close_notify included (after ours it raises
        SSLZeroReturnError). Each recv() returns one record at most (16 KiB): while the last was full, more of a long
        echo may have come, so read on (the rest wakes epoll). Nothing stays decrypted in the SSL object, which epoll
        cannot see: a record fits in 64 KiB (pending() is 0, checked all the same)."""
        try:
            data = chunk = super().recv(65536)
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):  # EOF, after close_notify or without one (asyncio
            return b""  # before 3.11 closes TCP without its own); an echo it cuts short is still caught
        while len(chunk) == TLS_RECORD or self.pending():
            try:
                chunk = super().recv(65536)
            except (ssl.SSLWantReadError, ssl.SSLZeroReturnError, ssl.SSLEOFError):
                break  # EOF is read again at the next wake-up
            data += chunk
        return data

    def shutdown(self, how):
        """TLS's half-close: close_notify. unwrap() sends ours, then reads for the server's, which
        cannot have come yet; a recv() reads it later as EOF."""
        with contextlib.suppress(ssl.SSLWantReadError, ssl.SSLWantWriteError, ssl.SSLEOFError):  # EOF: read next
            self.unwrap()


class Tracing:
    """Engine or TLSEngine, recording each connection's life for --trace (run_worker() makes the class, with the
    worker's number, its connections' lives and its lines): when its connect() started and TCP was up, when each
    message was sent and its echo verified, when and how it ended. Untraced, the engine runs without any of it."""
    kind = None  # what count() counted last: how the connection that fail() ends ended

    def connect(self, c, now):
        if super().connect(c, now):
            return True
        self.done(c, time.perf_counter(), self.kind)  # failed at once: counted
        return False

    def established(self, c, now):
        self.lives[c] = (now, [])  # when TCP was up, and its messages: [[sent, echoed], ...]
        super().established(c, now)

    def next_message(self, c, now):
        self.lives[c][1].append([now, None])
        super().next_message(c, now)

    def readable(self, c, now):
        seq, messages = c.seq, self.lives[c][1]
        try:
            super().readable(c, now)
        finally:
            if c.seq > seq:  # its echo came whole and verified
                messages[seq][1] = now

    def count(self, why):
        self.kind = super().count(why)
        return self.kind

    def end(self, c, now):
        self.done(c, now or time.perf_counter(), self.kind or "eof")
        super().end(c, now)

    def done(self, c, when, how):
        """c's line, its times on time.perf_counter()'s clock (write_trace() counts them from the run's start)."""
        k, *cid = (int(n, 16) for n in c.tag.strip(b":").split(b":"))  # ":K:C:" in closed loop, ":K:" in open
        connected, messages = self.lives.pop(c, (None, []))
        self.lines.append({"worker": self.worker, "client": cid[0] if cid else None, "connection": k,
                           "connect": [c.started, connected], "messages": messages, "end": when, "how": how})
        self.kind = None

    def figures(self):
        return dict(super().figures(), trace=self.lines)


def tls_context(cafile):
    """The client's TLS context: the server's certificate verified against cafile, or the system's
    store, and its name checked against --host. TLS 1.2 at least, the defaults otherwise."""
    context = ssl.create_default_context(cafile=cafile)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


class ClosedLoop:
    """The article's clients: each opens its connections one after another, the next when the last has ended, so a slow
    server is asked less (closed loop). At most `connecting` connects are in flight (a burst of connects overflows the
    server's listen queue: SYNs are dropped and retried after 1, 3, 7 s), and with a connect rate, at most that many
    start a second. With hold, every connection is opened first (with idle, each echoes once too); the workers meet at
    barrier, and the parent reads the memory they take; after idle seconds (if given), the messages go."""

    def __init__(self, engine, cids, w, barrier):
        self.engine, self.barrier = engine, barrier
        self.connects, self.slots, self.hold, self.idle = w.connects, w.connecting, w.hold, w.idle
        self.done = dict.fromkeys(cids, 0)  # the article's workers (by id): connections each has ended, of `connects`
        self.active, self.in_flight = len(self.done), 0
        self.queued = collections.deque()  # clients (ids) waiting for a connect slot
        self.pace, self.next_connect = 1.0 / w.connect_pace if w.connect_pace else 0.0, 0.0
        self.held = set()  # with hold: connected (with idle: and echoed once), waiting for the others
        self.released = not self.hold
        self.messages = w.messages
        if self.hold and self.idle is not None:
            engine.per_connection = 1  # the first echo; the rest once all are held (release())
        self.times = {}

    def start(self, now):
        self.times["start"] = now
        for cid in self.done:
            self.open(cid, now)

    def open(self, cid, now):
        """Start client's next connection, or queue it for a slot; a connect that fails at once counts and moves on."""
        engine, done = self.engine, self.done
        while True:
            if done[cid] == self.connects or (engine.cutoff and now > engine.cutoff):
                engine.errors["deadline"] += self.connects - done[cid]
                self.active -= 1
                return
            if not self.may_connect(now):
                self.queued.append(cid)
                return
            if self.pace:  # due one interval later; a late loop catches up at most a millisecond's worth
                self.next_connect = max(self.next_connect, now - 0.001) + self.pace
            c = Connection(cid, b":%x:%x:" % (done[cid], cid), now)
            if engine.connect(c, now):
                self.in_flight += 1
                return
            done[cid] += 1

    def may_connect(self, now):
        """A connect slot is free, and with a connect rate, the next connect is due."""
        return self.in_flight < self.slots and now >= self.next_connect

    def connect_queued(self, now):
        while self.queued and self.may_connect(now):
            self.open(self.queued.popleft(), now)

    def connect_done(self, now):
        """A connect finished, either way: its slot goes to the next client queued."""
        self.in_flight -= 1
        self.connect_queued(now)

    def connected(self, c, now):
        self.connect_done(now)
        return self.released or self.idle is not None or not self.holds(c)  # with idle: its first echo now

    def holds(self, c):
        """Hold c (open, not released), or False: all go on (released)."""
        if not self.released:
            c.deadline = float("inf")  # waits for the other connections, not for the server
            self.held.add(c)
        return not self.released

    def ended(self, c, now, was_connecting):
        now = now or time.perf_counter()
        self.held.discard(c)
        self.done[c.owner] += 1
        if was_connecting:
            self.connect_done(now)
        self.open(c.owner, now)

    def tick(self, now):
        if self.pace:
            self.connect_queued(now)
        if not self.released and not self.in_flight and not self.queued and self.engine.open == len(self.held):
            self.release()
        if self.pace and self.queued:
            return min(0.25, max(0.0, self.next_connect - now))
        return 0.25 if self.active else None

    def release(self):
        """Every connection is open (or failed): meet the other workers, then send."""
        self.released = True
        self.times.update(held_at=time.perf_counter(), held=self.engine.open)
        try:  # all held: the parent reads the memory they take, then meets the workers again
            self.barrier.wait(self.engine.connect_timeout)
            self.barrier.wait(60)
        except threading.BrokenBarrierError:
            pass  # another worker is late or gone: go on, its errors are its own
        time.sleep(self.idle or 0)  # held idle: a reset meanwhile shows at the next echo
        self.engine.per_connection = self.messages
        now = self.times["echo_start"] = time.perf_counter()
        for c in list(self.held):  # each still open (one that failed has left the set)
            try:
                self.engine.begin(c, now)
            except OSError as e:  # reset while it waited
                self.engine.fail(c, e, now)

    def finish(self):
        if not self.released:
            self.release()  # every connection failed: still meet the others at the barrier


class OpenLoop:
    """Connections start on a clock, `rate` a second over all workers, whether or not the earlier ones have finished
    (httperf's open loop). Of P workers, worker i starts connections i, i+P, i+2P, ...; connection k is due at the start
    of the millisecond in which k/rate falls, and its response time counts from then: a server that stalls keeps being
    asked, and the wait of every connection due meanwhile shows (wrk2's coordinated omission). The schedule is in whole
    milliseconds so that the connections due in one millisecond start in one wake-up, and their events come back
    together: the client spends its CPU on connections, not on waking up."""

    def __init__(self, engine, w, index, procs):
        self.engine = engine
        self.due = range(index, round(w.rate * w.duration), procs)
        self.per_ms = w.rate / 1000.0
        self.n, self.behind, self.next_at = 0, 0.0, None
        self.times = {"first_start": None, "last_start": None}

    def start(self, now):
        self.times["start"] = self.t0 = now
        self.next_at = self.due_at(0) if self.due else None

    def due_at(self, n):
        """When the n-th of this worker's connections is due: the start of its millisecond."""
        return self.t0 + (self.due[n] // self.per_ms) / 1000.0

    def tick(self, now):
        """Start every connection that is due; return the seconds until the next is."""
        engine, clock, due, at = self.engine, time.perf_counter, self.due, self.next_at
        while at is not None:
            now = clock()
            if at > now:
                return min(at - now, 0.25)
            self.behind = max(self.behind, now - at)
            self.times["first_start"] = self.times["first_start"] or now
            following = at
            while following == at:  # every connection of this millisecond, each connect timed from its own start
                engine.connect(Connection(None, b":%x:" % due[self.n], at), clock())
                self.n += 1
                following = self.due_at(self.n) if self.n < len(due) else None
            self.times["last_start"] = clock()
            self.next_at = at = following
        return 0.25 if engine.by_fd else None

    def connected(self, c, now):
        return True

    def holds(self, c):
        return False

    def ended(self, c, now, was_connecting):
        pass

    def finish(self):
        self.times.update(started=self.n, behind=self.behind)


def source_addresses(clients):
    """The loopback source addresses the connections take in turn: SOURCES, or one per PER_SOURCE clients."""
    return ["127.0.0.{}".format(n) for n in range(1, max(SOURCES, -(-clients // PER_SOURCE)) + 1)]


def binds_any(address):
    """Whether a socket may bind this loopback address with its port left to connect()
    (an old kernel, or a sandbox, may refuse): if not, connections keep one source address."""
    try:
        with socket.socket() as sock:
            sock.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
            sock.bind((address, 0))
        return True
    except OSError:
        return False


def run_worker(address, share, w, go, barrier, results, host, traced=False):
    """Runs in a worker process: drive this worker's share of the load (its client
    ids, or its place in the schedule), send back one figures dict."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop (Ctrl-C reaches the group)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's noted(), which a fork inherits
    index, procs = share
    kind = TLSEngine if w.tls else Engine
    if traced:  # the same engine, recording (--trace); one engine in this process, so its lives and lines here
        kind = type("Traced" + kind.__name__, (Tracing, kind), {"worker": index, "lives": {}, "lines": []})
    engine = kind(address, w, host) if w.tls else kind(address, w)
    if w.rate:
        driver = OpenLoop(engine, w, index, procs)
    else:
        driver = ClosedLoop(engine, range(index, w.clients, procs), w, barrier)
    results.send("ready")
    if not go.wait(60 * (procs + 1)):  # the parent waits at most 60 s for each worker: it is gone
        return
    cpu0 = time.process_time()  # this process's CPU seconds, user and system, on every platform
    start = time.perf_counter()
    engine.cutoff = start + w.budget if w.budget else None
    driver.start(start)
    engine.run(driver)
    driver.finish()
    cpu = time.process_time() - cpu0
    results.send(dict(engine.figures(), **driver.times, end=time.perf_counter(), cpu=cpu))


# ---------------------------------------------------------------- measuring

def fit_descriptors(clients, procs, grow=False):
    """Raise RLIMIT_NOFILE to the hard limit (servers started by --all inherit it); return procs, or with grow as
    many more as each one's share of the clients needs to fit; where they do not, say so in one line and exit (0
    clients: nothing to fit). Windows has no such limit to raise."""
    if resource is None:
        return procs
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft < target:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    procs = max(procs, -(-clients // max(1, soft - SPARE_DESCRIPTORS))) if grow else procs
    need = -(-clients // procs) + SPARE_DESCRIPTORS
    if clients and soft < need:
        die("{} clients on {} processes need {} descriptors each; the limit is {} (raise ulimit -n, or --procs)".format(
            clients, procs, need, soft))
    return procs


def too_few_descriptors(pid, clients, pool=True):
    """Why the server, process pid, cannot hold clients connections, in one line, where its descriptor limit
    (/proc/PID/limits) says so: one process holds them all, or with pool its workers (the processes below it) a share
    each. None where they fit, or where it cannot be read."""
    table = processes()
    workers = max(1, len(descendants(pid, table)) - 1) if table and pool else 1
    try:
        with open("/proc/{}/limits".format(pid)) as f:
            soft, hard = next(line.split()[3:5] for line in f if line.startswith("Max open files"))
    except (OSError, StopIteration):
        return None
    where = "one process" if workers == 1 else "{} worker processes (or start it with more --workers)".format(workers)
    if soft == "unlimited" or -(-clients // workers) + SPARE_DESCRIPTORS <= int(soft):
        return None
    return "{:,} connections do not fit in {}: its descriptors are limited to {:,} (ulimit -n; the hard limit is {}: " \
        "root raises it in limits.conf or systemd's LimitNOFILE)".format(clients, where, int(soft), hard)


STOPS = []  # the stop signals that came: the waits below see them (wait())


def noted(signum, frame):
    """SIGINT's and SIGTERM's handler (main()'s): it only notes the signal, and the run's next wait does the stop."""
    STOPS.append(signum)


def wait(ready, seconds, stops=1):
    """Wait until ready(t) (which may wait t seconds) is true: True, or False once seconds pass. `stops` stop signals
    noted end it: a run's wait (1) by KeyboardInterrupt (main() stops what it started), the clean-up's (2): False."""
    deadline = time.monotonic() + seconds
    while len(STOPS) < stops:
        left = deadline - time.monotonic()
        if ready(min(max(left, 0.0), 0.05)):
            return True
        if left <= 0:
            return False
    if stops == 1:
        raise KeyboardInterrupt(STOPS[0])
    return False


def exited(proc):
    """wait()'s ready for a process: whether it has exited, looked at again after t seconds."""
    return lambda t: proc.poll() is not None or time.sleep(t) or proc.poll() is not None


def measure(host, port, w, procs, read=None, why=None, trace=None, pid=None):
    """Run workload w against host:port (each connection's life written to the file trace, if given): (record, why
    its server's CPU is not in it or None, (before, after): read()'s two readings of it (a CPU, or None), or None).
    With w.hold, what the held connections cost the server (process pid, or None: why says why) and the kernel,
    read before they open and once all are held (held_memory())."""
    cpu_before = read() if read else None
    # Open loop: how many are open at once is the server's doing, and EMFILE is counted: no clients to fit.
    procs = max(1, min(procs, round(w.rate * w.duration) if w.rate else w.clients))
    fit_descriptors(0 if w.rate else w.clients, procs)
    # The host decides the family: 127.0.0.1 is IPv4, ::1 is IPv6.
    family, _, _, _, sockaddr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    context = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
    go, barrier = context.Event(), context.Barrier(procs + 1)  # the parent meets the workers once all are held
    per_worker = dataclasses.replace(w, connecting=max(1, w.connecting // procs),
                                     connect_pace=w.connect_pace / procs if w.connect_pace else None)
    workers, pipes, done = [], [], False
    for i in range(procs):
        here, there = context.Pipe(duplex=False)
        worker = context.Process(target=run_worker, args=((family, sockaddr), (i, procs), per_worker, go, barrier,
                                                          there, host, bool(trace)), daemon=True)
        start_worker(worker)
        workers.append(worker)
        there.close()
        pipes.append(here)
    try:
        for pipe in pipes:
            if not wait(pipe.poll, 60) or receive(pipe) != "ready":
                die("a worker process did not start")
        before = w.hold and not w.rate and held_memory(pid, why)
        t0 = time.perf_counter()  # the run's start, on every process's clock (CLIENT.md, "A trace of each connection")
        go.set()
        if before:
            try:  # the workers wait here once all their connections are open, then for this reading
                barrier.wait(finish_bound(w))
                after = dict(held_memory(pid, why), client=memory([os.getpid()] + [x.pid for x in workers]))
                barrier.wait(60)
            except threading.BrokenBarrierError:
                after = None
        parts = []
        for pipe in pipes:
            if not wait(pipe.poll, finish_bound(w)):
                die("a worker process did not finish")
            parts.append(receive(pipe))
        done = True
    finally:  # done: each worker exits once its figures are sent; stopped by a signal, or failed: killed now
        for worker in workers:
            worker.join(5 if done else 0)
            if worker.is_alive():
                worker.kill()
                worker.join()
    if trace:
        write_trace(trace, t0, host, port, w, parts)
    result = (combine_open if w.rate else combine)(parts, w)
    result = held_figures(result, sum(p["held"] for p in parts), before, after) if before else result
    if cpu_before is None:
        return result, why, None
    cpu_after = read()
    used, why = cpu_after.since(cpu_before)
    if used:
        result.server_cpu_s, result.server_cpu_resolution_s = used.seconds, used.resolution
        if isinstance(result, Run):
            per_server_cpu(result)
    return result, why, (cpu_before, cpu_after)


def held_memory(pid, unread):
    """What the server (process pid and those below it, as memory() reads them) and the kernel's TCP sockets take
    now: {"server": (kind, KiB), "kernel": (kind, KiB)}, (None, why not) where it cannot be read (pid None: unread)."""
    table = processes() if pid else None
    server = memory([p.pid for p in descendants(pid, table)] if table else (), unread if not pid else None if table
                    is None else "its process {} had ended".format(pid))
    if not server[0]:
        return {"server": server, "kernel": server}
    try:  # the kernel's socket caches (root may read them): name, ..., pages a slab (5), ..., slabs in all (14)
        with open("/proc/slabinfo") as f:
            return {"server": server, "kernel": ("slabinfo", sum(int(r[5]) * int(r[14]) for r in map(
                str.split, f) if r[0] in SOCKET_SLABS) * (os.sysconf("SC_PAGE_SIZE") // 1024))}
    except OSError:  # else all of its slab, whatever else it holds
        return {"server": server, "kernel": ("meminfo Slab", memory((), field="Slab:")[1])}


def memory(pids, unread=None, field="Pss:"):
    """(kind, KiB) of processes pids, summed: "PSS" from /proc/PID/smaps_rollup (a page n processes share counts
    1/n), "RSS" (VmRSS) where the kernel has none; a process that ended meanwhile counts none. (None, why not) where
    there is none to read (unread) or one cannot be read. pids (): field's line of /proc/meminfo."""
    rollup = os.path.exists("/proc/self/smaps_rollup")
    if not os.path.exists("/proc/self/status") or not pids and field == "Pss:":
        return None, unread or "this system has no /proc (Linux only)"
    kind, field = ("PSS", field) if rollup or not pids else ("RSS", "VmRSS:")
    total = 0
    for path in ["/proc/{}/{}".format(pid, "smaps_rollup" if rollup else "status") for pid in pids] or [
            "/proc/meminfo"]:
        try:
            with open(path) as f:
                total += next((int(line.split()[1]) for line in f if line.startswith(field)), 0)
        except (FileNotFoundError, ProcessLookupError):
            continue
        except OSError as e:
            return None, "cannot read {} ({})".format(path, e.strerror or e)
    return kind, total


def held_figures(r, held, before, after):
    """Run r with what its `held` connections cost, from held_memory()'s readings before they opened and once all
    were held (None: the workers did not meet there): KiB in all and a held connection, or why not."""
    after = after or dict.fromkeys(("server", "kernel", "client"), (None, "the client's workers did not meet once all "
                                                                        "their connections were open"))
    figures, whys = {"held_connections": held, "client_memory_kib": after["client"][0] and after["client"][1]}, []
    for who, word in ("server", "memory"), ("kernel", "slab"):
        (kind, low), (ok, high) = before[who], after[who]
        if not (kind and ok):
            whys.append(high if kind else low)
            continue
        figures.update({who + "_memory_kind": kind, "{}_{}_before_kib".format(who, word): low,
                        "{}_{}_held_kib".format(who, word): high, who + "_kib_per_held": (high - low) / max(1, held)})
    return dataclasses.replace(r, memory_unread="; ".join(dict.fromkeys(whys)) or None, **figures)


def write_trace(path, t0, host, port, w, parts):
    """--trace: the run's line, then each connection's, its times in seconds from t0, to the file path. (CLIENT.md,
    "A trace of each connection".)"""
    at = lambda t: None if t is None else round(t - t0, 6)
    lines = [{"trace": 1, "t0": t0, "clock": "perf_counter", "host": host, "port": port, "workload": as_dict(w)}]
    lines += [dict(life, connect=[at(t) for t in life["connect"]], end=at(life["end"]),
                   messages=[[at(s), at(e)] for s, e in life["messages"]]) for part in parts for life in part["trace"]]
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(json.dumps(line) + "\n" for line in lines))


def start_worker(worker, tries=3):
    """worker.start(), tried again where the system could not make the process (Wine, once: WinError 1359)."""
    for left in reversed(range(tries)):
        try:
            return worker.start()
        except OSError as e:
            if not left:
                raise
            note("a worker process did not start ({}): trying again".format(e))


def finish_bound(w):
    """Seconds a worker may take to finish w, every wait at its bound; at most a million (11 days), as a
    poll() takes no more than 24 days (--connects 10 --messages 50000 would ask for 58)."""
    if w.rate:
        bound = w.duration + w.connect_timeout + (w.messages + 2) * w.timeout + 60
    else:
        bound = 2 * w.connect_timeout + w.connects * ((w.messages + 3) * w.timeout + (w.seconds or 0)) + 60
    return min(bound, 10**6)


def receive(pipe):
    """A worker's message; a worker that died says so in one line, not a traceback."""
    try:
        return pipe.recv()
    except EOFError:
        die("a worker process died (its error is above)")


def timings(parts, key):
    """The workers' seconds under key (array.array("d")'s bytes), sorted."""
    return sorted(seconds for part in parts for seconds in array.array("d", part[key]))


def percentile(ordered, q):
    """The q-quantile of sorted seconds, in milliseconds (None if there are none)."""
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else None


def at_least(ordered, seconds):
    """How many of sorted seconds are that many seconds or more."""
    return len(ordered) - bisect.bisect_left(ordered, seconds)


# ---- results: records whose fields say how every output writes them

def figure(title, spec, line, unit="", when=False, table=False, text=None):
    """A figure of a result record, declared once: its title, its format (a format spec, or a function of the value)
    and unit drive the text (grouped in lines; text: its own (function, unit)), the Markdown (a column where table)
    and the JSON (its field name). A figure `when` applies only sometimes (held connections, TLS, the server's CPU
    under --all): where it is None it is left out."""
    return dataclasses.field(default=None, metadata=dict(title=title, spec=spec if callable(spec) else spec.format,
                                                         line=line, unit=unit, when=when, table=table, text=text))


def ms_text(value):
    """Milliseconds with about three significant digits: 0.213, 4.27, 38.1, 1,204."""
    if value is None or value == 0:
        return "-" if value is None else "0"
    return "{:,.{}f}".format(value, 3 if value < 1 else 2 if value < 10 else 1 if value < 100 else 0)


def resolution_text(seconds):
    """A CPU figure's resolution in words: "1 ns" (schedstat), "20 ms" (clock ticks)."""
    return "1 ns" if seconds <= 1e-9 else "{:g} ms".format(round(seconds * 1000, 3))


def rate_text(rate):
    return "{:,.0f}".format(rate) if rate == int(rate) else "{:,.2f}".format(rate)


def kinds_text(kinds, w=None):
    """Errors by kind, the one way they are written: "2 reset, 1 mismatch"; given the workload w, counted as
    connections, in words with their bounds: "2 connections reset, 1 connection had no echo within 10 s"."""
    bounds = dataclasses.asdict(w) if w is not None else None
    return ", ".join("{:,} connection{} {}".format(n, "s" * (n != 1), ERROR_WORDS[kind].format(**bounds)) if bounds
                     else "{:,} {}".format(n, kind) for kind, n in kinds.items()) or "-"


COUNT, RATE, SHARE = "{:,}", "{:,.0f}", "{:.0%}"
YES = lambda value: "yes" if value else "no"  # a flag in words
MB = "{:.2f}"  # megabytes a second
CPU_S = "{:.3f}"  # CPU seconds to the millisecond: finer than the 10 ms tick, so a reader sees the figure's digits
# The handshake's figures (--tls), the same in closed and open loop.
TLS_FIGURES = {"tls_version": figure("tls version", str, "tls", when=True),
               "handshakes": figure("tls handshakes", COUNT, "tls", when=True),
               "handshakes_per_s": figure("tls handshakes/s", "{:,.1f}", "tls", when=True),
               "handshakes_resumed": figure("tls resumed", lambda n: "{:,}{}".format(n, "" if n else " (each a full "
                                                                                     "handshake)"), "tls", when=True),
               "handshake_p50_ms": figure("handshake p50", ms_text, "handshake", "ms", when=True),
               "handshake_p99_ms": figure("handshake p99", ms_text, "handshake", "ms", when=True),
               "handshake_max_ms": figure("handshake max", ms_text, "handshake", "ms", when=True)}
CONNECT_FIGURES = {"connect_p50_ms": figure("connect p50", ms_text, "connect", "ms"),
                   "connect_p99_ms": figure("connect p99", ms_text, "connect", "ms", table=True),
                   "connect_max_ms": figure("connect max", ms_text, "connect", "ms"),
                   "syn_retries": figure("SYN retries", COUNT, "connect", table=True),
                   "max_open": figure("most open", COUNT, "connect", table=True)}


def client_figures(per, errors_column):
    return {"client_cpu_s": figure("client CPU", CPU_S, "client", "s", table=True),
            "client_us": figure("client CPU per " + per, "{:.1f}", "client", "us"),
            "client_ports_exhausted": figure("client out of local ports", COUNT, "client"),
            "client_descriptors_exhausted": figure("client out of descriptors", COUNT, "client"),
            "errors": figure("errors", COUNT, "errors", table=errors_column),
            "error_kinds": figure("errors by kind", kinds_text, "errors")}


def record(name, doc, figures):
    """A result record: a dataclass of figures, each with its title and format in its metadata, after
    the server it measured and why it failed (--all's rows)."""
    return dataclasses.make_dataclass(name, [("server", object, None), ("failed", object, None)] + [
        (key, object, f) for key, f in figures.items()], namespace={"__doc__": doc})


IN_MS = (lambda seconds: ms_text(1000 * seconds), "ms")  # the article's seconds, as the text report's other times
Run = record("Run", "A closed-loop run against one server, or the medians of --all's measured runs.", {
    "connect_s": figure("connect", "{:.5f}", "article", "s", when=True, table=True, text=IN_MS),
    "echo_s": figure("echo", "{:.5f}", "article", "s", when=True, table=True, text=IN_MS),
    "total_s": figure("total", "{:.5f}", "article", "s", when=True, table=True, text=IN_MS),
    "connect_phase_s": figure("connect phase", "{:.3f}", "phases", "s", when=True, table=True),
    "echo_phase_s": figure("echo phase", "{:.3f}", "phases", "s", when=True, table=True),
    "messages": figure("messages verified", COUNT, "messages"),
    "expected": figure("messages expected", COUNT, "messages"),
    "wall_s": figure("messages in", "{:.3f}", "messages", "s"),
    "connections": figure("connections completed", COUNT, "messages"),
    "msgs_per_s": figure("msgs/s", RATE, "rates", table=True),
    "mb_per_s": figure("MB/s", MB, "rates", table=True),
    "conns_per_s": figure("connections/s", RATE, "rates"),
    **CONNECT_FIGURES,
    "p50_ms": figure("latency p50", ms_text, "latency", "ms"),
    "p90_ms": figure("latency p90", ms_text, "latency", "ms"),
    "p99_ms": figure("latency p99", ms_text, "latency", "ms", table=True),
    "max_ms": figure("latency max", ms_text, "latency", "ms"),
    **TLS_FIGURES,
    "server_cpu_s": figure("server CPU", CPU_S, "server", "s", when=True, table=True),
    # What the server's CPU may be short by: 1 ns (schedstat), or clock ticks where threads had exited.
    "server_cpu_resolution_s": figure("server CPU resolution", resolution_text, "server", when=True, table=True),
    "msgs_per_server_cpu_s": figure("msgs per server CPU-s", RATE, "server", when=True, table=True),
    # --all: how far the measured runs' messages per server CPU-second lie apart, +- half their range.
    "msgs_per_server_cpu_spread": figure("msgs per server CPU-s +-", "{:.0%}", "server", when=True, table=True),
    # The client spent more CPU than the server: msgs/s is as much the client's figure as the server's.
    "client_bound": figure("client-bound", YES, "server", when=True, table=True),
    # A pool's workers, measured from outside (/proc): how the measured runs' work spread over them.
    "worker_cpu_s": figure("CPU per worker", lambda s: "/".join(CPU_S.format(x) for x in s), "server", "s",
                           when=True, table=True),  # each worker's CPU seconds, busiest first: "0.612/0.394"
    "busiest_cpu_share": figure("busiest worker's share", SHARE, "server", when=True, table=True),
    "even_share": figure("even share", SHARE, "server", when=True, table=True),
    "held_connections": figure("memory held", COUNT, "memory", when=True),
    "server_memory_kind": figure("memory server's", str, "memory", when=True),
    "server_memory_before_kib": figure("memory before", COUNT, "memory", "KiB", when=True),
    "server_memory_held_kib": figure("memory when held", COUNT, "memory", "KiB", when=True),
    "server_kib_per_held": figure("memory a held connection", "{:,.2f}", "memory", "KiB", when=True),
    "kernel_memory_kind": figure("kernel sockets from", str, "kernel", when=True),
    "kernel_slab_before_kib": figure("kernel before", COUNT, "kernel", "KiB", when=True),
    "kernel_slab_held_kib": figure("kernel when held", COUNT, "kernel", "KiB", when=True),
    "kernel_kib_per_held": figure("kernel a held connection (both ends)", "{:,.2f}", "kernel", "KiB", when=True),
    "memory_unread": figure("memory not read:", str, "memory", when=True),
    "client_memory_kib": figure("memory the client's own", COUNT, "memory", "KiB", when=True),
    **client_figures("message", False),  # --all's rows are runs without an error
})

Step = record("Step", "One open-loop rate against one server (a step of a sweep).", {
    "offered_rate": figure("offered/s", rate_text, "offered", table=True),
    "duration_s": figure("offered for", "{:g}", "offered", "s"),
    "scheduled": figure("offered connections", COUNT, "offered"),
    "started": figure("started", COUNT, "schedule"),
    "achieved_rate": figure("started/s", RATE, "schedule", table=True),
    "behind_ms": figure("behind", ms_text, "schedule", "ms", table=True),
    "kept_schedule": figure("schedule kept", YES, "schedule"),
    "connections": figure("replies", COUNT, "replies"),
    "reply_rate": figure("replies/s", RATE, "replies", table=True),
    "messages": figure("messages verified", COUNT, "messages"),
    "expected": figure("messages expected", COUNT, "messages"),
    "mb_per_s": figure("MB/s", MB, "messages"),
    "p50_ms": figure("response p50", ms_text, "response", "ms", table=True),
    "p90_ms": figure("response p90", ms_text, "response", "ms", table=True),
    "p99_ms": figure("response p99", ms_text, "response", "ms", table=True),
    "max_ms": figure("response max", ms_text, "response", "ms", table=True),
    # Responses that waited: past the knee's p99 bound (100 ms), and past a second (a stall, a SYN retry).
    "responses_100ms_or_more": figure("responses of 100 ms+", COUNT, "response"),
    "responses_1s_or_more": figure("of 1 s+", COUNT, "response"),
    **CONNECT_FIGURES,
    **TLS_FIGURES,
    "server_cpu_s": figure("server CPU", CPU_S, "server", "s", when=True),
    "server_cpu_resolution_s": figure("server CPU resolution", resolution_text, "server", when=True),
    **client_figures("connection", True),
})


def figures_of(cls):
    """A record's figures in order: [(field name, metadata)]."""
    return [(f.name, f.metadata) for f in dataclasses.fields(cls) if f.metadata]


def shown(r, table=False):
    """The figures r carries: [(name, metadata, value)], a figure that applies only sometimes left out where None."""
    return [(name, m, getattr(r, name)) for name, m in figures_of(type(r))
            if (m["table"] or not table) and not (m["when"] and getattr(r, name) is None)]


def cell(m, value):
    """One figure written as text: "-" where there is none."""
    return "-" if value is None else m["spec"](value)


def column(m):
    """A figure's title in a table: its title and unit."""
    return m["title"] + (" " + m["unit"] if m["unit"] else "")


def text_lines(r, marks={}):
    """The text report: one line per group of figures, each as its title (less the line's name), value and unit, and
    its mark where marks ({name: words}) has one."""
    lines = {}
    for name, m, value in shown(r):
        title = "" if m["title"] == m["line"] else m["title"].removeprefix(m["line"] + " ")
        m = dict(m, spec=m["text"][0], unit=m["text"][1]) if m["text"] else m
        lines.setdefault(m["line"], []).append(" ".join(x for x in (title, cell(m, value), m["unit"], marks.get(name))
                                                        if x))
    return ["{:<10} {}".format(line, "   ".join(items)) for line, items in lines.items()]


def as_dict(value):
    """JSON for a record (figures it carries) or a Workload (its fields; a cafile in the repository relative to it)."""
    if isinstance(value, (Run, Step)):  # an --all row says which server, and whether it failed
        row = {"server": value.server, "failed": value.failed} if value.server else {}
        return dict(row, **{name: v for name, _, v in shown(value)})
    fields = dataclasses.asdict(value)
    if fields.get("cafile") and HERE in Path(fields["cafile"]).resolve().parents:  # no path of this machine kept
        fields["cafile"] = Path(fields["cafile"]).resolve().relative_to(HERE).as_posix()
    return fields


# ---- combining the workers' figures into a record

def counted(parts, per):
    """The figures every mode shares: counts, errors by kind, the client's own limits, CPU (client_us: per message,
    or per connection started: per names the count)."""
    errors = {kind: sum(p["errors"][kind] for p in parts) for kind in ERROR_WORDS}
    ordered, cpu = timings(parts, "connect_times"), sum(p["cpu"] for p in parts)
    return {"messages": sum(p["messages"] for p in parts), "connections": sum(p["connections"] for p in parts),
            "errors": sum(errors.values()), "error_kinds": {k: v for k, v in errors.items() if v},
            "client_ports_exhausted": sum(p["client_limits"]["ports"] for p in parts),
            "client_descriptors_exhausted": sum(p["client_limits"]["descriptors"] for p in parts),
            "max_open": sum(p["max_open"] for p in parts),  # exact with hold: all are open at the barrier
            "client_cpu_s": cpu, "client_us": 1e6 * cpu / max(1, sum(p[per] for p in parts)),
            "connect_p50_ms": percentile(ordered, 0.50), "connect_p99_ms": percentile(ordered, 0.99),
            "connect_max_ms": percentile(ordered, 1.0), "syn_retries": at_least(ordered, SYN_RETRY)}


def handshake_figures(parts, seconds):
    """TLS: the handshakes done, a second over seconds, how many resumed a session, and how long
    each took, from TCP connected to the handshake done (beside the echo's latency)."""
    ordered = timings(parts, "handshakes")
    return {"handshakes": len(ordered), "handshakes_per_s": len(ordered) / seconds if seconds else 0.0,
            "handshakes_resumed": sum(p["resumed"] for p in parts),
            "tls_version": next((p["tls_version"] for p in parts if p["tls_version"]), "none"),
            "handshake_p50_ms": percentile(ordered, 0.50), "handshake_p99_ms": percentile(ordered, 0.99),
            "handshake_max_ms": percentile(ordered, 1.0)}


def combine(parts, w):
    """Closed loop: the article's averages, rates over the run (or its echo phase), latency per message."""
    figures = counted(parts, "messages")
    messages, connections = figures["messages"], figures["connections"]
    attempted = w.clients * w.connects
    wall = max(p["end"] for p in parts) - min(p["start"] for p in parts)
    ordered = timings(parts, "latencies")
    if w.hold:  # the two phases of the tiny-asyncio tables: every connection open, then every echo
        figures.update(connect_phase_s=max(p["held_at"] for p in parts) - min(p["start"] for p in parts),
                       echo_phase_s=max(p["end"] for p in parts) - min(p["echo_start"] for p in parts))
    else:  # the article's three figures: averages per connection
        connect_s = sum(p["connect_sum"] for p in parts) / max(1, attempted)
        echo_s = sum(p["echo_sum"] for p in parts) / max(1, connections)
        figures.update(connect_s=connect_s, echo_s=echo_s, total_s=connect_s + echo_s)
    rated = figures.get("echo_phase_s") or wall  # held connections: rates over the echo phase
    if w.tls:  # over the connect phase where the connections are held
        figures.update(handshake_figures(parts, figures.get("connect_phase_s") or wall))
    # Timed (wrk): no count is known ahead; each connection that did not end cleanly is at least one message short.
    expected = messages + attempted - connections if w.seconds else attempted * w.messages
    rated_messages = messages - sum(p["held"] for p in parts) if w.idle is not None else messages  # less the first
    return Run(**figures, expected=expected, wall_s=wall, msgs_per_s=rated_messages / rated if rated else 0.0,
               mb_per_s=rated_messages * w.size / rated / 1e6 if rated else 0.0,
               conns_per_s=connections / wall if wall else 0.0, p50_ms=percentile(ordered, 0.50),
               p90_ms=percentile(ordered, 0.90), p99_ms=percentile(ordered, 0.99), max_ms=percentile(ordered, 1.0))


def combine_open(parts, w):
    """Open loop: the offered and achieved start rates, the reply rate, and response
    times from each connection's scheduled start, as httperf and wrk2 report them."""
    started = sum(p["started"] for p in parts)
    figures = counted(parts, "started")
    rate, duration = w.rate, w.duration
    firsts = [p["first_start"] for p in parts if p["first_start"] is not None]
    lasts = [p["last_start"] for p in parts if p["last_start"] is not None]
    # Starts per second from the first to the last: the offered rate, if the client kept its schedule.
    spread = max(lasts) - min(firsts) if firsts else 0.0
    achieved = (started - 1) / spread if started > 1 and spread > 0 else float(rate if started else 0)
    done = [p["last_done"] for p in parts if p["last_done"] is not None]
    # Completions per second over the arrivals' duration, or longer when the replies came later.
    span = max(duration, max(done) - min(p["start"] for p in parts) if done else 0.0)
    responses = timings(parts, "responses")
    if w.tls:
        figures.update(handshake_figures(parts, span))
    return Step(**figures, offered_rate=rate, duration_s=duration, scheduled=round(rate * duration), started=started,
                achieved_rate=achieved, behind_ms=max(p["behind"] for p in parts) * 1000,
                kept_schedule=achieved >= KEPT_SCHEDULE * rate, reply_rate=figures["connections"] / span,
                expected=round(rate * duration) * w.messages, mb_per_s=figures["messages"] * w.size / span / 1e6,
                p50_ms=percentile(responses, 0.50), p90_ms=percentile(responses, 0.90),
                p99_ms=percentile(responses, 0.99), max_ms=percentile(responses, 1.0),
                responses_100ms_or_more=at_least(responses, 0.1), responses_1s_or_more=at_least(responses, 1.0))


# ---- the open loop's sweep and knee

def sweep(host, port, rates, w, procs, name, server=None):
    """Offer each rate in turn for w.duration seconds, one progress line per step; stop early once the server
    is clearly past its limit, or the client cannot keep its schedule. Returns no_sweep()'s dict, filled."""
    result = no_sweep(name)
    steps = result["steps"]
    for n, rate in enumerate(rates):
        if server is not None and not server.alive():
            result["failed"] = "exited with status {}".format(server.proc.returncode)
            break
        step, why, _ = measure(host, port, dataclasses.replace(w, rate=rate), procs, server and server.cpu)
        steps.append(step)
        note("{} {}{}".format(name, "   ".join("{} {}".format(column(m), cell(m, v)) for _, m, v in shown(step, True)),
                              "; server CPU not measured: " + why if why else ""))
        if n + 1 < len(rates) and (past_limit(steps) or client_limited(steps)):
            result["stopped_early"], result["client_limited"] = True, client_limited(steps)
            break
    result["knee"] = knee(steps)
    # The last rate asked for met the rule: the server's limit was not reached.
    result["knee_at_top"] = result["knee"] is not None and result["knee"] == rates[-1]
    return result


def no_sweep(name, failed=None):
    """A sweep's result before its first step (or of a server that did not start)."""
    return {"server": name, "knee": None, "knee_rule": KNEE_RULE, "steps": [], "stopped_early": False,
            "client_limited": False, "failed": failed, "knee_at_top": False}


def meets(step, rule=KNEE_RULE):
    """True when step is within the rule: no error, replies kept up, p99 under the bound,
    and the client kept its schedule (else the rate was not really offered)."""
    return (step.kept_schedule and step.connections > 0 and step.errors <= rule["max_errors"]
            and step.reply_rate >= rule["min_reply_ratio"] * step.offered_rate
            and step.p99_ms is not None and step.p99_ms <= rule["max_p99_ms"])


def knee(steps, rule=KNEE_RULE):
    """The highest offered rate whose step meets the rule, or None. The highest, not the last before a miss:
    one hiccup of a shared machine at a low rate must not hide the rates the server handled above it."""
    return max((step.offered_rate for step in steps if meets(step, rule)), default=None)


def past_limit(steps):
    """Stop a sweep early: the last two steps were clearly past the limit (PAST_*); two in a row, so that
    one bad step on a shared machine does not end a sweep. Rates above would only add timeouts and minutes."""
    def over(step):
        return step.kept_schedule and (error_share(step) > 100 * PAST_ERROR_SHARE
                                       or step.reply_rate < PAST_REPLY_RATIO * step.offered_rate)
    return len(steps) >= 2 and over(steps[-1]) and over(steps[-2])


def client_limited(steps):
    """Stop a sweep: the client could not keep its schedule two steps in a row (nor would it above)."""
    return len(steps) >= 2 and not steps[-1].kept_schedule and not steps[-2].kept_schedule


def error_share(step):
    """Errors as a percentage of the connections the step attempted."""
    attempted = step.connections + step.errors
    return 100.0 * step.errors / attempted if attempted else 0.0


# ---------------------------------------------------------------- --all: every server, ranked

class CPU(NamedTuple):
    """CPU seconds read from /proc, and the most they may be short by (resolution, seconds): 1 ns where every thread
    counted was alive (schedstat), two clock ticks per tick-counted term where threads had exited (/proc/PID/stat counts
    those in ticks, each rounded down). reaped: ((pid, ticks), ...), the children each process has reaped (cutime +
    cstime, ticks too). A window's CPU is after - before: off by at most the coarser of the two readings' resolutions,
    and two ticks for each process that reaped a child meanwhile (where none did, that term is the same on both sides
    and adds nothing). root: (pid, start time) of the server's own process (the group's leader, the tree's top) while it
    runs; None where it had ended. each: ((pid, parent's pid, CPU seconds), ...), each process counted."""
    seconds: float
    resolution: float
    reaped: tuple = ()
    root: Optional[tuple] = None
    each: tuple = ()

    def children(self, pid):
        """{pid: CPU seconds} of each child of process pid counted here (a pool's workers)."""
        return {child: seconds for child, parent, seconds in self.each if parent == pid}

    def __sub__(self, before):
        changed = set(self.reaped) ^ set(before.reaped)
        ticks = 2 * len({pid for pid, _ in changed}) / os.sysconf("SC_CLK_TCK") if changed else 0.0
        resolution = max(self.resolution if self.resolution > 1e-9 else 0.0,
                         before.resolution if before.resolution > 1e-9 else 0.0) + ticks
        return CPU(self.seconds - before.seconds, resolution or 1e-9)

    def since(self, before):
        """The server's CPU from reading before to this one, (CPU, None); or (None, why not) where its own process
        ended or was replaced meanwhile, or a process counted before ended with its CPU: never a figure below 0."""
        if not before.root:
            return None, "its process had ended before the run"
        if self.root != before.root:  # None: gone, or a zombie
            return None, "its process {} {} during the run".format(before.root[0], "was replaced" if self.root else
                                                                   "ended")
        used = self - before
        if used.seconds < -used.resolution:
            return None, "a process of it ended during the run, and its CPU with it"
        return used._replace(seconds=max(0.0, used.seconds)), None


class Process(NamedTuple):
    """A process as /proc/PID/stat shows it: its parent, group and state, and its CPU in clock ticks: its own
    (utime + stime: all its threads, ended ones too) and its reaped children's (cutime + cstime)."""
    pid: int
    ppid: int
    pgrp: int
    state: str
    ticks: int
    children_ticks: int
    started: int = 0  # clock ticks after boot: a pid used again is another process
    name: str = ""  # its command's name (comm)


def processes():
    """Every process /proc shows ([Process]); None where there is no /proc (not Linux). Wine may show
    Linux's /proc, of Linux's pids, to a Windows CPython: os.sysconf says whether this is Unix."""
    if not hasattr(os, "sysconf"):
        return None
    try:
        entries = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return None
    found = []
    for entry in entries:
        with contextlib.suppress(OSError), open("/proc/{}/stat".format(entry)) as f:  # OSError: it ended meanwhile
            # pid (name) state(0) ppid(1) pgrp(2) ... utime(11) stime(12) cutime(13) cstime(14) starttime(19)
            name, fields = f.read().rsplit(")", 1)
            fields = fields.split()
            found.append(Process(int(entry), int(fields[1]), int(fields[2]), fields[0],
                                 int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14]), int(fields[19]),
                                 name.split("(", 1)[1]))
    return found


def cpu_of(p, tick=None):
    """The CPU of Process p, to the nanosecond where the kernel has schedstat: its live threads' time
    (/proc/PID/task/*/schedstat), or its ticks where they say more (exited threads), plus its reaped children's ticks:
    (seconds, what its tick terms may be short by, threads running as read). A thread running as read may lack its
    current stretch (the kernel adds it at the next tick or switch): group_cpu() adds a tick of resolution for each."""
    tick = 1.0 / (tick or os.sysconf("SC_CLK_TCK"))
    live, running, schedstat = 0, 0, True
    try:
        threads = os.listdir("/proc/{}/task".format(p.pid))
    except OSError:
        threads, schedstat = [], False
    for tid in threads:
        try:
            with open("/proc/{}/task/{}/schedstat".format(p.pid, tid)) as f:
                live += int(f.read().split()[0])  # nanoseconds on a CPU
            with open("/proc/{}/task/{}/stat".format(p.pid, tid)) as f:
                running += f.read().rsplit(")", 1)[1].split()[0] == "R"
        except FileNotFoundError:  # the thread ended meanwhile: its time is in the ticks
            continue
        except (OSError, ValueError, IndexError):  # no schedstat in this kernel
            schedstat = False
            break
    if schedstat and live * 1e-9 >= p.ticks * tick:  # every thread alive: schedstat's nanoseconds
        return live * 1e-9 + p.children_ticks * tick, 0.0, running
    # Threads have exited (or no schedstat): utime and stime, each rounded down to a tick.
    return p.ticks * tick + p.children_ticks * tick, 2 * tick, 0


def group_cpu(pgid, settle=0.0, tree=False):
    """The CPU used so far by process group pgid (a server started in a session of its own: it and every process it
    started), from outside: each process's cpu_of(), so that exited threads and reaped children are counted. With tree,
    pgid is a pid: that process and its descendants (a server found by its socket, whose group may be a shell's). A CPU;
    None where there is no /proc. settle: seconds it may wait for them to be idle (no thread running: then nanoseconds
    are nanoseconds), as a server is once its load has ended."""
    deadline = time.monotonic() + settle
    while True:
        found = processes()
        if found is None:
            return None
        tick, resolution, running, each = os.sysconf("SC_CLK_TCK"), 0.0, 0, []
        chosen = descendants(pgid, found) if tree else [p for p in found if p.pgrp == pgid]
        for p in chosen:
            seconds, ticked, busy = cpu_of(p, tick)  # the processes' tick terms add up; nanoseconds stay so
            resolution, running = resolution + ticked, running + busy
            each.append((p.pid, p.ppid, seconds))
        if not running or time.monotonic() >= deadline:
            root = next(((p.pid, p.started) for p in chosen if p.pid == pgid and p.state not in "ZX"), None)
            return CPU(sum(seconds for _, _, seconds in each), resolution + running / tick or 1e-9,
                       tuple((p.pid, p.children_ticks) for p in chosen if p.children_ticks), root, tuple(each))
        time.sleep(0.001)


def descendants(pid, table):
    """[Process] of pid and every process below it, but for this one and its own (a server that started
    client.py, as a test may, is not charged with the client's CPU)."""
    below = collections.defaultdict(list)
    for p in table:
        below[p.ppid].append(p)
    found = [p for p in table if p.pid == pid != os.getpid()]
    for p in found:  # each one's children are added after it, and looked at in turn
        found += [child for child in below[p.pid] if child.pid != os.getpid()]
    return found


def is_local(host):
    """Whether host is an address of this machine (the loopback, or one a socket may bind here)."""
    with contextlib.suppress(OSError):  # a name that does not resolve
        for family, _, _, _, sockaddr in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM):
            with contextlib.suppress(OSError), socket.socket(family, socket.SOCK_STREAM) as sock:
                sock.bind((sockaddr[0], 0) + tuple(sockaddr[2:]))
                return True
    return False


def listening_sockets(port):
    """The inodes of the sockets that listen on TCP port on this machine (Linux: /proc/net/tcp and tcp6,
    this network namespace's), or None where there is no /proc to say."""
    if not hasattr(os, "sysconf") or not os.path.exists("/proc/net/tcp"):  # not Unix: Wine may show Linux's
        return None
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            # local_address (hex IP:port), rem_address, st (0A: LISTEN), ..., inode (the 10th field)
            inodes |= {row[9] for row in (line.split() for line in f.readlines()[1:])
                       if len(row) > 9 and row[3] == "0A" and int(row[1].rsplit(":", 1)[1], 16) == port}
    return inodes


def listening_server(port):
    """(pid, None) of the local process that listens on TCP port (Linux: its socket's inode in /proc/net/tcp{,6}, then
    the process holding it among /proc/*/fd; of a pool sharing it, the topmost), or (None, why not in words)."""
    inodes = listening_sockets(port)
    if inodes is None:
        return None, "this system has no /proc (Linux only)"
    if not inodes:
        return None, "no socket listens on port {} on this machine (a remote server, or another network " \
                     "namespace)".format(port)
    wanted, owners = {"socket:[{}]".format(inode) for inode in inodes}, {}
    for p in processes() or ():
        if p.pid == os.getpid():
            continue
        with contextlib.suppress(OSError):  # another user's process, or gone
            for fd in os.listdir("/proc/{}/fd".format(p.pid)):
                with contextlib.suppress(OSError):  # closed meanwhile
                    if os.readlink("/proc/{}/fd/{}".format(p.pid, fd)) in wanted:
                        owners[p.pid] = p
                        break
    if not owners:
        return None, "the process listening on port {} is not readable here (another user's: run client.py as " \
                     "that user)".format(port)
    pid = min(owners, key=lambda pid: (owners[pid].ppid in owners, pid))
    if owners[pid].name.startswith("wineserver"):  # it holds the sockets of every program Wine runs
        return None, "the socket is Wine's wineserver's (pid {}), not the server's own process".format(pid)
    return pid, None


class RunningServer:
    """An echo_*.py started on --port 0 -q in a session of its own: it and all its children are measured and stopped
    together. `started` keeps each: main() stops those a run left, whatever ended it (a stop signal, an error)."""
    started = []

    def __init__(self, script, work, extra=()):
        self.tls = script.name in TLS_SERVERS
        self.name = " ".join([script.name, *extra]) + (" (TLS)" if self.tls else "")
        self.err = tempfile.TemporaryFile()  # not a pipe: a server that writes much is never blocked
        cert = ("--cert", str(TEST_CERT), "--key", str(TEST_KEY)) if self.tls else ()
        self.port, self.failed, self.skipped, self.stderr, self.signalled = None, None, None, None, False
        command = [sys.executable, str(script), "--port", "0", "-q", "--work", str(work), *cert, *extra]
        self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.err,
                                     start_new_session=True)
        RunningServer.started.append(self)
        # The port line, read by a thread: select() cannot wait on a pipe everywhere (Windows).
        first = [b""]
        reader = threading.Thread(target=lambda: first.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        wait(lambda t: reader.join(t) or not reader.is_alive(), 15)
        line = first[-1]
        if line.startswith(b"Server Run Port:"):
            self.port = int(line.split(b":")[1])  # int() takes the line's end, \n or \r\n
        elif not line and self.exited_with_one_line():
            self.skipped = self.stop().strip()  # a pattern that cannot run here says so: not a failure
        else:
            self.failed = "did not start: " + (line.decode(errors="replace").strip() or "no port line")

    def exited_with_one_line(self):
        """The server exited 1 before its port line, with one line on stderr and no traceback: what a
        pattern says where the platform lacks what it needs (and names one that runs there)."""
        if not wait(exited(self.proc), 5):
            return False
        self.err.seek(0)
        said = self.err.read().decode(errors="replace").strip()
        return self.proc.returncode == 1 and said != "" and "\n" not in said and "Traceback" not in said

    def cpu(self):
        """The CPU its whole process group has used so far (a CPU), or None (no /proc)."""
        return group_cpu(self.proc.pid, settle=0.1)

    def load(self, w):
        """Workload w as this server is spoken to: over TLS, verified against the test certificate."""
        return dataclasses.replace(w, tls=True, cafile=str(TEST_CERT)) if self.tls else w

    def alive(self):
        return self.proc.poll() is None

    def terminate(self):
        """SIGTERM, once: a second would end its stop at once."""
        if not self.signalled and self.alive():
            self.proc.send_signal(signal.SIGTERM)
        self.signalled = True

    def stop(self, patience=5.0, stops=1):
        """SIGTERM, then, after patience seconds at most (a wait() that `stops` stop signals end), SIGKILL for the
        whole group; returns what it wrote on stderr."""
        if self.stderr is not None:
            return self.stderr  # already stopped
        self.terminate()
        wait(exited(self.proc), patience, stops)
        if not hasattr(os, "killpg"):  # no process groups (Windows): the server alone
            self.proc.kill()
        else:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.err.seek(0)
        self.stderr = self.err.read().decode(errors="replace")
        self.proc.stdout.close()
        self.err.close()
        return self.stderr


def stop_servers(servers, patience=5.0, stops=1):
    """Stop servers side by side: SIGTERM to each, then each waited for, patience seconds in all at most."""
    deadline = time.monotonic() + patience
    for server in servers:
        server.terminate()
    for server in servers:
        server.stop(max(0.0, deadline - time.monotonic()), stops)


def pool_spread(before, after):
    """{child pid: CPU seconds in the run} when the server's children are a pool, else None: a pool's workers
    live through a run (a child that was there before it and is there after), where a process per connection
    does not. A worker started during the run counts from its start. before, after: CPU.children()'s."""
    if not before or not after or not set(before) & set(after):
        return None
    return {pid: seconds - before.get(pid, 0.0) for pid, seconds in after.items()}


def work_seconds(work):
    """How long sum(range(work)), the servers' --work, takes here: the bounds are sized from it."""
    started = time.perf_counter()
    sum(range(work))
    return time.perf_counter() - started


def server_entries(args):
    """([(script, extra flags)] to run, [rows uvloop would add]): every echo_*.py (or --servers), and the
    --uvloop variant of those whose --help offers it, when uvloop is installed (else said at the end)."""
    scripts = sorted(HERE.glob("echo_*.py"))
    common = tuple(args.server_args.split()) if args.server_args else ()
    if args.servers:  # each a name, and flags for it after spaces: "shared_socket --accept one"
        asked = [("echo_{}.py".format(name.removeprefix("echo_").removesuffix(".py")), tuple(flags))
                 for name, *flags in (item.split() for item in args.servers)]
        unknown = {name for name, _ in asked} - {s.name for s in scripts}
        if unknown:
            die("no such server here: " + ", ".join(sorted(unknown)))
        entries = [(HERE / name, common + flags) for name, flags in asked]
        scripts = sorted({script for script, _ in entries})
    else:
        entries = [(script, common) for script in scripts]
    if not scripts:
        die("no echo_*.py beside client.py")
    uvloop = [(script, common + ("--uvloop",)) for script in takes_uvloop(scripts)]
    installed = uvloop and importlib.util.find_spec("uvloop")
    return sorted(entries + (uvloop if installed else []), key=lambda entry: (entry[0].name, entry[1])), [
        " ".join([script.name, *flags]) for script, flags in ([] if installed else uvloop)]


def takes_uvloop(scripts):
    """The scripts whose --help offers --uvloop (argparse starts an option's line with it); no source is read."""
    return [script for script, out in servers_help(scripts).items()
            if any(line.strip().startswith("--uvloop") for line in out.splitlines())]


HELP = {}  # what each server's --help printed (servers_help()): asked once


def servers_help(scripts):
    """{script: what its --help prints} (asked of all at once, each once; "" where it says nothing in 30 s), without
    the colours 3.14's argparse adds where FORCE_COLOR asks for them."""
    asked = [(script, subprocess.Popen([sys.executable, str(script), "--help"], stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                       env=dict(os.environ, PYTHON_COLORS="0")))
             for script in scripts if script not in HELP]
    try:
        for _, proc in asked:
            wait(exited(proc), 30)  # which a stop signal ends
    finally:  # those still running are killed: after 30 s, or on a stop
        for script, proc in asked:
            if proc.poll() is None:
                proc.kill()
            HELP[script] = proc.communicate()[0].decode(errors="replace")
    return {script: HELP[script] for script in scripts}


def why_failed(result, w, name, warm_up=False):
    """A failed run in words: what happened (of workload w; in the warm-up where it was), and the pattern's limit."""
    happened = kinds_text(result.error_kinds, w) if result.error_kinds else "no error counted"
    text = "{:,} of {:,} messages echoed{}; {}".format(result.messages, result.expected, " in the warm-up ({})".format(
        describe(w)) if warm_up else "", happened)
    limit = LIMITS.get(name.split()[0])
    if limit and "{workers}" in limit:
        limit = limit.format(workers=workers_of(name.split()))
    return text + ("; the pattern's limit: " + limit if limit else "")


def workers_of(command):
    """A server's --workers: as given in command ([script, flags...], flags as --all passes them), else the
    default its --help states ("(default: 10)"); "its --workers" where neither says."""
    given = re.search(r"(?:^| )--workers[ =](\S+)", " ".join(command[1:]))
    if given:
        return given.group(1)
    said = " ".join(servers_help([HERE / command[0]])[HERE / command[0]].split())
    default = re.search(r"--workers N .*?\(default: ([^)]*)\)", said)  # the first default after it
    return default.group(1) if default and default.group(1).isdigit() else "its --workers"


def skip(skipped, server):
    """Whether server cannot run here: if so, it is kept apart ({name: its line}), said once on stderr."""
    if server.skipped and server.name not in skipped:
        note("skipped, as it cannot run here: " + skipped_text(server.name, server.skipped))
        skipped[server.name] = server.skipped
    return bool(server.skipped)


def skipped_text(name, why):
    """A skipped server and its line, its name said once (its line may begin with it)."""
    return why if why.startswith(name.split()[0]) else "{}: {}".format(name, why)


def sweep_all(args, swept, entries, skipped):
    """Every server swept in open loop as swept (sweeps_from()'s), in turn; those that cannot run here go to skipped."""
    (label, rates, w), results = swept, []
    for script, extra in entries:
        server = RunningServer(script, args.work, extra)
        if skip(skipped, server):
            continue
        result = no_sweep(server.name, server.failed) if server.failed else sweep(
            "127.0.0.1", server.port, rates, server.load(w), args.procs, server.name, server)
        server.stop()
        results.append(dict(result, scenario=label, rates=rates, workload=server.load(w)))
    return results


def run_all(args, scenarios, entries, skipped):
    """Each closed-loop scenario (scenarios_from()'s) against every server, their runs interleaved: a table of
    ranked rows each (those that cannot run here go to skipped)."""
    tables, rows_of = [], {}  # {label: {entry: its row}}
    for label, w, work in scenarios:
        procs = fit_descriptors(w.clients, args.procs, grow=True)
        after = PRESETS[label].after if label in PRESETS else None  # only the servers that passed it
        passed = [e for e in entries if not after or e in rows_of[after] and not rows_of[after][e]["failed"]]
        started = [(e, RunningServer(e[0], work, e[1] + workers_for(e[0], e[1], w.clients))) for e in passed]
        started = [(e, server) for e, server in started if not skip(skipped, server)]
        servers = [server for _, server in started]
        rows_of[label] = {e: {"server": s.name, "runs": [], "failed": None, "worker_cpu": {}} for e, s in started}
        rows = {row["server"]: row for row in rows_of[label].values()}
        rows.update({row["server"]: dict(row, runs=[], worker_cpu={}, failed="not run: it did not hold " + after)
                     for e, row in rows_of.get(after, {}).items() if e not in passed})
        for (script, _), server in started:  # one process holding them all, too few descriptors: not run at all
            short = w.hold and server.port and too_few_descriptors(server.proc.pid, w.clients, pool=False)
            if short and pool_workers(script) is None:
                rows[server.name]["failed"] = short
                server.stop()
        # A warm-up at most 100 clients wide: it wakes the server, it does not measure it.
        warm = dataclasses.replace(w, clients=min(100, w.clients), connects=1, messages=max(1, w.messages // 5),
                                   seconds=w.seconds and 1.0, idle=None)
        plan = [(0, s, warm) for s in servers] + [
            (rep, s, w) for rep in range(1, args.repeat + 1) for s in servers]  # interleaved
        for step, (rep, server, load) in enumerate(plan, 1):
            row = rows[server.name]
            if not row["failed"] and (server.failed or not server.alive()):  # it did not start, or it exited
                row["failed"] = server.failed or "exited with status {}".format(server.proc.returncode)
                skip_runs(plan, step - 1, server, label, row["failed"])
            if row["failed"]:
                continue
            result, why, read = measure("127.0.0.1", server.port, server.load(load), procs, server.cpu,
                                        pid=server.proc.pid)
            spread = read and pool_spread(*(cpu.children(server.proc.pid) for cpu in read))  # one reading each side
            if rep and spread:  # each worker's CPU in this run (not the warm-up), added to its runs' before
                row["worker_cpu"].update({pid: row["worker_cpu"].get(pid, 0.0) + used for pid, used in spread.items()})
            note("[{}/{}] {} {} {}: {:,.0f} msgs/s, {} errors{}".format(
                step, len(plan), label, server.name, "warm-up" if rep == 0 else "run {}".format(rep),
                result.msgs_per_s, result.errors, "; server CPU not measured: " + why if why else ""))
            if result.errors or result.messages != result.expected:
                row["failed"] = why_failed(result, load, server.name, warm_up=rep == 0)
                # Stopped now: a server that failed may still be working through what it was
                # sent (10,000 threads running --work), and would slow the next server's run.
                server.stop()
                skip_runs(plan, step, server, label, row["failed"])
            elif rep:
                row["runs"].append(result)
        stop_servers(servers)  # those a stop signal or an error leaves, main() stops
        tables.append({"scenario": label, "workload": w, "server_work": work,
                       "rows": rank([summarize(**row) for row in rows.values()])})
    return tables


def pool_workers(script):
    """The default --workers of a pool of worker processes, as its --help says; None for any other server."""
    said = re.search(r"--workers N worker processes \(default: ([^)]*)\)", " ".join(servers_help([script])[
        script].split()))
    return int(re.findall(r"\d+", said.group(1))[-1]) if said else None


def workers_for(script, extra, clients):
    """("--workers", N) for a pool of worker processes whose default share of clients would not fit under the
    descriptor limit, with room for SO_REUSEPORT's uneven hash (a quarter more); else ()."""
    default = pool_workers(script) if resource is not None and "--workers" not in " ".join(extra) else None
    if default is None:
        return ()
    need = math.ceil(1.25 * clients / max(1, resource.getrlimit(resource.RLIMIT_NOFILE)[0] - SPARE_DESCRIPTORS))
    return ("--workers", str(need)) if need > default else ()


def skip_runs(plan, done, server, label, why):
    """Say which of server's steps in plan, after the first `done`, are skipped, and why."""
    left = [str(n) for n, (_, s, _) in enumerate(plan, 1) if s is server and n > done]
    if left:
        note("{} {}: step{} {} skipped, as it failed: {}".format(label, server.name, "s" if len(left) > 1 else "",
                                                                  ", ".join(left), why))


def summarize(server, runs, failed, worker_cpu):
    """A server's row: the median of the measured runs for each figure it declares (the first run's
    where a figure is not a number), how its workers shared the work, and its messages per CPU-second."""
    if failed or not runs:
        return Run(server=server, failed=failed or "no measured run")
    row = Run(server=server)
    for name, _ in figures_of(Run):
        values = [getattr(r, name) for r in runs if getattr(r, name) is not None]
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        setattr(row, name, (statistics.median(values) if numbers else values[0]) if values else getattr(row, name))
    if worker_cpu:  # each worker's CPU seconds in a run (the mean over the runs, busiest first)
        row.worker_cpu_s = sorted((round(s / len(runs), 3) for s in worker_cpu.values()), reverse=True)
        total = sum(row.worker_cpu_s)
        row.busiest_cpu_share, row.even_share = row.worker_cpu_s[0] / total if total else None, 1 / len(worker_cpu)
    if row.server_cpu_resolution_s is not None:  # the coarsest run's
        row.server_cpu_resolution_s = max(r.server_cpu_resolution_s for r in runs if r.server_cpu_resolution_s)
    if row.server_cpu_s is not None:  # msgs_per_server_cpu_s stays the runs' median, as bench/draw.py's chart says
        row.client_bound = row.client_cpu_s > row.server_cpu_s
        cheap = [r.msgs_per_server_cpu_s for r in runs if r.msgs_per_server_cpu_s]
        if len(cheap) > 1 and row.msgs_per_server_cpu_s:
            row.msgs_per_server_cpu_spread = (max(cheap) - min(cheap)) / 2 / row.msgs_per_server_cpu_s
    return row


def scant(r):
    """The server CPU seconds r's messages per server CPU-second needs where it rests on less (too little work to
    mean much), else None: 10 ms, where a run's fixed costs (0.4-0.5 ms of a 3-message run on the 2-core machine of
    RESULTS.md) weigh 5 % or less, and 20 times its resolution (10 ms ticks where a thread or process had exited)."""
    need = max(0.01, 20 * (r.server_cpu_resolution_s or 0))
    return need if getattr(r, "msgs_per_server_cpu_s", None) is not None and r.server_cpu_s < need else None


def per_server_cpu(run):
    """A Run's figures of its server's CPU: messages per server CPU-second, and whether the client spent more."""
    run.msgs_per_server_cpu_s = run.messages / run.server_cpu_s if run.server_cpu_s else None
    run.client_bound = run.client_cpu_s > run.server_cpu_s


def rank(rows):
    """The servers that passed, the cheapest first (the most messages per server CPU-second) wherever the
    server's CPU was measured, else the fastest (msgs/s); then those that failed."""
    passed = [r for r in rows if not r.failed]
    key = ranked_by(passed)
    return sorted(passed, key=lambda r: -getattr(r, key)) + sorted((r for r in rows if r.failed),
                                                                    key=lambda r: r.server)


def ranked_by(rows):
    """The figure rows that passed are ranked by: messages per server CPU-second where every one has it."""
    return "msgs_per_server_cpu_s" if rows and all(r.msgs_per_server_cpu_s for r in rows) else "msgs_per_s"


RANKED_BY = {"msgs_per_server_cpu_s": "ranked by messages per server CPU-second, the cheapest first",
             "msgs_per_s": "ranked by msgs/s (the servers' CPU was not measured here)"}


# ---------------------------------------------------------------- reporting: text (bench/draw.py draws)

def describe(w):
    """The workload, as the text report's first line and a table's heading say it."""
    if w.rate:
        return "{} connections/s for {:g} s, {} exchange{} of {} B each".format(
            rate_text(w.rate), w.duration, w.messages, "s" if w.messages > 1 else "", w.size)
    return "{} clients x {} connections x {} of {} B".format(w.clients, w.connects, "messages for {:g} s".format(
        w.seconds) if w.seconds else "{} messages".format(w.messages), w.size)


def knee_rule_text(rule=KNEE_RULE):
    """KNEE_RULE in words, as the sweeps' tables say it."""
    errors = "no error" if rule["max_errors"] == 0 else "at most {} errors".format(rule["max_errors"])
    return ("the knee is the highest offered rate with {}, replies at least {:.0f} % of the offered rate "
            "and p99 at most {:g} ms").format(errors, 100 * rule["min_reply_ratio"], rule["max_p99_ms"])


def report(r, w, procs, cpu_not_measured=None):
    """The single-server report: the workload, the record's figures line by line (the server's line says why
    where its CPU is not there), then what they mean."""
    print("{:<10} {} ({} client processes)".format("workload", describe(w), procs))
    need = scant(r)
    lines = text_lines(r, need and {"msgs_per_server_cpu_s": "(too little work to mean much: {} ms of server CPU, "
                                    "under {:g} ms)".format(ms_text(1000 * r.server_cpu_s), 1000 * need)} or {})
    if cpu_not_measured:  # where the server's line would be: before the client's
        lines.insert([line.split()[0] for line in lines].index("client"), "{:<10} CPU not measured: {}".format(
            "server", cpu_not_measured))
    print("\n".join(lines))
    step = isinstance(r, Step)
    for applies, text in (
            (getattr(r, "connect_s", None) is not None,
             "the article's three figures (connect, echo, total) are averages per connection"),
            (getattr(r, "connect_phase_s", None) is not None,
             "every connection was opened and held, then the messages went: msgs/s and MB/s are over the echo phase"),
            (r.syn_retries, "a connect of {:g} s or more waited on a SYN retry: the server's listen queue was "
                            "full".format(SYN_RETRY)),
            (step, "a response time counts from the connection's scheduled start to its last echo"),
            (step and not r.kept_schedule, "the client did not keep its schedule (under {:.0f} % of the offered "
                                           "rate): the rate was not offered, and the response times include the "
                                           "client's own lag; add --procs or lower --rate".format(100 * KEPT_SCHEDULE)),
            (r.client_ports_exhausted or r.client_descriptors_exhausted, "the client ran out of local ports "
             "(EADDRNOTAVAIL, ports in TIME_WAIT) or of descriptors: not counted against the server"),
            (r.server_cpu_s is not None, "the server's CPU: its process (found by its listening socket) and every "
                                         "process below it, from /proc; its resolution is what it may be short by: "
                                         "1 ns (the kernel's schedstat), or clock ticks of 10 ms where a thread or "
                                         "process had exited"),
            (getattr(r, "client_bound", None), "client-bound: the client spent more CPU than the server, so msgs/s "
                                               "is as much the client's limit as the server's")):
        if applies:
            print("{:<10} {}".format("note", text))


WIDTH = 100  # the terminal text of --all and of a sweep fits this many columns; --json carries every figure
# The terminal's columns, short titles for a closed-loop table's first figures.
TERMINAL_COLUMNS = {"msgs_per_server_cpu_s": "msgs/CPU-s", "msgs_per_server_cpu_spread": "+-", "server_cpu_s": "CPU s",
                    "msgs_per_s": "msgs/s", "p99_ms": "p99 ms"}
TERMINAL_KEY = ("msgs/CPU-s: messages per server CPU-second, +- half the measured runs' range of it; CPU s: the "
                "server's CPU in a run; p99 ms: a message's round trip.")


def terminal_text(tables, sweeps=(), skipped=None, without=(), steps=False):
    """The --all results for a terminal, WIDTH columns at most: each closed-loop table's ranking with its
    first figures, the sweeps' knees (and their steps: steps_text()), the servers skipped, the rows uvloop would add
    (without). The full tables are bench/draw.py's, from --json."""
    lines = wrapped("Measured by `{}` on {}.".format(shlex.join(["python3", "client.py"] + sys.argv[1:]),
                                                       machine())) + [""]
    for table in tables:
        good = [r for r in table["rows"] if not r.failed]
        lines += wrapped(table_heading(table) + ", median of the measured runs.")
        figures = dict(figures_of(Run))
        carried = [name for name in TERMINAL_COLUMNS if any(getattr(r, name) is not None for r in good)]
        rows = [["rank", "server"] + [TERMINAL_COLUMNS[name] for name in carried]] + [
            [str(n), r.server] + [cell(figures[name], getattr(r, name)) for name in carried]
            for n, r in enumerate(good, 1)]
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        room = WIDTH - sum(widths) - 2 * (len(widths) - 1) + widths[1]  # what the server's names may take
        widths[1] = max(12, min(widths[1], room))
        for row in rows:
            row[1] = row[1] if len(row[1]) <= widths[1] else row[1][:widths[1] - 3] + "..."
            lines.append("  ".join(text.ljust(width) if i == 1 else text.rjust(width)
                                   for i, (text, width) in enumerate(zip(row, widths))).rstrip())
        lines += [line for r in table["rows"] if r.failed
                  for line in wrapped("- {} failed: {}".format(r.server, r.failed), "    ")] + [""]
    if sweeps:
        lines += wrapped("{}: open loop, {} connections/s, {:g} s each; {}.".format(
            sweeps[0]["scenario"], rates_text(sweeps[0]["rates"]), sweeps[0]["workload"].duration, knee_rule_text()))
        width = max([len(s["server"]) for s in sweeps] + [6])
        lines.append("{:>4}  {:<{}}  {:>14}  {:>14}".format("rank", "server", width, "knee conns/s", "p99 ms there"))
        for place, s, at_knee in ranked_knees(sweeps):
            lines.append("{:>4}  {:<{}}  {:>14}  {:>14}".format(place, s["server"], width, knee_text(s),
                                                                ms_text(at_knee.p99_ms) if at_knee else "-")[:WIDTH])
        for s in sweeps if steps else ():
            lines += steps_text(s)
        lines.append("")
    if skipped:
        lines += ["Skipped, as they cannot run here:"] + [line for name, why in sorted(skipped.items())
                                                          for line in wrapped("- " + skipped_text(name, why), "  ")]
        lines.append("")
    key = wrapped(TERMINAL_KEY) if tables else []
    more = wrapped("With uvloop installed (pip install uvloop), {} more: {}.".format(len(without), ", ".join(
        without))) if without else []
    return "\n".join(lines + key + wrapped("Every figure, and each sweep's steps: --json (bench/draw.py writes "
                                            "them as Markdown and SVG).") + more)


STEP_COLUMNS = ("offered_rate", "achieved_rate", "reply_rate", "p99_ms", "errors")  # a single sweep's, for a terminal


def steps_text(s):
    """A sweep's steps for a terminal: a line each with STEP_COLUMNS' figures, then why it stopped where it did, and
    the local ports the client ran out of."""
    figures = dict(figures_of(Step))
    rows = [[column(figures[name]) for name in STEP_COLUMNS]] + [
        [cell(figures[name], getattr(step, name)) for name in STEP_COLUMNS] for step in s["steps"]]
    widths = [max(len(row[i]) for row in rows) for i in range(len(STEP_COLUMNS))]
    lines = [""] + ["  ".join(text.rjust(width) for text, width in zip(row, widths)) for row in rows]
    lines += wrapped("Failed: {}.".format(s["failed"])) if s["failed"] else []
    if s["stopped_early"]:  # the client's limit, or the server's (client_limited() goes with stopped_early)
        lines += wrapped("Stopped after {}/s: {}.".format(rate_text(s["steps"][-1].offered_rate), (
            "the client could not keep its schedule two steps in a row, so higher rates were not offered; the "
            "server's knee may lie higher") if s["client_limited"] else "two steps in a row were past the limit"))
    exhausted = sum(step.client_ports_exhausted for step in s["steps"])
    if exhausted:
        lines += wrapped("The client ran out of local ports (EADDRNOTAVAIL) {:,} times; those connections are not "
                         "counted against the server.".format(exhausted))
    return lines


def wrapped(text, indent=""):
    """text as lines of WIDTH columns at most."""
    return textwrap.wrap(text, WIDTH, subsequent_indent=indent, break_on_hyphens=False) or [""]


def table_heading(table):
    """A closed-loop table's heading: the scenario, its workload, the servers' --work, what it is ranked by."""
    return "{}: {}{}; {}".format(table["scenario"], describe(table["workload"]), ", servers run --work {}".format(
        table["server_work"]) if table["server_work"] else "", RANKED_BY[ranked_by(
            [r for r in table["rows"] if not r.failed])])


def ranked_knees(sweeps):
    """[(rank, sweep, its step at the knee or None)], the highest knee first, then those with none (rank "-").
    Equal knees share a rank: a tie at the top is the machine's limit, not a ranking."""
    return [(1 + sum(1 for other in sweeps if (other["knee"] or 0) > (s["knee"] or 0)) if s["knee"] is not None
             else "-", s, next((step for step in s["steps"] if step.offered_rate == s["knee"]), None))
            for s in sorted(sweeps, key=lambda s: (s["knee"] is None, -(s["knee"] or 0), s["server"]))]


def rates_text(rates):
    """A sweep's rates in words: "1,000 to 40,000 in steps of 1,000"."""
    step = rates[1] - rates[0] if len(rates) > 1 else None
    return rate_text(rates[0]) + (" to {} in steps of {}".format(rate_text(rates[-1]), rate_text(step)) if step else "")


def knee_text(s, unit=""):
    """A knee as the tables and the legend say it."""
    if s["knee"] is None:
        return "failed" if s["failed"] else "none"
    return rate_text(s["knee"]) + unit + (" or more" if s["knee_at_top"] else "")


def cpu_model():
    """The processor's name: /proc/cpuinfo's model name (bench/scaling.py's records too), else the platform's."""
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def machine():
    """The machine in words, as --all's output and RESULTS.md name it: "AMD EPYC, 2 cores, Python 3.11.7, Linux";
    a free-threaded build says so, and whether the GIL was on ("Python 3.14.10, free-threaded, GIL off"), which
    platform.python_version() cannot tell. Where there is no os.uname (Windows), platform asks WMI, which Wine
    lacks: Wine ends the process there."""
    build = ", free-threaded, GIL " + ("on" if GIL else "off") if sysconfig.get_config_var("Py_GIL_DISABLED") else ""
    return "{}, {} cores, Python {}{}, {}".format(cpu_model(), os.cpu_count(), platform.python_version(), build,
                                                  platform.system() if hasattr(os, "uname") else "Windows")


# ---------------------------------------------------------------- what bench/ uses

# All that bench/draw.py and bench/regenerate.py use of client.py, each in CLIENT.md (tests/test_regenerate.py checks).
API = ("Workload", "Run", "Step", "figures_of", "cell", "column", "table_heading", "ranked_knees", "rates_text",
       "knee_text", "knee_rule_text", "error_share", "skipped_text", "SYN_RETRY", "machine", "meets")


# ---------------------------------------------------------------- command line

def number(low, high, kind=int):
    """An argparse type: a number of kind from low to high."""
    def parse(text):
        with contextlib.suppress(ValueError):
            if low <= kind(text) <= high:
                return kind(text)
        raise argparse.ArgumentTypeError("expected a number from {} to {}, got {!r}".format(low, high, text))
    return parse


def usable_cpu_count():
    """How many CPUs this process may run on: taskset's or a container's cpuset, where os.cpu_count() counts the
    machine's (as in the process servers)."""
    if hasattr(os, "process_cpu_count"):  # 3.13+: the affinity where there is one, and -X cpu_count
        return os.process_cpu_count() or 1
    if hasattr(os, "sched_getaffinity"):  # Linux before 3.13
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1  # elsewhere: the machine's


def names(text):
    return [part.strip() for part in text.split(",") if part.strip()]


def parse_rate(text):
    """--rate: "R" -> Rates([R], sweep=False); "A:B:STEP" -> Rates([A, A+STEP, ..., <= B], sweep=True).
    For argparse's type=: a bad value raises ArgumentTypeError, which is one line."""
    parts = text.split(":")
    try:
        if len(parts) not in (1, 3):
            raise ValueError
        values = [float(part) for part in parts]
    except ValueError:
        raise argparse.ArgumentTypeError("expected connections/s as R or a sweep A:B:STEP, e.g. 500 or 100:2000:100, "
                                         "got {!r}".format(text)) from None
    # Written as "inside the range" so that nan, which compares false, fails too.
    if not all(0 < value <= MAX_RATE for value in values):
        raise argparse.ArgumentTypeError("rates and steps must be above 0 and at most {:,}, got {!r}".format(
            MAX_RATE, text))
    if len(values) == 1:
        return Rates([whole(values[0])], sweep=False)
    start, stop, step = values
    if stop < start:
        raise argparse.ArgumentTypeError("a sweep goes up: A:B:STEP needs A <= B, got {!r}".format(text))
    count = int((stop - start) / step + 1e-9) + 1  # the epsilon keeps B itself when STEP is 0.1
    if count > MAX_STEPS:
        raise argparse.ArgumentTypeError("{!r} is {:,} steps; at most {:,}".format(text, count, MAX_STEPS))
    # Each rate from start, not by adding STEP again and again: no 0.30000000000000004.
    return Rates([whole(round(start + n * step, 6)) for n in range(count)], sweep=True)


def whole(value):
    """50.0 -> 50, so that JSON, tables and charts show 50 and not 50.0."""
    return int(value) if value == int(value) else value


def workload(args, **changes):
    """The Workload of the command line, with changes."""
    w = Workload(clients=args.clients, connects=args.connects, messages=args.messages or 50, size=args.size,
                 timeout=args.timeout, connect_timeout=args.timeout, hold=args.hold, idle=args.idle,
                 connect_pace=HELD_PACE if args.hold else None, connecting=args.connect_concurrency,
                 duration=args.duration, seconds=args.seconds, tls=args.tls, cafile=args.cafile, resume=args.tls_resume)
    return dataclasses.replace(w, **changes)


def open_workload(args, duration=None):
    """The workload of one open-loop step, without its rate: one exchange by default."""
    return workload(args, messages=args.messages or 1, duration=duration or args.duration, clients=1, connects=1)


def sweeps_from(args):
    """(name, rates, workload) of the open-loop sweep asked for, or None."""
    if args.rate is not None:
        return "custom", args.rate.values, open_workload(args)
    for name in args.scenario or []:
        if PRESETS[name].rates:
            return name, parse_rate(PRESETS[name].rates).values, open_workload(args, PRESETS[name].duration)
    return None


def scenarios_from(args):
    """[(name, Workload, server --work)] for the closed-loop scenarios asked for."""
    if not args.scenario and (args.rate is not None or args.shaped):
        return [] if args.rate is not None else [("custom", workload(args, budget=BUDGET), args.work)]
    chosen = []
    asked = dict.fromkeys(n for name in args.scenario or [DEFAULT_SCENARIO] for n in (PRESETS[name].after, name)
                          if n)  # each after the one it needs
    for name, p in ((name, PRESETS[name]) for name in asked if not PRESETS[name].rates):
        connects = max(1, round(p.connects * args.scale)) if p.scaled else p.connects
        w = workload(args, clients=p.clients, connects=connects, messages=p.messages, seconds=p.seconds,
                     hold=p.held, idle=p.idle, connect_pace=HELD_PACE if p.held else None, budget=BUDGET)
        if p.held:
            # A message may wait behind every client's --work on one core, twice over for a shared machine.
            queue_s = 2 * p.clients * work_seconds(p.work)
            total = p.clients * p.connects * p.messages
            w = dataclasses.replace(w, connect_timeout=max(args.timeout, CONNECT_FLOOR),
                                    timeout=max(args.timeout, CONNECT_FLOOR, math.ceil(10 + queue_s)),
                                    budget=math.ceil(CONNECT_FLOOR + (p.seconds or p.idle or 0) + total / SLOWEST
                                                     + total / p.clients * queue_s))
        for size in p.sizes:
            label = name if len(p.sizes) == 1 else "{}-{}".format(name, size)
            chosen.append((label, dataclasses.replace(w, size=size), p.work))
    return chosen


def parse_args(argv):
    parser = build_parser()
    parser.error = lambda message: die(message, 2)  # a bad argument is one line, not argparse's usage block
    args = parser.parse_args(argv)
    args.shaped = any(getattr(args, name) is not None for name in SHAPE)
    for name, default in SHAPE.items():
        setattr(args, name, default if getattr(args, name) is None else getattr(args, name))
    for name in args.scenario or []:
        if name not in PRESETS:
            parser.error("unknown scenario {!r}; choose from {}".format(name, ", ".join(PRESETS)))
    rate = args.rate is not None
    lowest = min(args.rate.values) if rate else 0
    connections = round(lowest * args.duration) if rate else args.clients * args.connects
    messages = connections * (args.messages or (1 if rate else 50))
    for wrong, message in (  # the first that applies is said
            (args.hold and args.connects != 1, "--hold holds one connection per client: use it with --connects 1"),
            (args.idle is not None and (not args.hold or (args.messages or 50) < 2), "--idle holds connections between "
             "their first echo and the rest: use it with --hold and --messages 2 or more"),
            (rate and args.seconds, "--seconds times the closed loop's connections; --rate starts them on a clock "
                                    "for --duration"),
            (rate and args.hold, "--rate starts connections on a clock; --hold is for the closed loop"),
            (rate and round(lowest * args.duration) < 1, "argument --rate: {:g} a second for --duration {:g} s "
                                                         "schedules no connection".format(lowest, args.duration)),
            (rate and args.scenario, "--rate and --scenario: choose one (the sweep preset is --scenario "
                                     "pingpong-sweep)"),
            (len([name for name in args.scenario or [] if PRESETS[name].rates]) > 1, "one open-loop sweep at a time"),
            (args.moved is not None, "--markdown and --svg moved to bench/draw.py: python3 client.py --all --json "
                                     "> r.json; python3 bench/draw.py r.json --markdown FILE --svg FILE"),
            (not args.all and (args.servers or args.server_args or args.scenario),
             "--servers, --server-args and --scenario go with --all"),
            ((args.cafile or args.tls_resume) and not args.tls, "--cafile and --tls-resume go with --tls"),
            (args.all and args.tls, "--all measures its TLS servers over TLS, the others without: --tls is for one "
                                    "server"),
            (args.trace and (args.all or args.seconds or rate and args.rate.sweep), "--trace records one run of "
             "counted messages against one server: not --all, --seconds, nor a sweep of rates"),
            (args.trace and (connections > TRACED[0] or messages > TRACED[1]),
             "--trace is for a run a person can look at: at most {:,} connections and {:,} messages, not {:,} and "
             "{:,}".format(*TRACED, connections, messages))):
        if wrong:
            parser.error(message)
    # --trace's file is tried now, not emptied: a path that cannot be written is one line before anything starts,
    # and a trace there is replaced only by a run that writes another.
    if args.trace:
        try:
            open(args.trace, "a", encoding="utf-8").close()
        except OSError as e:
            parser.error("argument --trace: cannot write {}: {}".format(args.trace, e.strerror or e))
    if args.cafile:
        try:
            tls_context(args.cafile)
        except OSError as e:  # ssl.SSLError is one
            parser.error("argument --cafile: cannot load {}: {}".format(args.cafile, e.strerror or e.reason or e))
    return args


def build_parser():
    # The docstring's first line says what client.py is; its examples close the help. What each flag means at
    # length is CLIENT.md's: the help stays within a screen (60 lines).
    about, examples = __doc__.split("\n", 1)[0], __doc__.rstrip().rsplit("\n\n", 1)[1]
    parser = argparse.ArgumentParser(description=about + "\nEvery flag and figure at length: CLIENT.md.",
                                     usage="%(prog)s [--host H] [--port PORT | --all] [options]",
                                     epilog="examples:\n" + examples,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_argument_group("what to measure").add_argument
    group("--host", default="127.0.0.1", metavar="H", help="server address, IPv4 or IPv6 (default: %(default)s)")
    group("--port", type=number(1, 65535), default=7777, metavar="PORT",
          help="the server's port (default: %(default)s)")
    group("--all", action="store_true", help="rank every echo_*.py here (scenario: {})".format(DEFAULT_SCENARIO))
    group("--servers", type=names, metavar="LIST", help="with --all, only these: 'epoll,select'")
    group("--scenario", type=names, metavar="LIST", help="with --all, presets: " + ", ".join(PRESETS))
    group("--tls", action="store_true", help="speak TLS and verify the server (full handshakes)")
    group = parser.add_argument_group("load shape: closed loop (the article's clients)").add_argument
    group("--clients", type=number(1, 1000000), metavar="N",
          help="concurrent clients, WORKER_COUNT (default: {clients})".format(**SHAPE))
    group("--connects", type=number(1, 100000), metavar="C",
          help="connections per client, ACTION_COUNT (default: {connects})".format(**SHAPE))
    group("--messages", type=number(1, 1000000), metavar="M",
          help="messages per connection, SEND_RECV_COUNT (default: 50)")
    group("--size", type=number(1, 16 << 20), metavar="BYTES", help="bytes per message (default: {size})".format(
        **SHAPE))
    group("--seconds", type=number(0.1, 3600, float), metavar="S", help="each connection exchanges for S seconds, not "
          "--messages: a run takes --connects x S")
    group("--hold", action="store_true", default=None, help="open and hold every connection, then send")
    group("--idle", type=number(0, 3600, float), metavar="S", help="with --hold, each echoes once first; all held S "
          "seconds between")
    group = parser.add_argument_group("load shape: open loop (connections started on a clock)").add_argument
    group("--rate", type=parse_rate, metavar="R|A:B:STEP", help="R new connections a second, or a sweep and its "
          "knee; past 14,000/s, {} source addresses".format(SOURCES))
    group("--duration", type=number(0.1, 3600, float), default=5.0, metavar="S",
          help="seconds of arrivals at each rate (default: %(default)s)")
    group = parser.add_argument_group("output").add_argument
    group("--json", action="store_true", help="print one JSON object instead of text")
    group("--trace", metavar="FILE", help="each connection's life as JSON lines (one run, {:,} connections at "
          "most)".format(TRACED[0]))
    # Moved to bench/draw.py: given, they are answered in one line that says where.
    group("--markdown", "--svg", dest="moved", nargs="?", const="", help=argparse.SUPPRESS)
    group = parser.add_argument_group("advanced").add_argument
    group("--timeout", type=number(0.01, 3600, float), default=10.0, metavar="S",
          help="the bound on any one wait (default: %(default)s)")
    group("--procs", type=number(1, 1024), default=usable_cpu_count(), metavar="P",
          help="processes (default: one per CPU it may run on, %(default)s)")
    group("--connect-concurrency", type=number(1, 100000), default=CONNECTING, metavar="K",
          help="connects in flight at once (default: %(default)s)")
    group("--cafile", metavar="FILE", help="with --tls, CA certificates (default: the system's)")
    group("--tls-resume", action="store_true", help="with --tls, resume TLS 1.3 sessions")
    group("--server-args", metavar="FLAGS", help="with --all, flags for every server: '--workers 4'")
    group("--scale", type=number(0.001, 1, float), default=0.05, metavar="F",
          help="with --all, article-* presets' scale (default: %(default)s)")
    group("--repeat", type=number(1, 100), default=3, metavar="N",
          help="with --all, measured runs; the median (default: %(default)s)")
    group("--work", type=number(0, 10**9), default=0, metavar="N",
          help="with --all, the servers' --work N (default: %(default)s)")
    return parser


def to_json(value, indent=None):
    """json.dumps for what client.py reports: a record is written as the figures it carries."""
    return json.dumps(value, default=as_dict, indent=indent)


def one_server(args, local):
    """--port: one run in closed loop, one rate in open loop, or a sweep of rates; the exit status says if it failed.
    local: whether args.host is this machine (is_local()), so that its server's CPU can be read."""
    if args.rate is not None and args.rate.sweep:
        name, w = "{}:{}".format(args.host, args.port), open_workload(args)
        result = sweep(args.host, args.port, args.rate.values, w, args.procs, name)
        print(to_json(result) if args.json else terminal_text([], [dict(result, scenario=name, rates=args.rate.values,
                                                                         workload=w)], steps=True))
        return 0 if not result["failed"] else 1
    w = workload(args) if args.rate is None else dataclasses.replace(open_workload(args), rate=args.rate.values[0])
    pid, why = listening_server(args.port) if local else (None, "the server is not on this machine")
    short = pid and args.rate is None and too_few_descriptors(pid, args.clients)
    if short:  # before anything starts: never EMFILE half-way
        die("the server on port {}: {}".format(args.port, short))
    result, why, _ = measure(args.host, args.port, w, args.procs, pid and (lambda: group_cpu(pid, 0.1, tree=True)),
                             why, args.trace, pid)
    if not result.connections and set(result.error_kinds) == {"refused"}:  # it stopped listening meanwhile
        die("cannot connect to {}:{}: {}".format(args.host, args.port, os.strerror(errno.ECONNREFUSED)))
    if not args.tls and result.errors and not result.messages and speaks_tls(args.host, args.port, args.timeout):
        die("{}:{} speaks TLS, and this run did not: add --tls (and --cafile FILE where the system's store does not "
            "hold its CA)".format(args.host, args.port))
    if args.json:
        print(to_json(result))
        if why:
            note("server CPU not measured: " + why)
    else:
        report(result, w, max(1, min(args.procs, args.clients if args.rate is None else result.scheduled)),
               cpu_not_measured=why)
    if args.rate is None:
        return 0 if not result.errors and result.messages == result.expected else 1
    lost = result.scheduled - result.connections - result.client_ports_exhausted - result.client_descriptors_exhausted
    return 0 if not result.errors and not lost else 1


def check_tls(sock, args):
    """One handshake before the load: a server that cannot be verified is one line, not a run of errors."""
    where = "{}:{}".format(args.host, args.port)
    try:
        tls = tls_context(args.cafile).wrap_socket(sock, server_hostname=args.host)
    except ssl.SSLCertVerificationError as e:
        die("TLS: cannot verify {}: {} ({})".format(where, e.verify_message, "against --cafile " + args.cafile
                                                     if args.cafile else "against the system's store; give its CA "
                                                     "with --cafile"))
    except OSError as e:  # ssl.SSLError is one
        die("TLS: no handshake with {}: {}".format(where, e.strerror or e.reason or e))
    # Half-closed, then read to the server's EOF (within the socket's timeout): a close with the server's session
    # tickets unread would reset the connection, and the server would log the probe as an error.
    with tls, contextlib.suppress(OSError):
        tls.shutdown(socket.SHUT_WR)
        while tls.recv(4096):
            pass


def speaks_tls(host, port, timeout):
    """Whether host:port completes a TLS handshake, unverified: a plain run that had no echo there wanted --tls."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock, context.wrap_socket(sock):
            return True
    except OSError:  # ssl.SSLError is one
        return False


def run_every_server(args):
    """--all: start the servers, measure them, and print the results (--json: every figure)."""
    (entries, without), skipped = server_entries(args), {}
    scenarios, swept = scenarios_from(args), sweeps_from(args)
    if not args.scenario and not args.shaped and args.rate is None:
        note("no --scenario: {}, {}, the scenario of the README's chart (--scenario picks others)".format(
            DEFAULT_SCENARIO, describe(scenarios[0][1])))
    tables = run_all(args, scenarios, entries, skipped)
    sweeps = sweep_all(args, swept, entries, skipped) if swept else []
    results = {"machine": machine(), "tables": tables, "sweeps": sweeps}
    if skipped:  # {server: the line it said}
        results["skipped"] = skipped
    print(to_json(results, indent=1) if args.json else terminal_text(tables, sweeps, skipped, without))
    return 0


def main(argv=None):
    signal.signal(signal.SIGINT, noted)
    signal.signal(signal.SIGTERM, noted)
    try:
        args = parse_args(argv)
        if args.all:
            status = run_every_server(args)
        else:
            # Nothing listening is one clear line: no connection where /proc shows the port listening here (the
            # server would log it), else one, closed at once, a handshake first with --tls (CLIENT.md, "The probe").
            local = is_local(args.host)  # one name lookup, for the probe and the server's CPU
            if args.tls or not (local and listening_sockets(args.port)):
                try:
                    probe = socket.create_connection((args.host, args.port), timeout=args.timeout)
                except OSError as e:
                    die("cannot connect to {}:{}: {}".format(args.host, args.port, e.strerror or e))
                with probe:
                    if args.tls:
                        check_tls(probe, args)
            status = one_server(args, local)
        sys.stdout.flush()  # here, not at the exit, so that a write that fails is said below
        return status
    except KeyboardInterrupt as e:  # a wait saw a stop signal (Ctrl-C, or one to this process alone)
        note("interrupted")
        return 128 + e.args[0]
    except OSError as e:  # writing the output: its reader went away (| head; Windows' C runtime: EINVAL), or a full
        # disk; a failed Windows call (winerror) that Python maps to EINVAL too is not the output's
        if e.errno not in (errno.EPIPE, errno.EINVAL, errno.ENOSPC) or getattr(e, "winerror", None):
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # else the exit's own flush fails, loudly
        if e.errno == errno.ENOSPC:
            die("cannot write: " + e.strerror)
        return 1  # quietly
    finally:  # what is left is stopped, bounded; a second stop signal cuts the servers' patience short
        for worker in multiprocessing.active_children():
            worker.kill()
        stop_servers(RunningServer.started, patience=0.5, stops=2)
        # Python's exit puts a handled signal's default back, and SIGTERM's ends the process: ignored from here.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


if __name__ == "__main__":
    sys.exit(main())
