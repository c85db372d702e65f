# SPDX-License-Identifier: 0BSD
"""What the interpreter changes: messages per server CPU-second of the same server files on several
Pythons, the same load from the machine's python3, the server pinned to one core and the client to
the other, runs interleaved.

    python3 bench/python_versions.py --python 3.11=$HOME/.pyenv/versions/3.11.7/bin/python3 \\
        --python 3.15=chroot:/var/cache/echo-ci/debian-amd64:/usr/bin/python3.15 [--rounds 5] \\
        [--messages 500000] [--servers echo_epoll.py,...] [--json]

LABEL=PATH runs the server as `PATH echo_x.py --port 0 -q`; LABEL=chroot:ROOT:PATH as `chroot ROOT
PATH /tmp/echo-bench-XXXX/echo_x.py --port 0 -q` (root only; Debian's interpreters are in the root
.ci/debian_python makes), the file copied into ROOT/tmp/echo-bench-XXXX, removed at the end. Nothing
is mounted: the servers open only /dev/null (their spare descriptor), a device node debootstrap makes
in the root; without /proc, glibc's malloc reads no overcommit_memory (0 here: the same behaviour) and
the interpreter no /proc/self/maps (the main thread's stack bounds); the server is pinned before chroot
execs it and its CPU time is read from the host's /proc; chroot keeps the host's network namespace, so
the client reaches it on 127.0.0.1. The load is deadline_cost.py's article-100 (100 clients x 100
connections x 50 messages of 32 B); --messages 10000 makes it 2 connections a client for a quick check. Servers run with -q, MALLOC_MMAP_THRESHOLD_=131072 and no
other environment. Each round runs every interpreter, the order rotating; the table gives each
interpreter's median and the median (and range) of the per-round ratios to the first interpreter. --json prints
the record instead (the machine, each interpreter's build, each server's figures a round, medians and ratios; no
path of this machine), which bench/regenerate.py keeps as bench/results/pythons.json.
Every wait is bounded; each server's process group is killed whatever happens.
"""
import argparse
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile

from common import CLIENT_CORE, SERVER_CORE, TIMEOUT, Server, interpreter_name, provenance, run_client, without_paths
from deadline_cost import SCENARIOS

SERVER_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "LANG": "C.UTF-8",
              "MALLOC_MMAP_THRESHOLD_": "131072"}
PER_CONNECT = 100 * 50  # article-100's messages per --connects: 100 clients x 50 messages
# An interpreter as it reports itself, and whether it is free-threaded and its GIL was on (as the servers run it).
FREE_THREADED = "bool(sysconfig.get_config_var('Py_GIL_DISABLED')), getattr(sys, '_is_gil_enabled', lambda: True)()"
BUILD = ("import json, platform, sys, sysconfig; print(json.dumps([platform.python_implementation(), "
         "platform.python_version(), sysconfig.get_config_var('CONFIG_ARGS') or '', "
         "sysconfig.get_config_var('PY_CFLAGS') or '', " + FREE_THREADED + "]))")


def gil_words(free, gil):
    """", free-threaded, GIL off" for a free-threaded build (platform.python_version() cannot tell 3.14t from 3.14)."""
    return ", free-threaded, GIL {}".format("on" if gil else "off") if free else ""


class Interpreter:
    def __init__(self, spec, stack):
        self.label, _, where = spec.partition("=")
        if where.startswith("chroot:"):
            _, root, path = where.split(":", 2)
            self.command = [shutil.which("chroot") or "/usr/sbin/chroot", root, path]
            self.folder = tempfile.mkdtemp(prefix="echo-bench-", dir=os.path.join(root, "tmp"))
            self.inside = "/tmp/" + os.path.basename(self.folder)  # the folder as the server sees it
        else:
            self.command = [where]
            self.folder = self.inside = tempfile.mkdtemp(prefix="echo-bench-")
        stack.callback(shutil.rmtree, self.folder, ignore_errors=True)
        self.where = where

    def build(self):
        """'CPython 3.11.7, no PGO/LTO in configure (CONFIG_ARGS: no --enable-optimizations, no --with-lto), -O3',
        as it reports itself. Debian's changelog says its packages add PGO and LTO outside configure: not shown."""
        proc = subprocess.run([*self.command, "-c", BUILD], capture_output=True, text=True, timeout=TIMEOUT,
                              env=SERVER_ENV)
        if proc.returncode:
            sys.exit("{}: cannot run {}: {}".format(self.label, self.where, proc.stderr.strip()[-300:]))
        name, version, config, cflags, free, gil = json.loads(proc.stdout)
        flags = ["{}{}".format("" if flag in config else "no ", flag) for flag in ("--enable-optimizations",
                                                                                  "--with-lto")]
        levels = re.findall(r"(?<!\S)-O\S*", cflags)
        built = "optimized" if "--enable-optimizations" in config else "no PGO/LTO in configure"
        return "{} {}{}, {} (CONFIG_ARGS: {}), {}".format(name, version, gil_words(free, gil), built, ", ".join(flags),
                                                          levels[-1] if levels else "no -O")

    def run(self, script, flags):
        """Messages per server CPU-second for one run of client.py flags against the server script."""
        # chroot execs the interpreter: the same pid, which leads the server's process group.
        server = Server(script, self.folder, ["-q"], wrap=self.command[:-1], cores=[SERVER_CORE],
                        interpreter=self.command[-1:], inside=self.inside, env=SERVER_ENV)
        try:
            try:
                server.wait_for_port()
            except AssertionError as e:
                sys.exit("{} {}: {}".format(self.label, script, e))
            run = run_client(["--port", str(server.port), "--procs", "1", *flags], [CLIENT_CORE], server.pid,
                             label="{} {}".format(self.label, script))
            return run.figures["messages"] / run.server_cpu_s
        finally:
            server.kill()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", action="append", required=True, metavar="LABEL=PATH",
                        help="an interpreter: PATH or chroot:ROOT:PATH; the first is the one ratios are to")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--messages", type=int, default=500000,
                        help="messages a run, a multiple of {} (default: %(default)s)".format(PER_CONNECT))
    parser.add_argument("--servers",
                        default="echo_epoll.py,echo_selectors.py,echo_asyncio_protocol.py,echo_threadpool.py")
    parser.add_argument("--json", action="store_true", help="print the record as JSON (the table goes to stderr)")
    args = parser.parse_args()
    if args.messages < PER_CONNECT or args.messages % PER_CONNECT:
        parser.error("--messages: a multiple of {}".format(PER_CONNECT))
    flags = list(SCENARIOS["article-100"])
    flags[flags.index("--connects") + 1] = str(args.messages // PER_CONNECT)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))  # the finally clauses still run
    os.environ["MALLOC_MMAP_THRESHOLD_"] = "131072"  # the client's, as in deadline_cost.py
    with contextlib.ExitStack() as stack:
        pythons = [Interpreter(spec, stack) for spec in args.python]
        # No path of this machine in the record (RESULTS.md quotes it): see without_paths() and interpreter_name().
        # The machine, the client's Python (free-threaded or not, the GIL on or off) and Linux: provenance()'s.
        record = {"command": without_paths("python3 bench/python_versions.py " + shlex.join(sys.argv[1:])),
                  **provenance(), "client_python": interpreter_name(sys.executable), "load": " ".join(flags),
                  "rounds": args.rounds,
                  "pythons": [{"label": p.label, "build": p.build(), "where": interpreter_name(p.where)}
                              for p in pythons], "servers": []}
        table = sys.stderr if args.json else sys.stdout
        print("\n".join(head(record)), file=table, flush=True)
        first = pythons[0]
        for script in args.servers.split(","):
            figures = {python.label: [] for python in pythons}
            for round_ in range(args.rounds):
                turn = round_ % len(pythons)
                for python in pythons[turn:] + pythons[:turn]:
                    figures[python.label].append(python.run(script, flags))
            ratios = {p.label: [b / a for a, b in zip(figures[first.label], figures[p.label])] for p in pythons[1:]}
            record["servers"].append({"server": script, "per_round": figures,
                                      "median": {label: statistics.median(f) for label, f in figures.items()},
                                      "ratio": {label: {"median": statistics.median(r), "min": min(r), "max": max(r)}
                                                for label, r in ratios.items()}})
            print(row(record["servers"][-1]), file=table, flush=True)
    if args.json:
        print(json.dumps(record, indent=1))


def head(record):
    """The record's words and its table's head, as RESULTS.md quotes them."""
    labels = [p["label"] for p in record["pythons"]]
    # A record kept before provenance() (bench/results/pythons.json) names the CPU, cores and client by hand.
    machine = "{machine} {linux}; client: {client_python}" if "machine" in record else \
        "{cpu}, {cores} cores, Linux {linux}; client: {client} ({client_python})"
    return ["Command: `{}`".format(record["command"]), "",
            "Machine: {}, `client.py {}`".format(machine.format(**record), record["load"]), ""] + [
        "- {}: {} ({})".format(p["label"], p["build"], p["where"]) for p in record["pythons"]] + ["",
        "| server | " + " | ".join(["{} (msgs per server CPU-s)".format(labels[0])] + labels[1:] + [
            "{} / {} (median of rounds, range)".format(label, labels[0]) for label in labels[1:]]) + " |",
        "|---|" + "---:|" * (2 * len(labels) - 1)]


def row(s):
    return "| {} | {} |".format(s["server"], " | ".join(["{:,.0f}".format(m) for m in s["median"].values()] + [
        "{median:.3f} ({min:.3f}-{max:.3f})".format(**r) for r in s["ratio"].values()]))


def markdown(record):
    return "\n".join(head(record) + [row(s) for s in record["servers"]])


if __name__ == "__main__":
    main()
