"""Topics the worker needs, created before Faust starts (Faust itself only declares the
topics it owns), and the broker reachability check behind `faultline worker`'s error."""

from __future__ import annotations

import asyncio
import logging

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaConnectionError, KafkaError, TopicAlreadyExistsError

from ..config import Settings
from ..schemas.registry import INPUT_TOPICS, OUTPUT_TOPICS

log = logging.getLogger("faultline.streams.topics")

#: internal topics of the Faust app (prefixed like the others)
SIGNALS = "fl.internal.signals"   # detector signals, key = resource (node, or port/path/segment subject)
JOBS = "fl.internal.jobs"         # signals and ticks re-keyed by job, co-partitioned with fl.sched/fl.runtime
INTERNAL_TOPICS: tuple[str, ...] = (SIGNALS, JOBS)


class BrokerUnreachable(ConnectionError):
    pass


def unreachable_message(bootstrap: str) -> str:
    return (f"Kafka broker not reachable at {bootstrap}: run `make kafka-up` or set "
            "FAULTLINE_KAFKA_BOOTSTRAP")


async def ensure_topics(settings: Settings, *, timeout_s: float = 10.0) -> list[str]:
    """Create every input, output and internal topic that does not exist yet; return the
    ones created. Raises ``BrokerUnreachable`` when the broker does not answer."""
    admin = AIOKafkaAdminClient(**settings.kafka_kwargs(), request_timeout_ms=int(timeout_s * 1000))
    try:
        await asyncio.wait_for(admin.start(), timeout_s)
    except (KafkaConnectionError, asyncio.TimeoutError, OSError):
        try:
            await admin.close()
        except Exception:  # noqa: BLE001 - closing a half-open client
            pass
        raise BrokerUnreachable(unreachable_message(settings.kafka_bootstrap)) from None
    try:
        existing = set(await admin.list_topics())
        retention_ms = str(settings.topic_retention_hours * 3600 * 1000)
        wanted = []
        for name in INPUT_TOPICS + OUTPUT_TOPICS + INTERNAL_TOPICS:
            full = settings.topic(name)
            if full in existing:
                continue
            cfg = {"retention.ms": retention_ms}
            wanted.append(NewTopic(full, settings.topic_partitions, settings.topic_replication,
                                   topic_configs=cfg))
        created = []
        if wanted:
            try:
                await admin.create_topics(wanted)
                created = [t.name for t in wanted]
            except TopicAlreadyExistsError:
                pass  # another worker won the race
            except KafkaError as e:
                # create_topics reports per-topic errors; "already exists" races are fine
                if "TopicAlreadyExists" not in repr(e):
                    raise
        if created:
            log.info("topics created", extra={"topics": created})
        return created
    finally:
        await admin.close()
