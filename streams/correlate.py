"""Correlation: one job attempt's record + the signals on its resources -> ``Incident``.

Causal rules (general, not fitted to any scenario):

1. A *candidate cause* is a signal with a root-cause category, on the job's own resources
   (its nodes and their GPUs, the switch ports its NICs hang off, the mounts its nodes use,
   its segment for congestion) and inside ``[start - lookback, cutoff]``.
2. Signals after the failure explain less (a consequence or an echo); old signals decay.
3. An XID that NVIDIA lists as possibly application-caused, or that is not fatal, and that
   comes after an application error on the same node is the echo of that error, not its
   cause.
4. Candidates are ranked by one rule (``rank``, docs/diagnosis.md): by the confidence they
   show, the root cause is the first and its confidence is the one shown everywhere; an
   earlier time only breaks ties (the rank that *shows* the symptom, e.g. an NCCL timeout on
   a healthy node, is not a candidate: the one GPU / port / mount with an actual fault is).
   A one-off fault over before the attempt began, which the attempt then trained past,
   weighs less; a time limit yields to a slowdown of weight that made the job reach it.
5. ``application`` only when no infrastructure candidate of weight remains; ``unknown``
   when nothing explains the interruption; ``scheduler`` for preemption and a time limit
   reached while the job was progressing.
"""

from __future__ import annotations

import hashlib
import re
from typing import Callable, Iterable

import msgspec
from msgspec import Struct

from ..schemas.bounds import cap_incident
from ..schemas.outputs import Affected, Cause, Checkpoint, EvidenceItem, Incident, Retry
from .detectors.job import AttemptRecord
from .join import FABRIC_LINK, View
from .signals import Signal
from .xid import lookup as xid_lookup
from .rules.ranking import (CAL_CEIL, CAL_FLOOR, CONFIDENCE_DIGITS, CONFIDENCE_MAX, CONFIDENCE_MIN,  # noqa: F401
                            MAX_HYPOTHESES, UNKNOWN_CONFIDENCE, confidence, rank, rank_key, root_confidence,
                            shown_confidences)
from .rules.storage import (HANG_CATEGORIES, HANG_REPORT_MS, LOCAL_FS, STORAGE_CATEGORIES,  # noqa: F401
                            UNFELT_STORAGE_FACTOR, UNUSED_MOUNT_FACTOR, _felt_here, _felt_paths, _host,
                            _local_fs, _lustre_fsname, _mount_for_log, _mount_point, _prefer_used_mount, _under,
                            slow_at_stall)

INFRA_LAYERS = ("gpu", "hw", "net", "storage")
# python exceptions that are code bugs whatever the infrastructure does
CODE_EXCEPTIONS = frozenset({
    "KeyError", "ValueError", "TypeError", "AttributeError", "IndexError", "NameError", "ImportError",
    "ModuleNotFoundError", "AssertionError", "ZeroDivisionError", "NotImplementedError", "SyntaxError",
    "UnboundLocalError", "RecursionError", "FileNotFoundError", "json.decoder.JSONDecodeError",
})
# signatures that report an application-side error (for the echo rule)
APP_ERROR_SIGS = frozenset({"python_traceback", "segfault", "cuda_illegal_address", "cuda_oom", "cuda_device_assert"})
# signatures of the user's own data or code whatever the stack runs (a failed assertion in a
# CUDA kernel checking the user's data): never what a version change produces
USER_BUG_SIGS = frozenset({"cuda_device_assert"})
# stack components a training job runs on (a change of BMC firmware rarely breaks one)
RUNTIME_COMPONENTS = frozenset({"driver", "cuda", "nccl", "image", "framework", "ofed", "kernel",
                                "container_runtime", "gpu_firmware"})
# categories that slow a job down or crash it, but do not leave it silently hung
# exceptions of broken packaging: what an image or library change produces
LIB_EXCEPTIONS = frozenset({"ImportError", "ModuleNotFoundError"})
# categories of a concrete fault on the job's path (better explanations than a version change)
CONCRETE = frozenset({"gpu_hardware", "gpu_nvlink", "node_hardware", "thermal_throttle", "network_link",
                      "network_congestion", "storage_slow", "storage_unavailable", "storage_full", "gpu_oom",
                      "host_oom"})
# components whose mismatch inside one job breaks it (CUDA runtime vs driver, NCCL across ranks)
ABI_COMPONENTS = frozenset({"driver", "cuda", "nccl", "ofed", "framework"})
# the driver stack: a driver/GSP fault after its change is the change's doing
DRIVER_STACK = frozenset({"driver", "cuda", "gpu_firmware"})
# job-side signatures of waiting on something outside the code (collective, peer, I/O)
WAIT_SIGNATURES = frozenset({"nccl_watchdog_timeout", "nccl_remote_error", "nccl_error", "connection_reset",
                             "dataloader_timeout", "hung_task", "io_error"})
# conditions that last while they hold (a full or stale mount, a hot GPU, a congested or dropping
# port): their age says nothing about whether they still bite, unlike a one-off event
LASTING_KINDS = frozenset({"thermal_throttle", "storage_slow", "storage_full", "mount_stale", "mount_missing",
                           "mount_readonly", "mount_full", "rdma_congestion", "port_discards"})
SLOWDOWN_OR_CRASH = frozenset({"network_congestion", "thermal_throttle", "gpu_oom", "host_oom", "application"})
SHORT = {"nccl_watchdog_timeout": "nccl_timeout", "elastic_child_failed": "child_failed",
         "python_traceback": "traceback"}


class CorrelateConfig(Struct, frozen=True, kw_only=True):
    lookback_ms: int = 30 * 60_000      # window starts this long before the attempt start
    settle_ms: int = 60_000             # evidence accepted this long after the failure
    post_grace_ms: int = 5_000          # signals within this after the failure count fully
    decay_ms: int = 3_600_000           # age over which an old signal loses 40 % weight
    change_window_ms: int = 7 * 86_400_000  # a version change this recent can be blamed
    change_recent_ms: int = 86_400_000      # ... with full weight when this recent
    fabric_window_ms: int = 15 * 60_000     # an inter-switch port fault this close before the failure can explain it
    fabric_tie_ms: int = 5 * 60_000         # ... when the job reports transport errors this soon after it
    explain_min: float = 0.35           # infrastructure weight that vetoes `application`
    max_evidence: int = 40


# the scheduler's / orchestrator's own words for a memory kill (Kubernetes "OOMKilled", Slurm "OutOfMemory")
_OOM_REASON = re.compile(r"OOMKill|OutOfMemory|out[ _-]of[ _-]memory", re.I)


_FULL_ERR_RE = re.compile(r"No space left|Disk quota exceeded|ENOSPC|EDQUOT|Errno 28\b|Errno 122\b")
_RO_ERR_RE = re.compile(r"Read-only file system|EROFS|Errno 30\b|PermissionError")
_QPATH_RE = re.compile(r"(/[^'\"\s:]+)")


def _move(cands: dict, key: tuple[str, str], new: tuple[str, str], *, summary_from_moved: bool = False) -> None:
    """Re-file candidate ``key`` under component ``new`` (a GPU index found for it), merging
    into a candidate already there: highest weight, earliest time, both evidence lists; the
    summary of the heavier one (or of the moved one with ``summary_from_moved``)."""
    c = cands.pop(key)
    other = cands.get(new)
    if other is None:
        c.component = new[1]
        cands[new] = c
        return
    if summary_from_moved or c.score > other.score:
        other.summary = c.summary
    other.score = max(other.score, c.score)
    other.ts = min(other.ts, c.ts)
    other.sigs = c.sigs + other.sigs


def incident_id(job: str, attempt: int) -> str:
    """Stable: the same job attempt always gives the same id."""
    return "inc-" + hashlib.blake2b(f"{job}|{attempt}".encode(), digest_size=10).hexdigest()


class _Cand:
    __slots__ = ("category", "component", "score", "ts", "sigs", "summary")

    def __init__(self, category: str, component: str, score: float, ts: int, summary: str) -> None:
        self.category = category
        self.component = component
        self.score = score
        self.ts = ts
        self.sigs: list[Signal] = []
        self.summary = summary


#: a scheduler ending (preemption, a time limit reached while the job progressed) is never a
#: version change's doing: a change keeps at most this weight there (context, below the verdict)
SCHEDULER_END_CHANGE_CAP = 0.3
#: a time limit reached while the job progressed: the scheduler's verdict ...
TIMEOUT_WEIGHT = 0.75
#: ... unless a slowdown of at least this weight on the job's path made it reach the limit: then
#: the slowdown ranks first, the time limit RANK_STEP after it (a weaker slowdown is incidental)
SLOWED_EXPLAINS = 0.55
#: categories that make a job slower without stopping it
SLOWING = frozenset({"thermal_throttle", "network_congestion", "storage_slow"})
#: one shown confidence step: the smallest margin that orders two hypotheses
RANK_STEP = 0.01


def _timeout_weight(cands: dict) -> float:
    """Weight of the scheduler verdict for a time limit reached while the job progressed."""
    slowed = max((c.score for c in cands.values() if c.category in SLOWING), default=0.0)
    if slowed >= SLOWED_EXPLAINS:
        return min(TIMEOUT_WEIGHT, slowed - RANK_STEP)
    return TIMEOUT_WEIGHT


#: weight left to a one-off fault that was over before the attempt began, when the attempt then
#: trained for RAN_MS: the job was placed and initialised with it in place (a down link is not
#: among the NICs NCCL picked, a flapping port was up again, a lost GPU would have failed the
#: start) and ran past it, so something later stopped it
SURVIVED_FACTOR = 0.5
#: progress this long after its start says the attempt really ran (not one dying as it initialises)
RAN_MS = 5 * 60_000


def _discount_survived(cands: dict, rec: "AttemptRecord", start: int) -> None:
    """Weaken candidates made only of one-off signals from before ``start`` when the attempt
    made progress for ``RAN_MS`` after it (lasting conditions keep their weight: a mount full
    before the start still fails the first checkpoint written to it)."""
    if not (rec.prog_n and rec.prog_last_ts - start >= RAN_MS):
        return
    for c in cands.values():
        if c.sigs and all(x.ts < start and x.kind not in LASTING_KINDS for x in c.sigs):
            c.score *= SURVIVED_FACTOR


# ---- per-signal weighting (the main loop of ``correlate``): each factor a named unit
#: weight of an XID known only from the kernel log, by the severity NVIDIA's catalogue gives it
XID_LOG_WEIGHT = {"critical": 0.95, "warning": 0.7, "info": 0.15}
#: an XID NVIDIA lists as not fatal stops no job on its own
XID_NONFATAL_CAP = 0.2
#: an XID NVIDIA lists as possibly the application's doing: at most half a verdict
XID_APP_CAP = 0.5
#: a throttling GPU on a node that straggled (or a job that slowed down): the slowdown is felt
THROTTLE_SLOWED_WEIGHT = 0.7
#: a BMC event on a node that really went away (node_down, NODE_FAIL) is that node's fault ...
BMC_DEAD_NODE_BONUS, BMC_DEAD_NODE_CAP = 0.3, 0.95
#: ... while on a node that kept running it is a warning at most
BMC_LIVE_NODE_CAP = 0.45
#: a signal after the failure is more often a consequence or an echo (more so after a silent hang)
AFTER_FAILURE_FACTOR, AFTER_STALL_FACTOR = 0.5, 0.3
#: a one-off signal loses up to this share of its weight with age (over ``decay_ms``)
AGE_DECAY = 0.4
#: the job's own first error (or its transport errors) points at this category: corroboration
SYMPTOM_BONUS = 0.1
#: an inter-switch port is on the job's path by inference only: tied by the job's own transport
#: errors minutes after its fault, else barely
FABRIC_TIED_FACTOR, FABRIC_UNTIED_FACTOR = 0.6, 0.15
#: a silent hang: congestion, throttling, OOMs and app-induced XIDs slow or crash a job, they do not freeze it
HANG_MISFIT_FACTOR = 0.4
#: the scheduler itself says host memory ran out: other categories explain less
SCHED_OOM_OTHER_FACTOR = 0.6
#: a bug in the user's code is not explained by infrastructure unless a hard fault (>= HARD_FAULT)
#: hit the erroring rank's own node before the error
HARD_FAULT, CODE_BUG_INFRA_FACTOR = 0.8, 0.4
#: several signals on one candidate: up to CORROBORATION_MAX more weight, CORROBORATION_STEP each
CORROBORATION_STEP, CORROBORATION_MAX = 0.03, 0.1


#: job log lines of a driver-stack fault of the whole node, not of one GPU (the CUDA driver too old
#: for the runtime, the NVSwitch fabric manager dead, CUDA's "system not yet initialized")
NODE_DRIVER_KINDS = frozenset({"log:cuda_driver_mismatch", "log:fabric_manager_failed", "log:cuda_system_not_ready"})
#: job log lines whose GPU index is the process's own view (CUDA numbers the GPUs a process sees)
PROCESS_LOCAL_GPU_KINDS = frozenset({"log:cuda_oom"})


def _local_gpu(rec: AttemptRecord, rank: int, node: str) -> int:
    """Local GPU index of a global rank: its position among the node's ranks."""
    on_node = sorted(int(r) for r, n in rec.ranks.items() if n == node and r.lstrip("-").isdigit())
    return on_node.index(rank) if rank in on_node else rank % max(1, (rec.gpus // max(1, len(rec.nodes))) or 1)


def _pci_key(pci: str) -> str:
    """Comparable PCI bus id: ``00000000:3B:00.0`` and ``0000:3b:00`` -> ``3b:00``."""
    parts = pci.lower().split(":")
    if len(parts) == 3:
        parts = parts[1:]
    return ":".join(parts).split(".")[0]


#: GPU signals that point at one GPU's PCIe link: an XID naming only a bus id on that node
#: is taken to be that GPU's when it is the only one showing them
BUS_FAULT_KINDS = frozenset({"pcie_replay", "gpu_lost"})


def _pci_index(sigs: list[Signal]) -> dict[tuple[str | None, str], Any]:
    """(node, bus id) -> GPU index, for XIDs that name a bus id only: from a ``gpu.xid`` of the
    node that gave both, else, when the node's bus-id-only XIDs name one bus id and exactly one
    GPU of the node shows a bus fault (``BUS_FAULT_KINDS``: its PCIe replays climbing, or its
    samples stopping while the others report), that GPU (outside check round 3, s05: an XID 79
    with ``pci`` only took the bus id for the GPU index, against the contract's form)."""
    idx: dict[tuple[str | None, str], Any] = {}
    for s in sigs:
        if s.kind == "xid" and s.data.get("gpu") is not None and s.data.get("pci"):
            idx[(s.node, _pci_key(s.data["pci"]))] = s.data["gpu"]
    lost: dict[str | None, set[int]] = {}
    for s in sigs:
        if s.kind in BUS_FAULT_KINDS and s.subject.startswith("gpu:"):
            g = s.subject.rsplit("/", 1)[-1]
            if g.isdigit():
                lost.setdefault(s.node, set()).add(int(g))
    bare: dict[str | None, set[str]] = {}
    for s in sigs:
        if s.kind in ("xid", "log:xid") and s.data.get("gpu") is None and s.data.get("pci"):
            bare.setdefault(s.node, set()).add(_pci_key(s.data["pci"]))
    for node, keys in bare.items():
        gone = lost.get(node, set())
        if len(keys) == 1 and len(gone) == 1:
            idx.setdefault((node, next(iter(keys))), next(iter(gone)))
    return idx


def _component(sig: Signal, rec: AttemptRecord, view: View, pci_index: dict | None = None,
               seen: dict | None = None) -> str:
    """The culprit of ``sig`` in the contract's component form."""
    cat = sig.category
    d = sig.data
    if cat in ("network_congestion",):
        seg = None
        if sig.subject.startswith("rdma:") and sig.node:
            seg = view.segment_of(sig.node, d.get("device")) or view.segment_of(sig.node)
        elif sig.subject.startswith("port:"):
            dev, port = d.get("device"), d.get("port")
            seg = view.port_segment(dev, port) if sig.node is None else (
                view.segment_of(sig.node, dev) or view.port_segment(dev, port))
        elif sig.node:
            seg = view.segment_of(sig.node)
        return f"segment:{seg}" if seg else (f"node:{sig.node}" if sig.node else sig.subject)
    if cat == "network_link":
        dev, port = d.get("device"), d.get("port")
        if sig.node and dev:
            sp = view.switch_port_of(sig.node, dev)
            if sp:
                return f"port:{sp}"
        if sig.kind.startswith("log:") and sig.node:
            iface = d.get("iface")
            sp = view.switch_port_of(sig.node, iface) if iface else None
            if sp is None and len(view.links.get(sig.node, ())) == 1:
                l = view.links[sig.node][0]
                sp = f"{l.switch}/{l.port}"
            if sp:
                return f"port:{sp}"
            # an interface the topology does not list (the kernel's netdev name, e.g. ibp193s0f2, not
            # the HCA's mlx5_2): the host is the device, the interface its port - the contract's
            # port:<device>/<port> form (``_nic_line_to_its_link`` files it under the HCA's link when
            # a link fault of the node's own NIC says which one it is)
            return f"port:{sig.node}/{iface or '?'}"
        if dev is not None:
            return f"port:{dev}/{port}"
    bus_only = sig.kind == "xid" and d.get("gpu") is None and bool(d.get("pci"))
    if sig.component and not bus_only:    # a bus id only: the GPU index is resolved below
        if sig.component.startswith("path:") and sig.kind == "checkpoint_failed":
            m = view.mount_of(sig.node, d.get("path") or "")
            if m is None:
                for n in rec.nodes:
                    m = view.mount_of(n, d.get("path") or "")
                    if m:
                        break
            return f"path:{m}" if m else sig.component
        return sig.component
    if sig.kind in NODE_DRIVER_KINDS:
        return f"node:{sig.node or (rec.nodes[0] if rec.nodes else '?')}"
    if cat in ("gpu_oom", "gpu_hardware", "gpu_nvlink", "thermal_throttle", "driver_software"):
        node = sig.node or (rec.nodes[0] if rec.nodes else "?")
        g = d.get("gpu")
        if g == 0 and sig.kind in PROCESS_LOCAL_GPU_KINDS and d.get("rank") is not None and node in rec.nodes:
            # "GPU 0" from a rank that is not its node's first: the task sees one GPU (per-task
            # CUDA_VISIBLE_DEVICES, Slurm --gpus-per-task=1), its physical GPU is its local rank's
            g = _local_gpu(rec, int(d["rank"]), node)
        if g is None and d.get("rank") is not None:
            g = _local_gpu(rec, int(d["rank"]), node)
        if g is None and d.get("pci"):
            # a bus id only (a kernel line): the index when a gpu.xid of the node paired them,
            # else the bus id itself (never a made-up index)
            key = _pci_key(d["pci"])
            g = (pci_index or {}).get((node, key), "0000:" + key)
        return f"gpu:{node}/{g if g is not None else 0}"
    if cat in ("node_hardware", "host_oom"):
        host = d.get("host")  # a scheduler line naming the node it is about (srun: error: <node>: task N: ...)
        if host in rec.nodes:
            return f"node:{host}"
        return f"node:{sig.node or (rec.nodes[0] if rec.nodes else '?')}"
    if cat in ("storage_slow", "storage_unavailable", "storage_full"):
        path = d.get("path")
        if path is None and sig.kind.startswith("log:"):
            path = _mount_for_log(sig, rec, view)
        if path is None and sig.node:
            ms = view.mounts.get(sig.node) or []
            path = ms[0].path if len(ms) == 1 else None
        if path is None:
            ps = sorted({m.path for n in rec.nodes for m in view.mounts.get(n, ())})
            path = ps[0] if len(ps) == 1 else "?"
        if path != "?":
            m = _mount_point(view, seen, sig.node, path, rec.nodes)
            if m is None:
                parts = [p for p in path.split("/") if p]
                m = "/" + parts[0] if parts else path
            path = m
        return f"path:{path}"
    return f"job:{rec.job}"


# exception classes that point at the environment, not the user's code
_ENV_EXC = ("OSError", "IOError", "TimeoutError", "ConnectionError", "BrokenPipeError", "DistBackendError",
            "OutOfMemoryError", "MemoryError", "PermissionError", "BlockingIOError", "ChildProcessError")
_ENV_WORDS = ("CUDA", "cuda", "NCCL", "nccl", "device", "memory", "driver", "ECC", "NVLink", "timed out", "Errno",
              "write failed", "read failed", "failed writing", "failed reading", "PytorchStreamWriter",
              "PytorchStreamReader", "I/O error", "Input/output")


def _is_app_code(sig: Signal | None) -> bool:
    """True when the job's first error is a user-code bug (a shape mismatch, a KeyError,
    an illegal address in its own kernel), not a report of the environment failing."""
    if sig is None:
        return False
    name = sig.data.get("signature")
    if name == "cuda_illegal_address" or name in USER_BUG_SIGS:
        return True
    if name != "python_traceback":
        return False
    exc = (sig.data.get("exception") or "").rsplit(".", 1)[-1]
    if not exc or exc in _ENV_EXC:
        return False
    detail = sig.data.get("detail") or ""
    if exc == "RuntimeError" and any(w in detail for w in _ENV_WORDS):
        return False
    return True


def _symptom(rec: AttemptRecord, job_sigs: list[Signal], state: str, stalled_for: int | None) -> tuple[str, Signal | None]:
    """What the job died of, as the job saw it: the first error it printed."""
    best: Signal | None = None
    best_key = None
    for s in job_sigs:
        if not s.kind.startswith("log:") or s.severity != "critical":
            continue
        role = s.data.get("role")
        if role not in ("cause", "symptom", "weak"):
            continue
        key = (s.data.get("stream") in ("kernel", "container"), s.ts,
               s.data.get("rank") if s.data.get("rank") is not None else 1 << 30, s.id)
        if best_key is None or key < best_key:
            best, best_key = s, key
    if best is not None:
        name = SHORT.get(best.data["signature"], best.data["signature"])
        if name == "traceback" and best.data.get("exception"):
            name = best.data["exception"].rsplit(".", 1)[-1]
        r = best.data.get("rank")
        where = f" on rank {r}" if r is not None else (f" on {best.node}" if best.node else "")
        return name + where, best
    for s in job_sigs:
        if s.kind == "container_oom":
            return f"oom_killed on {s.node}" if s.node else "oom_killed", s
    if stalled_for is not None:
        return f"stall: no progress for {stalled_for // 1000} s (last step {rec.prog_last_step})", None
    code = f" (exit {rec.exit_code})" if rec.exit_code is not None else ""
    sig = f" (signal {rec.signal})" if rec.signal is not None else ""
    return f"{state}{code}{sig}" + (f": {rec.reason}" if rec.reason else ""), None


#: signals of a link losing frames or going away (error growth, down, flap)
LINK_FAULT_KINDS = frozenset({"port_errors", "port_down", "port_flap", "rdma_link_errors", "rdma_link_downed",
                              "log:nic_link_down"})
#: retransmits that begin this soon after a link fault on the job's path are that link's losses
#: (a sample interval of slack the other way: the two counters are read at different times)
RETRANS_AFTER_LINK_MS, RETRANS_SAMPLE_SLACK_MS = 5 * 60_000, 60_000
#: ... and their congestion candidate keeps this share of its weight
LINK_CONSEQUENCE_FACTOR = 0.5


def _is_retransmit(s: Signal) -> bool:
    return "retransmit" in str(s.data.get("what") or "")


def _retransmits_of_a_link(cands: dict, cfg: CorrelateConfig) -> None:
    """RDMA retransmits / ack timeouts are what a lossy or flapping link produces: the contract's
    congestion is retransmits "without link errors". A congestion candidate made only of retransmit
    surges (no CNP/ECN storm, no discards) whose surges began within ``RETRANS_AFTER_LINK_MS`` after
    the first fault of a network_link candidate of weight (>= ``explain_min``) is that link's
    consequence: it keeps ``LINK_CONSEQUENCE_FACTOR`` of its weight."""
    links = [c for c in cands.values() if c.category == "network_link" and c.score >= cfg.explain_min]
    if not links:
        return
    for c in cands.values():
        if c.category != "network_congestion" or not c.sigs:
            continue
        if not all(x.kind == "rdma_congestion" and _is_retransmit(x) for x in c.sigs):
            continue
        onset = min(x.ts for x in c.sigs)
        for l in links:
            first = min((x.ts for x in l.sigs if x.kind in LINK_FAULT_KINDS), default=None)
            if first is not None and -RETRANS_SAMPLE_SLACK_MS <= onset - first <= RETRANS_AFTER_LINK_MS:
                c.score *= LINK_CONSEQUENCE_FACTOR
                c.summary += f"; began with the link fault of {l.component.removeprefix('port:')}"
                break


#: job log lines of the runtime failing to launch the job (its code never ran)
LAUNCH_FAILURE_SIGS = frozenset({"image_pull_failed"})


def _never_ran_summary(job_sigs: list[Signal]) -> str:
    """The ``unknown`` verdict of an attempt that never started, with what kept it from starting."""
    pulls = [s for s in job_sigs if s.data.get("signature") in LAUNCH_FAILURE_SIGS]
    if not pulls:
        return "the job never started and no signal on its resources says why"
    d = next((s.data for s in pulls if s.data.get("reason")), pulls[0].data)
    image = next((s.data["image"] for s in pulls if s.data.get("image")), None)
    return ("the job never started: its image could not be pulled" + (f" ({d['reason']})" if d.get("reason") else "")
            + (f": {image}" if image else "") + " (the container runtime's pull errors are in the evidence)")


class _Ctx(Struct, frozen=True):
    """What every stage of one attempt's correlation reads: the attempt, the view, the window."""
    rec: AttemptRecord
    view: View
    cfg: CorrelateConfig
    start: int
    cutoff: int
    failure_ts: int
    state: str
    stalled: bool
    sigs: list   # every signal of the attempt, de-duplicated, in (ts, id) order


def _attempt_signals(rec: AttemptRecord, job_signals: Iterable[Signal], resource_signals: Iterable[Signal],
                     view: View, cfg: CorrelateConfig, start: int, cutoff: int, failure_ts: int) -> list[Signal]:
    """The signals that belong to this attempt, de-duplicated by id, in (ts, id) order."""
    t0 = start - cfg.lookback_ms
    uniq: dict[str, Signal] = {}
    nodes = set(rec.nodes)
    for s in job_signals:
        # the job's own output belongs to this attempt only from its start on, and only from its nodes
        # (an earlier attempt's logs on other nodes are that attempt's story)
        if start - cfg.post_grace_ms <= s.ts <= cutoff and s.id not in uniq and (s.node is None or not nodes or s.node in nodes):
            uniq[s.id] = s
    job_ports = {(l.switch, l.port) for n in rec.nodes for l in view.links.get(n, ())}
    facing: set[tuple[str, str]] | None = None
    fabric: list[Signal] = []
    for s in resource_signals:
        if not (t0 <= s.ts <= cutoff) or s.id in uniq:
            continue
        if s.layer == "storage" and nodes and s.node is not None and s.node not in nodes and _local_fs(s, view):
            continue  # another node's own disk: it explains only jobs on that node
        if s.node is None and s.kind in FABRIC_LINK and s.subject.startswith("port:"):
            dev, port = s.data.get("device"), s.data.get("port")
            if (dev, port) not in job_ports:
                # a switch port off the job's own links: another node's port (not the job's), or an
                # inter-switch port its cross-switch traffic may use (decided below)
                if facing is None:
                    facing = view.node_facing_ports()
                if (dev, port) not in facing:
                    fabric.append(msgspec.structs.replace(s, data={**s.data, "fabric": True}))
                continue
        uniq[s.id] = s
    # an inter-switch port counts when it has a fault near the failure (FABRIC_LINK within
    # fabric_window_ms before it); its earlier faults in the window then count too: the same
    # port's history (error growth that began before the flaps it ended in), weighed by age
    near = {(s.data.get("device"), s.data.get("port")) for s in fabric
            if failure_ts - cfg.fabric_window_ms <= s.ts <= failure_ts + cfg.post_grace_ms}
    for s in fabric:
        if (s.data.get("device"), s.data.get("port")) in near and s.ts <= failure_ts + cfg.post_grace_ms:
            uniq.setdefault(s.id, s)
    return sorted(uniq.values(), key=lambda s: (s.ts, s.id))


class _JobFacts(Struct, kw_only=True):
    """What the job's own output and the signals say, read once before any candidate is weighed."""
    job_sigs: list
    symptom: str
    sym_sig: Signal | None
    sym_cat: str | None           # the category the job's first error names as its cause
    app_errs: list                # application-side errors (for the echo rule and the verdict)
    code_bug: list                # ... of which a code exception (KeyError, TypeError, ...)
    code_errs: list               # ... the user-code errors up to the failure not explained by the environment
    first_app: dict               # node -> its first application error's ts
    first_app_any: int | None
    app_node: str | None          # the first user-code error's node and time
    app_ts: int | None
    stragglers: set
    slowed: bool
    storage_hit: bool             # the job felt storage: an I/O error, a failed checkpoint, a hang
    dead_nodes: set
    net_err_ts: list              # the job's own transport errors
    waited: bool                  # the job says it was left waiting on something outside its code
    post_grace: int
    seen_mounts: dict             # node -> mount points its storage signals name
    pci_index: dict
    felt: set


def _on_bad_mount(e: Signal, bad_mounts: set) -> bool:
    """An error about a file under a mount that is missing / stale / read-only / full on the job's
    nodes is that mount's failure reaching the job, not a code bug - when the error is one that
    failure raises: a full or read-only mount fails writes (ENOSPC / EDQUOT, EROFS), it does not
    make a file vanish (a FileNotFoundError under a full /home is still the user's typo)."""
    text = (e.data.get("detail") or "") + " " + (e.data.get("path") or "")
    exc = (e.data.get("exception") or "") + " " + text
    for p in _QPATH_RE.findall(text):
        for n, m, cat, kind in bad_mounts:
            if not ((n is None or e.node is None or n == e.node) and (p == m or p.startswith(m + "/") or m == "/")):
                continue
            if cat == "storage_full" and not _FULL_ERR_RE.search(exc):
                continue
            if kind == "mount_readonly" and not _RO_ERR_RE.search(exc):
                continue
            return True
    return False


def _job_facts(x: _Ctx) -> _JobFacts:
    rec, cfg, sigs, stalled, state = x.rec, x.cfg, x.sigs, x.stalled, x.state
    job_sigs = [s for s in sigs if s.subject.startswith("job:") or s.kind == "container_oom"]
    symptom, sym_sig = _symptom(rec, job_sigs, state, (x.cutoff - x.failure_ts) if stalled else None)
    app_errs = [s for s in job_sigs if s.kind.startswith("log:") and s.data.get("signature") in APP_ERROR_SIGS]
    first_app: dict = {}
    for s in app_errs:
        first_app.setdefault(s.node, s.ts)
    # job-side signs that storage was in the way: an I/O error, a failed checkpoint, a hang
    storage_hit = (stalled and rec.ckpt_open is not None) or any(
        (s.layer == "storage" and s.kind.startswith("log:")) or s.kind in ("checkpoint_failed", "log:hung_task")
        for s in job_sigs)
    # an error raised while a checkpoint write was failing is the write's failure, not a code bug
    ck_fails = [s.ts for s in job_sigs if s.kind == "checkpoint_failed"]
    bad_mounts = {(s.node, (s.data.get("path") or "").rstrip("/") or "/", s.category, s.kind) for s in sigs
                  if s.category in ("storage_unavailable", "storage_full") and s.data.get("path")
                  and not s.subject.startswith("job:")}
    felt_mount = [s for s in app_errs if bad_mounts and _on_bad_mount(s, bad_mounts)]
    storage_hit = storage_hit or bool(felt_mount)
    # a silent stall that began as a shared mount turned slow on the job's nodes: it waited on it
    post_grace = max(cfg.post_grace_ms, max(rec.intervals) if (stalled and rec.intervals) else 0)
    stall_mounts = slow_at_stall(rec, sigs, x.failure_ts, post_grace) if stalled else set()
    storage_hit = storage_hit or bool(stall_mounts)
    # a user-code bug anywhere in the job's own output up to the failure (the culprit rank
    # rarely prints first: the others report the collective it left hanging)
    code_errs = [s for s in app_errs if s.ts <= x.failure_ts + cfg.post_grace_ms and _is_app_code(s)
                 and not any(0 <= s.ts - t <= 60_000 for t in ck_fails) and s not in felt_mount]
    # nodes that really went away (the scheduler says so, or the job ended NODE_FAIL)
    dead_nodes = {s.node for s in sigs if s.kind == "node_down"}
    if state == "node_fail":
        dead_nodes |= {s.data.get("failed_node") for s in job_sigs if s.data.get("failed_node")}
    # mount points the storage signals of each node name (samples of a mount its inventory may not list)
    seen_mounts: dict[str, set[str]] = {}
    for s in sigs:
        if s.layer == "storage" and s.node and not s.kind.startswith("log:") and not s.subject.startswith("job:") \
                and isinstance(s.data.get("path"), str) and s.data["path"].startswith("/"):
            seen_mounts.setdefault(s.node, set()).add(s.data["path"].rstrip("/") or "/")
    return _JobFacts(
        job_sigs=job_sigs, symptom=symptom, sym_sig=sym_sig,
        sym_cat=sym_sig.category if sym_sig is not None and sym_sig.data.get("role") == "cause" else None,
        app_errs=app_errs,
        code_bug=[s for s in app_errs if s.data.get("exception", "").rsplit(".", 1)[-1] in CODE_EXCEPTIONS],
        code_errs=code_errs, first_app=first_app, first_app_any=min((s.ts for s in app_errs), default=None),
        app_node=code_errs[0].node if code_errs else None, app_ts=code_errs[0].ts if code_errs else None,
        stragglers={s.node for s in job_sigs if s.kind == "straggler" and s.node},
        slowed=any(s.kind == "slowdown" for s in job_sigs) or state == "timeout",
        storage_hit=storage_hit, dead_nodes=dead_nodes,
        net_err_ts=[s.ts for s in job_sigs if s.data.get("signature") in ("nccl_remote_error", "connection_reset")],
        waited=stalled or any(s.data.get("signature") in WAIT_SIGNATURES for s in job_sigs),
        # a stall began somewhere after the last progress, within about one progress interval
        post_grace=post_grace,
        seen_mounts=seen_mounts, pci_index=_pci_index(sigs),
        felt=(_felt_paths(rec, job_sigs, x.view, seen_mounts) | stall_mounts) if storage_hit else set())


def _xid_of_a_log(s: Signal, xid_events: set) -> Signal | None:
    """An XID known only from the kernel log (no gpu.xid collector on that node), weighed by its
    catalogue entry; None when a gpu.xid of it exists or the line names no XID."""
    if (s.node, s.data.get("xid")) in xid_events or s.data.get("xid") is None:
        return None
    info = xid_lookup(int(s.data["xid"]))
    score = XID_LOG_WEIGHT[info.severity]
    if not info.fatal:
        score = min(score, XID_NONFATAL_CAP)
    if info.category == "application":
        score = min(score, XID_APP_CAP)
    return msgspec.structs.replace(s, kind="xid", category=info.category, score=score, data={
        **s.data, "app_induced": info.app_induced, "fatal": info.fatal})


def _weight(s: Signal, x: _Ctx, f: _JobFacts) -> float | None:
    """One signal's weight as a cause of this interruption (None: not a candidate at all)."""
    cat, score, kind, stalled = s.category, s.score, s.kind, x.stalled
    if kind == "xid":
        app_t = f.first_app.get(s.node, f.first_app_any if s.node is None else None)
        if app_t is not None and s.ts >= app_t and (s.data.get("app_induced") or not s.data.get("fatal")):
            return None  # echo of the application's own error
    if kind.startswith("log:") and s.data.get("role") == "weak":
        return None  # application evidence: judged in _application
    if kind == "thermal_throttle" and (s.node in f.stragglers or f.slowed):
        score = THROTTLE_SLOWED_WEIGHT  # throttling that slowed the job down
    if cat in ("storage_slow", "storage_unavailable", "storage_full") \
            and not (kind.startswith("log:") or kind == "checkpoint_failed") \
            and (not f.storage_hit or not _felt_here(s, f.felt)):
        score *= UNFELT_STORAGE_FACTOR  # a storage alarm the job never felt
    if cat == "node_hardware" and kind in ("bmc_sel", "bmc_sensor"):
        score = min(BMC_DEAD_NODE_CAP, score + BMC_DEAD_NODE_BONUS) if s.node in f.dead_nodes else min(score, BMC_LIVE_NODE_CAP)
    # time: after the failure -> consequence; long before -> decays (not for lasting conditions)
    grace = f.post_grace + (HANG_REPORT_MS if stalled and cat in HANG_CATEGORIES and kind.startswith("log:") else 0)
    if s.ts > x.failure_ts + grace:
        score *= AFTER_STALL_FACTOR if stalled else AFTER_FAILURE_FACTOR
    elif kind not in LASTING_KINDS:
        age = x.failure_ts - s.ts
        if age > 0:
            score *= 1.0 - AGE_DECAY * min(1.0, age / x.cfg.decay_ms)
    if f.sym_cat is not None and cat == f.sym_cat:
        score = min(CONFIDENCE_MAX, score + SYMPTOM_BONUS)
    if s.data.get("fabric"):
        # an inter-switch port: on the job's path only by inference; only the job's own report
        # of transport errors within minutes after the port's fault ties it to this failure
        tied = any(0 <= t - s.ts <= x.cfg.fabric_tie_ms for t in f.net_err_ts)
        score *= FABRIC_TIED_FACTOR if tied else FABRIC_UNTIED_FACTOR
    if f.net_err_ts and cat in ("network_link", "network_congestion"):
        score = min(CONFIDENCE_MAX, score + SYMPTOM_BONUS)  # the job itself reported the fabric failing
    if stalled and (cat in SLOWDOWN_OR_CRASH or (kind == "xid" and s.data.get("app_induced"))):
        score *= HANG_MISFIT_FACTOR  # a silent hang: these slow a job down or crash it, they do not freeze it
    if x.state == "out_of_memory" and cat != "host_oom":
        score *= SCHED_OOM_OTHER_FACTOR  # the scheduler itself says host memory ran out
    if f.code_errs:
        # a code bug is not explained by infrastructure unless a hard fault hit the
        # erroring rank's own node before the error
        if not (score >= HARD_FAULT and s.node == f.app_node and f.app_ts is not None and s.ts <= f.app_ts):
            score *= CODE_BUG_INFRA_FACTOR
    return score


def _infrastructure_candidates(x: _Ctx, f: _JobFacts) -> dict[tuple[str, str], _Cand]:
    """Every signal with a root-cause category, weighed, grouped by (category, component)."""
    cands: dict[tuple[str, str], _Cand] = {}
    xid_events = {(s.node, s.data.get("xid")) for s in x.sigs if s.kind == "xid"}
    for s in x.sigs:
        if s.kind == "log:xid":
            s = _xid_of_a_log(s, xid_events)
            if s is None:
                continue
        if s.category is None or s.score <= 0:
            continue
        score = _weight(s, x, f)
        if score is None:
            continue
        comp = _component(s, x.rec, x.view, f.pci_index, f.seen_mounts)
        key = (s.category, comp)
        c = cands.get(key)
        if c is None:
            c = cands[key] = _Cand(s.category, comp, score, s.ts, s.summary)
        else:
            if score > c.score:
                c.score, c.summary = score, s.summary
            c.ts = min(c.ts, s.ts)
        c.sigs.append(s)
    _discount_survived(cands, x.rec, x.start)
    _gpu_oom_on_the_full_gpu(cands, x)
    for c in cands.values():
        if len(c.sigs) > 1:  # corroboration: up to +10 % of the weight
            c.score = min(CONFIDENCE_MAX, c.score * (1.0 + min(CORROBORATION_MAX, CORROBORATION_STEP * (len(c.sigs) - 1))))
    _retransmits_of_a_link(cands, x.cfg)
    _not_responding_is_unavailable(cands)
    _nic_line_to_its_link(cands, x)
    _power_brake_of_a_power_fault(cands)
    _storage_cut_off_by_a_link(cands, x)
    _gpu_by_bus_id(cands, x.sigs)
    # a driver/GSP verdict needs "no hardware sign": a hardware fault of the same GPU outranks it
    for key, c in cands.items():
        if c.category == "driver_software" and key[1].startswith("gpu:"):
            hw_c = cands.get(("gpu_hardware", key[1]))
            if hw_c is not None and hw_c.score >= 0.5:
                c.score *= 0.5
    return cands


#: signals of a link going away (not error growth: a lossy link slows storage, a down one cuts it off)
LINK_DOWN_KINDS = frozenset({"port_down", "port_flap", "rdma_link_downed", "log:nic_link_down"})
#: a mount that fails on one node this soon after one of that node's own links went down is cut off by
#: the link (NFS notices a dead path after its timeout, ~1 min; a collector's stat after its own)
LINK_CUTS_STORAGE_MS = 5 * 60_000


def _storage_cut_off_by_a_link(cands: dict, x: _Ctx) -> None:
    """A mount that went stale / slow on one node only, minutes after one of that node's own links
    went down, while the job's other nodes mounting it reported no fault, is that link's consequence:
    the server still serves the others, the node lost its way to it (a storage NIC whose switch port
    went down). The contract's network_link ("port down/flap ... on a job's path") names the failed
    port: the link candidate ranks RANK_STEP above the mount, which stays the next hypothesis
    (outside check round 5, p20)."""
    rec, view = x.rec, x.view
    for skey, sc in list(cands.items()):
        if skey[0] not in HANG_CATEGORIES or not skey[1].startswith("path:") or not sc.sigs:
            continue
        path = skey[1][5:]
        nodes = {s.node for s in sc.sigs}
        if len(nodes) != 1 or None in nodes:
            continue
        node = next(iter(nodes))
        others = [n for n in rec.nodes if n != node and view.mount_of(n, path)]
        if not others or any(s.layer == "storage" and s.node in others and s.category in STORAGE_CATEGORIES
                             and _under(str(s.data.get("path") or path), path) for s in x.sigs):
            continue
        own_ports = {f"port:{l.switch}/{l.port}" for l in view.links.get(node, ())}
        onset = min(s.ts for s in sc.sigs)
        for lkey, lc in cands.items():
            if lkey[0] != "network_link" or lkey[1] not in own_ports:
                continue
            downs = [s.ts for s in lc.sigs if s.kind in LINK_DOWN_KINDS and not s.data.get("fabric")]
            if not downs or not (0 <= onset - min(downs) <= LINK_CUTS_STORAGE_MS):
                continue
            if lc.score < sc.score + RANK_STEP:
                lc.score = min(CONFIDENCE_MAX, sc.score + RANK_STEP)
                lc.summary += f"; then {path} failed on {node} only (the job's other nodes still reach it)"
                lc.sigs.append(sc.sigs[0])
            break


#: NVML's "HW Power Brake Slowdown": a brake the system asserts from outside the GPU (the power supply
#: or the BMC when the node's power budget is gone), not heat and not the GPU's own power cap
POWER_BRAKE_REASONS = frozenset({"power_brake"})
#: a power-braked GPU whose brake began this soon after a critical power fault of its node's BMC
#: (a PSU failed, its input power lost) is braked by that fault (a sample interval of slack before it:
#: the BMC and NVML are read at different times)
POWER_BRAKE_TIE_MS, POWER_BRAKE_SLACK_MS = 10 * 60_000, 2 * 60_000


def _is_power_fault(s: Signal) -> bool:
    """A critical BMC report about the node's power: a Power Supply / Power Unit SEL, a power sensor."""
    if s.severity != "critical":
        return False
    if s.kind == "bmc_sel":
        return "power" in str(s.data.get("sensor_type") or "").lower()
    return s.kind == "bmc_sensor" and (s.data.get("type") == "power" or "psu" in str(s.data.get("sensor") or "").lower())


def _power_brake_of_a_power_fault(cands: dict) -> None:
    """GPUs throttled by the power brake alone, right after their node's BMC reported a critical power
    fault, are that fault's consequence: the contract files a PSU failure under node_hardware ("BMC
    critical: PSU") and the brake is how the failed supply slows the job. The node's candidate then
    ranks RANK_STEP above its braked GPUs' throttling (which keeps its weight: the slowdown that made
    a job reach its time limit is still shown); a BMC event on a live node is otherwise a warning at
    most (``BMC_LIVE_NODE_CAP``), and heat (any thermal reason) keeps the throttling the GPU's own
    (outside check round 5, p11)."""
    for key, node_c in list(cands.items()):
        if key[0] != "node_hardware" or not key[1].startswith("node:"):
            continue
        node = key[1][5:]
        faults = [s.ts for s in node_c.sigs if _is_power_fault(s)]
        if not faults:
            continue
        braked = [c for k, c in cands.items() if k[0] == "thermal_throttle" and k[1].startswith(f"gpu:{node}/") and c.sigs
                  and all(set(s.data.get("reasons") or ()) <= POWER_BRAKE_REASONS and s.data.get("reasons")
                          and any(-POWER_BRAKE_SLACK_MS <= int(s.data.get("since") or s.ts) - t <= POWER_BRAKE_TIE_MS
                                  for t in faults) for s in c.sigs)]
        if not braked:
            continue
        top = max(braked, key=lambda c: c.score)
        if top.score + RANK_STEP <= node_c.score:
            continue
        node_c.score = min(CONFIDENCE_MAX, top.score + RANK_STEP)
        node_c.summary += f"; {len(braked)} of its GPUs power-braked since: {top.sigs[0].summary}"
        node_c.sigs.extend(c.sigs[0] for c in braked)


#: a kernel link-down line and a link fault of one of the node's own NICs (an RDMA link_downed, a
#: NIC port down) this close together are the same link going down (two counter samples of slack)
LINK_LINE_MATCH_MS = 2 * 60_000


def _nic_line_to_its_link(cands: dict, x: _Ctx) -> None:
    """A kernel ``<iface>: Link down`` whose interface the topology does not list (the netdev name
    of an HCA the inventory names by its device, ``ibp193s0f2`` for ``mlx5_2``) is filed under the
    host's interface (``port:<node>/<iface>``). When exactly one other link candidate of weight
    shows a link fault of that node's own NICs within ``LINK_LINE_MATCH_MS`` of the line, the line
    is that link's report and joins it: one link, one hypothesis, in the form of its device
    (outside check round 5, p14)."""
    for key in [k for k in cands if k[0] == "network_link"]:
        c = cands.get(key)
        if c is None or not c.sigs or not all(s.kind == "log:nic_link_down" for s in c.sigs):
            continue
        node = c.sigs[0].node
        iface = c.sigs[0].data.get("iface")
        if node is None or (iface and x.view.switch_port_of(node, iface)):
            continue
        others = {k for k, o in cands.items() if k[0] == "network_link" and k != key and o.score >= x.cfg.explain_min
                  and any(s.node == node and s.kind in LINK_FAULT_KINDS and not s.kind.startswith("log:")
                          and not s.data.get("fabric") and abs(s.ts - c.ts) <= LINK_LINE_MATCH_MS for s in o.sigs)}
        if len(others) == 1:
            _move(cands, key, others.pop())


#: a mount state that says the mount is gone (not read-only: a read-only mount answers, it does not hang)
GONE_MOUNT_KINDS = frozenset({"mount_stale", "mount_missing"})
#: the kernel's NFS "server ... not responding" and a collector's stale / missing state of the same
#: mount this close together are one outage of the server (the collector's stat hangs until its own
#: timeout, the kernel prints after its major timeout: a few minutes between the two at most)
SAME_OUTAGE_MS = 10 * 60_000


def _not_responding_is_unavailable(cands: dict) -> None:
    """The kernel's ``nfs: server X not responding`` says requests to the server time out: slow or
    gone, the line alone cannot tell (the catalogue files it under storage_slow). When the same mount
    is reported stale or missing on the job's nodes within ``SAME_OUTAGE_MS`` of the line, and no
    latency was measured high (the slow candidate is made of the kernel lines alone), the server is
    gone: the contract files a stale / missing mount under storage_unavailable ("latency/throughput
    collapse" is storage_slow), so the lines join that candidate (outside check round 5, p09)."""
    for key in [k for k in cands if k[0] == "storage_slow"]:
        c = cands[key]
        if not c.sigs or not all(s.kind == "log:nfs_not_responding" for s in c.sigs):
            continue
        ukey = ("storage_unavailable", key[1])
        u = cands.get(ukey)
        if u is None:
            continue
        first = min(s.ts for s in c.sigs)
        gone = [s for s in u.sigs if s.kind in GONE_MOUNT_KINDS and abs(s.ts - first) <= SAME_OUTAGE_MS]
        if not gone:
            continue
        summary = f"{u.summary}; {c.summary}"
        _move(cands, key, ukey)
        cands[ukey].summary = summary


def _gpu_oom_on_the_full_gpu(cands: dict, x: _Ctx) -> None:
    """An OOM message's "GPU N" is the process's view (per-task CUDA_VISIBLE_DEVICES makes every
    task's GPU 0); the GPU NVML saw full at that moment, the rank's local GPU, settles which one."""
    for key in [k for k in cands if k[0] == "gpu_oom"]:
        c = cands[key]
        logs = [s for s in c.sigs if s.kind == "log:cuda_oom"]
        if not logs or key not in cands:
            continue
        node, _, g = c.component[4:].rpartition("/")
        t = logs[0].ts
        full = {s.component.rpartition("/")[2] for s in x.sigs if s.kind == "gpu_mem_high" and s.node == node
                and s.component and t - 600_000 <= s.ts <= t + 60_000}
        if not full or g in full:
            continue
        r = logs[0].data.get("rank")
        local = str(_local_gpu(x.rec, int(r), node)) if r is not None and node in x.rec.nodes else None
        pick = local if local in full else (next(iter(full)) if len(full) == 1 else None)
        if pick is None:
            continue
        _move(cands, key, ("gpu_oom", f"gpu:{node}/{pick}"), summary_from_moved=True)


def _gpu_by_bus_id(cands: dict, sigs: list[Signal]) -> None:
    """A GPU known only by its bus id: the index of the GPU of that node that went silent right after."""
    for key in [k for k in cands if k[0] in ("gpu_hardware", "gpu_nvlink", "driver_software") and k[1].startswith("gpu:")]:
        c = cands[key]
        node, _, g = key[1][4:].rpartition("/")
        if g.isdigit():
            continue
        lost = {s.data.get("gpu") for s in sigs if s.kind == "gpu_lost" and s.node == node
                and c.ts - 60_000 <= s.ts <= c.ts + 15 * 60_000 and s.data.get("gpu") is not None}
        if len(lost) != 1:
            continue
        _move(cands, key, (key[0], f"gpu:{node}/{lost.pop()}"))


class _ChangeWeigher:
    """How much a version change can explain this attempt's failure: its recency, and a cap when
    something else explains it better (a scheduler ending, a concrete fault, a plain user bug)."""

    def __init__(self, x: _Ctx, f: _JobFacts, cands: dict) -> None:
        self.x = x
        # a plain bug in user code (KeyError, TypeError...) is not what a driver, library or image
        # upgrade produces; broken packaging (ImportError, undefined symbol) or a driver-level
        # crash (illegal address, segfault, driver XID, NCCL failure, a hang) can be
        self.user_bugs = [s for s in f.code_errs if s.data.get("signature") in USER_BUG_SIGS or (
                          s.data.get("signature") == "python_traceback"
                          and (s.data.get("exception") or "").rsplit(".", 1)[-1] not in LIB_EXCEPTIONS)]
        # a concrete fault on the job's path explains the failure better than a change does
        self.concrete = max((c.score for c in cands.values() if c.category in CONCRETE
                             and not all(s.data.get("fabric") for s in c.sigs)), default=0.0)
        self.sched_end = x.state == "preempted" or (x.state == "timeout" and not x.stalled)

    def recency(self, ch_ts: int) -> float:
        """1 for a change in the day before the attempt, down to 0.4 at the window's edge."""
        cfg = self.x.cfg
        age = self.x.start - ch_ts
        if age <= cfg.change_recent_ms:
            return 1.0
        span = max(1, cfg.change_window_ms - cfg.change_recent_ms)
        return 1.0 - 0.6 * min(1.0, (age - cfg.change_recent_ms) / span)

    def plausible(self, score: float) -> float:
        if self.sched_end:
            return min(score, SCHEDULER_END_CHANGE_CAP)
        if self.concrete >= 0.5:
            return min(score, 0.3)
        if self.user_bugs:
            return score * 0.3
        return score


#: the stack components compared across a job's nodes for drift
DRIFT_COMPONENTS = ("driver", "cuda", "nccl", "image", "framework", "gpu_firmware", "ofed", "kernel")


def _version_drift(cands: dict, x: _Ctx, w: _ChangeWeigher, changes: list) -> dict[str, str]:
    """Version drift inside the job: the odd node out. Returns the rollouts in progress
    (``version:<comp>=<v>`` -> the node just upgraded to it while the rest of the job was not)."""
    rollout: dict[str, str] = {}
    rec, view, start = x.rec, x.view, x.start
    if len(rec.nodes) <= 1:
        return rollout
    for comp in DRIFT_COMPONENTS:
        vals: dict[str, list[str]] = {}
        for n in rec.nodes:
            v = view.versions_at(n, start).get(comp)
            if v is not None:
                vals.setdefault(v, []).append(n)
        if len(vals) <= 1:
            continue
        ranked = sorted(vals.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        majority = ranked[0][0]
        for v, ns in ranked[1:]:
            for n in ns:
                if any(ch.component == comp and ch.to == v and ch.node == n for ch, _ in changes):
                    # the odd node was just upgraded: a rollout in progress, blame the new version
                    rollout[f"version:{comp}={v}"] = n
                    continue
                # a mismatch that breaks a job (the CUDA runtime vs an old driver, NCCL
                # across ranks) vs one that rarely does (kernel, firmware)
                drift = w.plausible(0.6 if comp in ABI_COMPONENTS else 0.3)
                key = ("driver_software", f"node:{n}")
                c = cands.get(key) or _Cand("driver_software", f"node:{n}", 0.0, start,
                                            f"version drift: {n} runs {comp} {v}, the rest of the job {majority}")
                c.score = max(c.score, drift)
                cands[key] = c
    return rollout


def _version_changes(cands: dict, x: _Ctx, w: _ChangeWeigher, changes: list, rollout: dict,
                     change_failures: Callable[[str, int], int] | None) -> dict[str, str]:
    """A version change followed by failures: a change that put the version the attempt started
    on in place (a change during the run does not touch the running process), weighed by how
    recent it is, whether other jobs failed on it since, and whether the failure is one a change
    produces. Returns node -> the driver-stack change just made there."""
    driver_nodes: dict[str, str] = {}
    for ch, announced in changes:
        cur = x.view.versions_at(ch.node, x.start).get(ch.component)
        if cur is not None and cur != ch.to:
            continue
        comp = f"version:{ch.component}={ch.to}"
        # other jobs that failed on the new version since it arrived here (failures on it
        # elsewhere before this change say nothing about the change)
        prior = max(0, change_failures(comp, x.failure_ts) - change_failures(comp, ch.ts)) if change_failures else 0
        rw = w.recency(ch.ts)
        if x.view.ran_before(ch.node, ch.component, ch.to, ch.ts - 600_000):
            rw *= 0.5  # back to a version this node ran before (a rollback): weak evidence
        base = (0.45 if ch.component in RUNTIME_COMPONENTS else 0.25) * (1.0 if announced else 0.85)
        score = w.plausible(rw * (base + min(0.3, 0.15 * prior)))
        if rw >= 1.0 and ch.component in DRIVER_STACK:
            driver_nodes.setdefault(ch.node, comp)
        key = ("change_regression", comp)
        c = cands.get(key)
        if c is None:
            c = cands[key] = _Cand("change_regression", comp, score,
                                   ch.ts, f"{ch.component} changed {ch.from_ or '?'} -> {ch.to} on {ch.node}"
                                   + ("" if announced else " (seen in its inventory reports)")
                                   + (f"; {prior} earlier failure(s) since" if prior else ""))
        c.score = max(c.score, score)
        if announced and not any(s.id == ch.id for s in c.sigs):
            # the change itself on the timeline, whatever its time (the verdict rests on it)
            c.sigs.insert(0, Signal(id=ch.id, ts=ch.ts, layer="inventory", kind="version_change", subject=comp,
                                    node=ch.node, severity="info", evidence=[ch.id],
                                    summary=f"{ch.node}: {ch.component} {ch.from_ or '?'} -> {ch.to}"))
        if comp in rollout:
            c.score = max(c.score, w.plausible(0.65))
            c.summary += f"; {rollout[comp]} runs it while the rest of the job does not"
    return driver_nodes


def _driver_fault_after_change(cands: dict, x: _Ctx, w: _ChangeWeigher, driver_nodes: dict) -> None:
    """A driver/GSP fault on a node whose driver stack was just changed is that change's doing."""
    for c in list(cands.values()):
        if c.category != "driver_software" or not c.sigs:
            continue
        node = c.component.split(":", 1)[1].split("/", 1)[0]
        comp = driver_nodes.get(node)
        if comp is None or c.ts < x.start:
            continue
        ch_c = cands[("change_regression", comp)]
        if w.concrete < 0.5 and not w.user_bugs:
            ch_c.score = max(ch_c.score, min(0.9, c.score))
            ch_c.sigs.extend(c.sigs)
            ch_c.summary += f"; then {c.sigs[0].summary}"
            c.score *= 0.5


def _image_changes(cands: dict, x: _Ctx, f: _JobFacts, w: _ChangeWeigher, prev_image: str | None,
                   change_failures: Callable[[str, int], int] | None) -> None:
    """An image changed since the previous run; and broken packaging: a job that dies of it (a
    compiled extension with an undefined symbol, a missing module) died of its image, whether or
    not anyone announced the image, more so when other jobs failed on it too (a missing module
    of the user's own package is the user's code, not the image's packaging)."""
    rec = x.rec
    if not rec.image:
        return
    comp = f"version:image={rec.image}"

    def failures_on_it() -> int:
        return change_failures(comp, x.failure_ts) if change_failures else 0

    if prev_image and prev_image != rec.image and ("change_regression", comp) not in cands:
        prior = failures_on_it()
        cands[("change_regression", comp)] = _Cand(
            "change_regression", comp, w.plausible(0.45 + min(0.3, 0.15 * prior)), x.start,
            f"image changed {prev_image} -> {rec.image} since the previous run"
            + (f"; {prior} other job(s) failed on it" if prior else ""))
    packaging = [s for s in f.job_sigs if s.kind.startswith("log:") and s.ts <= x.failure_ts + x.cfg.post_grace_ms and (
        s.data.get("signature") == "abi_mismatch"
        or ((s.data.get("exception") or "").rsplit(".", 1)[-1] in LIB_EXCEPTIONS
            and any(m in (s.data.get("detail") or "") for m in ("site-packages", "dist-packages", ".so", "undefined symbol"))))]
    if not packaging or w.concrete >= 0.5:
        return
    prior = failures_on_it()
    score = 0.45 + min(0.3, 0.15 * prior)
    c = cands.get(("change_regression", comp))
    if c is None:
        c = cands[("change_regression", comp)] = _Cand(
            "change_regression", comp, score, packaging[0].ts,
            f"the job died of broken packaging in image {rec.image}: {packaging[0].summary}"
            + (f"; {prior} other job(s) failed on it" if prior else ""))
    c.score = max(c.score, score)
    c.sigs.extend(packaging)


def _change_candidates(cands: dict, x: _Ctx, f: _JobFacts, prev_image: str | None,
                       change_failures: Callable[[str, int], int] | None) -> None:
    """Version changes and drift: what the job's own errors say a change could have caused."""
    w = _ChangeWeigher(x, f, cands)
    changes = x.view.version_changes(x.rec.nodes, x.start - x.cfg.change_window_ms, x.start + x.cfg.post_grace_ms)
    rollout = _version_drift(cands, x, w, changes)
    driver_nodes = _version_changes(cands, x, w, changes, rollout, change_failures)
    _driver_fault_after_change(cands, x, w, driver_nodes)
    _image_changes(cands, x, f, w, prev_image, change_failures)


def _hung_in_checkpoint(cands: dict, x: _Ctx) -> None:
    """Hung inside a checkpoint write: the checkpoint's file system is the prime suspect."""
    ck_open = x.rec.ckpt_open
    if not (x.stalled and ck_open is not None and ck_open.ts <= x.cutoff and ck_open.ts >= x.failure_ts - 60_000):
        return
    m = None
    for n in x.rec.nodes:
        m = x.view.mount_of(n, ck_open.path)
        if m:
            break
    if m is None:
        parts = [p for p in ck_open.path.split("/") if p]
        m = "/" + parts[0] if parts else ck_open.path
    same = [c for c in cands.values() if c.category.startswith("storage") and c.component == f"path:{m}"]
    if not same:
        cands[("storage_slow", f"path:{m}")] = _Cand("storage_slow", f"path:{m}", 0.55, ck_open.ts,
                                                      f"the job hung writing checkpoint step {ck_open.step} to {ck_open.path}")
    for c in same:
        c.score = max(c.score, 0.6)


def _scheduler_ending(cands: dict, x: _Ctx, f: _JobFacts) -> None:
    """The scheduler's own word for the ending: preemption, a time limit, a cancel, an OOM, a node failure."""
    rec, state, stalled, failure_ts = x.rec, x.state, x.stalled, x.failure_ts
    if state == "preempted":
        cands[("scheduler", f"job:{rec.job}")] = _Cand("scheduler", f"job:{rec.job}", 0.97, failure_ts,
                                                        "preempted by the scheduler" + (f": {rec.reason}" if rec.reason else ""))
    elif state == "timeout" and not stalled:
        cands[("scheduler", f"job:{rec.job}")] = _Cand("scheduler", f"job:{rec.job}", _timeout_weight(cands), failure_ts,
                                                        "time limit reached while the job was progressing")
    elif state == "cancelled" and not stalled:
        cands[("scheduler", f"job:{rec.job}")] = _Cand("scheduler", f"job:{rec.job}", 0.6, failure_ts, "cancelled")
    elif (state == "out_of_memory" or (state == "failed" and _OOM_REASON.search(rec.reason or ""))) \
            and not any(c.category == "host_oom" for c in cands.values()):
        n = rec.nodes[0] if rec.nodes else "?"
        cands[("host_oom", f"node:{n}")] = _Cand("host_oom", f"node:{n}", 0.6, failure_ts,
                                                  "the scheduler reports the job out of memory")
    elif state == "node_fail" and not any(c.category == "node_hardware" for c in cands.values()):
        named = [s.data.get("failed_node") for s in f.job_sigs if s.data.get("failed_node") in rec.nodes]
        n = named[0] if named else (rec.nodes[0] if rec.nodes else "?")
        cands[("node_hardware", f"node:{n}")] = _Cand("node_hardware", f"node:{n}", 0.4, failure_ts,
                                                       "the scheduler reports a node failure")


def _application(cands: dict, x: _Ctx, f: _JobFacts, never_ran: bool) -> None:
    """``application`` only when no infrastructure candidate of weight remains, and only for code
    that ran: an attempt the scheduler never started, that made no progress and printed no error
    of its own (its image could not be pulled, its pod never scheduled) failed before any user
    code existed to be wrong."""
    rec, cfg = x.rec, x.cfg
    infra_weight = max((c.score for c in cands.values() if c.category not in ("application", "scheduler")), default=0.0)
    if not (f.app_errs or (x.state == "failed" and infra_weight < cfg.explain_min and not f.waited and not never_ran
                           and not any(c.category == "scheduler" for c in cands.values()))):
        return
    app_code = bool(f.code_errs)
    appl_score = 0.75 if app_code else (0.6 if f.code_bug else (0.45 if f.app_errs else 0.3))
    s0 = (f.code_errs or f.code_bug or f.app_errs or [None])[0]
    summary = (f"application error: {s0.summary}" if s0 is not None
               else f"job failed{f' with exit code {rec.exit_code}' if rec.exit_code is not None else ''}; "
                    + ("every infrastructure layer clean" if not cands else "no infrastructure signal of weight"))
    if infra_weight >= cfg.explain_min:
        appl_score = min(appl_score, infra_weight - 0.05, 0.3)
    elif app_code or not f.waited:
        # nothing of weight on the infrastructure and the job did not report waiting on it (or
        # its own code failed): the application verdict outranks the weightless candidates
        appl_score = max(appl_score, infra_weight + RANK_STEP)
    c = _Cand("application", f"job:{rec.job}", appl_score, s0.ts if s0 is not None else x.failure_ts, summary)
    c.sigs.extend(f.code_errs or f.code_bug or f.app_errs)
    cands[("application", f"job:{rec.job}")] = c


def _verdict(cands: dict, x: _Ctx, f: _JobFacts, never_ran: bool) -> tuple[list[_Cand], Cause, list[Cause]]:
    """The ranked candidates, the root cause and the hypotheses shown."""
    ranked = rank(cands.values())
    if x.stalled and ranked and all(c.score < x.cfg.explain_min for c in ranked):
        ranked = []
    if not ranked:
        root = Cause(category="unknown", component=f"job:{x.rec.job}", confidence=UNKNOWN_CONFIDENCE,
                     summary=_never_ran_summary(f.job_sigs) if never_ran
                     else "no signal on the job's resources explains the interruption")
        return ranked, root, []
    kept = ranked[:MAX_HYPOTHESES]
    hyps = [Cause(category=c.category, component=c.component, summary=c.summary, confidence=p,
                  evidence=[e for s in c.sigs for e in s.evidence][:20]) for c, p in zip(kept, shown_confidences(kept))]
    return ranked, hyps[0], hyps


def _ruled_out(cands: dict, sigs: list[Signal], covered_layers: Iterable[str]) -> list[str]:
    """Layers with telemetry on the job's resources and no signal of weight."""
    flagged = {s.layer for s in sigs if s.category is not None and s.score >= 0.2 and not s.subject.startswith("job:")}
    # a layer whose fault the job's own logs report (a kernel XID line, an NFS timeout) is not clean either
    flagged |= {s.layer for c in cands.values() if c.category in CONCRETE | {"driver_software"} and c.score >= 0.2
                for s in c.sigs if s.layer in INFRA_LAYERS and c.category not in ("gpu_oom", "host_oom")}
    return sorted(l for l in set(covered_layers) if l in INFRA_LAYERS and l not in flagged)


def _timeline(ranked: list[_Cand], x: _Ctx, f: _JobFacts) -> list[EvidenceItem]:
    """The evidence timeline: most relevant first (up to ``max_evidence``), then time-ordered."""
    rec, cfg = x.rec, x.cfg
    chosen: dict[str, EvidenceItem] = {}

    def add(s: Signal) -> None:
        if len(chosen) < cfg.max_evidence and s.id not in chosen:
            chosen[s.id] = EvidenceItem(id=s.evidence[0] if s.evidence else s.id, ts=s.ts, layer=s.layer,
                                        node=s.node, summary=s.summary)

    for c in ranked:
        for s in c.sigs[:8]:
            add(s)
    if f.sym_sig is not None:
        add(f.sym_sig)
    for s in x.sigs:
        if s.severity != "info" or s.kind in ("version_change", "port_up"):
            add(s)
    for ts, eid, st in rec.sched:
        if len(chosen) < cfg.max_evidence and ts <= x.cutoff:
            chosen.setdefault(eid, EvidenceItem(id=eid, ts=ts, layer="sched", node=None,
                                                summary=f"job {rec.job} attempt {rec.attempt} {st}"))
    if x.stalled and rec.prog_last_id:
        chosen.setdefault(rec.prog_last_id, EvidenceItem(id=rec.prog_last_id, ts=rec.prog_last_ts, layer="runtime",
                                                         node=None, summary=f"last progress: step {rec.prog_last_step}"))
    return sorted(chosen.values(), key=lambda e: (e.ts, e.id))


def _affected(ranked: list[_Cand], rec: AttemptRecord, view: View) -> Affected:
    """The job's resources and every ranked candidate's component, by kind."""
    def named(prefix: str) -> set[str]:
        return {c.component.removeprefix(prefix) for c in ranked if c.component.startswith(prefix)}
    return Affected(
        nodes=sorted(set(rec.nodes) | named("node:")),
        gpus=sorted(named("gpu:")),
        ports=sorted(named("port:") | {f"{l.switch}/{l.port}" for n in rec.nodes for l in view.links.get(n, ())}),
        paths=sorted(named("path:") | {m.path for n in rec.nodes for m in view.mounts.get(n, ())}))


def correlate(rec: AttemptRecord, job_signals: Iterable[Signal], resource_signals: Iterable[Signal],
              view: View, covered_layers: Iterable[str], cfg: CorrelateConfig = CorrelateConfig(), *,
              cutoff: int, failure_ts: int, state: str, stalled: bool = False, retry: Retry | None = None,
              change_failures: Callable[[str, int], int] | None = None, revision: int = 1,
              prev_image: str | None = None) -> Incident:
    """Explain one interrupted attempt. Pure: the result depends on the arguments only
    (signal lists are de-duplicated by id and sorted, so their order does not matter).
    The stages, in order: the attempt's signals; what the job's own output says; every
    infrastructure signal weighed into candidates; version changes and drift; a hang inside a
    checkpoint write; the scheduler's ending; the application verdict; the ranking."""
    start = rec.started()
    sigs = _attempt_signals(rec, job_signals, resource_signals, view, cfg, start, cutoff, failure_ts)
    x = _Ctx(rec, view, cfg, start, cutoff, failure_ts, state, stalled, sigs)
    f = _job_facts(x)
    cands = _infrastructure_candidates(x, f)
    _change_candidates(cands, x, f, prev_image, change_failures)
    _hung_in_checkpoint(cands, x)
    _prefer_used_mount(cands, rec, f.job_sigs)  # several failed mounts: the one the job is seen writing to
    _scheduler_ending(cands, x, f)
    never_ran = rec.start_ts is None and not rec.prog_n and not f.app_errs
    _application(cands, x, f, never_ran)
    ranked, root, hyps = _verdict(cands, x, f, never_ran)

    ck = rec.last_checkpoint(failure_ts)
    last_ck = Checkpoint(ts=ck.ts, step=ck.step, path=ck.path) if ck is not None else None
    base = max(ck.ts if ck is not None else start, start)
    lost = rec.gpus * max(0, failure_ts - base) / 3_600_000
    # every output record is bounded (issue 14): the caps are far above what is built here,
    # so they only cut pathological input (thousands of nodes, huge names or log lines)
    return cap_incident(Incident(
        id=incident_id(rec.job, rec.attempt), revision=revision, job=rec.job, attempt=rec.attempt,
        tenant=rec.tenant, failure_ts=failure_ts, symptom=f.symptom, root_cause=root, hypotheses=hyps,
        ruled_out=_ruled_out(cands, sigs, covered_layers), evidence=_timeline(ranked, x, f), last_checkpoint=last_ck,
        lost_gpu_hours=round(lost, 4), affected=_affected(ranked, rec, view), retry=retry,
        state="stalled" if stalled and state == "running" else state, start_ts=start, gpus=rec.gpus, image=rec.image,
    ))
