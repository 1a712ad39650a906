"""Named scenarios: which faults (and decoys) to inject into which fleet for how long."""

from __future__ import annotations

from dataclasses import dataclass, field

from .plan import FaultSpec


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    imitates: str
    faults: tuple[FaultSpec, ...] = ()
    decoys: tuple[str, ...] = ("sel_idle", "flap_unused", "xid63")
    nodes: int = 16
    gpus_per_node: int = 8
    hours: float = 2.5
    extra: dict = field(default_factory=dict)


def F(kind: str, a: float = 0.3, b: float = 0.6, **params) -> FaultSpec:
    return FaultSpec(kind, (a, b), params)


_ALL_DECOYS = ("sel_idle", "flap_unused", "xid79_idle", "thermal_idle", "xid63", "storage_blip", "benign_change")

SCENARIOS: dict[str, Scenario] = {s.name: s for s in [
    Scenario("healthy", "no faults: completions, user cancellations, benign warnings only",
             "a quiet day: jobs run and complete, a few users cancel, benign SEL entries and power-cap throttles",
             decoys=("xid63", "benign_change")),
    Scenario("gpu-xid79", "one GPU falls off the bus; every other rank hits the NCCL watchdog",
             "Xid 79 (GPU fallen off the bus, often after PCIe replays), the job hangs in a collective until "
             "ProcessGroupNCCL's watchdog aborts every rank; or the node wedges and Slurm fails the job NODE_FAIL",
             (F("gpu_xid79"),)),
    Scenario("gpu-ecc", "uncorrectable ECC / row-remap failure on one GPU",
             "Xid 48 DBE / Xid 94-95 contained-uncontained / Xid 64 row remap failure; SBE growth and Xid 92 first; "
             "CUDA 'uncorrectable ECC error encountered' on the culprit rank, NCCL remote errors elsewhere",
             (F("gpu_ecc"),)),
    Scenario("gpu-nvlink", "NVLink error counters climb, then Xid 74",
             "NVLink CRC/replay errors growing on one GPU, Xid 74 fatal link error, CUDA 'uncorrectable NVLink error'",
             (F("gpu_nvlink"),)),
    Scenario("node-hardware", "BMC-critical failure (PSU, memory UE, CPU IERR, fan) takes a node down",
             "a node drops (SEL critical entry, sensors out of range), its switch ports lose link, peers see "
             "NET/IB completion errors, Slurm marks the node down and the job NODE_FAIL, then requeues it",
             (F("node_hw", min_nodes=2),)),
    Scenario("thermal-straggler", "one GPU throttles; the whole job slows and misses its time limit",
             "a failing fan / blocked airflow: one GPU at 90 C with hw_thermal throttling and low SM clock makes "
             "every synchronous step slower until Slurm kills the job at its TimeLimit",
             (F("thermal", 0.2, 0.35),), hours=3.0),
    Scenario("port-down", "a switch port flaps/goes down; ranks on both ends report NCCL errors",
             "a dying transceiver: symbol errors climb, link flaps (SNMP linkDown/linkUp, mlx5 Link down), "
             "NCCL 'NET/IB : Got completion from peer ... status=12', then watchdog timeouts on every rank",
             (F("port_down"),)),
    Scenario("congestion", "RoCE congestion on one leaf: CNP/ECN storm, retransmits, discards",
             "an oversubscribed leaf: ECN marks and CNPs explode, out_of_sequence / local_ack_timeout grow, "
             "switch out-discards without link errors; step time climbs, then transport retry exceeded",
             (F("congestion", 0.25, 0.45),)),
    Scenario("storage-slow", "the checkpoint filesystem slows until a checkpoint hangs and the job stalls",
             "an overloaded NFS/VAST backend: write latency x100, 'nfs: server ... not responding, still trying', "
             "hung-task warnings; the job blocks in torch.save with no progress; the user cancels it later",
             (F("storage_slow", 0.2, 0.35),), hours=3.0),
    Scenario("storage-unavailable", "a mount goes stale/missing/read-only under a running job",
             "Lustre client eviction or NFS stale handle (DataLoader 'OSError: [Errno 116] Stale file handle') "
             "or a read-only remount failing the checkpoint (Errno 30)",
             (F("storage_unavailable", 0.3, 0.5),)),
    Scenario("storage-full", "the checkpoint filesystem fills up; the checkpoint fails with ENOSPC",
             "quota/capacity exhaustion: used_pct climbs to 100%, torch.save raises 'No space left on device'",
             (F("storage_full", 0.35, 0.55),), hours=3.0),
    Scenario("gpu-oom", "CUDA out of memory on one rank",
             "torch.OutOfMemoryError on one rank (long sequence / fragmentation), GPU memory at the limit; the "
             "requeued run on the same nodes may hit it again",
             (F("gpu_oom"),)),
    Scenario("host-oom", "the kernel OOM killer (memory cgroup) kills a rank",
             "DataLoader workers exhaust host RAM: 'Memory cgroup out of memory: Killed process', container "
             "oom_killed, torchrun 'Signal 9 (SIGKILL)', Slurm OUT_OF_MEMORY",
             (F("host_oom"),)),
    Scenario("driver-xid", "a GSP/driver fault (Xid 119/120/31) with no hardware sign",
             "GSP RPC timeout (Xid 119) or GSP error (Xid 120) on one GPU, the rank hangs or CUDA reports "
             "'unspecified launch failure'; ECC, temperatures, NVLink and PCIe stay clean",
             (F("driver_xid"),)),
    Scenario("driver-mismatch", "one node missed the driver upgrade; the job that lands on it dies at init",
             "an inconsistent fleet: one node on driver 535 (CUDA 12.2) among 550s; ranks on it print "
             "'The NVIDIA driver on your system is too old'",
             (F("driver_mismatch", 0.0, 0.0),)),
    Scenario("change-regression", "a rolling driver/NCCL/kernel upgrade breaks jobs on upgraded nodes",
             "a version rollout (inventory.change) after which several jobs that start on upgraded nodes fail "
             "(illegal memory access + Xid 13/31, NCCL init errors or hangs, segfaults)",
             (F("change_regression", 0.1, 0.2),), hours=3.0),
    Scenario("application", "a user code error; every infrastructure layer clean",
             "Python exception in user code (KeyError, shape mismatch, NaN assert, IndexError, illegal memory "
             "access with benign Xid 13/43), repeated on each retry",
             (F("application"),)),
    Scenario("scheduler", "preemption and a too-short time limit",
             "Slurm preempts a job for a higher-priority one and another job reaches its TimeLimit with all "
             "layers healthy",
             (F("preempt", 0.3, 0.5), F("sched_timelimit", 0.2, 0.3)), hours=3.0),
    Scenario("unknown", "progress stops with no evidence in any layer",
             "a silent hang (deadlock) with clean telemetry; the user eventually cancels",
             (F("unknown"),)),
    Scenario("mixed", "several different faults in one fleet, with every decoy",
             "a busy day: GPU, network, storage, OOM and application failures interleaved with decoys",
             (F("gpu_xid79", 0.15, 0.3), F("port_down", 0.25, 0.45), F("gpu_oom", 0.3, 0.5),
              F("storage_full", 0.4, 0.55), F("application", 0.45, 0.6), F("host_oom", 0.5, 0.65),
              F("driver_xid", 0.55, 0.7)), decoys=_ALL_DECOYS, nodes=32, hours=4.0),
    Scenario("mixed-hard", "every hard case at once: hangs, a straggler, a stall, a node loss, congestion, decoys",
             "a bad night: a GPU drops (all other ranks time out), a node loses power (its links go down too), "
             "a throttled GPU drags a job past its limit, a checkpoint hangs on slow storage, a leaf congests, "
             "a user bug with benign Xids, and decoy alarms on nodes outside the failing jobs",
             (F("gpu_xid79", 0.1, 0.25), F("node_hw", 0.15, 0.3, min_nodes=2), F("thermal", 0.15, 0.3),
              F("storage_slow", 0.3, 0.45, path="/ckpt"), F("congestion", 0.35, 0.5), F("application", 0.45, 0.6),
              F("unknown", 0.5, 0.6)), decoys=_ALL_DECOYS, nodes=32, hours=4.0),
    Scenario("lemon-node", "one node keeps failing jobs over many hours (repeat offender)",
             "a marginal node (bad riser/GPU) that passes health checks after each reboot but fails job after "
             "job with Xid 79/48/74 across 12 hours",
             (F("gpu_xid79", 0.08, 0.15, node="LEMON"), F("gpu_ecc", 0.3, 0.4, node="LEMON"),
              F("gpu_xid79", 0.55, 0.65, node="LEMON"), F("gpu_nvlink", 0.78, 0.88, node="LEMON")),
             hours=12.0),
    Scenario("flapping-port", "one switch port flaps repeatedly and fails several jobs",
             "a marginal cable on one leaf port: link down/up episodes hours apart, each killing whatever job "
             "uses the node behind it",
             (F("port_down", 0.1, 0.2, port="FLAP"), F("port_down", 0.35, 0.45, port="FLAP"),
              F("port_down", 0.6, 0.7, port="FLAP")), hours=8.0),
    Scenario("bad-image-rollout", "a new training image fails every job that uses it",
             "a container image promotion with a broken transformer_engine build: import error on every job "
             "started from it",
             (F("bad_image", 0.15, 0.25),), hours=3.0),
    Scenario("degrading-storage", "checkpoint storage slows over hours until a job stalls",
             "a backend degrading over a shift (failing disk pool / rebuild): write latency rising for hours, "
             "checkpoints slower and slower, then one stalls",
             (F("storage_slow", 0.55, 0.65, path="/ckpt", ramp_ms=4 * 3600 * 1000, peak=150.0),), hours=6.0),
]}


def names() -> list[str]:
    return list(SCENARIOS)
