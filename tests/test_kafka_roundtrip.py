"""Contract events through the real broker: Publisher routes by the registry, aiokafka reads back."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import orjson
import pytest
from aiokafka import AIOKafkaConsumer

from faultline.producers.publish import BrokerUnreachable, Publisher
from faultline.schemas import INPUT_TOPICS, decode, key_for, topic_for
from faultline.schemas.examples import EXAMPLE_TS, example

pytestmark = pytest.mark.kafka


def corpus() -> list:
    """Several kinds, several keys, several events per key (in ts order per key)."""
    evs = []
    n = 0
    for i in range(40):
        node = f"gpu-{i % 7:03d}"
        job = f"4821{i % 4}"
        ts = EXAMPLE_TS + i * 1000
        for kind, extra in (
            ("gpu.sample", {"node": node}), ("gpu.xid", {"node": node}),
            ("hw.sel", {"node": node}), ("sched.job", {"job": job}),
            ("runtime.progress", {"job": job, "node": node}),
            ("net.link", {"node": None}), ("net.port", {"node": node}),
            ("storage.mount", {"node": node}), ("inventory.versions", {"node": node}),
        ):
            n += 1
            d = example(kind, id=f"ev-{n}", ts=ts, **extra)
            if kind == "net.link":
                d["data"]["device"] = f"leaf-{i % 3:02d}"
            if kind == "runtime.progress":
                d["data"]["step"] = i
            evs.append(decode(orjson.dumps(d)))
    return evs


async def consume(settings, topics: list[str], want: int, timeout_s: float = 60) -> list:
    c = AIOKafkaConsumer(*topics, **settings.kafka_kwargs(), group_id=None,
                         auto_offset_reset="earliest", enable_auto_commit=False)
    await c.start()
    got = []
    try:
        async with asyncio.timeout(timeout_s):
            while len(got) < want:
                batch = await c.getmany(timeout_ms=500)
                for msgs in batch.values():
                    got.extend(msgs)
    finally:
        await c.stop()
    return got


async def test_publish_and_consume_contract_events(settings, contract_topics):
    await contract_topics(partitions=3)
    events = corpus()
    async with Publisher(settings) as pub:
        futs = [await pub.send(ev) for ev in events]
        await pub.flush()
        metas = await asyncio.gather(*futs)
    assert all(m.offset >= 0 for m in metas)

    msgs = await consume(settings, [settings.topic(t) for t in INPUT_TOPICS], len(events))
    assert len(msgs) == len(events)
    by_id = {ev.id: ev for ev in events}
    partitions_of_key: dict[tuple[str, bytes], set[int]] = defaultdict(set)
    order: dict[tuple[str, bytes], list[int]] = defaultdict(list)
    for m in sorted(msgs, key=lambda m: (m.topic, m.partition, m.offset)):
        ev = decode(m.value)
        orig = by_id.pop(ev.id)
        assert ev == orig
        assert m.topic == settings.topic(topic_for(orig))
        assert m.key == key_for(orig) and m.key
        assert m.timestamp == orig.ts
        partitions_of_key[(m.topic, m.key)].add(m.partition)
        order[(m.topic, m.key)].append(ev.ts)
    assert not by_id, "every event arrives exactly once"
    # same key -> same partition, and per-key order is the send order
    assert all(len(p) == 1 for p in partitions_of_key.values())
    assert all(ts == sorted(ts) for ts in order.values())
    # keys as the contract says: sched by job, net.link without node by switch name
    keys = {(t.removeprefix(settings.topic_prefix), k) for t, k in partitions_of_key}
    assert ("fl.sched", b"48213") in keys and ("fl.net", b"leaf-02") in keys
    assert ("fl.gpu", b"gpu-006") in keys
    # the 7 nodes spread over more than one partition of fl.gpu
    gpu_parts = {next(iter(p)) for (t, k), p in partitions_of_key.items() if t == settings.topic("fl.gpu")}
    assert len(gpu_parts) > 1


async def test_publisher_reports_unreachable_broker():
    from dataclasses import replace

    from conftest import free_port
    from faultline.config import Settings

    s = replace(Settings(), kafka_bootstrap=f"127.0.0.1:{free_port()}")
    with pytest.raises(BrokerUnreachable, match="run `make kafka-up`"):
        await Publisher(s).start()


@pytest.mark.slow
async def test_private_broker_stop_restart_keeps_data(private_broker, tmp_path):
    """The `private_broker` fixture: a test can kill and restart a broker; data survives."""
    from dataclasses import replace

    from faultline.config import Settings

    b = await asyncio.to_thread(private_broker)
    assert b.running and b.bootstrap != "127.0.0.1:9092"
    s = replace(Settings(), kafka_bootstrap=b.bootstrap, topic_prefix="p.")
    ev = decode(orjson.dumps(example("gpu.xid", id="before-restart")))
    async with Publisher(s) as pub:
        await (await pub.send(ev))
    await b.astop()
    assert not b.running
    with pytest.raises(BrokerUnreachable):
        await Publisher(s).start()
    await b.astart()
    assert b.running
    msgs = await consume(s, [s.topic("fl.gpu")], 1)
    assert [decode(m.value).id for m in msgs] == ["before-restart"]
