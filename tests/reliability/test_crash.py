"""Crash (issue 14, Must show "Crash"; item 11 of what was measured: keep it).

One analysis worker is killed with SIGKILL at 5 moments of the input drawn from the seed and
restarted right after each kill (a new process, same app id: it rebuilds its tables from the
changelogs and resumes from the committed offsets). The same equalities as the rebalance
test: the incidents equal `faultline diagnose` over exactly the produced events, on every
revision ever emitted (no extra incident, no transient revision diagnose never emits), and
every produced event is in the store exactly once under FINAL.

Until `faultline sink` exists the killed worker also runs the in-process sink, so the sink is
killed with it (its unacked batch is re-read: at-least-once into id-keyed tables).
"""

from __future__ import annotations

import asyncio

import pytest

from faultline.streams.faust_topics import ensure_topics
from harness import (Expectation, Feeder, Fleet, IncidentLog, Timeline, fleet_traffic, pipeline_settings, report,
                     settle_and_check, trial_moments)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

SEED = 201
KILLS = 5
#: ~48k events at 600 events/s last ~80 s: every restart (boot + the dead member's 15 s
#: session timeout before the group rebalances) happens while input flows
RATE = 600
KILL_SPAN = (0.08, 0.85)


def test_worker_sigkilled_five_times(settings, tmp_path):
    s = pipeline_settings(settings)
    tl = Timeline(SEED)
    traffic = fleet_traffic(SEED)
    exp = Expectation.of(traffic.lines, s)
    assert len(exp.live) >= 3, f"seed {SEED}: the traffic must have several interruptions: {exp.live}"
    points = trial_moments(SEED, KILLS, *KILL_SPAN, gap=0.08)
    tl.mark(f"{traffic.n} events, {len(exp.latest)} incidents expected; kills at "
            + ", ".join(f"{p:.0%}" for p in points) + " of the input")
    asyncio.run(ensure_topics(s))
    inc = IncidentLog(s).start()
    killed = []
    problems: list[str] = []
    with Fleet(s, tmp_path, tl) as fleet:
        try:
            fleet.start_sink()
            own_sink = fleet.sink_worker is not None     # the worker carries the sink (no `faultline sink` yet)
            w = fleet.sink_worker if own_sink else fleet.add_worker()
            fleet.wait_joined(w)
            feeder = Feeder(s, traffic.lines, RATE).start()
            tl.mark("input starts")
            for p in points:
                feeder.wait_fraction(p)
                fleet.kill(w)
                killed.append(w)
                w = fleet.add_worker(sink=own_sink)
                if own_sink:
                    fleet.sink = fleet.sink_worker = w
                fleet.wait_joined(w)
            feeder.join()
            tl.mark(f"input done ({feeder.seconds:.1f} s, {traffic.n / feeder.seconds:.0f} ev/s)")
            problems = settle_and_check(s, fleet, inc, exp, traffic, tl, killed=killed)
        finally:
            inc.stop()
        assert not problems, report(tl, problems, fleet)
