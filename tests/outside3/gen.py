"""Outside-check round 3: 24 scenarios written from the event contract alone.

``python -m tests.outside3.gen [DIR]`` writes one ``<name>.jsonl`` per scenario (contract v1,
deterministic, a few thousand events each, default ``var/outside3/``). The expected answer of
every attempt is in ``expectations.json`` (written with this file, before faultline ran on any
scenario). Each scenario is one realistic way a GPU training job stops on a cluster; three are
healthy (no incident expected) with noisy but harmless telemetry.

Log lines are in the formats the real tools print: NVRM Xid lines
(``NVRM: Xid (PCI:0000:9b:00): 79, pid=..., name=..., GPU has fallen off the bus.``, NVIDIA
Xid catalog), PyTorch ProcessGroupNCCL watchdog lines (``[Rank 3] Watchdog caught collective
operation timeout: WorkNCCL(SeqNum=..., OpType=ALLREDUCE, ... Timeout(ms)=600000) ran for
600043 milliseconds before timing out.``), NCCL's ``NET/IB : Got completion from peer ... with
status=12`` (IBV_WC_RETRY_EXC_ERR), torch.OutOfMemoryError's text, the kernel's memory-cgroup
OOM line and AER lines, slurmstepd's ``*** JOB N ON host CANCELLED AT ... DUE TO TIME LIMIT
***``, Python's OSError texts for ENOSPC (errno 28) and ESTALE (errno 116).
"""
from __future__ import annotations

import sys
from pathlib import Path

import orjson

DEFAULT_OUT = Path("var/outside3")
MIN = 60_000
H = 3_600_000
# 2026-11-23 00:00:00 UTC; every scenario starts on its own hour after it
BASE = 1_795_392_000_000


class Scenario:
    def __init__(self, name: str, hour: int):
        self.name = name
        self.t0 = BASE + hour * H
        self.events: list[dict] = []
        self._n = 0

    def t(self, minutes: float) -> int:
        return self.t0 + int(minutes * MIN)

    def emit(self, ts: int, kind: str, source: str, data: dict, node=None, job=None, tenant=None) -> str:
        self._n += 1
        eid = f"{self.name}-{self._n:06d}"
        self.events.append(dict(v=1, id=eid, ts=int(ts), kind=kind, source=source, node=node, job=job,
                                tenant=tenant, data=data))
        return eid

    # --- inventory -----------------------------------------------------------------------------
    def versions(self, node: str, minute: float, **v):
        self.emit(self.t(minute), "inventory.versions", f"inventory@{node}", dict(v), node=node)

    def topology(self, node: str, minute: float, links: list[dict], storage: list[dict]):
        self.emit(self.t(minute), "inventory.topology", f"inventory@{node}", dict(links=links, storage=storage),
                  node=node)

    def change(self, node: str, minute: float, component: str, frm, to, actor=None, ticket=None):
        self.emit(self.t(minute), "inventory.change", f"inventory@{node}",
                  dict(component=component, to=to, actor=actor, ticket=ticket, **{"from": frm}), node=node)

    # --- scheduler -----------------------------------------------------------------------------
    def job(self, job: str, attempt: int, nodes: list[str], gpn: int, start: float, end: float | None,
            state: str | None, *, name: str, user: str = "mlteam", image=None, exit_code=None, signal=None,
            reason=None, tenant=None, src="slurm@ctl-1", pending_reason="Priority"):
        gpus = gpn * len(nodes)
        ranks = {str(r): nodes[r // gpn] for r in range(gpus)}
        common = dict(attempt=attempt, nodes=nodes, gpus=gpus, ranks=ranks, image=image, name=name, user=user)
        self.emit(self.t(start - 1), "sched.job", src,
                  dict(state="pending", exit_code=None, signal=None, start_ts=None, end_ts=None,
                       reason=pending_reason, **common), job=job, tenant=tenant)
        self.emit(self.t(start), "sched.job", src,
                  dict(state="running", exit_code=None, signal=None, start_ts=self.t(start), end_ts=None,
                       reason=None, **common), job=job, tenant=tenant)
        if state is not None:
            self.emit(self.t(end), "sched.job", src,
                      dict(state=state, exit_code=exit_code, signal=signal, start_ts=self.t(start),
                           end_ts=self.t(end), reason=reason, **common), job=job, tenant=tenant)

    def sched_node(self, node: str, minute: float, state: str, reason=None, src="slurm@ctl-1"):
        self.emit(self.t(minute), "sched.node", src, dict(state=state, reason=reason), node=node)

    # --- runtime -------------------------------------------------------------------------------
    def log(self, job: str, node: str, minute: float, message: str, rank=None, stream="stderr", tenant=None):
        self.emit(self.t(minute), "runtime.log", f"logs@{node}", dict(rank=rank, stream=stream, message=message),
                  node=node, job=job, tenant=tenant)

    def progress(self, job: str, node: str, frm: float, to: float, *, every_s=30, step0=0, step_time=None,
                 rank=0, sps=None, tenant=None):
        """rank-0 (or given rank) heartbeat; step_time: callable(minute)->seconds or a float."""
        ts = self.t(frm)
        step = step0
        while ts <= self.t(to):
            m = (ts - self.t0) / MIN
            st = step_time(m) if callable(step_time) else (step_time or 3.0)
            step += max(1, int(every_s / st))
            self.emit(ts, "runtime.progress", f"sdk@{node}",
                      dict(rank=rank, step=step, step_time_s=round(st, 3),
                           samples_per_s=round((sps or 512) * 3.0 / st, 1)), node=node, job=job, tenant=tenant)
            ts += every_s * 1000
        return step

    def ckpt(self, job: str, node: str, minute: float, phase: str, step: int, path: str, *, nbytes=None,
             duration=None, error=None, tenant=None):
        self.emit(self.t(minute), "runtime.checkpoint", f"sdk@{node}",
                  dict(phase=phase, step=step, path=path, bytes=nbytes, duration_s=duration, error=error),
                  node=node, job=job, tenant=tenant)

    def container(self, job: str, node: str, minute: float, container: str, event: str, exit_code=None):
        self.emit(self.t(minute), "runtime.container", f"containerd@{node}",
                  dict(container=container, event=event, exit_code=exit_code), node=node, job=job)

    # --- node telemetry ------------------------------------------------------------------------
    def gpus(self, node: str, frm: float, to: float, *, n=8, every_s=60, busy=None, mem_total=81559, mod=None):
        """NVML samples; busy(minute)->bool says whether a job runs there; mod(gpu, minute, d) may edit d
        or return False to drop the sample (a GPU that is gone)."""
        ts = self.t(frm)
        k = 0
        while ts <= self.t(to):
            m = (ts - self.t0) / MIN
            on = busy(m) if busy else True
            for g in range(n):
                jitter = (g * 7 + k * 3) % 7
                d = dict(gpu=g, uuid=f"GPU-{_h(node)}-{g:02d}",
                         util_pct=(92 + jitter) if on else 0,
                         mem_used_mib=(61000 + 300 * jitter) if on else 4,
                         mem_total_mib=mem_total, temp_c=(58 + jitter) if on else 31,
                         power_w=(560 + 11 * jitter) if on else 62, sm_clock_mhz=1980 if on else 345,
                         throttle=[], ecc_sbe=0, ecc_dbe=0, nvlink_errors=0, pcie_replay=0)
                keep = mod(g, m, d) if mod else None
                if keep is not False:
                    self.emit(ts, "gpu.sample", f"nvml@{node}", d, node=node)
            ts += every_s * 1000
            k += 1

    def xid(self, node: str, minute: float, gpu, pci: str, xid: int, text: str, pid=None, pname="python"):
        msg = f"NVRM: Xid (PCI:{pci}): {xid}, pid={pid if pid else chr(39) + '<unknown>' + chr(39)}, " \
              f"name={pname if pid else '<unknown>'}, {text}"
        return self.emit(self.t(minute), "gpu.xid", f"kernel@{node}", dict(gpu=gpu, pci=pci, xid=xid, pid=pid,
                                                                             message=msg), node=node)

    def storage(self, node: str, path: str, fs_type: str, frm: float, to: float, *, every_s=60, mod=None,
                used=41.0):
        ts = self.t(frm)
        while ts <= self.t(to):
            m = (ts - self.t0) / MIN
            d = dict(path=path, fs_type=fs_type, read_iops=1800, write_iops=350, read_mbps=820.0, write_mbps=140.0,
                     read_lat_ms=1.9, write_lat_ms=3.1, queue_depth=2.0, used_pct=used)
            if mod:
                mod(m, d)
            self.emit(ts, "storage.sample", f"storage@{node}", d, node=node)
            ts += every_s * 1000

    def mount(self, node: str, minute: float, path: str, state: str, error=None):
        self.emit(self.t(minute), "storage.mount", f"storage@{node}", dict(path=path, state=state, error=error),
                  node=node)

    def port(self, node_key: str, device: str, port: str, frm: float, to: float, *, every_s=60, mod=None,
             source=None):
        """cumulative counters of one port; mod(minute, d) may edit the per-interval increments in d['_inc']."""
        ts = self.t(frm)
        tot = dict(in_errors=0, out_errors=0, in_discards=0, out_discards=0, in_octets=10**9, out_octets=10**9)
        while ts <= self.t(to):
            m = (ts - self.t0) / MIN
            inc = dict(in_errors=0, out_errors=0, in_discards=0, out_discards=0, in_octets=5 * 10**9,
                       out_octets=5 * 10**9)
            status = "up"
            if mod:
                status = mod(m, inc) or "up"
            for k, v in inc.items():
                tot[k] += v
            self.emit(ts, "net.port", source or f"snmp@{device}",
                      dict(device=device, port=port, oper_status=status, speed_mbps=400000, **tot), node=node_key)
            ts += every_s * 1000

    def link(self, node_key: str, device: str, port: str, minute: float, state: str, source=None):
        self.emit(self.t(minute), "net.link", source or f"snmp@{device}", dict(device=device, port=port, state=state),
                  node=node_key)

    def rdma(self, node: str, device: str, frm: float, to: float, *, every_s=60, mod=None):
        ts = self.t(frm)
        tot = dict(link_downed=0, symbol_error=0, port_rcv_errors=0, local_ack_timeout_err=0, out_of_sequence=0,
                   packet_seq_err=0, np_cnp_sent=0, rp_cnp_handled=0, np_ecn_marked_roce_packets=0)
        while ts <= self.t(to):
            m = (ts - self.t0) / MIN
            inc = dict.fromkeys(tot, 0)
            inc.update(np_cnp_sent=40, rp_cnp_handled=38, np_ecn_marked_roce_packets=45)
            if mod:
                mod(m, inc)
            for k, v in inc.items():
                tot[k] += v
            self.emit(ts, "net.rdma", f"rdma@{node}", dict(device=device, port=1, counters=dict(tot)), node=node)
            ts += every_s * 1000

    def sensors(self, node: str, frm: float, to: float, *, every_s=300, mod=None):
        ts = self.t(frm)
        while ts <= self.t(to):
            m = (ts - self.t0) / MIN
            rows = [("Inlet Temp", "temperature", 22.0, "degrees C"), ("Fan 1", "fan", 9800.0, "RPM"),
                    ("PSU1 Input Power", "power", 1650.0, "Watts"), ("PSU2 Input Power", "power", 1640.0, "Watts")]
            for sensor, typ, val, unit in rows:
                d = dict(sensor=sensor, type=typ, value=val, unit=unit, status="ok")
                if mod:
                    mod(m, d)
                self.emit(ts, "hw.sensor", f"bmc@{node}-bmc", d, node=node)
            ts += every_s * 1000

    def sel(self, node: str, minute: float, entry_id: str, severity: str, sensor_type: str, message: str,
            message_id=None):
        self.emit(self.t(minute), "hw.sel", f"redfish@{node}-bmc",
                  dict(entry_id=entry_id, severity=severity, sensor_type=sensor_type, message_id=message_id,
                       message=message), node=node)

    def write(self, out: Path) -> Path:
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{self.name}.jsonl"
        # delivery order = collector arrival: sorted by ts with a stable tie-break (ids are unique)
        evs = sorted(self.events, key=lambda e: (e["ts"], e["id"]))
        path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in evs))
        return path


def _h(s: str) -> str:
    v = 2166136261
    for ch in s.encode():
        v = ((v ^ ch) * 16777619) & 0xFFFFFFFF
    return f"{v:08x}"


def site(s: Scenario, nodes: list[str], segment_of, *, mounts=(("/lustre/train", "lustre", "mds01"),),
         frm=-40.0, to=120.0, versions=None, n_gpus=8, busy=None, gpu_mod=None, storage_mod=None,
         nic="mlx5_0", port_of=None, rdma_mod=None, port_mod=None, sensor_mod=None):
    """The background a healthy site emits for its nodes from `frm` to `to` minutes."""
    for i, nd in enumerate(nodes):
        seg = segment_of(nd)
        sw = seg.split("/")[-1] if "/" in seg else f"{seg}-sw"
        pt = port_of(nd) if port_of else f"Ethernet{(i + 1) * 4}"
        s.topology(nd, frm, [dict(nic=nic, switch=sw, port=pt, segment=seg)],
                   [dict(path=p, backend=b, server=srv) for p, b, srv in mounts])
        s.versions(nd, frm, **(versions(nd) if versions else dict(
            driver="550.54.15", cuda="12.4", nccl="2.21.5", gpu_firmware="96.00.89.00.01", bmc_firmware="2.18.1",
            bios="2.3.6", kernel="5.15.0-119-generic", os="Ubuntu 22.04.4 LTS", ofed="24.04-0.6.6.0",
            container_runtime="enroot 3.4.1")))
        s.gpus(nd, frm, to, n=n_gpus, busy=busy(nd) if busy else None,
               mod=(lambda g, m, d, nd=nd: gpu_mod(nd, g, m, d)) if gpu_mod else None)
        for p, b, _ in mounts:
            s.storage(nd, p, b, frm, to, mod=(lambda m, d, nd=nd, p=p: storage_mod(nd, p, m, d)) if storage_mod
                      else None)
        s.port(nd, sw, pt, frm, to, mod=(lambda m, inc, nd=nd: port_mod(nd, m, inc)) if port_mod else None)
        s.rdma(nd, nic, frm, to, mod=(lambda m, inc, nd=nd: rdma_mod(nd, m, inc)) if rdma_mod else None)
        s.sensors(nd, frm, to, mod=(lambda m, d, nd=nd: sensor_mod(nd, m, d)) if sensor_mod else None)


def ckpts(s: Scenario, job: str, node: str, every: float, frm: float, to: float, path_fmt: str, step_per_min: int,
          duration=38.0, nbytes=148_000_000_000, step0=0):
    """started/succeeded checkpoints every `every` minutes; returns the last (minute, step)."""
    last = None
    m = frm + every
    while m <= to:
        step = step0 + int((m - frm) * step_per_min)
        s.ckpt(job, node, m, "started", step, path_fmt.format(step=step))
        s.ckpt(job, node, m + duration / 60, "succeeded", step, path_fmt.format(step=step), nbytes=nbytes,
               duration=duration)
        last = (m + duration / 60, step)
        m += every
    return last


def watchdog(rank: int, seq: int, timeout_ms: int = 600000, op="ALLREDUCE") -> str:
    return (f"[rank{rank}]:[E ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective operation timeout: "
            f"WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=262144, NumelOut=262144, Timeout(ms)={timeout_ms}) "
            f"ran for {timeout_ms + 43} milliseconds before timing out.")


def nccl_abort(rank: int) -> str:
    return (f"[rank{rank}]:[E ProcessGroupNCCL.cpp:1182] [Rank {rank}] NCCL watchdog thread terminated with "
            f"exception: [Rank {rank}] Watchdog caught collective operation timeout; To avoid data inconsistency, "
            f"we are taking the entire process down.")


# ================================================================================================
# scenarios
# ================================================================================================

def s01_xid79() -> Scenario:
    """Slurm, 4 x 8 H100. GPU 6 of gpu-a03 falls off the bus at 52 min; the other ranks' NCCL
    watchdogs fire 10 min later (Timeout 600000 ms); the GPU's NVML samples stop; job FAILED
    exit 1. Checkpoints every 20 min."""
    s = Scenario("s01_xid79", 0)
    nodes = [f"gpu-a{i:02d}" for i in range(1, 5)]
    job = "7301150"

    def gm(nd, g, m, d):
        if nd == "gpu-a03" and g == 6 and m >= 52:
            return False
    site(s, nodes, lambda nd: "pod1-leaf1", gpu_mod=gm, to=75)
    s.job(job, 0, nodes, 8, 0, 63, "failed", name="llama3-70b-pretrain", exit_code=1,
          image="nvcr.io/nvidia/pytorch:24.05-py3", reason="NonZeroExitCode")
    s.progress(job, "gpu-a01", 1, 52, step_time=3.0)
    ckpts(s, job, "gpu-a01", 20, 0, 52, "/lustre/train/llama70b/ckpt/step_{step:07d}", 20)
    s.xid("gpu-a03", 52.2, 6, "0000:9b:00", 79, "GPU has fallen off the bus.")
    s.log(job, "gpu-a03", 52.3, "NVRM: GPU 0000:9b:00.0: GPU has fallen off the bus.", stream="kernel")
    for r in (0, 5, 9, 17, 30):
        s.log(job, nodes[r // 8], 62.1, watchdog(r, 188412), rank=r)
    s.log(job, "gpu-a01", 62.2, nccl_abort(0), rank=0)
    return s


def s02_ecc_dbe() -> Scenario:
    """Slurm, 2 x 8 A100-80G. GPU 1 of gpu-b02 reports a double-bit ECC error (ecc_dbe 0 -> 1,
    remapped_rows_pending 1), XID 48 then XID 63; PyTorch raises `CUDA error: uncorrectable ECC
    error encountered`; job FAILED."""
    s = Scenario("s02_ecc_dbe", 3)
    nodes = ["gpu-b01", "gpu-b02"]
    job = "7302201"

    def gm(nd, g, m, d):
        if nd == "gpu-b02" and g == 1:
            d["ecc_sbe"] = 3 if m < 70 else 5
            if m >= 70:
                d["ecc_dbe"] = 1
                d["remapped_rows_pending"] = 1
    site(s, nodes, lambda nd: "pod1-leaf2", gpu_mod=gm, to=95)
    s.job(job, 0, nodes, 8, 0, 71.5, "failed", name="vit-h-finetune", exit_code=1,
          image="nvcr.io/nvidia/pytorch:24.03-py3")
    s.progress(job, "gpu-b01", 1, 70, step_time=0.9)
    ckpts(s, job, "gpu-b01", 30, 0, 70, "/lustre/train/vit/ckpt-{step}", 60, duration=12.0,
          nbytes=5_000_000_000)
    s.xid("gpu-b02", 70.05, 1, "0000:0f:00", 48,
          "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 3, "
          "subpartition 0.", pid=48211)
    s.xid("gpu-b02", 70.06, 1, "0000:0f:00", 63,
          "Row Remapper: New row (0x00000000000a2c31) was marked for remapping, reset gpu to activate.", pid=48211)
    s.log(job, "gpu-b02", 70.2,
          "Traceback (most recent call last):\n  File \"/workspace/train.py\", line 311, in <module>\n"
          "    loss.backward()\nRuntimeError: CUDA error: uncorrectable ECC error encountered\n"
          "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
          "might be incorrect.", rank=9)
    return s


def s03_nvlink() -> Scenario:
    """Slurm, 2 x 8 H100 (NVSwitch). NVLink errors on GPU 3 of gpu-c01 climb for 15 min, then
    XID 74 (fatal NVLink error); NCCL reports `unhandled cuda error` on rank 3; job FAILED."""
    s = Scenario("s03_nvlink", 6)
    nodes = ["gpu-c01", "gpu-c02"]
    job = "7303310"

    def gm(nd, g, m, d):
        if nd == "gpu-c01" and g == 3 and m >= 40:
            d["nvlink_errors"] = int((m - 40) ** 2 * 35)
    site(s, nodes, lambda nd: "pod2-leaf1", gpu_mod=gm, to=80)
    s.job(job, 0, nodes, 8, 0, 56, "failed", name="mixtral-sft", exit_code=1,
          image="nvcr.io/nvidia/pytorch:24.05-py3")
    s.progress(job, "gpu-c01", 1, 55, step_time=2.2)
    ckpts(s, job, "gpu-c01", 25, 0, 55, "/lustre/train/mixtral/global_step{step}", 27)
    s.xid("gpu-c01", 55.1, 3, "0000:5d:00", 74,
          "NVLink: fatal error detected on link 11(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)", pid=29110)
    s.log(job, "gpu-c01", 55.3,
          "gpu-c01:29110:29388 [3] NCCL INFO include/alloc.h:245 NCCL WARN Cuda failure 'unspecified launch "
          "failure'\ntorch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
          "ProcessGroupNCCL.cpp:1970, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version "
          "2.21.5", rank=3)
    return s


def s04_thermal() -> Scenario:
    """Slurm, 4 x 8 H100. gpu-d02's fan 3 degrades (BMC warning, not critical); its GPU 5 heats to
    91-94 C with hw_thermal/hw_slowdown and 600-800 MHz SM clocks from 30 min; step time goes from
    3 s to 14-30 s (the whole job waits for the straggler); at 68 min the straggler stops answering a
    collective and the other ranks' watchdogs fire at 78 min; FAILED."""
    s = Scenario("s04_thermal", 9)
    nodes = [f"gpu-d{i:02d}" for i in range(1, 5)]
    job = "7304455"

    def gm(nd, g, m, d):
        if nd == "gpu-d02" and g == 5 and m >= 30:
            d.update(temp_c=91 + int(m) % 4, sm_clock_mhz=600 + (int(m) % 3) * 100, power_w=310,
                     throttle=["hw_thermal", "hw_slowdown", "sw_thermal"], util_pct=100)
        elif nd == "gpu-d02" and m >= 30:
            d["util_pct"] = 35

    def sm(nd, m, d):
        if nd == "gpu-d02" and d["sensor"] == "Fan 1" and m >= 25:
            d.update(sensor="Fan 3", value=2100.0, status="warning")
    site(s, nodes, lambda nd: "pod2-leaf2", gpu_mod=gm, sensor_mod=sm, to=95)
    s.job(job, 0, nodes, 8, 0, 78.5, "failed", name="gpt-moe-dense", exit_code=1,
          image="nvcr.io/nvidia/pytorch:24.05-py3")
    s.progress(job, "gpu-d01", 1, 68, step_time=lambda m: 3.0 if m < 30 else 14.0 + (m - 30) * 0.4)
    ckpts(s, job, "gpu-d01", 20, 0, 29, "/lustre/train/moe/step_{step}", 20)
    s.log(job, "gpu-d01", 45, "[2026-11-23 09:45:00] [WARNING] step time 28.1s > 3x median (3.0s); slowest rank 13",
          rank=0, stream="stdout")
    for r in (0, 8, 16, 24):
        s.log(job, nodes[r // 8], 78.1, watchdog(r, 24110), rank=r)
    return s


def s05_pcie() -> Scenario:
    """Slurm, 2 x 8 A100. PCIe replays on GPU 4 of gpu-e01 climb for 20 min (AER corrected errors in
    the kernel log), then an uncorrectable fatal AER and XID 79 reported with the PCI address only
    (gpu null); GPU 4's NVML samples stop; the job FAILED (exit 1)."""
    s = Scenario("s05_pcie", 12)
    nodes = ["gpu-e01", "gpu-e02"]
    job = "7305012"

    def gm(nd, g, m, d):
        if nd == "gpu-e01" and g == 4:
            if m >= 61:
                return False
            if m >= 40:
                d["pcie_replay"] = int((m - 40) * 900)
    site(s, nodes, lambda nd: "pod3-leaf1", gpu_mod=gm, to=85)
    s.job(job, 0, nodes, 8, 0, 62, "failed", name="sd3-train", exit_code=1, image="nvcr.io/nvidia/pytorch:24.03-py3")
    s.progress(job, "gpu-e01", 1, 60.5, step_time=1.5)
    ckpts(s, job, "gpu-e01", 30, 0, 60, "/lustre/train/sd3/ckpt_{step}", 40, duration=20.0)
    for m in (41, 46, 52, 57):
        s.log(job, "gpu-e01", m, "pcieport 0000:c0:01.1: AER: Corrected error received: 0000:c1:00.0\n"
              "nvidia 0000:c1:00.0: PCIe Bus Error: severity=Corrected, type=Data Link Layer, (Receiver ID)\n"
              "nvidia 0000:c1:00.0:   device [10de:20b2] error status/mask=00000080/00002000\n"
              "nvidia 0000:c1:00.0:    [ 7] BadDLLP", stream="kernel")
    s.log(job, "gpu-e01", 60.9, "pcieport 0000:c0:01.1: AER: Uncorrected (Fatal) error received: 0000:c1:00.0\n"
          "nvidia 0000:c1:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, "
          "(Requester ID)", stream="kernel")
    s.xid("gpu-e01", 61.0, None, "0000:c1:00", 79, "GPU has fallen off the bus.")
    s.log(job, "gpu-e01", 61.2, "RuntimeError: CUDA error: unknown error\nCompile with `TORCH_USE_CUDA_DSA` to "
          "enable device-side assertions.", rank=4)
    return s


def s06_driver_upgrade() -> Scenario:
    """Slurm, 4 x 8 H100 (NVSwitch). A rolling driver upgrade 535.161.08 -> 550.90.07 (ansible,
    CHG-4471) lands on gpu-f01..f04 at 20 min; a job on the old driver completed before; the
    first job after it dies 50 s in with `CUDA error: system not yet initialized` (fabric manager
    not upgraded with the driver); FAILED."""
    s = Scenario("s06_driver_upgrade", 15)
    nodes = [f"gpu-f{i:02d}" for i in range(1, 5)]
    old = dict(driver="535.161.08", cuda="12.2", nccl="2.19.3", gpu_firmware="96.00.74.00.01",
               bmc_firmware="2.18.1", bios="2.3.6", kernel="5.15.0-119-generic", os="Ubuntu 22.04.4 LTS",
               ofed="23.10-1.1.9.0", container_runtime="enroot 3.4.1")
    site(s, nodes, lambda nd: "pod3-leaf2", versions=lambda nd: old, to=60,
         busy=lambda nd: (lambda m: m < 15 or m >= 25))
    s.job("7306001", 0, nodes, 8, -38, 15, "completed", name="llama3-8b-eval", exit_code=0,
          image="nvcr.io/nvidia/pytorch:24.05-py3")
    s.progress("7306001", "gpu-f01", -37, 14.5, step_time=2.0)
    for nd in nodes:
        s.change(nd, 20, "driver", "535.161.08", "550.90.07", actor="ansible", ticket="CHG-4471")
        s.versions(nd, 20.5, **dict(old, driver="550.90.07", cuda="12.4"))
    s.job("7306002", 0, nodes, 8, 25, 26, "failed", name="llama3-8b-pretrain", exit_code=1,
          image="nvcr.io/nvidia/pytorch:24.05-py3")
    for r in (0, 8, 16, 24):
        s.log("7306002", nodes[r // 8], 25.8,
              "Traceback (most recent call last):\n  File \"/opt/megatron/pretrain_gpt.py\", line 88, in <module>\n"
              "    torch.cuda.set_device(local_rank)\nRuntimeError: CUDA error: system not yet initialized\n"
              "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
              "below might be incorrect.", rank=r)
    return s


def s07_image_bump() -> Scenario:
    """Kubernetes (training-operator PyTorchJob), 2 x 8 A100. The team's SFT job ran on
    harbor.corp/ml/sft:2024.10.1 and succeeded; the same job resubmitted on sft:2024.11.0 fails
    40 s in: `ImportError: libcudnn.so.9: cannot open shared object file`; FAILED exit 1."""
    s = Scenario("s07_image_bump", 18)
    nodes = ["k8s-a100-07", "k8s-a100-08"]
    site(s, nodes, lambda nd: "rack7-tor", to=90, busy=lambda nd: (lambda m: m < 40 or m >= 60))
    src = "kubernetes@kube-api"
    s.job("sft-qwen-7b-8k2lq", 0, nodes, 8, -35, 40, "completed", name="sft-qwen-7b", user="ana",
          image="harbor.corp/ml/sft:2024.10.1", exit_code=0, src=src, tenant="nlp")
    s.progress("sft-qwen-7b-8k2lq", "k8s-a100-07", -34, 39.5, step_time=1.1, tenant="nlp")
    s.job("sft-qwen-7b-r7x5d", 0, nodes, 8, 60, 61, "failed", name="sft-qwen-7b", user="ana",
          image="harbor.corp/ml/sft:2024.11.0", exit_code=1, src=src, tenant="nlp")
    s.log("sft-qwen-7b-r7x5d", "k8s-a100-07", 60.6,
          "Traceback (most recent call last):\n  File \"/app/train.py\", line 4, in <module>\n    import torch\n"
          "  File \"/usr/local/lib/python3.10/dist-packages/torch/__init__.py\", line 290, in <module>\n"
          "    from torch._C import *  # noqa: F403\nImportError: libcudnn.so.9: cannot open shared object file: "
          "No such file or directory", rank=0, stream="container", tenant="nlp")
    s.container("sft-qwen-7b-r7x5d", "k8s-a100-07", 60.7, "pytorch", "exited", exit_code=1)
    return s


def s08_driver_mismatch() -> Scenario:
    """Slurm, 4 x 8 H100. gpu-g03 was reimaged last week and came back with driver 545.23.08 while
    the rest of the partition runs 550.54.15 (no change event in the window; only the periodic
    inventory shows it). NCCL init fails on gpu-g03's ranks with `CUDA driver version is
    insufficient for CUDA runtime version`; FAILED 2 min in."""
    s = Scenario("s08_driver_mismatch", 21)
    nodes = [f"gpu-g{i:02d}" for i in range(1, 5)]
    std = dict(driver="550.54.15", cuda="12.4", nccl="2.21.5", gpu_firmware="96.00.89.00.01", bmc_firmware="2.18.1",
               bios="2.3.6", kernel="5.15.0-119-generic", os="Ubuntu 22.04.4 LTS", ofed="24.04-0.6.6.0",
               container_runtime="enroot 3.4.1")
    site(s, nodes, lambda nd: "pod4-leaf1", to=30,
         versions=lambda nd: dict(std, driver="545.23.08", cuda="12.3") if nd == "gpu-g03" else std,
         busy=lambda nd: (lambda m: False))
    job = "7308030"
    s.job(job, 0, nodes, 8, 0, 2.2, "failed", name="dit-xl-train", exit_code=1, image="nvcr.io/nvidia/pytorch:24.05-py3")
    for r in (16, 17, 23):
        s.log(job, "gpu-g03", 1.5,
              f"gpu-g03:51820:51820 [{r - 16}] NCCL INFO cudaDriverVersion 12030\n"
              f"gpu-g03:51820:51820 [{r - 16}] include/alloc.h:48 NCCL WARN Cuda failure 'CUDA driver version is "
              f"insufficient for CUDA runtime version'", rank=r)
    s.log(job, "gpu-g01", 1.8, "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
          "NCCLUtils.hpp:275, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
          rank=0)
    return s


def s09_port_flap() -> Scenario:
    """Slurm, 4 x 8 H100, RoCE. The switch port sw-leaf-12 Ethernet24 facing gpu-h02's mlx5_1
    (a failing transceiver) flaps 4 times in 5 min from 44 min, with input errors climbing before;
    gpu-h02's HCA counts link_downed and symbol errors; NCCL reports status=12 (retry exceeded)
    and the job FAILED at 50 min."""
    s = Scenario("s09_port_flap", 24)
    nodes = [f"gpu-h{i:02d}" for i in range(1, 5)]
    job = "7309124"
    ports = {"gpu-h01": "Ethernet8", "gpu-h02": "Ethernet24", "gpu-h03": "Ethernet40", "gpu-h04": "Ethernet48"}

    def pm(nd, m, inc):
        if nd == "gpu-h02" and m >= 30:
            inc["in_errors"] = int((m - 30) * 140)
            if 44 <= m < 49 and int(m) % 2 == 0:
                return "down"

    def rm(nd, m, inc):
        if nd == "gpu-h02" and m >= 30:
            inc["symbol_error"] = int((m - 30) * 60)
            inc["port_rcv_errors"] = int((m - 30) * 12)
            if 44 <= m < 49 and int(m) % 2 == 0:
                inc["link_downed"] = 1
    site(s, nodes, lambda nd: "pod5-leaf12", nic="mlx5_1", port_of=lambda nd: ports[nd], port_mod=pm,
         rdma_mod=rm, to=75)
    # the topology names switch "pod5-leaf12-sw" by default: give it its real name
    for e in s.events:
        if e["kind"] == "inventory.topology":
            e["data"]["links"][0]["switch"] = "sw-leaf-12"
        if e["kind"] == "net.port":
            e["data"]["device"] = "sw-leaf-12"
            e["source"] = "snmp@sw-leaf-12"
    for k, m in enumerate((44.0, 46.0, 47.5, 48.2)):
        s.link("gpu-h02", "sw-leaf-12", "Ethernet24", m, "down")
        s.link("gpu-h02", "sw-leaf-12", "Ethernet24", m + 0.4, "up")
    s.job(job, 0, nodes, 8, 0, 50.5, "failed", name="llama3-405b-cpt", exit_code=1,
          image="nvcr.io/nvidia/pytorch:24.05-py3")
    s.progress(job, "gpu-h01", 1, 44, step_time=4.0)
    ckpts(s, job, "gpu-h01", 15, 0, 44, "/lustre/train/405b/iter_{step:07d}", 15)
    s.log(job, "gpu-h02", 46.2,
          "gpu-h02:33011:33490 [2] NCCL INFO NET/IB : Got completion from peer 10.40.2.21<49202> with status=12 "
          "opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.40.2.18 remoteGid ::ffff:10.40.2.21",
          rank=10)
    s.log(job, "gpu-h02", 46.3,
          "gpu-h02:33011:33490 [2] NCCL INFO transport/net.cc:1298 -> 6\ntorch.distributed.DistBackendError: "
          "NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, remote process exited or "
          "there was a network error, NCCL version 2.21.5\nncclRemoteError: A call failed possibly due to a "
          "network error or a remote process exiting prematurely.", rank=10)
    return s


def s10_roce_congestion() -> Scenario:
    """Slurm, 8 x 8 H100, RoCEv2 with ECN/DCQCN. Another tenant's all-to-all saturates leaf
    pod6-leaf3 from 30 min: CNPs/ECN marks on every HCA of the segment rise ~200x,
    local_ack_timeout_err and out_of_sequence climb, switch out_discards grow, no link errors,
    no link down. The job (4 of its nodes on pod6-leaf3, 4 on pod6-leaf4) slows, then its
    ranks on pod6-leaf3 time out (status=12) and it FAILED at 58 min."""
    s = Scenario("s10_roce_congestion", 27)
    nodes = [f"gpu-i{i:02d}" for i in range(1, 9)]
    job = "7310260"
    seg = {nd: ("pod6-leaf3" if i < 4 else "pod6-leaf4") for i, nd in enumerate(nodes)}

    def rm(nd, m, inc):
        if seg[nd] == "pod6-leaf3" and m >= 30:
            inc.update(np_cnp_sent=9000, rp_cnp_handled=8800, np_ecn_marked_roce_packets=12000,
                       local_ack_timeout_err=int((m - 30) * 3), out_of_sequence=int((m - 30) * 50),
                       packet_seq_err=int((m - 30) * 4))

    def pm(nd, m, inc):
        if seg[nd] == "pod6-leaf3" and m >= 30:
            inc["out_discards"] = 2500
    site(s, nodes, lambda nd: seg[nd], rdma_mod=rm, port_mod=pm, to=80)
    s.job(job, 0, nodes, 8, 0, 58.3, "failed", name="deepseek-moe-a2a", exit_code=1,
          image="nvcr.io/nvidia/pytorch:24.05-py3")
    s.progress(job, "gpu-i01", 1, 48, step_time=lambda m: 5.0 if m < 30 else 9.0)
    ckpts(s, job, "gpu-i01", 20, 0, 48, "/lustre/train/dsmoe/step{step}", 12)
    for r, nd in ((3, "gpu-i01"), (12, "gpu-i02"), (27, "gpu-i04")):
        s.log(job, nd, 57.9, f"{nd}:40112:40380 [{r % 8}] NCCL INFO NET/IB : Got completion from peer 10.60.3.9"
              f"<44120> with status=12 opcode=1 len=0 vendor err 129 (Recv) localGid ::ffff:10.60.3.{r} "
              f"remoteGid ::ffff:10.60.3.9", rank=r)
    s.log(job, "gpu-i01", 58.0, watchdog(3, 99120, op="ALLTOALL_BASE"), rank=3)
    return s


def s11_gpfs_slow() -> Scenario:
    """Slurm, 4 x 8 A100. The GPFS scratch file system slows from 35 min (write latency 3 ms ->
    700-1200 ms, throughput collapses, queue depth 60+); the checkpoint started at 50 min never
    completes, rank 0 blocks in torch.save (`task ... blocked for more than 120 seconds`), the
    others wait in a barrier: no progress after 50 min; the user scancels at 78 min. One stall
    incident."""
    s = Scenario("s11_gpfs_slow", 30)
    nodes = [f"gpu-j{i:02d}" for i in range(1, 5)]
    job = "7311377"

    def stm(nd, p, m, d):
        if m >= 35:
            d.update(write_lat_ms=700.0 + (int(m) % 5) * 120, read_lat_ms=420.0, write_mbps=3.0, read_mbps=11.0,
                     write_iops=12, read_iops=40, queue_depth=64.0)
    site(s, nodes, lambda nd: "pod7-leaf1", mounts=(("/gpfs/scratch", "gpfs", "gpfs-nsd01"),
                                                     ("/home", "nfs", "home-nas")), storage_mod=stm, to=95)
    s.job(job, 0, nodes, 8, 0, 78, "cancelled", name="t5-xxl", exit_code=0, signal=15,
          image="nvcr.io/nvidia/pytorch:24.01-py3", reason="cancelled by user")
    s.progress(job, "gpu-j01", 1, 50, step_time=lambda m: 2.0 if m < 35 else 2.6)
    ckpts(s, job, "gpu-j01", 25, 0, 49, "/gpfs/scratch/t5/ckpt/step_{step}", 25)
    s.ckpt(job, "gpu-j01", 50.1, "started", 1260, "/gpfs/scratch/t5/ckpt/step_1260")
    for m in (53, 55, 57):
        s.log(job, "gpu-j01", m, "INFO: task pt_main_thread:22811 blocked for more than 120 seconds.\n"
              "      Tainted: P           OE     5.15.0-119-generic #129-Ubuntu\n"
              "\"echo 0 > /proc/sys/kernel/hung_task_timeout_secs\" disables this message.", stream="kernel")
    s.log(job, "gpu-j01", 78.0, "slurmstepd: error: *** JOB 7311377 ON gpu-j01 CANCELLED AT 2026-11-24T07:18:00 ***",
          stream="stderr")
    return s


def s12_enospc() -> Scenario:
    """Slurm, 2 x 8 H100. The WEKA checkpoint file system /weka/ckpt fills (used 95 % -> 100 %,
    mount reported `full`); the checkpoint at step 4200 fails with errno 28 and torch.save's
    `unexpected pos` error; FAILED."""
    s = Scenario("s12_enospc", 33)
    nodes = ["gpu-k01", "gpu-k02"]
    job = "7312420"

    def stm(nd, p, m, d):
        if p == "/weka/ckpt":
            d["used_pct"] = min(100.0, 95.0 + max(0.0, m - 20) * 0.12)
    site(s, nodes, lambda nd: "pod8-leaf1", mounts=(("/weka/ckpt", "wekafs", "weka-01"),
                                                     ("/lustre/data", "lustre", "mds02")), storage_mod=stm, to=85)
    s.job(job, 0, nodes, 8, 0, 61.5, "failed", name="codegen-16b", exit_code=1,
          image="nvcr.io/nvidia/pytorch:24.05-py3")
    s.progress(job, "gpu-k01", 1, 60.2, step_time=0.85)
    ckpts(s, job, "gpu-k01", 20, 0, 41, "/weka/ckpt/codegen16b/step_{step}", 70, nbytes=96_000_000_000)
    s.ckpt(job, "gpu-k01", 60.3, "started", 4200, "/weka/ckpt/codegen16b/step_4200")
    s.mount("gpu-k01", 60.8, "/weka/ckpt", "full", error="No space left on device")
    s.ckpt(job, "gpu-k01", 61.0, "failed", 4200, "/weka/ckpt/codegen16b/step_4200", duration=42.0,
           error="OSError: [Errno 28] No space left on device")
    s.log(job, "gpu-k01", 61.1,
          "Traceback (most recent call last):\n  File \"/workspace/train.py\", line 402, in save_checkpoint\n"
          "    torch.save(state, path)\nRuntimeError: [enforce fail at inline_container.cc:603] . unexpected pos "
          "2319351872 vs 2319351760\n\nDuring handling of the above exception, another exception occurred:\n"
          "OSError: [Errno 28] No space left on device: '/weka/ckpt/codegen16b/step_4200/model_states.pt'", rank=0)
    return s


def s13_stale_nfs() -> Scenario:
    """Slurm, 2 x 4 L40S. The NFS export /mnt/shared is recreated on the filer during a
    maintenance; every node's mount goes stale at 42 min; the next checkpoint fails with errno 116
    (Stale file handle) and the job FAILED."""
    s = Scenario("s13_stale_nfs", 36)
    nodes = ["l40s-01", "l40s-02"]
    job = "7313501"
    site(s, nodes, lambda nd: "rack2-tor", mounts=(("/mnt/shared", "nfs4", "nas-02"),), n_gpus=4, to=75)
    s.job(job, 0, nodes, 4, 0, 45.3, "failed", name="whisper-ft", exit_code=1, image=None)
    s.progress(job, "l40s-01", 1, 44.9, step_time=0.6)
    ckpts(s, job, "l40s-01", 15, 0, 44, "/mnt/shared/whisper/checkpoint-{step}", 100, nbytes=3_200_000_000,
          duration=9.0)
    for nd in nodes:
        s.mount(nd, 42.0, "/mnt/shared", "stale", error="Stale file handle")
    s.ckpt(job, "l40s-01", 45.0, "started", 4500, "/mnt/shared/whisper/checkpoint-4500")
    s.ckpt(job, "l40s-01", 45.1, "failed", 4500, "/mnt/shared/whisper/checkpoint-4500",
           error="OSError: [Errno 116] Stale file handle: '/mnt/shared/whisper/checkpoint-4500'")
    s.log(job, "l40s-01", 45.15, "Traceback (most recent call last):\n  File \"/home/dev/ft.py\", line 211, in "
          "<module>\n    trainer.train()\nOSError: [Errno 116] Stale file handle: "
          "'/mnt/shared/whisper/checkpoint-4500'", rank=0)
    return s


def s14_preempted() -> Scenario:
    """Slurm with preemption (PreemptMode=REQUEUE). A low-priority job on 2 x 8 H100 is preempted
    at 40 min by a high-priority reservation job; it is requeued and its attempt 1 resumes from the
    last checkpoint and completes. Telemetry is clean."""
    s = Scenario("s14_preempted", 39)
    nodes = ["gpu-m01", "gpu-m02"]
    job = "7314600"
    site(s, nodes, lambda nd: "pod9-leaf1", to=130)
    s.job(job, 0, nodes, 8, 0, 40, "preempted", name="rlhf-ppo-scavenger", exit_code=0, signal=15,
          image="nvcr.io/nvidia/pytorch:24.05-py3", reason="Preempted by job 7314655")
    s.progress(job, "gpu-m01", 1, 39.8, step_time=1.2)
    ckpts(s, job, "gpu-m01", 15, 0, 39, "/lustre/train/ppo/ckpt{step}", 50, duration=10.0)
    s.log(job, "gpu-m01", 40.0, "slurmstepd: error: *** JOB 7314600 ON gpu-m01 CANCELLED AT 2026-11-24T15:40:00 DUE "
          "TO PREEMPTION ***")
    s.emit(s.t(40.05), "sched.job", "slurm@ctl-1", dict(state="requeued", attempt=0, nodes=nodes, gpus=16,
           ranks={str(r): nodes[r // 8] for r in range(16)}, image="nvcr.io/nvidia/pytorch:24.05-py3",
           name="rlhf-ppo-scavenger", user="mlteam", exit_code=None, signal=None, start_ts=s.t(0), end_ts=s.t(40),
           reason="Preempted by job 7314655"), job=job)
    s.job("7314655", 0, ["gpu-m01", "gpu-m02"], 8, 41, 70, "completed", name="eval-urgent", exit_code=0,
          image="nvcr.io/nvidia/pytorch:24.05-py3", user="lead", pending_reason=None)
    s.progress("7314655", "gpu-m01", 42, 69.5, step_time=1.0)
    s.job(job, 1, nodes, 8, 72, 125, "completed", name="rlhf-ppo-scavenger", exit_code=0,
          image="nvcr.io/nvidia/pytorch:24.05-py3", pending_reason="BeginTime")
    s.progress(job, "gpu-m01", 73, 124.5, step_time=1.2, step0=1850)
    return s


def s15_timelimit() -> Scenario:
    """Slurm, 2 x 8 A100, --time=01:30:00. The job simply runs out of walltime at 90 min;
    slurmstepd prints DUE TO TIME LIMIT; TIMEOUT. Telemetry clean."""
    s = Scenario("s15_timelimit", 43)
    nodes = ["gpu-n01", "gpu-n02"]
    job = "7315900"
    site(s, nodes, lambda nd: "pod10-leaf1", to=110)
    s.job(job, 0, nodes, 8, 0, 90, "timeout", name="bert-large-mlm", exit_code=0, signal=15,
          image="nvcr.io/nvidia/pytorch:23.10-py3", reason="TimeLimit")
    s.progress(job, "gpu-n01", 1, 89.9, step_time=0.5)
    ckpts(s, job, "gpu-n01", 30, 0, 89, "/lustre/train/bert/ckpt-{step}", 120, duration=6.0)
    s.log(job, "gpu-n01", 90.0, "slurmstepd: error: *** JOB 7315900 ON gpu-n01 CANCELLED AT 2026-11-24T20:30:00 DUE "
          "TO TIME LIMIT ***")
    return s


def s16_psu() -> Scenario:
    """Slurm, 4 x 8 H100. gpu-p03 loses its second PSU (SEL critical, PSU2 power 0 W) at 55 min
    while PSU1 had already failed at 20 min (SEL critical); the node powers off at 57 min: its
    telemetry stops; slurmctld marks it DOWN (Not responding) and the job NODE_FAIL."""
    s = Scenario("s16_psu", 46)
    nodes = [f"gpu-p{i:02d}" for i in range(1, 5)]
    job = "7316040"

    def gm(nd, g, m, d):
        if nd == "gpu-p03" and m >= 57:
            return False

    def sm(nd, m, d):
        if nd == "gpu-p03" and d["sensor"] == "PSU1 Input Power" and m >= 20:
            d.update(value=0.0, status="critical")
        if nd == "gpu-p03" and d["sensor"] == "PSU2 Input Power" and m >= 55:
            d.update(value=0.0, status="critical")
    site(s, nodes, lambda nd: "pod11-leaf1", gpu_mod=gm, sensor_mod=sm, to=56)
    for nd in nodes:
        if nd != "gpu-p03":
            s.gpus(nd, 56.5, 85)
    s.sel("gpu-p03", 20.0, "212", "critical", "Power Supply", "Power Supply 1: AC lost - Asserted",
          message_id="PSU0002")
    s.sel("gpu-p03", 55.0, "213", "critical", "Power Supply", "Power Supply 2: Failure detected - Asserted",
          message_id="PSU0003")
    s.job(job, 0, nodes, 8, 0, 62, "node_fail", name="llama3-70b-sft", exit_code=None,
          image="nvcr.io/nvidia/pytorch:24.05-py3", reason="NodeFail")
    s.progress(job, "gpu-p01", 1, 56.8, step_time=3.0)
    ckpts(s, job, "gpu-p01", 20, 0, 56, "/lustre/train/70bsft/ckpt_{step}", 20)
    s.sched_node("gpu-p03", 61.5, "down", reason="Not responding")
    for r in (0, 8, 24):
        s.log(job, nodes[r // 8], 61.0, f"{nodes[r // 8]}:1201:1388 [{r % 8}] NCCL INFO NET/IB : Got completion "
              f"from peer 10.11.0.23<50110> with status=12 opcode=0 len=0 vendor err 129 (Recv)", rank=r)
    return s


def s17_gpu_oom() -> Scenario:
    """Slurm, 2 x 8 H100, all GPUs visible to every rank (local_rank = device). Rank 11 (gpu-q02,
    GPU 3) goes out of memory on a long sequence at 37 min; its NVML memory was near full just
    before; FAILED."""
    s = Scenario("s17_gpu_oom", 49)
    nodes = ["gpu-q01", "gpu-q02"]
    job = "7317011"

    def gm(nd, g, m, d):
        if nd == "gpu-q02" and g == 3 and 33 <= m < 37.5:
            d["mem_used_mib"] = 80900 + (int(m) % 3) * 100
    site(s, nodes, lambda nd: "pod12-leaf1", gpu_mod=gm, to=60)
    s.job(job, 0, nodes, 8, 0, 37.6, "failed", name="longctx-128k", exit_code=1,
          image="nvcr.io/nvidia/pytorch:24.05-py3")
    s.progress(job, "gpu-q01", 1, 36.9, step_time=6.0)
    ckpts(s, job, "gpu-q01", 15, 0, 36, "/lustre/train/longctx/ckpt_{step}", 10)
    s.log(job, "gpu-q02", 37.2,
          "[rank11]: Traceback (most recent call last):\n[rank11]:   File \"/workspace/train.py\", line 233, in "
          "<module>\n[rank11]:     out = model(input_ids)\n[rank11]: torch.OutOfMemoryError: CUDA out of memory. "
          "Tried to allocate 2.50 GiB. GPU 3 has a total capacity of 79.15 GiB of which 1.02 GiB is free. "
          "Including non-PyTorch memory, this process has 78.11 GiB memory in use. Of the allocated memory "
          "74.20 GiB is allocated by PyTorch, and 2.31 GiB is reserved by PyTorch but unallocated. If reserved "
          "but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
          "fragmentation.", rank=11)
    return s


def s18_host_oom() -> Scenario:
    """Kubernetes, 1 x 8 A100 pod. The dataloader (16 workers, each with a copy of a large
    tokenizer cache) exhausts the pod's 500 GiB memory limit at 48 min: the kernel's memory-cgroup
    OOM killer kills the trainer; containerd reports oom_killed (137); FAILED exit 137."""
    s = Scenario("s18_host_oom", 52)
    nodes = ["k8s-a100-21"]
    job = "pretrain-tiny-llm-9wq4z"
    site(s, nodes, lambda nd: "rack9-tor", to=70)
    s.job(job, 0, nodes, 8, 0, 48.3, "failed", name="pretrain-tiny-llm", user="bo", exit_code=137, signal=9,
          image="harbor.corp/ml/pretrain:1.8.2", src="kubernetes@kube-api", tenant="research")
    s.progress(job, "k8s-a100-21", 1, 47.8, step_time=0.4, tenant="research")
    ckpts(s, job, "k8s-a100-21", 20, 0, 47, "/lustre/train/tiny/ckpt_{step}", 150, duration=5.0)
    s.log(job, "k8s-a100-21", 48.0,
          "Memory cgroup out of memory: Killed process 41822 (pt_main_thread) total-vm:612457280kB, "
          "anon-rss:521165824kB, file-rss:0kB, shmem-rss:1048576kB, UID:1000 pgtables:1051200kB oom_score_adj:936",
          stream="kernel", tenant="research")
    s.container(job, "k8s-a100-21", 48.1, "pytorch", "oom_killed", exit_code=137)
    return s


def s19_app_nan() -> Scenario:
    """Slurm, 4 x 8 H100. The loss goes NaN after a bad learning-rate warmup; the training script
    raises `ValueError: loss is NaN at step 15300`; FAILED. Noise only: GPU 2 of gpu-r01 counts
    correctable SBEs; a switch port facing gpu-r09 (not in the job) flaps; a one-minute storage
    latency blip; an Xid 13 on no node of the job."""
    s = Scenario("s19_app_nan", 55)
    nodes = [f"gpu-r{i:02d}" for i in range(1, 5)]
    job = "7319153"

    def gm(nd, g, m, d):
        if nd == "gpu-r01" and g == 2:
            d["ecc_sbe"] = int(max(0, m) // 10)

    def stm(nd, p, m, d):
        if 30 <= m < 31:
            d["write_lat_ms"] = 45.0
    site(s, nodes + ["gpu-r09"], lambda nd: "pod13-leaf1", gpu_mod=gm, storage_mod=stm, to=80,
         busy=lambda nd: (lambda m: nd != "gpu-r09"))
    s.link("gpu-r09", "pod13-leaf1-sw", "Ethernet20", 33.0, "down")
    s.link("gpu-r09", "pod13-leaf1-sw", "Ethernet20", 33.3, "up")
    s.xid("gpu-r09", 34.0, 0, "0000:18:00", 13, "Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range "
          "Address", pid=9911, pname="cuda_memtest")
    s.job(job, 0, nodes, 8, 0, 52.4, "failed", name="llama3-8b-lr-sweep-17", exit_code=1,
          image="nvcr.io/nvidia/pytorch:24.05-py3")
    s.progress(job, "gpu-r01", 1, 52.0, step_time=0.2)
    ckpts(s, job, "gpu-r01", 20, 0, 51, "/lustre/train/sweep17/step_{step}", 300, duration=8.0)
    s.log(job, "gpu-r01", 52.1,
          "Traceback (most recent call last):\n  File \"/workspace/train.py\", line 517, in <module>\n"
          "    main()\n  File \"/workspace/train.py\", line 488, in main\n    raise ValueError(f\"loss is NaN at "
          "step {step}\")\nValueError: loss is NaN at step 15300", rank=0)
    return s


def s20_gsp_timeout() -> Scenario:
    """Slurm, 2 x 8 H100, driver 550.54.15 with GSP firmware. GPU 1 of gpu-s02 hits XID 119
    (GSP RPC timeout) twice, then XID 154 (recovery action: GPU reset required); NCCL on rank 9
    reports `unhandled cuda error`; FAILED. No ECC, no NVLink, no PCIe, no thermal signs."""
    s = Scenario("s20_gsp_timeout", 58)
    nodes = ["gpu-s01", "gpu-s02"]
    job = "7320119"
    site(s, nodes, lambda nd: "pod14-leaf1", to=70)
    s.job(job, 0, nodes, 8, 0, 44.6, "failed", name="vlm-pretrain", exit_code=1,
          image="nvcr.io/nvidia/pytorch:24.05-py3")
    s.progress(job, "gpu-s01", 1, 43.5, step_time=2.5)
    ckpts(s, job, "gpu-s01", 20, 0, 43, "/lustre/train/vlm/ckpt_{step}", 24)
    for m in (43.6, 43.8):
        s.xid("gpu-s02", m, 1, "0000:2a:00", 119, "Timeout after 6s of waiting for RPC response from GPU1 GSP! "
              "Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).", pid=61022)
    s.xid("gpu-s02", 44.0, 1, "0000:2a:00", 154, "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset "
          "Required)", pid=None)
    s.log(job, "gpu-s02", 44.3, "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
          "ProcessGroupNCCL.cpp:1970, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version "
          "2.21.5\nLast error:\nCuda failure 'unspecified launch failure'", rank=9)
    return s


def s21_silent_hang() -> Scenario:
    """Slurm, 4 x 8 H100. The job hangs in an all-reduce at 40 min with every layer clean (a
    deadlock in the user's custom pipeline schedule, though nothing says so); progress stops; 30 min
    later every rank's watchdog (Timeout 1800000 ms) fires and the job FAILED (SIGABRT)."""
    s = Scenario("s21_silent_hang", 61)
    nodes = [f"gpu-t{i:02d}" for i in range(1, 5)]
    job = "7321400"
    site(s, nodes, lambda nd: "pod15-leaf1", to=95,
         busy=lambda nd: (lambda m: True))
    s.job(job, 0, nodes, 8, 0, 70.5, "failed", name="pp-interleaved-test", exit_code=134, signal=6,
          image="nvcr.io/nvidia/pytorch:24.05-py3")
    s.progress(job, "gpu-t01", 1, 40, step_time=3.5)
    ckpts(s, job, "gpu-t01", 15, 0, 39, "/lustre/train/pp/iter_{step}", 17)
    for r in range(0, 32, 8):
        s.log(job, nodes[r // 8], 70.1, watchdog(r, 7711, timeout_ms=1800000), rank=r)
        s.log(job, nodes[r // 8], 70.2, nccl_abort(r), rank=r)
    return s


def s22_healthy_noisy() -> Scenario:
    """Slurm, 4 x 8 H100, completes normally at 100 min. Noise: correctable SBEs creep on one GPU,
    sw_power_cap throttling on all GPUs of gpu-u02 (site power capping), a fan warning on gpu-u03's
    BMC, one failed checkpoint (transient EIO) retried successfully 1 min later, a 2-minute write
    latency spike, a port flap on a switch port facing a node outside the job."""
    s = Scenario("s22_healthy_noisy", 64)
    nodes = [f"gpu-u{i:02d}" for i in range(1, 5)]
    job = "7322001"

    def gm(nd, g, m, d):
        if nd == "gpu-u01" and g == 7:
            d["ecc_sbe"] = int(max(0, m + 40) // 7)
        if nd == "gpu-u02":
            d.update(throttle=["sw_power_cap"], power_w=500, sm_clock_mhz=1755)

    def sm(nd, m, d):
        if nd == "gpu-u03" and d["sensor"] == "Fan 1" and 20 <= m < 60:
            d.update(value=3100.0, status="warning")

    def stm(nd, p, m, d):
        if 60 <= m < 62:
            d.update(write_lat_ms=85.0, queue_depth=12.0)
    site(s, nodes + ["gpu-u08"], lambda nd: "pod16-leaf1", gpu_mod=gm, sensor_mod=sm, storage_mod=stm, to=125,
         busy=lambda nd: (lambda m: nd != "gpu-u08" and 0 <= m <= 100))
    s.link("gpu-u08", "pod16-leaf1-sw", "Ethernet20", 45.0, "down")
    s.link("gpu-u08", "pod16-leaf1-sw", "Ethernet20", 45.2, "up")
    s.job(job, 0, nodes, 8, 0, 100, "completed", name="llama3-8b-ablation-a", exit_code=0,
          image="nvcr.io/nvidia/pytorch:24.05-py3")
    s.progress(job, "gpu-u01", 1, 99.8, step_time=2.0)
    ckpts(s, job, "gpu-u01", 25, 0, 99, "/lustre/train/abl/step_{step}", 30)
    s.ckpt(job, "gpu-u01", 62.0, "started", 1860, "/lustre/train/abl/step_1860")
    s.ckpt(job, "gpu-u01", 62.3, "failed", 1860, "/lustre/train/abl/step_1860",
           error="OSError: [Errno 5] Input/output error")
    s.ckpt(job, "gpu-u01", 63.0, "started", 1890, "/lustre/train/abl/step_1890")
    s.ckpt(job, "gpu-u01", 63.7, "succeeded", 1890, "/lustre/train/abl/step_1890", nbytes=16_000_000_000,
           duration=40.0)
    s.log(job, "gpu-u01", 62.35, "[WARNING] checkpoint step_1860 failed (OSError: [Errno 5] Input/output error); "
          "retrying at next step", rank=0, stream="stdout")
    return s


def s23_user_cancel() -> Scenario:
    """Kubernetes, 2 x 8 A100. The user deletes the PyTorchJob at 55 min while it makes progress
    (their loss curve looked wrong): state cancelled. Meanwhile a BMC firmware change lands on a
    node outside the job and that node's BMC logs a warning SEL entry."""
    s = Scenario("s23_user_cancel", 67)
    nodes = ["k8s-a100-31", "k8s-a100-32"]
    job = "dpo-ablation-b-2k9xq"
    site(s, nodes + ["k8s-a100-33"], lambda nd: "rack3-tor", to=80,
         busy=lambda nd: (lambda m: nd != "k8s-a100-33" and 0 <= m <= 55))
    s.change("k8s-a100-33", 30, "bmc_firmware", "2.18.1", "2.19.0", actor="fw-bot", ticket="CHG-5120")
    s.sel("k8s-a100-33", 31.0, "77", "warning", "Management Subsystem Health", "BMC firmware update completed; BMC "
          "reset")
    s.job(job, 0, nodes, 8, 0, 55, "cancelled", name="dpo-ablation-b", user="chen", exit_code=143, signal=15,
          image="harbor.corp/ml/dpo:0.9.3", src="kubernetes@kube-api", reason="Deleted by user chen", tenant="align")
    s.progress(job, "k8s-a100-31", 1, 54.9, step_time=1.4, tenant="align")
    ckpts(s, job, "k8s-a100-31", 20, 0, 54, "/lustre/train/dpo/ckpt_{step}", 40, duration=15.0)
    s.log(job, "k8s-a100-31", 55.0, "[2026-11-25 19:55:00] received SIGTERM, shutting down", rank=0,
          stream="container", tenant="align")
    return s


def s24_healthy_neighbour_fault() -> Scenario:
    """Slurm, 2 x 8 H100 job completes at 80 min. A node of the same rack *outside* the job
    (gpu-w05, idle) has an XID 79 and is drained by the health check; one of the job's own nodes
    is drained *after* the job ends (reason: scheduled maintenance); the job's checkpoints slow from
    20 s to 90 s (still succeed)."""
    s = Scenario("s24_healthy_neighbour_fault", 70)
    nodes = ["gpu-w01", "gpu-w02"]
    job = "7324800"

    def gm(nd, g, m, d):
        if nd == "gpu-w05" and g == 2 and m >= 35:
            return False

    def stm(nd, p, m, d):
        if 50 <= m < 75:
            d.update(write_lat_ms=9.0, write_mbps=60.0)
    site(s, nodes + ["gpu-w05"], lambda nd: "pod17-leaf1", gpu_mod=gm, storage_mod=stm, to=100,
         busy=lambda nd: (lambda m: nd != "gpu-w05" and 0 <= m <= 80))
    s.xid("gpu-w05", 34.5, 2, "0000:3b:00", 79, "GPU has fallen off the bus.")
    s.sched_node("gpu-w05", 35.5, "drain", reason="healthcheck: GPU 2 missing (Xid 79)")
    s.job(job, 0, nodes, 8, 0, 80, "completed", name="rerank-distill", exit_code=0,
          image="nvcr.io/nvidia/pytorch:24.05-py3")
    s.progress(job, "gpu-w01", 1, 79.8, step_time=1.0)
    for m, dur in ((20, 20.0), (40, 22.0), (60, 90.0)):
        step = m * 60
        s.ckpt(job, "gpu-w01", m, "started", step, f"/lustre/train/rerank/ckpt_{step}")
        s.ckpt(job, "gpu-w01", m + dur / 60, "succeeded", step, f"/lustre/train/rerank/ckpt_{step}",
               nbytes=20_000_000_000, duration=dur)
    s.sched_node("gpu-w01", 82.0, "drain", reason="scheduled maintenance CHG-5200")
    return s


SCENARIOS = [s01_xid79, s02_ecc_dbe, s03_nvlink, s04_thermal, s05_pcie, s06_driver_upgrade, s07_image_bump,
             s08_driver_mismatch, s09_port_flap, s10_roce_congestion, s11_gpfs_slow, s12_enospc, s13_stale_nfs,
             s14_preempted, s15_timelimit, s16_psu, s17_gpu_oom, s18_host_oom, s19_app_nan, s20_gsp_timeout,
             s21_silent_hang, s22_healthy_noisy, s23_user_cancel, s24_healthy_neighbour_fault]


def build(out: Path, only=None) -> dict[str, Path]:
    paths = {}
    for fn in SCENARIOS:
        if only and fn.__name__ not in only:
            continue
        paths[fn.__name__] = fn().write(out)
    return paths


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0]) if argv else DEFAULT_OUT
    paths = build(out)
    n = sum(1 for p in paths.values() for _ in p.open())
    print(f"wrote {len(paths)} scenarios, {n} events, to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
