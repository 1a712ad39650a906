"""File-system rules (docs/diagnosis.md): node-local file systems, a file or a kernel storage
line to its mount (longest mount point, NFS server, Lustre file system name), and which mount
alarms the job's own storage signs say it felt."""

from __future__ import annotations

import math
from typing import Iterable

from ..detectors.job import AttemptRecord
from ..join import View
from ..signals import Signal

STORAGE_CATEGORIES = frozenset({"storage_full", "storage_unavailable", "storage_slow"})
#: weight left to a failed mount the job is not seen using when another failed mount holds its files
UNUSED_MOUNT_FACTOR = 0.4


#: file system types that live on one node (its disks, its memory): a fault of one explains only
#: jobs on that node, whatever path other nodes mount under the same name
LOCAL_FS = frozenset({"local", "ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "tmpfs", "ramfs", "vfat",
                      "overlay", "nvme", "md", "lvm"})


def _local_fs(sig: Signal, view: View) -> bool:
    """Is ``sig`` about a node-local file system: by the fs type it reports, else by the backend
    its node's inventory lists for the longest mount point holding its path."""
    fs = sig.data.get("fs_type")
    if not isinstance(fs, str) or not fs:
        path = sig.data.get("path")
        if not isinstance(path, str) and sig.subject.startswith("path:"):
            path = sig.subject[5:]
        held = [m for m in view.mounts.get(sig.node or "", ()) if isinstance(path, str) and _under(path, m.path)]
        fs = max(held, key=lambda m: len(m.path)).backend if held else ""
    return fs.lower() in LOCAL_FS


def _under(path: str, mount: str) -> bool:
    m = mount.rstrip("/") or "/"
    return path == m or path.startswith(m + "/") or m == "/"


#: a hang's own report comes late: the kernel says an NFS server is "not responding" only after its
#: major timeout (timeo x retrans, 60-180 s), a hung task after 120 s - a storage line this soon
#: after a stalled job's last progress is the hang's cause, not its consequence
HANG_REPORT_MS = 3 * 60_000
#: categories of a fault that leaves a job hung on I/O
HANG_CATEGORIES = frozenset({"storage_slow", "storage_unavailable"})
#: weight left to a storage alarm (a slow, full or failed mount) the job never felt: no storage
#: sign from the job at all, or its storage signs all name other mounts
UNFELT_STORAGE_FACTOR = 0.4
#: a silent stall (no error line) that begins while a mount turns slow on the job's own nodes is
#: the job's input (or its checkpoint) waiting on that mount - the stall is how a 1000x read
#: latency shows in a training loop. The mount's slow signal must start within this long before
#: the last progress (the detector fires a few samples after the onset) ...
STALL_SLOW_BEFORE_MS = 10 * 60_000
#: ... or this long after it beyond one progress interval (its consecutive-sample confirmation)
STALL_SLOW_AFTER_MS = 3 * 60_000
#: ... and on at least this share of the job's nodes (a shared file system slows for everyone;
#: one node's local disk slowing while the job stalls is not enough)
STALL_SLOW_NODE_SHARE = 0.5
#: ... and on two nodes at least: a mount slow on a single-node job's only node is as likely that
#: node's own load (session 12: the real-jobs hang case on a loaded 2-core machine, /tmp "slow"
#: from its probe, blamed as storage_slow instead of unknown)
STALL_SLOW_MIN_NODES = 2


def slow_at_stall(rec: AttemptRecord, sigs: Iterable[Signal], last_progress: int, post_grace: int) -> set[str]:
    """Mounts that turned slow on most of the job's nodes around the moment a stalled job made
    its last progress (outside check round 6, q11: Lustre read latency 2 ms -> 3 s on every node,
    progress stops within a second, no error line until the time limit)."""
    nodes = set(rec.nodes)
    if not nodes:
        return set()
    lo, hi = last_progress - STALL_SLOW_BEFORE_MS, last_progress + post_grace + STALL_SLOW_AFTER_MS
    seen: dict[str, set[str]] = {}
    for s in sigs:
        if s.kind == "storage_slow" and s.node in nodes and lo <= s.ts <= hi \
                and isinstance(s.data.get("path"), str) and not s.subject.startswith("job:"):
            seen.setdefault(s.data["path"].rstrip("/") or "/", set()).add(s.node)
    need = max(STALL_SLOW_MIN_NODES, math.ceil(len(nodes) * STALL_SLOW_NODE_SHARE))
    return {m for m, ns in seen.items() if len(ns) >= need}


def _felt_paths(rec: AttemptRecord, job_sigs: list[Signal], view: View, seen: dict) -> set[str]:
    """Paths the job's own storage signs are about: the mounts its kernel / framework storage
    lines resolve to, the files its errors and failed saves name, its checkpoints. Empty when
    its signs name no path (an I/O error without one): then any mount may be the one it felt."""
    out: set[str] = set()
    for s in job_sigs:
        if s.kind == "checkpoint_failed" or (s.layer == "storage" and s.kind.startswith("log:")):
            p = s.data.get("path")
            if not isinstance(p, str) and s.kind.startswith("log:"):
                p = _mount_for_log(s, rec, view)
            if isinstance(p, str) and p.startswith("/"):
                out.add(p)
    if out:
        out |= {c.path for c in rec.ckpts if c.path}
        if rec.ckpt_open is not None and rec.ckpt_open.path:
            out.add(rec.ckpt_open.path)
    return out


def _felt_here(sig: Signal, felt: set[str]) -> bool:
    """Did the job feel the storage alarm ``sig`` (about a mount): its signs name no path, or
    one under that mount."""
    if not felt:
        return True
    m = sig.data.get("path")
    if not isinstance(m, str) and sig.subject.startswith("path:"):
        m = sig.subject[5:]
    if not isinstance(m, str) or not m.startswith("/"):
        return True
    return any(_under(p, m) for p in felt)


def _prefer_used_mount(cands: dict, rec: AttemptRecord, job_sigs: list[Signal]) -> None:
    """When failed mounts compete (several on one node), the one holding the job's own files
    (its checkpoints, the paths its errors and failed saves name) failed it; the others are
    other jobs' trouble on the same node. Nothing changes when no failed mount holds them."""
    paths = {c.path for c in rec.ckpts} | ({rec.ckpt_open.path} if rec.ckpt_open is not None else set())
    paths |= {s.data["path"] for s in job_sigs if isinstance(s.data.get("path"), str)}
    paths.discard("")
    if not paths:
        return
    mounts = [k for k in cands if k[0] in STORAGE_CATEGORIES and k[1].startswith("path:")]
    used = [k for k in mounts if any(_under(p, k[1][5:]) for p in paths)]
    if not used or len(used) == len(mounts):
        return
    for k in mounts:
        if k not in used:
            cands[k].score *= UNUSED_MOUNT_FACTOR

def _mount_point(view: View, seen: dict | None, node: str | None, path: str, nodes: Iterable[str]) -> str | None:
    """The longest mount point holding ``path``: from the node's inventory or from the mounts its
    storage signals name (a file system known only from its samples), on ``node``, else on the
    job's nodes."""
    for n in ([node] if node else []) + [x for x in nodes if x != node]:
        known = [m for m in (view.mount_of(n, path),) if m] + [m for m in (seen or {}).get(n, ()) if _under(path, m)]
        if known:
            return max(known, key=len)
    return None

def _host(server: str) -> str:
    """The host part of a mount source (``filer-02.site:/export`` -> ``filer-02``)."""
    return server.split(":", 1)[0].split(".", 1)[0].lower()


def _lustre_fsname(server: str | None, path: str) -> str:
    """The file system name of a Lustre mount: its source ``<MGS NID>:/<fsname>``."""
    if server and ":/" in server:
        return server.rsplit(":/", 1)[1].strip("/").split("/", 1)[0]
    return ""


def _mount_for_log(sig: Signal, rec: AttemptRecord, view: View) -> str | None:
    """The mount a kernel storage message is about: by NFS server (its host name, with or
    without domain), by Lustre file system name (a target's ``<fsname>-OST0007`` -> the mount
    whose source is ``<MGS>:/<fsname>``), or the only mount of the message's file-system
    family on the message's node (else the job's nodes)."""
    server = sig.data.get("server")
    nodes = [sig.node] if sig.node else list(rec.nodes)
    mounts = [m for n in nodes for m in view.mounts.get(n, ())]
    if server:
        hit = sorted({m.path for m in mounts if m.server == server or (m.backend and server in m.backend)})
        if not hit:
            hit = sorted({m.path for m in mounts if m.server and _host(m.server) == _host(server)})
        if len(hit) == 1:
            return hit[0]
    fsname = sig.data.get("fsname")
    if fsname:
        hit = sorted({m.path for m in mounts if "lustre" in (m.backend or "").lower()
                      and _lustre_fsname(m.server, m.path) == fsname})
        if len(hit) == 1:
            return hit[0]
    fam = {"lustre_evicted": "lustre", "nfs_not_responding": "nfs"}.get(sig.data.get("signature", ""))
    if fam:
        hit = sorted({m.path for m in mounts if fam in (m.backend or "").lower()})
        if len(hit) == 1:
            return hit[0]
    return None
