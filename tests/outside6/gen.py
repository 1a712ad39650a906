"""Outside-check round 6: 15 hand-written scenarios from the event contract alone.

``python -m tests.outside6.gen [DIR]`` writes ``<scenario>.jsonl`` per scenario into DIR (default
``var/outside6/``). Deterministic: byte-identical files on every run (a ``random.Random`` seeded by the
scenario's name, fixed epoch times, no wall clock, no hash ordering).

Written from ``shared/spec/events.md`` (contract v1) and README.md only, without reading the diagnosis
rules. The event builders (envelope, NVML/BMC/RDMA/switch/storage samplers, job records, log formats)
are round 5's ``Scn`` and helpers, imported, not copied; only the id prefix differs (``o6-``). 12 failure
stories (none repeats an earlier round's table) and 3 healthy runs with harmless noise that looks bad.
Each scenario's docstring tells its story and the expected answer.

Log formats imitate what the real tools print: the NVIDIA driver's ``NVRM: Xid (PCI:...): N`` line,
PyTorch's ``CUDA error: uncorrectable ECC error encountered``, ProcessGroupNCCL's watchdog and
``TORCH_DISTRIBUTED_DEBUG=DETAIL``'s collective-fingerprint mismatch, DataLoader's shared-memory bus
error, pyxis/enroot's container hook failure, NCCL ``NET/IB`` completion errors, the kernel's AER and
mlx5 health lines, Lustre ptlrpc slow-reply lines, s3fs/FUSE ``Transport endpoint is not connected``,
slurmstepd's ``CANCELLED ... DUE TO TIME LIMIT`` / ``DUE TO PREEMPTION``, iDRAC-style SEL message ids.
"""
from __future__ import annotations

import sys
from pathlib import Path

from tests.outside5.gen import (H, M, S, Scn as _Scn, ckpt_series, glog, leaf_topology, node_env, simple_job,
                                torchrun_fail, utc, watchdog)

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "var" / "outside6"
T_BASE = 1794816000000  # 2026-11-16T08:00:00Z (every scenario in the past: validate rejects ts > now + 24 h)


class Scn(_Scn):
    def add(self, ts, kind, source, data, node=None, job=None, tenant=None, order=None) -> str:
        self.n += 1
        eid = f"o6-{self.tag}-{self.n:06d}"
        ts = int(ts)
        e = {"v": 1, "id": eid, "ts": ts, "kind": kind, "source": source, "node": node, "job": job,
             "tenant": tenant, "data": data}
        self.rows.append((int(order) if order is not None else ts, self.n, e))
        return eid


def day(k: int) -> int:
    return T_BASE + k * 24 * H


def rank_nodes(nodes, gpn=8):
    return [(r, nodes[r // gpn]) for r in range(0, gpn * len(nodes), gpn)]


def sigterm_lines(s, job, ts, nodes, what):
    for i, n in enumerate(nodes):
        s.log(job, ts + i * 150, n, None, f"W{glog(ts)} 3312 torch/distributed/elastic/agent/server/api.py:704] "
              f"Received {what} death signal, shutting down workers")


# ------------------------------------------------------------------------------------------------
# scenarios
def q01_dbe_counter_only_no_kernel_feed():
    """4 x 8 H100 on Slurm, at a site that ships NVML samples but no kernel log collector (no gpu.xid, no
    kernel lines). At 63 min GPU 5 of gpu-r03 (rank 21) counts an uncorrectable ECC error: its cumulative
    ecc_dbe goes 0 -> 1, remapped_rows_pending becomes 1; rank 21 raises `CUDA error: uncorrectable ECC error
    encountered`; the other ranks' NCCL communicators abort seconds later (`ncclRemoteError`) and torchrun
    reports the failure. Noise: GPU 2 of gpu-r01 has had 14 correctable errors (SBE) since the start.
    Expected: gpu_hardware gpu:gpu-r03/5."""
    s = Scn("q01_dbe_counter_only_no_kernel_feed", day(0))
    t0, job, nodes = s.t0, "8830101", [f"gpu-r0{i}" for i in range(1, 5)]
    start, tx, end = t0 + 4 * M, t0 + 63 * M + 12 * S, t0 + 64 * M
    facing = leaf_topology(s, nodes, t0, "leaf-r1", "pod-r", 5, [("/lustre/r", "lustre", "mds-r1")])

    def gpu_f(node, g, t, d):
        if node == "gpu-r01" and g == 2:
            d["set_ecc_sbe"] = 14
        if node == "gpu-r03" and g == 5:
            d["remapped_rows_pending"] = 0
            if t >= tx - 20 * S:
                d["set_ecc_dbe"], d["remapped_rows_pending"] = 1, 1
    node_env(s, nodes, t0, t0 + 75 * M, [(nodes, start, end)], storage=[("/lustre/r", "lustre", 61)], facing=facing,
             gpu_f=gpu_f)
    simple_job(s, job, nodes, t0 + M, start, name="gpt-13b")
    s.progress(job, start + M, tx, M, 0, lambda t: 1.1, ranks=rank_nodes(nodes))
    ckpt_series(s, job, start, tx, 15 * M, lambda t: int((t - start) / 1100), "/lustre/r/gpt13b/ckpt/iter_{step:07d}")
    s.log(job, tx, "gpu-r03", 21, "[rank21]: Traceback (most recent call last):\n"
          "[rank21]:   File \"/workspace/megatron/training.py\", line 1130, in train_step\n"
          "[rank21]:     loss.backward()\n"
          "[rank21]: RuntimeError: CUDA error: uncorrectable ECC error encountered\n"
          "[rank21]: CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
          "below might be incorrect.")
    for r in (0, 8, 16, 24):
        ts = tx + 6 * S + r * 50
        s.log(job, ts, nodes[r // 8], r, f"[rank{r}]: torch.distributed.DistBackendError: NCCL error in: "
              f"../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, remote process exited or there was a network "
              f"error, NCCL version 2.21.5\nncclRemoteError: A call failed possibly due to a network error or a remote "
              f"process exiting prematurely.")
    s.log(job, end - 15 * S, "gpu-r01", None, torchrun_fail(tx, 5, 40117, 1, "gpu-r03", 21))
    s.job(job, 0, "failed", end, nodes, start=start, end=end, exit_code=1, reason="NonZeroExitCode", name="gpt-13b")
    return s


def q02_xid95_with_collateral_xid43():
    """2 x 8 A100 on Slurm. At 38 min GPU 6 of gpu-x02 reports XID 95 (uncontained ECC error: the driver must
    reset the GPU); every CUDA context on gpu-x02 is torn down, so the driver then logs XID 43 (`GPU stopped
    processing`) for the other seven GPUs of the node and for GPU 1 of gpu-x01 whose rank was in a P2P
    transfer with it. ecc_dbe on GPU 6 goes 0 -> 2. Eight XID 43 lines against one XID 95: the one hardware
    fault is the cause, the XID 43s are its fallout. Expected: gpu_hardware gpu:gpu-x02/6."""
    s = Scn("q02_xid95_with_collateral_xid43", day(1))
    t0, job, nodes = s.t0, "8830202", ["gpu-x01", "gpu-x02"]
    start, tx, end = t0 + 3 * M, t0 + 38 * M, t0 + 39 * M + 30 * S
    facing = leaf_topology(s, nodes, t0, "leaf-x1", "pod-x", 21, [("/gpfs/proj", "gpfs", "nsd-x1")])
    pci = {g: f"0000:{0x07 + 0x10 * g:02x}:00" for g in range(8)}

    def gpu_f(node, g, t, d):
        if node == "gpu-x02" and g == 6 and t >= tx:
            d["set_ecc_dbe"] = 2
        if node == "gpu-x02" and t >= tx:
            d["util_pct"], d["mem_used_mib"] = 0, 4
    node_env(s, nodes, t0, t0 + 50 * M, [(nodes, start, end)], storage=[("/gpfs/proj", "gpfs", 70)], facing=facing,
             gpu_f=gpu_f, total=40960)
    simple_job(s, job, nodes, t0 + M, start, name="vit-h-pretrain")
    s.progress(job, start + M, tx, M, 0, lambda t: 0.7, ranks=rank_nodes(nodes))
    ckpt_series(s, job, start, tx, 10 * M, lambda t: int((t - start) / 700), "/gpfs/proj/vith/ckpt/ep_{step}")
    s.xid("gpu-x02", tx, 6, pci[6], 95, 51260, "Uncontained: LTC TAG (0x2,0x0). RST: Yes, D-RST: No")
    for i, g in enumerate(g for g in range(8) if g != 6):
        s.xid("gpu-x02", tx + 2 * S + i * 300, g, pci[g], 43, 51254 + g, "Ch 00000008")
    s.xid("gpu-x01", tx + 5 * S, 1, pci[1], 43, 49811, "Ch 00000010")
    s.log(job, tx + 3 * S, "gpu-x02", 14, "[rank14]: RuntimeError: CUDA error: uncorrectable ECC error encountered")
    s.log(job, tx + 6 * S, "gpu-x01", 1, "[rank1]: RuntimeError: CUDA error: unspecified launch failure")
    s.log(job, end - 20 * S, "gpu-x01", None, torchrun_fail(tx + 3 * S, 6, 51260, 1, "gpu-x02", 14))
    s.job(job, 0, "failed", end, nodes, start=start, end=end, exit_code=1, reason="NonZeroExitCode", name="vit-h-pretrain")
    return s


def q03_container_runtime_upgrade_regression():
    """Rack r07 (gpu-w01..w04) and rack r08 (gpu-w05..w08), enroot + pyxis containers. Job 8830301 completes on
    w01-w02. At 50 min the container runtime is upgraded 3.4.1 -> 3.5.0 on rack r07 only (CHG-11873); its
    bundled NVIDIA hook cannot load NVML with this driver. Job 8830302 (w01-w04) fails 20 s after start at
    container setup (`nvidia-container-cli: initialization error: nvml error: driver/library version
    mismatch`), never reaching a step; requeued as attempt 1 on the same rack it fails the same way. Job
    8830303 on rack r08 (still 3.4.1) starts meanwhile and completes. No GPU, BMC, network or storage fault.
    Expected: 8830302 attempts 0 and 1 change_regression version:container_runtime=3.5.0; 8830301 and 8830303
    no incident."""
    s = Scn("q03_container_runtime_upgrade_regression", day(2))
    t0 = s.t0
    r07, r08 = [f"gpu-w0{i}" for i in range(1, 5)], [f"gpu-w0{i}" for i in range(5, 9)]
    nodes = r07 + r08
    tchg = t0 + 50 * M
    facing = leaf_topology(s, nodes, t0, "leaf-w1", "pod-w", 1, [("/lustre/w", "lustre", "mds-w")])
    a_s, a_e = t0 + 5 * M, t0 + 40 * M
    b0s, b0e = t0 + 62 * M, t0 + 62 * M + 21 * S
    b1s, b1e = t0 + 66 * M, t0 + 66 * M + 19 * S
    c_s, c_e = t0 + 64 * M, t0 + 110 * M
    busy = [(r07[:2], a_s, a_e), (r08, c_s, c_e)]
    node_env(s, nodes, t0, t0 + 120 * M, busy, storage=[("/lustre/w", "lustre", 44)], facing=facing,
             ver_base={"container_runtime": "3.4.1", "image": "nvcr.io/nvidia/pytorch:24.05-py3"},
             ver_over=lambda n, t: {"container_runtime": "3.5.0"} if n in r07 and t >= tchg else None)
    for n in r07:
        s.change(n, tchg + r07.index(n) * 20 * S, "container_runtime", "3.4.1", "3.5.0", "ansible", "CHG-11873")
    img = "nvcr.io/nvidia/pytorch:24.05-py3"
    ja, jb, jc = "8830301", "8830302", "8830303"
    simple_job(s, ja, r07[:2], a_s - M, a_s, image=img, name="bert-ft")
    s.progress(ja, a_s + M, a_e - M, M, 0, lambda t: 0.4, ranks=rank_nodes(r07[:2]))
    s.job(ja, 0, "completed", a_e, r07[:2], start=a_s, end=a_e, exit_code=0, image=img, name="bert-ft")
    simple_job(s, jb, r07, b0s - 2 * M, b0s, image=img, name="llama3-8b-dpo", user="carol")

    def hook_fail(ts, n):
        s.log(jb, ts, n, None, "[ERROR] /etc/enroot/hooks.d/98-nvidia.sh exited with return code 1", stream="container")
        s.log(jb, ts + 200, n, None, "nvidia-container-cli: initialization error: nvml error: driver/library version "
              "mismatch", stream="container")
        s.log(jb, ts + 400, n, None, f"slurmstepd: error: pyxis: container start failed with error code: 1\n"
              f"slurmstepd: error: pyxis: printing enroot log file:\nslurmstepd: error: pyxis:     "
              f"[ERROR] /etc/enroot/hooks.d/98-nvidia.sh exited with return code 1\nslurmstepd: error: spank: required "
              f"plugin spank_pyxis.so: task_init() failed with rc=-1", stream="stderr")
    for i, n in enumerate(r07):
        hook_fail(b0s + 15 * S + i * 250, n)
    s.job(jb, 0, "failed", b0e, r07, start=b0s, end=b0e, exit_code=1, reason="NonZeroExitCode", image=img,
          name="llama3-8b-dpo", user="carol")
    s.job(jb, 1, "requeued", b0e + 10 * S, r07, image=img, name="llama3-8b-dpo", user="carol", reason="Requeue")
    s.job(jb, 1, "running", b1s, r07, start=b1s, image=img, name="llama3-8b-dpo", user="carol")
    for i, n in enumerate(r07):
        hook_fail(b1s + 14 * S + i * 250, n)
    s.job(jb, 1, "failed", b1e, r07, start=b1s, end=b1e, exit_code=1, reason="NonZeroExitCode", image=img,
          name="llama3-8b-dpo", user="carol")
    simple_job(s, jc, r08, c_s - M, c_s, image=img, name="sd-xl-ft", user="dave")
    s.progress(jc, c_s + M, c_e - M, M, 0, lambda t: 0.9, ranks=rank_nodes(r08))
    s.job(jc, 0, "completed", c_e, r08, start=c_s, end=c_e, exit_code=0, image=img, name="sd-xl-ft", user="dave")
    return s


def q04_nccl_older_on_one_reimaged_node():
    """4 x 8 GPUs. gpu-n03 was re-imaged last night from an old golden image: its inventory reports nccl 2.18.3
    (the other three: 2.21.5); everything else matches. The job starts, initialises NCCL, and the first
    all-reduce fails on gpu-n03's ranks with `ncclInternalError ... NCCL version 2.18.3`; the ranks of the
    other nodes then time out in their first collective. No hardware, network or storage sign.
    Expected: driver_software node:gpu-n03 (the odd node of a version mismatch inside one job)."""
    s = Scn("q04_nccl_older_on_one_reimaged_node", day(3))
    t0, job, nodes = s.t0, "8830404", [f"gpu-n0{i}" for i in range(1, 5)]
    start, tf, end = t0 + 6 * M, t0 + 8 * M, t0 + 19 * M
    facing = leaf_topology(s, nodes, t0, "leaf-n1", "pod-n", 13, [("/lustre/n", "lustre", "mds-n")])
    node_env(s, nodes, t0, t0 + 30 * M, [(nodes, start, tf)], storage=[("/lustre/n", "lustre", 52)], facing=facing,
             ver_over=lambda n, t: {"nccl": "2.18.3"} if n == "gpu-n03" else None)
    simple_job(s, job, nodes, t0 + M, start, name="mixtral-ft")
    for g in range(8):
        r = 16 + g
        s.log(job, tf + g * 80, "gpu-n03", r, f"gpu-n03:7781{g}:7790{g} [{g}] NCCL INFO NCCL version 2.18.3+cuda12.2")
    for r in (0, 8, 24):
        s.log(job, tf + 300, nodes[r // 8], r, f"{nodes[r // 8]}:6611{r % 10}:6620{r % 10} [0] NCCL INFO NCCL version "
              f"2.21.5+cuda12.4")
    for g in range(8):
        r = 16 + g
        s.log(job, tf + 40 * S + g * 90, "gpu-n03", r, f"[rank{r}]: torch.distributed.DistBackendError: NCCL error in: "
              f"../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1691, internal error - please report this issue to "
              f"the NCCL developers, NCCL version 2.18.3\nncclInternalError: Internal check failed.\nLast error:\n"
              f"Message truncated : received 1024 bytes instead of 512")
    fire = tf + 10 * M + 5 * S
    for r in (0, 1, 8, 9, 24, 25):
        s.log(job, fire + r * 40, nodes[r // 8], r, watchdog(r, fire, 1, 600000, op="BROADCAST"))
    s.log(job, end - 20 * S, "gpu-n01", None, torchrun_fail(tf + 40 * S, 0, 77810, 1, "gpu-n03", 16))
    s.job(job, 0, "failed", end, nodes, start=start, end=end, exit_code=1, reason="NonZeroExitCode", name="mixtral-ft")
    return s


def q05_switch_port_downshift_then_down():
    """4 x 8 GPUs on leaf-f2. At 30 min the switch port facing gpu-f03 (Ethernet14) renegotiates from 400G to
    200G after one lane fails (speed_mbps 400000 -> 200000; in_errors start to grow, a few hundred a minute,
    out_errors too); the job's step time goes 0.8 -> 1.3 s (the ring runs at the slow link's pace). At 71 min
    the port goes down (oper_status down, linkDown trap); gpu-f03's HCA counts link_downed +1; NCCL on the
    other nodes reports status=12 (retry exceeded) towards gpu-f03; FAILED. Noise: Ethernet11 (facing
    gpu-f00, not in the job) took 6 in_errors in the hour. Expected: network_link port:leaf-f2/Ethernet14
    (alt port:mlx5_0/1, the HCA end of the same link)."""
    s = Scn("q05_switch_port_downshift_then_down", day(4))
    t0, job = s.t0, "8830505"
    nodes, idle = [f"gpu-f0{i}" for i in range(1, 5)], "gpu-f00"
    start, td, tdown, end = t0 + 4 * M, t0 + 30 * M, t0 + 71 * M, t0 + 72 * M + 10 * S
    facing = leaf_topology(s, [idle] + nodes, t0, "leaf-f2", "pod-f", 11, [("/lustre/f", "lustre", "mds-f")])

    def port_f(node, sw, port, t, d, inc, st):
        if node == "gpu-f03" and t >= td:
            d["speed_mbps"] = 200000
            inc["in_errors"] += s.rng.randint(150, 600)
            inc["out_errors"] += s.rng.randint(10, 90)
            if t >= tdown:
                d["oper_status"], inc["in_octets"], inc["out_octets"] = "down", 0, 0
        if node == idle and t in (t0 + 20 * M, t0 + 44 * M):
            inc["in_errors"] += 3

    def rdma_f(node, dev, t, inc, st):
        if node == "gpu-f03" and dev == "mlx5_0" and t >= tdown:
            inc["link_downed"] += 1 if st["link_downed"] == 0 else 0
            inc["port_xmit_data"] = inc["port_rcv_data"] = 0
    node_env(s, [idle] + nodes, t0, t0 + 85 * M, [(nodes, start, end)], storage=[("/lustre/f", "lustre", 57)],
             facing=facing, port_f=port_f, rdma_f=rdma_f)
    s.link(tdown + 2 * S, "gpu-f03", "leaf-f2", "Ethernet14", "down", "snmp@leaf-f2")
    s.log(job, tdown + 3 * S, "gpu-f03", None, "mlx5_core 0000:1a:00.0 ibp26s0: Link down", stream="kernel")
    simple_job(s, job, nodes, t0 + M, start, name="qwen-32b-sft")
    s.progress(job, start + M, tdown, M, 0, lambda t: 0.8 if t < td else 1.3, ranks=rank_nodes(nodes))
    ckpt_series(s, job, start, tdown, 20 * M, lambda t: int((t - start) / 1000), "/lustre/f/qwen32/ckpt/{step}")
    for r, n in ((2, "gpu-f01"), (11, "gpu-f02"), (27, "gpu-f04")):
        s.log(job, tdown + 25 * S + r * 30, n, r, f"{n}:90121:90233 [{r % 8}] NCCL WARN NET/IB : Got completion from "
              f"peer 10.6.1.13<38211> with status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.6.1.1{r % 4} "
              f"remoteGid ::ffff:10.6.1.13 hca mlx5_0")
    s.log(job, end - 10 * S, "gpu-f01", None, torchrun_fail(tdown + 25 * S, 2, 90121, 1, "gpu-f01", 2))
    s.job(job, 0, "failed", end, nodes, start=start, end=end, exit_code=1, reason="NonZeroExitCode", name="qwen-32b-sft")
    return s


def q06_rail3_congestion_only():
    """Rail-optimised fabric: 4 HCAs per node, mlx5_k on rail-k's leaf (segments rail-0..rail-3). 4 x 8 GPUs.
    From 25 min a mis-set QoS profile on the rail-3 leaf (no change record) makes rail 3 alone congest:
    mlx5_3 on every node counts CNP/ECN by ~1e5/min, local_ack_timeout_err and out_of_sequence grow; the
    rail3 leaf's node ports count out_discards in the thousands/min; no symbol or link error, no link change;
    rails 0-2 stay quiet. Step time 0.9 -> 2.1 s; at 61 min rank 15's QP on mlx5_3 exceeds its retries
    (status=12) and the watchdogs fire; FAILED. Expected: network_congestion segment:rail-3."""
    s = Scn("q06_rail3_congestion_only", day(5))
    t0, job, nodes = s.t0, "8830606", [f"gpu-k0{i}" for i in range(1, 5)]
    start, tc, tf, end = t0 + 3 * M, t0 + 25 * M, t0 + 61 * M, t0 + 62 * M
    facings = [{} for _ in range(4)]
    for i, n in enumerate(nodes):
        links = [(f"mlx5_{k}", f"rail{k}-leaf1", f"Ethernet{1 + i}", f"rail-{k}") for k in range(4)]
        s.topology(n, t0, links, [("/weka/k", "wekafs", "weka-k")])
        for k in range(4):
            facings[k][n] = (f"rail{k}-leaf1", f"Ethernet{1 + i}")

    def rdma_f(node, dev, t, inc, st):
        if dev == "mlx5_3" and tc <= t < end:
            r = s.rng
            inc["np_cnp_sent"] += r.randint(70000, 140000)
            inc["rp_cnp_handled"] += r.randint(70000, 140000)
            inc["np_ecn_marked_roce_packets"] += r.randint(90000, 180000)
            inc["local_ack_timeout_err"] += r.randint(15, 60)
            inc["out_of_sequence"] += r.randint(300, 1200)

    def port_f3(node, sw, port, t, d, inc, st):
        if tc <= t < end:
            inc["out_discards"] += s.rng.randint(2000, 9000)
    node_env(s, nodes, t0, t0 + 75 * M, [(nodes, start, end)], storage=[("/weka/k", "wekafs", 38)], rdma_f=rdma_f)
    for k in range(4):
        s.ports(facings[k], t0, t0 + 75 * M, M, [(nodes, start, end)], f=port_f3 if k == 3 else None)
    simple_job(s, job, nodes, t0 + M, start, name="deepseek-16b")
    s.progress(job, start + M, tf - 4 * M, M, 0, lambda t: 0.9 if t < tc else 2.1, ranks=rank_nodes(nodes))
    ckpt_series(s, job, start, tf - 4 * M, 15 * M, lambda t: int((t - start) / 1500), "/weka/k/ds16/ckpt/{step}")
    s.log(job, tf, "gpu-k02", 15, "gpu-k02:51822:51990 [7] NCCL WARN NET/IB : Got completion from peer 10.9.3.13<51121> "
          "with status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.9.3.12 remoteGid ::ffff:10.9.3.13 "
          "hca mlx5_3")
    for r in (0, 8, 16, 24):
        s.log(job, tf + 3 * S + r * 60, nodes[r // 8], r, watchdog(r, tf + 3 * S, 88410, 300000))
    s.job(job, 0, "failed", end, nodes, start=start, end=end, exit_code=1, reason="NonZeroExitCode", name="deepseek-16b")
    return s


def q07_nic_slot_pcie_fatal():
    """2 x 8 GPUs, two HCAs per node (mlx5_0, mlx5_1 on leaf-p1). At 44 min the PCIe slot of gpu-p02's mlx5_1
    raises an uncorrectable fatal AER error: the BMC logs a critical `PCI1320` bus fatal error (Critical
    Interrupt), the kernel prints AER / mlx5 health lines, mlx5_1's counters stop (the device is gone);
    the switch port facing it stays up (the switch does not see the PCIe side). Ranks using mlx5_1 on
    gpu-p02 hit `NET/IB : ... ibv_poll_cq error`; FAILED. Expected: node_hardware node:gpu-p02
    (alt network_link port:mlx5_1/1: the contract's "NIC port that failed")."""
    s = Scn("q07_nic_slot_pcie_fatal", day(6))
    t0, job, nodes = s.t0, "8830707", ["gpu-p01", "gpu-p02"]
    start, tx, end = t0 + 5 * M, t0 + 44 * M, t0 + 45 * M + 30 * S
    for i, n in enumerate(nodes):
        s.topology(n, t0, [("mlx5_0", "leaf-p1", f"Ethernet{1 + 2 * i}", "pod-p"),
                           ("mlx5_1", "leaf-p1", f"Ethernet{2 + 2 * i}", "pod-p")], [("/lustre/p", "lustre", "mds-p")])
    facing = {n: ("leaf-p1", f"Ethernet{1 + 2 * i}") for i, n in enumerate(nodes)}
    facing2 = {n: ("leaf-p1", f"Ethernet{2 + 2 * i}") for i, n in enumerate(nodes)}

    def rdma_f(node, dev, t, inc, st):
        if node == "gpu-p02" and dev == "mlx5_1" and t >= tx:
            return False
    node_env(s, nodes, t0, t0 + 60 * M, [(nodes, start, end)], storage=[("/lustre/p", "lustre", 49)], facing=facing,
             rdma_f=rdma_f, rdma=False)
    s.rdma(nodes, t0, t0 + 60 * M, M, [(nodes, start, end)], devs=("mlx5_0", "mlx5_1"), f=rdma_f)
    s.ports(facing2, t0, t0 + 60 * M, M, [(nodes, start, end)])
    s.sel("gpu-p02", tx, "0x00a1", "critical", "Critical Interrupt", "PCI1320",
          "A bus fatal error was detected on a component at bus 59 device 0 function 0.")
    s.sel("gpu-p02", tx + 1 * S, "0x00a2", "critical", "Critical Interrupt", "PCI1302",
          "A bus fatal error was detected on a component at slot 4.")
    s.log(job, tx + 1 * S, "gpu-p02", None, "pcieport 0000:3a:02.0: AER: Uncorrected (Fatal) error received: 0000:3b:00.0\n"
          "mlx5_core 0000:3b:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, "
          "(Receiver ID)\nmlx5_core 0000:3b:00.0: mlx5_pci_err_detected Device state = 1 health sensors: 1 pci_status: 1. "
          "Enter, pci channel state = 3", stream="kernel")
    s.log(job, tx + 9 * S, "gpu-p02", None, "mlx5_core 0000:3b:00.0: mlx5_health_try_recover:43:(pid 1290): health "
          "recovery flow aborted, PCI reads still not working", stream="kernel")
    simple_job(s, job, nodes, t0 + M, start, name="yi-34b")
    s.progress(job, start + M, tx, M, 0, lambda t: 1.4, ranks=rank_nodes(nodes))
    ckpt_series(s, job, start, tx, 15 * M, lambda t: int((t - start) / 1400), "/lustre/p/yi34/ckpt/{step}")
    for r in (12, 13, 14, 15):
        s.log(job, tx + 12 * S + r * 40, "gpu-p02", r, f"gpu-p02:40219:40311 [{r % 8}] NCCL WARN NET/IB : "
              f"mlx5_1:1 ibv_poll_cq error 12 (Cannot allocate memory)\ngpu-p02:40219:40311 [{r % 8}] NCCL WARN "
              f"transport/net.cc:1311 -> 2")
    s.log(job, end - 20 * S, "gpu-p01", None, torchrun_fail(tx + 12 * S, 4, 40219, 1, "gpu-p02", 12))
    s.job(job, 0, "failed", end, nodes, start=start, end=end, exit_code=1, reason="NonZeroExitCode", name="yi-34b")
    return s


def q08_vrm_power_off_after_harmless_driver_change():
    """4 x 8 GPUs. At 0 min the driver is upgraded 550.90.07 -> 550.127.08 on all four nodes (CHG-12010); job
    8830801 then runs 100 min on them and completes. Job 8830802 starts at 110 min; at 171 min gpu-v04's CPU1
    VCCIN regulator goes out of range: the BMC reads 1.38 V (critical), logs `VLT0204` and `SYS1003 System
    power off` (critical); the node goes dark (no more GPU, RDMA, storage samples; the BMC keeps reporting);
    Slurm marks it down (`Not responding`) and the job ends NODE_FAIL. The driver change is real but a job
    completed after it. Expected: 8830802 node_hardware node:gpu-v04; 8830801 no incident."""
    s = Scn("q08_vrm_power_off_after_harmless_driver_change", day(7))
    t0, nodes = s.t0, [f"gpu-v0{i}" for i in range(1, 5)]
    ja, jb = "8830801", "8830802"
    a_s, a_e = t0 + 8 * M, t0 + 108 * M
    b_s, tx, b_e = t0 + 112 * M, t0 + 171 * M, t0 + 176 * M
    facing = leaf_topology(s, nodes, t0, "leaf-v1", "pod-v", 3, [("/lustre/v", "lustre", "mds-v")])
    for i, n in enumerate(nodes):
        s.change(n, t0 + 30 * S + i * 15 * S, "driver", "550.90.07", "550.127.08", "ansible", "CHG-12010")
    dark = lambda n, t: n == "gpu-v04" and t >= tx  # noqa: E731

    def gpu_f(n, g, t, d):
        return False if dark(n, t) else None

    def rdma_f(n, dev, t, inc, st):
        return False if dark(n, t) else None

    def st_f(n, path, t, d):
        return False if dark(n, t) else None

    def bmc_f(n, t, d):
        if n == "gpu-v04" and t >= tx - 4 * M:
            if d["sensor"] == "CPU1 Temp" and t >= tx:
                d["value"] = 24.0
            if d["sensor"].startswith("PSU") and t >= tx:
                d["value"] = 12.0
    node_env(s, nodes, t0 + M, t0 + 190 * M, [(nodes, a_s, a_e), (nodes, b_s, b_e)], facing=facing,
             storage=[("/lustre/v", "lustre", 66)], gpu_f=gpu_f, rdma_f=rdma_f, storage_f=st_f, bmc_f=bmc_f,
             ver_base={"driver": "550.127.08"}, versions=False)
    s.versions([n for n in nodes if n != "gpu-v04"], t0 + M, every=H, t_to=t0 + 190 * M, base={"driver": "550.127.08"})
    s.versions(["gpu-v04"], t0 + M, every=H, t_to=tx, base={"driver": "550.127.08"})
    for k, t in enumerate(range(tx - 3 * M, tx + 10 * M, M)):
        v = 1.79 if t < tx - M else (1.38 if t < tx + 30 * S else 0.0)
        s.add(s.nts("gpu-v04", t), "hw.sensor", "ipmi@gpu-v04-bmc", dict(sensor="CPU1 VCCIN", type="voltage", value=v,
              unit="V", status="ok" if t < tx - M else "critical"), node="gpu-v04")
    s.sel("gpu-v04", tx - 50 * S, "0x01f3", "critical", "Voltage", "VLT0204",
          "The system board CPU1 VCCIN voltage is outside of range.")
    s.sel("gpu-v04", tx, "0x01f4", "critical", "System Event", "SYS1003", "System CPU Resetting.")
    s.sel("gpu-v04", tx + 2 * S, "0x01f5", "critical", "Power Unit", "PWR2264",
          "The system is powered off due to a power fault on the system board.")
    simple_job(s, ja, nodes, t0 + 7 * M, a_s, name="t5-xxl")
    s.progress(ja, a_s + M, a_e - M, M, 0, lambda t: 1.0, ranks=rank_nodes(nodes))
    ckpt_series(s, ja, a_s, a_e, 30 * M, lambda t: int((t - a_s) / 1000), "/lustre/v/t5/a/{step}")
    s.job(ja, 0, "completed", a_e, nodes, start=a_s, end=a_e, exit_code=0, name="t5-xxl")
    simple_job(s, jb, nodes, t0 + 109 * M, b_s, name="t5-xxl-stage2")
    s.progress(jb, b_s + M, tx, M, 0, lambda t: 1.0, ranks=rank_nodes(nodes))
    ckpt_series(s, jb, b_s, tx, 30 * M, lambda t: int((t - b_s) / 1000), "/lustre/v/t5/b/{step}")
    s.sched_node("gpu-v04", tx + 3 * M + 20 * S, "down", "Not responding")
    for r in (0, 8, 16):
        s.log(jb, tx + 30 * S + r * 50, nodes[r // 8], r, f"{nodes[r // 8]}:3021:3190 [0] NCCL WARN NET/IB : Got "
              f"completion from peer 10.7.0.24<56110> with status=12 opcode=0 len=0 vendor err 129 (Recv) hca mlx5_0")
    s.log(jb, b_e - 30 * S, "gpu-v01", None, f"srun: error: Node failure on gpu-v04\nslurmstepd: error: *** JOB {jb} "
          f"ON gpu-v01 CANCELLED AT {utc(b_e - 30 * S)} DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***")
    s.job(jb, 0, "node_fail", b_e, nodes, start=b_s, end=b_e, exit_code=None, reason="NodeFail", name="t5-xxl-stage2")
    return s


def q09_preempted_then_s3fuse_gone():
    """Attempt 0 of 8830909 on gpu-s01..s02 is preempted at 40 min by a higher-priority QOS (slurmstepd
    `CANCELLED ... DUE TO PREEMPTION`, SIGTERM, NCCL abort noise); it is requeued. Attempt 1 runs on
    gpu-s05..s06 from 46 min and streams its shards from an S3 bucket mounted by s3fs at /mnt/s3data.
    At 83 min the s3fs daemon on gpu-s06 segfaults: the mount reports `missing` (`Transport endpoint is
    not connected`), rank 11's DataLoader raises `[Errno 107] Transport endpoint is not connected`; FAILED.
    Expected: attempt 0 scheduler job:8830909; attempt 1 storage_unavailable path:/mnt/s3data."""
    s = Scn("q09_preempted_then_s3fuse_gone", day(8))
    t0, job = s.t0, "8830909"
    n0, n1 = ["gpu-s01", "gpu-s02"], ["gpu-s05", "gpu-s06"]
    nodes = n0 + n1
    a_s, a_e = t0 + 4 * M, t0 + 40 * M + 30 * S
    b_s, tx, b_e = t0 + 46 * M, t0 + 83 * M, t0 + 84 * M
    mnts = [("/mnt/s3data", "fuse.s3fs", 0), ("/home", "nfs4", 71)]
    facing = leaf_topology(s, nodes, t0, "leaf-s1", "pod-s", 1,
                           [("/mnt/s3data", "s3", "s3.us-east.example.internal"), ("/home", "nfs", "home-nfs02")])

    def st_f(n, path, t, d):
        if n == "gpu-s06" and path == "/mnt/s3data" and t >= tx:
            return False
    node_env(s, nodes, t0, t0 + 95 * M, [(n0, a_s, a_e), (n1, b_s, b_e)], storage=mnts, facing=facing, storage_f=st_f)
    for n in nodes:
        s.mount(n, t0 + 20 * S, "/mnt/s3data", "ok")
    simple_job(s, job, n0, t0 + M, a_s, name="laion-clip")
    s.progress(job, a_s + M, t0 + 40 * M, M, 0, lambda t: 0.5, ranks=rank_nodes(n0))
    ckpt_series(s, job, a_s, t0 + 40 * M, 12 * M, lambda t: int((t - a_s) / 500), "/home/erin/ckpt/clip/{step}")
    tp = t0 + 40 * M
    for n in n0:
        s.log(job, tp, n, None, f"slurmstepd: error: *** STEP {job}.0 ON {n} CANCELLED AT {utc(tp)} DUE TO PREEMPTION ***")
    sigterm_lines(s, job, tp + 2 * S, n0, "SIGTERM")
    s.log(job, tp + 6 * S, "gpu-s02", 9, "[rank9]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/"
          "distributed/c10d/ProcessGroupNCCL.cpp:1970, remote process exited or there was a network error, NCCL version "
          "2.21.5")
    s.job(job, 0, "preempted", a_e, n0, start=a_s, end=a_e, signal=15, reason="Preempted by job 8830950 (QOS=urgent)",
          name="laion-clip")
    s.job(job, 1, "requeued", a_e + 5 * S, n1, name="laion-clip", reason="Requeue")
    s.job(job, 1, "running", b_s, n1, start=b_s, name="laion-clip")
    s.progress(job, b_s + M, tx, M, 0, lambda t: 0.5, ranks=rank_nodes(n1))
    ckpt_series(s, job, b_s, tx, 12 * M, lambda t: int((t - b_s) / 500) + 4300, "/home/erin/ckpt/clip/{step}")
    s.log(job, tx - 3 * S, "gpu-s06", None, "s3fs[21877]: segfault at 0 ip 00007f3a1c2e4b10 sp 00007f39e6ffc6a0 error 4 "
          "in libcurl.so.4.7.0[7f3a1c2c0000+6b000]", stream="kernel")
    s.mount("gpu-s06", tx, "/mnt/s3data", "missing", "Transport endpoint is not connected")
    s.log(job, tx + 4 * S, "gpu-s06", 11, "[rank11]: Traceback (most recent call last):\n"
          "[rank11]:   File \"/opt/conda/lib/python3.11/site-packages/webdataset/tariterators.py\", line 78, in url_opener\n"
          "[rank11]: OSError: [Errno 107] Transport endpoint is not connected: '/mnt/s3data/laion/shard-004213.tar'")
    s.log(job, b_e - 20 * S, "gpu-s05", None, torchrun_fail(tx + 4 * S, 3, 66102, 1, "gpu-s06", 11))
    s.job(job, 1, "failed", b_e, n1, start=b_s, end=b_e, exit_code=1, reason="NonZeroExitCode", name="laion-clip")
    return s


def q10_dev_shm_full_bus_error():
    """2 x 8 GPUs in containers started with a 64 GiB /dev/shm. Over the run the DataLoader workers' shared
    memory on gpu-m02 grows (a prefetch_factor raised by the user): /dev/shm used_pct climbs 30 % -> 100 % by
    52 min (the other node stays near 60 %); a worker takes SIGBUS (`Unexpected bus error encountered in
    worker. This might be caused by insufficient shared memory (shm)`), rank 10 raises and the job FAILS.
    No OOM kill, no GPU fault. Expected: storage_full path:/dev/shm (alt application job:8831010: the
    user's loader settings filled it)."""
    s = Scn("q10_dev_shm_full_bus_error", day(9))
    t0, job, nodes = s.t0, "8831010", ["gpu-m01", "gpu-m02"]
    start, tx, end = t0 + 5 * M, t0 + 52 * M, t0 + 53 * M
    facing = leaf_topology(s, nodes, t0, "leaf-m1", "pod-m", 7, [("/lustre/m", "lustre", "mds-m")])

    def st_f(n, path, t, d):
        if path == "/dev/shm":
            d["read_lat_ms"], d["write_lat_ms"], d["queue_depth"] = 0.01, 0.01, 0.0
            if t < start:
                d["used_pct"] = 1.0
            elif n == "gpu-m02":
                d["used_pct"] = float(min(100, 30 + int(70 * (t - start) / (tx - start))))
            else:
                d["used_pct"] = 58.0 + (t // M) % 4
    node_env(s, nodes, t0, t0 + 65 * M, [(nodes, start, end)], storage=[("/dev/shm", "tmpfs", 30), ("/lustre/m", "lustre", 55)],
             facing=facing, storage_f=st_f)
    simple_job(s, job, nodes, t0 + M, start, name="video-diffusion", image="registry.local/vd/train:2.4")
    s.progress(job, start + M, tx, M, 0, lambda t: 2.0, ranks=rank_nodes(nodes))
    ckpt_series(s, job, start, tx, 20 * M, lambda t: int((t - start) / 2000), "/lustre/m/vd/ckpt/{step}")
    s.log(job, tx, "gpu-m02", 10, "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient "
          "shared memory (shm).")
    s.log(job, tx + 2 * S, "gpu-m02", 10, "[rank10]: Traceback (most recent call last):\n[rank10]:   File "
          "\"/opt/conda/lib/python3.11/site-packages/torch/utils/data/dataloader.py\", line 1133, in _try_get_data\n"
          "[rank10]: RuntimeError: DataLoader worker (pid 81723) is killed by signal: Bus error. It is possible that "
          "dataloader's workers are out of shared memory. Please try to raise your shared memory limit.")
    s.log(job, end - 20 * S, "gpu-m01", None, torchrun_fail(tx + 2 * S, 2, 81700, 1, "gpu-m02", 10))
    s.job(job, 0, "failed", end, nodes, start=start, end=end, exit_code=1, reason="NonZeroExitCode",
          name="video-diffusion", image="registry.local/vd/train:2.4")
    return s


def q11_lustre_slow_stall_until_timelimit():
    """4 x 8 GPUs, 150-min limit, NCCL timeout raised to 2 h by the user. At 100 min an OSS of /lustre/data
    degrades: every node's read latency on /lustre/data goes 1-3 ms -> 1.5-6 s and read throughput to ~1 MB/s
    (mount stays ok, /lustre/ckpt stays fast); the kernel logs ptlrpc `Request sent has timed out for slow
    reply` lines; the DataLoaders block and progress stops at 102 min. Nothing else happens until the time
    limit at 150 min (TIMEOUT). The ending is the scheduler's, the stall is the storage's.
    Expected: storage_slow path:/lustre/data."""
    s = Scn("q11_lustre_slow_stall_until_timelimit", day(10))
    t0, job, nodes = s.t0, "8831111", [f"gpu-t0{i}" for i in range(1, 5)]
    start, ts_, tstop, end = t0 + 2 * M, t0 + 100 * M, t0 + 102 * M, t0 + 152 * M
    facing = leaf_topology(s, nodes, t0, "leaf-t1", "pod-t", 17,
                           [("/lustre/data", "lustre", "oss-t03"), ("/lustre/ckpt", "lustre", "oss-t07")])

    def st_f(n, path, t, d):
        if path == "/lustre/data" and t >= ts_:
            d["read_lat_ms"] = round(s.rng.uniform(1500, 6000), 1)
            d["read_mbps"], d["read_iops"] = round(s.rng.uniform(0.5, 1.5), 2), float(s.rng.randint(1, 8))
            d["queue_depth"] = float(s.rng.randint(40, 128))
    node_env(s, nodes, t0, t0 + 165 * M, [(nodes, start, tstop)], storage=[("/lustre/data", "lustre", 63),
             ("/lustre/ckpt", "lustre", 41)], facing=facing, storage_f=st_f)
    simple_job(s, job, nodes, t0 + M, start, name="wav2vec-xl")
    s.progress(job, start + M, tstop, M, 0, lambda t: 0.75, ranks=rank_nodes(nodes))
    ckpt_series(s, job, start, tstop, 30 * M, lambda t: int((t - start) / 750), "/lustre/ckpt/w2v/{step}")
    for i, n in enumerate(nodes):
        for k in range(3):
            t = ts_ + 90 * S + k * 9 * M + i * 4 * S
            s.log(job, t, n, None, f"Lustre: 3582:0:(client.c:2146:ptlrpc_expire_one_request()) @@@ Request sent has "
                  f"timed out for slow reply: [sent {(t - 101 * S) // 1000}/real {(t - 101 * S) // 1000}]  "
                  f"req@ffff8f2a{k}c1e3a00 x1781{i}{k}23 /t0(0) o3->data-OST0003-osc-ffff8f1b3c4e1800@10.20.0.13@o2ib:6/4 "
                  f"lens 488/432 e 0 to 1 dl {(t + 5 * S) // 1000} ref 2 fl Rpc:X/0/ffffffff rc 0/-1", stream="kernel")
    s.log(job, end - 5 * S, "gpu-t01", None, f"slurmstepd: error: *** JOB {job} ON gpu-t01 CANCELLED AT "
          f"{utc(end - 5 * S)} DUE TO TIME LIMIT ***")
    s.job(job, 0, "timeout", end, nodes, start=start, end=end, signal=15, reason="TimeLimit", name="wav2vec-xl")
    return s


def q12_collective_mismatch_user_bug():
    """2 x 8 GPUs, run with TORCH_DISTRIBUTED_DEBUG=DETAIL. At step 3120 a data-dependent branch in the
    user's MoE layer makes rank 7 skip an expert's all-reduce and call the next all-gather: the collective
    fingerprint check raises `Detected mismatch between collectives on ranks` on rank 7 and rank 0; the other
    ranks abort. Every layer is clean; noise: CNP counts a few dozen/min on every HCA (normal RoCE), one
    PCIe replay on gpu-u02 GPU 3. Expected: application job:8831212."""
    s = Scn("q12_collective_mismatch_user_bug", day(11))
    t0, job, nodes = s.t0, "8831212", ["gpu-u01", "gpu-u02"]
    start, tx, end = t0 + 3 * M, t0 + 55 * M, t0 + 56 * M
    facing = leaf_topology(s, nodes, t0, "leaf-u1", "pod-u", 3, [("/lustre/u", "lustre", "mds-u")])

    def gpu_f(n, g, t, d):
        if n == "gpu-u02" and g == 3 and t >= t0 + 30 * M:
            d["set_pcie_replay"] = 1
    node_env(s, nodes, t0, t0 + 65 * M, [(nodes, start, end)], storage=[("/lustre/u", "lustre", 47)], facing=facing,
             gpu_f=gpu_f)
    simple_job(s, job, nodes, t0 + M, start, name="moe-8x7b-sparse")
    s.progress(job, start + M, tx, M, 0, lambda t: 1.0, ranks=rank_nodes(nodes))
    ckpt_series(s, job, start, tx, 20 * M, lambda t: int((t - start) / 1000), "/lustre/u/moe/ckpt/{step}")
    fp = ("Detected mismatch between collectives on ranks. Rank 7 is running collective: CollectiveFingerPrint("
          "SequenceNumber=48211, OpType=ALLGATHER, TensorShape=[4096, 1024], TensorDtypes=BFloat16, "
          "TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, layout=Strided (default), "
          "requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt))), but Rank 0 is "
          "running collective: CollectiveFingerPrint(SequenceNumber=48211, OpType=ALLREDUCE, TensorShape=[1024, 1024], "
          "TensorDtypes=BFloat16, ...). Collectives differ in the following aspects: \t Op type: ALLGATHERvs ALLREDUCE"
          "  Tensor Tensor shapes: 4096, 1024vs 1024, 1024")
    for r in (7, 0):
        s.log(job, tx + r * 30, "gpu-u01", r, f"[rank{r}]: Traceback (most recent call last):\n[rank{r}]:   File "
              f"\"/workspace/moe/layers.py\", line 288, in forward\n[rank{r}]:     dist.all_reduce(expert_grad, "
              f"group=self.ep_group)\n[rank{r}]: RuntimeError: {fp}")
    s.log(job, end - 25 * S, "gpu-u01", None, torchrun_fail(tx, 7, 30177, 1, "gpu-u01", 7))
    s.job(job, 0, "failed", end, nodes, start=start, end=end, exit_code=1, reason="NonZeroExitCode", name="moe-8x7b-sparse")
    return s


def q13_healthy_drain_for_firmware_and_ce_warning():
    """Healthy. 4 x 8 GPUs, completes at 130 min. At 40 min an admin sets gpu-h02 to `drain` (reason `pending GPU
    firmware CHG-12200`: Slurm lets the running job finish) and stages the firmware (an inventory.change is
    recorded at 41 min, applied only at the next reboot, so versions stay the same); at 70 min gpu-h02's BMC
    logs a warning `Correctable memory error rate exceeded for DIMM B4`; one checkpoint takes 3 min instead of
    40 s (storage latency 60 ms for two samples). Expected: no incident."""
    s = Scn("q13_healthy_drain_for_firmware_and_ce_warning", day(12))
    t0, job, nodes = s.t0, "8831313", [f"gpu-h0{i}" for i in range(1, 5)]
    start, end = t0 + 4 * M, t0 + 130 * M
    facing = leaf_topology(s, nodes, t0, "leaf-h1", "pod-h", 9, [("/lustre/h", "lustre", "mds-h")])

    def st_f(n, path, t, d):
        if t in (t0 + 80 * M, t0 + 81 * M):
            d["write_lat_ms"] = round(s.rng.uniform(55, 65), 1)
    node_env(s, nodes, t0, t0 + 140 * M, [(nodes, start, end)], storage=[("/lustre/h", "lustre", 58)], facing=facing,
             storage_f=st_f)
    simple_job(s, job, nodes, t0 + M, start, name="olmo-7b")
    s.progress(job, start + M, end - M, M, 0, lambda t: 0.85, ranks=rank_nodes(nodes))
    for t in range(start + 20 * M, end - 5 * M, 20 * M):
        step = int((t - start) / 850)
        dur = 180.0 if t == start + 80 * M else 40.0
        s.ckpt(job, t, step, f"/lustre/h/olmo/ckpt/{step}", "started")
        s.ckpt(job, t + int(dur * 1000), step, f"/lustre/h/olmo/ckpt/{step}", "succeeded", nbytes=14_100_000_000, dur=dur)
    s.sched_node("gpu-h02", t0 + 40 * M, "drain", "pending GPU firmware CHG-12200")
    s.change("gpu-h02", t0 + 41 * M, "gpu_firmware", "96.00.74.00.11", "96.00.89.00.01", "fwupd-bot", "CHG-12200")
    s.sel("gpu-h02", t0 + 70 * M, "0x0311", "warning", "Memory", "MEM0702",
          "The correctable errors logging limit was reached for a memory device at location DIMM_B4.")
    s.job(job, 0, "completed", end, nodes, start=start, end=end, exit_code=0, name="olmo-7b")
    return s


def q14_healthy_user_cancels_throttled_job():
    """Healthy by the contract's definition. 2 x 8 GPUs. From 20 min GPU 4 of gpu-z02 throttles (`hw_thermal`,
    89-92 C, 1100 MHz) and the whole job slows 0.6 -> 1.1 s/step, but it keeps progressing; at 65 min the user,
    unhappy with the speed, scancels it (CANCELLED, progress until the cancel). "A job that its user cancels
    while it makes progress has no incident." Expected: no incident."""
    s = Scn("q14_healthy_user_cancels_throttled_job", day(13))
    t0, job, nodes = s.t0, "8831414", ["gpu-z01", "gpu-z02"]
    start, tt, end = t0 + 3 * M, t0 + 20 * M, t0 + 65 * M + 20 * S
    facing = leaf_topology(s, nodes, t0, "leaf-z1", "pod-z", 5, [("/lustre/z", "lustre", "mds-z")])

    def gpu_f(n, g, t, d):
        if n == "gpu-z02" and g == 4 and tt <= t < end:
            d["throttle"], d["temp_c"], d["sm_clock_mhz"] = ["hw_thermal"], s.rng.randint(89, 92), 1100
    node_env(s, nodes, t0, t0 + 75 * M, [(nodes, start, end)], storage=[("/lustre/z", "lustre", 51)], facing=facing,
             gpu_f=gpu_f)
    simple_job(s, job, nodes, t0 + M, start, name="phi-3-ft", user="frank")
    s.progress(job, start + M, t0 + 65 * M, M, 0, lambda t: 0.6 if t < tt else 1.1, ranks=rank_nodes(nodes))
    ckpt_series(s, job, start, t0 + 65 * M, 20 * M, lambda t: int((t - start) / 900), "/lustre/z/phi3/ckpt/{step}")
    tc = t0 + 65 * M
    s.log(job, tc + 2 * S, "gpu-z01", None, f"slurmstepd: error: *** JOB {job} ON gpu-z01 CANCELLED AT {utc(tc)} ***")
    sigterm_lines(s, job, tc + 3 * S, nodes, "SIGTERM")
    s.log(job, tc + 8 * S, "gpu-z02", 12, "[rank12]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/"
          "distributed/c10d/ProcessGroupNCCL.cpp:1970, remote process exited or there was a network error, NCCL "
          "version 2.21.5")
    s.job(job, 0, "cancelled", end, nodes, start=start, end=end, signal=15, reason="Cancelled by user frank",
          name="phi-3-ft", user="frank")
    return s


def q15_healthy_caught_oom_and_foreign_faults():
    """Healthy. 2 x 8 GPUs, completes at 90 min. At 12 min rank 3 hits `torch.OutOfMemoryError` in the
    framework's batch-size autotuner, which catches it and retries with a smaller micro-batch (progress goes
    on); gpu-y01 GPU 3's memory touches its total for one sample. Meanwhile, outside the job: gpu-y09 (same
    leaf, idle) logs XID 79 and its switch port flaps; the driver is upgraded on gpu-y09 and gpu-y10 (not the
    job's nodes). Expected: no incident."""
    s = Scn("q15_healthy_caught_oom_and_foreign_faults", day(14))
    t0, job, nodes = s.t0, "8831515", ["gpu-y01", "gpu-y02"]
    others = ["gpu-y09", "gpu-y10"]
    start, end = t0 + 3 * M, t0 + 90 * M
    facing = leaf_topology(s, nodes + others, t0, "leaf-y1", "pod-y", 1, [("/lustre/y", "lustre", "mds-y")])

    def gpu_f(n, g, t, d):
        if n == "gpu-y01" and g == 3 and t == t0 + 12 * M:
            d["mem_used_mib"] = d["mem_total_mib"]

    def port_f(n, sw, port, t, d, inc, st):
        if n == "gpu-y09" and t == t0 + 50 * M:
            d["oper_status"] = "down"
    node_env(s, nodes + others, t0, t0 + 100 * M, [(nodes, start, end)], storage=[("/lustre/y", "lustre", 60)],
             facing=facing, gpu_f=gpu_f, port_f=port_f,
             ver_over=lambda n, t: {"driver": "550.127.08"} if n in others and t >= t0 + 60 * M else None)
    s.xid("gpu-y09", t0 + 35 * M, 2, "0000:27:00", 79, 2211, "GPU has fallen off the bus.", name="nv-hostengine")
    s.link(t0 + 50 * M, "gpu-y09", "leaf-y1", "Ethernet3", "down", "snmp@leaf-y1")
    s.link(t0 + 50 * M + 40 * S, "gpu-y09", "leaf-y1", "Ethernet3", "up", "snmp@leaf-y1")
    for n in others:
        s.change(n, t0 + 58 * M, "driver", "550.90.07", "550.127.08", "ansible", "CHG-12301")
    simple_job(s, job, nodes, t0 + M, start, name="gemma-9b-sft")
    s.log(job, t0 + 12 * M, "gpu-y01", 3, "[rank3]: [autotune] torch.OutOfMemoryError: CUDA out of memory. Tried to "
          "allocate 3.50 GiB. GPU 3 has a total capacity of 79.10 GiB of which 1.21 GiB is free. -- caught by "
          "find_executable_batch_size, retrying with micro_batch_size=4")
    s.progress(job, start + M, end - M, M, 0, lambda t: 0.7, ranks=rank_nodes(nodes))
    ckpt_series(s, job, start, end, 25 * M, lambda t: int((t - start) / 700), "/lustre/y/gemma/ckpt/{step}")
    s.job(job, 0, "completed", end, nodes, start=start, end=end, exit_code=0, name="gemma-9b-sft")
    return s


SCENARIOS = [q01_dbe_counter_only_no_kernel_feed, q02_xid95_with_collateral_xid43, q03_container_runtime_upgrade_regression,
             q04_nccl_older_on_one_reimaged_node, q05_switch_port_downshift_then_down, q06_rail3_congestion_only,
             q07_nic_slot_pcie_fatal, q08_vrm_power_off_after_harmless_driver_change, q09_preempted_then_s3fuse_gone,
             q10_dev_shm_full_bus_error, q11_lustre_slow_stall_until_timelimit, q12_collective_mismatch_user_bug,
             q13_healthy_drain_for_firmware_and_ce_warning, q14_healthy_user_cancels_throttled_job,
             q15_healthy_caught_oom_and_foreign_faults]


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
