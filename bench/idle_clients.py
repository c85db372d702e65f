# SPDX-License-Identifier: 0BSD
"""How many idle clients deny service, and for how long: each server at an earlier commit against
the working tree's with a deadline.

    python3 bench/idle_clients.py [--before REV] [--timeout 5] [--most 100] [--json] [SERVER ...]

Idle clients connect one at a time, each sends one byte and then says nothing; after each one a
fresh client tries an echo (3 s). At the first refusal, another waits up to --timeout + 15 s for its
echo: how long after the last idle client connected service came back. Then the same with trickling clients (a byte every
half --timeout) on the working tree's files: they stay under the deadline, so what they deny, they
deny for as long as they trickle (measured for three timeouts). Without --before, the working tree's
files alone. Every wait is bounded; each server is stopped whatever happens. --json prints the record
(each server's counts and seconds) as JSON, which bench/regenerate.py keeps as bench/results/idle.json.
"""
import argparse
import json
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import ROOT, SERVERS, Server, file_at, provenance


def echoed(port, wait):
    """Seconds a fresh client took to get its echo, or None past wait."""
    started = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
            sock.sendall(b"?")
            return time.monotonic() - started if sock.recv(1) == b"?" else None
    except OSError:
        return None


def deny(source, args, most, back_wait, trickle=None):
    """(idle clients at the first refused echo or None, seconds until an echo came back or None)."""
    stop = threading.Event()
    with tempfile.TemporaryDirectory() as folder:
        server = Server(Path(source).name, folder, ["-q", *args], source=source)
        clients = []
        try:
            server.wait_for_port()
            for count in range(1, most + 1):
                sock = socket.create_connection(("127.0.0.1", server.port), timeout=3)
                sock.sendall(b"x")
                clients.append(sock)
                if trickle:
                    threading.Thread(target=trickling, args=(sock, trickle, stop), daemon=True).start()
                time.sleep(0.02)  # let a worker take it
                last = time.monotonic()
                if echoed(server.port, 3) is None:
                    back = echoed(server.port, back_wait)
                    return count, None if back is None else time.monotonic() - last
            return None, None
        finally:
            stop.set()
            for sock in clients:
                sock.close()
            server.kill()


def trickling(sock, every, stop):
    while not stop.wait(every):
        try:
            sock.sendall(b"t")
        except OSError:
            return


def denied(record, side):
    """A side's idle clients that denied service, as the table says it."""
    return "not by {}".format(record["most"]) if side["denied"] is None else str(side["denied"])


def row(record, s):
    """A server's row of the table, from its record."""
    cells = [s["server"]]
    for side in ([s["before"]] if "before" in s else []) + [s]:
        cells += [denied(record, side), "-" if side["denied"] is None else "not in {:g} s".format(
            record["timeout"] + 15) if side["back_s"] is None else "{:.1f} s".format(side["back_s"])]
    cells.append("not by {}".format(record["most"]) if s["trickle_denied"] is None else "{} deny it{}".format(
        s["trickle_denied"], " (service back after {:.1f} s)".format(s["trickle_back_s"]) if s["trickle_back_s"]
        else ", held while they trickle"))
    return "| " + " | ".join(cells) + " |"


def head(record):
    before = record["before"] is not None
    return ["| server | {}with --timeout {:g}: idle clients that denied service | service back after | trickling "
            "clients (a byte every {:g} s) |".format("idle clients that denied service, before | service back after | "
                                                     if before else "", record["timeout"], record["timeout"] / 2),
            "|---|" + ("---:|---|" if before else "") + "---:|---|---|"]


def markdown(record):
    return "\n".join(head(record) + [row(record, s) for s in record["servers"]])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="a git revision before the deadline, to compare with")
    parser.add_argument("--timeout", type=float, default=5.0, help="--timeout for the working tree's servers")
    parser.add_argument("--most", type=int, default=100, help="idle clients at most")
    parser.add_argument("--json", action="store_true", help="print the record as JSON (the table goes to stderr)")
    parser.add_argument("servers", nargs="*", default=SERVERS)
    args = parser.parse_args()
    record = {**provenance(), "timeout": args.timeout, "most": args.most, "before": args.before, "servers": []}
    table = sys.stderr if args.json else sys.stdout
    print("\n".join(head(record)), file=table, flush=True)
    with tempfile.TemporaryDirectory() as old:
        for script in args.servers:
            kept = {"server": script}
            if args.before:
                count, back = deny(file_at(args.before, script, old), [], args.most, args.timeout + 15)
                kept["before"] = {"denied": count, "back_s": back}
            kept["denied"], kept["back_s"] = deny(ROOT / script, ["--timeout", str(args.timeout)], args.most,
                                                  args.timeout + 15)
            kept["trickle_denied"], kept["trickle_back_s"] = deny(
                ROOT / script, ["--timeout", str(args.timeout)], args.most, 3 * args.timeout, trickle=args.timeout / 2)
            record["servers"].append(kept)
            print(row(record, kept), file=table, flush=True)
    if args.json:
        print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
