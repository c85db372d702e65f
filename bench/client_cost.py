# SPDX-License-Identifier: 0BSD
"""What client.py itself costs: its own CPU a message (client_us, as --json reports it), the working tree's
client.py against client.py at an earlier commit, the server pinned to one core and the client to the other.

    python3 bench/client_cost.py --before REV [--rounds 7] [--server echo_epoll.py] [--connects 100] [--trace]

The load is article-100's shape (100 clients x --connects connections each x 50 messages of 32 B; at the
default --connects 100, 10,000 connections and 500,000 messages, as bench/deadline_cost.py runs it), with
--procs 1. One server (-q) serves every run. Each round runs before, after (or after, before: the order
alternates); the table gives each side's median and the median of the per-round ratios after/before, with their
range: a single run moves by a third on a shared 2-core machine, so one run says little. --trace runs the working tree's client with --trace as well, as a third
side (its bound: 2,000 connections, so give --connects 20 or fewer). Every wait is bounded; the server is
stopped whatever happens.
"""
import argparse
import os
import statistics
import sys
import tempfile

from common import CLIENT_CORE, ROOT, SERVER_CORE, Server, file_at, run_client


def client_us(script, port, connects, extra=()):
    """One run of the client file script, pinned to CLIENT_CORE: its CPU a message, in microseconds."""
    return run_client(["--port", str(port), "--procs", "1", "--clients", "100", "--connects", str(connects),
                       "--messages", "50", "--size", "32", *extra], [CLIENT_CORE], script=script,
                      label="client_cost.py: {}".format(script)).figures["client_us"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the git revision whose client.py to compare with")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--server", default="echo_epoll.py")
    parser.add_argument("--connects", type=int, default=100, help="each client's connections (default: %(default)s, "
                        "10,000 in all)")
    parser.add_argument("--trace", action="store_true", help="also the working tree's client.py with --trace")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        sides = {"before": (file_at(args.before, "client.py", folder), ()), "after": (ROOT / "client.py", ())}
        if args.trace:
            sides["after, --trace"] = (ROOT / "client.py", ("--trace", os.path.join(folder, "trace.jsonl")))
        figures = {side: [] for side in sides}
        server = Server(args.server, folder, ["-q"], cores=[SERVER_CORE])
        try:
            server.wait_for_port()
            for round_ in range(args.rounds):
                order = list(sides) if round_ % 2 == 0 else list(sides)[::-1]
                for side in order:
                    script, extra = sides[side]
                    figures[side].append(client_us(script, server.port, args.connects, extra))
                print("round {}: {}".format(round_ + 1, ", ".join("{} {:.2f} us".format(side, figures[side][-1])
                                                                 for side in order)), file=sys.stderr, flush=True)
        finally:
            server.kill()
    before = figures.pop("before")
    print("| client.py | client CPU a message, us (median) | / before, median of the rounds (range) |")
    print("|---|---:|---:|")
    print("| before ({}) | {:.2f} | |".format(args.before, statistics.median(before)))
    for side, values in figures.items():
        ratios = [a / b for a, b in zip(values, before)]
        print("| {} | {:.2f} | {:.3f} ({:.3f}-{:.3f}) |".format(side, statistics.median(values),
                                                                statistics.median(ratios), min(ratios), max(ratios)))


if __name__ == "__main__":
    main()
