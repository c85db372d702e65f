# SPDX-License-Identifier: 0BSD
"""bench/draw.py: client.py --all --json's records drawn as Markdown and SVG (what client.py --markdown and --svg
wrote before they moved there), and the old flags answered in one line."""
import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from helpers import ROOT, SERVERS, TIMEOUT, client, client_json, echo_processes, held_record, held_row

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
    assert text.splitlines()[0].startswith("Measured by client.py --all on Some CPU, 2 cores, Python 3.11.7, Linux.")
    assert "- echo_epoll.py needs epoll, which this system lacks" in text


def test_the_markdown_names_the_scenarios_and_servers_its_records_carry_and_no_command_line(client_module):
    """The records keep each table's and sweep's scenario and workload, not the command line that ran them: the
    first line names what they keep, and says the rest is not known."""
    c = client_module
    table = {"scenario": "article-100", "workload": c.Workload(clients=100, connects=5, messages=50), "server_work": 0,
             "rows": [c.Run(server="echo_epoll.py", msgs_per_s=900.0), c.Run(server="echo_thread.py", failed="x")]}
    sweep = {"scenario": "pingpong-sweep", "server": "echo_epoll.py", "knee": 1000, "knee_at_top": False,
             "failed": None, "client_limited": False, "stopped_early": False, "rates": [1000, 2000],
             "workload": c.Workload(duration=1.0),
             "steps": [c.Step(offered_rate=1000.0, client_ports_exhausted=0, client_descriptors_exhausted=0)]}
    text = draw.markdown({"machine": "Some CPU", "tables": [table, dict(table, scenario="c1k")], "sweeps": [sweep]})
    first = text.split("\n\n")[0]
    assert first.startswith("Measured by client.py --all on Some CPU: 2 servers in the closed-loop scenarios "
                            "article-100 and c1k, and the open-loop sweep pingpong-sweep.")
    assert "not client.py's command line" in first, first
    assert "`python3 client.py" not in first  # no command it cannot know


# ---- timelines: drawn from client.py --trace's files; these are hand-made, in its format

def trace_line(client_id, start, echoed, how="eof"):
    """A connection line of the trace format: connect() at start, each message sent right after the echo before."""
    sent = [start + 0.0002] + [e + 0.00002 for e in echoed[:-1]]
    return {"worker": 0, "client": client_id, "connection": 0, "connect": [start, start + 0.0002],
            "messages": [[round(s, 6), round(e, 6)] for s, e in zip(sent, echoed)],
            "end": round(echoed[-1] + 0.0003, 6) if echoed else start, "how": how}


def one_at_a_time(clients=3, messages=20, cost=0.001):
    return [trace_line(k, 0.01, [0.01 + (k * messages + i + 1) * cost for i in range(messages)])
            for k in range(clients)]


def interleaved(clients=3, messages=20, cost=0.001):
    return [trace_line(k, 0.01, [0.01 + (i * clients + k + 1) * cost for i in range(messages)])
            for k in range(clients)]


def write_trace(path, connections):
    run = {"trace": 1, "t0": 12345.678, "clock": "perf_counter", "host": "127.0.0.1", "port": 7777, "workload": {}}
    path.write_text("".join(json.dumps(line) + "\n" for line in [run, *connections]))
    return path


def kept(folder, servers, shape, stall=None):
    """A folder as bench/timelines.py keeps it: a trace per server, and meta.json."""
    folder.mkdir()
    meta = {"machine": "Some CPU, 2 cores, Python 3.11.7, Linux", "python": "3.11.7", "linux": "6.1",
            "when": "2026-11-28 12:00 UTC", "commit": "abc1234", "load": "12 clients arriving together, each with "
            "one connection of 20 messages of 32 B", "client": "python3 client.py --port PORT", "work": 70000,
            "work_ms": 1.01, "calibration": {"how": "measured"}, "servers": []}
    if stall:
        meta.update(stall_s=1.0, stall_after_s=0.8, stalled_bytes=16 << 20, piece=1 << 20)
    for server in servers:
        connections = shape()
        if stall:
            connections.append(dict(trace_line(None, 0.02, [0.4]), worker=None, who="stalled", stall=stall,
                                    taken_before_blocking=8 << 20))
        write_trace(folder / (server[:-3] + ".jsonl"), connections)
        meta["servers"].append({"server": server, "flags": ["--backlog", "16"] if server == "echo_simple.py" else [],
                                "trace": server[:-3] + ".jsonl"})
    (folder / "meta.json").write_text(json.dumps(meta))
    return folder


def panels(svg):
    return [g.get("data-server") for g in ET.fromstring(svg).iter(SVG + "g") if g.get("class") == "panel"]


def test_served_intervals_tell_one_at_a_time_from_interleaved():
    """What the shape test asserts of real traces (tests/test_timelines.py), on hand-made ones."""
    def overlapping(connections):
        spans = [draw.served(c) for c in connections]
        return [(a, b) for i, a in enumerate(spans) for b in spans[i + 1:] if a[0] < b[1] and b[0] < a[1]]
    assert not overlapping(one_at_a_time()) and len(overlapping(interleaved())) == 3


def test_timelines_svg_parses_and_has_a_panel_per_server_the_articles_nine_first(tmp_path):
    import timelines
    folder = kept(tmp_path / "timelines", timelines.ORDER, interleaved)
    svg = draw.kept_timelines(folder)
    assert panels(svg) == [" ".join([s, "--backlog", "16"]) if s == "echo_simple.py" else s for s in timelines.ORDER]
    assert set(timelines.ORDER) == set(SERVERS) and timelines.ORDER[:9] == timelines.ARTICLE
    texts = " ".join("".join(t.itertext()) for t in ET.fromstring(svg).iter(SVG + "text"))
    for said in ("Some CPU, 2 cores, Python 3.11.7, Linux", "12 clients arriving together", "--work 70,000",
                 "--backlog 16", "order and fairness, not speed", "seconds"):
        assert said in texts, said


def test_the_caption_says_the_commit_had_uncommitted_changes_where_the_traces_were_taken_with_some(tmp_path):
    """bench/timelines.py keeps the files that differed from the commit (meta.json's `changed`, as
    bench/regenerate.py's parts do): the caption says "at <commit>" only where there were none."""
    def caption(folder):
        return " ".join("".join(t.itertext()) for t in ET.fromstring(draw.kept_timelines(folder)).iter(SVG + "text"))
    clean = kept(tmp_path / "clean", ["echo_select.py"], interleaved)
    assert "at abc1234," in caption(clean) and "uncommitted" not in caption(clean)
    meta = json.loads((clean / "meta.json").read_text())
    changed = kept(tmp_path / "changed", ["echo_select.py"], interleaved)
    (changed / "meta.json").write_text(json.dumps(dict(meta, changed=["client.py", "bench/timelines.py"])))
    assert "at abc1234 (with uncommitted changes)," in caption(changed), caption(changed)


@pytest.mark.skipif(shutil.which("git") is None, reason="the commit and the changed files are git's")
def test_the_traces_keep_the_files_that_differed_from_their_commit():
    import timelines
    from common import changed_files
    kept = timelines.meta(1, {}, "a load", "a command")
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    assert kept["commit"] == head.stdout.strip() and kept["commit"]
    assert kept["changed"] == changed_files()


def test_the_committed_pictures_have_a_panel_per_server_of_their_part():
    """timelines.svg and stall.svg as kept at the repository's root (test_regenerate checks they are what the
    kept traces give): every server of timelines.ORDER, each titled with the flags it ran with, and every one of
    STALL_SERVERS, so that traces kept without a server do not pass unseen."""
    import timelines
    drawn = panels((ROOT / "timelines.svg").read_text())
    assert drawn == [" ".join([s, *timelines.FLAGS.get(s, [])]) for s in timelines.ORDER], drawn
    assert panels((ROOT / "stall.svg").read_text()) == timelines.STALL_SERVERS


def test_a_timeline_row_shows_waiting_apart_from_being_served_and_marks_each_echo(tmp_path):
    svg = draw.timelines_svg("t", [("echo_simple.py", "", one_at_a_time(clients=2, messages=5))], ["c"])
    root = ET.fromstring(svg)
    panel = next(g for g in root.iter(SVG + "g") if g.get("class") == "panel")
    fills = [r.get("fill") for r in panel.iter(SVG + "rect")]
    assert fills.count(draw.WAIT) == 2 and fills.count(draw.SERVED) == 2  # a row each, waiting and served
    ticks = [p.get("d") for p in panel.iter(SVG + "path") if p.get("stroke") == draw.ECHO]
    assert sum(d.count("M") for d in ticks) == 10  # an echo, a tick


def test_the_stall_picture_shades_the_stall_and_says_who_waited(tmp_path):
    def stalled_select():  # the others' echoes stop for the whole stall, from 0.1 to 1.1 s
        return [trace_line(k, 0.0, [0.01 * i for i in range(1, 11)] + [1.1 + 0.01 * i for i in range(10)])
                for k in range(2)]
    svg = draw.kept_timelines(kept(tmp_path / "stall", ["echo_select.py"], stalled_select, stall=[0.1, 1.1]))
    assert panels(svg) == ["echo_select.py"]
    texts = " ".join("".join(t.itertext()) for t in ET.fromstring(svg).iter(SVG + "text"))
    assert "the others' longest wait for an echo: 1,000 ms" in texts, texts
    assert "send() had taken 8 MiB" in texts and " MB" not in texts  # whole MiB: its pieces are 1 MiB
    assert "the kernel took" not in texts  # what send() took is the buffers on both sides and the server's own
    assert "until 1 s after its sender blocked" in texts
    assert draw.STALLED in svg


def test_the_stall_is_shaded_from_the_senders_block_and_the_caption_says_when_it_connected(tmp_path):
    """The others stall only once the stalled client's buffers are full: the shade begins at its sender's block
    (its line's sender_blocked), not at its connect(), and the caption gives its connect() on the panels' axis
    (from the trace, not from the script's schedule)."""
    def others():
        return [trace_line(k, 0.0, [0.01 * i for i in range(1, 80)] + [1.9 + 0.01 * i for i in range(10)])
                for k in range(2)]
    folder = kept(tmp_path / "stall", ["echo_select.py"], others, stall=[0.45, 1.9])
    trace = folder / "echo_select.jsonl"
    lines = trace.read_text().splitlines()
    stalled = dict(json.loads(lines[-1]), connect=[0.45, 0.4502], sender_blocked=0.9)
    trace.write_text("\n".join(lines[:-1] + [json.dumps(stalled)]) + "\n")
    svg = draw.kept_timelines(folder)
    panel = next(g for g in ET.fromstring(svg).iter(SVG + "g") if g.get("class") == "panel")
    shade = [r for r in panel.iter(SVG + "rect") if r.get("fill") == draw.STALLED]
    x = draw.Scale(0, draw.nice_ceiling(max(c["end"] for c in others() + [stalled])), draw.PANEL_LEFT, draw.PANEL_W)
    assert [(float(r.get("x")), float(r.get("width"))) for r in shade] == [
        (round(x(0.9), 1), round(x(1.9) - x(0.9), 1))]
    texts = " ".join("".join(t.itertext()) for t in ET.fromstring(svg).iter(SVG + "text"))
    assert "At 0.45 s, one more connection" in texts, texts


def test_a_wait_of_a_tenth_of_a_second_between_echoes_is_drawn_as_waiting_and_dense_echoes_as_a_bar(tmp_path):
    """The stall picture carries the wait: a connection's served span breaks where no echo came for WAITED_S or
    more (grey there, as before its first echo), so rows frozen through the stall are grey under the shade; and
    echoes too close to draw apart are not ticked (they would merge into a bar darker than the key's "served")."""
    frozen = trace_line(0, 0.0, [0.005 * i for i in range(1, 200)] + [2.0 + 0.005 * i for i in range(200)])
    assert draw.served_spans(frozen) == [(0.005, 0.995), (2.0, 2.995)]
    assert draw.served_spans(trace_line(0, 0.0, [0.05 * i for i in range(1, 20)])) == [(0.05, 0.95)]
    svg = draw.timelines_svg("t", [("echo_select.py", "", [frozen])], ["c"])
    panel = next(g for g in ET.fromstring(svg).iter(SVG + "g") if g.get("class") == "panel")
    assert [r.get("fill") for r in panel.iter(SVG + "rect")].count(draw.SERVED) == 2
    assert not [p for p in panel.iter(SVG + "path") if p.get("stroke") == draw.ECHO], "400 echoes in 300 px: no tick"
    texts = " ".join("".join(t.itertext()) for t in ET.fromstring(svg).iter(SVG + "text"))
    assert "0.1 s or more without one" in texts and "too close here to draw one by one" in texts
    assert "an echo" not in texts.replace("an echo, a send", "")


def test_the_stall_caption_gives_what_send_took_from_the_traces_and_what_echo_selectors_holds_from_its_code():
    """Issue 50, sentence 11: the MiB the stalled client's send() took before it blocked is each kept trace's
    taken_before_blocking, and the 1 MiB echo_selectors.py holds itself is its MAX_BUFFER."""
    import ast
    folder = ROOT / "bench" / "results" / "stall"
    meta = json.loads((folder / "meta.json").read_text())
    taken = [round(json.loads(line)["taken_before_blocking"] / (1 << 20), 1) for server in meta["servers"]
             for line in (folder / server["trace"]).read_text().splitlines()[1:] if '"who"' in line]
    texts = " ".join(" ".join("".join(t.itertext()) for t in ET.fromstring(draw.kept_timelines(folder)).iter(
        SVG + "text")).split())
    assert "send() had taken {} MiB".format(draw.span_text(taken, "{:g}")) in texts, texts
    source = ast.parse((ROOT / "echo_selectors.py").read_text())
    value = next(node.value for node in source.body if isinstance(node, ast.Assign)
                 and getattr(node.targets[0], "id", None) == "MAX_BUFFER")
    assert eval(compile(ast.Expression(value), "MAX_BUFFER", "eval")) == draw.SELECTORS_HOLDS
    assert "while {:g} MiB waits to go back to it".format(draw.SELECTORS_HOLDS / (1 << 20)) in texts


def waves(starts, workers=4):
    """Connections of a --workers server, each first echoed at its time in starts."""
    return [trace_line(k, 0.0, [t + 0.001 * i for i in range(5)]) for k, t in enumerate(starts)]


def test_the_caption_says_whether_a_pools_waves_stand_apart():
    """Issue 50, sentence 3: waves of 4 that stand apart are said so; a pool whose later connections start one or
    two at a time as workers free is said so, with when each started."""
    apart = draw.waves_text("echo_prefork.py", 4, waves([0.003, 0.003, 0.004, 0.005, 0.041, 0.043, 0.043, 0.047,
                                                         0.081, 0.082, 0.084, 0.095]))
    assert apart == "echo_prefork.py's in waves of 4 that stand apart (starting at 0.003, 0.041 and 0.081 s)"
    freed = draw.waves_text("echo_prethread.py", 4, waves([0.002, 0.003, 0.005, 0.007, 0.072, 0.073, 0.104, 0.104,
                                                           0.123, 0.165, 0.173, 0.183]))
    assert freed.startswith("echo_prethread.py's first 4 together (by 0.007 s), then the rest one or two at a time "
                            "as workers freed (at 0.072, 0.073, 0.104, 0.104, 0.123, 0.165, 0.173 and 0.183 s")


def test_the_kept_timelines_caption_says_how_prefork_and_prethread_started_their_connections_as_the_traces_do():
    """What the committed timelines.svg says of the two pools is what their kept traces give."""
    folder = ROOT / "bench" / "results" / "timelines"
    texts = " ".join(" ".join("".join(t.itertext()) for t in ET.fromstring(draw.kept_timelines(folder)).iter(
        SVG + "text")).split())
    for server in ("echo_prefork.py", "echo_prethread.py"):
        _, connections = draw.read_trace(folder / (server[:-3] + ".jsonl"))
        assert draw.waves_text(server, 4, connections) in texts
    assert "so that their waves show" not in texts


def two_workers(gap):
    """12 connections of 2 client worker processes, 6 each (client C in worker C mod 2): the second process's
    first served gap seconds after the first's, each served 1 ms after the one before."""
    lines = []
    for k in range(12):
        worker, place = k % 2, k // 2
        start = 0.002 + place * 0.001 + (gap if worker else 0)
        lines.append(dict(trace_line(k, 0.0005 if worker else 0.0002, [start + 0.012 * i for i in range(20)]),
                          worker=worker))
    return lines


def test_the_caption_says_where_the_rows_start_in_groups_one_per_client_worker_process():
    """The groups of six rows in timelines.svg are client.py's two worker processes: said where the traces show
    them (the groups one after another, far apart), not where they mixed."""
    assert draw.worker_groups(two_workers(0.02)) and draw.worker_groups(two_workers(0.0)) is None
    sentence = draw.groups_text([("echo_select.py", "", two_workers(0.02)), ("echo_fork.py", "", two_workers(0.0))])
    assert sentence.startswith("client.py ran the clients in 2 worker processes") and "In echo_select.py the rows " \
        "start in groups of 6, one per process" in sentence and "echo_fork.py" not in sentence, sentence
    assert "0.3 ms apart" in sentence and "the next 20 ms after" in sentence
    one = [dict(c, worker=0) for c in two_workers(0.02)]
    assert draw.groups_text([("echo_select.py", "", one)]) is None


def test_a_caption_speaks_only_of_the_servers_drawn(tmp_path):
    """Traces of a few servers (bench/timelines.py --out DIR echo_select.py echo_prefork.py): no word of the servers
    not drawn, nor of their flags, and a title that names what is there."""
    folder = kept(tmp_path / "mine", ["echo_select.py", "echo_prefork.py"], interleaved)
    meta = json.loads((folder / "meta.json").read_text())
    meta["servers"][1]["flags"] = ["--workers", "4"]
    (folder / "meta.json").write_text(json.dumps(meta))
    texts = " ".join("".join(t.itertext()) for t in ET.fromstring(draw.kept_timelines(folder)).iter(SVG + "text"))
    assert "Who is served when: echo_prefork.py and echo_select.py under one small load" in texts
    for absent in ("echo_simple.py", "--backlog", "echo_prethread.py", "every server"):
        assert absent not in texts, absent
    assert "echo_prefork.py ran with --workers 4" in texts


def test_draw_draws_one_client_trace_file_as_a_timeline(tmp_path):
    """`bench/draw.py my.jsonl --svg x.svg` on a client.py --trace file (it failed with 'Extra data'): a panel, a
    row per connection, a caption from its run line; from stdin too; --markdown of a trace is one line."""
    trace = write_trace(tmp_path / "my.jsonl", interleaved())
    for args, stdin in (([str(trace)], None), (["-"], trace.read_text())):
        out = tmp_path / "x.svg"
        drawn = draw_command(*args, "--svg", str(out), stdin=stdin)
        assert drawn.returncode == 0 and not drawn.stderr, drawn.stderr
        root = ET.parse(str(out)).getroot()
        assert panels(out.read_text()) == ["127.0.0.1:7777"]
        texts = " ".join("".join(t.itertext()) for t in root.iter(SVG + "text"))
        assert "client.py --trace against 127.0.0.1:7777" in texts and "3 connections" in texts
        out.unlink()
    refused = draw_command(str(trace), "--markdown", str(tmp_path / "x.md"))
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "--svg" in refused.stderr
    assert not (tmp_path / "x.md").exists()


def texts_of(svg):
    return " ".join(" ".join("".join(t.itertext()) for t in ET.fromstring(svg).iter(SVG + "text")).split())


def test_the_bars_draw_the_runs_spread_where_the_records_keep_it_and_say_so_where_not(client_module):
    """results.svg: a whisker of half the measured runs' range either side of the median, and its share after the
    figure, where a row has msgs_per_server_cpu_spread; a line that says none is drawn where no row has one."""
    c = client_module
    rows = [c.Run(server="echo_epoll.py", msgs_per_s=900.0, msgs_per_server_cpu_s=1000.0,
                  msgs_per_server_cpu_spread=0.1),
            c.Run(server="echo_select.py", msgs_per_s=800.0, msgs_per_server_cpu_s=800.0)]
    table = {"scenario": "article-100", "workload": c.Workload(), "server_work": 0, "rows": rows}
    svg = draw.chart([table], [], "Some CPU, 2 cores, Python 3.11.7, Linux")
    assert "1,000 ±10%" in texts_of(svg) and "800" in texts_of(svg) and "Whiskers: half the range" in texts_of(svg)
    whiskers = [p for p in ET.fromstring(svg).iter(SVG + "path") if p.get("stroke") == "#1b3f73"]
    assert len(whiskers) == 1
    assert "Measured on Some CPU, 2 cores, Python 3.11.7, Linux." in texts_of(svg)
    table["rows"] = [c.Run(server="echo_epoll.py", msgs_per_s=900.0, msgs_per_server_cpu_s=1000.0)]
    bare = draw.chart([table], [])
    assert "No spread drawn" in texts_of(bare) and "machine is not named" in texts_of(bare)


def test_results_svg_names_its_machine_and_what_single_runs_moved_from_the_records():
    """The committed results.svg: the machine and command of its record, and how far the spread part's single runs
    moved (its own record keeps no spread)."""
    import regenerate
    texts = texts_of((ROOT / "results.svg").read_text())
    meta = json.loads((ROOT / "bench" / "results" / "meta.json").read_text())
    article = json.loads((ROOT / "bench" / "results" / "article.json").read_text())
    assert "Measured on {}, {}, by {}".format(article["machine"], meta["parts"]["article"]["when"],
                                              meta["parts"]["article"]["commands"][0]) in texts
    _, cpu = regenerate.spread_moves()
    assert all("{:.2f}x".format(moved) in texts for moved in cpu.values()) and cpu


def test_the_sweeps_say_each_knees_server_cpu_a_connection_and_the_lower_steps_that_missed(client_module):
    """openloop.svg: under a server's name, its knee, the rates below it whose steps missed the rule (the knee is
    the highest that met it), and its server CPU a connection at the knee."""
    c = client_module
    rule = {"max_errors": 0, "min_reply_ratio": 0.95, "max_p99_ms": 100.0}

    def step(rate, replies, p99, cpu):
        return c.Step(offered_rate=rate, reply_rate=replies, p99_ms=p99, errors=0, kept_schedule=True,
                      connections=int(rate), server_cpu_s=cpu, client_ports_exhausted=0,
                      client_descriptors_exhausted=0)
    sweep = {"scenario": "pingpong-sweep", "server": "echo_asyncio.py", "knee": 3000, "knee_at_top": False,
             "failed": None, "client_limited": False, "stopped_early": True, "rates": [1000, 2000, 3000, 4000],
             "workload": c.Workload(duration=1.0), "knee_rule": rule,
             "steps": [step(1000, 1000, 2, 0.1), step(2000, 900, 1000, 0.2), step(3000, 2990, 3, 0.15),
                       step(4000, 1000, 1000, 0.3)]}
    assert draw.missed_below_knee(sweep) == [2000]
    texts = texts_of(draw.chart([], [sweep]))
    assert "knee 3,000/s (2,000 missed)" in texts and "50 µs CPU a connection" in texts, texts
    assert draw.missed_below_knee(dict(sweep, knee=None)) == []


# ---- what a held client costs: bench/held.py's records, made up (tests/helpers.py's held_record())

def held_texts(svg):
    return " ".join("".join(t.itertext()) for t in ET.fromstring(svg).iter(SVG + "text"))


def test_the_held_picture_has_a_row_per_server_the_cheapest_first_on_a_log_axis():
    """held.svg: a row per server at the most it held, the cheapest a held connection first and those that held none
    last; the server's bar and the kernel's under it, their lengths on one log axis whose decades are labelled."""
    svg = draw.held_svg(held_record())
    rows = [g for g in ET.fromstring(svg).iter(SVG + "g") if g.get("class") == "server"]
    assert [g.get("data-server") for g in rows] == ["echo_epoll.py", "echo_select.py", "echo_reuseport.py",
                                                    "echo_fork.py", "echo_simple.py"]
    texts = held_texts(svg)
    for said in ("echo_reuseport.py --workers 7", "100,000 held", "0.63 KiB a connection, 72 MiB held",
                 "1,277 KiB a connection, 1,257 MiB held", "4.7 KiB a connection, kernel",
                 "held none of the 1,000 asked", "it serves one client at a time", "log scale", "0.01", "10,000 KiB"):
        assert said in texts, said
    bars = {g.get("data-server"): [(float(r.get("width")), r.get("fill")) for r in g.iter(SVG + "rect")]
            for g in rows}
    x = draw.Scale(-2, 4, 0, draw.HELD_W, log=True)  # the axis the figures span: 0.11 to 1,277 KiB
    for server, server_kib, kernel_kib in (("echo_epoll.py", 0.11, 4.6), ("echo_fork.py", 1277.4, 4.7)):
        assert bars[server] == [(round(x(server_kib), 1), draw.SERVER_MEMORY),
                                (round(x(kernel_kib), 1), draw.KERNEL_MEMORY)], bars[server]
    assert bars["echo_simple.py"] == []


def test_the_held_caption_says_where_when_and_at_which_commit_from_the_records():
    record = held_record()
    texts = held_texts(draw.held_svg(record))
    for said in ("Measured on Some CPU, 2 cores, Python 3.11.7, Linux 6.1, 2026-12-01 23:00 UTC, at abc1234, by "
                 "python3 bench/held.py (600 s)", "1,000, 10,000, 19,000 and 100,000 connections", "(PSS)",
                 "(slabinfo)", "two sockets each on loopback"):
        assert said in " ".join(texts.split()), said
    assert "uncommitted" not in texts
    record["changed"] = ["client.py"]
    assert "at abc1234 (with uncommitted changes)," in held_texts(draw.held_svg(record))


def test_the_held_picture_says_where_a_figure_was_not_read():
    record = held_record()
    record["runs"][0]["results"]["tables"][0]["rows"][1] = held_row(
        "echo_reuseport.py", held=10000, connect=1.0, memory_unread="the server is remote")
    record["runs"][3]["results"]["tables"][-1]["rows"] = []  # c100k's: it held no more than held-10k
    texts = held_texts(draw.held_svg(record))
    assert "not read: the server is remote" in texts
