"""The Faust worker when one input topic lags behind the others (as fl.gpu, the heaviest,
does under real-time pacing in `faultline demo`): the job side may explain an attempt
before the evidence on the lagging topic is in; when that evidence arrives, the pushed
signals re-evaluate the incident, so the final revision equals `faultline diagnose`."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import msgspec
import pytest

from faultline.producers.publish import Publisher
from faultline.producers.simulate import simulate
from faultline.schemas.codec import decode, now_ms
from faultline.schemas.registry import topic_for
from faultline.streams.engine import Engine, EngineConfig
from faultline.streams.faust_harness import WorkerProcess, latest_incidents, read_topic, without_revision
from faultline.streams.faust_topics import ensure_topics

pytestmark = pytest.mark.kafka


async def produce(settings, events) -> None:
    async with Publisher(settings, compression=None) as pub:
        for ev in events:
            await pub.send(ev)
        await pub.flush()


@pytest.mark.slow
def test_late_gpu_topic_reevaluates_to_diagnose(settings, tmp_path):
    s = replace(settings, topic_partitions=3)
    start = (now_ms() - 90 * 60_000) // 60_000 * 60_000
    lines, _ = simulate("gpu-xid79", seed=1, nodes=4, hours=1.0, start_ms=start)
    eng = Engine(EngineConfig.from_settings(s))
    eng.process(lines)
    eng.finish()
    exp = {i.id: without_revision(msgspec.to_builtins(i)) for i in eng.incidents()}
    assert any(i["root_cause"]["category"] == "gpu_hardware" for i in exp.values())
    events = [decode(x) for x in lines]
    gpu = [e for e in events if topic_for(e).endswith("fl.gpu")]
    rest = [e for e in events if not topic_for(e).endswith("fl.gpu")]
    assert gpu and any(e.kind == "gpu.xid" for e in gpu)
    asyncio.run(ensure_topics(s))
    asyncio.run(produce(s, rest))
    with WorkerProcess(s, tmp_path / "w") as w:
        # every attempt is explained without the GPU evidence first (fl.gpu is empty) ...
        early = latest_incidents(asyncio.run(read_topic(s, "fl.incidents", until=lambda r: set(latest_incidents(r)) >= set(exp),
                                              timeout_s=120)))
        assert set(early) >= set(exp), w.log()
        assert early != exp, "without fl.gpu the worker cannot already know the XID"
        # ... then the lagging topic arrives: the late signals correct the incidents
        asyncio.run(produce(s, gpu))
        recs = asyncio.run(read_topic(s, "fl.incidents", until=lambda r: latest_incidents(r) == exp, timeout_s=120))
        assert w.alive(), w.log()
    got = latest_incidents(recs)
    diff = {i: (got.get(i, {}).get("root_cause"), exp[i]["root_cause"]) for i in exp if got.get(i) != exp.get(i)}
    assert got == exp, f"{diff}\n--- worker log ---\n{w.log()}"
