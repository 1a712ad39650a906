"""``faultline collect kernel``: GPU XIDs and job-relevant kernel errors from the kernel log.

Source, first that works: ``--file PATH`` (dmesg/syslog/kern.log text, followed across
rotation and truncation), ``/dev/kmsg`` (needs root or CAP_SYSLOG), ``journalctl -k -f``.

Emits
- ``gpu.xid`` for ``NVRM: Xid (PCI:0000:3b:00): 79, pid=..., ...`` lines; the GPU index comes
  from the PCI address through NVML when it is available (else ``/proc/driver/nvidia``,
  else null);
- ``runtime.log`` (stream ``kernel``) for OOM kills, hung tasks, NIC link down and file
  system / block I/O errors.

``runtime.*`` events need a job (contract). The job is, in order: ``--job``, the config
``job``, ``SLURM_JOB_ID`` in the environment, the Slurm jobs running on this node
(``squeue -h -w NODE -o %i``, cached 30 s). A kernel line on a node that runs several jobs
goes out once per job (they share the node). With no job known the line is not published
as ``runtime.log`` (a node-level kernel line without a job has no contract kind); it is
counted in ``stats['no_job']`` and logged at debug level. XIDs are node-scoped and always go out.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import re
import shutil
import subprocess
import time
from typing import Callable

from ...config import Settings
from ...schemas import Envelope, now_ms
from ...schemas.events import GpuXid, GpuXidData, RuntimeLog, RuntimeLogData
from ._tail import FileTail
from .base import Collector, hostname, new_id

NAME = "kernel"
HELP = "NVRM Xid lines -> gpu.xid; OOM kills, hung tasks, NIC link and FS errors -> runtime.log"
INTERVAL_S = 1.0

log = logging.getLogger("faultline.collect.kernel")

XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})[^)]*\): (\d+)"
                    r"(?:, pid=(\d+|'?<unknown>'?))?")
#: (signature, pattern) of kernel lines that matter to a training job
KERNEL_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("host_oom", re.compile(r"(?:Memory cgroup out of memory|Out of memory): Killed process \d+")),
    ("hung_task", re.compile(r"INFO: task \S+ blocked for more than \d+ seconds")),
    ("nic_link_down", re.compile(r"(?:NIC )?[Ll]ink (?:is )?[Dd]own\b|carrier lost|\blink down\b")),
    ("fs_error", re.compile(
        r"EXT4-fs error|EXT4-fs \(\S+\): Remounting filesystem read-only|XFS \(\S+\):.*(?:[Cc]orruption|shutdown|I/O error)"
        r"|Remounting filesystem read-only|nfs: server \S+ not responding|LustreError|"
        r"blk_update_request: I/O error|I/O error, dev \S+|Buffer I/O error|No space left on device")),
)
_DMESG_PREFIX = re.compile(r"^\s*\[\s*\d+\.\d+\]\s*")
_SYSLOG_KERNEL = re.compile(r"^.*?\bkernel: ")


def classify_kernel(line: str) -> str | None:
    for sig, rx in KERNEL_PATTERNS:
        if rx.search(line):
            return sig
    return None


def catalog_name(msg: str) -> str | None:
    """The shared signature catalog's name for a kernel line (None for non-kernel kinds)."""
    try:
        from ...streams.signatures import classify
    except ImportError:  # streams not installed alongside: the stream agents classify
        return None
    sig = classify(msg)
    if sig is None or sig.name == "python_traceback":
        return None
    return sig.name


def strip_prefix(line: str) -> str:
    """Drop syslog (``Nov 29 ... host kernel: ``) and dmesg (``[ 12.345678] ``) prefixes."""
    line = _SYSLOG_KERNEL.sub("", line, count=1)
    return _DMESG_PREFIX.sub("", line, count=1)


def nvidia_proc_pci_map(root: str = "/proc/driver/nvidia/gpus") -> dict[str, int]:
    """PCI -> device minor from the driver's /proc tree (used when NVML is not loadable)."""
    from .nvml import norm_pci

    out: dict[str, int] = {}
    try:
        entries = os.listdir(root)
    except OSError:
        return out
    for e in entries:
        try:
            with open(os.path.join(root, e, "information")) as fh:
                for line in fh:
                    if line.startswith("Device Minor:"):
                        pci = norm_pci(e)
                        if pci:
                            out[pci] = int(line.split(":", 1)[1])
        except (OSError, ValueError):
            continue
    return out


def nvml_pci_map() -> dict[str, int]:
    try:
        from .nvml import NvmlCollector, load_nvml

        c = NvmlCollector(nvml=load_nvml(), xid_events=False)
    except Exception:
        return {}
    try:
        return c.pci_to_index()
    finally:
        try:
            c.nv.nvmlShutdown()
        except Exception:
            pass


class JobResolver:
    """Which job(s) run on this node: fixed, from the environment, or from squeue (cached)."""

    def __init__(self, node: str, job: str | None = None, *, ttl_s: float = 30.0,
                 squeue: str | None = None) -> None:
        self.node = node
        self.fixed = job or os.environ.get("SLURM_JOB_ID")
        self.ttl_s = ttl_s
        self.squeue = squeue if squeue is not None else shutil.which("squeue")
        self._cache: tuple[float, list[str]] = (0.0, [])

    def jobs(self) -> list[str]:
        if self.fixed:
            return [self.fixed]
        if not self.squeue:
            return []
        t = time.monotonic()
        if t - self._cache[0] < self.ttl_s:
            return self._cache[1]
        try:
            r = subprocess.run([self.squeue, "-h", "-w", self.node, "-t", "R", "-o", "%i"],
                               capture_output=True, text=True, timeout=5)
            jobs = [j.strip() for j in r.stdout.split() if j.strip()] if r.returncode == 0 else []
        except (OSError, subprocess.TimeoutExpired):
            jobs = []
        self._cache = (t, jobs)
        return jobs


class KmsgSource:
    """``/dev/kmsg`` records (``prio,seq,usec,flags;message``), non-blocking.

    With ``state_path`` the last sequence number read is kept in a small file: after an agent
    restart within the same boot, the records logged while it was down (still in the ring
    buffer) are read, and nothing is read twice. Without state (or after a reboot) reading
    starts at the end (``from_start`` reads the whole buffer).
    """

    def __init__(self, path: str = "/dev/kmsg", *, from_start: bool = False,
                 state_path: str | None = None) -> None:
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.state_path = state_path
        self.boot_id = _read_boot_id()
        self.last_seq = -1
        self._saved_seq = -1
        saved = self._load_state()
        if saved is not None:
            self.last_seq = self._saved_seq = saved  # read from the start, skip what was seen
        elif not from_start:
            os.lseek(self.fd, 0, os.SEEK_END)
        self.boot_ms = time.time() * 1000 - time.clock_gettime(time.CLOCK_MONOTONIC) * 1000
        self.overwritten = 0

    def _load_state(self) -> int | None:
        if not self.state_path:
            return None
        try:
            with open(self.state_path) as fh:
                boot, seq = fh.read().split()
            return int(seq) if boot == self.boot_id else None
        except (OSError, ValueError):
            return None

    def _save_state(self) -> None:
        if not self.state_path or self.last_seq == self._saved_seq:
            return
        d = os.path.dirname(self.state_path)
        if d:
            os.makedirs(d, exist_ok=True)
        tmp = self.state_path + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(f"{self.boot_id} {self.last_seq}\n")
        os.replace(tmp, self.state_path)
        self._saved_seq = self.last_seq

    def poll(self) -> list[tuple[int | None, str]]:
        out: list[tuple[int | None, str]] = []
        for _ in range(20_000):  # bounded per round; the rest waits for the next round
            try:
                rec = os.read(self.fd, 8192)
            except BlockingIOError:
                break
            except OSError as e:
                if e.errno == errno.EPIPE:  # records overwritten before we read them
                    self.overwritten += 1
                    continue
                raise
            if not rec:
                break
            head, _, msg = rec.decode("utf-8", "replace").partition(";")
            parts = head.split(",")
            if len(parts) > 1 and parts[1].isdigit():
                seq = int(parts[1])
                if seq <= self.last_seq:
                    continue
                self.last_seq = seq
            ts = int(self.boot_ms + int(parts[2]) / 1000) if len(parts) > 2 and parts[2].isdigit() else None
            out.append((ts, msg.split("\n", 1)[0]))
        self._save_state()
        return out

    def close(self) -> None:
        os.close(self.fd)


class JournalSource:
    """``journalctl -k -f -n 0 -o cat`` as a child process, read without blocking."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(["journalctl", "-k", "-f", "-n", "0", "-o", "cat"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        os.set_blocking(self.proc.stdout.fileno(), False)  # type: ignore[union-attr]
        self._partial = b""

    def poll(self) -> list[tuple[int | None, str]]:
        try:
            data = self.proc.stdout.read() or b""  # type: ignore[union-attr]
        except BlockingIOError:
            data = b""
        buf = self._partial + data
        lines = buf.split(b"\n")
        self._partial = lines.pop()
        return [(None, ln.decode("utf-8", "replace")) for ln in lines]

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class FileSource:
    def __init__(self, path: str, *, from_start: bool = False) -> None:
        self.tail = FileTail(path, from_start=from_start)

    def poll(self) -> list[tuple[int | None, str]]:
        return [(None, ln) for ln in self.tail.poll()]

    def close(self) -> None:
        self.tail.close()


def _read_boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip()
    except OSError:
        return "unknown"


def open_source(file: str | None, *, from_start: bool = False, state_path: str | None = None):
    if file:
        return FileSource(file, from_start=from_start)
    try:
        return KmsgSource(from_start=from_start, state_path=state_path)
    except OSError as e:
        if shutil.which("journalctl"):
            log.info("cannot read /dev/kmsg (%s); following journalctl -k", e.strerror)
            return JournalSource()
        raise RuntimeError(f"cannot read the kernel log: /dev/kmsg: {e.strerror}, no journalctl; "
                           "run as root (or with CAP_SYSLOG) or pass --file /var/log/kern.log") from None


class KernelCollector(Collector):
    name = NAME
    interval_s = INTERVAL_S

    def __init__(self, node: str | None = None, *, source=None, file: str | None = None,
                 from_start: bool = False, job: str | None = None, state_path: str | None = None,
                 pci_map: dict[str, int] | Callable[[], dict[str, int]] | None = None,
                 jobs: JobResolver | None = None) -> None:
        self.node = node or hostname()
        self.src_name = f"kernel@{self.node}"
        self.source = source or open_source(file, from_start=from_start, state_path=state_path)
        self._pci_map = pci_map
        self._pci: dict[str, int] | None = pci_map if isinstance(pci_map, dict) else None
        self.jobs = jobs or JobResolver(self.node, job)
        self.stats = {"lines": 0, "xid": 0, "runtime_log": 0, "no_job": 0}

    def pci_index(self, pci: str) -> int | None:
        from .nvml import norm_pci

        if self._pci is None:
            self._pci = self._pci_map() if callable(self._pci_map) else (nvml_pci_map() or nvidia_proc_pci_map())
        return self._pci.get(norm_pci(pci) or "")

    def parse(self, line: str, ts: int) -> list[Envelope]:
        msg = strip_prefix(line)
        m = XID_RE.search(msg)
        if m:
            pid = m.group(3)
            self.stats["xid"] += 1
            from .nvml import norm_pci

            return [GpuXid(v=1, id=new_id(), ts=ts, source=self.src_name, node=self.node,
                           data=GpuXidData(gpu=self.pci_index(m.group(1)), pci=norm_pci(m.group(1)),
                                           xid=int(m.group(2)), message=msg,
                                           pid=int(pid) if pid and pid.isdigit() else None))]
        local = classify_kernel(msg)
        shared = catalog_name(msg)
        if local is None and shared is None:
            return []
        sig = shared or local
        jobs = self.jobs.jobs()
        if not jobs:
            self.stats["no_job"] += 1
            log.debug("kernel %s line with no job on %s: not published", sig, self.node)
            return []
        self.stats["runtime_log"] += len(jobs)
        return [RuntimeLog(v=1, id=new_id(), ts=ts, source=self.src_name, node=self.node, job=j,
                           data=RuntimeLogData(stream="kernel", message=msg, rank=None, signature=shared))
                for j in jobs]

    def collect_sync(self) -> list[Envelope]:
        now = now_ms()
        out: list[Envelope] = []
        for ts, line in self.source.poll():
            self.stats["lines"] += 1
            out.extend(self.parse(line, ts or now))
        return out

    async def collect(self) -> list[Envelope]:
        return self.collect_sync()

    async def close(self) -> None:
        self.source.close()


def default_state_path(settings: Settings) -> str:
    return str(settings.extra.get("kernel_state") or
               os.path.join(os.path.dirname(os.path.normpath(settings.spool_dir)) or ".", "kmsg.state"))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--node", help="node name (default: this host)")
    p.add_argument("--file", help="follow this file (kern.log, dmesg output) instead of /dev/kmsg")
    p.add_argument("--from-start", action="store_true", help="read the existing log too, not only new lines")
    p.add_argument("--job", help="job id for runtime.log events (default: SLURM_JOB_ID, else squeue on this node)")
    p.add_argument("--state", help="file keeping the last /dev/kmsg sequence read (default: next to the spool dir), "
                                   "so a restarted agent reads what was logged while it was down")


def build(args: argparse.Namespace, settings: Settings) -> KernelCollector:
    from ...cli import CliError

    try:
        return KernelCollector(args.node, file=args.file, from_start=args.from_start,
                               job=args.job or settings.extra.get("job"),
                               state_path=args.state or default_state_path(settings))
    except RuntimeError as e:
        raise CliError(str(e)) from None
