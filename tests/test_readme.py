# SPDX-License-Identifier: 0BSD
"""The documents: README.md and README.ja.md cannot drift apart, nor ERRATA.ja.md from the article's
tables in ERRATA.md; no relative link is dead, and README.md stays a five-minute read. Standard
library and pytest only; nothing is started."""
import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README, README_JA = ROOT / "README.md", ROOT / "README.ja.md"
ERRATA, ERRATA_JA = ROOT / "ERRATA.md", ROOT / "ERRATA.ja.md"
RESULTS = ROOT / "RESULTS.md"
RESULTS_LINE_LIMIT = 850  # a reader finishes it; the open loop's steps are in SWEEPS.md (800 until what a held client costs)
# The sections of each README that quote RESULTS.md: every figure in them comes from it.
QUOTING = {README: ("Results", "The article's three questions", "Shared socket or SO_REUSEPORT?"),
           README_JA: ("結果", "記事の 3 つの疑問", "共有ソケットか SO_REUSEPORT か")}
# The sections of ERRATA.md about the article's code, each one table: ERRATA.ja.md translates
# them, in this order, and nothing else ("Found while testing this pack" stays in English).
ERRATA_ARTICLE_SECTIONS = ("The servers", "The client")
# Every Markdown document at the top of the pack (README.md, README.ja.md, RESULTS.md, ...).
DOCUMENTS = sorted(ROOT.glob("*.md"))
README_WORD_LIMIT = 1480  # `wc -w README.md`: about five minutes of reading (1,300 until the issues on Windows, the lessons and more than one core; 1,400 until what a held client costs, a reader's own timeline and the times named their machine)

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
# [text](target) and ![alt](target); the target ends at the first space or ')'.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# A file the pack has, named in running text or code: echo_x.py, tests/x.py, X.md, x.svg, .ci/run.
FILE_NAME = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w.-]+\.(?:py|md|svg)|\.ci/run)(?![\w-])")


def text(path):
    return path.read_text(encoding="utf-8")


def code_blocks(markdown):
    return FENCE.findall(markdown)


def prose(markdown):
    """The text outside fenced code blocks: a '#' in a code block is not a heading."""
    return FENCE.sub("", markdown)


def links(markdown):
    return LINK.findall(prose(markdown))


def file_names(markdown):
    """Files named anywhere, links excepted (URLs name pages, not files of the pack)."""
    without_urls = re.sub(r"https?://\S+", "", markdown)
    return set(FILE_NAME.findall(without_urls))


def slug(heading):
    """GitHub's anchor for a heading: its text without Markdown, lower case, punctuation dropped
    (letters of any script, digits, '_' and '-' stay), each space a '-'."""
    heading = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    heading = heading.strip().lower()
    kept = "".join(c for c in heading
                   if c in "-_ " or unicodedata.category(c)[0] in "LNM")
    return kept.replace(" ", "-")


def anchors(path):
    """Every anchor the headings of a document give, duplicates numbered as GitHub does."""
    seen, result = {}, set()
    for line in prose(text(path)).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        result.add(base if n == 0 else "{}-{}".format(base, n))
    return result


def test_the_slug_follows_github():
    assert slug("The article's three open questions, answered with measurements") == \
        "the-articles-three-open-questions-answered-with-measurements"
    assert slug("c10k-cpu: 10000 clients x 1 connections x 1 messages of 32 B, servers run --work 100000") == \
        "c10k-cpu-10000-clients-x-1-connections-x-1-messages-of-32-b-servers-run---work-100000"
    assert slug("Every server: `--all`") == "every-server---all"
    assert slug("試してみる（2分）") == "試してみる2分"


def test_both_readmes_exist_and_link_to_each_other():
    assert "README.ja.md" in links(text(README)), "README.md must link to README.ja.md"
    assert "README.md" in links(text(README_JA)), "README.ja.md must link back to README.md"
    # At the top: within the first ten lines, before the first section.
    assert "README.ja.md" in "\n".join(text(README).splitlines()[:10])
    assert "README.md" in "\n".join(text(README_JA).splitlines()[:10])


def tables(markdown):
    """The data rows of each table, in order (the header row and the |---| line left out)."""
    return [block.splitlines()[2:] for block in re.findall(r"(?:^\|.*\n?)+", prose(markdown), re.M)]


def sections(markdown):
    """{heading: text} for each '## ' section."""
    parts = re.split(r"^## +(.*?)\s*$", prose(markdown), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def code_spans(markdown):
    return re.findall(r"`([^`\n]+)`", markdown)


def errata_tables():
    """ERRATA.md's tables about the article's code and ERRATA.ja.md's, paired in order."""
    english_sections = sections(text(ERRATA))
    english = []
    for heading in ERRATA_ARTICLE_SECTIONS:
        assert heading in english_sections, "ERRATA.md has no section '## {}'".format(heading)
        found = tables(english_sections[heading])
        assert len(found) == 1, "ERRATA.md's '## {}' has {} tables, not one".format(
            heading, len(found))
        english += found
    japanese = tables(text(ERRATA_JA))
    assert len(japanese) == len(english), \
        "ERRATA.ja.md has {} tables; ERRATA.md's {} have {}".format(
            len(japanese), " and ".join(ERRATA_ARTICLE_SECTIONS), len(english))
    return list(zip(ERRATA_ARTICLE_SECTIONS, english, japanese))


def test_errata_ja_exists_and_both_readmes_link_to_it():
    assert ERRATA_JA.exists()
    assert "ERRATA.ja.md" in links(text(README)), "README.md must link to ERRATA.ja.md"
    assert "ERRATA.ja.md" in links(text(README_JA)), "README.ja.md must link to ERRATA.ja.md"


def test_errata_and_errata_ja_link_to_each_other_at_the_top():
    assert "ERRATA.ja.md" in links("\n".join(text(ERRATA).splitlines()[:10]))
    assert "ERRATA.md" in links("\n".join(text(ERRATA_JA).splitlines()[:10]))
    # What it leaves untranslated, it links to.
    assert "ERRATA.md#found-while-testing-this-pack" in links(text(ERRATA_JA))


def test_errata_ja_has_a_row_for_every_row_of_the_articles_tables():
    for heading, english, japanese in errata_tables():
        assert len(japanese) == len(english), \
            "ERRATA.md's '{}' table has {} rows, ERRATA.ja.md's {}".format(
                heading, len(english), len(japanese))


def test_errata_ja_keeps_the_code_links_and_figures_of_each_table():
    for heading, english, japanese in errata_tables():
        english, japanese = "\n".join(english), "\n".join(japanese)
        assert code_spans(japanese) == code_spans(english), \
            "'{}': the code spans differ (or their order)".format(heading)
        assert links(japanese) == links(english), "'{}': the links differ".format(heading)
        # "ten idle clients" is "10 個" in Japanese: only the English figures must all be there.
        missing = figures(english) - figures(japanese)
        assert not missing, "'{}': figures not in ERRATA.ja.md: {}".format(
            heading, sorted(missing))


def test_readmes_have_the_same_code_blocks_in_the_same_order():
    english, japanese = code_blocks(text(README)), code_blocks(text(README_JA))
    assert english, "README.md has no code block"
    assert japanese == english


def test_readmes_name_the_same_files():
    english, japanese = file_names(text(README)), file_names(text(README_JA))
    assert {"client.py", "RESULTS.md", "results.svg"} <= english
    assert japanese - {"README.md"} == english - {"README.ja.md"}


def test_readmes_carry_the_same_link_targets():
    english = [t for t in links(text(README)) if t != "README.ja.md"]
    japanese = [t for t in links(text(README_JA)) if t != "README.md"]
    assert sorted(japanese) == sorted(english)


def figures(markdown):
    """The numbers in a text, link targets aside. Single digits are left out: a count written
    as a word in one language ("nine servers") is a digit in the other ("9つのサーバー")."""
    markdown = re.sub(r"\]\([^)]*\)", "]", markdown)
    found = re.findall(r"(?<![\d.,])\d+(?:[.,]\d+)*", markdown)
    return {number for number in found if len(number) > 1}


def test_readmes_give_the_same_figures():
    english, japanese = figures(text(README)), figures(text(README_JA))
    assert {"7777", "256"} <= english
    assert sorted(japanese - english) == [], "figures only in README.ja.md"
    assert sorted(english - japanese) == [], "figures only in README.md"


def test_readme_has_the_test_command_ci_runs():
    command = "python3 -m pytest -q tests/"
    assert any(command in block for block in code_blocks(text(README)))
    assert command in text(ROOT / ".ci" / "run")


def test_readme_is_a_five_minute_read():
    words = len(text(README).split())  # what `wc -w` counts
    assert words <= README_WORD_LIMIT, \
        "README.md has {} words (at most {}): move the detail to RESULTS.md, CLIENT.md, " \
        "ERRATA.md or DEVELOPMENT.md and link to it".format(words, README_WORD_LIMIT)


def test_client_md_counts_the_groups_of_the_help(client_module):
    """CLIENT.md says in how many groups `client.py --help` lists its flags: the count is the parser's."""
    help_text = client_module.build_parser().format_help()  # plain: conftest sets PYTHON_COLORS=0
    groups = [line for line in help_text.splitlines() if re.match(r"^\S.*:$", line)
              and line not in ("options:", "optional arguments:", "positional arguments:", "examples:")]
    words = dict(enumerate("no one two three four five six seven eight nine ten".split()))
    assert "in {} groups".format(words[len(groups)]) in " ".join(text(ROOT / "CLIENT.md").split()), groups


def test_the_documents_are_found():
    names = {path.name for path in DOCUMENTS}
    assert {"README.md", "README.ja.md", "RESULTS.md", "ERRATA.md", "ERRATA.ja.md", "CLIENT.md",
            "DEVELOPMENT.md"} <= names


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_relative_links_and_anchors_resolve(document):
    dead = []
    for target in links(text(document)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        linked = (document.parent / path).resolve() if path else document
        if not linked.exists():
            dead.append("{} (no such file)".format(target))
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            dead.append("{} (no such heading in {})".format(target, linked.name))
    assert not dead, "{}: {}".format(document.name, "; ".join(dead))


@pytest.mark.parametrize("readme", sorted(QUOTING), ids=lambda path: path.name)
def test_every_figure_a_readme_quotes_is_in_results(readme):
    found = sections(text(readme))
    quoted = set()
    for heading in QUOTING[readme]:
        assert heading in found, "{} has no section '## {}'".format(readme.name, heading)
        quoted |= figures(found[heading])
    assert quoted, "{} quotes no figure".format(readme.name)
    missing = quoted - figures(text(RESULTS))
    assert not missing, "{} quotes figures RESULTS.md does not have: {}".format(readme.name, sorted(missing))


def test_results_is_within_its_length_budget():
    lines = len(text(RESULTS).splitlines())
    assert lines <= RESULTS_LINE_LIMIT, "RESULTS.md has {} lines (at most {})".format(lines, RESULTS_LINE_LIMIT)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_headings_are_unique(document):
    """A link to a heading goes to one place: no two headings of a document share an anchor."""
    seen = [slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.*?)\s*#*\s*$", prose(text(document)), re.M)]
    twice = sorted({s for s in seen if seen.count(s) > 1})
    assert not twice, "{}: headings that repeat: {}".format(document.name, twice)


def test_the_readmes_line_on_held_clients_gives_the_records_figures():
    """The lines each README gives what a held client costs (issue 47, a paragraph) read bench/held.py's records
    (bench/results/held.json) as RESULTS.md's table does: the most a server of worker processes held, with its
    --workers, in how many MiB of server memory, and the KiB a connection of a thread and of a process per client."""
    import json
    import held
    servers = {s["server"]: s for s in held.most_held(json.loads(text(ROOT / "bench" / "results" / "held.json")))}
    best = servers["echo_reuseport.py"]
    quoted = ["{:,}".format(best["held"]), best["flags"], held.mib_text(best["row"]["server_memory_held_kib"]),
              held.kib_text(servers["echo_thread.py"]["row"]["server_kib_per_held"]),
              held.kib_text(servers["echo_fork.py"]["row"]["server_kib_per_held"])]
    for readme in (README, README_JA):
        line = next((" ".join(paragraph.split()) for paragraph in text(readme).split("\n\n")
                     if "RESULTS.md#what-a-held-client-costs" in paragraph and "echo_reuseport.py" in paragraph), "")
        assert all(figure in line for figure in quoted), (readme.name, quoted, line)
