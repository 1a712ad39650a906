"""Faust agents, tables and timers of the faultline worker (``install(app, services)``).

Thin shells over the pure core, split by Kafka key in ``streams.faust_engine``: decode in
batches, dead-letter bad input, de-duplicate, run the node side / job side, write outputs.
The data flow, and why it works with several workers sharing partitions, is drawn in
``docs/streams.md`` ("Faust app").

Each agent is a small class (its state + ``handle_batch``) a test can drive; ``install``
creates the topics and tables, builds the classes and wires them to Faust:

- ``NodeAgent``    fl.gpu, fl.hw, fl.storage, fl.inventory, fl.net (key node / switch):
  node detectors -> signals (internal topic, key = signal index key) + alerts. Nearly all
  the volume, so not a Faust stream: an app task fed batches of Faust messages by a
  ``faust_compat.RawFeed`` (no Faust event per record), acked once processed.
- ``SignalsAgent`` internal signals topic: files each signal in the ``views`` GlobalTable
  under its index key and pushes it, keyed by job, to every job whose path it is on.
- ``JobAgent``     fl.sched, fl.runtime and the internal jobs topic (all keyed by job,
  co-partitioned): job records, reorder buffer, stalls, correlation -> incidents, alerts.
  After a rebalance its ``RecoveryGate`` holds evaluation of the jobs until the partitions
  this worker took over are re-read (``faust_watermark.RecoveryGate``).
- ``Ticker``       timer: broadcasts this worker's event-time watermark to every job partition.

Tables (changelog-backed; the in-memory store is rebuilt from the changelog at start)
- ``nodes``  key = node-topic key: ``NodeDump`` (detector state, coverage, offset fence).
- ``jobs``   key = job: ``JobDump`` (record, reorder buffer, pending evaluations,
  incidents and their revisions, offset fence).
- ``views``  GlobalTable (1 partition, every worker has all of it): topology, versions,
  changes, coverage, allocation, failures per version, recent signals per resource.
  Every worker writes it, so every worker must keep reading its changelog after recovery:
  ``synchronize_all_active_partitions`` makes the changelog partition a standby of every
  worker, its active owner included (without it Faust leaves a global table's changelog
  partition out of the standbys of the worker that owns it as active, which then never
  applies the others' writes: faust-streaming PR #426). The views changelog backs no source
  partition, so the assignor gave it to everyone as a standby anyway (worker assignment logs,
  session 6); the flag makes that a guarantee rather than an accident of the assignor.

Table writes name their changelog partition explicitly (the partition of the key's input
topics, or 0 for the GlobalTable), so batches mixing partitions stay correct.

A record whose processing raises (a detector bug) is dead-lettered with the reason and the
rest of its batch goes on; the batch is never retried as a whole, so no record can fail
the same batch twice. Every Faust / aiokafka internal used here is in ``faust_compat``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections import OrderedDict, defaultdict, deque
from typing import Any, Callable, Iterable

import orjson
from aiokafka.partitioner import murmur2

from ..config import Settings
from ..metrics.counters import WorkerCounts
from ..ratelog import RateLimitedLog
from ..schemas.bounds import encode_output
from ..schemas.codec import ContractError, dead_letter, decode, encode, now_ms
from ..schemas.registry import ALERTS, DEADLETTER, INCIDENTS, LAYER_TOPICS
from . import faust_compat as compat
from .clock import source_of
from .engine import EngineConfig
from .faust_compat import RawFeed
from .faust_engine import (INV_KINDS, JOB_KINDS, NODE_KINDS, JobSide, NodeSide, Shared, side_config,
                           decode_signal, encode_signal, jobs_touched_by)
from .faust_topics import JOBS, SIGNALS
from .heap import HeapTrim
from .faust_watermark import ALIGN_AHEAD_MS as ALIGN_AHEAD_DEFAULT_MS
from .faust_watermark import ALWAYS, Alignment, RecoveryGate, Watermarks
from .join import index_keys
from .services import Services

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
#: how often the worker asks whether its freed heap is due back to the OS (``streams.heap``)
HEAP_CHECK_S = 10.0
STATS_S = float(os.environ.get("FAULTLINE_WORKER_STATS_S", "30"))
#: event-time alignment of the job topics (``faust_watermark.Alignment``): a job-topic
#: partition read this far ahead of the global watermark is held until the watermark is
#: within half of it; 0 turns it off (``bench/memory.py --align-baseline`` measures both)
ALIGN_AHEAD_MS = int(os.environ.get("FAULTLINE_ALIGN_AHEAD_MS", str(ALIGN_AHEAD_DEFAULT_MS)))
#: a changelog record larger than this is not written (the producer would refuse it and
#: crash the worker): the key's state stays in memory only, and an ERROR says so
MAX_CHANGELOG_BYTES = 900_000
#: re-evaluations deferred while the recovery gate is closed, at most (oldest dropped)
MAX_DEFERRED = 100_000
#: on revoke, how long the in-flight batches may take to finish before the partitions go
REVOKE_WAIT_S = 10.0
#: every worker idle this long (and nothing lagging here): windows close at the latest time
#: any worker read, not only at the watermark (``JobAgent._close_upto``)
IDLE_CLOSE_S = 15.0
#: a partition whose commit a head gap has held at the same offset this long, with nothing
#: below the gap still being processed, is fetched again from its committed offset
#: (``CommitWatch``). Records are processed and acked in order, so a head gap that stays is
#: a skipped record; soon, so that its job's fence window (``JOB_FENCE_WINDOW``) still
#: holds the offsets around it
STUCK_COMMIT_S = 5.0
#: a gap held this long with something below it still counted in flight is reported
HELD_REPORT_S = 30.0
#: how often ``CommitWatch`` compares the idle partitions' committed offsets with the
#: group's on the broker (one offset fetch per idle partition)
COMMIT_DRIFT_S = 10.0
#: ``off``: no recovery gate and no coverage rule (session 2's behaviour; for diagnosing and
#: for showing what tests/test_streams_faust_rebalance.py catches without them)
REBALANCE_GUARD = os.environ.get("FAULTLINE_WORKER_REBALANCE_GUARD", "on").lower() != "off"
#: ``1``: one INFO line ("job trace: ...") per scheduler record the job agent handles (its
#: offset, generation, and whether it was applied, a replay, or not this worker's any more),
#: per job row loaded from the table, and per incident revision sent. Few lines (a job has a
#: handful of scheduler records); the reliability trials turn it on, so a failing trial shows
#: where a job's history went across a rebalance (issue 14: a sched record missing after a move)
TRACE_JOBS = os.environ.get("FAULTLINE_TRACE_JOBS") == "1"


def partition_of(key: bytes, partitions: int) -> int:
    """Partition the default Kafka partitioner (murmur2) picks for ``key``."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class Stats:
    """Counters of this worker (logged every ``STATS_S`` seconds)."""

    def __init__(self) -> None:
        self.events = 0
        self.dead = 0
        self.failed = 0          # records dead-lettered because processing them raised
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
        self.held_batches = 0    # job advances under a closed recovery gate
        self.deferred = 0        # re-evaluations deferred by the gate
        self.deferred_dropped = 0
        self.unwritten = 0       # changelog records too large to write
        self.reseeks = 0         # partitions fetched again because their commit was stuck
        self.drifted = 0         # ... because the group's commit was behind the consumer's
        self.old_ticks = 0       # ticks re-read below a gated partition's target: not heard
        self.hole_holds = 0      # job batches held at the last watermark: a job partition's hole
        self.disowned = 0        # job records of a partition given away, buffered before the rebalance
        self.aligned = 0         # job-topic partitions held now: read too far ahead of event time
        self.align_holds = 0     # ... times one was held
        #: /metrics: events by topic/kind, dead letters by reason, outputs by detector and
        #: category, batch latency (faultline.metrics reads it at scrape time)
        self.counts = WorkerCounts()

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "counts"}


class Dedup:
    """Bounded "seen" set of event ids (LRU): ``fresh(id)`` is True the first time only.

    Bounded by ``size`` ids; duplicates further apart than that are processed again,
    which every consumer tolerates (signal and incident ids are stable).
    """

    __slots__ = ("_seen", "size", "dropped")

    def __init__(self, size: int = 200_000) -> None:
        self._seen: OrderedDict[str, None] = OrderedDict()
        self.size = size
        self.dropped = 0

    def fresh(self, event_id: str) -> bool:
        seen = self._seen
        if event_id in seen:
            seen.move_to_end(event_id)
            self.dropped += 1
            return False
        seen[event_id] = None
        if len(seen) > self.size:
            seen.popitem(last=False)
        return True

    def __len__(self) -> int:
        return len(self._seen)

    def clear(self) -> None:
        self._seen.clear()


class Tables:
    """The worker's three tables and the one way it writes them."""

    def __init__(self, nodes: Any, jobs: Any, views: Any, partitions: int, stats: Stats,
                 errors: RateLimitedLog) -> None:
        self.nodes, self.jobs, self.views = nodes, jobs, views
        self.partitions = partitions
        self.stats = stats
        self.errors = errors

    def put(self, table: Any, partition: int, key: bytes, value: bytes | None) -> None:
        """Set (or delete with None) a table key, writing its changelog to ``partition``."""
        if value is None:
            if key in table.data:
                del table.data[key]
                table.send_changelog(partition, key, None, value_serializer="raw")
            return
        table.data[key] = value
        if len(value) > MAX_CHANGELOG_BYTES:
            self.stats.unwritten += 1
            self.errors.error("changelog-size", "state of %r is %d bytes, over the %d-byte changelog "
                              "limit: kept in memory only (a restart or rebalance loses it)",
                              key[:80], len(value), MAX_CHANGELOG_BYTES)
            return
        table.send_changelog(partition, key, value)

    def put_node(self, key: str, partition: int | None, value: bytes) -> None:
        b = key.encode()
        self.put(self.nodes, partition_of(b, self.partitions) if partition is None else partition, b, value)

    def put_job(self, job: str, value: bytes | None) -> None:
        b = job.encode()
        self.put(self.jobs, partition_of(b, self.partitions), b, value)

    def jobs_of_partition(self, part: int) -> list[tuple[bytes, bytes]]:
        P = self.partitions
        return [(k, v) for k, v in list(self.jobs.data.items()) if partition_of(k, P) == part]


class Sides:
    """The worker's node side and job side: caches of the tables, rebuilt after a rebalance
    (``reset``) from the tables."""

    def __init__(self, shared: Shared, views: Any, cfg: EngineConfig) -> None:
        self.shared, self.views, self.cfg = shared, views, side_config(cfg)
        self._cur: tuple[NodeSide, JobSide, set[int]] | None = None

    def get(self) -> tuple[NodeSide, JobSide, set[int]]:
        """(node side, job side, job partitions loaded)."""
        if self._cur is None:
            self.shared.data = self.views.data
            self._cur = (NodeSide(self.shared, self.cfg), JobSide(self.shared, self.cfg), set())
        return self._cur

    def current(self) -> tuple[NodeSide, JobSide, set[int]] | None:
        return self._cur

    def reset(self) -> None:
        self._cur = None


class Outbox:
    """Sends dead letters, alerts, incidents and signals."""

    def __init__(self, app: Any, settings: Settings, stats: Stats) -> None:
        T = settings.topic
        self.app = app
        self.unsettled = 0          # records sent since the last ``settle``
        self.alerts = app.topic(T(ALERTS))
        self.incidents = app.topic(T(INCIDENTS))
        self.dead_out = app.topic(T(DEADLETTER))
        self.signals_topic = app.topic(T(SIGNALS))
        self.stats = stats
        self.settings = settings

    async def settle(self) -> None:
        """Wait until every record sent so far is acknowledged by the broker (a producer
        flush), if any was sent since the last call. The agents call it before they write
        the state that says those records were sent: a worker killed in between re-applies
        the records and sends them again (same ids), instead of restoring a state whose
        signals, alerts or incident revisions never left (a SIGKILL trial lost an incident
        and signals that way)."""
        if self.unsettled:
            self.unsettled = 0
            await self.app.producer.flush()

    async def dead(self, blobs: list[bytes]) -> None:
        self.unsettled += len(blobs)
        for b in blobs:
            await self.dead_out.send(value=b)
        self.stats.dead += len(blobs)
        self.stats.counts.add_dead_letters(blobs)

    async def outputs(self, outs: list[Any]) -> None:
        """Alerts and incidents, capped and bounded (``schemas.bounds.encode_output``: an
        oversized one becomes a dead letter instead of a refused produce request)."""
        for o in outs:
            if hasattr(o, "revision"):      # Incident
                out, key, counter = self.incidents, o.job.encode(), "incidents"
            else:                            # Alert
                out, key, counter = self.alerts, (o.job or o.node or o.subject or "").encode(), "alerts"
            if TRACE_JOBS and counter == "incidents":
                log.info("job trace: incident %s job %s attempt %s r%s state %s category %s", o.id, o.job,
                         o.attempt, o.revision, o.state, o.root_cause.category if o.root_cause else None)
            topic, value = encode_output(o, out.get_topic_name())
            if topic == DEADLETTER:
                await self.dead([value])
                continue
            self.unsettled += 1
            await out.send(key=key, value=value)
            setattr(self.stats, counter, getattr(self.stats, counter) + 1)
            self.stats.counts.add_output(o)

    async def failures(self, side: Any, messages: dict[str, Any] | None = None) -> None:
        """Dead-letter what failed inside the core (``take_failures``: a detector or an
        evaluation raised on one event; the rest of the batch went on), each with its
        reason; with the Kafka record it came from when ``messages`` (event id -> message)
        has it, else the event re-encoded."""
        failed = side.take_failures()
        if not failed:
            return
        now = now_ms()
        blobs = []
        for ev, reason in failed:
            m = messages.get(ev.id) if messages is not None and ev is not None else None
            if m is not None:
                blobs.append(dead_letter(m.value or b"", reason, m.topic, m.partition, m.offset, now))
            elif ev is not None:
                blobs.append(dead_letter(encode(ev), reason, self.topic_of(ev.layer), None, None, now))
            else:
                blobs.append(dead_letter(b"", reason, None, None, None, now))
        self.stats.failed += len(failed)
        await self.dead(blobs)

    def topic_of(self, layer: str) -> str | None:
        t = LAYER_TOPICS.get(layer)
        return self.settings.topic(t) if t else None

    async def signals(self, sigs: list[Any]) -> None:
        for s in sigs:
            blob = encode_signal(s)
            for k in index_keys(s):
                self.unsettled += 1
                await self.signals_topic.send(key=k.encode(), value=blob)
        self.stats.signals += len(sigs)


def trace_sched(what: str, ev: Any, m: Any) -> None:
    """A ``TRACE_JOBS`` line for one scheduler record of a job."""
    d = ev.data
    log.info("job trace: %s sched %s/%d@%d gen %s job %s attempt %s state %s ts %d", what, m.topic,
             m.partition, m.offset, getattr(m, "generation_id", None), ev.job, getattr(d, "attempt", None),
             getattr(d, "state", None), ev.ts)


def trace_loaded(js: JobSide, job: str) -> None:
    """A ``TRACE_JOBS`` line for one job row loaded from the table."""
    st = js.jobs.get(job)
    attempts = {a: r.state for a, r in st.attempts.items()} if st is not None else {}
    fence = js.fences.get(job)
    log.info("job trace: loaded job %s attempts %s fence %s buffered %d", job, attempts,
             fence.offsets if fence is not None else None, js.buffered_count(job))


def decode_events(batch: list[Any], topic_layer: dict[str, str]
                  ) -> tuple[list[tuple[Any, Any]], list[bytes]]:
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


def failed_letter(m: Any, err: BaseException, what: str) -> bytes:
    """The dead letter of a record whose processing raised."""
    return dead_letter(m.value or b"", f"{what} failed on this record: {type(err).__name__}: {err}",
                       m.topic, m.partition, m.offset, now_ms())


def observe_batch(wms: Watermarks, batch: list[Any], events: Iterable[tuple[Any, Any]] = ()) -> None:
    """Record the event times and offsets of a processed batch (Faust messages) in the
    watermark (after processing: the job side must not see time pass before the batch's
    signals exist). Per partition: the highest credible ts (``Watermarks.observe_events``:
    one source's clock far ahead does not move time) and the last offset."""
    wms.observe_events(((m.topic, m.partition, ev.ts, ev) for ev, m in events), source_of)
    last: dict[tuple[str, int], int] = {}
    for m in batch:
        last[(m.topic, m.partition)] = m.offset
    for (t, p), off in last.items():
        wms.read(t, p, off)


# ---------------------------------------------------------------------------- node side
def _by_time(item: tuple[Any, Any, str]) -> tuple[int, str]:
    ev = item[0]
    return ev.ts, ev.id


class NodeAgent:
    """Node-keyed records: node detectors, node table writes, signals and alerts.

    ``handle_batch`` takes Faust messages (from the ``RawFeed``). The job agent's
    ``local_signals`` gets this worker's own signals right away (``deliver``)."""

    def __init__(self, sides: Sides, tables: Tables, outbox: Outbox, wms: Watermarks,
                 stats: Stats, topic_layer: dict[str, str],
                 deliver: Callable[[JobSide, list[Any]], None]) -> None:
        self.sides, self.tables, self.outbox, self.wms = sides, tables, outbox, wms
        self.stats, self.topic_layer, self.deliver = stats, topic_layer, deliver
        self.dedup = Dedup()
        self.lock = asyncio.Lock()
        self.errors = tables.errors

    def admit_one(self, ns: NodeSide, m: Any) -> str | None:
        """The record's key, its state loaded, when its fence accepts it (offset order);
        None for a replay."""
        key = (m.key or b"").decode("utf-8", "replace")
        if key not in ns.nodes:
            ns.load(key, self.tables.nodes.data.get(key.encode()))
        if not ns.accept(key, m.topic, m.partition, m.offset):
            self.stats.dups += 1
            return None
        return key

    def feed_one(self, ns: NodeSide, key: str, ev: Any, m: Any, parts: dict[str, int], dead: list[bytes]) -> None:
        try:
            ns.feed(key, ev)
        except Exception as err:  # noqa: BLE001 - a detector bug: this record only
            self.stats.failed += 1
            dead.append(failed_letter(m, err, "the node detectors"))
            self.errors.error("node-feed", "node detectors failed on %s/%d@%d: %s: %s", m.topic,
                              m.partition, m.offset, type(err).__name__, err, exc_info=True)
        parts[key] = m.partition

    def write_dirty(self, ns: NodeSide, parts: dict[str, int]) -> None:
        for key in list(ns.dirty):
            try:
                blob = ns.dump(key)
            except Exception as err:  # noqa: BLE001 - this key's state cannot be encoded
                self.errors.error("node-dump", "node state of %r cannot be encoded (%s: %s): "
                                  "dropped, reloaded from the table", key, type(err).__name__, err)
                ns.nodes.pop(key, None)
                ns.fences.pop(key, None)
                continue
            self.tables.put_node(key, parts.get(key), blob)
        ns.dirty.clear()

    async def flush(self, ns: NodeSide, js: JobSide, parts: dict[str, int],
                    after_local: Callable[[], None] | None = None,
                    messages: dict[str, Any] | None = None) -> None:
        ns.flush_shared()
        if self.stats.watermark > 0:       # the fleet's event time, once there is one
            ns.retain(self.stats.watermark)
        await self.outbox.failures(ns, messages)
        sigs, outs = ns.take()
        self.deliver(js, sigs)
        if after_local is not None:
            after_local()
        await self.outbox.signals(sigs)
        await self.outbox.outputs(outs)
        await self.outbox.settle()          # what the batch sent is out before its state says so
        self.write_dirty(ns, parts)

    async def handle_batch(self, batch: list[Any]) -> None:
        async with self.lock:
            ns, js, _ = self.sides.get()
            ok, dead = decode_events(batch, self.topic_layer)
            parts: dict[str, int] = {}
            fresh = self.dedup.fresh
            admitted: list[tuple[Any, Any, str]] = []
            for ev, m in ok:        # fences in offset order
                if not fresh(ev.id):
                    self.stats.dups += 1
                    continue
                key = self.admit_one(ns, m)
                if key is not None:
                    admitted.append((ev, m, key))
            # applied in (ts, id) order within the batch, as diagnose's reorder buffer applies
            # them: a node's events arriving out of order (two sources, a late delivery) fire
            # the same signal on the same event as diagnose does (NODE_ORDER in the docs)
            admitted.sort(key=_by_time)
            for ev, m, key in admitted:
                self.feed_one(ns, key, ev, m, parts, dead)
            await self.outbox.dead(dead)
            self.stats.events += len(ok)
            self.stats.counts.add_events(ok)
            await self.flush(ns, js, parts, after_local=lambda: observe_batch(self.wms, batch, ok),
                             messages={ev.id: m for ev, m in ok})


# ---------------------------------------------------------------------------- signals -> jobs
class SignalsAgent:
    """Files each signal of the internal signals topic in the GlobalTable and pushes it to
    the jobs whose resources it is on (internal jobs topic, key = job)."""

    def __init__(self, shared: Shared, jobs_out: Any, cfg: EngineConfig, stats: Stats) -> None:
        self.shared, self.jobs_out, self.cfg, self.stats = shared, jobs_out, cfg, stats

    async def handle_batch(self, batch: list[tuple[bytes | None, bytes | None]]) -> None:
        """``batch``: (key, value) of internal signal records."""
        by_key: dict[str, list[Any]] = defaultdict(list)
        for key, value in batch:
            try:
                by_key[(key or b"").decode()].append(decode_signal(value or b""))
            except Exception as err:  # noqa: BLE001 - internal topic; should not happen
                log.warning("bad internal signal record", extra={"error": str(err)})
        ccfg = self.cfg.correlate
        for key, sigs in by_key.items():
            for s in self.shared.add_signals(key, sigs):
                targets = jobs_touched_by(self.shared, key, s, ccfg.lookback_ms, ccfg.settle_ms)
                if s.job and s.job not in targets:
                    targets.append(s.job)
                for job in targets:
                    await self.jobs_out.send(key=job.encode(), value=b"S" + encode_signal(s))
                    self.stats.pushes += 1


# ---------------------------------------------------------------------------- job side
class JobAgent:
    """Job-keyed records (fl.sched, fl.runtime, internal jobs topic): the job side, its
    table writes, and the recovery gate (module doc)."""

    def __init__(self, sides: Sides, tables: Tables, outbox: Outbox, wms: Watermarks,
                 stats: Stats, topic_layer: dict[str, str], cfg: EngineConfig, *,
                 jobs_in: str, job_topics: Iterable[str], worker_id: str) -> None:
        self.sides, self.tables, self.outbox, self.wms = sides, tables, outbox, wms
        self.stats, self.topic_layer, self.cfg = stats, topic_layer, cfg
        self.jobs_in = jobs_in
        self.job_topics = frozenset(job_topics) | {jobs_in}
        self.worker_id = worker_id
        self.gate = RecoveryGate(ts_topics=job_topics)
        self.deferred: deque[tuple[str | None, Any]] = deque()
        self.lock = asyncio.Lock()
        self.node: NodeAgent | None = None        # set by install (sched.node records)
        self.errors = tables.errors
        self._assigned: set[tuple[str, int]] = set()
        self.universe: list[tuple[str, int]] = sorted(wms.universe or ())
        self._idle_since: float | None = None     # every worker idle since (monotonic)
        #: whether a job partition holds a hole (records never delivered below acked ones:
        #: ``compat.head_gaps``); set by the Worker. While one does, evaluation holds at the
        #: last watermark it ran at, until CommitWatch has fetched the hole again
        self.holes: Callable[[], bool] = lambda: False
        #: the consumer group generation now (set by the Worker; None: no group)
        self.generation: Callable[[], int | None] = lambda: None
        self._last_wm: int | None = None

    def covers_of(self, idx: Any) -> list[tuple[str, int]] | None:
        """The partitions a tick says its worker covers (indices into ``universe``)."""
        if not isinstance(idx, list):
            return None
        u = self.universe
        return [u[i] for i in idx if isinstance(i, int) and 0 <= i < len(u)]

    # ---------------------------------------------------------- rebalance
    def on_assigned(self, job_actives: set[tuple[str, int]]) -> None:
        """The job partitions assigned now: gate the ones that are new to this worker."""
        new = job_actives - self._assigned if REBALANCE_GUARD else set()
        self._assigned = set(job_actives)
        self.gate.retain(job_actives)
        self.gate.assign(new)
        if new:
            log.info("recovery gate: holding job evaluation until %d newly assigned job "
                     "partitions are re-read", len(new), extra={"partitions": sorted(new)})

    def set_targets(self, ends: dict[tuple[str, int], int], starts: dict[tuple[str, int], int | None]) -> None:
        self.gate.set_targets(ends, starts)

    # ---------------------------------------------------------- loading
    def ensure_partition_loaded(self, js: JobSide, loaded: set[int], part: int) -> None:
        """After (re)start or rebalance: load every job of ``part`` from the table, so its
        pending evaluations and stall timers run even if the job gets no new event."""
        if part in loaded:
            return
        loaded.add(part)
        for k, v in self.tables.jobs_of_partition(part):
            js.load(k.decode(), v)
            if TRACE_JOBS:
                trace_loaded(js, k.decode())

    def _load(self, js: JobSide, job: str) -> None:
        if job not in js.jobs:
            blob = self.tables.jobs.data.get(job.encode())
            js.load(job, blob)
            if TRACE_JOBS and blob:
                trace_loaded(js, job)

    # ---------------------------------------------------------- signals
    def _defer(self, job: str | None, sig: Any) -> None:
        if len(self.deferred) >= MAX_DEFERRED:
            self.deferred.popleft()
            self.stats.deferred_dropped += 1
        self.deferred.append((job, sig))
        self.stats.deferred += 1

    def local_signals(self, js: JobSide, sigs: list[Any]) -> None:
        """Hand this worker's own node-side signals to its job side right away (no await in
        between): a job evaluated here once the watermark passes the event never misses the
        signal that is still on its way through the internal topics (that hop may lag far
        behind under load). Incidents already evaluated whose window they fall in re-run
        (deferred while the recovery gate is closed)."""
        held = not self.gate.open()
        for s in sigs:
            if s.subject.startswith("job:") or s.kind == "container_oom":
                continue   # job-scoped: not in the index (Engine._on_signal)
            if not js.remember_signal(s):
                continue
            if held:
                self._defer(None, s)
            else:
                self._reevaluate_local(js, s)

    def _reevaluate_local(self, js: JobSide, s: Any) -> None:
        if not js.has_incidents():
            return
        ccfg = self.cfg.correlate
        jobs_of: set[str] = set()
        for k in index_keys(s):
            jobs_of.update(jobs_touched_by(self.sides.shared, k, s, ccfg.lookback_ms, ccfg.settle_ms))
        for job in sorted(jobs_of):
            js.reevaluate_for(job, s)

    def _pushed(self, js: JobSide, job: str, sig: Any) -> None:
        if self.gate.open():
            js.signal_for(job, sig)
            return
        js.keep(job, sig)             # with the job's row, whoever evaluates it next
        if js.remember_signal(sig):
            self._defer(job, sig)     # in the index now; the re-evaluation waits for the gate

    def _run_deferred(self, js: JobSide) -> None:
        while self.deferred:
            job, sig = self.deferred.popleft()
            if job is None:
                self._reevaluate_local(js, sig)
            else:
                js.reevaluate_for(job, sig)

    # ---------------------------------------------------------- batches
    async def handle_batch(self, batch: list[Any]) -> None:
        """``batch``: Faust events of the job topics."""
        async with self.lock:
            await self._batch([e.message for e in batch], [e.value for e in batch])

    def owned(self, messages: list[Any], values: list[Any]) -> tuple[list[Any], list[Any]]:
        """The records this worker may apply: not those of an earlier group generation whose
        partition it no longer owns. Faust's ``take_events`` buffer keeps what it gathered
        before a rebalance and yields it after (its generation test is per record, at
        iteration); applied here, a tick or a push of a partition given away loaded that
        partition's jobs from the standby table and evaluated them at this worker's event
        time: false stalls of jobs another worker owned (rebalance trial seed 102, session 15).
        The new owner reads them from the committed offset: they were never acked here before
        the revoke. Records of a partition still owned are applied as before."""
        gen = self.generation()
        if gen is None:
            return messages, values
        mine = self._assigned
        keep = [i for i, m in enumerate(messages)
                if not compat.earlier_generation(m, gen) or (m.topic, m.partition) in mine]
        if len(keep) == len(messages):
            return messages, values
        self.stats.disowned += len(messages) - len(keep)
        if TRACE_JOBS:
            kept = set(keep)
            for i, (m, v) in enumerate(zip(messages, values)):
                if i not in kept and m.topic.endswith("fl.sched"):
                    log.info("job trace: disowned %s/%d@%d gen %s (now %s)", m.topic, m.partition,
                             m.offset, getattr(m, "generation_id", None), gen)
        return [messages[i] for i in keep], [values[i] for i in keep]

    async def _batch(self, messages: list[Any], values: list[Any]) -> None:
        messages, values = self.owned(messages, values)
        ns, js, loaded = self.sides.get()
        jobs_in = self.jobs_in
        inputs = [m for m in messages if m.topic != jobs_in]
        internal = [(m, v) for m, v in zip(messages, values) if m.topic == jobs_in]
        ok, dead = decode_events(inputs, self.topic_layer)
        self.stats.counts.add_events(ok)
        node_parts: dict[str, int] = {}
        fresh: list[Any] = []
        gate_read = self.gate.read
        history = self.gate.history
        old_ticks = {id(m) for m, v in internal
                     if (v or b"")[:1] == b"T" and history(m.topic, m.partition, m.offset)}
        ts_of = {id(m): ev.ts for ev, m in ok}
        for m in messages:
            gate_read(m.topic, m.partition, m.offset, ts_of.get(id(m)))
        for ev, m in ok:
            self.stats.events += 1
            self.ensure_partition_loaded(js, loaded, m.partition)
            if ev.kind in NODE_KINDS or ev.kind in INV_KINDS:   # sched.node: keyed by node
                if self.node is not None and self.node.dedup.fresh(ev.id):
                    key = self.node.admit_one(ns, m)
                    if key is not None:
                        self.node.feed_one(ns, key, ev, m, node_parts, dead)
                continue
            if ev.kind not in JOB_KINDS or not ev.job:
                continue
            self._load(js, ev.job)
            if not js.accept(ev.job, m.topic, m.partition, m.offset):
                self.stats.dups += 1
                if TRACE_JOBS and ev.kind == "sched.job":
                    trace_sched("replay", ev, m)
                continue
            if TRACE_JOBS and ev.kind == "sched.job":
                trace_sched("accepted", ev, m)
            fresh.append(ev)
        ticked = False
        for m, v in internal:
            v = v or b""
            tag = v[:1]
            try:
                if tag == b"S":
                    job = (m.key or b"").decode()
                    self.ensure_partition_loaded(js, loaded, m.partition)
                    self._load(js, job)
                    self._pushed(js, job, decode_signal(v[1:]))
                elif tag == b"T" and id(m) in old_ticks:
                    self.stats.old_ticks += 1      # written before this worker took the partition
                    self.ensure_partition_loaded(js, loaded, m.partition)
                elif tag == b"T":
                    t = orjson.loads(v[1:])
                    n = t.get("n")
                    self.wms.heard(t["w"], int(t["wm"]), bool(t.get("idle")), self.covers_of(t.get("c")),
                                   now=int(n) if isinstance(n, int) else None)
                    self.ensure_partition_loaded(js, loaded, m.partition)
                    ticked = True
            except Exception as err:  # noqa: BLE001 - internal topic; should not happen
                self.errors.error("internal-record", "bad internal job record %s/%d@%d: %s: %s",
                                  m.topic, m.partition, m.offset, type(err).__name__, err)
        await self.outbox.dead(dead)
        await self.advance(ns, js, fresh, ticked, node_parts,
                           after_local=lambda: observe_batch(self.wms, inputs, ok))

    async def advance(self, ns: NodeSide, js: JobSide, fresh: list[Any], ticked: bool,
                      node_parts: dict[str, int], after_local: Callable[[], None] | None = None) -> None:
        if (node_parts or ns.dirty) and self.node is not None:
            # node-keyed events on the job topics (sched.node): their signals first
            await self.node.flush(ns, js, node_parts)
        if after_local is not None:
            after_local()
        wm, idle = self.wms.value(self.worker_id)
        self.stats.watermark = wm
        cap = self.gate.cap()
        if self._last_wm is not None and self.holes():
            # a job partition has records never delivered below applied ones (fetched again
            # by CommitWatch shortly): evaluating past the time already used would take
            # partial history (sessions 12-13: a moved job's transient host_oom revisions on
            # the wrong node), with the recovery gate open or closed
            cap = min(cap, self._last_wm)
            self.stats.hole_holds += 1
        if cap < ALWAYS:
            # the recovery gate is closed (or a hole holds): event time stops where the
            # partitions being re-read are; no window closes, nothing evaluated is re-run
            self.stats.held_batches += 1
            used = min(wm, cap)
            self._ingest(js, fresh, used)
            self._last_wm = used if self._last_wm is None else max(self._last_wm, used)
        else:
            self._last_wm = wm
            self._ingest(js, fresh, wm)
            if self.deferred:
                self._run_deferred(js)
            if ticked:
                if idle:
                    js.close_windows(self._close_upto())
                else:
                    self._idle_since = None
                js.recheck()
        await self._write(js)

    def _close_upto(self) -> int | None:
        """How far closing windows may release when every worker is idle: the latest time any
        live worker read (``Watermarks.idle_until``), but only once the fleet has stayed idle
        for ``IDLE_CLOSE_S`` with nothing lagging here (a rebalance's pause can look idle for a
        moment: releasing past the watermark then fired a stall before the job's progress
        was read); until then the watermark, as before."""
        now = time.monotonic()
        if self._idle_since is None:
            self._idle_since = now
        if now - self._idle_since < IDLE_CLOSE_S or self.wms.lagging() or not self.gate.open():
            return None
        return self.wms.idle_until(self.worker_id)

    def _ingest(self, js: JobSide, fresh: list[Any], wm: int) -> None:
        try:
            js.ingest(fresh, wm)
        except Exception as err:  # noqa: BLE001 - keep the agent alive; the core lost this batch
            self.stats.failed += len(fresh)
            self.errors.error("job-ingest", "job side failed on a batch of %d events: %s: %s",
                              len(fresh), type(err).__name__, err, exc_info=True)

    async def _write(self, js: JobSide) -> None:
        js.flush_shared()
        await self.outbox.failures(js)
        sigs, outs = js.take()
        await self.outbox.signals(sigs)
        await self.outbox.outputs(outs)
        await self.outbox.settle()          # the revisions are out before the job state records them
        self.write_dirty(js)
        for job in js.evicted:                        # finished long ago: drop the row
            self.tables.put_job(job, None)
        js.evicted.clear()

    def write_dirty(self, js: JobSide) -> None:
        for job in list(js.dirty):
            if job in js.jobs or job in js.fences:    # fences: buffered, not yet applied
                try:
                    blob = js.dump(job)
                except Exception as err:  # noqa: BLE001 - this job's state cannot be encoded
                    self.errors.error("job-dump", "job state of %r cannot be encoded (%s: %s): "
                                      "dropped, reloaded from the table", job, type(err).__name__, err)
                    js.drop(job)
                    continue
                self.tables.put_job(job, blob)
        js.dirty.clear()

    async def tick_local(self, partitions: set[int]) -> None:
        """Advance this worker's own job partitions directly (stall timers and closing
        windows never wait on the consumer)."""
        async with self.lock:
            ns, js, loaded = self.sides.get()
            for part in partitions:
                self.ensure_partition_loaded(js, loaded, part)
            await self.advance(ns, js, [], True, {})


class CommitWatch:
    """Keeps every partition's commit moving. Faust commits the first run of consecutive
    acked offsets after the committed one, so one record never acked (its delivery
    abandoned or its ack lost in a rebalance) holds the partition's commit back for good,
    and a restarted worker re-reads everything since. A head gap that stays at the same
    committed offset for ``STUCK_COMMIT_S`` while nothing below it is in flight is healed
    by fetching the partition again from the committed offset (the offset fences and the
    de-duplication skip what was applied; what was never applied is applied now)."""

    def __init__(self, app: Any, feed: RawFeed, errors: RateLimitedLog, stats: Stats,
                 after_s: float = STUCK_COMMIT_S, drift_every_s: float = COMMIT_DRIFT_S) -> None:
        self.app, self.feed, self.errors, self.stats = app, feed, errors, stats
        self.after_s = after_s
        self.drift_every_s = drift_every_s
        self._since: dict[Any, tuple[int, float]] = {}    # tp -> (committed, first seen)
        self._drift_at: float | None = None

    async def check(self, now: float | None = None) -> list[Any]:
        """Re-seek the partitions stuck long enough; returns them."""
        if not compat.recovered(self.app):
            self._since.clear()
            return []
        now = time.monotonic() if now is None else now
        await self.note_starts()                     # if the read after the assignment failed
        heads = compat.head_gaps(self.app)            # acked records above a hole
        tails = compat.tail_gaps(self.app)            # records after the commit, none acked
        held = {**{tp: (c, hw, "tail") for tp, (c, hw) in tails.items()},
                **{tp: (c, low, "head") for tp, (c, low) in heads.items()}}
        self._since = {tp: v for tp, v in self._since.items() if tp in held and held[tp][0] == v[0]}
        healed = []
        for tp, (committed, upto, kind) in held.items():
            first = self._since.setdefault(tp, (committed, now))[1]
            if now - first < self.after_s:
                continue
            busy = compat.in_flight_below(self.app, tp, upto, self.feed.items + self.feed.in_hand)
            if busy:
                if now - first >= HELD_REPORT_S:
                    # a gap that something below it keeps from healing (test_sink_group in a
                    # fresh-clone CI, session 18: a fl.runtime commit held at 35 for 90 s with
                    # evaluation held all along and no re-fetch): say what holds it
                    self.errors.warning("commit-held", "commit of %s/%d held at %d for %.0f s (%s gap up to %d), "
                                      "not fetched again: %s", tp.topic, tp.partition, committed, now - first,
                                      kind, upto - 1, busy)
                continue
            self._since.pop(tp, None)
            if not await compat.reseek(self.app, tp, committed):
                # revoked meantime: its new owner starts from the committed offset. Said, in
                # case it is not that (a gap nothing heals would hold evaluation for good)
                self.errors.warning("commit-not-refetched", "commit of %s/%d held at %d: not fetched "
                                    "again, the Kafka client does not have it assigned", tp.topic,
                                    tp.partition, committed)
                continue
            what = ("unacked offsets up to %d" if kind == "head" else
                    "offsets up to %d never acked, none in flight")
            self.errors.error("commit-stuck", "commit of %s/%d held at %d by " + what + " for %.0f s: "
                              "fetched it again from %d", tp.topic, tp.partition, committed, upto - 1,
                              now - first, committed)
            self.stats.reseeks += 1
            healed.append(tp)
        return healed + await self.drift(now)

    async def note_starts(self) -> None:
        """The start offsets of the assigned partitions with nothing committed yet, where
        their first commit must begin (``faust_compat._new_offset``); asked after each
        assignment and, until it succeeds, on every check."""
        try:
            await compat.note_starts(self.app)
        except Exception as err:  # noqa: BLE001 - the next check asks again
            self.errors.error("commit-starts", "reading the start offsets of the partitions assigned failed "
                              "(%s: %s); their first commit waits for the next try", type(err).__name__, err)

    async def drift(self, now: float) -> list[Any]:
        """Every ``drift_every_s``: an idle partition whose group commit on the broker is
        behind what the consumer holds as committed (a commit recorded as done that never
        reached the broker) is fetched again from the group's offset, so its commit moves
        (what was applied is skipped again; nothing below is lost on the next restart)."""
        if self._drift_at is None:
            self._drift_at = now
        if now - self._drift_at < self.drift_every_s:
            return []
        self._drift_at = now
        try:
            drifted = await compat.commit_drift(self.app)
        except Exception as e:  # noqa: BLE001 - coordinator away: the next round asks again
            self.errors.error("commit-drift", "comparing committed offsets with the group's failed: %r", e)
            return []
        healed = []
        for tp, (mine, theirs) in drifted.items():
            if not compat.recovered(self.app):
                break
            compat.forget_committed(self.app, tp, theirs)
            if not await compat.reseek(self.app, tp, theirs or 0):
                continue
            self.errors.error("commit-drift", "commit of %s/%d recorded at %d but the group's is %s: "
                              "fetched it again from there", tp.topic, tp.partition, mine, theirs)
            self.stats.drifted += 1
            healed.append(tp)
        return healed


class Ticker:
    """Broadcasts this worker's watermark to every job partition once a second, advances
    its own job partitions, and keeps the gate's targets and the consumer positions the
    watermark needs up to date."""

    def __init__(self, app: Any, jobs: JobAgent, wms: Watermarks, stats: Stats, jobs_out: Any, *,
                 partitions: int, input_topics: set[str], sched_topic: str, job_topics: set[str],
                 worker_id: str) -> None:
        self.app, self.jobs, self.wms, self.stats, self.jobs_out = app, jobs, wms, stats, jobs_out
        self.partitions = partitions
        self.input_topics = input_topics
        self.sched_topic = sched_topic
        self.job_topics = job_topics
        #: job-topic partitions read far ahead of event time stop being fetched (bounded memory)
        self.alignment = Alignment(ALIGN_AHEAD_MS, ALIGN_AHEAD_MS // 2) if ALIGN_AHEAD_MS > 0 else None
        self.worker_id = worker_id
        self.positions: dict[tuple[str, int], int | None] = {}
        self._index = {tp: i for i, tp in enumerate(sorted(wms.universe or ()))}

    def offsets(self, topic: str, partition: int) -> tuple[int | None, int | None]:
        """(high-water mark, fetch position) of an input partition (``Watermarks``)."""
        return compat.highwater(self.app, topic, partition), self.positions.get((topic, partition))

    async def resolve_targets(self) -> None:
        """End offsets and start offsets of the gated job partitions, once Faust's
        recovery finished (the consumer then starts them at the committed offsets)."""
        gate = self.jobs.gate
        want = gate.needs_targets()
        if not want or not compat.recovered(self.app):
            return
        try:
            ends = await compat.end_offsets(self.app, want)
            starts = await compat.committed(self.app, want)
            missing = [tp for tp in want if starts.get(tp) is None]
            if missing:   # never committed: the consumer starts at the log start
                starts.update(await compat.beginning_offsets(self.app, missing))
        except Exception as err:  # noqa: BLE001 - rebalancing again, broker away: next tick
            log.info("recovery gate: offsets not available yet (%s: %s)", type(err).__name__, err)
            return
        self.jobs.set_targets(ends, starts)

    async def refresh_positions(self, tps: set[tuple[str, int]]) -> None:
        gated = set(self.jobs.gate.gated())
        want = {tp for tp in tps | gated if self._needs_position(tp)}
        self.positions = {tp: p for tp, p in self.positions.items() if tp in tps | gated}
        if want:
            self.positions.update(await compat.positions(self.app, want))
        if gated:
            gate = self.jobs.gate
            pos: dict[tuple[str, int], int | None] = {}
            for tp in gated:
                p, target = self.positions.get(tp), gate.target(tp)
                if p is not None and target is not None and compat.in_flight_below(self.app, tp, target):
                    p = None   # fetched past its target but still queued or unacked here: not a gap
                pos[tp] = p
            gate.check_positions(pos)

    def _needs_position(self, tp: tuple[str, int]) -> bool:
        if tp in self.jobs.gate.gated():
            return True
        done = self.wms.consumed(*tp)
        hw = compat.highwater(self.app, *tp)
        return done is None or hw is None or done + 1 < hw

    def align(self) -> None:
        """Hold the job-topic partitions read too far ahead of the global watermark
        (``faust_watermark.Alignment``), fetch the others again."""
        if self.alignment is None:
            return
        hold, resume = self.alignment.decide(self.wms.maxima(self.job_topics), self.wms.global_watermark)
        consumer = self.app.consumer
        for tp in hold:
            compat.pause_fetch(consumer, tp)
        for tp in resume:
            compat.resume_fetch(consumer, tp)
        self.stats.aligned = len(hold)
        self.stats.align_holds = self.alignment.holds

    async def tick(self) -> None:
        self.stats.ticks += 1
        app = self.app
        ready = compat.recovered(app)
        if ready:
            actives = compat.assigned_actives(app)
            inputs = {tp for tp in actives if tp[0] in self.input_topics}
            self.wms.expect(inputs)
            await self.resolve_targets()
            await self.refresh_positions(inputs)
            self.align()
        local = self.wms.local()
        if local is None:
            return
        index = self._index
        covers = sorted(index[tp] for tp in self.wms.covered() if tp in index)
        v = b"T" + orjson.dumps({"w": self.worker_id, "wm": local[0], "idle": local[1], "c": covers,
                                 "n": self.wms.clock.now})
        for p in range(self.partitions):
            await self.jobs_out.send(value=v, partition=p)
        self.stats.ticks_sent += 1
        if not ready or not compat.recovered(app):
            return
        mine = {p for t, p in compat.assigned_actives(app) if t == self.sched_topic}
        if not mine:
            return
        self.stats.ticks_local += 1
        await self.jobs.tick_local(mine)


class Worker:
    """The wired worker (``install``'s result): its agents and the rebalance hooks."""

    def __init__(self, app: Any, settings: Settings) -> None:
        T = settings.topic
        P = settings.topic_partitions
        self.app = app
        self.cfg = cfg = EngineConfig.from_settings(settings)
        self.stats = stats = Stats()
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}"
        self.errors = RateLimitedLog(log)
        table_kw: dict[str, Any] = dict(default=None, key_type=bytes, value_type=bytes)
        nodes = app.Table("nodes", partitions=P, **table_kw)
        jobs = app.Table("jobs", partitions=P, **table_kw)
        views = app.GlobalTable("views", partitions=1, recovery_buffer_size=1,
                                synchronize_all_active_partitions=True, **table_kw)
        self.tables = tables = Tables(nodes, jobs, views, P, stats, self.errors)
        self.shared = shared = Shared(views.data, lambda k, v: tables.put(views, 0, k, v),
                                      retention_ms=cfg.retention_ms)
        self.sides = sides = Sides(shared, views, cfg)
        self.outbox = outbox = Outbox(app, settings, stats)
        topic_layer = {T(t): layer for layer, t in LAYER_TOPICS.items()}
        self.jobs_in = T(JOBS)
        self.jobs_out = app.topic(self.jobs_in)
        self.job_topics = {T(t) for t in JOB_TOPICS}
        self.input_topics = {T(t) for t in NODE_TOPICS + JOB_TOPICS}
        self.ticker: Ticker | None = None
        universe = [(t, p) for t in self.input_topics for p in range(P)] if REBALANCE_GUARD else None
        self.wms = wms = Watermarks(offsets=lambda t, p: self.ticker.offsets(t, p) if self.ticker
                                    else (None, None), universe=universe,
                                    skew_tolerance_ms=cfg.skew_tolerance_ms)
        self.job = JobAgent(sides, tables, outbox, wms, stats, topic_layer, cfg, jobs_in=self.jobs_in,
                            job_topics=self.job_topics, worker_id=self.worker_id)
        self.node = NodeAgent(sides, tables, outbox, wms, stats, topic_layer, deliver=self.job.local_signals)
        self.job.node = self.node
        job_topics = self.job.job_topics
        self.job.holes = lambda: bool(compat.head_gaps(app, job_topics))
        self.job.generation = lambda: app.consumer_generation_id
        self.signals = SignalsAgent(shared, self.jobs_out, cfg, stats)
        self.ticker = Ticker(app, self.job, wms, stats, self.jobs_out, partitions=P,
                             input_topics=self.input_topics, sched_topic=T("fl.sched"),
                             job_topics=self.job_topics, worker_id=self.worker_id)
        self.node_feed = RawFeed(maxsize=NODE_BUFFER)
        self.commits = CommitWatch(app, self.node_feed, self.errors, stats)
        self.heap = HeapTrim()
        self._resolving: asyncio.Future | None = None

    # ---------------------------------------------------------- rebalance hooks
    async def on_revoked(self) -> None:
        """Before the partitions go: let the in-flight batches finish, write every dirty
        node/job dump to the changelog and flush the producer, so the next owner recovers
        everything this worker applied; then drop the caches (rebuilt from the tables).
        The locks are taken only once free (no ``wait_for`` on ``acquire``: a timeout or a
        cancelled rebalance could leave one held for good) and always released."""
        got: list[asyncio.Lock] = []
        try:
            deadline = time.monotonic() + REVOKE_WAIT_S
            for lk in (self.node.lock, self.job.lock):
                while lk.locked() and time.monotonic() < deadline:
                    await asyncio.sleep(0.02)
                if lk.locked():
                    log.warning("partitions revoked while a batch was still running after %.0f s: "
                                "its last records will be re-read by the next owner", REVOKE_WAIT_S)
                    continue
                await lk.acquire()      # free: returns at once
                got.append(lk)
            cur = self.sides.current()
            if cur is not None:
                ns, js, _ = cur
                self.node.write_dirty(ns, {})
                self.job.write_dirty(js)
            await self.app.producer.flush()
        except Exception as err:  # noqa: BLE001 - the rebalance must go on
            log.warning("flushing state on revoke failed: %s: %s", type(err).__name__, err)
        finally:
            self.sides.reset()
            # The node state comes back from the changelog as its last owner left it; an id
            # this worker saw in an earlier generation may be after that (a killed owner that
            # had not re-read so far): "seen" would skip a record the restored state lacks
            # (a rebalance trial showed a GPU's last sample missing: lost 10 s late). Node
            # state takes re-applied records as a restart does.
            self.node.dedup.clear()
            self.node_feed.clear()   # unacked: Faust seeks to the committed offsets after the rebalance
            self.shared.forget_overlay()
            self.wms.forget_partitions()
            if self.ticker.alignment is not None:
                self.ticker.alignment.forget()
            self.job._idle_since = None
            for lk in got:
                lk.release()

    def on_assigned(self) -> None:
        actives = compat.assigned_actives(self.app)
        self.job.on_assigned({tp for tp in actives if tp[0] in self.job.job_topics or tp[0] == self.jobs_in})
        # where each partition with nothing committed yet starts: its first commit must begin
        # there (faust_compat._new_offset); until read, such a partition commits nothing
        compat.forget_starts(self.app)
        asyncio.ensure_future(self.commits.note_starts())

    async def _resolve(self) -> None:
        try:
            await self.ticker.resolve_targets()  # type: ignore[union-attr]
        finally:
            self._resolving = None

    # ---------------------------------------------------------- loops
    async def node_loop(self) -> None:
        app, feed = self.app, self.node_feed
        within = WITHIN_S
        while not app.should_stop:
            batch = await feed.take(NODE_BATCH, within)
            within = NODE_WITHIN_S if len(batch) >= NODE_BUSY else WITHIN_S
            t0 = time.perf_counter()
            try:
                await self.node.handle_batch(batch)
            except Exception as err:  # noqa: BLE001 - log and go on; never kill the pump
                self.errors.error("node-batch", "node batch of %d failed: %s: %s", len(batch),
                                  type(err).__name__, err, exc_info=True)
            RawFeed.ack(app.consumer, batch)
            feed.in_hand = []
            compat.mark_inbound(app, {m.tp for m in batch})
            dt = time.perf_counter() - t0
            self.stats.node_busy_ms += int(dt * 1000)
            self.stats.counts.node_batch.observe(dt)
            self.stats.batches += 1

    async def job_batch(self, batch: list[Any]) -> None:
        t0 = time.perf_counter()
        if self.job.gate.needs_targets() and self._resolving is None:
            # the gate's targets as soon as Faust's recovery is done, not at the next tick
            self._resolving = asyncio.ensure_future(self._resolve())
        try:
            await self.job.handle_batch(batch)
        except Exception as err:  # noqa: BLE001
            self.errors.error("job-batch", "job batch of %d failed: %s: %s", len(batch),
                              type(err).__name__, err, exc_info=True)
        dt = time.perf_counter() - t0
        self.stats.job_busy_ms += int(dt * 1000)
        self.stats.counts.job_batch.observe(dt)
        self.stats.job_batches += 1

    async def signals_batch(self, batch: list[Any]) -> None:
        try:
            await self.signals.handle_batch([(e.message.key, e.value) for e in batch])
        except Exception as err:  # noqa: BLE001
            self.errors.error("signals-batch", "signals batch of %d failed: %s: %s", len(batch),
                              type(err).__name__, err, exc_info=True)

    def held(self) -> int:
        """Records this worker holds: its reorder buffer and its node feed's queue."""
        cur = self.sides.current()
        return (cur[1].counts()["buffered"] if cur is not None else 0) + len(self.node_feed.items)

    def stats_line(self) -> dict[str, Any]:
        d = self.stats.as_dict()
        d.update(self.heap.stats())
        cur = self.sides.current()
        if cur is not None:
            js = cur[1]
            try:
                d.update(pbuf=compat.producer_buffer_size(self.app), **compat.consumer_counts(self.app))
                heads = compat.commit_heads(self.app)
                if heads:
                    d.update(stuck=heads)
                tails = compat.tail_gaps(self.app)
                if tails:   # tp -> (committed, high-water): records after the commit, none acked
                    d.update(tails={f"{tp.topic}/{tp.partition}": v for tp, v in tails.items()})
            except Exception as err:  # noqa: BLE001 - debug only
                d.update(dbg=str(err)[:80])
            c = js.counts()
            d.update(jobs=c["jobs"], buffered=c["buffered"], pending=c["pending"], evaluated=c["evaluated"],
                     wm_released=c["released"], idle=int(self.wms.value(self.worker_id)[1]),
                     lagging=len(self.wms.lagging()), gated=len(self.job.gate.gated()),
                     uncovered=self.wms.uncovered, unread=self.wms.unread, skewed=self.wms.skewed,
                     skew_released=self.wms.skew_released,
                     recovered=int(compat.recovered(self.app)), stale=self.node_feed.stale,
                     generation=self.app.consumer_generation_id,
                     spilled=js.stats.direct, oversize=js.oversize,
                     views=self.shared.replicated(b"view:"))
        return d


def install(app: Any, services: Services) -> Worker:
    """Define the topics, tables, agents and timers on ``app``; returns the wired worker
    (its ``/metrics`` source is added to ``services.metrics``)."""
    settings = services.settings
    w = Worker(app, settings)
    from ..metrics import WorkerSource

    services.metrics.add(WorkerSource(w, settings))   # GET /metrics (faultline.metrics.web) reads it when scraped
    T = settings.topic
    node_topic = app.topic(*(T(t) for t in NODE_TOPICS))
    job_topic = app.topic(*(T(t) for t in JOB_TOPICS + (JOBS,)))
    node_topic.faultline_feed = w.node_feed  # type: ignore[attr-defined]
    app.topics.add(node_topic)

    @app.on_partitions_revoked.connect
    async def _on_revoked(sender: Any, revoked: Any = None, **kw: Any) -> None:
        await w.on_revoked()

    @app.on_partitions_assigned.connect
    async def _on_assigned(sender: Any, assigned: Any = None, **kw: Any) -> None:
        w.on_assigned()

    @app.task
    async def node_events() -> None:
        await w.node_loop()

    @app.agent(w.outbox.signals_topic, name="faultline.signals")
    async def signals_agent(stream: Any) -> None:
        async for batch in stream.take_events(500, within=WITHIN_S):
            await w.signals_batch(batch)

    @app.agent(job_topic, name="faultline.job_events")
    async def job_events(stream: Any) -> None:
        async for batch in stream.take_events(BATCH, within=WITHIN_S):
            await w.job_batch(batch)

    @app.timer(interval=TICK_S, name="faultline.tick")
    async def tick() -> None:
        await w.ticker.tick()  # type: ignore[union-attr]
        await w.commits.check()

    if os.environ.get("FAULTLINE_DEBUG_COMMITS") == "1":
        @app.timer(interval=5.0, name="faultline.debug_commits")
        async def debug_commits() -> None:
            if compat.recovered(app):
                log.info("commit view %s", await compat.commit_view(app))

    if w.heap.enabled:
        @app.timer(interval=HEAP_CHECK_S, name="faultline.heap")
        async def heap_trim() -> None:
            w.heap.check(w.held())

    @app.timer(interval=STATS_S, name="faultline.stats")
    async def log_stats() -> None:
        d = w.stats_line()
        log.info("worker stats %s", " ".join(f"{k}={v}" for k, v in d.items()), extra=d)

    return w
