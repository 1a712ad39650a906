"""Publishing a simulation to the real broker: every line lands on its layer's topic with
the registry's key, under the test's topic prefix."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import orjson
from aiokafka import AIOKafkaConsumer

from faultline.producers.simulate import Intervals, Simulation
from faultline.producers.simulate.kafka import publish
from faultline.schemas import INPUT_TOPICS, now_ms

FAST = Intervals(gpu=60, hw=300, net_port=120, net_rdma=120, storage=120, mount=900)


async def consume_all(settings, expect: int, timeout_s: float = 60.0) -> list:
    c = AIOKafkaConsumer(*[settings.topic(t) for t in INPUT_TOPICS], **settings.kafka_kwargs(),
                         auto_offset_reset="earliest", enable_auto_commit=False, group_id=None)
    await c.start()
    out = []
    try:
        import time

        end = time.monotonic() + timeout_s
        while len(out) < expect and time.monotonic() < end:
            batch = await c.getmany(timeout_ms=1000, max_records=10_000)
            for recs in batch.values():
                out.extend(recs)
    finally:
        await c.stop()
    return out


async def test_publish_routes_by_layer_and_key(settings, contract_topics):
    await contract_topics(partitions=2)
    # recent event time: the broker's retention works on record timestamps
    start = (now_ms() // 3_600_000 - 2) * 3_600_000
    sim = Simulation("host-oom", 1, intervals=FAST, hours=0.6, nodes=8, start_ms=start)
    n = await publish(sim, settings)
    recs = await consume_all(settings, n)
    assert len(recs) == n == sim.labels()["counts"]["total"]
    per_topic = Counter()
    for r in recs:
        ev = orjson.loads(r.value)
        layer = ev["kind"].split(".")[0]
        assert r.topic == settings.topic(f"fl.{layer}")
        per_topic[layer] += 1
        if layer in ("sched", "runtime") and ev.get("job"):
            assert r.key.decode() == ev["job"]
        elif layer in ("gpu", "hw", "storage", "inventory"):
            assert r.key.decode() == ev["node"]
        assert r.timestamp == ev["ts"]
    assert set(per_topic) == {"gpu", "hw", "net", "storage", "sched", "runtime", "inventory"}


def test_cli_kafka(settings, faultline_env, contract_topics):
    import asyncio

    asyncio.run(contract_topics(partitions=1))
    p = subprocess.run([sys.executable, "-m", "faultline.cli", "simulate", "--scenario", "application", "--seed", "2",
                        "--hours", "0.5", "--nodes", "4", "--gpu-interval", "60", "--net-interval", "120",
                        "--storage-interval", "120", "--hw-interval", "300", "--kafka"],
                       env=faultline_env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    n = int(p.stderr.split("application: ")[1].split(" lines")[0])
    recs = asyncio.run(consume_all(settings, n))
    assert len(recs) == n > 0
