"""``faultline collect storage``: per-mount I/O rates, capacity and a hang-proof mount probe.

Sources (Linux):
- ``/proc/self/mountinfo``: mount point -> fs type, source and ``major:minor``;
- ``/proc/diskstats`` (block devices, fields per Documentation/admin-guide/iostats.rst):
  IOPS, MB/s, average latency (ms per I/O) and average queue depth (weighted I/O ms per ms);
- ``/proc/self/mountstats`` (NFS): per-op ``READ``/``WRITE`` ops, bytes, execute time;
- ``statvfs``: capacity (``used_pct``) and the read-only flag.

Rates need two rounds: the first sample of a mount has null rates. The mount probe runs
``stat`` + ``statvfs`` in a daemon thread and waits ``--probe-timeout`` seconds: a hung NFS
server makes the probe report ``stale`` instead of hanging the collector; while a probe is
still stuck no second one is started for that path (one blocked thread per path at most).
``storage.mount`` states: ``ok``, ``stale`` (ESTALE or probe timeout), ``missing`` (path
absent or not a mount point), ``readonly``, ``full`` (used >= ``--full-pct``).
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Callable

from ...config import Settings
from ...schemas import Envelope, now_ms
from ...schemas.events import StorageMount, StorageMountData, StorageSample, StorageSampleData
from .base import Collector, hostname, new_id

NAME = "storage"
HELP = "per-mount IOPS, throughput, latency, queue depth, capacity and stale/hung mount probe"
INTERVAL_S = 10.0

log = logging.getLogger("faultline.collect.storage")

#: file systems worth watching by default (pseudo file systems are skipped)
DEFAULT_FS_TYPES = frozenset({
    "ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "nfs", "nfs4", "lustre", "gpfs",
    "beegfs", "cifs", "smb3", "ceph", "glusterfs", "wekafs", "virtiofs", "9p",
})
NFS_TYPES = frozenset({"nfs", "nfs4"})
SECTOR = 512


@dataclass(slots=True)
class Mount:
    path: str
    fs_type: str
    source: str
    dev: str  # "major:minor"
    options: str


def _unescape(s: str) -> str:
    return s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def read_mountinfo(path: str = "/proc/self/mountinfo") -> dict[str, Mount]:
    """Mount point -> Mount (the last mount on a path wins, as the kernel resolves it)."""
    out: dict[str, Mount] = {}
    with open(path) as fh:
        for line in fh:
            left, _, right = line.partition(" - ")
            f = left.split()
            r = right.split()
            if len(f) < 6 or len(r) < 2:
                continue
            mp = _unescape(f[4])
            out[mp] = Mount(mp, r[0], _unescape(r[1]), f[2], f[5])
    return out


def read_diskstats(path: str = "/proc/diskstats") -> dict[str, tuple[int, ...]]:
    """``major:minor`` -> (reads, sectors_read, read_ms, writes, sectors_written, write_ms,
    in_flight, io_ms, weighted_ms)."""
    out = {}
    with open(path) as fh:
        for line in fh:
            f = line.split()
            if len(f) < 14:
                continue
            v = f[3:14]
            out[f"{f[0]}:{f[1]}"] = (int(v[0]), int(v[2]), int(v[3]), int(v[4]), int(v[6]), int(v[7]),
                                     int(v[8]), int(v[9]), int(v[10]))
    return out


def read_mountstats(path: str = "/proc/self/mountstats") -> dict[str, tuple[int, ...]]:
    """NFS mount point -> (read_ops, read_bytes, read_exec_ms, write_ops, write_bytes,
    write_exec_ms) from the per-op statistics (fields: ops, transmissions, timeouts,
    bytes sent, bytes received, queue ms, rtt ms, execute ms)."""
    out: dict[str, tuple[int, ...]] = {}
    cur: str | None = None
    rd = wr = None
    try:
        fh = open(path)
    except OSError:
        return out
    with fh:
        for line in fh:
            if line.startswith("device "):
                if cur is not None and (rd or wr):
                    out[cur] = _nfs_tuple(rd, wr)
                parts = line.split()
                cur = None
                rd = wr = None
                if "with fstype" in line and parts[-1].split("=")[0] not in ("",):
                    fst = line.split("with fstype", 1)[1].split()[0]
                    if fst in NFS_TYPES:
                        cur = _unescape(parts[parts.index("on") + 1])
                continue
            if cur is None:
                continue
            s = line.strip()
            if s.startswith("READ:"):
                rd = [int(x) for x in s[5:].split()]
            elif s.startswith("WRITE:"):
                wr = [int(x) for x in s[6:].split()]
    if cur is not None and (rd or wr):
        out[cur] = _nfs_tuple(rd, wr)
    return out


def _nfs_tuple(rd: list[int] | None, wr: list[int] | None) -> tuple[int, ...]:
    rd = rd or [0] * 8
    wr = wr or [0] * 8
    return (rd[0], rd[4], rd[7], wr[0], wr[3], wr[7])


def _rate(d: int, dt: float) -> float:
    return round(max(d, 0) / dt, 3)


def _lat(ms: int, n: int) -> float | None:
    return round(ms / n, 3) if n > 0 else None


def probe_mount(path: str) -> tuple[str, str | None, float | None]:
    """stat + statvfs of ``path``: (state, error, used_pct). Blocking: run it in a thread."""
    try:
        os.stat(path)
        st = os.statvfs(path)
    except OSError as e:
        if e.errno == errno.ESTALE:
            return "stale", f"stale file handle: {e}", None
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            return "missing", f"{path} does not exist", None
        return "stale", f"{type(e).__name__}: {e}", None
    used_pct = None
    if st.f_blocks > 0:
        used = st.f_blocks - st.f_bfree
        avail = used + st.f_bavail
        used_pct = round(100.0 * used / avail, 2) if avail > 0 else 100.0
    if st.f_flag & os.ST_RDONLY:
        return "readonly", "mounted read-only", used_pct
    return "ok", None, used_pct


class _Probe:
    """One probe thread per path at a time; a stuck thread is left alone, not duplicated."""

    __slots__ = ("thread", "result", "started", "done")

    def __init__(self) -> None:
        self.thread: threading.Thread | None = None
        self.result: tuple[str, str | None, float | None] | None = None
        self.started = 0.0
        self.done = threading.Event()


class StorageCollector(Collector):
    name = NAME
    interval_s = INTERVAL_S

    def __init__(self, node: str | None = None, *, paths: list[str] | None = None,
                 fs_types: frozenset[str] = DEFAULT_FS_TYPES, probe_timeout_s: float = 2.0,
                 full_pct: float = 98.0, proc: str = "/proc",
                 probe: Callable[[str], tuple[str, str | None, float | None]] = probe_mount) -> None:
        self.node = node or hostname()
        self.source = f"storage@{self.node}"
        self.paths = [os.path.normpath(p) for p in paths] if paths else None
        self.fs_types = fs_types
        self.probe_timeout_s = probe_timeout_s
        self.full_pct = full_pct
        self.proc = proc
        self.probe = probe
        self._prev: dict[str, tuple[float, tuple[int, ...]]] = {}
        self._probes: dict[str, _Probe] = {}

    def _watched(self, mounts: dict[str, Mount]) -> list[tuple[str, Mount | None]]:
        if self.paths is not None:
            return [(p, mounts.get(p)) for p in self.paths]
        return [(p, m) for p, m in mounts.items() if m.fs_type in self.fs_types]

    def _run_probe(self, path: str) -> tuple[str, str | None, float | None]:
        pr = self._probes.get(path)
        if pr is not None and not pr.done.is_set():
            waited = time.monotonic() - pr.started
            if waited > self.probe_timeout_s:
                return "stale", f"stat/statvfs of {path} still blocked after {waited:.1f}s (hung mount?)", None
        else:
            pr = _Probe()
            pr.started = time.monotonic()
            self._probes[path] = pr

            def work(pr: _Probe = pr) -> None:
                try:
                    pr.result = self.probe(path)
                except Exception as e:  # never let a probe thread die silently
                    pr.result = ("stale", f"probe failed: {e}", None)
                pr.done.set()

            pr.thread = threading.Thread(target=work, name=f"storage-probe:{path}", daemon=True)
            pr.thread.start()
        if pr.done.wait(self.probe_timeout_s):
            return pr.result  # type: ignore[return-value]
        return "stale", f"stat/statvfs of {path} did not return within {self.probe_timeout_s:g}s (hung mount?)", None

    def collect_sync(self) -> list[Envelope]:
        ts = now_ms()
        t = time.monotonic()
        mounts = read_mountinfo(f"{self.proc}/self/mountinfo")
        disk = read_diskstats(f"{self.proc}/diskstats")
        nfs = read_mountstats(f"{self.proc}/self/mountstats")
        out: list[Envelope] = []
        for path, m in self._watched(mounts):
            if m is None:
                state, err, used = "missing", f"{path} is not mounted", None
                if not os.path.exists(path):
                    err = f"{path} does not exist"
            else:
                state, err, used = self._run_probe(path)
                if state == "ok" and "ro" in m.options.split(","):
                    state, err = "readonly", "mounted read-only"
                if state == "ok" and used is not None and used >= self.full_pct:
                    state, err = "full", f"{used:.1f}% used (threshold {self.full_pct:g}%)"
            out.append(StorageMount(v=1, id=new_id(), ts=ts, source=self.source, node=self.node,
                                    data=StorageMountData(path=path, state=state, error=err)))
            if m is None or state == "stale":
                continue
            cur = nfs.get(path) if m.fs_type in NFS_TYPES else disk.get(m.dev)
            data = StorageSampleData(path=path, fs_type=m.fs_type, used_pct=used)
            if cur is not None:
                prev = self._prev.get(path)
                self._prev[path] = (t, cur)
                if prev is not None and t - prev[0] > 0.05:
                    dt = t - prev[0]
                    d = [a - b for a, b in zip(cur, prev[1])]
                    if min(d[:6]) >= 0:  # a counter reset (device re-attached) skips one round
                        if m.fs_type in NFS_TYPES:
                            r_ops, r_b, r_ms, w_ops, w_b, w_ms = d
                            data.queue_depth = round((r_ms + w_ms) / (dt * 1000), 3)
                            data.read_mbps = round(r_b / dt / 1e6, 3)
                            data.write_mbps = round(w_b / dt / 1e6, 3)
                        else:
                            r_ops, r_sec, r_ms, w_ops, w_sec, w_ms = d[:6]
                            data.queue_depth = round(d[8] / (dt * 1000), 3)
                            data.read_mbps = round(r_sec * SECTOR / dt / 1e6, 3)
                            data.write_mbps = round(w_sec * SECTOR / dt / 1e6, 3)
                        data.read_iops = _rate(r_ops, dt)
                        data.write_iops = _rate(w_ops, dt)
                        data.read_lat_ms = _lat(r_ms, r_ops)
                        data.write_lat_ms = _lat(w_ms, w_ops)
            out.append(StorageSample(v=1, id=new_id(), ts=ts, source=self.source, node=self.node, data=data))
        return out

    async def collect(self) -> list[Envelope]:
        import asyncio

        return await asyncio.to_thread(self.collect_sync)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--node", help="node name (default: this host)")
    p.add_argument("--path", action="append", dest="paths", metavar="MOUNT",
                   help="mount point to watch (repeatable; default: every non-pseudo file system)")
    p.add_argument("--probe-timeout", type=float, default=2.0, metavar="SECONDS",
                   help="stat/statvfs longer than this marks the mount stale (default 2)")
    p.add_argument("--full-pct", type=float, default=98.0, help="used %% at which a mount is 'full' (default 98)")


def build(args: argparse.Namespace, settings: Settings) -> StorageCollector:
    return StorageCollector(args.node, paths=args.paths, probe_timeout_s=args.probe_timeout,
                            full_pct=args.full_pct)
