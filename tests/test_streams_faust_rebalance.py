"""Job state survives partition moves (issue 14 build point 3), on the real broker with
worker processes: a second worker joins while input flows, then the first one is killed
with SIGKILL while input still flows. Every revision of every incident on fl.incidents must
equal what `faultline diagnose` says on the same events: no extra incident, and no
transient revision from partial history (what session 2 measured: false stall incidents
right after the new owner took the partitions, withdrawn 100-300 ms later).

What makes it hold: the new owner's recovery gate (``faust_watermark.RecoveryGate``: job
evaluation waits until the partitions it took over are re-read to their end offsets) and
the watermark's coverage rule (event time stops while an input partition is consumed by no
live worker: the killed one's, until they are reassigned), and a partition's first commit
starting at its start offset (``faust_compat``: records never delivered are not committed over).

The story follows the hour the test runs; ``FAULTLINE_TRAFFIC_START_MS`` pins a failing run's
(``1796290860000``: session 12's, a job's ``cuda_error`` lost before the first-commit fix)."""

from __future__ import annotations

import asyncio
import os
import re
import threading
import time
from dataclasses import replace

import msgspec
import orjson
import pytest

from faultline.producers.publish import Publisher
from faultline.producers.simulate import simulate
from faultline.schemas.codec import decode, now_ms
from faultline.streams.engine import Engine, EngineConfig
from faultline.schemas.registry import INPUT_TOPICS
from faultline.streams.app import default_app_id
from faultline.streams.faust_harness import WorkerProcess, group_lag, latest_incidents, read_topic
from faultline.streams.faust_topics import ensure_topics

from test_streams_faust_integration import _diff, expected_incidents

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

#: the input is produced over about this many seconds (event time ~3 min per wall second:
#: a state one second stale is behind by more than any tolerance, the stall floor is 10 min)
PRODUCE_S = 40.0
CHUNKS = 80


@pytest.fixture
def fsettings(settings):
    # a killed worker's partitions move after 6 s (the broker's minimum), not the default 15 s
    return replace(settings, topic_partitions=3, worker_session_timeout_ms=6_000)


def _lines() -> list[bytes]:
    # two hours of a 8-node fleet ending 30 min ago (record timestamps inside retention);
    # the mixed scenario: several interruptions of different kinds among healthy jobs
    start = (now_ms() - 150 * 60_000) // 60_000 * 60_000
    if os.environ.get("FAULTLINE_TRAFFIC_START_MS"):   # a failing run's story (it follows the hour)
        start = int(os.environ["FAULTLINE_TRAFFIC_START_MS"])
    lines, _ = simulate("mixed", seed=3, nodes=8, hours=2.0, start_ms=start)
    return lines


class PacedProducer(threading.Thread):
    """Produces ``lines`` in ``CHUNKS`` chunks over ``PRODUCE_S`` seconds; ``progress`` is
    the fraction sent so far."""

    def __init__(self, settings, lines: list[bytes]) -> None:
        super().__init__(daemon=True)
        self.settings, self.lines = settings, lines
        self.progress = 0.0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e

    async def _run(self) -> None:
        n = len(self.lines)
        step = -(-n // CHUNKS)
        t0 = time.monotonic()
        async with Publisher(self.settings, compression=None) as pub:
            for i in range(0, n, step):
                for line in self.lines[i:i + step]:
                    await pub.send(decode(line))
                await pub.flush()
                self.progress = min(1.0, (i + step) / n)
                wait = t0 + PRODUCE_S * self.progress - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)

    def wait_for(self, fraction: float, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while self.progress < fraction:
            assert self.error is None, self.error
            assert time.monotonic() < deadline, f"producer stuck at {self.progress:.0%}"
            time.sleep(0.1)


def _joined(w: WorkerProcess) -> list[int]:
    return [int(x) for x in re.findall(r"Joined group '[^']*' \(generation (\d+)\)", w.log(10_000_000))]


def _wait(cond, what: str, timeout_s: float, logs) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.25)
    raise AssertionError(f"{what} within {timeout_s:.0f} s\n" + logs())


def test_join_mid_input_then_sigkill_every_revision_equals_diagnose(fsettings, tmp_path):
    lines = _lines()
    exp = expected_incidents(lines, fsettings)
    assert len(exp) >= 3, "the scenario must produce several incidents"
    asyncio.run(ensure_topics(fsettings))
    env = {"FAULTLINE_WORKER_STATS_S": "5"}
    a = WorkerProcess(fsettings, tmp_path / "a", loglevel="info", env=env).start()
    b = WorkerProcess(fsettings, tmp_path / "b", loglevel="info", env=env)
    logs = lambda: "\n--- a ---\n" + a.log(20_000) + "\n--- b ---\n" + b.log(20_000)  # noqa: E731
    try:
        _wait(lambda: _joined(a), "worker a did not join its group", 90, logs)
        prod = PacedProducer(fsettings, lines)
        prod.start()
        prod.wait_for(0.25)
        b.start()                                    # joins while input flows: rebalance 1
        _wait(lambda: _joined(b) and _joined(a) and _joined(a)[-1] == _joined(b)[-1],
              "the two workers did not end up in one group generation", 90, logs)
        prod.wait_for(0.6)
        assert a.alive(), logs()
        a.kill()                                     # SIGKILL while input flows: rebalance 2
        prod.join(timeout=120)
        assert prod.error is None, prod.error
        # then 3 s more: any late revision still on its way
        recs = asyncio.run(read_topic(fsettings, "fl.incidents", until=lambda r: latest_incidents(r) == exp,
                                      timeout_s=240, idle_s=3.0))
        assert b.alive(), logs()
        # and the group committed everything it consumed (no partition stuck after the moves)
        lag = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            lag = asyncio.run(group_lag(fsettings, default_app_id(fsettings), INPUT_TOPICS))
            if lag == 0:
                break
            time.sleep(2)
        assert lag == 0, f"the worker group left {lag} input records uncommitted" + logs()
    finally:
        a.kill()
        b.stop()
    got = latest_incidents(recs)
    assert got == exp, _diff(got, exp) + logs()
    bad = transient_revisions(lines, fsettings, [orjson.loads(r.value) for r in recs])
    assert not bad, "\n".join(bad) + logs()
    # both rebalances happened under input: b took over a's partitions after the kill
    assert len(set(_joined(b))) >= 2, logs()


#: what every revision (not only the latest) must share with one of diagnose's revisions of
#: the same incident: which attempt, why, where, stalled or ended. The other fields of an
#: intermediate revision (lost GPU-h, retry, checkpoint) follow how the input was batched.
REVISION_FIELDS = ("job", "attempt", "category", "component", "state")


def _view(inc: dict) -> dict:
    rc = inc.get("root_cause") or {}
    full = dict(inc, category=rc.get("category"), component=rc.get("component"))
    return {k: full.get(k) for k in REVISION_FIELDS}


def transient_revisions(lines: list[bytes], settings, worker: list[dict]) -> list[str]:
    """Worker revisions that are none of diagnose's (the Engine over ``lines``, every
    output kept): an incident diagnose never emits, or a revision whose attempt, cause,
    component or state no revision of diagnose has."""
    eng = Engine(EngineConfig.from_settings(settings))
    outs = list(eng.process(lines)) + eng.finish()
    allowed: dict[str, list[dict]] = {}
    for o in outs:
        if hasattr(o, "revision"):
            allowed.setdefault(o.id, []).append(_view(msgspec.to_builtins(o)))
    bad = []
    for inc in worker:
        ok = allowed.get(inc["id"])
        if ok is None:
            bad.append(f"extra incident {inc['id']} r{inc.get('revision')}: {_view(inc)}")
        elif _view(inc) not in ok:
            bad.append(f"transient revision {inc['id']} r{inc.get('revision')}: {_view(inc)}; diagnose: {ok}")
    return bad
