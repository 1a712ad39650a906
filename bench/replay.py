"""Replay throughput: events/s read back by time range from the real broker, and read +
diagnosed in-process, beside a bare aiokafka consumer draining the same topics.

    python bench/replay.py [--nodes 32] [--hours 2]    (needs a broker: make kafka-up)
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.results import record  # noqa: E402
from bench.worker import bare_drain  # noqa: E402
from faultline import config, topics  # noqa: E402
from faultline.producers.publish import Publisher  # noqa: E402
from faultline.producers.replay import RangeStats, read_range  # noqa: E402
from faultline.producers.simulate import simulate  # noqa: E402
from faultline.schemas import INPUT_TOPICS, decode, now_ms  # noqa: E402
from faultline.streams.offline import OfflinePipeline  # noqa: E402


async def publish(settings, lines) -> None:
    now = now_ms()
    async with Publisher(settings) as pub:
        for raw in lines:
            await pub.send(decode(raw, now=now))
        await pub.flush()


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=32)
    ap.add_argument("--hours", type=float, default=2.0)
    a = ap.parse_args()
    settings = replace(config.load(), topic_prefix=f"bench{uuid.uuid4().hex[:6]}.")
    start = now_ms() - int((a.hours + 1) * 3_600_000)
    t = time.perf_counter()
    lines, _ = simulate("mixed", seed=5, nodes=a.nodes, hours=a.hours, start_ms=start)
    print(f"simulated {len(lines):,} events ({a.nodes} nodes x 8 GPUs, {a.hours:g} h) in {time.perf_counter() - t:.1f} s")
    await topics.create_topics(settings, topics.plan(settings))
    t = time.perf_counter()
    await publish(settings, lines)
    print(f"published in {time.perf_counter() - t:.1f} s")
    try:
        n_bare, bare_s, _ = await bare_drain(settings, [settings.topic(t) for t in INPUT_TOPICS])
        t = time.perf_counter()
        stats = RangeStats()
        values = []
        async for batch in read_range(settings, start, now_ms(), stats=stats):
            values.extend(r.value for r in batch)
        read_s = time.perf_counter() - t
        t = time.perf_counter()
        eng = OfflinePipeline.from_settings(settings, findings=False)   # what `faultline replay` runs
        for i in range(0, len(values), 10_000):
            eng.process(values[i:i + 10_000])
        eng.finish()
        diag_s = time.perf_counter() - t
        print(f"bare aiokafka drain : {n_bare:>9,} events {n_bare / bare_s:>10,.0f} events/s (baseline)")
        print(f"replay read range   : {stats.kept:>9,} events {stats.kept / read_s:>10,.0f} events/s "
              f"(ratio {bare_s / read_s:.2f} of baseline)")
        print(f"replay read+diagnose: {stats.kept:>9,} events {stats.kept / (read_s + diag_s):>10,.0f} events/s "
              f"({len(eng.incidents())} incidents; diagnose alone {stats.kept / diag_s:,.0f} events/s)")
        record("replay_events_per_s", stats.kept / read_s, "events/s (wall)",
               baseline="bare aiokafka getmany + orjson.loads of the same topics, same run", baseline_value=n_bare / bare_s,
               note=f"{stats.kept:,} events read back by time range; read + diagnose "
                    f"{stats.kept / (read_s + diag_s):,.0f} events/s, {len(eng.incidents())} incidents")
    finally:
        await topics.delete_topics(settings)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
