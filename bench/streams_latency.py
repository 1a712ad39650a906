"""Detection latency through Kafka: from a fault event being produced to its alert on
fl.alerts, with a `faultline worker` running and healthy background telemetry produced at a
target rate (default 10,000 events/s).

    .venv/bin/python bench/streams_latency.py [--rates 1000,3000,10000] [--seconds 30] [--faults 60]
        [--workers N] [--drain EVENTS]

Prints the background rate achieved, p50/p99 alert latency, and the same figures for the
baseline measured in this script: a plain Kafka round trip (produce -> consume on one topic,
no worker), so the ratio is what the worker adds. Needs the broker (`make kafka-up`).

``--workers N`` runs N workers in one consumer group (they share the partitions).
``--drain EVENTS`` also measures the drain rate: with the workers warm and idle, EVENTS
background events are produced as fast as the producer can, then one fault; the time to its
alert gives events/s of wall time, and the workers' CPU time gives events per CPU-second.

The background producer sends pre-encoded records in per-partition batches (``send_batch``,
default partitioner's murmur2 on the node key), so on a 2-core machine it takes little of
the CPU the broker and the worker need; the rate it achieved is printed next to the target.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.partitioner import murmur2

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench.results import record  # noqa: E402
from faultline import config  # noqa: E402
from faultline.schemas.codec import now_ms  # noqa: E402
from faultline.streams.faust_harness import WorkerProcess  # noqa: E402
from faultline.streams.faust_topics import BrokerUnreachable, ensure_topics  # noqa: E402

NODES = 64
GPUS = 8
_fault_seq = [0]   # faults on distinct GPUs: alerts are rate-limited per subject
_bg_seq = [0]      # background ids stay distinct across runs (the worker de-duplicates by id)
_drain_seq = [0]   # fault_per_partition calls: each faults other nodes


def sample(node: int, gpu: int, ts: int, seq: int) -> bytes:
    return orjson.dumps({
        "v": 1, "id": f"bg-{seq}", "ts": ts, "kind": "gpu.sample", "source": "bench", "node": f"n{node:03d}",
        "data": {"gpu": gpu, "uuid": f"GPU-{node}-{gpu}", "util_pct": 97.0, "mem_used_mib": 60000.0,
                 "mem_total_mib": 81920.0, "temp_c": 61.0, "power_w": 520.0, "sm_clock_mhz": 1980.0,
                 "throttle": [], "ecc_sbe": 0, "ecc_dbe": 0, "nvlink_errors": 0, "pcie_replay": 0}})


def _template(node: int, gpu: int) -> bytes:
    """``sample`` with ``%d`` placeholders for the sequence number and the timestamp."""
    raw = sample(node, gpu, 1111111111111, 0).replace(b'"bg-0"', b'"bg-%d"').replace(b"1111111111111", b"%d")
    assert raw.count(b"%d") == 2 and raw % (7, 9) == sample(node, gpu, 9, 7)
    return raw


_TEMPLATES = [_template(n, g) for n in range(NODES) for g in range(GPUS)]   # index node * GPUS + gpu
_KEYS = [f"n{n:03d}".encode() for n in range(NODES)]


def xid(fid: str, node: int, gpu: int, ts: int) -> bytes:
    return orjson.dumps({
        "v": 1, "id": fid, "ts": ts, "kind": "gpu.xid", "source": "bench", "node": f"n{node:03d}",
        "data": {"gpu": gpu, "pci": None, "xid": 79, "pid": None,
                 "message": "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."}})


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")


async def send_keyed(producer: AIOKafkaProducer, topic: str, records: Any) -> None:
    """Send ``(key, value)`` records in one batch per partition (``send_batch``, the default
    partitioner's murmur2 on the key): a few microseconds per record; waits for the acks."""
    n_parts = len(await producer.partitions_for(topic))   # send_batch does not wait for metadata
    batches: dict[int, Any] = {}
    futs = []
    part_of: dict[bytes, int] = {}
    for key, value in records:
        part = part_of.get(key)
        if part is None:
            part = part_of[key] = (murmur2(key) & 0x7FFFFFFF) % n_parts
        b = batches.get(part)
        if b is None:
            b = batches[part] = producer.create_batch()
        if b.append(key=key, value=value, timestamp=None) is None:
            futs.append(await producer.send_batch(b, topic, partition=part))
            b = batches[part] = producer.create_batch()
            b.append(key=key, value=value, timestamp=None)
    for part, b in batches.items():
        if b.record_count():
            futs.append(await producer.send_batch(b, topic, partition=part))
    if futs:
        await asyncio.gather(*futs)


async def produce_background(producer: AIOKafkaProducer, topic: str, start: int, n: int, ts: int,
                             partitions: int) -> None:
    """Produce background samples ``start .. start+n-1`` (node/gpu round robin), pre-encoded."""
    def records():
        for seq in range(start, start + n):
            node, gpu = (seq // GPUS) % NODES, seq % GPUS
            yield _KEYS[node], _TEMPLATES[node * GPUS + gpu] % (seq, ts)

    await send_keyed(producer, topic, records())


async def background(producer: AIOKafkaProducer, topic: str, rate: float, stop: asyncio.Event,
                     counter: list[int], partitions: int, seq0: int = 0) -> None:
    """Produce healthy gpu.sample events at ``rate``/s in 10 ms slices."""
    seq = seq0
    t0 = time.monotonic()
    while not stop.is_set():
        due = seq0 + int((time.monotonic() - t0) * rate)
        if due > seq:
            await produce_background(producer, topic, seq, due - seq, now_ms(), partitions)
            seq = due
        counter[0] = seq - seq0
        await asyncio.sleep(0.01)


async def measure(settings, *, rate: float, seconds: float, faults: int, alerts_topic: str,
                  fault_topic: str, via_worker: bool, bg_topic: str | None = None,
                  quiet: bool = False) -> tuple[list[float], float]:
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
        while not stop.is_set() or sent:        # until every fault is answered (or the deadline)
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
    bg = asyncio.create_task(background(producer, bg_topic or settings.topic("fl.gpu"), rate, stop, counter,
                                        settings.topic_partitions, seq0=_bg_seq[0]))
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
    _bg_seq[0] += counter[0] + 1_000_000
    deadline = time.monotonic() + (5.0 if quiet else 20.0)
    await bg
    await asyncio.wait_for(rd, 30)
    await producer.stop()
    await consumer.stop()
    missing = len(sent)
    if missing and not quiet:
        print(f"  ({missing} of {faults} faults got no alert within 20 s after the run; not counted)")
    return lat, achieved


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux ``/proc``)."""
    with open(f"/proc/{pid}/stat") as fh:
        f = fh.read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


async def fault_per_partition(settings, producer: AIOKafkaProducer, consumer: AIOKafkaConsumer,
                              timeout_s: float = 150) -> None:
    """One fault on every partition of fl.gpu (behind whatever was produced before it), then
    wait for all their alerts on ``consumer`` (already at the end of fl.alerts): every
    worker has processed its share of what came before."""
    topic = settings.topic("fl.gpu")
    n_parts = len(await producer.partitions_for(topic))
    nodes_of: dict[int, list[int]] = {}
    for n, k in enumerate(_KEYS):
        nodes_of.setdefault((murmur2(k) & 0x7FFFFFFF) % n_parts, []).append(n)
    # alerts are rate-limited per subject: each call faults another node of the partition
    node_of = {p: ns[_drain_seq[0] % len(ns)] for p, ns in nodes_of.items()}
    _drain_seq[0] += 1
    run = uuid.uuid4().hex[:6]
    faults = {f"fault-drain-{run}-{p}": node for p, node in node_of.items()}
    for fid, node in faults.items():   # GPU 7: the latency runs' faults use low GPU indices first
        await producer.send_and_wait(topic, xid(fid, node, GPUS - 1, now_ms()), key=_KEYS[node])
    waiting = {f.encode() for f in faults}
    t_end = time.monotonic() + timeout_s
    while time.monotonic() < t_end:
        batch = await consumer.getmany(timeout_ms=100)
        for recs in batch.values():
            for r in recs:
                waiting -= {f for f in waiting if f in r.value}
        if not waiting:
            return
    raise RuntimeError(f"no alert for {len(waiting)} of the faults within {timeout_s:.0f} s")


async def drain(settings, events: int, before: Any = None) -> float:
    """Produce ``events`` background samples as fast as possible, then one fault on every
    partition; seconds from the first send to the last of their alerts (every partition,
    so with several workers each one's share is drained). ``before(producer)``: awaited
    first (not timed), e.g. to open jobs."""
    kw = settings.kafka_kwargs()
    producer = AIOKafkaProducer(**kw, linger_ms=5, max_batch_size=1 << 20)
    consumer = AIOKafkaConsumer(settings.topic("fl.alerts"), **kw, auto_offset_reset="latest", group_id=None)
    await producer.start()
    await consumer.start()
    try:
        await consumer.seek_to_end()
        topic = settings.topic("fl.gpu")
        if before is not None:
            await before(producer)
        t0 = time.monotonic()
        step = 20_000
        for start in range(0, events, step):
            await produce_background(producer, topic, _bg_seq[0] + start, min(step, events - start),
                                     now_ms(), settings.topic_partitions)
        _bg_seq[0] += events
        await fault_per_partition(settings, producer, consumer)
        return time.monotonic() - t0
    finally:
        await producer.stop()
        await consumer.stop()


def warm_up(s, n_workers: int, workers: list, timeout_s: float = 180) -> None:
    """Until every partition's faults are answered in one round (all workers joined, group stable)."""
    t_end = time.monotonic() + timeout_s
    need = max(1, s.topic_partitions)
    while time.monotonic() < t_end:
        warm, _ = asyncio.run(measure(s, rate=0, seconds=1, faults=need, alerts_topic=s.topic("fl.alerts"),
                                      fault_topic=s.topic("fl.gpu"), via_worker=True, quiet=True))
        if len(warm) == need:
            if n_workers == 1:
                return
            time.sleep(3)   # a last join may still be rebalancing: one more full round
            warm, _ = asyncio.run(measure(s, rate=0, seconds=1, faults=need, alerts_topic=s.topic("fl.alerts"),
                                          fault_topic=s.topic("fl.gpu"), via_worker=True, quiet=True))
            if len(warm) == need:
                return
    raise RuntimeError("workers did not answer within %d s:\n" % timeout_s + "\n".join(w.log() for w in workers))


def run_worker_rate(base, rate: float, seconds: float, faults: int, n_workers: int = 1,
                    drain_events: int = 0) -> tuple[list[float], float, tuple[float, float] | None]:
    """A fresh topic prefix and ``n_workers`` workers, warmed up, then ``faults`` faults under
    ``rate``; with ``drain_events``, then the drain rate (events/s wall, events/CPU-s)."""
    s = replace(base, topic_prefix=f"bench{uuid.uuid4().hex[:6]}.")
    asyncio.run(ensure_topics(s))
    with tempfile.TemporaryDirectory() as tmp:
        ws = [WorkerProcess(s, f"{tmp}/w{i}", loglevel="warning").start() for i in range(n_workers)]
        try:
            warm_up(s, n_workers, ws)
            lat, achieved = asyncio.run(measure(s, rate=rate, seconds=seconds, faults=faults,
                                                alerts_topic=s.topic("fl.alerts"), fault_topic=s.topic("fl.gpu"),
                                                via_worker=True))
            dr = None
            if drain_events:
                time.sleep(2)
                c0 = sum(cpu_seconds(w.proc.pid) for w in ws)
                dt = asyncio.run(drain(s, drain_events))
                dc = sum(cpu_seconds(w.proc.pid) for w in ws) - c0
                dr = (drain_events / dt, drain_events / max(dc, 1e-6))
            return lat, achieved, dr
        finally:
            for w in ws:
                w.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="10000", help="background events/s, comma separated (default 10000)")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--faults", type=int, default=60)
    ap.add_argument("--partitions", type=int, default=None)
    ap.add_argument("--workers", type=int, default=1, help="workers sharing the partitions (default 1)")
    ap.add_argument("--drain", type=int, default=0, metavar="EVENTS",
                    help="after each rate, measure the drain rate of EVENTS background events (e.g. 300000)")
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
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    # baseline: plain Kafka round trip of the same fault records under the top background rate
    base, base_rate = asyncio.run(measure(s, rate=max(rates), seconds=args.seconds / 2, faults=args.faults // 2,
                                          alerts_topic=s.topic("fl.findings"), fault_topic=s.topic("fl.findings"),
                                          via_worker=False, bg_topic=s.topic("fl.findings")))
    b50, b99 = statistics.median(base), pct(base, 99)
    print(f"baseline Kafka round trip (no worker) at {base_rate:,.0f} ev/s background: n={len(base)} "
          f"p50={b50 * 1000:.0f} ms p99={b99 * 1000:.0f} ms; {s.topic_partitions} partitions")
    rc = 0
    who = f"{args.workers} workers" if args.workers > 1 else "1 worker"
    for rate in rates:
        try:
            lat, achieved, dr = run_worker_rate(s, rate, args.seconds, args.faults, args.workers, args.drain)
        except RuntimeError as e:
            print(e, file=sys.stderr)
            return 1
        if not lat:
            print(f"{who}, target {rate:,.0f} ev/s (achieved {achieved:,.0f}): no alert within 20 s of the run's end "
                  "(the worker fell behind the background load)")
            rc = 1
        else:
            p50, p99 = statistics.median(lat), pct(lat, 99)
            print(f"{who}, target {rate:,.0f} ev/s, achieved {achieved:,.0f} ev/s: fault -> alert "
                  f"n={len(lat)}/{args.faults} p50={p50 * 1000:.0f} ms p99={p99 * 1000:.0f} ms "
                  f"(p99 < 2000 ms: {'met' if p99 < 2.0 else 'NOT met'}); "
                  f"x{p50 / max(b50, 1e-6):.1f} / x{p99 / max(b99, 1e-6):.1f} the baseline p50 / p99")
            if len(lat) < args.faults:
                rc = 1
            if rate == max(rates):
                record("alert_latency_p99_ms", p99 * 1000, "ms",
                       baseline="plain Kafka produce -> consume round trip (no worker), same background, same run",
                       baseline_value=b99 * 1000,
                       note=f"{who}, fault -> alert at {achieved:,.0f} ev/s background (target {rate:,.0f}), "
                            f"n={len(lat)}/{args.faults}, p50 {p50 * 1000:.0f} ms; target p99 < 2000 ms")
        if dr is not None:
            print(f"{who}, drain of {args.drain:,} events (producer as fast as it can, same machine): "
                  f"{dr[0]:,.0f} events/s wall, {dr[1]:,.0f} events per worker CPU-second")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
