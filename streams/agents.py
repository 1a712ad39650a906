"""Faust agents, tables and timers of the faultline worker (``install(app, settings)``).

Thin shells over the pure core (``streams.faust_core`` adapts it): decode in batches,
dead-letter bad input, de-duplicate, run detectors / correlation, write outputs. The data
flow and why it works with several workers sharing partitions is drawn in
``docs/streams.md`` ("Faust app").

State (all changelog-backed, in-memory store rebuilt from the changelog at start):

- ``nodes``  Table, key = Kafka key of the node topics (node, or switch for fl.net):
  detector state of that key plus the last offset applied per source partition.
- ``jobs``   Table, key = job: the job's record, signals received, last incident emitted.
- ``views``  GlobalTable (every worker has all of it), key ``topo:<node>``,
  ``ver:<node>``, ``alloc:<job>``: topology, versions, allocation.
- ``signals`` GlobalTable, key = resource (``node:<n>`` ..., ``port:<dev>/<port>``,
  ``path:<p>``, ``segment:<s>``): recent signals on that resource.

Table writes name their partition explicitly (the partition the key's events come from,
or 0 for the single-partition GlobalTables), so batches mixing partitions stay correct.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from typing import Any

import faust
import msgspec
import orjson
from aiokafka.partitioner import murmur2

from ..config import Settings
from ..schemas.codec import ContractError, dead_letter, decode, encode, now_ms
from ..schemas.registry import ALERTS, DEADLETTER, FINDINGS, INCIDENTS
from . import faust_core as core
from .faust_io import Dedup
from .faust_topics import JOBS, SIGNALS

log = logging.getLogger("faultline.streams.agents")

NODE_TOPICS = ("fl.gpu", "fl.hw", "fl.storage", "fl.inventory", "fl.net")
JOB_TOPICS = ("fl.sched", "fl.runtime")
BATCH = 2000
WITHIN_S = 0.05
TICK_S = 1.0


def partition_of(key: bytes, partitions: int) -> int:
    """Partition the default Kafka partitioner (murmur2) picks for ``key``."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class Stats:
    """Counters exposed in logs (and to web views through ``app.faultline_stats``)."""

    def __init__(self) -> None:
        self.events = 0
        self.dead = 0
        self.dups = 0
        self.alerts = 0
        self.signals = 0
        self.incidents = 0
        self.watermark = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def _put(table: Any, partition: int, key: bytes, value: bytes | None) -> None:
    """Set (or delete with None) a table key, writing its changelog to ``partition``."""
    if value is None:
        if key in table.data:
            del table.data[key]
            table.send_changelog(partition, key, None, value_serializer="raw")
        return
    table.data[key] = value
    table.send_changelog(partition, key, value)


def install(app: faust.App, settings: Settings) -> None:
    """Define the topics, tables, agents and timers on ``app``."""
    T = settings.topic
    P = settings.topic_partitions
    stats = Stats()
    app.faultline_stats = stats  # type: ignore[attr-defined]

    node_topic = app.topic(*(T(t) for t in NODE_TOPICS))
    job_topic = app.topic(*(T(t) for t in JOB_TOPICS + (JOBS,)))
    signals_topic = app.topic(T(SIGNALS))
    alerts_out = app.topic(T(ALERTS))
    incidents_out = app.topic(T(INCIDENTS))
    findings_out = app.topic(T(FINDINGS))
    dead_out = app.topic(T(DEADLETTER))
    jobs_in_topic = T(JOBS)
    jobs_out = app.topic(jobs_in_topic)

    table_kw: dict[str, Any] = dict(default=None, key_type=bytes, value_type=bytes)
    nodes = app.Table("nodes", partitions=P, **table_kw)
    jobs = app.Table("jobs", partitions=P, **table_kw)
    views = app.GlobalTable("views", partitions=1, recovery_buffer_size=1, **table_kw)
    sigtab = app.GlobalTable("signals", partitions=1, recovery_buffer_size=1, **table_kw)

    node_dedup = Dedup()
    job_dedup = Dedup()
    node_cache: dict[bytes, core.NodeState] = {}
    #: signal lists this worker wrote (it owns their keys): read-modify-write from here, not
    #: from the GlobalTable, whose changelog echo may lag behind our own last write
    sig_local: dict[bytes, bytes] = {}
    job_cache: dict[bytes, core.JobState] = {}
    app.faultline_tables = {"nodes": nodes, "jobs": jobs, "views": views,  # type: ignore[attr-defined]
                            "signals": sigtab}

    def view_lookup(kind: str, name: str) -> bytes | None:
        return views.data.get(f"{kind}:{name}".encode())

    async def send_dead(blobs: list[bytes]) -> None:
        for b in blobs:
            await dead_out.send(value=b)
        stats.dead += len(blobs)

    async def send_alerts(alerts: list[Any]) -> None:
        for a in alerts:
            key = (a.job or a.node or a.subject or "").encode()
            await alerts_out.send(key=key, value=encode(a))
        stats.alerts += len(alerts)

    def decode_events(batch: list[Any]) -> tuple[list[tuple[Any, Any]], list[bytes]]:
        """(event, message) pairs for valid inputs; dead-letter blobs for the others."""
        now = now_ms()
        ok: list[tuple[Any, Any]] = []
        dead: list[bytes] = []
        for e in batch:
            m = e.message
            raw = e.value
            if raw is None:
                dead.append(dead_letter(b"", "empty message (null value)", m.topic, m.partition, m.offset, now))
                continue
            try:
                ok.append((decode(raw, now=now), m))
            except ContractError as err:
                dead.append(dead_letter(raw, err.reason, m.topic, m.partition, m.offset, now))
            except Exception as err:  # noqa: BLE001 - one message never crashes the agent
                dead.append(dead_letter(raw, f"undecodable: {type(err).__name__}: {err}",
                                        m.topic, m.partition, m.offset, now))
        return ok, dead

    # ------------------------------------------------------------------ node side
    def node_state(key: bytes) -> core.NodeState:
        st = node_cache.get(key)
        if st is None:
            st = core.NodeState.load(key, nodes.data.get(key))
            node_cache[key] = st
        return st

    @app.agent(node_topic, name="faultline.node_events")
    async def node_events(stream: Any) -> None:
        async for batch in stream.take_events(BATCH, within=WITHIN_S):
            try:
                await _node_batch(batch)
            except Exception:  # noqa: BLE001 - log and go on; the batch's inputs stay in Kafka
                log.exception("node batch failed", extra={"size": len(batch)})

    async def _node_batch(batch: list[Any]) -> None:
        ok, dead = decode_events(batch)
        await send_dead(dead)
        dirty: dict[bytes, int] = {}
        out_signals: list[Any] = []
        out_alerts: list[Any] = []
        for ev, m in ok:
            stats.events += 1
            if ev.ts > stats.watermark:
                stats.watermark = ev.ts
            if not node_dedup.fresh(ev.id):
                stats.dups += 1
                continue
            key = m.key or b""
            st = node_state(key)
            if not st.accept(m.topic, m.partition, m.offset):
                stats.dups += 1
                continue
            # views: topology and versions every worker needs
            view = core.view_update(ev)
            if view is not None:
                vkey, vval = view
                _put(views, 0, vkey, vval)
            sigs, alerts = st.feed(ev)
            out_signals.extend(sigs)
            out_alerts.extend(alerts)
            dirty[key] = m.partition
        for key, part in dirty.items():
            _put(nodes, part, key, node_cache[key].dump())
        for s in out_signals:
            await signals_topic.send(key=core.signal_resource(s).encode(), value=core.encode_signal(s))
        stats.signals += len(out_signals)
        await send_alerts(out_alerts)

    # ------------------------------------------------------------------ signals -> jobs
    @app.agent(signals_topic, name="faultline.signals")
    async def signals_agent(stream: Any) -> None:
        async for batch in stream.take_events(500, within=WITHIN_S):
            try:
                await _signals_batch(batch)
            except Exception:  # noqa: BLE001
                log.exception("signals batch failed", extra={"size": len(batch)})

    async def _signals_batch(batch: list[Any]) -> None:
        by_res: dict[bytes, list[Any]] = defaultdict(list)
        for e in batch:
            try:
                s = core.decode_signal(e.value)
            except Exception as err:  # noqa: BLE001 - internal topic; should not happen
                log.warning("bad internal signal", extra={"error": str(err)})
                continue
            by_res[e.message.key or b""].append(s)
        wm = stats.watermark
        for res, sigs in by_res.items():
            merged = core.merge_signals(sig_local.get(res) or sigtab.data.get(res), sigs, wm)
            sig_local[res] = merged
            _put(sigtab, 0, res, merged)
            for job, attempt_nodes in core.jobs_for_resource(res.decode(), sigs, views.data.items()):
                for s in sigs:
                    await jobs_out.send(
                        key=job.encode(), value=b"S" + core.encode_signal(s))

    # ------------------------------------------------------------------ job side
    def job_state(key: bytes) -> core.JobState:
        st = job_cache.get(key)
        if st is None:
            st = core.JobState.load(key, jobs.data.get(key))
            job_cache[key] = st
        return st

    @app.agent(job_topic, name="faultline.job_events")
    async def job_events(stream: Any) -> None:
        async for batch in stream.take_events(BATCH, within=WITHIN_S):
            try:
                await _job_batch(batch)
            except Exception:  # noqa: BLE001
                log.exception("job batch failed", extra={"size": len(batch)})

    async def _job_batch(batch: list[Any]) -> None:
        inputs = [e for e in batch if e.message.topic != jobs_in_topic]
        internal = [e for e in batch if e.message.topic == jobs_in_topic]
        ok, dead = decode_events(inputs)
        await send_dead(dead)
        touched: dict[bytes, int] = {}
        out_alerts: list[Any] = []
        for ev, m in ok:
            stats.events += 1
            if ev.ts > stats.watermark:
                stats.watermark = ev.ts
            if not job_dedup.fresh(ev.id):
                stats.dups += 1
                continue
            key = m.key or b""
            st = job_state(key)
            if not st.accept(m.topic, m.partition, m.offset):
                stats.dups += 1
                continue
            out_alerts.extend(st.feed(ev))
            touched[key] = m.partition
        ticks: set[int] = set()
        for e in internal:
            m = e.message
            v = e.value or b""
            if v[:1] == b"S":
                key = m.key or b""
                if job_state(key).add_signal(core.decode_signal(v[1:])):
                    touched[key] = m.partition
            elif v[:1] == b"T":
                wm = int(v[1:] or 0)
                if wm > stats.watermark:
                    stats.watermark = wm
                ticks.add(m.partition)
        if ticks:
            for key, st in list(job_cache.items()) + [
                    (k, None) for k in jobs.data.keys() if k not in job_cache]:
                part = partition_of(key, P)
                if part in ticks and (st is None or st.active()):
                    st = job_state(key)
                    if st.active():
                        touched.setdefault(key, part)
        for key, part in touched.items():
            st = job_cache[key]
            for a in st.attempts_view():
                _put(views, 0, a[0], a[1])
            incidents, alerts = st.evaluate(lambda k: sigtab.data.get(k), view_lookup, stats.watermark)
            out_alerts.extend(alerts)
            for inc in incidents:
                await incidents_out.send(key=key, value=encode(inc))
                stats.incidents += 1
            _put(jobs, part, key, st.dump())
        await send_alerts(out_alerts)

    # ------------------------------------------------------------------ event-time ticks
    @app.timer(interval=TICK_S, name="faultline.tick")
    async def tick() -> None:
        """Advance event time on every job partition (stall detection) with this worker's
        watermark; several workers each send theirs, receivers keep the maximum."""
        if not stats.watermark:
            return
        v = b"T" + str(stats.watermark).encode()
        for p in range(P):
            await jobs_out.send(value=v, partition=p)

    @app.timer(interval=30.0, name="faultline.stats")
    async def log_stats() -> None:
        log.info("worker stats", extra=stats.as_dict())

    _ = (findings_out, time, orjson, msgspec)
