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
  python3 client.py --all --scenario article-100,c10k --markdown results.md --svg results.svg
  python3 client.py --port 7777 --rate 2000     open loop: 2,000 new connections a second
  python3 client.py --all --scenario pingpong-sweep --svg openloop.svg    every server's knee
"""
import argparse
import array
import collections
import errno
import html
import importlib.util
import json
import math
import multiprocessing
import os
import platform
import re
import resource
import select
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ERROR_KINDS = ("refused", "reset", "connect timeout", "timeout", "closed early", "mismatch", "extra bytes", "deadline", "other")
# name: (clients, connects, messages, [sizes], server --work, what it reproduces)
PRESETS = {
    "article-50": (50, 100, 50, [32], 0, "the article's Mac table: 50 clients x 100 connections x 50 messages"),
    "article-150": (150, 100, 50, [32], 0, "the article's Mac table: 150 clients"),
    "article-100": (100, 100, 50, [32], 0, "the article's Linux table: 100 clients"),
    "article-1000": (1000, 100, 50, [32], 0, "the article's Linux table: 1,000 clients"),
    "c1k": (1000, 1, 100, [32], 0, "1,000 concurrent connections, 100 messages each"),
    "c10k": (10000, 1, 100, [32], 0, "10,000 concurrent connections, 100 messages each"),
    "c10k-cpu": (10000, 1, 1, [32], 100000, "10,000 connections, one message each, servers run --work 100000"),
    "bulk": (20, 5, 500, [1024, 4096, 65536], 0, "messages of 1, 4 and 64 KB: messages/s, MB/s, server CPU"),
    "pingpong": (50, 40, 1, [32], 0, "one message per connection: the connection rate"),
}
SCALED = ("article-50", "article-150", "article-100", "article-1000")  # --scale shrinks their connections
HELD = ("c1k", "c10k", "c10k-cpu")  # every connection is opened and held before the first message
# Bounds sized to the work, so that they never fail a correct server. A connect may wait on the
# kernel's SYN retries (1, 3, 7, 15 s) while a slow acceptor's listen queue is full; an echo may wait
# behind every other client's --work on one core; a whole run may go no slower than SLOWEST msgs/s.
CONNECTING = 100  # default connects in flight: well inside the article's backlog of 256
CONNECT_FLOOR = 30.0  # seconds, for the c* scenarios
SLOWEST = 10000  # msgs/s: a held run slower than this fails its bound
# Open loop (--rate). A sweep's knee: the highest offered rate whose step had no error, replies
# within 5 % of the offered rate, and a p99 response time (from the schedule) at most 100 ms.
KNEE_RULE = {"max_errors": 0, "min_reply_ratio": 0.95, "max_p99_ms": 100.0}
# Clearly past the limit: more than 1 % of the connections failed, or replies came back at
# under 80 % of the offered rate. Two steps in a row of that end a sweep.
PAST_ERROR_SHARE, PAST_REPLY_RATIO = 0.01, 0.8
KEPT_SCHEDULE = 0.95  # the client kept its schedule if it started at least 95 % of the offered rate
MAX_RATE, MAX_STEPS = 1000000, 1000  # connections/s, and steps in a sweep: a typo's guard
# name: (rates, seconds at each rate, what it reproduces): the open-loop presets
SWEEPS = {
    "pingpong-sweep": ("1000:16000:1000", 1.0, "the httperf ping-pong benchmark of 'Asynchronous Servers in Python': "
                                            "one exchange per connection, the connection rate stepped up"),
}
# What a pattern cannot do, in words: said beside a failed row, never used to skip a server.
LIMITS = {
    "echo_simple.py": "it serves one client at a time",
    "echo_select.py": "select() cannot watch descriptors past 1024",
    "echo_select_pool.py": "select() cannot watch descriptors past 1024",
    "echo_prefork.py": "10 workers serve 10 clients at a time",
    "echo_prethread.py": "40 threads serve 40 clients at a time",
    "echo_fork.py": "a process per connection: thousands of forks, about 1 MB each",
    "echo_thread.py": "a thread per connection: thousands of threads take turns at the GIL",
}
ERROR_WORDS = {"refused": "refused", "reset": "reset", "connect timeout": "not connected within {connect_timeout:g} s",
               "timeout": "no echo within {timeout:g} s", "closed early": "closed by the server",
               "mismatch": "wrong bytes echoed", "extra bytes": "more bytes than sent",
               "deadline": "cut at the run's {budget:g} s bound", "other": "other errors"}


# ---------------------------------------------------------------- one worker process: the engine

class Connection:
    """One TCP connection: what it sent, what has come back, and when. `tag` makes its
    messages its own; `scheduled` is when it was due to start (open loop) or started."""
    __slots__ = ("sock", "fd", "owner", "tag", "connecting", "closing", "seq", "expected", "received", "unsent",
                 "scheduled", "started", "echo_started", "sent_at", "deadline")

    def __init__(self, owner, tag, scheduled):
        self.owner, self.tag, self.scheduled = owner, tag, scheduled
        self.connecting, self.closing, self.seq, self.received, self.unsent = True, False, 0, b"", b""


class Engine:
    """A worker process's event loop. It connects each Connection, sends its messages
    one at a time, verifies every echo byte for byte, half-closes and expects EOF, and
    bounds every wait. Its handlers (connected, send, readable, fail) carry one
    connection each; the loop only dispatches. A driver decides when connections start:
    ClosedLoop (the article's clients, one connection after another) or OpenLoop (on a
    clock). The engine asks it driver.connected(c, now) -> send now?, tells it
    driver.ended(c, now, was_connecting), and calls driver.tick(now) -> seconds to sleep,
    or None when it is done."""

    def __init__(self, address, w):
        # epoll where there is one (poll elsewhere), used directly: this loop is the
        # client's whole cost per message, and it must stay below the server's.
        if hasattr(select, "epoll"):
            self.poller, self.scale, self.READ, self.WRITE = select.epoll(), 1, select.EPOLLIN, select.EPOLLOUT
        else:
            self.poller, self.scale, self.READ, self.WRITE = select.poll(), 1000, select.POLLIN, select.POLLOUT
        self.family, self.sockaddr = address
        self.size, self.per_connection = w["size"], w["messages"]
        self.timeout, self.connect_timeout = w["timeout"], w["connect_timeout"]
        self.fill = bytes(range(256)) * (self.size // 256 + 1)
        self.cutoff = None  # with a time budget: when the run is cut
        self.by_fd = {}
        self.errors = dict.fromkeys(ERROR_KINDS, 0)
        self.client_limits = {"ports": 0, "descriptors": 0}  # the client's own failures, not the server's
        self.latencies = array.array("d")  # each message: sent -> echoed
        self.responses = array.array("d")  # each connection: scheduled -> its last echo
        self.connect_times = array.array("d")  # each connect: connect() -> connected
        self.echo_sum, self.messages, self.connections, self.open, self.max_open = 0.0, 0, 0, 0, 0
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
        err = sock.connect_ex(self.sockaddr)
        if err not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
            sock.close()
            self.count(err)
            return False
        c.sock, c.fd = sock, sock.fileno()
        self.by_fd[c.fd] = c
        self.poller.register(c.fd, self.WRITE)
        return True

    def connected(self, c, now):
        err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            return self.fail(c, err)
        c.connecting = False
        self.open += 1
        self.max_open = max(self.max_open, self.open)
        self.connect_times.append(now - c.started)
        self.poller.modify(c.fd, self.READ)  # held or not, a server that closes or resets it is seen
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
        self.messages += 1
        c.seq += 1
        if c.seq < self.per_connection:
            return self.next_message(c, now)
        # All echoed: half-close, and the server must answer with EOF and nothing more.
        self.responses.append(now - c.scheduled)
        c.closing = True
        c.sock.shutdown(socket.SHUT_WR)

    def count(self, why):
        """Count an error by kind. The client's own limits (no local port left, no
        descriptor left) are kept apart: they are not the server's errors."""
        if isinstance(why, int):
            why = OSError(why, os.strerror(why))
        if isinstance(why, OSError) and why.errno in (errno.EADDRNOTAVAIL, errno.EMFILE, errno.ENFILE):
            self.client_limits["ports" if why.errno == errno.EADDRNOTAVAIL else "descriptors"] += 1
            return
        kind = ("refused" if isinstance(why, ConnectionRefusedError) else
                "reset" if isinstance(why, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)) else
                why if isinstance(why, str) else "other")
        self.errors[kind] += 1

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
            events = poll(wait * scale)
            now = clock()  # one timestamp per wake-up: every event in it had arrived by now
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
        return {"messages": self.messages, "connections": self.connections, "echo_sum": self.echo_sum,
                "connect_sum": sum(self.connect_times), "max_open": self.max_open, "errors": self.errors,
                "client_limits": self.client_limits, "last_done": self.last_done,
                "latencies": self.latencies.tobytes(), "responses": self.responses.tobytes(),
                "connect_times": self.connect_times.tobytes()}


class Client:
    """One of the article's workers: `connects` connections one after another."""
    __slots__ = ("cid", "done")

    def __init__(self, cid):
        self.cid, self.done = cid, 0


class ClosedLoop:
    """The article's clients: each opens its connections one after another, the next
    when the last has ended, so a slow server is asked less (closed loop). At most
    `connecting` connects are in flight (a burst of connects overflows the server's
    listen queue: SYNs are dropped and retried after 1, 3, 7 s). With hold, every
    connection is opened first; the workers meet at barrier; then the messages go."""

    def __init__(self, engine, cids, w, barrier):
        self.engine, self.barrier = engine, barrier
        self.connects, self.slots, self.hold = w["connects"], w["connecting"], w["hold"]
        self.clients = [Client(cid) for cid in cids]
        self.active, self.in_flight = len(self.clients), 0
        self.queued = collections.deque()  # clients waiting for a connect slot
        self.held = []  # with hold: connected, waiting for the first message
        self.released = not self.hold
        self.times = {}

    def start(self, now):
        self.times["start"] = now
        for client in self.clients:
            self.open(client, now)

    def open(self, client, now):
        """Start client's next connection, or queue it for a slot; a connect that
        fails at once counts and moves on."""
        engine = self.engine
        while True:
            if client.done == self.connects or (engine.cutoff and now > engine.cutoff):
                engine.errors["deadline"] += self.connects - client.done
                self.active -= 1
                return
            if self.in_flight >= self.slots:
                self.queued.append(client)
                return
            c = Connection(client, b":%x:%x:" % (client.done, client.cid), now)
            if engine.connect(c, now):
                self.in_flight += 1
                return
            client.done += 1

    def connect_done(self, now):
        """A connect finished, either way: its slot goes to the next client queued."""
        self.in_flight -= 1
        while self.queued and self.in_flight < self.slots:
            self.open(self.queued.popleft(), now)

    def connected(self, c, now):
        self.connect_done(now)
        if self.released:
            return True
        c.deadline = float("inf")  # waits for the other connections, not for the server
        self.held.append(c)
        return False

    def ended(self, c, now, was_connecting):
        now = now or time.perf_counter()
        c.owner.done += 1
        if was_connecting:
            self.connect_done(now)
        self.open(c.owner, now)

    def tick(self, now):
        if not self.released and not self.in_flight and not self.queued:
            self.release()
        return 0.25 if self.active else None

    def release(self):
        """Every connection is open (or failed): meet the other workers, then send."""
        self.released = True
        self.times["held_at"] = time.perf_counter()
        try:
            self.barrier.wait(self.engine.connect_timeout)
        except threading.BrokenBarrierError:
            pass  # another worker is late or gone: go on, its errors are its own
        now = self.times["echo_start"] = time.perf_counter()
        for c in self.held:
            if self.engine.by_fd.get(c.fd) is c:  # still open: a descriptor of one that failed may be another's now
                try:
                    self.engine.begin(c, now)
                except OSError as e:  # reset while it waited
                    self.engine.fail(c, e, now)

    def finish(self):
        if not self.released:
            self.release()  # every connection failed: still meet the others at the barrier


class OpenLoop:
    """Connections start on a clock, `rate` a second over all workers, whether or not
    the earlier ones have finished (httperf's open loop). Of P workers, worker i starts
    connections i, i+P, i+2P, ...; connection k is due at start + k/rate, and its
    response time counts from then: a server that stalls keeps being asked, and the
    wait of every connection due meanwhile shows (wrk2's coordinated omission)."""

    def __init__(self, engine, w, index, procs):
        self.engine = engine
        self.due = range(index, round(w["rate"] * w["duration"]), procs)
        self.interval = 1.0 / w["rate"]
        self.n, self.behind = 0, 0.0
        self.times = {"first_start": None, "last_start": None}

    def start(self, now):
        self.times["start"] = self.t0 = now

    def tick(self, now):
        engine, clock = self.engine, time.perf_counter
        while self.n < len(self.due):
            k = self.due[self.n]
            at = self.t0 + k * self.interval
            now = clock()
            if at > now:
                return min(at - now, 0.25)
            self.n += 1
            self.behind = max(self.behind, now - at)
            self.times["first_start"] = self.times["first_start"] or now
            self.times["last_start"] = now
            engine.connect(Connection(None, b":%x:" % k, at), now)
        return 0.25 if engine.by_fd else None

    def connected(self, c, now):
        return True

    def ended(self, c, now, was_connecting):
        pass

    def finish(self):
        self.times.update(started=self.n, behind=self.behind)


def run_worker(address, share, w, go, barrier, results):
    """Runs in a worker process: drive this worker's share of the load (its client
    ids, or its place in the schedule), send back one figures dict."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    engine = Engine(address, w)
    index, procs = share
    if w.get("rate"):
        driver = OpenLoop(engine, w, index, procs)
    else:
        driver = ClosedLoop(engine, range(index, w["clients"], procs), w, barrier)
    results.send("ready")
    go.wait()
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    engine.cutoff = start + w["budget"] if w.get("budget") else None
    driver.start(start)
    engine.run(driver)
    driver.finish()
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    figures = dict(engine.figures(), **driver.times)
    figures["end"] = time.perf_counter()
    figures["cpu"] = cpu1.ru_utime - cpu0.ru_utime + cpu1.ru_stime - cpu0.ru_stime
    results.send(figures)


# ---------------------------------------------------------------- measuring one server

def fit_descriptors(clients, procs):
    """Raise RLIMIT_NOFILE to the hard limit (servers started by --all inherit it);
    None if the clients fit, else why not."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    need = -(-clients // procs) + 64
    if soft < need:
        return "{} clients on {} processes need {} descriptors each; the limit is {} (raise ulimit -n)".format(
            clients, procs, need, soft)
    return None


def measure(host, port, w, procs):
    """Run workload w against host:port; return the combined figures."""
    if w.get("rate"):  # open loop: how many are open at once is the server's doing; EMFILE is counted
        procs = max(1, min(procs, round(w["rate"] * w["duration"])))
        fit_descriptors(1, procs)
    else:
        procs = max(1, min(procs, w["clients"]))
        too_many = fit_descriptors(w["clients"], procs)
        if too_many:
            raise SystemExit("client.py: " + too_many)
    # The host decides the family: 127.0.0.1 is IPv4, ::1 is IPv6.
    family, _, _, _, sockaddr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    context = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
    go, barrier = context.Event(), context.Barrier(procs)
    # The connects in flight are shared out over the workers, at least one each.
    per_worker = dict(w, connecting=max(1, w["connecting"] // procs))
    workers, pipes = [], []
    for i in range(procs):
        here, there = context.Pipe(duplex=False)
        worker = context.Process(target=run_worker, args=((family, sockaddr), (i, procs), per_worker, go, barrier,
                                                          there), daemon=True)
        worker.start()
        there.close()
        workers.append(worker)
        pipes.append(here)
    try:
        for pipe in pipes:
            if not pipe.poll(60) or receive(pipe) != "ready":
                raise SystemExit("client.py: a worker process did not start")
        go.set()
        if w.get("rate"):
            bound = w["duration"] + w["connect_timeout"] + (w["messages"] + 2) * w["timeout"] + 60
        else:
            bound = 2 * w["connect_timeout"] + w["connects"] * (w["messages"] + 3) * w["timeout"] + 60
        parts = []
        for pipe in pipes:
            if not pipe.poll(bound):
                raise SystemExit("client.py: a worker process did not finish")
            parts.append(receive(pipe))
    finally:
        for worker in workers:
            worker.join(5)
            if worker.is_alive():
                worker.kill()
    return (combine_open if w.get("rate") else combine)(parts, w)


def receive(pipe):
    """A worker's message; a worker that died says so in one line, not a traceback."""
    try:
        return pipe.recv()
    except EOFError:
        raise SystemExit("client.py: a worker process died (its error is above)") from None


def timings(parts, key):
    values = array.array("d")
    for part in parts:
        values.frombytes(part[key])
    return sorted(values)


def percentile(ordered, q):
    """The q-quantile of sorted seconds, in milliseconds (None if there are none)."""
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else None


def counted(parts):
    """The figures every mode shares: counts, errors by kind, the client's own limits, CPU."""
    errors = {kind: sum(p["errors"][kind] for p in parts) for kind in ERROR_KINDS}
    return {"messages": sum(p["messages"] for p in parts), "connections": sum(p["connections"] for p in parts),
            "errors": sum(errors.values()), "error_kinds": {k: v for k, v in errors.items() if v},
            "client_ports_exhausted": sum(p["client_limits"]["ports"] for p in parts),
            "client_descriptors_exhausted": sum(p["client_limits"]["descriptors"] for p in parts),
            "max_open": sum(p["max_open"] for p in parts),  # exact with hold: all are open at the barrier
            "client_cpu_s": sum(p["cpu"] for p in parts)}


def combine(parts, w):
    """Closed loop: the article's averages, rates over the run (or its echo phase), latency per message."""
    figures = counted(parts)
    messages, connections = figures["messages"], figures["connections"]
    attempted = w["clients"] * w["connects"]
    wall = max(p["end"] for p in parts) - min(p["start"] for p in parts)
    ordered = timings(parts, "latencies")
    # With hold, the two phases of the tiny-asyncio tables: every connection open, then every echo.
    phases = {"connect_phase_s": None, "echo_phase_s": None}
    if w["hold"]:
        phases = {"connect_phase_s": max(p["held_at"] for p in parts) - min(p["start"] for p in parts),
                  "echo_phase_s": max(p["end"] for p in parts) - min(p["echo_start"] for p in parts)}
    rated = phases["echo_phase_s"] or wall  # held connections: rates over the echo phase
    # The article's three figures: averages per connection.
    connect_s = sum(p["connect_sum"] for p in parts) / max(1, attempted)
    echo_s = sum(p["echo_sum"] for p in parts) / max(1, connections)
    return dict(figures, **phases, **{
        "expected": attempted * w["messages"],
        "connect_s": connect_s, "echo_s": echo_s, "total_s": connect_s + echo_s, "wall_s": wall,
        "msgs_per_s": messages / rated if rated else 0.0,
        "mb_per_s": messages * w["size"] / rated / 1e6 if rated else 0.0,
        "conns_per_s": connections / wall if wall else 0.0,
        "p50_ms": percentile(ordered, 0.50), "p90_ms": percentile(ordered, 0.90),
        "p99_ms": percentile(ordered, 0.99), "max_ms": ordered[-1] * 1000 if ordered else None,
    })


def combine_open(parts, w):
    """Open loop: the offered and achieved start rates, the reply rate, and response
    times from each connection's scheduled start, as httperf and wrk2 report them."""
    figures = counted(parts)
    rate, duration = w["rate"], w["duration"]
    start = min(p["start"] for p in parts)
    started = sum(p["started"] for p in parts)
    firsts = [p["first_start"] for p in parts if p["first_start"] is not None]
    lasts = [p["last_start"] for p in parts if p["last_start"] is not None]
    # Starts per second from the first to the last: the offered rate, if the client kept its schedule.
    spread = max(lasts) - min(firsts) if firsts else 0.0
    achieved = (started - 1) / spread if started > 1 and spread > 0 else float(rate if started else 0)
    done = [p["last_done"] for p in parts if p["last_done"] is not None]
    # Completions per second over the arrivals' duration, or longer when the replies came later.
    span = max(done) - start if done else 0.0
    responses, connects = timings(parts, "responses"), timings(parts, "connect_times")
    return dict(figures, **{
        "offered_rate": rate, "duration_s": duration, "scheduled": round(rate * duration),
        "started": started, "achieved_rate": achieved,
        "behind_ms": max(p["behind"] for p in parts) * 1000,
        "kept_schedule": achieved >= KEPT_SCHEDULE * rate,
        "reply_rate": figures["connections"] / max(duration, span),
        "expected": round(rate * duration) * w["messages"],
        "p50_ms": percentile(responses, 0.50), "p90_ms": percentile(responses, 0.90),
        "p99_ms": percentile(responses, 0.99), "max_ms": responses[-1] * 1000 if responses else None,
        "connect_p50_ms": percentile(connects, 0.50), "connect_p99_ms": percentile(connects, 0.99),
        "mb_per_s": figures["messages"] * w["size"] / max(duration, span) / 1e6,
    })


def describe(w):
    return "{clients} clients x {connects} connections x {messages} messages of {size} B".format(**w)


def report(result, w, procs, out=sys.stdout):
    """The single-server report: the article's three figures, then the rest."""
    r = result
    print("workload   {} ({} client processes)".format(describe(w), procs), file=out)
    print("article    connect {:.5f} s   echo {:.5f} s   total {:.5f} s   (averages per connection)".format(
        r["connect_s"], r["echo_s"], r["total_s"]), file=out)
    print("verified   {} of {} messages in {:.2f} s: {:,.0f} msgs/s, {:.2f} MB/s, {:,.0f} connections/s".format(
        r["messages"], r["expected"], r["wall_s"], r["msgs_per_s"], r["mb_per_s"], r["conns_per_s"]), file=out)
    if r["connect_phase_s"] is not None:
        print("phases     connect {:.3f} s ({:,} connections open at once), then echo {:.3f} s "
              "(msgs/s and MB/s are over the echo phase)".format(r["connect_phase_s"], r["max_open"],
                                                                r["echo_phase_s"]), file=out)
    if r["p50_ms"] is not None:
        print("latency    p50 {:.3f} ms   p90 {:.3f} ms   p99 {:.3f} ms   max {:.3f} ms".format(
            r["p50_ms"], r["p90_ms"], r["p99_ms"], r["max_ms"]), file=out)
    print("client CPU {:.2f} s ({:.1f} us a message)".format(
        r["client_cpu_s"], 1e6 * r["client_cpu_s"] / max(1, r["messages"])), file=out)
    print("errors     {}{}".format(r["errors"], "  " + ", ".join(
        "{} {}".format(v, k) for k, v in r["error_kinds"].items()) if r["errors"] else ""), file=out)


# ---------------------------------------------------------------- open loop: --rate, one rate or a sweep

def parse_rate(text):
    """--rate: "R" -> R (a number); "A:B:STEP" -> [A, A+STEP, ..., <= B] (a list, even of one).
    For argparse's type=: a bad value raises ArgumentTypeError, which is one line."""
    parts = text.split(":")
    try:
        if len(parts) not in (1, 3):
            raise ValueError
        values = [float(part) for part in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(
            "expected connections/s as R or a sweep A:B:STEP, e.g. 500 or 100:2000:100, got {!r}".format(text)
        ) from None
    # Written as "inside the range" so that nan, which compares false, fails too.
    if not all(0 < value <= MAX_RATE for value in values):
        raise argparse.ArgumentTypeError("rates and steps must be above 0 and at most {:,}, got {!r}".format(
            MAX_RATE, text))
    if len(values) == 1:
        return whole(values[0])
    start, stop, step = values
    if stop < start:
        raise argparse.ArgumentTypeError("a sweep goes up: A:B:STEP needs A <= B, got {!r}".format(text))
    count = int((stop - start) / step + 1e-9) + 1  # the epsilon keeps B itself when STEP is 0.1
    if count > MAX_STEPS:
        raise argparse.ArgumentTypeError("{!r} is {:,} steps; at most {:,}".format(text, count, MAX_STEPS))
    # Each rate from start, not by adding STEP again and again: no 0.30000000000000004.
    return [whole(round(start + n * step, 6)) for n in range(count)]


def whole(value):
    """50.0 -> 50, so that JSON, tables and charts show 50 and not 50.0."""
    return int(value) if value == int(value) else value


def meets(step, rule=KNEE_RULE):
    """True when step is within the rule: no error, replies kept up, p99 under the bound,
    and the client kept its schedule (else the rate was not really offered)."""
    return (step["kept_schedule"] and step["connections"] > 0 and step["errors"] <= rule["max_errors"]
            and step["reply_rate"] >= rule["min_reply_ratio"] * step["offered_rate"]
            and step["p99_ms"] is not None and step["p99_ms"] <= rule["max_p99_ms"])


def knee(steps, rule=KNEE_RULE):
    """The highest offered rate whose step meets the rule, or None. The highest, not
    the last before a miss: one hiccup of a shared machine at a low rate must not
    hide the rates the server handled above it."""
    rates = [step["offered_rate"] for step in steps if meets(step, rule)]
    return max(rates) if rates else None


def knee_rule_text(rule=KNEE_RULE):
    errors = "no error" if rule["max_errors"] == 0 else "at most {} errors".format(rule["max_errors"])
    return ("the knee is the highest offered rate with {}, replies at least {:.0f} % of the offered rate "
            "and p99 at most {:g} ms").format(errors, 100 * rule["min_reply_ratio"], rule["max_p99_ms"])


def past_limit(steps):
    """Stop a sweep early: True when the last two steps were both clearly past the
    limit (more than 1 % of connections failed, or replies under 80 % of offered).
    Two in a row, so that one bad step on a shared machine does not end a sweep;
    rates above them would only add timeouts and minutes."""
    def over(step):
        attempted = step["connections"] + step["errors"]
        return step["kept_schedule"] and (step["errors"] > PAST_ERROR_SHARE * attempted
                                          or step["reply_rate"] < PAST_REPLY_RATIO * step["offered_rate"])
    return len(steps) >= 2 and over(steps[-1]) and over(steps[-2])


def client_limited(steps):
    """Stop a sweep: the client could not keep its schedule two steps in a row, so
    higher rates would not be offered either."""
    return len(steps) >= 2 and not steps[-1]["kept_schedule"] and not steps[-2]["kept_schedule"]


def error_share(step):
    """Errors as a percentage of the connections the step attempted."""
    attempted = step["connections"] + step["errors"]
    return 100.0 * step["errors"] / attempted if attempted else 0.0


# ---------------------------------------------------------------- reporting

def rate_text(rate):
    return "{:,.0f}".format(rate) if rate == int(rate) else "{:,.2f}".format(rate)


def ms_text(value):
    """Milliseconds with about three significant digits: 0.213, 4.27, 38.1, 1,204."""
    if value is None or value == 0:
        return "-" if value is None else "0"
    return "{:,.3f}".format(value) if value < 1 else "{:,.2f}".format(value) if value < 10 else \
        "{:,.1f}".format(value) if value < 100 else "{:,.0f}".format(value)


def errors_text(step):
    if not step["errors"]:
        return "0"
    return "{} ({})".format(step["errors"], ", ".join(
        "{} {}".format(count, kind) for kind, count in sorted(step["error_kinds"].items())))


def step_line(server, step):
    """The progress line for one step, on stderr."""
    return "{} {}/s: started {:,.0f}/s ({} ms behind{}), replies {:,.0f}/s, p99 {} ms, {} errors".format(
        server, rate_text(step["offered_rate"]), step["achieved_rate"], ms_text(step["behind_ms"]),
        "" if step["kept_schedule"] else ": the client fell behind its schedule",
        step["reply_rate"], ms_text(step["p99_ms"]), step["errors"])


def sweep_table_markdown(server, sweep):
    """One server's sweep as Markdown lines: a heading that names its knee, then one row per step."""
    if sweep["knee"] is not None:
        heading = "#### {}: knee {} connections/s{}".format(server, rate_text(sweep["knee"]), (
            ", the highest rate offered: its limit lies higher" if sweep["knee_at_top"] else ""))
    elif sweep["failed"] and not sweep["steps"]:
        heading = "#### {}: failed".format(server)
    else:
        heading = "#### {}: no knee (no step met the rule)".format(server)
    lines = [heading, ""]
    if sweep["failed"]:
        lines += ["Failed: {}.".format(sweep["failed"]), ""]
    if not sweep["steps"]:
        return lines
    lines += ["| offered/s | started/s | behind ms | replies/s | errors | p50 ms | p90 ms | p99 ms | max ms"
              " | connect p99 ms | max open | client CPU s |",
              "|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for step in sweep["steps"]:
        offered = rate_text(step["offered_rate"])
        lines.append("| {} | {:,.0f} | {} | {:,.0f} | {} | {} | {} | {} | {} | {} | {:,} | {:.2f} |".format(
            "**{}**".format(offered) if step["offered_rate"] == sweep["knee"] else offered,
            step["achieved_rate"], ms_text(step["behind_ms"]), step["reply_rate"], errors_text(step),
            ms_text(step["p50_ms"]), ms_text(step["p90_ms"]), ms_text(step["p99_ms"]), ms_text(step["max_ms"]),
            ms_text(step["connect_p99_ms"]), step["max_open"], step["client_cpu_s"]))
    lines.append("")
    if sweep["client_limited"]:
        lines += ["Stopped after {}/s: the client could not keep its schedule two steps in a row, so higher rates "
                  "were not offered; the server's knee may lie higher.".format(
                      rate_text(sweep["steps"][-1]["offered_rate"])), ""]
    elif sweep["stopped_early"]:
        lines += ["Stopped after {}/s: two steps in a row were past the limit.".format(
            rate_text(sweep["steps"][-1]["offered_rate"])), ""]
    exhausted = sum(step["client_ports_exhausted"] or 0 for step in sweep["steps"])
    if exhausted:
        lines += ["The client ran out of local ports (EADDRNOTAVAIL) {:,} times; those connections are not "
                  "counted against the server.".format(exhausted), ""]
    return lines


def sweep(host, port, rates, w, procs, name, server=None):
    """Offer each rate in turn for w["duration"] seconds, one progress line per step;
    stop early once the server is clearly past its limit, or the client cannot keep
    its schedule. Returns {"server", "knee", "knee_rule", "knee_at_top", "steps",
    "stopped_early", "client_limited", "failed"}."""
    result = {"server": name, "knee": None, "knee_rule": KNEE_RULE, "steps": [], "stopped_early": False,
              "client_limited": False, "failed": None}
    steps = result["steps"]
    for n, rate in enumerate(rates):
        if server is not None and not server.alive():
            result["failed"] = "exited with status {}".format(server.proc.returncode)
            break
        before = server.cpu() if server is not None else None
        step = measure(host, port, dict(w, rate=rate), procs)
        step["server_cpu_s"] = None if before is None else server.cpu() - before
        steps.append(step)
        print(step_line(name, step), file=sys.stderr, flush=True)
        if n + 1 < len(rates) and (past_limit(steps) or client_limited(steps)):
            result["stopped_early"], result["client_limited"] = True, client_limited(steps)
            break
    result["knee"] = knee(steps)
    # The last rate asked for met the rule: the server's limit was not reached.
    result["knee_at_top"] = result["knee"] is not None and result["knee"] == rates[-1]
    return result


def report_open(r, w, procs, out=sys.stdout):
    """The single-server report of one open-loop rate."""
    print("open loop  {} connections/s offered for {:g} s, {} exchange{} of {} B each ({} client processes)".format(
        rate_text(r["offered_rate"]), w["duration"], w["messages"], "s" if w["messages"] > 1 else "", w["size"],
        procs), file=out)
    print("schedule   {:,} connections started at {:,.1f}/s, at most {} ms behind schedule".format(
        r["started"], r["achieved_rate"], ms_text(r["behind_ms"])), file=out)
    if not r["kept_schedule"]:
        print("           the client did not keep its schedule (under {:.0f} % of the offered rate): the rate was "
              "not offered, and the response times include the client's own lag; add --procs or lower --rate"
              .format(100 * KEPT_SCHEDULE), file=out)
    print("replies    {:,} of {:,} connections completed: {:,.1f}/s; {:,} messages verified".format(
        r["connections"], r["scheduled"], r["reply_rate"], r["messages"]), file=out)
    if r["p50_ms"] is not None:
        print("response   p50 {} ms   p90 {} ms   p99 {} ms   max {} ms   (from each connection's scheduled "
              "start to its last echo)".format(*(ms_text(r[k]) for k in ("p50_ms", "p90_ms", "p99_ms", "max_ms"))),
              file=out)
        print("connect    p50 {} ms   p99 {} ms; at most {:,} connections open at once".format(
            ms_text(r["connect_p50_ms"]), ms_text(r["connect_p99_ms"]), r["max_open"]), file=out)
    print("client CPU {:.2f} s ({:.0f} us a connection)".format(
        r["client_cpu_s"], 1e6 * r["client_cpu_s"] / max(1, r["started"])), file=out)
    client_side(r, out)
    print("errors     {}{}".format(r["errors"], "  " + ", ".join(
        "{} {}".format(v, k) for k, v in r["error_kinds"].items()) if r["errors"] else ""), file=out)


def client_side(r, out):
    """The client's own limits, said apart from the server's errors."""
    if r["client_ports_exhausted"]:
        print("client     ran out of local ports {:,} times (EADDRNOTAVAIL: ports wait in TIME_WAIT); "
              "not counted against the server".format(r["client_ports_exhausted"]), file=out)
    if r["client_descriptors_exhausted"]:
        print("client     ran out of file descriptors {:,} times (raise ulimit -n); not counted against the "
              "server".format(r["client_descriptors_exhausted"]), file=out)


# ---------------------------------------------------------------- --all: every server, ranked

def proc_cpu(pgid):
    """CPU seconds used by every process in a process group, dead children included (Linux /proc)."""
    total, tick = 0.0, os.sysconf("SC_CLK_TCK")
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    for entry in entries:
        if entry.isdigit():
            try:
                with open("/proc/{}/stat".format(entry)) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid:  # utime stime cutime cstime
                total += sum(int(x) for x in fields[11:15]) / tick
    return total


class RunningServer:
    """An echo_*.py started on --port 0 -q in a session of its own, so that it and
    all its children can be measured and stopped together."""

    def __init__(self, script, work, extra=()):
        self.name = " ".join([script.name, *extra])
        self.proc = subprocess.Popen([sys.executable, str(script), "--port", "0", "-q", "--work", str(work), *extra],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True)
        self.port, self.failed, self.stderr = None, None, None
        line, deadline = b"", time.monotonic() + 15
        while not line.endswith(b"\n") and time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.1)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 1)
                if not chunk:
                    break
                line += chunk
        if line.startswith(b"Server Run Port:"):
            self.port = int(line.split(b":")[1])
        else:
            self.failed = "did not start: " + (line.decode(errors="replace").strip() or "no port line")

    def cpu(self):
        return proc_cpu(self.proc.pid)

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        """SIGTERM, then SIGKILL for the whole group; returns what it wrote on stderr."""
        if self.stderr is not None:
            return self.stderr  # already stopped
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        self.stderr = self.proc.stderr.read().decode(errors="replace")
        self.proc.stdout.close()
        self.proc.stderr.close()
        return self.stderr


def accept_spread(stderr):
    """The process servers' shutdown lines '[PID:n]Accepted:k' -> [k, ...]."""
    return sorted((int(line.rsplit(":", 1)[1]) for line in stderr.splitlines()
                   if "]Accepted:" in line and line.rsplit(":", 1)[1].isdigit()), reverse=True)


def work_seconds(work):
    """How long sum(range(work)), the servers' --work, takes here: the bounds are sized from it."""
    started = time.perf_counter()
    sum(range(work))
    return time.perf_counter() - started


def workload(args, **changes):
    """A workload dict from the command line, with changes."""
    w = {"clients": args.clients, "connects": args.connects, "messages": args.messages or 50, "size": args.size,
         "timeout": args.timeout, "connect_timeout": args.timeout, "budget": args.budget, "hold": args.hold,
         "connecting": args.connect_concurrency, "rate": None, "duration": args.duration}
    w.update(changes)
    return w


def open_workload(args, duration=None):
    """The workload of one open-loop step, without its rate: one exchange by default."""
    return workload(args, messages=args.messages or 1, duration=duration or args.duration, clients=1, connects=1)


def sweeps_from(args):
    """(name, rates, workload) of the open-loop sweep asked for, or None."""
    if args.rate is not None:
        return "custom", args.rate if isinstance(args.rate, list) else [args.rate], open_workload(args)
    for name in args.scenario or []:
        if name in SWEEPS:
            rates, duration, _ = SWEEPS[name]
            return name, parse_rate(rates), open_workload(args, duration)
    return None


def scenarios_from(args):
    """[(name, workload dict, server --work)] for the closed-loop scenarios asked for."""
    if not args.scenario:
        return [] if args.rate is not None else [("custom", workload(args), args.work)]
    chosen = []
    for name in args.scenario:
        if name in SWEEPS:
            continue
        clients, connects, messages, sizes, work, _ = PRESETS[name]
        if name in SCALED:
            connects = max(1, round(connects * args.scale))
        bounds = {}
        if name in HELD:
            # A message may wait behind every client's --work on one core, twice over for a shared machine.
            queue_s = 2 * clients * work_seconds(work)
            total = clients * connects * messages
            bounds = dict(hold=True, connect_timeout=max(args.timeout, CONNECT_FLOOR),
                          timeout=max(args.timeout, CONNECT_FLOOR, math.ceil(10 + queue_s)),
                          budget=max(args.budget, math.ceil(CONNECT_FLOOR + total / SLOWEST + total / clients * queue_s)))
        for size in sizes:
            label = name if len(sizes) == 1 else "{}-{}".format(name, size)
            chosen.append((label, workload(args, clients=clients, connects=connects, messages=messages, size=size,
                                           **bounds), work))
    return chosen


def server_entries(args):
    """[(script, extra flags)] to run: every echo_*.py (or --servers), and the --uvloop
    variant of those that take it, when uvloop is installed."""
    scripts = sorted(HERE.glob("echo_*.py"))
    if args.servers:
        wanted = {s if s.endswith(".py") else s + ".py" for s in args.servers}
        wanted = {s if s.startswith("echo_") else "echo_" + s for s in wanted}
        unknown = wanted - {s.name for s in scripts}
        if unknown:
            raise SystemExit("client.py: no such server here: " + ", ".join(sorted(unknown)))
        scripts = [s for s in scripts if s.name in wanted]
    if not scripts:
        raise SystemExit("client.py: no echo_*.py beside client.py")
    entries = [(script, ()) for script in scripts]
    on_uvloop = [script for script in scripts if "parse_args(uvloop=True)" in script.read_text()]
    if on_uvloop and importlib.util.find_spec("uvloop"):
        entries += [(script, ("--uvloop",)) for script in on_uvloop]
    elif on_uvloop:
        print("client.py: uvloop is not installed: the --uvloop rows are left out (pip install uvloop)",
              file=sys.stderr)
    return sorted(entries, key=lambda entry: (entry[0].name, entry[1]))


def why_failed(result, w, name):
    """A failed run in words: what happened, and the pattern's known limit."""
    happened = ", ".join("{:,} {}".format(n, ERROR_WORDS[kind].format(**w))
                         for kind, n in result["error_kinds"].items())
    text = "{:,} of {:,} messages echoed; {}".format(result["messages"], result["expected"],
                                                    happened or "no error counted")
    limit = LIMITS.get(name.split()[0])
    return text + ("; the pattern's limit: " + limit if limit else "")


def sweep_all(args, entries):
    """Every server swept in open loop, one after another: [sweep dict, ...]."""
    label, rates, w = sweeps_from(args)
    sweeps = []
    for script, extra in entries:
        server = RunningServer(script, args.work, extra)
        try:
            if server.failed:
                result = {"server": server.name, "knee": None, "knee_rule": KNEE_RULE, "steps": [],
                          "stopped_early": False, "client_limited": False, "failed": server.failed,
                          "knee_at_top": False}
            else:
                result = sweep("127.0.0.1", server.port, rates, w, args.procs, server.name, server)
        finally:
            server.stop()
        result.update(scenario=label, rates=rates, workload=w)
        sweeps.append(result)
    return sweeps


def run_all(args, entries):
    tables = []
    for label, w, work in scenarios_from(args):
        too_many = fit_descriptors(w["clients"], args.procs)
        if too_many:
            raise SystemExit("client.py: " + too_many)
        servers = [RunningServer(script, work, extra) for script, extra in entries]
        rows = {s.name: {"server": s.name, "runs": [], "failed": s.failed} for s in servers}
        try:
            # A warm-up at most 100 clients wide: it wakes the server, it does not measure it.
            warm = dict(w, clients=min(100, w["clients"]), connects=1, messages=max(1, w["messages"] // 5))
            plan = [(0, s, warm) for s in servers] + [
                (rep, s, w) for rep in range(1, args.repeat + 1) for s in servers]  # interleaved
            for step, (rep, server, load) in enumerate(plan, 1):
                row = rows[server.name]
                if row["failed"]:
                    continue
                if not server.alive():
                    row["failed"] = "exited with status {}".format(server.proc.returncode)
                    continue
                before = server.cpu()
                result = measure("127.0.0.1", server.port, load, args.procs)
                after = server.cpu()
                result["server_cpu_s"] = None if before is None else after - before
                print("[{}/{}] {} {} {}: {:,.0f} msgs/s, {} errors".format(
                    step, len(plan), label, server.name, "warm-up" if rep == 0 else "run {}".format(rep),
                    result["msgs_per_s"], result["errors"]), file=sys.stderr, flush=True)
                if result["errors"] or result["messages"] != result["expected"]:
                    row["failed"] = why_failed(result, load, server.name)
                    # Stopped now: a server that failed may still be working through what it was
                    # sent (10,000 threads running --work), and would slow the next server's run.
                    row["accept_spread"] = accept_spread(server.stop())
                elif rep:
                    row["runs"].append(result)
        finally:
            for server in servers:
                rows[server.name].setdefault("accept_spread", accept_spread(server.stop()))
        tables.append({"scenario": label, "workload": w, "server_work": work,
                       "rows": rank([summarize(row) for row in rows.values()])})
    return tables


def summarize(row):
    """The median of the measured runs, for each figure."""
    runs = row.pop("runs")
    if row["failed"] or not runs:
        row["failed"] = row["failed"] or "no measured run"
        return row
    for key in ("connect_s", "echo_s", "total_s", "msgs_per_s", "mb_per_s", "conns_per_s", "p99_ms",
                "server_cpu_s", "client_cpu_s", "connect_phase_s", "echo_phase_s", "max_open"):
        values = [r[key] for r in runs if r[key] is not None]
        row[key] = statistics.median(values) if values else None
    row["messages"] = runs[0]["messages"]
    cpu = row["server_cpu_s"]
    row["msgs_per_server_cpu_s"] = row["messages"] / cpu if cpu else None
    # The client spent more CPU than the server: the figure is as much the client's as the server's.
    row["client_bound"] = bool(cpu is not None and row["client_cpu_s"] > cpu)
    return row


def rank(rows):
    good = sorted((r for r in rows if not r["failed"]), key=lambda r: -r["msgs_per_s"])
    for n, row in enumerate(good, 1):
        row["rank"] = n
    return good + sorted((r for r in rows if r["failed"]), key=lambda r: r["server"])


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


# The leading columns: the article's averages per connection, or the two phases of held connections.
ARTICLE_COLUMNS = [("connect s", "connect_s", ".5f"), ("echo s", "echo_s", ".5f"), ("total s", "total_s", ".5f")]
HELD_COLUMNS = [("connect phase s", "connect_phase_s", ".2f"), ("echo phase s", "echo_phase_s", ".2f"),
                ("most open", "max_open", ",.0f")]
COMMON_COLUMNS = [("msgs/s", "msgs_per_s", ",.0f"), ("MB/s", "mb_per_s", ".2f"), ("p99 ms", "p99_ms", ".2f"),
                  ("server CPU s", "server_cpu_s", ".2f"), ("msgs per server CPU-s", "msgs_per_server_cpu_s", ",.0f")]


def sweeps_markdown(sweeps, tables):
    """The open-loop sweeps: the knees ranked (beside the closed-loop pingpong ranks
    when that table was measured in the same run), then each server's steps."""
    if not sweeps:
        return []
    w, rates = sweeps[0]["workload"], sweeps[0]["rates"]
    step = rates[1] - rates[0] if len(rates) > 1 else None
    lines = ["### {}: open loop, {}{} connections/s{}, {:g} s each, {} exchange{} of {} B per connection".format(
        sweeps[0]["scenario"], rate_text(rates[0]), " to {}".format(rate_text(rates[-1])) if step else "",
        " in steps of {}".format(rate_text(step)) if step else "", w["duration"], w["messages"],
        "s" if w["messages"] > 1 else "", w["size"]), "",
        "Connections start on a clock, whether or not earlier ones have finished; a response time counts from the "
        "connection's scheduled start to its last echo. {}; the client must have kept its schedule.".format(
            knee_rule_text().capitalize()), ""]
    closed = {}
    for table in tables:
        if table["scenario"] == "pingpong":
            closed = {row["server"]: row.get("rank") or "failed" for row in table["rows"]}
    ranked = sorted(sweeps, key=lambda s: (s["knee"] is None, -(s["knee"] or 0), s["server"]))
    lines += ["| knee rank | server | knee connections/s | p99 ms at the knee | highest offered/s | started/s there "
              "| replies/s there | errors there |" + (" closed-loop pingpong rank |" if closed else ""),
              "|---:|---|---:|---:|---:|---:|---:|---:|" + ("---:|" if closed else "")]
    for s in ranked:
        at_knee = [step for step in s["steps"] if step["offered_rate"] == s["knee"]]
        top = s["steps"][-1] if s["steps"] else None
        # Equal knees share a rank: a tie at the top is the machine's limit, not a ranking.
        place = 1 + sum(1 for other in sweeps if (other["knee"] or 0) > (s["knee"] or 0))
        cells = [str(place) if s["knee"] is not None else "-", s["server"],
                 (rate_text(s["knee"]) + (" or more" if s["knee_at_top"] else "")) if s["knee"] is not None
                 else ("failed" if s["failed"] else "none"),
                 ms_text(at_knee[0]["p99_ms"]) if at_knee else "-",
                 rate_text(top["offered_rate"]) if top else "-", "{:,.0f}".format(top["achieved_rate"]) if top else "-",
                 "{:,.0f}".format(top["reply_rate"]) if top else "-", errors_text(top) if top else "-"]
        if closed:
            cells.append(str(closed.get(s["server"], "-")))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for s in sweeps:
        lines += sweep_table_markdown(s["server"], s)
    return lines


def markdown(tables, args, sweeps=()):
    lines = ["Measured by `{}` on {}.".format(" ".join(["python3", "client.py"] + sys.argv[1:]), machine()), ""]
    for table in tables:
        w = table["workload"]
        columns = (HELD_COLUMNS if w["hold"] else ARTICLE_COLUMNS) + COMMON_COLUMNS
        lines += ["### {}: {}{}".format(table["scenario"], describe(w),
                                         ", servers run --work {}".format(table["server_work"])
                                         if table["server_work"] else ""), ""]
        if w["hold"]:
            lines += ["All connections opened ({} connects in flight) and held, then the messages; msgs/s and MB/s "
                      "are over the echo phase. Bounds: a connect {:g} s, an echo {:g} s, the whole run {:g} s."
                      .format(w["connecting"], w["connect_timeout"], w["timeout"], w["budget"]), ""]
        lines += ["| rank | server | " + " | ".join(title for title, _, _ in columns) + " | accepts per worker |",
                  "|---:|---|" + "---:|" * len(columns) + "---|"]
        for r in table["rows"]:
            spread = "/".join(map(str, r.get("accept_spread") or [])) or ""
            if r["failed"]:
                lines.append("| - | {} | failed: {} |{} {} |".format(r["server"], r["failed"],
                                                                    " |" * (len(columns) - 1), spread))
                continue
            cells = [fmt(r[key], spec) for _, key, spec in columns]
            cells[-1] += " (client-bound)" if r["client_bound"] else ""
            lines.append("| {} | {} | {} | {} |".format(r["rank"], r["server"], " | ".join(cells), spread))
        lines.append("")
    lines += sweeps_markdown(sweeps, tables)
    return "\n".join(lines)


def machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return "{}, {} cores, Python {}, {}".format(cpu, os.cpu_count(), platform.python_version(), platform.system())


def svg(tables):
    """Horizontal bars of msgs/s per server, one group per scenario: stdlib only."""
    bar, gap, width = 16, 4, 460
    left = 20 + 7 * max([len(r["server"]) for t in tables for r in t["rows"]] + [20])  # room for the names
    rows = [(t["scenario"], r) for t in tables for r in t["rows"]]
    height = 40 + len(tables) * 30 + len(rows) * (bar + gap)
    peak = max([r.get("msgs_per_s") or 0 for _, r in rows] + [1])
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" '
           'font-size="12">'.format(left + width + 120, height),
           '<text x="10" y="20" font-size="14" font-weight="bold">messages/s per server '
           '(median of the measured runs; longer is faster)</text>']
    y = 40
    for table in tables:
        out.append('<text x="10" y="{}" font-weight="bold">{}</text>'.format(y + 14, table["scenario"]))
        y += 22
        for r in table["rows"]:
            value = r.get("msgs_per_s") or 0
            out.append('<text x="{}" y="{}" text-anchor="end">{}</text>'.format(left - 6, y + 12, r["server"]))
            if r["failed"]:
                out.append('<text x="{}" y="{}" fill="#a00">failed</text>'.format(left, y + 12))
            else:
                length = max(1, round(width * value / peak))
                out.append('<rect x="{}" y="{}" width="{}" height="{}" fill="#3b7dd8"/>'.format(
                    left, y, length, bar))
                out.append('<text x="{}" y="{}">{:,.0f}</text>'.format(left + length + 4, y + 12, value))
            y += bar + gap
        y += 8
    out.append("</svg>")
    return "\n".join(out) + "\n"


# Distinct on a white page, in an order where neighbours differ most.
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#7f7f7f", "#bcbd22", "#1a1a80", "#b8860b", "#7a0019", "#000000", "#00a087", "#e7298a")
P50_MOST = 6  # more servers than this, and the dashed p50 lines would hide the p99 ones
LEFT, PLOT_W, PLOT_H, PANEL_GAP, TOP = 70, 470, 180, 78, 56
LEGEND_X = LEFT + PLOT_W + 30


def nice_step(span, count):
    """A step of 1, 2, 2.5 or 5 x 10^k giving about count ticks over span."""
    raw = span / count
    magnitude = 10 ** math.floor(math.log10(raw))
    return next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw * 0.999)


def nice_ceiling(value):
    """The first tick at or above value: where a linear axis from 0 ends."""
    step = nice_step(value, 5)
    return math.ceil(value / step - 1e-9) * step


def linear_ticks(low, high, count=6):
    step = nice_step(high - low, count)
    first = math.ceil(low / step - 1e-9) * step
    return [round(first + n * step, 10) for n in range(int((high - first) / step + 1e-9) + 1)]


def tick_text(value):
    return "{:,.0f}".format(value) if value == int(value) else "{:,g}".format(value)


def second_round(i):
    """Past the last colour, the lines are dashed: no two servers look alike."""
    return ' stroke-dasharray="6,3"' if i >= len(COLOURS) else ""


def sweep_svg(sweeps):
    """Three graphs stacked against the offered rate: reply rate, response time (p99,
    and p50 dashed when few servers), errors. One line per server, one legend."""
    points = [step for sweep in sweeps for step in sweep["steps"]]
    offered = [step["offered_rate"] for step in points] or [0, 1]
    x_low, x_high = min(offered), max(offered)
    if x_low == x_high:  # one step: give it some room
        x_low, x_high = x_low * 0.9, x_high * 1.1 + 1
    with_p50 = sum(1 for sweep in sweeps if sweep["steps"]) <= P50_MOST

    def x(rate):
        return LEFT + PLOT_W * (rate - x_low) / (x_high - x_low)

    # Reply rate: from 0, up to the higher of what was offered and what came back.
    reply_top = nice_ceiling(max([step["reply_rate"] for step in points] + [x_high]))
    # Response time: log scale, whole decades, since milliseconds under the knee and
    # seconds past it must both be read on one axis.
    times = [step[key] for step in points for key in ("p50_ms", "p99_ms") if step[key]]
    low_decade = math.floor(math.log10(max(min(times), 0.01))) if times else -1
    high_decade = max(low_decade + 2, math.ceil(math.log10(max(times))) if times else 2)
    error_top = min(100.0, nice_ceiling(max([error_share(step) for step in points] + [1.0])))
    panels = [
        ("Reply rate (connections/s completed; dotted: replies = offered)", "linear", 0, reply_top,
         lambda s: s["reply_rate"]),
        ("Response time, ms from the scheduled start (log scale): p99 solid"
         + (", p50 dashed" if with_p50 else ""), "log", low_decade, high_decade, lambda s: s["p99_ms"]),
        ("Errors (% of the connections attempted)", "linear", 0, error_top, error_share),
    ]
    height = TOP + 3 * (PLOT_H + PANEL_GAP)
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}" '
           'font-family="sans-serif" font-size="12">'.format(LEGEND_X + 360, height, LEGEND_X + 360, height),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="{}" y="24" font-size="15" font-weight="bold">Open loop: each server against the offered '
           'connection rate</text>'.format(LEFT)]
    for n, (title, scale, low, high, value) in enumerate(panels):
        top = TOP + n * (PLOT_H + PANEL_GAP)
        bottom = top + PLOT_H

        def y(v, scale=scale, low=low, high=high, top=top):
            if scale == "log":
                v = (math.log10(max(v, 10.0 ** low)) - low)
                return top + PLOT_H * (1 - v / (high - low))
            return top + PLOT_H * (1 - (v - low) / (high - low))

        out.append('<text x="{}" y="{}" font-weight="bold">{}</text>'.format(LEFT, top - 10, html.escape(title)))
        # Horizontal grid lines with their labels, then the x ticks, then the frame.
        if scale == "log":
            y_ticks = [(10.0 ** d, tick_text(10.0 ** d) if d >= 0 else "{:g}".format(10.0 ** d))
                       for d in range(low, high + 1)]
        else:
            y_ticks = [(t, tick_text(t)) for t in linear_ticks(low, high, 5)]
        for value_at, label in y_ticks:
            out.append('<line x1="{0}" x2="{1}" y1="{2:.1f}" y2="{2:.1f}" stroke="#e4e4e4"/>'.format(
                LEFT, LEFT + PLOT_W, y(value_at)))
            out.append('<text x="{}" y="{:.1f}" text-anchor="end" fill="#444">{}</text>'.format(
                LEFT - 6, y(value_at) + 4, label))
        for tick in linear_ticks(x_low, x_high, 8):
            out.append('<line x1="{0:.1f}" x2="{0:.1f}" y1="{1}" y2="{2}" stroke="#444"/>'.format(
                x(tick), bottom, bottom + 4))
            out.append('<text x="{:.1f}" y="{}" text-anchor="middle" fill="#444">{}</text>'.format(
                x(tick), bottom + 17, tick_text(tick)))
        out.append('<text x="{}" y="{}" text-anchor="middle" fill="#444">offered rate (connections/s)</text>'.format(
            LEFT + PLOT_W / 2, bottom + 33))
        out.append('<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#444"/>'.format(
            LEFT, top, PLOT_W, PLOT_H))
        if n == 0:  # where a server that keeps up lies: replies = offered
            out.append('<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="#999" '
                       'stroke-dasharray="2,3"/>'.format(x(x_low), y(x_low), x(x_high), y(x_high)))
        if n == 2 and not any(step["errors"] for step in points):
            out.append('<text x="{}" y="{}" text-anchor="middle" fill="#444">no errors at any step</text>'.format(
                LEFT + PLOT_W / 2, top + PLOT_H / 2))
        lines = [(value, "")]
        if n == 1 and with_p50:
            lines.append((lambda s: s["p50_ms"], ' stroke-dasharray="5,4" stroke-opacity="0.7"'))
        for i, sweep in enumerate(sweeps):
            colour, dashes = COLOURS[i % len(COLOURS)], second_round(i)
            for figure, style in lines:
                style = style or dashes
                # A step without a figure (no reply at all) breaks the line rather than dropping to 0.
                runs, run = [], []
                for step in sweep["steps"]:
                    v = figure(step)
                    if v is None or (scale == "log" and v <= 0):
                        runs, run = runs + [run], []
                    else:
                        run.append((x(step["offered_rate"]), y(v)))
                for run in runs + [run]:
                    if not run:
                        continue
                    out.append('<polyline fill="none" stroke="{}" stroke-width="1.8"{} points="{}"/>'.format(
                        colour, style, " ".join("{:.1f},{:.1f}".format(*p) for p in run)))
                    if figure is value:
                        out += ['<circle cx="{:.1f}" cy="{:.1f}" r="2.2" fill="{}"/>'.format(px, py, colour)
                                for px, py in run]
            knee_step = [s for s in sweep["steps"] if s["offered_rate"] == sweep["knee"]]
            if n == 0 and knee_step:  # the knee, ringed on the reply-rate graph
                out.append('<circle cx="{:.1f}" cy="{:.1f}" r="6" fill="none" stroke="{}" stroke-width="2"/>'.format(
                    x(sweep["knee"]), y(knee_step[0]["reply_rate"]), colour))
    # The legend: a line sample, the server, its knee.
    out.append('<text x="{}" y="{}" font-weight="bold">servers (ringed: the knee)</text>'.format(LEGEND_X, TOP - 10))
    for i, sweep in enumerate(sweeps):
        colour, row = COLOURS[i % len(COLOURS)], TOP + 8 + 18 * i
        note = ("failed" if sweep["failed"] and not sweep["steps"] else
                "knee {}/s{}".format(rate_text(sweep["knee"]), " or more" if sweep.get("knee_at_top") else "")
                if sweep["knee"] is not None else "no knee")
        if sweep["steps"]:  # no sample for a server that drew no line
            out.append('<line x1="{0}" x2="{1}" y1="{2}" y2="{2}" stroke="{3}" stroke-width="3"{4}/>'.format(
                LEGEND_X, LEGEND_X + 22, row - 4, colour, second_round(i)))
        out.append('<text x="{}" y="{}">{} <tspan fill="#555">{}</tspan></text>'.format(
            LEGEND_X + 28, row, html.escape(sweep["server"]), note))
    out.append("</svg>")
    return "\n".join(out) + "\n"



def chart(tables, sweeps):
    """The --svg file: the bars of the closed-loop tables, the three graphs of the
    sweeps, or both one above the other (nested <svg> elements)."""
    drawn = ([svg(tables)] if tables else []) + ([sweep_svg(sweeps)] if sweeps else [])
    if len(drawn) == 1:
        return drawn[0]
    sizes = [[int(re.search(r'{}="(\d+)"'.format(key), part).group(1)) for key in ("width", "height")]
             for part in drawn]
    return ('<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}">\n'.format(
        max(w for w, _ in sizes), sum(h for _, h in sizes)) + drawn[0]
        + drawn[1].replace("<svg ", '<svg y="{}" '.format(sizes[0][1]), 1) + "</svg>\n")


# ---------------------------------------------------------------- command line

def number(low, high, kind=int):
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError("expected a number from {} to {}, got {!r}".format(low, high, text))
        return value
    return parse


def names(text):
    return [part.strip() for part in text.split(",") if part.strip()]


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1", help="the server's address, IPv4 or IPv6 (::1)")
    parser.add_argument("--port", type=number(1, 65535), default=7777, help="the server's port")
    parser.add_argument("--clients", type=number(1, 100000), default=50,
                        help="concurrent clients (the article's WORKER_COUNT)")
    parser.add_argument("--connects", type=number(1, 100000), default=5,
                        help="connections each client opens, one after another (ACTION_COUNT)")
    parser.add_argument("--messages", type=number(1, 1000000), default=argparse.SUPPRESS,
                        help="ping-pong messages per connection (SEND_RECV_COUNT) (default: 50; 1 with --rate)")
    parser.add_argument("--size", type=number(1, 16 << 20), default=32, help="bytes per message")
    parser.add_argument("--timeout", type=number(0.01, 3600, float), default=10.0,
                        help="seconds any one wait may take before that connection counts as failed")
    parser.add_argument("--procs", type=number(1, 1024), default=os.cpu_count() or 1,
                        help="client worker processes")
    parser.add_argument("--connect-concurrency", type=number(1, 100000), default=CONNECTING, metavar="K",
                        help="connects in flight at once, over all worker processes: a burst of connects "
                             "overflows the server's listen queue and waits on SYN retries")
    parser.add_argument("--hold", action="store_true",
                        help="open every connection first and hold them all, then send (as the c* presets do); "
                             "reports the connect and echo phases apart")
    group = parser.add_argument_group("open loop (--rate): connections started on a clock")
    group.add_argument("--rate", type=parse_rate, metavar="R|A:B:STEP",
                       help="start R new connections a second, whether or not earlier ones have finished, each doing "
                            "--messages exchanges; A:B:STEP sweeps A, A+STEP, ... B and names the knee. "
                            "Response times count from each connection's scheduled start")
    group.add_argument("--duration", type=number(0.1, 3600, float), default=5.0,
                       help="seconds of arrivals at each rate")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    group = parser.add_argument_group("measuring every server (--all)")
    group.add_argument("--all", action="store_true", help="start every echo_*.py beside client.py and rank them")
    group.add_argument("--servers", type=names, help="only these, e.g. epoll,select (with --all)")
    group.add_argument("--scenario", type=names, help="presets, comma-separated: " + ", ".join(PRESETS) + "; and "
                       + ", ".join(SWEEPS) + " (open loop: {}/s, {:g} s each)".format(*SWEEPS["pingpong-sweep"][:2]))
    group.add_argument("--scale", type=number(0.001, 1, float), default=0.05,
                       help="fraction of the article's 100 connections per client that the article-* presets run")
    group.add_argument("--repeat", type=number(1, 100), default=3, help="measured runs per server; the median is shown")
    group.add_argument("--budget", type=number(1, 3600, float), default=30.0,
                       help="seconds one run may take before the server is shown as failed")
    group.add_argument("--work", type=number(0, 10**9), default=0, help="start the servers with --work N")
    group.add_argument("--markdown", metavar="FILE", help="also write the tables as Markdown")
    group.add_argument("--svg", metavar="FILE", help="also draw messages/s per server as an SVG chart")
    # A bad argument is one line on stderr, not argparse's usage block.
    parser.error = lambda message: parser.exit(2, "client.py: error: {}\n".format(message))
    args = parser.parse_args(argv)
    args.messages = getattr(args, "messages", None)
    for name in args.scenario or []:
        if name not in PRESETS and name not in SWEEPS:
            parser.error("unknown scenario {!r}; choose from {}".format(name, ", ".join([*PRESETS, *SWEEPS])))
    if args.hold and args.connects != 1:
        parser.error("--hold holds one connection per client: use it with --connects 1")
    if args.rate is not None and args.hold:
        parser.error("--rate starts connections on a clock; --hold is for the closed loop")
    lowest = min(args.rate) if isinstance(args.rate, list) else args.rate
    if lowest is not None and round(lowest * args.duration) < 1:
        parser.error("argument --rate: {:g} a second for --duration {:g} s schedules no connection".format(
            lowest, args.duration))
    if args.rate is not None and args.scenario:
        parser.error("--rate and --scenario: choose one (the sweep preset is --scenario pingpong-sweep)")
    if len([name for name in args.scenario or [] if name in SWEEPS]) > 1:
        parser.error("one open-loop sweep at a time")
    if not args.all and (args.servers or args.scenario or args.markdown or args.svg):
        parser.error("--servers, --scenario, --markdown and --svg go with --all")
    return args


def open_loop(args):
    """--rate against one server: one rate, or a sweep (a list of rates)."""
    w = open_workload(args)
    if isinstance(args.rate, list):
        name = "{}:{}".format(args.host, args.port)
        result = sweep(args.host, args.port, args.rate, w, args.procs, name)
        if args.json:
            print(json.dumps(result))
        else:
            print("\n".join(sweep_table_markdown(name, result) + [knee_rule_text().capitalize() + "."]))
        return 0 if not result["failed"] else 1
    result = measure(args.host, args.port, dict(w, rate=args.rate), args.procs)
    if args.json:
        print(json.dumps(result))
    else:
        report_open(result, w, max(1, min(args.procs, result["scheduled"])))
    lost = result["scheduled"] - result["connections"] - result["client_ports_exhausted"] \
        - result["client_descriptors_exhausted"]
    return 0 if not result["errors"] and not lost else 1


def main(argv=None):
    args = parse_args(argv)
    try:
        if args.all:
            entries = server_entries(args)
            tables = run_all(args, entries) if scenarios_from(args) else []
            sweeps = sweep_all(args, entries) if sweeps_from(args) else []
            if args.json:
                print(json.dumps({"machine": machine(), "tables": tables, "sweeps": sweeps}, indent=1))
            else:
                print(markdown(tables, args, sweeps))
            if args.markdown:
                Path(args.markdown).write_text(markdown(tables, args, sweeps) + "\n")
            if args.svg:
                Path(args.svg).write_text(chart(tables, sweeps))
            return 0
        try:  # nothing listening is one clear line, not a page of errors
            socket.create_connection((args.host, args.port), timeout=args.timeout).close()
        except OSError as e:
            raise SystemExit("client.py: cannot connect to {}:{}: {}".format(args.host, args.port, e.strerror or e))
        if args.rate is not None:
            return open_loop(args)
        w = workload(args, budget=None)
        result = measure(args.host, args.port, w, args.procs)
        if args.json:
            print(json.dumps(result))
        else:
            report(result, w, max(1, min(args.procs, args.clients)))
        return 0 if not result["errors"] and result["messages"] == result["expected"] else 1
    except KeyboardInterrupt:
        print("client.py: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
