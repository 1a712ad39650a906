"""Faust agents, tables and timers of the faultline worker (``install(app, settings)``).

Thin shells over the pure core, split by Kafka key in ``streams.faust_engine``: decode in
batches, dead-letter bad input, de-duplicate, run the node side / job side, write outputs.
The data flow, and why it works with several workers sharing partitions, is drawn in
``docs/streams.md`` ("Faust app").

Agents
- ``node_events``  fl.gpu, fl.hw, fl.storage, fl.inventory, fl.net (key node / switch):
  node detectors -> signals (internal topic, key = signal index key) + alerts. Nearly all
  the volume, so not a Faust stream: an app task fed batches of Faust messages by a
  ``faust_io.RawFeed`` (no Faust event per record), acked once processed.
- ``signals``      internal signals topic: files each signal in the ``views`` GlobalTable
  under its index key and pushes it, keyed by job, to every job whose path it is on.
- ``job_events``   fl.sched, fl.runtime and the internal jobs topic (all keyed by job,
  co-partitioned): job records, reorder buffer, stalls, correlation -> incidents, alerts.
- timer ``tick``   broadcasts this worker's event-time watermark to every job partition.

Tables (changelog-backed; the in-memory store is rebuilt from the changelog at start)
- ``nodes``  key = node-topic key: ``NodeDump`` (detector state, coverage, offset fence).
- ``jobs``   key = job: ``JobDump`` (record, reorder buffer, pending evaluations,
  incidents and their revisions, offset fence).
- ``views``  GlobalTable (1 partition, every worker has all of it): topology, versions,
  changes, coverage, allocation, failures per version, recent signals per resource.

Table writes name their changelog partition explicitly (the partition of the key's input
topics, or 0 for the GlobalTable), so batches mixing partitions stay correct.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections import defaultdict
from typing import Any

import faust
import orjson
from aiokafka import TopicPartition
from aiokafka.partitioner import murmur2

from ..config import Settings
from ..schemas.codec import ContractError, dead_letter, decode, encode, now_ms
from ..schemas.registry import ALERTS, DEADLETTER, INCIDENTS, LAYER_TOPICS
from .engine import EngineConfig
from .faust_engine import (INV_KINDS, JOB_KINDS, NODE_KINDS, JobSide, NodeSide, Shared,
                           decode_signal, encode_signal, jobs_touched_by)
from .faust_io import Dedup, RawFeed
from .faust_topics import JOBS, SIGNALS
from .faust_watermark import Watermarks
from .join import index_keys

log = logging.getLogger("faultline.streams.agents")

NODE_TOPICS = ("fl.gpu", "fl.hw", "fl.storage", "fl.inventory", "fl.net")
JOB_TOPICS = ("fl.sched", "fl.runtime")
BATCH = 2000
NODE_BATCH = 5000
NODE_BUFFER = 50_000   # node records queued for the node task at most (then fetching waits)
WITHIN_S = 0.02
#: under load (the previous batch had NODE_BUSY records or more) the node task waits up to
#: NODE_WITHIN_S to fill a batch: fewer, bigger batches (one changelog write per node key
#: and batch) for at most that much added alert latency; otherwise WITHIN_S
NODE_WITHIN_S = 0.1
NODE_BUSY = 100
TICK_S = 1.0
STATS_S = float(os.environ.get("FAULTLINE_WORKER_STATS_S", "30"))


def partition_of(key: bytes, partitions: int) -> int:
    """Partition the default Kafka partitioner (murmur2) picks for ``key``."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class Stats:
    """Counters of this worker (logged every 30 s; ``app.faultline_stats``)."""

    def __init__(self) -> None:
        self.events = 0
        self.dead = 0
        self.dups = 0
        self.alerts = 0
        self.signals = 0
        self.incidents = 0
        self.pushes = 0
        self.watermark = 0
        self.node_busy_ms = 0
        self.job_busy_ms = 0
        self.batches = 0
        self.ticks = 0
        self.ticks_sent = 0
        self.ticks_local = 0
        self.job_batches = 0

    def as_dict(self) -> dict[str, Any]:
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


class _Sides:
    """The worker's node side and job side; recreated (from the tables) after a rebalance."""

    def __init__(self, shared: Shared, cfg: EngineConfig) -> None:
        self.node = NodeSide(shared, cfg)
        self.job = JobSide(shared, cfg)
        self.loaded_parts: set[int] = set()


def install(app: faust.App, settings: Settings) -> None:
    """Define the topics, tables, agents and timers on ``app``."""
    T = settings.topic
    P = settings.topic_partitions
    cfg = EngineConfig.from_settings(settings)
    stats = Stats()
    worker_id = f"{socket.gethostname()}:{os.getpid()}"

    node_topic = app.topic(*(T(t) for t in NODE_TOPICS))
    job_topic = app.topic(*(T(t) for t in JOB_TOPICS + (JOBS,)))
    signals_topic = app.topic(T(SIGNALS))
    alerts_out = app.topic(T(ALERTS))
    incidents_out = app.topic(T(INCIDENTS))
    dead_out = app.topic(T(DEADLETTER))
    jobs_in = T(JOBS)
    jobs_out = app.topic(jobs_in)
    topic_layer = {T(t): layer for layer, t in LAYER_TOPICS.items()}

    table_kw: dict[str, Any] = dict(default=None, key_type=bytes, value_type=bytes)
    nodes = app.Table("nodes", partitions=P, **table_kw)
    jobs = app.Table("jobs", partitions=P, **table_kw)
    views = app.GlobalTable("views", partitions=1, recovery_buffer_size=1, **table_kw)

    shared = Shared(views.data, lambda k, v: _put(views, 0, k, v),
                    retention_ms=cfg.retention_ms)
    input_topics = {T(t) for t in NODE_TOPICS + JOB_TOPICS}

    def offsets(topic: str, partition: int) -> tuple[int | None, int | None]:
        """(high-water mark, fetch position) of an input partition as this worker's Kafka
        consumer last saw them (from its fetch responses; no request)."""
        c = app.consumer._thread._ensure_consumer()   # the aiokafka consumer
        st = c._subscription.subscription.assignment.state_value(TopicPartition(topic, partition))
        if st is None:
            return None, None
        return st.highwater, st._position

    wms = Watermarks(offsets=offsets)
    node_dedup = Dedup()
    box = {"sides": None}

    def sides() -> _Sides:
        s = box["sides"]
        if s is None:
            shared.data = views.data
            s = box["sides"] = _Sides(shared, cfg)
        return s  # type: ignore[return-value]

    app.faultline_stats = stats  # type: ignore[attr-defined]
    app.faultline_tables = {"nodes": nodes, "jobs": jobs, "views": views}  # type: ignore[attr-defined]
    app.faultline_shared = shared  # type: ignore[attr-defined]

    @app.on_partitions_revoked.connect
    async def _on_revoked(sender: Any, revoked: Any = None, **kw: Any) -> None:
        # in-memory sides are caches of the tables: rebuild them for the new assignment
        box["sides"] = None
        node_feed.clear()   # unacked: Faust seeks to the committed offsets after the rebalance
        shared.forget_overlay()
        wms.forget_partitions()

    # ------------------------------------------------------------------ helpers
    def decode_events(batch: list[Any]) -> tuple[list[tuple[Any, Any]], list[bytes]]:
        """(event, message) pairs for the valid inputs among ``batch`` (Faust messages);
        dead-letter records for the others."""
        now = now_ms()
        ok: list[tuple[Any, Any]] = []
        dead: list[bytes] = []
        layer_of = topic_layer.get
        for m in batch:
            raw = m.value
            if raw is None:
                dead.append(dead_letter(b"", "empty message (null value)", m.topic, m.partition, m.offset, now))
                continue
            try:
                ev = decode(raw, now=now)
            except ContractError as err:
                dead.append(dead_letter(raw, err.reason, m.topic, m.partition, m.offset, now))
                continue
            except Exception as err:  # noqa: BLE001 - one message never crashes the agent
                dead.append(dead_letter(raw, f"undecodable: {type(err).__name__}: {err}",
                                        m.topic, m.partition, m.offset, now))
                continue
            layer = layer_of(m.topic)
            if layer is not None and ev.layer != layer:
                dead.append(dead_letter(raw, f"kind {ev.kind} (layer {ev.layer}) does not belong on "
                                        f"{m.topic}: publish it to {LAYER_TOPICS[ev.layer]}",
                                        m.topic, m.partition, m.offset, now))
                continue
            ok.append((ev, m))
        return ok, dead

    async def send_dead(blobs: list[bytes]) -> None:
        for b in blobs:
            await dead_out.send(value=b)
        stats.dead += len(blobs)

    async def send_outputs(outs: list[Any]) -> None:
        for o in outs:
            if hasattr(o, "revision"):      # Incident
                await incidents_out.send(key=o.job.encode(), value=encode(o))
                stats.incidents += 1
            else:                            # Alert
                key = (o.job or o.node or o.subject or "").encode()
                await alerts_out.send(key=key, value=encode(o))
                stats.alerts += 1

    async def send_signals(sigs: list[Any]) -> None:
        for s in sigs:
            blob = encode_signal(s)
            for k in index_keys(s):
                await signals_topic.send(key=k.encode(), value=blob)
        stats.signals += len(sigs)

    def node_feed_one(sd: _Sides, ev: Any, m: Any, parts: dict[str, int]) -> None:
        key = (m.key or b"").decode("utf-8", "replace")
        ns = sd.node
        if key not in ns.nodes:
            ns.load(key, nodes.data.get(key.encode()))
        if not ns.accept(key, m.topic, m.partition, m.offset):
            stats.dups += 1
            return
        ns.feed(key, ev)
        parts[key] = m.partition

    async def node_flush(sd: _Sides, parts: dict[str, int], after_local: Any = None) -> None:
        ns = sd.node
        ns.flush_shared()
        for key in ns.dirty:
            part = parts.get(key)
            if part is None:
                part = partition_of(key.encode(), P)
            _put(nodes, part, key.encode(), ns.dump(key))
        ns.dirty.clear()
        sigs, outs = ns.take()
        deliver_local(sd, sigs)
        if after_local is not None:
            after_local()
        await send_signals(sigs)
        await send_outputs(outs)

    def deliver_local(sd: _Sides, sigs: list[Any]) -> None:
        """Hand this worker's own node-side signals to its job side right away (no await in
        between): a job evaluated here once the watermark passes the event never misses the
        signal that is still on its way through the internal topics (that hop may lag far
        behind under load). Incidents already evaluated whose window they fall in re-run."""
        if not sigs:
            return
        js = sd.job
        ccfg = cfg.correlate
        for s in sigs:
            if s.subject.startswith("job:") or s.kind == "container_oom":
                continue   # job-scoped: not in the index (Engine._on_signal)
            if not js.index.remember(s):  # type: ignore[attr-defined]
                continue
            if not js._inc_ctx:
                continue
            jobs_of = set()
            for k in index_keys(s):
                jobs_of.update(jobs_touched_by(shared, k, s, ccfg.lookback_ms, ccfg.settle_ms))
            for job in sorted(jobs_of):
                js.reevaluate_for(job, s)

    def read_all(batch: list[Any], events: list[tuple[Any, Any]] = ()) -> None:
        """Record the event times and offsets of a processed batch (Faust messages) in the
        watermark (after processing: the job side must not see time pass before the batch's
        signals exist). Per partition: the highest ts and the last offset."""
        hi: dict[tuple[str, int], int] = {}
        for ev, m in events:
            k = (m.topic, m.partition)
            if ev.ts > hi.get(k, -(1 << 62)):
                hi[k] = ev.ts
        for (t, p), ts in hi.items():
            wms.observe(t, p, ts)
        last: dict[tuple[str, int], int] = {}
        for m in batch:
            last[(m.topic, m.partition)] = m.offset
        for (t, p), off in last.items():
            wms.read(t, p, off)

    # ------------------------------------------------------------------ node side
    # The node topics carry nearly all the volume (telemetry): their records reach this
    # task as batches of Faust messages through a RawFeed (no Faust event/stream per
    # record); a batch is acked, so its offsets can be committed, only once processed.
    node_feed = RawFeed(maxsize=NODE_BUFFER)
    node_topic.faultline_feed = node_feed  # type: ignore[attr-defined]
    app.topics.add(node_topic)

    @app.task
    async def node_events() -> None:
        consumer = app.consumer
        within = WITHIN_S
        while not app.should_stop:
            batch = await node_feed.take(NODE_BATCH, within)
            within = NODE_WITHIN_S if len(batch) >= NODE_BUSY else WITHIN_S
            t0 = time.perf_counter()
            try:
                await _node_batch(batch)
            except Exception:  # noqa: BLE001 - log and go on; never kill the pump
                log.exception("node batch failed", extra={"size": len(batch)})
            RawFeed.ack(consumer, batch)
            # what Faust's stream sensor would record (its "stream idle" check reads it)
            inbound = app.monitor.stream_inbound_time
            now = time.monotonic()
            for tp in {m.tp for m in batch}:
                inbound[tp] = now
            stats.node_busy_ms += int((time.perf_counter() - t0) * 1000)
            stats.batches += 1

    async def _node_batch(batch: list[Any]) -> None:
        sd = sides()
        ok, dead = decode_events(batch)
        await send_dead(dead)
        parts: dict[str, int] = {}
        fresh = node_dedup.fresh
        for ev, m in ok:
            if not fresh(ev.id):
                stats.dups += 1
                continue
            node_feed_one(sd, ev, m, parts)
        stats.events += len(ok)
        await node_flush(sd, parts, after_local=lambda: read_all(batch, ok))

    # ------------------------------------------------------------------ signals -> jobs
    @app.agent(signals_topic, name="faultline.signals")
    async def signals_agent(stream: Any) -> None:
        async for batch in stream.take_events(500, within=WITHIN_S):
            try:
                await _signals_batch(batch)
            except Exception:  # noqa: BLE001
                log.exception("signals batch failed", extra={"size": len(batch)})

    async def _signals_batch(batch: list[Any]) -> None:
        by_key: dict[str, list[Any]] = defaultdict(list)
        for e in batch:
            try:
                by_key[(e.message.key or b"").decode()].append(decode_signal(e.value))
            except Exception as err:  # noqa: BLE001 - internal topic; should not happen
                log.warning("bad internal signal record", extra={"error": str(err)})
        ccfg = cfg.correlate
        for key, sigs in by_key.items():
            for s in shared.add_signals(key, sigs):
                targets = jobs_touched_by(shared, key, s, ccfg.lookback_ms, ccfg.settle_ms)
                if s.job and s.job not in targets:
                    targets.append(s.job)
                for job in targets:
                    await jobs_out.send(key=job.encode(), value=b"S" + encode_signal(s))
                    stats.pushes += 1

    # ------------------------------------------------------------------ job side
    job_lock = asyncio.Lock()

    @app.agent(job_topic, name="faultline.job_events")
    async def job_events(stream: Any) -> None:
        async for batch in stream.take_events(BATCH, within=WITHIN_S):
            t0 = time.perf_counter()
            try:
                async with job_lock:
                    await _job_batch(batch)
            except Exception:  # noqa: BLE001
                log.exception("job batch failed", extra={"size": len(batch)})
            stats.job_busy_ms += int((time.perf_counter() - t0) * 1000)
            stats.job_batches += 1

    def ensure_partition_loaded(sd: _Sides, part: int) -> None:
        """After (re)start or rebalance: load every job of ``part`` from the table, so its
        pending evaluations and stall timers run even if the job gets no new event."""
        if part in sd.loaded_parts:
            return
        sd.loaded_parts.add(part)
        for k, v in list(jobs.data.items()):
            if partition_of(k, P) == part:
                sd.job.load(k.decode(), v)

    async def _job_batch(batch: list[Any]) -> None:
        sd = sides()
        js = sd.job
        inputs = [e.message for e in batch if e.message.topic != jobs_in]
        internal = [e for e in batch if e.message.topic == jobs_in]
        ok, dead = decode_events(inputs)
        await send_dead(dead)
        node_parts: dict[str, int] = {}
        fresh: list[Any] = []
        for ev, m in ok:
            stats.events += 1
            ensure_partition_loaded(sd, m.partition)
            if ev.kind in NODE_KINDS or ev.kind in INV_KINDS:   # sched.node: keyed by node
                if node_dedup.fresh(ev.id):
                    node_feed_one(sd, ev, m, node_parts)
                continue
            if ev.kind not in JOB_KINDS or not ev.job:
                continue
            job = ev.job
            if job not in js.jobs:
                js.load(job, jobs.data.get(job.encode()))
            if not js.accept(job, m.topic, m.partition, m.offset):
                stats.dups += 1
                continue
            fresh.append(ev)
        ticked = False
        for e in internal:
            m = e.message
            v = e.value or b""
            tag = v[:1]
            try:
                if tag == b"S":
                    job = (m.key or b"").decode()
                    ensure_partition_loaded(sd, m.partition)
                    if job not in js.jobs:
                        js.load(job, jobs.data.get(job.encode()))
                    js.signal_for(job, decode_signal(v[1:]))
                elif tag == b"T":
                    t = orjson.loads(v[1:])
                    wms.heard(t["w"], int(t["wm"]), bool(t.get("idle")))
                    ensure_partition_loaded(sd, m.partition)
                    ticked = True
            except Exception as err:  # noqa: BLE001 - internal topic; should not happen
                log.warning("bad internal job record", extra={"error": str(err)})
        await _job_advance(sd, fresh, ticked, node_parts, after_local=lambda: read_all(inputs, ok))

    async def _job_advance(sd: _Sides, fresh: list[Any], ticked: bool, node_parts: dict[str, int],
                           after_local: Any = None) -> None:
        js = sd.job
        if node_parts or sd.node.dirty:
            # node-keyed events on the job topics (sched.node): their signals first
            await node_flush(sd, node_parts)
        if after_local is not None:
            after_local()
        wm, idle = wms.value(worker_id)
        stats.watermark = wm
        js.ingest(fresh, wm)
        if ticked:
            if idle:
                js.close_windows()
            js.recheck()
        js.flush_shared()
        for job in js.dirty:
            if job in js.jobs or job in js.fences:    # fences: buffered, not yet applied
                b = job.encode()
                _put(jobs, partition_of(b, P), b, js.dump(job))
        js.dirty.clear()
        for job in js.evicted:                        # finished long ago: drop the row
            b = job.encode()
            _put(jobs, partition_of(b, P), b, None)
        js.evicted.clear()
        sigs, outs = js.take()
        await send_signals(sigs)
        await send_outputs(outs)

    # ------------------------------------------------------------------ event-time ticks
    @app.timer(interval=TICK_S, name="faultline.tick")
    async def tick() -> None:
        """Broadcast this worker's watermark to every job partition (stall detection and
        window closing follow event time even for a job that gets no more events)."""
        stats.ticks += 1
        if not (app.rebalancing or app.in_recovery):
            try:
                wms.expect((tp.topic, tp.partition) for tp in app.assignment.assigned_actives()
                           if tp.topic in input_topics)
            except Exception:  # noqa: BLE001 - no assignment yet
                pass
        local = wms.local()
        if local is None:
            return
        v = b"T" + orjson.dumps({"w": worker_id, "wm": local[0], "idle": local[1]})
        for p in range(P):
            await jobs_out.send(value=v, partition=p)
        # advance this worker's own job partitions directly too (not only when the tick
        # records come back through Kafka): stall timers and closing windows never wait
        # on the consumer
        stats.ticks_sent += 1
        if app.rebalancing or app.in_recovery:
            return
        stats.ticks_local += 1
        try:
            mine = {tp.partition for tp in app.assignment.assigned_actives() if tp.topic == T("fl.sched")}
        except Exception:  # noqa: BLE001 - no assignment yet
            return
        if not mine:
            return
        async with job_lock:
            sd = sides()
            for part in mine:
                ensure_partition_loaded(sd, part)
            await _job_advance(sd, [], True, {})

    @app.timer(interval=STATS_S, name="faultline.stats")
    async def log_stats() -> None:
        d = stats.as_dict()
        sd = box["sides"]
        if sd is not None:
            js = sd.job
            try:
                d.update(pbuf=app.producer.buffer.size, flow=int(app.flow_control.is_active()),
                         paused=len(getattr(app.consumer, "_buffered_partitions", ()) or ()),
                         active=len(app.consumer._active_partitions or ()))
            except Exception as err:  # noqa: BLE001 - debug only
                d.update(dbg=str(err)[:80])
            d.update(jobs=len(js.jobs), buffered=len(js._buf), pending=len(js._pending),
                     evaluated=len(js._inc_ctx), wm_released=js._wm, idle=int(wms.value(worker_id)[1]),
                     lagging=len(wms.lagging()))
            if os.environ.get("FAULTLINE_WORKER_DEBUG"):
                now = time.monotonic()
                log.info("wm local=%s global=%s workers=%s", wms.local(), wms.value(worker_id), wms._workers)
                log.info("partitions %s", " ".join(
                    f"{t.rsplit('.', 1)[-1]}/{p}:{v[0] - js._wm}ms@{now - v[1]:.0f}s"
                    for (t, p), v in sorted(wms._parts.items())))
                import asyncio
                import traceback
                for task in asyncio.all_tasks():
                    fr = task.get_stack(limit=30)
                    txt = "".join(traceback.format_list(traceback.StackSummary.extract(
                        (f, f.f_lineno) for f in fr)))
                    if "agents.py" in txt or "take_events" in txt:
                        log.info("agent task stack %s:\n%s", task.get_name(), txt[-2500:])
        log.info("worker stats %s", " ".join(f"{k}={v}" for k, v in d.items()), extra=d)
