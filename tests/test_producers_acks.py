"""Every Kafka producer faultline makes is acks=all with idempotence (issue 18).

Each construction path is built here without a broker and its *actual* aiokafka producer is
inspected: what the producer's sender will ask of the broker (``Sender._acks``: -1 is "all")
and whether it has a transaction manager (aiokafka makes one exactly when
``enable_idempotence`` is on: producer id + sequence numbers). The paths:

- ``Publisher`` (collectors without a spool, the simulator, replay ``--to-prefix``, the SDK);
- ``SpoolingPublisher`` (the collectors' on-disk spool), through its own ``_ensure_producer``
  with ``start`` stubbed (no broker);
- the notifier's dead-letter producer (``Notifier.new_producer``);
- ``faultline replay --to-prefix`` as the command runs it (its ``Publisher``, captured);
- the worker's Faust producer (the kwargs Faust hands to aiokafka, and the aiokafka producer
  it builds);
- ``new_producer`` itself refuses a weaker setting.

Reverting any of them (dropping ``enable_idempotence``, ``acks=1``) fails its test.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import pytest
from aiokafka import AIOKafkaProducer

from faultline.config import Settings
from faultline.producers import publish
from faultline.producers.publish import PRODUCER_GUARANTEES, Publisher, new_producer
from faultline.producers.spool import SpoolingPublisher


def guarantees(p: AIOKafkaProducer) -> tuple[int, bool]:
    """(acks the sender requests, idempotent) of a constructed aiokafka producer."""
    assert isinstance(p, AIOKafkaProducer), type(p)
    return p._sender._acks, p._txn_manager is not None   # noqa: SLF001 - what aiokafka will do


ALL_IDEMPOTENT = (-1, True)


@pytest.fixture
def settings(tmp_path):
    # a port nothing listens on: no path below may need a broker
    return replace(Settings(), kafka_bootstrap="127.0.0.1:1", spool_dir=str(tmp_path / "spool"))


def test_the_guarantees_are_acks_all_with_idempotence():
    assert PRODUCER_GUARANTEES == {"acks": "all", "enable_idempotence": True}


async def test_new_producer_is_acks_all_idempotent_and_cannot_be_weakened(settings):
    p = new_producer(settings, linger_ms=5)
    assert guarantees(p) == ALL_IDEMPOTENT
    for bad in ({"acks": 1}, {"enable_idempotence": False}, {"acks": 0, "enable_idempotence": False}):
        with pytest.raises(ValueError, match="fixed"):
            new_producer(settings, **bad)


async def test_publisher(settings):
    pub = Publisher(settings)
    assert guarantees(pub._producer) == ALL_IDEMPOTENT   # noqa: SLF001
    pub = Publisher(settings, compression=None, linger_ms=0, max_batch_bytes=1 << 16)
    assert guarantees(pub._producer) == ALL_IDEMPOTENT   # noqa: SLF001


async def test_spooling_publisher(settings, monkeypatch):
    """The spool's ONE producer, as ``_ensure_producer`` builds it (start stubbed)."""
    made: list[AIOKafkaProducer] = []

    async def start(self):
        made.append(self)

    monkeypatch.setattr(AIOKafkaProducer, "start", start)
    pub = SpoolingPublisher(settings)
    p = await pub._ensure_producer()   # noqa: SLF001
    assert made == [p]
    assert guarantees(p) == ALL_IDEMPOTENT


async def test_notifier_dead_letter_producer(settings):
    from faultline.notify.config import NotifySettings
    from faultline.notify.service import Notifier

    n = Notifier(settings, NotifySettings(webhook_url="http://127.0.0.1:1/hook"), group_id="t-notify")
    assert guarantees(n.new_producer()) == ALL_IDEMPOTENT


def test_notifier_run_makes_its_producer_through_new_producer():
    """``run`` must use ``new_producer`` (not an AIOKafkaProducer of its own)."""
    import inspect

    from faultline.notify import service

    src = inspect.getsource(service.Notifier.run)
    assert "self.new_producer()" in src and "AIOKafkaProducer(" not in src


async def test_replay_to_prefix(settings, monkeypatch):
    """``faultline replay --to-prefix`` as the command runs it: its producer, captured at start."""
    from faultline.commands import replay

    made: list[AIOKafkaProducer] = []

    class Stop(Exception):
        pass

    async def start(self):
        made.append(self._producer)   # noqa: SLF001
        raise Stop

    monkeypatch.setattr(publish.Publisher, "start", start)
    args = argparse.Namespace(to_prefix="again.", out=None)
    with pytest.raises(Stop):
        await replay._run(settings, args, 0, 1)   # noqa: SLF001
    assert len(made) == 1 and guarantees(made[0]) == ALL_IDEMPOTENT


async def test_worker_faust_producer(settings):
    """The worker's Faust producer: the kwargs Faust passes to aiokafka, and the producer it
    builds from them (``_new_producer`` is what ``start`` calls)."""
    from faultline.streams.app import create_app

    p = create_app(settings, install=False).producer
    kw = {**p._settings_default(), **p._settings_auth(), **p._settings_extra()}   # noqa: SLF001
    assert kw["acks"] in ("all", -1) and kw["enable_idempotence"] is True
    assert guarantees(p._new_producer()) == ALL_IDEMPOTENT   # noqa: SLF001
