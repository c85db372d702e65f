# SPDX-License-Identifier: 0BSD
"""client.py --trace: each connection's life as JSON lines (CLIENT.md, "--trace"), read back here line by line;
the runs it refuses, in one line before anything starts. What the traces show of two servers' shapes is
tests/test_timelines.py's."""
import json
import socket

import pytest

from helpers import CERT, client, client_json

KINDS = {"refused", "reset", "connect timeout", "timeout", "closed early", "mismatch", "extra bytes", "deadline",
         "tls", "other", "ports", "descriptors"}


def read(path):
    """A trace: (its run line, its connection lines), every line parsed on its own."""
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    run = lines[0]
    assert set(run) == {"trace", "t0", "clock", "host", "port", "workload"}
    assert run["trace"] == 1 and run["clock"] == "perf_counter" and isinstance(run["t0"], float)
    for c in lines[1:]:
        assert set(c) == {"worker", "client", "connection", "connect", "messages", "end", "how"}, c
        assert c["how"] == "eof" or c["how"] in KINDS, c
    return run, lines[1:]


def in_order(c):
    """A connection's times in the order they happened: connect() started, connected, then each message sent and
    echoed, then its end (those that never came, None, left out)."""
    times = [t for t in [*c["connect"], *(t for message in c["messages"] for t in message), c["end"]] if t is not None]
    return times == sorted(times) and times[0] >= 0


SHAPES = {  # flags: (the connections as (client, connection), the messages of each)
    "closed": (["--clients", "3", "--connects", "2", "--messages", "4"],
               {(c, k) for c in range(3) for k in range(2)}, 4),
    "held": (["--clients", "4", "--connects", "1", "--messages", "3", "--hold"], {(c, 0) for c in range(4)}, 3),
    "open": (["--rate", "40", "--duration", "0.25", "--messages", "2"], {(None, k) for k in range(10)}, 2),
    "tls": (["--clients", "2", "--connects", "2", "--messages", "3", "--tls", "--cafile", str(CERT)],
            {(c, k) for c in range(2) for k in range(2)}, 3),
}


@pytest.mark.windows
@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES)
def test_a_trace_has_the_run_then_a_line_per_connection_its_times_in_order(echo_server, tmp_path, shape):
    """The run's line (its workload as --json writes one), then one line per connection, each worker's on one axis:
    a closed-loop client's connections in its worker (client ids are dealt out in turn), an open-loop connection
    started no sooner than its place in the schedule, counted from the parent's t0."""
    flags, connections, messages = SHAPES[shape]
    path = tmp_path / "trace.jsonl"
    port = echo_server(tls=shape == "tls")
    figures, _ = client_json("--port", str(port), "--procs", "2", *flags, "--trace", str(path))
    run, lines = read(path)
    assert run["host"] == "127.0.0.1" and run["port"] == port and run["workload"]["messages"] == messages
    assert run["workload"]["rate"] == (40 if shape == "open" else None)
    assert sorted((c["client"], c["connection"]) for c in lines) == sorted(connections)
    assert all(c["how"] == "eof" and len(c["messages"]) == messages and None not in c["connect"] and in_order(c)
               for c in lines), lines
    assert sum(len(c["messages"]) for c in lines) == figures["messages"] == len(connections) * messages
    if shape == "open":  # connection k is due k / 40 s after its worker started, which is after t0
        assert all(c["worker"] == c["connection"] % 2 and c["connection"] / 40 - 0.002 <= c["connect"][0] <
                   c["connection"] / 40 + 5 for c in lines), lines
    else:
        assert all(c["worker"] == c["client"] % 2 for c in lines), lines
        assert max(c["end"] for c in lines) <= figures["wall_s"] + 5


@pytest.mark.slow
def test_a_refused_connection_is_traced_with_its_kind(tmp_path):
    """A port that is bound but does not listen, taken for one that listens (so that the run goes ahead): each
    connection's line, connected never, no message, its kind "refused"."""
    path = tmp_path / "trace.jsonl"
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        result = client("--port", str(bound.getsockname()[1]), "--clients", "2", "--connects", "2", "--messages", "3",
                        "--trace", str(path), prelude="import client\nclient.listening_sockets = lambda port: {'0'}")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    _, lines = read(path)
    assert sorted((c["client"], c["connection"]) for c in lines) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(c["connect"][1] is None and c["messages"] == [] and c["how"] == "refused" and in_order(c)
               for c in lines), lines


@pytest.mark.slow
def test_a_wrong_echo_ends_its_line_with_the_message_that_never_came_back(echo_server, tmp_path):
    """The server corrupts its third echo: the first two messages echoed, the third's echo null, "mismatch"."""
    path = tmp_path / "trace.jsonl"
    result = client("--port", str(echo_server("corrupt")), "--clients", "1", "--connects", "1", "--messages", "5",
                    "--trace", str(path))
    assert result.returncode != 0
    _, [line] = read(path)
    assert line["how"] == "mismatch" and [echoed is not None for _, echoed in line["messages"]] == [True, True, False]
    assert in_order(line)


@pytest.mark.parametrize("flags", [
    ["--clients", "100", "--connects", "21"],  # 2,100 connections
    ["--clients", "10", "--connects", "10", "--messages", "1001"],  # 100,100 messages
    ["--rate", "1000", "--duration", "2.5"],  # 2,500 connections
    ["--rate", "100:200:100"], ["--seconds", "1"], ["--all"]])
def test_a_run_beyond_what_a_trace_is_for_is_one_line_before_anything_starts(tmp_path, flags):
    """Too many connections or messages, a sweep, timed connections, --all: one line, a non-zero exit, no file
    written, no connection made."""
    path = tmp_path / "trace.jsonl"
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        listening.setblocking(False)
        result = client("--port", str(listening.getsockname()[1]), *flags, "--trace", str(path))
        with pytest.raises(BlockingIOError):
            listening.accept()
    assert result.returncode != 0 and result.stderr.count("\n") == 1 and "--trace" in result.stderr
    assert "Traceback" not in result.stderr and not path.exists()


def test_a_path_that_cannot_be_written_is_one_line_before_anything_starts(tmp_path):
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        listening.setblocking(False)
        result = client("--port", str(listening.getsockname()[1]), "--trace", str(tmp_path / "no" / "trace.jsonl"))
        with pytest.raises(BlockingIOError):
            listening.accept()
    assert result.returncode != 0 and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "cannot write" in result.stderr and "No such file or directory" in result.stderr


def test_a_refused_run_leaves_an_earlier_trace_as_it_was(tmp_path):
    """The path is tried before anything starts, but a trace already there is replaced only by a run's."""
    path = tmp_path / "trace.jsonl"
    path.write_text("an earlier run\n")
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    result = client("--port", str(port), "--trace", str(path))
    assert result.returncode != 0 and "cannot connect" in result.stderr and "Traceback" not in result.stderr
    assert path.read_text() == "an earlier run\n"
