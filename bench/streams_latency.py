"""Detection latency through Kafka: from a fault event being produced to its alert on
fl.alerts, with a `faultline worker` running and healthy background telemetry produced at a
target rate (default 10,000 events/s).

    .venv/bin/python bench/streams_latency.py [--rates 1000,3000,10000] [--seconds 30] [--faults 60]

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
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from faultline import config
from faultline.schemas.codec import now_ms
from faultline.streams.faust_harness import WorkerProcess
from faultline.streams.faust_topics import BrokerUnreachable, ensure_topics

NODES = 64
GPUS = 8
_fault_seq = [0]   # faults on distinct GPUs: alerts are rate-limited per subject


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
                  fault_topic: str, via_worker: bool, bg_topic: str | None = None) -> tuple[list[float], float]:
    """Produce background + ``faults`` fault events; return (latencies s, background ev/s)."""
    kw = settings.kafka_kwargs()
    producer = AIOKafkaProducer(**kw, linger_ms=5, max_batch_size=1 << 20)
    consumer = AIOKafkaConsumer(**kw, auto_offset_reset="latest", group_id=None)
    await producer.start()
    await consumer.start()
    parts = consumer.partitions_for_topic(alerts_topic)
    while not parts:
        await consumer._client.force_metadata_update()
        parts = consumer.partitions_for_topic(alerts_topic)
    tps = [TopicPartition(alerts_topic, p) for p in sorted(parts)]
    consumer.assign(tps)
    await consumer.seek_to_end(*tps)
    for tp in tps:
        await consumer.position(tp)          # resolved before the first fault is produced
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
    bg = asyncio.create_task(background(producer, bg_topic or settings.topic("fl.gpu"), rate, stop, counter))
    rd = asyncio.create_task(read())
    t0 = time.monotonic()
    run = uuid.uuid4().hex[:6]
    for _ in range(faults):
        await asyncio.sleep(seconds / faults)
        i = _fault_seq[0]
        _fault_seq[0] += 1
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


def run_worker_rate(base, rate: float, seconds: float, faults: int) -> tuple[list[float], float]:
    """A fresh topic prefix and worker, warmed up, then ``faults`` faults under ``rate``."""
    s = replace(base, topic_prefix=f"bench{uuid.uuid4().hex[:6]}.")
    asyncio.run(ensure_topics(s))
    with tempfile.TemporaryDirectory() as tmp:
        w = WorkerProcess(s, tmp, loglevel="warning").start()
        try:
            t_end = time.monotonic() + 120
            warm: list[float] = []
            while not warm and time.monotonic() < t_end:   # until the worker answers a fault
                warm, _ = asyncio.run(measure(s, rate=0, seconds=1, faults=1, alerts_topic=s.topic("fl.alerts"),
                                              fault_topic=s.topic("fl.gpu"), via_worker=True))
            if not warm:
                raise RuntimeError("worker did not answer within 120 s:\n" + w.log())
            return asyncio.run(measure(s, rate=rate, seconds=seconds, faults=faults,
                                       alerts_topic=s.topic("fl.alerts"), fault_topic=s.topic("fl.gpu"),
                                       via_worker=True))
        finally:
            w.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="10000", help="background events/s, comma separated (default 10000)")
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
    rates = [float(r) for r in args.rates.split(",")]
    # baseline: plain Kafka round trip of the same fault records under the top background rate
    base, base_rate = asyncio.run(measure(s, rate=max(rates), seconds=args.seconds / 2, faults=args.faults // 2,
                                          alerts_topic=s.topic("fl.findings"), fault_topic=s.topic("fl.findings"),
                                          via_worker=False, bg_topic=s.topic("fl.findings")))
    b50, b99 = statistics.median(base), pct(base, 99)
    print(f"baseline Kafka round trip (no worker) at {base_rate:,.0f} ev/s background: n={len(base)} "
          f"p50={b50 * 1000:.0f} ms p99={b99 * 1000:.0f} ms; {s.topic_partitions} partitions")
    rc = 0
    for rate in rates:
        try:
            lat, achieved = run_worker_rate(s, rate, args.seconds, args.faults)
        except RuntimeError as e:
            print(e, file=sys.stderr)
            return 1
        if not lat:
            print(f"target {rate:,.0f} ev/s (achieved {achieved:,.0f}): no alert within 20 s of the run's end "
                  "(the worker fell behind the background load)")
            rc = 1
            continue
        p50, p99 = statistics.median(lat), pct(lat, 99)
        print(f"target {rate:,.0f} ev/s, achieved {achieved:,.0f} ev/s: fault -> alert n={len(lat)}/{args.faults} "
              f"p50={p50 * 1000:.0f} ms p99={p99 * 1000:.0f} ms (p99 < 2000 ms: {'met' if p99 < 2.0 else 'NOT met'}); "
              f"x{p50 / max(b50, 1e-6):.1f} / x{p99 / max(b99, 1e-6):.1f} the baseline p50 / p99")
    return rc


if __name__ == "__main__":
    sys.exit(main())
