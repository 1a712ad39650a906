"""Catalog of framework and kernel log signatures: ``classify(message) -> Signature | None``.

A *signature* names what one log line (or multi-line block) says happened, with the
fields worth keeping (rank, NCCL op and sequence number, XID, pid, errno...), a layer
hint, a root-cause category hint, a severity and a *role*:

- ``cause``: the line itself points at a culprit (``CUDA out of memory`` -> gpu_oom,
  ``No space left on device`` -> storage_full, a kernel OOM kill -> host_oom, an XID).
- ``weak``: a guess that only stands when nothing better explains the failure
  (a bare Python traceback -> application).
- ``info``: notable, explains no failure by itself (a corrected memory error).
- ``symptom``: collateral damage that every rank prints when *something else* broke
  (NCCL watchdog timeouts, remote errors, connection resets, elastic ChildFailedError).

Formats are the ones the real software prints, e.g. PyTorch ``ProcessGroupNCCL``
(``[Rank 12] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=41,
OpType=ALLREDUCE, ... Timeout(ms)=600000) ran for 600032 milliseconds before timing out.``),
``torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ...``, ``NCCL WARN ...``,
``torch.distributed.elastic.multiprocessing.errors.ChildFailedError``, the Linux kernel's
``Out of memory: Killed process 4242 (python)`` and ``NVRM: Xid (PCI:0000:3b:00): 79, ...``.

Hot path: each rule has literal needles checked with ``in`` before its regex runs, and
rules are tried most specific first, so the common "not interesting" line costs a few
substring scans.
"""

from __future__ import annotations

import re
from typing import Any, Literal, Pattern

from msgspec import Struct

from ..schemas.names import canonical

Role = Literal["cause", "weak", "symptom", "info"]
SigSeverity = Literal["info", "warning", "critical"]


class Signature(Struct, frozen=True, kw_only=True):
    """One classified log line."""

    name: str
    layer: str                # gpu | hw | net | storage | runtime | sched
    category: str | None      # root-cause category hint (schemas.CATEGORIES) or None
    severity: SigSeverity
    role: Role
    fields: dict[str, Any] = {}


class _Rule:
    __slots__ = ("name", "needles", "regex", "layer", "category", "severity", "role", "extract")

    def __init__(self, name: str, needles: tuple[str, ...], regex: str | None, layer: str,
                 category: str | None, severity: SigSeverity, role: Role, extract=None) -> None:
        self.name = name
        self.needles = needles
        self.regex: Pattern[str] | None = re.compile(regex, re.S) if regex else None
        self.layer = layer
        self.category = category
        self.severity = severity
        self.role = role
        self.extract = extract


def _int(s: str | None) -> int | None:
    try:
        return int(s) if s is not None else None
    except ValueError:
        return None


def _watchdog(m: re.Match[str], msg: str) -> dict[str, Any]:
    f: dict[str, Any] = {}
    r = _RANK_RE.search(msg)
    if r:
        f["rank"] = int(r.group(1) or r.group(2))
    for key, rx in _WD_FIELDS:
        mm = rx.search(msg)
        if mm:
            v = mm.group(1)
            f[key] = int(v) if v.isdigit() else v
    ran = _RAN_FOR_RE.search(msg)
    if ran:
        f["ran_for_ms"] = int(ran.group(1))
    return f


def _rank_only(m: re.Match[str] | None, msg: str) -> dict[str, Any]:
    r = _RANK_RE.search(msg)
    return {"rank": int(r.group(1) or r.group(2))} if r else {}


def _xid(m: re.Match[str], msg: str) -> dict[str, Any]:
    from .xid import lookup

    info = lookup(int(m.group(2)))
    f: dict[str, Any] = {"pci": m.group(1), "xid": info.xid, "category": info.category,
                         "fatal": info.fatal}
    pid = _PID_RE.search(msg, m.end())
    if pid:
        f["pid"] = _int(pid.group(1))
    return f


def _oom_killer(m: re.Match[str], msg: str) -> dict[str, Any]:
    return {"pid": int(m.group(1)), "process": m.group(2)}


class _First:
    """A match whose group 1 is the first group that matched (for alternations)."""

    def __init__(self, m: re.Match[str]) -> None:
        self.g = next((g for g in m.groups() if g is not None), None)

    def group(self, i: int) -> str | None:
        return self.g if i == 1 else None


#: a Lustre target's name: <fsname>-OST<hex4> / -MDT<hex4> / -MGS
_LUSTRE_TARGET = re.compile(r"\b([A-Za-z0-9_.]{1,32}?)-(?:OST|MDT)[0-9a-fA-F]{4}\b")
#: extracted fields that name a node
NODE_FIELDS = frozenset({"host", "failed_node"})


def _groups(*names: str):
    def ex(m: re.Match[str], msg: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for i, n in enumerate(names, 1):
            v = m.group(i)
            if v is not None:
                # a node a line names (srun's "<node>: task N", "Node <node> failed") is spelled
                # like the events' nodes (schemas/names.py)
                out[n] = int(v) if v.isdigit() else (canonical(v) if n in NODE_FIELDS else v)
        r = _RANK_RE.search(msg)
        if r and "rank" not in out:
            out["rank"] = int(r.group(1) or r.group(2))
        return out
    return ex


#: the kubelet's root directory (``--root-dir``, default ``/var/lib/kubelet``): Kubernetes' "nodefs",
#: the file system that holds every pod's ``emptyDir`` volumes, container writable layers' scratch and
#: logs - the "ephemeral-storage" a pod uses and the kubelet evicts pods for when it runs low
KUBELET_ROOT_DIR = "/var/lib/kubelet"
#: the container runtime's image store (Kubernetes' "imagefs"; containerd's default root)
IMAGEFS_DIR = "/var/lib/containerd"
#: the resource a kubelet eviction names -> the file system it is about (node-pressure evictions
#: "The node was low on resource: ephemeral-storage." / older "[DiskPressure]"; nodefs / imagefs signals)
_EVICT_DISK = {"ephemeral-storage": KUBELET_ROOT_DIR, "diskpressure": KUBELET_ROOT_DIR, "nodefs": KUBELET_ROOT_DIR,
               "imagefs": IMAGEFS_DIR}


def _k8s_evicted_disk(m: re.Match[str], msg: str) -> dict[str, Any]:
    res = (m.group(1) or "ephemeral-storage").strip("[]").lower()
    res = next((k for k in _EVICT_DISK if k in res), "ephemeral-storage")
    return {"resource": res, "path": _EVICT_DISK[res]}


_QPATH_RE = re.compile(r"'(/[^']*)'")
_IMAGE_RE = re.compile(r"(?:pulling|pull) image \\?\"([^\"\\\s]+)")
#: why an image pull failed, by the words the runtime prints (first match wins)
_PULL_WHY = (("registry unreachable", re.compile(r"i/o timeout|connection refused|no such host|dial tcp|"
                                                  r"TLS handshake timeout|network is unreachable|context deadline exceeded")),
             ("access denied", re.compile(r"unauthorized|pull access denied|authentication required|403 Forbidden")),
             ("image not found", re.compile(r"manifest unknown|not found|does not exist|NotFound")))


def _image_pull(msg: str) -> dict[str, Any]:
    f: dict[str, Any] = {}
    m = _IMAGE_RE.search(msg)
    if m:
        f["image"] = m.group(1)
    for why, rx in _PULL_WHY:
        if rx.search(msg):
            f["reason"] = why
            break
    return f


def _storage_err(m: re.Match[str] | None, msg: str) -> dict[str, Any]:
    f = _rank_only(None, msg)
    p = _QPATH_RE.search(msg)
    if p:
        f["path"] = p.group(1)
    return f


def _traceback(m: re.Match[str] | None, msg: str) -> dict[str, Any]:
    f = _rank_only(None, msg)
    last = _EXC_RE.findall(msg)
    if last:
        f["exception"] = last[-1][0]
        f["detail"] = last[-1][1][:200]
    return f


_RANK_RE = re.compile(r"\[[Rr]ank ?(\d+)\]|\b[Rr]ank[ =:]+(\d+)")
_WD_FIELDS = (
    ("seq", re.compile(r"SeqNum=(\d+)")),
    ("op", re.compile(r"OpType=(\w+)")),
    ("timeout_ms", re.compile(r"Timeout\(ms\)=(\d+)")),
    # gloo (CPU): "[../gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 15000ms for recv operation to complete"
    ("timeout_ms", re.compile(r"Timed out waiting (\d+)ms for \w+ operation")),
    ("op", re.compile(r"Timed out waiting \d+ms for (\w+) operation")),
)
_RAN_FOR_RE = re.compile(r"ran for (\d+) milliseconds")
_PID_RE = re.compile(r"pid=['\"]?(\d+)")
_EXC_RE = re.compile(r"^(?:\[[Rr]ank ?\d+\]:\s*)?\s*([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning))(?::\s*(.*))?$", re.M)

# Most specific first. needles: ANY of them must occur (case-sensitive) for the regex to run.
_RULES: tuple[_Rule, ...] = (
    # ---- kernel / driver (stream "kernel" usually)
    _Rule("xid", ("NVRM: Xid",), r"NVRM: Xid \(PCI:([0-9A-Fa-f:.]+)\): (\d+)", "gpu", None, "critical", "cause", _xid),
    _Rule("gpu_fallen_off_bus", ("fallen off the bus",),
          # "GPU at PCI:0000:3b:00: GPU has fallen off the bus." and newer drivers' three lines
          # "The NVIDIA GPU 0000:b7:00.0 / (PCI ID: 10de:2330) installed in this system has /
          # fallen off the bus and is not responding to commands." (no Xid number)
          r"GPU (?:at PCI:)?(?:([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?):? )?(?:GPU )?has fallen off the bus"
          r"|NVIDIA GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)[\s\S]{0,300}?fallen off the bus",
          "gpu", "gpu_hardware", "critical", "cause", lambda m, msg: _groups("pci")(_First(m), msg)),
    _Rule("cuda_ecc_error", ("uncorrectable ECC error",), r"uncorrectable ECC error encountered",
          "gpu", "gpu_hardware", "critical", "cause", _rank_only),
    _Rule("cuda_nvlink_error", ("uncorrectable NVLink error",), r"uncorrectable NVLink error",
          "gpu", "gpu_nvlink", "critical", "cause", _rank_only),
    # Slurm's own report of a cgroup OOM kill in a step, and srun's per-task line
    _Rule("slurm_oom", ("oom_kill event", "oom-kill event", "OOM Killed", "Out Of Memory"),
          r"Detected \d+ oom[_-]kill events?|OOM Killed|(?:error: (\S+): )?task \d+: Out Of Memory",
          "runtime", "host_oom", "critical", "cause", _groups("host")),
    _Rule("cgroup_oom", ("Memory cgroup out of memory",), r"Memory cgroup out of memory: Kill(?:ed)? process (\d+) \(([^)]*)\)",
          "runtime", "host_oom", "critical", "cause", _oom_killer),
    _Rule("oom_killer", ("Out of memory: Kill", "oom-kill:", "invoked oom-killer"),
          r"Out of memory: Kill(?:ed)? process (\d+) \(([^)]*)\)|oom-kill:.*?task=([^,]*),pid=(\d+)|(\S+) invoked oom-killer",
          "runtime", "host_oom", "critical", "cause",
          lambda m, s: ({"pid": int(m.group(1)), "process": m.group(2)} if m.group(1)
                        else {"pid": int(m.group(4)), "process": m.group(3)} if m.group(4)
                        else {"process": m.group(5)})),
    # the kubelet evicting a pod because the node's disk ran low (its eviction manager, node-pressure
    # eviction: "Evicted: The node was low on resource: ephemeral-storage. Threshold quantity: 10%,
    # available: 8.7%. Container trainer was using 1650Gi ...", older kubelets "[DiskPressure]"), or
    # because a pod exceeded its own ephemeral-storage limit ("Pod ephemeral local storage usage exceeds
    # the total limit of containers 10Gi.", "Container x exceeded its local ephemeral storage limit",
    # "Usage of EmptyDir volume "cache" exceeds the limit "1Gi"."): the contract's storage_full
    # (capacity) of the file system it names - the kubelet's root (nodefs) or the image store (imagefs)
    _Rule("k8s_evicted_disk", ("low on resource", "ephemeral local storage", "ephemeral storage limit",
                               "Usage of EmptyDir volume"),
          r"low on resource: \[?((?:ephemeral-storage|DiskPressure|nodefs|imagefs)[\w.]*)\]?"
          r"|ephemeral local storage usage exceeds|exceeded its local ephemeral storage limit"
          r"|Usage of EmptyDir volume \S+ exceeds the limit",
          "storage", "storage_full", "critical", "cause", _k8s_evicted_disk),
    # ... or because the node's memory ran low ("The node was low on resource: memory.", "[MemoryPressure]"):
    # the contract's host_oom (a host memory kill), on the node the line is about
    _Rule("k8s_evicted_memory", ("low on resource",), r"low on resource: \[?(?:memory|MemoryPressure)\b",
          "runtime", "host_oom", "critical", "cause", None),
    _Rule("edac_ce", ("EDAC",), r"EDAC \S+: \d+ CE", "hw", None, "warning", "info", None),
    _Rule("mce", ("Hardware Error", "Machine check", "Machine Check", "EDAC"),
          r"\[Hardware Error\]|Machine [Cc]heck|EDAC \S+: \d+ UE", "hw", "node_hardware", "critical", "cause", None),
    _Rule("hung_task", ("blocked for more than",), r"task (\S+?):(\d+) blocked for more than (\d+) seconds",
          "runtime", None, "warning", "symptom", _groups("process", "pid", "seconds")),
    _Rule("nfs_not_responding", ("not responding",), r"nfs: server (\S+) not responding",
          "storage", "storage_slow", "warning", "cause", _groups("server")),
    _Rule("nic_link_down", ("Link down", "Link is Down", "link down", "link becomes down"),
          r"(?:^|\s)(\S+?):? (?:NIC )?[Ll]ink (?:is )?[Dd]own|(\S+): link becomes down", "net", "network_link", "critical", "cause",
          lambda m, s: {"iface": (m.group(1) or m.group(2) or "").rstrip(":")}),
    # NVIDIA Fabric Manager (NVSwitch systems) dying: without it the GPUs' NVLink fabric is
    # unmanaged and CUDA work fails on every GPU of the node. The kernel's "nv-fabricmanager[2231]:
    # segfault at 0 ip ..." and systemd's "nvidia-fabricmanager.service: Main process exited,
    # code=killed, status=11/SEGV" / "... Failed with result 'signal'." - a system daemon of the
    # driver stack, never the user's code (before the generic segfault rule)
    _Rule("fabric_manager_failed", ("fabricmanager",),
          r"(?:nv|nvidia)-fabricmanager(?:\.service)?(?:\[\d+\])?: (?:segfault at|Main process exited, code=(?:killed|dumped)"
          r"|Failed with result|Failed to start)",
          "gpu", "driver_software", "critical", "cause", None),
    _Rule("segfault", ("segfault at", "Segmentation fault", "SIGSEGV"),
          r"(\S+?)\[(\d+)\]: segfault at|Segmentation fault|SIGSEGV", "runtime", "application", "critical", "weak",
          _groups("process", "pid")),
    # ---- framework / application
    # CUDA error 802 cudaErrorSystemNotReady, "system not yet initialized": the node's GPU system
    # software is not ready for CUDA work - on NVSwitch systems the fabric manager is not running
    # (NCCL: "NCCL WARN Cuda failure 'system not yet initialized'"); the node's driver stack, not
    # the job (before nccl_error / cuda_error, which would take it for a symptom)
    _Rule("cuda_system_not_ready", ("system not yet initialized", "cudaErrorSystemNotReady"),
          r"system not yet initialized|cudaErrorSystemNotReady", "gpu", "driver_software", "critical", "cause", _rank_only),
    # Slurm's authentication through munge failing on a node (munged dead or its socket gone, a
    # credential rejected): slurmd cannot answer the controller, which marks the node down "Not
    # responding" although the node itself is healthy - the scheduler's own machinery failed.
    # "error: Munge encode failed: Failed to access "/run/munge/munge.socket.2": No such file or
    # directory", "error: Munge decode failed: Expired credential", "slurm_send_node_msg:
    # auth_g_create: RESPONSE_PING has authentication error", munged's "munged[1833]: Error: ..."
    _Rule("slurm_auth_failure", ("Munge ", "munge", "auth_g_"),
          r"Munge (?:en|de)code failed|auth_g_(?:create|verify|pack|unpack)\b[^\n]*authentication error"
          r"|munged(?:\[\d+\])?: Error: |Unable to (?:access|connect to) munge|Protocol authentication error",
          "sched", "scheduler", "critical", "cause", None),
    # the container runtime could not pull the job's image (kubelet / containerd / CRI-O): the job's
    # code never ran. kubelet: 'Failed to pull image "reg/ml/img:tag": rpc error: ... dial tcp
    # 10.40.0.9:443: i/o timeout', "Error: ErrImagePull", 'Back-off pulling image "..."',
    # "ImagePullBackOff"; the image is kept, and what failed (a registry unreachable, an image or
    # tag that does not exist, access denied)
    _Rule("image_pull_failed", ("Failed to pull image", "ErrImagePull", "ImagePullBackOff", "Back-off pulling image",
                                "ErrImageNeverPull"),
          r"Failed to pull image|ErrImagePull|ImagePullBackOff|Back-off pulling image|ErrImageNeverPull",
          "runtime", None, "critical", "symptom", lambda m, s: _image_pull(s)),
    _Rule("cuda_oom", ("out of memory", "OutOfMemoryError", "CUBLAS_STATUS_ALLOC_FAILED", "RESOURCE_EXHAUSTED"),
          r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|CUBLAS_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation"
          r"|RESOURCE_EXHAUSTED: Out of memory",
          "gpu", "gpu_oom", "critical", "cause",
          lambda m, s: {**_rank_only(None, s), **({"gpu": int(g.group(1))} if (g := re.search(r"GPU (\d+) has a total", s)) else {})}),
    # a collective that timed out waiting for a rank: NCCL's watchdog, or gloo's own timeout
    # (torch 1.13 gloo: "RuntimeError: [./gloo/transport/tcp/unbound_buffer.cc:81] Timed out
    # waiting 15000ms for recv operation to complete", printed by the ranks left waiting)
    _Rule("nccl_watchdog_timeout", ("Watchdog caught collective operation timeout", "WorkNCCL(", "Timed out waiting"),
          r"Watchdog caught collective operation timeout|WorkNCCL\(.*?\) ran for"
          r"|gloo/[^\]]*\] Timed out waiting \d+ms for \w+ operation", "runtime", None, "critical", "symptom", _watchdog),
    # torch.save failing to write (torch 1.13 says no errno: the file system's state says why):
    # "PytorchStreamWriter failed writing file data/6: file write failed" (a full mount),
    # "File /ckpt/step_9.pt.tmp cannot be opened." (a read-only or missing directory)
    _Rule("torch_save_failed", ("PytorchStreamWriter failed writing", "cannot be opened"),
          r"PytorchStreamWriter failed writing file|File (/\S+) cannot be opened\.", "storage", None, "critical", "symptom",
          lambda m, s: {**_rank_only(None, s), **({"path": m.group(1)} if m.group(1) else {})}),
    _Rule("enospc", ("No space left on device", "ENOSPC", "Errno 28", "Disk quota exceeded"),
          r"No space left on device|ENOSPC|\[Errno 28\]|Disk quota exceeded", "storage", "storage_full", "critical", "cause", _storage_err),
    # PyTorch's DataLoader when its workers' shared memory (/dev/shm, a tmpfs; 64 MB by default in a
    # container) runs out: "ERROR: Unexpected bus error encountered in worker. This might be caused by
    # insufficient shared memory (shm)." and "DataLoader worker (pid 123) is killed by signal: Bus error.
    # It is possible that dataloader's workers are out of shared memory. Please try to raise your shared
    # memory limit." - the contract's storage_full (capacity) of /dev/shm, not the user's code
    _Rule("shm_exhausted", ("insufficient shared memory", "out of shared memory", "raise your shared memory limit"),
          r"insufficient shared memory|out of shared memory|raise your shared memory limit", "storage", "storage_full",
          "critical", "cause", lambda m, s: {**_rank_only(None, s), "path": "/dev/shm"}),
    _Rule("stale_file_handle", ("Stale file handle", "ESTALE", "Errno 116"),
          r"Stale file handle|ESTALE|\[Errno 116\]", "storage", "storage_unavailable", "critical", "cause", _storage_err),
    _Rule("readonly_fs", ("Read-only file system", "Errno 30", "EROFS"),
          r"Read-only file system|\[Errno 30\]|EROFS", "storage", "storage_unavailable", "critical", "cause", _storage_err),
    _Rule("transport_endpoint", ("Transport endpoint is not connected",), r"Transport endpoint is not connected",
          "storage", "storage_unavailable", "critical", "cause", _storage_err),
    _Rule("io_error", ("Input/output error", "Errno 5]", "I/O error", "Errno 110]"),
          r"Input/output error|\[Errno 5\]|I/O error|\[Errno 110\]", "storage", None, "warning", "symptom", _storage_err),
    # the file system's name is the prefix of its targets' names (<fsname>-OST0007, <fsname>-MDT0000):
    # "LustreError: 167-0: proj-OST0007-osc-ffff9a3c5e4d1800: This client was evicted by proj-OST0007"
    _Rule("lustre_evicted", ("LustreError", "was evicted by"), r"evicted by|LustreError", "storage",
          "storage_unavailable", "critical", "cause",
          lambda m, s: {"fsname": f.group(1)} if (f := _LUSTRE_TARGET.search(s)) else {}),
    # a peer rank gone: NCCL's remote error, or gloo's "RuntimeError: [./gloo/transport/tcp/pair.cc:598]
    # Connection closed by peer [127.0.0.1]:902" on the ranks a dead rank leaves behind
    _Rule("nccl_remote_error", ("ncclRemoteError", "remote process exited", "Got completion from peer",
                                "Connection closed by remote peer", "Connection closed by peer"),
          r"ncclRemoteError|remote process exited|Got completion from peer\s*(\S*).*?status=(\d+)|Connection closed by remote peer"
          r"|gloo/[^\]]*\] Connection closed by peer",
          "net", None, "critical", "symptom", _groups("peer", "status")),
    _Rule("nccl_error", ("NCCL WARN", "ncclSystemError", "ncclInternalError", "ncclUnhandledCudaError",
                         "ncclInvalidUsage", "NCCL error", "DistBackendError", "NCCL communicator was aborted"),
          r"NCCL WARN\s*(.*)|(ncclSystemError|ncclInternalError|ncclUnhandledCudaError|ncclInvalidUsage)|NCCL error|DistBackendError|NCCL communicator was aborted",
          "runtime", None, "critical", "symptom", _groups("detail", "nccl_code")),
    _Rule("cuda_driver_mismatch", ("driver version is insufficient", "CUDA driver version", "driver on your system is too old"),
          r"driver version is insufficient|driver on your system is too old", "gpu", "driver_software", "critical", "cause", _rank_only),
    _Rule("cuda_illegal_address", ("illegal memory access", "misaligned address", "illegal instruction"),
          r"an illegal memory access was encountered|misaligned address|an illegal instruction was encountered",
          "gpu", None, "critical", "weak", _rank_only),
    # a failed assertion inside a CUDA kernel (ATen's checks of the user's data, e.g. a label out
    # of range in a loss: "Loss.cu:250: ... Assertion `t >= 0 && t < n_classes` failed.") and
    # PyTorch's report of it ("CUDA error: device-side assert triggered"): the user's data or code
    _Rule("cuda_device_assert", ("device-side assert triggered", "Assertion `"),
          r"Assertion `[^`]*` failed|device-side assert triggered", "gpu", None, "critical", "weak", _rank_only),
    _Rule("dataloader_timeout", ("DataLoader timed out",), r"DataLoader timed out", "storage", None, "critical",
          "symptom", _rank_only),
    _Rule("cuda_error", ("CUDA error: ",), r"CUDA error: ([^\n]*)", "gpu", None, "critical", "symptom", _groups("error")),
    _Rule("abi_mismatch", ("undefined symbol",), r"undefined symbol: (\S+)", "runtime", None, "critical", "weak",
          _groups("symbol")),
    _Rule("node_failure", ("Node failure on",), r"Node failure on (\S+)", "sched", "node_hardware", "warning", "symptom",
          _groups("failed_node")),
    _Rule("connection_reset", ("Connection reset by peer", "ECONNRESET", "Errno 104", "Broken pipe"),
          r"Connection reset by peer|ECONNRESET|\[Errno 104\]|Broken pipe", "net", None, "warning", "symptom", _rank_only),
    _Rule("elastic_child_failed", ("ChildFailedError",), r"ChildFailedError",
          "runtime", None, "critical", "symptom",
          lambda m, s: {**_rank_only(None, s), **({"exitcode": int(e.group(1))} if (e := re.search(r"exitcode\s*:\s*(-?\d+)", s)) else {})}),
    _Rule("sched_time_limit", ("DUE TO TIME LIMIT",), r"DUE TO TIME LIMIT", "sched", "scheduler", "warning", "cause", None),
    _Rule("sched_preempted", ("DUE TO PREEMPTION",), r"DUE TO PREEMPTION", "sched", "scheduler", "warning", "cause", None),
    _Rule("sigterm", ("SIGTERM", "got signal: 15", "Signals.SIGTERM"), r"SIGTERM|got signal: 15", "runtime", None, "warning", "symptom", _rank_only),
    _Rule("python_traceback", ("Traceback (most recent call last)", "Error: ", "Exception: "),
          r"Traceback \(most recent call last\)|^(?:\[[Rr]ank ?\d+\]:\s*)?\s*[A-Za-z_][\w.]*(?:Error|Exception): ", "runtime", "application",
          "critical", "weak", _traceback),
)

#: names of every signature the catalog can return
NAMES: tuple[str, ...] = tuple(r.name for r in _RULES)
_BY_NAME = {r.name: r for r in _RULES}
# one pass over the line with every needle: most lines match none and stop here
_ANY_NEEDLE = re.compile("|".join(sorted({re.escape(n) for r in _RULES for n in r.needles}, key=len, reverse=True)))


def classify(message: str) -> Signature | None:
    """Return the most specific signature of ``message`` or None when nothing matches."""
    if not message or _ANY_NEEDLE.search(message) is None:
        return None
    for rule in _RULES:
        for nd in rule.needles:
            if nd in message:
                break
        else:
            continue
        m = rule.regex.search(message) if rule.regex is not None else None
        if rule.regex is not None and m is None:
            continue
        fields = rule.extract(m, message) if rule.extract is not None else {}
        return Signature(name=rule.name, layer=rule.layer, category=fields.get("category", rule.category),
                         severity=rule.severity, role=rule.role, fields=fields)
    return None


def from_name(name: str, message: str = "") -> Signature | None:
    """A signature named by a collector (``runtime.log`` ``data.signature``): its catalog
    entry, with fields extracted from ``message`` when the rule's regex matches it."""
    rule = _BY_NAME.get(name)
    if rule is None:
        return None
    fields: dict[str, Any] = {}
    if message and rule.regex is not None and rule.extract is not None:
        m = rule.regex.search(message)
        if m is not None:
            fields = rule.extract(m, message)
    return Signature(name=rule.name, layer=rule.layer, category=fields.get("category", rule.category),
                     severity=rule.severity, role=rule.role, fields=fields)
