"""Bounded memory over time (issue 18): closed jobs expire from the worker's state.

Two simulated days of a 16-node fleet (``mixed``: faults, incidents, diurnal jobs; telemetry
intervals x120 so the run takes seconds: expiry follows event time, not event count) go
through the worker's split of the engine as its agents drive it (``NodeSide`` per node key,
``JobSide`` per job key, cross-key state in ``Shared`` over a dict, per-key rows in dict
tables, and the rows of the jobs retention evicted deleted, as ``agents._write`` does).
No broker: the week-long and 2,000-node runs through the real worker process are
``bench/memory.py`` (docs/reliability.md "Bounded memory").

What holds (the worker's side configuration, ``side_config``): every job still in state is
open or ended within the retention (6 h of event time, checked every 10 min) of the
watermark; the job table rows and ``alloc:`` keys are exactly the live jobs; node rows stay
one per node; the node side's rate-limit keys are within the retention; ``fail:`` keys leave
``Shared`` ``change_window_ms`` after the retention (12 h here instead of 7 days, so two days
show it); ``JobSide.evaluated`` and the core's incidents are only those of live jobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec
import pytest

from faultline.producers.simulate import Simulation
from faultline.producers.simulate.telemetry import Intervals
from faultline.schemas.codec import decode
from faultline.schemas.registry import key_for
from faultline.streams.correlate import incident_id
from faultline.streams.correlate import CorrelateConfig
from faultline.streams.engine import EngineConfig
from faultline.streams.faust_engine import (INV_KINDS, NODE_EVICT_EVERY_MS, NODE_KINDS, JobSide, NodeSide, Shared,
                                            side_config)
from faultline.streams.join import index_keys

NODES = 16
HOURS = 48.0
COMPRESS = 120                 # telemetry intervals x120 (gpu every 20 min instead of 10 s)
BATCH = 2_000
SAMPLE_MS = 3 * 3_600_000      # state sizes sampled every 3 simulated hours
#: the engine evicts at most every 10 min of event time (engine._release, NodeSide.retain)
EVICT_EVERY_MS = max(600_000, NODE_EVICT_EVERY_MS)
#: failures per version key are kept this long after the retention (7 days by default)
CHANGE_WINDOW_MS = 12 * 3_600_000


@dataclass
class Run:
    cfg: EngineConfig
    ns: NodeSide
    js: JobSide
    shared: Shared
    data: dict
    ntab: dict = field(default_factory=dict)
    jtab: dict = field(default_factory=dict)
    jobs_seen: set = field(default_factory=set)
    incidents_seen: set = field(default_factory=set)
    fail_keys_seen: set = field(default_factory=set)
    samples: list = field(default_factory=list)
    wm: int = 0


def _batch(r: Run, events: list) -> None:
    """One batch as the node, job and signals agents handle it."""
    ns, js = r.ns, r.js
    job_events = []
    for ev in events:
        if ev.kind in NODE_KINDS or ev.kind in INV_KINDS:
            key = key_for(ev).decode()
            if key not in ns.nodes:
                ns.load(key, r.ntab.get(key))
            ns.feed(key, ev)
        else:
            if ev.job not in js.jobs:
                js.load(ev.job, r.jtab.get(ev.job))
            job_events.append(ev)
            r.jobs_seen.add(ev.job)
    r.wm = max([r.wm] + [e.ts for e in events])
    ns.retain(r.wm)                    # NodeAgent.flush: retention at the worker's watermark
    ns.flush_shared()
    for k in ns.dirty:
        r.ntab[k] = ns.dump(k)
    ns.dirty.clear()
    js.ingest(job_events, r.wm)
    js.flush_shared()
    for j in js.dirty:
        if j in js.jobs or j in js.fences:
            r.jtab[j] = js.dump(j)
    js.dirty.clear()
    for j in js.evicted:               # agents._write: retention dropped it, drop its row
        r.jtab.pop(j, None)
    js.evicted.clear()
    for side in (ns, js):
        sigs, outs = side.take()
        for s in sigs:
            for k in index_keys(s):
                r.shared.add_signals(k, [s])
        r.incidents_seen.update(o.id for o in outs if hasattr(o, "revision"))
    r.fail_keys_seen.update(k for k in r.data if k.startswith(b"fail:"))


def _sizes(r: Run) -> dict[str, int]:
    keys = list(r.data)
    return {"jobs": len(r.js.jobs), "job_rows": len(r.jtab), "node_rows": len(r.ntab),
            "alloc": sum(k.startswith(b"alloc:") for k in keys),
            "bytes": sum(map(len, r.data.values())) + sum(map(len, r.jtab.values())) + sum(map(len, r.ntab.values()))}


@pytest.fixture(scope="module")
def run() -> Run:
    cfg = side_config(EngineConfig(correlate=CorrelateConfig(change_window_ms=CHANGE_WINDOW_MS)))
    data: dict = {}
    shared = Shared(data, lambda k, v: data.pop(k, None) if v is None else data.__setitem__(k, v),
                    retention_ms=cfg.retention_ms)
    r = Run(cfg, NodeSide(shared, cfg), JobSide(shared, cfg), shared, data)
    iv = Intervals(*(x * COMPRESS for x in (10, 60, 30, 30, 30, 300)))
    sim = Simulation("mixed", seed=3, nodes=NODES, hours=HOURS, intervals=iv)
    buf: list = []
    next_sample = None
    for line in sim.lines():
        buf.append(decode(line))
        if len(buf) >= BATCH:
            _batch(r, buf)
            buf = []
            next_sample = next_sample or r.wm + SAMPLE_MS
            if r.wm >= next_sample:
                r.samples.append((r.wm, _sizes(r)))
                next_sample += SAMPLE_MS
    _batch(r, buf)
    r.samples.append((r.wm, _sizes(r)))
    return r


def test_closed_jobs_expire_within_the_retention(run):
    cut = run.wm - EVICT_EVERY_MS - run.cfg.retention_ms
    for job, st in run.js.jobs.items():
        for a in st.attempts.values():
            assert a.state in ("pending", "running") or (a.end_ts or a.state_ts) >= cut, (job, a.state, a.end_ts)
    live = [s["jobs"] for _, s in run.samples]
    # most of the jobs of two days are gone; the live ones follow the fleet, not the time
    assert len(run.jobs_seen) >= 2 * max(live), (len(run.jobs_seen), live)
    half = len(live) // 2
    assert max(live[half:]) <= 2 * max(live[:half]), live


def test_rows_and_shared_keys_follow_the_live_jobs(run):
    assert set(run.jtab) == set(run.js.jobs)
    assert {k[6:].decode() for k in run.data if k.startswith(b"alloc:")} == \
        {j for j, st in run.js.jobs.items() if st.attempts}
    assert all(s["node_rows"] <= NODES + 8 for _, s in run.samples)   # + switches (fl.net keys)
    b = [s["bytes"] for _, s in run.samples]
    assert max(b[len(b) // 2:]) <= 2 * max(b[: len(b) // 2]), b


def test_node_side_rate_limit_keys_expire(run):
    cut = run.wm - EVICT_EVERY_MS - run.cfg.retention_ms
    core = run.ns.core
    assert core.stats.alerts > 0 and all(end >= cut for end in core.alert_gate.seen.values())
    assert all(v[0] >= cut for v in core._sig_last.values())
    assert not core._alerts          # streaming: no alert history on a worker side


def _live_incidents(run) -> set[str]:
    return {incident_id(j, a) for j, st in run.js.jobs.items() for a in st.attempts}


def test_failure_keys_expire_after_the_change_window(run):
    cut = run.wm - EVICT_EVERY_MS - run.cfg.retention_ms - CHANGE_WINDOW_MS
    now = {k: msgspec.msgpack.decode(v)[0] for k, v in run.data.items() if k.startswith(b"fail:")}
    assert all(ts >= cut for ts in now.values()), sorted(now.values())[:3]
    assert len(run.fail_keys_seen) > len(now), (len(run.fail_keys_seen), len(now))   # some expired


def test_incidents_expire_with_their_jobs(run):
    assert len(run.incidents_seen) >= 3
    assert set(run.js.evaluated) <= _live_incidents(run)
    assert set(run.js.core._incidents) <= _live_incidents(run)
