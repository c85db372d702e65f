# SPDX-License-Identifier: 0BSD
"""One worker stopped for a second while connections arrive on a schedule: who waits for it?

    python3 bench/stopped_worker.py [--workers 2] [--rate 2000] [--stop 1.0] [--json] [SERVER ...]

For each server (default: the process servers that have a pool of workers, and
echo_shared_socket.py with each --accept choice), start it (--port 0 -q --workers N),
run client.py's open loop against it (--rate R for 4 s, one exchange per connection,
every echo verified), and one second in stop its first worker with SIGSTOP for --stop
seconds, then SIGCONT. A connection handed to the stopped worker waits for it; the
response time counts from the connection's scheduled start, so the wait shows. Printed
as a Markdown table: connections, errors, p50/p99/max response time, and how many
responses took 100 ms or more, and 1 s or more; --json prints the record instead (each
run's client.py --json figures whole; the table goes to stderr), which
bench/regenerate.py keeps as bench/results/stopped.json. Every wait is bounded; each
server is stopped (its process group) whatever happens."""
import argparse
import json
import os
import signal
import sys
import tempfile
import time

from common import Server, provenance, run_client, wait_for_workers

DURATION = 4.0  # seconds of arrivals
STOP_AT = 1.0  # seconds into the arrivals
RUNS = [("echo_shared_socket.py", ("--accept", "all")), ("echo_shared_socket.py", ("--accept", "one")),
        ("echo_shared_socket.py", ("--accept", "exclusive")), ("echo_reuseport.py", ()),
        ("echo_prefork.py", ()), ("echo_selectors_process.py", ())]


def one_run(script, extra, workers, rate, stop):
    """The open-loop figures (client.py --json) of one run with a worker stopped meanwhile."""
    with tempfile.TemporaryDirectory() as folder:
        server = Server(script, folder, ["-q", "--workers", str(workers), *extra])
        try:
            server.wait_for_port()
            try:
                pool = wait_for_workers(server.pid, workers)
            except AssertionError as e:
                return {"failed": str(e)}
            def stop_a_worker():
                time.sleep(STOP_AT)
                os.kill(pool[0], signal.SIGSTOP)
                time.sleep(stop)
                os.kill(pool[0], signal.SIGCONT)

            return run_client(["--port", str(server.port), "--rate", str(rate), "--duration", str(DURATION), "--procs",
                               "1"], timeout=DURATION + 60, meanwhile=stop_a_worker).figures
        finally:
            server.kill()


def row(run):
    """A run's row of the table, from its record: the server, and client.py's figures or why it failed."""
    r = run["figures"]
    if "failed" in r:
        return "| {} | failed: {} |{}".format(run["server"], r["failed"], " |" * 6)
    return "| {} | {:,} of {:,} | {} | {:.1f} | {:.0f} | {:.0f} | {:,} | {:,} |".format(
        run["server"], r["connections"], r["scheduled"], r["errors"], r["p50_ms"], r["p99_ms"], r["max_ms"],
        r["responses_100ms_or_more"], r["responses_1s_or_more"])


def head(record):
    return ["{} workers, {:,} connections/s for {:g} s (one exchange each); worker 1 stopped (SIGSTOP) "
            "{:g} s in, for {:g} s.".format(record["workers"], record["rate"], record["duration_s"], record["stop_at_s"],
                                             record["stop_s"]), "",
            "| server | replies | errors | p50 ms | p99 ms | max ms | responses >= 100 ms | responses >= 1 s |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]


def markdown(record):
    return "\n".join(head(record) + [row(run) for run in record["runs"]])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("servers", nargs="*", help="e.g. echo_reuseport.py (default: all in the table)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rate", type=int, default=2000, help="new connections a second")
    parser.add_argument("--stop", type=float, default=1.0, help="seconds the worker stays stopped")
    parser.add_argument("--json", action="store_true", help="print the record as JSON (the table goes to stderr)")
    args = parser.parse_args()
    if not 0 < args.stop < DURATION - STOP_AT:
        parser.error("--stop must end before the arrivals do ({:g} s)".format(DURATION - STOP_AT))
    record = {**provenance(), "workers": args.workers, "rate": args.rate, "duration_s": DURATION, "stop_at_s": STOP_AT,
              "stop_s": args.stop, "runs": []}
    table = sys.stderr if args.json else sys.stdout
    print("\n".join(head(record)), file=table, flush=True)
    for script, extra in (run for run in RUNS if not args.servers or run[0] in args.servers):
        record["runs"].append({"server": " ".join([script, "--workers", str(args.workers), *extra]),
                               "figures": one_run(script, extra, args.workers, args.rate, args.stop)})
        print(row(record["runs"][-1]), file=table, flush=True)
    if args.json:
        print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
