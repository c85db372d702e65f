# SPDX-License-Identifier: 0BSD
"""RESULTS.md, SWEEPS.md, results.svg and openloop.svg are what bench/regenerate.py writes from the
measurements kept in bench/results/: no figure typed by hand, none left from an older run, and the
tables written by client.py's own records. Nothing is measured here (--render)."""
import json
import statistics
import subprocess
import sys
from pathlib import Path

from helpers import held_record, held_row

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = ("RESULTS.md", "SWEEPS.md", "results.svg", "openloop.svg")
sys.path.insert(0, str(ROOT / "bench"))


def test_the_documents_are_what_the_kept_measurements_give(tmp_path):
    """Every document, and each picture of kept traces (bench/timelines.py's): there exactly where its traces
    are kept, and what they give."""
    import regenerate
    subprocess.run([sys.executable, str(ROOT / "bench" / "regenerate.py"), "--render", "--to", str(tmp_path)],
                   cwd=str(ROOT), check=True, timeout=60)
    for name in DOCUMENTS:
        assert (tmp_path / name).read_text() == (ROOT / name).read_text(), \
            "{} is not what `python3 bench/regenerate.py --render` writes: regenerate it".format(name)
    drawn = (ROOT / "bench" / "results" / "held.json").exists()  # held.svg: from bench/held.py's records
    assert (ROOT / "held.svg").exists() == drawn == (tmp_path / "held.svg").exists(), \
        "held.svg is drawn from bench/results/held.json: both or neither"
    if drawn:
        assert (tmp_path / "held.svg").read_text() == (ROOT / "held.svg").read_text(), \
            "held.svg is not what `python3 bench/regenerate.py --render` writes: regenerate it"
    for name, folder in regenerate.TRACED.items():
        kept = (folder / "meta.json").exists()
        assert (ROOT / name).exists() == kept == (tmp_path / name).exists(), \
            "{} is drawn from {}: both or neither".format(name, folder.relative_to(ROOT))
        if kept:
            assert (tmp_path / name).read_text() == (ROOT / name).read_text(), \
                "{} is not what `python3 bench/regenerate.py --render` writes: regenerate it".format(name)


def test_every_part_was_measured_and_says_where():
    import regenerate
    meta = json.loads((ROOT / "bench" / "results" / "meta.json").read_text())
    assert sorted(meta["parts"]) == sorted(regenerate.PARTS), "measure the missing parts: --only PART"
    for name, part in meta["parts"].items():
        assert part["commit"] and part["when"] and part["commands"] and part["linux"], name
    assert meta["machine"] and meta["cores"]



def test_no_path_of_the_measuring_machine_is_in_the_results():
    """RESULTS.md and SWEEPS.md name interpreters and folders by what they are, not by where they lay on the
    machine that measured (bench/python_versions.py prints them so; regenerate.py renders older records so)."""
    import re
    for name in ("RESULTS.md", "SWEEPS.md"):
        found = re.findall(r"(?:/(?:root|home|var|usr|opt|tmp|work|srv|mnt)/|\.pyenv|[A-Za-z]:\\)\S*",
                           (ROOT / name).read_text())
        assert not found, "{} names paths of the machine it was measured on: {}".format(name, found)


def test_the_bench_scripts_usage_speaks_of_the_pack():
    """bench/*.py's docstrings (their usage lines above all) name no lock file of the developers' and no home
    folder of the machine they were written on: a reader runs them as written on theirs."""
    import ast
    import re
    for path in sorted((ROOT / "bench").glob("*.py")):
        docstrings = [ast.get_docstring(node, clean=False) or "" for node in ast.walk(ast.parse(path.read_text()))
                      if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        found = re.findall(r"/tmp/bench\.lock|/root/\S*|/home/\S*", "\n".join(docstrings))
        assert not found, "bench/{}'s docstrings name paths of a developer's machine: {}".format(path.name, found)


def test_a_record_of_bench_names_its_machine_and_python_through_provenance():
    """bench/common.py's provenance() is the one source of a record's machine, Python and Linux (client.machine()
    says whether a free-threaded build ran with the GIL): no other script of bench/ asks platform, os or client.py
    for them itself. An interpreter asked about itself in a subprocess (the servers' Python) is not this one."""
    import ast
    own = {("platform", "python_version"), ("platform", "release"), ("platform", "python_implementation"),
           ("platform", "processor"), ("os", "cpu_count"), ("client", "cpu_model"), ("client", "machine"),
           ("sys", "_is_gil_enabled")}
    asked = ["{}:{} {}.{}".format(path.name, node.lineno, node.value.id, node.attr)
             for path in sorted((ROOT / "bench").glob("*.py")) if path.name != "common.py"
             for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Attribute)
             and isinstance(node.value, ast.Name) and (node.value.id, node.attr) in own]
    assert not asked, asked


def test_bench_draws_with_client_py_through_its_api_alone():
    """bench/draw.py and bench/regenerate.py read client.py's --json output back and write figures, tables and
    charts with what client.py declares for them (client.API), each named in CLIENT.md and each function
    documented, and with nothing else of client.py."""
    import inspect
    import re
    sys.path.insert(0, str(ROOT))
    import client
    for script in ("draw.py", "regenerate.py", "timelines.py"):
        used = set(re.findall(r"\bclient\.([A-Za-z_]\w*)", (ROOT / "bench" / script).read_text())) - {"py", "API"}
        assert used <= set(client.API), (script, sorted(used - set(client.API)))
        assert used or script == "timelines.py", script  # timelines.py names the machine through provenance()
    declared = (ROOT / "CLIENT.md").read_text().split("## client.py as a module")[1].split("\n## ")[0]
    assert all("`{}".format(name) in declared for name in client.API), [
        name for name in client.API if "`{}".format(name) not in declared]
    assert all(getattr(client, name).__doc__ for name in client.API if inspect.isfunction(getattr(client, name)))


def test_the_header_names_each_sitting_the_parts_were_measured_in():
    """Parts measured again later (--only) are not one span: "from 13:55 to 14:53" would hide a gap."""
    import regenerate
    part = lambda started, when, day="24": {"started": "2026-11-{} {} UTC".format(day, started),
                                            "when": "2026-11-{} {} UTC".format(day, when), "seconds": 60}
    one = [part("13:55", "13:58"), part("13:58", "14:07"), part("14:09", "14:20")]  # gaps of 5 minutes or less
    assert regenerate.sittings(one) == "from 2026-11-24 13:55 UTC to 2026-11-24 14:20 UTC"
    two = [part("14:17", "14:53"), part("13:55", "14:07")]
    assert regenerate.sittings(two) == "in 2 sittings (2026-11-24 13:55 UTC to 14:07 UTC and " \
                                       "2026-11-24 14:17 UTC to 14:53 UTC)"
    midnight = [part("23:50", "23:58"), part("00:01", "00:20", day="25")]  # one sitting across midnight
    assert regenerate.sittings(midnight) == "from 2026-11-24 23:50 UTC to 2026-11-25 00:20 UTC"
    # A part without its start began its seconds before its end: a long part right after another is no gap.
    unstarted = [part("13:00", "13:10"), {"when": "2026-11-24 13:40 UTC", "seconds": 1800}]
    assert regenerate.sittings(unstarted) == "from 2026-11-24 13:00 UTC to 2026-11-24 13:40 UTC"
    assert regenerate.sittings([part("13:00", "13:00")]) == "at 2026-11-24 13:00 UTC"


def test_the_header_names_the_kernel_each_part_ran_on():
    """A part measured again on a machine whose kernel has changed does not give its kernel to the others."""
    import regenerate
    parts = {"article": {"linux": "6.1-a"}, "bulk": {"linux": "6.1-a"}, "timelines": {"linux": "6.2-b"},
             "tls": {"linux": "6.2-b"}, "soak": {"linux": "6.1-a"}}
    assert regenerate.kernels(parts) == "6.1-a and, for timelines and tls, 6.2-b"
    assert regenerate.kernels({"article": {"linux": "6.1-a"}}) == "6.1-a"


def test_the_first_answer_follows_the_figures_not_a_fixed_sentence():
    import regenerate
    assert "about the same" in regenerate.select_headline(8.8, 8.4)  # 5 % apart: within the runs' spread
    assert "select() costs 20% less" in regenerate.select_headline(10.0, 8.0)
    assert "epoll costs 20% less" in regenerate.select_headline(8.0, 10.0)
    assert "Not measured" in regenerate.select_headline(None, 8.0)
    # Where single runs were measured, their order decides: on both sides of 1 is about the same, however far
    # apart the medians; the same order in every run is a difference, however small.
    assert "about the same" in regenerate.select_headline(10.0, 8.0, [0.97, 1.3])
    assert "select() costs 3% less" in regenerate.select_headline(8.24, 8.0, [1.01, 1.04, 1.02])


def test_the_first_answer_says_how_its_cpu_was_counted():
    """Records counted in ticks keep the tick caveat; the nanosecond clock is named only where every row had it."""
    import regenerate
    row = lambda grain: regenerate.client.Run(server="echo_epoll.py", server_cpu_resolution_s=grain)
    assert "schedstat" in regenerate.counted_to([row(1e-9), row(1e-9)])
    for grains in ([None, 1e-9], [0.02, 1e-9], [None]):
        assert "10 ms ticks" in regenerate.counted_to([row(g) for g in grains])


def test_the_tests_import_the_benchmarks_harness_not_the_other_way_round():
    """bench/common.py is the harness bench/ shares (Server, the process readers, the waits), and tests/helpers.py
    imports it from there: no bench script imports tests/helpers.py or pytest, or puts tests/ on its path (the
    soak that tests/test_soak.py runs short is bench/soak.py's soak())."""
    import re
    for path in sorted((ROOT / "bench").glob("*.py")):
        text = path.read_text()
        assert not re.search(r"^\s*(from|import) (helpers|pytest)\b", text, re.M), path.name
        assert not re.search(r"sys\.path\.\w+\(.*\"tests\"", text), path.name


def test_what_to_read_first_follows_how_far_each_figure_moved():
    """The header's advice is chosen from the spread part's single runs: messages per server CPU-second first only
    where every server's moved less between runs than any server's msgs/s."""
    import regenerate
    msgs = {"echo_epoll.py": 1.57, "echo_select.py": 1.35}
    said = regenerate.spread_read(msgs, {"echo_epoll.py": 1.25, "echo_select.py": 1.24}, runs=7)
    assert said.startswith("Read **messages per server CPU-second** first")
    assert "msgs/s moved 1.35x to 1.57x between 7 single runs" in said and "less, 1.24x to 1.25x" in said
    said = regenerate.spread_read(msgs, {"echo_epoll.py": 1.40, "echo_select.py": 1.20}, runs=7)
    assert said.startswith("Read msgs/s and messages per server CPU-second together") and "no less" in said
    assert "not measured" in regenerate.spread_read({}, {}, runs=0)


def n1_load_first(runs):
    """The runs each cell of the 16-core table reads, and the runs it sets apart. pass1 gave every server N times
    its N=1 load, the thread servers' N=8 runs too; the later passes gave the thread servers the N=1 load at every N.
    Where a server has runs given its N=1 load at N > 1, the cell reads those, and the others are set apart."""
    chosen, apart = {}, {}
    for (shape, name, n), found in runs.items():
        base = {r["msgs_total"] for r in runs.get((shape, name, 1), []) if not r["errors"]}
        same = [r for r in found if r["msgs_total"] in base] if n > 1 else []
        chosen[shape, name, n] = same or found
        if same and len(same) < len(found):
            apart[shape, name, n] = [r for r in found if r not in same]
    return chosen, apart


def cell(shape, name, n, found):
    """A cell of the 16-core summary: the runs it reads, counted (those that hit the generator's bound too), the loads
    of those that finished, and their medians."""
    return dict({"shape": shape, "server": name, "n": n, "runs": len(found),
                 "bounded": sum(1 for r in found if r["errors"]),
                 "loads": sorted({r["msgs_total"] for r in found if not r["errors"]})},
                **{key: statistics.median(r[key] for r in found)
                   for key in ("msgs_per_s", "msgs_per_server_cpu_s", "client_cpu_s", "wall_s")})


def summary_of(folder):
    """What bench/results/scaling-16core/summary.json says, from the runs and the machine kept beside it: the runs
    with the pack's client.py as the load kept apart, under the shape "client.py long"; n1_load_first()'s cells."""
    runs = {}
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if "machine" not in r:
                shape = "client.py " + r["shape"] if "client-py" in path.name else r["shape"]
                runs.setdefault((shape, r["server"], r["n"]), []).append(r)
    chosen, apart = n1_load_first(runs)
    lscpu = {key: value.strip() for key, value in (line.split(":", 1) for line in (folder / "machine.txt").read_text(
        ).splitlines() if ":" in line)}
    first = json.loads((folder / "pass1.jsonl").read_text().splitlines()[0])["machine"]
    return {"machine": {"model": lscpu["Model name"], "cpus": lscpu["CPU(s)"],
                        "threads_per_core": lscpu["Thread(s) per core"], "hypervisor": lscpu["Hypervisor vendor"],
                        **{key: first[key] for key in ("kernel", "python", "server_cpus", "client_cpus")}},
            "cells": [cell(*key, found) for key, found in sorted(chosen.items())],
            "apart": [{"shape": shape, "server": name, "n": n, "runs": [
                {key: r[key] for key in ("msgs_total", "msgs_per_s", "errors")} for r in found]}
                for (shape, name, n), found in sorted(apart.items())]}


def test_the_16core_summary_is_what_its_runs_give():
    """regenerate.py renders the 16-core table and its sentences from summary.json, written once: it says what the
    runs and the machine kept beside it give (summary_of()), so a render need not read them again."""
    import regenerate
    kept = json.loads((regenerate.SCALING_16 / "summary.json").read_text())
    assert {key: kept[key] for key in ("machine", "cells", "apart")} == summary_of(regenerate.SCALING_16)


def test_the_16core_cells_read_the_runs_given_the_n1_load_where_there_are_any():
    """pass1 gave the thread servers' N=8 runs 8 times the N=1 load, the later passes the N=1 load: a cell reads the
    latter, says what its row was given, and the runs it leaves out are named, with whether they agree."""
    import regenerate
    run = lambda total, rate, errors=0: {"msgs_total": total, "msgs_per_s": rate, "errors": errors,
                                         "msgs_per_server_cpu_s": rate, "client_cpu_s": 1.0, "wall_s": 1.0}
    runs = {("long", "go", 1): [run(153600, 130000)], ("long", "go", 8): [run(1228800, 870000)],
            ("long", "thread", 1): [run(153600, 80000)], ("long", "thread", 8): [run(1228800, 48000), run(153600, 42000)],
            ("long", "threadpool", 1): [run(153600, 43000)],
            ("long", "threadpool", 8): [run(630860, 21000, errors=256), run(153600, 19500)]}
    chosen, apart = n1_load_first(runs)
    assert chosen["long", "thread", 8] == [run(153600, 42000)] and apart["long", "thread", 8] == [run(1228800, 48000)]
    assert chosen["long", "threadpool", 8] == [run(153600, 19500)]
    assert chosen["long", "go", 8] == runs["long", "go", 8] and ("long", "go", 8) not in apart
    cells = {key: cell(*key, found) for key, found in chosen.items()}
    assert regenerate.given({1: cells["long", "go", 1], 8: cells["long", "go", 8]}) == "153,600 x N"
    assert regenerate.given({1: cells["long", "thread", 1], 8: cells["long", "thread", 8]}) == "153,600 at every N"
    said = regenerate.set_apart(apart, cells)
    assert "given 8 times the N=1 load (1,228,800 messages)" in said and "with 630,860 done" in said
    assert "so the drop does not come from the load" in said
    cells["long", "thread", 1]["msgs_per_s"] = 45000  # a left-out run faster than its row's N=1: no longer said
    assert "the finding differs" in regenerate.set_apart(apart, cells)


def test_each_run_set_apart_from_the_16core_table_names_the_n1_figure_it_is_compared_with():
    """The sentence under the 16-core table sets each left-out run beside its N=1 msgs/s, given as a figure: the
    table has no row for some of them (echo_thread.py short), so "its row's" would point at nothing."""
    import regenerate
    machine, cells, apart = regenerate.scaling_16()
    said = regenerate.set_apart(apart, cells)
    shown = {(shape, name) for shape, name, _ in regenerate.SCALING_ROWS}
    assert apart and any((shape, name) not in shown for shape, name, _ in apart), "the case this test is about"
    for shape, name, n in apart:
        where = said.index("echo_{}.py {} at N={}:".format(name, {"long": "held", "short": "short"}[shape], n))
        clause = said[where:].split(";")[0]
        assert "{:,.0f} at N=1".format(cells[shape, name, 1]["msgs_per_s"]) in clause, clause
        assert ((shape, name) in shown) != ("a row the table does not show" in clause), clause


def kept(tmp_path, monkeypatch, **records):
    """regenerate.py reading its records from tmp_path, where each record is kept as its part's NAME.json."""
    import regenerate
    for name, record in records.items():
        (tmp_path / (name + ".json")).write_text(json.dumps(record))
    monkeypatch.setattr(regenerate, "RESULTS", tmp_path)
    return regenerate


def test_pin_is_the_one_place_a_process_is_pinned():
    """bench/common.py's pin() (and Server(cores=), which uses it) pins every process bench/ and the tests pin: no
    other script calls sched_setaffinity, nor hands a server a prelude that does."""
    call = "sched_setaffinity" + "("
    found = [path.relative_to(ROOT).as_posix() for path in sorted([*(ROOT / "bench").glob("*.py"),
                                                                   *(ROOT / "tests").glob("*.py")])
             if call in path.read_text() and path.name != "common.py"]
    assert not found, found
    assert (ROOT / "bench" / "common.py").read_text().count(call) == 1


def test_a_part_runs_its_commands_through_run_client_and_keeps_what_they_print(tmp_path, monkeypatch, capfd):
    """measure() runs a part's commands one after another as run_client() runs a measurement: what each prints is
    the record kept (the part's NAME.json), its stderr goes to ours, and a command that fails, or runs past
    COMMAND_LIMIT (stopped, its process group with it), is named in the part's failures; where any printed no
    figures, the part's record is kept as it was (a part's records are a list, in its commands' order)."""
    regenerate = kept(tmp_path, monkeypatch)
    say = "import sys; print({!r}); print('working', file=sys.stderr)"
    monkeypatch.setitem(regenerate.PARTS, "made-up", ("json", "two made-up commands", [
        [sys.executable, "-c", say.format('{"messages": 1}')], [sys.executable, "-c", say.format('{"messages": 2}')]]))
    regenerate.measure("made-up")
    assert json.loads((tmp_path / "made-up.json").read_text()) == [{"messages": 1}, {"messages": 2}]
    assert capfd.readouterr().err.count("working") == 2
    part = json.loads((tmp_path / "meta.json").read_text())["parts"]["made-up"]
    assert part["failed"] == [] and part["commands"][1] == "... and 1 more like it"
    monkeypatch.setattr(regenerate, "COMMAND_LIMIT", 1)
    monkeypatch.setitem(regenerate.PARTS, "made-up", ("json", "one fails, one does not finish", [
        [sys.executable, "-c", "import sys; sys.exit(3)"], [sys.executable, "-c", "import time; time.sleep(30)"]]))
    regenerate.measure("made-up")
    assert json.loads((tmp_path / "meta.json").read_text())["parts"]["made-up"]["failed"] == [
        "`-c import sys; sys.exit(3)` exited with status 3", "`-c import time; time.sleep(30)` did not finish in 1 s",
        "printed no figures: nothing kept"]
    assert json.loads((tmp_path / "made-up.json").read_text()) == [{"messages": 1}, {"messages": 2}]


def test_no_record_is_markdown():
    """Every part keeps a record that render() reads by field name (issue 50): JSON, or JSON lines for traces, never a
    script's printed table. Each "json" part's record is its PART.json. The outside 16-core measurement's folder keeps
    its sources, its README and lscpu's output beside its JSON-lines records."""
    import regenerate
    results = ROOT / "bench" / "results"
    outside = results / "scaling-16core"
    printed = [str(path.relative_to(ROOT)) for path in results.rglob("*") if path.is_file()
               and outside not in path.parents and path.suffix not in (".json", ".jsonl")]
    assert not printed, "records that are not JSON: {}".format(printed)
    assert [path.name for path in outside.glob("*.md")] == ["README.md"]
    assert {kind for kind, about, commands in regenerate.PARTS.values()} == {"json", "own"}
    assert all((results / (name + ".json")).exists() for name, part in regenerate.PARTS.items() if part[0] == "json")


def test_the_stops_are_said_from_their_record(tmp_path, monkeypatch):
    """bench/stop_cycles.py's record: each server's failed cycles and seconds, said three servers a line, then
    each failed cycle."""
    record = {"python": "3.12.1", "cycles": 5, "seed": 7,
              "servers": [{"server": "echo_{}.py".format(i), "failures": [], "seconds": 1.4} for i in range(4)]}
    record["servers"][3]["failures"] = [[2, "no EOF"]]
    assert kept(tmp_path, monkeypatch, stops=record).run_values({"parts": {}})["stops"] == "\n".join([
        "Python 3.12.1, 5 cycles each, seed 7",
        "echo_0.py 0/5 failed (1 s); echo_1.py 0/5 failed (1 s); echo_2.py 0/5 failed (1 s)",
        "echo_3.py 1/5 failed (1 s)", "echo_3.py, cycle 2: no EOF"])
    import stop_cycles  # a record since provenance(): "python" is bench's, "server_python" the servers' (ECHO_PYTHON)
    record.update(python="3.11.7", machine="AMD EPYC, 2 cores, Python 3.11.7, Linux",
                  server_python="3.14.0, free-threaded, GIL off")
    assert stop_cycles.text(record).splitlines()[0] == "Python 3.14.0, free-threaded, GIL off, 5 cycles each, seed 7"



def test_the_idle_table_is_drawn_from_its_record(tmp_path, monkeypatch):
    """bench/idle_clients.py's record: each server's idle clients that denied service, the seconds until service came
    back, and the same for trickling clients (None: not by --most, or not back), and an earlier commit's with
    --before."""
    record = {"timeout": 5.0, "most": 100, "before": None, "servers": [
        {"server": "echo_epoll.py", "denied": None, "back_s": None, "trickle_denied": None, "trickle_back_s": None},
        {"server": "echo_prefork.py", "denied": 10, "back_s": 4.83, "trickle_denied": 10, "trickle_back_s": None},
        {"server": "echo_simple.py", "denied": 1, "back_s": None, "trickle_denied": 1, "trickle_back_s": 14.96}]}
    table = kept(tmp_path, monkeypatch, idle=record).run_values({"parts": {}})["idle"].splitlines()
    assert table[0].startswith("| server | with --timeout 5: idle clients") and "a byte every 2.5 s" in table[0]
    assert table[2:] == ["| echo_epoll.py | not by 100 | - | not by 100 |",
                         "| echo_prefork.py | 10 | 4.8 s | 10 deny it, held while they trickle |",
                         "| echo_simple.py | 1 | not in 20 s | 1 deny it (service back after 15.0 s) |"]
    import idle_clients
    record.update(before="abc123", servers=[dict(record["servers"][1], before={"denied": 1, "back_s": None})])
    assert idle_clients.markdown(record).splitlines()[2] == \
        "| echo_prefork.py | 1 | not in 20 s | 10 | 4.8 s | 10 deny it, held while they trickle |"


def test_the_stopped_worker_tables_and_sentences_read_its_records(tmp_path, monkeypatch):
    """bench/stopped_worker.py's records (one per --workers: each run's client.py --json figures): its tables, and
    the sentences that say how many responses waited 100 ms or more, read by field."""
    def run(server, waited, **more):
        return {"server": server, "figures": more or dict(
            connections=8000, scheduled=8000, errors=0, p50_ms=0.71, p99_ms=1.2, max_ms=1038.4,
            responses_100ms_or_more=waited, responses_1s_or_more=waited // 2)}
    records = [{"workers": n, "rate": 2000, "duration_s": 4.0, "stop_at_s": 1.0, "stop_s": 1.0, "runs": [
        run("echo_shared_socket.py --workers {} --accept all".format(n), 0),
        run("echo_reuseport.py --workers {}".format(n), 985 if n == 2 else 504),
        run("echo_prefork.py --workers {}".format(n), 2002 if n == 2 else 0),
        run("echo_selectors_process.py --workers {}".format(n), 278, failed="no port")]} for n in (2, 4)]
    regenerate = kept(tmp_path, monkeypatch, stopped=records)
    v = regenerate.shared_values()
    assert v["stopped_reuseport"] == "985 and 504" and v["stopped_shared"] == "0"
    assert v["stopped_process"] == "failed and failed"
    assert v["prefork_stall"].endswith("stops them all: 2,002 and 0, as the stopped worker held it or not")
    said = regenerate.run_values({"parts": {}})["stopped"].split("\n\n")
    assert said[0] == "2 workers, 2,000 connections/s for 4 s (one exchange each); worker 1 stopped (SIGSTOP) 1 s " \
                      "in, for 1 s." and said[2].startswith("4 workers")
    assert said[1].splitlines()[3:] == ["| echo_reuseport.py --workers 2 | 8,000 of 8,000 | 0 | 0.7 | 1 | 1038 | 985 "
                                        "| 492 |", "| echo_prefork.py --workers 2 | 8,000 of 8,000 | 0 | 0.7 | 1 | "
                                        "1038 | 2,002 | 1,001 |", "| echo_selectors_process.py --workers 2 | failed: "
                                        "no port | | | | | | |"]


def test_the_pythons_table_and_the_pinned_figure_read_its_record(tmp_path, monkeypatch):
    """bench/python_versions.py's record: each server's median a Python and its ratios to the first; RESULTS.md's
    pinned asyncio figure is the first Python's median, read by field."""
    record = {"command": "python3 bench/python_versions.py --python 3.11=PATH --python 3.13=PATH", "cpu": "AMD EPYC",
              "cores": 2, "linux": "6.1", "client": "CPython 3.11.7", "client_python": "pyenv's 3.11.7",
              "load": "--clients 100", "rounds": 3, "pythons": [
                  {"label": "3.11", "build": "CPython 3.11.7, -O3", "where": "pyenv's 3.11.7"},
                  {"label": "3.13", "build": "CPython 3.13.0, -O3", "where": "pyenv's 3.13.0"}],
              "servers": [{"server": "echo_asyncio_protocol.py", "median": {"3.11": 35666.6, "3.13": 34919.2},
                           "ratio": {"3.13": {"median": 0.9789, "min": 0.9512, "max": 1.0523}}}]}
    regenerate = kept(tmp_path, monkeypatch, pythons=record)
    said = regenerate.run_values({"parts": {}})["pythons"].splitlines()
    assert said[0] == "Command: `python3 bench/python_versions.py --python 3.11=PATH --python 3.13=PATH`"
    assert said[2] == "Machine: AMD EPYC, 2 cores, Linux 6.1; client: CPython 3.11.7 (pyenv's 3.11.7), `client.py " \
                      "--clients 100`" and said[5] == "- 3.13: CPython 3.13.0, -O3 (pyenv's 3.13.0)"
    assert said[-1] == "| echo_asyncio_protocol.py | 35,667 | 34,919 | 0.979 (0.951-1.052) |"
    import python_versions  # a record since provenance(): its machine (the client's Python, the GIL) and Linux
    for old in ("cpu", "cores", "client"):
        del record[old]
    record.update(machine="AMD EPYC, 2 cores, Python 3.11.7, Linux", python="3.11.7")
    assert python_versions.markdown(record).splitlines()[2] == \
        "Machine: AMD EPYC, 2 cores, Python 3.11.7, Linux 6.1; client: pyenv's 3.11.7, `client.py --clients 100`"
    monkeypatch.setattr(regenerate, "tables", lambda name: {"article-100": {"rows": [regenerate.client.Run(
        server="echo_asyncio_protocol.py", msgs_per_server_cpu_s=71333.2)]}} if name == "article" else {})
    assert regenerate.size_values()["protocol_pinned"] == "0.50x its article-100 figure, 35,667 against 71,333"


def test_the_scaling_table_here_is_drawn_from_its_record(tmp_path, monkeypatch):
    """bench/scaling.py's record (scaling-runs.json): its summary's rows, by field, and the verdict under them."""
    summary = [{"shape": "held", "server": "echo_thread.py", "n": 1, "runs": 3, "failed": [], "msgs_per_s": 89521.4,
                "msgs_per_server_cpu_s": 90619, "server_busy": 0.99, "load_busy": 0.814, "load_cpus": 1,
                "limit": "the server's", "vs_1": 1.0},
               {"shape": "short", "server": "echo_reuseport.py", "n": 1, "runs": 0, "failed": ["no port"], "limit": "-"}]
    v = kept(tmp_path, monkeypatch, **{"scaling-runs": {"summary": summary}}).scaling_values()
    assert v["scaling_table"].splitlines()[2:] == [
        "| held | echo_thread.py | 1 | 89,521 | 1.00x | 90,619 | 99% | 81% (1) | the server's |",
        "| short | echo_reuseport.py | 1 | fails: no port | | | | | |"]
    assert v["scaling_verdict"] == "No run's load filled its CPUs: msgs/s is the servers'."


def test_tls_cost_keeps_a_record_that_render_reads_by_field(tmp_path, monkeypatch, capsys):
    """bench/tls_cost.py --json, its measurements made up (no server): the record it prints holds the figures by name,
    and RESULTS.md's TLS section is that record as the script prints it."""
    import tls_cost
    rates = iter([100.0, 50.0, 110.0, 40.0] * 100)  # plain, TLS, in each round's order
    monkeypatch.setattr(tls_cost, "run", lambda script, flags, shape, tls: (next(rates), {
        "client_cpu_s": 0.5, "handshakes": 1000}))
    monkeypatch.setattr(tls_cost, "open_loop", lambda script, flags, rates: (2200, 2400, {
        "connections": 7000, "reply_rate": 2242.4, "duration_s": 3.0, "errors": 0, "client_cpu_s": 3.1}, 1.96))
    monkeypatch.setattr(tls_cost, "s_time", lambda script, flags, procs: (8640, 3.0, 4.7, 5.0))
    monkeypatch.setattr(tls_cost, "speed", lambda: ["type 16 bytes", "AES-128-GCM 52678.94k"])
    monkeypatch.setattr(tls_cost, "provenance", lambda: {"python": "3.11.7", "commit": "abc1234"})
    monkeypatch.setattr(tls_cost.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(sys, "argv", ["tls_cost.py", "--rounds", "2", "--json"])
    tls_cost.main()
    record = json.loads(capsys.readouterr().out)
    first = record["costs"][0]
    assert (first["plain_rounds"], first["tls_rounds"], first["plain"], first["tls"]) == ([100, 40], [50, 110], 70, 80)
    assert first["ratio"] == {"median": 1.625, "min": 0.5, "max": 2.75}
    handshake = record["handshakes"][0]
    assert handshake["failed"] is None and handshake["knee"] == 2200 and round(handshake["stime_per_s"]) == 1728
    said = kept(tmp_path, monkeypatch, tls=record).run_values({"parts": {}})["tls"].splitlines()
    assert said[0].endswith(", commit abc1234") and "2 rounds" in said[1]
    assert said[5] == "| echo_selectors(_tls).py | article-100 | 70 | 80 | 1.625 (0.500-2.750) |"
    assert "| echo_selectors_tls.py | 2,200 | 2,400: 2,242 (0 errors) | 63% | 99% | 1,728 | 60% | 347 | 544 |" in said
    assert said[-3:] == ["openssl speed -seconds 1 (on core {}):".format(tls_cost.CLIENT_CORE), "    type 16 bytes",
                         "    AES-128-GCM 52678.94k"]

# ---- what a held client costs: bench/held.py's records, made up (tests/helpers.py's held_record())

def kept_held(tmp_path, monkeypatch, record):
    """regenerate.py reading its records from tmp_path, where record is kept as held.json."""
    return kept(tmp_path, monkeypatch, held=record)


def test_the_held_table_has_every_server_at_the_most_it_held_the_cheapest_first(tmp_path, monkeypatch):
    v = kept_held(tmp_path, monkeypatch, held_record()).held_values()
    rows = [line.strip("| ").split(" | ") for line in v["held_table"].splitlines()[2:]]
    assert rows == [
        ["echo_epoll.py", "19,000", "0.11", "4.6", "0.12", "12", "29", "1.8", "100,000: not run: one process may hold "
                                                                              "20,000 descriptors here (its hard "
                                                                              "limit), not 100,000 connections"],
        ["echo_select.py", "1,000", "0.31", "4.6", "-", "10", "29", "0.1", "10,000: select() watches descriptors "
                                                                           "below 1024 only"],
        ["echo_reuseport.py --workers 7", "100,000", "0.63", "4.4", "1.4", "72", "29", "19.6", "-"],
        ["echo_fork.py", "1,000", "1,277", "4.7", "-", "1,257", "29", "2.5", "10,000: a process per connection: "
                                                                            "thousands of forks, about 1 MB each"],
        ["echo_simple.py", "none of 1,000", "-", "-", "-", "-", "-", "-", "1,000: it serves one client at a time"]]


def test_the_held_sentences_follow_the_records(tmp_path, monkeypatch):
    """The headline, the c100k sentence, the descriptor limit, the kernel's share and the rates are computed: a
    figure changed in the records changes them."""
    record = held_record()
    v = kept_held(tmp_path, monkeypatch, record).held_values()
    assert v["held_headline"] == "A held connection cost a server from 0.11 KiB (echo_epoll.py at 19,000 held) to " \
                                 "1,277 KiB (echo_fork.py at 1,000 held): 11,613 times as much."
    said = v["held_findings"]
    assert "echo_reuseport.py --workers 7 held 100,000: connected in 19.6 s, in 72 MiB of server memory, " \
           "client.py's own 29 MiB." in said
    assert "echo_epoll.py not run at 100,000: one process may hold 20,000 descriptors here" in said
    assert "socket slabs (slabinfo) grew 4.4-4.7 KiB a held connection" in said and "both ends" in said
    assert "100,000 held clients would take 121.8 GiB of server memory as a process each (echo_fork.py at 1,000 " \
           "held: 1,277 KiB a connection), where echo_reuseport.py --workers 7 held them in 72 MiB" in said
    assert "A process may hold 20,000 descriptors here" in v["held_how"]
    record["runs"][1]["results"]["tables"][0]["rows"][0] = held_row("echo_fork.py", kib=82.0, kernel=4.7, held=1000,
                                                                    connect=2.5)
    v = kept_held(tmp_path, monkeypatch, record).held_values()
    assert v["held_headline"].endswith("to 82 KiB (echo_fork.py at 1,000 held): 745 times as much.")
    assert "7.8 GiB of server memory as a process each" in v["held_findings"]


def test_the_held_section_says_what_was_not_read_and_what_was_not_measured(tmp_path, monkeypatch):
    record = held_record()
    record["runs"][0]["results"]["tables"][0]["rows"][0] = held_row(
        "echo_epoll.py", held=10000, connect=0.9, memory_unread="cannot read /proc/PID of the server")
    record["runs"][2]["results"]["tables"][0]["rows"] = []
    v = kept_held(tmp_path, monkeypatch, record).held_values()
    assert "Not read: echo_epoll.py (cannot read /proc/PID of the server)." in v["held_findings"]
    assert "| echo_epoll.py | 10,000 | - | - |" in v["held_table"]
    import regenerate
    (tmp_path / "held.json").unlink()
    v = regenerate.held_values()
    assert v["held_table"] == "(not measured)" and v["held_headline"] == "Not measured in this run."
    assert not v["held_picture"], "no picture to link to"


def test_the_fork_estimate_becomes_the_measured_figure_where_it_was_measured(tmp_path, monkeypatch):
    """client.py's words for echo_fork.py's limit ("about 1 MB each"), kept in the c10k records, give way to what
    bench/held.py measured: linked to its section, but within it."""
    regenerate = kept_held(tmp_path, monkeypatch, held_record())
    said = regenerate.measured_estimates({"c10k_table": "thousands of forks, about 1 MB each |",
                                          "held_table": "thousands of forks, about 1 MB each |"})
    assert said == {"c10k_table": "thousands of forks, 1,277 KiB each ([measured](#what-a-held-client-costs) at "
                                  "1,000 held) |", "held_table": "thousands of forks, 1,277 KiB each (measured at "
                                                                  "1,000 held) |"}
    (tmp_path / "held.json").unlink()
    assert regenerate.measured_estimates({"x": "about 1 MB each"}) == {"x": "about 1 MB each"}


def test_held_py_holds_each_server_at_the_size_that_finds_its_limit(monkeypatch):
    """held-10k on every server; then 1,000 for those that did not hold it, the most one process holds under its
    descriptor limit for the single processes, c100k with --workers for the worker processes (three quarters of the
    limit each), and client.py with --procs enough for its own descriptors."""
    import held
    asked = []

    def hold(n, servers, limit, runs):
        asked.append((n, servers, held.held_command(n, servers, held.parts_for(n, limit) if n > 19000 else None)))
        failing = {"echo_select.py", "echo_simple.py"} if n == held.HELD else set()
        rows = [held_row(s) if s not in failing else held_row(s, failed="no") for s in servers]
        runs.append({"held": n, "results": {"tables": [{"rows": rows}]}})
        return rows
    monkeypatch.setattr(held, "hold", hold)
    monkeypatch.setattr(held, "descriptor_limit", lambda: 20000)
    monkeypatch.setattr(held, "takes_workers", lambda s: s == "echo_reuseport.py")
    record = held.measure(["echo_epoll.py", "echo_reuseport.py", "echo_select.py", "echo_simple.py"])
    assert [(n, servers) for n, servers, _ in asked] == [
        (10000, ["echo_epoll.py", "echo_reuseport.py", "echo_select.py", "echo_simple.py"]),
        (1000, ["echo_select.py", "echo_simple.py"]), (19000, ["echo_epoll.py"]),
        (100000, ["echo_reuseport.py --workers 7"])]
    assert asked[0][2][-4:] == ["--scenario", "held-10k", "--servers", asked[0][2][-1]]
    like = held.client.PRESETS.get("held-10k")  # the other sizes: its shape, as client.py has it
    assert asked[1][2][5:12] == ["--clients", "1000", "--connects", "1", "--messages", str(like.messages if like
                                                                                            else 2), "--hold"]
    assert asked[1][2][12] == ("--idle" if getattr(like, "idle", None) is not None else "--servers")
    assert asked[3][2][5:] == ["--scenario", "c100k", "--servers", "echo_reuseport.py --workers 7", "--procs", "7"]
    assert list(record["not_run"]) == ["echo_epoll.py"] and "20,000" in record["not_run"]["echo_epoll.py"]
    assert held.most_single(20000) == 19000 and held.most_single(524288) == held.MOST == 100000
    assert held.parts_for(100000, 20000) == 7 and held.parts_for(100000, 524288) == 1


def million_run(timeout, errors, aborted, peak):
    """A made-up bench/million.py record: 1,000 connections, errors by kind, the kernel's counters."""
    counters = lambda n: {"TCPAbortOnMemory": 0, "TCPAbortOnTimeout": n, "softnet_dropped": 5 * n,
                          "RetransSegs": n // 10, "TCPKeepAlive": 3 * n}
    return {"server": "echo_reuseport.py --workers 67" + (" --timeout 0" if timeout == 0 else ""), "clients": 1000,
            "server_idle_timeout_s": timeout, "descriptors": 20000, "tcp_mem": [10, 20, 30],
            "netdev_max_backlog": 1000, "server_keepalive": True,
            "command": "python3 client.py --port PORT --clients 1000 --connects 1 --messages 2 --hold --idle 3 "
                       "--procs 2 --timeout 120",
            "results": {"messages": 2000 - sum(errors.values()), "connections": 1000 - sum(errors.values()),
                        "error_kinds": errors, "connect_phase_s": 150.4, "echo_phase_s": 20.0, "held_connections": 1000 - errors.get(
                            "closed early", 0), "server_memory_held_kib": 600.0, "server_kib_per_held": 0.6,
                        "client_memory_kib": 2048.0, "kernel_slab_held_kib": 6 << 20},
            "before": {"counters": counters(7)}, "after": {"counters": counters(7 + aborted)},
            "peak": {"tcp": {"mem": peak}}, "worker_fds_most": [15, 17]}


def test_the_million_is_said_from_its_records(tmp_path, monkeypatch):
    """Each run of bench/million.py in a sentence, and a cause said only as far as the records show it: the server's
    idle timeout where a run without it closed none, the resets against the kernel's aborts on timeout."""
    runs = [million_run(120.0, {"closed early": 600, "reset": 20}, 10, 25), million_run(0, {"reset": 250}, 250, 35),
            dict(million_run(0, {}, 0, 40), server_keepalive=False), dict(million_run(0, {}, 0, 45),
                                                                          netdev_max_backlog=100000)]
    said = kept(tmp_path, monkeypatch, million=runs).million_values()["held_million"]
    assert "ran bench/million.py 4 times, echo_reuseport.py --workers 67 holding 1,000 connections (client.py " \
           "--clients 1000 --connects 1 --messages 2 --hold --idle 3)" in said
    rows = [line for line in said.splitlines() if line.startswith("| ") and not line.startswith("| server's")]
    assert rows == ["| 120 s (its default) | on | 1,000 | 150 s | 1,000 | 380 | 20 | 600 | 10 | 30 | 50 | 25 pages |",
                    "| none (`--timeout 0`) | on | 1,000 | 150 s | 1,000 | 750 | 250 | 0 | 250 | 750 | 1,250 | 35 pages |",
                    "| none (`--timeout 0`) | off (`--no-keepalive`) | 1,000 | 150 s | 1,000 | 1,000 | 0 | 0 | 0 | 0 | 0 "
                    "| 40 pages |",
                    "| none (`--timeout 0`) | on | 100,000 | 150 s | 1,000 | 1,000 | 0 | 0 | 0 | 0 | 0 | 45 pages |"]
    assert "TCPAbortOnMemory rose by 0 in each, though the TCP memory peaked at up to 45 pages, past" in said
    assert "wait between its echoes could reach 173 s (the connect phase, the hold and the echo phase), longer than " \
           "its 120 s; without it the server closed none" in said
    assert "Without the idle timeout, each reset was a connection the kernel aborted on a timeout" in said
    assert "No worker held more than 17 descriptors (its limit: 20,000)" in said
    assert "(RetransSegs) rose by 25 against 250 aborts" in said and "dropped 1,250 packets" in said
    assert "SO_KEEPALIVE), nothing was reset and no packet dropped. With keepalive on and the input queues 100,000 " \
           "packets a CPU" in said
    assert said.endswith("dropped in the input queue of one 2-core machine that holds both ends of a million "
                         "connections. Held (1,000 at once), the server took 0.6 MiB (0.60 KiB a connection), client.py 2.0 "
                         "MiB, and the kernel's socket slabs 6.0 GiB (both ends).")
    assert kept(tmp_path / "none", monkeypatch).million_values() == {"held_million": ""}
