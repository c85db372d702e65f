# SPDX-License-Identifier: 0BSD
"""What a held client costs: each server's memory a held connection, and the most it holds on this machine.

    python3 bench/held.py [--json] [--out FILE] [SERVER ...]

client.py --all holds its preset held-10k on every server (10,000 connections, an echo each, held idle, one more
echo each) and reads what they cost the server: its process tree's memory before the connections and while they
are held, and the kernel's socket slabs apart (CLIENT.md says how). Then each server is held at the next size
that finds its limit here, again by client.py --all (--repeat 1), each size one run of the servers it concerns:
- one that did not hold 10,000, at 1,000 (c1k's size: select() stops at descriptor 1,024);
- one that did, at 100,000 (c100k) where this machine's descriptor limit allows it: a server of worker processes
  with enough --workers that each holds at most three quarters of the limit (--workers 7 under 20,000), and
  client.py with enough --procs; one process where its limit holds 100,000 and more (client.py runs held-10k on
  them again first, as it does before c100k: the records keep that table too, the table reads c100k's);
- else, a single process at the most it holds under its limit, in thousands, 1,000 descriptors spare (19,000
  under 20,000): it is not run at 100,000, and the records say why in one line.
The other sizes are held-10k's shape at that size: `--clients N --connects 1 --messages 2 --hold --idle S`.
The records (each run's client.py --json output, the machine, the commit, the descriptor limit, the servers not run
and why) go to --out, or with --json to stdout, as JSON; a table of each server at the most it held is printed
(on stderr with --json). bench/regenerate.py's part `held` runs this, and RESULTS.md's "What a held client costs"
and held.svg are drawn from its records. Linux (/proc, the descriptor limit); about 15 minutes on 2 cores.
"""
import argparse
import json
import math
import shlex
import sys
import time
from pathlib import Path

from common import PROCESS_SERVERS, ROOT, SERVERS, client, provenance, run_client, table

try:
    import resource  # the descriptor limit; Windows' CPython has none
except ImportError:
    resource = None

FEWER, HELD, MOST = 1000, 10000, 100000  # the sizes: c1k's, held-10k's and c100k's connections
PRESET = {HELD: "held-10k", MOST: "c100k"}  # the other sizes are a load shape (held_command())
SHARE = 0.75  # the most of its descriptor limit one worker (or one client.py process) is asked to hold at c100k
SPARE = 1000  # descriptors a single process keeps spare at the most it is held below its limit
WAIT = 3600  # seconds one client.py run may take, whatever its servers do


def descriptor_limit():
    """The hard limit on a process's descriptors here (client.py raises its soft limit to it, and the servers it
    starts inherit that), or None where there is none to read."""
    if resource is None:
        return None
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return None if hard == resource.RLIM_INFINITY else hard


def takes_workers(script):
    """Whether a server is worker processes that split their connections (--workers, as its --help says): more of
    them, fewer descriptors each."""
    if script not in PROCESS_SERVERS:
        return False
    said = client.servers_help([ROOT / script])[ROOT / script]  # plain text, asked once
    return any(line.strip().startswith("--workers") for line in said.splitlines())


def parts_for(n, limit):
    """How many processes (workers, or client.py's --procs) hold n connections at most SHARE of limit each."""
    return max(1, math.ceil(n / (SHARE * limit))) if limit else 1


def most_single(limit):
    """The most connections one process is held at below its descriptor limit: in thousands, SPARE to spare."""
    return MOST if limit is None else min(MOST, (limit - SPARE) // 1000 * 1000)


def held_command(n, servers, procs=None):
    """client.py --all holding n connections on servers ([name with its flags]), one run: its preset, else held-10k's
    shape at n (its messages, and its idle hold where client.py has one); --procs where the default would not fit
    client.py's own descriptors."""
    like = client.PRESETS.get(PRESET[HELD])
    idle = getattr(like, "idle", None)
    shape = ["--scenario", PRESET[n]] if n in PRESET else [
        "--clients", str(n), "--connects", "1", "--messages", str(like.messages if like else 2), "--hold"] + (
        ["--idle", "{:g}".format(idle)] if idle is not None else [])
    return ["client.py", "--all", "--json", "--repeat", "1", *shape, "--servers", ",".join(servers)] + (
        ["--procs", str(procs)] if procs else [])


def hold(n, servers, limit, runs):
    """Run held_command() for n on servers; keep it in runs; return its rows."""
    # Each client.py process's share of the connections, and the descriptors fit_descriptors() adds to it.
    need = -(-n // client.usable_cpu_count()) + client.SPARE_DESCRIPTORS
    command = held_command(n, servers, parts_for(n, limit) if limit and need > limit else None)
    print("held.py: holding {:,} on {}: python3 {}".format(n, ", ".join(servers), shlex.join(command)), file=sys.stderr,
          flush=True)
    # its progress on stderr, as it goes
    results = run_client(command=[sys.executable, *command], timeout=WAIT, cwd=ROOT, stderr=None).figures
    runs.append({"held": n, "command": shlex.join(["python3", *command]), "servers": servers, "results": results})
    if "failed" in results:
        print("held.py: " + results["failed"], file=sys.stderr, flush=True)
    return rows_of(runs[-1])


def rows_of(run):
    """A kept run's rows of its size, as client.py --json writes them (dicts): its preset's table, or its shape's
    ("custom"), not the preset client.py runs before it (c100k's held-10k, on the same servers)."""
    return [row for t in run["results"].get("tables", []) if t["scenario"] == PRESET.get(run["held"], "custom")
            for row in t["rows"]]


def measure(scripts):
    """Every size each server is held at (the module's docstring): the records."""
    limit = descriptor_limit()
    record = {**provenance(), "descriptors": limit, "runs": [], "not_run": {}}
    started = time.monotonic()
    rows = hold(HELD, scripts, limit, record["runs"])
    if "failed" in record["runs"][-1]["results"]:  # client.py said why (an unknown preset, ...): nothing to go on
        return dict(record, seconds=round(time.monotonic() - started))
    held = [r["server"].split()[0] for r in rows if not r["failed"]]
    fewer = [s for s in scripts if s not in held]
    if fewer:
        hold(FEWER, fewer, limit, record["runs"])
    workers = parts_for(MOST, limit)
    many = [s for s in held if takes_workers(s)]
    one = [s for s in held if s not in many]
    if one and most_single(limit) < MOST:
        for s in one:
            record["not_run"][s] = "one process may hold {:,} descriptors here (its hard limit), not {:,} " \
                "connections: held at {:,} instead; where the hard limit is higher (ulimit -Hn), it runs c100k" \
                .format(limit, MOST, most_single(limit))
        hold(most_single(limit), one, limit, record["runs"])
    largest = [s + " --workers {}".format(workers) for s in many] + (one if most_single(limit) >= MOST else [])
    if largest:
        hold(MOST, largest, limit, record["runs"])
    record["seconds"] = round(time.monotonic() - started)
    return record


def most_held(record):
    """Each server of the records at the most it held: [{"server": its file, "flags": what it ran with there,
    "held": how many (None: not the fewest asked), "row": client.py's row there (a dict, None where it held none),
    "sizes": {each size it held: its row there}, "stopped": (the next size, why in one line) or None}], the cheapest
    a held connection first, those that held none last."""
    found = {}
    for run in sorted(record["runs"], key=lambda run: run["held"]):
        for row in rows_of(run):
            name, *flags = row["server"].split(" (")[0].split()
            s = found.setdefault(name, {"server": name, "flags": "", "held": None, "row": None, "sizes": {},
                                        "stopped": None})
            if not row["failed"]:
                s.update(held=run["held"], row=row, flags=" ".join(flags), stopped=None)
                s["sizes"][run["held"]] = row
            elif s["stopped"] is None:  # the first size it did not hold
                s["stopped"] = (run["held"], row["failed"])
    for name, why in record.get("not_run", {}).items():
        if name in found and found[name]["stopped"] is None:
            found[name]["stopped"] = (MOST, why)
    cost = lambda s: s["row"].get("server_kib_per_held") if s["row"] else None
    return sorted(found.values(), key=lambda s: (cost(s) is None, cost(s) or 0, s["server"]))


def short_why(why):
    """Why a server did not hold a size, short: the pattern's limit where client.py names one, else its words."""
    return why.split("the pattern's limit: ", 1)[1] if "the pattern's limit: " in why else why


def kib_text(kib):
    """KiB a held connection, to about three figures: 1,277, 82, 5.6, 0.63."""
    if kib is None:
        return "-"
    return "{:,.0f}".format(kib) if abs(kib) >= 10 else "{:.1f}".format(kib) if abs(kib) >= 1 else "{:.2f}".format(kib)


def mib_text(kib):
    return "-" if kib is None else "{:,.0f}".format(kib / 1024) if kib >= 10240 else "{:.1f}".format(kib / 1024)


def lines(record):
    """The table's rows, as printed: a server at the most it held."""
    for s in most_held(record):
        r = s["row"] or {}
        yield "| {} | {} | {} | {} | {} | {} | {} |".format(
            " ".join(filter(None, [s["server"], s["flags"]])), "-" if s["held"] is None else "{:,}".format(s["held"]),
            kib_text(r.get("server_kib_per_held")), kib_text(r.get("kernel_kib_per_held")),
            mib_text(r.get("server_memory_held_kib")),
            "-" if r.get("connect_phase_s") is None else "{:.1f}".format(r["connect_phase_s"]),
            "-" if not s["stopped"] else "{:,}: {}".format(*s["stopped"]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("servers", nargs="*", help="echo_*.py (default: every one)")
    parser.add_argument("--json", action="store_true", help="print the records as JSON (the table goes to stderr)")
    parser.add_argument("--out", metavar="FILE", help="write the records there as JSON")
    args = parser.parse_args()
    missing = [s for s in args.servers if s not in SERVERS]
    if missing:
        parser.error("no such server: " + ", ".join(missing))
    record = measure(args.servers or SERVERS)
    if args.out:
        Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    head = ["Measured on {} {}, at {}: each server at the most it held ({} s).".format(
        record["machine"], record["linux"], record["commit"], record["seconds"]), "",
        "| server | held | KiB a held connection, server | kernel (both ends) | server MiB held | connect s "
        "| the next size |", "|---|---:|---:|---:|---:|---:|---|"]
    if args.json:  # the records on stdout (bench/regenerate.py keeps them), the table for a person on stderr
        print("\n".join([*head, *lines(record)]), file=sys.stderr)
        print(json.dumps(record, indent=1))
    else:
        table(head, lines(record))
    return 1 if any("failed" in run["results"] for run in record["runs"]) else 0


if __name__ == "__main__":
    sys.exit(main())
