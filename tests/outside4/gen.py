"""Outside-check round 4: failure stories written from the event contract alone.

``python -m tests.outside4.gen [DIR]`` writes ``<scenario>.jsonl`` per scenario (contract v1,
deterministic: the same bytes on every run) into DIR (default ``var/outside4/``, not committed)
and prints the event count per file.

Written from ``shared/spec/events.md``, README.md and ``faultline diagnose/validate --help`` only
(no diagnosis rules, no other round's scenarios or answers). Every scenario is one story an SRE
meets on a GPU cluster; every layer that a site would collect reports normally unless the story
says otherwise (60 s NVML samples, 60 s switch/HCA/storage counters, 120 s BMC sensors, 10 min
mount state, 30 min inventory and topology re-reports, rank-0 heartbeats every 30 s, checkpoints
every 20 min). The expected answer per attempt is in ``EXPECT`` (written to expectations.json).

Log formats imitated (as these tools print them): the NVIDIA driver's ``NVRM: Xid (PCI:dddd:bb:dd):
N, ...`` kernel lines; PyTorch ``ProcessGroupNCCL`` watchdog lines (``[rankN]:[E1124 ...]
Watchdog caught collective operation timeout: WorkNCCL(SeqNum=..., OpType=ALLREDUCE, ...,
Timeout(ms)=600000) ran for ... milliseconds before timing out.``); NCCL ``host:pid:tid [dev]
NCCL WARN ...``; mlx5_core health/link kernel lines; Lustre ``LustreError: 11-0:`` / ``Connection
to ... was lost`` lines; the kernel OOM killer; ext4 ``Remounting filesystem read-only``; mce
``[Hardware Error]``; slurmstepd ``*** JOB N ON host CANCELLED AT ... ***``; kubelet image pull
errors; systemd unit failures.
"""
from __future__ import annotations

import json
import random
import sys
import uuid
from datetime import datetime, timezone
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "var" / "outside4"
SEC = 1000
MIN = 60 * SEC
HOUR = 60 * MIN
T_BASE = int(datetime(2026, 11, 23, 6, 0, tzinfo=timezone.utc).timestamp() * 1000)

BASE_VERSIONS = {
    "driver": "550.90.07", "cuda": "12.4", "nccl": "2.21.5", "gpu_firmware": "96.00.89.00.01",
    "bmc_firmware": "1.12.3", "bios": "2.3.6", "kernel": "5.15.0-105-generic", "os": "Ubuntu 22.04.4 LTS",
    "framework": "torch 2.4.0", "container_runtime": "enroot 3.4.1", "ofed": "MLNX_OFED_LINUX-24.04-0.6.6.0",
}


def slurm_time(ts: int) -> str:
    return datetime.fromtimestamp(ts / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def torch_time(ts: int) -> str:
    d = datetime.fromtimestamp(ts / 1000, tz=timezone.utc)
    return d.strftime("%m%d %H:%M:%S.") + f"{d.microsecond:06d}"


class Node:
    def __init__(self, name, leaf, port, mounts, *, ngpu=8, versions=None, skew_ms=0, nic="mlx5_0",
                 pci_base=0x18):
        self.name, self.leaf, self.port, self.mounts, self.ngpu = name, leaf, port, mounts, ngpu
        self.versions = dict(BASE_VERSIONS, **(versions or {}))
        self.skew_ms, self.nic = skew_ms, nic
        self.pci = [f"0000:{pci_base + 0x10 * g:02x}:00" for g in range(ngpu)]
        self.uuids = [f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{name}/{g}')}" for g in range(ngpu)]


class B:
    """The event builder of one scenario file."""

    def __init__(self, name: str, t0: int):
        self.name, self.t0 = name, t0
        self.rnd = random.Random(name)
        self.events: list[dict] = []

    def e(self, ts, kind, source, data, node=None, job=None, tenant=None, skew=0):
        self.events.append(dict(v=1, id=str(uuid.UUID(int=self.rnd.getrandbits(128), version=4)),
                                ts=int(ts) + skew, kind=kind, source=source, node=node, job=job,
                                tenant=tenant, data=data))

    # --- inventory ---------------------------------------------------------------------------------
    def inventory(self, nodes, t_from, t_to, every=30 * MIN):
        t = t_from
        while t <= t_to:
            for n in nodes:
                self.e(t + 7 * SEC, "inventory.versions", f"inventory@{n.name}", dict(n.versions), node=n.name,
                       skew=n.skew_ms)
                self.e(t + 8 * SEC, "inventory.topology", f"inventory@{n.name}", dict(
                    links=[dict(nic=n.nic, switch=n.leaf, port=n.port, segment=n.leaf)],
                    storage=[dict(path=m[0], backend=m[2], server=m[3]) for m in n.mounts]),
                    node=n.name, skew=n.skew_ms)
            t += every

    # --- periodic telemetry ------------------------------------------------------------------------
    def telemetry(self, nodes, t_from, t_to, busy, mods=None):
        """60 s GPU / port / RDMA / storage samples, 120 s BMC sensors, 10 min mount state.

        busy(node, t) -> bool; mods: dict of optional hooks
          alive(node, t) -> bool (False: the node sends nothing)
          gpu(node, g, t, d) -> d or None (None: no sample of that GPU)
          port(node, t, d, st) ; rdma(node, t, counters, st) -> counters or None
          storage(node, path, t, d) ; mount(node, path, t) -> (state, error)
          sensors(node, t, list_of_dicts)
        """
        mods = mods or {}
        alive = mods.get("alive", lambda n, t: True)
        st = {n.name: dict(in_octets=10**12 + self.rnd.randrange(10**9), out_octets=10**12 + self.rnd.randrange(10**9),
                           in_errors=0, out_errors=0, in_discards=0, out_discards=0,
                           rdma=dict(link_downed=1, symbol_error=0, port_rcv_errors=0, local_ack_timeout_err=0,
                                     out_of_sequence=0, packet_seq_err=0, np_cnp_sent=0, rp_cnp_handled=0,
                                     np_ecn_marked_roce_packets=0, port_xmit_data=10**11, port_rcv_data=10**11),
                           sbe=[0] * n.ngpu) for n in nodes}
        t = t_from
        k = 0
        while t <= t_to:
            for n in nodes:
                if not alive(n, t):
                    continue
                s = st[n.name]
                b = busy(n, t)
                sk = n.skew_ms
                for g in range(n.ngpu):
                    r = self.rnd
                    d = dict(gpu=g, uuid=n.uuids[g],
                             util_pct=r.randint(94, 100) if b else 0,
                             mem_used_mib=r.randint(61000, 72000) if b else r.randint(0, 500),
                             mem_total_mib=81559,
                             temp_c=r.randint(55, 68) if b else r.randint(30, 36),
                             power_w=round(r.uniform(540, 690) if b else r.uniform(65, 80), 1),
                             sm_clock_mhz=1980 if b else 345,
                             throttle=[], ecc_sbe=s["sbe"][g], ecc_dbe=0, nvlink_errors=0, pcie_replay=0,
                             retired_pages=0)
                    if "gpu" in mods:
                        d = mods["gpu"](n, g, t, d)
                    if d is not None:
                        self.e(t + g * 40, "gpu.sample", f"nvml@{n.name}", d, node=n.name, skew=sk)
                inc = self.rnd.randint(4 * 10**9, 6 * 10**9) if b else self.rnd.randint(10**5, 10**6)
                s["in_octets"] += inc
                s["out_octets"] += inc + self.rnd.randint(0, 10**6)
                d = dict(device=n.leaf, port=n.port, oper_status="up", speed_mbps=400000,
                         in_errors=s["in_errors"], out_errors=s["out_errors"], in_discards=s["in_discards"],
                         out_discards=s["out_discards"], in_octets=s["in_octets"], out_octets=s["out_octets"])
                if "port" in mods:
                    d = mods["port"](n, t, d, s)
                if d is not None:
                    self.e(t + 1500, "net.port", f"snmp@{n.leaf}", d, node=n.name)
                c = s["rdma"]
                c["port_xmit_data"] += inc // 4
                c["port_rcv_data"] += inc // 4
                if b:
                    c["np_cnp_sent"] += self.rnd.randint(0, 3)
                    c["rp_cnp_handled"] += self.rnd.randint(0, 3)
                cc = dict(c)
                if "rdma" in mods:
                    cc = mods["rdma"](n, t, cc, s)
                if cc is not None:
                    self.e(t + 2100, "net.rdma", f"rdma@{n.name}", dict(device=n.nic, port=1, counters=cc),
                           node=n.name, skew=sk)
                for path, fs, _backend, _server in n.mounts:
                    d = dict(path=path, fs_type=fs,
                             read_iops=self.rnd.randint(800, 2400) if b else self.rnd.randint(0, 20),
                             write_iops=self.rnd.randint(50, 300) if b else self.rnd.randint(0, 5),
                             read_mbps=round(self.rnd.uniform(300, 900) if b else self.rnd.uniform(0, 2), 1),
                             write_mbps=round(self.rnd.uniform(20, 120) if b else self.rnd.uniform(0, 1), 1),
                             read_lat_ms=round(self.rnd.uniform(0.8, 2.5), 2),
                             write_lat_ms=round(self.rnd.uniform(1.5, 4.0), 2),
                             queue_depth=self.rnd.randint(1, 12) if b else 0, used_pct=round(42.0 + k * 0.01, 2))
                    if "storage" in mods:
                        d = mods["storage"](n, path, t, d)
                    if d is not None:
                        self.e(t + 2700, "storage.sample", f"storage@{n.name}", d, node=n.name, skew=sk)
                    if k % 10 == 0:
                        stt, err = mods["mount"](n, path, t) if "mount" in mods else ("ok", None)
                        self.e(t + 2900, "storage.mount", f"storage@{n.name}", dict(path=path, state=stt, error=err),
                               node=n.name, skew=sk)
                if k % 2 == 0:
                    sens = [dict(sensor="Inlet Temp", type="temperature", value=float(self.rnd.randint(21, 24)),
                                 unit="degrees C", status="ok"),
                            dict(sensor="CPU1 Temp", type="temperature", value=float(self.rnd.randint(48, 58) if b else 38),
                                 unit="degrees C", status="ok"),
                            dict(sensor="FAN1A", type="fan", value=float(self.rnd.randrange(8400, 9600, 120)),
                                 unit="RPM", status="ok"),
                            dict(sensor="PSU1 Input Power", type="power",
                                 value=float(self.rnd.randint(5200, 6100) if b else 900), unit="Watts", status="ok")]
                    if "sensors" in mods:
                        sens = mods["sensors"](n, t, sens)
                    for x in sens:
                        self.e(t + 3300, "hw.sensor", f"bmc@{n.name}", x, node=n.name, skew=sk)
            t += MIN
            k += 1

    # --- scheduler and runtime ---------------------------------------------------------------------
    def job(self, job, attempt, nodes, state, *, submit, start, end, name, user, tenant, image=None,
            exit_code=None, signal=None, reason=None, src="slurm@ctl-1", pending=True, gpus_per_node=8,
            emit_running=True):
        names = [n.name for n in nodes]
        ranks = {str(i * gpus_per_node + g): n for i, n in enumerate(names) for g in range(gpus_per_node)}
        base = dict(attempt=attempt, nodes=names, gpus=gpus_per_node * len(names), ranks=ranks, image=image,
                    name=name, user=user)
        if pending:
            self.e(submit, "sched.job", src, dict(base, state="pending", exit_code=None, signal=None,
                                                  start_ts=None, end_ts=None, reason="Priority" if attempt == 0 else "BeginTime"),
                   job=job, tenant=tenant)
        if start is not None and emit_running:
            self.e(start, "sched.job", src, dict(base, state="running", exit_code=None, signal=None, start_ts=start,
                                                 end_ts=None, reason=None), job=job, tenant=tenant)
        if state is not None:
            self.e(end, "sched.job", src, dict(base, state=state, exit_code=exit_code, signal=signal, start_ts=start,
                                               end_ts=end, reason=reason), job=job, tenant=tenant)

    def progress(self, job, node, t_from, t_to, *, step0=0, step_s=1.9, bs=512, every=30 * SEC, tenant=None,
                 step_fn=None, rank=0):
        """rank-0 heartbeats; returns the last step. step_fn(t) -> step time (s) overrides step_s."""
        t, step = t_from + every, step0
        while t <= t_to:
            stt = step_fn(t) if step_fn else step_s * self.rnd.uniform(0.97, 1.04)
            step += max(1, int(every / 1000 / stt))
            self.e(t, "runtime.progress", f"sdk@{node.name}", dict(rank=rank, step=step, step_time_s=round(stt, 3),
                                                                   samples_per_s=round(bs / stt, 1)),
                   node=node.name, job=job, tenant=tenant)
            t += every
        return step

    def checkpoints(self, job, node, t_from, t_to, path, *, every=20 * MIN, tenant=None, step_at=None, dur_s=35.0):
        t = t_from + every
        out = []
        while t + int(dur_s * 1000) <= t_to:
            step = step_at(t) if step_at else int((t - t_from) / 1000 / 1.9)
            p = f"{path}/step_{step:07d}"
            self.e(t, "runtime.checkpoint", f"sdk@{node.name}", dict(phase="started", step=step, path=p, bytes=None,
                                                                     duration_s=None, error=None),
                   node=node.name, job=job, tenant=tenant)
            d = round(dur_s * self.rnd.uniform(0.9, 1.1), 1)
            self.e(t + int(d * 1000), "runtime.checkpoint", f"sdk@{node.name}", dict(
                phase="succeeded", step=step, path=p, bytes=412_316_860_416, duration_s=d, error=None),
                node=node.name, job=job, tenant=tenant)
            out.append((t + int(d * 1000), step, p))
            t += every
        return out

    def log(self, ts, job, node, message, *, rank=None, stream="stderr", tenant=None, source=None):
        self.e(ts, "runtime.log", source or (f"kernel@{node.name}" if stream == "kernel" else f"logs@{node.name}"),
               dict(rank=rank, stream=stream, message=message), node=node.name if node else None, job=job,
               tenant=tenant, skew=node.skew_ms if node and stream == "kernel" else 0)

    def watchdog(self, ts, job, nodes, *, skip_ranks=(), seq=48213, timeout_ms=600000, tenant=None, gpn=8):
        for i, n in enumerate(nodes):
            for g in range(gpn):
                r = i * gpn + g
                if r in skip_ranks or g not in (0, 4):  # two ranks per node print before the abort
                    continue
                tt = ts + r * 37
                self.log(tt, job, n, f"[rank{r}]:[E{torch_time(tt)} {31000 + r} ProcessGroupNCCL.cpp:616] [Rank {r}] "
                         f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, "
                         f"NumelIn=16777216, NumelOut=16777216, Timeout(ms)={timeout_ms}) ran for {timeout_ms + 21} "
                         f"milliseconds before timing out.", rank=r, tenant=tenant)

    def write(self, out: Path) -> int:
        self.events.sort(key=lambda e: (e["ts"], e["kind"], e["id"]))
        with (out / f"{self.name}.jsonl").open("w", encoding="utf-8") as fh:
            for ev in self.events:
                fh.write(json.dumps(ev, separators=(",", ":"), sort_keys=False) + "\n")
        return len(self.events)


def mk_nodes(prefix, count, leaf, first_port=1, mounts=None, **kw):
    mounts = mounts or [("/lustre/scratch", "lustre", "lustre", "mds-scratch01")]
    return [Node(f"{prefix}{i + 1:02d}", leaf if isinstance(leaf, str) else leaf[i], f"Ethernet{first_port + i}",
                 mounts, **kw) for i in range(count)]


def window(t_from, t_to):
    return lambda n, t: t_from <= t <= t_to


def nccl_ib_error(host, pid, peer_ip, dev=0, status=12):
    return (f"{host}:{pid}:{pid + 171} [{dev}] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
            f"{peer_ip}<53470> with status={status} opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.10.0.1 "
            f"remoteGidsf::ffff:{peer_ip}")


def dist_error(rank, what="NCCL communicator was aborted on rank", extra=""):
    return (f"[rank{rank}]: torch.distributed.DistBackendError: {what} {rank}. {extra}".rstrip())


# =================================================================================================
# scenarios. Each returns its builder. Jobs run ~1-2 h; t0 = 06:00 UTC of the scenario's own day.
# =================================================================================================
SCEN = {}
EXPECT: dict[str, list[dict]] = {}


def scenario(idx, expect):
    def deco(fn):
        name = fn.__name__
        SCEN[name] = (idx, fn)
        EXPECT[name] = expect
        return fn
    return deco


def I(job, attempt, category, component, alt=None):  # noqa: E743 - an expected incident
    d = dict(job=job, attempt=attempt, expect="incident", category=category, component=component)
    if alt:
        d["alt"] = [dict(category=c, component=p) for c, p in alt]
    return d


def H(job, attempt=0):
    return dict(job=job, attempt=attempt, expect="none")


@scenario(1, [I("8810101", 0, "network_link", "port:mlx5_0/1", alt=[("network_link", "port:leaf-a2/Ethernet7")])])
def o01_hca_lost_one_rank(b: B):
    """4 nodes x 8 GPUs (RoCE, one HCA per node). 70 min in, the ConnectX HCA of h100-a03 (ranks 16-23)
    hits a firmware health failure: mlx5_core 'device's health compromised', the HCA port goes down
    (kernel carrier event, RDMA link_downed +1, then the HCA's counters stop: the device is gone),
    the leaf port facing it loses signal. Rank 16 prints an IB async port error, the other nodes'
    ranks get status=12 completions; the job fails 2 min later. GPUs, BMC, storage clean."""
    t0 = b.t0
    nodes = [Node(f"h100-a{i:02d}", "leaf-a2", f"Ethernet{i + 4}", [("/lustre/scratch", "lustre", "lustre", "mds1")])
             for i in range(1, 5)]
    bad = nodes[2]
    start, tf, end = t0 + 15 * MIN, t0 + 85 * MIN, t0 + 87 * MIN
    job, ten = "8810101", "llm-pretrain"
    b.inventory(nodes, t0, t0 + 110 * MIN)

    def rdma(n, t, c, s):
        if n is bad and t >= tf:
            if t >= tf + 2 * MIN:
                return None
            c["link_downed"] += 1
        return c

    def port(n, t, d, s):
        if n is bad and t >= tf:
            d["oper_status"] = "down"
            d["speed_mbps"] = None
        return d
    b.telemetry(nodes, t0, t0 + 110 * MIN, window(start, end), dict(rdma=rdma, port=port))
    b.job(job, 0, nodes, "failed", submit=t0 + 10 * MIN, start=start, end=end, name="llama-8b-pt", user="mhoffman",
          tenant=ten, exit_code=1, signal=None, reason="NonZeroExitCode")
    b.progress(job, nodes[0], start, tf, tenant=ten)
    b.checkpoints(job, nodes[0], start, tf, "/lustre/scratch/llm/ckpt", tenant=ten)
    pci = "0000:17:00.0"
    b.log(tf - 4 * SEC, job, bad, f"mlx5_core {pci}: poll_health:825:(pid 0): device's health compromised - reached miss count",
          stream="kernel", tenant=ten)
    b.log(tf - 3 * SEC, job, bad, f"mlx5_core {pci}: print_health_info:431:(pid 0): Health issue observed, firmware "
          f"internal error, severity(3) ERROR:", stream="kernel", tenant=ten)
    b.log(tf, job, bad, f"mlx5_core {pci}: mlx5_handle_bad_state:231:(pid 0): NIC IFC status is 7 (Error), "
          f"entering error state", stream="kernel", tenant=ten)
    b.e(tf + 200, "net.link", f"kernel@{bad.name}", dict(device="mlx5_0", port="1", state="down"), node=bad.name)
    b.e(tf + 900, "net.port", f"rdma@{bad.name}", dict(device="mlx5_0", port="1", oper_status="down", speed_mbps=None,
                                                        in_errors=0, out_errors=0, in_discards=0, out_discards=0,
                                                        in_octets=88_120_554_112_901, out_octets=88_119_003_871_225),
        node=bad.name)
    b.e(tf + 1300, "net.link", "snmp@leaf-a2", dict(device="leaf-a2", port=bad.port, state="down"), node=bad.name)
    b.log(tf + 2 * SEC, job, bad, "h100-a03:28811:29002 [0] NCCL WARN NET/IB : mlx5_0:1 Got async event : port error",
          rank=16, tenant=ten)
    b.log(tf + 3 * SEC, job, bad, "h100-a03:28811:29002 [0] NCCL WARN NET/IB : mlx5_0:1 Got async event : local "
          "catastrophic error", rank=16, tenant=ten)
    for i, n in enumerate(nodes):
        if n is bad:
            continue
        b.log(tf + 40 * SEC + i * 300, job, n, nccl_ib_error(n.name, 28000 + i, "10.10.2.13", dev=0), rank=i * 8,
              tenant=ten)
        b.log(tf + 41 * SEC + i * 300, job, n, dist_error(i * 8, "NCCL error in: ../torch/csrc/distributed/c10d/"
              "NCCLUtils.hpp:275, remote process exited or there was a network error, NCCL version 2.21.5\nncclRemoteError:"
              " A call failed possibly due to a network error or a remote process exiting prematurely.", ""),
              rank=i * 8, tenant=ten)
    b.log(end - 5 * SEC, job, nodes[0], "srun: error: h100-a01: tasks 0-7: Exited with exit code 1", tenant=ten)


@scenario(2, [I("8810202", 0, "scheduler", "job:8810202"), I("8810202", 1, "application", "job:8810202")])
def o02_ckpt_corrupt_on_restore(b: B):
    """2 nodes. Attempt 0 is preempted (DUE TO PREEMPTION) 4 s after it started a checkpoint; the
    SIGTERM grace (30 s) ends before torch.save finishes, so the checkpoint never succeeds and a
    truncated step_0008400 is left as 'latest'. Attempt 1 (requeued) loads it at start:
    PytorchStreamReader 'failed finding central directory', exit 1 before any progress. Storage
    healthy throughout (latency normal, mount ok); the code writes checkpoints non-atomically."""
    t0 = b.t0
    nodes = mk_nodes("a100-c", 2, "leaf-c1", mounts=[("/gpfs/proj", "gpfs", "gpfs", "nsd01")])
    job, ten = "8810202", "vision"
    s0 = t0 + 10 * MIN
    tp = s0 + 100 * MIN  # preempted 1 h 40 min into the run
    b.inventory(nodes, t0, tp + 40 * MIN)
    s1, e1 = tp + 6 * MIN, tp + 7 * MIN + 20 * SEC
    b.telemetry(nodes, t0, e1 + 8 * MIN, lambda n, t: s0 <= t <= tp or s1 + 30 * SEC <= t <= e1)
    b.job(job, 0, nodes, "preempted", submit=t0 + 5 * MIN, start=s0, end=tp, name="vit-h-ft", user="lchen",
          tenant=ten, exit_code=None, signal=15, reason="DUE TO PREEMPTION")
    b.e(tp + 500, "sched.job", "slurm@ctl-1", dict(state="requeued", attempt=0, nodes=[n.name for n in nodes], gpus=16,
                                                    ranks={str(r): nodes[r // 8].name for r in range(16)}, exit_code=None,
                                                    signal=15, image=None, name="vit-h-ft", user="lchen", start_ts=s0,
                                                    end_ts=tp, reason="Requeued after preemption"), job=job, tenant=ten)
    b.progress(job, nodes[0], s0, tp - 5 * SEC, step_s=0.7, bs=256, tenant=ten)
    cks = b.checkpoints(job, nodes[0], s0, tp - 10 * MIN, "/gpfs/proj/vit/ckpt", tenant=ten,
                        step_at=lambda t: int((t - s0) / 700) // 100 * 100)
    step = int((tp - 4 * SEC - s0) / 700) // 100 * 100
    b.e(tp - 4 * SEC, "runtime.checkpoint", f"sdk@{nodes[0].name}", dict(phase="started", step=step,
                                                                        path=f"/gpfs/proj/vit/ckpt/step_{step:07d}",
                                                                        bytes=None, duration_s=None, error=None),
        node=nodes[0].name, job=job, tenant=ten)
    b.log(tp, job, nodes[0], f"slurmstepd: error: *** JOB {job} ON a100-c01 CANCELLED AT {slurm_time(tp)} DUE TO "
          "PREEMPTION ***", tenant=ten)
    b.job(job, 1, nodes, "failed", submit=tp + 1500, start=s1, end=e1, name="vit-h-ft", user="lchen", tenant=ten,
          exit_code=1, reason="NonZeroExitCode", pending=True)
    b.log(s1 + 50 * SEC, job, nodes[0], f"[rank0]: Loading checkpoint from /gpfs/proj/vit/ckpt/latest -> step_{step:07d}",
          rank=0, stream="stdout", tenant=ten)
    b.log(s1 + 58 * SEC, job, nodes[0], "Traceback (most recent call last):\n  File \"/workspace/train.py\", line 311, in "
          "<module>\n    state = torch.load(ckpt_path, map_location=\"cpu\")\n  File \"/usr/lib/python3/dist-packages/torch/"
          "serialization.py\", line 1004, in load\n    with _open_zipfile_reader(opened_file) as opened_zipfile:\n  File "
          "\"/usr/lib/python3/dist-packages/torch/serialization.py\", line 456, in __init__\n    super().__init__(torch._C."
          "PyTorchFileReader(name_or_buffer))\nRuntimeError: PytorchStreamReader failed reading zip archive: failed "
          "finding central directory", rank=0, tenant=ten)
    b.log(e1 - 3 * SEC, job, nodes[0], "srun: error: a100-c01: task 0: Exited with exit code 1", tenant=ten)
    _ = cks


@scenario(3, [I("8810303", 0, "host_oom", "node:gpu-c02")])
def o03_dataloader_worker_oom(b: B):
    """2 nodes, Slurm. The dataset's in-memory shuffle buffer grows in each DataLoader worker on
    gpu-c02 until the kernel OOM killer kills a worker (kernel lines only: no container runtime);
    PyTorch 'DataLoader worker (pid(s) 51234) exited unexpectedly', slurmstepd counts an oom_kill
    event, state OUT_OF_MEMORY. GPU memory normal (not a GPU OOM)."""
    t0 = b.t0
    nodes = mk_nodes("gpu-c", 2, "leaf-c3", first_port=11, mounts=[("/lustre/data", "lustre", "lustre", "mds2")])
    bad = nodes[1]
    job, ten = "8810303", "speech"
    start, tf = t0 + 12 * MIN, t0 + 12 * MIN + 94 * MIN
    end = tf + 25 * SEC
    b.inventory(nodes, t0, end + 10 * MIN)
    b.telemetry(nodes, t0, end + 10 * MIN, window(start, end))
    b.job(job, 0, nodes, "out_of_memory", submit=t0 + 3 * MIN, start=start, end=end, name="w2v-large", user="apatel",
          tenant=ten, exit_code=0, signal=9, reason="OutOfMemory")
    b.progress(job, nodes[0], start, tf - 10 * SEC, tenant=ten)
    b.checkpoints(job, nodes[0], start, tf, "/lustre/data/speech/ckpt", tenant=ten)
    b.log(tf - 2 * SEC, job, bad, "pt_data_worker invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), "
          "order=0, oom_score_adj=0", stream="kernel", tenant=ten)
    b.log(tf - 1 * SEC, job, bad, "Out of memory: Killed process 51234 (pt_data_worker) total-vm:118733524kB, "
          "anon-rss:96120344kB, file-rss:65432kB, shmem-rss:2048kB, UID:1207 pgtables:190232kB oom_score_adj:0",
          stream="kernel", tenant=ten)
    b.log(tf + 3 * SEC, job, bad, "[rank9]: RuntimeError: DataLoader worker (pid(s) 51234) exited unexpectedly",
          rank=9, tenant=ten)
    b.log(tf + 20 * SEC, job, bad, f"slurmstepd: error: Detected 1 oom_kill event in StepId={job}.0. Some of the step "
          "tasks have been OOM Killed.", tenant=ten)
    b.log(tf + 8 * SEC, job, nodes[0], dist_error(0, "NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
          "remote process exited or there was a network error, NCCL version 2.21.5\nncclRemoteError: A call failed "
          "possibly due to a network error or a remote process exiting prematurely."), rank=0, tenant=ten)


@scenario(4, [I("pt-sft-48k2q", 0, "unknown", "job:pt-sft-48k2q", alt=[("scheduler", "job:pt-sft-48k2q")])])
def o04_image_pull_fail(b: B):
    """Kubernetes (kubeflow PyTorchJob, 2 pods on 2 nodes). The internal registry's load balancer is
    down: kubelet 'Failed to pull image ... dial tcp 10.40.0.9:443: i/o timeout', ErrImagePull then
    ImagePullBackOff; after the job's 10 min activeDeadline for pending pods the operator marks it
    Failed. The job never runs (start_ts null, no progress). The image tag is the one that ran
    yesterday; nodes, GPUs, storage, fabric clean."""
    t0 = b.t0
    nodes = [Node(f"k8s-h100-{i:02d}", "leaf-k1", f"Ethernet{i}", [("/data", "nfs", "nfs", "filer02")]) for i in (31, 32)]
    job, ten = "pt-sft-48k2q", "team-align"
    img = "registry.corp.internal/ml/sft-trainer:2024.11.3"
    sub, end = t0 + 10 * MIN, t0 + 21 * MIN
    for n in nodes:
        n.versions["image"] = img
    b.inventory(nodes, t0, t0 + 40 * MIN)
    b.telemetry(nodes, t0, t0 + 40 * MIN, lambda n, t: False)
    b.job(job, 0, nodes, "failed", submit=sub, start=None, end=end, name="sft-llama-70b", user="rkumar", tenant=ten,
          image=img, exit_code=None, reason="ImagePullBackOff", src="k8s@cp-1")
    for i, n in enumerate(nodes):
        for k in range(4):
            ts = sub + 20 * SEC + k * 2 * MIN + i * 700
            b.log(ts, job, n, f"Failed to pull image \"{img}\": rpc error: code = Unknown desc = failed to pull and unpack "
                  f"image \"{img}\": failed to resolve reference \"{img}\": failed to do request: Head "
                  f"\"https://registry.corp.internal/v2/ml/sft-trainer/manifests/2024.11.3\": dial tcp 10.40.0.9:443: "
                  f"i/o timeout", stream="container", tenant=ten, source=f"kubelet@{n.name}")
            b.log(ts + 2 * SEC, job, n, f"Error: ErrImagePull", stream="container", tenant=ten, source=f"kubelet@{n.name}")
            b.log(ts + 30 * SEC, job, n, f"Back-off pulling image \"{img}\"", stream="container", tenant=ten,
                  source=f"kubelet@{n.name}")


@scenario(5, [I("8810505", 0, "storage_slow", "path:/lustre/home")])
def o05_mds_slow_stall_then_timelimit(b: B):
    """2 nodes. The job reads many small files from /lustre/home/datasets (one open() per sample).
    The Lustre MDS for home is overloaded by another user's find: MDC requests time out ('Request
    sent has timed out for slow reply', connection lost / restored), read latency on /lustre/home
    2 ms -> 0.8-4 s, read IOPS collapse; the DataLoader workers block (hung-task lines), no progress
    from any rank for 38 min until the job's time limit ends it (TIMEOUT). /lustre/scratch (the
    checkpoint mount) stays fine."""
    t0 = b.t0
    mounts = [("/lustre/home", "lustre", "lustre", "mds-home01"), ("/lustre/scratch", "lustre", "lustre", "mds-scratch01")]
    nodes = mk_nodes("gpu-m", 2, "leaf-m1", first_port=3, mounts=mounts)
    job, ten = "8810505", "nlp"
    start, slow, stall = t0 + 10 * MIN, t0 + 10 * MIN + 62 * MIN, t0 + 10 * MIN + 66 * MIN
    end = stall + 38 * MIN
    b.inventory(nodes, t0, end + 10 * MIN)

    def storage(n, path, t, d):
        if path == "/lustre/home" and slow <= t <= end + 5 * MIN:
            d["read_lat_ms"] = round(b.rnd.uniform(800, 4000), 1)
            d["read_iops"] = b.rnd.randint(2, 25)
            d["read_mbps"] = round(b.rnd.uniform(0.1, 1.5), 2)
            d["queue_depth"] = b.rnd.randint(60, 128)
        return d

    def gpu(n, g, t, d):
        if stall + MIN <= t <= end:
            d["util_pct"], d["power_w"] = 0, round(b.rnd.uniform(95, 110), 1)
        return d
    b.telemetry(nodes, t0, end + 10 * MIN, window(start, end), dict(storage=storage, gpu=gpu))
    b.job(job, 0, nodes, "timeout", submit=t0 + 2 * MIN, start=start, end=end, name="t5-xl-dedup", user="jsmith",
          tenant=ten, exit_code=0, signal=15, reason="DUE TO TIME LIMIT")
    b.progress(job, nodes[0], start, stall, tenant=ten,
               step_fn=lambda t: 1.9 if t < slow else 1.9 + (t - slow) / 1000 / 20)
    b.checkpoints(job, nodes[0], start, slow, "/lustre/scratch/nlp/t5/ckpt", tenant=ten)
    for i, n in enumerate(nodes):
        for k in range(6):
            ts = slow + 30 * SEC + k * 4 * MIN + i * 900
            b.log(ts, job, n, f"Lustre: {3172 + k}:0:(client.c:2295:ptlrpc_expire_one_request()) @@@ Request sent has "
                  f"timed out for slow reply: [sent {ts // 1000 - 47}/real {ts // 1000 - 47}]  req@ffff9a8c{k:04x}e400 "
                  f"x17991{k:05d}/t0(0) o101->home-MDT0000-mdc-ffff9a8c3e1b6000@10.20.0.5@o2ib:12/10 lens 576/1152 e 0 "
                  f"to 1 dl {ts // 1000} ref 2 fl Rpc:XQr/0/ffffffff rc 0/-1 job:''", stream="kernel", tenant=ten)
        b.log(slow + 3 * MIN + i * 500, job, n, "Lustre: home-MDT0000-mdc-ffff9a8c3e1b6000: Connection to home-MDT0000 "
              "(at 10.20.0.5@o2ib) was lost; in progress operations using this service will wait for recovery to "
              "complete", stream="kernel", tenant=ten)
        b.log(stall + 4 * MIN + i * 500, job, n, "INFO: task pt_data_worker:61234 blocked for more than 122 seconds.\n"
              "      Tainted: P           OE     5.15.0-105-generic #115-Ubuntu\n\"echo 0 > /proc/sys/kernel/"
              "hung_task_timeout_secs\" disables this message.", stream="kernel", tenant=ten)
        b.log(stall + 20 * MIN + i * 500, job, n, "Lustre: home-MDT0000-mdc-ffff9a8c3e1b6000: Connection restored to "
              "10.20.0.5@o2ib (at 10.20.0.5@o2ib)", stream="kernel", tenant=ten)
    b.log(end, job, nodes[0], f"slurmstepd: error: *** JOB {job} ON gpu-m01 CANCELLED AT {slurm_time(end)} DUE TO TIME "
          "LIMIT ***", tenant=ten)


@scenario(6, [I("8810606", 0, "storage_unavailable", "path:/lustre/scratch",
                alt=[("storage_slow", "path:/lustre/scratch")])])
def o06_lustre_ost_down(b: B):
    """4 nodes. OSS scratch-oss07 crashes; OST0007 of /lustre/scratch is unreachable. The mount stays
    up (state ok), but writes striped on OST0007 fail: 'LustreError: 11-0: scratch-OST0007-osc-...:
    operation ost_write to node 10.20.1.17@o2ib failed: rc = -107', write latency and write IOPS
    collapse on every node; the 80-min checkpoint fails with OSError [Errno 5] Input/output error,
    the training script exits 1."""
    t0 = b.t0
    nodes = mk_nodes("h100-l", 4, "leaf-l4", first_port=21,
                     mounts=[("/lustre/scratch", "lustre", "lustre", "mds-scratch01")])
    job, ten = "8810606", "llm-pretrain"
    start = t0 + 10 * MIN
    tf = start + 72 * MIN
    ck = start + 80 * MIN
    end = ck + 95 * SEC
    b.inventory(nodes, t0, end + 10 * MIN)

    def storage(n, path, t, d):
        if tf <= t <= end + 5 * MIN:
            d["write_lat_ms"] = round(b.rnd.uniform(2500, 30000), 1)
            d["write_iops"] = b.rnd.randint(0, 6)
            d["write_mbps"] = round(b.rnd.uniform(0, 0.8), 2)
            d["queue_depth"] = b.rnd.randint(40, 96)
        return d
    b.telemetry(nodes, t0, end + 10 * MIN, window(start, end), dict(storage=storage))
    b.job(job, 0, nodes, "failed", submit=t0 + 5 * MIN, start=start, end=end, name="mixtral-pt", user="mhoffman",
          tenant=ten, exit_code=1, reason="NonZeroExitCode")
    b.progress(job, nodes[0], start, ck, tenant=ten)
    b.checkpoints(job, nodes[0], start, tf, "/lustre/scratch/mixtral/ckpt", tenant=ten, every=20 * MIN)
    for i, n in enumerate(nodes):
        b.log(tf + 5 * SEC + i * 300, job, n, "Lustre: scratch-OST0007-osc-ffff9a8c3e1b6000: Connection to "
              "scratch-OST0007 (at 10.20.1.17@o2ib) was lost; in progress operations using this service will wait for "
              "recovery to complete", stream="kernel", tenant=ten)
        for k in range(3):
            b.log(ck + 20 * SEC + k * 20 * SEC + i * 300, job, n, "LustreError: 11-0: scratch-OST0007-osc-ffff9a8c3e1b6000: "
                  "operation ost_write to node 10.20.1.17@o2ib failed: rc = -107", stream="kernel", tenant=ten)
    step = int((ck - start) / 1900)
    p = f"/lustre/scratch/mixtral/ckpt/step_{step:07d}"
    b.e(ck, "runtime.checkpoint", "sdk@h100-l01", dict(phase="started", step=step, path=p, bytes=None, duration_s=None,
                                                       error=None), node="h100-l01", job=job, tenant=ten)
    b.e(ck + 85 * SEC, "runtime.checkpoint", "sdk@h100-l01", dict(phase="failed", step=step, path=p, bytes=None,
                                                                  duration_s=85.0,
                                                                  error="OSError: [Errno 5] Input/output error"),
        node="h100-l01", job=job, tenant=ten)
    b.log(ck + 86 * SEC, job, nodes[0], "Traceback (most recent call last):\n  File \"/opt/train/checkpoint.py\", line 88, "
          f"in save\n    torch.save(shard, f\"{p}/model_00.pt\")\n  File \"/usr/local/lib/python3.10/dist-packages/torch/"
          "serialization.py\", line 628, in save\n    with _open_zipfile_writer(f) as opened_zipfile:\nOSError: [Errno 5] "
          "Input/output error", rank=0, tenant=ten)


@scenario(7, [I("8810707", 0, "gpu_hardware", "gpu:dgx-h07/5")])
def o07_fell_off_bus_kernel_only(b: B):
    """3 DGX H100 nodes. GPU 5 of dgx-h07 (PCI 0000:9d:00) falls off the bus. The site has no XID
    collector: the only GPU-layer evidence is the kernel lines in runtime.log ('NVRM: Xid
    (PCI:0000:9d:00): 79, pid=..., GPU has fallen off the bus.' and 'NVRM: GPU 0000:9d:00.0: GPU has
    fallen off the bus.') and GPU 5's NVML samples stopping. Rank 13 (local rank 5) dies with
    'CUDA error: unspecified launch failure'; the other ranks' watchdogs fire 10 min later."""
    t0 = b.t0
    nodes = [Node(f"dgx-h{i:02d}", "leaf-d1", f"Ethernet{i}", [("/mnt/weka", "wekafs", "weka", "weka-c1")])
             for i in (6, 7, 8)]
    bad = nodes[1]
    # DGX H100 bus ids of GPUs 0..7
    for n in nodes:
        n.pci = ["0000:18:00", "0000:2a:00", "0000:3a:00", "0000:5d:00", "0000:9a:00", "0000:9d:00", "0000:ab:00", "0000:db:00"]
    job, ten = "8810707", "llm-pretrain"
    start = t0 + 10 * MIN
    tf = start + 58 * MIN
    end = tf + 10 * MIN + 40 * SEC
    b.inventory(nodes, t0, end + 10 * MIN)

    def gpu(n, g, t, d):
        if n is bad and g == 5 and t >= tf:
            return None
        if tf + MIN <= t <= end:
            d["util_pct"] = 100  # NCCL kernels spinning on the collective
        return d
    b.telemetry(nodes, t0, end + 10 * MIN, window(start, end), dict(gpu=gpu))
    b.job(job, 0, nodes, "failed", submit=t0, start=start, end=end, name="gpt-13b", user="kwong", tenant=ten,
          exit_code=134, signal=6, reason="NonZeroExitCode")
    b.progress(job, nodes[0], start, tf, tenant=ten)
    b.checkpoints(job, nodes[0], start, tf, "/mnt/weka/gpt13b/ckpt", tenant=ten)
    b.log(tf, job, bad, "NVRM: Xid (PCI:0000:9d:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
          stream="kernel", tenant=ten)
    b.log(tf + 40, job, bad, "NVRM: GPU 0000:9d:00.0: GPU has fallen off the bus.", stream="kernel", tenant=ten)
    b.log(tf + 90, job, bad, "NVRM: GPU 0000:9d:00.0: GPU serial number is 1654223014519.", stream="kernel", tenant=ten)
    b.log(tf + 2 * SEC, job, bad, "[rank13]: RuntimeError: CUDA error: unspecified launch failure\nCUDA kernel errors might "
          "be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\nFor debugging "
          "consider passing CUDA_LAUNCH_BLOCKING=1.", rank=13, tenant=ten)
    b.watchdog(tf + 10 * MIN, job, nodes, skip_ranks=set(range(8, 16)), tenant=ten)


@scenario(8, [I("8810808", 0, "gpu_hardware", "gpu:hgx-b14/2")])
def o08_fell_off_bus_nvml_pci_format(b: B):
    """2 HGX nodes. A DCGM-based XID collector reports XID 79 with gpu null and the bus id in NVML's
    format ('00000000:3B:00.0': 8-digit domain, upper case, function); the raw kernel line carries
    the driver's own form. GPU 2 of hgx-b14 (bus 3b) stops sampling; rank 10 gets 'CUDA error:
    unknown error', NCCL watchdogs on the others. No PCIe replay growth beforehand."""
    t0 = b.t0
    nodes = [Node(f"hgx-b{i}", "leaf-b2", f"Ethernet{i}", [("/gpfs/fs1", "gpfs", "gpfs", "nsd11")]) for i in (13, 14)]
    for n in nodes:
        n.pci = ["0000:19:00", "0000:3a:00", "0000:3b:00", "0000:5d:00", "0000:9a:00", "0000:9b:00", "0000:ba:00", "0000:db:00"]
    bad = nodes[1]
    job, ten = "8810808", "recsys"
    start = t0 + 10 * MIN
    tf = start + 47 * MIN
    end = tf + 10 * MIN + 30 * SEC

    def gpu(n, g, t, d):
        if n is bad and g == 2 and t >= tf:
            return None
        return d
    b.inventory(nodes, t0, end + 10 * MIN)
    b.telemetry(nodes, t0, end + 10 * MIN, window(start, end), dict(gpu=gpu))
    b.job(job, 0, nodes, "failed", submit=t0 + 2 * MIN, start=start, end=end, name="dlrm-v3", user="tnguyen",
          tenant=ten, exit_code=134, signal=6, reason="NonZeroExitCode")
    b.progress(job, nodes[0], start, tf, tenant=ten, step_s=0.35, bs=65536)
    b.checkpoints(job, nodes[0], start, tf, "/gpfs/fs1/recsys/ckpt", tenant=ten, step_at=lambda t: int((t - start) / 350))
    b.e(tf + 300, "gpu.xid", f"dcgm@{bad.name}", dict(gpu=None, pci="00000000:3B:00.0", xid=79, pid=None,
                                                      message="NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', "
                                                              "name=<unknown>, GPU has fallen off the bus."),
        node=bad.name)
    b.log(tf + 3 * SEC, job, bad, "[rank10]: RuntimeError: CUDA error: unknown error\nCompile with `TORCH_USE_CUDA_DSA` "
          "to enable device-side assertions.", rank=10, tenant=ten)
    b.watchdog(tf + 10 * MIN, job, nodes, skip_ranks={10}, tenant=ten)


@scenario(9, [I("8810909", 0, "network_link", "port:leaf-s7/Ethernet1",
                alt=[("network_link", f"port:leaf-s7/Ethernet{p}") for p in (2, 3, 4)])])
def o09_leaf_switch_reboot(b: B):
    """4 nodes under one leaf (leaf-s7, Ethernet1-4) plus 2 idle nodes on the same leaf. The leaf
    switch reboots (watchdog reset of its NOS): every port of leaf-s7 goes down at once
    (linkDown traps, oper_status down, one missing poll while it boots), every HCA counts
    link_downed +1; ports come back 5 min later, too late: NCCL status=12 on every node, job failed."""
    t0 = b.t0
    nodes = [Node(f"h200-s{i:02d}", "leaf-s7", f"Ethernet{i}", [("/vast/train", "nfs", "vast", "vast-vip1")])
             for i in range(1, 7)]
    jobn = nodes[:4]
    job, ten = "8810909", "llm-pretrain"
    start = t0 + 10 * MIN
    tf = start + 75 * MIN
    up = tf + 5 * MIN
    end = tf + 70 * SEC

    def port(n, t, d, s):
        if tf <= t < tf + 3 * MIN:
            return None  # the switch does not answer SNMP while it boots
        if tf + 3 * MIN <= t < up:
            d["oper_status"], d["speed_mbps"] = "down", None
        if t >= tf + 3 * MIN:  # counters restart from 0 after the reboot
            for k in ("in_errors", "out_errors", "in_discards", "out_discards"):
                d[k] = 0
            d["in_octets"] = d["out_octets"] = max(0, (t - up) // MIN) * 10**6
        return d

    def rdma(n, t, c, s):
        if t >= tf:
            c["link_downed"] += 1
        return c
    b.inventory(nodes, t0, end + 15 * MIN)
    b.telemetry(nodes, t0, end + 15 * MIN, lambda n, t: n in jobn and start <= t <= end, dict(port=port, rdma=rdma))
    for n in nodes:
        b.e(tf + 400, "net.link", f"kernel@{n.name}", dict(device="mlx5_0", port="1", state="down"), node=n.name)
        b.e(tf + 2 * SEC, "net.link", "snmp@leaf-s7", dict(device="leaf-s7", port=n.port, state="down"), node=n.name)
        b.e(up + 400, "net.link", "snmp@leaf-s7", dict(device="leaf-s7", port=n.port, state="up"), node=n.name)
        b.e(up + 900, "net.link", f"kernel@{n.name}", dict(device="mlx5_0", port="1", state="up"), node=n.name)
    b.job(job, 0, jobn, "failed", submit=t0 + 5 * MIN, start=start, end=end, name="qwen-32b-pt", user="ovasquez",
          tenant=ten, exit_code=1, reason="NonZeroExitCode")
    b.progress(job, jobn[0], start, tf, tenant=ten)
    b.checkpoints(job, jobn[0], start, tf, "/vast/train/qwen/ckpt", tenant=ten)
    for i, n in enumerate(jobn):
        b.log(tf + 300 + i * 50, job, n, f"mlx5_core 0000:17:00.0 ens17f0np0: Link down", stream="kernel", tenant=ten)
        b.log(tf + 20 * SEC + i * 300, job, n, nccl_ib_error(n.name, 41000 + i, f"10.10.7.{11 + (i + 1) % 4}"),
              rank=i * 8, tenant=ten)
        b.log(tf + 21 * SEC + i * 300, job, n, dist_error(i * 8, "NCCL error in: ../torch/csrc/distributed/c10d/"
              "NCCLUtils.hpp:275, remote process exited or there was a network error, NCCL version 2.21.5\n"
              "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely."),
              rank=i * 8, tenant=ten)


@scenario(10, [I("8811010", 0, "driver_software", "node:hgx-f01")])
def o10_fabric_manager_crash(b: B):
    """2 HGX H100 nodes with NVSwitch. nvidia-fabricmanager on hgx-f01 segfaults (systemd: Main
    process exited, code=killed, status=11/SEGV); with the fabric unmanaged every local rank on
    hgx-f01 gets 'Cuda failure 'system not yet initialized'' on its next NVLink P2P collective;
    ranks on hgx-f02 see remote errors. No XID, no ECC, no NVLink counter growth, BMC quiet."""
    t0 = b.t0
    nodes = mk_nodes("hgx-f", 2, "leaf-f1", first_port=9, mounts=[("/lustre/scratch", "lustre", "lustre", "mds1")])
    bad = nodes[0]
    job, ten = "8811010", "multimodal"
    start = t0 + 10 * MIN
    tf = start + 64 * MIN
    end = tf + 50 * SEC
    b.inventory(nodes, t0, end + 10 * MIN)
    b.telemetry(nodes, t0, end + 10 * MIN, window(start, end))
    b.job(job, 0, nodes, "failed", submit=t0 + 5 * MIN, start=start, end=end, name="llava-next-34b", user="ebrown",
          tenant=ten, exit_code=1, reason="NonZeroExitCode")
    b.progress(job, nodes[0], start, tf, tenant=ten)
    b.checkpoints(job, nodes[0], start, tf, "/lustre/scratch/llava/ckpt", tenant=ten)
    b.log(tf - 3 * SEC, job, bad, "nv-fabricmanager[2231]: segfault at 0 ip 000055d1c2a3f6b1 sp 00007ffd8d7a0a10 error 4 "
          "in nv-fabricmanager[55d1c29f0000+1a4000]", stream="kernel", tenant=ten)
    b.log(tf - 2 * SEC, job, bad, "systemd[1]: nvidia-fabricmanager.service: Main process exited, code=killed, "
          "status=11/SEGV", stream="kernel", tenant=ten)
    b.log(tf - 2 * SEC + 10, job, bad, "systemd[1]: nvidia-fabricmanager.service: Failed with result 'signal'.",
          stream="kernel", tenant=ten)
    for g in range(8):
        b.log(tf + 500 + g * 30, job, bad, f"hgx-f01:{33100 + g}:{33300 + g} [{g}] NCCL WARN Cuda failure 'system not yet "
              "initialized'", rank=g, tenant=ten)
    b.log(tf + 2 * SEC, job, bad, dist_error(0, "NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
          "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\nncclUnhandledCudaError: Call "
          "to CUDA function failed.\nLast error:\nCuda failure 'system not yet initialized'"), rank=0, tenant=ten)
    b.log(tf + 25 * SEC, job, nodes[1], dist_error(8, "NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
          "remote process exited or there was a network error, NCCL version 2.21.5\nncclRemoteError: A call failed "
          "possibly due to a network error or a remote process exiting prematurely."), rank=8, tenant=ten)


@scenario(11, [I("8811111", 0, "node_hardware", "node:gpu-p11")])
def o11_mce_kernel_panic_reboot(b: B):
    """3 nodes. gpu-p11's CPU 1 takes an uncorrectable machine check: 'mce: [Hardware Error]: CPU 17:
    Machine Check Exception: 5 Bank 6', SEL 'CPU 1 IERR' (Processor, critical) and an 'OS Critical
    Stop' entry, 'Kernel panic - not syncing: Fatal machine check' (recovered from pstore after the
    reboot, with its original time). The node is silent 6 min, Slurm marks it down (Not responding),
    NODE_FAIL; it reboots and reports idle again. GPUs fine before the crash."""
    t0 = b.t0
    nodes = [Node(f"gpu-p{i}", "leaf-p1", f"Ethernet{i - 1}", [("/gpfs/work", "gpfs", "gpfs", "nsd03")]) for i in (10, 11, 12)]
    bad = nodes[1]
    job, ten = "8811111", "climate"
    start = t0 + 10 * MIN
    tf = start + 81 * MIN
    down = tf + 5 * MIN + 30 * SEC
    back = tf + 7 * MIN
    end = down + 2 * SEC
    alive = lambda n, t: not (n is bad and tf < t < back)  # noqa: E731
    b.inventory(nodes, t0, end + 20 * MIN)
    b.telemetry(nodes, t0, end + 20 * MIN, lambda n, t: start <= t <= tf + (0 if n is bad else 5 * MIN),
                dict(alive=alive))
    b.job(job, 0, nodes, "node_fail", submit=t0 + 1 * MIN, start=start, end=end, name="icon-esm", user="fmeyer",
          tenant=ten, exit_code=None, signal=None, reason="NodeFail gpu-p11")
    b.progress(job, nodes[0], start, tf, tenant=ten)
    b.checkpoints(job, nodes[0], start, tf, "/gpfs/work/icon/ckpt", tenant=ten)
    b.log(tf - 400, job, bad, "mce: [Hardware Error]: CPU 17: Machine Check Exception: 5 Bank 6: be00000000800400",
          stream="kernel", tenant=ten)
    b.log(tf - 390, job, bad, "mce: [Hardware Error]: RIP !INEXACT! 10:<ffffffff8a4d3c4e> {native_safe_halt+0xe/0x10}",
          stream="kernel", tenant=ten)
    b.log(tf - 380, job, bad, "mce: [Hardware Error]: TSC 2f1c6b0a4d2e1 MISC 4a0000a00014086 SYND 14 IPID 5b000000000",
          stream="kernel", tenant=ten)
    b.log(tf - 200, job, bad, "Kernel panic - not syncing: Fatal machine check", stream="kernel", tenant=ten)
    b.e(tf - 300, "hw.sel", f"bmc@{bad.name}", dict(entry_id="0x01a7", severity="critical", sensor_type="Processor",
                                                     message_id="IPMI.Processor.IERR",
                                                     message="CPU 1 IERR | Asserted"), node=bad.name)
    b.e(tf - 100, "hw.sel", f"bmc@{bad.name}", dict(entry_id="0x01a8", severity="critical", sensor_type="OS Stop",
                                                     message_id="IPMI.OSStop.RunTimeCritical",
                                                     message="OS Critical Stop | Run-time critical stop | Asserted"),
        node=bad.name)
    b.e(tf + 90 * SEC, "hw.sel", f"bmc@{bad.name}", dict(entry_id="0x01a9", severity="ok", sensor_type="System Event",
                                                         message_id="IPMI.SystemEvent.OEM",
                                                         message="System Restart | Asserted"), node=bad.name)
    b.e(down, "sched.node", "slurm@ctl-1", dict(state="down", reason="Not responding"), node=bad.name)
    b.e(back + 2 * MIN, "sched.node", "slurm@ctl-1", dict(state="idle", reason=None), node=bad.name)
    for i, n in enumerate(nodes):
        if n is not bad:
            b.log(tf + 30 * SEC + i * 200, job, n, nccl_ib_error(n.name, 52000 + i, "10.10.11.11"), rank=i * 8,
                  tenant=ten)


@scenario(12, [I("8811212", 0, "thermal_throttle", "gpu:h100-s03/3")])
def o12_hw_slowdown_straggler_timeout(b: B):
    """4 nodes. GPU 3 of h100-s03 (rank 19) enters hw_slowdown with a normal temperature (57-61 C:
    an external slowdown line asserted, not heat); its SM clock steps 1980 -> 1100 -> 540 -> 210 MHz
    over 50 min, the whole job's step time rises from 1.9 s to 40 s and finally one all-reduce
    exceeds the 10 min NCCL timeout: watchdog lines on every rank except 19, SIGABRT, failed. BMC
    quiet (no fan/temperature warnings)."""
    t0 = b.t0
    nodes = mk_nodes("h100-s", 4, "leaf-s1", first_port=1, mounts=[("/lustre/scratch", "lustre", "lustre", "mds1")])
    bad = nodes[2]
    job, ten = "8811212", "llm-pretrain"
    start = t0 + 10 * MIN
    ts0 = start + 30 * MIN
    tstuck = ts0 + 50 * MIN
    tf = tstuck + 10 * MIN
    end = tf + 40 * SEC

    def clock(t):
        if t < ts0:
            return 1980
        dt = t - ts0
        return 1100 if dt < 15 * MIN else 540 if dt < 35 * MIN else 210

    def gpu(n, g, t, d):
        if n is bad and g == 3 and ts0 <= t <= end:
            d["sm_clock_mhz"] = clock(t)
            d["throttle"] = ["hw_slowdown"]
            d["temp_c"] = b.rnd.randint(57, 61)
            d["power_w"] = round(b.rnd.uniform(110, 160), 1)
        elif ts0 <= t <= end and d["util_pct"]:
            d["power_w"] = round(b.rnd.uniform(200, 320), 1)  # everyone waits for rank 19
        return d
    b.inventory(nodes, t0, end + 10 * MIN)
    b.telemetry(nodes, t0, end + 10 * MIN, window(start, end), dict(gpu=gpu))
    b.job(job, 0, nodes, "failed", submit=t0 + 4 * MIN, start=start, end=end, name="gpt-neox-20b", user="dlee",
          tenant=ten, exit_code=134, signal=6, reason="NonZeroExitCode")
    b.progress(job, nodes[0], start, tstuck, tenant=ten, step_fn=lambda t: 1.9 * 1980 / clock(t) * b.rnd.uniform(0.97, 1.03))
    b.checkpoints(job, nodes[0], start, tstuck, "/lustre/scratch/neox/ckpt", tenant=ten,
                  step_at=lambda t: int((min(t, ts0) - start) / 1900 + max(0, t - ts0) / 1900 / 3))
    b.watchdog(tf, job, nodes, skip_ranks={19}, tenant=ten)


@scenario(13, [I("8811313", 0, "scheduler", "job:8811313", alt=[("unknown", "job:8811313")]), H("8811313", 1)])
def o13_slurmd_munge_loss_then_retry(b: B):
    """3 nodes. On gpu-n22 the munge daemon dies (its socket disappears); slurmd there cannot
    authenticate to the controller ('Munge decode failed' / 'Unable to access munge socket'), stops
    answering pings, and after SlurmdTimeout the controller marks gpu-n22 down (Not responding)
    and ends the job NODE_FAIL (the node itself, its GPUs and fabric stay healthy: samples
    continue); the job is requeued and attempt 1 on three other nodes completes."""
    t0 = b.t0
    nodes = [Node(f"gpu-n{i}", "leaf-n2", f"Ethernet{i - 20}", [("/gpfs/work", "gpfs", "gpfs", "nsd05")])
             for i in range(21, 27)]
    a0, a1 = nodes[:3], nodes[3:]
    bad = nodes[1]
    job, ten = "8811313", "bio"
    s0 = t0 + 10 * MIN
    tm = s0 + 55 * MIN
    e0 = tm + 5 * MIN + 20 * SEC
    s1 = e0 + 2 * MIN
    e1 = s1 + 50 * MIN
    b.inventory(nodes, t0, e1 + 10 * MIN)
    b.telemetry(nodes, t0, e1 + 10 * MIN,
                lambda n, t: (n in a0 and s0 <= t <= e0) or (n in a1 and s1 <= t <= e1) or (n is bad and t <= e0 + 20 * MIN
                                                                                            and t >= s0))
    b.job(job, 0, a0, "node_fail", submit=t0 + 2 * MIN, start=s0, end=e0, name="esm-fold", user="gmartin", tenant=ten,
          exit_code=None, reason="NodeFail gpu-n22")
    b.e(e0 + 300, "sched.job", "slurm@ctl-1", dict(state="requeued", attempt=0, nodes=[n.name for n in a0], gpus=24,
                                                    ranks={str(r): a0[r // 8].name for r in range(24)}, exit_code=None,
                                                    signal=None, image=None, name="esm-fold", user="gmartin",
                                                    start_ts=s0, end_ts=e0, reason="Requeued after node failure"),
        job=job, tenant=ten)
    b.progress(job, a0[0], s0, e0 - 10 * SEC, tenant=ten)
    cks = b.checkpoints(job, a0[0], s0, e0, "/gpfs/work/esm/ckpt", tenant=ten)
    b.log(tm, job, bad, "munged[1833]: Error: Failed to lock \"/run/munge/munged.socket.2.lock\" -- exiting",
          stream="kernel", tenant=ten, source=f"syslog@{bad.name}")
    for k in range(4):
        b.log(tm + 30 * SEC + k * 60 * SEC, job, bad, "slurmd[2210]: error: If munged is up, restart with --num-threads=10\n"
              "slurmd[2210]: error: Munge encode failed: Failed to access \"/run/munge/munge.socket.2\": No such file or "
              "directory\nslurmd[2210]: error: slurm_send_node_msg: auth_g_create: RESPONSE_PING has authentication error",
              stream="kernel", tenant=ten, source=f"syslog@{bad.name}")
    b.e(e0 - 1 * SEC, "sched.node", "slurm@ctl-1", dict(state="down", reason="Not responding"), node=bad.name)
    for n in a0:
        b.log(e0 + 200, job, n, f"slurmstepd: error: *** JOB {job} ON {a0[0].name} CANCELLED AT {slurm_time(e0)} DUE TO "
              "NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***", tenant=ten)
    b.job(job, 1, a1, "completed", submit=e0 + 1500, start=s1, end=e1, name="esm-fold", user="gmartin", tenant=ten,
          exit_code=0)
    resume = cks[-1][1]  # attempt 1 resumes from attempt 0's last checkpoint
    b.progress(job, a1[0], s1, e1 - 30 * SEC, tenant=ten, step0=resume)
    b.checkpoints(job, a1[0], s1, e1, "/gpfs/work/esm/ckpt", tenant=ten,
                  step_at=lambda t: resume + int((t - s1) / 1900))


@scenario(14, [I("8811414", 0, "gpu_hardware", "gpu:gpu-r02/6"), H("8811414", 1)])
def o14_xid94_drain_retry_ok(b: B):
    """2-node job. XID 94 (contained uncorrectable ECC error) on gpu-r02 GPU 6 with ecc_dbe 0 -> 1;
    rank 14 'CUDA error: uncorrectable ECC error encountered'; the health check drains gpu-r02
    ('Xid 94 reported'); the job fails, the user's wrapper resubmits it as a requeue; attempt 1 on
    gpu-r03 + gpu-r04 completes from the last checkpoint."""
    t0 = b.t0
    nodes = [Node(f"gpu-r{i:02d}", "leaf-r1", f"Ethernet{i}", [("/lustre/scratch", "lustre", "lustre", "mds1")])
             for i in range(1, 5)]
    a0, a1 = nodes[:2], nodes[2:]
    bad = nodes[1]
    job, ten = "8811414", "llm-ft"
    s0 = t0 + 10 * MIN
    tf = s0 + 44 * MIN
    e0 = tf + 35 * SEC
    s1 = e0 + 3 * MIN
    e1 = s1 + 40 * MIN

    def gpu(n, g, t, d):
        if n is bad and g == 6 and t >= tf:
            d["ecc_dbe"] = 1
            d["retired_pages"] = 1
        return d
    b.inventory(nodes, t0, e1 + 10 * MIN)
    b.telemetry(nodes, t0, e1 + 10 * MIN,
                lambda n, t: (n in a0 and s0 <= t <= e0) or (n in a1 and s1 <= t <= e1), dict(gpu=gpu))
    b.job(job, 0, a0, "failed", submit=t0 + 2 * MIN, start=s0, end=e0, name="mistral-ft", user="hsato", tenant=ten,
          exit_code=1, reason="NonZeroExitCode")
    b.progress(job, a0[0], s0, tf, tenant=ten)
    cks = b.checkpoints(job, a0[0], s0, tf, "/lustre/scratch/mistral/ckpt", tenant=ten)
    b.e(tf + 100, "gpu.xid", f"nvml@{bad.name}", dict(gpu=6, pci="0000:78:00", xid=94, pid=44817,
                                                      message="NVRM: Xid (PCI:0000:78:00): 94, pid=44817, name=python, "
                                                              "Contained: SM (0x1). RST: No, D-RST: No"), node=bad.name)
    b.log(tf + 1 * SEC, job, bad, "[rank14]: RuntimeError: CUDA error: uncorrectable ECC error encountered\nCUDA kernel "
          "errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
          rank=14, tenant=ten)
    b.log(tf + 12 * SEC, job, a0[0], dist_error(0, "NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
          "remote process exited or there was a network error, NCCL version 2.21.5"), rank=0, tenant=ten)
    b.e(tf + 50 * SEC, "sched.node", "slurm@ctl-1", dict(state="drain", reason="Xid 94 reported [nhc@2026-11-23]"),
        node=bad.name)
    b.job(job, 1, a1, "completed", submit=e0 + 30 * SEC, start=s1, end=e1, name="mistral-ft", user="hsato",
          tenant=ten, exit_code=0)
    resume = cks[-1][1]  # attempt 1 resumes from attempt 0's last checkpoint
    b.progress(job, a1[0], s1, e1 - 30 * SEC, tenant=ten, step0=resume)
    b.checkpoints(job, a1[0], s1, e1, "/lustre/scratch/mistral/ckpt", tenant=ten,
                  step_at=lambda t: resume + int((t - s1) / 1900))


@scenario(15, [H("8811515")])
def o15_healthy_clock_skew(b: B):
    """Healthy, completes. 3 nodes; gpu-k02's clock runs 4 min ahead (all its node-side events, incl.
    kernel lines, carry +240 s), gpu-k03's BMC is 11 min behind (hw events -660 s, a warning SEL
    'Correctable ECC logging limit reached' at its skewed time). The skewed node's samples go on
    'after' the job ends; a kernel line about an NTP step appears at the end. One SBE on a job GPU."""
    t0 = b.t0
    nodes = [Node(f"gpu-k{i:02d}", "leaf-k4", f"Ethernet{i + 12}", [("/gpfs/work", "gpfs", "gpfs", "nsd07")])
             for i in (1, 2, 3)]
    nodes[1].skew_ms = 240 * SEC
    job, ten = "8811515", "chem"
    start, end = t0 + 15 * MIN, t0 + 15 * MIN + 95 * MIN

    def gpu(n, g, t, d):
        if n.name == "gpu-k01" and g == 4 and t > start + 30 * MIN:
            d["ecc_sbe"] = 1
        return d

    def sensors(n, t, lst):
        if n.name == "gpu-k03":
            # the BMC's own clock: shift by emitting with skew through a side channel
            for x in lst:
                b.e(t + 3300, "hw.sensor", f"bmc@{n.name}", x, node=n.name, skew=-660 * SEC)
            return []
        return lst
    b.inventory(nodes, t0, end + 15 * MIN)
    b.telemetry(nodes, t0, end + 15 * MIN, window(start, end), dict(gpu=gpu, sensors=sensors))
    b.job(job, 0, nodes, "completed", submit=t0 + 5 * MIN, start=start, end=end, name="mace-md", user="pknox",
          tenant=ten, exit_code=0)
    b.progress(job, nodes[0], start, end - 20 * SEC, tenant=ten)
    b.checkpoints(job, nodes[0], start, end, "/gpfs/work/mace/ckpt", tenant=ten)
    b.e(start + 40 * MIN, "hw.sel", "bmc@gpu-k03", dict(entry_id="0x0042", severity="warning", sensor_type="Memory",
                                                        message_id="IPMI.Memory.CorrectableECCLoggingLimit",
                                                        message="DIMM B3 | Correctable ECC logging limit reached | "
                                                                "Asserted"), node="gpu-k03", skew=-660 * SEC)
    b.log(start + 50 * MIN, job, nodes[1], "[rank8]: [W reducer.cpp:1389] Warning: find_unused_parameters=True was "
          "specified in DDP constructor, but did not find any unused parameters in the forward pass.", rank=8,
          tenant=ten)
    b.log(end + 5 * MIN, job, nodes[1], "chronyd[1044]: System clock wrong by -239.874512 seconds, adjustment started",
          stream="kernel", tenant=ten)


@scenario(16, [H("8811616")])
def o16_healthy_noisy_fabric(b: B):
    """Healthy, completes. 4 nodes on two leaves. Background RoCE noise: CNPs/ECN marks at a modest
    steady rate on every HCA, a one-off burst of 400 out_discards on one leaf port, the switch
    counters of leaf-w2 reset to 0 mid-run (someone ran 'clear counters'), an HCA's counters reset
    (driver restart of an unused port is not in the story: just a reset to lower values), NCCL INFO
    lines, a DDP warning. A link flap on a port facing an idle node on the same leaf."""
    t0 = b.t0
    nodes = [Node(f"h100-w{i:02d}", "leaf-w1" if i <= 2 else "leaf-w2", f"Ethernet{i}",
                  [("/lustre/scratch", "lustre", "lustre", "mds1")]) for i in range(1, 6)]
    jobn = nodes[:4]
    idle = nodes[4]
    job, ten = "8811616", "llm-pretrain"
    start, end = t0 + 10 * MIN, t0 + 10 * MIN + 100 * MIN
    reset_t = start + 45 * MIN

    def port(n, t, d, s):
        if n.name == "h100-w02" and start + 30 * MIN <= t:
            d["out_discards"] += 400
        if n.leaf == "leaf-w2" and t >= reset_t:
            d["in_octets"] -= 10**12 - 10**6
            d["out_octets"] -= 10**12 - 10**6
        return d

    def rdma(n, t, c, s):
        if n in jobn and start <= t <= end:
            s["rdma"]["np_cnp_sent"] += b.rnd.randint(200, 900)
            s["rdma"]["rp_cnp_handled"] += b.rnd.randint(200, 900)
            s["rdma"]["np_ecn_marked_roce_packets"] += b.rnd.randint(200, 900)
            c = dict(s["rdma"])
        if n.name == "h100-w03" and t >= start + 60 * MIN:
            c = {k: max(0, v - 10**11) if k.startswith("port_") else v // 1000 for k, v in c.items()}
        return c
    b.inventory(nodes, t0, end + 10 * MIN)
    b.telemetry(nodes, t0, end + 10 * MIN, lambda n, t: n in jobn and start <= t <= end, dict(port=port, rdma=rdma))
    b.e(start + 52 * MIN, "net.link", "snmp@leaf-w2", dict(device="leaf-w2", port=idle.port, state="down"), node=idle.name)
    b.e(start + 52 * MIN + 9 * SEC, "net.link", "snmp@leaf-w2", dict(device="leaf-w2", port=idle.port, state="up"),
        node=idle.name)
    b.job(job, 0, jobn, "completed", submit=t0 + 3 * MIN, start=start, end=end, name="olmo-7b", user="ovasquez",
          tenant=ten, exit_code=0)
    b.progress(job, jobn[0], start, end - 15 * SEC, tenant=ten)
    b.checkpoints(job, jobn[0], start, end, "/lustre/scratch/olmo/ckpt", tenant=ten)
    b.log(start + 40 * SEC, job, jobn[0], "h100-w01:20211:20211 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [RO]; "
          "OOB ens17f0np0:10.10.1.1<0>", rank=0, stream="stdout", tenant=ten)
    b.log(start + 41 * SEC, job, jobn[0], "h100-w01:20211:20211 [0] NCCL INFO ncclCommInitRank comm 0x5581d9c0 rank 0 "
          "nranks 32 cudaDev 0 nvmlDev 0 busId 18000 commId 0x8f0e2c3b1a5d4e6f - Init COMPLETE", rank=0,
          stream="stdout", tenant=ten)
    b.log(start + 2 * MIN, job, jobn[2], "[rank16]: /usr/local/lib/python3.10/dist-packages/torch/utils/checkpoint.py:464: "
          "UserWarning: torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly.", rank=16,
          tenant=ten)


@scenario(17, [H("8811717")])
def o17_healthy_maintenance_around(b: B):
    """Healthy, completes. 2-node job while ops do maintenance elsewhere: a BIOS change and a drain on
    nodes outside the job, /home readonly on a node outside the job, the NVML collector on job node
    gpu-z01 restarts (6 min without GPU samples, progress goes on), one voltage warning reading on
    gpu-z02's BMC that returns to ok, a kernel 'nvidia-nvswitch' informational line."""
    t0 = b.t0
    mounts = [("/gpfs/work", "gpfs", "gpfs", "nsd02"), ("/home", "nfs", "nfs", "home-filer")]
    nodes = [Node(f"gpu-z{i:02d}", "leaf-z1", f"Ethernet{i}", mounts) for i in range(1, 5)]
    jobn, other = nodes[:2], nodes[2:]
    job, ten = "8811717", "finance"
    start, end = t0 + 10 * MIN, t0 + 10 * MIN + 90 * MIN
    gap = (start + 35 * MIN, start + 41 * MIN)

    def gpu(n, g, t, d):
        if n.name == "gpu-z01" and gap[0] <= t < gap[1]:
            return None
        return d

    def sensors(n, t, lst):
        if n.name == "gpu-z02" and start + 50 * MIN <= t < start + 52 * MIN:
            lst.append(dict(sensor="P12V", type="voltage", value=11.38, unit="Volts", status="warning"))
        elif n.name == "gpu-z02":
            lst.append(dict(sensor="P12V", type="voltage", value=12.06, unit="Volts", status="ok"))
        return lst

    def mount(n, path, t):
        if n.name == "gpu-z04" and path == "/home" and t >= start + 20 * MIN:
            return "readonly", "Read-only file system"
        return "ok", None
    b.inventory(nodes, t0, end + 10 * MIN)
    b.telemetry(nodes, t0, end + 10 * MIN, lambda n, t: n in jobn and start <= t <= end,
                dict(gpu=gpu, sensors=sensors, mount=mount))
    b.e(start + 20 * MIN, "sched.node", "slurm@ctl-1", dict(state="drain", reason="bios upgrade CHG-7781"), node="gpu-z03")
    b.e(start + 30 * MIN, "inventory.change", "ansible@ops-1", dict(component="bios", **{"from": "2.3.6"}, to="2.4.1",
                                                                    actor="ops-bot", ticket="CHG-7781"), node="gpu-z03")
    b.e(start + 46 * MIN, "sched.node", "slurm@ctl-1", dict(state="idle", reason=None), node="gpu-z03")
    b.job(job, 0, jobn, "completed", submit=t0 + 5 * MIN, start=start, end=end, name="tft-forecast", user="yzhang",
          tenant=ten, exit_code=0)
    b.progress(job, jobn[0], start, end - 20 * SEC, tenant=ten)
    b.checkpoints(job, jobn[0], start, end, "/gpfs/work/tft/ckpt", tenant=ten)
    b.log(start + 36 * MIN, job, jobn[0], "systemd[1]: faultline-nvml.service: Scheduled restart job, restart counter is "
          "at 1.", stream="kernel", tenant=ten, source="syslog@gpu-z01")
    b.log(start + 3 * MIN, job, jobn[1], "nvidia-nvswitch3: SXid (PCI:0000:07:00.0): 00000, NVSwitch link training "
          "complete", stream="kernel", tenant=ten)


@scenario(18, [I("8811818", 0, "network_link", "port:spine-02/Ethernet12")])
def o18_spine_uplink_errors(b: B):
    """4 nodes on two leaves (r1, r2: two per leaf). The spine-02 port Ethernet12 (the uplink from
    leaf-r2) has a failing optic: in_errors grow from 50 min in (thousands per minute), then the
    port flaps twice; node-facing ports and HCAs show no link errors but retransmits
    (local_ack_timeout_err, out_of_sequence) on the job's leaf-r2 HCAs; NCCL status=12 on the ranks
    of leaf-r2 nodes, job failed. The spine port faces no node (net.port keyed by the switch)."""
    t0 = b.t0
    nodes = [Node(f"h100-r{i:02d}", "leaf-r1" if i <= 2 else "leaf-r2", f"Ethernet{i}",
                  [("/lustre/scratch", "lustre", "lustre", "mds1")]) for i in range(1, 5)]
    job, ten = "8811818", "llm-pretrain"
    start = t0 + 10 * MIN
    te = start + 50 * MIN
    tflap = te + 14 * MIN
    end = tflap + 3 * MIN
    b.inventory(nodes, t0, end + 10 * MIN)

    def rdma(n, t, c, s):
        if n.leaf == "leaf-r2" and t >= te:
            s["rdma"]["local_ack_timeout_err"] += b.rnd.randint(20, 120)
            s["rdma"]["out_of_sequence"] += b.rnd.randint(100, 900)
            s["rdma"]["packet_seq_err"] += b.rnd.randint(5, 40)
            c = dict(s["rdma"])
        return c
    b.telemetry(nodes, t0, end + 10 * MIN, window(start, end), dict(rdma=rdma))
    # spine and leaf uplink counters (no node: keyed by the switch name)
    cnt = {("spine-02", "Ethernet12"): dict(e=0, o=7 * 10**14), ("leaf-r2", "Ethernet49"): dict(e=0, o=6 * 10**14),
           ("spine-02", "Ethernet11"): dict(e=0, o=5 * 10**14), ("leaf-r1", "Ethernet49"): dict(e=0, o=5 * 10**14)}
    t = t0
    while t <= end + 10 * MIN:
        for (dev, p), c in cnt.items():
            c["o"] += b.rnd.randint(10**10, 2 * 10**10)
            bad = (dev, p) == ("spine-02", "Ethernet12")
            if bad and t >= te:
                c["e"] += b.rnd.randint(2000, 9000)
            down = bad and tflap <= t < tflap + MIN
            b.e(t + 1700, "net.port", f"snmp@{dev}", dict(device=dev, port=p, oper_status="down" if down else "up",
                                                          speed_mbps=400000, in_errors=c["e"], out_errors=0,
                                                          in_discards=0, out_discards=0, in_octets=c["o"],
                                                          out_octets=c["o"] + 12345), node=None)
        t += MIN
    for k in range(2):
        b.e(tflap + k * 40 * SEC, "net.link", "snmp@spine-02", dict(device="spine-02", port="Ethernet12", state="down"))
        b.e(tflap + k * 40 * SEC + 8 * SEC, "net.link", "snmp@spine-02", dict(device="spine-02", port="Ethernet12",
                                                                             state="up"))
    b.job(job, 0, nodes, "failed", submit=t0 + 3 * MIN, start=start, end=end, name="dbrx-pt", user="mhoffman",
          tenant=ten, exit_code=1, reason="NonZeroExitCode")
    b.progress(job, nodes[0], start, tflap + 20 * SEC, tenant=ten,
               step_fn=lambda t: 1.9 if t < te else 2.6 * b.rnd.uniform(0.9, 1.2))
    b.checkpoints(job, nodes[0], start, tflap, "/lustre/scratch/dbrx/ckpt", tenant=ten)
    for i, n in enumerate(nodes[2:], start=2):
        b.log(tflap + 50 * SEC + i * 200, job, n, nccl_ib_error(n.name, 61000 + i, "10.10.1.11"), rank=i * 8, tenant=ten)
        b.log(tflap + 52 * SEC + i * 200, job, n, dist_error(i * 8, "NCCL error in: ../torch/csrc/distributed/c10d/"
              "NCCLUtils.hpp:275, remote process exited or there was a network error, NCCL version 2.21.5"),
              rank=i * 8, tenant=ten)


@scenario(19, [I("8811919", 0, "driver_software", "node:gpu-o03")])
def o19_ofed_mismatch_one_node(b: B):
    """4 nodes; gpu-o03 was re-imaged from an old golden image last week: its MLNX_OFED is
    23.10-1.1.9.0 and its kernel 5.15.0-97 while the other nodes run 24.04-0.6.6.0 / 5.15.0-105
    (periodic inventory only, no change event in the window). Driver, CUDA, NCCL identical. At
    NCCL init the ranks of gpu-o03 fail 'ibv_reg_mr_iova2 failed with error Bad address'; the rest
    abort. Job fails 2 min after start."""
    t0 = b.t0
    nodes = [Node(f"gpu-o{i:02d}", "leaf-o1", f"Ethernet{i}", [("/lustre/scratch", "lustre", "lustre", "mds1")])
             for i in range(1, 5)]
    bad = nodes[2]
    bad.versions.update(ofed="MLNX_OFED_LINUX-23.10-1.1.9.0", kernel="5.15.0-97-generic")
    job, ten = "8811919", "llm-ft"
    start = t0 + 20 * MIN
    tf = start + 95 * SEC
    end = tf + 30 * SEC
    b.inventory(nodes, t0, end + 30 * MIN)
    b.telemetry(nodes, t0, end + 20 * MIN, window(start + MIN, end))
    b.job(job, 0, nodes, "failed", submit=t0 + 10 * MIN, start=start, end=end, name="qwen-ft", user="hsato", tenant=ten,
          exit_code=1, reason="NonZeroExitCode")
    for g in (0, 3):
        r = 16 + g
        b.log(tf + g * 40, job, bad, f"gpu-o03:{70100 + g}:{70300 + g} [{g}] NCCL WARN NET/IB : ibv_reg_mr_iova2 failed "
              "with error Bad address", rank=r, tenant=ten)
        b.log(tf + g * 40 + 10, job, bad, f"gpu-o03:{70100 + g}:{70300 + g} [{g}] NCCL INFO transport/net_ib.cc:1106 -> 2",
              rank=r, tenant=ten)
    b.log(tf + 2 * SEC, job, bad, dist_error(16, "NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970,"
          " unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\nncclSystemError: System "
          "call (e.g. socket, malloc) or external library call failed or device error."), rank=16, tenant=ten)
    for i in (0, 1, 3):
        b.log(tf + 9 * SEC + i * 100, job, nodes[i], dist_error(i * 8, "NCCL error in: ../torch/csrc/distributed/c10d/"
              "NCCLUtils.hpp:275, remote process exited or there was a network error, NCCL version 2.21.5"),
              rank=i * 8, tenant=ten)


@scenario(20, [I("8812020", 0, "node_hardware", "node:gpu-t02")])
def o20_fan_failure_thermal_shutdown(b: B):
    """2 nodes. FAN3A of gpu-t02 stops (8,900 RPM -> 0, critical); CPU2 Temp climbs 58 -> 97
    (warning) -> 104 C (critical); SEL 'FAN3A Lower Critical - going low' (Fan) and 'CPU2 Thermal
    Trip - Asserted' (Processor); the BMC powers the node off (telemetry stops), Slurm: down, Not
    responding; NODE_FAIL. GPU temperatures rise a few degrees, no GPU throttling."""
    t0 = b.t0
    nodes = [Node(f"gpu-t{i:02d}", "leaf-t1", f"Ethernet{i}", [("/gpfs/work", "gpfs", "gpfs", "nsd09")]) for i in (1, 2)]
    bad = nodes[1]
    job, ten = "8812020", "vision"
    start = t0 + 10 * MIN
    tfan = start + 50 * MIN
    toff = tfan + 9 * MIN
    down = toff + 5 * MIN
    end = down + SEC

    def sensors(n, t, lst):
        if n is bad and t >= tfan:
            dt = (t - tfan) / MIN
            cpu = min(104.0, 58 + dt * 5.5)
            for x in lst:
                if x["sensor"] == "CPU1 Temp":
                    x["value"] = float(b.rnd.randint(50, 60))
            lst.append(dict(sensor="FAN3A", type="fan", value=0.0, unit="RPM", status="critical"))
            lst.append(dict(sensor="CPU2 Temp", type="temperature", value=round(cpu, 1), unit="degrees C",
                            status="critical" if cpu >= 100 else "warning" if cpu >= 90 else "ok"))
        elif n is bad:
            lst.append(dict(sensor="FAN3A", type="fan", value=8880.0, unit="RPM", status="ok"))
            lst.append(dict(sensor="CPU2 Temp", type="temperature", value=float(b.rnd.randint(52, 58)),
                            unit="degrees C", status="ok"))
        return lst

    def gpu(n, g, t, d):
        if n is bad and t >= tfan and d["util_pct"]:
            d["temp_c"] = min(79, d["temp_c"] + int((t - tfan) / MIN))
        return d
    b.inventory(nodes, t0, end + 10 * MIN)
    b.telemetry(nodes, t0, end + 10 * MIN, lambda n, t: start <= t <= (toff if n is bad else end),
                dict(sensors=sensors, gpu=gpu, alive=lambda n, t: not (n is bad and t > toff)))
    b.e(tfan + 20 * SEC, "hw.sel", "bmc@gpu-t02", dict(entry_id="0x00b1", severity="critical", sensor_type="Fan",
                                                       message_id="IPMI.Fan.LowerCriticalGoingLow",
                                                       message="FAN3A | Lower Critical - going low | Asserted"),
        node="gpu-t02")
    b.e(toff - 20 * SEC, "hw.sel", "bmc@gpu-t02", dict(entry_id="0x00b2", severity="critical", sensor_type="Processor",
                                                       message_id="IPMI.Processor.ThermalTrip",
                                                       message="CPU2 Thermal Trip | Asserted"), node="gpu-t02")
    b.e(down, "sched.node", "slurm@ctl-1", dict(state="down", reason="Not responding"), node="gpu-t02")
    b.job(job, 0, nodes, "node_fail", submit=t0 + 5 * MIN, start=start, end=end, name="sam-h-ft", user="lchen",
          tenant=ten, exit_code=None, reason="NodeFail gpu-t02")
    b.progress(job, nodes[0], start, toff, tenant=ten)
    b.checkpoints(job, nodes[0], start, toff, "/gpfs/work/sam/ckpt", tenant=ten)
    b.log(toff + 40 * SEC, job, nodes[0], nccl_ib_error("gpu-t01", 81000, "10.10.20.12"), rank=0, tenant=ten)


@scenario(21, [I("8812121", 0, "storage_unavailable", "path:/local_scratch")])
def o21_local_nvme_readonly(b: B):
    """2 nodes; each stages its shard of the dataset into node-local NVMe /local_scratch (ext4). On
    gpu-u02 the NVMe times out, ext4 aborts its journal and remounts read-only ('EXT4-fs
    (nvme1n1p1): Remounting filesystem read-only'); the mount reports readonly; the next shard
    write fails 'OSError: [Errno 30] Read-only file system', exit 1. /lustre (checkpoints) fine."""
    t0 = b.t0
    mounts = [("/lustre/scratch", "lustre", "lustre", "mds1"), ("/local_scratch", "ext4", "local", "nvme1n1")]
    nodes = [Node(f"gpu-u{i:02d}", "leaf-u1", f"Ethernet{i}", mounts) for i in (1, 2)]
    bad = nodes[1]
    job, ten = "8812121", "genomics"
    start = t0 + 10 * MIN
    tf = start + 66 * MIN
    end = tf + 70 * SEC

    def mount(n, path, t):
        if n is bad and path == "/local_scratch" and t >= tf:
            return "readonly", "EXT4-fs error: Remounting filesystem read-only"
        return "ok", None

    def storage(n, path, t, d):
        if n is bad and path == "/local_scratch" and t >= tf:
            d["write_iops"], d["write_mbps"] = 0, 0.0
        return d
    b.inventory(nodes, t0, end + 10 * MIN)
    b.telemetry(nodes, t0, end + 10 * MIN, window(start, end), dict(mount=mount, storage=storage))
    b.e(tf + 5 * SEC, "storage.mount", "storage@gpu-u02", dict(path="/local_scratch", state="readonly",
                                                             error="Read-only file system"), node="gpu-u02")
    b.job(job, 0, nodes, "failed", submit=t0 + 5 * MIN, start=start, end=end, name="enformer", user="bcole", tenant=ten,
          exit_code=1, reason="NonZeroExitCode")
    b.progress(job, nodes[0], start, tf + 50 * SEC, tenant=ten)
    b.checkpoints(job, nodes[0], start, tf, "/lustre/scratch/enformer/ckpt", tenant=ten)
    b.log(tf - 20 * SEC, job, bad, "nvme nvme1: I/O 417 QID 9 timeout, aborting", stream="kernel", tenant=ten)
    b.log(tf - 19 * SEC, job, bad, "blk_update_request: I/O error, dev nvme1n1, sector 912384512 op 0x1:(WRITE) flags "
          "0x800 phys_seg 32 prio class 0", stream="kernel", tenant=ten)
    b.log(tf - 2 * SEC, job, bad, "EXT4-fs error (device nvme1n1p1): ext4_journal_check_start:83: comm python: Detected "
          "aborted journal", stream="kernel", tenant=ten)
    b.log(tf, job, bad, "EXT4-fs (nvme1n1p1): Remounting filesystem read-only", stream="kernel", tenant=ten)
    b.log(tf + 55 * SEC, job, bad, "[rank8]: Traceback (most recent call last):\n  File \"/app/stage.py\", line 57, in "
          "write_shard\n    with open(dst, \"wb\") as f:\nOSError: [Errno 30] Read-only file system: "
          "'/local_scratch/enformer/cache/shard_00412.tfrecord'", rank=8, tenant=ten)


@scenario(22, [H("8812201"), I("8812202", 0, "change_regression", "version:kernel=5.15.0-112-generic"),
               I("8812203", 0, "change_regression", "version:kernel=5.15.0-112-generic")])
def o22_kernel_upgrade_breaks_peermem(b: B):
    """4 nodes. Job 8812201 on gpu-v01/02 completes at 07:25. At 07:30-07:40 ops roll kernel
    5.15.0-105-generic -> 5.15.0-112-generic on all four nodes (inventory.change per node, ticket
    CHG-8120, reboots); DKMS did not rebuild nvidia-peermem for the new kernel ('modprobe: FATAL:
    Module nvidia_peermem not found'). The next two jobs (8812202 on v01/02, 8812203 on v03/04),
    which force GPUDirect RDMA, fail at their first all-reduce: 'NCCL WARN NET/IB : GPU Direct RDMA
    (nvidia-peermem) is not available' / 'ibv_reg_mr failed with error Bad address'."""
    t0 = b.t0
    nodes = [Node(f"gpu-v{i:02d}", "leaf-v1", f"Ethernet{i}", [("/lustre/scratch", "lustre", "lustre", "mds1")])
             for i in range(1, 5)]
    ten = "llm-pretrain"
    sA, eA = t0 + 10 * MIN, t0 + 85 * MIN
    tchg = t0 + 90 * MIN
    sB, sC = t0 + 105 * MIN, t0 + 108 * MIN
    eB, eC = sB + 3 * MIN, sC + 3 * MIN

    for n in nodes:
        for tt in (t0, t0 + 30 * MIN, t0 + 60 * MIN):
            b.e(tt + 7 * SEC, "inventory.versions", f"inventory@{n.name}", dict(n.versions), node=n.name)
            b.e(tt + 8 * SEC, "inventory.topology", f"inventory@{n.name}",
                dict(links=[dict(nic=n.nic, switch=n.leaf, port=n.port, segment=n.leaf)],
                     storage=[dict(path=m[0], backend=m[2], server=m[3]) for m in n.mounts]), node=n.name)
    for i, n in enumerate(nodes):
        tc = tchg + i * 2 * MIN
        b.e(tc, "inventory.change", "ansible@ops-1", dict(component="kernel", **{"from": "5.15.0-105-generic"},
                                                          to="5.15.0-112-generic", actor="ansible", ticket="CHG-8120"),
            node=n.name)
        n.versions["kernel"] = "5.15.0-112-generic"
        for tt in (tc + 4 * MIN, tc + 34 * MIN):
            b.e(tt, "inventory.versions", f"inventory@{n.name}", dict(n.versions), node=n.name)
            b.e(tt + SEC, "inventory.topology", f"inventory@{n.name}",
                dict(links=[dict(nic=n.nic, switch=n.leaf, port=n.port, segment=n.leaf)],
                     storage=[dict(path=m[0], backend=m[2], server=m[3]) for m in n.mounts]), node=n.name)
        b.e(tc + 3 * MIN, "sched.node", "slurm@ctl-1", dict(state="idle", reason=None), node=n.name)
        b.e(tc - 10 * SEC, "sched.node", "slurm@ctl-1", dict(state="drain", reason="kernel update CHG-8120"), node=n.name)
    rebooting = lambda n, t: not (tchg + nodes.index(n) * 2 * MIN < t < tchg + nodes.index(n) * 2 * MIN + 3 * MIN)  # noqa
    b.telemetry(nodes, t0, eC + 10 * MIN,
                lambda n, t: (n in nodes[:2] and (sA <= t <= eA or sB <= t <= eB)) or (n in nodes[2:] and sC <= t <= eC),
                dict(alive=rebooting))
    b.job("8812201", 0, nodes[:2], "completed", submit=t0 + 5 * MIN, start=sA, end=eA, name="pt-run-a", user="ovasquez",
          tenant=ten, exit_code=0)
    b.progress("8812201", nodes[0], sA, eA - 20 * SEC, tenant=ten)
    b.checkpoints("8812201", nodes[0], sA, eA, "/lustre/scratch/run-a/ckpt", tenant=ten)
    for j, s, e, ns in (("8812202", sB, eB, nodes[:2]), ("8812203", sC, eC, nodes[2:])):
        b.job(j, 0, ns, "failed", submit=s - 2 * MIN, start=s, end=e, name=f"pt-run-{j[-1]}", user="ovasquez", tenant=ten,
              exit_code=1, reason="NonZeroExitCode")
        b.log(s + 60 * SEC, j, ns[0], f"{ns[0].name}:9121:9121 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB "
              "ens17f0np0:10.10.3.1<0>", rank=0, stream="stdout", tenant=ten)
        for i, n in enumerate(ns):
            b.log(s + 90 * SEC + i * 100, j, n, f"{n.name}:{9121 + i}:{9300 + i} [0] NCCL WARN NET/IB : GPU Direct RDMA "
                  "(nvidia-peermem) is not available for HCA 0 'mlx5_0' but NCCL_NET_GDR_LEVEL=SYS requires it", rank=i * 8,
                  tenant=ten)
            b.log(s + 90 * SEC + i * 100 + 20, j, n, f"{n.name}:{9121 + i}:{9300 + i} [0] NCCL WARN NET/IB : "
                  "ibv_reg_mr failed with error Bad address", rank=i * 8, tenant=ten)
            b.log(s + 92 * SEC + i * 100, j, n, dist_error(i * 8, "NCCL error in: ../torch/csrc/distributed/c10d/"
                  "ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL "
                  "version 2.21.5\nncclSystemError: System call (e.g. socket, malloc) or external library call failed "
                  "or device error."), rank=i * 8, tenant=ten)
    for j, s, ns in (("8812202", sB, nodes[:2]), ("8812203", sC, nodes[2:])):
        for n in ns:  # the prolog's `modprobe nvidia-peermem`, seen by the kernel-log collector in the job
            b.log(s + 15 * SEC, j, n, "modprobe: FATAL: Module nvidia_peermem not found in directory "
                  "/lib/modules/5.15.0-112-generic", stream="kernel", tenant=ten)


def build(out: Path, only: set[str] | None = None) -> dict[str, int]:
    out.mkdir(parents=True, exist_ok=True)
    counts = {}
    for name, (idx, fn) in SCEN.items():
        if only and name not in only:
            continue
        b = B(name, T_BASE + idx * 6 * HOUR)
        fn(b)
        counts[name] = b.write(out)
    return counts


def write_expectations(path: Path) -> None:
    path.write_text(json.dumps({"_comment": "written before faultline ran on any scenario; see README.md",
                                "scenarios": EXPECT}, indent=1) + "\n")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0]) if argv else DEFAULT_OUT
    counts = build(out)
    for k, v in counts.items():
        print(f"{k}.jsonl {v}")
    print(f"total {sum(counts.values())} events in {len(counts)} files -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
