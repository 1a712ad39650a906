"""Outside-check round 5: 23 hand-written scenarios from the event contract alone.

``python -m tests.outside5.gen [DIR]`` writes ``<scenario>.jsonl`` per scenario into DIR (default
``var/outside5/``). Deterministic: every run writes byte-identical files (a ``random.Random`` seeded by
the scenario's name, fixed epoch times, no wall clock, no hash ordering).

Written from ``shared/spec/events.md`` (contract v1), README.md and ``faultline diagnose/validate
--help`` only, without reading the diagnosis rules. 20 failure stories (none repeats round 4's list)
and 3 healthy runs with harmless noise. Each scenario's docstring tells its story.

Log formats imitate what the real tools print (public facts from shared/reference and the tools'
documentation): the NVIDIA driver's ``NVRM: Xid (PCI:dddd:bb:dd): N, pid=..., name=...`` kernel line,
PyTorch's ProcessGroupNCCL watchdog and torchrun's ``ChildFailedError`` / ``failed (exitcode: -9)``,
NCCL's ``NET/IB : Got completion from peer ... with status=12``, slurmstepd's ``*** JOB N ON host
CANCELLED AT ... ***`` and ``Detected 1 oom_kill event``, the kernel OOM killer, EDAC / memory-failure,
NFS ``server X not responding``, hung-task, kubelet eviction and Kueue preemption messages, iDRAC-style
Redfish message ids in the SEL.
"""
from __future__ import annotations

import hashlib
import json
import random
import sys
import time
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "var" / "outside5"

S = 1000
M = 60 * S
H = 60 * M


def utc(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000))


def glog(ms: int) -> str:
    """glog-style stamp PyTorch's C++ logs use: E1121 10:14:33.123456"""
    t = time.gmtime(ms / 1000)
    return time.strftime("%m%d %H:%M:%S", t) + f".{(ms % 1000) * 1000:06d}"


class Scn:
    """One scenario: events collected with a sort key, written in key order."""

    def __init__(self, name: str, t0: int):
        self.name, self.t0 = name, t0
        self.tag = name.split("_")[0]
        self.rng = random.Random(name)
        self.rows: list[tuple[int, int, dict]] = []
        self.n = 0
        self.gpu_state: dict = {}
        self.rdma_state: dict = {}
        self.port_state: dict = {}
        self.skew: dict[str, int] = {}  # node -> ms its clocks run ahead (negative: behind)

    # --- envelope ------------------------------------------------------------------------------
    def add(self, ts, kind, source, data, node=None, job=None, tenant=None, order=None) -> str:
        self.n += 1
        eid = f"o5-{self.tag}-{self.n:06d}"
        ts = int(ts)
        e = {"v": 1, "id": eid, "ts": ts, "kind": kind, "source": source, "node": node, "job": job,
             "tenant": tenant, "data": data}
        self.rows.append((int(order) if order is not None else ts, self.n, e))
        return eid

    def nts(self, node, ts):
        """a node-local observation time: the node's clock (skewed if set)"""
        return int(ts) + self.skew.get(node, 0)

    def lines(self) -> list[bytes]:
        return [json.dumps(e, separators=(",", ":"), ensure_ascii=False).encode() for _, _, e in sorted(
            self.rows, key=lambda r: (r[0], r[1]))]

    # --- accelerator ---------------------------------------------------------------------------
    def gpu_uuid(self, node, g):
        h = hashlib.md5(f"{node}/{g}".encode()).hexdigest()
        return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"

    def gpu_samples(self, nodes, t_from, t_to, every, busy, ngpu=8, total=81559, f=None, source="dcgm"):
        """busy: list of (nodes, start, end) when the GPUs train. f(node, g, t, d) may edit d or return False"""
        for t in range(int(t_from), int(t_to), int(every)):
            for node in nodes:
                for g in range(ngpu):
                    st = self.gpu_state.setdefault((node, g), dict(ecc_sbe=0, ecc_dbe=0, nvlink_errors=0, pcie_replay=0))
                    on = any(node in ns and a <= t < b for ns, a, b in busy)
                    r = self.rng
                    d = dict(gpu=g, uuid=self.gpu_uuid(node, g),
                             util_pct=r.randint(93, 100) if on else 0,
                             mem_used_mib=(r.randint(61000, 71000) if total > 50000 else r.randint(30000, 34000)) if on else 4,
                             mem_total_mib=total,
                             temp_c=r.randint(58, 67) if on else r.randint(31, 36),
                             power_w=round(r.uniform(560, 660), 1) if on else round(r.uniform(68, 75), 1),
                             sm_clock_mhz=1980 if on else 345,
                             throttle=[])
                    if f is not None and f(node, g, t, d) is False:
                        continue
                    for k in ("ecc_sbe", "ecc_dbe", "nvlink_errors", "pcie_replay"):
                        st[k] = d.pop("set_" + k, st[k])
                        d[k] = st[k]
                    self.add(self.nts(node, t + r.randint(0, 900)), "gpu.sample", f"{source}@{node}", d, node=node)

    def xid(self, node, ts, gpu, pci, xid, pid, text, name="python3"):
        msg = f"NVRM: Xid (PCI:{pci}): {xid}, pid={pid}, name={name}, {text}"
        return self.add(self.nts(node, ts), "gpu.xid", f"kernel@{node}", dict(gpu=gpu, pci=pci, xid=xid, pid=pid, message=msg),
                        node=node)

    # --- hardware ------------------------------------------------------------------------------
    def bmc(self, nodes, t_from, t_to, every, f=None):
        for t in range(int(t_from), int(t_to), int(every)):
            for node in nodes:
                r = self.rng
                rows = [("Inlet Temp", "temperature", round(r.uniform(21.0, 24.5), 1), "C"),
                        ("CPU1 Temp", "temperature", round(r.uniform(48, 61), 1), "C"),
                        ("Fan1A", "fan", float(r.randrange(8400, 9600, 120)), "RPM"),
                        ("PSU1 Input Power", "power", float(r.randrange(1450, 1720, 10)), "W"),
                        ("PSU2 Input Power", "power", float(r.randrange(1450, 1720, 10)), "W")]
                for sensor, typ, val, unit in rows:
                    d = dict(sensor=sensor, type=typ, value=val, unit=unit, status="ok")
                    if f is not None and f(node, t, d) is False:
                        continue
                    self.add(self.nts(node, t + r.randint(0, 3000)), "hw.sensor", f"ipmi@{node}-bmc", d, node=node)

    def sel(self, node, ts, entry, severity, sensor_type, message_id, message):
        return self.add(self.nts(node, ts), "hw.sel", f"redfish@{node}-bmc", dict(
            entry_id=str(entry), severity=severity, sensor_type=sensor_type, message_id=message_id, message=message),
            node=node)

    # --- network -------------------------------------------------------------------------------
    def ports(self, facing, t_from, t_to, every, busy, f=None):
        """facing: {node: (switch, port)}; switch-side counters of the node-facing ports, keyed by node"""
        for t in range(int(t_from), int(t_to), int(every)):
            for node, (sw, port) in facing.items():
                st = self.port_state.setdefault((sw, port), dict(in_errors=0, out_errors=0, in_discards=0,
                                                                  out_discards=0, in_octets=10 ** 12, out_octets=10 ** 12))
                on = any(node in ns and a <= t < b for ns, a, b in busy)
                inc = dict(in_octets=self.rng.randint(2 * 10 ** 11, 3 * 10 ** 11) if on else self.rng.randint(10 ** 6, 10 ** 7),
                           out_octets=self.rng.randint(2 * 10 ** 11, 3 * 10 ** 11) if on else self.rng.randint(10 ** 6, 10 ** 7),
                           in_errors=0, out_errors=0, in_discards=0, out_discards=self.rng.randint(0, 2) if on else 0)
                d = dict(device=sw, port=port, oper_status="up", speed_mbps=400000)
                if f is not None and f(node, sw, port, t, d, inc, st) is False:
                    continue
                for k, v in inc.items():
                    st[k] += v
                d.update({k: st[k] for k in ("in_errors", "out_errors", "in_discards", "out_discards", "in_octets", "out_octets")})
                self.add(t + self.rng.randint(0, 2000), "net.port", f"snmp@{sw}", d, node=node)

    def link(self, ts, key_node, device, port, state, source):
        return self.add(ts, "net.link", source, dict(device=device, port=port, state=state), node=key_node)

    def rdma(self, nodes, t_from, t_to, every, busy, devs=("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"), f=None):
        names = ("port_xmit_data", "port_rcv_data", "symbol_error", "link_downed", "port_rcv_errors",
                 "local_ack_timeout_err", "out_of_sequence", "packet_seq_err", "np_cnp_sent", "rp_cnp_handled",
                 "np_ecn_marked_roce_packets")
        for t in range(int(t_from), int(t_to), int(every)):
            for node in nodes:
                on = any(node in ns and a <= t < b for ns, a, b in busy)
                for dev in devs:
                    st = self.rdma_state.setdefault((node, dev), {k: 0 for k in names})
                    r = self.rng
                    inc = {k: 0 for k in names}
                    if on:
                        inc.update(port_xmit_data=r.randint(10 ** 10, 2 * 10 ** 10), port_rcv_data=r.randint(10 ** 10, 2 * 10 ** 10),
                                   np_cnp_sent=r.randint(0, 40), rp_cnp_handled=r.randint(0, 40),
                                   np_ecn_marked_roce_packets=r.randint(0, 60))
                    if f is not None and f(node, dev, t, inc, st) is False:
                        continue
                    for k, v in inc.items():
                        st[k] += v
                    self.add(self.nts(node, t + r.randint(0, 1500)), "net.rdma", f"rdma@{node}",
                             dict(device=dev, port=1, counters=dict(st)), node=node)

    # --- storage -------------------------------------------------------------------------------
    def storage(self, nodes, mounts, t_from, t_to, every, f=None):
        """mounts: list of (path, fs_type, used_pct)"""
        for t in range(int(t_from), int(t_to), int(every)):
            for node in nodes:
                for path, fs, used in mounts:
                    r = self.rng
                    d = dict(path=path, fs_type=fs, read_iops=float(r.randint(200, 2400)), write_iops=float(r.randint(20, 300)),
                             read_mbps=round(r.uniform(150, 900), 1), write_mbps=round(r.uniform(5, 60), 1),
                             read_lat_ms=round(r.uniform(0.6, 3.5), 2), write_lat_ms=round(r.uniform(0.9, 5.0), 2),
                             queue_depth=float(r.randint(0, 6)), used_pct=float(used))
                    if f is not None and f(node, path, t, d) is False:
                        continue
                    self.add(self.nts(node, t + r.randint(0, 2500)), "storage.sample", f"storage@{node}", d, node=node)

    def mount(self, node, ts, path, state, error=None):
        return self.add(self.nts(node, ts), "storage.mount", f"storage@{node}", dict(path=path, state=state, error=error),
                        node=node)

    # --- inventory -----------------------------------------------------------------------------
    def versions(self, nodes, ts, every=None, t_to=None, over=None, base=None):
        v = dict(driver="550.90.07", cuda="12.4", nccl="2.21.5", gpu_firmware="96.00.74.00.11", bmc_firmware="7.10.30.00",
                 bios="2.19.1", kernel="5.15.0-105-generic", os="Ubuntu 22.04.4 LTS", ofed="24.04-0.7.0.0",
                 container_runtime="enroot 3.4.1", framework="torch 2.3.1")
        v.update(base or {})
        times = [ts] if every is None else list(range(int(ts), int(t_to), int(every)))
        for t in times:
            for node in nodes:
                d = dict(v)
                if over:
                    d.update(over(node, t) or {})
                self.add(self.nts(node, t + self.rng.randint(0, 4000)), "inventory.versions", f"inventory@{node}", d, node=node)

    def topology(self, node, ts, links, storage):
        self.add(self.nts(node, ts), "inventory.topology", f"inventory@{node}",
                 dict(links=[dict(nic=a, switch=b, port=c, segment=d) for a, b, c, d in links],
                      storage=[dict(path=a, backend=b, server=c) for a, b, c in storage]), node=node)

    def change(self, node, ts, component, frm, to, actor, ticket):
        self.add(ts, "inventory.change", f"inventory@{node}",
                 dict(component=component, to=to, actor=actor, ticket=ticket, **{"from": frm}), node=node)

    # --- scheduler -----------------------------------------------------------------------------
    def job(self, job, attempt, state, ts, nodes, gpn=8, start=None, end=None, exit_code=None, signal=None, reason=None,
            image=None, name="train", user="alice", source="slurm@ctl-1", tenant="research", ranks=None, order=None):
        if ranks is None:
            ranks = {str(i * gpn + g): n for i, n in enumerate(nodes) for g in range(gpn)}
        return self.add(ts, "sched.job", source, dict(
            state=state, attempt=attempt, nodes=list(nodes), gpus=gpn * len(nodes), ranks=ranks, exit_code=exit_code,
            signal=signal, image=image, name=name, user=user, start_ts=start, end_ts=end, reason=reason),
            job=job, tenant=tenant, order=order)

    def sched_node(self, node, ts, state, reason=None, source="slurm@ctl-1"):
        return self.add(ts, "sched.node", source, dict(state=state, reason=reason), node=node)

    # --- runtime -------------------------------------------------------------------------------
    def log(self, job, ts, node, rank, message, stream="stderr", tenant="research", source=None):
        return self.add(self.nts(node, ts) if node else ts, "runtime.log", source or f"logs@{node}",
                        dict(rank=rank, stream=stream, message=message), node=node, job=job, tenant=tenant)

    def progress(self, job, t_from, t_to, every, step0, step_time, ranks=((0, None),), tenant="research", spb=256):
        """ranks: (rank, node) pairs reporting; step_time(t) seconds per step. Returns the last step."""
        t, step = int(t_from), float(step0)
        while t < t_to:
            st = step_time(t)
            step += every / 1000 / st
            for rk, node in ranks:
                jit = self.rng.randint(0, 400)
                self.add(self.nts(node, t + jit) if node else t + jit, "runtime.progress", f"sdk@{node or 'rank0'}",
                         dict(rank=rk, step=int(step), step_time_s=round(st * self.rng.uniform(0.97, 1.03), 3),
                              samples_per_s=round(spb / st, 1)), node=node, job=job, tenant=tenant)
            t += every
        return int(step)

    def ckpt(self, job, ts, step, path, phase="succeeded", nbytes=None, dur=None, error=None, node=None, tenant="research"):
        return self.add(self.nts(node, ts) if node else ts, "runtime.checkpoint", f"sdk@{node or 'rank0'}",
                        dict(phase=phase, step=step, path=path, bytes=nbytes, duration_s=dur, error=error),
                        node=node, job=job, tenant=tenant)

    def container(self, job, ts, node, container, event, exit_code, tenant="research"):
        return self.add(ts, "runtime.container", f"kubelet@{node}", dict(container=container, event=event, exit_code=exit_code),
                        node=node, job=job, tenant=tenant)


# ------------------------------------------------------------------------------------------------
# shared pieces
def ckpt_series(s, job, start, end, every, step_at, path_fmt, first=None, node=None, dur=40.0, nbytes=28_400_000_000):
    """a started+succeeded pair every `every` ms from first (default start+every) while < end"""
    t = first if first is not None else start + every
    out = []
    while t < end:
        step = step_at(t)
        s.ckpt(job, t, step, path_fmt.format(step=step), "started", node=node)
        s.ckpt(job, t + int(dur * 1000), step, path_fmt.format(step=step), "succeeded", nbytes=nbytes, dur=dur, node=node)
        out.append((t + int(dur * 1000), step))
        t += every
    return out


def watchdog(rank, ts, seq, timeout_ms, op="ALLREDUCE", numel=262144):
    return (f"[rank{rank}]:[E{glog(ts)} {2400 + rank} ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel}, Timeout(ms)={timeout_ms}) "
            f"ran for {timeout_ms + 37 + rank} milliseconds before timing out.")


def torchrun_fail(ts, local_rank, pid, exitcode, host, rank):
    return (f"torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: {exitcode}) local_rank: {local_rank} "
            f"(pid: {pid}) of binary: /usr/bin/python3\n"
            f"torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
            f"============================================================\n"
            f"train.py FAILED\n"
            f"------------------------------------------------------------\n"
            f"Root Cause (first observed failure):\n"
            f"[0]:\n  time      : {utc(ts).replace('T', '_')}\n  host      : {host}\n  rank      : {rank} (local_rank: {local_rank})\n"
            f"  exitcode  : {exitcode} (pid: {pid})")


def node_env(s, nodes, t_from, t_to, busy, every=60 * S, gpus=True, bmc=True, rdma=True, storage=None, facing=None,
             gpu_f=None, bmc_f=None, rdma_f=None, storage_f=None, port_f=None, ngpu=8, total=81559, versions=True,
             ver_over=None, ver_base=None, source="dcgm"):
    if versions:
        s.versions(nodes, t_from, every=H, t_to=t_to, over=ver_over, base=ver_base)
    if gpus:
        s.gpu_samples(nodes, t_from, t_to, every, busy, ngpu=ngpu, total=total, f=gpu_f, source=source)
    if bmc:
        s.bmc(nodes, t_from, t_to, 4 * every if every < 2 * M else every, f=bmc_f)
    if rdma:
        s.rdma(nodes, t_from, t_to, every, busy, f=rdma_f)
    if storage:
        s.storage(nodes, storage, t_from, t_to, every, f=storage_f)
    if facing:
        s.ports(facing, t_from, t_to, every, busy, f=port_f)


def leaf_topology(s, nodes, ts, leaf, seg, first_port, storage, extra=None):
    facing = {}
    for i, n in enumerate(nodes):
        p = f"Ethernet{first_port + i}"
        facing[n] = (leaf, p)
        links = [("mlx5_0", leaf, p, seg)] + (extra(n, i) if extra else [])
        s.topology(n, ts, links, storage)
    return facing


def simple_job(s, job, nodes, t_sub, t_start, gpn=8, **kw):
    s.job(job, 0, "pending", t_sub, nodes, gpn=gpn, reason="Resources", **kw)
    s.job(job, 0, "running", t_start, nodes, gpn=gpn, start=t_start, **kw)


# ------------------------------------------------------------------------------------------------
# scenarios
T_BASE = 1793520000000  # 2026-11-01T08:00:00Z


def p01_nvlink_remote_symptom():
    """2 x 8 H100 (hgx-a01, hgx-a02), per-rank progress. GPU 4 of hgx-a02 (rank 12) sees its cumulative
    NVLink error counter climb from 45 min (a few hundred/min growing to thousands/min), then XID 74
    (`NVLink: fatal error detected on link 6`) at 52.5 min; rank 12 hangs silently in its all-reduce.
    The watchdog of hgx-a01's ranks fires first (rank 3 first of all, 10 min later), hgx-a02's other
    ranks a few seconds after; rank 12 logs nothing. The symptom is on hgx-a01, the cause on hgx-a02.
    Expected: gpu_nvlink gpu:hgx-a02/4."""
    s = Scn("p01_nvlink_remote_symptom", T_BASE)
    t0, job, nodes = s.t0, "8815101", ["hgx-a01", "hgx-a02"]
    start, tx, end = t0 + 5 * M, t0 + 52 * M + 30 * S, t0 + 63 * M
    storage = [("/lustre/train", "lustre", 58)]
    facing = leaf_topology(s, nodes, t0, "leaf-a1", "pod-a", 1, [("/lustre/train", "lustre", "mds-a1")])

    def gpu_f(node, g, t, d):
        if node == "hgx-a02" and g == 4 and t >= t0 + 45 * M:
            k = (t - (t0 + 45 * M)) // M
            d["set_nvlink_errors"] = s.gpu_state[(node, g)]["nvlink_errors"] + 200 * (k + 1) ** 2
    node_env(s, nodes, t0, t0 + 75 * M, [(nodes, start, end)], storage=[("/lustre/train", "lustre", 58)], facing=facing, gpu_f=gpu_f)
    simple_job(s, job, nodes, t0 + 2 * M, start, name="llama-8b-sft")
    ranks = [(r, nodes[r // 8]) for r in range(16)]
    s.progress(job, start + M, t0 + 52 * M, M, 0, lambda t: 0.82, ranks=ranks)
    ckpt_series(s, job, start, tx, 20 * M, lambda t: int((t - start) / 820), "/lustre/train/llama8b/ckpt/step_{step}")
    s.xid("hgx-a02", tx, 4, "0000:9a:00", 74, 31877,
          "NVLink: fatal error detected on link 6(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)")
    fire = t0 + 62 * M + 35 * S
    order = [3, 0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15]
    for i, r in enumerate(order):
        ts = fire + i * 400 + (4 * S if r >= 8 else 0)
        s.log(job, ts, nodes[r // 8], r, watchdog(r, ts, 61204, 600000))
    s.log(job, end - 20 * S, "hgx-a01", None, torchrun_fail(fire, 3, 30112, -6, "hgx-a01", 3))
    s.job(job, 0, "failed", end, nodes, start=start, end=end, exit_code=1, reason="NonZeroExitCode", name="llama-8b-sft")
    return s


def p02_readonly_ckpt_mount_hour_before():
    """4 x 8 GPUs, checkpoints once an hour to NFS /mnt/ckpt (nas-ckpt01), data on /lustre/data.
    At 41 min the storage team flips the /mnt/ckpt export to read-only during a migration: every node's
    collector reports the mount `readonly` once (event-driven, not repeated); nothing writes there for
    54 min, training goes on. The 95-min checkpoint fails `[Errno 30] Read-only file system` and rank 0
    exits. The cause precedes the symptom by almost an hour. Expected: storage_unavailable path:/mnt/ckpt."""
    s = Scn("p02_readonly_ckpt_mount_hour_before", T_BASE + 1 * 24 * H)
    t0, job, nodes = s.t0, "8815202", [f"gpu-e0{i}" for i in range(1, 5)]
    start, end = t0 + 5 * M, t0 + 96 * M
    st = [("/mnt/ckpt", "nfs4", 72), ("/lustre/data", "lustre", 64)]
    facing = leaf_topology(s, nodes, t0, "leaf-e1", "pod-e", 9,
                           [("/mnt/ckpt", "nfs", "nas-ckpt01"), ("/lustre/data", "lustre", "mds-e1")])
    for n in nodes:
        s.mount(n, t0 + 30 * S, "/mnt/ckpt", "ok")
        s.mount(n, t0 + 31 * S, "/lustre/data", "ok")

    def st_f(node, path, t, d):
        if path == "/mnt/ckpt":
            d["write_iops"], d["write_mbps"] = 0.0, 0.0
    node_env(s, nodes, t0, t0 + 110 * M, [(nodes, start, end)], storage=st, facing=facing, storage_f=st_f)
    simple_job(s, job, nodes, t0 + M, start, name="moe-16x1b")
    step = lambda t: int((t - start) / 600)  # noqa: E731
    s.progress(job, start + M, t0 + 95 * M, M, 0, lambda t: 0.6)
    s.ckpt(job, t0 + 35 * M, step(t0 + 35 * M), f"/mnt/ckpt/moe16/step_{step(t0 + 35 * M)}", "started")
    s.ckpt(job, t0 + 35 * M + 52 * S, step(t0 + 35 * M), f"/mnt/ckpt/moe16/step_{step(t0 + 35 * M)}", "succeeded",
           nbytes=41_200_000_000, dur=52.0)
    for i, n in enumerate(nodes):
        s.mount(n, t0 + 41 * M + i * 700, "/mnt/ckpt", "readonly", "Read-only file system (EROFS)")
    tf = t0 + 95 * M
    k = step(tf)
    s.ckpt(job, tf, k, f"/mnt/ckpt/moe16/step_{k}", "started")
    err = f"[Errno 30] Read-only file system: '/mnt/ckpt/moe16/step_{k}/model_00.pt'"
    s.ckpt(job, tf + 3 * S, k, f"/mnt/ckpt/moe16/step_{k}", "failed", error=err)
    s.log(job, tf + 4 * S, "gpu-e01", 0, "Traceback (most recent call last):\n  File \"/workspace/train.py\", line 512, in <module>\n"
          "    main()\n  File \"/workspace/train.py\", line 498, in main\n    save_checkpoint(model, optim, step)\n"
          "  File \"/workspace/ckpt.py\", line 61, in save_checkpoint\n    torch.save(state, f)\n"
          f"OSError: {err}")
    s.log(job, tf + 25 * S, "gpu-e01", None, torchrun_fail(tf + 4 * S, 0, 22731, 1, "gpu-e01", 0))
    s.job(job, 0, "failed", end, nodes, start=start, end=end, exit_code=1, reason="NonZeroExitCode", name="moe-16x1b")
    return s


def p03_sbe_noise_and_cgroup_oom():
    """4 x 8 GPUs on Slurm. Harmless, inside the job: GPU 0 of gpu-b01 counts one correctable ECC error at
    20 min and another at 41 min; every GPU runs against its power cap part of the time (`sw_power_cap`,
    ~30 % of samples, 690-700 W). The real fault: at 58 min the kernel's cgroup OOM killer kills rank 21's
    process on gpu-b03 (host memory: a pinned-memory leak in the data pipeline; no container runtime
    events), slurmstepd reports the oom_kill, the job ends OUT_OF_MEMORY. GPU memory is normal.
    Expected: host_oom node:gpu-b03."""
    s = Scn("p03_sbe_noise_and_cgroup_oom", T_BASE + 2 * 24 * H)
    t0, job, nodes = s.t0, "8815303", [f"gpu-b0{i}" for i in range(1, 5)]
    start, tk, end = t0 + 3 * M, t0 + 58 * M, t0 + 58 * M + 40 * S
    facing = leaf_topology(s, nodes, t0, "leaf-b0", "pod-b0", 1, [("/lustre/scratch", "lustre", "mds-b")])

    def gpu_f(node, g, t, d):
        if start <= t < end and s.rng.random() < 0.3:
            d["throttle"], d["power_w"], d["sm_clock_mhz"] = ["sw_power_cap"], round(s.rng.uniform(690, 700), 1), 1755
        if node == "gpu-b01" and g == 0:
            d["set_ecc_sbe"] = 0 if t < t0 + 20 * M else (1 if t < t0 + 41 * M else 2)
    node_env(s, nodes, t0, t0 + 70 * M, [(nodes, start, end)], storage=[("/lustre/scratch", "lustre", 41)], facing=facing,
             gpu_f=gpu_f)
    simple_job(s, job, nodes, t0 + M, start, name="vit-h-pretrain")
    s.progress(job, start + M, tk, M, 0, lambda t: 1.4)
    ckpt_series(s, job, start, tk, 25 * M, lambda t: int((t - start) / 1400), "/lustre/scratch/vith/ckpt/{step}.pt")
    n = "gpu-b03"
    s.log(job, tk - 2 * S, n, None, "python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0",
          stream="kernel", source=f"kernel@{n}")
    s.log(job, tk, n, None, "Memory cgroup out of memory: Killed process 48213 (python3) total-vm:712345678kB, "
          "anon-rss:498123456kB, file-rss:102400kB, shmem-rss:0kB, UID:41012 pgtables:987654kB oom_score_adj:0",
          stream="kernel", source=f"kernel@{n}")
    s.log(job, tk + 3 * S, n, None, torchrun_fail(tk, 5, 48213, -9, n, 21))
    s.log(job, tk + 30 * S, n, None, f"slurmstepd: error: Detected 1 oom_kill event in StepId={job}.0. "
          "Some of the step tasks have been OOM Killed.", source="slurmstepd@" + n)
    s.job(job, 0, "out_of_memory", end, nodes, start=start, end=end, exit_code=0, signal=9, reason="OutOfMemory",
          name="vit-h-pretrain")
    return s


def p04_xid79_retry_same_node_then_timelimit():
    """2 x 8 GPUs, job 8815404 retried by the site's requeue-on-XID hook, three attempts with different
    ends. Attempt 0 (dgx-c01, dgx-c02): GPU 3 of dgx-c02 falls off the bus at 40 min (XID 79, samples
    stop), rank 11 `CUDA error: unspecified launch failure`, the others' watchdog at 50 min; FAILED.
    The hook resets the GPU (samples come back) but does not drain the node: attempt 1 runs on the same
    two nodes, resumes from the checkpoint, and GPU 3 falls off again after 5 min; FAILED. The node is
    drained; attempt 2 on dgx-c01 + dgx-c05 trains normally for its whole 2-hour limit and is ended by the
    time limit (TIMEOUT) while still making progress. Expected: attempts 0 and 1 gpu_hardware
    gpu:dgx-c02/3; attempt 2 scheduler job:8815404."""
    s = Scn("p04_xid79_retry_same_node_then_timelimit", T_BASE + 3 * 24 * H)
    t0, job = s.t0, "8815404"
    n1, n2 = ["dgx-c01", "dgx-c02"], ["dgx-c01", "dgx-c05"]
    allnodes = ["dgx-c01", "dgx-c02", "dgx-c05"]
    a0s, x0, a0e = t0 + 2 * M, t0 + 40 * M, t0 + 50 * M + 30 * S
    a1s, x1, a1e = t0 + 53 * M, t0 + 58 * M, t0 + 68 * M + 30 * S
    a2s = t0 + 72 * M
    a2e = a2s + 120 * M
    facing = leaf_topology(s, allnodes, t0, "leaf-c0", "pod-c", 1, [("/lustre/ckpt", "lustre", "mds-c")])

    def gpu_f(node, g, t, d):
        if node == "dgx-c02" and g == 3 and (x0 <= t < t0 + 52 * M or t >= x1):
            return False
    busy = [(n1, a0s, a0e), (n1, a1s, a1e), (n2, a2s, a2e)]
    node_env(s, allnodes, t0, a2e + 10 * M, busy, storage=[("/lustre/ckpt", "lustre", 55)], facing=facing, gpu_f=gpu_f)
    path = "/lustre/ckpt/gpt-13b/iter_{step:07d}"
    st = 1.05
    # attempt 0
    simple_job(s, job, n1, t0, a0s, name="gpt-13b")
    s.progress(job, a0s + M, x0, M, 0, lambda t: st)
    c0 = ckpt_series(s, job, a0s, x0, 15 * M, lambda t: int((t - a0s) / (st * 1000)), path)
    s.xid("dgx-c02", x0, 3, "0000:4e:00", 79, 20931, "GPU has fallen off the bus.")
    s.log(job, x0 + 2 * S, "dgx-c02", 11, "[rank11]: RuntimeError: CUDA error: unspecified launch failure\n"
          "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.")
    for r in (0, 5, 8, 14):
        s.log(job, x0 + 10 * M + r * 300, n1[r // 8], r, watchdog(r, x0 + 10 * M + r * 300, 45877, 600000))
    s.job(job, 0, "failed", a0e, n1, start=a0s, end=a0e, exit_code=1, reason="NonZeroExitCode", name="gpt-13b")
    s.log(job, t0 + 51 * M, "dgx-c02", None, "nvidia-smi -r -i 3: GPU 00000000:4E:00.0 was successfully reset.",
          stream="stdout", source="requeue-hook@dgx-c02")
    # attempt 1: same nodes, resumes from attempt 0's last checkpoint
    s.job(job, 1, "pending", t0 + 51 * M + 10 * S, n1, reason="BeginTime", name="gpt-13b")
    s.job(job, 1, "running", a1s, n1, start=a1s, name="gpt-13b")
    s.progress(job, a1s + 2 * M, x1, M, c0[-1][1], lambda t: st)
    s.xid("dgx-c02", x1, 3, "0000:4e:00", 79, 22014, "GPU has fallen off the bus.")
    s.log(job, x1 + 2 * S, "dgx-c02", 11, "[rank11]: RuntimeError: CUDA error: unspecified launch failure")
    for r in (0, 6, 9):
        s.log(job, x1 + 10 * M + r * 300, n1[r // 8], r, watchdog(r, x1 + 10 * M + r * 300, 3110, 600000))
    s.job(job, 1, "failed", a1e, n1, start=a1s, end=a1e, exit_code=1, reason="NonZeroExitCode", name="gpt-13b")
    s.sched_node("dgx-c02", a1e + 20 * S, "drain", "Xid 79 twice on GPU 3 (hook)")
    # attempt 2: other nodes, runs into its time limit while progressing
    s.job(job, 2, "pending", a1e + 30 * S, n2, reason="BeginTime", name="gpt-13b")
    s.job(job, 2, "running", a2s, n2, start=a2s, name="gpt-13b")
    s0 = c0[-1][1]
    s.progress(job, a2s + 2 * M, a2e, M, s0, lambda t: st)
    ckpt_series(s, job, a2s, a2e, 15 * M, lambda t: s0 + int((t - a2s - 2 * M) / (st * 1000)), path)
    s.log(job, a2e, "dgx-c01", None, f"slurmstepd: error: *** JOB {job} ON dgx-c01 CANCELLED AT {utc(a2e)} DUE TO TIME LIMIT ***",
          source="slurmstepd@dgx-c01")
    s.job(job, 2, "timeout", a2e + 5 * S, n2, start=a2s, end=a2e, exit_code=0, signal=15, reason="TimeLimit", name="gpt-13b")
    return s


def p05_clock_skew_xid_after_end():
    """4 x 8 GPUs; gpu-k13's clock runs 6 minutes ahead (chrony lost its sources): every event its own
    collectors stamp (samples, XID, BMC, storage, its ranks' log lines) is 6 min late on the common clock;
    the scheduler and rank 0's progress use good clocks. GPU 6 of gpu-k13 (rank 22) takes a double-bit
    ECC error at true 50 min (XID 48, ecc_dbe 0 -> 1, rank 22 `uncorrectable ECC error encountered`); the
    others' watchdog (5-min NCCL timeout) fires at 55 min and the job fails at 55.7 min, so on the common
    clock the XID (stamped 56 min) comes *after* the job's end. Expected: gpu_hardware gpu:gpu-k13/6."""
    s = Scn("p05_clock_skew_xid_after_end", T_BASE + 4 * 24 * H)
    t0, job, nodes = s.t0, "8815505", ["gpu-k11", "gpu-k12", "gpu-k13", "gpu-k14"]
    s.skew["gpu-k13"] = 6 * M
    start, tx, end = t0 + 4 * M, t0 + 50 * M, t0 + 55 * M + 40 * S
    facing = leaf_topology(s, nodes, t0, "leaf-k1", "pod-k", 11, [("/weka/train", "wekafs", "weka-k")])

    def gpu_f(node, g, t, d):
        if node == "gpu-k13" and g == 6:
            d["set_ecc_dbe"] = 1 if t >= tx else 0
    node_env(s, nodes, t0, t0 + 70 * M, [(nodes, start, end)], storage=[("/weka/train", "wekafs", 49)], facing=facing,
             gpu_f=gpu_f)
    simple_job(s, job, nodes, t0 + M, start, name="dit-xl")
    s.progress(job, start + M, tx, M, 0, lambda t: 0.95)
    ckpt_series(s, job, start, tx, 15 * M, lambda t: int((t - start) / 950), "/weka/train/dit/ckpt-{step}")
    s.xid("gpu-k13", tx, 6, "0000:9d:00", 48, 71002,
          "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.")
    s.log(job, tx + S, "gpu-k13", 22, "[rank22]: RuntimeError: CUDA error: uncorrectable ECC error encountered\n"
          "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")
    for r in (0, 9, 17, 25):
        ts = tx + 5 * M + r * 200
        s.log(job, ts, nodes[r // 8], r, watchdog(r, ts, 22841, 300000))
    s.job(job, 0, "failed", end, nodes, start=start, end=end, exit_code=1, reason="NonZeroExitCode", name="dit-xl")
    return s


def p06_k8s_preempted_sigterm_nccl_noise():
    """Kubernetes + Kueue, PyTorchJob pt-rlhf-7xk2m on 4 x 8 GPUs (a3-node-0101..0104). At 47 min Kueue
    preempts the workload for a higher-priority one: the pods get SIGTERM, torchrun logs the death
    signal, several ranks print NCCL `remote process exited or there was a network error` and an IB
    completion with status=5 (flush) while peers vanish; containers killed with exit 143. The workload's
    `preempted` record reaches the stream 20 s after the pods' errors. Attempt 1 is admitted 33 min later
    on a3-node-0105..0108, resumes from the checkpoint and completes. Expected: attempt 0 scheduler
    job:pt-rlhf-7xk2m; attempt 1 no incident."""
    s = Scn("p06_k8s_preempted_sigterm_nccl_noise", T_BASE + 5 * 24 * H)
    t0, job = s.t0, "pt-rlhf-7xk2m"
    n0 = [f"a3-node-01{i:02d}" for i in range(1, 5)]
    n1 = [f"a3-node-01{i:02d}" for i in range(5, 9)]
    kw = dict(source="kubernetes@kueue-controller", name="rlhf-ppo", user="team-align", tenant="align",
              image="registry.corp/align/ppo:2026.11.3")
    a0s, tp, a1s, a1e = t0 + 4 * M, t0 + 47 * M, t0 + 80 * M, t0 + 150 * M
    facing = leaf_topology(s, n0 + n1, t0, "leaf-k8", "pod-k8", 1, [("/mnt/fsx", "lustre", "fsx-1")])
    node_env(s, n0 + n1, t0, a1e + 5 * M, [(n0, a0s, tp + 30 * S), (n1, a1s, a1e)], storage=[("/mnt/fsx", "lustre", 37)],
             facing=facing)
    s.job(job, 0, "pending", t0 + M, n0, reason="Waiting for quota", **kw)
    s.job(job, 0, "running", a0s, n0, start=a0s, **kw)
    st = 2.1
    s.progress(job, a0s + M, tp, M, 0, lambda t: st, tenant="align")
    c = ckpt_series(s, job, a0s, tp, 20 * M, lambda t: int((t - a0s) / (st * 1000)), "/mnt/fsx/ppo/ckpt/{step}",
                    nbytes=9_000_000_000, dur=18.0)
    for i, n in enumerate(n0):
        s.log(job, tp + i * 150, n, i * 8, "[2026-11-25 08:47:00,118] torch.distributed.elastic.agent.server.api: [WARNING] "
              "Received Signals.SIGTERM death signal, shutting down workers", stream="stdout", tenant="align",
              source=f"logs@{n}")
    for r in (3, 12, 22, 29):
        n = n0[r // 8]
        ts = tp + 2 * S + r * 50
        s.log(job, ts, n, r, f"[rank{r}]:[E{glog(ts)} 611 ProcessGroupNCCL.cpp:1316] [PG 0 Rank {r}] Process group watchdog "
              "thread terminated with exception: NCCL error: remote process exited or there was a network error, NCCL version "
              "2.21.5\nncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
              tenant="align")
        s.log(job, ts + 10, n, r, f"{n}:{611 + r}:{700 + r} [{r % 8}] NCCL WARN NET/IB : Got completion from peer "
              f"10.7.1.{r // 8 + 3}<5{1234 + r}> with status=5 opcode=0 len=0 vendor err 249 (Recv) localGid ::ffff:10.7.1.{r // 8 + 11} "
              "remoteGid ::ffff:10.7.1.3 hca mlx5_3", tenant="align")
    for n in n0:
        s.container(job, tp + 25 * S, n, "trainer", "killed", 143, tenant="align")
    s.job(job, 0, "preempted", tp + 45 * S, n0, start=a0s, end=tp + 26 * S, exit_code=143, signal=15,
          reason="Preempted to accommodate a workload (UID: 8c1e0a57-3f2d-4d9b-a7e1-52b1d0c6f3aa) due to prioritization",
          **kw)
    s.job(job, 1, "pending", tp + 50 * S, n1, reason="Waiting for quota", **kw)
    s.job(job, 1, "running", a1s, n1, start=a1s, **kw)
    s0 = c[-1][1]
    s.progress(job, a1s + 2 * M, a1e - M, M, s0, lambda t: st, tenant="align")
    ckpt_series(s, job, a1s, a1e - M, 20 * M, lambda t: s0 + int((t - a1s - 2 * M) / (st * 1000)), "/mnt/fsx/ppo/ckpt/{step}",
                nbytes=9_000_000_000, dur=18.0)
    s.job(job, 1, "completed", a1e, n1, start=a1s, end=a1e, exit_code=0, reason=None, **kw)
    return s


def p07_k8s_ephemeral_storage_eviction():
    """Kubernetes, job pt-pretrain-q8v4d on 2 x 8 GPUs. The trainer caches decoded shards under /tmp in the
    pod (emptyDir on the node's root disk, /var/lib/kubelet): on a3-node-0202 (the node with the larger
    share) used_pct climbs from 40 % to 91 % over an hour. The kubelet's eviction manager evicts the pod
    (`The node was low on resource: ephemeral-storage`), container killed 137, the peers' NCCL collectives
    abort, the job fails. Expected: storage_full path:/var/lib/kubelet (alt: application job, the user's
    cache filled the disk)."""
    s = Scn("p07_k8s_ephemeral_storage_eviction", T_BASE + 6 * 24 * H)
    t0, job, nodes = s.t0, "pt-pretrain-q8v4d", ["a3-node-0201", "a3-node-0202"]
    kw = dict(source="kubernetes@training-operator", name="pretrain-3b", user="team-lm", tenant="lm",
              image="registry.corp/lm/pretrain:v3.8")
    start, te, end = t0 + 3 * M, t0 + 70 * M, t0 + 71 * M
    facing = leaf_topology(s, nodes, t0, "leaf-k9", "pod-k9", 5,
                           [("/var/lib/kubelet", "local", "nvme0n1p2"), ("/mnt/data", "nfs", "nas-lm")])

    def st_f(node, path, t, d):
        if path == "/var/lib/kubelet":
            share = 1.0 if node == "a3-node-0202" else 0.35
            grow = max(0, min(t, te) - (t0 + 10 * M)) / (60 * M)
            d["used_pct"] = round(min(91.3, 40 + 51.3 * grow * share), 1)
            d["write_mbps"] = round(d["write_mbps"] + (420 * share if start <= t < te else 0), 1)
    node_env(s, nodes, t0, t0 + 80 * M, [(nodes, start, end)], storage=[("/var/lib/kubelet", "ext4", 40), ("/mnt/data", "nfs4", 66)],
             facing=facing, storage_f=st_f)
    s.job(job, 0, "pending", t0 + M, nodes, reason=None, **kw)
    s.job(job, 0, "running", start, nodes, start=start, **kw)
    s.progress(job, start + M, te, M, 0, lambda t: 1.3, tenant="lm")
    ckpt_series(s, job, start, te, 30 * M, lambda t: int((t - start) / 1300), "/mnt/data/ckpt/pretrain-3b/{step}",
                nbytes=12_000_000_000, dur=30.0)
    n = "a3-node-0202"
    s.log(job, te - 30 * S, n, None, "eviction_manager.go:366] \"Eviction manager: attempting to reclaim\" resourceName=\"ephemeral-storage\"",
          stream="container", tenant="lm", source=f"kubelet@{n}")
    s.log(job, te, n, None, "Evicted: The node was low on resource: ephemeral-storage. Threshold quantity: 10%, available: 8.7%. "
          "Container trainer was using 1650Gi, request is 0, has larger consumption of ephemeral-storage.",
          stream="container", tenant="lm", source=f"kubelet@{n}")
    s.container(job, te + 2 * S, n, "trainer", "killed", 137, tenant="lm")
    for r in (0, 3):
        s.log(job, te + 8 * S + r * 100, "a3-node-0201", r, f"[rank{r}]:[E{glog(te + 8 * S)} 517 ProcessGroupNCCL.cpp:1316] "
              f"[PG 0 Rank {r}] Process group watchdog thread terminated with exception: NCCL error: remote process exited or "
              "there was a network error, NCCL version 2.21.5", tenant="lm")
    s.job(job, 0, "failed", end, nodes, start=start, end=end, exit_code=137, reason="Pod pt-pretrain-q8v4d-worker-1 evicted: "
          "The node was low on resource: ephemeral-storage", **kw)
    return s


def p08_psu_warn_other_node_mem_ue_sigbus():
    """4 x 8 GPUs. Two hardware events in one job, one harmless: at 30 min gpu-m01's BMC loses PSU
    redundancy (warning SEL `RDU0012`, PSU2 status warning; the node runs on PSU1, nothing else
    changes). At 52 min gpu-m03 takes an uncorrectable DIMM error (critical SEL `MEM0001` on DIMM_B3,
    kernel `mce: [Hardware Error]` + EDAC UE line + `Memory failure: ... Sending SIGBUS to python3`); the
    node stays up (no panic, no node_fail), only rank 21's process dies of SIGBUS; the job fails.
    Expected: node_hardware node:gpu-m03."""
    s = Scn("p08_psu_warn_other_node_mem_ue_sigbus", T_BASE + 7 * 24 * H)
    t0, job, nodes = s.t0, "8815808", [f"gpu-m0{i}" for i in range(1, 5)]
    start, tu, end = t0 + 4 * M, t0 + 52 * M, t0 + 52 * M + 40 * S
    facing = leaf_topology(s, nodes, t0, "leaf-m1", "pod-m", 1, [("/lustre/scratch", "lustre", "mds-m")])

    def bmc_f(node, t, d):
        if node == "gpu-m01" and d["sensor"] == "PSU2 Input Power" and t >= t0 + 30 * M:
            d["value"], d["status"] = 0.0, "warning"
        if node == "gpu-m01" and d["sensor"] == "PSU1 Input Power" and t >= t0 + 30 * M:
            d["value"] = float(s.rng.randrange(2950, 3300, 10))
    node_env(s, nodes, t0, t0 + 70 * M, [(nodes, start, end)], storage=[("/lustre/scratch", "lustre", 52)], facing=facing,
             bmc_f=bmc_f)
    simple_job(s, job, nodes, t0 + M, start, name="t5-xxl")
    s.progress(job, start + M, tu, M, 0, lambda t: 1.7)
    ckpt_series(s, job, start, tu, 20 * M, lambda t: int((t - start) / 1700), "/lustre/scratch/t5/ckpt/{step}")
    s.sel("gpu-m01", t0 + 30 * M, 211, "warning", "Power Supply", "PSU0003", "The power input for power supply 2 is lost.")
    s.sel("gpu-m01", t0 + 30 * M + 2 * S, 212, "warning", "Power Supply", "RDU0012", "Power supply redundancy is lost.")
    n = "gpu-m03"
    s.sel(n, tu - S, 87, "critical", "Memory", "MEM0001", "Multi-bit memory errors detected on a memory device at location(s) DIMM_B3.")
    for i, line in enumerate([
            "mce: [Hardware Error]: Machine check events logged",
            "EDAC MC1: 1 UE memory read error on CPU_SrcID#1_MC#0_Chan#1_DIMM#0 (channel:1 slot:0 page:0x3a4f12 offset:0x0 "
            "grain:32 syndrome:0x0 - err_code:0x0101:0x0090 socket:1 imc:0 rank:0 bg:1 ba:2 row:0x1a2b col:0x3c0)",
            "Memory failure: 0x3a4f12: Sending SIGBUS to python3:61734 due to hardware memory corruption",
            "Memory failure: 0x3a4f12: recovery action for dirty LRU page: Recovered"]):
        s.log(job, tu + i * 200, n, None, line, stream="kernel", source=f"kernel@{n}")
    s.log(job, tu + 2 * S, n, 21, "Signal 7 (SIGBUS) received by PID 61734")
    s.log(job, tu + 5 * S, n, None, torchrun_fail(tu, 5, 61734, -7, n, 21))
    s.job(job, 0, "failed", end, nodes, start=start, end=end, exit_code=1, reason="NonZeroExitCode", name="t5-xxl")
    return s


def p09_nfs_home_stale_stall_cancel():
    """4 x 8 GPUs; code, venv and the log directory live on NFS /home (home-nfs01), data and checkpoints
    on Lustre (healthy all along). At 40 min home-nfs01 hangs: every node's kernel prints `nfs: server
    home-nfs01 not responding, still trying`, the collectors report /home `stale` once and its samples
    stop (stat hangs); the ranks block on a log write and progress stops (last at ~39.5 min); hung-task
    warnings at 43 min. The user notices 45 min later and scancels it (CANCELLED while stalled).
    Expected: storage_unavailable path:/home."""
    s = Scn("p09_nfs_home_stale_stall_cancel", T_BASE + 8 * 24 * H)
    t0, job, nodes = s.t0, "8815909", [f"gpu-h2{i}" for i in range(1, 5)]
    start, th, tc = t0 + 3 * M, t0 + 40 * M, t0 + 85 * M
    st = [("/home", "nfs4", 81), ("/lustre/scratch", "lustre", 47)]
    facing = leaf_topology(s, nodes, t0, "leaf-h2", "pod-h", 21, [("/home", "nfs", "home-nfs01"), ("/lustre/scratch", "lustre", "mds-h")])
    for n in nodes:
        s.mount(n, t0 + 20 * S, "/home", "ok")

    def st_f(node, path, t, d):
        if path == "/home" and t >= th:
            return False
    node_env(s, nodes, t0, t0 + 95 * M, [(nodes, start, th)], storage=st, facing=facing, storage_f=st_f)
    simple_job(s, job, nodes, t0 + M, start, name="whisper-ft", user="mlee")
    s.progress(job, start + M, th, M, 0, lambda t: 0.7, ranks=((0, "gpu-h21"), (8, "gpu-h22"), (16, "gpu-h23"), (24, "gpu-h24")))
    ckpt_series(s, job, start, th, 15 * M, lambda t: int((t - start) / 700), "/lustre/scratch/mlee/whisper/ckpt-{step}")
    for i, n in enumerate(nodes):
        s.log(job, th + 40 * S + i * 900, n, None, "nfs: server home-nfs01 not responding, still trying", stream="kernel",
              source=f"kernel@{n}")
        s.mount(n, th + 2 * M + i * 1100, "/home", "stale", "server home-nfs01 not responding")
        s.log(job, th + 3 * M + 10 * S + i * 800, n, None, f"INFO: task python3:{40121 + i} blocked for more than 122 seconds.\n"
              "      Tainted: P           OE     5.15.0-105-generic #115-Ubuntu\n"
              "\"echo 0 > /proc/sys/kernel/hung_task_timeout_secs\" disables this message.", stream="kernel", source=f"kernel@{n}")
    s.log(job, tc, "gpu-h21", None, f"slurmstepd: error: *** JOB {job} ON gpu-h21 CANCELLED AT {utc(tc)} ***",
          source="slurmstepd@gpu-h21")
    s.job(job, 0, "cancelled", tc + 3 * S, nodes, start=start, end=tc, exit_code=0, signal=15, reason=None, name="whisper-ft",
          user="mlee")
    return s


def p10_gpu_fw_rollout_xid119_regression():
    """4 x 8 GPUs (hgx-g01..g04). Job 8816001 runs on g01+g02 and completes. At 70 min a firmware
    rollout (CHG-9931) drains g01 and g02, flashes GPU firmware 96.00.74.00.11 -> 96.00.89.00.01 and
    reboots them (GPU samples gap). The next two jobs on g01+g02 both fail with XID 119 (GSP RPC
    timeout) on different GPUs (8816002: g01 GPU 5 after 35 min; 8816003: g02 GPU 1 after 31 min);
    job 8816004 on g03+g04 (old firmware) runs through the whole period and completes. No ECC, no
    NVLink growth, temperatures normal. Expected: 8816002 and 8816003 change_regression
    version:gpu_firmware=96.00.89.00.01; 8816001 and 8816004 no incident."""
    s = Scn("p10_gpu_fw_rollout_xid119_regression", T_BASE + 9 * 24 * H)
    t0 = s.t0
    a, b = ["hgx-g01", "hgx-g02"], ["hgx-g03", "hgx-g04"]
    nodes = a + b
    NEW = "96.00.89.00.01"
    j1 = ("8816001", t0 + 2 * M, t0 + 60 * M)
    j4 = ("8816004", t0 + 20 * M, t0 + 200 * M)
    j2s, x2, j2e = t0 + 95 * M, t0 + 130 * M, t0 + 140 * M + 20 * S
    j3s, x3, j3e = t0 + 142 * M, t0 + 173 * M, t0 + 183 * M + 20 * S
    tchg = t0 + 76 * M
    facing = leaf_topology(s, nodes, t0, "leaf-g1", "pod-g", 1, [("/lustre/ckpt", "lustre", "mds-g")])

    def gpu_f(node, g, t, d):
        if node in a and t0 + 72 * M <= t < t0 + 86 * M:
            return False
        if (node, g) == ("hgx-g01", 5) and x2 <= t < j2e + M:
            return False
        if (node, g) == ("hgx-g02", 1) and x3 <= t < j3e + M:
            return False

    def ver(node, t):
        return {"gpu_firmware": NEW} if node in a and t >= tchg else {}
    busy = [(a, j1[1], j1[2]), (b, j4[1], j4[2]), (a, j2s, j2e), (a, j3s, j3e)]
    node_env(s, nodes, t0, t0 + 205 * M, busy, storage=[("/lustre/ckpt", "lustre", 60)], facing=facing, gpu_f=gpu_f,
             ver_over=ver)
    for n in a:
        s.sched_node(n, t0 + 70 * M, "drain", "CHG-9931 GPU firmware rollout")
        s.change(n, tchg, "gpu_firmware", "96.00.74.00.11", NEW, "fw-rollout@ops", "CHG-9931")
        s.sched_node(n, t0 + 88 * M, "idle", None)
    path = "/lustre/ckpt/{job}/step_{step}"
    for job, js, je, ns in (j1 + (a,), j4 + (b,)):
        simple_job(s, job, ns, js - M, js, name="llm-eval" if job == "8816001" else "llm-pretrain")
        s.progress(job, js + M, je - M, M, 0, lambda t: 1.2)
        ckpt_series(s, job, js, je - M, 30 * M, lambda t, js=js: int((t - js) / 1200), path.replace("{job}", job))
        s.job(job, 0, "completed", je, ns, start=js, end=je, exit_code=0, name="llm-eval" if job == "8816001" else "llm-pretrain")
    for job, js, tx, je, node, g, pci in (("8816002", j2s, x2, j2e, "hgx-g01", 5, "0000:b8:00"),
                                          ("8816003", j3s, x3, j3e, "hgx-g02", 1, "0000:2a:00")):
        simple_job(s, job, a, js - 2 * M, js, name="llm-sft")
        s.progress(job, js + M, tx, M, 0, lambda t: 1.2)
        ckpt_series(s, job, js, tx, 15 * M, lambda t, js=js: int((t - js) / 1200), path.replace("{job}", job))
        s.xid(node, tx, g, pci, 119, 30411 + g,
              f"Timeout after 6s of waiting for RPC response from GPU{g} GSP! Expected function 76 (GSP_RM_CONTROL) "
              "(0x20802a02 0x8).")
        r = a.index(node) * 8 + g
        s.log(job, tx + 3 * S, node, r, f"[rank{r}]: RuntimeError: CUDA error: unspecified launch failure")
        other = 8 - a.index(node) * 8
        s.log(job, tx + 10 * M, a[1 - a.index(node)], other, watchdog(other, tx + 10 * M, 9120, 600000))
        s.job(job, 0, "failed", je, a, start=js, end=je, exit_code=1, reason="NonZeroExitCode", name="llm-sft")
    return s


def p11_psu_failure_power_brake_timelimit():
    """4 x 8 GPUs, 4-hour limit for a run that needs about 3 hours. At 60 min PSU1 of gpu-q02 fails
    (critical SEL `PSU0006`, PSU1 input power 0) and redundancy is lost; the BMC asserts the GPU power
    brake: gpu-q02's eight GPUs report `power_brake` throttling, clocks 1980 -> ~700 MHz, power ~250 W.
    The whole synchronous job now runs at gpu-q02's pace (step time 1.1 s -> 3.6 s) and is ended by the
    time limit (TIMEOUT) at 4 h, still progressing. BMC temperatures normal. Expected: node_hardware
    node:gpu-q02 (alt: thermal_throttle on any of its GPUs, the straggler)."""
    s = Scn("p11_psu_failure_power_brake_timelimit", T_BASE + 10 * 24 * H)
    t0, job, nodes = s.t0, "8816111", [f"gpu-q0{i}" for i in range(1, 5)]
    start, tp = t0 + 5 * M, t0 + 60 * M
    end = start + 240 * M
    facing = leaf_topology(s, nodes, t0, "leaf-q1", "pod-q", 1, [("/lustre/ckpt", "lustre", "mds-q")])

    def gpu_f(node, g, t, d):
        if node == "gpu-q02" and t >= tp and start <= t < end:
            d["throttle"], d["sm_clock_mhz"] = ["power_brake"], s.rng.randint(660, 720)
            d["power_w"], d["util_pct"], d["temp_c"] = round(s.rng.uniform(235, 262), 1), 100, s.rng.randint(45, 50)

    def bmc_f(node, t, d):
        if node == "gpu-q02" and t >= tp and d["sensor"] == "PSU1 Input Power":
            d["value"], d["status"] = 0.0, "critical"
    node_env(s, nodes, t0, end + 10 * M, [(nodes, start, end)], every=2 * M, storage=[("/lustre/ckpt", "lustre", 44)],
             facing=facing, gpu_f=gpu_f, bmc_f=bmc_f)
    simple_job(s, job, nodes, t0 + M, start, name="sd3-finetune")
    stt = lambda t: 1.1 if t < tp else 3.6  # noqa: E731
    s.progress(job, start + M, end, M, 0, stt)

    def step_at(t):
        return int((min(t, tp) - start) / 1100) + int(max(0, t - tp) / 3600)
    ckpt_series(s, job, start, end, 30 * M, step_at, "/lustre/ckpt/sd3/step_{step}")
    s.sel("gpu-q02", tp, 301, "critical", "Power Supply", "PSU0006", "Power supply 1 is failed.")
    s.sel("gpu-q02", tp + 3 * S, 302, "warning", "Power Supply", "RDU0012", "Power supply redundancy is lost.")
    s.sel("gpu-q02", tp + 5 * S, 303, "warning", "Power Unit", "PWR2262",
          "The system performance is reduced because the power supply capacity is less than the system power draw.")
    s.log(job, end, "gpu-q01", None, f"slurmstepd: error: *** JOB {job} ON gpu-q01 CANCELLED AT {utc(end)} DUE TO TIME LIMIT ***",
          source="slurmstepd@gpu-q01")
    s.job(job, 0, "timeout", end + 4 * S, nodes, start=start, end=end, exit_code=0, signal=15, reason="TimeLimit",
          name="sd3-finetune")
    return s


def p12_noisy_neighbor_congestion():
    """8 nodes on leaf-pb1 (segment pod-b). Our job 8816212 trains on gpu-b11..b14 from 2 min; another
    tenant's job 8816299 on gpu-b15..b18 starts a heavy all-to-all at 30 min and completes at 80 min.
    From 31 min every HCA in pod-b shows CNP/ECN counters climbing by ~1e5/min (a few dozen before),
    the leaf ports' out_discards jump (no errors, no link change); our HCAs' local_ack_timeout_err and
    out_of_sequence grow; our step time goes 0.9 -> 2.8 s; a collective hangs at 47 min and at 57 min
    rank 6 reports an IB completion with status=12 (retry exceeded) and the watchdogs fire; FAILED.
    Expected: network_congestion segment:pod-b; the neighbour job no incident."""
    s = Scn("p12_noisy_neighbor_congestion", T_BASE + 11 * 24 * H)
    t0 = s.t0
    ours, theirs = [f"gpu-b1{i}" for i in range(1, 5)], [f"gpu-b1{i}" for i in range(5, 9)]
    nodes = ours + theirs
    job, nj = "8816212", "8816299"
    start, tc, th, end = t0 + 2 * M, t0 + 31 * M, t0 + 47 * M, t0 + 57 * M + 40 * S
    ns, ne = t0 + 30 * M, t0 + 80 * M
    facing = leaf_topology(s, nodes, t0, "leaf-pb1", "pod-b", 11, [("/lustre/b", "lustre", "mds-b")])

    def rdma_f(node, dev, t, inc, st):
        if tc <= t < ne:
            r = s.rng
            inc["np_cnp_sent"] += r.randint(60000, 150000)
            inc["rp_cnp_handled"] += r.randint(60000, 150000)
            inc["np_ecn_marked_roce_packets"] += r.randint(90000, 200000)
            if node in ours and t < end:
                inc["local_ack_timeout_err"] += r.randint(20, 80)
                inc["out_of_sequence"] += r.randint(200, 900)
                inc["packet_seq_err"] += r.randint(0, 30)

    def port_f(node, sw, port, t, d, inc, st):
        if tc <= t < ne:
            inc["out_discards"] += s.rng.randint(1000, 5000)
    node_env(s, nodes, t0, t0 + 90 * M, [(ours, start, end), (theirs, ns, ne)], storage=[("/lustre/b", "lustre", 50)],
             facing=facing, rdma_f=rdma_f, port_f=port_f)
    simple_job(s, job, ours, t0 + M, start, name="llama-70b-lora")
    stt = lambda t: 0.9 if t < tc else 2.8  # noqa: E731
    ranks = [(r, ours[r // 8]) for r in range(0, 32, 8)]
    s.progress(job, start + M, th, M, 0, stt, ranks=ranks)
    ckpt_series(s, job, start, th, 20 * M, lambda t: int((min(t, tc) - start) / 900 + max(0, t - tc) / 2800),
                "/lustre/b/l70/ckpt/{step}")
    simple_job(s, nj, theirs, ns - M, ns, name="clip-alltoall", user="bob", tenant="vision")
    s.progress(nj, ns + M, ne - M, M, 0, lambda t: 0.5, tenant="vision")
    s.job(nj, 0, "completed", ne, theirs, start=ns, end=ne, exit_code=0, name="clip-alltoall", user="bob", tenant="vision")
    tf = t0 + 57 * M
    s.log(job, tf, "gpu-b11", 6, "gpu-b11:81234:81890 [6] NCCL WARN NET/IB : Got completion from peer 10.3.2.14<47163> with "
          "status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.3.2.11 remoteGid ::ffff:10.3.2.14 hca mlx5_1")
    for r in (0, 9, 18, 27):
        s.log(job, tf + 2 * S + r * 100, ours[r // 8], r, watchdog(r, tf + 2 * S, 70311, 600000))
    s.job(job, 0, "failed", end, ours, start=start, end=end, exit_code=1, reason="NonZeroExitCode", name="llama-70b-lora")
    return s


def p13_gpu_oom_no_nvml_site():
    """A university site with partial telemetry: no NVML/DCGM, no BMC, no RDMA, no switch collector; only
    Slurm, storage samples, inventory and the training logs (rank 0 progress every 2 min). 3 x 4 A100-40GB
    (c3-n017..019). After a sequence-length bump at 33 min rank 9 (c3-n019, local GPU 1) dies
    `torch.OutOfMemoryError: CUDA out of memory ... GPU 1 has a total capacity of 39.39 GiB`; torchrun
    tears the job down. Expected: gpu_oom gpu:c3-n019/1."""
    s = Scn("p13_gpu_oom_no_nvml_site", T_BASE + 12 * 24 * H)
    t0, job, nodes = s.t0, "8816313", ["c3-n017", "c3-n018", "c3-n019"]
    start, to, end = t0 + 2 * M, t0 + 33 * M, t0 + 33 * M + 25 * S
    node_env(s, nodes, t0, t0 + 45 * M, [(nodes, start, end)], gpus=False, bmc=False, rdma=False,
             storage=[("/gpfs/projects", "gpfs", 77)], ver_base=dict(driver="535.161.08", cuda="12.2", nccl="2.18.3"))
    simple_job(s, job, nodes, t0, start, gpn=4, name="bert-long", user="stud17", tenant="cs-dept")
    s.progress(job, start + 2 * M, to, 2 * M, 0, lambda t: 2.2, tenant="cs-dept")
    ckpt_series(s, job, start, to, 15 * M, lambda t: int((t - start) / 2200), "/gpfs/projects/nlp/stud17/ckpt/{step}",
                nbytes=4_100_000_000, dur=11.0)
    n = "c3-n019"
    s.log(job, to, n, 9, "[rank9]: Traceback (most recent call last):\n"
          "[rank9]:   File \"/gpfs/projects/nlp/stud17/train.py\", line 233, in <module>\n"
          "[rank9]:     loss = model(**batch).loss\n"
          "[rank9]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 1 has a total capacity of "
          "39.39 GiB of which 1.12 GiB is free. Including non-PyTorch memory, this process has 38.26 GiB memory in use. Of the "
          "allocated memory 35.90 GiB is allocated by PyTorch, and 1.61 GiB is reserved by PyTorch but unallocated. If reserved "
          "but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.",
          tenant="cs-dept")
    s.log(job, to + 10 * S, n, None, torchrun_fail(to, 1, 9931, 1, n, 9), tenant="cs-dept")
    s.job(job, 0, "failed", end, nodes, gpn=4, start=start, end=end, exit_code=1, reason="NonZeroExitCode", name="bert-long",
          user="stud17", tenant="cs-dept")
    return s


def p14_hca_symbol_errors_hourly_reset():
    """4 x 8 GPUs, per-rank progress from one rank per node. The cable of gpu-g03's mlx5_2 (to leaf-c4
    Ethernet23) degrades: its symbol_error and port_rcv_errors grow from 20 min (hundreds to thousands per
    minute). The site's monitoring runs `perfquery -x -R` at the top of every hour, so every HCA's
    counters reset to 0 (lower values) at 60 and 120 min and the growth restarts from 0. At 130 min the
    link goes down (link_downed +1, kernel `ibp193s0f2: Link down`, leaf trap) and comes back after 40 s;
    gpu-g03's ranks get an IB port error, the others status=12; FAILED. Expected: network_link
    port:mlx5_2/1 (alt: the switch side port:leaf-c4/Ethernet23)."""
    s = Scn("p14_hca_symbol_errors_hourly_reset", T_BASE + 13 * 24 * H)
    t0, job, nodes = s.t0, "8816414", [f"gpu-g0{i}" for i in range(1, 5)]
    start, td, end = t0 + 3 * M, t0 + 130 * M, t0 + 131 * M
    stor = [("/lustre/scratch", "lustre", "mds-c")]
    facing = {}
    for i, n in enumerate(nodes):
        links = [(f"mlx5_{d}", "leaf-c4", f"Ethernet{i * 4 + d + 13}", "pod-c4") for d in range(4)]
        s.topology(n, t0, links, stor)
        facing[n] = ("leaf-c4", f"Ethernet{i * 4 + 15}")  # the mlx5_2 ports are polled

    def rdma_f(node, dev, t, inc, st):
        if (t - t0) % H < M:  # perfquery -R at the top of the hour
            for k in st:
                st[k] = 0
        if node == "gpu-g03" and dev == "mlx5_2" and t0 + 20 * M <= t:
            k = (t - t0 - 20 * M) // M
            inc["symbol_error"] += s.rng.randint(300, 600) + 25 * k
            inc["port_rcv_errors"] += s.rng.randint(50, 120) + 5 * k
            if t >= td and st["link_downed"] == 0 and t < td + M:
                inc["link_downed"] = 1
            if t >= td:
                inc["port_xmit_data"] = inc["port_rcv_data"] = 0
    node_env(s, nodes, t0, t0 + 140 * M, [(nodes, start, end)], storage=[("/lustre/scratch", "lustre", 39)], facing=facing,
             rdma_f=rdma_f)
    simple_job(s, job, nodes, t0 + M, start, name="mixtral-ft")
    ranks = [(r, nodes[r // 8]) for r in range(0, 32, 8)]
    s.progress(job, start + M, td, M, 0, lambda t: 1.25, ranks=ranks)
    ckpt_series(s, job, start, td, 30 * M, lambda t: int((t - start) / 1250), "/lustre/scratch/mixtral/ckpt/{step}")
    n = "gpu-g03"
    s.log(job, td, n, None, "mlx5_core 0000:c1:00.0 ibp193s0f2: Link down", stream="kernel", source=f"kernel@{n}")
    s.link(td + 200, n, "mlx5_2", "1", "down", f"kernel@{n}")
    s.link(td + 900, n, "leaf-c4", "Ethernet23", "down", "snmptrap@leaf-c4")
    s.link(td + 40 * S, n, "mlx5_2", "1", "up", f"kernel@{n}")
    s.link(td + 41 * S, n, "leaf-c4", "Ethernet23", "up", "snmptrap@leaf-c4")
    s.log(job, td + 2 * S, n, 18, f"{n}:51234:51301 [2] NCCL WARN NET/IB : Got async event : port error")
    for r in (0, 9, 27):
        s.log(job, td + 20 * S + r * 100, nodes[r // 8], r, f"{nodes[r // 8]}:4{r}110:4{r}199 [{r % 8}] NCCL WARN NET/IB : Got "
              f"completion from peer 10.4.3.{13 + 2}<4{r}163> with status=12 opcode=0 len=0 vendor err 129 (Send) "
              f"localGid ::ffff:10.4.3.{11 + r // 8} remoteGid ::ffff:10.4.3.15 hca mlx5_2")
    s.job(job, 0, "failed", end, nodes, start=start, end=end, exit_code=1, reason="NonZeroExitCode", name="mixtral-ft")
    return s


def p15_nan_user_error_with_earlier_flap():
    """4 x 8 GPUs, every infrastructure layer mostly clean, with misleading noise: at 18 min the leaf port
    facing gpu-f02 flaps once (down 6 s, in_errors +14; NCCL rides through it, progress unaffected), at
    25 min GPU 2 of gpu-f03 counts one correctable ECC error, at 40 min one /lustre/data sample shows
    42 ms read latency. At 66 min the user's loss goes NaN and train.py raises `FloatingPointError: loss
    is nan at step 6120`; torchrun tears down; FAILED. Expected: application job:8816515."""
    s = Scn("p15_nan_user_error_with_earlier_flap", T_BASE + 14 * 24 * H)
    t0, job, nodes = s.t0, "8816515", [f"gpu-f0{i}" for i in range(1, 5)]
    start, tf, end = t0 + 3 * M, t0 + 66 * M, t0 + 66 * M + 20 * S
    facing = leaf_topology(s, nodes, t0, "leaf-f1", "pod-f", 2, [("/lustre/data", "lustre", "mds-f")])
    tflap = t0 + 18 * M

    def port_f(node, sw, port, t, d, inc, st):
        if node == "gpu-f02" and tflap <= t < tflap + M:
            inc["in_errors"] += 14

    def gpu_f(node, g, t, d):
        if (node, g) == ("gpu-f03", 2):
            d["set_ecc_sbe"] = 1 if t >= t0 + 25 * M else 0

    def st_f(node, path, t, d):
        if node == "gpu-f01" and t == t0 + 40 * M:
            d["read_lat_ms"] = 42.0
    node_env(s, nodes, t0, t0 + 75 * M, [(nodes, start, end)], storage=[("/lustre/data", "lustre", 68)], facing=facing,
             port_f=port_f, gpu_f=gpu_f, storage_f=st_f)
    sw, port = facing["gpu-f02"]
    s.link(tflap + 10 * S, "gpu-f02", sw, port, "down", f"snmptrap@{sw}")
    s.link(tflap + 16 * S, "gpu-f02", sw, port, "up", f"snmptrap@{sw}")
    simple_job(s, job, nodes, t0 + M, start, name="rl-reward-model")
    s.progress(job, start + M, tf, M, 0, lambda t: 0.62)
    ckpt_series(s, job, start, tf, 20 * M, lambda t: int((t - start) / 620), "/lustre/data/rm/ckpt/{step}")
    s.log(job, tf, "gpu-f01", 0, "[rank0]: Traceback (most recent call last):\n"
          "[rank0]:   File \"/workspace/train.py\", line 421, in <module>\n[rank0]:     train(cfg)\n"
          "[rank0]:   File \"/workspace/train.py\", line 388, in train\n"
          "[rank0]:     raise FloatingPointError(f\"loss is {loss.item()} at step {step}\")\n"
          "[rank0]: FloatingPointError: loss is nan at step 6120")
    s.log(job, tf + 12 * S, "gpu-f01", None, torchrun_fail(tf, 0, 11802, 1, "gpu-f01", 0))
    s.job(job, 0, "failed", end, nodes, start=start, end=end, exit_code=1, reason="NonZeroExitCode", name="rl-reward-model")
    return s


def p16_lustre_project_quota():
    """4 x 8 GPUs writing checkpoints to /lustre/proj, whose file system is only 61 % used. The project's
    Lustre quota runs out: the checkpoints at 30 and 60 min succeed, the one at 90 min fails
    `OSError: [Errno 122] Disk quota exceeded` and rank 0 exits; FAILED. used_pct never shows it.
    Expected: storage_full path:/lustre/proj."""
    s = Scn("p16_lustre_project_quota", T_BASE + 15 * 24 * H)
    t0, job, nodes = s.t0, "8816616", [f"gpu-l0{i}" for i in range(1, 5)]
    start, tf, end = t0 + 2 * M, t0 + 92 * M, t0 + 92 * M + 40 * S
    facing = leaf_topology(s, nodes, t0, "leaf-l1", "pod-l", 1, [("/lustre/proj", "lustre", "mds-l")])
    node_env(s, nodes, t0, t0 + 100 * M, [(nodes, start, end)], storage=[("/lustre/proj", "lustre", 61)], facing=facing)
    simple_job(s, job, nodes, t0 + M, start, name="codegen-7b")
    st = lambda t: int((t - start) / 900)  # noqa: E731
    s.progress(job, start + M, tf, M, 0, lambda t: 0.9)
    ckpt_series(s, job, start, tf, 30 * M, st, "/lustre/proj/codegen/ckpt/step_{step}", dur=70.0, nbytes=88_000_000_000)
    k = st(tf)
    s.ckpt(job, tf, k, f"/lustre/proj/codegen/ckpt/step_{k}", "started")
    err = f"[Errno 122] Disk quota exceeded: '/lustre/proj/codegen/ckpt/step_{k}/optim_rank00.pt'"
    s.ckpt(job, tf + 21 * S, k, f"/lustre/proj/codegen/ckpt/step_{k}", "failed", error=err)
    s.log(job, tf + 21 * S, "gpu-l01", 0, "[rank0]: Traceback (most recent call last):\n"
          "[rank0]:   File \"/opt/conda/lib/python3.11/site-packages/torch/serialization.py\", line 652, in save\n"
          "[rank0]:     with _open_zipfile_writer(f) as opened_zipfile:\n"
          f"[rank0]: OSError: {err}")
    s.log(job, tf + 30 * S, "gpu-l01", None, torchrun_fail(tf + 21 * S, 0, 7781, 1, "gpu-l01", 0))
    s.job(job, 0, "failed", end, nodes, start=start, end=end, exit_code=1, reason="NonZeroExitCode", name="codegen-7b")
    return s


def p17_sync_ckpt_nfs_slow_nccl_timeout():
    """4 x 8 GPUs; rank 0 writes checkpoints synchronously to NFS /nfs/ckpt (nas-07) while the other ranks
    wait at the next all-reduce. The checkpoints at 20 and 40 min take 45 s. From 50 min nas-07 degrades
    (a RAID rebuild): write latency 4 ms -> 0.8-3.5 s, write throughput to a few MB/s, queue depth up,
    the mount stays `ok`. The 60-min checkpoint starts and never finishes (hung task on rank 0 at 62 min);
    the 31 waiting ranks' NCCL watchdog fires at 70 min; FAILED. The symptom looks like the network.
    Expected: storage_slow path:/nfs/ckpt."""
    s = Scn("p17_sync_ckpt_nfs_slow_nccl_timeout", T_BASE + 16 * 24 * H)
    t0, job, nodes = s.t0, "8816717", [f"gpu-n3{i}" for i in range(1, 5)]
    start, tslow, tc, end = t0 + 2 * M, t0 + 50 * M, t0 + 60 * M, t0 + 70 * M + 40 * S
    facing = leaf_topology(s, nodes, t0, "leaf-n3", "pod-n", 31, [("/nfs/ckpt", "nfs", "nas-07"), ("/lustre/data", "lustre", "mds-n")])
    for n in nodes:
        s.mount(n, t0 + 10 * S, "/nfs/ckpt", "ok")

    def st_f(node, path, t, d):
        if path == "/nfs/ckpt" and t >= tslow:
            r = s.rng
            d["write_lat_ms"] = round(r.uniform(800, 3500), 1)
            d["read_lat_ms"] = round(r.uniform(300, 1800), 1)
            d["write_mbps"], d["write_iops"] = round(r.uniform(1.5, 6.0), 1), float(r.randint(3, 15))
            d["queue_depth"] = float(r.randint(40, 128))
    node_env(s, nodes, t0, t0 + 80 * M, [(nodes, start, end)], storage=[("/nfs/ckpt", "nfs4", 58), ("/lustre/data", "lustre", 70)],
             facing=facing, storage_f=st_f)
    simple_job(s, job, nodes, t0 + M, start, name="gemma-9b-cpt")
    st = lambda t: int((t - start) / 1000)  # noqa: E731
    s.progress(job, start + M, tc, M, 0, lambda t: 1.0)
    ckpt_series(s, job, start, tc - 5 * M, 20 * M, st, "/nfs/ckpt/gemma/step_{step}", first=t0 + 20 * M, dur=45.0)
    s.ckpt(job, tc, st(tc), f"/nfs/ckpt/gemma/step_{st(tc)}", "started")
    s.log(job, t0 + 62 * M + 5 * S, "gpu-n31", None, "INFO: task python3:51200 blocked for more than 120 seconds.\n"
          "      Tainted: P           OE     5.15.0-105-generic #115-Ubuntu\n"
          "task:python3         state:D stack:0     pid:51200 ppid:51180 flags:0x00004002\n"
          "Call Trace:\n <TASK>\n __schedule+0x2c4/0x5d0\n rpc_wait_bit_killable+0x1e/0xa0 [sunrpc]\n"
          " nfs_wb_all+0x5c/0x110 [nfs]", stream="kernel", source="kernel@gpu-n31")
    for r in range(1, 32, 5):
        ts = tc + 10 * M + 2 * S + r * 60
        s.log(job, ts, nodes[r // 8], r, watchdog(r, ts, 60011, 600000))
    s.log(job, end - 10 * S, "gpu-n31", None, torchrun_fail(tc + 10 * M + 2 * S, 1, 51201, -6, "gpu-n31", 1))
    s.job(job, 0, "failed", end, nodes, start=start, end=end, exit_code=1, reason="NonZeroExitCode", name="gemma-9b-cpt")
    return s


def p18_k8s_xid120_gsp_single_gpu():
    """Kubernetes, job pt-ft-b7n2c on 2 x 8 GPUs (a3-node-0301, a3-node-0302); no version change anywhere.
    At 37 min GPU 2 of a3-node-0302 reports XID 120 (`GSP task timeout`), rank 10 dies `unspecified
    launch failure`, the NVIDIA device plugin marks the GPU unhealthy; the other ranks' watchdog fires
    10 min later; FAILED. ECC, NVLink, PCIe counters flat, temperatures normal, BMC quiet.
    Expected: driver_software gpu:a3-node-0302/2."""
    s = Scn("p18_k8s_xid120_gsp_single_gpu", T_BASE + 17 * 24 * H)
    t0, job, nodes = s.t0, "pt-ft-b7n2c", ["a3-node-0301", "a3-node-0302"]
    kw = dict(source="kubernetes@training-operator", name="ft-qwen-14b", user="team-apps", tenant="apps",
              image="registry.corp/apps/ft:1.9.2")
    start, tx, end = t0 + 3 * M, t0 + 37 * M, t0 + 47 * M + 30 * S
    facing = leaf_topology(s, nodes, t0, "leaf-k3", "pod-k3", 7, [("/mnt/fsx", "lustre", "fsx-3")])

    def gpu_f(node, g, t, d):
        if (node, g) == ("a3-node-0302", 2) and t >= tx:
            d["util_pct"], d["power_w"] = 0, 88.0
    node_env(s, nodes, t0, t0 + 55 * M, [(nodes, start, end)], storage=[("/mnt/fsx", "lustre", 45)], facing=facing, gpu_f=gpu_f)
    s.job(job, 0, "pending", t0 + M, nodes, **kw)
    s.job(job, 0, "running", start, nodes, start=start, **kw)
    s.progress(job, start + M, tx, M, 0, lambda t: 1.5, tenant="apps")
    ckpt_series(s, job, start, tx, 15 * M, lambda t: int((t - start) / 1500), "/mnt/fsx/ft/ckpt/{step}", nbytes=29_000_000_000)
    n = "a3-node-0302"
    s.xid(n, tx, 2, "0000:53:00", 120, 8812, "GSP task timeout @ pc:0x54ed3c4, partition:0#0")
    s.log(job, tx + 2 * S, n, 10, "[rank10]: RuntimeError: CUDA error: unspecified launch failure", tenant="apps")
    s.log(job, tx + 20 * S, n, None, f"server.go:245] 'GPU-{s.gpu_uuid(n, 2)[4:]}' device marked unhealthy: XidCriticalError "
          "Xid=120", stream="container", tenant="apps", source=f"nvidia-device-plugin@{n}")
    for r in (0, 4, 13):
        ts = tx + 10 * M + r * 150
        s.log(job, ts, nodes[r // 8], r, watchdog(r, ts, 18002, 600000), tenant="apps")
    s.job(job, 0, "failed", end, nodes, start=start, end=end, exit_code=1, reason="BackoffLimitExceeded", **kw)
    return s


def p19_illegal_memory_access_follows_job():
    """2 x 8 GPUs. Attempt 0 (gpu-d01, gpu-d02) checkpoints step 1000 at 20 min, then at step 1200 rank 3
    dies `CUDA error: an illegal memory access was encountered` in the user's MoE dispatch kernel, with
    XID 31 (MMU fault) on gpu-d01 GPU 3. The user requeues; attempt 1 runs on other hardware (gpu-d07,
    gpu-d08), resumes from step 1000 and dies the same way at step 1200, rank 3, XID 31 on gpu-d07
    GPU 3. The fault follows the code, not the GPU. Expected: application job:8816919 for both
    attempts (attempt 0 alone: driver_software gpu:gpu-d01/3 also declared right)."""
    s = Scn("p19_illegal_memory_access_follows_job", T_BASE + 18 * 24 * H)
    t0, job = s.t0, "8816919"
    n0, n1 = ["gpu-d01", "gpu-d02"], ["gpu-d07", "gpu-d08"]
    allnodes = n0 + n1
    a0s, x0, a0e = t0 + 2 * M, t0 + 24 * M, t0 + 24 * M + 30 * S
    a1s, x1, a1e = t0 + 40 * M, t0 + 45 * M + 40 * S, t0 + 46 * M + 10 * S
    facing = leaf_topology(s, allnodes, t0, "leaf-d1", "pod-d", 1, [("/lustre/ckpt", "lustre", "mds-d")])
    node_env(s, allnodes, t0, t0 + 55 * M, [(n0, a0s, a0e), (n1, a1s, a1e)], storage=[("/lustre/ckpt", "lustre", 50)],
             facing=facing)
    tb = ("[rank3]: Traceback (most recent call last):\n"
          "[rank3]:   File \"/workspace/model/moe.py\", line 212, in dispatch\n"
          "[rank3]:     out = fused_dispatch(x, idx, self.capacity)\n"
          "[rank3]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
          "[rank3]: CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might "
          "be incorrect.")
    mmu = ("Ch 00000008, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f2c_1a000000. Fault is of type "
           "FAULT_PDE ACCESS_TYPE_VIRT_READ")
    simple_job(s, job, n0, t0, a0s, name="moe-expt")
    s.progress(job, a0s + M, x0, M, 0, lambda t: 1.1)
    s.ckpt(job, t0 + 20 * M, 1000, "/lustre/ckpt/moe-expt/step_1000", "started")
    s.ckpt(job, t0 + 20 * M + 30 * S, 1000, "/lustre/ckpt/moe-expt/step_1000", "succeeded", nbytes=16_000_000_000, dur=30.0)
    s.xid("gpu-d01", x0, 3, "0000:5d:00", 31, 14402, mmu)
    s.log(job, x0 + S, "gpu-d01", 3, tb)
    s.log(job, x0 + 15 * S, "gpu-d01", None, torchrun_fail(x0 + S, 3, 14402, 1, "gpu-d01", 3))
    s.job(job, 0, "failed", a0e, n0, start=a0s, end=a0e, exit_code=1, reason="NonZeroExitCode", name="moe-expt")
    s.job(job, 1, "pending", t0 + 31 * M, n1, reason="Priority", name="moe-expt")
    s.job(job, 1, "running", a1s, n1, start=a1s, name="moe-expt")
    s.progress(job, a1s + M, x1, M, 1000, lambda t: 1.2)
    s.xid("gpu-d07", x1, 3, "0000:5d:00", 31, 9120, mmu)
    s.log(job, x1 + S, "gpu-d07", 3, tb)
    s.log(job, x1 + 15 * S, "gpu-d07", None, torchrun_fail(x1 + S, 3, 9120, 1, "gpu-d07", 3))
    s.job(job, 1, "failed", a1e, n1, start=a1s, end=a1e, exit_code=1, reason="NonZeroExitCode", name="moe-expt")
    return s


def p20_storage_nic_down_one_node_stale():
    """4 x 8 GPUs; compute traffic on mlx5_0 (leaf-s1), storage traffic on a separate Ethernet NIC ens1f0
    to the storage switch stor-sw1 (topology lists both). At 44 min stor-sw1 Ethernet18, the port facing
    gpu-s02's ens1f0, goes down (trap + poll) and gpu-s02's kernel logs `ens1f0: NIC Link is Down`;
    30 s later gpu-s02 (only) logs `nfs: server nas-03 not responding, timed out` and reports /nfs/data
    `stale`; rank 12's DataLoader fails `[Errno 5] Input/output error` on a shard; FAILED. The other
    nodes' /nfs/data stays ok; the compute fabric is clean. The symptom is storage, the cause a
    network port. Expected: network_link port:stor-sw1/Ethernet18 (alt: storage_unavailable path:/nfs/data)."""
    s = Scn("p20_storage_nic_down_one_node_stale", T_BASE + 19 * 24 * H)
    t0, job, nodes = s.t0, "8817020", [f"gpu-s0{i}" for i in range(1, 5)]
    start, td, end = t0 + 3 * M, t0 + 44 * M, t0 + 46 * M + 30 * S
    facing = leaf_topology(s, nodes, t0, "leaf-s1", "pod-s", 1, [("/nfs/data", "nfs", "nas-03")],
                           extra=lambda n, i: [("ens1f0", "stor-sw1", f"Ethernet{17 + i}", "storage-net")])
    sfacing = {n: ("stor-sw1", f"Ethernet{17 + i}") for i, n in enumerate(nodes)}

    def sport_f(node, sw, port, t, d, inc, st):
        if node == "gpu-s02" and t >= td:
            d["oper_status"] = "down"
            inc["in_octets"] = inc["out_octets"] = 0

    def st_f(node, path, t, d):
        if node == "gpu-s02" and t >= td:
            return False
    for n in nodes:
        s.mount(n, t0 + 15 * S, "/nfs/data", "ok")
    node_env(s, nodes, t0, t0 + 55 * M, [(nodes, start, end)], storage=[("/nfs/data", "nfs4", 70)], facing=facing,
             storage_f=st_f)
    s.ports(sfacing, t0, t0 + 55 * M, M, [(nodes, start, end)], f=sport_f)
    n = "gpu-s02"
    s.link(td + 1200, n, "stor-sw1", "Ethernet18", "down", "snmptrap@stor-sw1")
    simple_job(s, job, nodes, t0 + M, start, name="video-diffusion")
    s.progress(job, start + M, td + 2 * M, M, 0, lambda t: 2.4)
    ckpt_series(s, job, start, td, 20 * M, lambda t: int((t - start) / 2400), "/lustre/ckpt/vd/{step}")
    s.log(job, td + S, n, None, "ice 0000:17:00.0 ens1f0: NIC Link is Down", stream="kernel", source=f"kernel@{n}")
    s.log(job, td + 31 * S, n, None, "nfs: server nas-03 not responding, timed out", stream="kernel", source=f"kernel@{n}")
    s.mount(n, td + 40 * S, "/nfs/data", "stale", "server nas-03 not responding")
    s.log(job, td + 2 * M, n, 12, "[rank12]: Traceback (most recent call last):\n"
          "[rank12]:   File \"/opt/conda/lib/python3.11/site-packages/torch/utils/data/_utils/worker.py\", line 308, in _worker_loop\n"
          "[rank12]:     data = fetcher.fetch(index)\n"
          "[rank12]: OSError: [Errno 5] Input/output error: '/nfs/data/shards/train-00412.tar'")
    s.log(job, td + 2 * M + 15 * S, n, None, torchrun_fail(td + 2 * M, 4, 33120, 1, n, 12))
    s.job(job, 0, "failed", end, nodes, start=start, end=end, exit_code=1, reason="NonZeroExitCode", name="video-diffusion")
    return s


# --- healthy ----------------------------------------------------------------------------------------
def p21_healthy_user_cancel_progressing():
    """2 x 8 GPUs, healthy. The user scancels the job at 50 min while it trains normally (they changed a
    hyper-parameter): slurmstepd `*** JOB ... CANCELLED AT ... ***`, the ranks print NCCL `Connection
    reset by peer` / watchdog-abort noise as they are killed, the job ends CANCELLED. A job its user
    cancels while it makes progress has no incident (contract). Expected: no incident."""
    s = Scn("p21_healthy_user_cancel_progressing", T_BASE + 20 * 24 * H)
    t0, job, nodes = s.t0, "8817121", ["gpu-w01", "gpu-w02"]
    start, tc = t0 + 2 * M, t0 + 50 * M + 5 * S
    facing = leaf_topology(s, nodes, t0, "leaf-w1", "pod-w", 3, [("/lustre/scratch", "lustre", "mds-w")])
    node_env(s, nodes, t0, t0 + 60 * M, [(nodes, start, tc)], storage=[("/lustre/scratch", "lustre", 33)], facing=facing)
    simple_job(s, job, nodes, t0 + M, start, name="sweep-lr3", user="dana")
    s.progress(job, start + M, tc, M, 0, lambda t: 0.8, ranks=((0, "gpu-w01"), (8, "gpu-w02")))
    ckpt_series(s, job, start, tc, 15 * M, lambda t: int((t - start) / 800), "/lustre/scratch/dana/lr3/{step}")
    s.log(job, tc, "gpu-w01", None, f"slurmstepd: error: *** JOB {job} ON gpu-w01 CANCELLED AT {utc(tc)} ***",
          source="slurmstepd@gpu-w01")
    for r in (2, 9, 13):
        n = nodes[r // 8]
        s.log(job, tc + S + r * 30, n, r, f"[rank{r}]:[E{glog(tc + S)} 8810 ProcessGroupNCCL.cpp:1316] [PG 0 Rank {r}] Process "
              "group watchdog thread terminated with exception: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO "
              "for details), NCCL version 2.21.5\nncclSystemError: System call (e.g. socket, malloc) or external library call "
              "failed or device error.\nLast error:\nsocketProgress: Connection reset by peer")
    s.job(job, 0, "cancelled", tc + 4 * S, nodes, start=start, end=tc + 2 * S, exit_code=0, signal=15, name="sweep-lr3",
          user="dana")
    return s


def p22_healthy_k8s_noise():
    """Kubernetes, job pt-eval-9d2kq on 4 x 8 GPUs, completes. Harmless noise: a node outside the job
    (a3-node-0409) goes NotReady and back; the NVIDIA device plugin on a3-node-0402 restarts (container
    `restarted`, not the trainer's); every HCA's counters reset once at 35 min (driver counter reset, lower
    values); GPU 5 of a3-node-0403 counts 3 PCIe replays; every GPU is at its power cap on and off
    (`sw_power_cap`); one checkpoint fails (`[Errno 11] Resource temporarily unavailable`) and its retry
    30 s later succeeds. Expected: no incident."""
    s = Scn("p22_healthy_k8s_noise", T_BASE + 21 * 24 * H)
    t0, job = s.t0, "pt-eval-9d2kq"
    nodes = [f"a3-node-040{i}" for i in range(1, 5)]
    kw = dict(source="kubernetes@training-operator", name="eval-harness", user="team-eval", tenant="eval",
              image="registry.corp/eval/harness:0.14")
    start, end = t0 + 4 * M, t0 + 84 * M
    facing = leaf_topology(s, nodes + ["a3-node-0409"], t0, "leaf-k4", "pod-k4", 1, [("/mnt/fsx", "lustre", "fsx-4")])

    def gpu_f(node, g, t, d):
        if start <= t < end and s.rng.random() < 0.4:
            d["throttle"], d["power_w"] = ["sw_power_cap"], round(s.rng.uniform(692, 700), 1)
        if (node, g) == ("a3-node-0403", 5):
            d["set_pcie_replay"] = 0 if t < t0 + 22 * M else 3

    def rdma_f(node, dev, t, inc, st):
        if t0 + 35 * M <= t < t0 + 36 * M:
            for k in st:
                st[k] = 0
    node_env(s, nodes + ["a3-node-0409"], t0, t0 + 90 * M, [(nodes, start, end)], storage=[("/mnt/fsx", "lustre", 52)],
             facing=facing, gpu_f=gpu_f, rdma_f=rdma_f)
    s.sched_node("a3-node-0409", t0 + 30 * M, "down", "KubeletNotReady: PLEG is not healthy: pleg was last seen active 3m10s ago",
                 source="kubernetes@kube-apiserver")
    s.sched_node("a3-node-0409", t0 + 37 * M, "idle", None, source="kubernetes@kube-apiserver")
    s.container(job, t0 + 50 * M, "a3-node-0402", "nvidia-device-plugin-ctr", "restarted", None, tenant="eval")
    s.job(job, 0, "pending", t0 + M, nodes, **kw)
    s.job(job, 0, "running", start, nodes, start=start, **kw)
    s.progress(job, start + M, end - M, M, 0, lambda t: 0.45, tenant="eval")
    step = lambda t: int((t - start) / 450)  # noqa: E731
    ckpt_series(s, job, start, t0 + 40 * M, 20 * M, step, "/mnt/fsx/eval/ckpt/{step}", nbytes=6_000_000_000, dur=12.0)
    tf = t0 + 44 * M
    s.ckpt(job, tf, step(tf), f"/mnt/fsx/eval/ckpt/{step(tf)}", "started")
    s.ckpt(job, tf + 5 * S, step(tf), f"/mnt/fsx/eval/ckpt/{step(tf)}", "failed",
           error=f"[Errno 11] Resource temporarily unavailable: '/mnt/fsx/eval/ckpt/{step(tf)}/model.safetensors'")
    s.log(job, tf + 6 * S, "a3-node-0401", 0, "WARNING checkpoint.py:88 save failed ([Errno 11] Resource temporarily "
          "unavailable), retrying in 30s (attempt 1/3)", stream="stdout", tenant="eval")
    s.ckpt(job, tf + 35 * S, step(tf), f"/mnt/fsx/eval/ckpt/{step(tf)}", "started")
    s.ckpt(job, tf + 47 * S, step(tf), f"/mnt/fsx/eval/ckpt/{step(tf)}", "succeeded", nbytes=6_000_000_000, dur=12.0)
    ckpt_series(s, job, start, end - M, 20 * M, step, "/mnt/fsx/eval/ckpt/{step}", first=t0 + 64 * M, nbytes=6_000_000_000,
                dur=12.0)
    s.job(job, 0, "completed", end, nodes, start=start, end=end, exit_code=0, **kw)
    return s


def p23_healthy_gaps_skew_dupes():
    """4 x 8 GPUs, completes after 100 min; rank 0 reports progress only every 5 min. Noise: the DCGM
    exporters of all four nodes are down from 30 to 50 min (no GPU samples, progress goes on); gpu-v03's
    clocks run 3 min behind; 40 events are delivered twice (same id) and a burst of lines arrives up to
    20 s out of order; on gpu-v09, an idle node outside the job, GPU 0 falls off the bus (XID 79, its
    samples stop) at 60 min. Expected: no incident (the XID is not on a job node)."""
    s = Scn("p23_healthy_gaps_skew_dupes", T_BASE + 22 * 24 * H)
    t0, job, nodes = s.t0, "8817323", [f"gpu-v0{i}" for i in range(1, 5)]
    s.skew["gpu-v03"] = -3 * M
    start, end = t0 + 3 * M, t0 + 103 * M
    idle = "gpu-v09"
    facing = leaf_topology(s, nodes + [idle], t0, "leaf-v1", "pod-v", 1, [("/lustre/scratch", "lustre", "mds-v")])

    def gpu_f(node, g, t, d):
        if t0 + 30 * M <= t < t0 + 50 * M:
            return False
        if node == idle and g == 0 and t >= t0 + 60 * M:
            return False
    node_env(s, nodes + [idle], t0, t0 + 110 * M, [(nodes, start, end)], storage=[("/lustre/scratch", "lustre", 45)],
             facing=facing, gpu_f=gpu_f)
    s.xid(idle, t0 + 60 * M, 0, "0000:18:00", 79, None, "GPU has fallen off the bus.", name="<unknown>")
    simple_job(s, job, nodes, t0 + M, start, name="nightly-regress")
    s.progress(job, start + 5 * M, end - M, 5 * M, 0, lambda t: 1.0)
    ckpt_series(s, job, start, end - M, 30 * M, lambda t: int((t - start) / 1000), "/lustre/scratch/nightly/{step}")
    s.job(job, 0, "completed", end, nodes, start=start, end=end, exit_code=0, name="nightly-regress")
    # delivery faults: duplicates (same id, later arrival) and a reordered burst
    rows = sorted(s.rows, key=lambda r: (r[0], r[1]))
    dup = [r for i, r in enumerate(rows) if i % 97 == 5][:40]
    for order, n, e in dup:
        s.rows.append((order + 7 * S, n + 10 ** 7, e))
    burst = [i for i, r in enumerate(s.rows) if t0 + 70 * M <= r[0] < t0 + 72 * M]
    for i in burst:
        order, n, e = s.rows[i]
        s.rows[i] = (order + s.rng.randint(0, 20 * S), n, e)
    return s


SCENARIOS = [p01_nvlink_remote_symptom, p02_readonly_ckpt_mount_hour_before, p03_sbe_noise_and_cgroup_oom,
             p04_xid79_retry_same_node_then_timelimit, p05_clock_skew_xid_after_end, p06_k8s_preempted_sigterm_nccl_noise,
             p07_k8s_ephemeral_storage_eviction, p08_psu_warn_other_node_mem_ue_sigbus, p09_nfs_home_stale_stall_cancel,
             p10_gpu_fw_rollout_xid119_regression, p11_psu_failure_power_brake_timelimit, p12_noisy_neighbor_congestion,
             p13_gpu_oom_no_nvml_site, p14_hca_symbol_errors_hourly_reset, p15_nan_user_error_with_earlier_flap,
             p16_lustre_project_quota, p17_sync_ckpt_nfs_slow_nccl_timeout, p18_k8s_xid120_gsp_single_gpu,
             p19_illegal_memory_access_follows_job, p20_storage_nic_down_one_node_stale,
             p21_healthy_user_cancel_progressing, p22_healthy_k8s_noise, p23_healthy_gaps_skew_dupes]


def build(out_dir: Path, only=None) -> dict[str, int]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    counts = {}
    for fn in SCENARIOS:
        if only and fn.__name__ not in only:
            continue
        lines = fn().lines()
        (out_dir / f"{fn.__name__}.jsonl").write_bytes(b"\n".join(lines) + b"\n")
        counts[fn.__name__] = len(lines)
    return counts


if __name__ == "__main__":
    d = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT
    c = build(d)
    print(f"{len(c)} scenarios, {sum(c.values())} events -> {d}")
