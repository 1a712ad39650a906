"""Publish a simulation to Kafka through ``producers.publish.Publisher`` (topic per layer,
key per the registry, ``topic_prefix`` honoured), optionally paced by event time."""

from __future__ import annotations

import asyncio
import time

import orjson

from ...schemas.registry import LAYER_TOPICS
from ..publish import Publisher
from .engine import Simulation


def topic_key(line: bytes) -> tuple[str, bytes, int | None]:
    """Topic (unprefixed), key and timestamp of one encoded line, as ``schemas.registry``
    routes it. A malformed line goes to the topic of the layer it claims (else ``fl.gpu``),
    where the consumers dead-letter it."""
    try:
        ev = orjson.loads(line)
        kind = ev["kind"]
        layer = kind.split(".", 1)[0]
        topic = LAYER_TOPICS.get(layer, "fl.gpu")
        if layer == "sched":
            key = ev.get("job") or ev.get("node") or ""
        elif layer == "runtime":
            key = ev.get("job") or ""
        elif layer == "net":
            key = ev.get("node") or (ev.get("data") or {}).get("device") or ""
        else:
            key = ev.get("node") or ""
        ts = ev.get("ts") if type(ev.get("ts")) is int else None
        return topic, str(key).encode(), ts
    except Exception:
        return "fl.gpu", b"", None


async def publish(sim: Simulation, settings, *, speed: float | None = None, publisher: Publisher | None = None) -> int:
    """Send every line of ``sim``; with ``speed`` X, one simulated second takes 1/X wall seconds."""
    pub = publisher or await Publisher(settings).start()
    n = 0
    t_wall = time.monotonic()
    t_sim0 = sim.plan.t0
    try:
        for line in sim.lines():
            topic, key, ts = topic_key(line)
            if speed and ts is not None:
                delay = t_wall + (ts - t_sim0) / 1000 / speed - time.monotonic()
                if delay > 0.005:
                    await asyncio.sleep(delay)
            await pub.send_raw(topic, key, line, ts)
            n += 1
            if n % 20_000 == 0:
                await asyncio.sleep(0)
        await pub.flush()
    finally:
        if publisher is None:
            await pub.stop()
    return n
