"""Failure stories of GPU training, written by hand as contract events (no simulator).

Each scenario function returns ``(events, expectations)``; an ``Expect`` names one job
attempt's interruption (or ``incident=False`` for an attempt that must not raise one).
Names, sizes, timings, sampling intervals, rank layouts and missing layers differ from
the simulator on purpose. The expected root cause follows the contract
(shared/spec/events.md): the earliest fault on the job's path that explains the symptom.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .builder import HOUR, MIN, SEC, Story, child_failed, nccl_watchdog, traceback

DAY = 24 * HOUR


@dataclass
class Expect:
    job: str
    attempt: int = 0
    incident: bool = True
    category: str | None = None
    component: str | None = None
    categories: tuple[str, ...] = ()          # any of these (when the story is ambiguous by design)
    symptom_starts: str | None = None
    symptom_not_on: str | None = None         # the node that shows the symptom is not this one
    ruled_out: set[str] = field(default_factory=set)
    not_ruled_out: set[str] = field(default_factory=set)
    ckpt_step: int | None = -1                # -1: not checked; None: no checkpoint
    lost_gpu_hours: float | None = None
    retry_same_nodes: bool | None = None


SCENARIOS: dict[str, Callable[[], tuple[list[dict], list[Expect]]]] = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def _gh(gpus: int, ms: int) -> float:
    return gpus * ms / 3_600_000


# ---------------------------------------------------------------------------------------------
@scenario
def nccl_timeout_flapping_rail_port_on_other_node():
    """Two DGX nodes, two rails each. The rail-B leaf port facing dgx-b12 flaps (SNMP traps,
    switch-keyed); every rank on the healthy dgx-b07 prints the NCCL watchdog first. The
    job is retried elsewhere and completes."""
    s = Story("flap")
    nodes = ["dgx-b07", "dgx-b12", "dgx-b15"]
    for i, n in enumerate(nodes):
        s.attach(n, [("mlx5_0", "tor-r3a", f"swp{7 + i}", "rail-a"), ("mlx5_1", "tor-r3b", f"swp{7 + i}", "rail-b")],
                 [("/home", "nfs", "home-filer"), ("/scratch", "weka", "weka-cl1")])
        s.stack(n, driver="550.54.15", cuda="12.4", nccl="2.20.5", ofed="24.01-0.3.3")
    a = s.run("884213", 0, nodes[:2], 8, 0, 51 * MIN, "failed", exit_code=1)
    step = s.heartbeat(a, 30 * SEC, 20 * MIN, 30 * SEC)
    s.ckpt(a, 20 * MIN + 40 * SEC, step, "/scratch/ckpt/884213/step_%d" % step)
    s.heartbeat(a, 21 * MIN, 39 * MIN + 30 * SEC, 30 * SEC, step0=step)
    # the flap: errors, then down/up three times on rail B in front of dgx-b12
    for k, t in enumerate((38 * MIN, 38 * MIN + 50 * SEC, 39 * MIN + 35 * SEC)):
        s.link("tor-r3b", "swp8", t, "down")
        s.link("tor-r3b", "swp8", t + 12 * SEC, "up")
    for n, sw in ((nodes[0], "tor-r3a"), (nodes[0], "tor-r3b"), (nodes[1], "tor-r3a"), (nodes[2], "tor-r3a"),
                  (nodes[2], "tor-r3b")):
        s.switch_port(sw, f"swp{7 + nodes.index(n)}", -10 * MIN, 90 * MIN, 60 * SEC, noise_errors=1)
    s.switch_port("tor-r3b", "swp8", -10 * MIN, 90 * MIN, 60 * SEC,
                  tweak=lambda t: {"in_errors": 4000 + (t // MIN) * 50} if t >= 37 * MIN else None)
    for n in nodes:
        s.gpus(n, 8, -10 * MIN, 90 * MIN, 30 * SEC)
        s.mount(n, "/scratch", -10 * MIN, 90 * MIN, 60 * SEC, fs="wekafs")
        s.bmc(n, -10 * MIN, 90 * MIN, 120 * SEC)
    for r in range(8):
        s.say(a, 49 * MIN + 40 * SEC + r * 90, nccl_watchdog(r, timeout_ms=600_000), rank=r)
    for r in range(8, 16):
        s.say(a, 49 * MIN + 42 * SEC + r * 90, nccl_watchdog(r, timeout_ms=600_000), rank=r)
    s.say(a, 50 * MIN + 30 * SEC, child_failed(0, nodes[0]), rank=0)
    b = s.run("884213", 1, [nodes[0], nodes[2]], 8, 55 * MIN, 88 * MIN, "completed", exit_code=0)
    s.heartbeat(b, 56 * MIN, 87 * MIN, 30 * SEC)
    return s.arrival(), [Expect("884213", category="network_link", component="port:tor-r3b/swp8",
                                symptom_starts="nccl_timeout on rank 0", symptom_not_on="dgx-b12",
                                ruled_out={"gpu", "hw", "storage"}, not_ruled_out={"net"}, ckpt_step=step,
                                lost_gpu_hours=_gh(16, 51 * MIN - (20 * MIN + 40 * SEC)), retry_same_nodes=False),
                         Expect("884213", attempt=1, incident=False)]


@scenario
def rdma_congestion_on_shared_spine_segment():
    """A 16-node job (128 GPUs) shares a spine group with another tenant's all-to-all.
    CNP/ECN storms and ACK timeouts on many HCAs of the segment; the job slows, then one
    rank reports an IB completion error. No link goes down. Progress only from rank 0;
    no checkpoints; no BMC or storage telemetry."""
    s = Story("spine")
    mine = [f"r04n{i:02d}" for i in range(1, 17)]
    theirs = [f"r05n{i:02d}" for i in range(1, 5)]
    for i, n in enumerate(mine + theirs):
        leaf = "lf-r04-1" if i < 8 else "lf-r04-2" if i < 16 else "lf-r05-1"
        s.attach(n, [("mlx5_0", leaf, f"Ethernet{i % 8 + 1}", "spine-grp-2")], [])
        s.stack(n, driver="550.90.07", nccl="2.21.5")
    a = s.run("3318807", 0, mine, 8, 0, 45 * MIN, "failed", exit_code=1)
    storm = set(mine[2:12] + theirs[:2])

    def cong(n):
        def tw(t, c):
            if n in storm and 28 * MIN <= t <= 60 * MIN:
                c["np_cnp_sent"] += 6_000 * 20
                c["np_ecn_marked_roce_packets"] += 9_000 * 20
                c["local_ack_timeout_err"] += 40 * 20
        return tw
    for n in mine + theirs:
        s.hca(n, "mlx5_0", -15 * MIN, 60 * MIN, 20 * SEC, tweak=cong(n))
    for n in mine:
        s.gpus(n, 8, -5 * MIN, 60 * MIN, 60 * SEC)
    s.heartbeat(a, 15 * SEC, 27 * MIN, 15 * SEC, ranks="zero", step_time=1.0, steps_per_beat=15)
    s.heartbeat(a, 27 * MIN + 15 * SEC, 43 * MIN, 15 * SEC, ranks="zero", step_time=2.4, steps_per_beat=6, step0=27 * 60)
    s.say(a, 43 * MIN + 50 * SEC, "r04n07:88213:88390 [3] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion "
          "from peer 10.12.4.9<52044> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.12.4.7 "
          "remoteGids::ffff:10.12.4.9", rank=51)
    s.say(a, 43 * MIN + 51 * SEC, "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
          "remote process exited or there was a network error, NCCL version 2.21.5\nncclRemoteError: A call failed "
          "possibly due to a network error or a remote process exiting prematurely.", rank=51)
    return s.arrival(), [Expect("3318807", category="network_congestion", component="segment:spine-grp-2",
                                ruled_out={"gpu"}, not_ruled_out={"hw", "storage", "net"}, ckpt_step=None,
                                lost_gpu_hours=_gh(128, 45 * MIN))]


@scenario
def nfs_latency_spike_checkpoint_fails_then_hang():
    """The checkpoint filer slows down (latency 2 ms -> seconds); a checkpoint write fails
    with EIO, the next one hangs, the job makes no more progress and the user cancels it
    half an hour later. The home filer stays fast."""
    s = Story("nfs")
    nodes = ["gpu-nfs-01", "gpu-nfs-02"]
    for i, n in enumerate(nodes):
        s.attach(n, [("ib0", "ib-leaf-07", f"{i + 1}/1", "ib-pod-1")],
                 [("/mnt/ckpt", "nfs", "filer-02"), ("/home", "nfs", "filer-01")])
        s.stack(n, driver="535.183.01", nccl="2.18.3")
    a = s.run("train-4471", 0, nodes, 4, 0, 70 * MIN, "cancelled", exit_code=None, signal=15)
    steps = []
    st = 0
    for k in range(3):
        st = s.heartbeat(a, k * 10 * MIN + 20 * SEC, (k + 1) * 10 * MIN - 20 * SEC, 20 * SEC, step0=st)
        if k < 2:
            s.ckpt(a, (k + 1) * 10 * MIN, st, f"/mnt/ckpt/train-4471/step_{st:07d}.pt")
            steps.append(st)
    s.ckpt(a, 30 * MIN + 50 * SEC, st, f"/mnt/ckpt/train-4471/step_{st:07d}.pt", "failed",
           error="OSError: [Errno 5] Input/output error", start_offset=50 * SEC)
    st = s.heartbeat(a, 31 * MIN, 32 * MIN, 20 * SEC, step0=st)
    last_prog = 32 * MIN
    s.ckpt(a, 32 * MIN + 10 * SEC, st, f"/mnt/ckpt/train-4471/step_{st:07d}.pt", "started")
    s.say(a, 29 * MIN, "nfs: server filer-02 not responding, still trying", node=nodes[1], stream="kernel")
    s.say(a, 36 * MIN, "INFO: task pt_main_thread:51231 blocked for more than 122 seconds.", node=nodes[0], stream="kernel")

    def slow(t):
        if t >= 26 * MIN:
            return {"write_lat_ms": 2_500.0 + (t % 7) * 300, "read_lat_ms": 900.0, "write_mbps": 3.0, "read_mbps": 5.0}
        return None
    for n in nodes:
        s.mount(n, "/mnt/ckpt", -20 * MIN, 75 * MIN, 30 * SEC, tweak=slow)
        s.mount(n, "/home", -20 * MIN, 75 * MIN, 30 * SEC)
        s.gpus(n, 4, -20 * MIN, 75 * MIN, 15 * SEC,
               tweak=lambda t, g: {"util_pct": 0.0} if t > 32 * MIN else None)
        s.bmc(n, -20 * MIN, 75 * MIN, 60 * SEC)
    for i in range(2):
        s.switch_port("ib-leaf-07", f"{i + 1}/1", -20 * MIN, 75 * MIN, 30 * SEC)
    return s.arrival(), [Expect("train-4471", category="storage_slow", component="path:/mnt/ckpt",
                                ruled_out={"gpu", "net", "hw"}, not_ruled_out={"storage"}, ckpt_step=steps[-1],
                                lost_gpu_hours=_gh(8, last_prog - 20 * MIN))]


@scenario
def enospc_on_lustre_checkpoint_k8s():
    """A Kubernetes job (pod-style node and job names) checkpoints to a Lustre scratch that
    fills up; the write fails with ENOSPC and rank 0 dies with the OSError. No BMC data."""
    s = Story("enospc")
    nodes = ["gke-a3-mega-pool-7f3c9b21-x2lq", "gke-a3-mega-pool-7f3c9b21-9wzd"]
    for i, n in enumerate(nodes):
        s.attach(n, [(f"eth{k + 1}", f"gcp-rail{k}", f"{n[-4:]}-p{k}", f"a3-block-{k}") for k in range(2)],
                 [("/lustre/scratch", "lustre", "10.3.0.2@tcp")])
        s.stack(n, driver="550.90.07", cuda="12.4", image="us-docker.pkg.dev/llm/train:2026.02.1")
    job = "llm-sft-27b-5f8kq"
    a = s.run(job, 0, nodes, 8, 0, 46 * MIN + 20 * SEC, "failed", exit_code=1,
              image="us-docker.pkg.dev/llm/train:2026.02.1", source="kube-apiserver")
    st = 0
    good = 0
    for k in range(3):
        st = s.heartbeat(a, k * 15 * MIN + 10 * SEC, (k + 1) * 15 * MIN - 10 * SEC, 10 * SEC, step0=st, ranks="all")
        if k < 2:
            s.ckpt(a, (k + 1) * 15 * MIN, st, f"/lustre/scratch/{job}/ckpt-{st}")
            good = st
            good_ts = (k + 1) * 15 * MIN
    s.ckpt(a, 45 * MIN + 40 * SEC, st, f"/lustre/scratch/{job}/ckpt-{st}", "failed",
           error="[Errno 28] No space left on device: '/lustre/scratch/%s/ckpt-%d/__3_0.distcp'" % (job, st))
    s.say(a, 45 * MIN + 41 * SEC, traceback("OSError: [Errno 28] No space left on device"), rank=0)
    for n in nodes:
        s.mount(n, "/lustre/scratch", -10 * MIN, 50 * MIN, 45 * SEC, fs="lustre",
                tweak=lambda t: {"used_pct": min(99.7, 91.0 + t / MIN * 0.2)})
        s.gpus(n, 8, -10 * MIN, 50 * MIN, 20 * SEC)
        for k in range(2):
            s.switch_port(f"gcp-rail{k}", f"{n[-4:]}-p{k}", -10 * MIN, 50 * MIN, 60 * SEC)
    return s.arrival(), [Expect(job, category="storage_full", component="path:/lustre/scratch",
                                ruled_out={"gpu", "net"}, not_ruled_out={"hw", "storage"}, ckpt_step=good,
                                lost_gpu_hours=_gh(16, 46 * MIN + 20 * SEC - good_ts))]


@scenario
def xid79_on_16_node_job_round_robin_ranks():
    """GPU 5 of hgx-c11 falls off the bus in a 16-node job whose ranks are placed round
    robin. Every surviving rank times out ten minutes later; a rank on another node prints
    first. No storage telemetry."""
    s = Story("xid79")
    nodes = [f"hgx-c{i:02d}" for i in range(1, 17)]
    for i, n in enumerate(nodes):
        s.attach(n, [("mlx5_0", f"leaf-{i // 8}", f"Eth1/{i % 8 + 1}", f"su-{i // 8}")], [("/nfs/ckpt", "nfs", "nas-7")])
        s.stack(n, driver="550.54.15", cuda="12.4")
    a = s.run("5512093", 0, nodes, 8, 0, 63 * MIN, "failed", exit_code=1, layout="roundrobin")
    st = s.heartbeat(a, 20 * SEC, 20 * MIN, 60 * SEC, ranks="zero")
    s.ckpt(a, 20 * MIN + 30 * SEC, st, "/nfs/ckpt/5512093/iter_%07d" % st)
    st = s.heartbeat(a, 21 * MIN, 40 * MIN, 60 * SEC, ranks="zero", step0=st)
    s.ckpt(a, 40 * MIN + 30 * SEC, st, "/nfs/ckpt/5512093/iter_%07d" % st)
    good = st
    s.heartbeat(a, 41 * MIN, 52 * MIN, 60 * SEC, ranks="zero", step0=st)
    bad = "hgx-c11"
    s.xid(bad, 52 * MIN + 20 * SEC, 5, 79, "GPU has fallen off the bus.", pci="0000:c1:00")
    s.say(a, 52 * MIN + 20 * SEC, "NVRM: GPU 0000:c1:00.0: GPU has fallen off the bus.", node=bad, stream="kernel")
    # ranks on the bad GPU's node never print; the first to print sits on hgx-c04
    order = [3] + [r for r in range(128) if r != 3 and a.ranks[str(r)] != bad]
    for k, r in enumerate(order):
        s.say(a, 62 * MIN + 25 * SEC + k * 40, nccl_watchdog(r, seq=88_104, op="ALLREDUCE", timeout_ms=600_000), rank=r)
    for n in nodes:
        s.gpus(n, 8, -5 * MIN, 65 * MIN, 60 * SEC,
               tweak=(lambda t, g: {"util_pct": 0.0, "power_w": 0.0} if t > 52 * MIN and g == 5 else None) if n == bad else None)
        s.bmc(n, -5 * MIN, 65 * MIN, 300 * SEC)
    for i, n in enumerate(nodes):
        s.switch_port(f"leaf-{i // 8}", f"Eth1/{i % 8 + 1}", -5 * MIN, 65 * MIN, 120 * SEC)
    return s.arrival(), [Expect("5512093", category="gpu_hardware", component=f"gpu:{bad}/5",
                                symptom_starts="nccl_timeout on rank 3", symptom_not_on=bad,
                                ruled_out={"net", "hw"}, not_ruled_out={"storage"}, ckpt_step=good,
                                lost_gpu_hours=_gh(128, 63 * MIN - (40 * MIN + 30 * SEC)))]


@scenario
def xid48_double_bit_ecc():
    """An uncorrectable (double-bit) ECC error on GPU 2 of the second node: DBE counter,
    XID 48, and the CUDA error on the rank that used it."""
    s = Story("dbe")
    nodes = ["sjc2-gpu-114", "sjc2-gpu-115"]
    for i, n in enumerate(nodes):
        s.attach(n, [("mlx5_2", "sjc2-t1-sw04", f"1/1/{i + 33}", "sjc2-pod1")], [("/data", "vast", "vast-01")])
        s.stack(n, driver="535.161.08", cuda="12.2")
    a = s.run("70021", 0, nodes, 8, 0, 34 * MIN, "failed", exit_code=1)
    st = s.heartbeat(a, 30 * SEC, 25 * MIN, 30 * SEC)
    s.ckpt(a, 25 * MIN + 30 * SEC, st, f"/data/ckpt/70021/{st}")
    s.heartbeat(a, 26 * MIN, 32 * MIN + 30 * SEC, 30 * SEC, step0=st)
    bad = nodes[1]
    s.xid(bad, 33 * MIN + 2 * SEC, 2, 48, "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 3, subpartition 1.")
    s.say(a, 33 * MIN + 3 * SEC, traceback("RuntimeError: CUDA error: uncorrectable ECC error encountered\nCUDA kernel errors "
                                           "might be asynchronously reported at some other API call."), rank=10)
    s.say(a, 33 * MIN + 40 * SEC, child_failed(10, bad), rank=0)
    for n in nodes:
        s.gpus(n, 8, -10 * MIN, 36 * MIN, 10 * SEC,
               tweak=(lambda t, g: {"ecc_dbe": 1} if g == 2 and t >= 33 * MIN else None) if n == bad else None)
        s.bmc(n, -10 * MIN, 36 * MIN, 60 * SEC)
        s.mount(n, "/data", -10 * MIN, 36 * MIN, 60 * SEC, fs="nfs3")
    for i in range(2):
        s.switch_port("sjc2-t1-sw04", f"1/1/{i + 33}", -10 * MIN, 36 * MIN, 30 * SEC)
    return s.arrival(), [Expect("70021", category="gpu_hardware", component=f"gpu:{bad}/2",
                                ruled_out={"net", "hw", "storage"}, ckpt_step=st,
                                lost_gpu_hours=_gh(16, 34 * MIN - (25 * MIN + 30 * SEC)))]


@scenario
def user_illegal_address_then_xid31_xid43():
    """A user's custom CUDA kernel indexes out of bounds: XID 31 (MMU fault) on that GPU, the
    illegal-address error in the rank, then XID 43 when the process is torn down. NVIDIA
    lists both XIDs as possibly user-caused; every other layer is clean."""
    s = Story("xid31")
    nodes = ["a100-x01", "a100-x02"]
    for i, n in enumerate(nodes):
        s.attach(n, [("mlx5_0", "x-leaf", f"swp{i + 1}", "x-pod")], [("/ckpt", "nfs", "x-nas")])
        s.stack(n, driver="550.54.15", cuda="12.4")
    a = s.run("91377", 0, nodes, 4, 0, 12 * MIN + 40 * SEC, "failed", exit_code=1)
    s.heartbeat(a, 20 * SEC, 11 * MIN + 40 * SEC, 20 * SEC)
    s.xid(nodes[1], 12 * MIN, 1, 31, "Ch 00000010, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ "
          "0x7f2c_9c000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ", pid=40212)
    s.say(a, 12 * MIN + 300, traceback("RuntimeError: CUDA error: an illegal memory access was encountered\nCUDA kernel "
                                       "errors might be asynchronously reported at some other API call.",
                                       ("train.py", "ops/fused_rope.py")), rank=5)
    s.xid(nodes[1], 12 * MIN + 5 * SEC, 1, 43, "Ch 00000018", pid=40212)
    for r in (0, 1, 2, 3):
        s.say(a, 12 * MIN + 10 * SEC + r * 100, "[E ProcessGroupNCCL.cpp:1182] NCCL communicator was aborted on rank %d." % r, rank=r)
    for n in nodes:
        s.gpus(n, 4, -5 * MIN, 14 * MIN, 15 * SEC)
        s.bmc(n, -5 * MIN, 14 * MIN, 60 * SEC)
        s.mount(n, "/ckpt", -5 * MIN, 14 * MIN, 30 * SEC)
        s.switch_port("x-leaf", f"swp{nodes.index(n) + 1}", -5 * MIN, 14 * MIN, 30 * SEC)
    return s.arrival(), [Expect("91377", category="application", component="job:91377",
                                ruled_out={"net", "hw", "storage"}, ckpt_step=None,
                                lost_gpu_hours=_gh(8, 12 * MIN + 40 * SEC))]


@scenario
def cuda_oom_by_user_batch_size():
    """The user doubled the micro-batch: rank 6 (GPU 2 of the second node) hits CUDA OOM on
    the first step after warm-up. Infrastructure healthy."""
    s = Story("oom")
    nodes = ["h100-k8s-0", "h100-k8s-1"]
    for i, n in enumerate(nodes):
        s.attach(n, [("ens7f0np0", "spine-less-sw1", f"ethernet1/{i + 5}", None)], [("/workspace", "nfs", "nfs-ws")])
        s.stack(n, driver="550.90.07")
    a = s.run("ft-mistral-q8x", 0, nodes, 4, 0, 6 * MIN, "failed", exit_code=1, source="kubeflow")
    s.heartbeat(a, 30 * SEC, 5 * MIN, 15 * SEC, ranks="all")
    s.say(a, 5 * MIN + 20 * SEC, traceback("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 2 has a "
                                           "total capacity of 79.11 GiB of which 1.19 GiB is free. Including non-PyTorch "
                                           "memory, this process has 77.90 GiB memory in use."), rank=6)
    s.say(a, 5 * MIN + 50 * SEC, child_failed(6, nodes[1]), rank=0)
    for n in nodes:
        s.gpus(n, 4, -3 * MIN, 7 * MIN, 5 * SEC,
               tweak=(lambda t, g: {"mem_used_mib": 80_900.0} if g == 2 and 5 * MIN <= t <= 5 * MIN + 20 * SEC else None)
               if n == nodes[1] else None, total_mib=81_559.0)
        s.switch_port("spine-less-sw1", f"ethernet1/{nodes.index(n) + 5}", -3 * MIN, 7 * MIN, 30 * SEC)
        s.mount(n, "/workspace", -3 * MIN, 7 * MIN, 30 * SEC)
    return s.arrival(), [Expect("ft-mistral-q8x", category="gpu_oom", component="gpu:h100-k8s-1/2",
                                ruled_out={"net", "storage"}, not_ruled_out={"hw"}, ckpt_step=None,
                                lost_gpu_hours=_gh(8, 6 * MIN))]


@scenario
def host_oom_killer_on_one_node():
    """A dataloader leak: the kernel OOM killer kills a rank on the second node; the others
    see the remote process exit."""
    s = Story("hostoom")
    nodes = ["ip-10-0-3-21", "ip-10-0-3-57"]
    for i, n in enumerate(nodes):
        s.attach(n, [(f"rdmap{k}s0", f"efa-sw{k}", f"{n}-{k}", "efa-spine") for k in range(2)], [("/fsx", "lustre", "fsx-01")])
        s.stack(n, driver="550.54.15")
    a = s.run("1188", 0, nodes, 8, 0, 20 * MIN + 30 * SEC, "failed", exit_code=137, signal=9)
    st = s.heartbeat(a, 30 * SEC, 10 * MIN, 30 * SEC)
    s.ckpt(a, 10 * MIN + 20 * SEC, st, "/fsx/ckpt/1188/step%d" % st)
    s.heartbeat(a, 11 * MIN, 19 * MIN + 30 * SEC, 30 * SEC, step0=st)
    s.say(a, 19 * MIN + 50 * SEC, "Out of memory: Killed process 77121 (pt_main_thread) total-vm:412334112kB, "
          "anon-rss:391122004kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:790012kB oom_score_adj:0",
          node=nodes[1], stream="kernel")
    for r in range(8):
        s.say(a, 20 * MIN + 2 * SEC + r * 50, "[Rank %d] NCCL WARN NET/OFI Request completed with error. "
              "ncclRemoteError: remote process exited or there was a network error" % r, rank=r)
    for n in nodes:
        s.gpus(n, 8, -5 * MIN, 22 * MIN, 20 * SEC)
        s.mount(n, "/fsx", -5 * MIN, 22 * MIN, 60 * SEC, fs="lustre")
        s.bmc(n, -5 * MIN, 22 * MIN, 60 * SEC)
        for k in range(2):
            s.switch_port(f"efa-sw{k}", f"{n}-{k}", -5 * MIN, 22 * MIN, 60 * SEC)
    return s.arrival(), [Expect("1188", category="host_oom", component="node:ip-10-0-3-57",
                                ruled_out={"gpu", "net", "storage", "hw"}, ckpt_step=st,
                                lost_gpu_hours=_gh(16, 20 * MIN + 30 * SEC - (10 * MIN + 20 * SEC)))]


@scenario
def driver_upgrade_breaks_several_jobs():
    """A driver upgrade is rolled to six nodes; a job before it ran fine on the same nodes.
    Three jobs started after it die the same way (GSP RPC timeout, then a launch failure) on
    upgraded nodes, while the rest of the stack is healthy: a real change regression."""
    s = Story("drvup")
    nodes = [f"a100-n{i:02d}" for i in range(1, 7)]
    for i, n in enumerate(nodes):
        s.attach(n, [("mlx5_0", "leaf-a", f"swp{i + 1}", "pod-a")], [("/ckpt", "nfs", "nas-a")])
        s.stack(n, -3 * HOUR, driver="535.183.01", cuda="12.2", nccl="2.19.3")
    ok = s.run("50001", 0, nodes[:2], 8, -2 * HOUR, -70 * MIN, "completed", exit_code=0)
    s.heartbeat(ok, -2 * HOUR + 30 * SEC, -71 * MIN, 60 * SEC, ranks="zero")
    for k, n in enumerate(nodes):
        s.change(n, -60 * MIN + k * 45 * SEC, "driver", "535.183.01", "550.90.07", ticket="CHG-7781")
        s.stack(n, -59 * MIN + k * 45 * SEC, driver="550.90.07", cuda="12.4", nccl="2.19.3")
    exp = []
    for j, (job, ns, start, fail) in enumerate((("50002", nodes[0:2], 0, 14 * MIN), ("50003", nodes[2:4], 5 * MIN, 31 * MIN),
                                                 ("50004", nodes[4:5], 10 * MIN, 40 * MIN))):
        a = s.run(job, 0, ns, 8, start, fail + 40 * SEC, "failed", exit_code=1)
        s.heartbeat(a, start + 30 * SEC, fail - 30 * SEC, 30 * SEC, ranks="zero")
        bad = ns[-1]
        g = 3 + j
        s.xid(bad, fail, g, 119, "Timeout after 6s of waiting for RPC response from GPU%d GSP! Expected function 76 "
              "(GSP_RM_CONTROL) (0x20800a4c 0x4)." % g)
        s.say(a, fail + 2 * SEC, traceback("RuntimeError: CUDA error: unspecified launch failure"), rank=a.rank_of(bad, g))
        exp.append(Expect(job, category="change_regression", component="version:driver=550.90.07",
                          ruled_out={"net", "storage", "hw"}, ckpt_step=None,
                          lost_gpu_hours=_gh(a.gpus, fail + 40 * SEC - start)))
    # the same hours, a GPU of n06 falls off the bus under another job: hardware, whatever changed
    h = s.run("50005", 0, nodes[5:6], 8, 2 * MIN, 33 * MIN, "failed", exit_code=1)
    s.heartbeat(h, 2 * MIN + 30 * SEC, 32 * MIN, 30 * SEC, ranks="zero")
    s.xid(nodes[5], 32 * MIN + 10 * SEC, 1, 79, "GPU has fallen off the bus.")
    s.say(h, 32 * MIN + 11 * SEC, traceback("RuntimeError: CUDA error: unspecified launch failure"), rank=1)
    exp.append(Expect("50005", category="gpu_hardware", component="gpu:a100-n06/1", ckpt_step=None,
                      lost_gpu_hours=_gh(8, 31 * MIN)))
    for n in nodes:
        s.gpus(n, 8, -2 * HOUR, 45 * MIN, 60 * SEC)
        s.bmc(n, -2 * HOUR, 45 * MIN, 300 * SEC)
        s.mount(n, "/ckpt", -2 * HOUR, 45 * MIN, 120 * SEC)
        s.switch_port("leaf-a", f"swp{nodes.index(n) + 1}", -2 * HOUR, 45 * MIN, 60 * SEC)
    return s.arrival(), exp + [Expect("50001", incident=False)]


@scenario
def old_driver_node_without_change_event():
    """One node of a 4-node job still runs an older driver (it was never upgraded; there is
    no change event). Its ranks fail at start with the CUDA 'driver too old' error. This is
    a version mismatch inside the job (driver_software on that node), not a change
    regression. A single-node job on the same old node that fails with a user bug is an
    application error."""
    s = Story("olddrv")
    nodes = ["node-0a1", "node-0a2", "node-0a3", "node-0a4"]
    for i, n in enumerate(nodes):
        s.attach(n, [("mlx5_0", "leaf-0a", f"p{i}", "pod-0a")], [("/ckpt", "nfs", "nas-0")])
        if n == "node-0a3":
            s.stack(n, driver="535.104.05", cuda="12.2")
            s.stack(n, -20 * MIN, driver="535.104.05", cuda="12.2")
        else:
            s.stack(n, driver="550.90.07", cuda="12.4")
    a = s.run("7700", 0, nodes, 8, 0, 2 * MIN, "failed", exit_code=1)
    for r in a.ranks_on("node-0a3"):
        s.say(a, 50 * SEC + r * 30, traceback("RuntimeError: The NVIDIA driver on your system is too old (found version "
                                               "12020). Please update your GPU driver by downloading and installing a new "
                                               "version from the URL: http://www.nvidia.com/Download/index.aspx"), rank=r)
    b = s.run("7701", 0, ["node-0a3"], 8, 10 * MIN, 25 * MIN, "failed", exit_code=1)
    s.heartbeat(b, 10 * MIN + 30 * SEC, 24 * MIN, 30 * SEC, ranks="zero")
    s.say(b, 24 * MIN + 30 * SEC, traceback("ValueError: too many values to unpack (expected 2)"), rank=0)
    # a single-node job on the old node with a newer CUDA runtime in its image: the same error
    c = s.run("7702", 0, ["node-0a3"], 8, 30 * MIN, 31 * MIN, "failed", exit_code=1,
              image="nvcr.io/nvidia/pytorch:24.10-py3")
    s.say(c, 30 * MIN + 40 * SEC, traceback("RuntimeError: CUDA driver version is insufficient for CUDA runtime version"),
          rank=0)
    for n in nodes:
        s.gpus(n, 8, -5 * MIN, 32 * MIN, 30 * SEC)
        s.bmc(n, -5 * MIN, 32 * MIN, 60 * SEC)
        s.switch_port("leaf-0a", f"p{nodes.index(n)}", -5 * MIN, 32 * MIN, 60 * SEC)
    return s.arrival(), [Expect("7700", category="driver_software", component="node:node-0a3", ckpt_step=None,
                                lost_gpu_hours=_gh(32, 2 * MIN)),
                         Expect("7702", category="driver_software", component="node:node-0a3", ckpt_step=None,
                                lost_gpu_hours=_gh(8, 1 * MIN)),
                         Expect("7701", category="application", component="job:7701", ckpt_step=None,
                                ruled_out={"gpu", "net", "hw"}, lost_gpu_hours=_gh(8, 15 * MIN))]


@scenario
def preempted_by_higher_priority_job():
    """Preemption: the scheduler requeues the job for a higher-priority one; ranks get SIGTERM."""
    s = Story("preempt")
    nodes = ["cn-101", "cn-102"]
    for i, n in enumerate(nodes):
        s.attach(n, [("mlx5_0", "ib-sw-3", str(i + 11), "ib-3")], [("/gpfs/proj", "gpfs", "gpfs-c")])
        s.stack(n, driver="550.54.15")
    a = s.run("2044718", 0, nodes, 8, 0, 50 * MIN, "preempted", exit_code=None, signal=15,
              reason="Preempted by job 2044902 (QOS premium)")
    st = 0
    last = 0
    for k in range(3):
        st = s.heartbeat(a, k * 15 * MIN + 30 * SEC, (k + 1) * 15 * MIN, 30 * SEC, step0=st, ranks="zero")
        s.ckpt(a, (k + 1) * 15 * MIN + 30 * SEC, st, f"/gpfs/proj/ckpt/{st}")
        last = st
    s.heartbeat(a, 46 * MIN, 49 * MIN + 50 * SEC, 30 * SEC, step0=st, ranks="zero")
    s.say(a, 50 * MIN - 200, "slurmstepd: error: *** STEP 2044718.0 ON cn-101 CANCELLED AT 2026-03-03T12:50:00 DUE TO "
          "PREEMPTION ***", node="cn-101")
    for n in nodes:
        s.gpus(n, 8, -5 * MIN, 52 * MIN, 30 * SEC)
        s.bmc(n, -5 * MIN, 52 * MIN, 60 * SEC)
    return s.arrival(), [Expect("2044718", category="scheduler", component="job:2044718", ckpt_step=last,
                                lost_gpu_hours=_gh(16, 50 * MIN - (45 * MIN + 30 * SEC)))]


@scenario
def node_fail_after_psu_loss():
    """The second node loses both PSU inputs: the BMC logs it, the node goes silent, the
    scheduler marks it down and ends the job NODE_FAIL."""
    s = Story("psu")
    nodes = ["gpu-r7-03", "gpu-r7-04"]
    for i, n in enumerate(nodes):
        s.attach(n, [("mlx5_0", "r7-leaf", f"swp{i + 3}", "r7")], [("/ckpt", "nfs", "nas-r7")])
        s.stack(n, driver="550.54.15")
    a = s.run("613", 0, nodes, 8, 0, 36 * MIN, "node_fail", exit_code=None)
    st = s.heartbeat(a, 30 * SEC, 20 * MIN, 30 * SEC)
    s.ckpt(a, 20 * MIN + 10 * SEC, st, f"/ckpt/613/{st}")
    s.heartbeat(a, 21 * MIN, 29 * MIN + 30 * SEC, 30 * SEC, step0=st)
    bad = nodes[1]
    s.sel(bad, 29 * MIN + 50 * SEC, "critical", "Power Supply", "Power Supply PSU1 input lost (AC/DC)", "PSU0042")
    s.sel(bad, 29 * MIN + 52 * SEC, "critical", "Power Supply", "Power Supply PSU2 input lost (AC/DC)", "PSU0042")
    s.node_state(bad, 35 * MIN, "down", "Not responding")
    s.say(a, 35 * MIN + 30 * SEC, "srun: error: Node failure on gpu-r7-04", node=nodes[0])
    for n in nodes:
        until = 30 * MIN if n == bad else 38 * MIN
        s.gpus(n, 8, -5 * MIN, until, 30 * SEC)
        s.bmc(n, -5 * MIN, until, 60 * SEC)
        s.switch_port("r7-leaf", f"swp{nodes.index(n) + 3}", -5 * MIN, 38 * MIN, 60 * SEC,
                      tweak=(lambda t: {"oper_status": "down"} if t > 30 * MIN else None) if n == bad else None)
    return s.arrival(), [Expect("613", category="node_hardware", component="node:gpu-r7-04", ckpt_step=st,
                                ruled_out={"gpu"}, lost_gpu_hours=_gh(16, 36 * MIN - (20 * MIN + 10 * SEC)))]


@scenario
def node_fail_scheduler_only():
    """NODE_FAIL with no BMC and no node telemetry at all: only the scheduler saw the second
    node go down. The failed node is named, not the first node of the job."""
    s = Story("nodefail")
    nodes = ["tx-gpu-11", "tx-gpu-12"]
    a = s.run("tx-9001", 0, nodes, 4, 0, 40 * MIN, "node_fail", exit_code=None, reason="NodeFail")
    s.heartbeat(a, 30 * SEC, 33 * MIN, 30 * SEC, ranks="zero")
    s.node_state(nodes[1], 39 * MIN, "down", "Not responding")
    s.say(a, 39 * MIN + 30 * SEC, "srun: error: Node failure on tx-gpu-12", node=nodes[0])
    return s.arrival(), [Expect("tx-9001", category="node_hardware", component="node:tx-gpu-12", ckpt_step=None,
                                not_ruled_out={"gpu", "hw", "net", "storage"}, lost_gpu_hours=_gh(8, 40 * MIN))]


@scenario
def thermal_throttle_straggler_hits_time_limit():
    """GPU 6 of the first node overheats (a failed fan wall): hardware thermal slowdown for an
    hour, its rank becomes a straggler, the whole synchronous job slows and reaches its time
    limit before finishing."""
    s = Story("thermal")
    nodes = ["dc3-gpu-41", "dc3-gpu-42"]
    for i, n in enumerate(nodes):
        s.attach(n, [("mlx5_0", "dc3-leaf", f"Eth{i + 41}", "dc3")], [("/ckpt", "nfs", "dc3-nas")])
        s.stack(n, driver="550.54.15")
    a = s.run("dc3-5501", 0, nodes, 8, 0, 95 * MIN, "timeout", exit_code=None, signal=15,
              reason="TimeLimit")
    hot = (nodes[0], 6)

    def rt(r, t):
        return 3.1 if (r == 6 and t >= 20 * MIN) else 1.2
    st = s.heartbeat(a, 30 * SEC, 60 * MIN, 30 * SEC, rank_time=rt)
    s.ckpt(a, 60 * MIN + 30 * SEC, st, f"/ckpt/dc3-5501/{st}")
    s.heartbeat(a, 61 * MIN, 94 * MIN + 30 * SEC, 30 * SEC, rank_time=rt, step0=st, steps_per_beat=4)
    s.say(a, 95 * MIN - 500, "slurmstepd: error: *** JOB dc3-5501 ON dc3-gpu-41 CANCELLED AT 2026-03-03T13:35:00 DUE TO "
          "TIME LIMIT ***", node=nodes[0])
    for n in nodes:
        s.gpus(n, 8, -5 * MIN, 96 * MIN, 30 * SEC,
               tweak=(lambda t, g: {"throttle": ["hw_slowdown", "hw_thermal"], "temp_c": 92.0, "sm_clock_mhz": 810.0}
                      if g == 6 and t >= 19 * MIN else None) if n == hot[0] else None)
        s.bmc(n, -5 * MIN, 96 * MIN, 120 * SEC)
        s.switch_port("dc3-leaf", f"Eth{nodes.index(n) + 41}", -5 * MIN, 96 * MIN, 60 * SEC)
    return s.arrival(), [Expect("dc3-5501", category="thermal_throttle", component=f"gpu:{hot[0]}/6",
                                ruled_out={"net"}, ckpt_step=st,
                                lost_gpu_hours=_gh(16, 95 * MIN - (60 * MIN + 30 * SEC)))]


@scenario
def decoy_alarms_on_nodes_outside_the_job():
    """XID 79, a PSU alarm and a port down happen on nodes next to the job, not on it. The
    job dies of a user bug: application, with gpu, net and hw ruled out."""
    s = Story("decoy")
    nodes = ["p4d-a", "p4d-b", "p4d-c", "p4d-d"]
    for i, n in enumerate(nodes):
        s.attach(n, [("efa0", "efa-leaf-9", f"{n}-0", "efa-9")], [("/fsx", "lustre", "fsx-9")])
        s.stack(n, driver="535.161.08")
    a = s.run("44120", 0, nodes[:2], 8, 0, 12 * MIN + 30 * SEC, "failed", exit_code=1)
    s.heartbeat(a, 30 * SEC, 11 * MIN + 30 * SEC, 30 * SEC)
    s.xid("p4d-c", 10 * MIN, 4, 79, "GPU has fallen off the bus.")
    s.sel("p4d-d", 10 * MIN + 30 * SEC, "critical", "Power Supply", "PSU1 failure detected")
    s.link("efa-leaf-9", "p4d-d-0", 11 * MIN, "down")
    s.say(a, 12 * MIN, traceback("ValueError: Expected input batch_size (32) to match target batch_size (64)."), rank=9)
    s.say(a, 12 * MIN + 20 * SEC, child_failed(9, "p4d-b"), rank=0)
    for n in nodes:
        s.gpus(n, 8, -5 * MIN, 14 * MIN, 20 * SEC)
        s.bmc(n, -5 * MIN, 14 * MIN, 60 * SEC)
        s.switch_port("efa-leaf-9", f"{n}-0", -5 * MIN, 14 * MIN, 60 * SEC)
        s.mount(n, "/fsx", -5 * MIN, 14 * MIN, 60 * SEC, fs="lustre")
    return s.arrival(), [Expect("44120", category="application", component="job:44120",
                                ruled_out={"gpu", "net", "hw", "storage"}, ckpt_step=None,
                                lost_gpu_hours=_gh(16, 12 * MIN + 30 * SEC))]


@scenario
def bmc_alarm_outside_the_window():
    """A memory UE on the node was logged three hours before the job (and repaired); a fan
    warning comes two hours after it ended. The job itself dies of a KeyError."""
    s = Story("bmcold")
    nodes = ["lambda-gpu-3"]
    s.attach(nodes[0], [("mlx5_0", "lb-sw", "ge-0/0/3", "lb")], [("/home/ubuntu", "ext4", None)])
    s.stack(nodes[0], -4 * HOUR, driver="550.54.15")
    s.sel(nodes[0], -3 * HOUR, "critical", "Memory", "Uncorrectable ECC error on DIMM B2")
    a = s.run("run-17", 0, nodes, 8, 0, 25 * MIN, "failed", exit_code=1)
    st = s.heartbeat(a, 30 * SEC, 15 * MIN, 60 * SEC, ranks="zero")
    s.ckpt(a, 15 * MIN + 30 * SEC, st, f"/home/ubuntu/ckpt/{st}")
    s.heartbeat(a, 16 * MIN, 24 * MIN, 60 * SEC, ranks="zero", step0=st)
    s.say(a, 24 * MIN + 30 * SEC, traceback("KeyError: 'attention_mask'"), rank=2)
    s.sel(nodes[0], 2 * HOUR + 25 * MIN, "warning", "Fan", "Fan 4 speed below lower non-critical threshold")
    s.gpus(nodes[0], 8, -3 * HOUR - 5 * MIN, 27 * MIN, 60 * SEC)
    s.bmc(nodes[0], -3 * HOUR - 5 * MIN, 27 * MIN, 300 * SEC)
    return s.arrival(), [Expect("run-17", category="application", component="job:run-17",
                                ruled_out={"gpu", "hw"}, not_ruled_out={"net", "storage"}, ckpt_step=st,
                                lost_gpu_hours=_gh(8, 25 * MIN - (15 * MIN + 30 * SEC)))]


@scenario
def healthy_jobs_with_noisy_counters():
    """Completed jobs and a user cancel during progress: steady corrected-ECC growth, a few
    port errors per minute, CNP background, GPU memory at 96 %, occasional power capping.
    No incident."""
    s = Story("noisy")
    nodes = ["m1-gpu-01", "m1-gpu-02", "m1-gpu-03"]
    for i, n in enumerate(nodes):
        s.attach(n, [("mlx5_0", "m1-leaf", f"swp{i + 1}", "m1")], [("/ckpt", "nfs", "m1-nas")])
        s.stack(n, driver="550.54.15")
    a = s.run("8001", 0, nodes[:2], 8, 0, 62 * MIN, "completed", exit_code=0)
    st = s.heartbeat(a, 30 * SEC, 61 * MIN, 30 * SEC)
    for k in range(1, 4):
        s.ckpt(a, k * 20 * MIN + 5 * SEC, st * k // 3, f"/ckpt/8001/{st * k // 3}")
    b = s.run("8002", 0, nodes[2:], 8, 0, 30 * MIN, "cancelled", exit_code=None, signal=15)
    s.heartbeat(b, 30 * SEC, 29 * MIN + 40 * SEC, 20 * SEC, ranks="zero")
    for n in nodes:
        s.gpus(n, 8, -10 * MIN, 65 * MIN, 20 * SEC, tweak=lambda t, g: {"mem_used_mib": 94_200.0, "ecc_sbe": (t + HOUR) // 2000})
        s.bmc(n, -10 * MIN, 65 * MIN, 60 * SEC)
        s.mount(n, "/ckpt", -10 * MIN, 65 * MIN, 30 * SEC)
        s.hca(n, "mlx5_0", -10 * MIN, 65 * MIN, 30 * SEC)
        s.switch_port("m1-leaf", f"swp{nodes.index(n) + 1}", -10 * MIN, 65 * MIN, 30 * SEC, noise_errors=6)
    return s.arrival(), [Expect("8001", incident=False), Expect("8002", incident=False)]


@scenario
def silent_stall_without_any_error():
    """The job stops making progress; no layer shows anything; the user cancels it 25 min
    later. Unknown, with every layer ruled out."""
    s = Story("stall")
    nodes = ["g-17", "g-18"]
    for i, n in enumerate(nodes):
        s.attach(n, [("mlx5_0", "leaf-g", f"swp{i + 17}", "g")], [("/ckpt", "nfs", "nas-g")])
        s.stack(n, driver="550.54.15", nccl="2.21.5")
    a = s.run("30303", 0, nodes, 4, 0, 55 * MIN, "cancelled", exit_code=None, signal=15)
    st = s.heartbeat(a, 20 * SEC, 20 * MIN, 20 * SEC)
    s.ckpt(a, 20 * MIN + 10 * SEC, st, f"/ckpt/30303/{st}")
    s.heartbeat(a, 20 * MIN + 20 * SEC, 30 * MIN, 20 * SEC, step0=st)
    for n in nodes:
        s.gpus(n, 4, -5 * MIN, 57 * MIN, 15 * SEC, tweak=lambda t, g: {"util_pct": 100.0} if t > 30 * MIN else None)
        s.bmc(n, -5 * MIN, 57 * MIN, 60 * SEC)
        s.mount(n, "/ckpt", -5 * MIN, 57 * MIN, 30 * SEC)
        s.switch_port("leaf-g", f"swp{nodes.index(n) + 17}", -5 * MIN, 57 * MIN, 30 * SEC)
    return s.arrival(), [Expect("30303", category="unknown", component="job:30303",
                                ruled_out={"gpu", "net", "storage", "hw"}, ckpt_step=st,
                                lost_gpu_hours=_gh(8, 30 * MIN - (20 * MIN + 10 * SEC)))]


@scenario
def old_fleet_driver_change_then_user_bug():
    """The fleet's driver was upgraded five days ago (many jobs ran since); a job now dies of a
    plain Python bug, and NVIDIA's XID 43 follows when its process is torn down. A change
    that old does not explain a KeyError: application, not change_regression."""
    s = Story("oldchange")
    nodes = ["c-201", "c-202"]
    for i, n in enumerate(nodes):
        s.attach(n, [("mlx5_0", "leaf-c2", f"swp{i + 1}", "c2")], [("/ckpt", "nfs", "nas-c")])
        s.stack(n, -6 * DAY, driver="535.183.01", cuda="12.2")
        s.change(n, -5 * DAY, "driver", "535.183.01", "550.90.07", ticket="CHG-1")
        s.stack(n, -5 * DAY + 10 * MIN, driver="550.90.07", cuda="12.4")
    a = s.run("777", 0, nodes, 8, 0, 15 * MIN + 40 * SEC, "failed", exit_code=1)
    s.heartbeat(a, 30 * SEC, 14 * MIN, 30 * SEC, ranks="zero")
    s.say(a, 15 * MIN, traceback("KeyError: 'input_ids'"), rank=11)
    s.xid(nodes[1], 15 * MIN + 3 * SEC, 3, 43, "Ch 00000008")
    for n in nodes:
        s.gpus(n, 8, -5 * MIN, 17 * MIN, 30 * SEC)
        s.bmc(n, -5 * MIN, 17 * MIN, 60 * SEC)
        s.switch_port("leaf-c2", f"swp{nodes.index(n) + 1}", -5 * MIN, 17 * MIN, 60 * SEC)
    return s.arrival(), [Expect("777", category="application", component="job:777", ruled_out={"net", "hw"},
                                ckpt_step=None, lost_gpu_hours=_gh(16, 15 * MIN + 40 * SEC))]


@scenario
def recent_nccl_change_but_python_bug():
    """NCCL was upgraded on the job's nodes an hour before it started; the job dies of a
    TypeError in the user's collate function. A library upgrade does not raise a TypeError
    in user code: application."""
    s = Story("recentchange")
    nodes = ["e-01", "e-02"]
    for i, n in enumerate(nodes):
        s.attach(n, [("mlx5_0", "leaf-e", f"swp{i + 1}", "e")], [])
        s.stack(n, -3 * HOUR, driver="550.54.15", nccl="2.20.5")
        s.change(n, -60 * MIN, "nccl", "2.20.5", "2.21.5")
    a = s.run("e-12", 0, nodes, 4, 0, 8 * MIN, "failed", exit_code=1)
    s.heartbeat(a, 30 * SEC, 7 * MIN, 30 * SEC, ranks="zero")
    s.say(a, 7 * MIN + 20 * SEC, traceback("TypeError: collate() missing 1 required positional argument: 'pad_id'",
                                           ("train.py", "data/collate.py")), rank=0)
    for n in nodes:
        s.gpus(n, 4, -5 * MIN, 9 * MIN, 30 * SEC)
    return s.arrival(), [Expect("e-12", category="application", component="job:e-12", ruled_out={"gpu"},
                                not_ruled_out={"hw", "net", "storage"}, ckpt_step=None, lost_gpu_hours=_gh(8, 8 * MIN))]


@scenario
def inventory_registration_is_not_a_change():
    """A node joins the pool: its agent reports its stack as inventory.change events with no
    'from' version (first registration). A job on it later stalls with no error anywhere:
    unknown, not change_regression."""
    s = Story("register")
    nodes = ["k-new-1", "k-new-2"]
    for i, n in enumerate(nodes):
        s.attach(n, [("eth0", "k-leaf", f"swp{i}", "k")], [("/ckpt", "nfs", "k-nas")])
        for comp, v in (("driver", "550.90.07"), ("cuda", "12.4"), ("nccl", "2.21.5")):
            s.change(n, -40 * MIN, comp, None, v, actor="node-agent")
        s.stack(n, -40 * MIN, driver="550.90.07", cuda="12.4", nccl="2.21.5")
    a = s.run("k-77", 0, nodes, 8, 0, 50 * MIN, "cancelled", exit_code=None)
    s.heartbeat(a, 30 * SEC, 18 * MIN, 30 * SEC, ranks="zero")
    for n in nodes:
        s.gpus(n, 8, -30 * MIN, 52 * MIN, 30 * SEC)
        s.bmc(n, -30 * MIN, 52 * MIN, 60 * SEC)
        s.mount(n, "/ckpt", -30 * MIN, 52 * MIN, 60 * SEC)
        s.switch_port("k-leaf", f"swp{nodes.index(n)}", -30 * MIN, 52 * MIN, 60 * SEC)
    return s.arrival(), [Expect("k-77", category="unknown", component="job:k-77", ckpt_step=None,
                                ruled_out={"gpu", "net", "hw", "storage"})]


@scenario
def new_image_on_retry_fails_at_import():
    """Attempt 0 is preempted; the user resubmits with a new image tag. Attempt 1 dies at
    import with an undefined symbol in a compiled extension: the image changed between the
    attempts (change_regression on the image), and attempt 0 is the scheduler's."""
    s = Story("img")
    nodes = ["b200-01", "b200-02"]
    for i, n in enumerate(nodes):
        s.attach(n, [("mlx5_0", "b-leaf", f"swp{i}", "b")], [("/ckpt", "nfs", "b-nas")])
        s.stack(n, driver="570.86.10")
    old, new = "ghcr.io/acme/trainer:1.3.0", "ghcr.io/acme/trainer:1.4.0"
    a = s.run("acme-3", 0, nodes, 8, 0, 30 * MIN, "preempted", exit_code=None, image=old, reason="Preempted")
    st = s.heartbeat(a, 30 * SEC, 20 * MIN, 30 * SEC, ranks="zero")
    s.ckpt(a, 20 * MIN + 20 * SEC, st, f"/ckpt/acme-3/{st}")
    s.heartbeat(a, 21 * MIN, 29 * MIN + 30 * SEC, 30 * SEC, ranks="zero", step0=st)
    b = s.run("acme-3", 1, nodes, 8, 40 * MIN, 41 * MIN + 30 * SEC, "failed", exit_code=1, image=new)
    s.say(b, 41 * MIN, traceback("ImportError: /usr/local/lib/python3.11/site-packages/flash_attn_2_cuda.cpython-311-x86_64-"
                                 "linux-gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi"), rank=0)
    for n in nodes:
        s.gpus(n, 8, -5 * MIN, 43 * MIN, 30 * SEC)
        s.bmc(n, -5 * MIN, 43 * MIN, 60 * SEC)
    return s.arrival(), [Expect("acme-3", category="scheduler", component="job:acme-3", ckpt_step=st,
                                lost_gpu_hours=_gh(16, 30 * MIN - (20 * MIN + 20 * SEC)), retry_same_nodes=True),
                         # attempt 1 resumed from attempt 0's checkpoint: that is its last good one
                         Expect("acme-3", attempt=1, category="change_regression", component=f"version:image={new}",
                                ckpt_step=st, lost_gpu_hours=_gh(16, 90 * SEC))]


@scenario
def lustre_client_evicted():
    """The Lustre MDS evicts the client on one node; the training process gets EIO/ESHUTDOWN
    reading shards and dies. storage_unavailable on the Lustre mount, not the home mount."""
    s = Story("evict")
    nodes = ["lx-001", "lx-002"]
    for i, n in enumerate(nodes):
        s.attach(n, [("ib0", "lx-ib-leaf", str(i + 1), "lx")],
                 [("/lustre/data", "lustre", "10.3.0.12@o2ib"), ("/home", "nfs", "lx-home")])
        s.stack(n, driver="550.54.15")
    a = s.run("lx-55", 0, nodes, 4, 0, 22 * MIN, "failed", exit_code=1)
    s.heartbeat(a, 30 * SEC, 21 * MIN, 30 * SEC, ranks="zero")
    s.say(a, 21 * MIN + 5 * SEC, "LustreError: 167-0: data-MDT0000-mdc-ffff9b2d4c1e0800: This client was evicted by "
          "data-MDT0000; in progress operations using this service will fail.", node=nodes[1], stream="kernel")
    s.say(a, 21 * MIN + 20 * SEC, traceback("OSError: [Errno 108] Cannot send after transport endpoint shutdown: "
                                            "'/lustre/data/shards/shard-00412.bin'"), rank=5)
    for n in nodes:
        s.gpus(n, 4, -5 * MIN, 24 * MIN, 30 * SEC)
        s.bmc(n, -5 * MIN, 24 * MIN, 60 * SEC)
        s.switch_port("lx-ib-leaf", str(nodes.index(n) + 1), -5 * MIN, 24 * MIN, 60 * SEC)
    return s.arrival(), [Expect("lx-55", category="storage_unavailable", component="path:/lustre/data",
                                ruled_out={"gpu", "net", "hw"}, ckpt_step=None, lost_gpu_hours=_gh(8, 22 * MIN))]


@scenario
def hca_transceiver_link_down_on_own_node():
    """The optic behind mlx5_3 of one node dies: HCA link_downed and symbol errors, the
    kernel's link-down line, then the job's NCCL error. The culprit is the switch port that
    NIC hangs off (rail 3), found through the topology."""
    s = Story("optic")
    nodes = ["aks-ndh100-31415926-vmss00000c", "aks-ndh100-31415926-vmss00000d"]
    for i, n in enumerate(nodes):
        s.attach(n, [(f"mlx5_{k}", f"ib-rail{k}-leaf", f"p{i + 20}", f"rail{k}") for k in range(4)], [])
        s.stack(n, driver="550.90.07")
    job = "pretrain-70b-9qx2w"
    a = s.run(job, 0, nodes, 8, 0, 27 * MIN, "failed", exit_code=1, source="kube-apiserver")
    s.heartbeat(a, 30 * SEC, 24 * MIN, 30 * SEC, ranks="zero")
    bad = nodes[0]

    def tw(t, c):
        if t >= 24 * MIN:
            c["symbol_error"] += 500
            if t >= 24 * MIN + 20 * SEC and c["link_downed"] == 0:
                c["link_downed"] = 1
    for n in nodes:
        for k in range(4):
            s.hca(n, f"mlx5_{k}", -5 * MIN, 29 * MIN, 20 * SEC, tweak=tw if (n == bad and k == 3) else None)
        s.gpus(n, 8, -5 * MIN, 29 * MIN, 30 * SEC)
    s.say(a, 24 * MIN + 21 * SEC, "mlx5_core 0000:d2:00.1 mlx5_3: Link down", node=bad, stream="kernel")
    s.say(a, 24 * MIN + 40 * SEC, "NCCL WARN NET/IB : Got completion from peer 10.0.0.7<41133> with status=12 opcode=1 "
          "len=0 vendor err 129 (Send) localGid fe80::8e", rank=12)
    return s.arrival(), [Expect(job, category="network_link", component=f"port:ib-rail3-leaf/p20",
                                ruled_out={"gpu"}, not_ruled_out={"hw", "storage"}, ckpt_step=None,
                                lost_gpu_hours=_gh(16, 27 * MIN))]


# ------------------------------------------------------------------ decoys and near misses
def _pair(s: Story, nodes: list[str], leaf: str, seg: str, mounts=(("/ckpt", "nfs", "nas"),), **versions) -> None:
    for i, n in enumerate(nodes):
        s.attach(n, [("mlx5_0", leaf, f"swp{i + 1}", seg)], list(mounts))
        s.stack(n, **(versions or {"driver": "550.54.15"}))


def _clean(s: Story, nodes: list[str], leaf: str, t_from: int, t_to: int, gpn: int = 8, *, gpu_every=30 * SEC,
           port_every=60 * SEC, mount: str | None = "/ckpt", bmc=True, gpu_tweak=None, mount_tweak=None) -> None:
    for i, n in enumerate(nodes):
        s.gpus(n, gpn, t_from, t_to, gpu_every, tweak=gpu_tweak(n) if gpu_tweak else None)
        s.switch_port(leaf, f"swp{i + 1}", t_from, t_to, port_every)
        if mount:
            s.mount(n, mount, t_from, t_to, 60 * SEC, tweak=mount_tweak(n) if mount_tweak else None)
        if bmc:
            s.bmc(n, t_from, t_to, 120 * SEC)


@scenario
def benign_kernel_and_bios_drift_then_user_bug():
    """One node of the job runs an older kernel and BIOS (benign drift, no change event);
    the job dies of an AttributeError in the user's model code. Application, not
    driver_software on the odd node."""
    s = Story("drift")
    nodes = ["q-01", "q-02", "q-03"]
    for i, n in enumerate(nodes):
        s.attach(n, [("mlx5_0", "q-leaf", f"swp{i + 1}", "q")], [("/ckpt", "nfs", "nas")])
        s.stack(n, driver="550.54.15", cuda="12.4", kernel="5.15.0-119-generic" if i != 1 else "5.15.0-105-generic",
                bios="2.3.1" if i != 1 else "2.1.0", gpu_firmware="96.00.89.00.01")
    a = s.run("q-5", 0, nodes, 8, 0, 18 * MIN, "failed", exit_code=1)
    s.heartbeat(a, 30 * SEC, 17 * MIN, 30 * SEC, ranks="zero")
    s.say(a, 17 * MIN + 30 * SEC, traceback("AttributeError: 'NoneType' object has no attribute 'shape'",
                                            ("train.py", "model/moe_router.py")), rank=13)
    _clean(s, nodes, "q-leaf", -5 * MIN, 20 * MIN)
    return s.arrival(), [Expect("q-5", category="application", component="job:q-5",
                                ruled_out={"gpu", "net", "hw", "storage"}, ckpt_step=None, lost_gpu_hours=_gh(24, 18 * MIN))]


@scenario
def congestion_in_another_segment_then_user_bug():
    """A CNP storm in another pod's segment while the job (in its own segment) dies of a user
    IndexError. Application; the job's network is clean."""
    s = Story("othercong")
    mine, theirs = ["u-01", "u-02"], ["v-01", "v-02", "v-03"]
    for i, n in enumerate(mine):
        s.attach(n, [("mlx5_0", "u-leaf", f"swp{i + 1}", "pod-u")], [])
        s.stack(n, driver="550.54.15")
    for i, n in enumerate(theirs):
        s.attach(n, [("mlx5_0", "v-leaf", f"swp{i + 1}", "pod-v")], [])
        s.stack(n, driver="550.54.15")

    def storm(t, c):
        if t >= 10 * MIN:
            c["np_cnp_sent"] += 200_000
            c["local_ack_timeout_err"] += 900
    for n in mine + theirs:
        s.hca(n, "mlx5_0", -5 * MIN, 25 * MIN, 30 * SEC, tweak=storm if n in theirs else None)
    a = s.run("u-88", 0, mine, 8, 0, 21 * MIN, "failed", exit_code=1)
    s.heartbeat(a, 30 * SEC, 20 * MIN, 30 * SEC, ranks="zero")
    s.say(a, 20 * MIN + 20 * SEC, traceback("IndexError: index 4096 is out of bounds for dimension 0 with size 4096"), rank=3)
    for n in mine:
        s.gpus(n, 8, -5 * MIN, 25 * MIN, 30 * SEC)
    return s.arrival(), [Expect("u-88", category="application", component="job:u-88", ruled_out={"gpu", "net"},
                                ckpt_step=None, lost_gpu_hours=_gh(16, 21 * MIN))]


@scenario
def xid79_after_the_job_already_died_of_a_bug():
    """The job dies of a user ValueError; half a minute later, while the node is being
    drained for an unrelated reason, an XID 79 appears on one of its GPUs. Consequence or
    coincidence, not cause: application."""
    s = Story("xidafter")
    nodes = ["w-1", "w-2"]
    _pair(s, nodes, "w-leaf", "w")
    a = s.run("w-3", 0, nodes, 8, 0, 10 * MIN, "failed", exit_code=1)
    s.heartbeat(a, 30 * SEC, 9 * MIN, 30 * SEC, ranks="zero")
    s.say(a, 9 * MIN + 40 * SEC, traceback("ValueError: Target size (torch.Size([8, 1])) must be the same as input size "
                                           "(torch.Size([8, 2]))"), rank=0)
    s.xid("w-2", 10 * MIN + 30 * SEC, 6, 79, "GPU has fallen off the bus.")
    _clean(s, nodes, "w-leaf", -5 * MIN, 12 * MIN)
    return s.arrival(), [Expect("w-3", category="application", component="job:w-3",
                                ruled_out={"net", "hw", "storage"}, ckpt_step=None, lost_gpu_hours=_gh(16, 10 * MIN))]


@scenario
def thermal_throttle_but_user_bug_kills_the_job():
    """A GPU of the job throttles thermally for ten minutes (a slow straggler) but what ends the
    job is a user bug: application."""
    s = Story("thermalbug")
    nodes = ["t-1", "t-2"]
    _pair(s, nodes, "t-leaf", "t")
    a = s.run("t-9", 0, nodes, 4, 0, 30 * MIN, "failed", exit_code=1)
    s.heartbeat(a, 30 * SEC, 29 * MIN, 30 * SEC, ranks="all",
                rank_time=lambda r, t: 2.0 if (r == 1 and t > 15 * MIN) else 1.2)
    s.say(a, 29 * MIN + 30 * SEC, traceback("KeyError: 'loss_mask'"), rank=6)
    _clean(s, nodes, "t-leaf", -5 * MIN, 32 * MIN, gpn=4,
           gpu_tweak=lambda n: (lambda t, g: {"throttle": ["sw_thermal"], "temp_c": 87.0}
                                if n == "t-1" and g == 1 and t > 15 * MIN else None))
    return s.arrival(), [Expect("t-9", category="application", component="job:t-9",
                                ruled_out={"net", "hw", "storage"}, ckpt_step=None, lost_gpu_hours=_gh(8, 30 * MIN))]


@scenario
def flapping_port_of_a_neighbour_while_job_stalls():
    """A port on the job's leaf flaps, but it faces a node outside the job; the job stalls
    with no error. Unknown (the neighbour's port is not on the job's path)."""
    s = Story("neighbourflap")
    nodes = ["y-1", "y-2", "y-3"]
    _pair(s, nodes, "y-leaf", "y")
    a = s.run("y-44", 0, nodes[:2], 8, 0, 50 * MIN, "cancelled", exit_code=None)
    s.heartbeat(a, 30 * SEC, 20 * MIN, 30 * SEC, ranks="zero")
    for t in (19 * MIN, 19 * MIN + 40 * SEC, 20 * MIN + 20 * SEC):
        s.link("y-leaf", "swp3", t, "down")
        s.link("y-leaf", "swp3", t + 10 * SEC, "up")
    _clean(s, nodes, "y-leaf", -5 * MIN, 52 * MIN)
    return s.arrival(), [Expect("y-44", category="unknown", component="job:y-44",
                                ruled_out={"gpu", "net", "hw", "storage"}, ckpt_step=None,
                                lost_gpu_hours=_gh(16, 20 * MIN))]


@scenario
def cuda_oom_round_robin_ranks_without_gpu_index():
    """CUDA OOM on rank 5 whose message does not name the GPU; ranks are placed round robin,
    so rank 5 is the third local rank (GPU 2) of the second node."""
    s = Story("oomrr")
    nodes = ["rr-a", "rr-b"]
    _pair(s, nodes, "rr-leaf", "rr")
    a = s.run("rr-1", 0, nodes, 4, 0, 9 * MIN, "failed", exit_code=1, layout="roundrobin")
    s.heartbeat(a, 30 * SEC, 8 * MIN, 30 * SEC, ranks="zero")
    s.say(a, 8 * MIN + 30 * SEC, traceback("RuntimeError: CUDA error: out of memory\nCompile with `TORCH_USE_CUDA_DSA` "
                                           "to enable device-side assertions."), rank=5)
    _clean(s, nodes, "rr-leaf", -5 * MIN, 11 * MIN, gpn=4)
    return s.arrival(), [Expect("rr-1", category="gpu_oom", component="gpu:rr-b/2", ruled_out={"net", "hw", "storage"},
                                ckpt_step=None, lost_gpu_hours=_gh(8, 9 * MIN))]


@scenario
def full_scratch_alarm_but_cuda_oom():
    """The job's scratch mount reports 99 % used (another team's data) but the job never writes
    there; it dies of CUDA OOM on rank 2. gpu_oom, not storage_full."""
    s = Story("fulloom")
    nodes = ["f-1", "f-2"]
    _pair(s, nodes, "f-leaf", "f", mounts=(("/scratch", "nfs", "f-nas"),))
    a = s.run("f-7", 0, nodes, 4, 0, 15 * MIN, "failed", exit_code=1)
    s.heartbeat(a, 30 * SEC, 14 * MIN, 30 * SEC, ranks="zero")
    s.say(a, 14 * MIN + 20 * SEC, traceback("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 2 "
                                            "has a total capacity of 79.11 GiB of which 412.00 MiB is free."), rank=2)
    _clean(s, nodes, "f-leaf", -5 * MIN, 17 * MIN, gpn=4, mount="/scratch",
           mount_tweak=lambda n: (lambda t: {"used_pct": 99.2}))
    return s.arrival(), [Expect("f-7", category="gpu_oom", component="gpu:f-1/2", ruled_out={"net", "hw"},
                                ckpt_step=None, lost_gpu_hours=_gh(8, 15 * MIN))]


@scenario
def nvlink_errors_then_xid74():
    """NVLink CRC/replay errors climb on GPU 3 of the first node, then XID 74; the ranks time
    out in the next all-reduce."""
    s = Story("nvl")
    nodes = ["nv-1", "nv-2"]
    _pair(s, nodes, "nv-leaf", "nv")
    a = s.run("nv-20", 0, nodes, 8, 0, 33 * MIN, "failed", exit_code=1)
    st = s.heartbeat(a, 30 * SEC, 15 * MIN, 30 * SEC, ranks="zero")
    s.ckpt(a, 15 * MIN + 30 * SEC, st, f"/ckpt/nv-20/{st}")
    s.heartbeat(a, 16 * MIN, 21 * MIN, 30 * SEC, ranks="zero", step0=st)
    s.xid("nv-1", 21 * MIN + 10 * SEC, 3, 74, "NVLink: fatal error detected on link 5(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)")
    for r in range(16):
        s.say(a, 31 * MIN + 15 * SEC + r * 20, nccl_watchdog(r, timeout_ms=600_000), rank=r)
    _clean(s, nodes, "nv-leaf", -5 * MIN, 35 * MIN,
           gpu_tweak=lambda n: (lambda t, g: {"nvlink_errors": max(0, (t - 18 * MIN) // 1000) * 3}
                                if n == "nv-1" and g == 3 else None))
    return s.arrival(), [Expect("nv-20", category="gpu_nvlink", component="gpu:nv-1/3", ruled_out={"net", "hw", "storage"},
                                ckpt_step=st, lost_gpu_hours=_gh(16, 33 * MIN - (15 * MIN + 30 * SEC)))]


@scenario
def same_gpu_fails_again_on_retry():
    """A lemon GPU: XID 94 (contained ECC error) kills attempt 0; the job is requeued on the
    same nodes and the same GPU fails again with XID 95. Both gpu_hardware on that GPU; the
    first incident's retry names the same nodes."""
    s = Story("lemon")
    nodes = ["l-1", "l-2"]
    _pair(s, nodes, "l-leaf", "l")
    a = s.run("l-500", 0, nodes, 8, 0, 20 * MIN, "failed", exit_code=1)
    st = s.heartbeat(a, 30 * SEC, 10 * MIN, 30 * SEC, ranks="zero")
    s.ckpt(a, 10 * MIN + 20 * SEC, st, f"/ckpt/l-500/{st}")
    s.heartbeat(a, 11 * MIN, 19 * MIN, 30 * SEC, ranks="zero", step0=st)
    s.xid("l-2", 19 * MIN + 20 * SEC, 7, 94, "Contained: SM (0x1). RST: No, D-RST: No")
    s.say(a, 19 * MIN + 21 * SEC, traceback("RuntimeError: CUDA error: uncorrectable ECC error encountered"), rank=15)
    b = s.run("l-500", 1, nodes, 8, 25 * MIN, 40 * MIN, "failed", exit_code=1)
    s.heartbeat(b, 26 * MIN, 39 * MIN, 30 * SEC, ranks="zero", step0=st)
    s.xid("l-2", 39 * MIN + 10 * SEC, 7, 95, "Uncontained: FBHUB. RST: Yes, D-RST: No")
    _clean(s, nodes, "l-leaf", -5 * MIN, 42 * MIN)
    return s.arrival(), [Expect("l-500", category="gpu_hardware", component="gpu:l-2/7", ckpt_step=st,
                                lost_gpu_hours=_gh(16, 20 * MIN - (10 * MIN + 20 * SEC)), retry_same_nodes=True,
                                ruled_out={"net", "hw", "storage"}),
                         Expect("l-500", attempt=1, category="gpu_hardware", component="gpu:l-2/7", ckpt_step=st,
                                lost_gpu_hours=_gh(16, 15 * MIN))]


@scenario
def bmc_inlet_temperature_critical_but_user_bug():
    """The BMC of a job node reports its inlet temperature critical (a CRAC unit hiccup) while
    the job dies of a TypeError; the node keeps running. Application."""
    s = Story("inlet")
    nodes = ["i-1", "i-2"]
    _pair(s, nodes, "i-leaf", "i")
    a = s.run("i-3", 0, nodes, 8, 0, 14 * MIN, "failed", exit_code=1)
    s.heartbeat(a, 30 * SEC, 13 * MIN, 30 * SEC, ranks="zero")
    s.emit("hw.sensor", 12 * MIN, {"sensor": "Inlet Temp", "type": "temperature", "value": 43.0, "unit": "C",
                                   "status": "critical"}, node="i-1", source="redfish@i-1-bmc")
    s.say(a, 13 * MIN + 30 * SEC, traceback("TypeError: unsupported operand type(s) for +: 'Tensor' and 'NoneType'"), rank=4)
    _clean(s, nodes, "i-leaf", -5 * MIN, 16 * MIN)
    return s.arrival(), [Expect("i-3", category="application", component="job:i-3", ruled_out={"net", "gpu", "storage"},
                                ckpt_step=None, lost_gpu_hours=_gh(16, 14 * MIN))]


@scenario
def dataset_mount_goes_stale_and_loader_hangs():
    """The dataset NFS mount goes stale on one node; its dataloader workers block, the job
    stops making progress (no checkpoint in flight) and is cancelled. storage_unavailable on
    /datasets, not the checkpoint mount."""
    s = Story("stale")
    nodes = ["d-1", "d-2"]
    _pair(s, nodes, "d-leaf", "d", mounts=(("/datasets", "nfs", "d-data"), ("/ckpt", "nfs", "d-ckpt")))
    a = s.run("d-31", 0, nodes, 8, 0, 60 * MIN, "cancelled", exit_code=None)
    st = s.heartbeat(a, 30 * SEC, 15 * MIN, 30 * SEC, ranks="zero")
    s.ckpt(a, 15 * MIN + 20 * SEC, st, f"/ckpt/d-31/{st}")
    s.heartbeat(a, 16 * MIN, 24 * MIN, 30 * SEC, ranks="zero", step0=st)
    s.mount_state("d-2", "/datasets", 23 * MIN + 50 * SEC, "stale", "Stale file handle")
    _clean(s, nodes, "d-leaf", -5 * MIN, 62 * MIN, mount="/ckpt")
    return s.arrival(), [Expect("d-31", category="storage_unavailable", component="path:/datasets",
                                ruled_out={"gpu", "net", "hw"}, ckpt_step=st,
                                lost_gpu_hours=_gh(16, 24 * MIN - (15 * MIN + 20 * SEC)))]


@scenario
def host_nic_counters_flap_on_job_node():
    """Host-side NIC counters (net.port from the node agent, device = the NIC) show the
    uplink of the second node going down and up; the job's ranks then fail. The culprit is
    the switch port that NIC is cabled to."""
    s = Story("hostnic")
    nodes = ["h-1", "h-2"]
    for i, n in enumerate(nodes):
        s.attach(n, [("eth2", "h-tor", f"Ethernet{i + 9}", "h-pod")], [])
        s.stack(n, driver="550.54.15")
    a = s.run("h-12", 0, nodes, 8, 0, 22 * MIN, "failed", exit_code=1)
    s.heartbeat(a, 30 * SEC, 19 * MIN + 30 * SEC, 30 * SEC, ranks="zero")

    def nic(n):
        return lambda t: {"oper_status": "down"} if n == "h-2" and (19 * MIN + 40 * SEC <= t <= 20 * MIN + 10 * SEC) else None
    for n in nodes:
        s.switch_port("eth2", "1", -5 * MIN, 24 * MIN, 10 * SEC, node=n, tweak=nic(n))
        s.gpus(n, 8, -5 * MIN, 24 * MIN, 30 * SEC)
    s.say(a, 20 * MIN + 30 * SEC, "[Rank 3] NCCL WARN socket.cc:50 NET/Socket : Connection closed by remote peer "
          "h-2<44120>", rank=3)
    s.say(a, 21 * MIN, traceback("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote "
                                 "process exited or there was a network error"), rank=3)
    return s.arrival(), [Expect("h-12", category="network_link", component="port:h-tor/Ethernet10",
                                ruled_out={"gpu"}, ckpt_step=None, lost_gpu_hours=_gh(16, 22 * MIN))]


@scenario
def xid79_seen_only_in_the_kernel_log():
    """A site without a gpu.xid collector: the XID 79 reaches faultline only as a kernel log
    line of the job's node (runtime.log, stream kernel), before the other ranks time out."""
    s = Story("kxid")
    nodes = ["kx-1", "kx-2"]
    _pair(s, nodes, "kx-leaf", "kx")
    a = s.run("kx-4", 0, nodes, 8, 0, 31 * MIN, "failed", exit_code=1)
    s.heartbeat(a, 30 * SEC, 20 * MIN, 30 * SEC, ranks="zero")
    s.say(a, 20 * MIN + 15 * SEC, "NVRM: Xid (PCI:0000:cb:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off "
          "the bus.", node="kx-2", stream="kernel")
    s.say(a, 20 * MIN + 15 * SEC + 5, "NVRM: GPU 0000:cb:00.0: GPU has fallen off the bus.", node="kx-2", stream="kernel")
    for r in range(8):
        s.say(a, 30 * MIN + 20 * SEC + r * 30, nccl_watchdog(r, timeout_ms=600_000), rank=r)
    _clean(s, nodes, "kx-leaf", -5 * MIN, 33 * MIN, gpu_every=60 * SEC)
    return s.arrival(), [Expect("kx-4", categories=("gpu_hardware",), symptom_starts="nccl_timeout on rank 0",
                                ruled_out={"net", "hw", "storage"}, ckpt_step=None, lost_gpu_hours=_gh(16, 31 * MIN))]


@scenario
def torch_save_write_fails_on_full_disk():
    """torch.save to a local NVMe that is full: PyTorch reports only 'PytorchStreamWriter failed
    writing file ... file write failed' (no errno text); the node's mount sample says 100 %."""
    s = Story("nvmefull")
    nodes = ["nv-local-1"]
    s.attach(nodes[0], [("mlx5_0", "nl-leaf", "swp1", "nl")], [("/local_nvme", "xfs", None)])
    s.stack(nodes[0], driver="550.54.15")
    a = s.run("nl-2", 0, nodes, 8, 0, 41 * MIN, "failed", exit_code=1)
    st = s.heartbeat(a, 30 * SEC, 20 * MIN, 30 * SEC, ranks="zero")
    s.ckpt(a, 20 * MIN + 20 * SEC, st, f"/local_nvme/ckpt/{st}.pt")
    st2 = s.heartbeat(a, 21 * MIN, 40 * MIN, 30 * SEC, ranks="zero", step0=st)
    s.ckpt(a, 40 * MIN + 40 * SEC, st2, f"/local_nvme/ckpt/{st2}.pt", "failed",
           error="[enforce fail at inline_container.cc:595] . PytorchStreamWriter failed writing file data/117: file write failed")
    s.say(a, 40 * MIN + 41 * SEC, traceback("RuntimeError: [enforce fail at inline_container.cc:595] . PytorchStreamWriter "
                                            "failed writing file data/117: file write failed"), rank=0)
    s.gpus(nodes[0], 8, -5 * MIN, 43 * MIN, 30 * SEC)
    s.mount(nodes[0], "/local_nvme", -5 * MIN, 43 * MIN, 60 * SEC, fs="xfs",
            tweak=lambda t: {"used_pct": min(100.0, 90.0 + max(0, t - 25 * MIN) / MIN)})
    return s.arrival(), [Expect("nl-2", category="storage_full", component="path:/local_nvme", ruled_out={"gpu"},
                                ckpt_step=st, lost_gpu_hours=_gh(8, 41 * MIN - (20 * MIN + 20 * SEC)))]


@scenario
def k8s_container_oom_killed():
    """A Kubernetes pod exceeds its memory limit: the runtime reports the container
    OOM-killed on its node, the job fails with exit 137; no kernel log is shipped."""
    s = Story("podoom")
    nodes = ["gke-pool-a-1", "gke-pool-a-2"]
    _pair(s, nodes, "gke-leaf", "gke", mounts=())
    a = s.run("sft-po-2", 0, nodes, 4, 0, 12 * MIN, "failed", exit_code=137, source="kube-apiserver")
    s.heartbeat(a, 30 * SEC, 11 * MIN, 30 * SEC, ranks="zero")
    s.container(a, 11 * MIN + 20 * SEC, "gke-pool-a-1", "oom_killed", 137)
    s.say(a, 11 * MIN + 40 * SEC, "[Rank 5] NCCL WARN socket.cc:50 NET/Socket : Connection closed by remote peer", rank=5)
    _clean(s, nodes, "gke-leaf", -5 * MIN, 14 * MIN, gpn=4, mount=None, bmc=False)
    return s.arrival(), [Expect("sft-po-2", category="host_oom", component="node:gke-pool-a-1",
                                ruled_out={"gpu", "net"}, not_ruled_out={"hw", "storage"}, ckpt_step=None,
                                lost_gpu_hours=_gh(8, 12 * MIN))]


@scenario
def silent_nccl_update_seen_only_in_inventory_reports():
    """Unattended upgrades move NCCL 2.20.5 -> 2.21.5 on four nodes; nobody announces it, but
    the nodes' periodic inventory reports show the new version. Two jobs started afterwards
    on those nodes die at communicator init with an NCCL internal error, with the fabric,
    GPUs and storage clean. A job that ran on the same nodes the day before was fine."""
    s = Story("silentnccl")
    nodes = ["s-01", "s-02", "s-03", "s-04"]
    for i, n in enumerate(nodes):
        s.attach(n, [("mlx5_0", "s-leaf", f"swp{i + 1}", "s")], [("/ckpt", "nfs", "s-nas")], ts=-26 * HOUR)
        for k, t in enumerate(range(-26 * HOUR, 0, 6 * HOUR)):
            s.stack(n, t + i * SEC, driver="550.54.15", nccl="2.20.5" if t < -3 * HOUR else "2.21.5")
    ok = s.run("s-100", 0, nodes[:2], 8, -24 * HOUR, -23 * HOUR, "completed", exit_code=0)
    s.heartbeat(ok, -24 * HOUR + 30 * SEC, -23 * HOUR - 30 * SEC, 120 * SEC, ranks="zero")
    exp = []
    for job, ns, t in (("s-101", nodes[:2], 0), ("s-102", nodes[2:], 20 * MIN)):
        a = s.run(job, 0, ns, 8, t, t + 2 * MIN, "failed", exit_code=1)
        s.say(a, t + 70 * SEC, "s-0x:1234:1290 [2] NCCL WARN Call to ibv_modify_qp failed with error Invalid argument\n"
              "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, internal error - please report this issue to the "
              "NCCL developers, NCCL version 2.21.5\nncclInternalError: Internal check failed.", rank=2)
        exp.append(Expect(job, category="change_regression", component="version:nccl=2.21.5", ckpt_step=None,
                          ruled_out={"gpu", "net", "hw", "storage"}, lost_gpu_hours=_gh(16, 2 * MIN)))
    for n in nodes:
        s.gpus(n, 8, -10 * MIN, 25 * MIN, 60 * SEC)
        s.bmc(n, -10 * MIN, 25 * MIN, 300 * SEC)
        s.mount(n, "/ckpt", -10 * MIN, 25 * MIN, 120 * SEC)
        s.switch_port("s-leaf", f"swp{nodes.index(n) + 1}", -10 * MIN, 25 * MIN, 60 * SEC)
    return s.arrival(), exp + [Expect("s-100", incident=False)]


@scenario
def memory_ue_machine_check_panics_a_node():
    """An uncorrectable DIMM error: the kernel logs a machine check, the BMC logs the memory UE,
    the node panics and the scheduler ends the job NODE_FAIL."""
    s = Story("mce")
    nodes = ["mc-1", "mc-2", "mc-3", "mc-4"]
    _pair(s, nodes, "mc-leaf", "mc")
    a = s.run("mc-7", 0, nodes, 8, 0, 27 * MIN, "node_fail", exit_code=None)
    st = s.heartbeat(a, 30 * SEC, 10 * MIN, 30 * SEC, ranks="zero")
    s.ckpt(a, 10 * MIN + 30 * SEC, st, f"/ckpt/mc-7/{st}")
    s.heartbeat(a, 11 * MIN, 21 * MIN, 30 * SEC, ranks="zero", step0=st)
    s.say(a, 21 * MIN + 10 * SEC, "mce: [Hardware Error]: CPU 37: Machine Check Exception: 5 Bank 13: be00000000800400",
          node="mc-3", stream="kernel")
    s.sel("mc-3", 21 * MIN + 11 * SEC, "critical", "Memory", "Uncorrectable ECC error on DIMM A7 (CPU2)", "MEM0001")
    s.node_state("mc-3", 26 * MIN, "down", "Kill task failed")
    _clean(s, nodes, "mc-leaf", -5 * MIN, 29 * MIN)
    return s.arrival(), [Expect("mc-7", category="node_hardware", component="node:mc-3", ckpt_step=st,
                                ruled_out={"gpu", "net", "storage"}, lost_gpu_hours=_gh(32, 27 * MIN - (10 * MIN + 30 * SEC)))]


@scenario
def switch_discards_congestion_without_rdma_counters():
    """A RoCE fabric with only SNMP: egress discards surge on the leaf ports of the job's
    segment (the job's and a neighbour's), no errors, no link change; the job slows and
    its ranks time out. network_congestion on the segment."""
    s = Story("discards")
    nodes = ["sd-1", "sd-2", "sd-3"]
    _pair(s, nodes, "sd-leaf", "sd-pod")

    def surge(t):
        return {"in_discards": 0, "out_discards": 0} if t < 15 * MIN else {"out_discards": int((t - 15 * MIN) / SEC) * 900,
                                                                             "in_discards": 0}
    a = s.run("sd-40", 0, nodes[:2], 8, 0, 36 * MIN, "failed", exit_code=1)
    s.heartbeat(a, 30 * SEC, 15 * MIN, 30 * SEC, ranks="zero", step_time=1.0)
    s.heartbeat(a, 15 * MIN + 30 * SEC, 25 * MIN, 30 * SEC, ranks="zero", step_time=2.6, step0=300, steps_per_beat=4)
    for r in range(16):
        s.say(a, 35 * MIN + 10 * SEC + r * 20, nccl_watchdog(r, timeout_ms=600_000), rank=r)
    for i, n in enumerate(nodes):
        s.gpus(n, 8, -5 * MIN, 38 * MIN, 30 * SEC)
        s.bmc(n, -5 * MIN, 38 * MIN, 120 * SEC)
        s.switch_port("sd-leaf", f"swp{i + 1}", -5 * MIN, 38 * MIN, 30 * SEC, tweak=surge)
    return s.arrival(), [Expect("sd-40", category="network_congestion", component="segment:sd-pod",
                                ruled_out={"gpu", "hw"}, not_ruled_out={"net"}, ckpt_step=None,
                                lost_gpu_hours=_gh(16, 36 * MIN))]


@scenario
def checkpoint_filer_slow_seen_only_from_other_nodes():
    """The job's nodes ship no storage telemetry; other clients of the same checkpoint filer
    report its latency exploding. The job hangs inside a checkpoint write and is cancelled."""
    s = Story("filer")
    nodes = ["fl-1", "fl-2"]
    others = ["fl-7", "fl-8"]
    for i, n in enumerate(nodes + others):
        s.attach(n, [("mlx5_0", "fl-leaf", f"swp{i + 1}", "fl")], [("/ckpt", "nfs", "filer-9")])
        s.stack(n, driver="550.54.15")
    a = s.run("fl-3", 0, nodes, 8, 0, 70 * MIN, "cancelled", exit_code=None)
    good = s.heartbeat(a, 30 * SEC, 15 * MIN, 30 * SEC, ranks="zero")
    s.ckpt(a, 15 * MIN + 30 * SEC, good, f"/ckpt/fl-3/step{good}")
    st = s.heartbeat(a, 16 * MIN, 30 * MIN, 30 * SEC, ranks="zero", step0=good)
    s.ckpt(a, 30 * MIN + 10 * SEC, st, f"/ckpt/fl-3/step{st}", "started")
    for n in others:
        s.mount(n, "/ckpt", -10 * MIN, 72 * MIN, 30 * SEC,
                tweak=lambda t: {"write_lat_ms": 4_000.0, "read_lat_ms": 2_200.0, "write_mbps": 1.0} if t >= 27 * MIN else None)
    for i, n in enumerate(nodes):
        s.gpus(n, 8, -5 * MIN, 72 * MIN, 30 * SEC)
        s.switch_port("fl-leaf", f"swp{i + 1}", -5 * MIN, 72 * MIN, 60 * SEC)
    return s.arrival(), [Expect("fl-3", category="storage_slow", component="path:/ckpt", ruled_out={"gpu", "net"},
                                not_ruled_out={"storage", "hw"}, ckpt_step=good,
                                lost_gpu_hours=_gh(16, 30 * MIN - (15 * MIN + 30 * SEC)))]


@scenario
def time_limit_while_progressing():
    """The job was healthy and simply ran out of its time limit: scheduler."""
    s = Story("tlimit")
    nodes = ["tl-1"]
    _pair(s, nodes, "tl-leaf", "tl")
    a = s.run("tl-8", 0, nodes, 8, 0, 120 * MIN, "timeout", exit_code=None, reason="TimeLimit")
    st = s.heartbeat(a, 30 * SEC, 100 * MIN, 60 * SEC, ranks="zero")
    s.ckpt(a, 100 * MIN + 20 * SEC, st, f"/ckpt/tl-8/{st}")
    s.heartbeat(a, 101 * MIN, 119 * MIN, 60 * SEC, ranks="zero", step0=st)
    _clean(s, nodes, "tl-leaf", -5 * MIN, 122 * MIN, gpu_every=120 * SEC)
    return s.arrival(), [Expect("tl-8", category="scheduler", component="job:tl-8", ckpt_step=st,
                                ruled_out={"gpu", "net", "hw", "storage"},
                                lost_gpu_hours=_gh(8, 120 * MIN - (100 * MIN + 20 * SEC)))]


@scenario
def slurm_out_of_memory_with_cgroup_kill():
    """Slurm ends the job OUT_OF_MEMORY after the cgroup OOM killer hit a rank on the second
    node (the kernel line says so). host_oom on that node, not the first one."""
    s = Story("cgoom")
    nodes = ["co-1", "co-2"]
    _pair(s, nodes, "co-leaf", "co")
    a = s.run("co-5", 0, nodes, 4, 0, 14 * MIN, "out_of_memory", exit_code=None, signal=9)
    s.heartbeat(a, 30 * SEC, 13 * MIN, 30 * SEC, ranks="zero")
    s.say(a, 13 * MIN + 20 * SEC, "Memory cgroup out of memory: Killed process 99012 (python3) total-vm:301223400kB, "
          "anon-rss:250112300kB, file-rss:81232kB, shmem-rss:4kB, UID:1000 pgtables:512004kB oom_score_adj:0",
          node="co-2", stream="kernel")
    _clean(s, nodes, "co-leaf", -5 * MIN, 16 * MIN, gpn=4)
    return s.arrival(), [Expect("co-5", category="host_oom", component="node:co-2", ckpt_step=None,
                                ruled_out={"gpu", "net", "hw", "storage"}, lost_gpu_hours=_gh(8, 14 * MIN))]


@scenario
def failed_without_message_and_a_minor_bmc_warning():
    """The job exits 1 with no error text (its launcher only says a child failed); the only
    thing in any layer is a BMC fan warning on one of its nodes. A warning does not explain
    a crash: application (every infrastructure layer effectively clean), not node_hardware."""
    s = Story("fanwarn")
    nodes = ["fw-1", "fw-2"]
    _pair(s, nodes, "fw-leaf", "fw")
    a = s.run("fw-6", 0, nodes, 8, 0, 19 * MIN, "failed", exit_code=1)
    s.heartbeat(a, 30 * SEC, 18 * MIN, 30 * SEC, ranks="zero")
    s.emit("hw.sensor", 12 * MIN, {"sensor": "Fan2B", "type": "fan", "value": 2_100.0, "unit": "RPM", "status": "warning"},
           node="fw-2", source="redfish@fw-2-bmc")
    s.say(a, 18 * MIN + 40 * SEC, child_failed(4, "fw-1"), rank=0)
    _clean(s, nodes, "fw-leaf", -5 * MIN, 21 * MIN)
    return s.arrival(), [Expect("fw-6", category="application", component="job:fw-6", ckpt_step=None,
                                ruled_out={"gpu", "net", "storage"}, lost_gpu_hours=_gh(16, 19 * MIN))]


@scenario
def rollback_to_known_driver_then_silent_stall():
    """A driver upgrade was rolled back an hour ago to the version these nodes ran for weeks;
    a job then stalls with nothing in any layer. Returning to a known version is weak
    evidence: unknown, not change_regression."""
    s = Story("rollback")
    nodes = ["rb-1", "rb-2"]
    for i, n in enumerate(nodes):
        s.attach(n, [("mlx5_0", "rb-leaf", f"swp{i + 1}", "rb")], [("/ckpt", "nfs", "rb-nas")], ts=-10 * HOUR)
        s.stack(n, -10 * HOUR, driver="535.183.01", nccl="2.20.5")
        s.change(n, -5 * HOUR, "driver", "535.183.01", "550.90.07")
        s.change(n, -60 * MIN, "driver", "550.90.07", "535.183.01", ticket="CHG-9-rollback")
    a = s.run("rb-2", 0, nodes, 8, 0, 45 * MIN, "cancelled", exit_code=None)
    st = s.heartbeat(a, 30 * SEC, 12 * MIN, 30 * SEC, ranks="zero")
    _clean(s, nodes, "rb-leaf", -5 * MIN, 47 * MIN)
    return s.arrival(), [Expect("rb-2", category="unknown", component="job:rb-2", ckpt_step=None,
                                ruled_out={"gpu", "net", "hw", "storage"}, lost_gpu_hours=_gh(16, 12 * MIN))]


@scenario
def pod_reason_oomkilled_only():
    """The orchestrator only says the worker pod ended OOMKilled (exit 137); no kernel line, no
    runtime.container event. host_oom on the pod's node."""
    s = Story("reasonoom")
    nodes = ["eks-p5-ip-172-31-9-7"]
    _pair(s, nodes, "eks-leaf", "eks", mounts=())
    a = s.run("ray-train-7x", 0, nodes, 8, 0, 9 * MIN, "failed", exit_code=137, reason="OOMKilled", source="kube-apiserver")
    s.heartbeat(a, 30 * SEC, 8 * MIN + 30 * SEC, 30 * SEC, ranks="zero")
    _clean(s, nodes, "eks-leaf", -5 * MIN, 11 * MIN, mount=None, bmc=False)
    return s.arrival(), [Expect("ray-train-7x", category="host_oom", component=f"node:{nodes[0]}", ckpt_step=None,
                                ruled_out={"gpu", "net"}, lost_gpu_hours=_gh(8, 9 * MIN))]


@scenario
def slurm_step_oom_kill_named_by_srun():
    """Slurm reports an oom_kill event in the step and srun names the node whose task died
    (the second node), while the log lines are collected on the batch host (the first)."""
    s = Story("srunoom")
    nodes = ["sl-01", "sl-02"]
    _pair(s, nodes, "sl-leaf", "sl")
    a = s.run("881234", 0, nodes, 4, 0, 16 * MIN, "failed", exit_code=137)
    s.heartbeat(a, 30 * SEC, 15 * MIN, 30 * SEC, ranks="zero")
    s.say(a, 15 * MIN + 20 * SEC, "srun: error: sl-02: task 6: Out Of Memory", node="sl-01")
    s.say(a, 15 * MIN + 21 * SEC, "slurmstepd: error: Detected 1 oom_kill event in StepId=881234.0. Some of the step "
          "tasks have been OOM Killed.", node="sl-02")
    _clean(s, nodes, "sl-leaf", -5 * MIN, 18 * MIN, gpn=4)
    return s.arrival(), [Expect("881234", category="host_oom", component="node:sl-02", ckpt_step=None,
                                ruled_out={"gpu", "net", "hw", "storage"}, lost_gpu_hours=_gh(8, 16 * MIN))]


@scenario
def jax_resource_exhausted_oom():
    """A JAX job: XLA reports RESOURCE_EXHAUSTED out of memory on process 3 (GPU 3 of a
    single 8-GPU node). gpu_oom on that GPU."""
    s = Story("jaxoom")
    nodes = ["tpu-less-gpu-1"]
    _pair(s, nodes, "j-leaf", "j")
    a = s.run("jx-1", 0, nodes, 8, 0, 7 * MIN, "failed", exit_code=1)
    s.heartbeat(a, 30 * SEC, 6 * MIN, 30 * SEC, ranks="zero")
    s.say(a, 6 * MIN + 30 * SEC, traceback("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while "
                                           "trying to allocate 17179869184 bytes."), rank=3)
    _clean(s, nodes, "j-leaf", -5 * MIN, 9 * MIN)
    return s.arrival(), [Expect("jx-1", category="gpu_oom", component="gpu:tpu-less-gpu-1/3", ckpt_step=None,
                                ruled_out={"net", "hw", "storage"}, lost_gpu_hours=_gh(8, 7 * MIN))]


@scenario
def spine_uplink_flap_under_a_cross_leaf_job():
    """A leaf-to-spine uplink (an inter-switch port: no node behind it, so not in any node's
    topology) flaps; a job whose nodes sit on two leaves gets IB transport errors and dies.
    A second job inside one leaf, on the same minutes, dies of a user bug: its traffic never
    crosses the spine, so the flap is not its cause."""
    s = Story("spineflap")
    left, right = ["sp-l1", "sp-l2"], ["sp-r1", "sp-r2"]
    for i, n in enumerate(left + right):
        leaf = "leaf-L" if n in left else "leaf-R"
        s.attach(n, [("mlx5_0", leaf, f"{i % 2 + 1}", "pod-sp")], [])
        s.stack(n, driver="550.54.15")
    a = s.run("sp-1", 0, [left[0], right[0]], 8, 0, 31 * MIN, "failed", exit_code=1)
    s.heartbeat(a, 30 * SEC, 29 * MIN, 30 * SEC, ranks="zero")
    b = s.run("sp-2", 0, [left[1]], 8, 0, 30 * MIN + 30 * SEC, "failed", exit_code=1)
    s.heartbeat(b, 30 * SEC, 29 * MIN, 30 * SEC, ranks="zero")
    for t in (29 * MIN + 10 * SEC, 29 * MIN + 40 * SEC, 30 * MIN + 5 * SEC):
        s.link("leaf-L", "uplink-49", t, "down")
        s.link("leaf-L", "uplink-49", t + 8 * SEC, "up")
    for r in (3, 9, 12):
        s.say(a, 30 * MIN + 20 * SEC + r * 100, "NCCL WARN NET/IB : Got completion from peer 10.1.0.%d<33012> with status=12 "
              "opcode=0 len=0 vendor err 129 (Recv)" % r, rank=r)
    s.say(b, 30 * MIN + 10 * SEC, traceback("KeyError: 'pixel_values'"), rank=0)
    for i, n in enumerate(left + right):
        s.gpus(n, 8, -5 * MIN, 33 * MIN, 30 * SEC)
        s.switch_port("leaf-L" if n in left else "leaf-R", f"{i % 2 + 1}", -5 * MIN, 33 * MIN, 60 * SEC)
    return s.arrival(), [Expect("sp-1", category="network_link", component="port:leaf-L/uplink-49", ruled_out={"gpu"},
                                not_ruled_out={"net"}, ckpt_step=None, lost_gpu_hours=_gh(16, 31 * MIN)),
                         Expect("sp-2", category="application", component="job:sp-2", ruled_out={"gpu", "net"},
                                ckpt_step=None, lost_gpu_hours=_gh(8, 30 * MIN + 30 * SEC))]


@scenario
def dataset_mount_missing_then_file_not_found():
    """autofs failed to mount /mnt/datasets on one node shortly before the job; the rank there
    dies with FileNotFoundError on a shard under it. storage_unavailable on the mount, not a
    user bug. The same error on a node whose mount is fine (second job) is application."""
    s = Story("autofs")
    nodes = ["af-1", "af-2", "af-3"]
    _pair(s, nodes, "af-leaf", "af", mounts=(("/mnt/datasets", "nfs", "ds-filer"),))
    s.mount_state("af-2", "/mnt/datasets", -8 * MIN, "missing", "mount.nfs: Connection timed out")
    a = s.run("af-10", 0, nodes[:2], 8, 0, 3 * MIN, "failed", exit_code=1)
    s.say(a, 2 * MIN + 30 * SEC, traceback("FileNotFoundError: [Errno 2] No such file or directory: "
                                           "'/mnt/datasets/c4/en/c4-train.00017-of-01024.json.gz'"), rank=12)
    b = s.run("af-11", 0, nodes[2:], 8, 0, 4 * MIN, "failed", exit_code=1)
    s.say(b, 3 * MIN + 30 * SEC, traceback("FileNotFoundError: [Errno 2] No such file or directory: "
                                           "'/mnt/datasets/c4/en/c4-validation.json'"), rank=3)
    _clean(s, nodes, "af-leaf", -5 * MIN, 6 * MIN, mount=None)
    return s.arrival(), [Expect("af-10", category="storage_unavailable", component="path:/mnt/datasets", ckpt_step=None,
                                ruled_out={"gpu", "net", "hw"}, lost_gpu_hours=_gh(16, 3 * MIN)),
                         Expect("af-11", category="application", component="job:af-11", ckpt_step=None,
                                ruled_out={"gpu", "net", "hw"}, lost_gpu_hours=_gh(8, 4 * MIN))]


@scenario
def users_own_module_missing_is_application():
    """A job dies at start with ModuleNotFoundError for the user's own package (a bad
    PYTHONPATH), on an image other jobs run fine. Application, not a broken image."""
    s = Story("ownmod")
    nodes = ["om-1"]
    _pair(s, nodes, "om-leaf", "om")
    ok = s.run("om-1a", 0, nodes, 8, -60 * MIN, -20 * MIN, "completed", exit_code=0, image="reg/lab/train:7")
    s.heartbeat(ok, -60 * MIN + 30 * SEC, -21 * MIN, 60 * SEC, ranks="zero")
    a = s.run("om-1b", 0, nodes, 8, 0, 1 * MIN, "failed", exit_code=1, image="reg/lab/train:7")
    s.say(a, 40 * SEC, traceback("ModuleNotFoundError: No module named 'labutils.data'"), rank=0)
    _clean(s, nodes, "om-leaf", -65 * MIN, 2 * MIN)
    return s.arrival(), [Expect("om-1b", category="application", component="job:om-1b", ckpt_step=None,
                                ruled_out={"gpu", "net", "hw", "storage"}, lost_gpu_hours=_gh(8, 1 * MIN)),
                         Expect("om-1a", incident=False)]


@scenario
def image_rollout_then_time_limit_and_assertion():
    """A new image tag rolls out and three jobs on it die at import (an undefined symbol in a
    compiled extension): the image's regression. The same hours, two jobs requeued onto the new
    image stop for other reasons: one reaches its time limit while training (the scheduler's
    ending, never a change), one dies of a plain AssertionError in the user's code
    (application). A change is context; it explains only failures a change produces."""
    s = Story("imgroll")
    old, new = "registry.acme/llm-train:3.1.0", "registry.acme/llm-train:3.2.0"
    nodes = [f"h100-{i:02d}" for i in range(1, 9)]
    for i, n in enumerate(nodes):
        s.attach(n, [("mlx5_0", "ir-leaf", f"swp{i + 1}", "ir")], [("/ckpt", "nfs", "ir-nas")])
        s.stack(n, driver="550.90.07", cuda="12.4", nccl="2.21.5")
    exp = []
    for k, job in enumerate(("ir-101", "ir-102", "ir-103")):
        ns = nodes[k:k + 1]
        a0 = s.run(job, 0, ns, 8, -50 * MIN + k * MIN, -30 * MIN + k * MIN, "preempted", exit_code=None, image=old,
                   reason="Preempted")
        s.heartbeat(a0, -50 * MIN + k * MIN + 30 * SEC, -31 * MIN + k * MIN, 30 * SEC, ranks="zero")
        b = s.run(job, 1, ns, 8, -20 * MIN + k * 2 * MIN, -19 * MIN + k * 2 * MIN, "failed", exit_code=1, image=new)
        s.say(b, -19 * MIN + k * 2 * MIN - 10 * SEC, traceback(
            "ImportError: /usr/local/lib/python3.11/site-packages/apex_C.cpython-311-x86_64-linux-gnu.so: "
            "undefined symbol: _ZN2at4_ops5zeros4callEN3c108ArrayRefIlEE"), rank=0)
        exp.append(Expect(job, 0, category="scheduler", component=f"job:{job}"))
        exp.append(Expect(job, 1, category="change_regression", component=f"version:image={new}"))
    # requeued onto the new image, trains for 40 minutes and reaches its time limit
    t0 = s.run("ir-201", 0, nodes[4:6], 8, -45 * MIN, -25 * MIN, "preempted", exit_code=None, image=old, reason="Preempted")
    s.heartbeat(t0, -45 * MIN + 30 * SEC, -26 * MIN, 30 * SEC, ranks="zero")
    t1 = s.run("ir-201", 1, nodes[4:6], 8, 0, 40 * MIN, "timeout", exit_code=None, image=new, reason="TimeLimit")
    s.heartbeat(t1, 30 * SEC, 40 * MIN - 20 * SEC, 30 * SEC, ranks="zero")
    exp.append(Expect("ir-201", 0, category="scheduler", component="job:ir-201"))
    exp.append(Expect("ir-201", 1, category="scheduler", component="job:ir-201", ckpt_step=None))
    # requeued onto the new image, dies of an assertion in the user's own module
    u0 = s.run("ir-301", 0, nodes[6:7], 8, -45 * MIN, -25 * MIN, "preempted", exit_code=None, image=old, reason="Preempted")
    s.heartbeat(u0, -45 * MIN + 30 * SEC, -26 * MIN, 30 * SEC, ranks="zero")
    u1 = s.run("ir-301", 1, nodes[6:7], 8, 2 * MIN, 14 * MIN, "failed", exit_code=1, image=new)
    s.heartbeat(u1, 2 * MIN + 30 * SEC, 13 * MIN, 30 * SEC, ranks="zero")
    s.say(u1, 13 * MIN + 40 * SEC, traceback("AssertionError: labels and logits disagree on the sequence length",
                                             ("train.py", "model/loss.py")), rank=3)
    exp.append(Expect("ir-301", 0, category="scheduler", component="job:ir-301"))
    exp.append(Expect("ir-301", 1, category="application", component="job:ir-301", ckpt_step=None))
    # the same, with the assertion a CUDA kernel of the user's loss raises (a label out of range)
    v0 = s.run("ir-302", 0, nodes[3:4], 8, -45 * MIN, -25 * MIN, "preempted", exit_code=None, image=old, reason="Preempted")
    s.heartbeat(v0, -45 * MIN + 30 * SEC, -26 * MIN, 30 * SEC, ranks="zero")
    v1 = s.run("ir-302", 1, nodes[3:4], 8, 15 * MIN, 24 * MIN, "failed", exit_code=1, image=new)
    s.heartbeat(v1, 15 * MIN + 30 * SEC, 23 * MIN, 30 * SEC, ranks="zero")
    s.say(v1, 23 * MIN + 20 * SEC, "/opt/conda/conda-bld/pytorch_1708025847130/work/aten/src/ATen/native/cuda/Loss.cu:250: "
          "nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.",
          rank=2)
    s.say(v1, 23 * MIN + 21 * SEC, traceback("RuntimeError: CUDA error: device-side assert triggered\nCUDA kernel errors "
                                             "might be asynchronously reported at some other API call",
                                             ("train.py", "model/loss.py")), rank=2)
    exp.append(Expect("ir-302", 0, category="scheduler", component="job:ir-302"))
    exp.append(Expect("ir-302", 1, category="application", component="job:ir-302", ckpt_step=None))
    # requeued onto the new image across two nodes, one of which still runs the old driver: its
    # ranks fail at start with CUDA's 'driver too old' - that node's driver, not the image
    stale = "h100-09"
    s.attach(stale, [("mlx5_0", "ir-leaf", "swp9", "ir")], [("/ckpt", "nfs", "ir-nas")])
    s.stack(stale, driver="535.104.05", cuda="12.2", nccl="2.21.5")
    nodes.append(stale)
    d0 = s.run("ir-401", 0, [nodes[7], stale], 8, -45 * MIN, -25 * MIN, "preempted", exit_code=None, image=old,
               reason="Preempted")
    s.heartbeat(d0, -45 * MIN + 30 * SEC, -26 * MIN, 30 * SEC, ranks="zero")
    d1 = s.run("ir-401", 1, [nodes[7], stale], 8, 5 * MIN, 7 * MIN, "failed", exit_code=1, image=new)
    for r in d1.ranks_on(stale):
        s.say(d1, 6 * MIN + r * 40, traceback("RuntimeError: The NVIDIA driver on your system is too old (found version "
                                               "12020). Please update your GPU driver by downloading and installing a new "
                                               "version from the URL: http://www.nvidia.com/Download/index.aspx"), rank=r)
    exp.append(Expect("ir-401", 0, category="scheduler", component="job:ir-401"))
    exp.append(Expect("ir-401", 1, category="driver_software", component=f"node:{stale}", ckpt_step=None))
    # the same node alone, requeued onto the new image: the same error, the same node's driver
    e0 = s.run("ir-402", 0, [stale], 8, -24 * MIN, -12 * MIN, "preempted", exit_code=None, image=old, reason="Preempted")
    s.heartbeat(e0, -24 * MIN + 30 * SEC, -13 * MIN, 30 * SEC, ranks="zero")
    e1 = s.run("ir-402", 1, [stale], 8, 10 * MIN, 11 * MIN, "failed", exit_code=1, image=new)
    s.say(e1, 10 * MIN + 40 * SEC, traceback("RuntimeError: CUDA driver version is insufficient for CUDA runtime version"),
          rank=0)
    exp.append(Expect("ir-402", 0, category="scheduler", component="job:ir-402"))
    exp.append(Expect("ir-402", 1, category="driver_software", component=f"node:{stale}", ckpt_step=None))
    for n in nodes:
        s.gpus(n, 8, -55 * MIN, 42 * MIN, 60 * SEC)
        s.bmc(n, -55 * MIN, 42 * MIN, 300 * SEC)
    return s.arrival(), exp


@scenario
def local_scratch_full_on_another_node():
    """Every node has its own /scratch on local NVMe (xfs). /scratch of s-03, a node the job does
    not use, fills up to 100 % while the job on s-01/s-02 stops making progress with no error
    anywhere; the user cancels it. Another node's local disk cannot stall this job: unknown, and
    the storage layer stays clean (the job's own /scratch mounts were fine)."""
    s = Story("localfs")
    nodes = ["s-01", "s-02", "s-03"]
    for i, n in enumerate(nodes):
        s.attach(n, [("mlx5_0", "leaf-s", f"swp{i + 1}", "s")], [("/scratch", "xfs", None)])
        s.stack(n, driver="550.54.15", nccl="2.21.5")
    a = s.run("sc-88", 0, nodes[:2], 4, 0, 55 * MIN, "cancelled", exit_code=None, signal=15)
    st = s.heartbeat(a, 20 * SEC, 30 * MIN, 20 * SEC)
    for n in nodes:
        s.gpus(n, 4, -5 * MIN, 57 * MIN, 15 * SEC)
        s.bmc(n, -5 * MIN, 57 * MIN, 60 * SEC)
        s.switch_port("leaf-s", f"swp{nodes.index(n) + 1}", -5 * MIN, 57 * MIN, 30 * SEC)
        full = (lambda t: {"used_pct": 100.0, "write_mbps": 0.0} if t >= 28 * MIN else {"used_pct": 92.0 + t / MIN / 4}) \
            if n == "s-03" else None
        s.mount(n, "/scratch", -5 * MIN, 57 * MIN, 30 * SEC, fs="xfs", tweak=full)
    return s.arrival(), [Expect("sc-88", category="unknown", component="job:sc-88", ruled_out={"storage"},
                                ckpt_step=None)]


@scenario
def nfs_hang_mounts_known_only_from_samples():
    """The inventory lists no storage for the nodes (an agent without the mount table); the
    mounts are known only from their storage samples. The checkpoint filer slows down, the
    kernel says 'nfs: server filer-02 not responding' and the next checkpoint write hangs: the
    culprit is the mount /mnt/ckpt (the longest mount point seen holding the checkpoint's path),
    not '/mnt' and not an unresolved 'path:?'."""
    s = Story("nfsnoinv")
    nodes = ["gpu-nn-01", "gpu-nn-02"]
    for i, n in enumerate(nodes):
        s.attach(n, [("ib0", "ib-leaf-09", f"{i + 1}/1", "ib-pod-9")], [])
        s.stack(n, driver="535.183.01", nccl="2.18.3")
    a = s.run("train-5582", 0, nodes, 4, 0, 60 * MIN, "cancelled", exit_code=None, signal=15)
    st = s.heartbeat(a, 20 * SEC, 10 * MIN - 20 * SEC, 20 * SEC)
    s.ckpt(a, 10 * MIN, st, f"/mnt/ckpt/train-5582/step_{st:07d}.pt")
    good = st
    st = s.heartbeat(a, 10 * MIN + 20 * SEC, 22 * MIN, 20 * SEC, step0=st)
    s.ckpt(a, 22 * MIN + 10 * SEC, st, f"/mnt/ckpt/train-5582/step_{st:07d}.pt", "started")
    s.say(a, 21 * MIN, "nfs: server filer-02 not responding, still trying", node=nodes[1], stream="kernel")

    def slow(t):
        if t >= 19 * MIN:
            return {"write_lat_ms": 2_800.0 + (t % 5) * 200, "read_lat_ms": 950.0, "write_mbps": 2.0, "read_mbps": 4.0}
        return None
    for n in nodes:
        s.mount(n, "/mnt/ckpt", -20 * MIN, 62 * MIN, 30 * SEC, tweak=slow)
        s.mount(n, "/mnt/home", -20 * MIN, 62 * MIN, 30 * SEC)
        s.gpus(n, 4, -20 * MIN, 62 * MIN, 15 * SEC, tweak=lambda t, g: {"util_pct": 0.0} if t > 22 * MIN else None)
        s.bmc(n, -20 * MIN, 62 * MIN, 60 * SEC)
    return s.arrival(), [Expect("train-5582", category="storage_slow", component="path:/mnt/ckpt",
                                ruled_out={"gpu", "hw"}, not_ruled_out={"storage"}, ckpt_step=good)]


@scenario
def enospc_under_a_mount_known_from_samples():
    """The inventory lists '/' and '/data' for the node; '/data/shared', a separate file system
    mounted under it, is known only from its storage samples. It fills up and the job dies of
    ENOSPC writing '/data/shared/run7/ckpt.pt': the culprit is the longest mount point seen
    holding that file, /data/shared, not /data."""
    s = Story("enospcnest")
    node = "gpu-ds-01"
    s.attach(node, [("ib0", "ib-leaf-03", "5/1", "ib-pod-3")], [("/", "ext4", None), ("/data", "nfs", "nas-d")])
    s.stack(node, driver="550.54.15", nccl="2.21.5")
    a = s.run("ds-7", 0, [node], 8, 0, 21 * MIN, "failed", exit_code=1)
    st = s.heartbeat(a, 20 * SEC, 20 * MIN, 20 * SEC)
    s.say(a, 20 * MIN + 30 * SEC, traceback(
        "OSError: [Errno 28] No space left on device: '/data/shared/run7/ckpt.pt'", ("train.py", "torch/serialization.py")),
        rank=0)
    s.mount(node, "/data/shared", -20 * MIN, 23 * MIN, 30 * SEC, fs="nfs4",
            tweak=lambda t: {"used_pct": 100.0} if t >= 19 * MIN else {"used_pct": 90.0 + t / MIN / 3})
    s.mount(node, "/data", -20 * MIN, 23 * MIN, 30 * SEC, fs="nfs4")
    s.gpus(node, 8, -20 * MIN, 23 * MIN, 15 * SEC)
    s.bmc(node, -20 * MIN, 23 * MIN, 60 * SEC)
    return s.arrival(), [Expect("ds-7", category="storage_full", component="path:/data/shared", ckpt_step=None)]
