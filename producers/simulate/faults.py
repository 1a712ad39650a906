"""The fault library: one function per fault type, each giving the cross-layer signature the
failure has in real clusters and the ground-truth label of the interruption it causes.

A fault function is ``fn(scheduler, spec, ts) -> bool`` (False: nothing suitable was
running, try later). It picks a victim attempt (and a culprit component, at random), sets
the attempt's modifiers (where progress halts, how it ends), adds overlays to the
background telemetry, adds discrete events (XIDs, SEL entries, link traps, kernel and
framework log lines, scheduler node states) and labels the attempt.

Hard cases built in: the first rank to report is never the culprit (watchdog timeouts on
every surviving rank), stragglers slow the whole job, storage slows without unmounting,
version changes break several jobs, user errors leave every layer clean, and decoys
(benign XIDs after an application error, alarms on nodes outside the job).
"""

from __future__ import annotations

from typing import Any

from . import messages as M
from .jobs import MS, Attempt
from .overlays import INF
from .plan import FaultSpec, Plan, Scheduler, mk

MIN = 60_000


# ------------------------------------------------------------------ small builders
def rlog(plan: Plan, att: Attempt, ts: int, node: int | None, rank: int | None, stream: str, msg: str) -> None:
    name = plan.name(node) if node is not None else None
    src = f"fluentbit@{name}" if name else "slurm@ctl-1"
    att.extra.append((ts, mk(ts, "runtime.log", src, {"rank": rank, "stream": stream, "message": msg},
                             node=name, job=att.job.id, tenant=att.job.tenant)))


def xid_event(plan: Plan, node: int, gpu: int, code: int, ts: int, pid: int | None, att: Attempt | None,
              rank: int | None = None) -> None:
    n = plan.cluster.nodes[node]
    pci = n.gpu_pci[gpu]
    line = M.xid(pci, code, pid, M.xid_detail(code, plan.rng))
    plan.add(ts, mk(ts, "gpu.xid", f"kmsg@{n.name}", {"gpu": gpu, "pci": pci, "xid": code, "pid": pid,
                                                     "message": line}, node=n.name))
    if att is not None:
        rlog(plan, att, ts + 3, node, rank, "kernel", line)


def sched_node(plan: Plan, node: int, ts: int, state: str, reason: str | None) -> None:
    plan.add(ts, mk(ts, "sched.node", "slurm@ctl-1", {"state": state, "reason": reason}, node=plan.name(node)))


def drain(sch: Scheduler, node: int, ts: int, reason: str, repair_ms: int | None = None, state: str = "drain",
          reboot: bool = True) -> int:
    """Take ``node`` out of service at ``ts``; back (rebooted, counters reset) after ``repair_ms``.
    Returns the ts the node is back (INF when never)."""
    plan = sch.plan
    until = ts + repair_ms if repair_ms else INF
    plan.drained[node] = until
    if not hasattr(plan, "drain_log"):
        plan.drain_log = []
    plan.drain_log.append((node, ts, until))
    if node in sch.free:
        sch.free.remove(node)
    sched_node(plan, node, ts, state, reason)
    if repair_ms:
        rts = ts + repair_ms
        if reboot:
            plan.ov.reboots[node].append(rts - 4 * MIN)
            plan.ov.reboots[node].sort()
            plan.ov.add_node(node, rts - 9 * MIN, rts - 4 * MIN, down=True)
        sched_node(plan, node, rts, "idle", None)
        sch.push(rts, "repair", node)
        return rts
    return INF


def pids(plan: Plan, att: Attempt) -> list[int]:
    r = plan.sub_rng("pids", att.job.id, att.n)
    base = [r.randrange(20_000, 3_000_000) for _ in att.nodes]
    return [base[i // att.job.gpn] + 7 + (i % att.job.gpn) for i in range(len(att.nodes) * att.job.gpn)]


def _seq_of(att: Attempt, t: int) -> int:
    p = att.last_progress_before(t)
    step = p[1] if p else 0
    return 40 + step * 6 + 3


def pick(plan: Plan, t: int, *, min_nodes: int = 1, max_nodes: int = 10**6, min_age_ms: int = 6 * MIN,
         node: int | None = None, segment: str | None = None, exclude_faulted: bool = True,
         needs_ckpt_before_end: bool = False, min_left_ms: int | None = None) -> Attempt | None:
    cands = []
    for a in plan.running_at(t):
        if exclude_faulted and a.fault is not None:
            continue
        if a.start_ts + a.init_ms + min_age_ms > t or not (min_nodes <= len(a.nodes) <= max_nodes):
            continue
        if node is not None and node not in a.nodes:
            continue
        if segment is not None and not any(plan.cluster.nodes[i].links[0].switch.split("-")[0] == segment.split("-")[0]
                                           for i in a.nodes):
            continue
        if a.halt_ts is not None or a.stalled_ts is not None:
            continue
        left = min_left_ms if min_left_ms is not None else a.job.watchdog_ms + 5 * MIN
        if a.end_ts is not None and a.end_ts < t + left:
            continue  # about to end anyway: the fault's failure would not be what stops it
        cands.append(a)
    if not cands:
        return None
    return plan.rng.choice(cands)


def label(att: Attempt, category: str, component: str, fault: str, summary: str) -> None:
    att.label = {"category": category, "component": component, "fault": fault, "summary": summary}


def precursor(att: Attempt, sign: str, ts: int) -> None:
    """The fault shows itself in telemetry from ``ts`` on, before the job fails (``sign``
    says how): the label's ``precursor`` (``bench/precursors.py`` measures the lead time)."""
    att.precursor = {"sign": sign, "ts": ts}


# ------------------------------------------------------------------ failure cascades
def cascade_hang(sch: Scheduler, att: Attempt, t: int, dead_ranks: set[int], *, extra_delay_ms: int = 0) -> int:
    """Every surviving rank blocks in a collective; each watchdog fires after Timeout(ms)
    and takes its process down. Returns the end ts."""
    plan = sch.plan
    r = plan.rng
    job = att.job
    seq = _seq_of(att, t)
    op = r.choice(M.OPS)
    numel = r.choice((1, 2048, 16_777_216, 466_119_168, 544_997_376))
    tw = t + job.watchdog_ms + extra_delay_ms + r.randrange(200, 4000)
    pid = pids(plan, att)
    nranks = len(att.nodes) * job.gpn
    first_by_node: dict[int, tuple[int, int]] = {}
    for rank in range(nranks):
        if rank in dead_ranks:
            continue
        ts = tw + r.randrange(0, 1500)
        ran = job.watchdog_ms + (ts - tw) + r.randrange(4, 120)
        node = att.nodes[rank // job.gpn]
        rlog(plan, att, ts, node, rank, "stderr", M.nccl_watchdog_block(rank, ts, seq, op, numel, job.watchdog_ms, ran, r))
        if node not in first_by_node or first_by_node[node][0] > ts:
            first_by_node[node] = (ts, rank)
    end = tw + r.randrange(6_000, 15_000)
    for pos, node in enumerate(att.nodes):
        if node not in first_by_node:
            continue
        ts0, rank0 = first_by_node[node]
        lr = rank0 % job.gpn
        rlog(plan, att, ts0 + 1200, node, None, "stderr", M.elastic_failed_line(ts0 + 1200, -6, lr, pid[rank0]))
        rlog(plan, att, ts0 + 1400, node, None, "stderr",
             M.elastic_child_failed("train.py", ts0 + 1200, plan.name(node), rank0, lr, -6, pid[rank0]))
        if pos == 0 or r.random() < 0.3:
            rlog(plan, att, end - 800, None, None, "stderr", M.srun_exit(plan.name(node), rank0, 1))
    att.halt_ts = t
    att.forced_end = (end, "failed", 1, None, "NonZeroExitCode")
    return end


def cascade_fast(sch: Scheduler, att: Attempt, t: int, culprit_rank: int, block: str | None, *,
                 exitcode: int = 1, state: str = "failed", job_exit: int | None = 1, signal: int | None = None,
                 reason: str | None = "NonZeroExitCode", remote_errors: bool = True) -> int:
    """One rank dies at ``t``; torchrun tears its node down, srun kills the other tasks."""
    plan = sch.plan
    r = plan.rng
    job = att.job
    pid = pids(plan, att)
    cnode = att.nodes[culprit_rank // job.gpn]
    lr = culprit_rank % job.gpn
    if block:
        if r.random() < 0.5:  # torchrun --log-line-prefix / PyTorch >= 2.2 prefixes every stderr line
            block = "\n".join(f"[rank{culprit_rank}]: {ln}" for ln in block.split("\n"))
        rlog(plan, att, t, cnode, culprit_rank, "stderr", block)
    ta = t + r.randrange(800, 3000)
    for other in range(job.gpn):
        orank = (culprit_rank // job.gpn) * job.gpn + other
        if orank != culprit_rank and r.random() < 0.4:
            rlog(plan, att, ta, cnode, None, "stderr", M.elastic_sigterm_line(ta, pid[orank]))
    rlog(plan, att, ta + 300, cnode, None, "stderr", M.elastic_failed_line(ta + 300, exitcode, lr, pid[culprit_rank]))
    rlog(plan, att, ta + 500, cnode, None, "stderr",
         M.elastic_child_failed("train.py", ta, plan.name(cnode), culprit_rank, lr, exitcode, pid[culprit_rank]))
    end = ta + r.randrange(3_000, 15_000)
    nranks = len(att.nodes) * job.gpn
    if remote_errors and len(att.nodes) > 1:
        others = [x for x in range(nranks) if x // job.gpn != culprit_rank // job.gpn]
        for rk in r.sample(others, min(len(others), r.randrange(1, 9))):
            ts = t + r.randrange(500, 6000)
            rlog(plan, att, ts, att.nodes[rk // job.gpn], rk, "stderr", M.nccl_remote_error(rk, ts, r))
    rlog(plan, att, end - 1500, None, None, "stderr", M.srun_exit(plan.name(cnode), culprit_rank, 1))
    if len(att.nodes) > 1:
        rlog(plan, att, end - 1000, None, None, "stderr",
             f"srun: error: {plan.name(att.nodes[0])}: tasks 0-{job.gpn - 1}: Terminated")
    att.halt_ts = t
    att.halt_phase = "dead"
    att.forced_end = (end, state, job_exit, signal, reason)
    return end


def finish(sch: Scheduler, att: Attempt, spec: FaultSpec) -> None:
    att.fault = spec.kind
    sch.plan.rebuild(att)
    sch.reschedule(att)


def _culprit_gpu(plan: Plan, att: Attempt, spec: FaultSpec) -> tuple[int, int, int]:
    r = plan.rng
    node = spec.params.get("node")
    if node is None or node not in att.nodes:
        node = r.choice(att.nodes)
    gpu = r.randrange(att.job.gpn)
    return node, gpu, att.rank_of(node, gpu)


# ------------------------------------------------------------------ gpu_hardware
def f_gpu_xid79(sch: Scheduler, spec: FaultSpec, t: int) -> bool:
    plan = sch.plan
    r = plan.rng
    att = pick(plan, t, node=spec.params.get("node"))
    if att is None:
        return False
    node, gpu, crank = _culprit_gpu(plan, att, spec)
    if spec.params.get("precursor") or r.random() < 0.5:  # PCIe replays often climb before a GPU drops off the bus
        pre = t - r.randrange(8, 30) * MIN
        plan.ov.add_gpu(node, gpu, pre, t, pcie_rate=(0.01, 2.0))
        precursor(att, "pcie_replay", pre)
    pid = pids(plan, att)
    n = plan.cluster.nodes[node]
    if r.random() < 0.4:  # PCIe AER fatal error from the root port just before the GPU drops
        bdf = n.gpu_pci[gpu] + ".0"
        rlog(plan, att, t - r.randrange(50, 900), node, crank, "kernel",
             f"pcieport 0000:{int(n.gpu_pci[gpu][5:7], 16) - 1:02x}:00.0: AER: Uncorrected (Fatal) error received: {bdf}")
        rlog(plan, att, t - r.randrange(10, 40), node, crank, "kernel",
             f"nvidia {bdf}: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Receiver ID)")
    xid_event(plan, node, gpu, 79, t, pid[crank], att, crank)
    rlog(plan, att, t + 5, node, crank, "kernel", f"NVRM: GPU at PCI:{n.gpu_pci[gpu]}: {n.gpu_uuid[gpu]}")
    rlog(plan, att, t + 6, node, crank, "kernel", f"NVRM: GPU Board Serial Number: {n.serial}{gpu}")
    if r.random() < 0.65:
        end = cascade_hang(sch, att, t, {crank})
        back = drain(sch, node, end + r.randrange(5_000, 60_000), f"NHC: nv_health: GPU {gpu} Xid 79 fallen off the bus",
                     r.randrange(60, 180) * MIN)
    else:  # the node wedges; slurmctld marks it down and fails the job
        down = t + r.randrange(60_000, 300_000)
        sched_node(plan, node, down, "down", "Not responding")
        end = down + r.randrange(1000, 5000)
        att.halt_ts = t
        att.forced_end = (end, "node_fail", None, None, "NodeFail")
        rlog(plan, att, end - 500, None, None, "stderr", M.srun_node_fail(plan.name(node)))
        rlog(plan, att, end - 200, None, None, "stderr", M.slurm_cancelled(att.job.id, plan.name(att.nodes[0]), end,
                                                                            "DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS"))
        plan.drained[node] = INF
        back = drain(sch, node, end + 2000, "Not responding", r.randrange(60, 200) * MIN, state="down")
    plan.ov.add_gpu(node, gpu, t, back - 4 * MIN, gone=True)
    label(att, "gpu_hardware", f"gpu:{plan.name(node)}/{gpu}", "gpu_xid79",
          f"GPU {gpu} on {plan.name(node)} fell off the bus (Xid 79)")
    finish(sch, att, spec)
    return True


def f_gpu_ecc(sch: Scheduler, spec: FaultSpec, t: int) -> bool:
    plan = sch.plan
    r = plan.rng
    att = pick(plan, t, node=spec.params.get("node"))
    if att is None:
        return False
    node, gpu, crank = _culprit_gpu(plan, att, spec)
    code = spec.params.get("xid") or r.choice((48, 48, 94, 95, 64))
    pid = pids(plan, att)
    pre = t - r.randrange(10, 40) * MIN
    plan.ov.add_gpu(node, gpu, pre, t, sbe_rate=r.uniform(0.05, 0.5))
    if r.random() < 0.5:
        xid_event(plan, node, gpu, 92, pre + r.randrange(1, 8) * MIN, None, None)
    dbe = r.randrange(1, 4)
    if code == 64:
        xid_event(plan, node, gpu, 63, t - 2000, pid[crank], att, crank)
    xid_event(plan, node, gpu, code, t, pid[crank], att, crank)
    err = "uncorrectable ECC error encountered"
    block = M.traceback(M.train_frames(r) + [("/workspace/trainer.py", r.randrange(120, 200), "training_step",
                                               "loss.backward()")], M.cuda_error_block(err))
    end = cascade_fast(sch, att, t + r.randrange(50, 900), crank, block)
    if code in (48, 95, 64):
        for g2 in range(att.job.gpn):  # sympathetic Xid 45: channels of other processes torn down
            if g2 != gpu and r.random() < 0.3:
                xid_event(plan, node, g2, 45, t + r.randrange(1000, 4000), pid[att.rank_of(node, g2)], None)
    back = drain(sch, node, end + r.randrange(5_000, 120_000), f"NHC: GPU {gpu} ECC DBE / row remap pending",
                 r.randrange(40, 120) * MIN)
    plan.ov.add_gpu(node, gpu, t, back - 4 * MIN, dbe=dbe, remap=1)
    plan.ov.add_gpu(node, gpu, back - 4 * MIN, INF, dbe=dbe)
    label(att, "gpu_hardware", f"gpu:{plan.name(node)}/{gpu}", "gpu_ecc",
          f"uncorrectable memory error on GPU {gpu} of {plan.name(node)} (Xid {code})")
    finish(sch, att, spec)
    return True


# ------------------------------------------------------------------ gpu_nvlink
def f_gpu_nvlink(sch: Scheduler, spec: FaultSpec, t: int) -> bool:
    plan = sch.plan
    r = plan.rng
    att = pick(plan, t, node=spec.params.get("node"))
    if att is None:
        return False
    node, gpu, crank = _culprit_gpu(plan, att, spec)
    pre = t - r.randrange(5, 25) * MIN
    plan.ov.add_gpu(node, gpu, pre, t + 3600 * MS, nvl_rate=(0.05, r.uniform(3, 40)))
    precursor(att, "nvlink_errors", pre)
    pid = pids(plan, att)
    xid_event(plan, node, gpu, 74, t, pid[crank], att, crank)
    if r.random() < 0.5:
        block = M.traceback(M.train_frames(r) + [(f"{M._site()}/torch/distributed/distributed_c10d.py", 2288,
                                                   "all_reduce", "work = group.allreduce([tensor], opts)")],
                            M.cuda_error_block("uncorrectable NVLink error detected during the execution"))
        end = cascade_fast(sch, att, t + r.randrange(100, 2000), crank, block)
    else:
        end = cascade_hang(sch, att, t, {crank})
    drain(sch, node, end + r.randrange(5_000, 90_000), f"NHC: GPU {gpu} NVLink errors (Xid 74)",
          r.randrange(60, 150) * MIN)
    label(att, "gpu_nvlink", f"gpu:{plan.name(node)}/{gpu}", "gpu_nvlink",
          f"NVLink fatal error on GPU {gpu} of {plan.name(node)} (Xid 74)")
    finish(sch, att, spec)
    return True


# ------------------------------------------------------------------ node_hardware
_NODE_HW = (
    ("psu", "Power Supply", "OpenBMC.0.1.PowerSupplyFailed", "Power Supply {p} failed; input lost. System power redundancy lost."),
    ("mem", "Memory", "OpenBMC.0.1.MemoryECCUncorrectable", "Memory uncorrectable ECC error detected on DIMM_{d}; system reset."),
    ("cpu", "Processor", "OpenBMC.0.1.CPUError", "CPU{c} internal error (IERR) asserted."),
    ("fan", "Fan", "OpenBMC.0.1.FanFailed", "Fan FAN1 failed; reading 0 RPM below lower critical threshold."),
)


def f_node_hw(sch: Scheduler, spec: FaultSpec, t: int) -> bool:
    plan = sch.plan
    r = plan.rng
    att = pick(plan, t, node=spec.params.get("node"), min_nodes=spec.params.get("min_nodes", 1))
    if att is None:
        return False
    node = spec.params.get("node") if spec.params.get("node") in att.nodes else r.choice(att.nodes)
    variant = spec.params.get("variant") or r.choice(("psu", "mem", "cpu", "fan"))
    _, st, mid, msg = next(v for v in _NODE_HW if v[0] == variant)
    msg = msg.format(p=r.randrange(1, 7), d=f"{'ABCDEFGH'[r.randrange(8)]}{r.randrange(1, 5)}", c=r.randrange(2))
    n = plan.cluster.nodes[node]
    src = f"redfish@{n.bmc}"
    if variant == "fan":
        plan.ov.add_node(node, t - 12 * MIN, t + 20 * MIN, sensors={"FAN1": (0.0, "critical"),
                                                                 "Exhaust Temp": ((52.0, 78.0), "critical")})
    elif variant == "psu":
        plan.ov.add_node(node, t - 3 * MIN, t, sensors={"P12V": ((12.0, 10.9), "warning")})
    if variant == "mem" and r.random() < 0.7:
        plan.add(t - 9 * MIN, mk(t - 9 * MIN, "hw.sel", src, {"entry_id": str(r.randrange(100, 9000)), "severity": "warning",
                                                           "sensor_type": "Memory", "message_id": "OpenBMC.0.1.MemoryECCCorrectable",
                                                           "message": f"Memory correctable ECC errors above threshold on DIMM_{msg.split('DIMM_')[1][:2]}"}, node=n.name))
    plan.add(t, mk(t, "hw.sel", src, {"entry_id": str(r.randrange(100, 9000)), "severity": "critical", "sensor_type": st,
                                      "message_id": mid, "message": msg}, node=n.name))
    down_from = t + r.randrange(2_000, 30_000)
    end = down_from + r.randrange(200_000, 320_000)
    repair_ms = r.randrange(120, 300) * MIN
    back = end + 3000 + repair_ms - 4 * MIN  # power restored / rebooted
    # the node is gone: host telemetry stops, its switch ports lose link until it is back
    plan.ov.add_node(node, down_from, back, down=True)
    for k, lk in enumerate(n.links):
        pi = plan.cluster.port_index[(lk.switch, lk.port)]
        plan.ov.add_port(pi, down_from, back, down=True)
        ts = down_from + r.randrange(50, 900)
        plan.add(ts, mk(ts, "net.link", f"snmp@{lk.switch}", {"device": lk.switch, "port": lk.port, "state": "down"},
                        node=n.name))
        ts = back + r.randrange(30_000, 90_000)
        plan.add(ts, mk(ts, "net.link", f"snmp@{lk.switch}", {"device": lk.switch, "port": lk.port, "state": "up"},
                        node=n.name))
    for rk in r.sample(range(len(att.nodes) * att.job.gpn), min(6, len(att.nodes) * att.job.gpn)):
        if att.nodes[rk // att.job.gpn] == node:
            continue
        ts = down_from + r.randrange(8_000, 40_000)
        lk = n.links[rk % len(n.links)]
        me = plan.cluster.nodes[att.nodes[rk // att.job.gpn]]
        rlog(plan, att, ts, att.nodes[rk // att.job.gpn], rk, "stderr",
             M.nccl_ib_completion_error(me.name, pids(plan, att)[rk], pids(plan, att)[rk] + 900, rk % att.job.gpn, lk.ip,
                                        me.links[rk % len(me.links)].ip, lk.ip, r))
    sched_node(plan, node, down_from + r.randrange(60_000, 200_000), "down", "Not responding")
    rlog(plan, att, end - 500, None, None, "stderr", M.srun_node_fail(n.name))
    rlog(plan, att, end - 200, None, None, "stderr", M.slurm_cancelled(att.job.id, plan.name(att.nodes[0]), end,
                                                                        "DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS"))
    att.halt_ts = down_from
    att.forced_end = (end, "node_fail", None, None, "NodeFail")
    plan.drained[node] = INF
    drain(sch, node, end + 3000, f"{st} failure: {msg[:60]}", repair_ms, state="down", reboot=False)
    plan.ov.reboots[node].append(back)
    plan.ov.reboots[node].sort()
    label(att, "node_hardware", f"node:{n.name}", f"node_{variant}", f"{n.name}: {msg}")
    finish(sch, att, spec)
    return True


# ------------------------------------------------------------------ thermal_throttle / scheduler time limit
def _set_deadline(plan: Plan, att: Attempt, t: int, slowdown: float) -> None:
    """Re-plan the job so its natural completion lands inside the window and the given
    slowdown (1.0 = none) makes it overrun its time limit."""
    r = plan.rng
    job = att.job
    p = att.last_progress_before(t)
    step_now = p[1] if p else 0
    remain_ms = int((plan.t_end - t) * r.uniform(0.3, 0.5))
    job.total_steps = step_now + max(job.hb_steps * 2, int(remain_ms / MS / job.step_time))
    ck_time = (job.total_steps // job.ckpt_every) * job.ckpt_bytes / 6e9
    natural = (t - att.start_ts) + remain_ms + int(ck_time * MS)
    if slowdown > 1.0:
        job.time_limit_s = int(natural * r.uniform(1.08, 1.15) / MS)
    else:
        job.time_limit_s = int(natural * r.uniform(0.8, 0.9) / MS)
    job.time_limit_s = (job.time_limit_s // 60) * 60


def f_thermal(sch: Scheduler, spec: FaultSpec, t: int) -> bool:
    plan = sch.plan
    r = plan.rng
    att = pick(plan, t, min_age_ms=10 * MIN)
    if att is None or att.job.user_cancel_after_s:
        return False
    node, gpu, _ = _culprit_gpu(plan, att, spec)
    ramp_ms = r.randrange(5, 15) * MIN
    slow = r.uniform(1.5, 2.2)
    saved = (att.job.total_steps, att.job.time_limit_s)
    _set_deadline(plan, att, t, slow)
    plan.ov.add_gpu(node, gpu, t, t + 8 * 3600 * MS, temp=(72.0, r.uniform(88, 93)), clock=(1980, r.randrange(1050, 1350)),
                    throttle=r.choice((["hw_thermal", "sw_thermal"], ["hw_slowdown", "hw_thermal"], ["sw_thermal"])))
    if r.random() < 0.6:  # a failing fan is the usual reason one GPU cooks
        plan.ov.add_node(node, t - 5 * MIN, t + 8 * 3600 * MS, sensors={"FAN4": ((5200.0, 2100.0), "warning")})
    att.slow = [(t + ramp_ms // 2, slow)]
    att.fault = spec.kind
    plan.rebuild(att)
    if att.end_state != "timeout":
        att.slow = []
        att.job.total_steps, att.job.time_limit_s = saved
        plan.rebuild(att)
        att.fault = None
        plan.ov.gpu[(node, gpu)].pop()
        if plan.ov.node.get(node) and plan.ov.node[node][-1][2].get("sensors", {}).get("FAN4"):
            plan.ov.node[node].pop()
        return False
    end = att.end_ts
    rlog(plan, att, end - 300, None, None, "stderr",
         M.slurm_cancelled(att.job.id, plan.name(att.nodes[0]), end, "DUE TO TIME LIMIT"))
    precursor(att, "thermal_throttle", t)
    label(att, "thermal_throttle", f"gpu:{plan.name(node)}/{gpu}", "thermal",
          f"GPU {gpu} of {plan.name(node)} thermally throttled (straggler); job hit its time limit")
    sch.reschedule(att)
    return True


def f_sched_timelimit(sch: Scheduler, spec: FaultSpec, t: int) -> bool:
    plan = sch.plan
    att = pick(plan, t, min_age_ms=10 * MIN)
    if att is None or att.job.user_cancel_after_s:
        return False
    saved = (att.job.total_steps, att.job.time_limit_s)
    _set_deadline(plan, att, t, 1.0)
    att.fault = spec.kind
    plan.rebuild(att)
    if att.end_state != "timeout":
        att.job.total_steps, att.job.time_limit_s = saved
        plan.rebuild(att)
        att.fault = None
        return False
    end = att.end_ts
    rlog(plan, att, end - 300, None, None, "stderr",
         M.slurm_cancelled(att.job.id, plan.name(att.nodes[0]), end, "DUE TO TIME LIMIT"))
    label(att, "scheduler", f"job:{att.job.id}", "time_limit", "job reached its time limit (limit too short)")
    sch.reschedule(att)
    return True


def f_preempt(sch: Scheduler, spec: FaultSpec, t: int) -> bool:
    plan = sch.plan
    r = plan.rng
    att = pick(plan, t)
    if att is None:
        return False
    end = t + r.randrange(2_000, 30_000)
    rlog(plan, att, end - 200, None, None, "stderr",
         M.slurm_cancelled(att.job.id, plan.name(att.nodes[0]), end, "DUE TO PREEMPTION"))
    att.halt_ts = end - 1000
    att.halt_phase = "dead"
    att.forced_end = (end, "preempted", 0, 15, "Preempted")
    att.retry_delay_ms = r.randrange(10, 40) * MIN
    label(att, "scheduler", f"job:{att.job.id}", "preempted", "preempted by a higher-priority job")
    finish(sch, att, spec)
    return True


# ------------------------------------------------------------------ network
def _port_of(plan: Plan, node: int, k: int) -> tuple[int, Any]:
    lk = plan.cluster.nodes[node].links[k]
    return plan.cluster.port_index[(lk.switch, lk.port)], lk


def link_flap(plan: Plan, node: int, k: int, t: int, down_ms: int, att: Attempt | None) -> None:
    pi, lk = _port_of(plan, node, k)
    n = plan.cluster.nodes[node]
    plan.ov.add_port(pi, t, t + down_ms, down=True)
    plan.add(t, mk(t, "net.link", f"snmp@{lk.switch}", {"device": lk.switch, "port": lk.port, "state": "down"}, node=n.name))
    plan.add(t + down_ms, mk(t + down_ms, "net.link", f"snmp@{lk.switch}", {"device": lk.switch, "port": lk.port, "state": "up"},
                             node=n.name))
    plan.ov.add_rdma(node, k, t, t + 2 * MIN, bump={"link_downed": 1, "link_error_recovery": 1})
    if att is not None:
        rlog(plan, att, t + 40, node, None, "kernel", M.mlx5_link(lk.pci, lk.netdev, False))
        rlog(plan, att, t + down_ms + 40, node, None, "kernel", M.mlx5_link(lk.pci, lk.netdev, True))


def f_port_down(sch: Scheduler, spec: FaultSpec, t: int) -> bool:
    plan = sch.plan
    r = plan.rng
    pin = spec.params.get("port")  # "FLAP": the same port every time (flapping-port scenario)
    if pin == "FLAP":
        pin = getattr(plan, "flap_pin", None)
    att = pick(plan, t, min_nodes=2, node=pin[0] if pin else None)
    if att is None:
        return False
    node, k = pin if pin else (r.choice(att.nodes), r.randrange(plan.cluster.nics_per_node))
    if spec.params.get("port") == "FLAP" and pin is None:
        plan.flap_pin = (node, k)
        lk0 = plan.cluster.nodes[node].links[k]
        plan.fleet_add("flapping_ports", f"{lk0.switch}/{lk0.port}")
    pi, lk = _port_of(plan, node, k)
    n = plan.cluster.nodes[node]
    if pin is None and (spec.params.get("precursor") or r.random() < 0.6):  # a dying optic: symbol errors climb first
        pre = t - r.randrange(10, 40) * MIN
        precursor(att, "symbol_errors", pre)
        plan.ov.add_port(pi, pre, t + 30 * MIN, in_err_rate=(0.05, r.uniform(5, 60)))
        plan.ov.add_rdma(node, k, pre, t + 30 * MIN, rates={"symbol_error": (0.1, r.uniform(20, 200)),
                                                            "port_rcv_errors": (0.0, r.uniform(1, 10))})
    n_flaps = r.randrange(1, 4)
    ft = t
    for i in range(n_flaps):
        dms = r.randrange(3_000, 25_000) if i < n_flaps - 1 or r.random() < 0.5 else r.randrange(10, 40) * MIN
        link_flap(plan, node, k, ft, dms, att)
        ft += dms + r.randrange(10_000, 60_000)
    job = att.job
    pid = pids(plan, att)
    ranks_here = [att.rank_of(node, g) for g in range(job.gpn)]
    peers = [x for x in range(len(att.nodes) * job.gpn) if x not in ranks_here]
    for rk in r.sample(ranks_here, min(len(ranks_here), r.randrange(1, 4))) + \
            (r.sample(peers, min(len(peers), r.randrange(1, 5))) if peers else []):
        me = plan.cluster.nodes[att.nodes[rk // job.gpn]]
        other_ip = lk.ip if me.idx != node else plan.cluster.nodes[att.nodes[0 if att.nodes[0] != node else -1]].links[k].ip
        ts = t + r.randrange(4_000, 30_000)
        rlog(plan, att, ts, me.idx, rk, "stderr", M.nccl_ib_completion_error(
            me.name, pid[rk], pid[rk] + 811, rk % job.gpn, other_ip, me.links[k].ip, other_ip, r))
    if r.random() < 0.5 and len(att.nodes) > 1:
        culprit = r.choice(ranks_here)
        ts = t + r.randrange(20_000, 60_000)
        end = cascade_fast(sch, att, ts, culprit, M.nccl_remote_error(culprit, ts, r).split("\n", 1)[1],
                           exitcode=-6, remote_errors=True)
    else:
        end = cascade_hang(sch, att, t, set())
    label(att, "network_link", f"port:{lk.switch}/{lk.port}", "port_down",
          f"link {lk.switch}/{lk.port} ({n.name} {lk.nic}) went down")
    finish(sch, att, spec)
    del end
    return True


def f_congestion(sch: Scheduler, spec: FaultSpec, t: int) -> bool:
    plan = sch.plan
    r = plan.rng
    att = pick(plan, t, min_nodes=2, min_age_ms=8 * MIN)
    if att is None:
        return False
    c = plan.cluster
    k = r.randrange(c.nics_per_node)
    leaf = c.nodes[att.nodes[0]].links[k].switch
    dur = min(r.randrange(15, 35) * MIN, plan.t_end - t - 20 * MIN)
    if dur < 8 * MIN:
        return False
    t_fail = t + dur
    for pi, p in enumerate(c.ports):
        if p.switch != leaf:
            continue
        plan.ov.add_port(pi, t, t_fail + 20 * MIN, out_disc_rate=(50.0, r.uniform(2_000, 20_000)))
        if p.node is not None:
            plan.ov.add_rdma(p.node, k, t, t_fail + 20 * MIN, rates={
                "np_ecn_marked_roce_packets": (2_000.0, r.uniform(40_000, 150_000)),
                "np_cnp_sent": (2_000.0, r.uniform(40_000, 150_000)),
                "rp_cnp_handled": (2_000.0, r.uniform(30_000, 120_000)),
                "out_of_sequence": (1.0, r.uniform(50, 400)), "packet_seq_err": (0.5, r.uniform(20, 200)),
                "local_ack_timeout_err": (0.0, r.uniform(1, 30))})
    att.slow = [(t + 3 * MIN, r.uniform(1.4, 2.5))]
    job = att.job
    pid = pids(plan, att)
    victims = r.sample(range(len(att.nodes) * job.gpn), min(len(att.nodes) * job.gpn, r.randrange(2, 7)))
    for rk in victims:
        me = c.nodes[att.nodes[rk // job.gpn]]
        peer = c.nodes[r.choice([x for x in att.nodes if x != me.idx])]
        ts = t_fail + r.randrange(0, 8_000)
        rlog(plan, att, ts, me.idx, rk, "stderr", M.nccl_ib_completion_error(
            me.name, pid[rk], pid[rk] + 811, rk % job.gpn, peer.links[k].ip, me.links[k].ip, peer.links[k].ip, r))
    if r.random() < 0.5:
        end = cascade_fast(sch, att, t_fail + 9_000, victims[0],
                           M.nccl_remote_error(victims[0], t_fail + 9_000, r).split("\n", 1)[1], exitcode=-6)
    else:
        end = cascade_hang(sch, att, t_fail, set())
    precursor(att, "cnp_ecn_discards", t)
    label(att, "network_congestion", f"segment:{leaf}", "congestion",
          f"RoCE congestion on {leaf}: CNP/ECN storm, retransmits, discards; transport retry exceeded")
    finish(sch, att, spec)
    del end
    return True


# ------------------------------------------------------------------ storage
def _mount(plan: Plan, path: str):
    return next(m for m in plan.cluster.mounts if m.path == path)


def mount_events(plan: Plan, path: str, nodes, t: int, state: str, error: str | None, spread_ms: int = 20_000) -> None:
    """The mount watcher on each node reports a state change within seconds."""
    r = plan.rng
    for i in sorted(nodes):
        ts = t + r.randrange(500, spread_ms)
        plan.add(ts, mk(ts, "storage.mount", f"node_exporter@{plan.name(i)}", {"path": path, "state": state, "error": error},
                        node=plan.name(i)))


def f_storage_slow(sch: Scheduler, spec: FaultSpec, t: int) -> bool:
    plan = sch.plan
    r = plan.rng
    path = spec.params.get("path") or ("/datasets" if r.random() < 0.35 else "/ckpt")
    att = pick(plan, t, min_age_ms=4 * MIN, min_left_ms=45 * MIN if path == "/datasets" else 5 * MIN)
    if att is None:
        return False
    if path == "/datasets":
        return _datasets_slow(sch, spec, t, att)
    m = _mount(plan, path)
    ramp = spec.params.get("ramp_ms") or r.randrange(10, 30) * MIN
    peak = spec.params.get("peak") or r.uniform(80, 400)
    t_slow = t - ramp
    att.ckpt_hang_after = t
    att.fault = spec.kind
    plan.rebuild(att)
    if att.stalled_ts is None:
        att.ckpt_hang_after = None
        plan.rebuild(att)
        att.fault = None
        return False
    stall = att.stalled_ts
    recover = stall + r.randrange(50, 120) * MIN
    plan.ov.add_storage(path, t_slow, stall, lat_mult=(1.0, peak / 3))
    plan.ov.add_storage(path, stall, recover, lat_mult=peak)
    for i in att.nodes[:4]:
        for j in range(r.randrange(1, 4)):
            ts = stall + r.randrange(20_000, 30 * MIN)
            rlog(plan, att, ts, i, None, "kernel", M.nfs_not_responding(m.server or "storage"))
        ts = stall + r.randrange(125_000, 200_000)
        rlog(plan, att, ts, i, None, "kernel", M.hung_task("python3", pids(plan, att)[att.rank_of(i, 0)]))
    if r.random() < 0.6:
        cancel = stall + r.randrange(25, 70) * MIN
        att.forced_end = (cancel, "cancelled", 0, 15, None)
        rlog(plan, att, cancel - 200, None, None, "stderr",
             M.slurm_cancelled(att.job.id, plan.name(att.nodes[0]), cancel, ""))
    att.stall = True
    if spec.params.get("ramp_ms"):
        plan.fleet_add("degrading_paths", path)
    if path == "/ckpt":  # every running job's checkpoints get slower with the backend
        for other in plan.running_at(t):
            if other is not att and other.fault is None and not getattr(other, "_ended", False):
                plan.rebuild(other)
                sch.reschedule(other)
    precursor(att, "storage_latency", t_slow)
    label(att, "storage_slow", f"path:{path}", "storage_slow",
          f"{path} latency x{peak:.0f}; checkpoint write hung and the job stalled")
    finish(sch, att, spec)
    return True


def _datasets_slow(sch: Scheduler, spec: FaultSpec, t: int, att: Attempt) -> bool:
    """The dataset filesystem slows: input-bound steps get slower and slower, then a
    DataLoader worker times out and the job dies (storage stays mounted throughout)."""
    plan = sch.plan
    r = plan.rng
    path = "/datasets"
    m = _mount(plan, path)
    peak = r.uniform(40, 150)
    ramp = r.randrange(8, 20) * MIN
    t_fail = t + r.randrange(15, 35) * MIN
    if t_fail > plan.t_end - 10 * MIN:
        return False
    plan.ov.add_storage(path, t - ramp, t, lat_mult=(1.0, peak / 4))
    plan.ov.add_storage(path, t, t_fail + r.randrange(30, 90) * MIN, lat_mult=peak)
    att.slow = [(t - ramp // 2, r.uniform(1.3, 1.8)), (t, r.uniform(3.0, 6.0))]
    precursor(att, "storage_latency", t - ramp)
    for i in att.nodes[:3]:
        ts = t + r.randrange(60_000, 10 * MIN)
        if m.fs_type == "lustre":
            msg = (f"Lustre: datafs-OST00{r.randrange(10, 40)}-osc-ffff8f2c3a9e1000: Connection to datafs-OST00"
                   f"{r.randrange(10, 40)} (at {m.server}) was lost; in progress operations using this service will "
                   "wait for recovery to complete")
        else:
            msg = M.nfs_not_responding(m.server or "storage")
        rlog(plan, att, ts, i, None, "kernel", msg)
    crank = r.randrange(len(att.nodes) * att.job.gpn)
    block = M.traceback(M.train_frames(r)[:2] + [
        ("/workspace/trainer.py", 288, "fit", "for batch in self.train_loader:"),
        (f"{M._site()}/torch/utils/data/dataloader.py", 1328, "_next_data", "idx, data = self._get_data()"),
        (f"{M._site()}/torch/utils/data/dataloader.py", 1284, "_get_data", "success, data = self._try_get_data()"),
        (f"{M._site()}/torch/utils/data/dataloader.py", 1145, "_try_get_data",
         "raise RuntimeError(f'DataLoader timed out after {self._timeout} seconds') from e")],
        f"RuntimeError: DataLoader timed out after {r.choice((600, 900, 1800))} seconds")
    cascade_fast(sch, att, t_fail, crank, block)
    label(att, "storage_slow", f"path:{path}", "storage_slow",
          f"{path} latency x{peak:.0f}; input pipeline starved, DataLoader timed out")
    finish(sch, att, spec)
    return True


def f_storage_unavail(sch: Scheduler, spec: FaultSpec, t: int) -> bool:
    plan = sch.plan
    r = plan.rng
    att = pick(plan, t)
    if att is None:
        return False
    path = spec.params.get("path") or r.choice(("/datasets", "/ckpt"))
    m = _mount(plan, path)
    c = plan.cluster
    su = c.nodes[att.nodes[0]].su
    affected = {n.idx for n in c.nodes if n.su == su}
    dur = r.randrange(30, 90) * MIN
    job = att.job
    if path == "/datasets":
        state, err = r.choice((("stale", "Stale file handle"), ("missing", "mount point not found")))
        plan.ov.add_storage(path, t, t + dur, nodes=affected, state=state, error=err)
        mount_events(plan, path, affected, t, state, err)
        mount_events(plan, path, affected, t + dur, "ok", None)
        for i in att.nodes[:3]:
            rlog(plan, att, t + r.randrange(100, 3000), i, None, "kernel",
                 M.lustre_evicted("datafs", m.server or "") if m.fs_type == "lustre" else M.nfs_timed_out(m.server or ""))
        crank = r.randrange(len(att.nodes) * job.gpn)
        cascade_fast(sch, att, t + r.randrange(2_000, 40_000), crank, M.dataloader_stale(path, r))
    else:
        state, err = "readonly", "Read-only file system"
        att.ckpt_fail_after = t
        att.ckpt_fail_err = f"OSError: [Errno 30] Read-only file system: '{path}/{job.user}/{job.name}'"
        att.ckpt_fail_after_s = r.uniform(0.5, 5)
        att.fault = spec.kind
        plan.rebuild(att)
        if att.ckpt_fail_ts is None:
            att.ckpt_fail_after = None
            plan.rebuild(att)
            att.fault = None
            return False
        ft = att.ckpt_fail_ts
        ro = ft - r.randrange(1, 10) * MIN  # the server remounted read-only shortly before the save
        plan.ov.add_storage(path, ro, ro + dur, nodes=affected, state=state, error=err)
        mount_events(plan, path, affected, ro, state, err)
        mount_events(plan, path, affected, ro + dur, "ok", None)
        cascade_fast(sch, att, ft + 200, 0, M.ckpt_oserror(30, f"{path}/{job.user}/{job.name}/step_tmp.pt"))
    label(att, "storage_unavailable", f"path:{path}", "storage_unavailable", f"{path} went {state} ({err})")
    finish(sch, att, spec)
    return True


def f_storage_full(sch: Scheduler, spec: FaultSpec, t: int) -> bool:
    plan = sch.plan
    r = plan.rng
    att = pick(plan, t)
    if att is None:
        return False
    path = "/ckpt"
    job = att.job
    att.ckpt_fail_after = t
    att.ckpt_fail_err = f"OSError: [Errno 28] No space left on device: '{path}/{job.user}/{job.name}'"
    att.ckpt_fail_after_s = r.uniform(5, 60)
    att.fault = spec.kind
    plan.rebuild(att)
    if att.ckpt_fail_ts is None:
        att.ckpt_fail_after = None
        plan.rebuild(att)
        att.fault = None
        return False
    ft = att.ckpt_fail_ts
    fill_from = t - r.randrange(30, 90) * MIN
    plan.ov.add_storage(path, fill_from, ft - 60_000, used_pct=(_mount(plan, path).base_used_pct + 2, 99.6))
    plan.ov.add_storage(path, ft - 60_000, ft + 3 * 3600 * MS, used_pct=100.0, state="full",
                        error="No space left on device")
    mount_events(plan, path, range(len(plan.cluster.nodes)), ft - 60_000, "full", "No space left on device", 60_000)
    cascade_fast(sch, att, ft + 300, 0, M.ckpt_oserror(28, f"{path}/{job.user}/{job.name}/step_tmp.pt"))
    label(att, "storage_full", f"path:{path}", "storage_full", f"{path} filled up; checkpoint write hit ENOSPC")
    finish(sch, att, spec)
    return True


# ------------------------------------------------------------------ memory
def f_gpu_oom(sch: Scheduler, spec: FaultSpec, t: int) -> bool:
    plan = sch.plan
    r = plan.rng
    att = pick(plan, t)
    if att is None:
        return False
    node, gpu, crank = _culprit_gpu(plan, att, spec)
    plan.ov.add_gpu(node, gpu, t - 40_000, t + 2_000, mem=(72000.0, 81200.0))
    cascade_fast(sch, att, t, crank, M.cuda_oom(gpu, r))
    att.retry_same_nodes = True
    label(att, "gpu_oom", f"gpu:{plan.name(node)}/{gpu}", "gpu_oom", f"CUDA OOM on rank {crank} (GPU {gpu} of {plan.name(node)})")
    finish(sch, att, spec)
    return True


def f_host_oom(sch: Scheduler, spec: FaultSpec, t: int) -> bool:
    plan = sch.plan
    r = plan.rng
    att = pick(plan, t)
    if att is None:
        return False
    node, gpu, crank = _culprit_gpu(plan, att, spec)
    pid = pids(plan, att)
    job = att.job
    cg = r.random() < 0.7
    rlog(plan, att, t, node, None, "kernel", M.oom_kill_block(pid[crank], "python3", r.randrange(180_000_000, 480_000_000),
                                                              cg, job.id, r))
    att.extra.append((t + 300, mk(t + 300, "runtime.container", f"enroot@{plan.name(node)}",
                                  {"container": f"pyxis_{job.id}.0", "event": "oom_killed", "exit_code": 137},
                                  node=plan.name(node), job=job.id, tenant=job.tenant)))
    cascade_fast(sch, att, t + 200, crank, None, exitcode=-9, state="out_of_memory", job_exit=0, signal=9,
                 reason="OutOfMemory")
    rlog(plan, att, t + 6000, None, None, "stderr",
         f"slurmstepd: error: Detected 1 oom_kill event in StepId={job.id}.0. Some of the step tasks have been OOM Killed.")
    label(att, "host_oom", f"node:{plan.name(node)}", "host_oom", f"host memory OOM kill of rank {crank} on {plan.name(node)}")
    finish(sch, att, spec)
    return True


# ------------------------------------------------------------------ driver / software
def f_driver_xid(sch: Scheduler, spec: FaultSpec, t: int) -> bool:
    plan = sch.plan
    r = plan.rng
    att = pick(plan, t)
    if att is None:
        return False
    node, gpu, crank = _culprit_gpu(plan, att, spec)
    code = spec.params.get("xid") or r.choice((119, 119, 120, 31))
    pid = pids(plan, att)
    xid_event(plan, node, gpu, code, t, pid[crank], att, crank)
    if code == 119 and r.random() < 0.5:
        xid_event(plan, node, gpu, 119, t + r.randrange(6_000, 20_000), pid[crank], att, crank)
    if r.random() < 0.5:
        end = cascade_hang(sch, att, t, {crank})
    else:
        end = cascade_fast(sch, att, t + r.randrange(100, 3000), crank,
                           M.traceback(M.train_frames(r), M.cuda_error_block("unspecified launch failure")))
    drain(sch, node, end + r.randrange(5_000, 60_000), f"NHC: GPU {gpu} Xid {code} (GSP/driver), reset pending",
          r.randrange(20, 60) * MIN)
    label(att, "driver_software", f"gpu:{plan.name(node)}/{gpu}", "driver_xid",
          f"driver/GSP fault Xid {code} on GPU {gpu} of {plan.name(node)}")
    finish(sch, att, spec)
    return True


def f_driver_mismatch(sch: Scheduler, spec: FaultSpec, t: int) -> bool:
    """One node missed the driver upgrade; the first multi-node job that lands on it dies at init.

    The odd node is chosen when that job starts (among its nodes that ran nothing before);
    the node's inventory is emitted from the final plan, so it shows the old driver from t0.
    """
    plan = sch.plan
    r = plan.rng
    state = {"done": False}

    def hook(p: Plan, att: Attempt) -> None:
        if state["done"] or len(att.nodes) < 2 or att.start_ts < t or att.fault is not None:
            return
        used = {i for a in p.attempts if a is not att and a.start_ts is not None for i in a.nodes}
        fresh = [i for i in att.nodes if i not in used]
        if not fresh:
            return
        state["done"] = True
        odd = r.choice(fresh)
        n = p.cluster.nodes[odd]
        old = dict(n.versions)
        n.versions["driver"] = "535.161.08"
        n.versions["cuda"] = "12.2"
        job = att.job
        ts = att.start_ts + r.randrange(20_000, 60_000)
        crank = att.rank_of(odd, r.randrange(job.gpn))
        for g in range(job.gpn):
            rk = att.rank_of(odd, g)
            rlog(p, att, ts + r.randrange(0, 800), odd, rk, "stderr", M.driver_too_old(12020))
        att.init_ms = 10 * 60_000
        cascade_fast(sch, att, ts + 900, crank, None)
        label(att, "driver_software", f"node:{n.name}", "driver_mismatch",
              f"{n.name} runs driver 535.161.08 (CUDA 12.2) while the rest of the job runs {old['driver']}")
        att.fault = spec.kind
        p.rebuild(att)
        dts = att.end_ts + r.randrange(10, 30) * MIN
        repair = r.randrange(30, 90) * MIN
        drain(sch, odd, dts, "driver version mismatch (535.161.08)", repair)
        fix = dts + repair - 6 * MIN
        for comp, frm, to in (("driver", "535.161.08", old["driver"]), ("cuda", "12.2", old["cuda"])):
            p.add(fix, mk(fix, "inventory.change", "ansible@deploy-1", {"component": comp, "from": frm, "to": to,
                                                                        "actor": "ansible", "ticket": None}, node=n.name))
        p.decoys.append({"kind": "version_drift", "node": n.name, "component": "driver", "version": "535.161.08"})

    plan.start_hooks.append(hook)
    return True


def f_change_regression(sch: Scheduler, spec: FaultSpec, t: int) -> bool:
    """A rolling upgrade (driver or NCCL) reaches part of the fleet; jobs that start on an
    upgraded node afterwards fail the same way."""
    plan = sch.plan
    r = plan.rng
    c = plan.cluster
    comp, new = spec.params.get("change") or r.choice((("driver", "560.35.03"), ("nccl", "2.23.4"),
                                                       ("kernel", "5.15.0-125-generic")))
    frac = spec.params.get("frac", r.uniform(0.3, 0.6))
    targets = sorted(r.sample(range(len(c.nodes)), max(2, int(len(c.nodes) * frac))))
    upgraded: dict[int, int] = {}
    ticket = f"CHG-{r.randrange(1000, 9999)}"
    for j, i in enumerate(targets):
        ts = t + j * r.randrange(20_000, 90_000)
        old = c.nodes[i].versions.get(comp)
        upgraded[i] = ts
        plan.add(ts, mk(ts, "inventory.change", "ansible@deploy-1",
                        {"component": comp, "from": old, "to": new, "actor": "ansible", "ticket": ticket},
                        node=c.nodes[i].name))
        plan.changes.append({"node": c.nodes[i].name, "ts": ts, "component": comp, "to": new})
    plan.fleet_add("bad_versions", f"{comp}={new}")
    from .plan import new_job

    def submit_new(ts: int) -> None:
        sch._submit(new_job(plan, ts, n_nodes=r.choice((1, 2, 2, 4)), cancel=False), ts).priority = 2

    for _ in range(spec.params.get("new_jobs", r.randrange(2, 5))):
        sch.push(t + r.randrange(10, 60) * MIN, "call", submit_new)

    cap = spec.params.get("rollback_after", r.randrange(3, 7))
    st = {"failed": 0, "rollback": None}

    def hook(p: Plan, att: Attempt) -> None:
        if att.fault is not None or not any(i in upgraded and upgraded[i] <= att.start_ts for i in att.nodes):
            return
        if st["rollback"] is not None and att.start_ts >= st["rollback"]:
            return
        job = att.job
        culprit_node = next(i for i in att.nodes if i in upgraded and upgraded[i] <= att.start_ts)
        g = r.randrange(job.gpn)
        crank = att.rank_of(culprit_node, g)
        if comp == "driver":
            ts = att.start_ts + att.init_ms + r.randrange(3, 25) * MIN
            xid_event(p, culprit_node, g, r.choice((13, 31)), ts, pids(p, att)[crank], att, crank)
            block = M.traceback(M.train_frames(r), M.cuda_error_block("an illegal memory access was encountered"))
            cascade_fast(sch, att, ts + 400, crank, block)
        elif comp == "nccl":
            ts = att.start_ts + r.randrange(30_000, 90_000)
            att.init_ms = 10 * MIN
            if r.random() < 0.5:
                cascade_fast(sch, att, ts, crank, M.nccl_init_error(new))
            else:
                cascade_hang(sch, att, ts, set())
        else:
            ts = att.start_ts + att.init_ms + r.randrange(5, 30) * MIN
            block = ("Fatal Python error: Segmentation fault\n\nThread 0x00007f3a1bfff640 (most recent call first):\n"
                     f'  File "{M._site()}/torch/utils/data/_utils/pin_memory.py", line 52 in do_one_step\n'
                     "\nCurrent thread 0x00007f3b9e1b7740 (most recent call first):\n"
                     '  File "/workspace/trainer.py", line 188 in training_step')
            cascade_fast(sch, att, ts, crank, block, exitcode=-11)
        label(att, "change_regression", f"version:{comp}={new}", "change_regression",
              f"{comp} {new} rolled out ({ticket}); job failed on upgraded node {p.name(culprit_node)}")
        att.fault = spec.kind
        p.rebuild(att)
        if att.end_ts is None or att.end_ts > p.t_end:
            att.label = None  # the failure would fall after the window: not an interruption
            att.fault = None
            return
        st["failed"] += 1
        if st["failed"] == cap:  # on-call rolls the change back
            rb = att.end_ts + r.randrange(10, 40) * MIN
            st["rollback"] = rb
            for j, (i, ts_up) in enumerate(sorted(upgraded.items())):
                ts = max(rb, ts_up + MIN) + j * r.randrange(5_000, 30_000)
                p.add(ts, mk(ts, "inventory.change", "ansible@deploy-1",
                             {"component": comp, "from": new, "to": c.nodes[i].versions.get(comp), "actor": "ansible",
                              "ticket": f"{ticket}-rollback"}, node=c.nodes[i].name))

    plan.start_hooks.append(hook)
    return True


def f_bad_image(sch: Scheduler, spec: FaultSpec, t: int) -> bool:
    """A new training image is promoted (pre-pulled to every node); jobs that use it die at import."""
    plan = sch.plan
    r = plan.rng
    c = plan.cluster
    old = "registry.corp/train/llm:2024.10.3"
    new = spec.params.get("image", "registry.corp/train/llm:2024.11.0")
    ticket = f"CHG-{r.randrange(1000, 9999)}"
    for j, n in enumerate(c.nodes):
        ts = t + j * r.randrange(500, 4000)
        plan.add(ts, mk(ts, "inventory.change", "image-prepuller@k8s",
                        {"component": "image", "from": old, "to": new, "actor": "ci-bot", "ticket": ticket}, node=n.name))
    plan.fleet_add("bad_images", new)
    lib = r.choice(("transformer_engine_torch.cpython-310-x86_64-linux-gnu.so", "libtransformer_engine.so"))

    def retag(ts: int) -> None:  # from now on newly submitted llm jobs use the new tag
        for job in plan.jobs:
            if job.image == old and job.submit_ts >= t and not job.attempts[0].start_ts:
                job.image = new

    sch.push(t + 1, "call", retag)
    from .plan import new_job

    def submit_new(ts: int) -> None:
        job = new_job(plan, ts, image=new, user=r.choice((("alice", "team-llm"), ("bob", "team-llm"), ("gita", "team-llm"))),
                      n_nodes=r.choice((1, 1, 2)), cancel=False)
        job.max_retries = 1
        sch._submit(job, ts).priority = 2  # the team's eager new runs (high-priority QoS)

    for _ in range(spec.params.get("new_jobs", r.randrange(3, 6))):
        sch.push(t + r.randrange(2, 40) * MIN, "call", submit_new)

    def hook(p: Plan, att: Attempt) -> None:
        if att.job.image != new and not (att.job.submit_ts >= t and att.job.image == old):
            return
        att.job.image = new
        job = att.job
        ts = att.start_ts + r.randrange(15_000, 50_000)
        att.init_ms = 10 * MIN
        crank = r.randrange(len(att.nodes) * job.gpn)
        cascade_fast(sch, att, ts, crank, M.import_error(lib))
        label(att, "change_regression", f"version:image={new}", "bad_image",
              f"image {new} ({ticket}) fails at import: undefined symbol in transformer_engine")
        att.fault = spec.kind
        p.rebuild(att)

    plan.start_hooks.append(hook)
    return True


# ------------------------------------------------------------------ application / unknown
def f_application(sch: Scheduler, spec: FaultSpec, t: int) -> bool:
    plan = sch.plan
    r = plan.rng
    att = pick(plan, t)
    if att is None:
        return False
    job = att.job
    block, illegal = M.application_error(r)
    crank = r.randrange(len(att.nodes) * job.gpn)
    node = att.nodes[crank // job.gpn]
    gpu = crank % job.gpn
    if illegal:  # benign-looking XIDs that follow a user kernel fault: decoys for gpu_hardware
        xid_event(plan, node, gpu, 13, t - r.randrange(50, 400), pids(plan, att)[crank], att, crank)
        if r.random() < 0.7:
            xid_event(plan, node, gpu, 43, t + r.randrange(500, 3000), pids(plan, att)[crank], att, crank)
        plan.decoys.append({"kind": "benign_xid_after_app_error", "node": plan.name(node), "gpu": gpu, "job": job.id})
    cascade_fast(sch, att, t, crank, block)
    att.retry_same_nodes = True
    label(att, "application", f"job:{job.id}", "application", f"user code error on rank {crank}")
    finish(sch, att, spec)
    sticky(sch, att, "application", block, illegal)
    return True


def sticky(sch: Scheduler, att0: Attempt, kind: str, block: str, illegal: bool) -> None:
    """Deterministic user bugs come back on every retry (same error, a few minutes in)."""
    plan = sch.plan
    r = plan.rng
    job = att0.job

    def hook(p: Plan, att: Attempt) -> None:
        if att.job is not job or att.n == 0 or att.fault is not None:
            return
        ts = att.start_ts + att.init_ms + r.randrange(2, 15) * MIN
        crank = r.randrange(len(att.nodes) * job.gpn)
        if illegal:
            node = att.nodes[crank // job.gpn]
            xid_event(p, node, crank % job.gpn, 13, ts - 200, pids(p, att)[crank], att, crank)
        cascade_fast(sch, att, ts, crank, block)
        att.retry_same_nodes = True
        label(att, "application", f"job:{job.id}", "application", f"same user code error again on rank {crank}")
        att.fault = kind
        p.rebuild(att)
        if att.end_ts is None or att.end_ts > p.t_end:
            att.label = None
            att.fault = None

    plan.start_hooks.append(hook)


def f_unknown(sch: Scheduler, spec: FaultSpec, t: int) -> bool:
    """Progress stops with no sign in any layer; the user cancels it later."""
    plan = sch.plan
    r = plan.rng
    att = pick(plan, t)
    if att is None:
        return False
    att.halt_ts = t
    if r.random() < 0.6:
        cancel = t + r.randrange(30, 80) * MIN
        att.forced_end = (cancel, "cancelled", 0, 15, None)
    att.stall = True
    label(att, "unknown", f"job:{att.job.id}", "unknown", "job stopped making progress; no layer shows a cause")
    finish(sch, att, spec)
    return True


LIBRARY = {
    "gpu_xid79": f_gpu_xid79, "gpu_ecc": f_gpu_ecc, "gpu_nvlink": f_gpu_nvlink, "node_hw": f_node_hw,
    "thermal": f_thermal, "sched_timelimit": f_sched_timelimit, "preempt": f_preempt,
    "port_down": f_port_down, "congestion": f_congestion, "storage_slow": f_storage_slow,
    "storage_unavailable": f_storage_unavail, "storage_full": f_storage_full, "gpu_oom": f_gpu_oom,
    "host_oom": f_host_oom, "driver_xid": f_driver_xid, "driver_mismatch": f_driver_mismatch,
    "change_regression": f_change_regression, "bad_image": f_bad_image, "application": f_application,
    "unknown": f_unknown,
}
