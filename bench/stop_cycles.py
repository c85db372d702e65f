# SPDX-License-Identifier: 0BSD
"""Stops at random instants under load, again and again: does a server ever break a promise of its stop?

    python3 bench/stop_cycles.py [--cycles 500] [--seed N] [SERVER ...]

Each cycle (bench/common.py's stop_under_load(), issue 48) starts the server (--port 0 -q --grace 10),
sets 20 clients echoing messages of random sizes, each waiting for all of its echo before the next,
and sends SIGTERM or SIGINT 0-50 ms after they start; every fifth cycle a second signal follows
0-100 ms later. A cycle fails when a client's bytes before EOF are not an exact prefix of what it sent,
when EOF does not come (a reset only after a second signal), when the exit is not 0 within a second of
the clients' close (1 within a second of a second signal), or on a traceback or a process left in the
server's group. Run it with each Python you care about (ECHO_PYTHON)."""
import argparse
import random
import subprocess
import sys
import tempfile
import time

from common import PYTHON, SERVERS, stop_under_load


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("servers", nargs="*", default=SERVERS)
    parser.add_argument("--cycles", type=int, default=500)
    parser.add_argument("--seed", type=int, default=None, help="the random instants' seed (default: a fresh one)")
    args = parser.parse_args()
    seed = random.randrange(1 << 32) if args.seed is None else args.seed
    version = subprocess.run([*PYTHON, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, check=True).stdout.strip()  # the servers', ECHO_PYTHON's
    print("Python {}, {} cycles each, seed {}".format(version, args.cycles, seed), flush=True)
    missed = []
    for n, script in enumerate(args.servers, 1):  # three servers a line; what failed, at the end
        failures, started, rng = [], time.monotonic(), random.Random(seed)
        for i in range(args.cycles):
            with tempfile.TemporaryDirectory() as folder:
                what = stop_under_load(script, folder, rng, second=i % 5 == 4)
            if what:
                failures.append((i, what))
        missed += [(script, i, what) for i, what in failures]
        print("{} {}/{} failed ({:.0f} s)".format(script, len(failures), args.cycles, time.monotonic() - started),
              end="\n" if n % 3 == 0 or n == len(args.servers) else "; ", flush=True)
    for script, i, what in missed:
        print("{}, cycle {}: {}".format(script, i, what))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
