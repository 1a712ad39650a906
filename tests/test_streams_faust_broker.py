"""The worker while its broker is away (issue 14 build point 7): one clear WARNING naming
the bootstrap address and what to do, at most once per back-off period, and aiokafka's own
connection errors rate-limited (session 2 measured ~78 aiokafka ERROR lines per second and no
single clear line); when the broker is back the worker goes on by itself. Real worker
process, a private broker stopped and restarted under it."""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import replace

import pytest

from faultline.producers.publish import Publisher
from faultline.producers.simulate import simulate
from faultline.schemas.codec import decode, now_ms
from faultline.streams.faust_harness import WorkerProcess

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

AWAY_S = 20.0


async def _produce(settings, lines: list[bytes]) -> None:
    async with Publisher(settings, compression=None) as pub:
        for line in lines:
            await pub.send(decode(line))
        await pub.flush()


def test_broker_away_gives_one_warning_and_few_errors(settings, private_broker, tmp_path):
    start = (now_ms() - 40 * 60_000) // 60_000 * 60_000
    lines = [ln for ln in simulate("gpu-xid79", seed=1, nodes=2, hours=0.1, start_ms=start)[0]
             if decode(ln).layer == "sched"][:50]
    broker = private_broker()
    s = replace(settings, kafka_bootstrap=broker.bootstrap, topic_partitions=1)
    w = WorkerProcess(s, tmp_path / "w", loglevel="info", env={"FAULTLINE_WORKER_STATS_S": "2"}).start()
    try:
        deadline = time.monotonic() + 120
        while "Worker ready" not in w.log(10_000_000):
            assert w.alive() and time.monotonic() < deadline, w.log()
            time.sleep(0.5)
        before = len(w.log(10_000_000))
        broker.stop()
        time.sleep(AWAY_S)
        away = w.log(10_000_000)[before:]
        assert w.alive(), away[-4000:]
        broker.start()
        # back: the same worker consumes what is produced now
        asyncio.run(_produce(s, lines))
        deadline = time.monotonic() + 150
        while not any(int(n) >= len(lines) for n in re.findall(r"worker stats events=(\d+)", w.log(10_000_000))):
            assert w.alive() and time.monotonic() < deadline, w.log()
            time.sleep(0.5)
    finally:
        w.stop()
    assert "is not reachable" not in w.log(10_000_000)[:before], "a warning before the broker went away"
    warnings = [ln for ln in away.splitlines() if "is not reachable" in ln]
    assert 1 <= len(warnings) <= 1 + int(AWAY_S // 30), away[-4000:]
    assert broker.bootstrap in warnings[0] and "make kafka-up" in warnings[0]
    assert "[WARNING]" in warnings[0]
    errors = [ln for ln in away.splitlines() if "[ERROR]" in ln]
    # one per distinct aiokafka message per 30 s, not ~78 a second
    assert len(errors) <= 15, f"{len(errors)} ERROR lines in {AWAY_S:.0f} s:\n" + "\n".join(errors[:40])
