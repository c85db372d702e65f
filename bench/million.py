# SPDX-License-Identifier: 0BSD
"""A million held connections: echo_reuseport.py --workers 67, each connection echoing once as it opens and once
after the idle hold (all at once), and what the kernel says.

    python3 bench/million.py [--clients N] [--workers W] [--server-timeout S]
        [--no-keepalive] [--netdev-max-backlog N] [--out FILE]

client.py holds the connections (`--clients N --connects 1 --messages 2 --hold --idle 3`, with enough --procs that
each process's share fits under the descriptor limit) and reads the server's memory. Meanwhile this reads, every
few seconds, /proc/net/sockstat (the kernel's TCP sockets and its TCP memory in pages, against net.ipv4.tcp_mem),
the aborts, resets and retransmissions of /proc/net/netstat and /proc/net/snmp, the packets dropped before TCP saw
them (/proc/net/softnet_stat), /proc/meminfo's Slab, and each worker's open descriptors: the records keep them
before, at the peak of the TCP memory, and after, and the kernel log's new lines. The record goes to stdout as JSON,
or with --out to the end of that file's list of records (bench/regenerate.py's part `million` keeps its runs in
bench/results/million.json). Linux (/proc); it owns the machine: about 5 minutes a million on 2 cores and 23 GB.
"""
import argparse
import json
import math
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import ROOT, Server, children_of, client, provenance, run_client, wait_until

COUNTERS = {"TcpExt": ("TCPAbortOnMemory", "TCPAbortOnData", "TCPMemoryPressures", "TCPAbortOnClose",
                       "TCPAbortOnTimeout", "TCPAbortOnLinger", "TCPAbortFailed", "TCPRcvQDrop", "TCPBacklogDrop",
                       "ListenOverflows", "ListenDrops", "TCPTimeouts", "TCPSynRetrans", "TCPKeepAlive"),
            "Tcp": ("EstabResets", "OutRsts", "AttemptFails", "RetransSegs")}
SHARE = 0.85  # of the descriptor limit, the most one client.py process is asked to hold
# --no-keepalive: the server's setsockopt(SO_KEEPALIVE) made a no-op (its file unchanged), to see what its probes do.
NO_KEEPALIVE = """import socket
set_option = socket.socket.setsockopt
def setsockopt(sock, level, option, *value):
    if (level, option) != (socket.SOL_SOCKET, socket.SO_KEEPALIVE):
        return set_option(sock, level, option, *value)
socket.socket.setsockopt = setsockopt"""
EVERY = 0.5  # seconds between readings; the workers' descriptors every twentieth


def counters():
    """The COUNTERS' values now, from /proc/net/netstat and /proc/net/snmp (pairs of lines: names, then values), and
    the packets the kernel's input queues dropped (/proc/net/softnet_stat's second column, every CPU: loopback's
    packets wait there, at most net.core.netdev_max_backlog a CPU)."""
    found = {"softnet_dropped": sum(int(line.split()[1], 16) for line in
                                    Path("/proc/net/softnet_stat").read_text().splitlines())}
    for path in ("/proc/net/netstat", "/proc/net/snmp"):
        rows = Path(path).read_text().splitlines()
        for names, values in zip(rows[::2], rows[1::2]):
            kind = names.split(":")[0]
            pairs = dict(zip(names.split()[1:], values.split()[1:]))
            found.update({name: int(pairs[name]) for name in COUNTERS.get(kind, ()) if name in pairs})
    return found


def reading(workers=None):
    """The kernel's TCP sockets and memory now (sockstat's TCP line: inuse, orphan, tw, alloc, mem in pages), the
    counters, Slab and MemAvailable in KiB, and with workers (pids) the descriptors each has open."""
    tcp = next(line.split()[1:] for line in Path("/proc/net/sockstat").read_text().splitlines()
               if line.startswith("TCP:"))
    meminfo = {line.split(":")[0]: int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()}
    r = {"t": time.monotonic(), "tcp": {k: int(v) for k, v in zip(tcp[::2], tcp[1::2])}, "counters": counters(),
         "slab_kib": meminfo["Slab"], "available_kib": meminfo["MemAvailable"]}
    if workers is not None:
        r["worker_fds"] = []
        for pid in workers:
            try:
                r["worker_fds"].append(len(os.listdir("/proc/{}/fd".format(pid))))
            except OSError:  # gone
                r["worker_fds"].append(None)
    return r


def kernel_log():
    """The kernel log's lines (dmesg), or None where this user may not read it."""
    try:
        done = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.splitlines() if done.returncode == 0 else None


class Watch:
    """reading() every EVERY seconds in a thread, until stop(): the peak (the most TCP memory) and each worker's
    most descriptors kept, and a short series (seconds, TCP sockets, TCP pages) for a picture."""

    def __init__(self, workers):
        self.workers, self.peak, self.most_fds, self.series = workers, None, [0] * len(workers), []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.t0 = time.monotonic()
        self.thread.start()

    def run(self):
        n = 0
        while not self.done.wait(EVERY):
            r = reading(self.workers if n % 20 == 0 else None)
            n += 1
            self.series.append([round(r["t"] - self.t0, 1), r["tcp"].get("inuse"), r["tcp"].get("mem")])
            if "worker_fds" in r:
                self.most_fds = [max(a, b or 0) for a, b in zip(self.most_fds, r["worker_fds"])]
            if self.peak is None or r["tcp"].get("mem", 0) > self.peak["tcp"].get("mem", 0):
                self.peak = r if "worker_fds" in r else dict(r, worker_fds=reading(self.workers)["worker_fds"])

    def stop(self):
        self.done.set()
        self.thread.join(60)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=1000000)
    parser.add_argument("--workers", type=int, default=67)
    parser.add_argument("--server-timeout", type=float, help="the server's --timeout (default: its own)")
    parser.add_argument("--no-keepalive", action="store_true", help="the server without TCP keepalive (NO_KEEPALIVE)")
    parser.add_argument("--netdev-max-backlog", type=int, metavar="N", help="net.core.netdev_max_backlog for the run "
                        "(root; put back after): the packets loopback's input queue holds a CPU")
    parser.add_argument("--idle", type=float, default=3.0)
    parser.add_argument("--wait", type=float, default=1200, help="seconds client.py may take (default: %(default)s)")
    parser.add_argument("--out", metavar="FILE", help="add the record to this file's list (JSON)")
    args = parser.parse_args()
    backlog = Path("/proc/sys/net/core/netdev_max_backlog")
    kept_backlog = backlog.read_text()
    if args.netdev_max_backlog:
        backlog.write_text(str(args.netdev_max_backlog))
    try:
        return measure(args)
    finally:
        backlog.write_text(kept_backlog)


def measure(args):
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    procs = max(2, math.ceil(args.clients / (SHARE * hard)))
    flags = ["--workers", str(args.workers)] + (
        ["--timeout", "{:g}".format(args.server_timeout)] if args.server_timeout is not None else [])
    shape = ["--clients", str(args.clients), "--connects", "1", "--messages", "2", "--hold", "--idle",
             "{:g}".format(args.idle), "--procs", str(procs), "--timeout", "120"]
    said = client.servers_help([ROOT / "echo_reuseport.py"])[ROOT / "echo_reuseport.py"]  # plain text
    idle = args.server_timeout if args.server_timeout is not None else float(re.search(
        r"\n\s*--timeout SECONDS[^(]*\(default: ([\d.]+)\)", said).group(1))  # its own default, as it says
    log = kernel_log()
    with tempfile.TemporaryDirectory() as folder:
        server = Server("echo_reuseport.py", folder, ["-q", *flags], rlimits={resource.RLIMIT_NOFILE: hard},
                        prelude=NO_KEEPALIVE if args.no_keepalive else None)
        try:
            server.wait_for_port()
            wait_until(lambda: len(children_of(server.pid)) >= args.workers, timeout=60)  # or fewer: said below
            workers = children_of(server.pid)
            before = reading(workers)
            print("million.py: python3 client.py --port {} {} ({} workers up)".format(
                server.port, " ".join(shape), len(workers)), file=sys.stderr, flush=True)
            watch = Watch(workers)
            run = run_client(["--port", str(server.port), *shape], server=server.pid, timeout=args.wait, stderr=None)
            watch.stop()
            after = reading(workers)
            alive = server.proc.poll() is None
        finally:
            server.kill()
        server_err = server.stderr()[-2000:]
    later = kernel_log()
    record = {**provenance(), "server": " ".join(["echo_reuseport.py", *flags]), "clients": args.clients,
              "server_idle_timeout_s": idle, "server_keepalive": not args.no_keepalive,
              "command": "python3 client.py --port PORT " + " ".join(shape), "procs": procs,
              "descriptors": hard, "tcp_mem": [int(n) for n in Path("/proc/sys/net/ipv4/tcp_mem").read_text().split()],
              "netdev_max_backlog": int(Path("/proc/sys/net/core/netdev_max_backlog").read_text()),
              "results": run.figures, "wall_s": round(run.wall_s, 1), "server_cpu_s": run.server_cpu_s,
              "load_cpu_s": run.load_cpu_s, "server_alive_after": alive, "server_stderr": server_err,
              "before": before, "peak": watch.peak, "after": after, "worker_fds_most": watch.most_fds,
              "series": watch.series,
              "kernel_log": None if later is None else [line for line in later if line not in set(log or ())][-40:]}
    summary = {k: run.figures.get(k) for k in ("messages", "expected", "connections", "errors", "error_kinds",
                                                "connect_phase_s", "server_kib_per_held", "kernel_kib_per_held")}
    print("million.py: {}; TCP pages at the peak {}; counters {} -> {}; worker fds at most {}".format(
        summary, (watch.peak or {}).get("tcp"), before["counters"], after["counters"], max(watch.most_fds or [0])),
        file=sys.stderr)
    if args.out:
        path = Path(args.out)
        kept = json.loads(path.read_text()) if path.exists() else []
        path.write_text(json.dumps(kept + [record], indent=1) + "\n")
    else:
        print(json.dumps(record, indent=1))
    return 0 if "failed" not in run.figures else 1


if __name__ == "__main__":
    sys.exit(main())
