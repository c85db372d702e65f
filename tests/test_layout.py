"""The layout every echo_*.py keeps: docstring, imports and constants, then the lesson (the
pattern's own loop), then a banner, then the shared parts, identical in every file that has
them and in one order, then main(). Each file names one parent, and `diff PARENT FILE` stays
small enough to be read as the idea."""
import ast
import difflib
import re

import pytest

from helpers import ROOT, SERVERS

BANNER = "# ---- Below, to main(), every echo_*.py is the same: logging, shedding, arguments, socket set-up. ----"
# The shared functions, in their order. The first eight are in every file (but create_server_socket
# stands in the lesson where the socket set-up is the idea: SO_REUSEPORT).
SHARED = ["log", "shed_connection", "number", "seconds", "parse_args", "keep_alive", "create_server_socket",
          "start_listening",
          "on_loop_error", "counted", "served", "report_served", "fork_worker", "finished_children", "run_workers", "signal_pipe",
          "catch_stop_signals", "stop_children"]
EVERYWHERE = SHARED[:8]
SOCKET_IS_THE_LESSON = {"echo_reuseport.py"}
LESSON_BUDGET = 100  # lines of code (not blank, not comment) from the first function to the banner
# Files whose lesson takes more than LESSON_BUDGET lines, and why.
LESSON_BUDGET_EXCEPTIONS = {
    "echo_asyncio.py": (110, "the idea plus a deadline per connection (one timer, re-armed from a time stamp "
                             "per chunk and the kernel's send queue), the stop (a flag, half-close, read and "
                             "drop), and sock_sendall() as a loop of send() whose waits for room are progress"),
    "echo_selectors.py": (116, "the idea plus a deadline per connection (with a last send() at it) and the stop "
                               "(last echoes, half-close, read and drop)"),
    "echo_reuseport.py": (126, "echo_selectors.py's loop with its deadlines and stop, plus the SO_REUSEPORT socket"),
    "echo_shared_socket.py": (130, "echo_selectors.py's loop with its deadlines and stop, plus the three ways "
                                   "to accept (an epoll of its own for EPOLLEXCLUSIVE)"),
    "echo_select_pool.py": (130, "the idea plus a deadline per connection and a stop that waits for the "
                                 "chunks the senders hold (send_queue.join()) before it half-closes"),
    "echo_threadpool.py": (125, "the idea plus a deadline per connection and a stop that waits for the "
                                "callbacks (pool.shutdown()), then reads and drops in the loop"),
    "echo_selectors_process.py": (163, "two programs: the acceptor (deal, replace workers, wake on signals) and "
                                       "echo_selectors.py's loop with its deadlines and stop in each worker, which "
                                       "takes the connections already passed before it closes its channel"),
}
DIFF_BUDGET = 60  # changed code lines between a file and its parent
# Files whose idea takes more than DIFF_BUDGET lines, and why.
DIFF_BUDGET_EXCEPTIONS = {
    "echo_asyncio.py": (161, "coroutines on the loop's socket API replace the blocking calls, and with them how "
                             "time is kept (a timer per connection, not a socket timeout) and how a stop "
                             "arrives (the loop's signal handler and a flag, not Python-level handlers)"),
    "echo_asyncio_streams.py": (84, "start_server's reader and writer replace the socket calls, so the stop half-"
                                    "closes with write_eof(), and the close waits, under the deadline, for "
                                    "the transport to send what it holds"),
    "echo_asyncio_protocol.py": (101, "callbacks replace the coroutine, so the stop is a method that the "
                                      "transport's flow control drives (a high-water mark of 0, then "
                                      "write_eof()), and a stop waits on a future per connection"),
    "echo_fork.py": (62, "the fork per connection, and a stop in two halves: the parent takes the clients "
                         "already queued, then passes the signal on; each child has its own handlers"),
    "echo_prefork.py": (89, "the lock around accept() replaces echo_fork.py's fork per connection and its parent's "
                            "stop; each worker stops on its own, taking the clients already queued first"),
    "echo_selectors.py": (177, "the non-blocking loop is the idea whole: a Client record with its send "
                               "buffer, send_recv() saying what it wants, and the one place that applies it, "
                               "which is also how a client stops (echo_epoll.py's blocking sends stop otherwise)"),
    "echo_select.py": (133, "one client at a time becomes a select() loop, so the deadline is an OrderedDict kept "
                            "in order on the loop's clock, and the stop half-closes every client at once"),
    "echo_select_pool.py": (95, "the select() loop reads, a pool of sender threads writes, and the read buffers "
                                "go round between them (a fresh 64 KiB object per read, freed in another "
                                "thread, fragments the heap); the stop waits for the chunks the senders hold"),
    "echo_threadpool.py": (155, "two changes that only work together: a selector instead of select() "
                                "(clients past FD_SETSIZE), and an executor running whole callbacks "
                                "instead of sender threads fed by a queue; so the stop waits for the pool, "
                                "and the loop reads and drops itself"),
    "echo_selectors_process.py": (113, "the acceptor (deal, replace workers, wake on signals) and the "
                                       "worker fed over a Unix socket (whose EOF is a stop too) replace "
                                       "echo_selectors.py's accept"),
}


def parse(script):
    text = (ROOT / script).read_text()
    return text, text.splitlines(), ast.parse(text)


def banner_line(lines):
    return lines.index(BANNER) + 1  # 1-based, as ast counts


def top_functions(tree):
    return [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


def parent_of(script):
    """The one file named on the docstring's 'Builds on:' line, or None for echo_simple.py."""
    _, _, tree = parse(script)
    line = next(line for line in ast.get_docstring(tree).splitlines() if line.startswith("Builds on:"))
    named = re.findall(r"echo_\w+\.py", line.split("(")[0])
    return named[0] if named else None


def shared_names(script):
    """The functions and the module-level names defined below the banner: the shared parts."""
    _, lines, tree = parse(script)
    below = [node for node in tree.body if node.lineno > banner_line(lines)]
    return ({node.name for node in below if isinstance(node, (ast.FunctionDef, ast.ClassDef))} - {"main"}
            | {target.id for node in below if isinstance(node, ast.Assign) for target in node.targets})


def code_lines(script, leave_out=()):
    """The file's code lines, stripped: no docstring, blank or comment lines, and none of the
    shared parts (functions, module-level names) named in leave_out."""
    text, lines, tree = parse(script)
    skip = set(range(tree.body[0].lineno - 1, tree.body[0].end_lineno))  # the docstring
    for node in tree.body:
        names = {getattr(node, "name", None)} | {getattr(target, "id", None) for target in getattr(node, "targets", ())}
        if node.lineno > banner_line(lines) and names & set(leave_out):
            skip.update(range(node.lineno - 1, node.end_lineno))
    return [line.strip() for i, line in enumerate(lines)
            if i not in skip and line.strip() and not line.strip().startswith("#")]


def changed_lines(script):
    """The code lines `diff PARENT FILE` shows, less the shared parts the file adds."""
    parent = parent_of(script)
    added_shared = shared_names(script) - shared_names(parent)
    return [line for line in difflib.unified_diff(code_lines(parent), code_lines(script, added_shared),
                                                  n=0, lineterm="")
            if line[:1] in "+-" and line[:3] not in ("+++", "---")]


@pytest.mark.parametrize("script", SERVERS)
def test_banner_divides_lesson_from_shared_parts_in_order(script):
    _, lines, tree = parse(script)
    assert BANNER in lines, "the banner line is missing"
    banner = banner_line(lines)
    below = [node.name for node in top_functions(tree) if node.lineno > banner]
    assert below[-1] == "main", "main() comes last"
    shared = below[:-1]
    assert all(name in SHARED for name in shared), "only shared functions below the banner: {}".format(shared)
    assert shared == sorted(shared, key=SHARED.index), "the shared functions keep one order"
    everywhere = set(EVERYWHERE) - ({"create_server_socket"} if script in SOCKET_IS_THE_LESSON else set())
    assert everywhere <= set(shared)


@pytest.mark.parametrize("script", SERVERS)
def test_the_lesson_comes_first_and_carries_no_plumbing(script):
    """After the docstring, imports and constants, the first function is the pattern's own; no shared
    function stands above the banner (create_server_socket only where SO_REUSEPORT is the lesson)."""
    _, lines, tree = parse(script)
    first = top_functions(tree)[0]
    assert all(isinstance(node, (ast.Import, ast.ImportFrom, ast.Assign, ast.Try, ast.Expr))
               for node in tree.body[:tree.body.index(first)]), "only imports and constants before the lesson"
    above = [node.name for node in top_functions(tree) if node.lineno < banner_line(lines)]
    plumbing = set(above) & set(SHARED)
    if script in SOCKET_IS_THE_LESSON:
        assert plumbing == {"create_server_socket"}
        assert "SO_REUSEPORT" in ast.get_source_segment(parse(script)[0], first)
    else:
        assert not plumbing, "shared parts above the banner: {}".format(sorted(plumbing))


def test_shared_functions_are_identical_in_every_file():
    sources = {}
    for script in SERVERS:
        text, lines, tree = parse(script)
        for node in top_functions(tree):
            if node.lineno > banner_line(lines) and node.name != "main":
                sources.setdefault(node.name, {})[script] = ast.get_source_segment(text, node)
    assert set(sources) == set(SHARED), "every shared function is used somewhere"
    for name, by_file in sources.items():
        variants = set(by_file.values())
        assert len(variants) == 1, "{} differs between {}".format(name, sorted(by_file))


@pytest.mark.parametrize("script", SERVERS)
def test_the_lesson_fits_its_budget(script):
    _, lines, tree = parse(script)
    first = top_functions(tree)[0].lineno
    lesson = [line for line in lines[first - 1:banner_line(lines) - 1]
              if line.strip() and not line.strip().startswith("#")]
    budget, _ = LESSON_BUDGET_EXCEPTIONS.get(script, (LESSON_BUDGET, ""))
    assert len(lesson) <= budget, "{} lines of lesson".format(len(lesson))


def test_each_file_names_one_parent_and_the_chain_reaches_echo_simple():
    parents = {script: parent_of(script) for script in SERVERS}
    assert [script for script, parent in parents.items() if parent is None] == ["echo_simple.py"]
    for script in SERVERS:
        seen = [script]
        while parents[seen[-1]] is not None:
            assert parents[seen[-1]] in SERVERS, "{} builds on a file that is not here".format(seen[-1])
            assert parents[seen[-1]] not in seen, "a loop: {}".format(seen)
            seen.append(parents[seen[-1]])


@pytest.mark.parametrize("script", [s for s in SERVERS if s != "echo_simple.py"])
def test_the_diff_against_the_parent_is_the_idea(script):
    """`diff PARENT FILE` (docstring, blank and comment lines aside) stays within DIFF_BUDGET
    changed lines. The shared parts a file adds (the process servers' parent and its state,
    say) are not counted: test_shared_functions_are_identical_in_every_file holds the
    functions the same everywhere, so a reader meets each once."""
    changed = changed_lines(script)
    budget, _ = DIFF_BUDGET_EXCEPTIONS.get(script, (DIFF_BUDGET, ""))
    assert len(changed) <= budget, "{} changed code lines against {}:\n{}".format(
        len(changed), parent_of(script), "\n".join(changed))


def test_every_budget_exception_is_still_needed():
    for script, (budget, why) in DIFF_BUDGET_EXCEPTIONS.items():
        assert script in SERVERS and why
        changed = len(changed_lines(script))
        assert DIFF_BUDGET < changed <= budget, "{}: {} changed lines; drop or tighten its exception".format(
            script, changed)
