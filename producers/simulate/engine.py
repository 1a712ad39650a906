"""Turn a scenario into a time-ordered stream of contract events plus ground truth.

``Simulation(scenario, seed)`` plans (cluster, jobs, faults: small) and then streams:
background telemetry one simulated second at a time, merged with the per-attempt job
timelines (activated lazily when the attempt is submitted) and the discrete fault/decoy
events. Event ids are ``sim-<tag>-<counter>`` with ``tag`` derived from (scenario, seed),
so the same seed gives byte-identical output. Delivery faults (reordering, duplicates,
clock skew, malformed lines) are applied last and counted in the labels.
"""

from __future__ import annotations

import heapq
import random
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterator

import orjson

from . import decoys as _decoys
from . import messages as M
from .cluster import topology_data
from .faults import LIBRARY
from .jobs import Attempt
from .plan import STALL_THRESHOLD_S, FaultSpec, Plan, Scheduler, build_labels, make_plan, mk, node_allocs
from .scenarios import SCENARIOS, Scenario
from .telemetry import Intervals, Telemetry

#: 2026-11-02T06:00:00Z
DEFAULT_START_MS = 1_793_599_200_000

#: kinds whose ts comes from the node's own clock (clock skew applies to them)
SKEWABLE = frozenset({"gpu.sample", "gpu.xid", "storage.sample", "storage.mount", "net.rdma", "runtime.log",
                      "runtime.container"})


@dataclass
class Delivery:
    """Delivery faults: fractions of events affected (0 = off)."""

    out_of_order: float = 0.0
    max_delay_s: float = 4.0
    duplicates: float = 0.0
    skew_nodes: int = 0
    max_skew_s: float = 30.0
    malformed: float = 0.0

    @property
    def any(self) -> bool:
        return bool(self.out_of_order or self.duplicates or self.skew_nodes or self.malformed)


@dataclass
class Options:
    nodes: int | None = None
    gpus_per_node: int | None = None
    hours: float | None = None
    start_ms: int = DEFAULT_START_MS
    # the UTC time of day the job-arrival process reads at start_ms (None: start_ms's own); a
    # test that needs the same story at any hour of the day pins it
    day_start_ms: int | None = None
    intervals: Intervals = field(default_factory=Intervals)
    delivery: Delivery = field(default_factory=Delivery)
    job_base: int | None = None


def _resolve_pins(plan: Plan, faults: tuple[FaultSpec, ...]) -> list[FaultSpec]:
    r = plan.rng
    n = len(plan.cluster.nodes)
    lemon = r.randrange(n)
    out = []
    for f in faults:
        params = dict(f.params)
        if params.get("node") == "LEMON":
            params["node"] = lemon
            plan.fleet_add("lemon_nodes", plan.name(lemon))
        out.append(FaultSpec(f.kind, f.at, params))
    return out


class Simulation:
    """One scenario run. Iterate ``lines()`` (or ``records()``) once, then read ``labels()``."""

    def __init__(self, scenario: str | Scenario, seed: int = 0, options: Options | None = None, **kw) -> None:
        self.sc = SCENARIOS[scenario] if isinstance(scenario, str) else scenario
        self.seed = int(seed)
        o = options or Options()
        for k, v in kw.items():
            if v is not None:
                setattr(o, k, v)
        self.o = o
        self.n_nodes = o.nodes or self.sc.nodes
        self.gpn = o.gpus_per_node or self.sc.gpus_per_node
        self.hours = o.hours or self.sc.hours
        names = list(SCENARIOS)
        self.job_base = o.job_base if o.job_base is not None else (
            480_000 + (names.index(self.sc.name) if self.sc.name in names else 99) * 10_000)
        self.tag = f"{zlib.crc32(f'{self.sc.name}|{self.seed}'.encode()):08x}"
        self._plan: Plan | None = None
        self.counts: Counter = Counter()
        self.extra_counts: Counter = Counter()
        self.done = False

    # ------------------------------------------------------------ planning
    @property
    def plan(self) -> Plan:
        if self._plan is None:
            self._plan = self._make_plan()
        return self._plan

    def _make_plan(self) -> Plan:
        plan = make_plan(self.sc.name, self.seed, self.o.start_ms, self.hours, self.n_nodes, self.gpn, self.job_base)
        if self.o.day_start_ms is not None:
            plan.day_shift = self.o.day_start_ms - self.o.start_ms
        faults = _resolve_pins(plan, self.sc.faults)
        sch = Scheduler(plan, faults, LIBRARY)
        sch.run()
        _decoys.apply(plan, self.sc.decoys)
        self._idle_flaps(plan)
        plan.events.sort(key=lambda x: x[0])
        return plan

    @staticmethod
    def _idle_flaps(plan: Plan) -> None:
        """A flapping port also flaps while no job uses its node (what makes it a repeat offender)."""
        pin = getattr(plan, "flap_pin", None)
        if pin is None:
            return
        from .faults import MIN, link_flap

        r = plan.sub_rng("idle-flaps")
        node, k = pin
        for _ in range(r.randrange(3, 7)):
            t = plan.t0 + int((plan.t_end - plan.t0) * r.uniform(0.05, 0.95))
            if not plan.node_busy(node, t - 2 * MIN, t + 2 * MIN):
                link_flap(plan, node, k, t, r.randrange(2_000, 30_000), None)

    # ------------------------------------------------------------ streams
    def _inventory(self) -> list[tuple[int, dict]]:
        plan = self.plan
        out = []
        t = plan.t0
        for i, n in enumerate(plan.cluster.nodes):
            ts = t + 200 + (i * 37) % 20_000
            out.append((ts, mk(ts, "inventory.versions", f"inventory@{n.name}", dict(n.versions), node=n.name)))
            out.append((ts + 1, mk(ts + 1, "inventory.topology", f"inventory@{n.name}", topology_data(n), node=n.name)))
        # after each change the node re-reports its stack
        cur = {n.name: dict(n.versions) for n in plan.cluster.nodes}
        for ts, ev in plan.events:
            if ev["kind"] == "inventory.change":
                v = cur[ev["node"]]
                v[ev["data"]["component"]] = ev["data"]["to"]
                ts2 = ts + 1500
                if ts2 < plan.t_end:
                    out.append((ts2, mk(ts2, "inventory.versions", f"inventory@{ev['node']}", dict(v), node=ev["node"])))
        out.sort(key=lambda x: x[0])
        return out

    def _attempt_events(self, att: Attempt) -> list[tuple[int, dict]]:
        plan = self.plan
        job = att.job
        t_end = plan.t_end
        names = [plan.name(i) for i in att.nodes]
        out: list[tuple[int, dict]] = []
        src = "slurm@ctl-1"
        base = {"attempt": att.n, "gpus": job.gpus, "name": job.name, "user": job.user, "image": job.image}

        def sj(ts: int, **d) -> None:
            data = {"state": d.pop("state"), **base, **d}
            out.append((ts, mk(ts, "sched.job", src, data, job=job.id, tenant=job.tenant)))

        sj(att.pending_ts, state="pending", nodes=[], ranks={}, exit_code=None, signal=None, start_ts=None,
           end_ts=None, reason=att.pending_reason)
        if att.start_ts is None:
            return [x for x in out if x[0] < t_end]
        ranks = att.ranks([plan.cluster.nodes[i].name for i in range(len(plan.cluster.nodes))])
        sj(att.start_ts, state="running", nodes=names, ranks=ranks, exit_code=None, signal=None,
           start_ts=att.start_ts, end_ts=None, reason=None)
        for nm in names:
            out.append((att.start_ts + 5, mk(att.start_ts + 5, "sched.node", src, {"state": "allocated", "reason": None}, node=nm)))
        r = random.Random(plan.seed_for("attlog", job.id, att.n))
        t_init = att.start_ts + att.init_ms // 2
        n0 = plan.cluster.nodes[att.nodes[0]]
        pid0 = r.randrange(20_000, 3_000_000)
        for ts, msg in ((t_init, f"{n0.name}:{pid0}:{pid0} [0] NCCL INFO NCCL version {n0.versions['nccl']}+cuda{n0.versions['cuda']}"),
                        (t_init + 800, f"{M._site()}/torch/_utils.py:831: UserWarning: TypedStorage is deprecated. It will "
                                       "be removed in the future and UntypedStorage will be the only storage class.")):
            out.append((ts, mk(ts, "runtime.log", f"fluentbit@{n0.name}", {"rank": 0, "stream": "stdout" if "NCCL" in msg else "stderr",
                                                                          "message": msg}, node=n0.name, job=job.id, tenant=job.tenant)))
        # benign noise a healthy job prints too
        benign = (
            f"{M._site()}/torch/utils/checkpoint.py:464: UserWarning: torch.utils.checkpoint: the use_reentrant "
            "parameter should be passed explicitly. In version 2.4 we will raise an exception if use_reentrant is "
            "not passed.",
            f"[rank0]:[{M.glog_prefix('W', t_init, r)} ProcessGroupNCCL.cpp:4115] [PG 0 Rank 0]  using GPU 0 to "
            "perform barrier as devices used by this process are currently unknown. This can potentially cause a "
            "hang if this rank to GPU mapping is incorrect.",
            f"{n0.name}:{pid0}:{pid0 + 113} [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE "
            f"[2]mlx5_2:1/RoCE [3]mlx5_3:1/RoCE ; OOB {n0.links[0].netdev}:{n0.links[0].ip}<0>",
        )
        for msg in r.sample(benign, r.randrange(0, len(benign) + 1)):
            ts = t_init + r.randrange(1_000, 60_000)
            out.append((ts, mk(ts, "runtime.log", f"fluentbit@{n0.name}", {"rank": 0, "stream": "stderr", "message": msg},
                               node=n0.name, job=job.id, tenant=job.tenant)))
        leaders = [i * job.gpn for i in range(len(att.nodes))] if job.per_node_progress else [0]
        psrc = f"trainer@{n0.name}"
        for ts, step, st in att.progress:
            for j, rk in enumerate(leaders):
                t2 = ts + j * 3
                nm = names[rk // job.gpn]
                out.append((t2, mk(t2, "runtime.progress", f"trainer@{nm}", {
                    "rank": rk, "step": step, "step_time_s": st,
                    "samples_per_s": round(job.samples_per_step / st, 1)}, node=nm, job=job.id, tenant=job.tenant)))
        for ts, phase, step, dur, nbytes, err in att.ckpts:
            path = f"/ckpt/{job.user}/{job.name}/step_{step:07d}"
            out.append((ts, mk(ts, "runtime.checkpoint", psrc, {
                "phase": phase, "step": step, "path": path, "bytes": nbytes if phase == "succeeded" else None,
                "duration_s": dur, "error": err if phase == "failed" else None}, node=n0.name, job=job.id,
                tenant=job.tenant)))
        out.extend(att.extra)
        if att.end_ts is not None:
            sj(att.end_ts, state=att.end_state, nodes=names, ranks=ranks, exit_code=att.exit_code, signal=att.signal,
               start_ts=att.start_ts, end_ts=att.end_ts, reason=att.reason)
            drains = getattr(plan, "drain_log", [])
            for i, nm in zip(att.nodes, names):
                if any(d[0] == i and att.end_ts - 600_000 <= d[1] <= att.end_ts + 600_000 for d in drains):
                    continue
                out.append((att.end_ts + 50, mk(att.end_ts + 50, "sched.node", src, {"state": "idle", "reason": None}, node=nm)))
        out = [x for x in out if x[0] < t_end]
        out.sort(key=lambda x: x[0])
        return out

    def _discrete(self) -> Iterator[tuple[int, dict]]:
        """Inventory, plan events and job timelines merged in ts order (attempts activated lazily)."""
        plan = self.plan
        atts = sorted((a for a in plan.attempts if a.pending_ts < plan.t_end), key=lambda a: (a.pending_ts, a.job.id, a.n))
        sources: list[tuple[int, object]] = [(plan.t0, lambda: iter(self._inventory())),
                                             (plan.t0, lambda: iter(plan.events))]
        sources += [(a.pending_ts, (lambda a=a: iter(self._attempt_events(a)))) for a in atts]
        sources.sort(key=lambda s: s[0])
        heap: list = []
        cnt = 0
        i = 0
        ns = len(sources)
        while heap or i < ns:
            while i < ns and (not heap or sources[i][0] <= heap[0][0]):
                it = sources[i][1]()
                first = next(it, None)
                if first is not None:
                    heapq.heappush(heap, (first[0], cnt, first[1], it))
                    cnt += 1
                i += 1
            if not heap:
                continue
            ts, _, ev, it = heapq.heappop(heap)
            yield ts, ev
            nxt = next(it, None)
            if nxt is not None:
                heapq.heappush(heap, (nxt[0], cnt, nxt[1], it))
                cnt += 1

    def _batches(self) -> Iterator[list[tuple[int, dict]]]:
        """Everything in ts order, one simulated second per list: that second's telemetry
        plus the discrete events of the second, sorted together (stable, telemetry first)."""
        plan = self.plan
        tel = Telemetry(plan.cluster, node_allocs(plan), plan.ov, plan.t0, plan.t_end, self.seed, self.o.intervals)
        disc = self._discrete()
        pend = next(disc, None)
        key = _ts_key
        for base, batch in tel.batches():
            lim = base + 1000
            while pend is not None and pend[0] < lim:
                batch.append(pend)
                pend = next(disc, None)
            batch.sort(key=key)
            yield batch
        tail = []
        while pend is not None:
            if pend[0] < plan.t_end:
                tail.append(pend)
            pend = next(disc, None)
        yield tail

    # ------------------------------------------------------------ output
    def records(self) -> Iterator[dict]:
        """Contract events as dicts, in ts order (no delivery faults)."""
        counter = 0
        prefix = f"sim-{self.tag}-"
        counts: dict[str, int] = {}
        get = counts.get
        try:
            for batch in self._batches():
                for _, ev in batch:
                    counter += 1
                    ev["id"] = f"{prefix}{counter:010x}"
                    k = ev["kind"]
                    counts[k] = get(k, 0) + 1
                    yield ev
            self.done = True
        finally:
            self.counts.update(counts)

    def lines(self) -> Iterator[bytes]:
        """Encoded JSON lines (no trailing newline), delivery faults applied."""
        d = self.o.delivery
        dumps = orjson.dumps
        if not d.any:
            yield from map(dumps, self.records())
            return
        r = random.Random(self.seed * 31 + 5)
        skew: dict[str, int] = {}
        if d.skew_nodes:
            for n in r.sample(self.plan.cluster.nodes, min(d.skew_nodes, len(self.plan.cluster.nodes))):
                skew[n.name] = int(r.uniform(-1, 1) * d.max_skew_s * 1000) or 1
        self.skew = skew
        held: list = []
        seq = 0
        for ev in self.records():
            ts = ev["ts"]
            while held and held[0][0] <= ts:
                yield heapq.heappop(held)[2]
            if skew and ev.get("node") in skew and ev["kind"] in SKEWABLE:
                ev["ts"] = ts + skew[ev["node"]]
                self.extra_counts["skewed"] += 1
            b = dumps(ev)
            if d.out_of_order and r.random() < d.out_of_order:
                seq += 1
                heapq.heappush(held, (ts + int(r.uniform(0.2, d.max_delay_s) * 1000), seq, b))
                self.extra_counts["delayed"] += 1
            else:
                yield b
            if d.duplicates and r.random() < d.duplicates:
                seq += 1
                heapq.heappush(held, (ts + int(r.uniform(0.0, d.max_delay_s) * 1000), seq, b))
                self.extra_counts["duplicates"] += 1
            if d.malformed and r.random() < d.malformed:
                self.extra_counts["malformed"] += 1
                yield _malformed(r, ev)
        while held:
            yield heapq.heappop(held)[2]

    def labels(self) -> dict:
        """Ground truth. ``counts`` are filled once the stream was fully consumed."""
        plan = self.plan
        lab = build_labels(plan)
        out = {
            "scenario": self.sc.name, "seed": self.seed, "start_ts": plan.t0, "end_ts": plan.t_end,
            "nodes": self.n_nodes, "gpus_per_node": self.gpn, "hours": self.hours,
            "stall_threshold_s": STALL_THRESHOLD_S,
            "interruptions": lab["interruptions"], "healthy": lab["healthy"],
            "fleet": plan.fleet, "decoys": plan.decoys, "changes": plan.changes,
            "counts": None,
        }
        if self.done:
            out["counts"] = {"events": dict(sorted(self.counts.items())), "total": sum(self.counts.values()),
                             "malformed": self.extra_counts["malformed"],
                             "duplicates": self.extra_counts["duplicates"],
                             "delayed": self.extra_counts["delayed"], "skewed": self.extra_counts["skewed"]}
            if getattr(self, "skew", None):
                out["clock_skew_ms"] = self.skew
        return out


def _ts_key(x: tuple[int, dict]) -> int:
    return x[0]


def _malformed(r: random.Random, ev: dict) -> bytes:
    k = r.randrange(5)
    if k == 0:
        return orjson.dumps(ev)[: r.randrange(10, 60)]                          # truncated
    if k == 1:
        bad = {x: y for x, y in ev.items() if x != "ts"}
        return orjson.dumps(bad)                                                 # missing ts
    if k == 2:
        bad = dict(ev)
        bad["kind"] = "gpu.sampel"
        return orjson.dumps(bad)                                                 # unknown kind
    if k == 3:
        bad = dict(ev)
        bad["ts"] = str(ev["ts"])
        return orjson.dumps(bad)                                                 # wrong type
    return b"\x00\xff not json at all"
