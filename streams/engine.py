"""``Engine``: the in-process composition used by ``faultline diagnose``, ingest and replay.

decode -> dedup by event id (bounded) -> event-time reorder buffer (lateness bound) ->
node / job detectors -> signal index + alerts -> per-attempt correlation at a fixed
event-time cutoff -> incidents (re-emitted with ``revision + 1`` when they change).

Deterministic: events are applied in ``(ts, id)`` order, and an incident is computed from
the events with ``ts <= cutoff`` only, so the outputs do not depend on the arrival order
within the lateness bound nor on duplicates.
"""

from __future__ import annotations

import bisect
import heapq
import logging
from operator import itemgetter
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Protocol, Union, runtime_checkable

import msgspec
import orjson
from msgspec import Struct

from ..schemas.bounds import cap_alert, cap_signal
from ..schemas.codec import MAX_EVENT_BYTES, MAX_FUTURE_MS, ContractError, decode, decode_fast, now_ms
from ..schemas.events import INTERRUPTION_STATES, KIND_MODELS, Envelope
from ..schemas.outputs import Alert, Incident, Retry
from .alert_gate import ALERT_WINDOW_MS, AlertGate
from .clock import TOLERANCE_MS, EventClock, source_of
from .correlate import CorrelateConfig, correlate, incident_id
from .detectors.config import DetectorConfig
from .detectors.job import AttemptRecord, JobState, checkpoint_stale, feed_job, log_signature, stalled
from .detectors.node import NodeState, feed_node
from .join import CONGESTION, SignalIndex, View, index_keys
from .signals import Signal, make

log = logging.getLogger("faultline.streams.engine")

_NODE_KINDS = frozenset({"gpu.sample", "gpu.xid", "hw.sensor", "hw.sel", "net.port", "net.link", "net.rdma",
                         "storage.sample", "storage.mount", "sched.node", "inventory.change", "inventory.topology"})
_JOB_KINDS = frozenset({"sched.job", "runtime.log", "runtime.progress", "runtime.checkpoint", "runtime.container"})
_INV_KINDS = frozenset({"inventory.topology", "inventory.versions", "inventory.change"})
# signal kinds that raise an alert before a job dies
_ALERT_KINDS = frozenset({
    "xid", "gpu_lost", "ecc_dbe", "ecc_sbe_burst", "nvlink_errors", "remap_pending", "retired_pages", "thermal_throttle",
    "gpu_mem_high", "bmc_sensor", "bmc_sel", "port_down", "port_flap", "port_errors", "rdma_link_downed",
    "rdma_link_errors", "rdma_congestion", "storage_slow", "storage_full", "mount_stale", "mount_missing",
    "mount_readonly", "mount_full", "node_down", "container_oom", "checkpoint_failed", "straggler", "stall",
    "checkpoint_stale", "log:cuda_oom", "log:oom_killer", "log:cgroup_oom", "log:enospc", "log:stale_file_handle",
    "storage_latency_climb", "segment_congestion",   # precursors (streams/detectors: storage, net)
})


class JobParts(Struct, kw_only=True):
    """What the core holds for one job (``Engine.export_job`` / ``import_job``)."""

    state: JobState
    buffered: list[Any] = []            # events waiting in the reorder buffer (Envelopes)
    pending: list["_Pending"] = []
    ctx: dict[str, "_Pending"] = {}
    incidents: dict[str, Incident] = {}
    recovered: dict[str, int] = {}      # withdrawn incident id -> its last revision


class EngineConfig(Struct, frozen=True, kw_only=True):
    lateness_ms: int = 10_000
    detectors: DetectorConfig = DetectorConfig()
    correlate: CorrelateConfig = CorrelateConfig()
    dedup_cap: int = 2_000_000          # event ids remembered for de-duplication
    alert_interval_ms: int = ALERT_WINDOW_MS   # at most one alert per subject+kind per window (alert_gate)
    retention_ms: int = 6 * 3_600_000   # signals / finished jobs kept this long (event time)
    max_jobs: int = 100_000
    max_nodes: int = 200_000
    #: an event further ahead of the fleet's event time than this does not move it alone
    #: (``streams.clock``); it is processed and counted in ``Stats.skewed``
    skew_tolerance_ms: int = TOLERANCE_MS
    #: a node-side signal repeating (same kind, subject and summary) within this much event
    #: time is filed ``repeats_kept`` times, then only counted (an XID storm: ``Stats.coalesced``)
    repeat_ms: int = 60_000
    repeats_kept: int = 3
    #: runtime records one job may hold in the reorder buffer of ``ingest`` (the worker's
    #: input, whose watermark can lag a burst), by count and by size; ``process`` releases
    #: every batch and needs no cap
    max_buffered_per_job: int = 1_024
    max_buffered_bytes_per_job: int = 128 * 1024
    #: the worker's sides: every alert and incident revision is streamed out as it is made,
    #: so none is kept as history (``alerts()``, the incidents of jobs retention dropped);
    #: ``diagnose`` and replay keep them for their report
    streaming: bool = False

    @classmethod
    def from_settings(cls, settings: Any) -> "EngineConfig":
        """The worker's and ``diagnose``'s configuration: lateness, and the stall floor and
        the evidence settle time when the settings carry them (``stall_floor_ms``,
        ``settle_ms``: a setting or an unknown key of the TOML file in ``settings.extra``;
        the detector's and the correlator's defaults otherwise)."""
        def optional(name: str) -> int | None:
            v = getattr(settings, name, None)
            if v is None:
                v = (getattr(settings, "extra", None) or {}).get(name)
            return None if v is None else int(v)

        floor, settle = optional("stall_floor_ms"), optional("settle_ms")
        det = DetectorConfig() if floor is None else DetectorConfig(stall_floor_ms=floor)
        cor = CorrelateConfig() if settle is None else CorrelateConfig(settle_ms=settle)
        return cls(lateness_ms=int(getattr(settings, "lateness_ms", 10_000)), detectors=det, correlate=cor)


class Stats(Struct, kw_only=True):
    events: int = 0
    invalid: int = 0
    duplicates: int = 0
    late: int = 0
    signals: int = 0
    alerts: int = 0
    alerts_suppressed: int = 0
    incidents_emitted: int = 0
    reasons: dict[str, int] = {}
    #: events stamped ahead of the fleet's event time by more than the skew tolerance (and
    #: never caught up with): processed, but they did not move event time
    skewed: int = 0
    #: source (node, switch, producer) -> how far ahead (ms) its flagged events were, at most
    skewed_sources: dict[str, int] = {}
    logs_unmatched: int = 0     # runtime.log lines no signature matches: counted, never buffered
    direct: int = 0             # job records applied on arrival: their job's buffer was full (worker)
    coalesced: int = 0          # node-side signals repeating within ``repeat_ms`` (not filed again)
    failed: int = 0             # events / evaluations that raised inside the core (skipped)


class SeenIds:
    """Event ids already processed, for de-duplication, bounded to about ``cap`` ids.

    Two generations of sets: when the young one reaches ``cap // 2`` it becomes the old one
    and the previous old one is dropped, so an id is remembered for at least ``cap // 2``
    newer ids (a set lookup per event; an ``OrderedDict`` cost ~4x more per event).
    """

    __slots__ = ("cap", "young", "old")

    def __init__(self, cap: int) -> None:
        self.cap = max(2, cap)
        self.young: set[str] = set()
        self.old: set[str] = set()

    def add(self, eid: str) -> bool:
        """Remember ``eid``; False when it was already seen."""
        if eid in self.young or eid in self.old:
            return False
        y = self.young
        y.add(eid)
        if len(y) >= self.cap >> 1:
            self.old, self.young = y, set()
        return True

    def __contains__(self, eid: object) -> bool:
        return eid in self.young or eid in self.old

    def __len__(self) -> int:
        return len(self.young) + len(self.old)


class _Pending(Struct, kw_only=True):
    job: str
    attempt: int
    cutoff: int
    failure_ts: int
    stalled: bool


Output = Union[Alert, Incident]
MAX_FAILURES = 1_000    # core failures kept between two take_failures() calls
_SCHED = KIND_MODELS["sched.job"]
_MISSING = object()


def _est_bytes(ev: Envelope) -> int:
    """About the JSON size of a buffered job event (a log line is its message and ~300 bytes)."""
    msg = getattr(ev.data, "message", None)
    return 300 + (len(msg) if isinstance(msg, str) else 0)


class _RecoveredMark(Struct, kw_only=True):
    """A withdrawn incident known only by its last revision (restored from a job dump)."""

    job: str
    revision: int
#: ends that do not come from the fault itself: a hung attempt ended this way stays a stall
EXTERNAL_END_STATES = frozenset({"timeout", "cancelled", "preempted", "requeued"})
_sort_key = itemgetter(0, 1)
_ts_key = itemgetter(0)
#: event class -> kind (the ``kind`` property is a Python-level lookup; this is one dict hit)
_KIND_OF = {cls: tag for tag, cls in KIND_MODELS.items()}
_LOG = KIND_MODELS["runtime.log"]
#: event class -> (kind, node-keyed?, inventory?, job-keyed?)
_ROUTE = {cls: (tag, tag in _NODE_KINDS, tag in _INV_KINDS, tag in _JOB_KINDS) for cls, tag in _KIND_OF.items()}


# ---------------------------------------------------------------------------- collaborators
@runtime_checkable
class SignalStore(Protocol):
    """Where node-side signals are filed and correlation finds them (``join.SignalIndex``
    in process; the worker's GlobalTable-backed index, whose ``add`` is its outbox)."""

    def add(self, sig: Signal) -> bool: ...

    def query(self, keys: Iterable[str], t0: int, t1: int,
              kinds: frozenset[str] | None = None) -> list[Signal]: ...

    def evict(self, before_ts: int) -> None: ...


@runtime_checkable
class World(Protocol):
    """The cross-key state correlation reads: the join view (topology, versions, changes),
    telemetry coverage per node or switch, failures per version key (other jobs'), and the
    allocation (which job ran on a node); and where an evaluated failure is filed."""

    def view(self) -> View: ...

    def coverage(self, owner: str) -> dict[str, list[int]] | None: ...

    def failures(self) -> dict[str, list[tuple[int, str]]]: ...

    def record_failure(self, iid: str, failure_ts: int, job: str, keys: list[str]) -> None: ...

    def job_on(self, node: str, ts: int) -> str | None: ...

    def evict(self, before_ts: int) -> None: ...


@runtime_checkable
class Listener(Protocol):
    """Told what changed, so a caller can persist it (the worker's changelog tables)."""

    def on_touched(self, job: str) -> None: ...        # the job's state or outputs changed

    def on_evaluated(self, iid: str) -> None: ...      # an incident was computed at its cutoff

    def on_evicted(self, jobs: set[str]) -> None: ...  # finished jobs dropped by retention


class LocalWorld:
    """``World`` of one process: the Engine's own view, node states and jobs (``diagnose``)."""

    def __init__(self, engine: "Engine") -> None:
        self.engine = engine
        self._failures: dict[str, list[tuple[int, str]]] = {}   # version key -> [(failure ts, job)]

    def view(self) -> View:
        return self.engine.view

    def coverage(self, owner: str) -> dict[str, list[int]] | None:
        ns = self.engine.nodes.get(owner)
        return ns.cover if ns is not None else None

    def failures(self) -> dict[str, list[tuple[int, str]]]:
        return self._failures

    def record_failure(self, iid: str, failure_ts: int, job: str, keys: list[str]) -> None:
        for k in keys:
            lst = self._failures.setdefault(k, [])
            if (failure_ts, job) not in lst:
                lst.append((failure_ts, job))
                if len(lst) > 1000:
                    del lst[0]

    def job_on(self, node: str, ts: int) -> str | None:
        for js in self.engine.jobs.values():
            for a in js.attempts.values():
                if node in a.nodes and a.started() <= ts and (a.end_ts is None or ts <= a.end_ts):
                    return js.job
        return None

    def evict(self, before_ts: int) -> None:
        for lst in self._failures.values():
            while lst and lst[0][0] < before_ts:
                del lst[0]


class Engine:
    """Event batches in, alerts and incidents out (see module doc).

    Collaborators (defaults: in-process): ``index`` (``SignalStore``), ``world``
    (``World``) and ``listener`` (``Listener``, none by default). The worker's node and job
    sides (``streams.faust_engine``) compose an Engine with GlobalTable-backed ones and use
    its public methods only."""

    def __init__(self, config: EngineConfig | None = None, *, index: SignalStore | None = None,
                 world: World | None = None, listener: Listener | None = None) -> None:
        self.cfg = config or EngineConfig()
        self._dcfg = self.cfg.detectors
        self.stats = Stats()
        self.view = View()
        self.index: SignalStore = index if index is not None else SignalIndex()
        self.world: World = world if world is not None else LocalWorld(self)
        self._listener = listener
        self.nodes: dict[str, NodeState] = {}
        self.jobs: dict[str, JobState] = {}
        self._seen = SeenIds(self.cfg.dedup_cap)
        self._buf: list[tuple[int, str, Envelope]] = []     # reorder buffer, sorted on release
        #: bumped whenever records enter or leave ``_buf``: the key of ``_by_job``, the
        #: buffer grouped by job (``buffered_of``), built at most once per change. Dumping
        #: each changed job used to scan the whole buffer: with 80,000 records buffered while
        #: a backlog drained, 55% of the worker's time (issue 18)
        self._buf_gen = 0
        self._by_job: tuple[int, dict[str | None, list[Envelope]]] = (-1, {})
        self.clock = EventClock(self.cfg.skew_tolerance_ms)
        self._max_ts = -(1 << 62)       # the fleet's event time (``clock.now``)
        self._wm = -(1 << 62)           # released up to here
        self.released = 0               # events released from the reorder buffer so far
        self._pending: dict[tuple[str, int], _Pending] = {}
        self._heap_due: list[tuple[int, str, int]] = []
        self._stall_heap: list[tuple[int, str, int]] = []     # (deadline, job, attempt)
        self._stall_armed: set[tuple[str, int]] = set()
        self._incidents: dict[str, Incident] = {}
        self._recovered: dict[str, Incident] = {}
        self._last_evict = -(1 << 62)
        self._inc_ctx: dict[str, _Pending] = {}
        self._alerts: list[Alert] = []
        self.alert_gate = AlertGate(self.cfg.alert_interval_ms)
        self._sig_last: dict[tuple[str, str, str], list[int]] = {}   # repeat key -> [window start, filed]
        self._log_sigs: dict[str, Any] = {}     # buffered runtime.log event id -> its signature
        self._sig_cache: dict[tuple[Any, str], Any] = {}   # (named signature, message) -> match (bounded)
        self._held: dict[str, list[int]] = {}   # job -> [records, bytes] buffered (upper bound), at `released`
        self._out: list[Output] = []
        self._now = now_ms()
        self.errors: list[tuple[int, str]] = []                # (input position, reason), bounded
        self._failures_out: list[tuple[Envelope | None, str]] = []   # core failures (take_failures)
        self._pos = 0

    # ------------------------------------------------------------------ input
    def process(self, batch: Iterable[Union[bytes, str, dict, Envelope]]) -> list[Output]:
        """Decode, de-duplicate and buffer a batch; apply what the watermark releases."""
        now = self._now
        seen_add = self._seen.add
        buf = self._buf
        stats = self.stats
        wm = self._wm
        clock = self.clock
        max_ts = self._max_ts
        tol = clock.tolerance_ms
        # events up to ``lim`` move event time without asking the clock (the fast path)
        lim = clock.fast_limit(max_ts)
        limit = now + MAX_FUTURE_MS
        fast = decode_fast
        added = False
        for item in batch:
            self._pos += 1
            t = type(item)
            if t is bytes:
                try:
                    ev = fast(item)
                except Exception:
                    ev = None
                if ev is None or ev.ts > limit or len(item) > MAX_EVENT_BYTES:
                    try:    # the checked path, for the reason
                        ev = decode(item, now=now)
                    except ContractError as e:
                        self._invalid(e.reason)
                        continue
            elif t is str or t is bytearray or t is memoryview:
                try:
                    ev = decode(item, now=now)
                except ContractError as e:
                    self._invalid(e.reason)
                    continue
            elif isinstance(item, Envelope):
                ev = item
            else:
                try:
                    ev = decode(orjson.dumps(item), now=now)
                except (ContractError, TypeError) as e:
                    self._invalid(getattr(e, "reason", str(e)))
                    continue
            eid = ev.id
            if not seen_add(eid):
                stats.duplicates += 1
                continue
            stats.events += 1
            ts = ev.ts
            if ts <= lim:
                if ts > max_ts:
                    max_ts = ts
                    lim = ts + tol
            else:
                clock.now = max_ts
                clock.observe(source_of(ev), ts)
                max_ts = clock.now
                lim = clock.fast_limit(max_ts)
            if ts < wm:
                stats.late += 1
                self._apply_guarded(ev)
                self._late(ev)
            elif type(ev) is not _LOG or self._admit_log(ev):
                buf.append((ts, eid, ev))
                added = True
        if added:
            self._buf_gen += 1
        self._max_ts = clock.now = max_ts
        if clock.flags or clock.flagged_other:
            self._count_skewed()
        self._release(self._max_ts - self.cfg.lateness_ms)
        return self._drain()

    def _admit_log(self, ev: Envelope) -> bool:
        """A ``runtime.log`` line on its way into the reorder buffer: True to buffer it. A line
        no signature matches changes no state (``feed_job`` ignores it): counted, dropped, so
        a storm of ordinary output never fills the buffer."""
        d = ev.data
        key = (d.signature, d.message)
        cache = self._sig_cache
        sig = cache.get(key, _MISSING)
        if sig is _MISSING:     # a storm repeats a few texts: match each once
            sig = log_signature(ev)
            if len(cache) >= 4096:
                cache.clear()
            cache[key] = sig
        if sig is None:
            self.stats.logs_unmatched += 1
            return False
        self._log_sigs[ev.id] = sig     # feed_job takes it from here (one match per line)
        return True

    def _count_skewed(self) -> None:
        flags = self.clock.skewed()
        self.stats.skewed = sum(f.events for f in flags) + self.clock.flagged_other
        self.stats.skewed_sources = {f.source: f.ahead_ms for f in flags[:100]}

    def skip(self, n: int = 1) -> None:
        """Count ``n`` inputs (blank lines) as seen, so error positions match line numbers."""
        self._pos += n

    def invalid(self, reason: str) -> None:
        """Count an input the caller could not even split into lines / messages."""
        self._invalid(reason)

    def _invalid(self, reason: str) -> None:
        self.stats.invalid += 1
        key = reason.split(" - at ")[0][:80]
        self.stats.reasons[key] = self.stats.reasons.get(key, 0) + 1
        if len(self.errors) < 1000:
            self.errors.append((self._pos, reason))

    def advance(self, watermark_ms: int) -> list[Output]:
        """Move event time forward (idle input, end of a replay range)."""
        self._release(watermark_ms)
        return self._drain()

    def finish(self) -> list[Output]:
        """End of input: release every buffered event, run timers up to the last event
        time, and close every pending window (an evaluation only uses events up to its
        cutoff, so closing early changes nothing)."""
        self._release(self._max_ts)
        if self._buf:
            # ahead of the fleet's time (a skewed clock): processed, but no timer runs up to them
            ahead = sorted(self._buf, key=_sort_key)
            self._buf = []
            self._buf_gen += 1
            for _, _, ev in ahead:
                self._apply_guarded(ev)
        self._fire_due(1 << 62)
        self._fire_due(1 << 62)
        return self._drain()

    def incidents(self) -> list[Incident]:
        """Latest revision of every incident, ordered by failure time then id."""
        return sorted(self._incidents.values(), key=lambda i: (i.failure_ts, i.id))

    def alerts(self) -> list[Alert]:
        return list(self._alerts)

    @property
    def watermark(self) -> int:
        return self._wm

    # ------------------------------------------------------------------ the worker's input
    # The worker (``streams.faust_engine``) decodes, fences and keys events itself and
    # drives event time from its global watermark: these methods are its whole interface.
    def apply_now(self, ev: Envelope) -> None:
        """Apply one decoded event on arrival, no reorder buffer (the worker's node side:
        alerts within seconds); de-duplication is the caller's."""
        self.stats.events += 1
        if ev.ts > self._max_ts:
            self._max_ts = ev.ts
        self._apply(ev)

    def ingest(self, events: Iterable[Envelope], watermark: int) -> None:
        """Buffer decoded events (de-duplicated by id), then release up to ``watermark -
        lateness`` (the worker's global watermark). A job holds at most
        ``max_buffered_per_job`` runtime records and ``max_buffered_bytes_per_job`` in the
        buffer (``_admit``). A fresh Engine at ``watermark = -(1 << 62)`` releases nothing."""
        seen_add = self._seen.add
        stats = self.stats
        buf = self._buf
        added = False
        for ev in events:
            eid = ev.id
            if not seen_add(eid):
                stats.duplicates += 1
                continue
            stats.events += 1
            if self._listener is not None and ev.job:
                self._listener.on_touched(ev.job)
            if ev.ts < self._wm:
                stats.late += 1
                self._apply_guarded(ev)
                self._late(ev)
            elif (type(ev) is not _LOG or self._admit_log(ev)) and self._admit(ev):
                buf = self._buf          # _admit may have rebuilt it
                buf.append((ev.ts, eid, ev))
                added = True
        if added:   # (spill and _release count their own changes)
            self._buf_gen += 1
        if watermark > self._max_ts:
            self._max_ts = watermark
        self._release(self._max_ts - self.cfg.lateness_ms)
        if not self._buf:
            self._held.clear()

    def close_windows(self, upto: int | None = None) -> None:
        """Every input is idle: like ``finish`` release what is buffered and run the pending
        evaluations now (an evaluation only uses events up to its cutoff; one that arrives
        later re-evaluates the incident). ``upto``: the fleet's latest credible event time
        when the caller knows better than this engine's (the worker: see ``Watermarks.idle_until``)."""
        if upto is not None and upto > self._max_ts:
            self._max_ts = upto
        self._release(self._max_ts)
        if self._heap_due:
            self._fire_due(1 << 62)
            self._fire_due(1 << 62)

    def drain(self) -> list[Output]:
        """Alerts and incident revisions produced since the last call."""
        return self._drain()

    def _admit(self, ev: Envelope) -> bool:
        """Make room for ``ev`` in the reorder buffer (True: buffer it). Beyond its job's
        caps (a burst while the watermark lags) the older half of the job's records is
        applied now, in event-time order but before the watermark passes them
        (``Stats.direct``; a job printing that much is not stalled, and correlation reads
        signals by their ts, so its incident does not depend on it). ``sched.job`` records
        always wait (few; their order matters)."""
        if type(ev) is _SCHED:
            return True
        job = ev.job or ""
        size = _est_bytes(ev)
        cap_n, cap_b = self.cfg.max_buffered_per_job, self.cfg.max_buffered_bytes_per_job
        used = self._held.get(job)
        if used is None:
            used = self._held[job] = [0, 0, self.released]
        if used[0] >= cap_n or used[1] + size > cap_b:
            if used[2] != self.released:        # events released since: recount
                used[0], used[1] = self._held_by(job)
                used[2] = self.released
            if used[0] >= cap_n or used[1] + size > cap_b:
                self.spill(job, half=True)
                used[0], used[1] = self._held_by(job)
        used[0] += 1
        used[1] += size
        return True

    def _held_by(self, job: str) -> tuple[int, int]:
        n = b = 0
        for _, _, e in self._buf:
            if e.job == job and type(e) is not _SCHED:
                n += 1
                b += _est_bytes(e)
        return n, b

    def spill(self, job: str, half: bool = False) -> int:
        """Apply ``job``'s buffered records now, in order: all of them, or the older half of
        its runtime records (``half``). Returns how many."""
        mine = sorted((h for h in self._buf if h[2].job == job and (not half or type(h[2]) is not _SCHED)),
                      key=_sort_key)
        if half:
            mine = mine[: max(1, len(mine) // 2)]
        if not mine:
            return 0
        gone = {h[1] for h in mine}
        self._buf = [h for h in self._buf if h[1] not in gone]
        self._buf_gen += 1
        if not half:
            self._held.pop(job, None)
        self.stats.direct += len(mine)
        for _, _, ev in mine:
            self._apply_guarded(ev)
        return len(mine)

    # ------------------------------------------------------------------ the worker's state
    @property
    def evaluations(self) -> Mapping[str, _Pending]:
        """Incident id -> the evaluation it was computed at (read-only)."""
        return MappingProxyType(self._inc_ctx)

    def counts(self) -> dict[str, int]:
        """Sizes for a stats log."""
        return {"jobs": len(self.jobs), "buffered": len(self._buf), "pending": len(self._pending),
                "evaluated": len(self._inc_ctx), "released": self._wm}

    def buffered_jobs(self) -> set[str]:
        """Jobs with events waiting in the reorder buffer."""
        return {h[2].job or "" for h in self._buf}

    def buffered_of(self, job: str) -> list[Envelope]:
        """``job``'s records in the reorder buffer (do not modify the list)."""
        gen, by = self._by_job
        if gen != self._buf_gen:
            by = {}
            for _, _, ev in self._buf:
                mine = by.get(ev.job)
                if mine is None:
                    by[ev.job] = [ev]
                else:
                    mine.append(ev)
            self._by_job = (self._buf_gen, by)
        return by.get(job, [])

    def export_job(self, job: str) -> JobParts:
        """Everything the core holds for ``job`` (to persist it; ``import_job`` restores it)."""
        ctx = {i: p for i, p in self._inc_ctx.items() if p.job == job}
        return JobParts(state=self.jobs.get(job) or JobState(job=job),
                        buffered=list(self.buffered_of(job)),
                        pending=[p for (j, _), p in self._pending.items() if j == job], ctx=ctx,
                        incidents={i: self._incidents[i] for i in ctx if i in self._incidents},
                        recovered={i: r.revision for i, r in self._recovered.items() if r.job == job})

    def import_job(self, job: str, parts: JobParts) -> None:
        """Restore a job exported by ``export_job`` (after a restart or a rebalance):
        its buffered events, pending evaluations, re-armed stall deadlines, incidents."""
        self.jobs[job] = parts.state
        for ev in parts.buffered:
            self._seen.add(ev.id)
            self._buf.append((ev.ts, ev.id, ev))
        self._buf_gen += 1
        for p in parts.pending:
            self._schedule(p)
        dcfg = self._dcfg
        for rec in parts.state.attempts.values():   # re-arm stall deadlines
            if rec.state == "running" and rec.prog_n > 0 and not rec.stalled_at:
                k = (job, rec.attempt)
                if k not in self._stall_armed:
                    self._stall_armed.add(k)
                    heapq.heappush(self._stall_heap, (rec.prog_last_ts + rec.stall_threshold_ms(dcfg),
                                                      job, rec.attempt))
        self._inc_ctx.update(parts.ctx)
        self._incidents.update(parts.incidents)
        for i, rev in parts.recovered.items():
            if i not in self._incidents and i not in self._recovered:
                self._recovered[i] = _RecoveredMark(job=job, revision=rev)   # type: ignore[assignment]

    def drop_job(self, job: str) -> None:
        """Forget ``job`` (its state is reloaded from the table when it comes back)."""
        self.jobs.pop(job, None)
        for k in [k for k in self._pending if k[0] == job]:
            del self._pending[k]
        for i in [i for i, p in self._inc_ctx.items() if p.job == job]:
            del self._inc_ctx[i]
            self._incidents.pop(i, None)
        self._buf = [h for h in self._buf if h[2].job != job]
        self._buf_gen += 1
        self._held.pop(job, None)
        if self._log_sigs:
            ids = {h[1] for h in self._buf}
            self._log_sigs = {i: g for i, g in self._log_sigs.items() if i in ids}

    def reevaluate_for(self, job: str, ts: int) -> None:
        """Re-run ``job``'s incidents whose window a signal at ``ts`` falls in."""
        for iid, p in list(self._inc_ctx.items()):
            if p.job == job and ts <= p.cutoff:
                self._reevaluate(iid)

    def reevaluate(self, iid: str) -> None:
        """Re-run one evaluated incident (cross-partition evidence may have landed since)."""
        if iid in self._inc_ctx:
            self._reevaluate(iid)

    # ------------------------------------------------------------------ core
    def _drain(self) -> list[Output]:
        out, self._out = self._out, []
        return out

    def _release(self, wm: int) -> None:
        buf = self._buf
        if buf:
            try:    # (ts, id) decide: ids are unique once de-duplicated (no key function: ~2x faster)
                buf.sort()
            except TypeError:   # the same id buffered twice (a reloaded job dump): events do not compare
                buf.sort(key=_sort_key)
            i = bisect.bisect_right(buf, wm, key=_ts_key)
            if i:
                ready = buf[:i]
                del buf[:i]
                self._buf_gen += 1
                self.released += i
                if not buf:
                    self._log_sigs.clear()
                apply = self._apply
                stalls, due = self._stall_heap, self._heap_due
                for ts, _, ev in ready:
                    if (stalls and stalls[0][0] < ts) or (due and due[0][0] < ts):
                        self._timers_to(ts - 1)
                    try:
                        apply(ev)
                    except Exception as err:  # noqa: BLE001 - one event never fails the others
                        self._failed(ev, err)
        if wm > self._wm:
            self._timers_to(wm)
            self._wm = wm
            self._check_stale(wm)
            if wm - self._last_evict >= 600_000:
                self._last_evict = wm
                self._evict(wm - self.cfg.retention_ms)

    def evict_before(self, before: int) -> None:
        """Drop what retention no longer needs, older than event time ``before`` (``_evict``;
        the worker's node side, whose core never advances a watermark of its own)."""
        self._evict(before)

    def _evict(self, before: int) -> None:
        """Bound the state: signals, finished jobs and rate-limit keys older than the
        retention (event time); incidents beyond ``max_jobs`` (oldest first)."""
        self.index.evict(before)
        gone: set[str] = set()
        for job in [j for j, js in self.jobs.items()
                    if js.attempts and all(a.state not in ("pending", "running") and (a.end_ts or a.state_ts) < before
                                           for a in js.attempts.values())
                    and not any((j, a) in self._pending for a in js.attempts)]:
            js = self.jobs.pop(job)
            gone.add(job)
            for a in js.attempts:
                iid = incident_id(job, a)
                self._inc_ctx.pop(iid, None)
                if self.cfg.streaming:       # sent long ago; nothing reads it here any more
                    self._incidents.pop(iid, None)
                    self._recovered.pop(iid, None)
        self.alert_gate.evict(before)
        self._sig_last = {k: v for k, v in self._sig_last.items() if v[0] >= before}
        self.world.evict(before - self.cfg.correlate.change_window_ms)
        if gone and self._listener is not None:
            self._listener.on_evicted(gone)
        if len(self._incidents) > self.cfg.max_jobs:
            for iid, _ in sorted(self._incidents.items(), key=lambda kv: kv[1].failure_ts)[: len(self._incidents) - self.cfg.max_jobs]:
                del self._incidents[iid]
        if len(self.nodes) > self.cfg.max_nodes:
            for k, _ in sorted(self.nodes.items(), key=lambda kv: kv[1].ts)[: len(self.nodes) - self.cfg.max_nodes]:
                del self.nodes[k]

    def _timers_to(self, t: int) -> None:
        """Fire stall deadlines and incident cutoffs up to event time ``t`` (before any
        event later than ``t`` is applied)."""
        if self._stall_heap and self._stall_heap[0][0] <= t:
            self._fire_stalls(t)
        if self._heap_due and self._heap_due[0][0] <= t:
            self._fire_due(t)

    def _apply(self, ev: Envelope) -> None:
        k, node_kind, inv_kind, job_kind = _ROUTE[type(ev)]
        sigs: list[Signal] = []
        if node_kind:
            key = ev.node or getattr(ev.data, "device", None) or "?"
            st = self.nodes.get(key)
            if st is None:
                st = self.nodes[key] = NodeState()
            feed_node(st, ev, self._dcfg, sigs, k)
            if not sigs and not inv_kind:   # the common case: a sample that changed no verdict
                return
        if inv_kind:
            self.view.update(ev)
        if job_kind:
            if self._listener is not None and ev.job:
                self._listener.on_touched(ev.job)
            js = self.jobs.get(ev.job)
            if js is None:
                js = self.jobs[ev.job] = JobState(job=ev.job)
            feed_job(js, ev, self.cfg.detectors, sigs,
                     self._log_sigs.pop(ev.id, None) if k == "runtime.log" and self._log_sigs else None)
            if k == "sched.job":
                self._on_sched(js, ev)
            elif k == "runtime.progress":
                rec = js.attempt_at(ev.ts)
                if rec is not None and rec.stalled_at and ev.ts > rec.stalled_at:
                    # progress again: the stall resolved itself (no incident), re-arm detection
                    rec.stalled_at = 0
                    iid = incident_id(js.job, rec.attempt)
                    ctx = self._pending.get((js.job, rec.attempt)) or self._inc_ctx.get(iid)
                    if ctx is not None and ctx.stalled:
                        self._withdraw((js.job, rec.attempt), iid)
                if rec is not None and (js.job, rec.attempt) not in self._stall_armed:
                    self._stall_armed.add((js.job, rec.attempt))
                    heapq.heappush(self._stall_heap, (rec.prog_last_ts + rec.stall_threshold_ms(self.cfg.detectors),
                                                      js.job, rec.attempt))
        for s in sigs:
            self._on_signal(s)

    def _on_signal(self, s: Signal) -> None:
        self.stats.signals += 1
        if not s.subject.startswith("job:") and s.kind != "container_oom":
            if self._repeat(s):
                return
            s = cap_signal(s)
            self.index.add(s)
        if s.kind in _ALERT_KINDS and s.severity != "info":
            self._alert(s)

    def _repeat(self, s: Signal) -> bool:
        """True when ``s`` repeats a signal filed ``repeats_kept`` times within the last
        ``repeat_ms`` (same kind, subject and summary: the same XID over and over): counted
        only, neither filed nor alerted again. Bounded: at most ~100k keys, oldest windows go."""
        key = (s.kind, s.subject, s.summary)
        last = self._sig_last.get(key)
        if last is not None and 0 <= s.ts - last[0] < self.cfg.repeat_ms:
            if last[1] >= self.cfg.repeats_kept:
                self.stats.coalesced += 1
                return True
            last[1] += 1
            return False
        if last is None and len(self._sig_last) >= 100_000:
            horizon = s.ts - self.cfg.repeat_ms
            self._sig_last = {k: v for k, v in self._sig_last.items() if v[0] >= horizon}
            if len(self._sig_last) >= 100_000:
                self._sig_last.clear()
        self._sig_last[key] = [s.ts, 1]
        return False

    def _alert(self, s: Signal) -> None:
        aid = self.alert_gate.admit(s.subject, s.kind, s.ts)
        if aid is None:
            self.stats.alerts_suppressed += 1
            return
        job = s.job
        if job is None and s.node:
            job = self._job_on(s.node, s.ts)
        a = cap_alert(Alert(id=aid, ts=s.ts, severity=s.severity, detector=s.kind, summary=s.summary,
                            node=s.node, job=job, evidence=list(s.evidence), subject=s.subject))
        if not self.cfg.streaming:
            self._alerts.append(a)
            if len(self._alerts) > 100_000:
                del self._alerts[:10_000]
        self.stats.alerts += 1
        self._out.append(a)

    def _job_on(self, node: str, ts: int) -> str | None:
        return self.world.job_on(node, ts)

    # ------------------------------------------------------------------ jobs
    def _on_sched(self, js: JobState, ev: Envelope) -> None:
        d = ev.data
        rec = js.attempts.get(d.attempt)
        if rec is None:
            return
        key = (js.job, rec.attempt)
        iid = incident_id(js.job, rec.attempt)
        if rec.state not in ("pending", "running"):
            end = rec.end_ts if rec.end_ts is not None else rec.state_ts
            cutoff = max(end, rec.state_ts) + self.cfg.correlate.settle_ms
            ctx = self._pending.get(key) or self._inc_ctx.get(iid)
            was_stalled = ctx is not None and ctx.stalled
            resumed = was_stalled and rec.prog_last_ts > ctx.failure_ts
            if was_stalled and (rec.state == "completed" or (resumed and rec.state not in INTERRUPTION_STATES)):
                self._withdraw(key, iid)  # the stall resolved itself: a completed job has no incident
            elif was_stalled and not resumed and rec.state in EXTERNAL_END_STATES:
                # ended by the scheduler or the user while hung: still the stall, failure at the last progress
                if ctx.cutoff < cutoff:
                    self._schedule(_Pending(job=js.job, attempt=rec.attempt, failure_ts=ctx.failure_ts,
                                            cutoff=cutoff, stalled=True))
            elif rec.state in INTERRUPTION_STATES:
                # a crash: explain it at end + settle (a stall declared before is the same
                # incident; the end gives it its failure time and the job's last words)
                if ctx is None or (ctx.stalled and ctx.cutoff < cutoff):
                    self._schedule(_Pending(job=js.job, attempt=rec.attempt, failure_ts=end, cutoff=cutoff,
                                            stalled=False))
        # a new attempt is the retry of every earlier interrupted one
        for a in js.attempts.values():
            if a.attempt < rec.attempt:
                pid = incident_id(js.job, a.attempt)
                if pid in self._inc_ctx:
                    self._reevaluate(pid)

    def _schedule(self, p: _Pending) -> None:
        if self._listener is not None:
            self._listener.on_touched(p.job)
        self._pending[(p.job, p.attempt)] = p
        heapq.heappush(self._heap_due, (p.cutoff, p.job, p.attempt))

    def _fire_due(self, wm: int) -> None:
        due = self._heap_due
        while due and due[0][0] <= wm:
            cutoff, job, attempt = heapq.heappop(due)
            p = self._pending.get((job, attempt))
            if p is not None and p.cutoff == cutoff:
                del self._pending[(job, attempt)]
                try:
                    self._evaluate(p)
                except Exception as err:  # noqa: BLE001 - one evaluation never fails the others
                    self._failed(None, err, f"evaluating job {job} attempt {attempt}")

    def _fire_stalls(self, t: int) -> None:
        dcfg = self.cfg.detectors
        heap = self._stall_heap
        while heap and heap[0][0] <= t:
            _, job, attempt = heapq.heappop(heap)
            js = self.jobs.get(job)
            rec = js.attempts.get(attempt) if js else None
            if rec is None or rec.state != "running" or rec.stalled_at:
                self._stall_armed.discard((job, attempt))
                continue
            th = rec.stall_threshold_ms(dcfg)
            deadline = rec.prog_last_ts + th
            if deadline > t:  # progressed (or the threshold grew) since: re-arm
                heapq.heappush(heap, (deadline, job, attempt))
                continue
            self._stall_armed.discard((job, attempt))
            rec.stalled_at = rec.prog_last_ts
            iid = incident_id(job, attempt)
            sig = Signal(id=f"stall-{iid[4:]}-{rec.prog_last_ts}", ts=deadline, layer="runtime", kind="stall",
                         subject=f"job:{job}", node=None, severity="critical",
                         summary=f"job {job} attempt {attempt}: no progress from any rank for {th // 1000} s "
                                 f"(last step {rec.prog_last_step})",
                         evidence=[rec.prog_last_id], job=job)
            self._on_signal(sig)
            if (job, attempt) not in self._pending and iid not in self._inc_ctx:
                self._schedule(_Pending(job=job, attempt=attempt, cutoff=deadline,
                                        failure_ts=rec.prog_last_ts, stalled=True))

    def _check_stale(self, wm: int) -> None:
        dcfg = self.cfg.detectors
        for js in self.jobs.values():
            for rec in js.attempts.values():
                if rec.state == "running" and checkpoint_stale(rec, wm, dcfg):
                    rec.stale_fired = True
                    last = rec.ckpts[-1]
                    self._on_signal(Signal(id=f"ckstale-{js.job}-{rec.attempt}-{last.ts}", ts=wm, layer="runtime",
                                           kind="checkpoint_stale", subject=f"job:{js.job}", node=None,
                                           severity="warning", evidence=[last.id], job=js.job,
                                           summary=f"job {js.job}: no succeeded checkpoint since step {last.step}"))

    def _context(self, p: _Pending) -> Incident | None:
        js = self.jobs.get(p.job)
        if js is None:
            return None
        rec = js.attempts.get(p.attempt)
        if rec is None:
            return None
        ccfg = self.cfg.correlate
        world = self.world
        view = world.view()
        start = rec.started()
        t0 = start - ccfg.lookback_ms
        res = view.resources(rec.nodes)
        rs = self.index.query(res.keys, t0, p.cutoff)
        if res.congestion_keys:
            rs += self.index.query(res.congestion_keys, t0, p.cutoff, kinds=CONGESTION)
        job_sigs = [s for s in js.signals if t0 <= s.ts <= p.cutoff]
        covered: set[str] = set()
        owners = set(res.nodes) | {pt.split("/", 1)[0] for pt in res.ports}
        for owner in owners:
            cover = world.coverage(owner)
            if cover:
                for layer, (lo, hi) in cover.items():
                    if lo <= p.cutoff and hi >= t0:
                        covered.add(layer)
        # retry: the next attempt, once known
        retry = None
        nxt = js.attempts.get(p.attempt + 1)
        if nxt is not None:
            retry = Retry(attempt=nxt.attempt, state=nxt.state, ts=nxt.started(), nodes=list(nxt.nodes),
                          same_nodes=sorted(nxt.nodes) == sorted(rec.nodes))
        state = rec.state if rec.state not in ("pending", "requeued") else ("running" if p.stalled else rec.state)
        failures = world.failures()

        def change_failures(key: str, before: int) -> int:
            """Distinct other jobs that failed on ``key`` before ``before``."""
            return len({j for t, j in failures.get(key, ()) if t < before and j != p.job})

        iid = incident_id(p.job, p.attempt)
        prev = self._incidents.get(iid)
        inc = correlate(rec, job_sigs, rs, view, covered, ccfg, cutoff=p.cutoff, failure_ts=p.failure_ts,
                        state=state, stalled=p.stalled, retry=retry, change_failures=change_failures,
                        revision=prev.revision if prev else 1,
                        prev_image=js.attempts[p.attempt - 1].image if (p.attempt - 1) in js.attempts else None)
        return inc

    def _evaluate(self, p: _Pending) -> None:
        iid = incident_id(p.job, p.attempt)
        self._inc_ctx[iid] = p
        if self._listener is not None:
            self._listener.on_evaluated(iid)
            self._listener.on_touched(p.job)
        inc = self._context(p)
        if inc is None:
            return
        self._emit(inc)
        # remember failures per version for change-regression reasoning
        rec = self.jobs[p.job].attempts[p.attempt]
        view = self.world.view()
        keys = set()
        for n in rec.nodes:
            for comp, v in view.versions_at(n, rec.started()).items():
                keys.add(f"version:{comp}={v}")
        if rec.image:
            keys.add(f"version:image={rec.image}")
        self.world.record_failure(iid, p.failure_ts, p.job, sorted(keys))

    def _withdraw(self, key: tuple[str, int], iid: str) -> None:
        """A stall that resolved itself (the attempt progressed again and completed):
        drop it; the stream gets a last revision with ``state="recovered"``."""
        self._pending.pop(key, None)
        self._inc_ctx.pop(iid, None)
        prev = self._incidents.pop(iid, None)
        if prev is not None:
            self._recovered[iid] = msgspec.structs.replace(prev, revision=prev.revision + 1, state="recovered")
            self._out.append(self._recovered[iid])

    def _reevaluate(self, iid: str) -> None:
        p = self._inc_ctx.get(iid)
        if p is None:
            return
        try:
            inc = self._context(p)
        except Exception as err:  # noqa: BLE001 - one evaluation never fails the others
            self._failed(None, err, f"re-evaluating job {p.job} attempt {p.attempt}")
            return
        if inc is not None:
            self._emit(inc)

    # ------------------------------------------------------------------ failures
    def _apply_guarded(self, ev: Envelope) -> None:
        try:
            self._apply(ev)
        except Exception as err:  # noqa: BLE001 - one event never fails the others
            self._failed(ev, err)

    def _failed(self, ev: Envelope | None, err: Exception, what: str = "") -> None:
        """An event (or an evaluation) the core could not process: skipped, counted in
        ``Stats.failed`` and kept (at most ``MAX_FAILURES``) for ``take_failures``."""
        self.stats.failed += 1
        reason = f"{what or 'applying ' + (ev.kind if ev is not None else 'an event')} failed: " \
                 f"{type(err).__name__}: {err}"[:1000]
        if len(self._failures_out) < MAX_FAILURES:
            self._failures_out.append((ev, reason))
        log.warning("core: %s", reason, exc_info=len(self._failures_out) <= 3)

    def take_failures(self) -> list[tuple[Envelope | None, str]]:
        """Events (or None for an evaluation) that failed inside the core since the last
        call, with the reason: the worker dead-letters them; the rest went on."""
        out, self._failures_out = self._failures_out, []
        return out

    def _emit(self, inc: Incident) -> None:
        if self._listener is not None:
            self._listener.on_touched(inc.job)
        prev = self._incidents.get(inc.id)
        if prev is not None:
            same = msgspec.structs.replace(inc, revision=prev.revision)
            if same == prev:
                return
            inc = msgspec.structs.replace(inc, revision=prev.revision + 1)
        else:
            gone = self._recovered.pop(inc.id, None)
            if gone is not None and inc.revision <= gone.revision:
                # raised again after a withdrawal: numbering goes on (the store keeps the highest)
                inc = msgspec.structs.replace(inc, revision=gone.revision + 1)
        self._incidents[inc.id] = inc
        self.stats.incidents_emitted += 1
        self._out.append(inc)

    def _late(self, ev: Envelope) -> None:
        """An event older than the watermark: re-run closed incidents whose window it falls in."""
        for iid, p in list(self._inc_ctx.items()):
            if ev.ts <= p.cutoff:
                js = self.jobs.get(p.job)
                rec = js.attempts.get(p.attempt) if js else None
                if rec is not None and ev.ts >= rec.started() - self.cfg.correlate.lookback_ms:
                    if ev.job == p.job or (ev.node and ev.node in rec.nodes) or ev.node is None:
                        self._reevaluate(iid)
