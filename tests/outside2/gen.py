"""Generator of the second outside-check round (issue 16): seven differently shaped sites as
contract v1 event files (JSON lines), written from shared/spec/events.md alone.

``python -m tests.outside2.gen [OUT_DIR]`` writes ``sNN_<site>.jsonl`` into OUT_DIR (default:
var/outside2, ~57 MB, not committed: the generator is the scenario). Deterministic: the same files every run (uuid5 ids, seeded jitter).
The expected diagnosis of every attempt is in expectations.json (written before this file was
run against the tool).

Log lines follow the formats the tools print; where each format was taken from is cited next
to it (the values - hosts, pids, sizes, times - are this round's own):
- NVIDIA XID kernel lines `NVRM: Xid (PCI:dddd:bb:dd): N, pid=..., name=..., text`:
  leptonai/gpud PR #46 (dmesg examples), PR #1174 (Xid 94 "Contained ECC error"),
  NVIDIA/NVSentinel issue #155 (Xid 79 "GPU has fallen off the bus"); meanings from
  shared/reference/xid_catalog.csv.
- PyTorch CUDA OOM text (`GPU 0 has a total capacity of ... Including non-PyTorch memory`):
  pytorch/pytorch issue #16417 (2024 comment).
- NCCL watchdog `Watchdog caught collective operation timeout: WorkNCCL(SeqNum=..., OpType=...,
  NumelIn=..., NumelOut=..., Timeout(ms)=...) ran for ... milliseconds before timing out.`:
  hiyouga/LlamaFactory issue #7396, NVIDIA/Megatron-LM issue #1207.
- ImportError undefined symbol in transformer_engine_torch: NVIDIA/TransformerEngine issue #1192.
- Slurm `slurmstepd: error: *** JOB N ON host CANCELLED AT time DUE TO TIME LIMIT ***`:
  ZettaAI/zetta_utils issue #671, Computational-Plant-Science/plantit issue #198 (the
  `DUE TO PREEMPTION` variant is the same slurmstepd format).
- NFS `nfs: server X not responding, still trying`: SUSE KB 000020830.
- Lustre `LustreError: 167-0: <target>: This client was evicted by <target>; in progress
  operations using this service will fail.` and `-107` RPC failures: Lustre debugging manual
  excerpt (37-Debugging a Lustre File System) as quoted in the pages corpus.
- mlx5 kernel `mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link ACTIVE`: leptonai/gpud PR #1209
  (the DOWN variant is the same format).
- IPMI SEL `Memory #08 Uncorrectable ECC`: Kaseya KB "Diagnosing memory errors with IPMI"
  (ipmiutil sel output); severities as in Dell OpenManage "Memory ECC Events".
- Kernel OOM killer `Out of memory: Killed process N (comm) total-vm:...kB, anon-rss:...kB`
  and `Memory cgroup out of memory: Killed process ...`: Linux mm/oom_kill.c format.
- CUDA runtime error strings (`CUDA driver version is insufficient for CUDA runtime version`,
  `uncorrectable ECC error encountered`, `unspecified launch failure`): CUDA runtime API
  cudaGetErrorString texts; `ncclRemoteError: A call failed possibly due to a network error
  or a remote process exiting prematurely.` and `NET/IB : Got completion from peer ... with
  status=12`: NCCL's own error strings (status 12 = IBV_WC_RETRY_EXC_ERR).
"""
from __future__ import annotations

import json
import random
import sys
import uuid
from datetime import datetime, timezone
from pathlib import Path

NS = uuid.UUID("6b1f3c1e-2a51-4f0e-9a43-0d2c5e7f1a16")
T0 = 1796104800000  # 2026-12-01T06:00:00Z
SEC = 1000
MIN = 60 * SEC
HOUR = 60 * MIN


def at(h: int, m: int = 0, s: int = 0) -> int:
    """Epoch ms of 2026-12-01 hh:mm:ss UTC."""
    return T0 + (h - 6) * HOUR + m * MIN + s * SEC


def iso(ts: int) -> str:
    return datetime.fromtimestamp(ts / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


class Site:
    def __init__(self, name: str, sched_source: str, seed: int):
        self.name = name
        self.sched_source = sched_source
        self.rng = random.Random(seed)
        self.events: list[dict] = []
        self.n = 0
        self.busy: dict[str, list[tuple[int, int]]] = {}

    # -- envelope --------------------------------------------------------------------------
    def ev(self, ts, kind, source, data, node=None, job=None, tenant=None):
        self.n += 1
        self.events.append({
            "v": 1, "id": str(uuid.uuid5(NS, f"{self.name}/{self.n}")), "ts": int(ts),
            "kind": kind, "source": source, "node": node, "job": job, "tenant": tenant,
            "data": data,
        })

    def write(self, path: Path):
        self.events.sort(key=lambda e: (e["ts"], e["id"]))
        with path.open("w") as fh:
            for e in self.events:
                fh.write(json.dumps(e, separators=(",", ":")) + "\n")
        return len(self.events)

    def is_busy(self, node, ts):
        return any(a <= ts < b for a, b in self.busy.get(node, ()))

    # -- a job attempt ---------------------------------------------------------------------
    def job(self, jid, attempt, nodes, gpn, start, end, state, *, image, name, user, tenant,
            exit_code=None, signal=None, reason=None, progress_until=None, step0=0,
            step_time=2.0, step_time_fn=None, ckpt_every=None, ckpt_dir=None,
            ckpt_stop=None, ckpt_duration_s=40.0, pending=True, log_node=None):
        gpus = len(nodes) * gpn
        ranks = {str(r): nodes[r // gpn] for r in range(gpus)}
        base = dict(attempt=attempt, nodes=nodes, gpus=gpus, ranks=ranks, image=image, name=name,
                    user=user)
        src = self.sched_source
        if pending:
            self.ev(start - 2 * MIN, "sched.job", src, dict(base, state="pending", exit_code=None,
                    signal=None, start_ts=None, end_ts=None, reason="Priority"), job=jid, tenant=tenant)
        self.ev(start, "sched.job", src, dict(base, state="running", exit_code=None, signal=None,
                start_ts=start, end_ts=None, reason=None), job=jid, tenant=tenant)
        self.ev(end, "sched.job", src, dict(base, state=state, exit_code=exit_code, signal=signal,
                start_ts=start, end_ts=end, reason=reason), job=jid, tenant=tenant)
        for nd in nodes:
            self.busy.setdefault(nd, []).append((start, end))
        # progress of rank 0, one heartbeat a minute
        stop = end - 30 * SEC if progress_until is None else progress_until
        t, step = start + MIN, step0
        steps_at = {}
        while t <= stop:
            st = step_time_fn(t) if step_time_fn else step_time
            step += max(1, int(60 / st))
            steps_at[t] = step
            self.ev(t, "runtime.progress", f"sdk@{log_node or nodes[0]}", dict(rank=0, step=step,
                    step_time_s=round(st * (1 + self.rng.uniform(-0.03, 0.03)), 3),
                    samples_per_s=round(gpus * 8 / st, 1)), node=log_node or nodes[0], job=jid,
                    tenant=tenant)
            t += MIN
        # checkpoints
        if ckpt_every:
            t = start + ckpt_every
            last = ckpt_stop if ckpt_stop is not None else stop
            while t + ckpt_duration_s * SEC <= last:
                s = max([v for k, v in steps_at.items() if k <= t] or [step0])
                path = f"{ckpt_dir}/step_{s:08d}"
                self.ev(t, "runtime.checkpoint", f"sdk@{nodes[0]}", dict(phase="started", step=s,
                        path=path, bytes=None, duration_s=None, error=None), node=nodes[0], job=jid,
                        tenant=tenant)
                self.ev(t + int(ckpt_duration_s * SEC), "runtime.checkpoint", f"sdk@{nodes[0]}",
                        dict(phase="succeeded", step=s, path=path, bytes=gpus * 2_400_000_000,
                             duration_s=ckpt_duration_s, error=None), node=nodes[0], job=jid,
                        tenant=tenant)
                t += ckpt_every
        return steps_at

    def step_at(self, steps_at, ts):
        return max([v for k, v in steps_at.items() if k <= ts] or [0])

    def log(self, ts, jid, node, rank, message, stream="stderr", tenant=None, source=None):
        self.ev(ts, "runtime.log", source or f"logs@{node}", dict(rank=rank, stream=stream,
                message=message), node=node, job=jid, tenant=tenant)

    # -- background telemetry --------------------------------------------------------------
    def gpus(self, nodes, ngpu, t_from, t_to, every, mem_total, *, source=lambda n: f"nvml@{n}",
             node_name=lambda n: n, fn=None, pci=lambda g: f"0000:{0x18 + 0x1b * g:02x}:00.0"):
        """One gpu.sample per GPU every `every` ms. fn(node, gpu, ts, sample) may edit the
        sample in place, or return False to drop it (a GPU that stopped answering)."""
        for nd in nodes:
            t = t_from + self.rng.randint(0, 20) * SEC
            while t < t_to:
                busy = self.is_busy(nd, t)
                for g in range(ngpu):
                    s = dict(gpu=g, uuid=str(uuid.uuid5(NS, f"{self.name}/{nd}/gpu{g}")),
                             util_pct=self.rng.randint(92, 99) if busy else 0,
                             mem_used_mib=int(mem_total * 0.76) + self.rng.randint(-500, 500) if busy else 3,
                             mem_total_mib=mem_total,
                             temp_c=self.rng.randint(58, 71) if busy else self.rng.randint(31, 36),
                             power_w=round(self.rng.uniform(520, 640) if busy else self.rng.uniform(68, 80), 1),
                             sm_clock_mhz=1980 if busy else 345, throttle=[], ecc_sbe=0, ecc_dbe=0,
                             nvlink_errors=0, pcie_replay=0)
                    if fn is not None and fn(nd, g, t, s) is False:
                        continue
                    self.ev(t, "gpu.sample", source(nd), s, node=node_name(nd))
                t += every

    def storage(self, nodes, mounts, t_from, t_to, every, *, source=lambda n: f"storage@{n}",
                node_name=lambda n: n, fn=None):
        """mounts: list of (path, fs_type, used_pct, base_read_lat, base_write_lat)."""
        for nd in nodes:
            t = t_from + self.rng.randint(0, 30) * SEC
            while t < t_to:
                for path, fs, used, rl, wl in mounts:
                    s = dict(path=path, fs_type=fs, read_iops=self.rng.randint(300, 900),
                             write_iops=self.rng.randint(100, 400),
                             read_mbps=round(self.rng.uniform(250, 700), 1),
                             write_mbps=round(self.rng.uniform(120, 400), 1),
                             read_lat_ms=round(rl * self.rng.uniform(0.85, 1.2), 2),
                             write_lat_ms=round(wl * self.rng.uniform(0.85, 1.2), 2),
                             queue_depth=round(self.rng.uniform(1, 4), 1), used_pct=used)
                    if fn is not None and fn(nd, path, t, s) is False:
                        continue
                    self.ev(t, "storage.sample", source(nd), s, node=node_name(nd))
                t += every

    def sensors(self, nodes, t_from, t_to, every, *, source=lambda n: f"bmc@{n}",
                node_name=lambda n: n, fn=None):
        for nd in nodes:
            t = t_from + self.rng.randint(0, 60) * SEC
            while t < t_to:
                for sensor, typ, val, unit in (("Inlet Temp", "temperature", 24.0, "C"),
                                               ("PSU1 Power", "power", 2900.0, "W"),
                                               ("FAN3", "fan", 7800.0, "RPM")):
                    s = dict(sensor=sensor, type=typ, value=round(val * self.rng.uniform(0.95, 1.05), 1),
                             unit=unit, status="ok")
                    if fn is not None and fn(nd, sensor, t, s) is False:
                        continue
                    self.ev(t, "hw.sensor", source(nd), s, node=node_name(nd))
                t += every

    def rdma(self, nodes, t_from, t_to, every, *, rates=None, device="mlx5_0",
             source=lambda n: f"rdma@{n}", node_name=lambda n: n):
        """Cumulative counters; rates(node, ts) -> dict name -> per-second rate (default small)."""
        base = dict(link_downed=0, symbol_error=0, port_rcv_errors=0, local_ack_timeout_err=0,
                    out_of_sequence=0, packet_seq_err=0, np_cnp_sent=0, rp_cnp_handled=0,
                    np_ecn_marked_roce_packets=0, port_xmit_wait=0)
        quiet = dict(np_cnp_sent=4.0, rp_cnp_handled=4.0, np_ecn_marked_roce_packets=6.0,
                     port_xmit_wait=900.0)
        for nd in nodes:
            c = {k: self.rng.randint(0, 50) * (k in quiet) for k in base}
            t = t_from + self.rng.randint(0, 20) * SEC
            while t < t_to:
                r = dict(quiet)
                if rates:
                    r.update(rates(nd, t) or {})
                for k, v in r.items():
                    c[k] = c.get(k, 0) + int(v * every / SEC * self.rng.uniform(0.9, 1.1))
                self.ev(t, "net.rdma", source(nd), dict(device=device, port=1, counters=dict(c)),
                        node=node_name(nd))
                t += every

    def ports(self, facing, t_from, t_to, every, *, fn=None, source=lambda sw: f"snmp@{sw}"):
        """facing: list of (switch, port, node). fn(switch, port, node, ts, counters) edits."""
        for sw, port, nd in facing:
            c = dict(in_errors=0, out_errors=0, in_discards=0, out_discards=0,
                     in_octets=self.rng.randint(10**9, 10**10), out_octets=self.rng.randint(10**9, 10**10))
            t = t_from + self.rng.randint(0, 20) * SEC
            while t < t_to:
                busy = self.is_busy(nd, t)
                c["in_octets"] += int((3e9 if busy else 1e6) * every / SEC)
                c["out_octets"] += int((3e9 if busy else 1e6) * every / SEC)
                d = dict(device=sw, port=port, oper_status="up", speed_mbps=400000)
                if fn is not None:
                    fn(sw, port, nd, t, c, d)
                d.update(c)
                self.ev(t, "net.port", source(sw), d, node=nd)
                t += every

    def versions(self, node, ts, source=None, **v):
        self.ev(ts, "inventory.versions", source or f"inventory@{node}", v, node=node)

    def topology(self, node, ts, links, storage, source=None):
        self.ev(ts, "inventory.topology", source or f"inventory@{node}",
                dict(links=links, storage=storage), node=node)


# =========================================================================================
# s01 lakeside: Slurm, image rollout as context (point 1)
# =========================================================================================
def s01_lakeside() -> Site:
    s = Site("s01_lakeside", "slurm@lk-ctl1", 101)
    nodes = [f"gpu{i:03d}" for i in range(1, 17)]
    old, new = "registry.lakeside.ai/train/pytorch:24.05", "registry.lakeside.ai/train/pytorch:24.09"
    for i, nd in enumerate(nodes):
        drv, cuda = ("535.183.01", "12.2") if nd == "gpu016" else ("550.90.07", "12.4")
        s.versions(nd, at(6, 0, 5), driver=drv, cuda=cuda, nccl="2.21.5", gpu_firmware="96.00.89.00.01",
                   bios="1.7.2", kernel="5.15.0-119-generic", os="Ubuntu 22.04.4 LTS", image=old,
                   container_runtime="enroot 3.4.1", ofed="MLNX_OFED_LINUX-24.04-0.7.0.0")
        s.topology(nd, at(6, 0, 6), [dict(nic="mlx5_0", switch=f"lk-leaf{1 + i // 8}", port=f"Ethernet{1 + i % 8}",
                                          segment=f"lk-leaf{1 + i // 8}")],
                   [dict(path="/lustre/lk", backend="lustre", server="10.1.0.10@o2ib:/lk")])
        # the rollout of the new image, node by node, 06:30
        s.ev(at(6, 30, i), "inventory.change", "argo@lk-deploy", {"component": "image", "from": old, "to": new,
             "actor": "argo-rollout", "ticket": "CHG-2291"}, node=nd)
        s.versions(nd, at(6, 30, 30 + i), driver=drv, cuda=cuda, nccl="2.21.5", gpu_firmware="96.00.89.00.01",
                   bios="1.7.2", kernel="5.15.0-119-generic", os="Ubuntu 22.04.4 LTS", image=new,
                   container_runtime="enroot 3.4.1", ofed="MLNX_OFED_LINUX-24.04-0.7.0.0")

    # healthy before the rollout, same job name as 880102
    s.job("880090", 0, ["gpu009", "gpu010"], 8, at(6, 5), at(6, 25), "completed", image=old,
          name="sft-llama-ft", user="mkhan", tenant="nlp", exit_code=0, ckpt_every=10 * MIN,
          ckpt_dir="/lustre/lk/ckpt/sft-llama-ft")

    # 880101 attempt 0: preempted at 08:10 by 880150; attempt 1 times out after 4 h
    s.job("880101", 0, nodes[0:4], 8, at(6, 40), at(8, 10), "preempted", image=new,
          name="llm-pretrain-13b", user="jdoe", tenant="foundation", signal=15, reason="Preempted",
          ckpt_every=30 * MIN, ckpt_dir="/lustre/lk/ckpt/880101")
    s.log(at(8, 10) - 2 * SEC, "880101", "gpu001", None,
          f"slurmstepd: error: *** JOB 880101 ON gpu001 CANCELLED AT {iso(at(8, 10))} DUE TO PREEMPTION ***",
          tenant="foundation")
    base = dict(attempt=0, nodes=nodes[0:4], gpus=32, ranks={str(r): nodes[r // 8] for r in range(32)},
                image=new, name="llm-pretrain-13b", user="jdoe")
    s.ev(at(8, 10, 5), "sched.job", s.sched_source, dict(base, state="requeued", exit_code=None, signal=None,
         start_ts=at(6, 40), end_ts=at(8, 10), reason="Preempted"), job="880101", tenant="foundation")
    s.job("880150", 0, nodes[0:4], 8, at(8, 11), at(10, 40), "completed", image=new, name="hp-eval-burst",
          user="ops", tenant="platform", exit_code=0, ckpt_every=45 * MIN, ckpt_dir="/lustre/lk/ckpt/880150")
    s.job("880101", 1, nodes[4:8], 8, at(8, 20), at(12, 20), "timeout", image=new, name="llm-pretrain-13b",
          user="jdoe", tenant="foundation", signal=15, reason="TimeLimit", step0=2700,
          ckpt_every=30 * MIN, ckpt_dir="/lustre/lk/ckpt/880101")
    s.log(at(12, 20) - 1 * SEC, "880101", "gpu005", None,
          f"slurmstepd: error: *** JOB 880101 ON gpu005 CANCELLED AT {iso(at(12, 20))} DUE TO TIME LIMIT ***",
          tenant="foundation")

    # 880102: first run on the new image dies at import (the change really is the cause)
    s.job("880102", 0, ["gpu009", "gpu010"], 8, at(6, 45), at(6, 46, 30), "failed", image=new,
          name="sft-llama-ft", user="mkhan", tenant="nlp", exit_code=1, progress_until=at(6, 45))
    imp = ("Traceback (most recent call last):\n  File \"/workspace/sft/train.py\", line 14, in <module>\n"
           "    import transformer_engine.pytorch as te\n"
           "  File \"/usr/local/lib/python3.10/dist-packages/transformer_engine/pytorch/__init__.py\", line 34, in <module>\n"
           "    import transformer_engine_torch as tex\n"
           "ImportError: /usr/local/lib/python3.10/dist-packages/transformer_engine/"
           "transformer_engine_torch.cpython-310-x86_64-linux-gnu.so: undefined symbol: "
           "_ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE")
    s.log(at(6, 46, 10), "880102", "gpu009", 0, imp, tenant="nlp")
    s.log(at(6, 46, 11), "880102", "gpu010", 8, imp, tenant="nlp")

    # 880103: user assertion after 2 h, everything clean
    s.job("880103", 0, ["gpu011", "gpu012"], 8, at(6, 50), at(8, 50), "failed", image=new, name="rlhf-reward",
          user="lchen", tenant="alignment", exit_code=1, ckpt_every=30 * MIN, ckpt_dir="/lustre/lk/ckpt/rlhf-reward",
          progress_until=at(8, 49))
    s.log(at(8, 49, 40), "880103", "gpu011", 3,
          "Traceback (most recent call last):\n  File \"/workspace/rlhf/train_rm.py\", line 311, in <module>\n"
          "    main()\n  File \"/workspace/rlhf/train_rm.py\", line 287, in main\n"
          "    assert torch.isfinite(rewards).all(), f\"non-finite reward at step {step}\"\n"
          "AssertionError: non-finite reward at step 4180", tenant="alignment")

    # 880104: XID 79 on gpu014 GPU 5 (ranks 8-15 on gpu014, rank 13 = GPU 5)
    s.job("880104", 0, ["gpu013", "gpu014"], 8, at(7, 0), at(9, 6), "failed", image=new, name="vit-huge-pt",
          user="apatel", tenant="vision", exit_code=1, ckpt_every=30 * MIN, ckpt_dir="/lustre/lk/ckpt/vit-huge",
          progress_until=at(9, 5))
    xid79 = "NVRM: Xid (PCI:0000:b3:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    s.ev(at(9, 5), "gpu.xid", "kernel@gpu014", dict(gpu=5, pci="0000:b3:00.0", xid=79, pid=None, message=xid79),
         node="gpu014")
    s.log(at(9, 5, 1), "880104", "gpu014", None, xid79, stream="kernel", tenant="vision", source="kernel@gpu014")
    s.log(at(9, 5, 40), "880104", "gpu014", 13,
          "RuntimeError: CUDA error: unspecified launch failure\nCUDA kernel errors might be asynchronously "
          "reported at some other API call, so the stacktrace below might be incorrect.\nFor debugging consider "
          "passing CUDA_LAUNCH_BLOCKING=1.", tenant="vision")

    # 880105: gpu016 alone has the older driver (missed an earlier rollout; no change event)
    s.job("880105", 0, ["gpu015", "gpu016"], 8, at(7, 30), at(7, 32), "failed", image=new, name="moe-8x7b",
          user="rsingh", tenant="foundation", exit_code=1, progress_until=at(7, 30))
    s.log(at(7, 31, 20), "880105", "gpu016", 8,
          "gpu016:81233:81233 [0] NCCL WARN Cuda failure 'CUDA driver version is insufficient for CUDA runtime version'",
          tenant="foundation")
    s.log(at(7, 31, 21), "880105", "gpu016", 8,
          "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version\n"
          "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
          "might be incorrect.", tenant="foundation")

    s.job("880107", 0, ["gpu011", "gpu012"], 8, at(9, 0), at(10, 30), "completed", image=new, name="eval-harness",
          user="lchen", tenant="alignment", exit_code=0, ckpt_every=30 * MIN, ckpt_dir="/lustre/lk/ckpt/eval")

    def gfn(nd, g, t, smp):
        if nd == "gpu014" and g == 5 and t >= at(9, 5):
            return False
        return True
    s.gpus(nodes, 8, at(6), at(12, 30), 2 * MIN, 81559, fn=gfn)
    s.storage(nodes, [("/", "ext4", 41.0, 0.3, 0.5), ("/lustre/lk", "lustre", 63.0, 1.4, 2.2)],
              at(6), at(12, 30), 2 * MIN)
    s.sensors(nodes, at(6), at(12, 30), 10 * MIN)
    s.rdma(nodes, at(6), at(12, 30), 5 * MIN)
    return s


# =========================================================================================
# s02 fjord: Kubernetes, local /scratch full on one node (point 2)
# =========================================================================================
def s02_fjord() -> Site:
    s = Site("s02_fjord", "k8s@fjord-api", 202)
    nodes = [f"fjord-a100-{i}" for i in range(6)]
    img = "harbor.fjord.internal/ml/torch:2.4.1-cu124"
    for i, nd in enumerate(nodes):
        s.versions(nd, at(6, 0, 3), driver="550.127.05", cuda="12.4", nccl="2.21.5", kernel="6.1.0-26-amd64",
                   os="Debian 12", image=img, container_runtime="containerd 1.7.22", ofed="24.07-0.6.1.0",
                   source=f"node-agent@{nd}")
        s.topology(nd, at(6, 0, 4), [dict(nic="mlx5_0", switch="fjord-leaf1", port=f"swp{11 + i}",
                                          segment="fjord-leaf1")],
                   [dict(path="/scratch", backend="local-nvme", server=None),
                    dict(path="/data", backend="nfs", server="nas01.fjord.internal")],
                   source=f"node-agent@{nd}")
    a1 = s.job("pytorchjob-resnet-a1", 0, ["fjord-a100-4", "fjord-a100-5"], 4, at(6, 10), at(7, 12), "failed",
               image=img, name="resnet-a1", user="oda", tenant="vision", exit_code=1, progress_until=at(7, 10),
               ckpt_every=20 * MIN, ckpt_dir="/scratch/ckpt/resnet-a1", ckpt_stop=at(7, 9))
    st = s.step_at(a1, at(7, 10))
    s.ev(at(7, 10), "runtime.checkpoint", "sdk@fjord-a100-4", dict(phase="started", step=st,
         path=f"/scratch/ckpt/resnet-a1/step_{st:08d}", bytes=None, duration_s=None, error=None),
         node="fjord-a100-4", job="pytorchjob-resnet-a1", tenant="vision")
    s.ev(at(7, 10, 20), "runtime.checkpoint", "sdk@fjord-a100-4", dict(phase="failed", step=st,
         path=f"/scratch/ckpt/resnet-a1/step_{st:08d}", bytes=None, duration_s=20.0,
         error="[Errno 28] No space left on device"), node="fjord-a100-4", job="pytorchjob-resnet-a1",
         tenant="vision")
    s.log(at(7, 10, 21), "pytorchjob-resnet-a1", "fjord-a100-4", 0,
          "Traceback (most recent call last):\n  File \"/app/train.py\", line 201, in save\n"
          "    torch.save(state, f)\n"
          f"OSError: [Errno 28] No space left on device: '/scratch/ckpt/resnet-a1/step_{st:08d}/model.pt'",
          tenant="vision", source="fluentbit@fjord-a100-4")

    b2 = "pytorchjob-bert-b2"
    s.job(b2, 0, ["fjord-a100-0", "fjord-a100-1"], 4, at(6, 20), at(8, 12), "failed", image=img, name="bert-b2",
          user="kim", tenant="nlp", exit_code=1, progress_until=at(8, 0), ckpt_every=30 * MIN,
          ckpt_dir="/data/ckpt/bert-b2")
    s.ev(at(8, 0, 2), "net.link", "snmp@fjord-leaf1", dict(device="fjord-leaf1", port="swp12", state="down"),
         node="fjord-a100-1")
    s.log(at(8, 0, 2), b2, "fjord-a100-1", None, "mlx5_core 0000:17:00.0 mlx5_0: Port: 1 Link DOWN",
          stream="kernel", tenant="nlp", source="fluentbit@fjord-a100-1")
    for r, nd in ((0, "fjord-a100-0"), (4, "fjord-a100-1")):
        s.log(at(8, 10, 5), b2, nd, r,
              f"[rank{r}]:[E1201 08:10:05.118233741 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
              "operation timeout: WorkNCCL(SeqNum=41877, OpType=ALLREDUCE, NumelIn=33554432, NumelOut=33554432, "
              "Timeout(ms)=600000) ran for 600071 milliseconds before timing out.", tenant="nlp",
              source=f"fluentbit@{nd}")

    c3 = "pytorchjob-gpt2-c3"
    s.job(c3, 0, ["fjord-a100-2", "fjord-a100-3"], 4, at(6, 30), at(9, 5), "cancelled", image=img, name="gpt2-c3",
          user="ngo", tenant="nlp", reason="deleted by user", progress_until=at(8, 20), ckpt_every=30 * MIN,
          ckpt_dir="/data/ckpt/gpt2-c3")
    s.log(at(8, 19, 40), c3, "fjord-a100-3", None,
          "Out of memory: Killed process 51877 (pt_data_worker) total-vm:31457280kB, anon-rss:29360128kB, "
          "file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:58000kB oom_score_adj:0", stream="kernel", tenant="nlp",
          source="fluentbit@fjord-a100-3")

    s.job("pytorchjob-eval-d4", 0, ["fjord-a100-5"], 4, at(7, 30), at(8, 30), "completed", image=img,
          name="eval-d4", user="oda", tenant="vision", exit_code=0, ckpt_every=20 * MIN, ckpt_dir="/data/ckpt/eval-d4")
    s.job("pytorchjob-tune-e5", 0, ["fjord-a100-0"], 4, at(8, 30), at(9, 30), "cancelled", image=img,
          name="tune-e5", user="kim", tenant="nlp", reason="deleted by user", progress_until=at(9, 29, 30),
          ckpt_every=20 * MIN, ckpt_dir="/data/ckpt/tune-e5")

    def sfn(nd, path, t, smp):
        if nd == "fjord-a100-4" and path == "/scratch":
            smp["used_pct"] = 100.0 if t >= at(7) else round(88 + 12 * (t - at(6)) / HOUR, 2)
        return True
    s.storage(nodes, [("/", "ext4", 37.0, 0.2, 0.4), ("/scratch", "xfs", 52.0, 0.1, 0.15),
                      ("/data", "nfs4", 71.0, 1.8, 2.9)], at(6), at(9, 40), MIN,
              source=lambda n: f"node-exporter@{n}", fn=sfn)
    t = at(7, 0, 30)
    while t < at(9, 40):
        s.ev(t, "storage.mount", "node-exporter@fjord-a100-4", dict(path="/scratch", state="full",
             error="No space left on device"), node="fjord-a100-4")
        t += 10 * MIN
    s.gpus(nodes, 4, at(6), at(9, 40), 2 * MIN, 40960, source=lambda n: f"dcgm@{n}")
    s.sensors(nodes, at(6), at(9, 40), 10 * MIN, source=lambda n: f"redfish@{n}-bmc")

    def pfn(sw, port, nd, t, c, d):
        if port == "swp12" and t >= at(8, 0, 2):
            d["oper_status"] = "down"
    s.ports([("fjord-leaf1", f"swp{11 + i}", nd) for i, nd in enumerate(nodes)], at(6), at(9, 40), MIN, fn=pfn)

    def rates(nd, t):
        return {}
    s.rdma(nodes, at(6), at(9, 40), 2 * MIN, rates=rates)
    # the host side of the failed link: link_downed +1 once
    s.ev(at(8, 0, 40), "net.rdma", "rdma@fjord-a100-1", dict(device="mlx5_0", port=1, counters=dict(
         link_downed=1, symbol_error=0, port_rcv_errors=0, local_ack_timeout_err=0, out_of_sequence=0,
         packet_seq_err=0, np_cnp_sent=0, rp_cnp_handled=0, np_ecn_marked_roce_packets=0, port_xmit_wait=0)),
         node="fjord-a100-1")
    return s


# =========================================================================================
# s03 ridge: PBS Pro, components that must be resolved to a mount (point 3)
# =========================================================================================
def s03_ridge() -> Site:
    s = Site("s03_ridge", "pbs@ridge-pbs", 303)
    nodes = [f"r01n{i:02d}" for i in range(1, 9)] + [f"r02n{i:02d}" for i in range(1, 9)]
    img = None
    for i, nd in enumerate(nodes):
        s.versions(nd, at(6, 0, 2), driver="550.90.07", cuda="12.4", nccl="2.20.5", kernel="4.18.0-513.24.1.el8_9",
                   os="Rocky Linux 8.9", ofed="MLNX_OFED_LINUX-23.10-2.1.3.1")
        s.topology(nd, at(6, 0, 3), [dict(nic="mlx5_0", switch=f"ridge-ib-leaf{1 + i // 8}", port=str(1 + i % 8),
                                          segment=f"ridge-ib-leaf{1 + i // 8}")],
                   [dict(path="/mnt", backend="local-ssd", server=None),
                    dict(path="/mnt/ckpt", backend="nfs", server="ckpt-nas.ridge"),
                    dict(path="/datasets", backend="nfs", server="filer-02"),
                    dict(path="/home", backend="nfs", server="filer-01"),
                    dict(path="/lustre/scratch", backend="lustre", server="10.20.0.11@o2ib:/scratch"),
                    dict(path="/lustre/proj", backend="lustre", server="10.20.0.11@o2ib:/proj")])

    j1 = "41877.ridge-pbs"
    st1 = s.job(j1, 0, nodes[0:4], 4, at(6, 5), at(7, 42), "failed", image=img, name="llm7b-pt", user="hwang",
                tenant="proj-llm", exit_code=1, progress_until=at(7, 35), ckpt_every=30 * MIN,
                ckpt_dir="/mnt/ckpt/ridge/llm7b", ckpt_stop=at(7, 34), step_time=0.9)
    st = s.step_at(st1, at(7, 35))
    p = f"/mnt/ckpt/ridge/llm7b/global_step{st}"
    s.ev(at(7, 35), "runtime.checkpoint", "sdk@r01n01", dict(phase="started", step=st, path=p, bytes=None,
         duration_s=None, error=None), node="r01n01", job=j1, tenant="proj-llm")
    s.ev(at(7, 36, 10), "runtime.checkpoint", "sdk@r01n01", dict(phase="failed", step=st, path=p, bytes=None,
         duration_s=70.0, error="[Errno 28] No space left on device"), node="r01n01", job=j1, tenant="proj-llm")
    s.log(at(7, 36, 11), j1, "r01n01", 0,
          "Traceback (most recent call last):\n  File \"/opt/deepspeed/runtime/engine.py\", line 3340, in _save_checkpoint\n"
          "    self.checkpoint_engine.save(state, save_path)\n"
          f"OSError: [Errno 28] No space left on device: '{p}/mp_rank_00_model_states.pt'", tenant="proj-llm")

    j2 = "41880.ridge-pbs"
    s.job(j2, 0, nodes[4:8], 4, at(6, 10), at(8, 5), "cancelled", image=img, name="vit-datasets", user="tran",
          tenant="proj-vision", exit_code=271, signal=15, reason="Job deleted by user", progress_until=at(7, 16),
          ckpt_every=30 * MIN, ckpt_dir="/lustre/scratch/tran/vit", ckpt_stop=at(7, 14))
    for k, nd in enumerate(nodes[4:8]):
        s.log(at(7, 17, 10 + k), j2, nd, None, "nfs: server filer-02 not responding, still trying",
              stream="kernel", tenant="proj-vision", source=f"kernel@{nd}")
        s.log(at(7, 47, 10 + k), j2, nd, None, "nfs: server filer-02 not responding, still trying",
              stream="kernel", tenant="proj-vision", source=f"kernel@{nd}")

    j3 = "41883.ridge-pbs"
    s.job(j3, 0, nodes[8:12], 4, at(6, 15), at(9, 3), "failed", image=img, name="climate-emu", user="baker",
          tenant="proj-climate", exit_code=1, progress_until=at(9, 0), ckpt_every=30 * MIN,
          ckpt_dir="/lustre/proj/climate/ckpt")
    osc = "proj-OST0007-osc-ffff9a3c5e4d1800"
    for k, line in enumerate((
            f"LustreError: 11-0: {osc}: operation ost_write to node 10.20.0.14@o2ib failed: rc = -107",
            f"LustreError: 167-0: {osc}: This client was evicted by proj-OST0007; in progress operations using "
            "this service will fail.",
            f"Lustre: {osc}: Connection restored to 10.20.0.14@o2ib (at 10.20.0.14@o2ib)")):
        s.log(at(9, 0, 10 + k), j3, "r02n03", None, line, stream="kernel", tenant="proj-climate",
              source="kernel@r02n03")
    s.log(at(9, 0, 30), j3, "r02n03", 9,
          "Traceback (most recent call last):\n  File \"/home/baker/emu/loader.py\", line 88, in __getitem__\n"
          "    arr = np.load(self.files[i])\nOSError: [Errno 108] Cannot send after transport endpoint shutdown",
          tenant="proj-climate")

    s.job("41885.ridge-pbs", 0, nodes[12:16], 4, at(6, 20), at(10, 20), "completed", image=img, name="md-surrogate",
          user="ito", tenant="proj-chem", exit_code=0, ckpt_every=30 * MIN, ckpt_dir="/lustre/scratch/ito/md")
    s.job("41886.ridge-pbs", 0, nodes[0:2], 4, at(8, 0), at(9, 30), "completed", image=img, name="llm7b-eval",
          user="hwang", tenant="proj-llm", exit_code=0, ckpt_every=30 * MIN, ckpt_dir="/lustre/scratch/hwang/eval")

    def sfn(nd, path, t, smp):
        if path == "/mnt/ckpt":
            smp["used_pct"] = round(min(99.7, 97.0 + 2.7 * (t - at(6)) / (95 * MIN)), 2)
        if path == "/datasets" and t >= at(7, 15):
            return False  # statfs hangs on the hard NFS mount: the collector reports nothing
        return True
    s.storage(nodes, [("/", "ext4", 33.0, 0.2, 0.4), ("/mnt", "ext4", 93.0, 0.1, 0.2),
                      ("/mnt/ckpt", "nfs4", 97.0, 2.0, 3.5), ("/datasets", "nfs", 78.0, 2.5, 3.0),
                      ("/home", "nfs", 61.0, 1.5, 2.5), ("/lustre/scratch", "lustre", 55.0, 1.2, 2.0),
                      ("/lustre/proj", "lustre", 68.0, 1.3, 2.1)], at(6), at(10, 30), 2 * MIN, fn=sfn)
    s.gpus(nodes, 4, at(6), at(10, 30), 2 * MIN, 81920)
    s.sensors(nodes, at(6), at(10, 30), 10 * MIN)
    s.rdma(nodes, at(6), at(10, 30), 5 * MIN)
    return s


# =========================================================================================
# s04 mesa: Slurm --gpus-per-task=1, OOM text says GPU 0 (point 4)
# =========================================================================================
def s04_mesa() -> Site:
    s = Site("s04_mesa", "slurm@mesa-head", 404)
    nodes = ["mesa-gpu-a", "mesa-gpu-b"]
    img = "docker://nvcr.io/nvidia/pytorch:24.10-py3"
    for nd in nodes:
        s.versions(nd, at(6, 0, 1), driver="560.35.03", cuda="12.6", nccl="2.22.3", kernel="6.8.0-45-generic",
                   os="Ubuntu 24.04.1 LTS", image=img, container_runtime="apptainer 1.3.4")
        s.topology(nd, at(6, 0, 2), [dict(nic="mlx5_0", switch="mesa-sw", port=f"Ethernet{1 + nodes.index(nd)}",
                                          segment="mesa-sw")],
                   [dict(path="/home", backend="nfs", server="mesa-head")])
    s.job("77310", 0, nodes, 4, at(6, 5), at(7, 20), "failed", image=img, name="llama3-8b-sft", user="pgarcia",
          tenant="lab-a", exit_code=1, progress_until=at(7, 18), ckpt_every=30 * MIN, ckpt_dir="/home/pgarcia/ckpt")
    oom = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 0 has a total capacity of "
           "79.10 GiB of which 1.91 GiB is free. Including non-PyTorch memory, this process has 77.18 GiB memory in "
           "use. Of the allocated memory 74.02 GiB is allocated by PyTorch, and 1.63 GiB is reserved by PyTorch but "
           "unallocated. If reserved but unallocated memory is large try setting "
           "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
           "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")
    s.log(at(7, 18, 40), "77310", "mesa-gpu-b", 6, "[rank6]: " + oom, tenant="lab-a")
    s.job("77311", 0, ["mesa-gpu-a"], 4, at(7, 30), at(8, 10), "failed", image=img, name="dpo-7b", user="pgarcia",
          tenant="lab-a", exit_code=1, progress_until=at(8, 9), ckpt_every=20 * MIN, ckpt_dir="/home/pgarcia/dpo")
    s.log(at(8, 9, 30), "77311", "mesa-gpu-a", 3, "[rank3]: " + oom.replace("3.50 GiB", "5.25 GiB"), tenant="lab-a")
    s.job("77312", 0, nodes, 4, at(8, 20), at(9, 20), "completed", image=img, name="llama3-8b-eval", user="pgarcia",
          tenant="lab-a", exit_code=0, ckpt_every=30 * MIN, ckpt_dir="/home/pgarcia/eval")

    def gfn(nd, g, t, smp):
        if nd == "mesa-gpu-b" and g == 2 and at(6, 55) <= t < at(7, 20):
            smp["mem_used_mib"] = min(81200, 78000 + int((t - at(6, 55)) / MIN) * 150)
        return True
    s.gpus(nodes, 4, at(6), at(9, 30), 2 * MIN, 81559, fn=gfn)
    s.storage(nodes, [("/", "ext4", 48.0, 0.2, 0.3), ("/home", "nfs4", 66.0, 1.1, 1.9)], at(6), at(9, 30), 2 * MIN)
    s.sensors(nodes, at(6), at(9, 30), 10 * MIN, source=lambda n: f"ipmi@{n}")
    return s


# =========================================================================================
# s05 delta: precursors - storage latency 50-100x, congestion surge in one segment (point 6)
# =========================================================================================
def s05_delta() -> Site:
    s = Site("s05_delta", "slurm@delta-ctl", 505)
    p1 = [f"dgx-p1-{i:02d}" for i in range(1, 17)]
    p2 = [f"dgx-p2-{i:02d}" for i in range(1, 17)]
    nodes = p1 + p2

    def segment(nd):
        pod = nd[5]
        return f"pod{pod}-leaf{1 if int(nd[-2:]) <= 8 else 2}"
    img = "nvcr.io/nvidia/pytorch:24.08-py3"
    for nd in nodes:
        s.versions(nd, at(6, 0, 1), driver="550.90.07", cuda="12.4", nccl="2.21.5", kernel="5.15.0-1063-nvidia",
                   os="DGX OS 6.2", image=img, ofed="MLNX_OFED_LINUX-24.04-0.6.6.0")
        sw = f"sw-{segment(nd)}"
        s.topology(nd, at(6, 0, 2), [dict(nic="mlx5_0", switch=sw, port=f"Ethernet{int(nd[-2:])}",
                                          segment=segment(nd))],
                   [dict(path="/lustre/delta", backend="lustre", server="10.3.0.2@o2ib:/delta")])

    s.job("55121", 0, p2[8:16], 8, at(6, 5), at(7, 30), "completed", image=img, name="asr-conformer", user="wu",
          tenant="speech", exit_code=0, ckpt_every=20 * MIN, ckpt_dir="/lustre/delta/ckpt/55121")

    def st55120(t):
        if t < at(8):
            return 1.8
        return 1.8 + 18.0 * min(1.0, (t - at(8)) / (20 * MIN))
    st20 = s.job("55120", 0, p1[0:8], 8, at(6, 10), at(8, 50), "failed", image=img, name="gpt-20b-pt", user="novak",
          tenant="foundation", exit_code=1, signal=6, progress_until=at(8, 30), step_time_fn=st55120,
          ckpt_every=30 * MIN, ckpt_dir="/lustre/delta/ckpt/55120", ckpt_stop=at(8, 29))
    s.ev(at(8, 30), "runtime.checkpoint", "sdk@dgx-p1-01", dict(phase="started", step=s.step_at(st20, at(8, 30)),
         path=f"/lustre/delta/ckpt/55120/step_{s.step_at(st20, at(8, 30)):08d}", bytes=None, duration_s=None, error=None),
         node="dgx-p1-01", job="55120", tenant="foundation")
    s.log(at(8, 49, 50), "55120", "dgx-p1-03", 17,
          "[rank17]:[E1201 08:49:50.402117339 ProcessGroupNCCL.cpp:616] [Rank 17] Watchdog caught collective "
          "operation timeout: WorkNCCL(SeqNum=90211, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1200000) "
          "ran for 1200071 milliseconds before timing out.", tenant="foundation")

    def st55122(t):
        if t < at(9, 42):
            return 1.9
        return 1.9 + 5.5 * min(1.0, (t - at(9, 42)) / (18 * MIN))
    s.job("55122", 0, p2[0:8], 8, at(7, 0), at(10, 5), "failed", image=img, name="moe-64e-pt", user="sato",
          tenant="foundation", exit_code=1, progress_until=at(10, 4), step_time_fn=st55122, ckpt_every=30 * MIN,
          ckpt_dir="/lustre/delta/ckpt/55122")
    s.log(at(10, 4, 30), "55122", "dgx-p2-03", 21,
          "dgx-p2-03:48812:49102 [5] NCCL WARN NET/IB : Got completion from peer 10.2.1.5<41022> with status=12 "
          "opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.2.1.3 remoteGids::ffff:10.2.1.5 hca mlx5_0",
          tenant="foundation")
    s.log(at(10, 4, 40), "55122", "dgx-p2-03", 21,
          "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:"
          "1970, remote process exited or there was a network error, NCCL version 2.21.5\nncclRemoteError: A call "
          "failed possibly due to a network error or a remote process exiting prematurely.", tenant="foundation")
    s.job("55123", 0, p2[8:16], 8, at(8, 0), at(10, 20), "completed", image=img, name="tts-diffusion", user="wu",
          tenant="speech", exit_code=0, ckpt_every=30 * MIN, ckpt_dir="/lustre/delta/ckpt/55123",
          ckpt_duration_s=90.0)

    def factor(t):
        if t < at(8) or t >= at(9, 10):
            return 1.0
        if t < at(8, 25):
            return 1.0 + 99.0 * ((t - at(8)) / (25 * MIN)) ** 2
        if t < at(8, 55):
            return 75.0 + 25.0 * ((t // MIN) % 2)
        return 1.0 + 74.0 * (at(9, 10) - t) / (15 * MIN)

    def sfn(nd, path, t, smp):
        if path == "/lustre/delta":
            f = factor(t)
            smp["write_lat_ms"] = round(smp["write_lat_ms"] * f, 2)
            smp["read_lat_ms"] = round(smp["read_lat_ms"] * (1 + (f - 1) * 0.8), 2)
            smp["write_mbps"] = round(smp["write_mbps"] / f, 1)
            smp["read_mbps"] = round(smp["read_mbps"] / max(1.0, f * 0.8), 1)
            smp["queue_depth"] = round(smp["queue_depth"] * min(40.0, f), 1)
        return True
    s.storage(nodes, [("/", "ext4", 40.0, 0.2, 0.3), ("/lustre/delta", "lustre", 72.0, 1.5, 2.5)],
              at(6), at(10, 30), MIN, fn=sfn)

    def congested(nd, t):
        return segment(nd) == "pod2-leaf1" and at(9, 40) <= t < at(10, 10)

    def rates(nd, t):
        if not congested(nd, t):
            return {}
        ramp = min(1.0, (t - at(9, 40)) / (5 * MIN))
        return dict(np_cnp_sent=60000.0 * ramp, rp_cnp_handled=58000.0 * ramp,
                    np_ecn_marked_roce_packets=85000.0 * ramp, out_of_sequence=300.0 * ramp,
                    local_ack_timeout_err=5.0 * ramp, packet_seq_err=40.0 * ramp, port_xmit_wait=2.5e6 * ramp)
    s.rdma(nodes, at(6), at(10, 30), MIN, rates=rates)

    def pfn(sw, port, nd, t, c, d):
        if congested(nd, t):
            c["out_discards"] += int(2000 * 60 * min(1.0, (t - at(9, 40)) / (5 * MIN)))
    s.ports([(f"sw-{segment(nd)}", f"Ethernet{int(nd[-2:])}", nd) for nd in nodes], at(6), at(10, 30), MIN, fn=pfn)
    s.gpus(nodes, 8, at(6), at(10, 30), 5 * MIN, 81559)
    s.sensors(nodes, at(6), at(10, 30), 15 * MIN)
    return s


# =========================================================================================
# s06 cinder: LSF, one GPU keeps failing jobs (point 7)
# =========================================================================================
def s06_cinder() -> Site:
    s = Site("s06_cinder", "lsf@cinder-mgr", 606)
    nodes = [f"cn-{i:03d}" for i in (1, 2, 3, 4, 15, 16, 17, 18, 19, 20)]
    for nd in nodes:
        s.versions(nd, at(6, 0, 1), driver="550.54.15", cuda="12.4", nccl="2.19.3", kernel="5.14.0-427.13.1.el9_4",
                   os="RHEL 9.4", ofed="MLNX_OFED_LINUX-24.01-0.3.3.1")
        s.topology(nd, at(6, 0, 2), [dict(nic="mlx5_0", switch="cinder-ib1", port=str(int(nd[-3:])),
                                          segment="cinder-ib1")],
                   [dict(path="/gpfs/cinder", backend="gpfs", server="cinder-nsd01")])
    dbe = {"n": 0}
    xid_times = []

    def xid94(jid, ts, tenant, rank):
        dbe["n"] += 1
        xid_times.append((ts, dbe["n"]))
        pid = 228811 + dbe["n"]
        line = f"NVRM: Xid (PCI:0000:4e:00): 94, pid={pid}, name=python3, Contained ECC error."
        s.ev(ts, "gpu.xid", "kernel@cn-017", dict(gpu=2, pci="0000:4e:00.0", xid=94, pid=pid, message=line), node="cn-017")
        s.log(ts + SEC, jid, "cn-017", None, line, stream="kernel", tenant=tenant, source="kernel@cn-017")
        s.log(ts + 20 * SEC, jid, "cn-017", rank, "RuntimeError: CUDA error: uncorrectable ECC error encountered\n"
              "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
              "might be incorrect.", tenant=tenant)

    s.job("120041", 0, ["cn-015", "cn-016", "cn-017"], 8, at(6, 10), at(7, 40), "failed", image=None,
          name="bio-fold-train", user="zhou", tenant="bio", exit_code=1, progress_until=at(7, 39),
          ckpt_every=30 * MIN, ckpt_dir="/gpfs/cinder/bio/fold")
    xid94("120041", at(7, 39), "bio", 18)
    s.job("120042", 0, ["cn-001", "cn-002"], 8, at(6, 15), at(9, 15), "completed", image=None, name="seg-unet",
          user="ali", tenant="med", exit_code=0, ckpt_every=30 * MIN, ckpt_dir="/gpfs/cinder/med/seg")
    s.job("120044", 0, ["cn-017", "cn-018"], 8, at(8, 0), at(9, 52), "failed", image=None, name="bio-fold-train",
          user="zhou", tenant="bio", exit_code=1, progress_until=at(9, 51), ckpt_every=30 * MIN,
          ckpt_dir="/gpfs/cinder/bio/fold")
    xid94("120044", at(9, 51), "bio", 2)
    s.job("120045", 0, ["cn-019", "cn-020"], 8, at(8, 10), at(10, 30), "failed", image=None, name="graph-gnn",
          user="ross", tenant="chem", exit_code=137, signal=9, progress_until=at(10, 29), ckpt_every=30 * MIN,
          ckpt_dir="/gpfs/cinder/chem/gnn")
    s.log(at(10, 29, 50), "120045", "cn-020", None,
          "Memory cgroup out of memory: Killed process 90211 (python3) total-vm:612345678kB, anon-rss:498765432kB, "
          "file-rss:102400kB, shmem-rss:0kB, UID:20417 pgtables:980000kB oom_score_adj:0", stream="kernel",
          tenant="chem", source="kernel@cn-020")
    s.job("120043", 0, ["cn-003", "cn-004"], 8, at(9, 0), at(12, 0), "completed", image=None, name="seg-unet",
          user="ali", tenant="med", exit_code=0, ckpt_every=30 * MIN, ckpt_dir="/gpfs/cinder/med/seg")
    s.job("120047", 0, ["cn-016", "cn-017"], 8, at(10, 40), at(12, 31), "failed", image=None, name="bio-fold-ft",
          user="zhou", tenant="bio", exit_code=1, progress_until=at(12, 30), ckpt_every=30 * MIN,
          ckpt_dir="/gpfs/cinder/bio/fold-ft")
    xid94("120047", at(12, 30), "bio", 10)

    def gfn(nd, g, t, smp):
        if nd == "cn-017" and g == 2:
            smp["ecc_dbe"] = sum(1 for ts, _ in xid_times if ts <= t)
            smp["ecc_sbe"] = 12 + 3 * smp["ecc_dbe"]
        return True
    s.gpus(nodes, 8, at(6), at(12, 45), 2 * MIN, 81559, fn=gfn)
    s.storage(nodes, [("/", "xfs", 29.0, 0.2, 0.3), ("/gpfs/cinder", "gpfs", 58.0, 0.9, 1.6)], at(6), at(12, 45),
              2 * MIN)
    s.sensors(nodes, at(6), at(12, 45), 10 * MIN)
    return s


# =========================================================================================
# s07 harbor: node0042 in the scheduler, node0042.cluster.local in the collectors (point 8)
# =========================================================================================
def s07_harbor() -> Site:
    s = Site("s07_harbor", "slurm@harbor-ctl", 707)
    short = [f"node{i:04d}" for i in range(41, 49)]
    fq = {n: f"{n}.cluster.local" for n in short}
    bmc = {n: f"{n}.cluster.local".upper() for n in short}
    img = "registry.harbor/ml/pt:2.5"
    for n in short:
        s.versions(fq[n], at(6, 0, 1), driver="550.90.07", cuda="12.4", nccl="2.21.5", kernel="5.15.0-119-generic",
                   os="Ubuntu 22.04.4 LTS", image=img)
        s.topology(fq[n], at(6, 0, 2), [dict(nic="mlx5_0", switch="harbor-leaf1", port=f"Ethernet{int(n[-2:])}",
                                             segment="harbor-leaf1")],
                   [dict(path="/weka", backend="weka", server="weka-harbor")])
    s.job("990041", 0, ["node0041", "node0042"], 8, at(6, 10), at(7, 31), "failed", image=img, name="sd3-finetune",
          user="mora", tenant="gen", exit_code=1, progress_until=at(7, 29, 50), ckpt_every=30 * MIN,
          ckpt_dir="/weka/gen/sd3", log_node=fq["node0041"])
    xid79 = "NVRM: Xid (PCI:0000:5d:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    s.ev(at(7, 30), "gpu.xid", f"kernel@{fq['node0042']}", dict(gpu=3, pci="0000:5d:00.0", xid=79, pid=None,
         message=xid79), node=fq["node0042"])
    s.log(at(7, 30, 1), "990041", fq["node0042"], None, xid79, stream="kernel", tenant="gen",
          source=f"kernel@{fq['node0042']}")
    s.log(at(7, 30, 30), "990041", fq["node0042"], 11, "RuntimeError: CUDA error: unspecified launch failure",
          tenant="gen", source=f"logs@{fq['node0042']}")

    s.job("990043", 0, ["node0043", "node0044"], 8, at(6, 20), at(8, 2), "node_fail", image=img, name="wm-video",
          user="mora", tenant="gen", reason="NodeFail", progress_until=at(7, 59, 50), ckpt_every=30 * MIN,
          ckpt_dir="/weka/gen/wm", log_node=fq["node0043"])
    s.ev(at(8), "hw.sel", f"bmc@{bmc['node0044']}", dict(entry_id="0x01a7", severity="critical", sensor_type="Memory",
         message_id=None, message="Memory #08 | Uncorrectable ECC | DIMM_B3 | Asserted"), node=bmc["node0044"])
    s.ev(at(8, 1, 30), "sched.node", s.sched_source, dict(state="down", reason="Not responding"), node="node0044")

    s.job("990046", 0, ["node0047", "node0048"], 8, at(6, 30), at(9, 0), "completed", image=img, name="clip-pt",
          user="lee", tenant="gen", exit_code=0, ckpt_every=30 * MIN, ckpt_dir="/weka/gen/clip", log_node=fq["node0047"])
    s.job("990047", 0, ["node0045", "node0046"], 8, at(7, 0), at(9, 30), "completed", image=img, name="llm-rm",
          user="lee", tenant="gen", exit_code=0, ckpt_every=30 * MIN, ckpt_dir="/weka/gen/rm", log_node=fq["node0045"])

    def gfn(nd, g, t, smp):
        if nd == "node0042" and g == 3 and t >= at(7, 30):
            return False
        if nd == "node0044" and t >= at(8):
            return False
        return True
    s.gpus(short, 8, at(6), at(9, 40), 2 * MIN, 81559, source=lambda n: f"nvml@{fq[n]}",
           node_name=lambda n: fq[n], fn=gfn)

    def sen(nd, sensor, t, smp):
        if nd == "node0044" and t >= at(8):
            return False
        if nd == "node0046" and sensor == "FAN3" and at(8) <= t < at(8, 30):
            smp["value"], smp["status"] = 2100.0, "warning"
        return True
    s.sensors(short, at(6), at(9, 40), 5 * MIN, source=lambda n: f"bmc@{bmc[n]}", node_name=lambda n: bmc[n], fn=sen)

    def sfn(nd, path, t, smp):
        return not (nd == "node0044" and t >= at(8))
    s.storage(short, [("/", "ext4", 35.0, 0.2, 0.3), ("/weka", "wekafs", 49.0, 0.5, 0.8)], at(6), at(9, 40),
              2 * MIN, source=lambda n: f"storage@{fq[n]}", node_name=lambda n: fq[n], fn=sfn)
    return s


DEFAULT_OUT = Path(__file__).resolve().parents[2] / "var" / "outside2"
SITES = [s01_lakeside, s02_fjord, s03_ridge, s04_mesa, s05_delta, s06_cinder, s07_harbor]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0]) if argv else DEFAULT_OUT
    out.mkdir(parents=True, exist_ok=True)
    for make in SITES:
        site = make()
        n = site.write(out / f"{site.name}.jsonl")
        print(f"{site.name}: {n} events -> {out / (site.name + '.jsonl')}")


if __name__ == "__main__":
    main()
