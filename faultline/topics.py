"""The contract's Kafka topics: plan them from settings, create/list/delete via aiokafka's admin.

``plan(settings)`` says what should exist (name with ``topic_prefix``, partitions,
replication, retention); ``create_topics`` makes it so and is idempotent: a topic that
already exists is left alone and reported with its actual partition count.

Replication (docs/kafka.md): an explicit ``replication`` (``topics create --replication N``)
is taken as given; otherwise ``create_topics`` uses the larger of the ``topic_replication``
setting and ``min(3, brokers in the cluster)``, so a 3-broker cluster gets 3 replicas without
a flag. ``min.insync.replicas`` follows the replication: ``min(2, replication - 1)``, at least 1
(3 replicas: 2, so acks=all survives one broker down and refuses a write only one broker has).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaConnectionError, KafkaError

from .config import Settings
from .producers.publish import connect_failure
from .schemas import ALERTS, ALL_TOPICS, DEADLETTER, FINDINGS, INCIDENTS, INPUT_TOPICS, TOPIC_KEYS

log = logging.getLogger("faultline.topics")

#: retention (hours) of the output topics; input topics use ``Settings.topic_retention_hours``.
#: Dead letters live longest so a producer bug can be investigated and the input replayed.
OUTPUT_RETENTION_HOURS: dict[str, int] = {
    ALERTS: 30 * 24,
    INCIDENTS: 90 * 24,
    FINDINGS: 90 * 24,
    DEADLETTER: 30 * 24,
}
#: output topics are small: fewer partitions than the input default
OUTPUT_PARTITIONS: dict[str, int] = {ALERTS: 3, INCIDENTS: 3, FINDINGS: 1, DEADLETTER: 1}

TOPIC_EXISTS = 36  # Kafka error code TOPIC_ALREADY_EXISTS
UNKNOWN_TOPIC = 3
#: replication chosen from the cluster size when none is given: as many brokers as there are, up to this
AUTO_REPLICATION_MAX = 3
#: min.insync.replicas never above this (a write acks=all must reach this many replicas)
MIN_INSYNC_MAX = 2


def auto_replication(setting: int, brokers: int) -> int:
    """Replication when none is given: the setting, raised to ``min(3, brokers)``."""
    return max(setting, min(AUTO_REPLICATION_MAX, brokers))


def min_insync(replication: int) -> int:
    """``min.insync.replicas`` for ``replication``: one replica may be down, at most 2 required."""
    return max(1, min(MIN_INSYNC_MAX, replication - 1))


class TopicsError(RuntimeError):
    """A topic operation failed; the message names the topic/broker and what to do."""


class BrokerDown(TopicsError):
    pass


def unreachable(bootstrap: str) -> str:
    return (f"Kafka broker not reachable at {bootstrap}: run `make kafka-up` or set "
            "FAULTLINE_KAFKA_BOOTSTRAP")


@dataclass(frozen=True)
class TopicSpec:
    """One topic as it should exist. ``base`` is the contract name (``fl.gpu``)."""

    base: str
    name: str
    partitions: int
    replication: int
    retention_hours: float
    key: str
    configs: dict[str, str] = field(default_factory=dict)
    #: True when no replication was asked for: ``create_topics`` raises it to the cluster's size
    replication_auto: bool = False

    @property
    def retention_ms(self) -> int:
        return -1 if self.retention_hours < 0 else int(self.retention_hours * 3_600_000)

    def new_topic(self) -> NewTopic:
        cfg = {"retention.ms": str(self.retention_ms), "cleanup.policy": "delete",
               "min.insync.replicas": str(min_insync(self.replication)), **self.configs}
        return NewTopic(self.name, self.partitions, self.replication, topic_configs=cfg)


def parse_retention(items: Iterable[str]) -> dict[str, float]:
    """``["fl.gpu=24", "fl.deadletter=-1"]`` -> ``{"fl.gpu": 24.0, ...}`` (-1 = keep forever)."""
    out: dict[str, float] = {}
    for item in items:
        name, sep, hours = item.partition("=")
        name = name.strip()
        if not sep or name not in ALL_TOPICS:
            raise TopicsError(f"--retention {item!r}: expected TOPIC=HOURS with TOPIC one of "
                              f"{', '.join(ALL_TOPICS)}")
        try:
            h = float(hours)
        except ValueError:
            raise TopicsError(f"--retention {item!r}: HOURS must be a number (-1 keeps forever)") from None
        if h <= 0 and h != -1:
            raise TopicsError(f"--retention {item!r}: HOURS must be > 0, or -1 to keep forever")
        out[name] = h
    return out


def plan(settings: Settings, *, partitions: int | None = None, replication: int | None = None,
         retention_hours: Mapping[str, float] | None = None,
         topics: Iterable[str] = ALL_TOPICS) -> list[TopicSpec]:
    """The topics of the contract as they should exist under ``settings.topic_prefix``.

    ``partitions`` overrides the partition count of every topic (default: input topics
    ``settings.topic_partitions``, outputs ``OUTPUT_PARTITIONS``); ``replication``
    defaults to ``settings.topic_replication`` (``replication_auto``: ``create_topics`` raises
    it to ``min(3, brokers)``).
    """
    retention_hours = retention_hours or {}
    repl = replication or settings.topic_replication
    auto = not replication
    specs = []
    for base in topics:
        if base in INPUT_TOPICS:
            parts = partitions or settings.topic_partitions
            hours = retention_hours.get(base, settings.topic_retention_hours)
        else:
            parts = partitions or OUTPUT_PARTITIONS[base]
            hours = retention_hours.get(base, OUTPUT_RETENTION_HOURS[base])
        specs.append(TopicSpec(base=base, name=settings.topic(base), partitions=parts,
                               replication=repl, retention_hours=hours, key=TOPIC_KEYS[base],
                               replication_auto=auto))
    return specs


async def _admin(settings: Settings, timeout_ms: int) -> AIOKafkaAdminClient:
    admin = AIOKafkaAdminClient(**settings.kafka_kwargs(), request_timeout_ms=timeout_ms)
    try:
        await asyncio.wait_for(admin.start(), timeout_ms / 1000)
    except (KafkaConnectionError, asyncio.TimeoutError, OSError):
        await admin.close()
        raise BrokerDown(str(await connect_failure(settings))) from None
    return admin


async def existing_topics(admin: AIOKafkaAdminClient) -> dict[str, int]:
    """name -> partition count, for every topic on the cluster (internal ones excluded).

    Uses the metadata of *all* topics: describing a named topic that is missing would
    auto-create it on a broker with ``auto.create.topics.enable``.
    """
    names = [n for n in await admin.list_topics() if not n.startswith("__")]
    if not names:
        return {}
    out = {}
    for d in await admin.describe_topics(names):
        if d["error_code"] == 0:
            out[d["topic"]] = len(d["partitions"])
    return out


async def create_topics(settings: Settings, specs: list[TopicSpec] | None = None,
                        timeout_ms: int = 15_000) -> dict[str, str]:
    """Create the planned topics; idempotent. Returns name -> ``created`` | ``exists (N partitions)``."""
    specs = plan(settings) if specs is None else specs
    admin = await _admin(settings, timeout_ms)
    try:
        specs = await _fit_cluster(admin, settings, specs)
        resp = await admin.create_topics([s.new_topic() for s in specs], timeout_ms=timeout_ms)
        result: dict[str, str] = {}
        errors = []
        exists = []
        for name, code, msg in resp.topic_errors:
            if code == 0:
                result[name] = "created"
            elif code == TOPIC_EXISTS:
                exists.append(name)
            else:
                errors.append(f"{name}: {msg or code}")
        if exists:
            have = await existing_topics(admin)
            for name in exists:
                result[name] = f"exists ({have.get(name, '?')} partitions)"
        if errors:
            raise TopicsError("could not create " + "; ".join(errors))
        log.info("topics ensured", extra={"topics": result})
        return {s.name: result.get(s.name, "?") for s in specs}
    except KafkaError as e:
        raise TopicsError(f"creating topics on {settings.kafka_bootstrap} failed: {e}") from None
    finally:
        await admin.close()


async def broker_count(admin: AIOKafkaAdminClient) -> int:
    """Brokers the cluster's metadata names (aiokafka's public ``describe_cluster``)."""
    return len((await admin.describe_cluster())["brokers"])


async def _fit_cluster(admin: AIOKafkaAdminClient, settings: Settings,
                       specs: list[TopicSpec]) -> list[TopicSpec]:
    """``specs`` with automatic replication raised to the cluster's size; a replication the
    cluster cannot hold is refused with what to do (the broker's own error names neither)."""
    n = await broker_count(admin)
    out = []
    for s in specs:
        if s.replication_auto:
            s = replace(s, replication=auto_replication(s.replication, n))
        if s.replication > n:
            raise TopicsError(f"{s.name}: replication {s.replication} needs {s.replication} brokers, "
                              f"{settings.kafka_bootstrap} has {n}: pass --replication {n} or lower "
                              "FAULTLINE_TOPIC_REPLICATION")
        out.append(s)
    return out


async def list_topics(settings: Settings, timeout_ms: int = 15_000) -> list[dict]:
    """The contract's topics under the prefix: exists?, partitions, retention hours, key."""
    admin = await _admin(settings, timeout_ms)
    try:
        have = await existing_topics(admin)
        names = [settings.topic(t) for t in ALL_TOPICS]
        present = [n for n in names if n in have]
        retention: dict[str, float] = {}
        if present:
            res = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, n, {"retention.ms": None}) for n in present])
            for r in res:
                for (_code, _msg, _type, name, entries) in r.resources:
                    for e in entries:
                        if e[0] == "retention.ms":
                            ms = int(e[1])
                            retention[name] = -1 if ms < 0 else ms / 3_600_000
        return [
            {"topic": n, "exists": n in have, "partitions": have.get(n),
             "retention_hours": retention.get(n), "key": TOPIC_KEYS[base]}
            for base, n in zip(ALL_TOPICS, names)
        ]
    finally:
        await admin.close()


async def delete_topics(settings: Settings, timeout_ms: int = 15_000) -> list[str]:
    """Delete the contract's topics under the prefix that exist; returns the deleted names."""
    admin = await _admin(settings, timeout_ms)
    try:
        have = await existing_topics(admin)
        names = [settings.topic(t) for t in ALL_TOPICS if settings.topic(t) in have]
        if names:
            resp = await admin.delete_topics(names, timeout_ms=timeout_ms)
            bad = [f"{t}: error {c}" for t, c in resp.topic_error_codes if c not in (0, UNKNOWN_TOPIC)]
            if bad:
                raise TopicsError("could not delete " + "; ".join(bad))
        return names
    finally:
        await admin.close()
