# SPDX-License-Identifier: 0BSD
"""bench/draw.py: client.py --all --json's records drawn as Markdown and SVG (what client.py --markdown and --svg
wrote before they moved there), and the old flags answered in one line."""
import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from helpers import ROOT, TIMEOUT, client, client_json, echo_processes

import draw  # bench/, which helpers put on the path

SVG = "{http://www.w3.org/2000/svg}"


def draw_command(*args, stdin=None):
    """python3 bench/draw.py with args: its CompletedProcess."""
    return subprocess.run([sys.executable, str(ROOT / "bench" / "draw.py"), *args], input=stdin,
                          capture_output=True, text=True, timeout=TIMEOUT * 3)


@pytest.mark.slow
def test_all_writes_in_markdown_the_table_figures_its_json_rows_carry(tmp_path, client_module):
    """--all's rows are records too: the Markdown table has a column for each table figure the JSON rows
    carry (the workers' CPU only where a server has a pool of workers), and nothing else."""
    markdown = tmp_path / "results.md"
    measured, _ = client_json("--all", "--servers", "epoll,reuseport", "--clients", "3", "--connects", "1",
                              "--messages", "3", "--repeat", "1", "--procs", "1", timeout=120)
    drawn = draw_command("-", "--markdown", str(markdown), stdin=json.dumps(measured))  # as from a pipe
    assert drawn.returncode == 0 and not drawn.stderr, drawn.stderr
    rows = measured["tables"][0]["rows"]
    declared = client_module.figures_of(client_module.Run)
    carried = [(name, m) for name, m in declared if any(row.get(name) is not None for row in rows)]
    assert {name for name, m in declared if not m["when"]} <= {name for name, _ in carried}
    head = next(line for line in markdown.read_text().splitlines() if line.startswith("| rank | server |"))
    assert head.strip("| ").split(" | ")[2:] == [client_module.column(m) for _, m in carried if m["table"]]
    if sys.platform.startswith("linux"):  # echo_reuseport.py's workers, measured from outside
        assert "CPU per worker s" in head


def test_the_bars_draw_messages_per_server_cpu_second_best_first(client_module):
    """The closed-loop chart draws the figure the README says to read first, the cheapest server on top."""
    c = client_module
    rows = [c.Run(server="echo_fast.py", msgs_per_s=900.0, msgs_per_server_cpu_s=100.0),
            c.Run(server="echo_cheap.py", msgs_per_s=100.0, msgs_per_server_cpu_s=900.0),
            c.Run(server="echo_broken.py", failed="it failed")]
    svg = draw.chart([{"scenario": "article-100", "workload": c.Workload(), "server_work": 0, "rows": rows}], [])
    assert "messages per server CPU-second" in svg and ">900<" in svg
    assert svg.index("echo_cheap.py") < svg.index("echo_fast.py") < svg.index("echo_broken.py")


@pytest.mark.slow
def test_sweep_of_every_server_draws_knees_tables_and_three_graphs(tmp_path, client_module):
    markdown, chart, records = tmp_path / "sweep.md", tmp_path / "sweep.svg", tmp_path / "sweep.json"
    servers = ("echo_epoll.py", "echo_selectors.py")
    before = echo_processes()
    result = client("--all", "--servers", "epoll,selectors", "--rate", "100:200:100", "--duration", "1",
                    "--procs", "1", "--json", timeout=120)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert not echo_processes() - before, "client.py --all stops every server it started"
    records.write_text(result.stdout)
    drawn = draw_command(str(records), "--markdown", str(markdown), "--svg", str(chart))
    assert drawn.returncode == 0 and not drawn.stderr, drawn.stderr
    measured = json.loads(result.stdout)
    sweeps = {sweep["server"]: sweep for sweep in measured["sweeps"]}
    assert set(sweeps) == set(servers)
    for sweep in sweeps.values():
        assert not sweep["failed"] and not sweep["stopped_early"], sweep
        assert [step["offered_rate"] for step in sweep["steps"]] == [100, 200]
        assert sweep["knee"] in (100, 200), sweep  # a few hundred connections/s is easy for either
    progress = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(progress) >= 4, "one progress line per step"
    lines = markdown.read_text().splitlines()
    # Each server's steps: a column per table figure its step records declare, and the JSON carries them.
    columns = [client_module.column(m) for _, m in client_module.figures_of(client_module.Step) if m["table"]]
    heads = [line.strip("| ").split(" | ") for line in lines if line.startswith("| offered/s |")]
    assert heads == [columns] * len(servers), heads
    assert all(set(name for name, m in client_module.figures_of(client_module.Step) if not m["when"]) <= set(step)
               for sweep in sweeps.values() for step in sweep["steps"])
    for name, sweep in sweeps.items():
        assert any(name in line and "knee" in line and "{:,.0f}".format(sweep["knee"]) in line
                   for line in lines), "the markdown names {}'s knee".format(name)
    root = ET.parse(str(chart)).getroot()  # well-formed
    texts = " ".join("".join(element.itertext()) for element in root.iter(SVG + "text"))
    assert all(name[len("echo_"):-len(".py")] in texts for name in servers), "a legend names each server"
    for graph in ("reply", "response", "error"):
        assert graph in texts.lower(), "a graph of {} against offered rate".format(graph)
    lines_drawn = list(root.iter(SVG + "polyline"))
    assert len(lines_drawn) >= 3 * len(servers), "a line per server in each of the three graphs"


@pytest.mark.parametrize("args", [["--all", "--markdown", "r.md"], ["--all", "--svg", "r.svg"], ["--all", "--svg"],
                                  ["--port", "7", "--markdown=r.md"]])
def test_the_old_drawing_flags_say_in_one_line_where_they_went(args):
    result = client(*args, timeout=TIMEOUT)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and "bench/draw.py" in result.stderr, result.stderr


def test_draw_says_in_one_line_what_it_cannot_draw(tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "empty.json").write_text("{}")
    for args in ([str(tmp_path / "bad.json"), "--svg", "x.svg"], [str(tmp_path / "empty.json"), "--svg", "x.svg"],
                 [str(tmp_path / "missing.json"), "--markdown", "x.md"], [str(tmp_path / "empty.json")]):
        result = draw_command(*args)
        assert result.returncode == 2 and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, args
        assert "error" in result.stderr, result.stderr
    assert not list(tmp_path.glob("x.*"))


def test_the_markdown_names_the_machine_that_measured_and_the_servers_skipped(client_module):
    results = draw.from_json({"machine": "Some CPU, 2 cores, Python 3.11.7, Linux", "tables": [], "sweeps": [],
                              "skipped": {"echo_epoll.py": "echo_epoll.py needs epoll, which this system lacks"}})
    text = draw.markdown(results)
    assert text.splitlines()[0] == "Measured by `python3 client.py --all` on Some CPU, 2 cores, Python 3.11.7, Linux."
    assert "- echo_epoll.py needs epoll, which this system lacks" in text
