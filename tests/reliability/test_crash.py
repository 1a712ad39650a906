"""Crash (issue 14, Must show "Crash"; item 11 of what was measured: keep it).

One analysis worker is killed with SIGKILL 5 times while input flows, each time a moment drawn
from the seed (0.5-8 s after the worker joined the group: during table recovery, while it
catches up on the backlog the dead time left, or in steady state) and restarted right after
(a new process, same app id: it rebuilds its tables from the changelogs and resumes from the
committed offsets). Every restart waits out the dead member's session timeout (6 s here,
``harness.SESSION_TIMEOUT_MS``), so the input is paced to last through all five. The same equalities as the rebalance
test: the incidents equal `faultline diagnose` over exactly the produced events, on every
revision ever emitted (no extra incident, no transient revision diagnose never emits), and
every produced event is in the store exactly once under FINAL.

Before `faultline sink` existed the killed worker also ran the in-process sink (the harness
falls back to that), so the sink was killed with it.
"""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from faultline.streams.faust_topics import ensure_topics
from harness import (Expectation, Feeder, Fleet, IncidentLog, Timeline, fleet_traffic, pipeline_settings, report,
                     settle_and_check)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

SEED = 201
KILLS = 5
#: seconds after the (re)started worker joined the group until it is killed
KILL_AFTER_S = (0.5, 8.0)
#: ~48k events at 800 events/s last ~60 s: five cycles of (6 s session timeout + boot
#: + KILL_AFTER_S) happen while input flows
RATE = 800


def test_worker_sigkilled_five_times(settings, tmp_path):
    s = pipeline_settings(settings)
    tl = Timeline(SEED)
    traffic = fleet_traffic(SEED)
    exp = Expectation.of(traffic.lines, s)
    assert len(exp.live) >= 3, f"seed {SEED}: the traffic must have several interruptions: {exp.live}"
    rng = random.Random(SEED)
    delays = [round(rng.uniform(*KILL_AFTER_S), 2) for _ in range(KILLS)]
    delays[0] += 4.0    # the first worker works through some input before its first crash
    tl.mark(f"{traffic.n} events, {len(exp.latest)} incidents expected; kills "
            + ", ".join(f"{d:.1f}" for d in delays) + " s after each join")
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
            for d in delays:
                time.sleep(d)
                if feeder.sent >= traffic.n:
                    tl.mark("input already all sent (the worker is still catching up)")
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
