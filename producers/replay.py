"""Replay: read an event-time range back from the input topics, exactly, from every partition.

Events are produced with their event time as the Kafka timestamp (``Publisher.send``), so
Kafka's offsets-for-times finds where a range starts. Within a partition timestamps are
only *nearly* ordered (collectors deliver a few seconds late), so reading starts at
``since - slack`` and every record is filtered on its own ``ts``; a partition is done at
the end offset it had when the replay began, or once its timestamps pass ``until + slack``.

``job_scope`` narrows a range to what one incident needs: the job's own events, its nodes'
events, the fabric ports and storage paths of those nodes (from ``inventory.topology``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import AsyncIterator, Iterable

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaConnectionError

from ..config import Settings
from ..schemas import INPUT_TOPICS
from .publish import connect_failure

log = logging.getLogger("faultline.replay")

#: how far a record's timestamp may trail its offset order (delivery delay, clock skew)
DEFAULT_SLACK_MS = 60_000


class RangeTooOld(LookupError):
    """Part of the range is older than what the topics still retain."""


@dataclass
class Record:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes


@dataclass
class RangeStats:
    partitions: int = 0
    read: int = 0
    kept: int = 0
    #: earliest timestamp still on each topic (for the "older than retention" message)
    earliest_ts: dict[str, int | None] = field(default_factory=dict)


async def read_range(settings: Settings, since: int, until: int, *, topics: Iterable[str] = INPUT_TOPICS,
                     slack_ms: int = DEFAULT_SLACK_MS, stats: RangeStats | None = None,
                     strict_retention: bool = False, batch: int = 5000) -> AsyncIterator[list[Record]]:
    """Yield batches of records whose timestamp is in ``[since, until]`` from every partition
    of ``topics`` (names without prefix; the settings' prefix is applied)."""
    stats = stats if stats is not None else RangeStats()
    consumer = AIOKafkaConsumer(**settings.kafka_kwargs(), enable_auto_commit=False, group_id=None,
                                auto_offset_reset="earliest", max_poll_records=batch)
    try:
        await consumer.start()
    except KafkaConnectionError:
        await consumer.stop()
        raise await connect_failure(settings) from None   # names the cause: down, password, CA, protocol
    try:
        tps: list[TopicPartition] = []
        names = {settings.topic(t): t for t in topics}
        for full in names:
            parts = consumer.partitions_for_topic(full)
            if parts is None:
                await consumer._client.force_metadata_update()  # noqa: SLF001 - first lookup
                parts = consumer.partitions_for_topic(full)
            if not parts:
                log.warning("topic %s does not exist; skipped", full, extra={"topic": full})
                continue
            tps.extend(TopicPartition(full, p) for p in sorted(parts))
        if not tps:
            return
        stats.partitions = len(tps)
        consumer.assign(tps)
        begin = await consumer.beginning_offsets(tps)
        end = await consumer.end_offsets(tps)
        starts = await consumer.offsets_for_times({tp: max(0, since - slack_ms) for tp in tps})
        first_ts = await consumer.offsets_for_times({tp: 0 for tp in tps})
        for tp in tps:
            ots = first_ts.get(tp)
            cur = stats.earliest_ts.get(tp.topic)
            if ots is not None:
                stats.earliest_ts[tp.topic] = ots.timestamp if cur is None else min(cur, ots.timestamp)
        oldest = [ts for ts in stats.earliest_ts.values() if ts is not None]
        if strict_retention and oldest and since < min(oldest) and any(begin[tp] > 0 for tp in tps):
            raise RangeTooOld(_too_old_message(since, min(oldest)))
        stop: dict[TopicPartition, int] = {}
        for tp in tps:
            off = starts.get(tp)
            start = max(off.offset, begin[tp]) if off is not None else end[tp]
            if start < end[tp]:
                stop[tp] = end[tp]
                starts_at = start
                consumer.seek(tp, starts_at)
        for tp in tps:
            if tp not in stop:
                consumer.pause(tp)
        horizon = until + slack_ms
        while stop:
            got = await consumer.getmany(*stop.keys(), timeout_ms=1000, max_records=batch)
            out: list[Record] = []
            for tp, msgs in got.items():
                end_off = stop.get(tp)
                if end_off is None:
                    continue
                for m in msgs:
                    if m.offset >= end_off or m.timestamp > horizon:
                        del stop[tp]
                        break
                    stats.read += 1
                    if since <= m.timestamp <= until:
                        out.append(Record(names.get(tp.topic, tp.topic), tp.partition, m.offset,
                                          m.timestamp, m.key, m.value))
                    if m.offset >= end_off - 1:
                        del stop[tp]
                        break
                if tp not in stop:
                    consumer.pause(tp)
            if not got:  # transaction markers or compaction can leave the last offsets unread
                for tp in list(stop):
                    if await consumer.position(tp) >= stop[tp]:
                        del stop[tp]
                        consumer.pause(tp)
            if out:
                stats.kept += len(out)
                yield out
    finally:
        await consumer.stop()


def _too_old_message(since: int, earliest: int) -> str:
    from datetime import datetime, timezone

    fmt = lambda ms: datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="seconds")  # noqa: E731
    return (f"the range starts at {fmt(since)} but the oldest event still on the topics is from "
            f"{fmt(earliest)}: older events were deleted by retention. Replay from {fmt(earliest)}, "
            "or raise retention with `faultline topics create --retention TOPIC=HOURS` for next time")


@dataclass
class JobScope:
    """What one job's diagnosis needs: its events, its nodes, their ports and storage paths."""

    job: str
    nodes: set[str] = field(default_factory=set)
    ports: set[tuple[str, str]] = field(default_factory=set)   # (device, port)
    devices_by_node: set[str] = field(default_factory=set)
    #: the switches the job's nodes link to: every port of theirs (uplinks too) can be a
    #: hypothesis of the job's diagnosis (a leaf's uplink down is a network_link alternative)
    switches: set[str] = field(default_factory=set)
    paths: set[str] = field(default_factory=set)
    first_ts: int | None = None
    last_ts: int | None = None

    def learn(self, ev: dict) -> None:
        """Feed sched.job / inventory.topology events of the range (pass 1)."""
        kind = ev.get("kind")
        if kind == "sched.job" and ev.get("job") == self.job:
            self.nodes.update(ev.get("data", {}).get("nodes") or [])
            ts = ev.get("ts")
            if isinstance(ts, int):
                self.first_ts = ts if self.first_ts is None else min(self.first_ts, ts)
                self.last_ts = ts if self.last_ts is None else max(self.last_ts, ts)

    def learn_topology(self, ev: dict) -> None:
        if ev.get("kind") == "inventory.topology" and ev.get("node") in self.nodes:
            data = ev.get("data") or {}
            for link in data.get("links") or []:
                self.ports.add((link.get("switch"), str(link.get("port"))))
                self.switches.add(link.get("switch"))
            for st in data.get("storage") or []:
                self.paths.add(st.get("path"))

    def keeps(self, ev: dict) -> bool:
        """Does the job's diagnosis need this event?"""
        if ev.get("job") == self.job:
            return True
        kind = ev.get("kind", "")
        node = ev.get("node")
        if kind.startswith("net."):
            data = ev.get("data") or {}
            if (data.get("device"), str(data.get("port"))) in self.ports or data.get("device") in self.switches:
                return True
            return node in self.nodes
        if kind.startswith("storage."):
            return node in self.nodes
        if kind == "sched.job":
            return False  # other jobs' lifecycles
        return node in self.nodes

    def keeps_raw(self, raw: bytes) -> bool:
        """``keeps`` on wire bytes; malformed input is kept, to be replayed (and dead-lettered) as it was."""
        try:
            ev = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return True
        return not isinstance(ev, dict) or self.keeps(ev)
