# SPDX-License-Identifier: 0BSD
"""What keeping time costs: messages per server CPU-second, a server file against the same file at an
earlier commit, each server pinned to one core and the client to the other, runs interleaved.

    python3 bench/deadline_cost.py --before REV [--rounds 5] [--servers echo_epoll.py,...] [--scenarios article-100,c1k,one-client,bulk-65536]

The server runs with -q and MALLOC_MMAP_THRESHOLD_=131072 (the Protocol server's c1k figure moves
about 3x with glibc's mmap threshold otherwise: RESULTS.md, "Message sizes"); its CPU time is read
from /proc by client.py's counter (nanoseconds; threads that have ended count too). Each round runs before, after
(or after, before: the order alternates), and the table gives each side's median and the median
of the per-round ratios after/before. Every wait is bounded; each server is stopped whatever happens.
"""
import argparse
import os
import statistics
import tempfile
from pathlib import Path

from common import CLIENT_CORE, ROOT, SERVER_CORE, Server, file_at, run_client
SCENARIOS = {  # client.py flags: the presets' shapes, 500,000 messages each (seconds of server CPU)
    "article-100": ["--clients", "100", "--connects", "100", "--messages", "50", "--size", "32"],
    "c1k": ["--clients", "1000", "--connects", "1", "--messages", "500", "--size", "32", "--hold"],
    # echo_simple.py serves one client at a time: article-100's hundred overflow its backlog of 5
    "one-client": ["--clients", "1", "--connects", "10", "--messages", "50000", "--size", "32"],
    # the bulk preset's largest size (its record's bulk-65536): 50,000 messages of 64 KiB, what a server's
    # read buffer is sized for
    "bulk-65536": ["--clients", "20", "--connects", "5", "--messages", "500", "--size", "65536"],
}


def run(source, scenario):
    """Messages per server CPU-second for one run of scenario against the server file source."""
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / Path(source).name
        server = Server(script.name, folder, ["-q"], source=source, cores=[SERVER_CORE])
        try:
            server.wait_for_port()
            run = run_client(["--port", str(server.port), "--procs", "1", *SCENARIOS[scenario]], [CLIENT_CORE],
                             server.pid, label="{} {}".format(source, scenario))
            return run.figures["messages"] / run.server_cpu_s
        finally:
            server.kill()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the git revision to compare the working tree with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--servers", default="echo_epoll.py,echo_selectors.py,echo_asyncio_protocol.py")
    parser.add_argument("--scenarios", default="article-100,c1k")
    args = parser.parse_args()
    os.environ["MALLOC_MMAP_THRESHOLD_"] = "131072"  # inherited by the servers
    print("| server | scenario | before (msgs per server CPU-s) | after | after / before |")
    print("|---|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as old:
        for script in args.servers.split(","):
            earlier = file_at(args.before, script, old)
            for scenario in args.scenarios.split(","):
                before, after = [], []
                for round_ in range(args.rounds):
                    order = [(before, earlier), (after, ROOT / script)]
                    for figures, source in order if round_ % 2 == 0 else order[::-1]:
                        figures.append(run(source, scenario))
                ratios = [a / b for a, b in zip(after, before)]
                print("| {} | {} | {:,.0f} | {:,.0f} | {:.3f} ({:.3f}-{:.3f}) |".format(
                    script, scenario, statistics.median(before), statistics.median(after), statistics.median(ratios),
                    min(ratios), max(ratios)), flush=True)


if __name__ == "__main__":
    main()
