# SPDX-License-Identifier: 0BSD
"""Stops at random instants under load, again and again: does a server ever break a promise of its stop?

    python3 bench/stop_cycles.py [--cycles 500] [--seed N] [--json] [SERVER ...]

Each cycle (bench/common.py's stop_under_load(), issue 48) starts the server (--port 0 -q --grace 10),
sets 20 clients echoing messages of random sizes, each waiting for all of its echo before the next,
and sends SIGTERM or SIGINT 0-50 ms after they start; every fifth cycle a second signal follows
0-100 ms later. A cycle fails when a client's bytes before EOF are not an exact prefix of what it sent,
when EOF does not come (a reset only after a second signal), when the exit is not 0 within a second of
the clients' close (1 within a second of a second signal), or on a traceback or a process left in the
server's group. Run it with each Python you care about (ECHO_PYTHON). --json prints the record (each server's
failed cycles and seconds) as JSON, which bench/regenerate.py keeps as bench/results/stops.json."""
import argparse
import json
import random
import subprocess
import sys
import tempfile
import time

from common import PYTHON, SERVERS, provenance, stop_under_load

SERVER_PYTHON = ("import platform, sys, sysconfig; print(platform.python_version() + (', free-threaded, GIL ' + ("
                 "'on' if getattr(sys, '_is_gil_enabled', lambda: True)() else 'off') "
                 "if sysconfig.get_config_var('Py_GIL_DISABLED') else ''))")


def text(record):
    """The record as a person reads it: three servers a line, then each cycle that failed."""
    said = ["{} {}/{} failed ({:.0f} s)".format(s["server"], len(s["failures"]), record["cycles"], s["seconds"])
            for s in record["servers"]]
    python = record.get("server_python", record["python"])  # "python": the servers' in records before provenance()
    return "\n".join(["Python {}, {} cycles each, seed {}".format(python, record["cycles"], record["seed"])] +
                     ["; ".join(said[i:i + 3]) for i in range(0, len(said), 3)] +
                     ["{}, cycle {}: {}".format(s["server"], i, what) for s in record["servers"]
                      for i, what in s["failures"]])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("servers", nargs="*", default=SERVERS)
    parser.add_argument("--cycles", type=int, default=500)
    parser.add_argument("--seed", type=int, default=None, help="the random instants' seed (default: a fresh one)")
    parser.add_argument("--json", action="store_true", help="print the record as JSON (what is said goes to stderr)")
    args = parser.parse_args()
    seed = random.randrange(1 << 32) if args.seed is None else args.seed
    # The servers' Python (ECHO_PYTHON's), as client.machine() names this one's: free-threaded or not, GIL on or off.
    version = subprocess.run([*PYTHON, "-c", SERVER_PYTHON], capture_output=True, text=True, check=True).stdout.strip()
    record = {**provenance(), "server_python": version, "cycles": args.cycles, "seed": seed, "servers": []}
    for script in args.servers:
        failures, started, rng = [], time.monotonic(), random.Random(seed)
        for i in range(args.cycles):
            with tempfile.TemporaryDirectory() as folder:
                what = stop_under_load(script, folder, rng, second=i % 5 == 4)
            if what:
                failures.append([i, what])
        record["servers"].append({"server": script, "failures": failures,
                                  "seconds": round(time.monotonic() - started, 1)})
        print("{} {}/{} failed".format(script, len(failures), args.cycles), file=sys.stderr, flush=True)
    print(json.dumps(record, indent=1) if args.json else text(record))
    return 1 if any(s["failures"] for s in record["servers"]) else 0


if __name__ == "__main__":
    sys.exit(main())
