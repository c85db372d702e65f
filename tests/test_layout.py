"""The layout every echo_*.py keeps: the lesson first, then a banner, then the shared parts,
identical in every file that has them and in one order, then main()."""
import ast

import pytest

from helpers import ROOT, SERVERS

BANNER = "# ---- Below, to main(), every echo_*.py is the same: logging, shedding, arguments, start-up. ----"
# The shared functions, in their order; the first five are in every file.
SHARED = ["log", "shed_connection", "number", "parse_args", "start_listening", "on_loop_error", "stop_children"]
EVERYWHERE = SHARED[:5]
LESSON_BUDGET = 100  # lines of code (not blank, not comment) from the first function to the banner


def parse(script):
    text = (ROOT / script).read_text()
    return text, text.splitlines(), ast.parse(text)


def banner_line(lines):
    return lines.index(BANNER) + 1  # 1-based, as ast counts


def top_functions(tree):
    return [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


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
    assert set(EVERYWHERE) <= set(shared)


def test_shared_functions_are_identical_in_every_file():
    sources = {}
    for script in SERVERS:
        text, lines, tree = parse(script)
        for node in top_functions(tree):
            if node.lineno > banner_line(lines) and node.name != "main":
                sources.setdefault(node.name, {})[script] = ast.get_source_segment(text, node)
    for name, by_file in sources.items():
        variants = set(by_file.values())
        assert len(variants) == 1, "{} differs between {}".format(name, sorted(by_file))


@pytest.mark.parametrize("script", SERVERS)
def test_the_lesson_fits_its_budget(script):
    _, lines, tree = parse(script)
    first = top_functions(tree)[0].lineno
    lesson = [line for line in lines[first - 1:banner_line(lines) - 1]
              if line.strip() and not line.strip().startswith("#")]
    assert len(lesson) <= LESSON_BUDGET, "{} lines of lesson".format(len(lesson))
