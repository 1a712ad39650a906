"""The pure ``Engine`` split by Kafka key, for the Faust worker.

``Engine`` (``streams/engine.py``) holds all state in one process. The worker splits it:

- ``NodeSide``: node-topic keys (node, or switch for fl.net). Applies each event as it
  arrives (no reorder buffer: alerts must leave within seconds), runs ``feed_node``,
  records telemetry coverage and topology/versions/changes, and hands every signal to the
  ``outbox`` (-> internal signals topic -> ``Shared`` GlobalTable) and alerts to outputs.
- ``JobSide``: job keys (fl.sched / fl.runtime). The same event-time reorder buffer,
  pending evaluations at their cutoff, stall timers, retries and re-evaluations as
  ``Engine``, but its watermark is the **global** event-time watermark of all input
  partitions (min over workers of each worker's min over its non-idle partitions,
  ``Watermarks``) instead of its own clock, and the cross-key state correlation reads
  (view, signal index, coverage, failures per version, allocation) comes from ``Shared``.

Both sides *compose* an ``Engine`` (``core``) with the collaborators it takes as explicit
interfaces (``engine.SignalStore``, ``engine.World``, ``engine.Listener``): ``_IndexProxy``
(signals out through the outbox, read back from the GlobalTable), ``SharedWorld`` and, for
the job side, itself as the listener (dirty keys, evaluation times, evicted jobs). They use
the core's public methods only (docs/streams-faust-needs.md).
- ``Shared``: read/write access to the ``views`` GlobalTable (every worker has all of it),
  with a local overlay of this worker's own writes (the changelog echo may lag).

Per-key state round-trips through ``dump_*``/``load_*`` (msgpack) into the changelog-backed
tables, together with the last Kafka offset applied per source partition (``fence``) so
a worker restarted after a crash skips what it had already applied.
"""

from __future__ import annotations

import bisect

import time
from typing import Any, Callable, Iterable, Union

import msgspec
from msgspec import Struct

from ..schemas.events import Envelope, Event
from ..schemas.outputs import Incident
from .correlate import incident_id
from .detectors.job import KEEP_FIRST, JobState
from .detectors.node import NodeState
from .engine import _INV_KINDS, _JOB_KINDS, _NODE_KINDS, Engine, EngineConfig, JobParts, _Pending
from .join import CONGESTION, Change, Link, Mount, View, index_keys
from .signals import Signal

#: the most one ``NodeDump`` / ``JobDump`` changelog record may take (well under Kafka's
#: 1 MB default request size). The per-job caps keep a record below it by construction;
#: ``JobSide.dump`` sheds the oldest non-critical job signals should one still exceed it.
MAX_DUMP_BYTES = 512 * 1024

_mp_enc = msgspec.msgpack.Encoder()
_json = msgspec.json.Encoder()

NODE_KINDS = _NODE_KINDS
JOB_KINDS = _JOB_KINDS
INV_KINDS = _INV_KINDS


# ---------------------------------------------------------------------------- shared view
class TopoEntry(Struct, array_like=True):
    links: list[Link]
    mounts: list[Mount]


class AllocEntry(Struct, array_like=True):
    attempt: int
    nodes: list[str]
    started: int
    end_ts: Union[int, None]


class FailEntry(Struct, array_like=True):
    ts: int
    keys: list[str]
    job: str = ""


_view_dec = msgspec.msgpack.Decoder(View)
#: View fields keyed by node (links, mounts, versions, history, ...): a node's slice of each
_VIEW_NODE_FIELDS = tuple(f for f in View.__struct_fields__
                          if f not in ("changes", "max_changes") and isinstance(getattr(View(), f), dict))


def view_slice(view: View, node: str) -> bytes:
    """One node's part of the join view (every per-node field, and its changes)."""
    part = {f: {node: getattr(view, f)[node]} for f in _VIEW_NODE_FIELDS if node in getattr(view, f)}
    return _mp_enc.encode(View(**part, changes=[c for c in view.changes if c.node == node][-1000:]))


def merge_slice(view: View, raw: bytes) -> None:
    """Add a node's slice (``view_slice``) to ``view``; the caller sorts ``changes``."""
    part = _view_dec.decode(raw)
    for f in _VIEW_NODE_FIELDS:
        getattr(view, f).update(getattr(part, f))
    view.changes.extend(part.changes)
_cov_dec = msgspec.msgpack.Decoder(dict[str, list[int]])
_alloc_dec = msgspec.msgpack.Decoder(list[AllocEntry])
_fail_dec = msgspec.msgpack.Decoder(FailEntry)
_sigs_dec = msgspec.msgpack.Decoder(list[Signal])
_sig_dec = msgspec.msgpack.Decoder(Signal)


def encode_signal(sig: Signal) -> bytes:
    return _mp_enc.encode(sig)


def decode_signal(raw: bytes) -> Signal:
    return _sig_dec.decode(raw)


class Shared:
    """The ``views`` GlobalTable: ``view:<node>`` (the node's slice of the join ``View``),
    ``cov:<node or switch>``,
    ``alloc:<job>``, ``fail:<incident id>``, ``sig:<index key>``.

    ``put`` writes through a callback (the agents give one that writes the table's
    changelog) and keeps the value in a local overlay read before the table.
    """

    def __init__(self, data: Any, write: Callable[[bytes, bytes], None], *, refresh_s: float = 0.5,
                 retention_ms: int = 6 * 3_600_000, per_key_cap: int = 2_000) -> None:
        self.data = data            # the GlobalTable's store (dict-like: bytes -> bytes)
        self._write = write
        self.overlay: dict[bytes, bytes] = {}
        self.gen = 0
        self.refresh_s = refresh_s
        self.retention_ms = retention_ms
        self.per_key_cap = per_key_cap
        self._view: View | None = None
        self._view_at = 0.0
        self._view_gen = -1
        self._alloc: dict[str, list[tuple[str, int, Union[int, None]]]] | None = None
        self._alloc_at = 0.0
        self._fail: dict[str, list[tuple[int, str]]] | None = None
        self._fail_at = 0.0
        self._fail_gen = -1

    # -------------------------------------------------------------- raw access
    def get(self, key: bytes) -> bytes | None:
        v = self.overlay.get(key)
        return v if v is not None else self.data.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        if self.get(key) == value:
            return
        self.overlay[key] = value
        self.gen += 1
        self._write(key, value)

    def delete(self, key: bytes) -> None:
        if self.get(key) is None:
            return
        self.overlay.pop(key, None)
        self.gen += 1
        self._write(key, None)  # type: ignore[arg-type]   # tombstone

    def items(self, prefix: bytes) -> Iterable[tuple[bytes, bytes]]:
        seen = set()
        for k, v in self.overlay.items():
            if k.startswith(prefix):
                seen.add(k)
                yield k, v
        for k, v in list(self.data.items()):
            if k.startswith(prefix) and k not in seen:
                yield k, v

    def replicated(self, prefix: bytes) -> int:
        """How many keys under ``prefix`` the table itself holds (this worker's copy of what
        every worker wrote; the overlay of this worker's own writes not counted)."""
        return sum(1 for k in list(self.data.keys()) if k.startswith(prefix))

    def forget_overlay(self) -> None:
        """After a rebalance: keys we wrote may now belong to another worker."""
        self.overlay.clear()
        self.gen += 1

    # -------------------------------------------------------------- the join view
    def view(self) -> View:
        now = time.monotonic()
        if self._view is not None and self._view_gen == self.gen and now - self._view_at < self.refresh_s:
            return self._view
        v = View()
        for _, raw in self.items(b"view:"):
            merge_slice(v, raw)
        chg = v.changes
        chg.sort(key=lambda c: (c.ts, c.id))
        v.changes = chg[-v.max_changes:]
        self._view, self._view_at, self._view_gen = v, now, self.gen
        return v

    def alloc(self) -> dict[str, list[tuple[str, int, Union[int, None]]]]:
        """node -> [(job, started, end_ts)] of every attempt known."""
        now = time.monotonic()
        if self._alloc is not None and now - self._alloc_at < self.refresh_s:
            return self._alloc
        idx: dict[str, list[tuple[str, int, Union[int, None]]]] = {}
        for k, raw in self.items(b"alloc:"):
            job = k[6:].decode()
            for a in _alloc_dec.decode(raw):
                for n in a.nodes:
                    idx.setdefault(n, []).append((job, a.started, a.end_ts))
        self._alloc, self._alloc_at = idx, now
        return idx

    def attempts(self) -> Iterable[tuple[str, AllocEntry]]:
        for k, raw in self.items(b"alloc:"):
            job = k[6:].decode()
            for a in _alloc_dec.decode(raw):
                yield job, a

    def job_on(self, node: str, ts: int) -> str | None:
        for job, started, end in self.alloc().get(node, ()):
            if started <= ts and (end is None or ts <= end):
                return job
        return None

    def failures(self) -> dict[str, list[tuple[int, str]]]:
        """``Engine._failures``: version key -> [(failure ts, job)], time-ordered. A fresh
        dict each call (the Engine appends to it during an evaluation)."""
        now = time.monotonic()
        if self._fail is None or now - self._fail_at >= self.refresh_s or self._fail_gen != self.gen:
            out: dict[str, list[tuple[int, str]]] = {}
            for _, raw in self.items(b"fail:"):
                f = _fail_dec.decode(raw)
                for key in f.keys:
                    out.setdefault(key, []).append((f.ts, f.job))
            for lst in out.values():
                lst.sort()
            self._fail, self._fail_at, self._fail_gen = out, now, self.gen
        return {k: list(v) for k, v in self._fail.items()}

    def coverage(self, owner: str) -> dict[str, list[int]] | None:
        """Telemetry coverage (layer -> [first, last ts]) of a node or switch."""
        raw = self.get(b"cov:" + owner.encode())
        return _cov_dec.decode(raw) if raw else None

    def signals(self, key: str) -> list[Signal]:
        raw = self.get(b"sig:" + key.encode())
        return _sigs_dec.decode(raw) if raw else []

    def add_signals(self, key: str, sigs: list[Signal]) -> list[Signal]:
        """Merge ``sigs`` into the list filed under index ``key``; returns the new ones."""
        cur = self.signals(key)
        ids = {s.id for s in cur}
        new = [s for s in sigs if s.id not in ids]
        if not new:
            return []
        cur.extend(new)
        cur.sort(key=lambda s: (s.ts, s.id))
        horizon = cur[-1].ts - self.retention_ms
        cur = [s for s in cur if s.ts >= horizon][-self.per_key_cap:]
        self.put(b"sig:" + key.encode(), _mp_enc.encode(cur))
        return new


class SharedWorld:
    """``engine.World`` backed by ``Shared``: the view, coverage, failures and allocation
    every worker publishes (the GlobalTable), read by correlation on any worker."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared

    def view(self) -> View:
        return self.shared.view()

    def coverage(self, owner: str) -> dict[str, list[int]] | None:
        return self.shared.coverage(owner)

    def failures(self) -> dict[str, list[tuple[int, str]]]:
        return self.shared.failures()

    def record_failure(self, iid: str, failure_ts: int, job: str, keys: list[str]) -> None:
        self.shared.put(f"fail:{iid}".encode(), _mp_enc.encode(FailEntry(failure_ts, keys, job)))

    def job_on(self, node: str, ts: int) -> str | None:
        return self.shared.job_on(node, ts)

    def evict(self, before_ts: int) -> None:
        """Failures older than ``before_ts`` (event time) leave the GlobalTable: any worker
        may delete them (retention is the same everywhere; a second tombstone is harmless).
        A scan of the ``fail:`` keys; the Engine runs retention every 10 min of event time."""
        old = [k for k, raw in self.shared.items(b"fail:") if _fail_dec.decode(raw).ts < before_ts]
        for k in old:
            self.shared.delete(k)


class _IndexProxy:
    """``engine.SignalStore`` backed by ``Shared``: ``query`` reads the GlobalTable plus the
    signals pushed to this worker's jobs; ``add`` puts the signal in the outbox."""

    def __init__(self, shared: Shared, outbox: list[Signal]) -> None:
        self.shared = shared
        self.outbox = outbox
        self.local: dict[str, dict[str, Signal]] = {}   # index key -> id -> signal (pushed)

    def add(self, sig: Signal) -> bool:
        self.outbox.append(sig)
        return True

    def remember(self, sig: Signal) -> bool:
        new = False
        for k in index_keys(sig):
            d = self.local.setdefault(k, {})
            if sig.id not in d:
                d[sig.id] = sig
                new = True
        return new

    def evict(self, before_ts: int) -> None:
        for k in list(self.local):
            d = self.local[k]
            for i in [i for i, s in d.items() if s.ts < before_ts]:
                del d[i]
            if not d:
                del self.local[k]

    def query(self, keys: Iterable[str], t0: int, t1: int, kinds: frozenset[str] | None = None) -> list[Signal]:
        seen: set[str] = set()
        out: list[Signal] = []
        for k in keys:
            for s in list(self.shared.signals(k)) + list(self.local.get(k, {}).values()):
                if t0 <= s.ts <= t1 and s.id not in seen and (kinds is None or s.kind in kinds):
                    seen.add(s.id)
                    out.append(s)
        out.sort(key=lambda s: (s.ts, s.id))
        return out


#: job keys remember this many of their last applied offsets per partition (``Fence``)
JOB_FENCE_WINDOW = 256


class Fence(Struct):
    """Last applied offset per ``topic/partition`` of one key, and (``window`` > 0) the
    key's last ``window`` applied offsets there.

    Without the window an offset at or below the last applied one is a replay. But a
    record can be skipped and re-fetched later (Faust drops a record of an earlier
    consumer-group generation without acking it; ``agents.CommitWatch`` fetches the
    partition again): if a later record of the key was applied meanwhile, the skipped one
    would be rejected as a replay and lost. With the window, an offset inside it that is
    not among the applied ones is accepted (a hole filled); below it, a replay."""

    offsets: dict[str, int] = {}
    recent: dict[str, list[int]] = {}
    #: (window > 0) the offset at or below which every record of the key there counts as
    #: applied: -1 from the key's first record here (nothing before it was applied by anyone:
    #: its state would exist), then the highest offset dropped from ``recent``. A fence
    #: stored before this field: the oldest remembered offset (``recent[0] - 1``)
    floor: dict[str, int] = {}

    def accept(self, topic: str, partition: int, offset: int, window: int = 0) -> bool:
        k = f"{topic}/{partition}"
        if offset > self.offsets.get(k, -1):
            first = k not in self.offsets
            self.offsets[k] = offset
            if window:
                rec = self.recent.get(k)
                if rec is None:
                    rec = self.recent[k] = []
                if first:
                    self.floor[k] = -1
                rec.append(offset)
                self._trim(k, rec, window)
            return True
        rec = self.recent.get(k) if window else None
        if not rec or offset in rec or offset <= self.floor.get(k, rec[0] - 1):
            return False
        # a hole filled: the record was never applied. Also below the key's first record
        # here: a partition's first records can reach a new owner only after later ones
        # (never delivered at first, fetched again by CommitWatch; session 12: a job's
        # cuda_error, offset 14, after offsets 35.. of the same job had been applied)
        bisect.insort(rec, offset)
        self._trim(k, rec, window)
        return True

    def _trim(self, k: str, rec: list[int], window: int) -> None:
        if len(rec) > window:
            self.floor[k] = rec[len(rec) - window - 1]
            del rec[: len(rec) - window]


#: event ids a worker side remembers (diagnose keeps 2,000,000): ~105 B an id, ~50 MB a side
WORKER_DEDUP_CAP = 500_000


def side_config(cfg: EngineConfig) -> EngineConfig:
    """The configuration of a worker's sides: outputs stream out as they are made (no
    history kept: ``EngineConfig.streaming``), and event-id de-duplication bounded lower
    than diagnose's (the offset fences already skip a re-delivered record)."""
    return msgspec.structs.replace(cfg, streaming=True, dedup_cap=min(cfg.dedup_cap, WORKER_DEDUP_CAP))


class _Side:
    """What both sides share: an ``Engine`` composed with the Shared-backed collaborators,
    an outbox of signals, offset fences per key, the keys touched since the last write."""

    def __init__(self, shared: Shared, config: EngineConfig | None, listener: Any = None) -> None:
        self.shared = shared
        self.outbox: list[Signal] = []
        self.index = _IndexProxy(shared, self.outbox)
        self.core = Engine(config, index=self.index, world=SharedWorld(shared), listener=listener)
        self.cfg = self.core.cfg
        self.fences: dict[str, Fence] = {}
        self.fence_window = 0            # JobSide: JOB_FENCE_WINDOW (Fence)
        self.dirty: set[str] = set()

    @property
    def stats(self) -> Any:
        return self.core.stats

    def accept(self, key: str, topic: str, partition: int, offset: int) -> bool:
        """False when ``key`` has applied this offset of the partition already (a replay)."""
        f = self.fences.get(key)
        if f is None:
            f = self.fences[key] = Fence()
        return f.accept(topic, partition, offset, self.fence_window)

    def take(self) -> tuple[list[Signal], list[Any]]:
        """Signals for the signals topic, and alerts + incident revisions for the outputs."""
        sigs = list(self.outbox)
        self.outbox.clear()
        return sigs, self.core.drain()

    def take_failures(self) -> list[tuple[Envelope | None, str]]:
        """Events (None: an evaluation) that raised inside the core, with the reason."""
        return self.core.take_failures()


# ---------------------------------------------------------------------------- node side
class NodeDump(Struct, kw_only=True):
    state: NodeState
    fence: Fence


_node_dump_dec = msgspec.msgpack.Decoder(NodeDump)


#: event time between two retention passes of the node side (as ``Engine`` does on its watermark)
NODE_EVICT_EVERY_MS = 600_000


class NodeSide(_Side):
    """Node-topic detectors; events applied on arrival (see module doc)."""

    def __init__(self, shared: Shared, config: EngineConfig | None = None, *,
                 cov_step_ms: int = 1_000) -> None:
        super().__init__(shared, config)
        self.cov_written: dict[str, dict[str, list[int]]] = {}
        self.cov_step_ms = cov_step_ms
        self.view_dirty: set[str] = set()
        self._evicted_ts = -(1 << 62)

    @property
    def nodes(self) -> dict[str, NodeState]:
        return self.core.nodes

    @property
    def view(self) -> View:
        """This worker's inventory view (topology, versions, changes of its nodes)."""
        return self.core.view

    # ---------------------------------------------------------- persistence
    def load(self, key: str, blob: bytes | None) -> None:
        if key in self.core.nodes or not blob:
            return
        d = _node_dump_dec.decode(blob)
        self.core.nodes[key] = d.state
        self.fences[key] = d.fence
        # this node's view entries, so versions/changes keep accumulating after a restart
        raw = self.shared.get(f"view:{key}".encode())
        if raw:
            view = self.core.view
            merge_slice(view, raw)
            view.changes.sort(key=lambda c: (c.ts, c.id))

    def dump(self, key: str) -> bytes:
        """The node's changelog record (detector state and fence: small, a few KB)."""
        return _mp_enc.encode(NodeDump(state=self.core.nodes.get(key) or NodeState(),
                                       fence=self.fences.get(key) or Fence()))

    # ---------------------------------------------------------- processing
    def feed(self, key: str, ev: Envelope) -> None:
        """Apply one node-keyed event now (dedup is the caller's, with the fence)."""
        self.core.apply_now(ev)
        if ev.kind in _INV_KINDS and ev.node:
            self.view_dirty.add(ev.node)
        self.dirty.add(key)

    def retain(self, event_time: int) -> None:
        """Retention at the worker's event time (the fleet's agreed watermark, never one
        event's own ts: a clock 23 h ahead must not evict everything): the core's watermark
        never moves on this side (events are applied on arrival), so its ``_evict`` runs
        here, every ``NODE_EVICT_EVERY_MS`` of event time."""
        if event_time - self._evicted_ts >= NODE_EVICT_EVERY_MS:
            self._evicted_ts = event_time
            self.core.evict_before(event_time - self.cfg.retention_ms)

    def flush_shared(self) -> None:
        """Write topology/versions/changes of touched nodes and coverage spans that moved
        (by at least ``cov_step_ms``, or a new layer) to the shared view."""
        for n in self.view_dirty:
            self.shared.put(f"view:{n}".encode(), view_slice(self.core.view, n))
        self.view_dirty.clear()
        step = self.cov_step_ms
        for key in self.dirty:
            st = self.core.nodes.get(key)
            cur = st.cover if st is not None else None
            if not cur:
                continue
            old = self.cov_written.get(key)
            if old is not None and old.keys() == cur.keys() and all(
                    cur[l][0] >= old[l][0] and cur[l][1] - old[l][1] < step for l in cur):
                continue
            snap = {l: [v[0], v[1]] for l, v in cur.items()}
            self.cov_written[key] = snap
            self.shared.put(b"cov:" + key.encode(), _mp_enc.encode(snap))


# ---------------------------------------------------------------------------- job side
def _drop_oldest(kept: dict[str, Signal], n: int) -> None:
    """Drop the ``n`` oldest of a job's kept signals (by ts, then id)."""
    for i in sorted(kept, key=lambda i: (kept[i].ts, i))[:n]:
        del kept[i]


class JobDump(Struct, kw_only=True):
    state: JobState
    fence: Fence
    buffered: list[bytes] = []                 # encoded events waiting in the reorder buffer
    pending: list[_Pending] = []
    ctx: dict[str, _Pending] = {}
    incidents: dict[str, Incident] = {}
    evaluated: dict[str, float] = {}           # incident id -> wall time of last evaluation
    recovered: dict[str, int] = {}             # withdrawn incident id -> its last revision
    kept: list[Signal] = []                    # resource signals pushed to the job (JobSide.keep)


_job_dump_dec = msgspec.msgpack.Decoder(JobDump)
_ev_dec = msgspec.json.Decoder(Event)


class JobSide(_Side):
    """Job-keyed events: the ``Engine`` job machinery on a global watermark (module doc).
    The core tells it (``Listener``) which jobs changed, which incidents were evaluated and
    which jobs retention dropped."""

    #: resource signals pushed to one job that its table row keeps, at most (newest kept)
    KEEP_PUSHED = 256

    def __init__(self, shared: Shared, config: EngineConfig | None = None, *,
                 recheck_s: float = 60.0) -> None:
        super().__init__(shared, config, listener=self)
        self.fence_window = JOB_FENCE_WINDOW
        self.evaluated: dict[str, float] = {}          # iid -> wall time evaluated
        self.recheck_s = recheck_s
        self._alloc_written: dict[str, bytes] = {}
        self.evicted: set[str] = set()       # jobs retention dropped: delete their table rows
        self.oversize = 0                    # dumps that had to shed to fit MAX_DUMP_BYTES
        #: job -> id -> resource signal pushed to it: in its table row, so the job's next
        #: owner (or this worker after a rebalance) still has what was pushed (``keep``)
        self.kept: dict[str, dict[str, Signal]] = {}

    @property
    def jobs(self) -> dict[str, JobState]:
        return self.core.jobs

    # ---------------------------------------------------------- Listener (the core calls)
    def on_touched(self, job: str) -> None:
        self.dirty.add(job)

    def on_evaluated(self, iid: str) -> None:
        self.evaluated[iid] = time.time()

    def on_evicted(self, jobs: set[str]) -> None:
        for job in jobs:
            self.fences.pop(job, None)
            self.kept.pop(job, None)
            self._alloc_written.pop(job, None)
            self.shared.delete(f"alloc:{job}".encode())
        self.evicted |= jobs
        # the core dropped the evicted jobs' incident contexts: nothing re-evaluates them
        ctx = self.core.evaluations
        for iid in [i for i in self.evaluated if i not in ctx]:
            del self.evaluated[iid]

    # ---------------------------------------------------------- persistence
    def load(self, job: str, blob: bytes | None) -> None:
        if job in self.core.jobs or not blob:
            return
        d = _job_dump_dec.decode(blob)
        self.fences[job] = d.fence
        self.core.import_job(job, JobParts(state=d.state, buffered=[_ev_dec.decode(r) for r in d.buffered],
                                           pending=d.pending, ctx=d.ctx, incidents=d.incidents,
                                           recovered=d.recovered))
        self.evaluated.update(d.evaluated)
        if d.kept:
            self.kept[job] = {s.id: s for s in d.kept}
            for s in d.kept:
                self.index.remember(s)

    def dump(self, job: str) -> bytes:
        """The job's changelog record, at most ``MAX_DUMP_BYTES``: should the caps leave it
        larger (huge log lines), the job's buffered records are applied now, then its
        non-critical signals after the first ``KEEP_FIRST`` shed (``oversize`` counts it)."""
        blob = self._dump(job)
        if len(blob) <= MAX_DUMP_BYTES:
            return blob
        self.oversize += 1
        if self.core.spill(job):
            blob = self._dump(job)
        js = self.core.jobs.get(job)
        while len(blob) > MAX_DUMP_BYTES and js is not None and len(js.signals) > KEEP_FIRST:
            keep = js.signals[:KEEP_FIRST]
            rest = js.signals[KEEP_FIRST:]
            crit = [x for x in rest if x.severity == "critical"]
            rest = crit if len(crit) < len(rest) else []
            js.trimmed_n += len(js.signals) - len(keep) - len(rest[len(rest) // 2:])
            js.signals = keep + rest[len(rest) // 2:]
            blob = self._dump(job)
        while len(blob) > MAX_DUMP_BYTES and js is not None and js.signals:
            js.trimmed_n += (len(js.signals) + 1) // 2
            js.signals = js.signals[: len(js.signals) // 2]
            blob = self._dump(job)
        kept = self.kept.get(job)
        while len(blob) > MAX_DUMP_BYTES and kept:
            _drop_oldest(kept, (len(kept) + 1) // 2)   # the oldest half (still in memory's index here)
            blob = self._dump(job)
        return blob

    def _dump(self, job: str) -> bytes:
        parts = self.core.export_job(job)
        ev_at = {i: self.evaluated[i] for i in parts.ctx if i in self.evaluated}
        return _mp_enc.encode(JobDump(state=parts.state, fence=self.fences.get(job) or Fence(),
                                      buffered=[_json.encode(ev) for ev in parts.buffered],
                                      pending=parts.pending, ctx=parts.ctx, incidents=parts.incidents,
                                      evaluated=ev_at, recovered=parts.recovered,
                                      kept=sorted(self.kept.get(job, {}).values(), key=lambda s: (s.ts, s.id))))

    def drop(self, job: str) -> None:
        for iid in [i for i, p in self.core.evaluations.items() if p.job == job]:
            self.evaluated.pop(iid, None)
        self.core.drop_job(job)
        self.fences.pop(job, None)
        self.kept.pop(job, None)

    # ---------------------------------------------------------- processing
    def ingest(self, events: Iterable[Envelope], watermark: int) -> None:
        """Buffer events (dedup by id), then release up to ``watermark - lateness``."""
        self.core.ingest(events, watermark)

    def advance_to(self, watermark: int) -> None:
        self.core.ingest((), watermark)

    def close_windows(self, upto: int | None = None) -> None:
        """Every input is idle: release what is buffered (up to ``upto`` when given) and run
        the pending evaluations."""
        self.core.close_windows(upto)

    def remember_signal(self, sig: Signal) -> bool:
        """Keep ``sig`` (pushed to this worker, or its own node side's) in the local index
        until the GlobalTable has it; False when it was known already."""
        return self.index.remember(sig)

    def has_incidents(self) -> bool:
        """Whether any incident has been evaluated here (re-evaluations have work to do)."""
        return bool(self.core.evaluations)

    def counts(self) -> dict[str, int]:
        """Sizes for the worker's stats log."""
        return self.core.counts()

    def buffered_count(self, job: str) -> int:
        """``job``'s records waiting in the reorder buffer."""
        return len(self.core.buffered_of(job))

    def keep(self, job: str, sig: Signal) -> bool:
        """Keep ``sig``, pushed to ``job``, in the job's table row (``JobDump.kept``), at most
        ``KEEP_PUSHED`` (the newest). A push is read once: without this, the job's next owner
        (or this worker after a rebalance rebuilt its sides) had only its copy of the
        GlobalTable, and when that copy lacked the signal then (its filing not yet read
        there) the next re-evaluation dropped the evidence (issue 14, seed 105: a leaf
        uplink's link-down). A job this side has no state for keeps nothing (no row to keep
        it in). True when it was new for the job."""
        if job not in self.core.jobs and job not in self.fences:
            return False
        d = self.kept.get(job)
        if d is None:
            d = self.kept[job] = {}
        if sig.id in d:
            return False
        d[sig.id] = sig
        if len(d) > self.KEEP_PUSHED:
            _drop_oldest(d, len(d) - self.KEEP_PUSHED)
        self.dirty.add(job)
        return True

    def signal_for(self, job: str, sig: Signal) -> None:
        """A signal on ``job``'s resources, pushed by the signals agent: keep it with the job
        (``keep``), remember it (the GlobalTable copy may not have reached this worker yet)
        and re-evaluate the job's incidents whose window it falls in."""
        self.keep(job, sig)
        if self.index.remember(sig):
            self.core.reevaluate_for(job, sig.ts)

    def reevaluate_for(self, job: str, sig: Signal) -> None:
        """Re-run ``job``'s incidents whose window ``sig`` falls in (the signal is already
        in the index)."""
        self.core.reevaluate_for(job, sig.ts)

    def recheck(self) -> None:
        """Re-run recently evaluated incidents: cross-partition evidence (signals, views,
        failures of other jobs) may have landed after the first evaluation."""
        now = time.time()
        for iid, at in list(self.evaluated.items()):
            if now - at <= self.recheck_s:
                self.core.reevaluate(iid)
            else:
                del self.evaluated[iid]      # never re-checked again: bounded by the recent ones

    def flush_shared(self) -> None:
        """Allocation of touched jobs -> ``alloc:<job>`` (for the fan-out and alerts)."""
        for job in self.dirty:
            js = self.core.jobs.get(job)
            if js is None or not js.attempts:
                continue
            val = _mp_enc.encode([AllocEntry(a.attempt, list(a.nodes), a.started(), a.end_ts)
                                  for a in sorted(js.attempts.values(), key=lambda a: a.attempt)])
            if self._alloc_written.get(job) != val:
                self._alloc_written[job] = val
                self.shared.put(f"alloc:{job}".encode(), val)

    # ---------------------------------------------------------- old names (agents.py until it switches)
    @property
    def _inc_ctx(self) -> Any:
        return self.core.evaluations

    @property
    def _buf(self) -> range:        # only its len() is read
        return range(self.core.counts()["buffered"])

    @property
    def _pending(self) -> range:    # only its len() is read
        return range(self.core.counts()["pending"])

    @property
    def _wm(self) -> int:
        return self.core.watermark


def jobs_touched_by(shared: Shared, key: str, sig: Signal, lookback_ms: int, settle_ms: int) -> list[str]:
    """Jobs whose attempt window and resources (the join) include index ``key`` of ``sig``."""
    view = shared.view()
    out = set()
    for job, a in shared.attempts():
        if sig.ts < a.started - lookback_ms:
            continue
        if a.end_ts is not None and sig.ts > a.end_ts + settle_ms:
            continue
        res = view.resources(a.nodes)
        if key in res.keys or (sig.kind in CONGESTION and key in res.congestion_keys):
            out.add(job)
    return sorted(out)
