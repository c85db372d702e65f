"""openloop_parts.py: pure pieces of client.py --rate, to be pasted into client.py.

Nothing here opens a socket: these functions read the step dicts that the open-loop
driver produces (one per offered rate, with the --json field names: offered_rate,
achieved_rate, behind_ms, reply_rate, connections, messages, errors, error_kinds,
p50_ms, p90_ms, p99_ms, max_ms, connect_p50_ms, connect_p99_ms, max_open,
client_cpu_s, client_ports_exhausted) and a sweep dict ({"server", "knee", "steps",
"stopped_early", "failed"}). Stdlib only.

  python3 openloop_parts.py [chart.svg]     self-check on fake steps; writes the chart
"""
import argparse
import html
import math
import sys
import tempfile
from pathlib import Path

MAX_RATE = 1000000  # connections/s: far past any loopback server, and a typo's guard
MAX_STEPS = 1000
# The knee: the highest offered rate whose step had no error, replies within 5 % of
# the offered rate, and a p99 response time (from the schedule) at most 100 ms.
KNEE_RULE = {"max_errors": 0, "min_reply_ratio": 0.95, "max_p99_ms": 100.0}
# Clearly past the limit: more than 1 % of the connections failed, or replies came
# back at under 80 % of the offered rate.
PAST_ERROR_SHARE, PAST_REPLY_RATIO = 0.01, 0.8


# ---------------------------------------------------------------- the command line

def parse_rate(text):
    """--rate: "R" -> R (a number); "A:B:STEP" -> [A, A+STEP, ..., <= B] (a list, even of one).
    For argparse's type=: a bad value raises ArgumentTypeError, which is one line."""
    parts = text.split(":")
    try:
        if len(parts) not in (1, 3):
            raise ValueError
        values = [float(part) for part in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(
            "expected connections/s as R or a sweep A:B:STEP, e.g. 500 or 100:2000:100, got {!r}".format(text)
        ) from None
    # Written as "inside the range" so that nan, which compares false, fails too.
    if not all(0 < value <= MAX_RATE for value in values):
        raise argparse.ArgumentTypeError("rates and steps must be above 0 and at most {:,}, got {!r}".format(
            MAX_RATE, text))
    if len(values) == 1:
        return whole(values[0])
    start, stop, step = values
    if stop < start:
        raise argparse.ArgumentTypeError("a sweep goes up: A:B:STEP needs A <= B, got {!r}".format(text))
    count = int((stop - start) / step + 1e-9) + 1  # the epsilon keeps B itself when STEP is 0.1
    if count > MAX_STEPS:
        raise argparse.ArgumentTypeError("{!r} is {:,} steps; at most {:,}".format(text, count, MAX_STEPS))
    # Each rate from start, not by adding STEP again and again: no 0.30000000000000004.
    return [whole(round(start + n * step, 6)) for n in range(count)]


def whole(value):
    """50.0 -> 50, so that JSON, tables and charts show 50 and not 50.0."""
    return int(value) if value == int(value) else value


# ---------------------------------------------------------------- reading the steps

def reply_rate(connections, span_s, duration_s):
    """Connections completed per second. Over the arrivals' duration, or over the span
    from the first scheduled start to the last reply when that is longer: a server
    past its capacity finishes a step's connections late, and its rate is what it
    managed, not what it was offered."""
    return connections / max(duration_s, span_s) if duration_s > 0 else 0.0


def meets(step, rule=KNEE_RULE):
    """True when step is within the rule: no error, replies kept up, p99 under the bound."""
    return (step["connections"] > 0 and step["errors"] <= rule["max_errors"]
            and step["reply_rate"] >= rule["min_reply_ratio"] * step["offered_rate"]
            and step["p99_ms"] is not None and step["p99_ms"] <= rule["max_p99_ms"])


def knee(steps, rule=KNEE_RULE):
    """The highest offered rate whose step meets the rule, or None. The highest, not
    the last before a miss: one hiccup of a shared machine at a low rate must not
    hide the rates the server handled above it."""
    rates = [step["offered_rate"] for step in steps if meets(step, rule)]
    return max(rates) if rates else None


def knee_rule_text(rule=KNEE_RULE):
    errors = "no error" if rule["max_errors"] == 0 else "at most {} errors".format(rule["max_errors"])
    return ("the knee is the highest offered rate with {}, replies at least {:.0f} % of the offered rate "
            "and p99 at most {:g} ms").format(errors, 100 * rule["min_reply_ratio"], rule["max_p99_ms"])


def past_limit(steps):
    """Stop a sweep early: True when the last two steps were both clearly past the
    limit (more than 1 % of connections failed, or replies under 80 % of offered).
    Two in a row, so that one bad step on a shared machine does not end a sweep;
    rates above them would only add timeouts and minutes."""
    def over(step):
        attempted = step["connections"] + step["errors"]
        return (step["errors"] > PAST_ERROR_SHARE * attempted
                or step["reply_rate"] < PAST_REPLY_RATIO * step["offered_rate"])
    return len(steps) >= 2 and over(steps[-1]) and over(steps[-2])


def error_share(step):
    """Errors as a percentage of the connections the step attempted."""
    attempted = step["connections"] + step["errors"]
    return 100.0 * step["errors"] / attempted if attempted else 0.0


# ---------------------------------------------------------------- reporting

def rate_text(rate):
    return "{:,.0f}".format(rate) if rate == int(rate) else "{:,.2f}".format(rate)


def ms_text(value):
    """Milliseconds with about three significant digits: 0.213, 4.27, 38.1, 1,204."""
    if value is None or value == 0:
        return "-" if value is None else "0"
    return "{:,.3f}".format(value) if value < 1 else "{:,.2f}".format(value) if value < 10 else \
        "{:,.1f}".format(value) if value < 100 else "{:,.0f}".format(value)


def errors_text(step):
    if not step["errors"]:
        return "0"
    return "{} ({})".format(step["errors"], ", ".join(
        "{} {}".format(count, kind) for kind, count in sorted(step["error_kinds"].items())))


def step_line(server, step):
    """The progress line for one step, on stderr."""
    return "{} {}/s: started {:,.0f}/s ({} ms behind), replies {:,.0f}/s, p99 {} ms, {} errors".format(
        server, rate_text(step["offered_rate"]), step["achieved_rate"], ms_text(step["behind_ms"]),
        step["reply_rate"], ms_text(step["p99_ms"]), step["errors"])


def sweep_table_markdown(server, sweep):
    """One server's sweep as Markdown lines: a heading that names its knee, then one row per step."""
    if sweep["knee"] is not None:
        heading = "#### {}: knee {} connections/s".format(server, rate_text(sweep["knee"]))
    elif sweep["failed"] and not sweep["steps"]:
        heading = "#### {}: failed".format(server)
    else:
        heading = "#### {}: no knee (no step met the rule)".format(server)
    lines = [heading, ""]
    if sweep["failed"]:
        lines += ["Failed: {}.".format(sweep["failed"]), ""]
    if not sweep["steps"]:
        return lines
    lines += ["| offered/s | started/s | behind ms | replies/s | errors | p50 ms | p90 ms | p99 ms | max ms"
              " | connect p99 ms | max open | client CPU s |",
              "|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for step in sweep["steps"]:
        offered = rate_text(step["offered_rate"])
        lines.append("| {} | {:,.0f} | {} | {:,.0f} | {} | {} | {} | {} | {} | {} | {:,} | {:.2f} |".format(
            "**{}**".format(offered) if step["offered_rate"] == sweep["knee"] else offered,
            step["achieved_rate"], ms_text(step["behind_ms"]), step["reply_rate"], errors_text(step),
            ms_text(step["p50_ms"]), ms_text(step["p90_ms"]), ms_text(step["p99_ms"]), ms_text(step["max_ms"]),
            ms_text(step["connect_p99_ms"]), step["max_open"], step["client_cpu_s"]))
    lines.append("")
    if sweep["stopped_early"]:
        lines += ["Stopped after {}/s: two steps in a row were past the limit.".format(
            rate_text(sweep["steps"][-1]["offered_rate"])), ""]
    exhausted = sum(step["client_ports_exhausted"] or 0 for step in sweep["steps"])
    if exhausted:
        lines += ["The client ran out of local ports (EADDRNOTAVAIL) {:,} times; those connections are not "
                  "counted against the server.".format(exhausted), ""]
    return lines


# ---------------------------------------------------------------- the chart

# Distinct on a white page, in an order where neighbours differ most.
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#7f7f7f", "#bcbd22", "#1a1a80", "#b8860b", "#7a0019", "#000000", "#00a087", "#e7298a")
P50_MOST = 6  # more servers than this, and the dashed p50 lines would hide the p99 ones
LEFT, PLOT_W, PLOT_H, PANEL_GAP, TOP = 70, 470, 180, 78, 56
LEGEND_X = LEFT + PLOT_W + 30


def nice_step(span, count):
    """A step of 1, 2, 2.5 or 5 x 10^k giving about count ticks over span."""
    raw = span / count
    magnitude = 10 ** math.floor(math.log10(raw))
    return next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw * 0.999)


def nice_ceiling(value):
    """The first tick at or above value: where a linear axis from 0 ends."""
    step = nice_step(value, 5)
    return math.ceil(value / step - 1e-9) * step


def linear_ticks(low, high, count=6):
    step = nice_step(high - low, count)
    first = math.ceil(low / step - 1e-9) * step
    return [round(first + n * step, 10) for n in range(int((high - first) / step + 1e-9) + 1)]


def tick_text(value):
    return "{:,.0f}".format(value) if value == int(value) else "{:,g}".format(value)


def sweep_svg(sweeps):
    """Three graphs stacked against the offered rate: reply rate, response time (p99,
    and p50 dashed when few servers), errors. One line per server, one legend."""
    points = [step for sweep in sweeps for step in sweep["steps"]]
    offered = [step["offered_rate"] for step in points] or [0, 1]
    x_low, x_high = min(offered), max(offered)
    if x_low == x_high:  # one step: give it some room
        x_low, x_high = x_low * 0.9, x_high * 1.1 + 1
    with_p50 = sum(1 for sweep in sweeps if sweep["steps"]) <= P50_MOST

    def x(rate):
        return LEFT + PLOT_W * (rate - x_low) / (x_high - x_low)

    # Reply rate: from 0, up to the higher of what was offered and what came back.
    reply_top = nice_ceiling(max([step["reply_rate"] for step in points] + [x_high]))
    # Response time: log scale, whole decades, since milliseconds under the knee and
    # seconds past it must both be read on one axis.
    times = [step[key] for step in points for key in ("p50_ms", "p99_ms") if step[key]]
    low_decade = math.floor(math.log10(max(min(times), 0.01))) if times else -1
    high_decade = max(low_decade + 2, math.ceil(math.log10(max(times))) if times else 2)
    error_top = min(100.0, nice_ceiling(max([error_share(step) for step in points] + [1.0])))
    panels = [
        ("Reply rate (connections/s completed; dotted: replies = offered)", "linear", 0, reply_top,
         lambda s: s["reply_rate"]),
        ("Response time, ms from the scheduled start (log scale): p99 solid"
         + (", p50 dashed" if with_p50 else ""), "log", low_decade, high_decade, lambda s: s["p99_ms"]),
        ("Errors (% of the connections attempted)", "linear", 0, error_top, error_share),
    ]
    height = TOP + 3 * (PLOT_H + PANEL_GAP)
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}" '
           'font-family="sans-serif" font-size="12">'.format(LEGEND_X + 300, height, LEGEND_X + 300, height),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="{}" y="24" font-size="15" font-weight="bold">Open loop: each server against the offered '
           'connection rate</text>'.format(LEFT)]
    for n, (title, scale, low, high, value) in enumerate(panels):
        top = TOP + n * (PLOT_H + PANEL_GAP)
        bottom = top + PLOT_H

        def y(v, scale=scale, low=low, high=high, top=top):
            if scale == "log":
                v = (math.log10(max(v, 10.0 ** low)) - low)
                return top + PLOT_H * (1 - v / (high - low))
            return top + PLOT_H * (1 - (v - low) / (high - low))

        out.append('<text x="{}" y="{}" font-weight="bold">{}</text>'.format(LEFT, top - 10, html.escape(title)))
        # Horizontal grid lines with their labels, then the x ticks, then the frame.
        if scale == "log":
            y_ticks = [(10.0 ** d, tick_text(10.0 ** d) if d >= 0 else "{:g}".format(10.0 ** d))
                       for d in range(low, high + 1)]
        else:
            y_ticks = [(t, tick_text(t)) for t in linear_ticks(low, high, 5)]
        for value_at, label in y_ticks:
            out.append('<line x1="{0}" x2="{1}" y1="{2:.1f}" y2="{2:.1f}" stroke="#e4e4e4"/>'.format(
                LEFT, LEFT + PLOT_W, y(value_at)))
            out.append('<text x="{}" y="{:.1f}" text-anchor="end" fill="#444">{}</text>'.format(
                LEFT - 6, y(value_at) + 4, label))
        for tick in linear_ticks(x_low, x_high, 8):
            out.append('<line x1="{0:.1f}" x2="{0:.1f}" y1="{1}" y2="{2}" stroke="#444"/>'.format(
                x(tick), bottom, bottom + 4))
            out.append('<text x="{:.1f}" y="{}" text-anchor="middle" fill="#444">{}</text>'.format(
                x(tick), bottom + 17, tick_text(tick)))
        out.append('<text x="{}" y="{}" text-anchor="middle" fill="#444">offered rate (connections/s)</text>'.format(
            LEFT + PLOT_W / 2, bottom + 33))
        out.append('<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#444"/>'.format(
            LEFT, top, PLOT_W, PLOT_H))
        if n == 0:  # where a server that keeps up lies: replies = offered
            out.append('<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="#999" '
                       'stroke-dasharray="2,3"/>'.format(x(x_low), y(x_low), x(x_high), y(x_high)))
        if n == 2 and not any(step["errors"] for step in points):
            out.append('<text x="{}" y="{}" text-anchor="middle" fill="#444">no errors at any step</text>'.format(
                LEFT + PLOT_W / 2, top + PLOT_H / 2))
        lines = [(value, "")]
        if n == 1 and with_p50:
            lines.append((lambda s: s["p50_ms"], ' stroke-dasharray="5,4" stroke-opacity="0.7"'))
        for i, sweep in enumerate(sweeps):
            colour = COLOURS[i % len(COLOURS)]
            for figure, style in lines:
                # A step without a figure (no reply at all) breaks the line rather than dropping to 0.
                runs, run = [], []
                for step in sweep["steps"]:
                    v = figure(step)
                    if v is None or (scale == "log" and v <= 0):
                        runs, run = runs + [run], []
                    else:
                        run.append((x(step["offered_rate"]), y(v)))
                for run in runs + [run]:
                    if not run:
                        continue
                    out.append('<polyline fill="none" stroke="{}" stroke-width="1.8"{} points="{}"/>'.format(
                        colour, style, " ".join("{:.1f},{:.1f}".format(*p) for p in run)))
                    if not style:
                        out += ['<circle cx="{:.1f}" cy="{:.1f}" r="2.2" fill="{}"/>'.format(px, py, colour)
                                for px, py in run]
            knee_step = [s for s in sweep["steps"] if s["offered_rate"] == sweep["knee"]]
            if n == 0 and knee_step:  # the knee, ringed on the reply-rate graph
                out.append('<circle cx="{:.1f}" cy="{:.1f}" r="6" fill="none" stroke="{}" stroke-width="2"/>'.format(
                    x(sweep["knee"]), y(knee_step[0]["reply_rate"]), colour))
    # The legend: a line sample, the server, its knee.
    out.append('<text x="{}" y="{}" font-weight="bold">servers (ringed: the knee)</text>'.format(LEGEND_X, TOP - 10))
    for i, sweep in enumerate(sweeps):
        colour, row = COLOURS[i % len(COLOURS)], TOP + 8 + 18 * i
        note = ("failed" if sweep["failed"] and not sweep["steps"] else
                "knee {}/s".format(rate_text(sweep["knee"])) if sweep["knee"] is not None else "no knee")
        if sweep["steps"]:  # no sample for a server that drew no line
            out.append('<line x1="{0}" x2="{1}" y1="{2}" y2="{2}" stroke="{3}" stroke-width="3"/>'.format(
                LEGEND_X, LEGEND_X + 22, row - 4, colour))
        out.append('<text x="{}" y="{}">{} <tspan fill="#555">{}</tspan></text>'.format(
            LEGEND_X + 28, row, html.escape(sweep["server"]), note))
    out.append("</svg>")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    import random
    random.seed(9)

    assert parse_rate("500") == 500 and parse_rate("2.5") == 2.5
    assert parse_rate("100:300:100") == [100, 200, 300] and parse_rate("0.1:0.3:0.1") == [0.1, 0.2, 0.3]
    assert parse_rate("5:5:1") == [5]
    for bad in ("0", "abc", "5:1:1", "1:5:0", "-5", "nan", "inf", "1:2", "1:2:3:4", "", "1:2000000:1"):
        try:
            parse_rate(bad)
        except argparse.ArgumentTypeError:
            continue
        raise AssertionError("parse_rate accepted {!r}".format(bad))

    def fake_step(rate, capacity, floor_ms):
        """A server that keeps up to capacity, then queues, then fails."""
        over = max(0.0, rate / capacity - 1)
        attempted = rate * 2
        errors = int(attempted * min(0.6, max(0.0, over - 0.15))) if over > 0.15 else 0
        reply = min(rate, capacity * (1 - over / 4)) if over else rate * random.uniform(0.99, 1.0)
        p99 = floor_ms * random.uniform(0.8, 1.3) + (2000 * over if over else 0)
        return {"offered_rate": rate, "achieved_rate": rate * 0.998, "behind_ms": random.uniform(0, 2),
                "reply_rate": reply, "connections": attempted - errors, "messages": attempted - errors,
                "errors": errors, "error_kinds": {"timeout": errors} if errors else {},
                "p50_ms": p99 / 4, "p90_ms": p99 / 2, "p99_ms": p99, "max_ms": p99 * 1.5,
                "connect_p50_ms": 0.08, "connect_p99_ms": 0.4, "max_open": int(1 + rate * p99 / 4000),
                "client_cpu_s": rate * 2 * 30e-6, "client_ports_exhausted": 0}

    sweeps = []
    for server, capacity, floor_ms in (("echo_epoll.py", 2650, 0.6), ("echo_selectors.py", 2300, 0.8),
                                       ("echo_thread.py", 1500, 2.5), ("echo_asyncio_streams.py", 1100, 1.5)):
        steps = []
        for rate in parse_rate("200:4000:200"):
            steps.append(fake_step(rate, capacity, floor_ms))
            if past_limit(steps):
                break
        sweeps.append({"server": server, "knee": knee(steps), "steps": steps,
                       "stopped_early": steps[-1]["offered_rate"] < 4000, "failed": None})
    sweeps.append({"server": "echo_fork.py", "knee": None, "steps": [], "stopped_early": False,
                   "failed": "did not start: no port line"})
    for sweep in sweeps:
        assert sweep["failed"] or sweep["knee"] is not None
        print("\n".join(sweep_table_markdown(sweep["server"], sweep)))
    print(knee_rule_text())
    print(step_line("echo_epoll.py", sweeps[0]["steps"][-1]), file=sys.stderr)
    chart = Path(sys.argv[1] if len(sys.argv) > 1 else Path(tempfile.gettempdir()) / "openloop_check.svg")
    chart.write_text(sweep_svg(sweeps))
    import xml.etree.ElementTree as ET
    ET.parse(str(chart))
    print("wrote", chart, file=sys.stderr)
