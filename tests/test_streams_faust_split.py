"""The worker's split of the Engine by Kafka key (``streams.faust_engine``), without Kafka:
node side and job side fed as the agents feed them, cross-key state only through the
shared views table, per-key state only through table dumps, and a "restart" that rebuilds
both sides from those dumps halfway. The incidents must equal the Engine's on the same
events (what `faultline diagnose` reports)."""

from __future__ import annotations

import msgspec
import pytest

from faultline.producers.simulate import simulate
from faultline.schemas.codec import decode
from faultline.schemas.registry import key_for
from faultline.streams.engine import Engine, EngineConfig
from faultline.streams.faust_engine import INV_KINDS, NODE_KINDS, JobSide, NodeSide, Shared
from faultline.streams.join import index_keys

START = 1_790_000_000_000


class Worker:
    """What the agents do with one batch, minus Kafka: tables are dicts."""

    def __init__(self, shared: Shared, ntab: dict, jtab: dict, cfg: EngineConfig) -> None:
        self.shared, self.ntab, self.jtab = shared, ntab, jtab
        self.ns, self.js = NodeSide(shared, cfg), JobSide(shared, cfg)
        for job, blob in jtab.items():           # the partition load after a (re)start
            self.js.load(job, blob)
        self.out: list = []

    def _file(self, sigs) -> None:               # the signals agent
        for s in sigs:
            for k in index_keys(s):
                self.shared.add_signals(k, [s])

    def batch(self, events, wm: int) -> None:
        job_events = []
        for ev in events:
            if ev.kind in NODE_KINDS or ev.kind in INV_KINDS:
                key = key_for(ev).decode()
                if key not in self.ns.nodes:
                    self.ns.load(key, self.ntab.get(key))
                self.ns.feed(key, ev)
            else:
                if ev.job not in self.js.jobs:
                    self.js.load(ev.job, self.jtab.get(ev.job))
                job_events.append(ev)
        self.ns.flush_shared()
        for k in self.ns.dirty:
            self.ntab[k] = self.ns.dump(k)
        self.ns.dirty.clear()
        sigs, outs = self.ns.take()
        self._file(sigs)
        self.out += outs
        self.js.ingest(job_events, wm)
        self.flush_jobs()

    def flush_jobs(self) -> None:
        self.js.flush_shared()
        for j in self.js.dirty:
            if j in self.js.jobs or j in self.js.fences:
                self.jtab[j] = self.js.dump(j)
        self.js.dirty.clear()
        sigs, outs = self.js.take()
        self._file(sigs)
        self.out += outs

    def close(self) -> None:
        self.js.close_windows()
        self.flush_jobs()


def _latest(incs) -> dict:
    best: dict = {}
    for i in incs:
        if i.id not in best or best[i.id].revision < i.revision:
            best[i.id] = i
    out = {}
    for k, i in best.items():
        d = msgspec.to_builtins(i)
        d.pop("revision")
        out[k] = d
    return out


@pytest.mark.parametrize("scenario", ["gpu-xid79", "change-regression", "port-down", "storage-slow"])
def test_split_engine_equals_engine(scenario):
    lines, _ = simulate(scenario, seed=1, nodes=4, start_ms=START)
    cfg = EngineConfig()
    eng = Engine(cfg)
    eng.process(lines)
    eng.finish()
    exp = _latest(eng.incidents())
    assert exp

    data: dict = {}
    shared = Shared(data, lambda k, v: data.pop(k, None) if v is None else data.__setitem__(k, v))
    ntab: dict = {}
    jtab: dict = {}
    events = [decode(line) for line in lines]
    cut = len(events) // 2
    w = Worker(shared, ntab, jtab, cfg)
    outs = []
    wm = 0
    for part in (events[:cut], events[cut:]):
        for i in range(0, len(part), 500):
            batch = part[i:i + 500]
            wm = max([wm] + [e.ts for e in batch])
            w.batch(batch, wm)
        outs += w.out
        if part is not events[cut:]:
            shared.forget_overlay()                  # crash: only the tables survive
            w = Worker(shared, ntab, jtab, cfg)
    w.close()
    outs += w.out
    got = _latest([o for o in outs if hasattr(o, "revision")])
    assert got == exp
