# SPDX-License-Identifier: 0BSD
"""Measure everything RESULTS.md reports, then write RESULTS.md, SWEEPS.md and the pictures (results.svg,
openloop.svg, timelines.svg, stall.svg and held.svg).

    python3 bench/regenerate.py [--only PART,...] [--render]

One command, the repository alone: each PART below runs client.py or a benchmark script of this
folder and keeps its record in bench/results/ (JSON: PART.json, or the files its script writes, and meta.json:
the machine, the Pythons, the commit, when, how long); then the documents are written from those records alone,
with bench/RESULTS.template.md as their text, client.py's records and bench/draw.py's tables and charts
(timelines.svg and stall.svg from bench/timelines.py's traces, held.svg from bench/held.py's records), so every
figure comes from this run.
--only measures some parts again (the others are kept); --render measures nothing and writes the
documents from bench/results/ again. 45 minutes on the 2-core machine RESULTS.md names, one part at a
time (never run it beside another load: the figures would be the two loads'). A part that fails is
reported and RESULTS.md names it; the rest still runs.
"""
import argparse
import calendar
import glob
import json
import os
import re
import shlex
import socket
import ssl
import sys
import time
from pathlib import Path

# client.py's API alone (client.API): figures written as client.py does; drawn by draw.py
import draw
import held  # bench/held.py: what a held client costs, its records read as the table reads them (most_held())
from common import SERVERS, TLS_SERVERS, client, provenance, run_client, without_paths
# The scripts whose records RESULTS.md says as they print them: markdown(), stop_cycles.text(), scaling's TABLE and row()
import idle_clients
import python_versions
import scaling  # and FULL: the share of its CPUs from which it calls a load full, the 16-core load too
import stop_cycles
import stopped_worker
import timelines  # its pictures, drawn from its traces (draw_pictures())
import tls_cost

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"

PLAIN = [s for s in SERVERS if s not in TLS_SERVERS]
CLIENT = [sys.executable, "client.py", "--all", "--json"]  # a part's command, which run_client() runs
COMMAND_LIMIT = 4 * 3600  # seconds a part's command may run: the longest here (held.py, a million) take 15 minutes
SHARED = "shared_socket --accept all,shared_socket --accept one,shared_socket --accept exclusive,reuseport," \
         "prefork,selectors_process"
RUNS = 7  # the spread part's single runs
UNEVEN = 0.6  # the busiest of 2 workers' share of their CPU from which the prose calls a spread uneven
SCALING_SERVERS = ["echo_reuseport.py", "echo_thread.py"]  # bench/scaling.py's here: a process server, a thread one
SCALING_16 = RESULTS / "scaling-16core"  # an outside measurement on 16 cores: its records, machine and command
DEBIAN_ROOT = "/var/cache/echo-ci/debian-amd64"  # where .ci/debian_python keeps Debian's interpreters
# The pictures of who is served when, and of one client that stops reading: bench/timelines.py's traces.
TRACED = {picture: RESULTS / part for part, picture in timelines.PICTURES.items()}


def pythons():
    """bench/python_versions.py's interpreters: this one first, then pyenv's newest CPython of another
    minor version and Debian's newest (in the root .ci/debian_python makes), where the machine has them."""
    mine = sys.version_info[:2]
    pythons = [("{}.{}".format(*mine), sys.executable)]
    pyenv = [(tuple(int(x) for x in path.split("/versions/")[1].split("/")[0].split(".")), path)
             for path in glob.glob(os.path.expanduser("~/.pyenv/versions/3.*.*/bin/python3"))]
    other = max(((version, path) for version, path in pyenv if version[:2] != mine), default=None)
    if other:
        pythons.append(("{}.{}".format(*other[0]), other[1]))
    debian = [p for p in glob.glob(DEBIAN_ROOT + "/usr/bin/python3.*") if re.search(r"python3\.\d+$", p)]
    if debian and os.geteuid() == 0:  # chroot needs root
        newest = max(debian, key=lambda p: int(p.rsplit(".", 1)[1]))
        pythons.append((newest.rsplit("python", 1)[1], "chroot:{}:{}".format(DEBIAN_ROOT, newest[len(DEBIAN_ROOT):])))
    return [arg for label, where in pythons for arg in ("--python", "{}={}".format(label, where))]


# Each part: what it measures, and its command(s); "json" parts keep the JSON record the command prints (client.py's
# --json output, a bench script's --json), "own" parts' scripts write their records themselves (what they print is
# not kept). Times are this 2-core machine's.
PARTS = {
    "article": ("json", "article-100, 3 runs (about 1 min)", [CLIENT + ["--scenario", "article-100"]]),
    # The first question's two servers in single runs, interleaved: whether their order holds run to run.
    "spread": ("json", "epoll and select at article-100, 7 single runs (under a minute)",
               [CLIENT + ["--scenario", "article-100", "--servers", "epoll,select", "--repeat", "1"]] * RUNS),
    "cstar": ("json", "article-1000 and c1k, 1 run (about 6 min)",
              [CLIENT + ["--scenario", "article-1000,c1k", "--repeat", "1"]]),
    # A server that cannot hold 1,000 connections is not asked to hold 10,000 (its limit is known, and
    # measuring it again costs minutes of timeouts); c10k-cpu holds the same 10,000 as c10k.
    "c10k": ("json", "c10k, 1 run, the servers that passed c1k (about 10 min)",
             lambda: [CLIENT + ["--scenario", "c10k", "--repeat", "1", "--servers", passed("cstar", "c1k")]]),
    "c10kcpu": ("json", "c10k-cpu, 1 run, the servers that passed c10k (about 3 min)",
                lambda: [CLIENT + ["--scenario", "c10k-cpu", "--repeat", "1", "--servers", passed("c10k", "c10k")]]),
    "bulk": ("json", "messages of 1, 4 and 64 KiB, 1 run (about 2 min)",
             [CLIENT + ["--scenario", "bulk", "--repeat", "1"]]),
    "bulk_mmap": ("json", "bulk with glibc's mmap threshold pinned, epoll and two asyncio servers (under a minute)",
                  [["env", "MALLOC_MMAP_THRESHOLD_=131072"] + CLIENT + [
                      "--scenario", "bulk", "--repeat", "1", "--servers", "epoll,asyncio_protocol,asyncio_buffered"]]),
    "openloop": ("json", "pingpong and the open-loop sweep (about 6 min)",
                 [CLIENT + ["--scenario", "pingpong,pingpong-sweep"]]),
    "shared": ("json", "shared socket or SO_REUSEPORT, 2 workers (about 2 min)",
               [CLIENT + ["--servers", SHARED, "--server-args", "--workers 2", "--scenario", "wrk,pingpong"]]),
    "stopped": ("json", "a worker stopped for a second, 2 and 4 workers (about 1 min)",
                [[sys.executable, "bench/stopped_worker.py", "--workers", str(n), "--json"] for n in (2, 4)]),
    "idle": ("json", "idle and trickling clients (about 2 min)",
             [[sys.executable, "bench/idle_clients.py", "--timeout", "5", "--json", *PLAIN]]),
    "soak": ("json", "memory over 100,000 connections (about 7 min)",
             [[sys.executable, "bench/soak.py", s, "--warmup", "3000", "--connections", "100000", "--step",
               "50000", "--json", "--time-limit", "300"] for s in PLAIN]),
    "stops": ("json", "stops under load, 100 cycles of each server (about eight minutes)",
              [[sys.executable, "bench/stop_cycles.py", "--cycles", "100", "--json"]]),
    "scaling": ("own", "each server pinned to N cores, the load to the others: N=1 here (under a minute)",
                [[sys.executable, "bench/scaling.py", *SCALING_SERVERS, "--out", "bench/results/scaling-runs.json"]]),
    "tls": ("json", "what TLS costs (about 4 min)", [[sys.executable, "bench/tls_cost.py", "--rounds", "3", "--json"]]),
    # Who is served when, and one client that stops reading: bench/timelines.py keeps its traces and their records
    # (meta.json: each server's figures) in bench/results/timelines/ and stall/; render() draws them.
    "timelines": ("own", "every server traced under one small load, and one client that stops reading (under a minute)",
                  [[sys.executable, "bench/timelines.py", "--keep", "--no-draw"]]),
    # What a held client costs: held-10k on every server, then each at the size that finds its limit here (held.py).
    "held": ("json", "held-10k on every server, then 1,000, the most one process holds, or c100k (about 15 min)",
             [[sys.executable, "bench/held.py", "--json"]]),
    # A million held connections on echo_reuseport.py --workers 67 (bench/million.py): with the server's own idle
    # timeout (the run), then without it, then without it and without the server's TCP keepalive, then with
    # keepalive and loopback's input queue 100 times longer (root).
    "million": ("json", "a million held connections, four runs (about 15 min)",
                [[sys.executable, "bench/million.py", *flags] for flags in (
                    [], ["--server-timeout", "0"], ["--server-timeout", "0", "--no-keepalive"],
                    ["--server-timeout", "0", "--netdev-max-backlog", "100000"])]),
    "pythons": ("json", "the same servers on other Pythons (about 3 min)",
                [[sys.executable, "bench/python_versions.py", "--rounds", "3", "--messages", "200000", "--json",
                  *pythons()]]),
}


def passed(part, scenario):
    """The servers that passed a scenario of a part measured before, as client.py --servers takes them."""
    return ",".join(r.server.split()[0][len("echo_"):-len(".py")] for r in tables(part)[scenario]["rows"]
                    if not r.failed)


def measure(name):
    """Run a part's commands one after another; keep the records they printed (and how long they took)."""
    kind, about, commands = PARTS[name]
    commands = commands() if callable(commands) else commands  # worked out from the parts before it
    print("== {}: {}".format(name, about), flush=True)
    started, outputs, failed = time.monotonic(), [], []
    for command in commands:  # what it prints kept, its stderr on ours, as run_client() runs every measurement
        done = run_client(command=command, cwd=ROOT, timeout=COMMAND_LIMIT, stderr=None)
        outputs.append(done.out)
        if done.returncode:
            failed.append("`{}` {}".format(" ".join(command[1:]), "did not finish in {:g} s".format(COMMAND_LIMIT)
                                           if done.wall_s >= COMMAND_LIMIT else "exited with status {}".format(
                                               done.returncode)))
    if kind == "json":  # client.py prints one JSON document; soak.py lines, then its result as the last one
        try:
            kept = [json.loads(out if name != "soak" else out.strip().splitlines()[-1]) for out in outputs]
            (RESULTS / (name + ".json")).write_text(json.dumps(kept if len(commands) > 1 else kept[0], indent=1)
                                                     + "\n")
        except (ValueError, IndexError):
            failed.append("printed no figures: nothing kept")
    meta, where = load("meta") or {}, provenance()
    meta.setdefault("parts", {})[name] = {
        "seconds": round(time.monotonic() - started), "commit": where["commit"],
        "linux": where["linux"],  # a part's own: the machine's kernel may change between sittings
        # What ran, if it is not what the commit has: the servers, the client, the scripts of bench/.
        "changed": where["changed"],
        "failed": failed,
        # No path of this machine: the interpreters as without_paths() writes them (the record says which they were).
        "commands": [without_paths(shlex.join("python3" if word == sys.executable else word for word in c))
                     for c in commands[:1]] + (
            ["... and {} more like it".format(len(commands) - 1)] if len(commands) > 1 else []),
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(time.time() - (time.monotonic() - started))),
        "when": where["when"]}
    meta.update(machine=where["machine"], openssl=ssl.OPENSSL_VERSION,
                cores=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,  # macOS: none
                host=socket.gethostname())
    (RESULTS / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    print("== {}: {:.0f} s{}".format(name, time.monotonic() - started, "; " + "; ".join(failed) if failed else ""),
          flush=True)


def load(name):
    path = RESULTS / (name + ".json")
    return json.loads(path.read_text()) if path.exists() else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="measure these parts (comma-separated) and keep the others: " + ", ".join(PARTS))
    parser.add_argument("--render", action="store_true", help="measure nothing: write the documents again")
    parser.add_argument("--to", metavar="DIR", default=str(ROOT), help="write the documents there (default: the "
                        "repository's top, where they are kept)")
    args = parser.parse_args()
    parts = [] if args.render else args.only.split(",") if args.only else list(PARTS)
    unknown = set(parts) - set(PARTS)
    if unknown:
        parser.error("no such part: " + ", ".join(sorted(unknown)))
    for name in parts:
        RESULTS.mkdir(exist_ok=True)
        measure(name)
    render(Path(args.to))
    return 0


# ---- the documents, from bench/results/

def tables(name):
    """A client.py --all part's closed-loop tables, as client.py's records: {scenario: table}."""
    return {table["scenario"]: table for table in draw.from_json(load(name) or {})["tables"]}


def sweeps(name):
    return draw.from_json(load(name) or {})["sweeps"]


def row(table, server):
    """A server's row in a table (a Run), or None."""
    return next((r for r in (table or {}).get("rows", []) if r.server == server), None)


def md_table(table):
    """A closed-loop table as bench/draw.py --markdown writes it, less its heading (the section has one)."""
    return "\n".join(draw.table_markdown(table)[2:]).rstrip() if table else "(not measured: {})".format(table)


def failed_words(r):
    """Why a row failed, short: the pattern's limit where the client names one."""
    if r is None:
        return "not run"
    why = r.failed or ""
    return "fails: " + (why.split("the pattern's limit: ")[1] if "the pattern's limit: " in why else why)


def by_reason(rows):
    """Failed rows grouped by why: "echo_a.py and echo_b.py (the reason); echo_c.py (another)"."""
    reasons = {}
    for r in rows:
        reasons.setdefault(failed_words(r)[len("fails: "):], []).append(r.server)
    return "; ".join("{} ({})".format(listing(servers), why) for why, servers in reasons.items()) or "none"


def knee(s):
    """A sweep's knee as the tables say it, and whose limit it is when the client could not keep up."""
    return client.knee_text(s) + (" (the client's limit: it could not keep its schedule)" if s["client_limited"]
                                  else "")


def summary():
    """The table at the top: a row per server."""
    article, cstar, sweep_list = tables("article"), tables("cstar"), sweeps("openloop")
    c10k = tables("c10k").get("c10k")
    knees = {s["server"]: s for s in sweep_list}
    soak = {r["server"]: r for r in load("soak") or []}
    idle = load("idle") or {"servers": []}
    denied = {s["server"]: idle_clients.denied(idle, s) for s in idle["servers"]}
    lines = ["| server | msgs per server CPU-s, article-100 | p99 ms, 1,000 clients (article-1000) | c10k "
             "| open-loop knee, connections/s | memory growth over 100,000 connections | idle clients that deny "
             "service |", "|---|---:|---:|---|---:|---:|---|"]
    names = sorted({r.server for t in list(article.values()) + list(cstar.values()) for r in t["rows"]})
    for server in names:
        a = row(article.get("article-100"), server)
        k = row(cstar.get("article-1000"), server)
        c, c1 = row(c10k, server), row(cstar.get("c1k"), server)
        s = knees.get(server)
        base = server.split()[0]
        m = soak.get(base) if base == server else None
        growth = "-" if m is None else "{:+,} KiB ({}){}".format(m["growth_kib"], m["metric"], "" if m[
            "passed"] else ", failed")
        lines.append("| {} | {} | {} | {} | {} | {} | {} |".format(
            server, "-" if a is None or a.failed else "{:,.0f}".format(a.msgs_per_server_cpu_s),
            "-" if k is None else failed_words(k) if k.failed else draw.figure_text("p99_ms", k.p99_ms),
            (failed_words(c1) + " (at c1k)" if c1 is not None and c1.failed else "-") if c is None else
            failed_words(c) if c.failed else "passes (connects {:.1f} s, p99 {} ms)".format(
                c.connect_phase_s, draw.figure_text("p99_ms", c.p99_ms)),
            "-" if s is None else knee(s), growth,
            denied.get(base, "-") if base == server else "-"))
    return "\n".join(lines)


def n(value, spec="{:,.0f}"):
    return "-" if value is None else spec.format(value)


def us(r):
    """Server CPU a message, in microseconds, from a row."""
    return None if r is None or r.failed or not r.msgs_per_server_cpu_s else 1e6 / r.msgs_per_server_cpu_s


def listing(items):
    items = list(items)
    return "none" if not items else items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def soak_table():
    lines = ["| server | memory | start MiB | after the warm-up MiB | after 100,000 more MiB | growth KiB | descriptors "
             "| failed exchanges | verdict |", "|---|---|---:|---:|---:|---:|---|---:|---|"]
    for r in load("soak") or []:
        warm, last = r["samples"][1], r["samples"][-1]
        lines.append("| {} | {} | {:.1f} | {:.1f} | {:.1f} | {:+,} | {} -> {} | {:,} | {} |".format(
            r["server"], r["metric"], r["samples"][0]["mem_kib"] / 1024, warm["mem_kib"] / 1024, last["mem_kib"] / 1024,
            r["growth_kib"], warm["fds"], last["fds"], sum(r["failures"].values()), "passed" if r["passed"] else "FAILED"))
    return "\n".join(lines)


def values(meta):
    """Every name bench/RESULTS.template.md uses, from this run's results: a function a section."""
    v = run_values(meta)
    for section in (table_values, spread_values, question_values, c10k_values, size_values, openloop_values,
                    shared_values, scaling_values, held_values, million_values):
        v.update(section())
    return v


def sittings(parts, gap=300):
    """When the parts ran, in words: "from START to END", or each sitting's span where more than gap
    seconds passed between one part's end and the next one's start (parts measured again with --only).
    A part that did not keep its start began its seconds before its end."""
    stamp = lambda text: calendar.timegm(time.strptime(text, "%Y-%m-%d %H:%M UTC"))
    began = lambda p: p.get("started") or time.strftime("%Y-%m-%d %H:%M UTC",
                                                        time.gmtime(stamp(p["when"]) - p.get("seconds", 0)))
    merged = []
    for start, end in sorted((began(p), p["when"]) for p in parts):
        if merged and stamp(start) - stamp(merged[-1][1]) <= gap:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    if not merged:
        return "from - to -"
    if len(merged) == 1:
        start, end = merged[0]
        return "at {}".format(start) if start == end else "from {} to {}".format(start, end)
    span = lambda a, b: a if a == b else "{} to {}".format(a, b[11:] if a[:10] == b[:10] else b)
    return "in {} sittings ({})".format(len(merged), listing(span(a, b) for a, b in merged))


def kernels(parts):
    """The Linux the parts ran on: the most parts' release, and the others' after it with the parts they name."""
    found = {}
    for name, p in sorted(parts.items()):
        found.setdefault(p.get("linux", "-"), []).append(name)
    most = max(found, key=lambda release: len(found[release]), default="-")
    return most + "".join(" and, for {}, {}".format(listing(names), release) for release, names in found.items()
                          if release != most)


# Why the thread servers get slower on more cores, said where the records' interpreter had the GIL (every build
# measured so far): on one without it the convoy below does not happen.
GIL_EXPLAINED = """The GIL lets one thread run Python at a time. On one core, a thread that drops it around a `recv()` or `send()` mostly takes
it straight back; on several, a thread on another core takes it meanwhile, so nearly every system call becomes a hand-off
between cores (a wake-up through the kernel, cold caches, a wait to take it back): the convoy effect of David Beazley's
[Understanding the GIL](https://www.dabeaz.com/GIL/) (2010), worse on multicore. Pin a thread server to one core
(`taskset -c 0 python3 echo_thread.py`) or use processes. Free-threaded CPython is the real answer; not measured here."""


def under_gil(python):
    """Whether the interpreter a record names ran with the GIL: client.machine() says "GIL off" where it did not (a
    free-threaded build; platform.python_version() alone cannot tell)."""
    return "GIL off" not in python


def run_values(meta):
    """When, where and at which commits the parts ran; the scripts' records as they print them."""
    parts = meta.get("parts", {})
    v = {"when": max([p["when"] for p in parts.values()] or ["-"]), "machine": meta.get("machine", "-"),
         "cores": meta.get("cores", "-"),
         "linux": kernels(parts), "openssl": meta.get("openssl", "-"),
         "commit": listing(dict.fromkeys(  # in the order they were measured at
             p["commit"] + (" (with uncommitted changes)" if p.get("dirty", p.get("changed")) else "")
             for p in sorted(parts.values(), key=lambda p: p.get("started", p["when"])))),
         "minutes": round(sum(p["seconds"] for p in parts.values()) / 60),
         "sittings": sittings(parts.values()),
         "failed_parts": listing("{} ({})".format(name, "; ".join(p["failed"])) for name, p in sorted(parts.items())
                                 if p["failed"]),
         "summary": summary(), "soak": soak_table(),
         "gil_switch": " and a GIL switch" if under_gil(meta.get("machine", "")) else ""}
    for name, said in (("stops", stop_cycles.text), ("idle", idle_clients.markdown),
                       ("stopped", lambda records: "\n\n".join(map(stopped_worker.markdown, records))),
                       ("pythons", python_versions.markdown), ("tls", tls_cost.markdown)):
        v[name] = said(load(name)) if load(name) else "(not measured)"
    return v


def table_values():
    """client.py's tables, as Markdown."""
    article, cstar, bulk, mmap = tables("article"), tables("cstar"), tables("bulk"), tables("bulk_mmap")
    openloop, shared = tables("openloop"), tables("shared")
    return {name + "_table": md_table(table) for name, table in [
        ("a100", article.get("article-100")), ("a1000", cstar.get("article-1000")), ("c1k", cstar.get("c1k")),
        ("c10k", tables("c10k").get("c10k")), ("c10kcpu", tables("c10kcpu").get("c10k-cpu")),
        ("pingpong", openloop.get("pingpong")), ("wrk", shared.get("wrk")),
        ("shared_pingpong", shared.get("pingpong"))] + [
        ("bulk{}".format(size), bulk.get("bulk-{}".format(size))) for size in (1024, 4096, 65536)] + [
        ("mmap{}".format(size), mmap.get("bulk-{}".format(size))) for size in (1024, 4096, 65536)]}


SAME = 0.05  # without the spread part: closer than 5 % is about the same (7 single runs here: 0.975-1.041)
ASYNCIO_FORMS = [("asyncio_protocol", "a Protocol"), ("asyncio_buffered", "a BufferedProtocol"),
                 ("asyncio_streams", "streams"), ("asyncio", "the article's `sock_recv` form")]


def spread_ratios():
    """epoll's server CPU a message over select's in each of the spread part's single runs."""
    ratios = []
    for run in load("spread") or []:
        table = draw.from_json(run)["tables"][0]
        epoll, select = us(row(table, "echo_epoll.py")), us(row(table, "echo_select.py"))
        if epoll and select:
            ratios.append(epoll / select)
    return ratios


def spread_moves():
    """How far each server's msgs/s and messages per server CPU-second moved between the spread part's single runs
    (the fastest run over the slowest): ({server: moved}, {server: moved})."""
    per = {}
    for run in load("spread") or []:
        for r in draw.from_json(run)["tables"][0]["rows"]:
            if not r.failed and r.msgs_per_s and r.msgs_per_server_cpu_s:
                per.setdefault(r.server, []).append(r)
    moved = lambda name: {server: max(getattr(r, name) for r in found) / min(getattr(r, name) for r in found)
                          for server, found in per.items() if len(found) > 1}
    return moved("msgs_per_s"), moved("msgs_per_server_cpu_s")


def span(moves):
    return "{:.2f}x to {:.2f}x".format(min(moves.values()), max(moves.values())) if moves else "-"


def spread_values():
    """What to read first, from how far msgs/s and messages per server CPU-second moved between single runs."""
    return {"spread_read": spread_read(*spread_moves(), runs=len(load("spread") or []))}


def spread_read(msgs, cpu, runs):
    """The sentence that says which figure to read first: messages per server CPU-second where every server's moved
    less between the runs than any server's msgs/s, both together where it did not."""
    where = "between {} single runs of article-100 (the fastest over the slowest; {})".format(
        runs, listing(sorted(msgs)))
    if not msgs or not cpu:
        return "Read **messages per server CPU-second** first where the client and the server share cores: msgs/s " \
            "is both programs' pace (how far each moves from run to run was not measured in this run)."
    if max(cpu.values()) < min(msgs.values()):
        return "Read **messages per server CPU-second** first: on a machine whose two cores the client and the " \
            "server share, a server's msgs/s moved {} {}, its messages per server CPU-second less, {}.".format(
                span(msgs), where, span(cpu))
    return "Read msgs/s and messages per server CPU-second together: on a machine whose two cores the client and " \
        "the server share, a server's msgs/s moved {} {}, its messages per server CPU-second {}, no less.".format(
            span(msgs), where, span(cpu))


def select_headline(epoll_us, select_us, ratios=()):
    """The answer to "why did epoll lose to select?" that the server CPU a message at 100 clients gives: about
    the same where single runs' ratios (epoll / select) fall on both sides of 1, else by the medians."""
    if not epoll_us or not select_us:
        return "(Not measured in this run.)"
    if min(ratios, default=1) < 1 < max(ratios, default=1) or not ratios and abs(epoll_us / select_us - 1) <= SAME:
        return "It did not: once messages are sent, the two cost about the same."
    if epoll_us > select_us:
        return "At 100 busy clients select() costs {:.0%} less a message.".format(1 - select_us / epoll_us)
    return "It did not: epoll costs {:.0%} less a message even at 100 clients.".format(1 - epoll_us / select_us)


def counted_to(rows):
    """How the server CPU of rows was counted, in words: by schedstat's clock where every row's resolution is
    1 ns, else in clock ticks (records from before client.py kept a resolution counted only ticks)."""
    grains = [r.server_cpu_resolution_s for r in rows if r and not r.failed]
    if grains and all(g is not None and g <= 1e-9 for g in grains):
        return "each counted to the nanosecond by the kernel's schedstat clock"
    return "the kernel counting CPU time in 10 ms ticks, and these runs using a few tenths of a second"


def question_values():
    """The three questions and the article's scenarios, per server: us a message, p99, msgs/s."""
    a100, a1000 = tables("article").get("article-100"), tables("cstar").get("article-1000")
    v = {}
    for short in ("epoll", "select", "selectors", "asyncio", "asyncio_streams", "asyncio_protocol",
                  "asyncio_buffered", "prefork", "prethread", "thread", "fork", "threadpool", "select_pool"):
        server = "echo_{}.py".format(short)
        for label, table in (("100", a100), ("1000", a1000)):
            r = row(table, server)
            v["{}_us_{}".format(short, label)] = n(us(r), "{:.1f}")
            v["{}_p99_{}".format(short, label)] = n(None if r is None or r.failed else r.p99_ms, "{:.0f}")
            v["{}_msgs_{}".format(short, label)] = n(None if r is None or r.failed else r.msgs_per_s)
            v["{}_cpu_{}".format(short, label)] = n(None if r is None or r.failed else r.msgs_per_server_cpu_s)
    others = [r for r in (a1000 or {}).get("rows", []) if r.failed and r.server != "echo_simple.py"]
    v["a1000_other_failures"] = " {} failed at 1,000 clients too: {}.".format(
        listing(r.server for r in others), "; ".join(r.failed for r in others)) if others else ""
    for short in ("prefork", "epoll"):
        r = row(a1000, "echo_{}.py".format(short))
        v[short + "_syn_1000"] = n(None if r is None or r.failed else r.syn_retries)
    good = [r for r in (a1000 or {}).get("rows", []) if not r.failed]
    v["a1000_passed"] = len(good)
    v["prefork_rank_1000"] = next((str(i) for i, r in enumerate(good, 1) if r.server == "echo_prefork.py"), "-")
    epoll_us, select_us = us(row(a100, "echo_epoll.py")), us(row(a100, "echo_select.py"))
    ratios = spread_ratios()
    v["select_headline"] = select_headline(epoll_us, select_us, ratios)
    v["select_spread"] = "in {} single runs, interleaved, epoll's CPU a message was {:.3f} to {:.3f} times " \
        "select's".format(len(ratios), min(ratios), max(ratios)) if ratios else "the spread was not measured"
    v["cpu_resolution_100"] = counted_to([row(a100, "echo_epoll.py"), row(a100, "echo_select.py")])
    forms = [(us(row(a100, "echo_{}.py".format(short))), label) for short, label in ASYNCIO_FORMS]
    v["asyncio_order"] = listing("{} {:.1f} µs".format(label, cost) for cost, label in sorted(f for f in forms if f[0]))
    ep, se = row(a1000, "echo_epoll.py"), row(a1000, "echo_select.py")
    ratio = ep.msgs_per_server_cpu_s / se.msgs_per_server_cpu_s if ep and se and not ep.failed and not se.failed \
        else None
    v["select_scan"] = "no measure" if ratio is None else \
        "with a thousand descriptors, select()'s scan of every one at each wake-up shows ({:.2f}x the CPU a " \
        "message)".format(ratio) if ratio >= 1.1 else "with a thousand busy descriptors, select()'s scan of " \
        "every one at each wake-up is still small beside the Python work per message ({:.2f}x)".format(ratio)
    return v


def c10k_values():
    """c10k: who passes, who fails and why; the connects that waited on a SYN retry; c10k-cpu's echo phase."""
    cstar = tables("cstar")
    a1000, c10k, c10kcpu = cstar.get("article-1000"), tables("c10k").get("c10k"), tables("c10kcpu").get("c10k-cpu")
    v = {}
    rows = (c10k or {}).get("rows", [])
    v["c10k_passed"] = len([r for r in rows if not r.failed])
    v["c10k_servers"] = len((a1000 or {}).get("rows", []))
    v["c1k_fail_list"] = by_reason(r for r in cstar.get("c1k", {}).get("rows", []) if r.failed)
    v["c10k_pass_list"] = listing("{} {:,.0f}".format(r.server, r.msgs_per_s) for r in rows if not r.failed)
    v["c10k_fail_list"] = by_reason(r for r in rows if r.failed)
    v["c10k_retries"] = listing("{} {:,} ({:.1f} s)".format(r.server, r.syn_retries, r.connect_phase_s) for r in rows
                                if not r.failed and r.syn_retries)
    v["c10k_no_retry"] = listing(r.server for r in rows if not r.failed and not r.syn_retries)
    cpu_rows = [r for r in (c10kcpu or {}).get("rows", []) if not r.failed]
    many = [r for r in cpu_rows if r.worker_cpu_s and len(r.worker_cpu_s) > 1]
    one = [r for r in cpu_rows if r not in many]
    v["c10kcpu_many"] = listing("{} {:.1f} s".format(r.server, r.echo_phase_s) for r in many)
    v["c10kcpu_one"] = "{:.1f} to {:.1f} s".format(min(r.echo_phase_s for r in one), max(r.echo_phase_s for r in one)) \
        if one else "-"
    return v


def size_values():
    """Message sizes: the Protocol against the BufferedProtocol, with the allocator's defaults and pinned."""
    bulk, mmap = tables("bulk"), tables("bulk_mmap")
    v = {}
    for label, tabs in (("default", bulk), ("mmap", mmap)):
        for size in (4096, 65536):
            t = tabs.get("bulk-{}".format(size))
            p, b = (row(t, "echo_asyncio_protocol.py"), row(t, "echo_asyncio_buffered.py"))
            e = row(t, "echo_epoll.py")
            v["{}_{}_protocol".format(label, size)] = n(p and not p.failed and p.msgs_per_server_cpu_s)
            v["{}_{}_buffered".format(label, size)] = n(b and not b.failed and b.msgs_per_server_cpu_s)
            v["{}_{}_epoll".format(label, size)] = n(e and not e.failed and e.msgs_per_server_cpu_s)
            v["{}_{}_ratio".format(label, size)] = n(b.msgs_per_server_cpu_s / p.msgs_per_server_cpu_s if p and b and
                                                     not p.failed and not b.failed else None, "{:.1f}")
    kept = load("pythons") or {"servers": []}  # the first interpreter's median: this Python's
    pinned = next((list(s["median"].values())[0] for s in kept["servers"] if s["server"] == "echo_asyncio_protocol.py"),
                  None)
    a100 = row(tables("article").get("article-100"), "echo_asyncio_protocol.py")
    v["protocol_pinned"] = "-" if pinned is None or a100 is None or a100.failed else \
        "{:.2f}x its article-100 figure, {:,.0f} against {:,.0f}".format(
            pinned / a100.msgs_per_server_cpu_s, pinned, a100.msgs_per_server_cpu_s)
    on_uvloop = any("--uvloop" in r.server for table in bulk.values() for r in table["rows"])
    v["uvloop"] = "its rows are the tables' `--uvloop` rows" if on_uvloop else \
        "it was not installed for this run (with it, `client.py --all` adds `--uvloop` rows)"
    return v


def openloop_values():
    """The open loop: the knees, ranked (the steps are in SWEEPS.md), and the sweep's rates in words."""
    sweep_list = sweeps("openloop")
    v = {}
    lines = draw.sweeps_markdown(sweep_list) if sweep_list else ["(not measured)"]
    first = next((i for i, line in enumerate(lines) if line.startswith("#### ")), len(lines))
    v["knees"] = "\n".join(lines[2:first]).strip()
    ranked = sorted(sweep_list, key=lambda s: (-(s["knee"] or 0), s["server"]))
    top = [s for s in ranked if (s["knee"] or 0) >= (ranked[min(2, len(ranked) - 1)]["knee"] or 0)] if ranked else []
    low = [s for s in ranked if (s["knee"] or 0) <= (ranked[max(-3, -len(ranked))]["knee"] or 0)][::-1]
    v["knee_top"] = listing("{} {}".format(s["server"], knee(s)) for s in top)
    v["knee_low"] = listing("{} {}".format(s["server"], knee(s)) for s in low)
    at_top = [s["server"] for s in sweep_list if s["knee_at_top"]]
    v["knee_at_top"] = "{} kept up with the whole sweep (the client's limit on these two shared cores, not " \
        "the servers')".format(listing(at_top)) if at_top else "No server kept up with the whole sweep"
    rates = sweep_list[0]["rates"] if sweep_list else [0, 0]
    # How many steps each sweep that found a knee below its last rate offered past it before it stopped.
    past = [sum(1 for step in s["steps"] if step.offered_rate > s["knee"]) for s in sweep_list
            if s["knee"] and not s["knee_at_top"]]
    v["rates"] = "new connections offered on a clock, {} a second at first and {} more each one-second step up to {} " \
        "(as [CLIENT.md](CLIENT.md#open-loop) says, a sweep stops once two steps in a row are clearly past the limit, " \
        "over 1 % errors or replies under 80 % of the offered rate: {})".format(
            *(draw.figure_text("offered_rate", rate) for rate in (rates[0], rates[1] - rates[0], rates[-1])),
            "here {} to {} steps past the knee".format(min(past), max(past)) if past else "no sweep had a knee")
    return v


def shared_values():
    """Shared socket or SO_REUSEPORT: wrk's msgs/s against SO_REUSEPORT's, the busiest worker's share, and
    how many responses waited for a stopped worker."""
    shared, v = tables("shared"), {}
    wrk = {r.server.split()[0]: [] for r in (shared.get("wrk") or {}).get("rows", [])}
    for r in (shared.get("wrk") or {}).get("rows", []):
        wrk[r.server.split()[0]].append(r)
    reuse = (wrk.get("echo_reuseport.py") or [None])[0]
    ratios = [r.msgs_per_s / reuse.msgs_per_s for r in wrk.get("echo_shared_socket.py", []) if reuse and not r.failed]
    v["shared_ratio"] = "{:.0%} to {:.0%}".format(min(ratios), max(ratios)) if ratios else "-"
    msgs = spread_moves()[0]
    apart = max(max(ratios), 1 / min(ratios)) if ratios else None
    v["shared_in_spread"] = "with no run-to-run spread measured to set it beside" if not (msgs and apart) else \
        "{} what a server's msgs/s moved between single runs here ({})".format(
            "within" if apart <= min(msgs.values()) else "beyond", span(msgs))
    v["shared_busiest"] = listing("{:.0%} ({})".format(r.busiest_cpu_share, r.server.split("--accept ")[-1])
                                  for r in wrk.get("echo_shared_socket.py", []) if r.busiest_cpu_share)
    v["reuseport_busiest"] = "{:.0%}".format(reuse.busiest_cpu_share) if reuse and reuse.busiest_cpu_share else "-"
    # "Even" only if no accept choice's busiest worker reached UNEVEN of the CPU, EPOLLEXCLUSIVE's included.
    busiest = max((r.busiest_cpu_share or 0 for r in wrk.get("echo_shared_socket.py", [])), default=1)
    v["shared_spread"] = "even in this run, whichever accept choice, though with EPOLLEXCLUSIVE the worker that " \
        "wakes takes all that is queued, so its spread follows who wakes" if busiest < UNEVEN else \
        "with EPOLLEXCLUSIVE the worker that wakes takes all that is queued"
    waited = {}
    for record in load("stopped") or []:  # one record per --workers
        for run in record["runs"]:
            figures = run["figures"]
            waited.setdefault(run["server"].split()[0], []).append(
                "failed" if "failed" in figures else "{:,}".format(figures["responses_100ms_or_more"]))
    v["stopped_reuseport"] = listing(waited.get("echo_reuseport.py", ["-"]))
    v["stopped_shared"] = listing(sorted(set(c for server, cs in waited.items() if server == "echo_shared_socket.py"
                                             for c in cs)))
    v["stopped_process"] = listing(waited.get("echo_selectors_process.py", ["-"]))
    prefork = waited.get("echo_prefork.py", ["-"])
    v["prefork_stall"] = ("a worker stopped while it holds the lock would stop them all; here it held it in "
                          "neither run: {}" if set(prefork) == {"0"} else "a worker stopped while it holds the lock "
                          "stops them all: {}, as the stopped worker held it or not").format(listing(prefork))
    return v


def scaling_16():
    """The 16-core measurement (bench/results/scaling-16core/, the Go generator as the load), as its summary.json keeps
    it, written once from its runs (tests/test_regenerate.py checks it against them): (the machine, {(shape, server,
    n): its cell: the runs it reads, counted, and their medians}, {(shape, server, n): [the runs set apart]}); the runs
    with the pack's client.py as the load are kept apart, under the shape "client.py long"."""
    summary = json.loads((SCALING_16 / "summary.json").read_text())
    key = lambda cell: (cell["shape"], cell["server"], cell["n"])
    return summary["machine"], {key(c): c for c in summary["cells"]}, {key(a): a["runs"] for a in summary["apart"]}


def set_apart(apart, cells):
    """The runs the 16-core table leaves out, in a sentence: what they were given, their msgs/s beside their server's
    N=1 msgs/s in that shape (named: the table has no row for some, SCALING_ROWS), and whether they too fall below it
    (then the drop on more cores is not the load's)."""
    shown = {(shape, name) for shape, name, _ in SCALING_ROWS}
    if not apart:
        return ""
    done = lambda found: "" if not any(r["errors"] for r in found) else \
        " ({} hit the generator's 30 s bound, with {} done)".format(
            sum(1 for r in found if r["errors"]), listing("{:,}".format(r["msgs_total"]) for r in found if r["errors"]))
    rate = {key: cell["msgs_per_s"] for key, cell in cells.items()}
    below = all(r["msgs_per_s"] < rate[shape, name, 1] for (shape, name, n), found in apart.items() for r in found)
    return " In pass1 the thread servers' runs at N={0} were given {0} times the N=1 load ({1} messages); the table " \
        "leaves them out: {2}; {3}.".format(
            listing(sorted({str(n) for shape, name, n in apart})),
            listing("{:,}".format(x) for x in sorted({min(cells[shape, name, 1]["loads"]) * n
                                                      for shape, name, n in apart}, reverse=True)),
            "; ".join("echo_{}.py {} at N={}: {}{}, against {} at N=1{}".format(
                name, {"long": "held", "short": "short"}[shape], n,
                listing("{:,}".format(r["msgs_per_s"]) for r in found), done(found), n_text(rate[shape, name, 1]),
                "" if (shape, name) in shown else " (a row the table does not show)")
                for (shape, name, n), found in sorted(apart.items())),
            "each below its N=1 msgs/s, as with the N=1 load, so the drop does not come from the load" if below
            else "not all below their N=1 msgs/s: with N times the load the finding differs")


def given(at):
    """What a row was given, from its cells {n: cell}, the loads of their runs that finished: "153,600 x N", or
    "153,600 at every N"."""
    loads = {n: set(cell["loads"]) for n, cell in at.items()}
    base = min(loads.get(1) or {0})
    if all(load == {base * n} for n, load in loads.items() if load):
        return "{:,} x N".format(base)
    if all(load == {base} for load in loads.values() if load):
        return "{:,} at every N".format(base)
    return "; ".join("N={}: {}".format(n, listing("{:,}".format(x) for x in sorted(load))) for n, load in loads.items())


# The 16-core table's rows: (shape, the records' name, as the table names it)
SCALING_ROWS = [("long", "go", "Go net (GOMAXPROCS=N)"), ("long", "reuseport", "echo_reuseport.py"),
                ("long", "selectors_process", "echo_selectors_process.py"), ("long", "shared", "echo_shared_socket.py"),
                ("long", "thread", "echo_thread.py"), ("long", "threadpool", "echo_threadpool.py"),
                ("short", "prefork", "echo_prefork.py (10 workers)"), ("short", "reuseport", "echo_reuseport.py"),
                ("short", "shared", "echo_shared_socket.py"),
                ("short", "shared_exclusive", "echo_shared_socket.py --accept exclusive"),
                ("short", "prethread", "echo_prethread.py"),
                ("short", "select_pool", "echo_select_pool.py")]
THREADS = ("thread", "threadpool", "prethread", "select_pool")
TIE = 0.15  # shared socket and SO_REUSEPORT are called a tie while their medians differ by less than this
# (and worker processes scale like Go while their N=8 / N=1 is at least 1 - TIE of Go's server's)


def scaling_values():
    """bench/scaling.py's run here, and the 16-core records: the table, medians, and the sentences they choose."""
    v = {}
    machine, cells, apart = scaling_16()
    lines = ["| shape | server | messages a run | msgs/s, N=1 | N=2 | N=4 | N=8 | N=8 / N=1 | msgs per server CPU-s, "
             "N=1 | N=8 | runs at N=1, 2, 4, 8 |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for shape, name, label in SCALING_ROWS:
        at = {n: cells[shape, name, n] for n in (1, 2, 4, 8)}
        rate = {n: at[n]["msgs_per_s"] for n in at}
        bounded = [n for n in at if at[n]["bounded"]]
        lines.append("| {} | {} | {} | {} | {:.2f}x | {} | {} | {} |".format(
            {"long": "256 held", "short": "100 x 50 a connection"}[shape], label, given(at),
            " | ".join(n_text(rate[n]) + ("*" if n in bounded else "") for n in at), rate[8] / rate[1],
            n_text(at[1]["msgs_per_server_cpu_s"]), n_text(at[8]["msgs_per_server_cpu_s"]),
            ", ".join(str(at[n]["runs"]) for n in at)))
    v["scaling16_table"] = "\n".join(lines)
    v["s16_machine"] = "{model}, {cpus} CPUs ({threads_per_core} thread per core), {hypervisor}, Linux {kernel}, " \
        "CPython {python}".format(**machine)
    v["s16_gil"] = GIL_EXPLAINED if under_gil(machine["python"]) else (
        "These ran on CPython {}: no GIL passed between the cores, so what the table shows is the threads' own cost "
        "on more cores, not the GIL's.".format(machine["python"]))
    v["s16_server_cpus"], v["s16_load_cpus"] = ("{}-{}".format(min(machine[k]), max(machine[k]))
                                                for k in ("server_cpus", "client_cpus"))
    rate = {key: cell["msgs_per_s"] for key, cell in cells.items()}
    cpu = {key: cell["msgs_per_server_cpu_s"] for key, cell in cells.items()}
    v["s16_apart"] = set_apart(apart, cells)
    # Processes against Go on held connections: N=8 over N=1, and messages per server CPU-second at N=8.
    scale = lambda name: rate["long", name, 8] / rate["long", name, 1]
    processes = [scale(name) for shape, name, label in SCALING_ROWS if shape == "long" and name not in THREADS + ("go",)]
    like_go = min(processes) >= (1 - TIE) * scale("go")
    v["s16_like_go"] = "scale like Go" if like_go else "scale less than Go"
    v["s16_like_go_what"] = "they scale as Go's server does" if like_go else "they scale less than Go's server"
    v["s16_scale_go"] = "{:.2f}x to {:.2f}x their one-core msgs/s on 8 cores, Go's server {:.2f}x".format(
        min(processes), max(processes), scale("go"))
    v["s16_reuse_go"] = "{:.2f}x".format(rate["long", "reuseport", 8] / rate["long", "go", 8])
    equal = abs(cpu["long", "reuseport", 8] / cpu["long", "go", 8] - 1) <= SAME
    v["s16_reuse_go_cpu"] = "{} ({:,.0f} against {:,.0f})".format(
        "it is Go's equal" if equal else "it does {:.0%} of Go's".format(cpu["long", "reuseport", 8] /
                                                                          cpu["long", "go", 8]),
        cpu["long", "reuseport", 8], cpu["long", "go", 8])
    drops = [rate[shape, name, n] / rate[shape, name, 1] for shape, name, n in rate
             if name in THREADS and n > 1 and not shape.startswith("client.py")]
    costs = [cpu[shape, name, 1] / cpu[shape, name, n] for shape, name, n in cpu
             if name in THREADS and n > 1 and not shape.startswith("client.py")]
    slower = max(drops) < 1
    v["s16_threads"] = "get slower on more cores" if slower else "do not get slower at every count of cores"
    v["s16_threads_what"] = "Threads{}: {}".format(  # the GIL named where the records had one, as s16_gil
        " under the GIL" if under_gil(machine["python"]) else "",
        "slower on more cores; pin them" if slower else "not slower at every count of cores")
    v["s16_thread_drop"] = "{:.0%} to {:.0%}".format(min(drops), max(drops))
    v["s16_thread_cost"] = "{:.1f} to {:.1f}x".format(min(costs), max(costs))
    v["s16_thread_short"] = "{:,.0f} msgs/s at 2 cores against {:,.0f} on one".format(
        rate["short", "thread", 2], rate["short", "thread", 1])
    ties = {n: [rate["short", other, n] / rate["short", "reuseport", n] for other in ("shared", "shared_exclusive")]
            for n in (2, 4, 8)}
    v["s16_shared"] = "; ".join("{} workers {}".format(n, " and ".join("{:.0%}".format(x) for x in ties[n]))
                                for n in ties)
    v["s16_tie"] = "still a tie at 2, 4 and 8 workers" if all(abs(x - 1) < TIE for xs in ties.values() for x in xs) \
        else "no longer a tie at every count of workers"
    bounded = [(key, cell) for key, cell in cells.items() if cell["bounded"]]
    v["s16_bounded"] = "" if not bounded else " \\* {} hit the generator's 30 s bound: the rate is what was echoed " \
        "in 30 s.".format(listing("{} of echo_{}.py's {} runs at N={}".format(
            cell["bounded"], name, cell["runs"], n) for (shape, name, n), cell in bounded))
    # client.py as the load: how many of its CPUs it used (CPU-seconds over the wall), so whether it was the limit.
    load_cpus = len(machine["client_cpus"])
    used = {name: cells["client.py long", name, 8]["client_cpu_s"] / cells["client.py long", name, 8]["wall_s"]
            for name in ("reuseport", "go")}
    full = used["reuseport"] >= scaling.FULL * load_cpus
    v["s16_clientpy"] = "{:,.0f} msgs/s against echo_reuseport.py's 8 workers (the Go generator: {:,.0f}) and {:,.0f} " \
        "against Go's server ({:,.0f}), using {:.1f} of its {} CPUs against echo_reuseport.py and {:.1f} against " \
        "Go's: {}".format(
            rate["client.py long", "reuseport", 8], rate["long", "reuseport", 8], rate["client.py long", "go", 8],
            rate["long", "go", 8], used["reuseport"], load_cpus, used["go"],
            "there client.py was saturated, so it may be the limit" if full else
            "client.py was not saturated, so this record does not show it as echo_reuseport.py's limit; why "
            "echo_reuseport.py did {:.0%} less under it (Go's server {:.0%} less) was not measured".format(
                1 - rate["client.py long", "reuseport", 8] / rate["long", "reuseport", 8],
                1 - rate["client.py long", "go", 8] / rate["long", "go", 8]))
    # This machine's run: its table and its verdict, from bench/scaling.py's record.
    done = (load("scaling-runs") or {}).get("summary", [])
    v["scaling_table"] = "\n".join(scaling.TABLE + [scaling.row(s) for s in done]) if done else "(not measured)"
    full = {whose: listing("{} {} at N={}".format(s["server"], s["shape"], s["n"]) for s in done if s["limit"] == whose)
            for whose in ("the load's", "both full")}
    v["scaling_verdict"] = " ".join(filter(None, [
        "The load's CPUs were full and the server's were not, so msgs/s is the load's limit: {}.".format(
            full["the load's"]) if full["the load's"] != "none" else "",
        "Both were full in {}, so there msgs/s is the two together's, and messages per server CPU-second "
        "the figure to read.".format(full["both full"]) if full["both full"] != "none" else ""])) or \
        "No run's load filled its CPUs: msgs/s is the servers'."
    return v


def held_values():
    """What a held client costs, from bench/held.py's records: the table (each server at the most it held), and the
    sentences its figures choose."""
    record = load("held") or {"runs": []}
    servers = held.most_held(record)
    v = {"held_table": held_table(servers, record) if servers else "(not measured)"}
    cost = lambda s: s["row"].get("server_kib_per_held") if s["row"] else None
    measured = [s for s in servers if cost(s) is not None]
    if not measured:
        return dict(v, held_headline="Not measured in this run.", held_how="", held_findings="", held_picture="",
                    held_question="Not measured in this run.")
    at = lambda s: "{} at {:,} held".format(" ".join(filter(None, [s["server"], s["flags"]])), s["held"])
    low, high = min(measured, key=cost), max(measured, key=cost)
    v["held_headline"] = "A held connection cost a server from {} KiB ({}) to {} KiB ({}): {:,.0f} times as " \
        "much.".format(held.kib_text(cost(low)), at(low), held.kib_text(cost(high)), at(high), cost(high) / cost(low)) \
        if cost(low) > 0 else "A held connection cost a server from nothing measurable ({}) to {} KiB ({}).".format(
            at(low), held.kib_text(cost(high)), at(high))
    kinds = lambda key: listing(sorted({s["row"][key] for s in measured if s["row"].get(key)}))
    sizes = sorted({run["held"] for run in record["runs"]})
    v["held_how"] = "`python3 bench/held.py` had client.py --all hold every server's connections idle, each echoed " \
        "before and after the hold: first held-10k ({:,} connections), then {} ({}). A held connection's cost is " \
        "the server's memory while they were held less before they opened, over the connections held: the {} of " \
        "its process tree, from /proc. {}".format(
            held.HELD, listing("{:,}".format(n) for n in sizes if n != held.HELD), "bench/held.py's docstring says "
            "which server is held at which size", kinds("server_memory_kind"),
            "A process may hold {:,} descriptors here (its hard limit).".format(record["descriptors"])
            if record.get("descriptors") else "")
    most = [s for s in measured if s["held"] == held.MOST]
    def span_of(found, figure, text):  # low-high of the numbers, in text's form (one where they agree)
        low, high = text(min(map(figure, found))), text(max(map(figure, found)))
        return low if low == high else "{}-{}".format(low, high)
    said = []
    if most:
        said.append("{} held {:,}: connected in {} s, in {} MiB of server memory{}.".format(
            listing(" ".join(filter(None, [s["server"], s["flags"]])) for s in most), held.MOST,
            span_of(most, lambda s: s["row"]["connect_phase_s"], "{:.1f}".format),
            span_of(most, lambda s: s["row"]["server_memory_held_kib"], held.mib_text),
            ", client.py's own {} MiB".format(span_of(most, lambda s: s["row"]["client_memory_kib"], held.mib_text))
            if all(s["row"].get("client_memory_kib") is not None for s in most) else ""))
    reasons = {}
    for name, why in sorted(record.get("not_run", {}).items()):
        reasons.setdefault(why, []).append(name)
    said += ["{} not run at {:,}: {}.".format(listing(names), held.MOST, why) for why, names in reasons.items()]
    kernel = [s["row"]["kernel_kib_per_held"] for s in measured if s["row"].get("kernel_kib_per_held") is not None]
    said.append("The kernel's socket slabs ({}) grew {} KiB a held connection: on loopback that counts both " \
        "ends, the client's socket and the server's.".format(kinds("kernel_memory_kind"), "{}-{}".format(
            held.kib_text(min(kernel)), held.kib_text(max(kernel))) if len(set(kernel)) > 1 else held.kib_text(
            kernel[0])) if kernel else "")
    each = {s["server"]: s for s in measured}
    per = [(each[name], what) for name, what in (("echo_thread.py", "a thread"), ("echo_fork.py", "a process"))
           if name in each]
    said.append("At the rates measured, {:,} held clients would take {}{}.".format(
        held.MOST, listing("{:.1f} GiB of server memory as {} each ({}: {} KiB a connection)".format(
            cost(s) * held.MOST / (1 << 20), what, at(s), held.kib_text(cost(s))) for s, what in per),
        ", where {} held them in {} MiB".format(" ".join(filter(None, [most[0]["server"], most[0]["flags"]])),
                                                held.mib_text(most[0]["row"]["server_memory_held_kib"]))
        if most else "") if per else "")
    unread = [s for s in servers if s["row"] and s["row"].get("memory_unread")]
    if unread:
        said.append("Not read: {}.".format("; ".join("{} ({})".format(s["server"], s["row"]["memory_unread"])
                                                             for s in unread)))
    v["held_findings"] = " ".join(filter(None, said))
    v["held_picture"] = "![KiB of memory a held connection, each server at the most it held](held.svg)"
    v["held_question"] = v["held_headline"]
    return v


def million_values():
    """A million held connections (bench/million.py's records, in the order it ran them): a row a run, then what the
    kernel's counters and the workers' descriptors said, no further."""
    runs = load("million") or []
    if not runs:
        return {"held_million": ""}
    rise = lambda r, name: r["after"]["counters"].get(name, 0) - r["before"]["counters"].get(name, 0)
    kinds = lambda r: r["results"].get("error_kinds", {})
    words = runs[0]["command"].split()
    lines = ["Then a million: `python3 bench/regenerate.py --only million` ran bench/million.py {} times, {} holding "
             "{:,} connections (client.py {}), each echoing once as it opened and once more after the idle hold, all "
             "at once. The kernel's counters are each run's rise (/proc/net/netstat, softnet_stat).".format(
                 len(runs), runs[0]["server"].split(" --timeout")[0], runs[0]["clients"],
                 " ".join(words[words.index("--clients"):words.index("--procs")])), "",
             "| server's idle timeout | TCP keepalive | input queue, packets a CPU | connected in | echoed once | echoed twice | "
             "reset | closed by the server | aborted on a timeout | keepalive probes | packets dropped | TCP memory "
             "at its peak |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in runs:
        f = r["results"]
        lines.append("| {} | {} | {:,} | {:.0f} s | {:,} | {:,} | {:,} | {:,} | {:,} | {:,} | {:,} | {:,} pages "
                     "|".format("{:g} s{}".format(r["server_idle_timeout_s"], "" if " --timeout " in r["server"] else
                                                  " (its default)") if r["server_idle_timeout_s"] else
                                "none (`--timeout 0`)", "on" if r["server_keepalive"] else
                                "off (`--no-keepalive`)", r["netdev_max_backlog"], f["connect_phase_s"],
            f["messages"] - f["connections"], f["connections"], kinds(r).get("reset", 0),
            kinds(r).get("closed early", 0), rise(r, "TCPAbortOnTimeout"), rise(r, "TCPKeepAlive"),
            rise(r, "softnet_dropped"), r["peak"]["tcp"]["mem"]))
    said = []
    if not any(rise(r, "TCPAbortOnMemory") for r in runs):
        said.append("No run lost a connection to the kernel's TCP memory: TCPAbortOnMemory rose by 0 in each, though "
                    "the TCP memory peaked at up to {:,} pages, past `net.ipv4.tcp_mem`'s most ({:,}).".format(
                        max(r["peak"]["tcp"]["mem"] for r in runs), runs[0]["tcp_mem"][2]))
    said.append("No worker held more than {:,} descriptors (its limit: {:,}).".format(
        max(max(r["worker_fds_most"]) for r in runs), runs[0]["descriptors"]))
    # A connection's wait between its echoes: at most the connect phase, the idle hold and the echo phase.
    waited = lambda r: r["results"]["connect_phase_s"] + float(words[words.index("--idle") + 1]) + r["results"][
        "echo_phase_s"]
    timed = [r for r in runs if r["server_idle_timeout_s"] and kinds(r).get("closed early")
             and waited(r) > r["server_idle_timeout_s"]]
    untimed = [r for r in runs if not r["server_idle_timeout_s"]]
    if timed and untimed:
        closed = sum(kinds(r).get("closed early", 0) for r in untimed)
        said.append("The connections closed by the server were its idle timeout's: a connection's wait between its "
                    "echoes could reach {} s (the connect phase, the hold and the echo phase), longer than its {:g} s; "
                    "without it the server closed {}.".format(
                        listing("{:.0f}".format(waited(r)) for r in timed), timed[0]["server_idle_timeout_s"],
                        "{:,}".format(closed) if closed else "none"))
    reset = [r for r in runs if kinds(r).get("reset")]
    if reset and all(rise(r, "TCPAbortOnTimeout") == kinds(r)["reset"] for r in reset if not r["server_idle_timeout_s"]):
        said.append("Without the idle timeout, each reset was a connection the kernel aborted on a timeout, a "
                    "retransmission's or keepalive's: TCPAbortOnTimeout rose by as many.")
    keep = [r for r in reset if "TCPKeepAlive" in r["after"]["counters"] and r["server_keepalive"]
            and not r["server_idle_timeout_s"]]
    bare = [r for r in runs if not r["server_keepalive"]]
    if keep:
        source = (ROOT / "echo_reuseport.py").read_text()
        constant = lambda name: int(re.search(r"^{} = (\d+)".format(name), source, re.M).group(1))
        said.append("echo_reuseport.py turns TCP keepalive on: a connection quiet {} s is probed up to {} times, {} s "
                    "apart, and reset when none is answered. Without the idle timeout, retransmitted segments "
                    "(RetransSegs) rose by {} against {} aborts, while the input queues, where loopback's packets "
                    "wait (`net.core.netdev_max_backlog`: {:,} a CPU), dropped {} packets. Lost probes, or lost "
                    "answers, fit these resets; no counter here says which packets were dropped.".format(
                        constant("KEEPALIVE_IDLE"), constant("KEEPALIVE_COUNT"), constant("KEEPALIVE_INTERVAL"),
                        listing("{:,}".format(rise(r, "RetransSegs")) for r in keep),
                        listing("{:,}".format(rise(r, "TCPAbortOnTimeout")) for r in keep),
                        keep[0]["netdev_max_backlog"], listing("{:,}".format(rise(r, "softnet_dropped"))
                                                               for r in keep)))
        clean = lambda rs: rs and not any(kinds(r).get("reset") or rise(r, "softnet_dropped") for r in rs)
        longer = [r for r in runs if r["server_keepalive"] and r["netdev_max_backlog"] > keep[0]["netdev_max_backlog"]]
        if clean(bare):
            said.append("Without the server's keepalive (bench/million.py --no-keepalive: its setsockopt() ignores "
                        "SO_KEEPALIVE), nothing was reset and no packet dropped.")
        if clean(longer):
            said.append("With keepalive on and the input queues {:,} packets a CPU (bench/million.py "
                        "--netdev-max-backlog, as root), nothing was reset and no packet dropped either, though the "
                        "kernel sent {} keepalive probes: the resets were probes, or their answers, dropped in the "
                        "input queue of one 2-core machine that holds both ends of a million connections.".format(
                            longer[0]["netdev_max_backlog"], listing("{:,}".format(rise(r, "TCPKeepAlive"))
                                                                    for r in longer)))
    best = max(runs, key=lambda r: r["results"]["held_connections"])
    f = best["results"]
    said.append("Held ({:,} at once), the server took {} MiB ({} KiB a connection), client.py {} MiB, and the "
                "kernel's socket slabs {:.1f} GiB (both ends).".format(
                    f["held_connections"], held.mib_text(f["server_memory_held_kib"]),
                    held.kib_text(f["server_kib_per_held"]), held.mib_text(f["client_memory_kib"]),
                    f["kernel_slab_held_kib"] / (1 << 20)))
    return {"held_million": "\n".join(lines + [""] + [" ".join(said)])}


def held_table(servers, record):
    """Each server at the most it held: its KiB a held connection (server, kernel), memory, connect phase, and what
    stopped it at the next size."""
    lines = ["| server | the most held here | KiB a held connection: server | kernel (both ends) | server, at {:,} held "
             "| server memory held, MiB | client.py's memory, MiB | connected in, s | the next size |".format(held.HELD),
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for s in servers:
        r = s["row"] or {}
        n, why = s["stopped"] or (None, None)
        lines.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            " ".join(filter(None, [s["server"], s["flags"]])),
            "none of {:,}".format(n) if s["held"] is None else "{:,}".format(s["held"]),
            held.kib_text(r.get("server_kib_per_held")), held.kib_text(r.get("kernel_kib_per_held")),
            held.kib_text(s["sizes"].get(held.HELD, {}).get("server_kib_per_held")),
            held.mib_text(r.get("server_memory_held_kib")), held.mib_text(r.get("client_memory_kib")),
            "-" if r.get("connect_phase_s") is None else "{:.1f}".format(r["connect_phase_s"]),
            "-" if n is None else "{:,}: {}".format(n, "not run: " + why.split(":")[0]
                                                    if s["server"] in record.get("not_run", {}) else
                                                    held.short_why(why))))
    return "\n".join(lines)


def measured_estimates(v):
    """The values v with client.py's estimate of what a forked process costs ("about 1 MB each", its words for
    echo_fork.py's limit, kept in the records of the other parts) replaced by what bench/held.py measured, where it
    did: linked to the section that measured it, but within it."""
    fork = next((s for s in held.most_held(load("held") or {"runs": []}) if s["server"] == "echo_fork.py"
                 and s["row"] and s["row"].get("server_kib_per_held") is not None), None)
    if fork is None:
        return v
    words = lambda link: "{} KiB each ({} at {:,} held)".format(held.kib_text(fork["row"]["server_kib_per_held"]),
                                                                 link and "[measured](#what-a-held-client-costs)" or
                                                                 "measured", fork["held"])
    return {name: re.sub(r"about \d+(?:\.\d+)? MB each", words(not name.startswith("held_")), value)
            if isinstance(value, str) else value for name, value in v.items()}


def n_text(value):
    return "-" if value is None else "{:,.0f}".format(value)


def measured_on(name, meta):
    """A chart's line on where a part was measured: its record's machine, when, and its command."""
    part = meta["parts"].get(name, {})
    return "{}, {}, by {}".format((load(name) or {}).get("machine") or meta.get("machine"), part.get("when", "-"),
                                  (part.get("commands") or ["-"])[0])


def spread_note():
    """results.svg's line on how far single runs of its load moved (the spread part), as its own records keep
    no spread."""
    msgs, cpu = spread_moves()
    if not cpu:
        return "How far single runs move was not measured in this run."
    return "Single runs of this load moved so (the spread part, {} runs, the fastest over the slowest): messages " \
        "per server CPU-second {}, msgs/s {} ({}).".format(len(load("spread") or []), listing(
            "{:.2f}x".format(cpu[s]) for s in sorted(cpu)), listing("{:.2f}x".format(msgs[s]) for s in sorted(cpu)),
            listing(sorted(cpu)))


def render(to):
    """RESULTS.md, SWEEPS.md, results.svg and openloop.svg from bench/results/, written into the folder to, held.svg
    from bench/held.py's records where they are kept, and timelines.svg and stall.svg from the traces kept there
    (bench/timelines.py's)."""
    meta = load("meta") or {"parts": {}}
    v = values(meta)
    text = (ROOT / "bench" / "RESULTS.template.md").read_text().format(**measured_estimates(v))
    (to / "RESULTS.md").write_text(text.rstrip() + "\n")
    sweep_list = sweeps("openloop")
    if sweep_list:
        lines = draw.sweeps_markdown(sweep_list)
        first = next(i for i, line in enumerate(lines) if line.startswith("#### "))
        (to / "SWEEPS.md").write_text("\n".join(
            ["# The open-loop sweep, step by step", "", "Each server's steps of the sweep that "
             "[RESULTS.md](RESULTS.md#open-loop-the-connection-rate) summarizes, from the same run ({}). {}.".format(
                 meta["parts"].get("openloop", {}).get("when", v["when"]), client.knee_rule_text().capitalize()),
             ""] + lines[first:]).rstrip() + "\n")
        (to / "openloop.svg").write_text(draw.chart([], sweep_list, measured_on("openloop", meta)))
    article = tables("article")
    if article:
        (to / "results.svg").write_text(draw.chart(list(article.values()), [], measured_on("article", meta),
                                                   [spread_note()]))
    held_record = load("held")
    if held_record:
        (to / "held.svg").write_text(draw.held_svg(held_record))
    timelines.draw_pictures(to)  # timelines.svg and stall.svg, from bench/timelines.py's traces where they are kept


if __name__ == "__main__":
    sys.exit(main())
