# SPDX-License-Identifier: 0BSD
"""Sentences of the documents that state a number or a default of the code, the records or the
article: each read from there, so that the sentence fails here when its source changes. No server is
started: each script is asked for its --help once (help_defaults()), and one listening socket of this
process's own shows the kernel's listen queue."""
import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import queue_capacity

ROOT = Path(__file__).resolve().parent.parent
ARTICLE = next((ROOT.parent / "shared" / "article").glob("*.txt"), None) if (
    ROOT.parent / "shared" / "article").is_dir() else None
WORDS = dict(enumerate("zero one two three four five six seven eight nine ten".split()))


def text(name):
    return " ".join((ROOT / name).read_text(encoding="utf-8").split())


def constant(script, name):
    """A server's constant, as its line `NAME = value` sets it."""
    return int(re.search(r"^{} = (\d+)".format(name), (ROOT / script).read_text(), re.M).group(1))


def records(name):
    return json.loads((ROOT / "bench" / "results" / name).read_text())


@functools.cache
def help_defaults(script):
    """The defaults a script's --help states, by flag: {"--port": "7777", ...} (one line per flag: no wrapping)."""
    out = subprocess.run([sys.executable, str(ROOT / script), "--help"], capture_output=True, text=True, timeout=60,
                         check=True, env=dict(os.environ, COLUMNS="1000")).stdout
    found = {}
    for entry in re.findall(r"^  (-.*(?:\n {3,}\S.*)*)", out, re.M):
        flags = re.findall(r"--[\w-]+", entry.split("  ")[0])
        default = re.search(r"\(default: ([^)]*)\)$", " ".join(entry.split()))
        if flags and default:
            found[flags[-1]] = default.group(1)
    return found


def figure(value):
    """A default as the documents write it: 120.0 -> 120, 20000 -> 20,000, 0.05 -> 0.05."""
    value = float(value)
    return "{:,}".format(int(value)) if value == int(value) else "{:g}".format(value)


def fd_setsize(script="echo_select.py"):
    """The first descriptor select() cannot watch on Linux, as the select servers set it."""
    return int(re.search(r"^FD_SETSIZE, MAX_CLIENTS = \((\d+),", (ROOT / script).read_text(), re.M).group(1))


def svg_words(svg):
    """The words of a picture's texts, its caption's lines joined."""
    import xml.etree.ElementTree as ET
    return " ".join(" ".join("".join(t.itertext()) for t in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text"))
                    .split())


def test_the_backlog_sentences_give_each_servers_default():
    backlogs = {path.name: constant(path.name, "BACKLOG") for path in ROOT.glob("echo_*.py")}
    first = backlogs.pop("echo_simple.py")
    (rest,) = set(backlogs.values())
    assert "`--backlog N` (the article's {}; echo_simple.py's {})".format(rest, first) in text("README.md")
    assert "`--backlog N`（記事と同じ {}。echo_simple.py は {}）".format(rest, first) in text("README.ja.md")
    assert "`--backlog` long (the article's {}, and {} in echo_simple.py;".format(rest, first) in \
        text("bench/RESULTS.template.md")
    assert "by default the article's {} (echo_simple.py: {})".format(rest, first) in text("DEVELOPMENT.md")
    if ARTICLE:  # the article's: listen(5) in its first server, listen(256) in every other
        listens = [int(n) for n in re.findall(r"listen\((\d+)\)", ARTICLE.read_text(encoding="utf-8"))]
        assert listens[0] == first and set(listens[1:]) == {rest}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's listen queue")
def test_linux_queues_one_client_more_than_the_backlog():
    """echo_simple.py's comment on its backlog: Linux completes backlog + 1 connects that nobody accepts."""
    backlog = constant("echo_simple.py", "BACKLOG")
    assert "BACKLOG = {}  # the article's backlog: Linux queues {} clients while one is served".format(
        backlog, WORDS[backlog + 1]) in (ROOT / "echo_simple.py").read_text()
    assert queue_capacity(backlog) == backlog + 1



def test_the_timelines_caption_gives_echo_simples_default_backlog_and_what_linux_queues():
    """timelines.svg's caption says why echo_simple.py ran with a --backlog of its own: its default (its constant,
    as its --help gives it) and the connections Linux queues for it (one more, as
    test_linux_queues_one_client_more_than_the_backlog measures)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import draw
    backlog = constant("echo_simple.py", "BACKLOG")
    assert help_defaults("echo_simple.py")["--backlog"] == str(backlog)
    words = svg_words(draw.kept_timelines(ROOT / "bench" / "results" / "timelines"))
    assert "with its default of {}, Linux queues {} connections".format(backlog, backlog + 1) in words, words


def test_what_the_stalled_senders_send_took_is_said_from_the_stall_records():
    """bench/timelines.py says how much the stalled client's send() had taken when it blocked: the range of the kept
    stall traces' taken_before_blocking, in MiB (as stall.svg's caption computes it), below the bytes it sends."""
    sys.path.insert(0, str(ROOT / "bench"))
    import draw
    import timelines
    folder = ROOT / "bench" / "results" / "stall"
    taken = [json.loads(line)["taken_before_blocking"] for path in sorted(folder.glob("*.jsonl"))
             for line in path.read_text().splitlines() if '"who": "stalled"' in line]
    assert len(taken) == len(timelines.STALL_SERVERS) and all(taken)
    span = draw.span_text([round(n / timelines.MIB, 1) for n in taken], "{:g}")
    source = text("bench/timelines.py")
    assert "its send() had taken {} MiB when such a sender blocked".format(span) in source
    assert "STALL_BYTES = 16 * PIECE # more than send() takes before such a sender blocks ({} MiB: " \
           "bench/results/stall/)".format(span) in source
    assert max(taken) < timelines.STALL_BYTES
    assert "up to {:g} MiB in echo_selectors.py".format(draw.SELECTORS_HOLDS / timelines.MIB) in source  # MAX_BUFFER


def test_the_servers_defaults_are_the_ones_the_documents_give():
    """What every server's --help gives as the default of --host, --port, --timeout and --grace (the same in all
    of them), and the pools' --workers, is what README.md, README.ja.md and DEVELOPMENT.md say."""
    defaults = {path.name: help_defaults(path.name) for path in sorted(ROOT.glob("echo_*.py"))}
    common = {flag: {d[flag] for d in defaults.values()} for flag in ("--host", "--port", "--timeout", "--grace")}
    assert all(len(values) == 1 for values in common.values()), common
    (host,), (port,) = common["--host"], common["--port"]
    timeout, grace = (figure(v) for (v,) in (common["--timeout"], common["--grace"]))
    readme, readme_ja, development = text("README.md"), text("README.ja.md"), text("DEVELOPMENT.md")
    for said in ("Start a server (on {}:{},".format(host, port), "`--host` ({};".format(host),
                 "`--port` ({}; 0 = any free port)".format(port), "`--timeout` ({} s; 0 = none)".format(timeout),
                 "`--grace` ({} s)".format(grace), "python3 client.py --port {} --clients 1".format(port)):
        assert said in readme, said
    for said in ("（{}:{} で待ち受け".format(host, port), "`--host`（{}。".format(host),
                 "`--port`（{}。0 なら空いている任意のポート）".format(port),
                 "`--timeout`（{} 秒。0 なら無期限）".format(timeout), "`--grace`（{} 秒）".format(grace)):
        assert said in readme_ja, said
    for said in ("{} (the default) is IPv4".format(host), "(fractions allowed; default {}; 0 = none)".format(timeout),
                 "{} s is above the longest wait".format(timeout), "(`--grace SECONDS`, default {},".format(grace)):
        assert said in development, said
    workers = {script: defaults[script]["--workers"] for script in
               ("echo_prefork.py", "echo_prethread.py", "echo_select_pool.py")}
    for said in ("| {} pre-forked children, a lock around accept |".format(workers["echo_prefork.py"]),
                 "| {} pre-started threads, a lock around accept |".format(workers["echo_prethread.py"]),
                 "the same with threads: {} clients at once;".format(workers["echo_prethread.py"]),
                 "| select reads, {} sender threads write |".format(workers["echo_select_pool.py"])):
        assert said in readme, said
    for said in ("| 事前に fork した {} 個の子プロセス、".format(workers["echo_prefork.py"]),
                 "| 事前に起動した {} 本のスレッド、".format(workers["echo_prethread.py"]),
                 "同時に扱えるのは {} クライアント。".format(workers["echo_prethread.py"]),
                 "| select で読み、{} 本の送信スレッドが書く |".format(workers["echo_select_pool.py"])):
        assert said in readme_ja, said


def test_the_keepalive_sentence_gives_the_servers_constants():
    """DEVELOPMENT.md's keepalive: each constant as every server sets it, and 'within 2 minutes' their sum."""
    names = ("KEEPALIVE_IDLE", "KEEPALIVE_INTERVAL", "KEEPALIVE_COUNT")
    values = {tuple(constant(path.name, name) for name in names) for path in ROOT.glob("echo_*.py")}
    (idle, interval, count), = values
    assert "`KEEPALIVE_IDLE` ({} s) every `KEEPALIVE_INTERVAL` ({} s) and drops it after `KEEPALIVE_COUNT` ({}) " \
           "unanswered probes".format(idle, interval, count) in text("DEVELOPMENT.md")
    assert "is freed within 2 minutes even with `--timeout 0`" in text("DEVELOPMENT.md")
    assert idle + interval * count <= 2 * 60


def test_the_windows_select_sentences_give_the_codes_counts():
    """Windows' select() takes 512 sockets (client.py's SELECT_MOST, the selector servers' MAX_SOCKETS) and the
    select servers refuse past about 510 clients (echo_select.py's MAX_CLIENTS there; echo_select_pool.py's one
    less, for its wake-up socket of the pool)."""
    sys.path.insert(0, str(ROOT))
    import client
    most = client.SELECT_MOST
    for script in ("echo_selectors.py", "echo_threadpool.py", "echo_selectors_tls.py"):
        assert "MAX_SOCKETS = {} if selectors.DefaultSelector is selectors.SelectSelector".format(most) in \
            (ROOT / script).read_text(), script
    clients = {script: int(re.search(r"^FD_SETSIZE, MAX_CLIENTS = \(\d+, math\.inf\) if hasattr\(select, \"poll\"\) "
                                     r"else \(math\.inf, (\d+)\)", (ROOT / script).read_text(), re.M).group(1))
               for script in ("echo_select.py", "echo_select_pool.py")}
    assert clients["echo_select.py"] == 510 and abs(clients["echo_select_pool.py"] - 510) <= 1  # "about 510"
    assert "there `select()` takes {} sockets: about {} clients a loop".format(most, clients["echo_select.py"]) in \
        text("README.md")
    assert "Windows の `select()` は {} ソケットまでなので、そこでは 1 つのループが同時に相手にできるのは約 {} クライアント" \
        "です".format(most, clients["echo_select.py"]) in text("README.ja.md")
    assert "Windows' takes at most {} sockets a call".format(most) in text("CLIENT.md")
    assert "Windows' `select()` takes {} sockets at most".format(most) in text("DEVELOPMENT.md")
    assert "serve about {} clients at once there".format(clients["echo_select.py"]) in text("DEVELOPMENT.md")


def test_client_md_gives_the_clients_defaults_and_constants():
    """CLIENT.md's numbers of client.py: the defaults its --help states and the constants its reasons name."""
    sys.path.insert(0, str(ROOT))
    import client
    defaults, manual = help_defaults("client.py"), text("CLIENT.md")
    said = [
        "`--seconds 1` with the default `--connects {0}`: {0} s".format(defaults["--connects"]),
        "over all worker processes (default {},".format(defaults["--connect-concurrency"]),
        "**{} connects in flight** (`CONNECTING`)".format(client.CONNECTING),
        "the connections scaled by `--scale` (default {})".format(defaults["--scale"]),
        "at most {} connects start a second".format(figure(client.HELD_PACE)),
        "**Held connections paced at {} a second** (`HELD_PACE`)".format(figure(client.HELD_PACE)),
        "**A SYN retry is a connect of {:g} s or more** (`SYN_RETRY`)".format(client.SYN_RETRY),
        "how many connects took {:g} s or more".format(client.SYN_RETRY),
        "hence {} s for a held connect (`CONNECT_FLOOR`)".format(figure(client.CONNECT_FLOOR)),
        "a connect may take {} s of SYN retries".format(figure(client.CONNECT_FLOOR)),
        "a whole run may go no slower than {} msgs/s".format(figure(client.SLOWEST)),
        "**{} source addresses** (`SOURCES`)".format(client.SOURCES),
        "its source address in turn from {0} (127.0.0.1 to 127.0.0.{0}:".format(client.SOURCES),
        "more than {} connections or {} messages".format(*map(figure, client.TRACED)),
        "at least {:g} % of the offered rate);".format(100 * client.KEPT_SCHEDULE),
        "(over {:g} % errors, or replies under {:g} % of the offered rate)".format(
            100 * client.PAST_ERROR_SHARE, 100 * client.PAST_REPLY_RATIO),
        "the highest offered rate with no error, replies at least {:g} % of the offered rate and p99 at most {:g} "
        "ms".format(100 * client.KNEE_RULE["min_reply_ratio"], client.KNEE_RULE["max_p99_ms"])]
    assert client.KNEE_RULE["max_errors"] == 0 and client.CONNECTING == int(defaults["--connect-concurrency"])
    assert [sentence for sentence in said if sentence not in manual] == []


def test_the_buffer_sizes_the_documents_give_are_the_codes():
    """The servers' 64 KiB read buffer (BUFSIZE), asyncio's stock 256 KiB read (its transports' max_size) and the
    share of its descriptors at which echo_shared_socket.py's worker leaves new clients to the others (CROWDED)."""
    import asyncio.selector_events
    import fractions
    kib = {constant(script, "BUFSIZE") // 1024 for script in ("echo_thread.py", "echo_prethread.py", "echo_asyncio.py",
                                                              "echo_asyncio_buffered.py", "echo_select_pool.py")}
    (kib,) = kib
    development = text("DEVELOPMENT.md")
    for said in ("borrows a {} KiB buffer for that one chunk", "The buffers stay {} KiB and are reused",
                 "costs 81 KiB: its {} KiB buffer", "The thread servers keep their {} KiB buffer"):
        assert said.format(kib) in development, said
    assert "so that an idle client does not hold {} KiB".format(kib) in text("ERRATA.md")
    stock = asyncio.selector_events._SelectorSocketTransport.max_size
    assert "not a fresh {} KiB object per read |".format(stock // 1024) in text("README.md")
    assert "読むたびに {} KiB の新しいオブジェクトを作らず".format(stock // 1024) in text("README.ja.md")
    assert "asyncio's stock transport reads with `sock.recv({})`: a fresh {} KiB object".format(
        stock, stock // 1024) in text("bench/RESULTS.template.md")
    crowded = re.search(r"^CROWDED = (\d+) / (\d+) ", (ROOT / "echo_shared_socket.py").read_text(), re.M)
    share = fractions.Fraction(int(crowded.group(1)), int(crowded.group(2)))
    assert "echo_shared_socket.py's worker whose clients take {} of its descriptors leaves new ones to the " \
           "others".format(share) in text("bench/RESULTS.template.md")


def test_select_refuses_descriptor_fd_setsize_itself_and_the_sentences_say_so():
    """FD_SETSIZE is the first descriptor select() cannot watch: every sentence names the descriptors below it."""
    limit = fd_setsize()
    assert fd_setsize("echo_select_pool.py") == limit
    below = "select() watches descriptors below {} only".format(limit)
    sys.path.insert(0, str(ROOT))
    import client
    assert client.LIMITS["echo_select.py"] == client.LIMITS["echo_select_pool.py"] == below
    failed = {r["server"]: r["failed"] for t in records("c10k.json")["tables"] for r in t["rows"] if r["failed"]}
    assert failed["echo_select.py"].endswith(below) and failed["echo_select_pool.py"].endswith(below)
    assert "descriptors below {} only |".format(limit) in text("README.md")
    assert "扱えるディスクリプタは {} 未満だけ |".format(limit) in text("README.ja.md")
    for script in ("echo_select.py", "echo_select_pool.py"):
        assert 'Refused: select() watches {} descriptors at most"' in (ROOT / script).read_text()
        assert re.search(r"descriptors? (?:from )?FD_SETSIZE \({}\) (?:or above|up)".format(limit),
                         text(script)), script


def test_the_c10k_sentence_names_the_limit_of_every_server_that_failed():
    """README's 'N servers pass; the others fail at their limit (...)': N is the c10k record's, and each server
    that failed c10k, or c1k and was not run at c10k, has its pattern's limit named."""
    c10k = records("c10k.json")["tables"][0]["rows"]
    (c1k,) = [t["rows"] for t in records("cstar.json")["tables"] if t["scenario"] == "c1k"]
    passed = [r["server"] for r in c10k if not r["failed"]]
    failed = {r["server"].split()[0] for r in c10k + c1k if r["failed"]}
    named = {"echo_simple.py": ("one at a time", "一度に 1 クライアント"),
             "echo_select.py": ("descriptor {}".format(fd_setsize()), "ディスクリプタ {}".format(fd_setsize())),
             "echo_select_pool.py": ("descriptor {}".format(fd_setsize("echo_select_pool.py")),
                                     "ディスクリプタ {}".format(fd_setsize("echo_select_pool.py"))),
             "echo_prefork.py": ("ten or forty workers", "10 個や 40 本のワーカー"),
             "echo_prethread.py": ("ten or forty workers", "10 個や 40 本のワーカー"),
             "echo_fork.py": ("a fork or thread each", "クライアントごとの fork やスレッド"),
             "echo_thread.py": ("a fork or thread each", "クライアントごとの fork やスレッド")}
    assert failed == set(named), "a server failed that the sentence does not name, or one passed that it does"
    english = re.search(r"At c10k, (\d+) servers pass with zero errors; the others fail at their limit \(([^)]*)\)",
                        text("README.md"))
    japanese = re.search(r"c10k では (\d+) 個のサーバーがエラーなしで通り、残りはそれぞれの限界（([^）]*)）で失敗します",
                         text("README.ja.md"))
    assert int(english.group(1)) == int(japanese.group(1)) == len(passed)
    for server, (words, words_ja) in named.items():
        assert words in english.group(2) and words_ja in japanese.group(2), server
    assert constant("echo_prefork.py", "WORKERS") == 10 and constant("echo_prethread.py", "WORKERS") == 40


def test_prefork_serves_its_workers_clients_at_once():
    """Question 3: as many clients at once as echo_prefork.py has workers by default, one waiting in accept()."""
    workers = WORDS[constant("echo_prefork.py", "WORKERS")]
    assert "{} workers serve {} clients at once".format(workers.title(), workers) in text("README.md")
    assert "{} processes share the listening socket, one free process at a time waiting in `accept()` under a " \
           "lock".format(workers.title()) in text("bench/RESULTS.template.md")
    assert "fcntl.lockf(lock_file, fcntl.LOCK_EX)" in (ROOT / "echo_prefork.py").read_text()


def test_echo_selectors_tls_sets_tcp_nodelay_as_client_md_says():
    code = (ROOT / "echo_selectors_tls.py").read_text()
    assert "server_sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)" in code
    assert "echo_selectors_tls.py sets TCP_NODELAY" in text("CLIENT.md")
    assert "does not set TCP_NODELAY" not in text("CLIENT.md")


@pytest.mark.skipif(ARTICLE is None, reason="the article's text is not beside the pack")
def test_the_sentences_about_the_articles_code_are_its():
    article = ARTICLE.read_text(encoding="utf-8")
    # Its asyncio server sent with sock_sendall(); every other server with send().
    asyncio_server = article[article.index("import asyncio"):article.index("SEND_RECV_COUNT")]
    assert "await loop.sock_sendall(sock, data)" in asyncio_server and ".send(" not in asyncio_server
    assert "sock.send(data)" in article[:article.index("import asyncio")]
    assert "| `sock.send(data)` in every server but asyncio's (`sock_sendall()`) |" in text("ERRATA.md")
    # Its prefork lock file is unlinked as soon as it is opened.
    assert re.search(r"open\('\./mprocess\.lock', 'w'\)\n\s*os\.unlink\('\./mprocess\.lock'\)", article)
    assert "unlinked at once" in text("ERRATA.md")
    # max_descriptor is commented out in its select server and live in its select + prethread one.
    assert "# max_descriptor = 20" in article and "\n    max_descriptor = 20" in article
    # Its tables timed connect() and close(): the loop that was to send messages is empty.
    assert "range(SEND_RECV_COUNT, 1)" in article
    assert "The article timed only `connect()` and `close()`." in text("README.md")
    assert "Only connect and close were timed." in text("bench/RESULTS.template.md")


FREE_THREADED_3_14 = """import sys, sysconfig
sys.path.insert(0, {root!r})
sys._is_gil_enabled = lambda: {gil}
real = sysconfig.get_config_var
sysconfig.get_config_var = lambda name: 1 if name == "Py_GIL_DISABLED" else real(name)
import client
print(client.machine())
print(client.LIMITS["echo_thread.py"])
"""


@pytest.mark.parametrize("gil", [False, True])
def test_a_free_threaded_build_is_named_with_its_gil(gil):
    """client.machine(), which every record keeps, names a free-threaded build and whether its GIL was on; the
    thread server's failed row blames the GIL only where there was one. (This interpreter made to look free-threaded:
    .github/workflows/tests.yml's 3.14t job runs the suite on a real one.)"""
    import platform
    import subprocess
    out = subprocess.run([sys.executable, "-c", FREE_THREADED_3_14.format(root=str(ROOT), gil=gil)],
                         capture_output=True, text=True, timeout=60, check=True).stdout.splitlines()
    assert ", Python {}, free-threaded, GIL {}, ".format(platform.python_version(), "on" if gil else "off") in out[0]
    assert out[1].endswith("take turns at the GIL") == gil


def test_this_interpreter_is_named_as_it_is():
    import sysconfig
    sys.path.insert(0, str(ROOT))
    import client
    free = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    assert ("free-threaded" in client.machine()) == free
    assert client.LIMITS["echo_thread.py"].endswith("GIL") == client.GIL == getattr(sys, "_is_gil_enabled",
                                                                                      lambda: True)()
    sys.path.insert(0, str(ROOT / "bench"))
    import python_versions
    assert python_versions.gil_words(True, False) == ", free-threaded, GIL off"
    assert python_versions.gil_words(True, True) == ", free-threaded, GIL on" and python_versions.gil_words(0, 1) == ""


def test_results_explains_the_gil_only_where_the_records_had_one():
    """RESULTS.md's convoy paragraph and the GIL switch of echo_threadpool.py are printed from records measured
    under the GIL; a record of a free-threaded build without it gets neither."""
    sys.path.insert(0, str(ROOT / "bench"))
    import regenerate
    template = (ROOT / "bench" / "RESULTS.template.md").read_text()
    assert "{s16_gil}" in template and "{gil_switch}" in template and "The GIL lets one" not in template
    assert regenerate.under_gil("AMD EPYC, 2 cores, Python 3.11.7, Linux") and regenerate.under_gil("3.12.3")
    assert not regenerate.under_gil("AMD EPYC, 2 cores, Python 3.14.10, free-threaded, GIL off, Linux")
    meta = json.loads((ROOT / "bench" / "results" / "meta.json").read_text())
    assert regenerate.run_values(meta)["gil_switch"] == " and a GIL switch"
    off = regenerate.run_values(dict(meta, machine="AMD EPYC, 2 cores, Python 3.14.10, free-threaded, GIL off, Linux"))
    assert off["gil_switch"] == ""
    assert regenerate.GIL_EXPLAINED in (ROOT / "RESULTS.md").read_text()  # the kept 16-core records: CPython 3.12.3


THREAD_SERVERS = ("echo_thread.py", "echo_prethread.py", "echo_select_pool.py", "echo_threadpool.py")


def test_the_readmes_say_threads_slow_on_more_cores_only_under_the_gil():
    """Each thread server's row says it gets slower on more cores, and says so under the GIL (every CPython measured
    here had one; a free-threaded build was not measured): in both languages, no row without the qualifier."""
    for name, slower, qualifier in (("README.md", r"slower on more cores|more cores slow", "under the GIL, "),
                                    ("README.ja.md", r"コアが増えると", "GIL のある CPython では、")):
        rows = {re.match(r"\| \[(echo_\w+\.py)\]", line).group(1): line
                for line in (ROOT / name).read_text(encoding="utf-8").splitlines()
                if re.match(r"\| \[echo_\w+\.py\]", line) and re.search(slower, line)}
        assert set(rows) == set(THREAD_SERVERS), name
        assert all(qualifier in row for row in rows.values()), name


def test_the_16_core_records_of_a_free_threaded_build_get_no_convoy(tmp_path, monkeypatch):
    import shutil
    sys.path.insert(0, str(ROOT / "bench"))
    import regenerate
    kept = regenerate.scaling_values()  # CPython 3.12.3: the GIL named where the thread servers get slower
    assert kept["s16_gil"] == regenerate.GIL_EXPLAINED
    assert kept["s16_threads_what"] == "Threads under the GIL: slower on more cores; pin them"
    assert "**{}.**".format(kept["s16_threads_what"]) in (ROOT / "RESULTS.md").read_text()
    folder = tmp_path / "scaling-16core"
    shutil.copytree(regenerate.SCALING_16, folder)
    summary = json.loads((folder / "summary.json").read_text())  # what regenerate.py renders the records from
    summary["machine"]["python"] = "3.14.10, free-threaded, GIL off"
    (folder / "summary.json").write_text(json.dumps(summary))
    monkeypatch.setattr(regenerate, "SCALING_16", folder)
    said = regenerate.scaling_values()
    assert said["s16_gil"].startswith("These ran on CPython 3.14.10, free-threaded, GIL off: no GIL passed between "
                                      "the cores")
    assert "convoy" not in said["s16_gil"] and "GIL" not in said["s16_threads_what"]


MACHINE_PATH = re.compile(r"(?:/(?:root|home|var|usr|opt|tmp|work|srv|mnt)/|\.pyenv/|[A-Za-z]:\\\\)[^\s\"`]*")


def test_no_kept_record_names_a_path_of_the_machine_that_measured():
    """bench/results/ keeps versions and paths relative to the repository (the test certificate as
    tests/tls/cert.pem, an interpreter as PATH beside its version), never where they lay on the machine."""
    found = {str(path.relative_to(ROOT)): MACHINE_PATH.findall(re.sub(r"\A#!.*", "", path.read_text(errors="replace")))
             for path in (ROOT / "bench" / "results").rglob("*") if path.is_file()}  # a script's #! line aside
    assert not {name: paths for name, paths in found.items() if paths}


def test_a_workload_names_the_test_certificate_relative_to_the_repository(tmp_path):
    sys.path.insert(0, str(ROOT))
    import client
    assert client.as_dict(client.Workload(tls=True, cafile=str(client.TEST_CERT)))["cafile"] == "tests/tls/cert.pem"
    elsewhere = str(tmp_path / "ca.pem")  # a certificate of the user's own stays as given
    assert client.as_dict(client.Workload(tls=True, cafile=elsewhere))["cafile"] == elsewhere
    assert client.as_dict(client.Workload())["cafile"] is None
    sys.path.insert(0, str(ROOT / "bench"))
    from common import without_paths
    assert without_paths("python3 bench/python_versions.py --python 3.11=/root/.pyenv/versions/3.11.7/bin/python3 "
                         "--python 3.15=chroot:/var/cache/x:/usr/bin/python3.15") == \
        "python3 bench/python_versions.py --python 3.11=PATH --python 3.15=chroot:ROOT:PATH"


def test_the_developers_guide_speaks_of_the_pack():
    """DEVELOPMENT.md names no file under /tmp that no script of the pack uses."""
    scripts = "".join(path.read_text(errors="replace") for path in
                      [*ROOT.glob("*.py"), *ROOT.glob("bench/*.py"), *ROOT.glob("tests/*.py"), *ROOT.glob(".ci/*")]
                      if path.is_file())
    named = re.findall(r"/tmp/[\w.-]+", text("DEVELOPMENT.md"))
    assert all(name in scripts for name in named), named
