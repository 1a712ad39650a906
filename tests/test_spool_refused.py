"""Records Kafka refuses for what they are never wedge a publisher (real broker).

Kafka 4 refuses a record stamped more than 1 h ahead (log.message.timestamp.after.max.ms)
and with it its whole produce batch; the contract accepts an event 24 h ahead. Publishers
stamp records with the event time held to the wall clock (``publish.record_ts``). A record
the broker still refuses (too large for the topic, ...) is set aside by the spool in its
local dead-letter file, and every record around it is delivered.
"""

from __future__ import annotations

import asyncio
import os
import time

import orjson
import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from faultline.producers.publish import Publisher
from faultline.producers.spool import DEADLETTER_FILE, MAX_RECORD_BYTES, SpoolingPublisher
from faultline.schemas import decode
from faultline.schemas.examples import example

pytestmark = pytest.mark.kafka

HOUR = 3_600_000


async def _read(settings, topic: str, n: int, timeout_s: float = 30.0) -> list:
    c = AIOKafkaConsumer(settings.topic(topic), **settings.kafka_kwargs(), auto_offset_reset="earliest",
                         enable_auto_commit=False)
    await c.start()
    got: list = []
    try:
        deadline = time.monotonic() + timeout_s
        while len(got) < n and time.monotonic() < deadline:
            for _tp, msgs in (await c.getmany(timeout_ms=500)).items():
                got += msgs
        for _tp, msgs in (await c.getmany(timeout_ms=1000)).items():
            got += msgs
    finally:
        await c.stop()
    return got


def _events(n: int, node: str = "gpu-001"):
    now = int(time.time() * 1000)
    out = [decode(orjson.dumps(example("gpu.xid", id=f"ok-{i:04d}", ts=now + i, node=node)), now=now)
           for i in range(n)]
    ahead = decode(orjson.dumps(example("gpu.xid", id="ahead-23h", ts=now + 23 * HOUR, node=node)), now=now)
    return out[: n // 2] + [ahead] + out[n // 2:], now


async def test_publisher_sends_an_event_23h_ahead_with_its_neighbours(settings, contract_topics):
    await contract_topics(partitions=1)
    evs, now = _events(200)
    pub = await Publisher(settings).start()
    try:
        futs = [await pub.send(ev) for ev in evs]
        await pub.flush()
        results = await asyncio.gather(*futs, return_exceptions=True)
    finally:
        await pub.stop()
    assert not [r for r in results if isinstance(r, BaseException)]
    got = await _read(settings, "fl.gpu", len(evs))
    assert sorted(orjson.loads(m.value)["id"] for m in got) == sorted(e.id for e in evs)
    ahead = next(m for m in got if orjson.loads(m.value)["id"] == "ahead-23h")
    assert ahead.timestamp <= int(time.time() * 1000)          # the record time, held to the wall clock
    assert orjson.loads(ahead.value)["ts"] == now + 23 * HOUR   # the event keeps its own ts


async def test_spool_sets_aside_what_the_broker_refuses_and_delivers_the_rest(settings, tmp_path):
    # fl.gpu of this prefix takes batches of at most 2,000 bytes: a 5 KB record is refused by the
    # broker (MessageSizeTooLargeError, non-retriable), in the same batch as its neighbours
    admin = AIOKafkaAdminClient(**settings.kafka_kwargs())
    await admin.start()
    try:
        await admin.create_topics([NewTopic(settings.topic("fl.gpu"), 1, 1,
                                            topic_configs={"max.message.bytes": "2000"})])
    finally:
        await admin.close()
    evs, _now = _events(40)
    spool = await SpoolingPublisher(settings, spool_dir=tmp_path / "spool", retry_max_s=0.5).start()
    try:
        for ev in evs[:20]:
            await spool.send(ev)
        # random bytes: the 2,000-byte limit applies to the compressed batch
        await spool.send_raw("fl.gpu", b"gpu-001", os.urandom(5_000), int(time.time() * 1000))
        await spool.send_raw("fl.gpu", b"gpu-001", b"b" * (MAX_RECORD_BYTES + 1), None)  # never spooled
        for ev in evs[20:]:
            await spool.send(ev)
        assert await spool.flush(timeout_s=60), spool.metrics()
        stats = dict(spool.stats)
        spool_dir = spool.dir
    finally:
        await spool.stop()
    assert stats["set_aside"] == 2 and stats["sent"] == len(evs), stats
    got = await _read(settings, "fl.gpu", len(evs))
    assert sorted(orjson.loads(m.value)["id"] for m in got) == sorted(e.id for e in evs)
    lines = [orjson.loads(ln) for ln in (spool_dir / DEADLETTER_FILE).read_bytes().splitlines()]
    assert sorted(r["size"] for r in lines) == [5_000, MAX_RECORD_BYTES + 1]
    by_size = {r["size"]: r for r in lines}
    assert "MessageSizeTooLargeError" in by_size[5_000]["reason"]
    assert "larger than the" in by_size[MAX_RECORD_BYTES + 1]["reason"]
    assert all(r["topic"] == "fl.gpu" and r["sha256"] for r in lines)
