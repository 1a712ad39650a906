"""Storm safety of the core: a log burst or an XID storm cannot grow a state record, the
signals it emits or its alerts without bound (issue 14 items 3 and 4).

Measured on d8b4309: 4,000 ``runtime.log`` lines of one job within 2 s grew its ``JobDump``
by ~307 bytes a line (the reorder buffer's encoded events) to 1.1 MB, past the producer's
1 MB request size (``MessageSizeTooLargeError``, a crash loop). The bounds tested here:
``MAX_DUMP_BYTES`` per state record whatever the storm, the incident still right (its first
and its decisive line kept), the storm's alerts one per subject and kind per interval.
"""

from __future__ import annotations

import msgspec

from faultline.schemas import decode, encode
from faultline.streams.engine import Engine, EngineConfig
from faultline.streams.faust_engine import MAX_DUMP_BYTES, JobSide, NodeSide, Shared

from streams_fixtures import WATCHDOG, Sim

MIN = 60_000
NODES = [f"n{i:02d}" for i in range(64)]
GPUS = 8
RANKS = len(NODES) * GPUS              # 512 ranks
DECISIVE = "RuntimeError: CUDA error: an illegal memory access was encountered"


def _events(sim: Sim) -> list:
    return [decode(encode(e)) for e in sim.events]


def _job(sim: Sim, job: str = "900") -> None:
    for i, n in enumerate(NODES):
        sim.topology(n, f"leaf-{i // 32:02d}", f"Eth1/{i % 32 + 1}", f"leaf-{i // 32:02d}")
    sim.job(job, 0, NODES, GPUS, 1 * MIN, None)
    sim.progress(job, NODES[:1], 1, 1 * MIN + 10_000, 5 * MIN)


def _burst(sim: Sim, job: str, t0: int, n: int, span_ms: int) -> None:
    """``n`` lines within ``span_ms``: every rank's NCCL watchdog, over and over, plain
    output lines no signature knows, and one decisive CUDA error on rank 77 in the middle."""
    for i in range(n):
        ts = t0 + i * span_ms // n
        r = i % RANKS
        if i == n // 2:
            sim.log(job, ts, DECISIVE, rank=77, node=NODES[77 // GPUS])
        elif i % 3 == 2:
            sim.log(job, ts, f"step {i}: loss=2.{i % 97:02d} lr=3e-4 tokens/s=81234", rank=r)
        else:
            sim.log(job, ts, WATCHDOG.format(r=r), rank=r, node=NODES[r // GPUS])


def _shared() -> Shared:
    data: dict[bytes, bytes] = {}
    return Shared(data, lambda k, v: data.__setitem__(k, v) if v is not None else data.pop(k, None))


def test_log_burst_of_one_job_keeps_its_state_record_small():
    """4,000 lines within 2 s while event time stands still (the worker's watermark lags):
    the job's changelog record stays far below 1 MB (it was 1.1 MB)."""
    sim = Sim()
    _job(sim)
    _burst(sim, "900", 5 * MIN, 4_000, 2_000)
    js = JobSide(_shared(), EngineConfig())
    evs = _events(sim)
    for i in range(0, len(evs), 2_000):
        js.ingest(evs[i:i + 2_000], 5 * MIN + sim.t0)     # the watermark lags the burst
    size = len(js.dump("900"))
    print("dump bytes after 4,000 lines", size, "buffered", len(js._buf), js.stats)
    assert size <= MAX_DUMP_BYTES // 2, size
    assert js.stats.logs_unmatched >= 1_300
    assert js.stats.direct > 0


def test_dump_sheds_to_its_bound_when_the_caps_are_not_enough(monkeypatch):
    """The byte bound is enforced, not only expected: with a bound below what the caps allow
    (40,000 bytes here) ``dump`` applies the job's buffered records and sheds later signals,
    counts it, and keeps the job's first signal (its symptom)."""
    import faultline.streams.faust_engine as fe
    monkeypatch.setattr(fe, "MAX_DUMP_BYTES", 40_000)
    sim = Sim()
    _job(sim)
    _burst(sim, "900", 5 * MIN, 4_000, 2_000)
    js = JobSide(_shared(), EngineConfig())
    evs = _events(sim)
    for i in range(0, len(evs), 2_000):
        js.ingest(evs[i:i + 2_000], 5 * MIN + sim.t0)
    first = min(js.jobs["900"].signals, key=lambda x: (x.ts, x.id))
    size = len(js.dump("900"))
    assert size <= 40_000 and js.oversize == 1, size
    st = js.jobs["900"]
    assert js.counts()["buffered"] == 0 and st.trimmed_n > 0
    assert first in st.signals


def _lines(t0: int, job: str, n: int, span_ms: int, every: int = 10) -> list[bytes]:
    """``n`` raw runtime.log events of ``job`` within ``span_ms`` from one node: plain output,
    and each ``every``-th line a rank's NCCL watchdog timeout (ranks 0, 1, ... in turn)."""
    out = []
    for i in range(n):
        if i % every == 0:
            r = (i // every) % RANKS
            msg, rank, node = WATCHDOG.format(r=r), r, NODES[r // GPUS]
        else:
            msg, rank, node = f"step {i}: loss=2.{i % 97:02d} lr=3e-4 tokens/s=81234", None, NODES[0]
        out.append(b'{"v":1,"id":"st-%d","ts":%d,"kind":"runtime.log","source":"test","node":"%s","job":"%s",'
                   b'"data":{"rank":%s,"stream":"stderr","message":"%s"}}'
                   % (i, t0 + i * span_ms // n, node.encode(), job.encode(),
                      b"null" if rank is None else str(rank).encode(), msg.encode()))
    return out


def test_half_a_million_lines_bounded_and_incident_right():
    """500,000 lines of one job in 60 s with the decisive line in the middle, then the job
    fails: the dump stays under the bound at every batch, the incident names the decisive
    line's cause and starts from the first watchdog line (rank 0), and no alert per line."""
    sim = Sim()
    _job(sim)
    sim.log("900", 5 * MIN + 30_000, DECISIVE, rank=77, node=NODES[77 // GPUS])
    sim.ev("sched.job", 7 * MIN, {"attempt": 0, "nodes": NODES, "gpus": RANKS, "state": "failed", "exit_code": 1,
                                  "end_ts": sim.t0 + 7 * MIN}, job="900")
    raw = [msgspec.json.encode(e) for e in sim.events[:-2]]
    raw += _lines(sim.t0 + 5 * MIN, "900", 250_000, 30_000)
    raw += [msgspec.json.encode(sim.events[-2])]
    raw += [b.replace(b'"id":"st-', b'"id":"sx-') for b in _lines(sim.t0 + 5 * MIN + 30_001, "901", 1, 1)]
    raw += [b.replace(b'"id":"st-', b'"id":"su-') for b in _lines(sim.t0 + 5 * MIN + 30_002, "900", 250_000, 29_000)]
    raw += [msgspec.json.encode(sim.events[-1])]
    js = JobSide(_shared(), EngineConfig())
    biggest = 0
    for i in range(0, len(raw), 5_000):
        evs = [decode(r) for r in raw[i:i + 5_000]]
        js.ingest(evs, evs[-1].ts - 20_000)
        biggest = max(biggest, len(js.dump("900")))
    js.ingest([], sim.t0 + 7 * MIN)                        # every input caught up and idle
    js.close_windows()
    biggest = max(biggest, len(js.dump("900")))
    print("biggest dump", biggest, js.stats)
    assert biggest <= MAX_DUMP_BYTES, biggest
    st = js.jobs["900"]
    assert len(st.signals) <= 600
    assert js.stats.logs_unmatched == 450_000 and js.stats.duplicates == 0
    assert st.folded_n >= 49_000                   # 50,000 watchdog lines: a few hundred kept
    _, outs = js.take()
    incs = [o for o in outs if hasattr(o, "revision")]
    alerts = [o for o in outs if not hasattr(o, "revision")]
    print("alerts", len(alerts), sorted({a.detector for a in alerts}))
    assert incs and incs[-1].symptom.startswith("nccl_timeout on rank 0")
    assert incs[-1].root_cause.category == "application" and "cuda_illegal_address" in incs[-1].root_cause.summary
    assert len(alerts) <= 3


def _xids(node: str, t0: int, n: int, span_ms: int) -> list[bytes]:
    """``n`` gpu.xid events of one node within ``span_ms``: XID 79 on GPU 3 over and over,
    every 7th an XID 13 on GPU 1 / 5 (alternating), every 11th an XID 31 on GPU 6."""
    out = []
    for i in range(n):
        if i % 11 == 0:
            g, x, txt = 6, 31, "GPU memory page fault"
        elif i % 7 == 0:
            g, x, txt = 1 + 4 * (i % 2), 13, "Graphics SM Warp Exception"
        else:
            g, x, txt = 3, 79, "GPU has fallen off the bus."
        out.append(b'{"v":1,"id":"x-%d","ts":%d,"kind":"gpu.xid","source":"test","node":"%s",'
                   b'"data":{"gpu":%d,"pci":null,"xid":%d,"message":"NVRM: Xid (PCI:0000:3b:00): %d, %s"}}'
                   % (i, t0 + i * span_ms // n, node.encode(), g, x, x, txt.encode()))
    return out


def test_xid_storm_coalesced_and_node_record_small():
    """500,000 XIDs of one node in 60 s through the node side: the signals it hands on are
    coalesced (``repeats_kept`` per subject, kind and text per ``repeat_ms``), one alert per
    subject and kind per interval, and the node's state record stays small."""
    sim = Sim()
    ns = NodeSide(_shared(), EngineConfig())
    raw = _xids("n07", sim.t0, 500_000, 60_000)
    signals = 0
    biggest = 0
    alerts = []
    for i in range(0, len(raw), 5_000):
        for r in raw[i:i + 5_000]:
            ns.feed("n07", decode(r))
        ns.flush_shared()
        biggest = max(biggest, len(ns.dump("n07")))
        sigs, outs = ns.take()
        signals += len(sigs)
        alerts += outs
    kinds = {(a.subject, a.detector) for a in alerts}
    print("signals", signals, "alerts", len(alerts), sorted(kinds), "node dump", biggest, ns.stats)
    # 4 subjects+texts, each filed at most 3 times per 60 s window (the storm spans one window)
    assert signals <= 4 * 3
    assert ns.stats.coalesced >= 500_000 - signals
    assert len(alerts) == len(kinds) <= 4          # one per subject and kind per alert interval
    assert biggest <= 16 * 1024
