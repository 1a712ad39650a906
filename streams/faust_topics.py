"""Topics the worker needs, created before Faust starts (Faust itself only declares the
topics it owns), and the broker reachability check behind `faultline worker`'s error."""

from __future__ import annotations

import logging

from aiokafka.admin import NewTopic

from .. import topics as T
from ..config import Settings
from ..schemas.registry import INPUT_TOPICS

log = logging.getLogger("faultline.streams.topics")

#: internal topics of the Faust app (prefixed like the others)
SIGNALS = "fl.internal.signals"   # detector signals, key = signal index key (node:, port:, path:, segment:)
JOBS = "fl.internal.jobs"         # signals pushed to jobs and watermark ticks, key = job;
                                  # co-partitioned with fl.sched / fl.runtime
INTERNAL_TOPICS: tuple[str, ...] = (SIGNALS, JOBS)
#: the internal topics hold transient records only
INTERNAL_RETENTION_MS = 24 * 3600 * 1000


class BrokerUnreachable(ConnectionError):
    pass


class TopicLayoutError(RuntimeError):
    pass


def unreachable_message(bootstrap: str) -> str:
    return T.unreachable(bootstrap)


async def ensure_topics(settings: Settings, *, timeout_ms: int = 15_000) -> int:
    """Create the contract topics (``faultline.topics``) and the worker's internal topics
    when missing, replicated like the contract's (``min(3, brokers)`` replicas unless
    ``topic_replication`` asks for more; ``min.insync.replicas`` ``min(2, replication - 1)``).
    Returns the partition count of the input topics, which the worker must use (job-keyed
    topics and the job table are co-partitioned).

    Raises ``BrokerUnreachable`` when the broker does not answer, ``TopicLayoutError`` when
    the input topics disagree on their partition count.
    """
    try:
        await T.create_topics(settings, timeout_ms=timeout_ms)
        admin = await T._admin(settings, timeout_ms)
    except T.BrokerDown as e:
        raise BrokerUnreachable(str(e)) from None
    try:
        have = await T.existing_topics(admin)
        counts = {settings.topic(t): have.get(settings.topic(t)) for t in INPUT_TOPICS}
        distinct = {c for c in counts.values() if c}
        if len(distinct) > 1:
            raise TopicLayoutError(
                "input topics have different partition counts (" +
                ", ".join(f"{k}={v}" for k, v in counts.items()) +
                "): job- and node-keyed topics must be co-partitioned; recreate them with "
                "`faultline topics` and one FAULTLINE_TOPIC_PARTITIONS")
        parts = distinct.pop() if distinct else settings.topic_partitions
        # sized like `faultline topics create`: min(3, brokers) replicas, min ISR min(2, r-1)
        repl = T.auto_replication(settings.topic_replication, await T.broker_count(admin))
        want = [NewTopic(settings.topic(n), parts, repl,
                         topic_configs={"retention.ms": str(INTERNAL_RETENTION_MS),
                                        "min.insync.replicas": str(T.min_insync(repl))})
                for n in INTERNAL_TOPICS if settings.topic(n) not in have]
        if want:
            await admin.create_topics(want, timeout_ms=timeout_ms)
        for n in INTERNAL_TOPICS:
            c = have.get(settings.topic(n))
            if c is not None and c != parts:
                raise TopicLayoutError(
                    f"internal topic {settings.topic(n)} has {c} partitions, the input topics {parts}: "
                    "delete it (it holds only transient records) and restart the worker")
        return parts
    finally:
        await admin.close()
