# SPDX-License-Identifier: 0BSD
"""How each server scales over cores: pinned to N of them, the load pinned to the others.

    python3 bench/scaling.py [--n 1,2,4,8] [--shapes held,short] [--reps 3] [--scale F] [--load CMD]
                             [--out FILE] [SERVER ...]

Each run starts a fresh server pinned to N CPUs (os.sched_setaffinity, with every process and thread it
starts), distinct physical cores first (/sys/devices/system/cpu/*/topology), and the load pinned to
every CPU on a physical core the server does not use. echo_reuseport.py, echo_shared_socket.py and
echo_selectors_process.py get `--workers N`; the others keep their own defaults (echo_prefork.py's 10
processes, the thread servers' threads). The load is client.py with `--procs` one per load CPU, or --load
CMD: any command that prints one JSON object with `messages` (or `msgs_total`), `errors`, and optionally
`msgs_per_s`, `wall_s` and `client_cpu_s` (as client.py and the Go generator of bench/results/scaling-16core/ do);
in it {port}, {cpus} (the load's CPUs), {clients}, {connects}, {messages} and {size} are the run's.

Two shapes: `held`, 256 connections held open, each exchanging its messages of 32 B one at a time
(ping-pong); `short`, the article's, 100 clients each opening connection after connection, 50 messages of
32 B on each. A process server's load grows with N (a run lasts about as long at every N); a one-process
server's stays the same. Per server, shape and N, the medians of --reps runs: msgs/s, its ratio to N=1,
messages per server CPU-second (client.py's counter over the server's whole process group, from /proc,
during the load), and how busy the server's CPUs and the load's were: a run whose load CPUs were full while the
server's were not measured the load, and the table says so ("the load's"). The table is printed as it is
measured; the records (every run, the machine) go to --out. By default N is 1, 2, 4, ... up to half the
physical cores this may run on: on a 2-core machine, N=1 only (the server on one core, the load on the
other). Linux only. Every wait is bounded; each server is stopped (its process group) whatever happens.
"""
import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import tempfile
from pathlib import Path

from common import ROOT, Server, kill_group, provenance, run_client, table

SERVERS = ["echo_reuseport.py", "echo_shared_socket.py", "echo_selectors_process.py", "echo_prefork.py",
           "echo_epoll.py", "echo_thread.py", "echo_prethread.py", "echo_threadpool.py", "echo_select_pool.py"]
WORKERS_N = {"echo_reuseport.py", "echo_shared_socket.py", "echo_selectors_process.py"}  # get --workers N
SHAPES = {  # client.py's flags at N=1, scale 1; `grows`: the flag a process server's load multiplies by N
    "held": dict(flags={"--clients": 256, "--connects": 1, "--messages": 400}, grows="--messages"),
    "short": dict(flags={"--clients": 100, "--connects": 10, "--messages": 50}, grows="--connects"),
}
FULL = 0.85  # a set of CPUs busier than this is the limit
LOAD_TIMEOUT = 120  # seconds a run's load may take


def physical_cores():
    """The CPUs this process may run on, grouped by physical core: [[cpu, its siblings...], ...]."""
    cpus, cores = sorted(os.sched_getaffinity(0)), {}
    for cpu in cpus:
        try:
            topology = Path("/sys/devices/system/cpu/cpu{}/topology".format(cpu))
            key = ((topology / "physical_package_id").read_text().strip(), (topology / "core_id").read_text().strip())
        except OSError:  # no topology (some containers): each CPU a core of its own
            key = ("cpu", cpu)
        cores.setdefault(key, []).append(cpu)
    return sorted(cores.values())


def split(cores, n):
    """(the server's n CPUs, distinct physical cores first; the load's: every CPU on a core the server
    does not use), or None where that leaves the load no CPU."""
    order = [core[i] for i in range(max(map(len, cores))) for core in cores if i < len(core)]
    server = order[:n]
    load = [cpu for core in cores if not set(core) & set(server) for cpu in core]
    return (server, load) if len(server) == n and load else None


def flags(shape, n, scale, grows):
    """client.py's flags for a shape, scaled, and multiplied by n where the server's load grows with it."""
    spec = SHAPES[shape]
    values = dict(spec["flags"])
    values[spec["grows"]] = max(1, round(values[spec["grows"]] * scale * (n if grows else 1)))
    return [str(x) for pair in values.items() for x in pair] + ["--size", "32"]


def run_load(args, port, load_cpus, shape_flags, server=None):
    """The load, pinned to load_cpus (run_client(): its figures, the wall time around it, its CPU seconds and, with
    server, the server's): client.py, or --load with {port}, {cpus}, and the shape's {clients}, {connects},
    {messages}, {size}."""
    fields = dict(port=port, cpus=len(load_cpus), **{flag[2:]: value for flag, value in
                                                     zip(shape_flags[::2], shape_flags[1::2])})
    return run_client(["--port", str(port), "--procs", str(len(load_cpus)), *shape_flags], load_cpus, server,
                      LOAD_TIMEOUT, cwd=ROOT, command=args.load and [word.format(**fields) for word in
                                                                    shlex.split(args.load)])


def measure(args, script, extra, shape, n, server_cpus, load_cpus):
    """One run: a fresh server, a short warm-up, then the load. A record (a dict), "failed" where it did."""
    grows = script in WORKERS_N or script == "echo_prefork.py"  # the process servers
    server_args = ["-q"] + (["--workers", str(n)] if script in WORKERS_N else []) + extra  # extra's flags win
    record = {"shape": shape, "server": " ".join([script, *extra]), "n": n, "server_cpus": server_cpus,
              "load_cpus": load_cpus}
    with tempfile.TemporaryDirectory() as folder:
        server = Server(script, folder, server_args, cores=server_cpus)
        try:
            server.wait_for_port()
            run_load(args, server.port, load_cpus, flags(shape, 1, args.scale / 10, False))
            run = run_load(args, server.port, load_cpus, flags(shape, n, args.scale, grows), server.pid)
            figures, wall, load_cpu, group, leader = (run.figures, run.wall_s, run.load_cpu_s, run.server_cpu_s,
                                                      run.leader_cpu_s)
        except AssertionError as e:  # no port line
            figures, wall, load_cpu, group, leader = {"failed": str(e).splitlines()[0]}, 0, 0, 0, 0
        finally:
            kill_group(server.pid)
            server.proc.wait()
    messages = figures.get("messages", figures.get("msgs_total"))
    expected = figures.get("expected", messages)
    if "failed" in figures or not messages or figures.get("errors") or messages != expected:
        record["failed"] = figures.get("failed") or "{} errors, {} of {} messages".format(
            figures.get("errors"), messages, expected)
        return record
    # The load's own figures where it gives them (client.py's and the Go generator's: over its measured part,
    # without its start-up); otherwise the wall time around it and the CPU of every process it waited for.
    wall, load_cpu = figures.get("wall_s") or wall, figures.get("client_cpu_s", load_cpu)
    rate = figures.get("msgs_per_s") or messages / wall
    record.update(messages=messages, wall_s=round(wall, 3), msgs_per_s=round(rate), server_cpu_s=round(group, 2),
                  leader_cpu_s=round(leader, 2),
                  load_cpu_s=round(load_cpu, 2), msgs_per_server_cpu_s=round(messages / group) if group
                  else None, server_busy=round(group / (wall * n), 2),
                  load_busy=round(load_cpu / (wall * len(load_cpus)), 2))
    return record


def median(runs, key):
    found = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(found) if found else None


def limit(server_busy, load_busy):
    """Whose limit a run's msgs/s is: the load's when its CPUs were full and the server's were not."""
    server_full, load_full = (server_busy or 0) >= FULL, (load_busy or 0) >= FULL
    return {(True, False): "the server's", (False, True): "the load's", (True, True): "both full"}.get(
        (server_full, load_full), "neither full")


def summary(runs):
    """One line per shape, server and N from its runs: the medians, in the order measured."""
    rows = {}
    for r in runs:
        rows.setdefault((r["shape"], r["server"], r["n"]), []).append(r)
    found = []
    for (shape, server, n), group in rows.items():
        good = [r for r in group if "failed" not in r]
        s = {"shape": shape, "server": server, "n": n, "runs": len(good), "failed": [r["failed"] for r in group
                                                                                    if "failed" in r]}
        for key in ("msgs_per_s", "msgs_per_server_cpu_s", "server_busy", "load_busy"):
            s[key] = median(good, key)
        s["load_cpus"] = len(group[0]["load_cpus"])
        s["limit"] = limit(s["server_busy"], s["load_busy"]) if good else "-"
        found.append(s)
        one = next((x for x in found if (x["shape"], x["server"], x["n"]) == (shape, server, 1)), None)
        s["vs_1"] = s["msgs_per_s"] / one["msgs_per_s"] if one and one["msgs_per_s"] and s["msgs_per_s"] else None
    return found


TABLE = ["| shape | server | N | msgs/s | x N=1 | msgs per server CPU-s | server CPUs busy | load CPUs busy (CPUs) "
         "| whose limit |", "|---|---|---:|---:|---:|---:|---:|---:|---|"]  # its head; a row() a summary


def row(s):
    def f(value, spec="{:,.0f}"):
        return "-" if value is None else spec.format(value)
    if not s["runs"]:
        return "| {} | {} | {} | fails: {} | | | | | |".format(s["shape"], s["server"], s["n"], s["failed"][0])
    return "| {} | {} | {} | {} | {} | {} | {} | {} ({}) | {} |".format(
        s["shape"], s["server"], s["n"], f(s["msgs_per_s"]), f(s["vs_1"], "{:.2f}x"), f(s["msgs_per_server_cpu_s"]),
        f(s["server_busy"], "{:.0%}"), f(s["load_busy"], "{:.0%}"), s["load_cpus"], s["limit"])


def machine(cores):
    """provenance() (the machine, its Python with the GIL on or off, Linux, the commit) and the cores laid out."""
    return {**provenance(), "cpus": sum(map(len, cores)), "physical_cores": len(cores), "cores": cores}


def fail(message):
    """A user's mistake: one line on stderr, exit status 2."""
    sys.stderr.write("scaling.py: {}\n".format(message))
    sys.exit(2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("servers", nargs="*", help="echo_*.py, with its flags in one word if any (e.g. "
                        "'echo_shared_socket.py --accept exclusive'; default: {})".format(", ".join(SERVERS)))
    parser.add_argument("--n", help="the numbers of server CPUs, e.g. 1,2,4,8 (default: 1, 2, 4, ... up to half "
                        "the physical cores)")
    parser.add_argument("--shapes", default="held,short", help="of " + ", ".join(SHAPES) + " (default: %(default)s)")
    parser.add_argument("--reps", type=int, default=3, help="runs of each, medians (default: %(default)s)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the messages (held) or connections "
                        "(short) of every run (default: %(default)s)")
    parser.add_argument("--load", metavar="CMD", help="the load instead of client.py (see above)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "scaling-runs.json"),
                        help="the records, as JSON (default: %(default)s)")
    args = parser.parse_args()
    if not hasattr(os, "sched_setaffinity") or not Path("/proc/self/stat").exists():
        fail("needs Linux (sched_setaffinity, /proc)")
    cores = physical_cores()
    half = max(1, len(cores) // 2)
    default_n = [2 ** i for i in range(half.bit_length()) if 2 ** i <= half]
    try:
        ns = [int(x) for x in args.n.split(",")] if args.n else default_n
    except ValueError:
        fail("--n takes whole numbers, e.g. 1,2,4: {!r}".format(args.n))
    for n in ns:
        if n < 1:
            fail("N={}: a server needs at least one CPU".format(n))
        if split(cores, n) is None:
            fail("N={} leaves the load no core: this may run on {} CPUs on {} physical cores, so N is at most {}".format(
                n, sum(map(len, cores)), len(cores), len(cores) - 1) if len(cores) > 1 else
                 "one physical core: the server and the load need one each")
    shapes = args.shapes.split(",")
    if set(shapes) - set(SHAPES) or args.reps < 1 or args.scale <= 0:
        fail("--shapes takes {}; --reps at least 1; --scale above 0".format(", ".join(SHAPES)))
    servers = [shlex.split(s) for s in args.servers] or [[s] for s in SERVERS]
    missing = [s[0] for s in servers if not (ROOT / s[0]).exists()]
    if missing:
        fail("no such server: " + ", ".join(missing))
    info = machine(cores)
    load = args.load or "client.py --procs <one per load CPU>"
    head = ["Each server pinned to N CPUs, the load ({}) to every CPU on a physical core the server does not use; "
            "{} on {} {} ({} CPUs, {} physical cores); medians of {} runs.".format(
                load, platform.node(), info["machine"], info["linux"], info["cpus"], info["physical_cores"], args.reps)]
    if max(ns) < 2:
        head.append("N=1 only: the server on one core, the load on the rest. Scaling needs more cores: on a "
                    "machine with 2K physical cores this measures N = 1, 2, 4, ... up to K.")
    head += [""] + TABLE
    runs = []

    def rows():
        for shape in shapes:
            for server in servers:
                for n in ns:
                    server_cpus, load_cpus = split(cores, n)
                    for _ in range(args.reps):
                        runs.append(measure(args, server[0], server[1:], shape, n, server_cpus, load_cpus))
                    yield row(summary(runs)[-1])
    table(head, rows())
    done = summary(runs)
    full = {whose: "; ".join("{} {} at N={}".format(s["server"], s["shape"], s["n"]) for s in done
                             if s["limit"] == whose) for whose in ("the load's", "both full")}
    print()
    if full["the load's"]:
        print("The load's CPUs were full and the server's were not: msgs/s is the load's limit, not the server's: "
              "{}.".format(full["the load's"]))
    if full["both full"]:
        print("Both were full: msgs/s is the two together's; read messages per server CPU-second: {}.".format(
            full["both full"]))
    if not any(full.values()):
        print("No run's load filled its CPUs: msgs/s is the servers'.")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({**info, "load": load, "reps": args.reps, "scale": args.scale,
                                          "runs": runs, "summary": done}, indent=1) + "\n")
    return 1 if any(s["failed"] for s in done) else 0


if __name__ == "__main__":
    sys.exit(main())
