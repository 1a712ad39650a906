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

The app installs it in ``FaultlineApp._new_producer`` (``streams/app.py``).
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from .. import topics as T
from ..producers.publish import PRODUCER_GUARANTEES

log = logging.getLogger("faultline.streams.producer")

#: what the worker's producer always adds to Faust's settings
PRODUCER_SETTINGS: Mapping[str, Any] = PRODUCER_GUARANTEES


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
