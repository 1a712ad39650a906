"""The worker's Faust producer: acks=all with idempotence, and the topics it declares sized
to the cluster (docs/kafka.md).

Faust's aiokafka producer waits for every in-sync replica (``producer_acks`` -1) but turns
idempotence on only inside transactions (``Producer._settings_extra``). Without it a batch
retried after a broker failure (the leader died after writing it, before answering) is
written twice: a second changelog record (harmless) and a second alert or incident record on
the output topics (collapsed by the store, seen twice by a consumer of the topic).
``idempotent_producer(cls)`` is Faust's producer class with ``acks=all`` and
``enable_idempotence`` always on: the broker de-duplicates a retried batch by producer id
and sequence number, as it does for the collectors' spool (``producers/spool.py``).

The same class sizes the topics Faust declares itself (the tables' changelog topics, and any
topic an agent declares) like ``faultline topics create`` does (``faultline.topics``):
replication raised to ``min(3, brokers)`` (``topic_replication_factor`` is the lower bound),
``min.insync.replicas`` ``min(2, replication - 1)``. On one broker nothing changes.

The same class waits for the broker when it is away while the producer starts
(``start_when_reachable``): the command checked the broker just before (``ensure_topics``),
so a bootstrap refused now is an outage that began in the seconds since, not a wrong address.
Faust's producer starts before its consumer; without this a worker or sink started during
those seconds died with aiokafka's "Unable to bootstrap" traceback (the 3-broker cluster
outage of tests/reliability/test_broker_failures.py, a sink restarted 2 s before it).

The app installs it in ``FaultlineApp._new_producer`` (``streams/app.py``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable, Mapping

from aiokafka.errors import KafkaConnectionError

from .. import topics as T
from ..producers.publish import PRODUCER_GUARANTEES

log = logging.getLogger("faultline.streams.producer")

#: what the worker's producer always adds to Faust's settings
PRODUCER_SETTINGS: Mapping[str, Any] = PRODUCER_GUARANTEES
#: the first wait before bootstrapping again when the broker did not answer at start; doubled
#: after each refusal up to START_RETRY_CAP_S (so the warning below is rate-limited too)
START_RETRY_FIRST_S = 1.0
START_RETRY_CAP_S = 30.0


async def start_when_reachable(start: Callable[[], Awaitable[None]], bootstrap: str,
                               sleep: Callable[[float], Awaitable[None]],
                               stopping: Callable[[], bool]) -> int:
    """``await start()`` until it does not fail with ``KafkaConnectionError``, waiting
    ``sleep(delay)`` between tries (1 s, doubled up to 30 s) with one WARNING per try that
    names the address; gives up quietly when ``stopping()``. Returns the refusals."""
    delay, refused = START_RETRY_FIRST_S, 0
    while True:
        try:
            await start()
            if refused:
                log.warning("Kafka broker at %s answers again: the producer started after %d refused tries",
                            bootstrap, refused, extra={"bootstrap": bootstrap})
            return refused
        except KafkaConnectionError as err:
            refused += 1
            if stopping():
                raise
            log.warning("Kafka broker at %s not reachable while the producer starts (%s); retrying in "
                        "%.0f s, the process waits for it. Start the broker or fix FAULTLINE_KAFKA_BOOTSTRAP.",
                        bootstrap, str(err)[:200], delay, extra={"bootstrap": bootstrap})
        await sleep(delay)
        delay = min(delay * 2, START_RETRY_CAP_S)


def declared_topic(replication: int, brokers: int,
                   config: Mapping[str, Any] | None) -> tuple[int, dict[str, Any]]:
    """Replication and topic config for a topic Faust declares on a cluster of ``brokers``:
    replication ``faultline.topics.auto_replication``, ``min.insync.replicas`` from it
    (a config the declaration sets itself wins)."""
    r = T.auto_replication(replication, brokers)
    return r, {"min.insync.replicas": str(T.min_insync(r)), **(config or {})}


def idempotent_producer(cls: type) -> type:
    """``cls`` (Faust's aiokafka ``Producer``) with acks=all + idempotence outside
    transactions too, declaring topics sized to the cluster. Idempotent: a class already
    made so is returned as is."""
    if getattr(cls, "_fl_idempotent", False):
        return cls

    class IdempotentProducer(cls):  # type: ignore[misc, valid-type]
        _fl_idempotent = True

        def _settings_extra(self) -> Mapping[str, Any]:
            return {**super()._settings_extra(), **PRODUCER_SETTINGS}

        def _new_producer(self) -> Any:
            # Faust's on_start creates the aiokafka producer and awaits its start(); the
            # start it awaits waits for the broker (aiokafka's bootstrap may be called again)
            from faust.transport.drivers.aiokafka import server_list

            producer = super()._new_producer()
            start = producer.start
            where = ",".join(server_list(self.transport.url, self.transport.default_port))

            async def start_patiently() -> None:
                await start_when_reachable(start, where, self.sleep, lambda: self.should_stop)

            producer.start = start_patiently
            return producer

        async def create_topic(self, topic: str, partitions: int, replication: int, *,
                               config: Mapping[str, Any] | None = None, **kw: Any) -> None:
            brokers = len(self._ensure_producer().client.cluster.brokers())
            r, cfg = declared_topic(replication, brokers, config)
            if r != replication:
                log.info("declaring %s with replication %d (%d brokers), min.insync.replicas %s",
                         topic, r, brokers, cfg["min.insync.replicas"])
            await super().create_topic(topic, partitions, r, config=cfg, **kw)

    # no renaming after the fact: mode registers a Service subclass's tasks under its
    # module + qualname when the class is created (Service._init_subclass_tasks)
    return IdempotentProducer
