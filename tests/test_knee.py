# SPDX-License-Identifier: 0BSD
"""client.py's arithmetic on its own, with no server: the knee rule (meets, knee, past_limit,
client_limited, and a sweep's early stop), the workers' figures combined into a record (combine,
combine_open), percentile and --rate's parsing, on made-up steps and figures."""
import argparse
import array
import dataclasses

import pytest

GOOD = {"kept_schedule": True, "connections": 100, "errors": 0, "p99_ms": 5.0}


def step(client, rate, **changes):
    """A made-up open-loop step at rate that meets the knee rule, less what changes says."""
    figures = dict(GOOD, offered_rate=rate, reply_rate=float(rate))
    figures.update(changes)
    return client.Step(**figures)


def test_a_step_meets_the_rule_up_to_its_bounds_and_not_past_them(client_module):
    c = client_module
    rule = c.KNEE_RULE
    assert c.meets(step(c, 1000))
    # On the bound is within it: p99 at the bound, replies at the ratio, errors at their most.
    assert c.meets(step(c, 1000, p99_ms=rule["max_p99_ms"], reply_rate=rule["min_reply_ratio"] * 1000,
                        errors=rule["max_errors"]))
    for changes in ({"p99_ms": rule["max_p99_ms"] + 0.001}, {"p99_ms": None},
                    {"reply_rate": rule["min_reply_ratio"] * 1000 - 0.001}, {"errors": rule["max_errors"] + 1},
                    {"connections": 0}, {"kept_schedule": False}):
        assert not c.meets(step(c, 1000, **changes)), changes
    # A rule of one's own: three errors allowed.
    assert c.meets(step(c, 1000, errors=3), dict(rule, max_errors=3))


def test_the_knee_is_the_highest_rate_that_meets_the_rule(client_module):
    c = client_module
    assert c.knee([]) is None  # an empty sweep has no knee
    assert c.knee([step(c, 100, errors=1), step(c, 200, p99_ms=500.0)]) is None  # none met it
    # A hiccup at a low rate does not hide the rates met above it; a miss above the knee does not count.
    steps = [step(c, 100), step(c, 200, p99_ms=150.0), step(c, 300), step(c, 400, errors=2), step(c, 500, p99_ms=None)]
    assert c.knee(steps) == 300
    # At the top rate: every step met the rule.
    assert c.knee([step(c, 100), step(c, 200), step(c, 300)]) == 300
    # Ties: the same rate twice (one met, one missed), in either order, is a knee; rates out of order too.
    assert c.knee([step(c, 200), step(c, 200, errors=1)]) == c.knee([step(c, 200, errors=1), step(c, 200)]) == 200
    assert c.knee([step(c, 300), step(c, 100)]) == 300
    # A client that could not keep its schedule did not offer the rate: no knee there, however good the rest.
    assert c.knee([step(c, 100), step(c, 200, kept_schedule=False)]) == 100


def test_a_sweep_stops_only_after_two_steps_clearly_past_the_limit(client_module):
    c = client_module
    errors_past = int(c.PAST_ERROR_SHARE * 10000) + 1  # of 10,000 attempted: just over PAST_ERROR_SHARE
    over = step(c, 1000, connections=10000 - errors_past, errors=errors_past)
    slow = step(c, 1000, reply_rate=c.PAST_REPLY_RATIO * 1000 - 1)
    assert not c.past_limit([]) and not c.past_limit([over])  # one bad step never ends a sweep
    assert c.past_limit([step(c, 500), over, slow]) and c.past_limit([over, over]) and c.past_limit([slow, slow])
    assert not c.past_limit([over, step(c, 1000), over]), "two in a row, not two in all"
    # On the bounds is not past them: an error share of exactly PAST_ERROR_SHARE, replies at exactly the ratio.
    at_share = step(c, 1000, connections=10000 - int(c.PAST_ERROR_SHARE * 10000),
                    errors=int(c.PAST_ERROR_SHARE * 10000))
    at_ratio = step(c, 1000, reply_rate=c.PAST_REPLY_RATIO * 1000)
    assert c.error_share(at_share) == pytest.approx(100 * c.PAST_ERROR_SHARE)
    assert not c.past_limit([at_share, at_share]) and not c.past_limit([at_ratio, at_ratio])
    # Steps whose schedule the client could not keep say nothing of the server: that is client_limited().
    assert not c.past_limit([dataclasses.replace(over, kept_schedule=False)] * 2)
    assert c.error_share(step(c, 100, connections=0, errors=0)) == 0.0


def test_a_client_that_cannot_keep_its_schedule_two_steps_in_a_row_stops_the_sweep(client_module):
    c = client_module
    behind = step(c, 5000, kept_schedule=False)
    assert not c.client_limited([]) and not c.client_limited([behind])
    assert c.client_limited([step(c, 100), behind, behind])
    assert not c.client_limited([behind, step(c, 4000)]) and not c.client_limited([behind, step(c, 4000), behind])


def fake_sweep(client, monkeypatch, made, rates, server=None):
    """client.sweep() over rates, each step the made-up one made(rate) returns instead of a measured one."""
    offered = []

    def measure(host, port, w, procs, read=None):
        offered.append(w.rate)
        return made(w.rate), None, None
    monkeypatch.setattr(client, "measure", measure)
    monkeypatch.setattr(client, "note", lambda message: None)
    return client.sweep("127.0.0.1", 1, rates, client.Workload(), 1, "echo_made_up.py", server), offered


def test_a_sweep_names_its_knee_and_says_why_it_stopped(client_module, monkeypatch):
    c = client_module
    # Every rate met the rule: the knee is the top rate, and the server's limit was not reached.
    result, offered = fake_sweep(c, monkeypatch, lambda rate: step(c, rate), [100, 200, 300])
    assert offered == [100, 200, 300] and result["knee"] == 300 and result["knee_at_top"]
    assert not result["stopped_early"] and not result["client_limited"] and result["failed"] is None
    # Past the limit from 300 on: two steps there end it, the rates above are not offered.
    result, offered = fake_sweep(c, monkeypatch, lambda rate: step(c, rate, reply_rate=rate * 0.5 if rate >= 300
                                                                     else float(rate)), [100, 200, 300, 400, 500, 600])
    assert offered == [100, 200, 300, 400] and result["knee"] == 200 and not result["knee_at_top"]
    assert result["stopped_early"] and not result["client_limited"]
    # The client fell behind its schedule from 200 on: it stops, and says the client was the limit.
    result, offered = fake_sweep(c, monkeypatch, lambda rate: step(c, rate, kept_schedule=rate < 200),
                                 [100, 200, 300, 400])
    assert offered == [100, 200, 300] and result["knee"] == 100 and result["stopped_early"] and result["client_limited"]
    # Past the limit only at the last rate asked for: nothing is left to stop early.
    result, offered = fake_sweep(c, monkeypatch, lambda rate: step(c, rate, errors=rate // 100), [100, 200])
    assert offered == [100, 200] and result["knee"] is None and not result["stopped_early"]


def test_an_empty_sweep_has_no_knee(client_module, monkeypatch):
    """No step at all: a server that exited before the first rate, or no rates."""
    c = client_module

    class Exited:
        proc = argparse.Namespace(returncode=3)

        def alive(self):
            return False
    result, offered = fake_sweep(c, monkeypatch, lambda rate: step(c, rate), [100, 200], Exited())
    assert offered == [] and result["steps"] == [] and result["knee"] is None and not result["knee_at_top"]
    assert result["failed"] == "exited with status 3"
    result, offered = fake_sweep(c, monkeypatch, lambda rate: step(c, rate), [])
    assert result == c.no_sweep("echo_made_up.py")


def seconds(*values):
    return array.array("d", values).tobytes()


def part(client, **changes):
    """One worker's figures, as Engine.figures() and its driver hand them to the parent, made up."""
    figures = {"messages": 0, "connections": 0, "echo_sum": 0.0, "connect_sum": 0.0, "max_open": 1,
               "errors": dict.fromkeys(client.ERROR_WORDS, 0), "client_limits": {"ports": 0, "descriptors": 0},
               "last_done": None, "latencies": seconds(), "responses": seconds(), "connect_times": seconds(),
               "handshakes": seconds(), "resumed": 0, "tls_version": None, "cpu": 0.0, "start": 0.0, "end": 0.0,
               "first_start": None, "last_start": None, "started": 0, "behind": 0.0}
    figures.update(changes)
    return figures


def test_combine_gives_the_articles_averages_and_rates_over_the_run(client_module):
    c = client_module
    w = c.Workload(clients=2, connects=2, messages=3, size=100)
    errors = dict.fromkeys(c.ERROR_WORDS, 0)
    errors["timeout"] = 1
    parts = [part(c, messages=6, connections=2, connect_sum=0.02, echo_sum=0.4, cpu=0.1, start=10.0, end=11.0,
                  latencies=seconds(*[0.001] * 6), connect_times=seconds(0.01, 0.01), max_open=1),
             part(c, messages=5, connections=1, connect_sum=0.06, echo_sum=0.2, cpu=0.2, start=10.5, end=12.0,
                  latencies=seconds(0.001, 0.002, 0.003, 0.004, 0.2), connect_times=seconds(0.02, 0.04),
                  errors=errors, max_open=1)]
    r = c.combine(parts, w)
    assert (r.messages, r.connections, r.errors, r.error_kinds) == (11, 3, 1, {"timeout": 1})
    assert r.expected == 2 * 2 * 3 and r.wall_s == 2.0 and r.max_open == 2
    # The article's averages: connect over every attempt, echo over every connection that completed.
    assert r.connect_s == pytest.approx(0.08 / 4) and r.echo_s == pytest.approx(0.6 / 3)
    assert r.total_s == pytest.approx(r.connect_s + r.echo_s)
    assert r.msgs_per_s == pytest.approx(11 / 2.0) and r.mb_per_s == pytest.approx(11 * 100 / 2.0 / 1e6)
    assert r.conns_per_s == pytest.approx(3 / 2.0) and r.client_us == pytest.approx(1e6 * 0.3 / 11)
    assert r.p50_ms == pytest.approx(1.0) and r.max_ms == pytest.approx(200.0) and r.p99_ms == pytest.approx(200.0)
    assert r.connect_p50_ms == pytest.approx(20.0) and r.connect_max_ms == pytest.approx(40.0)
    assert r.connect_phase_s is None and r.handshakes is None  # neither held nor TLS


def test_combine_rates_held_connections_over_their_echo_phase_and_timed_runs_by_what_they_did(client_module):
    c = client_module
    held = c.Workload(clients=2, connects=1, messages=10, size=32, hold=True)
    parts = [part(c, messages=10, connections=1, start=0.0, held_at=2.0, echo_start=2.0, end=2.5),
             part(c, messages=10, connections=1, start=0.5, held_at=3.0, echo_start=3.0, end=4.0)]
    r = c.combine(parts, held)
    assert r.connect_phase_s == pytest.approx(3.0) and r.echo_phase_s == pytest.approx(2.0)
    assert r.msgs_per_s == pytest.approx(20 / 2.0) and r.conns_per_s == pytest.approx(2 / 4.0)
    assert r.connect_s is None and r.expected == 20
    # --seconds: no count is known ahead; each connection that did not end cleanly is one message short.
    timed = c.Workload(clients=2, connects=1, seconds=1.0)
    r = c.combine([part(c, messages=500, connections=1, start=0.0, end=1.0), part(c, messages=400, start=0.0, end=1.0)],
                  timed)
    assert r.expected == 900 + 1 and r.p50_ms is None  # and no latency where none was timed
    # Nothing done at all: no division by zero, no figure made up.
    r = c.combine([part(c)], c.Workload(clients=1, connects=1))
    assert (r.messages, r.msgs_per_s, r.conns_per_s, r.p99_ms, r.connect_s) == (0, 0.0, 0.0, None, 0.0)


def test_combine_open_says_when_the_client_did_not_keep_its_schedule(client_module):
    c = client_module
    w = c.Workload(rate=100, duration=2.0, messages=1, size=32)
    # Kept: 200 starts from 0 to 1.99 s, every reply by 2.1 s.
    kept = c.combine_open([part(c, started=100, connections=100, messages=100, first_start=0.0, last_start=1.98,
                                last_done=2.1, start=0.0, behind=0.001, responses=seconds(*[0.002] * 100)),
                           part(c, started=100, connections=100, messages=100, first_start=0.01, last_start=1.99,
                                last_done=2.05, start=0.0, behind=0.002, responses=seconds(*[0.004] * 100))], w)
    assert kept.started == kept.scheduled == 200 and kept.achieved_rate == pytest.approx(199 / 1.99)
    assert kept.kept_schedule and kept.behind_ms == pytest.approx(2.0) and kept.expected == 200
    assert kept.reply_rate == pytest.approx(200 / 2.1)  # the replies came after the arrivals ended
    assert kept.p50_ms == pytest.approx(4.0) and kept.responses_100ms_or_more == 0
    assert c.meets(kept)
    # Behind: half the starts over the same two seconds; the step does not count as offered.
    behind = c.combine_open([part(c, started=100, connections=100, messages=100, first_start=0.0, last_start=1.98,
                                  last_done=2.0, start=0.0, behind=1.0, responses=seconds(*[0.5] * 100))], w)
    assert behind.achieved_rate == pytest.approx(99 / 1.98) and not behind.kept_schedule
    assert behind.responses_100ms_or_more == 100 and not c.meets(behind)
    assert c.client_limited([behind, behind]) and not c.past_limit([behind, behind])
    # Exactly at KEPT_SCHEDULE of the rate is kept.
    def kept_at(started):
        return c.combine_open([part(c, started=started, connections=started, first_start=0.0, last_start=1.0,
                                    start=0.0)], c.Workload(rate=100, duration=1.0))
    assert kept_at(round(c.KEPT_SCHEDULE * 100) + 1).kept_schedule  # 95 a second of 100
    assert not kept_at(round(c.KEPT_SCHEDULE * 100)).kept_schedule  # 94
    # Nothing started: an achieved rate of 0, no response time, no division by zero.
    none = c.combine_open([part(c)], w)
    assert none.achieved_rate == 0.0 and not none.kept_schedule and none.reply_rate == 0.0 and none.p99_ms is None
    # One start: no spread to measure a rate over; the offered rate stands.
    one = c.combine_open([part(c, started=1, connections=1, first_start=0.5, last_start=0.5, start=0.0)], w)
    assert one.achieved_rate == 100.0 and one.kept_schedule


def test_percentile_is_a_value_measured_with_at_least_q_of_them_at_or_below_it(client_module):
    c = client_module
    assert c.percentile([], 0.5) is None
    assert c.percentile([0.002], 0.0) == c.percentile([0.002], 0.99) == c.percentile([0.002], 1.0) == 2.0
    ordered = [n / 1000 for n in range(1, 101)]  # 1 to 100 ms
    assert c.percentile(ordered, 1.0) == 100.0 and c.percentile(ordered, 0.0) == 1.0
    assert c.percentile(ordered, 0.5) == 51.0 and c.percentile(ordered, 0.99) == 100.0
    for n in (1, 2, 3, 7, 10, 99, 100, 101, 1000):
        ordered = [k / 1000 for k in range(n)]
        for q in (0.0, 0.1, 0.29, 0.5, 0.9, 0.99, 0.999, 1.0):
            value = c.percentile(ordered, q)
            at_or_below = sum(1 for s in ordered if s * 1000 <= value)
            assert value / 1000 in ordered and at_or_below >= q * n, (n, q)
    assert c.percentile([0.001, 0.001, 0.001, 0.009], 0.5) == 1.0  # ties


def test_rate_takes_one_rate_or_a_sweep_and_refuses_the_rest_in_one_line(client_module):
    c = client_module
    assert c.parse_rate("500") == c.Rates([500], sweep=False) and c.parse_rate("2.5") == c.Rates([2.5], sweep=False)
    assert type(c.parse_rate("500").values[0]) is int  # 500, not 500.0, in JSON and tables
    assert c.parse_rate("100:300:100") == c.Rates([100, 200, 300], sweep=True)
    assert c.parse_rate("100:250:100") == c.Rates([100, 200], sweep=True)  # B not on a step: the rates below it
    assert c.parse_rate("100:100:50") == c.Rates([100], sweep=True)  # one step, still a sweep (a knee named)
    assert c.parse_rate("0.1:0.3:0.1").values == [0.1, 0.2, 0.3]  # B kept, and no 0.30000000000000004
    assert c.parse_rate("1:{}:1".format(c.MAX_STEPS)).values[-1] == c.MAX_STEPS
    assert c.parse_rate(str(c.MAX_RATE)).values == [c.MAX_RATE]
    for bad in ("", "x", "0", "-5", "nan", "inf", "1:2", "1:2:3:4", "300:100:100", "100:200:0", str(c.MAX_RATE + 1),
                "1:{}:1".format(c.MAX_STEPS + 1), "1e400"):
        with pytest.raises(argparse.ArgumentTypeError) as refused:
            c.parse_rate(bad)
        assert "\n" not in str(refused.value) and repr(bad) in str(refused.value), bad
