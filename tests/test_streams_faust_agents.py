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
