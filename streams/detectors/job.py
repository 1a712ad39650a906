"""Job-side state and detectors (fl.sched ``sched.job``, fl.runtime): the per-attempt record
correlation reads, log signatures, progress (stall threshold, stragglers), checkpoints
(failures, staleness), container OOM kills.

``JobState`` (one per job, a msgspec Struct, bounded) is what a Faust table keeps per
job key; ``feed_job(state, ev, cfg, out)`` updates it in event-time order."""

from __future__ import annotations

import hashlib
from typing import Union

import msgspec
from msgspec import Struct

from ...schemas.bounds import cap_signal
from ..signals import Signal, make
from ..signatures import classify, from_name
from .config import DetectorConfig

MAX_SIGNALS = 600      # per job; beyond it a non-critical one after the first KEEP_FIRST goes
KEEP_FIRST = 100       # the job's first signals are never trimmed (its first words: the symptom)
FOLD_AFTER = 8         # identical signals (attempt, kind, node, summary) kept; later ones only counted
PER_SIGNATURE = 64     # signals of one kind and log signature kept per attempt (512 ranks' watchdog lines)
MAX_FOLDS = 256        # distinct folded signals whose repeats are counted (then only the total)
MAX_INTERVALS = 64
MAX_RANKS_TRACKED = 4096


class Ckpt(Struct, array_like=True):
    ts: int
    step: int
    path: str
    id: str


class AttemptRecord(Struct, kw_only=True):
    """One job attempt as correlation sees it."""

    job: str
    attempt: int
    tenant: Union[str, None] = None
    state: str = "pending"
    state_ts: int = 0
    state_id: str = ""
    first_ts: int = 0
    nodes: list[str] = []
    gpus: int = 0
    ranks: dict[str, Union[str, None]] = {}
    image: Union[str, None] = None
    name: str = ""
    user: str = ""
    start_ts: Union[int, None] = None
    end_ts: Union[int, None] = None
    exit_code: Union[int, None] = None
    signal: Union[int, None] = None
    reason: Union[str, None] = None
    sched: list[tuple[int, str, str]] = []        # (ts, event id, state), bounded
    # progress summary
    prog_n: int = 0
    prog_first_ts: int = 0
    prog_last_ts: int = 0
    prog_last_id: str = ""
    prog_last_step: int = 0
    rank_last: dict[int, int] = {}                 # rank -> last progress ts
    intervals: list[int] = []                      # recent per-rank progress intervals (ring)
    step_ewma: dict[int, float] = {}               # rank -> EWMA step time (s)
    straggler_fired: list[int] = []
    st_base: float = 0.0                           # job step time over its first samples (s)
    st_base_n: int = 0
    st_cur: float = 0.0                            # EWMA of the job's step time now
    slow_fired: bool = False
    # checkpoints
    ckpts: list[Ckpt] = []                          # last few succeeded
    ckpt_fail_n: int = 0
    ckpt_open: Union[Ckpt, None] = None            # a checkpoint started and not finished
    stale_fired: bool = False
    # stall
    stalled_at: int = 0                             # last progress ts when a stall was declared
    # the job's last succeeded checkpoint from an earlier attempt: what this one resumed from
    resumed_from: Union[Ckpt, None] = None

    def started(self) -> int:
        return self.start_ts if self.start_ts is not None else self.first_ts

    def stall_threshold_ms(self, cfg: DetectorConfig) -> int:
        """No progress from any rank for longer than this = stall: ``stall_factor`` x the
        p90 of the job's own per-rank progress intervals, never below ``stall_floor_ms``."""
        iv = sorted(self.intervals)
        if not iv:
            return cfg.stall_floor_ms
        p90 = iv[min(len(iv) - 1, int(0.9 * len(iv)))]
        return max(cfg.stall_floor_ms, int(cfg.stall_factor * p90))

    def last_checkpoint(self, before: int) -> Union[Ckpt, None]:
        """The job's last succeeded checkpoint at ``before``: this attempt's own, else the one
        an earlier attempt wrote (what this attempt resumed from)."""
        best = None
        for c in self.ckpts:   # the highest step: a second reporter's later ts of a lower step loses
            if c.ts <= before and (best is None or (c.step, c.ts) > (best.step, best.ts)):
                best = c
        if best is None and self.resumed_from is not None and self.resumed_from.ts <= before:
            return self.resumed_from
        return best


class Fold(Struct, array_like=True):
    """Repeats of one job signal beyond ``FOLD_AFTER`` (a log storm of one line): counted."""

    n: int
    first_ts: int
    last_ts: int
    kept: str = ""          # id of the last identical signal kept


class JobState(Struct, kw_only=True):
    job: str
    attempts: dict[int, AttemptRecord] = {}
    signals: list[Signal] = []                     # job-scoped signals (logs, ckpt, container, ...), bounded
    #: digest of (attempt, kind, node, summary) -> identical signals kept (at most FOLD_AFTER),
    #: and "attempt|kind|signature" -> signals of that family kept (at most PER_SIGNATURE)
    seen: dict[str, int] = {}
    folded: dict[str, Fold] = {}                   # key -> repeats not kept (at most MAX_FOLDS keys)
    folded_n: int = 0                              # every repeat not kept (also those beyond MAX_FOLDS)
    trimmed_n: int = 0                             # signals dropped by the MAX_SIGNALS bound
    pending_prog: int = 0                          # progress seen before any attempt record
    # progress and checkpoints seen before the job's first scheduler record (a collector that
    # polls sacct may report a job only when it ended): the first attempt record adopts them
    early: Union[AttemptRecord, None] = None

    def record_for(self, ts: int, job: str) -> AttemptRecord:
        """The attempt a runtime event at ``ts`` belongs to, or the provisional record of a
        job the scheduler has not reported yet."""
        rec = self.attempt_at(ts)
        if rec is not None:
            return rec
        if self.early is None:
            self.early = AttemptRecord(job=job, attempt=-1, first_ts=ts)
        elif ts < self.early.first_ts:
            self.early.first_ts = ts
        return self.early

    def attempt_at(self, ts: int) -> Union[AttemptRecord, None]:
        """The attempt a runtime event at ``ts`` belongs to: the latest one that began by then."""
        best = None
        for a in self.attempts.values():
            b = a.first_ts if a.start_ts is None else min(a.start_ts, a.first_ts)
            if b <= ts and (best is None or a.attempt > best.attempt):
                best = a
        if best is None and self.attempts:
            best = min(self.attempts.values(), key=lambda a: a.attempt)
        return best


def stalled(rec: AttemptRecord, watermark: int, cfg: DetectorConfig) -> bool:
    """True when a running attempt has had no progress from any rank beyond its threshold."""
    return (rec.state == "running" and rec.prog_n > 0 and not rec.stalled_at
            and watermark - rec.prog_last_ts > rec.stall_threshold_ms(cfg))


def _push(js: JobState, sig: Signal, out: list[Signal]) -> None:
    """Keep a job signal (bounded): the first ``FOLD_AFTER`` identical ones (same attempt,
    kind, node and summary: one log line printed over and over) and the first
    ``PER_SIGNATURE`` of a kind and signature (every rank's watchdog line)
    are kept and emitted, the others only counted (``folded``); beyond ``MAX_SIGNALS`` a non-critical signal after the job's first
    ``KEEP_FIRST`` is dropped (the oldest such), so the first and the critical lines stay."""
    rec = js.attempt_at(sig.ts)
    att = rec.attempt if rec is not None else -1
    key = hashlib.blake2b(f"{att}|{sig.kind}|{sig.node}|{sig.summary}".encode(), digest_size=8).hexdigest()
    fam = f"{att}|{sig.kind}|{sig.data.get('signature')}"
    n = js.seen.get(key, 0)
    if n >= FOLD_AFTER or js.seen.get(fam, 0) >= PER_SIGNATURE:
        js.folded_n += 1
        f = js.folded.get(key)
        if f is not None:
            f.n += 1
            f.first_ts = min(f.first_ts, sig.ts)
            f.last_ts = max(f.last_ts, sig.ts)
        elif len(js.folded) < MAX_FOLDS:
            kept = next((s.id for s in reversed(js.signals) if s.kind == sig.kind and s.node == sig.node
                         and s.summary == sig.summary), "")
            js.folded[key] = Fold(1, sig.ts, sig.ts, kept)
        return
    if n or len(js.seen) < MAX_SIGNALS:
        js.seen[key] = n + 1
        js.seen[fam] = js.seen.get(fam, 0) + 1
    sig = cap_signal(sig)
    out.append(sig)
    sl = js.signals
    sl.append(sig)
    if len(sl) > MAX_SIGNALS:
        js.trimmed_n += 1
        for i in range(KEEP_FIRST, len(sl)):
            if sl[i].severity != "critical":
                del sl[i]
                break
        else:
            del sl[KEEP_FIRST if len(sl) > KEEP_FIRST else 0]


def log_signature(ev):
    """The signature of a ``runtime.log`` event (the one its collector named, else the
    catalog's match), or None: a line no rule knows changes no state."""
    d = ev.data
    sig = from_name(d.signature, d.message) if d.signature else None
    return sig if sig is not None else classify(d.message)


def _rank_node(rec: Union[AttemptRecord, None], rank: Union[int, None]) -> Union[str, None]:
    if rec is None or rank is None:
        return None
    return rec.ranks.get(str(rank))


def feed_job(js: JobState, ev, cfg: DetectorConfig, out: list[Signal], log_sig=None) -> None:
    """Update ``js`` with ``ev``; append the signals it raises to ``out``. ``log_sig``: the
    ``log_signature`` of a runtime.log ``ev`` when the caller matched it already."""
    k = ev.kind
    if k == "runtime.progress":
        _progress(js, ev, cfg, out)
    elif k == "sched.job":
        _sched(js, ev)
    elif k == "runtime.log":
        d = ev.data
        sig = log_sig if log_sig is not None else log_signature(ev)
        if sig is None:
            return
        rec = js.attempt_at(ev.ts)
        fields = dict(sig.fields)
        rank = d.rank if d.rank is not None else fields.get("rank")
        if rank is not None:
            fields["rank"] = rank
        node = ev.node or _rank_node(rec, rank)
        first = d.message.strip().splitlines()[-1] if d.message.strip() else d.message
        score = {"cause": 0.85, "weak": 0.3, "symptom": 0.0, "info": 0.0}[sig.role]
        if sig.name == "xid":
            score = 0.0  # the gpu.xid event carries the XID; a kernel line of it is evidence only
        elif sig.name in ("nic_link_down", "nfs_not_responding"):
            score = 0.5  # the switch / HCA counters name the port; the kernel line corroborates
        _push(js, make("log:" + sig.name, f"job:{ev.job}", ev, sig.layer if sig.layer != "runtime" else "runtime",
                       sig.severity, f"{sig.name}" + (f" on rank {rank}" if rank is not None else "")
                       + (f" ({node})" if node else "") + f": {first[:160]}",
                       category=sig.category, score=score, node=node,
                       data={"signature": sig.name, "role": sig.role, "stream": d.stream, **fields}), out)
    elif k == "runtime.checkpoint":
        _checkpoint(js, ev, out)
    elif k == "runtime.container":
        d = ev.data
        if d.event == "oom_killed":
            _push(js, make("container_oom", f"node:{ev.node}" if ev.node else f"job:{ev.job}", ev, "runtime",
                           "critical", f"container {d.container} OOM-killed" + (f" on {ev.node}" if ev.node else ""),
                           category="host_oom", component=f"node:{ev.node}" if ev.node else None, score=0.9,
                           data={"container": d.container, "exit_code": d.exit_code}), out)


def _sched(js: JobState, ev) -> None:
    d = ev.data
    rec = js.attempts.get(d.attempt)
    if rec is None:
        if js.early is not None and not js.attempts:
            # the job's first scheduler record: it takes over the progress and checkpoints
            # that came before it (their times say they are this attempt's)
            rec = msgspec.structs.replace(js.early, attempt=d.attempt, tenant=ev.tenant,
                                          first_ts=min(js.early.first_ts, ev.ts))
            js.early = None
            js.pending_prog = 0
            js.attempts[d.attempt] = rec
        else:
            rec = js.attempts[d.attempt] = AttemptRecord(job=ev.job, attempt=d.attempt, tenant=ev.tenant,
                                                         first_ts=ev.ts)
            earlier = [a for a in js.attempts.values() if a.attempt < d.attempt]
            if earlier:
                prev = max(earlier, key=lambda a: a.attempt)
                rec.resumed_from = prev.last_checkpoint(ev.ts)
        if len(js.attempts) > 64:
            del js.attempts[min(js.attempts)]
    rec.first_ts = min(rec.first_ts, ev.ts)
    if ev.tenant:
        rec.tenant = ev.tenant
    # a terminal state is sticky: a late "running" must not reopen a finished attempt
    terminal = rec.state not in ("pending", "running")
    if not terminal or d.state not in ("pending", "running"):
        if not (terminal and d.state == "requeued"):
            rec.state = d.state
            rec.state_ts = ev.ts
            rec.state_id = ev.id
    if d.nodes:
        rec.nodes = list(d.nodes)
    if d.gpus:
        rec.gpus = d.gpus
    if d.ranks:
        rec.ranks = dict(d.ranks)
    for f in ("image", "start_ts", "end_ts", "exit_code", "signal", "reason"):
        v = getattr(d, f)
        if v is not None:
            setattr(rec, f, v)
    if d.name:
        rec.name = d.name
    if d.user:
        rec.user = d.user
    if d.state in ("running",) and rec.start_ts is None:
        rec.start_ts = ev.ts
    if d.state not in ("pending", "running") and rec.end_ts is None:
        rec.end_ts = ev.ts
    rec.sched.append((ev.ts, ev.id, d.state))
    if len(rec.sched) > 32:
        del rec.sched[1]


def _progress(js: JobState, ev, cfg: DetectorConfig, out: list[Signal]) -> None:
    rec = js.attempt_at(ev.ts)
    if rec is None:
        js.pending_prog += 1
        rec = js.record_for(ev.ts, ev.job)
    d = ev.data
    t = ev.ts
    r = d.rank if d.rank is not None else -1
    prev = rec.rank_last.get(r)
    if prev is not None and t > prev:
        iv = rec.intervals
        iv.append(t - prev)
        if len(iv) > MAX_INTERVALS:
            del iv[0]
    if prev is not None or len(rec.rank_last) < MAX_RANKS_TRACKED:
        rec.rank_last[r] = t
    if rec.prog_n == 0:
        rec.prog_first_ts = t
    rec.prog_n += 1
    if t >= rec.prog_last_ts:
        rec.prog_last_ts = t
        rec.prog_last_id = ev.id
        rec.prog_last_step = d.step
    st = d.step_time_s
    if st is not None and st > 0:
        # whole-job slowdown against its own start (synchronous training slows every rank)
        if rec.st_base_n < 32:
            rec.st_base_n += 1
            rec.st_base += (st - rec.st_base) / rec.st_base_n
            rec.st_cur = rec.st_base
        else:
            rec.st_cur += 0.05 * (st - rec.st_cur)
            if not rec.slow_fired and rec.st_cur > cfg.slowdown_factor * rec.st_base:
                rec.slow_fired = True
                _push(js, make("slowdown", f"job:{ev.job}", ev, "runtime", "warning",
                               f"job {ev.job} slowed down: step {rec.st_cur:.2f} s vs {rec.st_base:.2f} s at start",
                               data={"step_time_s": round(rec.st_cur, 3), "base_s": round(rec.st_base, 3)}), out)
    if st is not None and r >= 0:
        e = rec.step_ewma.get(r)
        e = st if e is None else e + 0.3 * (st - e)
        if len(rec.step_ewma) < MAX_RANKS_TRACKED or r in rec.step_ewma:
            rec.step_ewma[r] = e
        # amortised O(1): look at all ranks once every len(ranks) progress events
        if len(rec.step_ewma) >= 3 and rec.prog_n % max(8, len(rec.step_ewma)) == 0:
            vals = sorted(rec.step_ewma.values())
            med = vals[len(vals) // 2]
            worst = max(rec.step_ewma, key=rec.step_ewma.__getitem__)
            e = rec.step_ewma[worst]
            if med > 0 and e > cfg.straggler_factor * med and worst not in rec.straggler_fired:
                rec.straggler_fired.append(worst)
                node = _rank_node(rec, worst)
                _push(js, make("straggler", f"job:{ev.job}", ev, "runtime", "warning",
                               f"rank {worst}" + (f" ({node})" if node else "") + f" is a straggler: step {e:.2f} s vs median {med:.2f} s",
                               node=node, data={"rank": worst, "step_time_s": round(e, 3), "median_s": round(med, 3)}), out)


def _checkpoint(js: JobState, ev, out: list[Signal]) -> None:
    d = ev.data
    rec = js.record_for(ev.ts, ev.job)
    if rec is not None:
        rec.ckpt_open = Ckpt(ev.ts, d.step, d.path, ev.id) if d.phase == "started" else None
    if d.phase == "succeeded":
        if rec is not None:
            rec.ckpts.append(Ckpt(ev.ts, d.step, d.path, ev.id))
            if len(rec.ckpts) > 8:
                del rec.ckpts[0]
            rec.stale_fired = False
    elif d.phase == "failed":
        sig = classify(d.error) if d.error else None
        cat = sig.category if sig is not None and sig.role == "cause" else None
        if rec is not None:
            rec.ckpt_fail_n += 1
        _push(js, make("checkpoint_failed", f"job:{ev.job}", ev, "runtime", "warning",
                       f"checkpoint step {d.step} to {d.path} failed" + (f": {d.error[:160]}" if d.error else ""),
                       category=cat, score=0.8 if cat else 0.0,
                       component=f"path:{_mount_of(d.path)}" if cat and cat.startswith("storage") else None,
                       data={"step": d.step, "path": d.path, "error": d.error,
                             "signature": sig.name if sig else None}), out)


def _mount_of(path: str) -> str:
    """Best guess of the mount point of a file path (first component): refined by the join."""
    parts = [p for p in path.split("/") if p]
    return "/" + parts[0] if parts else path


def checkpoint_stale(rec: AttemptRecord, watermark: int, cfg: DetectorConfig) -> bool:
    """True when a running attempt that checkpoints regularly has gone ``ckpt_stale_factor``
    x its usual interval without a succeeded checkpoint."""
    c = rec.ckpts
    if rec.state != "running" or len(c) < 3 or rec.stale_fired:
        return False
    gaps = sorted(b.ts - a.ts for a, b in zip(c, c[1:]))
    usual = gaps[len(gaps) // 2]
    return usual > 0 and watermark - c[-1].ts > cfg.ckpt_stale_factor * usual
