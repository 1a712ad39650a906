"""Training jobs and their attempts: the step/heartbeat/checkpoint timeline of one run.

An attempt is described by a few numbers (start, nominal step time, slowdowns, where
progress halts, how it ends); ``Attempt.build`` expands them into the exact progress and
checkpoint timestamps, so the ground-truth labels and the emitted events come from the
same arithmetic.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

MS = 1000


@dataclass
class Job:
    id: str
    name: str
    user: str
    tenant: str
    image: str
    n_nodes: int
    gpn: int
    total_steps: int
    step_time: float            # nominal seconds per step
    hb_steps: int               # a progress line every hb_steps steps
    ckpt_every: int             # checkpoint every ckpt_every steps
    ckpt_bytes: int
    time_limit_s: int
    submit_ts: int
    user_cancel_after_s: float | None = None
    watchdog_ms: int = 600_000
    max_retries: int = 3
    per_node_progress: bool = False
    samples_per_step: int = 512
    attempts: list["Attempt"] = field(default_factory=list)

    @property
    def gpus(self) -> int:
        return self.n_nodes * self.gpn


@dataclass
class Attempt:
    job: Job
    n: int
    pending_ts: int
    pending_reason: str = "Priority"
    start_ts: int | None = None
    nodes: list[int] = field(default_factory=list)
    init_ms: int = 90_000
    start_step: int = 0                 # resumed from this checkpoint step
    stall: bool = False                 # the fault stalls the job (failure_ts = last progress)
    # ---- modifiers set by faults
    slow: list[tuple[int, float]] = field(default_factory=list)   # from ts on, step time x factor
    halt_ts: int | None = None          # progress stops here (crash or hang)
    ckpt_hang_after: int | None = None  # first checkpoint started at/after this ts never completes
    ckpt_fail_after: int | None = None  # first checkpoint started at/after this fails
    ckpt_fail_err: str = ""
    ckpt_fail_after_s: float = 30.0
    forced_end: tuple[int, str, int | None, int | None, str | None] | None = None
    forced_end_after_ckpt_fail_s: float | None = None
    fault: object | None = None
    # ---- results of build()
    progress: list[tuple[int, int, float]] = field(default_factory=list)
    ckpts: list[tuple[int, str, int, float | None, int | None, str | None]] = field(default_factory=list)
    end_ts: int | None = None
    end_state: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    reason: str | None = None
    stalled_ts: int | None = None       # progress stopped without the attempt ending
    ckpt_fail_ts: int | None = None
    label: dict | None = None
    #: extra events (ts, maker) produced by the fault, emitted with the stream
    extra: list = field(default_factory=list)

    @property
    def gpus(self) -> int:
        return self.job.gpus

    def factor(self, t: int) -> float:
        f = 1.0
        for ts, fac in self.slow:
            if t >= ts:
                f = fac
        return f

    def build(self, window_end: int, rng_seed: int, ckpt_factor=None) -> None:
        """Expand the attempt into progress/checkpoint timestamps and its end."""
        job = self.job
        rng = random.Random(rng_seed)
        self.progress = []
        self.ckpts = []
        self.stalled_ts = None
        self.ckpt_fail_ts = None
        self.ckpt_slowed = False
        assert self.start_ts is not None
        t = self.start_ts + self.init_ms
        step = self.start_step
        limit_ts = self.start_ts + job.time_limit_s * MS
        cancel_ts = self.start_ts + int(job.user_cancel_after_s * MS) if job.user_cancel_after_s else None
        hard_stops = [limit_ts, window_end]
        if cancel_ts:
            hard_stops.append(cancel_ts)
        if self.forced_end:
            hard_stops.append(self.forced_end[0])
        stop = min(hard_stops)
        if self.halt_ts is not None:
            stop = min(stop, self.halt_ts)
        next_hb = (step // job.hb_steps + 1) * job.hb_steps
        next_ck = (step // job.ckpt_every + 1) * job.ckpt_every
        completed_ts = None
        end_after_ckpt_fail = None
        while True:
            nxt = min(next_hb, next_ck, job.total_steps)
            st = job.step_time * self.factor(t)
            dt = int((nxt - step) * st * MS)
            if t + dt > stop:
                break
            t += dt
            step = nxt
            if step == next_hb:
                self.progress.append((t, step, round(st * rng.uniform(0.97, 1.03), 3)))
                next_hb += job.hb_steps
            if step >= job.total_steps:
                completed_ts = t + rng.randrange(5_000, 40_000)
                break
            if step == next_ck:
                next_ck += job.ckpt_every
                path = f"/ckpt/{job.user}/{job.name}/step_{step:07d}"
                if self.ckpt_hang_after is not None and t >= self.ckpt_hang_after:
                    self.ckpts.append((t, "started", step, None, None, None))
                    self.stalled_ts = t
                    break
                bw = rng.uniform(4e9, 9e9)  # aggregate bytes/s to /ckpt
                dur = job.ckpt_bytes / bw
                if ckpt_factor is not None:
                    f = ckpt_factor(t)
                    dur *= f
                    if f > 1.5:
                        self.ckpt_slowed = True
                if self.ckpt_fail_after is not None and t >= self.ckpt_fail_after:
                    self.ckpts.append((t, "started", step, None, None, None))
                    ft = t + int(self.ckpt_fail_after_s * MS)
                    if ft <= stop:
                        self.ckpts.append((ft, "failed", step, round(self.ckpt_fail_after_s, 1), None, self.ckpt_fail_err))
                        self.ckpt_fail_ts = ft
                        end_after_ckpt_fail = ft + int((self.forced_end_after_ckpt_fail_s or 3.0) * MS)
                    break
                self.ckpts.append((t, "started", step, None, None, None))
                te = t + int(dur * MS * self.factor(t))
                if te > stop:
                    break
                self.ckpts.append((te, "succeeded", step, round((te - t) / MS, 1), job.ckpt_bytes, path))
                t = te
        # ---- the end
        self.end_ts = self.end_state = self.exit_code = self.signal = self.reason = None
        if completed_ts is not None and completed_ts <= window_end:
            self._end(completed_ts, "completed", 0, None, None)
            return
        if end_after_ckpt_fail is not None and self.forced_end is None:
            if end_after_ckpt_fail <= window_end:
                self._end(end_after_ckpt_fail, "failed", 1, None, "NonZeroExitCode")
            return
        candidates = []
        if self.forced_end:
            candidates.append(self.forced_end)
        candidates.append((limit_ts, "timeout", 0, 15, "TimeLimit"))
        if cancel_ts:
            candidates.append((cancel_ts, "cancelled", 0, 15, None))
        ts, state, code, sig, reason = min(candidates, key=lambda c: c[0])
        if ts <= window_end:
            self._end(ts, state, code, sig, reason)

    def _end(self, ts: int, state: str, code: int | None, sig: int | None, reason: str | None) -> None:
        self.end_ts, self.end_state, self.exit_code, self.signal, self.reason = ts, state, code, sig, reason

    def last_progress_event_ts(self) -> int | None:
        """ts of the last runtime.progress event from any rank (per-node leaders are 3 ms apart)."""
        if not self.progress:
            return None
        extra = 3 * (len(self.nodes) - 1) if self.job.per_node_progress else 0
        return self.progress[-1][0] + extra

    # ---- helpers for faults
    def last_progress_before(self, t: int) -> tuple[int, int, float] | None:
        best = None
        for p in self.progress:
            if p[0] <= t:
                best = p
            else:
                break
        return best

    def last_ckpt_succeeded(self, before: int) -> tuple[int, str, int, float | None, int | None, str | None] | None:
        best = None
        for c in self.ckpts:
            if c[1] == "succeeded" and c[0] <= before:
                best = c
        return best

    def ranks(self, node_names: list[str]) -> dict[str, str]:
        gpn = self.job.gpn
        return {str(r): node_names[self.nodes[r // gpn]] for r in range(len(self.nodes) * gpn)}

    def rank_of(self, node_idx: int, gpu: int) -> int:
        return self.nodes.index(node_idx) * self.job.gpn + gpu
