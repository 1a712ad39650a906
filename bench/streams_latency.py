"""Detection latency through Kafka: from a fault event being produced to its alert on
fl.alerts, with a `faultline worker` running and healthy background telemetry produced at a
target rate (default 10,000 events/s).

    .venv/bin/python bench/streams_latency.py [--rate 10000] [--seconds 30] [--faults 60]

Prints the background rate achieved, p50/p99 alert latency, and the same figures for the
baseline measured in this script: a plain Kafka round trip (produce -> consume on one topic,
no worker), so the ratio is what the worker adds. Needs the broker (`make kafka-up`).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import replace

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from faultline import config
from faultline.schemas.codec import now_ms
from faultline.streams.faust_harness import WorkerProcess
from faultline.streams.faust_topics import BrokerUnreachable, ensure_topics

NODES = 64
GPUS = 8


def sample(node: int, gpu: int, ts: int, seq: int) -> bytes:
    return orjson.dumps({
        "v": 1, "id": f"bg-{seq}", "ts": ts, "kind": "gpu.sample", "source": "bench", "node": f"n{node:03d}",
        "data": {"gpu": gpu, "uuid": f"GPU-{node}-{gpu}", "util_pct": 97.0, "mem_used_mib": 60000.0,
                 "mem_total_mib": 81920.0, "temp_c": 61.0, "power_w": 520.0, "sm_clock_mhz": 1980.0,
                 "throttle": [], "ecc_sbe": 0, "ecc_dbe": 0, "nvlink_errors": 0, "pcie_replay": 0}})


def xid(fid: str, node: int, gpu: int, ts: int) -> bytes:
    return orjson.dumps({
        "v": 1, "id": fid, "ts": ts, "kind": "gpu.xid", "source": "bench", "node": f"n{node:03d}",
        "data": {"gpu": gpu, "pci": None, "xid": 79, "pid": None,
                 "message": "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."}})


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")


async def background(producer: AIOKafkaProducer, topic: str, rate: float, stop: asyncio.Event,
                     counter: list[int]) -> None:
    """Produce healthy gpu.sample events at ``rate``/s in 10 ms slices."""
    seq = 0
    t0 = time.monotonic()
    while not stop.is_set():
        due = int((time.monotonic() - t0) * rate)
        ts = now_ms()
        while seq < due:
            node, gpu = (seq // GPUS) % NODES, seq % GPUS
            await producer.send(topic, sample(node, gpu, ts, seq), key=f"n{node:03d}".encode())
            seq += 1
        counter[0] = seq
        await asyncio.sleep(0.01)


async def measure(settings, *, rate: float, seconds: float, faults: int, alerts_topic: str,
                  fault_topic: str, via_worker: bool) -> tuple[list[float], float]:
    """Produce background + ``faults`` fault events; return (latencies s, background ev/s)."""
    kw = settings.kafka_kwargs()
    producer = AIOKafkaProducer(**kw, linger_ms=5, max_batch_size=1 << 20)
    consumer = AIOKafkaConsumer(alerts_topic, **kw, auto_offset_reset="latest", group_id=None)
    await producer.start()
    await consumer.start()
    await consumer.seek_to_end()
    sent: dict[str, float] = {}
    lat: list[float] = []
    stop = asyncio.Event()
    counter = [0]

    async def read() -> None:
        while not stop.is_set() or len(lat) < len(sent):
            batch = await consumer.getmany(timeout_ms=100)
            now = time.monotonic()
            for recs in batch.values():
                for r in recs:
                    if via_worker:
                        d = orjson.loads(r.value)
                        ids = [e for e in d.get("evidence", ()) if e in sent]
                    else:
                        d = orjson.loads(r.value)
                        ids = [d["id"]] if d.get("id") in sent else []
                    for fid in ids:
                        lat.append(now - sent.pop(fid))
            if stop.is_set() and time.monotonic() > deadline:
                break

    deadline = float("inf")
    bg = asyncio.create_task(background(producer, settings.topic("fl.gpu"), rate, stop, counter))
    rd = asyncio.create_task(read())
    t0 = time.monotonic()
    run = uuid.uuid4().hex[:6]
    for i in range(faults):
        await asyncio.sleep(seconds / faults)
        fid = f"fault-{run}-{i}"
        node, gpu = i % NODES, (i // NODES) % GPUS
        sent[fid] = time.monotonic()
        await producer.send(fault_topic, xid(fid, node, gpu, now_ms()), key=f"n{node:03d}".encode())
    elapsed = time.monotonic() - t0
    achieved = counter[0] / elapsed
    stop.set()
    deadline = time.monotonic() + 20.0
    await bg
    await asyncio.wait_for(rd, 30)
    await producer.stop()
    await consumer.stop()
    missing = len(sent)
    if missing:
        print(f"  ({missing} of {faults} faults got no alert within 20 s after the run; not counted)")
    return lat, achieved


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=10_000, help="background events/s (default 10000)")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--faults", type=int, default=60)
    ap.add_argument("--partitions", type=int, default=None)
    args = ap.parse_args()
    s = config.load()
    s = replace(s, topic_prefix=f"bench{uuid.uuid4().hex[:6]}.",
                topic_partitions=args.partitions or s.topic_partitions)
    try:
        asyncio.run(ensure_topics(s))
    except BrokerUnreachable as e:
        print(e, file=sys.stderr)
        return 2

    # baseline: plain Kafka round trip of the same fault records under the same background
    base, base_rate = asyncio.run(measure(s, rate=args.rate, seconds=args.seconds / 2, faults=args.faults // 2,
                                          alerts_topic=s.topic("fl.findings"), fault_topic=s.topic("fl.findings"),
                                          via_worker=False))
    with tempfile.TemporaryDirectory() as tmp:
        w = WorkerProcess(s, tmp, loglevel="warning").start()
        try:
            # warm up: wait until the worker answers a fault with an alert
            warm, _ = asyncio.run(measure(s, rate=0, seconds=1, faults=1, alerts_topic=s.topic("fl.alerts"),
                                          fault_topic=s.topic("fl.gpu"), via_worker=True))
            t_end = time.monotonic() + 90
            while not warm and time.monotonic() < t_end:
                warm, _ = asyncio.run(measure(s, rate=0, seconds=1, faults=1, alerts_topic=s.topic("fl.alerts"),
                                              fault_topic=s.topic("fl.gpu"), via_worker=True))
            if not warm:
                print("worker did not answer within 90 s:\n" + w.log(), file=sys.stderr)
                return 1
            lat, rate = asyncio.run(measure(s, rate=args.rate, seconds=args.seconds, faults=args.faults,
                                            alerts_topic=s.topic("fl.alerts"), fault_topic=s.topic("fl.gpu"),
                                            via_worker=True))
        finally:
            w.stop()
    print(f"background load: target {args.rate:,.0f} ev/s, achieved {rate:,.0f} ev/s (worker run), "
          f"{base_rate:,.0f} ev/s (baseline run); {s.topic_partitions} partitions")
    print(f"baseline Kafka round trip (no worker): n={len(base)} p50={statistics.median(base) * 1000:.0f} ms "
          f"p99={pct(base, 99) * 1000:.0f} ms")
    if not lat:
        print("no alert latency measured")
        return 1
    p50, p99 = statistics.median(lat), pct(lat, 99)
    print(f"fault -> alert through the worker: n={len(lat)} p50={p50 * 1000:.0f} ms p99={p99 * 1000:.0f} ms "
          f"(target p99 < 2000 ms: {'met' if p99 < 2.0 else 'NOT met'})")
    print(f"ratio vs baseline: p50 x{p50 / max(statistics.median(base), 1e-6):.1f}, "
          f"p99 x{p99 / max(pct(base, 99), 1e-6):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
