# SPDX-License-Identifier: 0BSD
"""Each server on one core, the client on the other: open-loop knees that are the servers' own.

    python3 bench/pinned_sweep.py [--rates 4000:50000:2000] [--markdown FILE] [--ceiling CMD] [SERVER ...]

`client.py --all --scenario pingpong-sweep` lets client and server share the machine's cores,
so on 2 cores most knees meet where the two together fill both (the client's ceiling there).
This pins each server, with every process it starts, to the first core it may use, and client.py (--procs 1) to
the other cores, then sweeps the open loop against it (one exchange of 32 B per connection,
1 s a step, every echo verified; the knee rule of client.py). Every server gets the same one
core, so its knee is what that core lets it do. With --ceiling, the client's own ceiling is
measured the same way first, against CMD (any echo server that prints "Server Run Port:N" as
its first line, e.g. a small C one, run with "--port 0" added): a knee that reaches it is the
client's, not the server's. Default servers: those whose knee in --all met the client's ceiling
(not echo_simple.py, echo_fork.py, echo_thread.py or echo_threadpool.py, whose knees --all finds on
its own), and not the TLS server (the sweep speaks plain TCP).
Every wait is bounded; each server is stopped (its process group) whatever happens."""
import argparse
import os
import shlex
import tempfile
from pathlib import Path

from common import SERVER_CORE, SERVERS, TLS_SERVERS, Server, run_client, table

SLOW = {"echo_simple.py", "echo_fork.py", "echo_thread.py", "echo_threadpool.py"}  # knees of their own in --all
LEFT_OUT = SLOW | set(TLS_SERVERS)  # not swept by default: the slow ones, and TLS (the sweep speaks plain TCP)


def client_cores():
    return set(os.sched_getaffinity(0)) - {SERVER_CORE}  # SERVER_CORE: the first core this may run on


def step_count(rates):
    """How many steps A:B:STEP has (ValueError if it is not that)."""
    low, high, step = (float(x) for x in rates.split(":"))
    return int((high - low) // step) + 1


def sweep(port, rates):
    """client.py's open-loop sweep (--json) against port, pinned to the client's cores."""
    return run_client(["--port", str(port), "--rate", rates, "--duration", "1", "--procs", "1"], client_cores(),
                      timeout=step_count(rates) * 30).figures


def sweep_script(script, rates):
    with tempfile.TemporaryDirectory() as folder:
        server = Server(script, folder, ["-q"], cores=[SERVER_CORE])
        try:
            server.wait_for_port()
            return sweep(server.port, rates)
        finally:
            server.kill()


def sweep_command(command, rates):
    with tempfile.TemporaryDirectory() as folder:
        server = Server("--ceiling", folder, program=shlex.split(command), cores=[SERVER_CORE])
        try:
            try:
                server.wait_for_port()
            except AssertionError as e:  # no "Server Run Port:N" line in time: why, for the table
                return {"failed": str(e)}
            return sweep(server.port, rates)
        finally:
            server.kill()


def client_side(step):
    """The client's own failures at a step (no local port, no descriptor), never the server's errors."""
    ports, fds = step.get("client_ports_exhausted", 0), step.get("client_descriptors_exhausted", 0)
    return "".join(", {:,} {}".format(n, what) for n, what in ((ports, "without a local port"),
                                                               (fds, "without a client descriptor")) if n)


def row(name, r, ceiling=None):
    if r.get("failed") or "knee" not in r:
        return "| {} | failed: {} | | | |".format(name, r.get("failed"))
    steps = {step["offered_rate"]: step for step in r["steps"]}
    knee = r["knee"]
    past = [s for s in r["steps"] if knee is None or s["offered_rate"] > knee]
    first_miss = past[0] if past else None
    # Where the first step past the knee failed on the client's side, the knee is not the server's.
    client_bound = first_miss is not None and (not first_miss["kept_schedule"] or bool(client_side(first_miss)))
    if knee is None:
        text = "below {:,}".format(r["steps"][0]["offered_rate"])
    elif r["knee_at_top"] or (ceiling and knee >= ceiling) or client_bound:
        text = "at least {:,}".format(knee)
    else:
        text = "{:,}".format(knee)
    # The steps that decide the knee: up to the first past it.
    deciding = [s for s in r["steps"] if first_miss is None or s["offered_rate"] <= first_miss["offered_rate"]]
    behind = any(not s["kept_schedule"] for s in deciding)
    return "| {} | {} | {} | {} | {} |".format(
        name, text, "{:.1f}".format(steps[knee]["p99_ms"]) if knee else "",
        "" if first_miss is None else "{:,}: {:,.0f} replies/s, p99 {:,.0f} ms, {:,} errors{}".format(
            first_miss["offered_rate"], first_miss["reply_rate"], first_miss["p99_ms"] or 0, first_miss["errors"],
            client_side(first_miss)),
        "no" if behind else "yes")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("servers", nargs="*", help="e.g. echo_epoll.py (default: all but " + ", ".join(sorted(LEFT_OUT)) + ")")
    parser.add_argument("--rates", default="4000:50000:2000", help="as client.py --rate A:B:STEP takes them")
    parser.add_argument("--ceiling", metavar="CMD", help="an echo server command for the client's own ceiling")
    parser.add_argument("--markdown", metavar="FILE", help="also write the table here")
    args = parser.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        parser.error("needs two cores or more: one for the server, the rest for the client")
    try:
        step_count(args.rates)
    except ValueError:
        parser.error("--rates takes A:B:STEP, as client.py --rate does for a sweep")
    scripts = args.servers or [s for s in SERVERS if s not in LEFT_OUT]
    head = ["Each server pinned to core {}, client.py (--procs 1) to core(s) {}; open loop {} connections/s, "
            "1 s a step, one exchange of 32 B each.".format(SERVER_CORE, ",".join(map(str, sorted(client_cores()))),
                                                            args.rates),
            "", "| server | knee connections/s | p99 ms at the knee | the next step | client kept its schedule |",
            "|---|---:|---:|---|---|"]

    def rows():
        ceiling = None
        if args.ceiling:
            r = sweep_command(args.ceiling, args.rates)
            ceiling = r.get("knee")
            yield row("the client's ceiling: " + Path(shlex.split(args.ceiling)[0]).name, r)
        for script in scripts:
            yield row(script, sweep_script(script, args.rates), ceiling)
    table(head, rows(), args.markdown)


if __name__ == "__main__":
    main()
