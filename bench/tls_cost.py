# SPDX-License-Identifier: 0BSD
"""What TLS costs a server: messages per server CPU-second with and without TLS, the handshake's
cost and the open-loop knee in handshakes a second (and whose knee it is), and `openssl speed`.

    python3 bench/tls_cost.py [--rounds 5] [--rates 200:3000:200] [--stime-procs 2] [--json]

About 7 minutes with the defaults on a 2-core machine. Every server runs with -q, pinned to one core
(with every process it starts), and every client to the other; machine defaults otherwise (glibc's
mmap threshold is not pinned, unlike deadline_cost.py: asyncio's plain and TLS transports both read
into fresh 256 KiB objects, and pinning it puts an mmap() in each read of both).

1. Messages per server CPU-second (client.py --procs 1; the server's CPU from /proc, as common.py
   reads it) for each server with and without TLS: echo_selectors.py against echo_selectors_tls.py,
   and echo_asyncio_streams.py, echo_asyncio_protocol.py without and with --cert/--key. Each round
   runs plain then TLS (or TLS then plain: the order alternates); the table gives each side's median
   and the median of the per-round ratios TLS / plain with their range. Shapes (SHAPES below):
   article-100's (100 clients, 50 messages of 32 B a connection: a full handshake every 50 messages),
   the same messages over connections of 500 messages (the records' cost, few handshakes), bulk 4 KiB
   and 64 KiB, and 1 message a connection (then the figure is connections, each a full handshake,
   per server CPU-second). From the medians: the server's CPU a TLS connection costs beyond a plain
   one, and how much of article-100's TLS cost is handshakes.
2. The handshake in open loop: client.py --rate A:B:STEP --tls (1 exchange a connection, 1 s a
   step) against each TLS server, and its knee; then one run of 3 s at the first rate past the knee,
   with the server's CPU (/proc) and the client's (its --json) over it: the core that is full is the
   limit. Then `openssl s_time -new` (a C client, --stime-procs processes on the client's core, 5 s)
   against each: handshakes a second, the server's core share and its CPU per handshake.
3. `openssl speed -seconds 1` for the handshake's asymmetric crypto (X25519, which OpenSSL's default
   groups pick, P-256 ECDH, P-256 ECDSA: the test certificate) and the records' AES-GCM (TLS 1.3's
   default suite here is TLS_AES_256_GCM_SHA384).
--json prints the record (each figure above, each side's figures a round, openssl speed's lines) instead, what is
printed going to stderr: bench/regenerate.py keeps it as bench/results/tls.json. Every wait is bounded; each server is
stopped (its process group) whatever happens.
"""
import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile

from common import CERT, CLIENT_CORE, KEY, SERVER_CORE, Server, pin, provenance, run_client

TLS_FLAGS = ["--tls", "--cafile", str(CERT)]
CERT_FLAGS = ["--cert", str(CERT), "--key", str(KEY)]
PAIRS = {  # name: (plain script, its flags), (TLS script, its flags)
    "echo_selectors(_tls).py": (("echo_selectors.py", []), ("echo_selectors_tls.py", CERT_FLAGS)),
    "echo_asyncio_streams.py": (("echo_asyncio_streams.py", []), ("echo_asyncio_streams.py", CERT_FLAGS)),
    "echo_asyncio_protocol.py": (("echo_asyncio_protocol.py", []), ("echo_asyncio_protocol.py", CERT_FLAGS)),
}
SHAPES = {  # client.py flags; each run is a second or a few of server CPU
    # deadline_cost.py's article-100 with 10 connections a client instead of 100: 50,000 messages, 1,000 connections
    "article-100": ["--clients", "100", "--connects", "10", "--messages", "50", "--size", "32"],
    "article-100, 500 a connection": ["--clients", "100", "--connects", "1", "--messages", "500", "--size", "32"],
    "bulk-4096": ["--clients", "20", "--connects", "5", "--messages", "500", "--size", "4096"],  # client.py's preset
    "bulk-65536": ["--clients", "20", "--connects", "5", "--messages", "200", "--size", "65536"],  # 200, not 500
    "1 message a connection": ["--clients", "20", "--connects", "200", "--messages", "1", "--size", "32"],
}


def started(script, folder, flags):
    server = Server(script, folder, ["-q", *flags], cores=[SERVER_CORE])
    try:
        return server.wait_for_port()
    except BaseException:
        server.kill()
        raise


def run(script, flags, shape, tls):
    """(messages per server CPU-second, the client's figures) for one run of shape against script."""
    with tempfile.TemporaryDirectory() as folder:
        server = started(script, folder, flags)
        try:
            run = run_client(["--port", str(server.port), "--procs", "1", *SHAPES[shape], *(TLS_FLAGS if tls else [])],
                             [CLIENT_CORE], server.pid, label="{} {} {}".format(script, " ".join(flags[:1]), shape))
            return run.figures["messages"] / run.server_cpu_s, run.figures
        finally:
            server.kill()


def costs(record, show):
    """Table 1's rows into record["costs"], measured as they are shown; then what the medians give, a pair each, into
    record["connections"]."""
    client_us = {}
    for pair, sides in PAIRS.items():
        for shape in SHAPES:
            figures = ([], [])
            for round_ in range(record["rounds"]):
                order = [(0, sides[0]), (1, sides[1])]
                for tls, (script, flags) in order if round_ % 2 == 0 else order[::-1]:
                    rate, client = run(script, flags, shape, bool(tls))
                    figures[tls].append(rate)
                    if tls and shape == "1 message a connection":
                        client_us.setdefault(pair, []).append(1e6 * client["client_cpu_s"] / client["handshakes"])
            ratios = [t / p for p, t in zip(*figures)]
            record["costs"].append({"server": pair, "shape": shape, "plain": statistics.median(figures[0]),
                                    "tls": statistics.median(figures[1]), "plain_rounds": figures[0],
                                    "tls_rounds": figures[1], "ratio": {"median": statistics.median(ratios),
                                                                        "min": min(ratios), "max": max(ratios)}})
            show(cost_row(record["costs"][-1]))
    medians = {(c["server"], c["shape"]): (c["plain"], c["tls"]) for c in record["costs"]}
    for pair in PAIRS:
        def extra(shape):  # server seconds a message that TLS adds
            plain, tls = medians[pair, shape]
            return 1 / tls - 1 / plain
        article, long_ = extra("article-100"), extra("article-100, 500 a connection")
        # a connection of article-100 has 50 messages; one of the long shape 500: per connection, less the records
        record["connections"].append({
            "server": pair, "tls_connection_us": 1e6 * extra("1 message a connection"),
            "handshake_us": 1e6 * (article - long_) * 50 / (1 - 50 / 500),
            "handshake_share": (article - long_) / article / (1 - 50 / 500),
            "client_us": statistics.median(client_us[pair])})


def cost_row(c):
    return "| {} | {} | {:,.0f} | {:,.0f} | {median:.3f} ({min:.3f}-{max:.3f}) |".format(
        c["server"], c["shape"], c["plain"], c["tls"], **c["ratio"])


def cost_head(record):
    return ["Messages per server CPU-second; server on core {}, client.py (--procs 1) on core {}; {} rounds, plain "
            "and TLS alternating; medians, and the median of the per-round ratios (range).".format(
                record["server_core"], record["client_core"], record["rounds"]), "",
            "| server | shape | plain | TLS | TLS / plain |", "|---|---|---:|---:|---:|"]


def connections_text(record):
    return ["", "From the medians: the server's CPU a TLS connection costs beyond a plain one (1 message a "
            "connection), the same from article-100 against 500 a connection, the share of article-100's TLS "
            "cost that is handshakes; client.py's CPU a TLS connection (1 message)."] + [
        "- {server}: {tls_connection_us:.0f} µs a TLS connection (1 message); {handshake_us:.0f} µs a handshake from "
        "article-100; handshakes {handshake_share:.0%} of article-100's TLS cost; client.py {client_us:.0f} µs a TLS "
        "connection".format(**c) for c in record["connections"]]


def open_loop(script, flags, rates):
    """The sweep's knee, then 3 s at the first rate past it: (knee, rate, figures, server CPU-s)."""
    with tempfile.TemporaryDirectory() as folder:
        server = started(script, folder, flags)
        try:
            sweep = run_client(["--port", str(server.port), "--procs", "1", "--rate", rates, "--duration", "1",
                                "--timeout", "2", *TLS_FLAGS], [CLIENT_CORE]).figures
            if sweep.get("failed") or "steps" not in sweep:
                return sweep.get("failed") or "no sweep", None, None, None
            knee = sweep["knee"]
            past = [s["offered_rate"] for s in sweep["steps"] if knee is None or s["offered_rate"] > knee]
            rate = past[0] if past else knee
            run = run_client(["--port", str(server.port), "--procs", "1", "--rate", str(rate), "--duration", "3",
                             "--timeout", "2", *TLS_FLAGS], [CLIENT_CORE], server.pid, timeout=120)
            return knee, rate, run.figures, run.server_cpu_s
        finally:
            server.kill()


def s_time(script, flags, procs, seconds=5):
    """openssl s_time -new: (handshakes a second, server CPU-s, s_time's CPU-s, wall s) over `seconds`."""
    with tempfile.TemporaryDirectory() as folder:
        server = started(script, folder, flags)
        try:
            command = ["openssl", "s_time", "-connect", "127.0.0.1:{}".format(server.port), "-new",
                       "-CAfile", str(CERT), "-time", str(seconds)]
            # procs of them at once, as one command that waits for them all: run_client() reads the server's CPU
            # around it, and its own (theirs: the shell waits for each) and the time.
            run = run_client(command=["sh", "-c", "for _ in $(seq {}); do {} 2>/dev/null & done; wait".format(
                procs, shlex.join(command))], cores=[CLIENT_CORE], server=server.pid, timeout=seconds + 30)
            counts = re.findall(r"(\d+) connections in [\d.]+s;", run.out)
            if len(counts) != procs:
                sys.exit("openssl s_time against {}: {} of {} runs said how many connections (exit status {}, {:.0f} "
                         "s of {} s at most): {!r}".format(script, len(counts), procs, run.returncode, run.wall_s,
                                                          seconds + 30, run.out[-300:]))
            return sum(map(int, counts)), run.server_cpu_s, run.load_cpu_s, run.wall_s
        finally:
            server.kill()


def handshakes(record, show):
    """The open loop's knee and the run past it, then s_time, for each TLS server, into record["handshakes"]."""
    for pair, (_, (script, flags)) in PAIRS.items():
        knee, rate, f, server_s = open_loop(script, flags, record["rates"])
        kept = {"server": script, "failed": knee if f is None else f.get("failed")}
        if not kept["failed"]:
            span = f["connections"] / f["reply_rate"] if f["reply_rate"] else f["duration_s"]
            kept.update(knee=knee, rate=rate, reply_rate=f["reply_rate"], errors=f["errors"],
                        server_busy=server_s / span, client_busy=f["client_cpu_s"] / span)
        count, used, client, wall = s_time(script, flags, record["stime_procs"])
        kept.update(stime_per_s=count / wall, stime_server_busy=used / wall, server_us=1e6 * used / count,
                    stime_us=1e6 * client / count)
        record["handshakes"].append(kept)
        show(handshake_row(kept))


def handshake_row(h):
    cells = "failed: {} | | | |".format(h["failed"]) if h["failed"] else \
        "{} | {:,}: {:,.0f} ({:,} errors) | {:.0%} | {:.0%}".format(
            "{:,}".format(h["knee"]) if h["knee"] else "none", h["rate"], h["reply_rate"], h["errors"],
            h["server_busy"], h["client_busy"])
    return "| {} | {} | {:,.0f} | {:.0%} | {:.0f} | {:.0f} |".format(
        h["server"], cells, h["stime_per_s"], h["stime_server_busy"], h["server_us"], h["stime_us"])


def handshake_head(record):
    return ["", "The handshake in open loop (client.py --rate {} --tls, 1 exchange a connection, 1 s a step; then 3 s "
            "at the first rate past the knee), and openssl s_time -new ({} on core {}, 5 s):".format(
                record["rates"], record["stime_procs"], record["client_core"]), "",
            "| server | client.py knee /s | past it: offered, replies /s | server core busy | client.py core busy "
            "| s_time handshakes /s | server core busy | server µs a handshake | s_time µs a handshake |",
            "|---|---:|---|---:|---:|---:|---:|---:|---:|"]


def speed():
    """openssl speed's summary lines, on the client's core."""
    lines = []
    for args in (["ecdsap256", "ecdhp256", "ecdhx25519"], ["-evp", "aes-128-gcm"], ["-evp", "aes-256-gcm"]):
        out = subprocess.run(["openssl", "speed", "-seconds", "1", *args], capture_output=True, text=True, timeout=120,
                             preexec_fn=pin([CLIENT_CORE])).stdout
        keep = re.compile(r"^\s*(sign|op|type|\d+ bits|AES)")
        lines += [line for line in out.splitlines() if keep.match(line)]
    return lines


def speed_text(record):
    return ["", "openssl speed -seconds 1 (on core {}):".format(record["client_core"])] + [
        "    " + line for line in record["openssl_speed"]]


def markdown(record):
    """The record as the script prints it."""
    return "\n".join(["{python}, {openssl}, commit {commit}".format(**record)] + cost_head(record) +
                     [cost_row(c) for c in record["costs"]] + connections_text(record) + handshake_head(record) +
                     [handshake_row(h) for h in record["handshakes"]] + speed_text(record))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds of table 1 (each about 70 s)")
    parser.add_argument("--rates", default="200:3000:200", help="the open loop's sweep, as client.py --rate takes it")
    parser.add_argument("--stime-procs", type=int, default=2, help="openssl s_time processes at once")
    parser.add_argument("--json", action="store_true", help="print the record as JSON (what is printed goes to stderr)")
    args = parser.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        parser.error("needs two cores: one for the server, one for the client")
    import ssl
    record = {**provenance(), "openssl": ssl.OPENSSL_VERSION, "server_core": SERVER_CORE, "client_core": CLIENT_CORE,
              "rounds": args.rounds, "costs": [], "connections": [], "rates": args.rates,
              "stime_procs": args.stime_procs, "handshakes": []}
    out = sys.stderr if args.json else sys.stdout

    def show(*lines):
        print("\n".join(lines), file=out, flush=True)
    show("{python}, {openssl}, commit {commit}".format(**record), *cost_head(record))
    costs(record, show)
    show(*connections_text(record), *handshake_head(record))
    handshakes(record, show)
    record["openssl_speed"] = speed()
    show(*speed_text(record))
    if args.json:
        print(json.dumps(record, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
