"""``faultline collect inventory``: the node's software/firmware stack and its changes.

Emits ``inventory.versions`` at start and whenever a component changes, and one
``inventory.change`` per changed component (``from`` -> ``to``). The last seen versions are
kept in a small JSON state file (``--state``), so a change made while the agent was down
(a driver upgrade at reboot) is reported on the next start.

Components and where they come from (each one only if readable; missing ones are left out):

| component | source |
|---|---|
| driver | NVML ``nvmlSystemGetDriverVersion``, else ``/proc/driver/nvidia/version``, ``/sys/module/nvidia/version`` |
| cuda | NVML ``nvmlSystemGetCudaDriverVersion`` (12080 -> ``12.8``), else ``CUDA_VERSION`` |
| nccl | ``NCCL_VERSION`` env (NGC images), the libnccl a running process loaded (``/proc/*/maps``), a ``libnccl.so.2.X.Y`` file in the library dirs, the ``nvidia-nccl-cu*`` wheel, dpkg ``libnccl2`` |
| gpu_firmware | NVML ``nvmlDeviceGetVbiosVersion`` (distinct values joined with ``,``) |
| bmc_firmware | ``ipmitool mc info`` "Firmware Revision" (only with ``/dev/ipmi0``) |
| bios | ``/sys/class/dmi/id/bios_version`` |
| kernel / os | ``uname -r`` / ``/etc/os-release`` ``PRETTY_NAME`` |
| image | ``FAULTLINE_IMAGE``, ``CONTAINER_IMAGE``, ``SINGULARITY_NAME``, ``ENROOT_ROOTFS`` env |
| framework | installed ``torch``/``jax``/``tensorflow`` distributions (metadata only, nothing imported) |
| container_runtime | first of ``enroot``, ``apptainer``, ``singularity``, ``podman``, ``docker``, ``containerd`` ``--version`` |
| ofed | ``/sys/module/mlx5_core/version``, else ``ofed_info -s`` |
"""

from __future__ import annotations

import argparse
import glob
import importlib.metadata as md
import logging
import os
import platform
import re
import shutil
import subprocess
from types import ModuleType
from typing import Callable

import orjson

from ...config import Settings
from ...schemas import Envelope, now_ms
from ...schemas.events import InventoryChange, InventoryChangeData, InventoryVersions
from .base import Collector, hostname, new_id

NAME = "inventory"
HELP = "driver, CUDA, NCCL, firmware, kernel, OS, image, framework versions -> inventory.versions/change"
INTERVAL_S = 300.0

log = logging.getLogger("faultline.collect.inventory")

LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/local/lib", "/usr/lib64",
            "/usr/lib", "/usr/local/cuda/lib64", "/usr/local/nccl/lib")


def _read(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def _run(cmd: list[str], timeout: float = 5.0) -> str | None:
    if not shutil.which(cmd[0]):
        return None
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else None


def _dist(*names: str) -> str | None:
    for n in names:
        try:
            return md.version(n)
        except md.PackageNotFoundError:
            continue
    return None


def driver_version(nv: ModuleType | None) -> str | None:
    if nv is not None:
        try:
            v = nv.nvmlSystemGetDriverVersion()
            return v.decode() if isinstance(v, bytes) else str(v)
        except Exception:
            pass
    txt = _read("/proc/driver/nvidia/version")
    if txt:
        m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", txt)
        if m:
            return m.group(1)
    return _read("/sys/module/nvidia/version")


def cuda_version(nv: ModuleType | None) -> str | None:
    if nv is not None:
        try:
            v = int(nv.nvmlSystemGetCudaDriverVersion())
            return f"{v // 1000}.{(v % 1000) // 10}"
        except Exception:
            pass
    return os.environ.get("CUDA_VERSION")


def _nccl_version_of(lib: str) -> str | None:
    """Version of a libnccl.so path: from its file name (libnccl.so.2.21.5), or for the pip
    wheel (site-packages/nvidia/nccl/lib/libnccl.so.2) from the wheel's dist-info."""
    m = re.search(r"libnccl\.so\.(\d+\.\d+\.\d+)$", lib)
    if m:
        return m.group(1)
    try:
        real = os.path.realpath(lib)
    except OSError:
        real = lib
    m = re.search(r"libnccl\.so\.(\d+\.\d+\.\d+)$", real)
    if m:
        return m.group(1)
    i = lib.find("/nvidia/nccl/lib/")
    if i > 0:
        for d in glob.glob(os.path.join(lib[:i], "nvidia_nccl_cu*-*.dist-info")):
            return os.path.basename(d).split("-")[1].replace(".dist", "")
    return None


def nccl_loaded(proc: str = "/proc", max_procs: int = 4000) -> str | None:
    """NCCL as loaded by a running process (e.g. the training job): its ``maps``."""
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return None
    for pid in pids[:max_procs]:
        try:
            with open(f"{proc}/{pid}/maps", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        i = data.find(b"libnccl.so")
        if i < 0:
            continue
        start = data.rfind(b" ", 0, i) + 1
        end = data.find(b"\n", i)
        v = _nccl_version_of(data[start:end if end > 0 else None].decode(errors="replace").strip())
        if v:
            return v
    return None


def nccl_version() -> str | None:
    if os.environ.get("NCCL_VERSION"):
        return os.environ["NCCL_VERSION"]
    v = nccl_loaded()
    if v:
        return v
    for d in LIB_DIRS:
        for p in sorted(glob.glob(os.path.join(d, "libnccl.so.2.*"))):
            m = re.search(r"libnccl\.so\.(\d+\.\d+\.\d+)$", p)
            if m:
                return m.group(1)
    v = _dist("nvidia-nccl-cu12", "nvidia-nccl-cu11", "nvidia-nccl-cu13")
    if v:
        return v
    status = _read("/var/lib/dpkg/status")
    if status:
        m = re.search(r"^Package: libnccl2\n(?:.+\n)*?Version: (\S+)", status, re.M)
        if m:
            return m.group(1)
    return None


def gpu_firmware(nv: ModuleType | None) -> str | None:
    if nv is None:
        return None
    vals: list[str] = []
    try:
        for i in range(nv.nvmlDeviceGetCount()):
            try:
                v = nv.nvmlDeviceGetVbiosVersion(nv.nvmlDeviceGetHandleByIndex(i))
            except Exception:
                continue
            v = v.decode() if isinstance(v, bytes) else str(v)
            if v not in vals:
                vals.append(v)
    except Exception:
        return None
    return ",".join(vals) or None


def bmc_firmware() -> str | None:
    if not os.path.exists("/dev/ipmi0"):
        return None
    out = _run(["ipmitool", "mc", "info"])
    if out:
        m = re.search(r"Firmware Revision\s*:\s*(\S+)", out)
        if m:
            return m.group(1)
    return None


def os_name() -> str | None:
    txt = _read("/etc/os-release") or ""
    m = re.search(r'^PRETTY_NAME="?([^"\n]+)"?', txt, re.M)
    return m.group(1) if m else None


def image_ref() -> str | None:
    for var in ("FAULTLINE_IMAGE", "CONTAINER_IMAGE", "SINGULARITY_NAME", "APPTAINER_NAME", "ENROOT_ROOTFS"):
        if os.environ.get(var):
            return os.environ[var]
    return None


def framework() -> str | None:
    parts = []
    for name in ("torch", "jax", "tensorflow"):
        v = _dist(name)
        if v:
            parts.append(f"{name}={v}")
    return ",".join(parts) or None


def container_runtime() -> str | None:
    for tool in ("enroot", "apptainer", "singularity", "podman", "docker", "containerd"):
        if shutil.which(tool):
            out = _run([tool, "--version"], timeout=3)
            m = re.search(r"\d+\.\d+(?:\.\d+)?", out or "")
            if m:
                return f"{tool} {m.group(0)}"
    return None


def ofed_version() -> str | None:
    return _read("/sys/module/mlx5_core/version") or _run(["ofed_info", "-s"])


def gather(nv: ModuleType | None = None) -> dict[str, str]:
    """The node's stack now (component -> version); unreadable components are absent."""
    vals: dict[str, str | None] = {
        "driver": driver_version(nv), "cuda": cuda_version(nv), "nccl": nccl_version(),
        "gpu_firmware": gpu_firmware(nv), "bmc_firmware": bmc_firmware(),
        "bios": _read("/sys/class/dmi/id/bios_version"), "kernel": platform.release(), "os": os_name(),
        "image": image_ref(), "framework": framework(), "container_runtime": container_runtime(),
        "ofed": ofed_version(),
    }
    return {k: v for k, v in vals.items() if v}


class InventoryCollector(Collector):
    name = NAME
    interval_s = INTERVAL_S

    def __init__(self, node: str | None = None, *, state_path: str = "var/inventory.json",
                 nvml: ModuleType | None = None, gather_fn: Callable[[], dict[str, str]] | None = None,
                 actor: str | None = None) -> None:
        self.node = node or hostname()
        self.source = f"inventory@{self.node}"
        self.state_path = state_path
        self.nv = nvml
        self._gather = gather_fn or (lambda: gather(self.nv))
        self.actor = actor
        self._first = True
        self._last: dict[str, str] | None = self._load()

    def _load(self) -> dict[str, str] | None:
        try:
            with open(self.state_path, "rb") as fh:
                d = orjson.loads(fh.read())
            return {str(k): str(v) for k, v in d.get("versions", {}).items()}
        except (OSError, ValueError, AttributeError):
            return None

    def _save(self, versions: dict[str, str]) -> None:
        d = os.path.dirname(self.state_path)
        if d:
            os.makedirs(d, exist_ok=True)
        tmp = self.state_path + ".tmp"
        with open(tmp, "wb") as fh:
            fh.write(orjson.dumps({"node": self.node, "ts": now_ms(), "versions": versions}))
        os.replace(tmp, self.state_path)

    def collect_sync(self) -> list[Envelope]:
        ts = now_ms()
        cur = self._gather()
        prev = self._last
        out: list[Envelope] = []
        if prev is not None and prev != cur:
            for comp in sorted(set(prev) | set(cur)):
                a, b = prev.get(comp), cur.get(comp)
                if a != b:
                    out.append(InventoryChange(
                        v=1, id=new_id(), ts=ts, source=self.source, node=self.node,
                        data=InventoryChangeData(component=comp, from_=a, to=b if b is not None else "(absent)",
                                                 actor=self.actor, ticket=None)))
        if self._first or prev != cur:
            out.insert(0, InventoryVersions(v=1, id=new_id(), ts=ts, source=self.source, node=self.node, data=cur))
        if prev != cur:
            self._save(cur)
        self._last = cur
        self._first = False
        return out

    async def collect(self) -> list[Envelope]:
        import asyncio

        return await asyncio.to_thread(self.collect_sync)


def default_state_path(settings: Settings) -> str:
    return str(settings.extra.get("inventory_state") or
               os.path.join(os.path.dirname(os.path.normpath(settings.spool_dir)) or ".", "inventory.json"))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--node", help="node name (default: this host)")
    p.add_argument("--state", help="file keeping the last seen versions (default: next to the spool dir)")
    p.add_argument("--nvml-module", default="pynvml", help="NVML binding for driver/CUDA/VBIOS (skipped if absent)")


def build(args: argparse.Namespace, settings: Settings) -> InventoryCollector:
    nv = None
    try:
        from .nvml import load_nvml

        nv = load_nvml(args.nvml_module)
        nv.nvmlInit()
    except Exception:
        nv = None
    return InventoryCollector(args.node, state_path=args.state or default_state_path(settings), nvml=nv)
