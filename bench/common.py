"""What the benchmarks share beyond tests/helpers.py: a client.py run's figures, and a table printed as it
is measured."""
import json
import os
import signal
import subprocess
from pathlib import Path


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
