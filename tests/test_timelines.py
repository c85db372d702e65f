# SPDX-License-Identifier: 0BSD
"""What bench/timelines.py draws, asserted from the traces themselves, not from the picture: client.py --trace
against two servers whose shape is known, and the stalled client it drives beside client.py."""
import json
import socket
import subprocess
import sys

import pytest

from helpers import ROOT, client, recv_exactly

import draw  # bench/, which helpers put on the path
import timelines


def served_spans(path):
    """Each connection's served interval (first echo, last echo), from a client.py --trace file."""
    run, connections = draw.read_trace(path)
    assert run["trace"] == 1 and run["clock"] == "perf_counter" and isinstance(run["t0"], float)
    assert len(connections) == 3 and all(c["how"] == "eof" and len(c["messages"]) == 20 for c in connections)
    assert all(all(sent <= echoed for sent, echoed in c["messages"]) for c in connections)
    return [draw.served(c) for c in connections]


def overlaps(a, b):
    return a[0] < b[1] and b[0] < a[1]


@pytest.mark.slow
@pytest.mark.parametrize("script, together", [("echo_simple.py", False), ("echo_select.py", True)])
def test_a_trace_shows_one_at_a_time_or_interleaved(start_server, tmp_path, script, together):
    """echo_simple.py serves 3 clients one after another: their served intervals (first echo to last) never
    overlap. echo_select.py interleaves them: every two overlap. --work makes each message last long enough
    (about a millisecond) for the order to be the servers', not the clock's resolution."""
    server = start_server(script, "-q", "--work", "50000")
    path = tmp_path / "trace.jsonl"
    result = client("--port", str(server.port), "--clients", "3", "--connects", "1", "--messages", "20",
                    "--trace", str(path))
    assert result.returncode == 0, result.stderr
    spans = served_spans(path)
    pairs = [(a, b) for i, a in enumerate(spans) for b in spans[i + 1:]]
    assert [overlaps(a, b) for a, b in pairs] == [together] * 3, spans


@pytest.mark.slow
def test_the_stalled_client_fills_the_buffers_reads_nothing_then_its_whole_echo(start_server):
    """The stall's own client: it sends more than its send() accepts before it blocks (the buffers, and what the
    server holds), reads nothing until STALL_S after that, then reads every piece's echo, verified; its line is the
    trace format's, on the clock it is given."""
    server = start_server("echo_selectors.py", "-q")
    stalled = timelines.StalledClient(server.port)
    stalled.run()
    line = stalled.trace_line(stalled.start - 5.0)  # as if client.py's run had started 5 s earlier
    assert line["how"] == "eof" and line["who"] == "stalled" and line["worker"] is None
    assert len(line["messages"]) == timelines.STALL_BYTES // timelines.PIECE
    assert all(echoed is not None and sent < echoed for sent, echoed in line["messages"])
    assert line["connect"][0] == pytest.approx(5.0, abs=1e-6)
    start, end = line["stall"]
    assert start < line["sender_blocked"] and timelines.STALL_S <= end - line["sender_blocked"] < \
        timelines.STALL_S + 1.0, "it read nothing until STALL_S after its sender blocked"
    assert line["messages"][0][1] > end, "no echo was read during the stall"
    assert 1 << 20 <= line["taken_before_blocking"] < timelines.STALL_BYTES, "the sender blocked on full buffers"
    assert json.loads(json.dumps(line)) == line
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as after:  # the server still serves
        after.sendall(b"ping")
        assert recv_exactly(after, 4) == b"ping"


def timelines_command(*args, timeout=30):
    return subprocess.run([sys.executable, str(ROOT / "bench" / "timelines.py"), *args], capture_output=True,
                          text=True, timeout=timeout)


def kept_state():
    """The committed pictures and the kept traces, as bytes: what --out must leave alone."""
    kept = [ROOT / name for name in timelines.PICTURES.values()] + sorted(
        path for part in timelines.PICTURES for path in (ROOT / "bench" / "results" / part).iterdir())
    return {path: path.read_bytes() for path in kept}


@pytest.mark.parametrize("args", [["echo_select.py"], ["--out", str(ROOT)], ["--out", str(ROOT / "bench" / "results")],
                                  ["--out", "x", "--keep"]])
def test_timelines_says_in_one_line_where_to_write_before_it_measures(args):
    """Without --out DIR (the reader's own) or --keep (the committed pictures and kept traces), or with --out at
    the committed ones, nothing is measured: one line that says how."""
    result = timelines_command(*args)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.splitlines()[-1].count("--keep") == 1 and "--out" in result.stderr, result.stderr
    assert not (ROOT / "x").exists()


@pytest.mark.slow
def test_your_own_timeline_is_drawn_where_you_say_and_the_committed_ones_are_left_alone(tmp_path):
    """`python3 bench/timelines.py --out DIR echo_select.py echo_prefork.py`: the traces kept in DIR, the two
    pictures drawn there from them, each of the servers named and no other, its caption speaking only of them;
    timelines.svg, stall.svg and bench/results/ as they were."""
    import xml.etree.ElementTree as ET
    before = kept_state()
    result = timelines_command("--out", str(tmp_path / "mine"), "--work", "20000", "echo_select.py",
                               "echo_prefork.py", timeout=240)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert kept_state() == before, "the committed pictures and the kept traces were touched"
    mine = tmp_path / "mine"
    assert sorted(p.name for p in (mine / "timelines").iterdir()) == ["echo_prefork.jsonl", "echo_select.jsonl",
                                                                      "meta.json"]
    assert sorted(p.name for p in (mine / "stall").iterdir()) == ["echo_select.jsonl", "meta.json"]
    assert "drawn: {}".format(mine / "timelines.svg") in result.stderr
    svg = (mine / "timelines.svg").read_text()
    assert svg == draw.kept_timelines(mine / "timelines")
    drawn = [g.get("data-server") for g in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}g")
             if g.get("class") == "panel"]
    assert drawn == ["echo_select.py", "echo_prefork.py --workers 4"]
    texts = " ".join("".join(t.itertext()) for t in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text"))
    assert "echo_simple.py" not in texts and "echo_prethread.py" not in texts and "--backlog" not in texts
    assert (mine / "stall.svg").read_text() == draw.kept_timelines(mine / "stall")
