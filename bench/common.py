# SPDX-License-Identifier: 0BSD
"""What the benchmarks share: client.py (loaded from its file) and its counter of a server's CPU, a client.py
run's figures, messages per server CPU-second with server and client pinned to a core each, a server file at
a git revision, and a table printed as it is measured. It imports nothing from tests/; the scripts that start
servers with the tests' harness (tests/helpers.py's Server) find it through the one path set here."""
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT / "tests"))  # for the scripts' `from helpers import Server`; never used here


def load_client():
    """client.py as a module, loaded from its file (the same module wherever it was imported first)."""
    if "client" not in sys.modules:
        spec = importlib.util.spec_from_file_location("client", ROOT / "client.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["client"] = module
        spec.loader.exec_module(module)
    return sys.modules["client"]


client = load_client()


def group_cpu_seconds(pgid):
    """The CPU seconds that process group pgid (a server and every process it started) has used so far:
    client.py's group_cpu(), schedstat's nanoseconds for live threads, ticks for those that have exited."""
    return client.group_cpu(pgid).seconds

SERVER_CORE, CLIENT_CORE = sorted(os.sched_getaffinity(0))[:2]  # the server on one, client.py on the other
PIN_SERVER = "import os; os.sched_setaffinity(0, {{{}}})".format(SERVER_CORE)  # a Server prelude: on SERVER_CORE


def client_figures(proc, timeout, meanwhile=None):
    """What a `client.py ... --json` started with Popen (in a session of its own) prints:
    meanwhile() runs first, while it measures; past timeout, or if anything fails, its
    process group is killed. {"failed": why} when it printed nothing."""
    out = err = ""
    try:
        if meanwhile:
            meanwhile()
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"failed": "client.py did not finish in {:g} s".format(timeout)}
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    try:
        return json.loads(out)
    except ValueError:
        return {"failed": "client.py printed no figures: " + err.strip()[-200:]}


def pinned_client(port, flags):
    """client.py --json (--procs 1, pinned to CLIENT_CORE, in a session of its own) with flags against
    port, started; read it with client_figures()."""
    return subprocess.Popen([sys.executable, str(ROOT / "client.py"), "--port", str(port), "--procs", "1",
                             "--json", *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: os.sched_setaffinity(0, {CLIENT_CORE}))


def pinned_figures(server_pid, port, flags, label, timeout=600):
    """Run client.py pinned (pinned_client()) with flags against port: its figures, and the CPU-seconds
    of the server's process group meanwhile (group_cpu_seconds(): threads that have ended included).
    Any error or lost message ends the benchmark, named by label."""
    before = group_cpu_seconds(server_pid)
    figures = client_figures(pinned_client(port, flags), timeout)
    used = group_cpu_seconds(server_pid) - before
    if "failed" in figures or figures["errors"] or figures["messages"] != figures["expected"]:
        sys.exit("{}: {}".format(label, figures.get("failed") or "{} errors, {} of {} messages".format(
            figures["errors"], figures["messages"], figures["expected"])))
    return figures, used


def messages_per_cpu_second(server_pid, port, flags, label):
    """Run client.py (--procs 1, pinned to CLIENT_CORE) with flags against port; the messages echoed
    per CPU-second of the server's process group. Any error or lost message ends the benchmark."""
    figures, used = pinned_figures(server_pid, port, flags, label)
    return figures["messages"] / used


def interpreter_name(where):
    """An interpreter as the documents name it, without this machine's paths: "pyenv's 3.11.7",
    "python3.15 in a chroot", or its file's name."""
    if where.startswith("chroot:"):
        return "{} in a chroot".format(os.path.basename(where.rsplit(":", 1)[1]))
    pyenv = re.search(r"/\.pyenv/versions/([^/]+)/", where)
    return "pyenv's {}".format(pyenv.group(1)) if pyenv else os.path.basename(where)


def without_paths(text):
    """bench/python_versions.py's text with no path of the machine it ran on: each --python's interpreter
    as PATH (chroot:ROOT:PATH), each interpreter named in parentheses by interpreter_name()."""
    text = re.sub(r"(--python [^=\s]+=)(chroot:)?[^\s`]+",
                  lambda m: m.group(1) + ("chroot:ROOT:PATH" if m.group(2) else "PATH"), text)
    return re.sub(r"\(`?((?:chroot:|/)[^`)\s]*)`?\)", lambda m: "({})".format(interpreter_name(m.group(1))), text)


def file_at(revision, script, folder):
    """Write the repository's script as it was at revision into folder; return its path."""
    path = Path(folder) / script
    path.write_bytes(subprocess.run(["git", "-C", str(ROOT), "show", "{}:{}".format(revision, script)],
                                    capture_output=True, check=True).stdout)
    return path


def table(head, rows, markdown=None):
    """Print the head lines, then each Markdown row as it comes (rows is measured as it is read);
    with markdown, also write the whole table to that file."""
    lines = list(head)
    print("\n".join(lines), flush=True)
    for line in rows:
        print(line, flush=True)
        lines.append(line)
    if markdown:
        Path(markdown).write_text("\n".join(lines) + "\n")
