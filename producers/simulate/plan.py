"""The plan: workload, scheduler timeline, injected faults and the ground truth.

Planning is small and exact (jobs, attempts, fault modifiers, a few thousand discrete
events); the bulk telemetry is generated later, streaming, from this plan.
"""

from __future__ import annotations

import heapq
import math
import random
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

from .cluster import Cluster, build_cluster
from .jobs import MS, Attempt, Job
from .overlays import INF, Overlays, ramp

INTERRUPTION_STATES = frozenset({"failed", "node_fail", "timeout", "out_of_memory", "preempted"})
STALL_THRESHOLD_S = 600

JOB_NAMES = ("llama3-8b-pretrain", "llama3-70b-sft", "mixtral-8x7b-pt", "vit-h14-clip", "gpt-neox-20b",
             "bert-large-mlm", "sdxl-finetune", "whisper-large-ft", "moe-32x1b-pt", "rlhf-ppo-13b",
             "t5-xxl-span", "dlrm-v2")
USERS = (("alice", "team-llm"), ("bob", "team-llm"), ("chen", "team-vision"), ("dara", "team-speech"),
         ("eve", "team-research"), ("farid", "team-research"), ("gita", "team-llm"))
IMAGES = ("nvcr.io/nvidia/pytorch:24.07-py3", "registry.corp/train/llm:2024.10.3",
          "registry.corp/train/vision:1.14.0")


def mk(ts: int, kind: str, source: str, data: dict, node: str | None = None, job: str | None = None,
       tenant: str | None = None) -> dict:
    ev: dict[str, Any] = {"v": 1, "id": "", "ts": ts, "kind": kind, "source": source}
    if node is not None:
        ev["node"] = node
    if job is not None:
        ev["job"] = job
    if tenant is not None:
        ev["tenant"] = tenant
    ev["data"] = data
    return ev


@dataclass
class FaultSpec:
    kind: str
    at: tuple[float, float] = (0.3, 0.6)     # fraction of the window
    params: dict = field(default_factory=dict)


@dataclass
class Plan:
    scenario: str
    seed: int
    t0: int
    t_end: int
    cluster: Cluster
    rng: random.Random
    job_base: int
    day_shift: int = 0                                               # ms added before reading the diurnal clock
    ov: Overlays = field(default_factory=Overlays)
    jobs: list[Job] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    events: list[tuple[int, dict]] = field(default_factory=list)    # discrete, non-job events
    drained: dict[int, int] = field(default_factory=dict)            # node -> drained until ts
    start_hooks: list[Callable[["Plan", Attempt], None]] = field(default_factory=list)
    fleet: dict[str, list] = field(default_factory=dict)
    decoys: list[dict] = field(default_factory=list)
    changes: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    # ------------------------------------------------------------ helpers
    def name(self, i: int) -> str:
        return self.cluster.nodes[i].name

    def add(self, ts: int, ev: dict) -> None:
        if self.t0 <= ts < self.t_end:
            self.events.append((ts, ev))

    def seed_for(self, *parts: Any) -> int:
        return zlib.crc32(repr((self.seed, self.scenario) + parts).encode())

    def sub_rng(self, *parts: Any) -> random.Random:
        return random.Random(self.seed_for(*parts))

    def fleet_add(self, key: str, value: Any) -> None:
        lst = self.fleet.setdefault(key, [])
        if value not in lst:
            lst.append(value)

    def ckpt_factor(self, t: int) -> float:
        """How much slower checkpoint writes are at ``t`` (fleet-wide /ckpt latency overlays)."""
        f = 1.0
        for a, b, eff in self.ov.storage.get("/ckpt", ()):
            if a <= t < b and eff.get("nodes") is None and "lat_mult" in eff:
                f = max(f, ramp(eff["lat_mult"], t, a, b) ** 0.5)
        return f

    def rebuild(self, att: Attempt) -> None:
        att.build(self.t_end, self.seed_for("att", att.job.id, att.n),
                  self.ckpt_factor if "/ckpt" in self.ov.storage else None)
        if hasattr(att, "_ckwin"):
            del att._ckwin

    def running_at(self, t: int) -> list[Attempt]:
        return [a for a in self.attempts if a.start_ts is not None and a.start_ts <= t
                and (a.end_ts is None or a.end_ts > t)]

    def node_busy(self, node: int, t0: int, t1: int) -> bool:
        for a in self.attempts:
            if a.start_ts is None or node not in a.nodes:
                continue
            e = a.end_ts if a.end_ts is not None else INF
            if a.start_ts < t1 and e > t0:
                return True
        return False


# ------------------------------------------------------------------ workload
def _job_sizes(n_nodes: int) -> tuple[list[int], list[float]]:
    sizes = [s for s in (1, 2, 4, 8, 16, 32, 64, 128) if s <= max(1, n_nodes // 2)]
    weights = [1.0 / (1 + i * 0.6) for i in range(len(sizes))]
    return sizes, weights


def new_job(plan: Plan, submit_ts: int, *, n_nodes: int | None = None, duration_s: float | None = None,
            cancel: bool | None = None, image: str | None = None, user: tuple[str, str] | None = None) -> Job:
    r = plan.rng
    c = plan.cluster
    sizes, weights = _job_sizes(len(c.nodes))
    nn = n_nodes or r.choices(sizes, weights)[0]
    dur = duration_s or math.exp(r.uniform(math.log(1200), math.log(5 * 3600)))
    step_time = round(r.uniform(0.6, 4.5), 3)
    total = max(50, int(dur / step_time))
    hb_steps = max(1, int(r.uniform(15, 45) / step_time))
    ck_steps = max(hb_steps, int(r.uniform(8 * 60, 25 * 60) / step_time) // hb_steps * hb_steps)
    u = user or r.choice(USERS)
    limit_h = math.ceil((dur * r.uniform(1.25, 1.8) + 600) / 3600)
    jid = str(plan.job_base + len(plan.jobs))
    job = Job(id=jid, name=r.choice(JOB_NAMES), user=u[0], tenant=u[1], image=image or r.choice(IMAGES),
              n_nodes=nn, gpn=c.gpus_per_node, total_steps=total, step_time=step_time, hb_steps=hb_steps,
              ckpt_every=ck_steps, ckpt_bytes=int(nn * c.gpus_per_node * r.uniform(1.5e9, 4e9)),
              time_limit_s=limit_h * 3600, submit_ts=submit_ts,
              watchdog_ms=1_800_000 if r.random() < 0.15 else 600_000,
              max_retries=r.choice((1, 2, 3, 3)), per_node_progress=nn <= 4 and r.random() < 0.5)
    if cancel if cancel is not None else r.random() < 0.06:
        job.user_cancel_after_s = r.uniform(600, dur * 0.9)
    plan.jobs.append(job)
    return job


# ------------------------------------------------------------------ scheduler
class Scheduler:
    """Event-driven FIFO+backfill allocator over the window, with fault hooks."""

    def __init__(self, plan: Plan, faults: list[FaultSpec], fault_lib: dict[str, Callable],
                 load: float = 1.6) -> None:
        self.plan = plan
        self.q: list = []
        self.pending: list[Attempt] = []
        n = len(plan.cluster.nodes)
        self.free = list(range(n))
        self.faults = faults
        self.lib = fault_lib
        self.load = load
        self.seq = 0

    def push(self, ts: int, kind: str, obj: Any, prio: int = 2) -> None:
        self.seq += 1
        heapq.heappush(self.q, (ts, prio, self.seq, kind, obj))

    def run(self) -> None:
        p = self.plan
        r = p.rng
        n = len(p.cluster.nodes)
        for f in self.faults:  # faults present from the start (e.g. a node that missed an upgrade)
            if f.at[1] <= 0:
                self.lib[f.kind](self, f, p.t0)
        # initial fill plus a backlog (jobs already queued at t0) and a diurnal arrival process
        used = 0
        t = p.t0 + 5_000
        sizes = [x for x in _job_sizes(n)[0] if x >= 2]
        k = 0
        while used < self.load * n:
            # a fleet always runs some multi-node jobs: the first two of the queue are
            job = new_job(p, t, n_nodes=r.choice(sizes[:3]) if k < 2 and sizes else None)
            k += 1
            self._submit(job, t)
            used += job.n_nodes
            t += r.randrange(1_000, 20_000)
        window_h = (p.t_end - p.t0) / 3.6e6
        avg_nodes = sum(s * w for s, w in zip(*_job_sizes(n))) / sum(_job_sizes(n)[1])
        rate_h = max(1.5, n / avg_nodes / 1.2)  # arrivals/hour to keep the fleet busy (with a backlog)
        ta = p.t0 + 60_000
        from .telemetry import diurnal

        while True:  # thinned Poisson process: more submissions in the working day (UTC)
            ta += int(r.expovariate(rate_h * 1.6) * 3.6e6)
            if ta >= p.t_end:
                break
            if r.random() < 0.35 + 0.65 * diurnal(ta + p.day_shift):
                self._submit(new_job(p, ta), ta)
        for f in self.faults:
            a, b = f.at
            if b <= 0:
                continue
            ts = p.t0 + int((p.t_end - p.t0) * r.uniform(a, b))
            self.push(ts, "fault", f, prio=0)
        del window_h
        while self.q:
            ts, _, _, kind, obj = heapq.heappop(self.q)
            if ts >= p.t_end:
                break
            if kind == "submit":
                self.pending.append(obj)
            elif kind == "end":
                self._on_end(obj, ts)
            elif kind == "fault":
                self._on_fault(obj, ts)
            elif kind == "repair":
                p.drained.pop(obj, None)
                self._release([obj], ts)
            elif kind == "call":
                obj(ts)
            self._try_start(ts)

    def _submit(self, job: Job, ts: int, n: int = 0, reason: str = "Priority") -> Attempt:
        att = Attempt(job=job, n=n, pending_ts=ts, pending_reason=reason,
                      init_ms=self.plan.rng.randrange(45_000, 240_000))
        job.attempts.append(att)
        self.plan.attempts.append(att)
        self.push(ts, "submit", att, prio=1)
        return att

    def _release(self, nodes: list[int], ts: int) -> None:
        for i in nodes:
            if i in self.plan.drained and self.plan.drained[i] > ts:
                continue
            if i not in self.free:
                self.free.append(i)
        self.free.sort()

    def _try_start(self, ts: int) -> None:
        p = self.plan
        still = []
        if any(getattr(a, "priority", 0) for a in self.pending):
            self.pending.sort(key=lambda a: -getattr(a, "priority", 0))  # stable: FIFO within a priority
        for att in self.pending:
            want = att.job.n_nodes
            avoid = getattr(att, "avoid", ())
            cand = [i for i in self.free if i not in avoid]
            if len(cand) < want:
                still.append(att)
                continue
            prefer = getattr(att, "prefer", None)
            if prefer and all(i in cand for i in prefer):
                chosen = list(prefer)[:want]
            else:
                off = p.rng.randrange(len(cand) - want + 1)
                chosen = cand[off:off + want]
            for i in chosen:
                self.free.remove(i)
            att.nodes = chosen
            att.start_ts = ts + p.rng.randrange(1_000, 6_000)
            p.rebuild(att)
            for hook in list(p.start_hooks):
                hook(p, att)
            self._schedule_end(att)
        self.pending = still

    def _schedule_end(self, att: Attempt) -> None:
        if att.end_ts is not None:
            att._end_key = att.end_ts
            self.push(att.end_ts, "end", att)

    def reschedule(self, att: Attempt) -> None:
        """Call after a fault changed an attempt: re-queue its (new) end."""
        self._schedule_end(att)

    def _on_end(self, att: Attempt, ts: int) -> None:
        if getattr(att, "_end_key", None) != ts or getattr(att, "_ended", False):
            return  # stale end (a fault moved it)
        att._ended = True
        self._release(att.nodes, ts)
        job = att.job
        if att.end_state in INTERRUPTION_STATES and att.end_state != "timeout" and att.n < job.max_retries \
                and getattr(att, "retry", True):
            delay = getattr(att, "retry_delay_ms", None) or self.plan.rng.randrange(20_000, 300_000)
            nxt = self._submit(job, ts + delay, att.n + 1,
                               "BeginTime" if att.end_state in ("node_fail", "preempted") else "Priority")
            nxt.avoid = tuple(i for i in att.nodes if i in self.plan.drained)
            nxt.priority = 1  # a requeued job keeps its (aged) priority
            ck = att.last_ckpt_succeeded(ts)
            nxt.start_step = ck[2] if ck else att.start_step
            if getattr(att, "retry_same_nodes", False):
                nxt.prefer = list(att.nodes)

    def _on_fault(self, spec: FaultSpec, ts: int) -> None:
        fn = self.lib[spec.kind]
        ok = fn(self, spec, ts)
        if ok is False and ts + 300_000 < self.plan.t_end - 1_800_000:
            self.push(ts + 300_000, "fault", spec, prio=0)  # nothing suitable running: try later


# ------------------------------------------------------------------ labels
def attempt_state(att: Attempt) -> str:
    if att.end_state:
        return att.end_state
    return "running" if att.start_ts is not None else "pending"


def last_event_ts(att: Attempt) -> int:
    return att.end_ts or att.start_ts or att.pending_ts


def build_labels(plan: Plan) -> dict:
    inter = []
    healthy = []
    for att in plan.attempts:
        if att.pending_ts >= plan.t_end:
            continue
        lab = att.label
        st = attempt_state(att)
        if lab is not None and att.end_state in ("completed", "cancelled") and not att.stall:
            lab = None  # safety net: the job ended on its own before the fault could stop it
        if lab is not None and att.end_state is None and not att.stall:
            # the fault's failure lies beyond the window: a hang in progress at the end is a
            # stall if it already lasted the stall threshold, otherwise nothing happened yet
            if att.halt_ts is not None and att.halt_ts <= plan.t_end - STALL_THRESHOLD_S * 1000:
                att.stall = True
            else:
                lab = None
        if lab is None and st == "timeout" and getattr(att, "ckpt_slowed", False):
            # a secondary victim: checkpoints to the slow /ckpt ate the job's time budget
            lab = {"category": "storage_slow", "component": "path:/ckpt", "fault": "storage_slow_victim",
                   "summary": "checkpoints to a slow /ckpt pushed the job past its time limit"}
        if lab is None:
            if st in INTERRUPTION_STATES:
                raise AssertionError(f"unlabelled interruption job {att.job.id}/{att.n} {st}")
            healthy.append({"job": att.job.id, "attempt": att.n, "state": st})
            continue
        last_prog = att.last_progress_event_ts()
        stalled = att.stall or st not in INTERRUPTION_STATES
        if stalled:
            failure_ts = last_prog if last_prog is not None else att.start_ts
        else:
            failure_ts = att.end_ts
        ck = att.last_ckpt_succeeded(failure_ts)
        for prev in reversed(att.job.attempts[: att.n]):   # none of its own: the one it resumed from
            if ck is not None:
                break
            ck = prev.last_ckpt_succeeded(failure_ts)
        base = max(ck[0], att.start_ts) if ck else att.start_ts
        lost = round(att.gpus * (failure_ts - base) / 3_600_000, 4)
        nxt = att.job.attempts[att.n + 1] if len(att.job.attempts) > att.n + 1 else None
        retry = None
        if nxt is not None and nxt.pending_ts < plan.t_end:
            retry = {"attempt": nxt.n, "state": attempt_state(nxt), "ts": last_event_ts(nxt),
                     "nodes": [plan.name(i) for i in nxt.nodes],
                     "same_nodes": bool(nxt.nodes) and sorted(nxt.nodes) == sorted(att.nodes)}
        inter.append({
            "job": att.job.id, "attempt": att.n, "category": lab["category"], "component": lab["component"],
            "failure_ts": failure_ts, "last_checkpoint_step": ck[2] if ck else None,
            "last_checkpoint_ts": ck[0] if ck else None, "lost_gpu_hours": lost,
            "retry_state": retry["state"] if retry else None, "retry": retry,
            "state": "stalled" if stalled else st, "end_state": att.end_state, "stalled": stalled,
            "start_ts": att.start_ts, "end_ts": att.end_ts, "last_progress_ts": last_prog,
            "gpus": att.gpus, "nodes": [plan.name(i) for i in att.nodes], "tenant": att.job.tenant,
            "image": att.job.image, "fault": lab.get("fault"), "summary": lab.get("summary", ""),
            "precursor": getattr(att, "precursor", None),
        })
    inter.sort(key=lambda d: (d["failure_ts"], d["job"], d["attempt"]))
    return {"interruptions": inter, "healthy": healthy}


def make_plan(scenario: str, seed: int, t0: int, hours: float, n_nodes: int, gpn: int,
              job_base: int) -> Plan:
    rng = random.Random(zlib.crc32(f"{scenario}|{seed}".encode()))
    cluster = build_cluster(random.Random(seed * 1_000_003 + 7), n_nodes, gpn)
    return Plan(scenario=scenario, seed=seed, t0=t0, t_end=t0 + int(hours * 3_600_000), cluster=cluster,
                rng=rng, job_base=job_base)


def node_allocs(plan: Plan) -> list[list[Attempt]]:
    allocs: list[list[Attempt]] = [[] for _ in plan.cluster.nodes]
    for a in plan.attempts:
        if a.start_ts is None:
            continue
        for i in a.nodes:
            allocs[i].append(a)
    for lst in allocs:
        lst.sort(key=lambda a: a.start_ts)
    return allocs


MS = MS
