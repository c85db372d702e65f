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
"""
import argparse
import array
import collections
import errno
import importlib.util
import json
import math
import multiprocessing
import os
import platform
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
    "bulk": (20, 5, 50, [1024, 4096, 65536], 0, "messages of 1, 4 and 64 KB: messages/s and MB/s"),
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


# ---------------------------------------------------------------- one worker process

class Client:
    """One of the article's workers: `connects` connections one after another."""
    __slots__ = ("cid", "sock", "fd", "connecting", "closing", "done_connects", "seq", "expected", "received",
                 "unsent", "started", "echo_started", "sent_at", "deadline")

    def __init__(self, cid):
        self.cid, self.sock, self.done_connects = cid, None, 0


def run_worker(address, cids, w, go, barrier, results):
    """Runs in a worker process: play the clients `cids`, send back one stats dict.
    address is (family, sockaddr). With w["hold"], every connection is opened and
    held first; all workers meet at barrier; then the first messages go out."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    # epoll where there is one (poll elsewhere), used directly: this loop is the
    # client's whole cost per message, and it must stay below the server's.
    if hasattr(select, "epoll"):
        poller, scale, READ, WRITE = select.epoll(), 1, select.EPOLLIN, select.EPOLLOUT
    else:
        poller, scale, READ, WRITE = select.poll(), 1000, select.POLLIN, select.POLLOUT
    family, sockaddr = address
    by_fd = {}
    fill = bytes(range(256)) * (w["size"] // 256 + 1)
    stats = {"messages": 0, "connections": 0, "connect_sum": 0.0, "echo_sum": 0.0, "max_open": 0,
             "errors": dict.fromkeys(ERROR_KINDS, 0)}
    latencies = array.array("d")
    clients = [Client(cid) for cid in cids]
    active = set(clients)
    size, messages, timeout, connects = w["size"], w["messages"], w["timeout"], w["connects"]
    hold, connect_timeout, slots = w["hold"], w["connect_timeout"], w["connecting"]
    clock = time.perf_counter
    deadline = None  # set at the start when --all gives each run a time budget
    queued = collections.deque()  # clients waiting for one of the `slots` connects in flight
    held = []  # with hold: connected clients waiting for the first message
    counts = {"connecting": 0, "open": 0}

    def message(c):
        # Distinct per message: the sequence number's hex digits, lowest first, so
        # even a 1-byte message differs from the one before it.
        return ((b"%x" % c.seq)[::-1] + b":%x:%x:" % (c.done_connects, c.cid) + fill)[:size]

    def send(c):
        try:
            sent = c.sock.send(c.unsent)
        except BlockingIOError:
            sent = 0
        c.unsent = c.unsent[sent:]
        if c.unsent:  # the kernel took part of it: finish when the socket is writable
            poller.modify(c.fd, READ | WRITE)

    def next_message(c, now):
        c.expected = c.unsent = message(c)
        c.received = b""
        c.sent_at = now
        c.deadline = now + timeout
        send(c)

    def open_connection(c):
        """Start c's next connection, or queue it while `slots` connects are in flight
        (a burst of connects overflows the server's listen queue: SYNs are dropped and
        retried after 1, 3, 7 s); a connect that fails at once counts and moves on."""
        while True:
            if c.done_connects == connects or (deadline and clock() > deadline):
                stats["errors"]["deadline"] += connects - c.done_connects
                active.discard(c)
                return
            if counts["connecting"] >= slots:
                queued.append(c)
                return
            c.sock = socket.socket(family, socket.SOCK_STREAM)
            c.sock.setblocking(False)
            c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            c.fd = c.sock.fileno()
            c.connecting, c.closing, c.seq = True, False, 0
            c.started = clock()
            c.deadline = c.started + connect_timeout
            err = c.sock.connect_ex(sockaddr)
            if err in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
                by_fd[c.fd] = c
                poller.register(c.fd, WRITE)
                counts["connecting"] += 1
                return
            count(err)
            c.sock.close()
            c.done_connects += 1

    def connect_done(c):
        """c's connect finished, either way: its slot goes to the next client queued."""
        counts["connecting"] -= 1
        while queued and counts["connecting"] < slots:
            open_connection(queued.popleft())

    def count(why):
        if isinstance(why, int):
            why = OSError(why, os.strerror(why))
        kind = ("refused" if isinstance(why, ConnectionRefusedError) else
                "reset" if isinstance(why, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)) else
                why if isinstance(why, str) else "other")
        stats["errors"][kind] += 1

    def fail(c, why):
        count(why)
        end_connection(c)

    def end_connection(c):
        poller.unregister(c.fd)
        del by_fd[c.fd]
        c.sock.close()
        c.done_connects += 1
        if c.connecting:
            connect_done(c)
        else:
            counts["open"] -= 1
        open_connection(c)

    def on_event(c, mask, now):
        sock = c.sock
        if c.connecting:
            err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                return fail(c, err)
            c.connecting = False
            counts["open"] += 1
            stats["max_open"] = max(stats["max_open"], counts["open"])
            stats["connect_sum"] += now - c.started
            connect_done(c)
            poller.modify(c.fd, READ)  # held or not, a server that closes or resets it is seen
            if hold and "echo_start" not in stats:
                c.deadline = float("inf")  # waits for the other connections, not for the server
                return held.append(c)
            c.echo_started = now
            return next_message(c, now)
        c.deadline = now + timeout
        if mask & WRITE:
            send(c)
            if not c.unsent:
                poller.modify(c.fd, READ)
            if not mask & ~WRITE:
                return
        data = sock.recv(65536)
        if c.closing:
            if data:
                return fail(c, "extra bytes")
            stats["echo_sum"] += now - c.echo_started
            stats["connections"] += 1
            return end_connection(c)
        if not data:
            return fail(c, "closed early")
        received = c.received + data if c.received else data
        if len(received) < size:
            if c.expected[:len(received)] != received:
                return fail(c, "mismatch")
            c.received = received
            return
        if received != c.expected:
            return fail(c, "mismatch" if len(received) == size else "extra bytes")
        latencies.append(now - c.sent_at)
        stats["messages"] += 1
        c.seq += 1
        if c.seq < messages:
            return next_message(c, now)
        # All echoed: half-close, and the server must answer with EOF and nothing more.
        c.closing = True
        sock.shutdown(socket.SHUT_WR)

    def release_held():
        """Every connection is open (or failed): meet the other workers, then send."""
        stats["held_at"] = clock()
        try:
            barrier.wait(connect_timeout)
        except threading.BrokenBarrierError:
            pass  # another worker is late or gone: go on, its errors are its own
        now = stats["echo_start"] = clock()
        for c in held:
            if by_fd.get(c.fd) is c:  # still open: a descriptor of one that failed may be another's now
                c.echo_started = now
                next_message(c, now)

    results.send("ready")
    go.wait()
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    stats["start"] = clock()
    deadline = stats["start"] + w["budget"] if w["budget"] else None
    for c in clients:
        open_connection(c)
    next_check = clock() + 0.25
    while active:
        if hold and "echo_start" not in stats and not counts["connecting"] and not queued:
            release_held()
        events = poller.poll(0.25 * scale)
        now = clock()  # one timestamp per wake-up: every event in it had arrived by now
        for fd, mask in events:
            c = by_fd.get(fd)
            if c is None:
                continue
            try:
                on_event(c, mask, now)
            except OSError as e:
                fail(c, e)
        if now >= next_check:  # every wait is bounded: a silent connection fails after its bound
            next_check = now + 0.25
            late = deadline and now > deadline + timeout
            for c in [c for c in by_fd.values() if late or now > c.deadline]:
                fail(c, "deadline" if late else "connect timeout" if c.connecting else "timeout")
    if hold and "echo_start" not in stats:
        release_held()  # every connection failed: still meet the others at the barrier
    stats["end"] = clock()
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    stats["cpu"] = cpu1.ru_utime - cpu0.ru_utime + cpu1.ru_stime - cpu0.ru_stime
    stats["latencies"] = latencies.tobytes()
    results.send(stats)


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
        cids = list(range(i, w["clients"], procs))
        worker = context.Process(target=run_worker, args=((family, sockaddr), cids, per_worker, go, barrier, there),
                                 daemon=True)
        worker.start()
        there.close()
        workers.append(worker)
        pipes.append(here)
    try:
        for pipe in pipes:
            if not pipe.poll(60) or pipe.recv() != "ready":
                raise SystemExit("client.py: a worker process did not start")
        go.set()
        bound = 2 * w["connect_timeout"] + w["connects"] * (w["messages"] + 3) * w["timeout"] + 60
        parts = []
        for pipe in pipes:
            if not pipe.poll(bound):
                raise SystemExit("client.py: a worker process did not finish")
            parts.append(pipe.recv())
    finally:
        for worker in workers:
            worker.join(5)
            if worker.is_alive():
                worker.kill()
    return combine(parts, w)


def combine(parts, w):
    latencies = array.array("d")
    for part in parts:
        latencies.frombytes(part["latencies"])
    errors = {kind: sum(p["errors"][kind] for p in parts) for kind in ERROR_KINDS}
    messages = sum(p["messages"] for p in parts)
    connections = sum(p["connections"] for p in parts)
    attempted = w["clients"] * w["connects"]
    wall = max(p["end"] for p in parts) - min(p["start"] for p in parts)
    ordered = sorted(latencies)
    # With hold, the two phases of the tiny-asyncio tables: every connection open, then every echo.
    phases = {"connect_phase_s": None, "echo_phase_s": None}
    if w["hold"]:
        phases = {"connect_phase_s": max(p["held_at"] for p in parts) - min(p["start"] for p in parts),
                  "echo_phase_s": max(p["end"] for p in parts) - min(p["echo_start"] for p in parts)}
    rated = phases["echo_phase_s"] or wall  # held connections: rates over the echo phase
    # The article's three figures: averages per connection.
    connect_s = sum(p["connect_sum"] for p in parts) / max(1, attempted)
    echo_s = sum(p["echo_sum"] for p in parts) / max(1, connections)

    def pct(q):
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else None

    return {
        "messages": messages, "expected": attempted * w["messages"], "connections": connections,
        "errors": sum(errors.values()), "error_kinds": {k: v for k, v in errors.items() if v},
        "connect_s": connect_s, "echo_s": echo_s, "total_s": connect_s + echo_s,
        "wall_s": wall, **phases,
        "max_open": sum(p["max_open"] for p in parts),  # exact with hold: all are open at the barrier
        "msgs_per_s": messages / rated if rated else 0.0,
        "mb_per_s": messages * w["size"] / rated / 1e6 if rated else 0.0,
        "conns_per_s": connections / wall if wall else 0.0,
        "p50_ms": pct(0.50), "p90_ms": pct(0.90), "p99_ms": pct(0.99),
        "max_ms": ordered[-1] * 1000 if ordered else None,
        "client_cpu_s": sum(p["cpu"] for p in parts),
    }


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
    w = {"clients": args.clients, "connects": args.connects, "messages": args.messages, "size": args.size,
         "timeout": args.timeout, "connect_timeout": args.timeout, "budget": args.budget, "hold": args.hold,
         "connecting": args.connect_concurrency}
    w.update(changes)
    return w


def scenarios_from(args):
    """[(name, workload dict, server --work)] for the scenarios asked for."""
    if not args.scenario:
        return [("custom", workload(args), args.work)]
    chosen = []
    for name in args.scenario:
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
    on_uvloop = [script for script in scripts if '"--uvloop"' in script.read_text()]
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


def run_all(args):
    entries = server_entries(args)
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


def markdown(tables, args):
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
    bar, gap, left, width = 16, 4, 190, 460
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
    parser.add_argument("--messages", type=number(1, 1000000), default=50,
                        help="ping-pong messages per connection (SEND_RECV_COUNT)")
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
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    group = parser.add_argument_group("measuring every server (--all)")
    group.add_argument("--all", action="store_true", help="start every echo_*.py beside client.py and rank them")
    group.add_argument("--servers", type=names, help="only these, e.g. epoll,select (with --all)")
    group.add_argument("--scenario", type=names, help="presets, comma-separated: " + ", ".join(PRESETS))
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
    for name in args.scenario or []:
        if name not in PRESETS:
            parser.error("unknown scenario {!r}; choose from {}".format(name, ", ".join(PRESETS)))
    if args.hold and args.connects != 1:
        parser.error("--hold holds one connection per client: use it with --connects 1")
    if not args.all and (args.servers or args.scenario or args.markdown or args.svg):
        parser.error("--servers, --scenario, --markdown and --svg go with --all")
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        if args.all:
            tables = run_all(args)
            if args.json:
                print(json.dumps({"machine": machine(), "tables": tables}, indent=1))
            else:
                print(markdown(tables, args))
            if args.markdown:
                Path(args.markdown).write_text(markdown(tables, args) + "\n")
            if args.svg:
                Path(args.svg).write_text(svg(tables))
            return 0
        w = workload(args, budget=None)
        try:  # nothing listening is one clear line, not a page of errors
            socket.create_connection((args.host, args.port), timeout=args.timeout).close()
        except OSError as e:
            raise SystemExit("client.py: cannot connect to {}:{}: {}".format(args.host, args.port, e.strerror or e))
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
