"""The worker's Faust producer waits for a broker that is away when it starts
(``streams/faust_producer.start_when_reachable``): a worker or sink whose start-up check
passed and whose broker went away seconds later waits for it instead of dying with
aiokafka's "Unable to bootstrap" (the cluster outage of tests/reliability/test_broker_failures.py
hit a sink restarted 2 s before it)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

import pytest
from aiokafka.errors import KafkaConnectionError

from faultline.streams import faust_producer
from faultline.streams.faust_producer import START_RETRY_CAP_S, START_RETRY_FIRST_S, start_when_reachable


async def test_start_is_tried_again_with_growing_waits_until_the_broker_answers(caplog):
    tries, waits = [], []

    async def start() -> None:
        tries.append(1)
        if len(tries) <= 7:
            raise KafkaConnectionError("Unable to bootstrap from [('127.0.0.1', 1)]")

    async def sleep(s: float) -> None:
        waits.append(s)

    with caplog.at_level(logging.WARNING, logger="faultline.streams.producer"):
        refused = await start_when_reachable(start, "127.0.0.1:1", sleep, lambda: False)
    assert refused == 7 and len(tries) == 8
    assert waits[0] == START_RETRY_FIRST_S and waits == sorted(waits) and max(waits) == START_RETRY_CAP_S
    lines = [r.getMessage() for r in caplog.records]
    assert sum("not reachable while the producer starts" in m and "127.0.0.1:1" in m for m in lines) == 7
    assert "answers again" in lines[-1]


async def test_a_stopping_process_gives_up_with_the_error():
    async def start() -> None:
        raise KafkaConnectionError("Unable to bootstrap")

    async def sleep(s: float) -> None:
        raise AssertionError("no wait once stopping")

    with pytest.raises(KafkaConnectionError):
        await start_when_reachable(start, "x:1", sleep, lambda: True)


def test_other_errors_are_not_retried():
    async def start() -> None:
        raise ValueError("a bad setting")

    with pytest.raises(ValueError):
        asyncio.run(start_when_reachable(start, "x:1", asyncio.sleep, lambda: False))


@pytest.mark.kafka
@pytest.mark.slow
async def test_the_apps_producer_waits_for_a_broker_started_after_it(private_broker, settings, caplog, monkeypatch):
    """The app's own Faust producer, pointed at a broker not started yet: its start waits
    (warning naming the address) and completes once the broker is up."""
    from faultline.streams.app import create_app

    monkeypatch.setattr(faust_producer, "START_RETRY_CAP_S", 2.0)
    b = private_broker(start=False)
    p = create_app(replace(settings, kafka_bootstrap=b.bootstrap), install=False).producer
    with caplog.at_level(logging.WARNING, logger="faultline.streams.producer"):
        starting = asyncio.ensure_future(p.start())
        await asyncio.sleep(4.0)
        assert not starting.done(), starting.exception() if starting.done() else None
        assert any(b.bootstrap in r.getMessage() and "not reachable" in r.getMessage() for r in caplog.records)
        await b.astart()
        await asyncio.wait_for(starting, 90)
    try:
        assert any("answers again" in r.getMessage() for r in caplog.records)
        md = await p.send_and_wait(settings.topic("fl.producer-start-probe"), b"k", b"v", None, None, None)
        assert md.offset >= 0
    finally:
        await p.stop()
