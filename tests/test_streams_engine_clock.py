"""Event time one bad clock cannot move (issue 14 item 7, build 4).

Measured on d8b4309: one ``gpu.sample`` of another node stamped 23 h ahead (inside the
contract's 24 h future bound) moved the Engine's event time forward and produced false stall
incidents in ``faultline diagnose``. ``EventClock`` (streams/clock.py) moves time only in
steps the fleet backs; these tests pin its rules and the Engine's use of it.
"""

from __future__ import annotations

import orjson
import pytest

from faultline.streams.clock import EventClock, source_of
from faultline.streams.engine import Engine, EngineConfig

H = 3_600_000
T = 1_767_000_000_000
TOL = 120_000


def test_fleet_time_follows_credible_steps_and_ignores_one_source_far_ahead():
    c = EventClock(TOL)
    for i in range(10):
        for n in ("n1", "n2", "n3"):
            assert c.observe(n, T + i * 10_000)
    assert c.now == T + 90_000
    assert not c.observe("n4", T + 23 * H)          # flagged, time unchanged
    assert c.now == T + 90_000
    assert c.observe("n1", T + 100_000)               # the fleet goes on
    assert c.now == T + 100_000
    [f] = c.skewed()
    assert (f.source, f.events, f.ahead_ms) == ("n4", 1, 23 * H - 90_000)
    assert c.skewed_events() == 1


def test_a_bursty_skewed_source_never_corroborates_itself():
    c = EventClock(TOL)
    c.observe("n1", T)
    c.observe("n2", T)
    for i in range(5_000):                            # 5,000 lines of one node, all 5 h ahead
        assert not c.observe("n9", T + 5 * H + i)
    assert c.now == T
    assert c.skewed()[0].events == 5_000


def test_two_sources_agreeing_ahead_move_time_a_gap_in_the_input():
    c = EventClock(TOL)
    c.observe("n1", T)
    c.observe("n2", T)
    assert not c.observe("n1", T + 2 * H)             # the fleet resumes after 2 h ...
    assert c.observe("n2", T + 2 * H + 5_000)         # ... a second clock agrees: time jumps
    assert c.now == T + 2 * H
    assert c.skewed() == []                           # the first one's flag is cleared
    assert c.observe("n1", T + 2 * H + 10_000)


def test_a_single_live_source_carries_time_dead_ones_do_not_hold_it():
    c = EventClock(TOL)
    for n in ("n1", "n2", "n3"):
        c.observe(n, T)
    for i in range(1, 400):                           # n2 and n3 died; n1 reports for 66 min
        assert c.observe("n1", T + i * 10_000)
    assert c.now == T + 399 * 10_000


def test_one_source_alone_is_believed_and_a_second_far_behind_takes_time_back():
    c = EventClock(TOL)
    assert c.observe("n1", T + 3 * H)                # the only clock so far: nobody disagrees
    assert c.observe("n1", T + 3 * H + 4 * H)         # even after a gap (diagnose of one node)
    assert c.now == T + 7 * H
    c2 = EventClock(TOL)
    c2.observe("n9", T + 23 * H)                      # the very first event is the skewed one
    assert c2.observe("n1", T)                        # a second source far behind: time goes back
    assert c2.now == T
    c2.observe("n2", T + 1_000)
    assert [f.source for f in c2.skewed()] == ["n9"]


def test_bounded_claims_and_flags():
    c = EventClock(TOL, max_claims=8, max_flags=4)
    c.observe("a", T)
    c.observe("b", T)
    for i in range(100):
        c.observe(f"s{i}", T + 10 * H + i * 3 * TOL)  # 100 sources, each far from the others
    assert len(c.claims) <= 8 and len(c.flags) <= 4
    assert c.skewed_events() == 100
    assert c.now == T


class _Ev:
    def __init__(self, node=None, device=None, source="slurm@ctl-1"):
        self.node, self.source = node, source
        self.data = type("D", (), {"device": device})()


def test_source_of_names_the_clock():
    assert source_of(_Ev(node="gpu-017")) == "gpu-017"
    assert source_of(_Ev(device="leaf-03")) == "leaf-03"
    assert source_of(_Ev()) == "slurm@ctl-1"


# ---------------------------------------------------------------------------- diagnose
sim = pytest.importorskip("faultline.producers.simulate", reason="simulator not importable")


def _run(lines, cfg=None):
    eng = Engine(cfg or EngineConfig())
    for i in range(0, len(lines), 8192):
        eng.process(lines[i:i + 8192])
    eng.finish()
    return eng


def _key(eng):
    return sorted((i.job, i.attempt, i.state, i.root_cause.category, i.root_cause.component, i.failure_ts,
                   i.last_checkpoint.step if i.last_checkpoint else None, round(i.lost_gpu_hours, 6),
                   i.retry.attempt if i.retry else None, i.revision) for i in eng.incidents())


@pytest.fixture(scope="module")
def fleet():
    lines, _ = sim.simulate("mixed", seed=7, nodes=16, hours=1)
    return lines


@pytest.mark.parametrize("where", ["middle", "end", "start"])
def test_diagnose_incidents_identical_with_one_event_23h_ahead(fleet, where):
    """One gpu.sample of another node stamped 23 h ahead among a 16-node fleet's traffic
    (in the middle of the input, at its end as in a ts-sorted file, or as the very first
    line): every incident is identical to the run without it; the event is counted and its
    source named. Without the clock (tolerance unbounded: the old rule) the same input gives
    false stall incidents, so this test fails when the feature is missing."""
    evs = [orjson.loads(l) for l in fleet]
    mid = len(evs) // 2
    base = next(e for e in evs[mid:] if e["kind"] == "gpu.sample")
    other = next(e["node"] for e in evs[mid:] if e.get("node") and e["node"] != base["node"])
    skewed = orjson.dumps({**base, "id": "skewed-23h", "node": other, "ts": base["ts"] + 23 * H})
    at = {"middle": mid, "end": len(fleet), "start": 0}[where]
    lines = fleet[:at] + [skewed] + fleet[at:]
    want = _key(_run(fleet))
    assert want, "the scenario has incidents to compare"
    eng = _run(lines)
    assert _key(eng) == want
    assert eng.stats.skewed == 1 and list(eng.stats.skewed_sources) == [other]
    assert eng.stats.skewed_sources[other] > 22 * H
    if where == "middle":
        old = _run(lines, EngineConfig(skew_tolerance_ms=1 << 60))
        assert _key(old) != want, "the old rule (max ts) is fooled by the skewed event"
