"""The Engine reused by composition (issue 14 point 8): it gets its collaborators (signal
store, world, listener) as explicit interfaces; the worker's sides compose it instead of
subclassing it, and a failure inside the core costs one event or one evaluation only."""

from __future__ import annotations

from faultline.schemas import decode, encode
from faultline.streams.engine import Engine, EngineConfig, Listener, LocalWorld, SignalStore, World
from faultline.streams.faust_engine import JobSide, NodeSide, Shared
from faultline.streams.join import SignalIndex

from test_streams_hardcases import gpu_fault_on_n2


def _decoded(sim):
    return [decode(encode(e)) for e in sim.events]


class Recorder:
    def __init__(self) -> None:
        self.touched: set[str] = set()
        self.evaluated: list[str] = []
        self.evicted: set[str] = set()

    def on_touched(self, job: str) -> None:
        self.touched.add(job)

    def on_evaluated(self, iid: str) -> None:
        self.evaluated.append(iid)

    def on_evicted(self, jobs: set[str]) -> None:
        self.evicted |= jobs


class CountingIndex(SignalIndex):
    def __init__(self) -> None:
        super().__init__()
        self.queries = 0

    def query(self, *a, **kw):
        self.queries += 1
        return super().query(*a, **kw)


def test_engine_uses_the_collaborators_it_is_given():
    idx, rec = CountingIndex(), Recorder()
    eng = Engine(EngineConfig(), index=idx, listener=rec)
    assert isinstance(idx, SignalStore) and isinstance(rec, Listener)
    eng.process(gpu_fault_on_n2().events)
    eng.finish()
    [inc] = eng.incidents()
    assert inc.root_cause.component == "gpu:n2/1"
    assert len(idx) > 0 and idx.queries > 0          # signals filed and read through it
    assert rec.touched == {"100"} and set(rec.evaluated) == {inc.id}   # the stall, then the crash
    # the same answer as the default composition
    plain = Engine(EngineConfig())
    plain.process(gpu_fault_on_n2().events)
    plain.finish()
    assert plain.incidents() == eng.incidents()


def test_worker_sides_compose_the_engine():
    shared = Shared({}, lambda k, v: None)
    for side in (NodeSide(shared), JobSide(shared)):
        assert not isinstance(side, Engine)
        assert isinstance(side.core, Engine)
    assert isinstance(LocalWorld(Engine()), World)
    assert isinstance(js := JobSide(shared), Listener) and isinstance(js.core.world, World)


def test_fresh_job_side_releases_nothing_at_minus_infinity():
    js = JobSide(Shared({}, lambda k, v: None))
    evs = [e for e in _decoded(gpu_fault_on_n2()) if e.job]
    js.ingest(evs, -(1 << 62))
    assert js.counts()["buffered"] == len(evs) - js.stats.logs_unmatched - js.stats.direct
    assert js.counts()["released"] == -(1 << 62) and js.counts()["pending"] == 0
    assert not js.has_incidents() and js.take() == ([], [])
    js.ingest([], evs[-1].ts + 3_600_000)
    assert js.counts()["buffered"] == 0


class FlakyWorld(LocalWorld):
    """Raises on the first correlation read, and on allocation look-ups of node n3."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self.views = 0

    def view(self):
        self.views += 1
        if self.views == 1 and self.engine.evaluations:
            raise RuntimeError("view unavailable")
        return super().view()

    def job_on(self, node, ts):
        if node == "n3":
            raise RuntimeError("allocation of n3 unreadable")
        return super().job_on(node, ts)


def test_a_failing_event_or_evaluation_is_skipped_and_reported():
    sim = gpu_fault_on_n2()
    sim.ev("gpu.xid", 6 * 60_000, {"gpu": 0, "pci": None, "xid": 48, "message": "NVRM: Xid 48, DBE"}, node="n3")
    eng = Engine(EngineConfig())
    eng.world = FlakyWorld(eng)
    eng.process(sim.events)
    eng.finish()
    fails = eng.take_failures()
    reasons = [r for _, r in fails]
    assert any(ev is not None and ev.node == "n3" and "allocation of n3" in r for ev, r in fails), reasons
    assert any(ev is None and "evaluating job 100 attempt 0" in r and "view unavailable" in r for ev, r in fails)
    assert eng.stats.failed == len(fails) and eng.take_failures() == []
    # the rest went on: the XID on the job's GPU alerted, and the job's next evaluation
    # (its crash, after the failed stall evaluation) gives the right incident
    assert any(a.subject == "gpu:n2/1" and a.detector == "xid" for a in eng.alerts())
    [inc] = eng.incidents()
    assert inc.root_cause.component == "gpu:n2/1" and inc.state == "failed"


def test_job_fence_window_takes_a_skipped_record_back_and_rejects_replays():
    """A job record skipped (Faust dropped it unacked) and fetched again after later records
    of the job were applied is accepted once (a hole filled), never twice; a replay of an
    applied offset, or one older than the window, is rejected. Without a window (node keys)
    everything at or below the last applied offset is a replay, as before."""
    from faultline.streams.faust_engine import Fence

    f = Fence()
    for off in (10, 11, 12, 15, 16):          # 13 and 14 skipped
        assert f.accept("t.runtime", 0, off, window=4)
    assert f.accept("t.runtime", 0, 13, window=4)         # the re-fetched hole
    assert not f.accept("t.runtime", 0, 13, window=4)     # ... but only once
    assert not f.accept("t.runtime", 0, 16, window=4)     # an applied one: a replay
    assert not f.accept("t.runtime", 0, 11, window=4)     # older than the window (12..16 kept)
    assert f.recent["t.runtime/0"] == [12, 13, 15, 16]
    g = Fence()
    assert g.accept("t.gpu", 0, 10) and g.accept("t.gpu", 0, 12) and not g.accept("t.gpu", 0, 11)


def test_job_fence_takes_records_before_the_key_s_first_one_here():
    """A partition's first records can reach a new owner only after later ones of the same
    job (never delivered at first, fetched again by CommitWatch; session 12: a job's
    cuda_error at offset 14 arrived after its offsets 35.. were applied and was rejected as a
    replay, so the incident's symptom and root cause differed from diagnose's). Nothing below a
    key's first record here was applied (its state would exist): such an offset is a hole,
    accepted once. A fence restored from before the floor existed keeps the old rule."""
    import msgspec

    from faultline.streams.faust_engine import Fence

    f = Fence()
    for off in (35, 36, 40):
        assert f.accept("t.runtime", 2, off, window=8)
    assert f.accept("t.runtime", 2, 14, window=8)         # before the first one: a hole
    assert not f.accept("t.runtime", 2, 14, window=8)     # once
    assert not f.accept("t.runtime", 2, 36, window=8)     # applied: a replay
    for off in range(41, 60):                             # the window moves on: 14 is old now
        f.accept("t.runtime", 2, off, window=8)
    assert not f.accept("t.runtime", 2, 13, window=8) and not f.accept("t.runtime", 2, 37, window=8)
    old = msgspec.msgpack.decode(msgspec.msgpack.encode({"offsets": {"t.runtime/2": 40},
                                                         "recent": {"t.runtime/2": [35, 36, 40]}}), type=Fence)
    assert not old.accept("t.runtime", 2, 14, window=8) and old.accept("t.runtime", 2, 38, window=8)


def test_job_dumps_carry_the_fence_window():
    from faultline.streams.faust_engine import JOB_FENCE_WINDOW, JobSide, NodeSide, Shared

    shared = Shared({}, lambda k, v: None)
    assert JobSide(shared).fence_window == JOB_FENCE_WINDOW > 0 and NodeSide(shared).fence_window == 0


def test_a_job_s_buffered_records_follow_every_change_of_the_reorder_buffer():
    """``export_job`` reads a job's buffered records from an index of the buffer by job
    (scanning the buffer per dumped job was 55% of the worker's time in a drain, issue 18):
    after each kind of change (ingest, release, spill, drop, import) it says what a scan says."""
    import msgspec

    base = [e for e in _decoded(gpu_fault_on_n2()) if e.job]
    evs = sorted([msgspec.structs.replace(e, job=j, id=f"{e.id}.{j}") for e in base for j in ("a", "b", "c")],
                 key=lambda e: (e.ts, e.id))
    eng = Engine(EngineConfig())

    def agrees() -> None:
        for j in ("a", "b", "c", "nobody"):
            scan = sorted((ev.id for _, _, ev in eng._buf if ev.job == j))
            assert sorted(ev.id for ev in eng.export_job(j).buffered) == scan, j

    third = len(evs) // 3
    eng.ingest(evs[:third], -(1 << 62))
    assert eng.counts()["buffered"] > 0
    agrees()
    eng.ingest(evs[third:2 * third], -(1 << 62))
    agrees()
    eng.ingest([], evs[third].ts)               # releases the oldest
    agrees()
    assert eng.spill("a", half=True) > 0
    agrees()
    parts = eng.export_job("b")
    eng.drop_job("b")
    assert eng.export_job("b").buffered == []
    agrees()
    eng.import_job("b", parts)
    assert eng.export_job("b").buffered and len(eng.export_job("b").buffered) == len(parts.buffered)
    agrees()
    eng.process(evs[2 * third:])
    agrees()
    eng.finish()
    assert eng.counts()["buffered"] == 0
    agrees()
