# SPDX-License-Identifier: 0BSD
"""Draw what client.py measured: its --all --json output as Markdown tables and SVG charts.

    python3 client.py --all --json > results.json
    python3 bench/draw.py results.json --markdown results.md --svg results.svg

client.py measures and writes records; this draws them (../shared/STYLE.md, habit 20). --markdown writes
the Markdown of every figure: a line with the machine, the scenarios (closed-loop tables, open-loop sweeps)
and how many servers the records hold, then each closed-loop table, the open-loop sweeps' knees and steps, and
the servers skipped. `client.py --all --markdown FILE` wrote the same before that flag moved here, but for its
first line, which gave client.py's command line: the records do not keep it (--servers, --procs, the load's
flags), so this cannot know it; each table's heading gives its workload. --svg draws a chart: the closed-loop
bars, the sweeps' graphs as small multiples (a row of panels per server), or both stacked.
It also draws client.py --trace's files as timelines (kept_timelines(): a panel per server, a row per
connection, one time axis), which bench/timelines.py records. bench/regenerate.py writes RESULTS.md,
SWEEPS.md, results.svg, openloop.svg, timelines.svg and stall.svg from what is kept in bench/results/ with
the same functions. Stdlib only; of client.py, what its API declares (client.API: the records and their
formatters).
"""
import argparse
import html
import json
import math
import sys
import textwrap
from pathlib import Path

from common import SERVERS, client
import held  # bench/held.py: its records read as RESULTS.md's table reads them (most_held())


# ---- client.py's records, read back

def from_json(results):
    """client.py --all --json's output (a dict) read back as --all holds it: each table's workload a Workload
    and its rows Runs, each sweep's workload a Workload and its steps Steps; the rest as it is."""
    return dict(results, tables=[dict(t, workload=client.Workload(**t["workload"]),
                                      rows=[client.Run(**r) for r in t["rows"]]) for t in results.get("tables", [])],
                sweeps=[dict(s, workload=client.Workload(**s["workload"]),
                             steps=[client.Step(**step) for step in s["steps"]]) for s in results.get("sweeps", [])])


def figure_text(name, value):
    """The figure `name` of a Run or a Step (p99_ms, offered_rate, ...) written as client.py writes it: "-"
    where there is none."""
    declared = dict(client.figures_of(client.Step), **dict(client.figures_of(client.Run)))
    return client.cell(declared[name], value)


# ---- Markdown

def markdown(results):
    """client.py --all's results (from_json()) as Markdown: what was measured where (measured_text()), each
    closed-loop table, then the open-loop sweeps, then the servers that cannot run there."""
    lines = [measured_text(results), ""]
    for table in results["tables"]:
        lines += table_markdown(table)
    lines += sweeps_markdown(results["sweeps"])
    skipped = results.get("skipped")
    if skipped:
        lines += ["Skipped, as they cannot run here:", ""] + [
            "- " + client.skipped_text(name, why) for name, why in sorted(skipped.items())] + [""]
    return "\n".join(lines)


def measured_text(results):
    """The Markdown's first line: the machine, then what the records keep of the run (each table's and sweep's
    scenario, the servers), and that they keep no command line: its flags are not known here."""
    def named(kind, scenarios):
        names = list(dict.fromkeys(scenarios))
        return "the {}{} {}".format(kind, "s" if len(names) > 1 else "", " and ".join(
            [", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)) if names else None
    closed = list(dict.fromkeys(t["scenario"] for t in results["tables"]))
    kinds = [text for text in (named("closed-loop scenario", closed),
                               named("open-loop sweep", [s["scenario"] for s in results["sweeps"]])) if text]
    servers = set(r.server for t in results["tables"] for r in t["rows"]) | set(s["server"] for s in results["sweeps"])
    what = ": {} server{} in {}".format(len(servers), "s" if len(servers) > 1 else "", (
        ", and " if len(closed) > 1 else " and ").join(kinds)) if kinds else ""
    return ("Measured by client.py --all on {}{}. Its records keep each scenario's workload (the headings below), "
            "not client.py's command line.".format(results.get("machine", "a machine not named"), what))


def table_markdown(table):
    """One closed-loop scenario: a heading that says the workload, then the servers ranked."""
    w = table["workload"]
    lines = ["### " + client.table_heading(table), ""]
    if w.hold:
        lines += ["All connections opened ({} connects in flight, at most {:,.0f} started a second) and held, then "
                  "the messages; msgs/s and MB/s are over the echo phase. A connect of {:g} s or more waited on a "
                  "SYN retry (the server's listen queue was full). Bounds: a connect {:g} s, an echo {:g} s, the "
                  "whole run {:g} s.".format(w.connecting, w.connect_pace, client.SYN_RETRY, w.connect_timeout,
                                             w.timeout, w.budget), ""]
    good = [r for r in table["rows"] if not r.failed]
    lines += table_lines(good, [("rank", lambda r: str(good.index(r) + 1)),
                                ("server", lambda r: r.server)])[:-1]
    lines += ["| - | {} | failed: {} |".format(r.server, r.failed) for r in table["rows"] if r.failed]
    return lines + [""]


def sweeps_markdown(sweeps):
    """The open-loop sweeps: the knees ranked, then each server's steps (sweep_markdown())."""
    if not sweeps:
        return []
    w, rates = sweeps[0]["workload"], sweeps[0]["rates"]
    lines = ["### {}: open loop, {} connections/s, {:g} s each, {} exchange{} of {} B per connection".format(
        sweeps[0]["scenario"], client.rates_text(rates), w.duration, w.messages, "s" if w.messages > 1 else "",
        w.size), "",
        "Connections start on a clock, whether or not earlier ones have finished; a response time counts from the "
        "connection's scheduled start to its last echo. {}; the client must have kept its schedule.".format(
            client.knee_rule_text().capitalize()), "",
        "| knee rank | server | knee connections/s | p99 ms at the knee | highest offered/s | replies/s there "
        "| errors there |", "|---:|---|---:|---:|---:|---:|---:|"]
    for place, s, at_knee in client.ranked_knees(sweeps):
        top = s["steps"][-1] if s["steps"] else client.Step()
        lines.append("| {} | {} | {} | {} | {} | {} | {} |".format(
            place, s["server"], client.knee_text(s), figure_text("p99_ms", at_knee.p99_ms) if at_knee else "-",
            figure_text("offered_rate", top.offered_rate), figure_text("reply_rate", top.reply_rate),
            figure_text("errors", top.errors)))
    lines.append("")
    for s in sweeps:
        lines += sweep_markdown(s["server"], s)
    return lines


def sweep_markdown(server, sweep):
    """One server's sweep as Markdown lines: a heading that names its knee, then one row per step."""
    heading = "knee {} connections/s{}".format(figure_text("offered_rate", sweep["knee"]), ", the highest rate "
                                               "offered: its limit lies higher" if sweep["knee_at_top"] else "") \
        if sweep["knee"] is not None else "failed" if sweep["failed"] and not sweep["steps"] else \
        "no knee (no step met the rule)"
    lines = ["#### {}: {}".format(server, heading), ""] + (["Failed: {}.".format(sweep["failed"]), ""]
                                                          if sweep["failed"] else [])
    if not sweep["steps"]:
        return lines
    lines += table_lines(sweep["steps"])
    last = figure_text("offered_rate", sweep["steps"][-1].offered_rate)
    if sweep["client_limited"]:
        lines += ["Stopped after {}/s: the client could not keep its schedule two steps in a row, so higher rates "
                  "were not offered; the server's knee may lie higher.".format(last), ""]
    elif sweep["stopped_early"]:
        lines += ["Stopped after {}/s: two steps in a row were past the limit.".format(last), ""]
    exhausted = sum(step.client_ports_exhausted for step in sweep["steps"])
    if exhausted:
        lines += ["The client ran out of local ports (EADDRNOTAVAIL) {:,} times; those connections are not "
                  "counted against the server.".format(exhausted), ""]
    return lines


def table_lines(records, first=()):
    """client.py's records (Runs or Steps) as a Markdown table: a column per table figure that any of them
    carries (a figure that applies only sometimes, where one has it), after the leading columns first ([(title,
    function of a record)])."""
    columns = [(name, m) for name, m in client.figures_of(type(records[0])) if m["table"] and any(
        not m["when"] or getattr(r, name) is not None for r in records)] if records else []
    lines = ["| " + " | ".join([title for title, _ in first] + [client.column(m) for _, m in columns]) + " |",
             "|" + "---|" * len(first) + "---:|" * len(columns)]
    for r in records:
        lines.append("| " + " | ".join([get(r) for _, get in first] + [client.cell(m, getattr(r, name))
                                                                      for name, m in columns]) + " |")
    return lines + [""]


# ---- SVG: each chart is (width, height, [SVG elements]); chart() stacks them into one document

BAR, BAR_GAP, BAR_W = 16, 4, 460  # the closed-loop bars
# The sweeps' small multiples: a row per server, a column per figure, every panel this size.
CELL_W, CELL_H, CELL_GAP, ROW_GAP, GRID_TOP = 220, 56, 62, 16, 142
LINE, KNEE = "#1f5fa8", "#d9480f"  # a server's lines; its knee


def chart(tables, sweeps, machine=None, notes=()):
    """The --svg file: the bars of the closed-loop tables, the sweeps' small multiples (a row of panels per server:
    its reply rate, response time and errors against the offered rate), or both stacked; under them a line that
    names the machine (client.py's records keep it: "machine"), then each of notes."""
    figures = ([bars_svg(tables)] if tables else []) + ([sweep_svg(sweeps)] if sweeps else [])
    parts, y = [], 0
    for _, height, figure in figures:
        parts += ['<g transform="translate(0,{})">'.format(y), *figure, "</g>"]
        y += height
    width = max(f[0] for f in figures)
    said = ["Measured on {}.".format(machine) if machine else "The machine is not named in these records."]
    for line in [text for note in [*said, *notes] for text in wrapped(note, (width - 20) / 6.3)]:
        parts.append(svg_text(10, y + 4, line, fill="#444"))
        y += 16
    y += 8
    return "\n".join(['<svg xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1}" viewBox="0 0 {0} {1}" '
                      'font-family="sans-serif" font-size="12">'.format(max(f[0] for f in figures), y),
                      '<rect width="100%" height="100%" fill="white"/>', *parts, "</svg>"]) + "\n"


def svg_text(x, y, text, **attributes):
    """A <text> element; attributes as keywords, font_weight="bold" for font-weight="bold"."""
    extra = "".join(' {}="{}"'.format(k.replace("_", "-"), v) for k, v in attributes.items())
    return '<text x="{}" y="{}"{}>{}</text>'.format(round(x, 1), round(y, 1), extra, html.escape(str(text)))


class Scale:
    """Values to pixels along one axis, from `start` over `length` pixels (negative: upwards):
    linear from low to high, or log10 over the whole decades low..high."""

    def __init__(self, low, high, start, length, log=False):
        self.low, self.high, self.start, self.length, self.log = low, high, start, length, log

    def __call__(self, value):
        if self.log:
            value = math.log10(max(value, 10.0 ** self.low))
        return self.start + self.length * (value - self.low) / (self.high - self.low)

    def ticks(self, count):
        """[(value, label)] at round values: every decade on a log scale."""
        if self.log:
            return [(10.0 ** d, tick_text(10.0 ** d) if d >= 0 else "{:g}".format(10.0 ** d))
                    for d in range(self.low, self.high + 1)]
        step = nice_step(self.high - self.low, count)
        first = math.ceil(self.low / step - 1e-9) * step
        values = [round(first + n * step, 10) for n in range(int((self.high - first) / step + 1e-9) + 1)]
        return [(t, tick_text(t)) for t in values]


def y_axis(x, y, count=5, ticks=None, size=12):
    """Horizontal grid lines across the plot, labelled on its left (ticks: [(value, label)], else y's own)."""
    return [part for value, label in (ticks or y.ticks(count)) for part in (
        '<line x1="{0}" x2="{1}" y1="{2:.1f}" y2="{2:.1f}" stroke="#e4e4e4"/>'.format(x.start, x.start + x.length,
                                                                                      y(value)),
        svg_text(x.start - 6, y(value) + size / 3, label, text_anchor="end", fill="#444", font_size=size))]


def x_axis(x, bottom, label=None, count=8, above=False, unit=""):
    """Ticks and their labels under the plot (above it: above=True), then what the axis measures (or its unit
    after the last tick's label)."""
    way = -1 if above else 1
    ticks = x.ticks(count)
    ticks[-1:] = [(value, text + unit) for value, text in ticks[-1:]]
    parts = [part for value, text in ticks for part in (
        '<line x1="{0:.1f}" x2="{0:.1f}" y1="{1}" y2="{2}" stroke="#444"/>'.format(x(value), bottom, bottom + 4 * way),
        svg_text(x(value), bottom + (17 if way > 0 else -8), text, text_anchor="middle", fill="#444"))]
    return parts + ([svg_text(x.start + x.length / 2, bottom + 33 * way + (0 if way > 0 else 8), label,
                              text_anchor="middle", fill="#444")] if label else [])


def nice_step(span, count):
    """A step of 1, 2, 2.5 or 5 x 10^k giving about count ticks over span."""
    magnitude = 10 ** math.floor(math.log10(span / count))
    return next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= span / count * 0.999)


def nice_ceiling(value):
    """The first tick at or above value: where a linear axis from 0 ends."""
    step = nice_step(value, 5)
    return math.ceil(value / step - 1e-9) * step


def tick_text(value):
    return "{:,.0f}".format(value) if value == int(value) else "{:,g}".format(value)


def bars_svg(tables):
    """Horizontal bars per server, one panel per scenario, each on its own scale: messages per server
    CPU-second, the figure to read first (messages/s where the server's CPU was not measured), or, where
    the servers ran --work on held connections (c10k-cpu: one message each), the echo phase in seconds."""
    left = 20 + 7 * max([len(r.server) for t in tables for r in t["rows"]] + [20])  # room for the names
    # One scenario: its workload is the title (the heading less its ranking, which the bars' label says).
    title = "Closed loop: each scenario on its own scale" if len(tables) > 1 else \
        "Closed loop, " + client.table_heading(tables[0]).rsplit("; ", 1)[0]
    parts = [svg_text(10, 20, title, font_size=14, font_weight="bold")]
    y = 40
    for table in tables:
        key, label, unit, spec = ("echo_phase_s", "echo phase (shorter is faster)", "seconds", "{:,.2f} s") if (
            table["server_work"] and table["workload"].hold) else (
            "msgs_per_server_cpu_s", "messages per server CPU-second (median of the measured runs; longer is "
            "cheaper)", "messages per server CPU-second", "{:,.0f}") if all(
            r.msgs_per_server_cpu_s for r in table["rows"] if not r.failed) else (
            "msgs_per_s", "messages/s (median of the measured runs; longer is faster)", "messages/s", "{:,.0f}")
        reach = lambda r: (getattr(r, key) or 0) * (1 + (r.msgs_per_server_cpu_spread or 0 if key ==
                                                         "msgs_per_server_cpu_s" else 0))  # a whisker's end too
        x = Scale(0, nice_ceiling(max([reach(r) for r in table["rows"]] + [1e-9])), left, BAR_W)
        parts.append(svg_text(10, y + 14, "{}: {}".format(table["scenario"], label), font_weight="bold"))
        y += 22
        best = (lambda v: v) if key == "echo_phase_s" else (lambda v: -v)  # the best bar first
        for r in sorted(table["rows"], key=lambda r: (r.failed is not None or getattr(r, key) is None,
                                                      best(getattr(r, key) or 0))):
            parts.append(svg_text(left - 6, y + 12, r.server, text_anchor="end"))
            if r.failed or getattr(r, key) is None:
                parts.append(svg_text(left, y + 12, "failed", fill="#a00"))
            else:
                value, spread = getattr(r, key), r.msgs_per_server_cpu_spread if key == "msgs_per_server_cpu_s" else None
                length = max(1, round(x(value) - left))
                parts.append('<rect x="{}" y="{}" width="{}" height="{}" fill="#3b7dd8"/>'.format(left, y, length, BAR))
                end = left + length
                if spread:  # half the measured runs' range, either side of the median
                    low, high = x(value * (1 - spread)), x(value * (1 + spread))
                    parts.append('<path d="M{0:.1f} {1}v{3}M{0:.1f} {2}H{4:.1f}M{4:.1f} {1}v{3}" stroke="#1b3f73" '
                                 'stroke-width="1.2"/>'.format(low, y + 3, y + BAR / 2, BAR - 6, high))
                    end = max(end, high)
                parts.append(svg_text(end + 4, y + 12, spec.format(value) + (" ±{:.0%}".format(spread) if spread
                                                                             else "")))
            y += BAR + BAR_GAP
        parts += x_axis(x, y, unit, count=5)
        y += 48
        if key == "msgs_per_server_cpu_s":
            runs = any(r.msgs_per_server_cpu_spread for r in table["rows"])
            parts.append(svg_text(10, y + 6, "Whiskers: half the range of the measured runs, either side of the "
                                  "median (client.py's msgs_per_server_cpu_spread)." if runs else "No spread drawn: "
                                  "these records keep no msgs_per_server_cpu_spread (one run, or measured before "
                                  "client.py kept it).", fill="#444"))
            y += 26
    return left + BAR_W + 120, y, parts


def sweep_svg(sweeps):
    """Small multiples against the offered rate: a row per server (the highest knee first), its reply rate,
    its response time (p99, p50 dashed) and its errors, every column on one scale, every row on one x axis."""
    points = [step for sweep in sweeps for step in sweep["steps"]]
    offered = [step.offered_rate for step in points] or [0, 1]
    x_low, x_high = min(offered), max(offered)
    if x_low == x_high:  # one step: give it some room
        x_low, x_high = x_low * 0.9, x_high * 1.1 + 1
    columns = sweep_panels(points, x_high)
    names = 12 + 7 * max(len(s["server"]) for s in sweeps)  # bold names, right-aligned before the first panel
    xs = [Scale(x_low, x_high, names + CELL_GAP + n * (CELL_W + CELL_GAP), CELL_W) for n in range(len(columns))]
    parts = [svg_text(10, 22, "Open loop: each server against the offered connection rate", font_size=15,
                      font_weight="bold"),
             svg_text(10, 42, "A row per server, the highest knee first; the panels of a column share their scales. "
                              "Ringed, with a dotted upright line: the knee,", fill="#444"),
             svg_text(10, 58, knee_rule_text_short(), fill="#444"),
             svg_text(10, 74, "Under each name: its knee (and the lower rates whose steps missed the rule), and its "
                              "server CPU a connection there, set-up and close with one exchange.", fill="#444")]
    for x, (title, note, _, _, _) in zip(xs, columns):
        parts += [svg_text(x.start, GRID_TOP - 50, title, font_weight="bold"),
                  svg_text(x.start, GRID_TOP - 36, note, fill="#444", font_size=11),
                  *x_axis(x, GRID_TOP, count=4, above=True)]
    ranked = [s for _, s, _ in client.ranked_knees(sweeps)]
    for row, sweep in enumerate(ranked):
        top = GRID_TOP + row * (CELL_H + ROW_GAP)
        missed = missed_below_knee(sweep)
        said = "failed" if sweep["failed"] and not sweep["steps"] else "no knee" if sweep["knee"] is None else \
            "knee " + client.knee_text(sweep, "/s") + (" ({} missed)".format(", ".join(
                "{:,.0f}".format(rate) for rate in missed)) if missed else "")
        knee_step = next((s for s in sweep["steps"] if s.offered_rate == sweep["knee"]), None)
        cost = knee_step and knee_step.server_cpu_s and knee_step.connections and \
            "{:,.0f} µs CPU a connection".format(1e6 * knee_step.server_cpu_s / knee_step.connections)
        parts += [svg_text(names, top + CELL_H / 2 - 8, sweep["server"], text_anchor="end", font_weight="bold"),
                  svg_text(names, top + CELL_H / 2 + 7, said, text_anchor="end", fill="#555")]
        if cost:
            parts.append(svg_text(names, top + CELL_H / 2 + 21, cost, text_anchor="end", fill="#555", font_size=11))
        for n, (x, (_, _, y_range, log, figures)) in enumerate(zip(xs, columns)):
            y = Scale(*y_range, top + CELL_H, -CELL_H, log=log)
            ticks = [(v, label) for v, label in y.ticks(3)]
            if log and len(ticks) > 3:  # a label every other decade; a grid line at each
                ticks = [(v, label if i % 2 == (len(ticks) - 1) % 2 else "") for i, (v, label) in enumerate(ticks)]
            parts += [*y_axis(x, y, ticks=ticks, size=10),
                      '<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#888"/>'.format(
                          x.start, top, CELL_W, CELL_H)]
            if n == 0:  # where a server that keeps up lies: replies = offered
                parts.append('<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="#aaa" '
                             'stroke-dasharray="2,3"/>'.format(x(x_low), y(x_low), x(x_high), y(min(x_high,
                                                                                                   y_range[1]))))
            if knee_step:
                parts.append('<line x1="{0:.1f}" x2="{0:.1f}" y1="{1}" y2="{2}" stroke="{3}" stroke-width="1.2" '
                             'stroke-dasharray="2,2"/>'.format(x(sweep["knee"]), top, top + CELL_H, KNEE))
            for k, (figure, style) in enumerate(figures):
                parts += server_line(sweep, figure, x, y, LINE, style, k == 0)
            if n == 0 and knee_step:  # the knee, ringed on the reply rate
                parts.append('<circle cx="{:.1f}" cy="{:.1f}" r="5" fill="none" stroke="{}" stroke-width="2"/>'
                             .format(x(sweep["knee"]), y(knee_step.reply_rate), KNEE))
            if not sweep["steps"]:
                parts.append(svg_text(x.start + CELL_W / 2, top + CELL_H / 2 + 4, "no step", text_anchor="middle",
                                      fill="#a00"))
    bottom = GRID_TOP + len(ranked) * (CELL_H + ROW_GAP) - ROW_GAP
    for x in xs:
        parts += x_axis(x, bottom, "offered rate (connections/s)", count=4)
    return xs[-1].start + CELL_W + 20, bottom + 48, parts


def missed_below_knee(sweep):
    """The offered rates under a sweep's knee whose steps did not meet its rule (the sweep's knee_rule, as kept): a
    knee above them is the highest step that passed, not the first to fail."""
    rule = sweep.get("knee_rule")
    if not rule or not sweep["knee"]:
        return []
    return [step.offered_rate for step in sweep["steps"] if step.offered_rate < sweep["knee"]
            and not client.meets(step, rule)]


def knee_rule_text_short():
    """client.py's knee rule, said after "the knee," (its own words begin "the knee is")."""
    return client.knee_rule_text().replace("the knee is ", "", 1) + "."


def sweep_panels(points, x_high):
    """[(title, note, (low, high), log scale?, [(figure of a step, line style), ...])] for the three columns."""
    # Reply rate: from 0, up to the higher of what was offered and what came back.
    reply_top = nice_ceiling(max([step.reply_rate for step in points] + [x_high]))
    # Response time: log scale, whole decades, since milliseconds under the knee and
    # seconds past it must both be read on one axis.
    times = [getattr(step, key) for step in points for key in ("p50_ms", "p99_ms") if getattr(step, key)]
    low_decade = math.floor(math.log10(max(min(times), 0.01))) if times else -1
    high_decade = max(low_decade + 2, math.ceil(math.log10(max(times))) if times else 2)
    error_top = min(100.0, nice_ceiling(max([client.error_share(step) for step in points] + [1.0])))
    errors = any(step.errors for step in points)
    return [
        ("Reply rate, connections/s", "completed a second; dotted: replies = offered", (0, reply_top), False,
         [(lambda s: s.reply_rate, "")]),
        ("Response time, ms (log scale)", "from the scheduled start: p99 solid, p50 dashed",
         (low_decade, high_decade), True,
         [(lambda s: s.p99_ms, ""), (lambda s: s.p50_ms, ' stroke-dasharray="4,3" stroke-opacity="0.8"')]),
        ("Errors, %", "of the connections attempted" + ("" if errors else ": none at any step"), (0, error_top), False,
         [(client.error_share, "")]),
    ]


def server_line(sweep, figure, x, y, colour, style, dots):
    """One server's line on one graph; a step without a figure (no reply at all) breaks
    the line rather than dropping it to 0."""
    runs, run = [], []
    for step in sweep["steps"]:
        v = figure(step)
        if v is None or (y.log and v <= 0):
            runs, run = runs + [run], []
        else:
            run.append((x(step.offered_rate), y(v)))
    parts = []
    for run in filter(None, runs + [run]):
        parts.append('<polyline fill="none" stroke="{}" stroke-width="1.6"{} points="{}"/>'.format(
            colour, style, " ".join("{:.1f},{:.1f}".format(*p) for p in run)))
        if dots:
            parts += ['<circle cx="{:.1f}" cy="{:.1f}" r="1.8" fill="{}"/>'.format(px, py, colour) for px, py in run]
    return parts


# ---- timelines: who is served when, from client.py --trace's files (bench/timelines.py keeps them)

WAIT, SERVED, ECHO, STALLED, STALL_SERVED = "#c8c8c8", "#a9c8ea", "#173f73", "#d9480f", "#f6c3a8"
PANEL_W, PANEL_GAP_X, PANEL_GAP_Y, PANEL_LEFT = 300, 46, 78, 30
WAITED_S = 0.1  # no echo for this long, between two echoes of a connection, is drawn as waiting, not as served
TICK_PX = 2  # echoes closer than this on the axis (the median between two) merge into a bar: none is drawn
GROUP_GAP = 5  # client.py's worker processes show as groups where the gap between is this x the median between rows
SELECTORS_HOLDS = 1 << 20  # echo_selectors.py's MAX_BUFFER: it reads no more from a client while this much waits


def read_trace(path):
    """A client.py --trace file: (its run line, its connection lines). Lines another program wrote on the same
    clock (bench/timelines.py's stalled client) are connection lines with "worker": null and a "who"."""
    return trace_lines(Path(path).read_text(encoding="utf-8"), path)


def trace_lines(text, name):
    """A client.py --trace file's text, read as read_trace() says; ValueError, naming it, if it is not one."""
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    if not lines or not isinstance(lines[0], dict) or lines[0].get("trace") != 1:
        raise ValueError("{} is not a client.py --trace file (its first line is not the run's)".format(name))
    return lines[0], lines[1:]


def is_trace(text):
    """Whether text begins as a client.py --trace file does: a line of JSON with "trace": 1."""
    try:
        first = json.loads(text.split("\n", 1)[0])
    except ValueError:
        return False
    return isinstance(first, dict) and first.get("trace") == 1


def echoes(connection):
    """When each of a connection's echoes was complete, in order (those that never came left out)."""
    return [echoed for _, echoed in connection["messages"] if echoed is not None]


def served(connection):
    """(first echo, last echo): the span in which the server was serving this connection, or None if no echo
    came back. Before it, from connect() on, the connection waited."""
    done = echoes(connection)
    return (done[0], done[-1]) if done else None


def served_spans(connection, waited=WAITED_S):
    """The spans in which the server was serving a connection: from its first echo to its last, broken wherever
    no echo came for waited seconds or more (there it waited, as before its first echo)."""
    done, spans = echoes(connection), []
    for before, after in zip([None] + done, done):
        if before is None or after - before >= waited:
            spans.append([after, after])
        spans[-1][1] = after
    return [tuple(span) for span in spans]


def longest_gap(connections, start, end):
    """The longest wait between two echoes of the same connection (or from its connect() to its first) that
    overlaps [start, end], over connections: what the others waited while one stalled."""
    gaps = [b - a for c in connections for a, b in zip([c["connect"][0]] + echoes(c), echoes(c))
            if b > start and a < end]
    return max(gaps, default=None)


def timeline_rows(connections):
    """The rows of a panel: the connections in the order each was first served (then by connect() start),
    the stalled client's last."""
    return sorted(connections, key=lambda c: (c.get("who") is not None, (served(c) or (math.inf,))[0],
                                              c["connect"][0]))


def timelines_svg(title, panels, caption, columns=3, row_h=8, panel_w=PANEL_W):
    """Small multiples of timelines: [(label, note, connections)] as panels, a row per connection, one time
    axis (seconds from each run's start) shared by every panel; caption: paragraphs said under the title;
    panel_w: a panel's width. An echo is a tick where the picture's echoes lie TICK_PX apart or more (the median
    between two of a connection's); closer, they would merge into a solid bar, and the served spans alone are drawn."""
    end = max([c["end"] for _, _, cs in panels for c in cs if c.get("end") is not None] + [1e-3])
    most = max([len(cs) for _, _, cs in panels] + [1])
    plot_h = most * row_h
    width = PANEL_LEFT + columns * panel_w + (columns - 1) * PANEL_GAP_X + 20
    between = [b - a for _, _, cs in panels for c in cs if not c.get("who") for a, b in zip(echoes(c), echoes(c)[1:])]
    ticks = not between or sorted(between)[len(between) // 2] * panel_w / nice_ceiling(end) >= TICK_PX
    parts = [svg_text(10, 24, title, font_size=15, font_weight="bold")]
    y = 46
    for paragraph in caption:
        for line in wrapped(paragraph, (width - 20) / 6.3):
            parts.append(svg_text(10, y, line, fill="#333"))
            y += 16
        y += 4
    key, y = legend(10, y + 8, width - 20, any(c.get("stall") for _, _, cs in panels for c in cs), ticks)
    parts += key
    top = y + 46
    x = None
    for n, (label, note, connections) in enumerate(panels):
        left = PANEL_LEFT + (n % columns) * (panel_w + PANEL_GAP_X)
        ptop = top + (n // columns) * (plot_h + PANEL_GAP_Y)
        x = Scale(0, nice_ceiling(end), left, panel_w)
        parts += ['<g class="panel" data-server="{}">'.format(html.escape(label)),
                  svg_text(left, ptop - 21, label, font_weight="bold"),
                  svg_text(left, ptop - 6, note, fill="#444", font_size=11)]
        for value, _ in x.ticks(5):
            parts.append('<line x1="{0:.1f}" x2="{0:.1f}" y1="{1}" y2="{2}" stroke="#eee"/>'.format(
                x(value), ptop, ptop + plot_h))
        shades = [stall_window(c) for c in connections if c.get("stall")]  # who was served meanwhile
        parts += ['<rect x="{:.1f}" y="{}" width="{:.1f}" height="{}" fill="{}" fill-opacity="0.22"/>'.format(
            x(a), ptop, max(1.0, x(b) - x(a)), plot_h, STALLED) for a, b in shades]  # under the rows: theirs show
        for row, c in enumerate(timeline_rows(connections)):
            parts += timeline_row(c, x, ptop + row * row_h, row_h, ticks)
        parts += ['<rect x="{:.1f}" y="{}" width="{:.1f}" height="{}" fill="none" stroke="{}" '
                  'stroke-dasharray="3,2"/>'.format(x(a), ptop, max(1.0, x(b) - x(a)), plot_h, STALLED)
                  for a, b in shades]  # its edges over them
        parts += ['<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#888"/>'.format(
            left, ptop, panel_w, plot_h), *x_axis(x, ptop + plot_h, count=5, unit=" s"), "</g>"]
    bottom = top + ((len(panels) + columns - 1) // columns) * (plot_h + PANEL_GAP_Y) - PANEL_GAP_Y + 24
    parts.append(svg_text(min(width / 2, PANEL_LEFT + (min(len(panels), columns) * (panel_w + PANEL_GAP_X)
                                                      - PANEL_GAP_X) / 2), bottom + 14,
                          "seconds from the run's start: the same axis in every panel", text_anchor="middle",
                          fill="#444"))
    return "\n".join(['<svg xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1}" viewBox="0 0 {0} {1}" '
                      'font-family="sans-serif" font-size="12">'.format(width, bottom + 28),
                      '<rect width="100%" height="100%" fill="white"/>', *parts, "</svg>"]) + "\n"


def stall_window(stalled):
    """When the stalled client's stall held the server up: from its sender's block (the buffers full: the
    server can send it nothing more; its connect() where it never blocked) to its first read."""
    return stalled.get("sender_blocked") or stalled["stall"][0], stalled["stall"][1]


def timeline_row(c, x, top, row_h, ticks=True):
    """One connection: waiting grey and thin (from connect() to its last echo, or its end where none came),
    served blue over it (served_spans(): a wait of WAITED_S or more without an echo stays grey), a tick at each
    echo where ticks; the stalled client's in its own colour, its echoes and its sends (hollow) always ticked; a
    failure in red."""
    first = c["connect"][0]
    done = echoes(c)
    until = done[-1] if done else c.get("end") or first
    colour = STALLED if c.get("who") else ECHO
    parts = ['<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{}" fill="{}"/>'.format(
        x(first), top + row_h / 2 - 1.5, max(0.5, x(until) - x(first)), 3, WAIT)]
    for a, b in served_spans(c):
        parts.append('<rect x="{:.1f}" y="{}" width="{:.1f}" height="{}" fill="{}"/>'.format(
            x(a), top + 1, max(1.0, x(b) - x(a)), row_h - 2, SERVED if not c.get("who") else STALL_SERVED))
    if ticks or c.get("who"):
        path = " ".join("M{:.1f} {:.1f}v{}".format(x(t), top + 1, row_h - 2) for t in done)
        if path:
            parts.append('<path d="{}" stroke="{}" stroke-width="1"/>'.format(path, colour))
    if c.get("who"):  # when each of its sends began: the buffers and the server took some, then it blocked
        parts += ['<path d="{}" stroke="{}" stroke-width="1" fill="none"/>'.format(" ".join(
            "M{:.1f} {:.1f}h2v{}h-2z".format(x(sent), top + 1, row_h - 2) for sent, _ in c["messages"]), STALLED)]
    if c.get("how") not in (None, "eof"):
        parts.append(svg_text(x(c.get("end") or until) + 3, top + row_h - 1, c["how"], fill="#c00", font_size=9))
    return parts


def legend(left, y, width, stall, ticks=True):
    """The key to a row, above the panels, in as many lines as width needs: (its parts, the last line's y)."""
    keys = [(lambda at, y: '<rect x="{}" y="{}" width="22" height="3" fill="{}"/>'.format(at, y - 5, WAIT),
             "waiting: from connect() to the first echo, or {:g} s or more without one".format(WAITED_S)),
            (lambda at, y: '<rect x="{}" y="{}" width="22" height="6" fill="{}"/>'.format(at, y - 7, SERVED),
             "served: echoes less than {:g} s apart{}".format(WAITED_S, "" if ticks else
                                                               " (too close here to draw one by one)"))]
    if ticks:
        keys.append((lambda at, y: '<path d="M{} {}v8" stroke="{}"/>'.format(at + 11, y - 8, ECHO), "an echo"))
    if stall:
        keys += [(lambda at, y: '<rect x="{}" y="{}" width="22" height="9" fill="{}" fill-opacity="0.22" stroke="{}" '
                                'stroke-dasharray="3,2"/>'.format(at, y - 9, STALLED, STALLED),
                  "one client's buffers full, and it still reads nothing"),
                 (lambda at, y: '<path d="M{0} {1}v8 M{2} {1}h2v8h-2z" stroke="{3}" fill="none"/>'.format(
                     at + 6, y - 8, at + 14, STALLED), "that client: an echo, a send")]
    parts, at = [], left
    for shape, text in keys:
        size = 36 + 6.2 * len(text)
        if at > left and at + size > left + width:
            at, y = left, y + 18
        parts += [shape(at, y), svg_text(at + 28, y, text, fill="#333")]
        at += size + 8
    return parts, y


def span_text(values, spec="{:.2f}"):
    """A value, or the range of several, as the caption says it: 0.45-0.50."""
    low, high = spec.format(min(values)), spec.format(max(values))
    return low if low == high else "{}-{}".format(low, high)


def listing(words):
    """a, b and c."""
    words = list(words)
    return " and ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)


def wrapped(text, columns):
    """text in lines of about columns characters."""
    return textwrap.wrap(text, int(columns), break_on_hyphens=False) or [""]


def flag_value(flags, name):
    """The value given to flag name in a server's flags (["--workers", "4"]), or None."""
    return flags[flags.index(name) + 1] if name in flags[:-1] else None


def first_echoes(connections):
    """When each connection (the stalled client's aside) was first served, in order."""
    return sorted(served(c)[0] for c in connections if served(c) and not c.get("who"))


def waves_text(server, workers, connections):
    """How a server with `workers` workers started its connections, from when each was first served: in waves of
    `workers` that stand apart (a wave's first echoes within half the time from its start to the next wave's, or
    from the wave before for the last), or its first wave so and the rest as workers freed, or neither."""
    starts = first_echoes(connections)
    waves = [starts[i:i + workers] for i in range(0, len(starts), workers)]
    if len(waves) < 2:
        return "{}'s {} connections all at once (at {} s)".format(server, len(starts), span_text(starts))
    gaps = [b[0] - a[0] for a, b in zip(waves, waves[1:])]
    apart = [w[-1] - w[0] < gap / 2 for w, gap in zip(waves, gaps + gaps[-1:])]
    at = lambda values: listing("{:.3f}".format(v) for v in values)
    if all(apart):
        return "{}'s in waves of {} that stand apart (starting at {} s)".format(server, workers, at(w[0] for w in waves))
    rest = [t for w in waves[1:] for t in w]
    if apart[0]:
        return "{}'s first {} together (by {:.3f} s), then the rest one or two at a time as workers freed (at {} " \
               "s)".format(server, workers, waves[0][-1], at(rest))
    return "{}'s as workers freed (at {} s)".format(server, at(starts))


def worker_groups(connections):
    """The connections grouped by the client.py worker process that ran them, if each group was first served
    together, one group after another, GROUP_GAP x the median time between two first echoes or more apart:
    [first echoes of a group], in the order served; else None (one worker process, or groups that mixed)."""
    mine = [c for c in connections if served(c) and not c.get("who")]
    by_worker = {}
    for c in sorted(mine, key=lambda c: served(c)[0]):
        by_worker.setdefault(c["worker"], []).append(served(c)[0])
    groups = list(by_worker.values())
    starts = first_echoes(mine)
    if len(groups) < 2 or [t for g in groups for t in g] != starts:
        return None
    middle = sorted(b - a for a, b in zip(starts, starts[1:]))[(len(starts) - 1) // 2]
    return groups if all(b[0] - a[-1] >= GROUP_GAP * middle for a, b in zip(groups, groups[1:])) else None


def groups_text(panels):
    """The caption's sentence on client.py's worker processes, where they show as groups of rows: which panels,
    how many processes and clients each, how far apart their connections came and were first served."""
    workers = sorted({c["worker"] for _, _, cs in panels for c in cs if c.get("worker") is not None})
    shown = [(label, worker_groups(cs)) for label, _, cs in panels if worker_groups(cs)]
    if len(workers) < 2 or not shown:
        return None
    came = []  # how long after a worker process's first connect() the next one's came
    for _, _, cs in panels:
        firsts = sorted(min(c["connect"][0] for c in cs if c.get("worker") == w) for w in workers
                        if any(c.get("worker") == w for c in cs))
        came += [b - a for a, b in zip(firsts, firsts[1:])]
    sizes = sorted({len(g) for _, groups in shown for g in groups})
    return ("client.py ran the clients in {} worker processes (its --procs: by default one per core), dealt out in "
            "turn, and each process connects its own together: their connect()s began {} ms apart. In {} the rows "
            "start in groups of {}, one per process: each group was first served together, the next {} ms after "
            "the one before.".format(
                len(workers), span_text([t * 1000 for t in came], "{:.1f}"),
                listing(label.split()[0] for label, _ in shown), listing(str(n) for n in sizes),
                span_text([(b[0] - a[0]) * 1000 for _, groups in shown for a, b in zip(groups, groups[1:])],
                          "{:.0f}")))


def kept_timelines(folder):
    """timelines.svg, or stall.svg, from a folder bench/timelines.py keeps: its meta.json and a trace per server,
    each panel titled by its server and the flags it ran with, the caption from the meta and the traces: it
    speaks only of the servers drawn."""
    folder = Path(folder)
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    stall = "stall_s" in meta
    panels, taken, started, flags = [], [], [], {}
    for kept in meta["servers"]:
        _, connections = read_trace(folder / kept["trace"])
        label = " ".join([kept["server"], *kept["flags"]])
        flags[kept["server"]] = kept["flags"]
        if stall:
            stalled = next((c for c in connections if c.get("stall")), None)
            others = [c for c in connections if not c.get("who")]
            gap = longest_gap(others, *stalled["stall"]) if stalled else None
            if stalled and stalled.get("taken_before_blocking"):
                taken.append(round(stalled["taken_before_blocking"] / (1 << 20), 1))  # MiB, its pieces' unit
            if stalled:
                started.append(stalled["connect"][0])
            note = "the others' longest wait for an echo: {}".format("-" if gap is None else
                                                                     "{:,.0f} ms".format(gap * 1000))
        else:
            ends = [served(c)[1] for c in connections if served(c)]
            note = "{} connections; the last echo at {:.2f} s".format(len(connections), max(ends)) if ends else \
                "no echo"
        failed = [c["how"] for c in connections if c.get("how") not in ("eof", None)]
        panels.append((label, note + ("; {} failed".format(len(failed)) if failed else ""), connections))
    run = "Measured on {}, {}, at {}{}, by python3 bench/timelines.py: client.py --trace with {}; {} ran with -q " \
          "--work {:,}{}.".format(
              meta["machine"], meta["when"], meta["commit"], " (with uncommitted changes)" if meta.get("changed") else
              "", meta["load"], "each server" if len(panels) > 1 else "the server", meta["work"],
              ", about {:.2f} ms of its CPU a message (calibrated on echo_select.py: its meta.json, beside the "
              "traces, says how)".format(meta["work_ms"]) if meta.get("work_ms") else " (given, not calibrated)")
    if stall:
        held = " (echo_selectors.py reads no more from a client while {:g} MiB waits to go back to it)".format(
            SELECTORS_HOLDS / (1 << 20)) if "echo_selectors.py" in flags else ""
        caption = [run, "At {} s, one more connection (the bottom row), driven by bench/timelines.py with a socket "
                   "of its own on the same clock, sends {} MiB in pieces of {} MiB (a hollow tick each) and reads "
                   "nothing until {:g} s after its sender blocked, then reads its whole echo. Shaded: from that "
                   "block, when the server could send it nothing more, to its first read. Its send() had taken {} MiB "
                   "by then: the kernel's buffers, its socket's and the server's, and what the server held "
                   "itself{}. Above each panel: the longest any other client waited for an echo, from its connect() "
                   "or the echo before, over the shaded time.".format(
                       "-" if not started else span_text(started), meta["stalled_bytes"] >> 20, meta["piece"] >> 20,
                       meta["stall_s"], "-" if not taken else span_text(taken, "{:g}"), held)]
        return timelines_svg("One client stops reading: who else waits?", panels, caption, columns=2, row_h=14)
    said = []
    backlog = flag_value(flags.get("echo_simple.py", []), "--backlog")
    if backlog:
        said.append("echo_simple.py ran with --backlog {}: with its default of 5, Linux queues 6 connections and "
                    "drops the SYNs of the clients beyond them, which retry a second later and would stretch every "
                    "panel by a second.".format(backlog))
    pools = [(server, int(flag_value(f, "--workers"))) for server, f in flags.items() if flag_value(f, "--workers")]
    for workers in sorted({n for _, n in pools}):
        named = [server for server, n in pools if n == workers]
        said.append("{} ran with --workers {}: {} connections served at a time, the others waiting their turn. "
                    "They were first served so: {}.".format(
                        listing(named), workers, workers, "; ".join(
                            waves_text(server, workers, next(cs for label, _, cs in panels if label.split()[0] ==
                                                             server)) for server in named)))
    groups = groups_text(panels)
    caption = [run] + ([" ".join(said)] if said else []) + ([groups] if groups else []) + [
        "A row is a connection, in the order it was first served. The picture shows order and fairness, not "
        "speed: who is served when, and who waits meanwhile. How soon a panel ends depends on this machine, "
        "the client sharing its cores and --work."]
    servers = set(flags)
    title = "every server" if servers >= set(SERVERS) else listing(sorted(servers)) if len(servers) < 4 else \
        "{} servers".format(len(servers))
    return timelines_svg("Who is served when: {} under one small load".format(title), panels, caption)


def trace_svg(run, connections, name):
    """One client.py --trace file (read_trace()'s run line and connection lines; name: the file's) drawn as a
    timeline: a panel, a row per connection, its caption from the run's line (where it ran, its workload, its
    worker processes); a trace does not name the server."""
    w = run.get("workload", {})
    load = "{} connections/s for {:g} s, {} exchange{} of {} B each".format(
        "{:,g}".format(w["rate"]), w["duration"], w["messages"], "s" if w["messages"] > 1 else "", w["size"]) if \
        w.get("rate") else "{} client{} x {} connection{} x {} message{} of {} B".format(
            w.get("clients"), "s" if w.get("clients") != 1 else "", w.get("connects"),
            "s" if w.get("connects") != 1 else "", w.get("messages"), "s" if w.get("messages") != 1 else "",
            w.get("size"))
    workers = sorted({c["worker"] for c in connections if c.get("worker") is not None})
    failed = [c for c in connections if c.get("how") not in ("eof", None)]
    ends = [served(c)[1] for c in connections if served(c)]
    note = "{} connection{}; {}{}".format(len(connections), "s" if len(connections) != 1 else "",
                                         "the last echo at {:.2f} s".format(max(ends)) if ends else "no echo",
                                         "; {} failed".format(len(failed)) if failed else "")
    panels = [("{}:{}".format(run.get("host"), run.get("port")), note, connections)]
    caption = ["client.py --trace against {}:{}, {}, in {} worker process{}: {}.".format(
        run.get("host"), run.get("port"), load, len(workers), "es" if len(workers) != 1 else "", name)]
    groups = groups_text(panels)
    caption += ([groups] if groups else []) + ["A row is a connection, in the order it was first served: who is "
                                               "served when, and who waits meanwhile."]
    return timelines_svg("Who is served when: one client.py --trace run", panels, caption, columns=1,
                         row_h=8 if len(connections) <= 100 else 3, panel_w=2 * PANEL_W + PANEL_GAP_X)


# ---- what a held client costs: bench/held.py's records

HELD_W, HELD_ROW, HELD_BAR, KERNEL_BAR = 440, 38, 13, 6  # the bars' axis, and a server's row
SERVER_MEMORY, KERNEL_MEMORY = "#3b7dd8", "#9aa5b1"


def held_svg(record):
    """held.svg: a row per server at the most it held (held.most_held(), the cheapest first) on one log axis, a bar of
    the KiB of server memory a held connection and under it a thinner one of the kernel's socket slabs (both ends on
    loopback), each figure and the connections held written beside; the servers that held none of the fewest asked
    last, with why. The caption says what ran where, from the records."""
    servers = held.most_held(record)
    label = lambda s: " ".join(filter(None, [s["server"], s["flags"]]))
    figures = [s["row"].get(key) for s in servers if s["row"] for key in ("server_kib_per_held", "kernel_kib_per_held")]
    shown = [v for v in figures if v is not None and v > 0] or [1.0]
    low = math.floor(math.log10(min(shown)) - math.log10(2))  # the shortest bar at least a third of a decade long
    names = 24 + 7 * max([len(label(s)) for s in servers] + [20])  # room for the longest, right-aligned
    x = Scale(low, max(math.ceil(math.log10(max(shown))), low + 1), names, HELD_W, log=True)
    width = x.start + HELD_W + 300
    parts = [svg_text(10, 24, "What a held client costs: KiB of memory a held connection, each server at the most it "
                              "held", font_size=15, font_weight="bold")]
    y = 46
    for paragraph in held_caption(record):
        for line in wrapped(paragraph, (width - 20) / 6.3):
            parts.append(svg_text(10, y, line, fill="#333"))
            y += 16
        y += 4
    key = [('<rect x="{}" y="{}" width="22" height="{}" fill="{}"/>'.format(10, y + 4, HELD_BAR, SERVER_MEMORY),
            svg_text(38, y + 15, "the server: its processes' memory, held less before, over the connections",
                     fill="#333")),
           ('<rect x="{}" y="{}" width="22" height="{}" fill="{}"/>'.format(10, y + 26, KERNEL_BAR, KERNEL_MEMORY),
            svg_text(38, y + 32, "the kernel: its socket slabs' growth, the client's socket and the server's",
                     fill="#333"))]
    parts += [part for pair in key for part in pair]
    top = y + 52
    bottom = top + len(servers) * HELD_ROW
    parts += ['<line x1="{0:.1f}" x2="{0:.1f}" y1="{1}" y2="{2}" stroke="#e4e4e4"/>'.format(x(value), top, bottom)
              for value, _ in x.ticks(0)]
    for n, s in enumerate(servers):
        row, at = s["row"] or {}, top + n * HELD_ROW + 4
        parts += ['<g class="server" data-server="{}">'.format(html.escape(s["server"])),
                  svg_text(x.start - 8, at + 11, label(s), text_anchor="end", font_weight="bold"),
                  svg_text(x.start - 8, at + 26, "held none of the {:,} asked".format(s["stopped"][0]) if s[
                      "held"] is None else "{:,} held".format(s["held"]), text_anchor="end", fill="#555",
                           font_size=11)]
        if s["held"] is None:
            parts.append(svg_text(x.start + 4, at + 11, held.short_why(s["stopped"][1]), fill="#a00"))
        for key, height, colour, offset, words in (
                ("server_kib_per_held", HELD_BAR, SERVER_MEMORY, 0, "KiB a connection{}".format(
                    ", {} MiB held".format(held.mib_text(row["server_memory_held_kib"]))
                    if row.get("server_memory_held_kib") is not None else "")),
                ("kernel_kib_per_held", KERNEL_BAR, KERNEL_MEMORY, HELD_BAR + 3, "KiB a connection, kernel")):
            value = row.get(key)
            if s["held"] is None:
                continue
            if value is not None and value > 0:
                parts.append('<rect x="{}" y="{}" width="{:.1f}" height="{}" fill="{}"/>'.format(
                    x.start, at + offset, max(1.0, x(value) - x.start), height, colour))
            said = "not read: {}".format(row.get("memory_unread") or "no figure") if value is None else \
                "{} {}".format(held.kib_text(value), words)
            parts.append(svg_text(x.start + HELD_W + 8, at + (11 if offset == 0 else 25), said,
                                  fill="#a00" if value is None else "#222" if offset == 0 else "#555",
                                  font_size=12 if offset == 0 else 11))
        parts.append("</g>")
    parts.append('<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#888"/>'.format(
        x.start, top, HELD_W, bottom - top))
    parts += x_axis(x, bottom, "KiB a held connection (log scale: each step ten times the one before)", unit=" KiB")
    return "\n".join(['<svg xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1}" viewBox="0 0 {0} {1}" '
                      'font-family="sans-serif" font-size="12">'.format(width, bottom + 48),
                      '<rect width="100%" height="100%" fill="white"/>', *parts, "</svg>"]) + "\n"


def held_caption(record):
    """What the held picture's records say of their run: where, when, at which commit, and what was held."""
    kinds = lambda key: " or ".join(sorted({r[key] for s in held.most_held(record) for r in [s["row"] or {}]
                                            if r.get(key)})) or "not read"
    sizes = sorted({run["held"] for run in record["runs"]})
    return ["Measured on {} {}, {}, at {}{}, by python3 bench/held.py ({:,} s): client.py --all held every "
            "server's connections idle, each echoed before and after the hold, at {} connections (held.py's "
            "docstring says who is held at which).".format(
                record["machine"], record["linux"], record["when"], record["commit"],
                " (with uncommitted changes)" if record.get("changed") else "", record.get("seconds", 0),
                " and ".join([", ".join("{:,}".format(n) for n in sizes[:-1]), "{:,}".format(sizes[-1])])
                if len(sizes) > 1 else "".join("{:,}".format(n) for n in sizes)),
            "The server's figure is its process tree's memory ({}) while they were held less before they opened, over "
            "the connections held; the kernel's, its socket slabs' growth ({}) over the same connections, two sockets "
            "each on loopback.".format(kinds("server_memory_kind"), kinds("kernel_memory_kind"))]


# ---- command line

def one_line(message):
    print("draw.py: error: " + message, file=sys.stderr)
    sys.exit(2)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="?", default="-", help="client.py --all --json's output, or one client.py "
                        "--trace file (drawn as a timeline, with --svg) (default: stdin)")
    parser.add_argument("--markdown", metavar="FILE", help="write every figure as Markdown, under a line that names "
                        "the machine, the scenarios and how many servers (not client.py's command line, which the "
                        "records do not keep)")
    parser.add_argument("--svg", metavar="FILE", help="draw the results as an SVG chart: the closed-loop bars, the "
                        "sweeps' small multiples, or both; a trace as a timeline, a row per connection")
    parser.error = one_line  # a bad argument is one line, as client.py says it
    args = parser.parse_args(argv)
    if not (args.markdown or args.svg):
        parser.error("nothing to draw: give --markdown FILE, --svg FILE or both")
    try:
        text = sys.stdin.read() if args.results == "-" else Path(args.results).read_text(encoding="utf-8")
        if is_trace(text):
            if args.markdown:
                parser.error("{} is a client.py --trace file: it is drawn with --svg, and has no Markdown".format(
                    args.results))
            Path(args.svg).write_text(trace_svg(*trace_lines(text, args.results), Path(args.results).name))
            return 0
        results = from_json(json.loads(text))
    except (OSError, ValueError, KeyError, TypeError) as e:
        parser.error("cannot read client.py --all --json's output or a --trace file from {}: {}".format(
            args.results, e))
    if not results["tables"] and not results["sweeps"]:
        parser.error("{} holds no table and no sweep: is it client.py --all --json's output?".format(args.results))
    if args.markdown:
        Path(args.markdown).write_text(markdown(results) + "\n")
    if args.svg:
        Path(args.svg).write_text(chart(results["tables"], results["sweeps"], results.get("machine")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
