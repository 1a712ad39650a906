"""The sink resumes after the whole Kafka cluster was away (issue 18, "Broker failures").

Session 11's CI: a `faultline sink` started 11 s before every broker stopped for 72 s never
stored another record once the cluster was back (14,374 records behind after 60 s, nothing in
its store after its restart) while the analysis workers caught up. An aiokafka consumer can
stay wedged after a whole-cluster outage (aio-libs/aiokafka#703). Here, on a private broker
(one broker: stopping it is a whole-cluster outage), an in-process ``SinkConsumer`` on a real
chDB store, with the broker stopped 3 s after the sink's start: every record produced before
and after the outage must be stored once the broker is back. This scenario did not wedge the
consumer here (session 12: it passed 3 of 3, broker stopped 0, 3 and 12 s after the start, with
the guard disabled), so it guards the resume path only; what proves the guard is
``test_a_wedged_consumer_is_replaced_and_nothing_is_lost`` (a consumer that stops fetching),
which fails without it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace

import pytest

from faultline.producers.simulate import simulate
from faultline.schemas.codec import now_ms
from faultline.sinks.store import open_store
from faultline.sinks.writer import SinkWriter
from faultline.streams.faust_harness import group_lag, produce, sink_group_id
from faultline.streams.faust_sink import SinkConsumer
from faultline.streams.faust_topics import ensure_topics

from test_sink_group import layer_counts

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

OUTAGE_S = 20.0
#: how long after the broker is back every record must be stored
RESUME_S = 90.0


def prepare(s, app: str, n: int, caplog):
    """Topics, ``n`` events produced before the sink starts and ``n`` others for later, the
    sink's group, its store, and the sink's log captured."""
    asyncio.run(ensure_topics(s))
    before, after = _lines(1, n), _lines(2, n)
    asyncio.run(produce(s, before))
    caplog.set_level(logging.INFO, logger="faultline.streams.sink")
    return before, after, sink_group_id(s, app), open_store(s)


def run_and_count(store, scenario, n: int, why=lambda: "") -> None:
    """Run the sink ``scenario``, then every one of the ``n`` events is in the store once
    under FINAL; the store is closed either way."""
    try:
        asyncio.run(scenario())
        assert layer_counts(store) == (n, n), why()
    finally:
        store.close()


def _lines(seed: int, n: int) -> list[bytes]:
    start = (now_ms() - 90 * 60_000) // 60_000 * 60_000
    return simulate("gpu-xid79", seed=seed, nodes=2, hours=1.0, start_ms=start)[0][:n]


def test_sink_resumes_after_the_whole_cluster_was_away(private_broker, tmp_path, settings, caplog):
    down_after_s = 3.0
    broker = private_broker()
    s = replace(settings, kafka_bootstrap=broker.bootstrap, topic_partitions=3,
                store_path=str(tmp_path / "store"))
    before, after, group, store = prepare(s, "outage", 3_000, caplog)
    timeline: list[str] = []
    t0 = time.monotonic()

    def mark(what: str) -> None:
        timeline.append(f"{time.monotonic() - t0:.1f}s {what}")

    async def scenario() -> None:
        sink = SinkConsumer(s, SinkWriter(store), group_id=group, max_rows=2_000, within_s=0.3, retry_cap_s=2.0)
        task = asyncio.create_task(sink.run())
        mark("sink started")
        try:
            await asyncio.sleep(down_after_s)
            await broker.astop()
            mark(f"broker down (sink stored {sink.stored})")
            await asyncio.sleep(OUTAGE_S)
            await broker.astart()
            mark("broker back")
            await produce(s, after)
            mark("produced after the outage")
            deadline = time.monotonic() + RESUME_S
            lag = None
            while time.monotonic() < deadline and not task.done():
                try:
                    lag = await group_lag(s, group)
                except Exception as e:  # noqa: BLE001 - the broker may still be electing
                    lag = f"{type(e).__name__}"
                if lag == 0:
                    break
                await asyncio.sleep(1.0)
            mark(f"lag {lag}, sink stored {sink.stored}, task done {task.done()}")
            assert lag == 0, "the sink did not catch up after the outage:\n" + "\n".join(timeline) \
                + "\n" + caplog.text[-6000:]
        finally:
            await sink.close(15)
            await asyncio.wait_for(task, 30)

    run_and_count(store, scenario, len(before) + len(after), lambda: "\n".join(timeline))


def test_stall_guard_fires_only_after_silence_with_records_waiting():
    from faultline.streams.faust_sink import StallGuard

    now = [100.0]
    g = StallGuard(stall_s=30, every_s=10, clock=lambda: now[0])
    now[0] += 29.9
    assert not g.due(), "silent for less than stall_s"
    now[0] += 0.2
    assert g.due()
    assert not g.due(), "asked again within every_s"
    now[0] += 10
    assert g.due()
    g.progressed()
    now[0] += 29
    assert not g.due(), "records arrived: the silence starts again"
    # lag: end - committed per partition, a partition never committed counts from 0
    assert StallGuard.behind({"a": 10, "b": 5}, {"a": 10, "b": 5}) == 0
    assert StallGuard.behind({"a": 10, "b": 5}, {"a": 7}) == 8
    assert StallGuard.behind({"a": 3}, {"a": 9}) == 0


def test_a_wedged_consumer_is_replaced_and_nothing_is_lost(settings, tmp_path, caplog):
    """A consumer that stops fetching while records wait (here: its partitions paused through
    aiokafka's public ``pause``, what a wedged fetcher looks like from outside) is replaced
    after ``stall_s`` of silence; the new one resumes from the committed offsets and stores
    the rest. A sink that is merely caught up is never replaced."""
    from faultline.streams.faust_sink import StallGuard

    s = replace(settings, topic_partitions=3, store_path=str(tmp_path / "store"))
    before, after, group, store = prepare(s, "wedge", 2_000, caplog)

    async def scenario() -> None:
        sink = SinkConsumer(s, SinkWriter(store), group_id=group, max_rows=1_000, within_s=0.3)
        sink.guard = StallGuard(stall_s=3.0, every_s=1.0)
        task = asyncio.create_task(sink.run())
        try:
            deadline = time.monotonic() + 60
            while sink.stored < len(before) or await group_lag(s, group) != 0:
                assert time.monotonic() < deadline and not task.done(), caplog.text[-4000:]
                await asyncio.sleep(0.5)
            await asyncio.sleep(6.0)   # caught up and silent for twice stall_s
            assert sink.consumer_restarts == 0, "a caught-up sink was replaced"
            wedged = sink.consumer
            wedged.pause(*wedged.assignment())
            await produce(s, after)
            deadline = time.monotonic() + 60
            while await group_lag(s, group) != 0:
                assert time.monotonic() < deadline and not task.done(), caplog.text[-4000:]
                await asyncio.sleep(0.5)
            assert sink.consumer is not wedged and sink.consumer_restarts == 1, caplog.text[-4000:]
        finally:
            await sink.close(15)
            await asyncio.wait_for(task, 30)

    run_and_count(store, scenario, len(before) + len(after))
    said = [r.getMessage() for r in caplog.records if "replacing its Kafka consumer" in r.getMessage()]
    assert len(said) == 1 and "records wait on its partitions" in said[0], caplog.text[-4000:]
