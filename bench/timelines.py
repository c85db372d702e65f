# SPDX-License-Identifier: 0BSD
"""Who is served when: every server under one small load, traced by client.py --trace and drawn as
timelines.svg; then one client that stops reading, beside the others, drawn as stall.svg.

    python3 bench/timelines.py --out DIR [--part timelines,stall] [--work N] [SERVER ...]
    python3 bench/timelines.py --keep [--no-draw]      (the kept traces and the committed pictures)
    python3 bench/timelines.py --calibrate

Your own: `--out DIR` traces the servers named (every one of the part by default) on this machine and draws
them as DIR/timelines.svg and DIR/stall.svg from the traces it keeps beside them (DIR/timelines/, DIR/stall/),
with a caption that speaks only of the servers drawn; the committed pictures and bench/results/ are left as they
are. `--keep` replaces those (bench/regenerate.py's timelines part runs it with --no-draw).

timelines: each server (the article's nine first, then the rest) is started with -q --work N and traced
under one load: 12 clients arriving together, each with one connection of 20 messages of 32 B (one
connection per client keeps the arrivals together: a closed-loop client starts its next connection only
after the last one ends). Two servers get a flag of their own:
- echo_simple.py --backlog 16: its default backlog of 5 lets Linux queue 6 connections; the SYNs of
  the clients beyond them are dropped and retried a second later, which would stretch every panel by a
  second (client.py --json counts such connects in syn_retries: try it without the flag).
- echo_prefork.py and echo_prethread.py --workers 4: 4 connections served at a time, the others waiting their
  turn, so that whether they go in waves shows.
If a shape does not show, change the load here, not the drawing, and say why beside it. What was tried:
prefork's and prethread's first 4 connections start together, and the next ones start as each of them ends,
at different times (4 workers on 2 cores beside the client); the later waves stood apart (each wave's 4
first echoes within half the time between two waves' starts) in 3 runs of 6 for prefork and 2 of 6 for
prethread with 20 messages a connection, and the same with 40, so the shorter load stays, and the caption
says which the kept run shows (draw.waves_text(), from the traces). echo_thread.py's rows start apart, not
together (with the GIL on, its accepting thread waits its turn behind the busy ones): the pattern's, not the load's.
client.py runs the 12 clients in its worker processes (--procs, one per core by default: 2 here), each of
which connects its own 6 together; where a server takes one process's connections a round before the
other's, its rows start in two groups of 6, which the caption says (draw.groups_text()).

stall: on echo_select.py, echo_epoll.py, echo_select_pool.py, echo_selectors.py,
echo_asyncio_protocol.py and echo_thread.py, 5 clients exchange (client.py --trace, one connection of
STALL_MESSAGES messages each) while a sixth connection, driven from here with a socket of its own,
sends STALL_BYTES (more than the buffers hold: its send() had taken 6-9 MiB when such a sender blocked,
which is the kernel's buffers, its socket's and the server's, and what the server held itself, up to 1 MiB in
echo_selectors.py) and reads none of its echo until STALL_S seconds after its sender blocked, then
reads it all. client.py has no such mode, and gets none: the stalled client is a few lines here, on
client.py's clock (its trace's t0 is time.perf_counter(), CLOCK_MONOTONIC on Linux, one clock for every
process), written as one more connection line of the trace, with "who": "stalled" and "stall": [from, to]
(when it read nothing). That keeps client.py a measuring tool of bounded size (issue 41) and the
experiment in one file.

--work N: the servers' CPU a message. By default it is calibrated first (calibrate()): sum(range(N))
timed in this Python gives a first N for 1 ms; then echo_select.py (one thread: its CPU is the
messages') is measured by client.py at --work 0 and at that N (its server CPU, 1 connection of
CALIBRATION_MESSAGES messages, the median of 3 runs), and N is scaled once so that a message costs the
server about 1 ms in all; the figures are kept in the meta.json beside the traces. --calibrate only
calibrates and prints them.

The traces are kept in DIR/timelines/ and DIR/stall/ with --out, in bench/results/timelines/ and stall/ with
--keep (a JSON-lines file per server, and meta.json: the machine, the Python, the commit and the files that
differed from it, the load, --work and its calibration); timelines.svg and stall.svg are drawn from them by
draw_pictures() (bench/draw.py's kept_timelines()), once the parts asked for are measured: into DIR, or with
--keep at the repository's root. bench/regenerate.py runs this with --keep --no-draw as its timelines part and
draws them in its render() with the same draw_pictures(), so that they are drawn in one place. Run it alone on
the machine (under a minute on 2 cores for every server): another load would share the cores.
"""
import argparse
import json
import os
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import draw
from common import (CERT, ROOT, SERVERS, TIMEOUT, TLS_SERVERS, Server, provenance, run_client, wait_for_workers,
                    wait_until)

RESULTS = ROOT / "bench" / "results"
TARGET_MS = 1.0  # the server's CPU a message that --work is calibrated to
CALIBRATION_MESSAGES = 400
# The article's nine first, in its order; then the rest of the pack's, by name.
ARTICLE = ["echo_simple.py", "echo_select.py", "echo_epoll.py", "echo_fork.py", "echo_thread.py", "echo_prefork.py",
           "echo_prethread.py", "echo_select_pool.py", "echo_asyncio.py"]
ORDER = ARTICLE + sorted(s for s in SERVERS if s not in ARTICLE)
FLAGS = {"echo_simple.py": ["--backlog", "16"], "echo_prefork.py": ["--workers", "4"],
         "echo_prethread.py": ["--workers", "4"]}
WORKERS = {"echo_prefork.py": 4}  # worker processes to wait for before the load (prethread's are threads)
LOAD = ["--clients", "12", "--connects", "1", "--messages", "20", "--size", "32"]
LOAD_WORDS = "12 clients arriving together, each with one connection of 20 messages of 32 B"

STALL_SERVERS = ["echo_select.py", "echo_epoll.py", "echo_select_pool.py", "echo_selectors.py",
                 "echo_asyncio_protocol.py", "echo_thread.py"]
STALL_MESSAGES = 500  # the others' messages: at about 1 ms each, 5 of them exchange for 2.5 s or more
STALL_LOAD = ["--clients", "5", "--connects", "1", "--messages", str(STALL_MESSAGES), "--size", "32"]
STALL_WORDS = "5 clients, each with one connection of {} messages of 32 B".format(STALL_MESSAGES)
STALL_AFTER = 0.8  # seconds after client.py starts: its clients are exchanging by then (checked in the trace)
STALL_S = 1.0  # seconds the stalled client goes on reading nothing once its sender blocked
# A sender that made no progress this long is blocked: the buffers are full. Shorter pauses come while they
# fill: a blocking send() waits for a third of its buffer to be free, and with --work the server takes a
# while to read that much (a trial with 0.1 s took a pause at 4 MiB for the block).
BLOCKED_S = 0.5
MIB = 1 << 20
PIECE = MIB  # the stalled client sends its bytes in pieces of 1 MiB: a piece is one message of its line
STALL_BYTES = 16 * PIECE  # more than send() takes before such a sender blocks (6-9 MiB: bench/results/stall/)
PICTURES = {"timelines": "timelines.svg", "stall": "stall.svg"}  # each part's picture, at the repository's root


def log(text):
    print(text, file=sys.stderr, flush=True)


# ---- --work: calibrated so that a message costs the server about TARGET_MS

def work_seconds(n, rounds=7):
    """The median time of sum(range(n)) in a fresh interpreter like the servers' (this one)."""
    code = "import time\nfor _ in range({}):\n    t = time.perf_counter(); sum(range({})); " \
           "print(time.perf_counter() - t)".format(rounds, n)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT * 6).stdout
    return statistics.median(float(line) for line in out.split())


def server_ms(work, runs=3):
    """echo_select.py's CPU a message at --work work, in ms, as client.py measures it (its server CPU): the
    median of runs runs (one moves by 5 % on a shared machine)."""
    return statistics.median(one_server_ms(work) for _ in range(runs))


def one_server_ms(work):
    with tempfile.TemporaryDirectory() as folder:
        server = Server("echo_select.py", folder, ["-q", "--work", str(work)])
        try:
            server.wait_for_port()
            figures = run_client(["--port", str(server.port), "--clients", "1", "--connects", "1", "--messages",
                                  str(CALIBRATION_MESSAGES), "--procs", "1"], timeout=TIMEOUT * 6).figures
        finally:
            server.kill()
    if not figures.get("msgs_per_server_cpu_s"):
        sys.exit("timelines.py: cannot calibrate --work: client.py did not measure echo_select.py's CPU: {}".format(
            figures.get("failed") or figures))
    return 1000.0 / figures["msgs_per_server_cpu_s"]


def calibrate():
    """(N, what was measured): the --work that makes a message cost the server about TARGET_MS."""
    unit = work_seconds(200000) / 200000
    first = round(TARGET_MS / 1000 / unit)
    base, at_first = server_ms(0), server_ms(first)
    work = round(first * (TARGET_MS - base) / (at_first - base)) if at_first > base else first
    at_work = server_ms(work)
    how = {"sum_range_ns": round(unit * 1e9, 3), "first_work": first, "base_ms": round(base, 4),
           "first_ms": round(at_first, 4), "work": work, "work_ms": round(at_work, 4),
           "how": "echo_select.py measured by client.py (1 connection of {} messages, its server CPU, the median of 3 "
                  "runs) at --work 0, at the N that sum(range(N)) gave for {:g} ms, and at that N scaled once".format(
                      CALIBRATION_MESSAGES, TARGET_MS)}
    log("--work {:,}: {:.3f} ms a message (--work 0: {:.3f} ms; first guess {:,}: {:.3f} ms)".format(
        work, at_work, base, first, at_first))
    return work, how


# ---- a traced run

def traced(script, work, load, path, meanwhile=None):
    """Start script with -q --work work and its FLAGS, run client.py with load and --trace path against it
    (meanwhile(port) runs while it measures), stop the server: client.py's --json figures."""
    with tempfile.TemporaryDirectory() as folder:
        server = Server(script, folder, ["-q", "--work", str(work), *FLAGS.get(script, [])])
        try:
            server.wait_for_port()
            if script in WORKERS:
                wait_for_workers(server.pid, WORKERS[script])
            tls = ["--tls", "--cafile", str(CERT)] if script in TLS_SERVERS else []
            return run_client(["--port", str(server.port), *load, *tls, "--trace", str(path)], timeout=TIMEOUT * 12,
                              meanwhile=meanwhile and (lambda: meanwhile(server.port))).figures
        finally:
            server.kill()


def meta(work, how, load_words, command):
    return {**provenance(),  # and the files that differed from the commit, as bench/regenerate.py keeps for its parts
            "load": load_words, "client": command, "work": work, "work_ms": how.get("work_ms"), "calibration": how,
            "servers": []}


def timelines(servers, work, how, results=RESULTS):
    """Trace each of servers under LOAD into results/timelines/."""
    folder = results / "timelines"
    folder.mkdir(parents=True, exist_ok=True)
    kept = meta(work, how, LOAD_WORDS, shlex.join(["python3", "client.py", "--port", "PORT", *LOAD, "--trace",
                                                   "FILE"]))
    for script in servers:
        path = folder / (script[:-len(".py")] + ".jsonl")
        figures = traced(script, work, LOAD, path)
        spans = [draw.served(c) for c in draw.read_trace(path)[1]] if path.exists() else []
        kept["servers"].append({"server": script, "flags": FLAGS.get(script, []), "trace": path.name,
                                "messages": figures.get("messages"), "errors": figures.get("errors"),
                                "failed": figures.get("failed"),
                                "last_echo_s": max((s[1] for s in spans if s), default=None)})
        log("{}: {}".format(script, figures.get("failed") or "{} messages, {} errors".format(
            figures.get("messages"), figures.get("errors"))))
    (folder / "meta.json").write_text(json.dumps(kept, indent=1) + "\n")
    print("\n".join(["| server | messages | errors | the last echo, s |", "|---|---:|---:|---:|"] + [
        "| {} | {} | {} | {} |".format(" ".join([k["server"], *k["flags"]]), k["messages"], k["errors"],
                                      k["last_echo_s"]) for k in kept["servers"]]) + "\n", flush=True)
    return folder


# ---- the stall: one client that stops reading, driven from here

class StalledClient:
    """One connection that sends STALL_BYTES in pieces and reads nothing until STALL_S seconds after its
    sender blocked (the buffers full: the server can send it nothing more), then reads its whole echo,
    verified, and half-closes: a slow reader the server must not let stall the others. Counted from the
    block, not from the connect: with --work the server takes a while to fill the buffers (each 64 KiB it
    reads costs it the --work too), and the stall the others may see begins only then. Its times are
    time.perf_counter()'s, client.py's clock."""

    def __init__(self, port):
        self.port = port
        self.payload = bytes(os.urandom(PIECE))  # every piece the same random bytes: an echo is checked cheaply
        self.sent_at, self.echoed_at, self.taken = [], [], []  # per piece; (when, bytes in) after each send()
        self.how, self.stall, self.blocked = "eof", None, None

    def run(self):
        self.start = time.perf_counter()
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=TIMEOUT)
        except OSError as e:
            self.connected = self.end = time.perf_counter()
            self.how = "refused" if isinstance(e, ConnectionRefusedError) else "other"
            return
        self.connected = time.perf_counter()
        with sock:
            sender = threading.Thread(target=self.send, args=(sock,), daemon=True)
            sender.start()
            wait_until(lambda: not sender.is_alive() or self.taken and time.perf_counter() - self.taken[-1][0] >
                       BLOCKED_S, TIMEOUT)
            self.blocked = self.taken[-1] if self.taken and sender.is_alive() else None  # (when, bytes taken)
            # The experiment itself: until STALL_S after the block, still nothing is read.
            time.sleep(max(0.0, (self.blocked[0] if self.blocked else time.perf_counter()) + STALL_S -
                           time.perf_counter()))
            self.stall = (self.connected, time.perf_counter())
            self.receive(sock)
            sender.join(TIMEOUT)
        self.end = time.perf_counter()

    def send(self, sock):
        try:
            total = 0
            for _ in range(STALL_BYTES // PIECE):
                self.sent_at.append(time.perf_counter())
                view = memoryview(self.payload)
                while view:
                    sent = sock.send(view)  # blocks once both sockets' buffers are full: the server reads no more
                    view, total = view[sent:], total + sent
                    self.taken.append((time.perf_counter(), total))
            sock.shutdown(socket.SHUT_WR)
        except OSError as e:
            self.how = "timeout" if isinstance(e, TimeoutError) else "reset"

    def receive(self, sock):
        got, piece = 0, bytearray()
        while True:
            try:
                data = sock.recv(1 << 20)
            except OSError as e:
                self.how = "timeout" if isinstance(e, TimeoutError) else "reset"
                return
            if not data:
                if got < STALL_BYTES:
                    self.how = "closed early"
                return
            piece += data
            got += len(data)
            while len(piece) >= PIECE:
                if piece[:PIECE] != self.payload:
                    self.how = "mismatch"
                    return
                del piece[:PIECE]
                self.echoed_at.append(time.perf_counter())
            if got > STALL_BYTES:
                self.how = "extra bytes"
                return

    def taken_before_blocking(self):
        """The bytes send() had accepted when the sender blocked: the kernel's buffers, this socket's and the
        server's, and what the server held itself (None if it never blocked: all were accepted)."""
        return self.blocked[1] if self.blocked else None

    def trace_line(self, t0):
        """The connection line of the trace format, on client.py's axis (seconds from its t0)."""
        at = lambda value: None if value is None else round(value - t0, 6)
        echoed = self.echoed_at + [None] * (len(self.sent_at) - len(self.echoed_at))
        return {"worker": None, "client": None, "connection": 0, "who": "stalled",
                "connect": [at(self.start), at(self.connected) if self.how != "refused" else None],
                "messages": [[at(s), at(e)] for s, e in zip(self.sent_at, echoed)], "end": at(self.end),
                "how": self.how, "stall": [at(self.stall[0]), at(self.stall[1])] if self.stall else None,
                "sender_blocked": at(self.blocked[0]) if self.blocked else None, "bytes": STALL_BYTES,
                "taken_before_blocking": self.taken_before_blocking()}


def stall(servers, work, how, results=RESULTS):
    """Each server: client.py --trace under STALL_LOAD, and the stalled client beside it, into results/stall/."""
    folder = results / "stall"
    folder.mkdir(parents=True, exist_ok=True)
    kept = meta(work, how, STALL_WORDS, shlex.join(["python3", "client.py", "--port", "PORT", *STALL_LOAD,
                                                    "--trace", "FILE"]))
    kept.update(stall_s=STALL_S, stall_after_s=STALL_AFTER, stalled_bytes=STALL_BYTES, piece=PIECE)
    for script in servers:
        path = folder / (script[:-len(".py")] + ".jsonl")
        stalled = []

        def beside(port):
            time.sleep(STALL_AFTER)  # the experiment's own schedule: client.py's clients are exchanging by then
            stalled.append(StalledClient(port))
            stalled[0].run()

        figures = traced(script, work, STALL_LOAD, path, beside)
        line, across, gap = {}, False, None
        if stalled and path.exists():
            run_line, connections = draw.read_trace(path)
            line = stalled[0].trace_line(run_line["t0"])
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps(line) + "\n")
            spans = [draw.served(c) for c in connections if draw.served(c)]
            if line["stall"] and spans:  # the others exchanged before the stall began and after it ended
                across = min(s[0] for s in spans) < line["stall"][0] and max(s[1] for s in spans) > line["stall"][1]
                gap = draw.longest_gap(connections, *line["stall"])
        kept["servers"].append({"server": script, "flags": FLAGS.get(script, []), "trace": path.name,
                                "errors": figures.get("errors"), "failed": figures.get("failed"),
                                "stalled_how": line.get("how"), "taken_before_blocking": line.get(
                                    "taken_before_blocking"), "others_across_the_stall": across,
                                "others_longest_wait_s": gap})
        log("{}: {}; stalled client {}, {:g} MiB taken before it blocked; the others' longest wait {}{}".format(
            script, figures.get("failed") or "{} errors".format(figures.get("errors")), line.get("how"),
            round((line.get("taken_before_blocking") or 0) / MIB, 1), "-" if gap is None else "{:.0f} ms".format(gap * 1000),
            "" if across else "; the others did not exchange across the whole stall: raise STALL_MESSAGES"))
    (folder / "meta.json").write_text(json.dumps(kept, indent=1) + "\n")
    print("\n".join(["| server | errors | the stalled client | MiB taken before its sender blocked | the others' "
                     "longest wait for an echo, ms | the others exchanged across the stall |",
                     "|---|---:|---|---:|---:|---|"] + ["| {} | {} | {} | {} | {} | {} |".format(
                         k["server"], k["errors"], k["stalled_how"], "-" if not k["taken_before_blocking"] else
                         "{:g}".format(round(k["taken_before_blocking"] / MIB, 1)), "-" if k["others_longest_wait_s"] is None
                         else "{:,.0f}".format(k["others_longest_wait_s"] * 1000),
                         "yes" if k["others_across_the_stall"] else "no") for k in kept["servers"]]) + "\n", flush=True)
    return folder


def draw_pictures(to=ROOT, parts=PICTURES, results=RESULTS):
    """Each part's picture (PICTURES) drawn into the folder to from the traces kept in results/PART/, where
    they are kept: the one place timelines.svg and stall.svg are drawn (bench/regenerate.py's render() calls it).
    The paths it wrote."""
    drawn = []
    for part in parts:
        folder = results / part
        if (folder / "meta.json").exists():
            (to / PICTURES[part]).write_text(draw.kept_timelines(folder))
            drawn.append(to / PICTURES[part])
    return drawn


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("servers", nargs="*", help="e.g. echo_select.py echo_prefork.py (default: every server of the "
                        "part)")
    parser.add_argument("--out", metavar="DIR", help="keep the traces in DIR/timelines/ and DIR/stall/ and draw them "
                        "as DIR/timelines.svg and DIR/stall.svg (your own: the committed ones are left alone)")
    parser.add_argument("--keep", action="store_true", help="replace the kept traces (bench/results/timelines/ and "
                        "stall/) and redraw the committed timelines.svg and stall.svg")
    parser.add_argument("--part", default="timelines,stall", help="timelines, stall or both (default: both)")
    parser.add_argument("--work", type=int, help="the servers' --work (default: calibrated here first)")
    parser.add_argument("--calibrate", action="store_true", help="only calibrate --work, and print what was measured")
    parser.add_argument("--no-draw", action="store_true", help="keep the traces and draw nothing (bench/regenerate.py "
                        "draws them with the rest)")
    args = parser.parse_args()
    parts = [p.strip() for p in args.part.split(",") if p.strip()]
    if set(parts) - {"timelines", "stall"} or not parts:
        parser.error("--part: timelines, stall or both")
    unknown = set(args.servers) - set(SERVERS)
    if unknown:
        parser.error("no such server here: " + ", ".join(sorted(unknown)))
    if args.calibrate:
        print(json.dumps(calibrate()[1], indent=1))
        return 0
    if bool(args.out) == args.keep:
        parser.error("say where: --out DIR (your own traces and pictures) or --keep (the kept traces in "
                     "bench/results/ and the committed pictures)")
    results, to = (RESULTS, ROOT) if args.keep else (Path(args.out).resolve(), Path(args.out).resolve())
    if not args.keep and to in (ROOT, RESULTS, ROOT / "bench"):
        parser.error("--out {}: the committed pictures and records are there: give another folder, or --keep "
                     "to replace them".format(args.out))
    chosen = {"timelines": [s for s in ORDER if not args.servers or s in args.servers],
              "stall": [s for s in STALL_SERVERS if not args.servers or s in args.servers]}
    parts = [part for part in parts if chosen[part] or log("--part {}: none of its servers was named ({})".format(
        part, ", ".join(ORDER if part == "timelines" else STALL_SERVERS)))]
    if not parts:
        return 2
    to.mkdir(parents=True, exist_ok=True)
    work, how = (args.work, {"work": args.work, "how": "given with --work"}) if args.work is not None else calibrate()
    if "timelines" in parts:
        timelines(chosen["timelines"], work, how, results)
    if "stall" in parts:
        stall(chosen["stall"], work, how, results)
    if not args.no_draw:
        for path in draw_pictures(to, parts, results):
            log("drawn: {}".format(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
