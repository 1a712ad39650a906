"""The worker's agent classes (``streams.agents``) driven directly, without a broker: a
record that fails inside a batch is dead-lettered with its reason and the rest goes on."""

from __future__ import annotations

import orjson

from faultline.config import load
from faultline.producers.simulate import simulate
from faultline.schemas.codec import decode, now_ms
from faultline.streams import agents
from faultline.streams.app import create_app


class Sent:
    def __init__(self) -> None:
        self.values: list[bytes] = []

    async def send(self, key=None, value=None, **kw) -> None:
        self.values.append(value)


class Side:
    def __init__(self, failed) -> None:
        self.failed = failed

    def take_failures(self):
        out, self.failed = self.failed, []
        return out


class Message:
    def __init__(self, value: bytes, topic: str, partition: int, offset: int) -> None:
        self.value, self.topic, self.partition, self.offset, self.key = value, topic, partition, offset, b""


async def test_core_failures_become_dead_letters_with_reason_and_origin(tmp_path):
    settings = load()
    app = create_app(settings, install=False, datadir=tmp_path / "faust")
    stats = agents.Stats()
    box = agents.Outbox(app, settings, stats)
    box.dead_out = Sent()
    start = (now_ms() - 30 * 60_000) // 60_000 * 60_000
    lines = simulate("gpu-xid79", seed=1, nodes=2, hours=0.05, start_ms=start)[0][:3]
    evs = [decode(ln) for ln in lines]
    msg = Message(lines[0], settings.topic("fl.gpu"), 2, 41)
    side = Side([(evs[0], "applying gpu.sample failed: ValueError: boom"),
                 (evs[1], "applying x failed: KeyError: 'y'"),
                 (None, "evaluating job 7 attempt 0 failed: ZeroDivisionError: division by zero")])
    await box.failures(side, {evs[0].id: msg})
    dead = [orjson.loads(v) for v in box.dead_out.values]
    assert len(dead) == 3 and stats.failed == 3 and stats.dead == 3
    assert dead[0]["reason"].endswith("ValueError: boom")
    assert (dead[0]["topic"], dead[0]["partition"], dead[0]["offset"]) == (msg.topic, 2, 41)
    assert dead[1]["topic"] == settings.topic(agents.LAYER_TOPICS[evs[1].layer])   # re-encoded event
    assert "ZeroDivisionError" in dead[2]["reason"]
    await box.failures(side)                       # taken once: nothing twice
    assert len(box.dead_out.values) == 3


def test_what_the_pieces_share_is_passed_not_hung_on_the_app(tmp_path):
    """Issue 14 item 8: the worker's agents, the sink and the web views get one ``Services``
    explicitly; the Faust app carries no faultline attribute for a module to look up, and
    the views answer from the services they were given (the page reads its store)."""
    from faultline.streams.app import FaultlineApp
    from faultline.streams.services import Services

    settings = load(store_path=str(tmp_path / "store"))
    services = Services(settings)
    app = create_app(settings, web_enabled=True, datadir=tmp_path / "faust", services=services)
    ours = {k for k in vars(app) if k.startswith("faultline")} - set(vars(FaultlineApp))
    assert not ours, f"service-locator attributes on the Faust app: {sorted(ours)}"
    kinds = [type(s).__name__ for s in services.metrics.sources]
    assert kinds == ["WorkerSource"], kinds   # agents.install added the worker's /metrics source
    assert services.store is None             # no sink: opened by the first page or API call
    paths = {str(r.resource.canonical) for r in app.web.web_app.router.routes()}
    assert {"/incidents", "/faultline/api/sql", "/metrics"} <= paths, paths


class _Outbox:
    """What ``NodeAgent.flush`` calls on the outbox; keeps the signals."""

    def __init__(self) -> None:
        self.sigs: list = []

    async def failures(self, side, messages=None) -> None:
        side.take_failures()

    async def signals(self, sigs) -> None:
        self.sigs += sigs

    async def outputs(self, outs) -> None:
        pass

    async def settle(self) -> None:
        pass

    async def dead(self, dead) -> None:
        assert not dead, dead


class _Tables:
    def __init__(self) -> None:
        self.nodes = type("T", (), {"data": {}})()
        self.errors = None

    def put_node(self, key, partition, value) -> None:
        self.nodes.data[key.encode()] = value


class _Wms:
    def observe_events(self, events, source_of) -> None:
        list(events)

    def read(self, topic, partition, offset) -> None:
        pass


def _mount(eid: str, ts: int) -> bytes:
    return orjson.dumps({"v": 1, "id": eid, "ts": ts, "kind": "storage.mount", "source": "node_exporter@gpu-001",
                         "node": "gpu-001", "data": {"path": "/ckpt", "state": "full",
                                                     "error": "No space left on device"}})


async def test_node_events_of_a_batch_apply_in_event_time_order_like_diagnose():
    """Two `storage.mount` "full" events of one node 0.5 s apart, the later-stamped one
    produced first (the rebalance trial's seed 105 at 1796319060000): diagnose's reorder
    buffer fires `mount_full` on the earlier-stamped one; so does the worker's node side,
    which applies a batch's events in (ts, id) order after its fences (in offset order)."""
    from faultline.streams.engine import Engine, EngineConfig
    from faultline.streams.faust_engine import Shared

    cfg = EngineConfig()
    first_produced, stamped_earlier = _mount("m-2", 1_796_321_621_513), _mount("m-1", 1_796_321_621_017)
    eng = Engine(cfg)
    eng.process([first_produced, stamped_earlier])
    eng.finish()
    want = [s.evidence for s in eng.index.query(["path:/ckpt"], 0, 1 << 62) if s.kind == "mount_full"]
    assert want == [["m-1"]], want

    shared = Shared({}, lambda k, v: None)
    views = type("V", (), {"data": {}})()
    box = _Outbox()
    node = agents.NodeAgent(agents.Sides(shared, views, cfg), _Tables(), box, _Wms(), agents.Stats(),
                            {}, lambda js, sigs: None)
    topic = "fl.storage"
    batch = [Message(v, topic, 0, off) for off, v in enumerate((first_produced, stamped_earlier))]
    for m in batch:
        m.key = b"gpu-001"
    await node.handle_batch(batch)
    got = [s.evidence for s in box.sigs if s.kind == "mount_full"]
    assert got == want, got
    await node.handle_batch(batch)        # the same offsets again: fenced, nothing new
    assert [s.evidence for s in box.sigs if s.kind == "mount_full"] == want


def test_job_records_of_a_partition_given_away_buffered_before_the_rebalance_are_not_applied():
    """Faust's ``take_events`` yields after a rebalance what it buffered before it. A tick of
    ``fl.internal.jobs/1`` from generation 2, yielded to the worker that kept only partition 2
    in generation 3, loaded partition 1's jobs from the standby table and evaluated them: false
    stalls of two jobs another worker owned (rebalance trial seed 102, session 15). Such records
    are dropped (the new owner reads them from the committed offset); an earlier generation's
    record of a partition still owned, and every record of the current generation, are kept."""
    from faultline.streams.engine import EngineConfig
    from faultline.streams.faust_engine import Shared

    cfg = EngineConfig()
    wms = type("W", (), {"universe": None})()
    job = agents.JobAgent(agents.Sides(Shared({}, lambda k, v: None), type("V", (), {"data": {}})(), cfg),
                          _Tables(), _Outbox(), wms, agents.Stats(), {}, cfg, jobs_in="fl.internal.jobs",
                          job_topics={"fl.runtime", "fl.sched"}, worker_id="w2")
    job.on_assigned({("fl.runtime", 2), ("fl.sched", 2), ("fl.internal.jobs", 2)})

    def msg(topic: str, partition: int, offset: int, gen: int) -> Message:
        m = Message(b"T{}", topic, partition, offset)
        m.generation_id = gen
        return m

    given_away = [msg("fl.internal.jobs", 1, 7, 2), msg("fl.runtime", 1, 40, 2)]
    kept = [msg("fl.internal.jobs", 2, 9, 2), msg("fl.runtime", 2, 41, 3)]
    batch = [given_away[0], kept[0], given_away[1], kept[1]]
    values = [m.value for m in batch]
    assert job.owned(batch, values) == (batch, values)     # no group generation known: all kept
    job.generation = lambda: 3
    got, got_values = job.owned(batch, values)
    assert got == kept and got_values == [m.value for m in kept]
    assert job.stats.disowned == 2
