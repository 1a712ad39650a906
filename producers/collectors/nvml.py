"""``faultline collect nvml``: per-GPU samples and XID events from NVML (nvidia-ml-py).

Every ``--interval`` seconds one ``gpu.sample`` per GPU: utilisation, memory, temperature,
power, SM clock, throttle reasons, ECC SBE/DBE totals, retired pages (pre-Ampere) or
pending row remaps (Ampere+), NVLink error counters (CRC flit + CRC data + replay +
recovery, summed over links) and the PCIe replay counter. XIDs arrive through NVML's event
API (``nvmlEventTypeXidCriticalError``) on a background thread and go out as ``gpu.xid``.

Failure handling:
- a field the GPU does not support (``NVMLError_NotSupported``, ``NoPermission``, ...) is
  null; unsupported fields are remembered per GPU and not asked again;
- a GPU that is lost (``NVMLError_GpuIsLost``, "fallen off the bus") produces one
  ``gpu.xid`` with xid 79 and a message saying NVML lost it, then is skipped (probed once
  per round, a recovery is logged) while the other GPUs keep being sampled;
- no NVML at all (library missing, driver not loaded): ``NvmlUnavailable`` with the reason
  and what to do; the CLI exits non-zero.

On a GPU machine: ``faultline collect nvml --once --output -``. Without GPUs the logic runs
against the fake module in ``tests/fakes/pynvml.py``:
``faultline collect nvml --nvml-module tests/fakes/pynvml.py --once --output -``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import re
import threading
from collections import deque
from types import ModuleType
from typing import Any, Callable

from ...cli import CliError
from ...config import Settings
from ...schemas import Envelope, now_ms
from ...schemas.events import GpuSample, GpuSampleData, GpuXid, GpuXidData
from .base import Collector, hostname, new_id

NAME = "nvml"
HELP = "GPU samples and XID events from NVML (nvidia-ml-py)"
INTERVAL_S = 10.0

log = logging.getLogger("faultline.collect.nvml")

#: NVML clock event ("throttle") reason bits -> contract names (nvml.h nvmlClocksEventReason*)
THROTTLE_BITS: tuple[tuple[str, str], ...] = (
    ("nvmlClocksThrottleReasonHwSlowdown", "hw_slowdown"),
    ("nvmlClocksThrottleReasonSwThermalSlowdown", "sw_thermal"),
    ("nvmlClocksThrottleReasonHwThermalSlowdown", "hw_thermal"),
    ("nvmlClocksThrottleReasonHwPowerBrakeSlowdown", "power_brake"),
    ("nvmlClocksThrottleReasonSwPowerCap", "sw_power_cap"),
)
#: the XID NVIDIA uses for "GPU has fallen off the bus" (shared/reference/xid_catalog.csv)
XID_FALLEN_OFF_BUS = 79
_PCI_RE = re.compile(r"(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.[0-7])?")


class NvmlUnavailable(RuntimeError):
    """NVML cannot be used on this machine; the message says why and what to do."""


def norm_pci(bus_id: str | bytes | None) -> str | None:
    """``00000000:3B:00.0`` / ``0000:3b:00`` -> ``0000:3b:00`` (domain:bus:device, lower case),
    the form the kernel's ``NVRM: Xid (PCI:0000:3b:00)`` lines use."""
    if bus_id is None:
        return None
    if isinstance(bus_id, bytes):
        bus_id = bus_id.decode(errors="replace")
    m = _PCI_RE.search(bus_id)
    if not m:
        return None
    dom = int(m.group(1), 16) if m.group(1) else 0
    return f"{dom:04x}:{m.group(2).lower()}:{m.group(3).lower()}"


def load_nvml(name: str = "pynvml") -> ModuleType:
    """Import the NVML binding: a module name, or a path to a ``.py`` file (the test fake)."""
    if name.endswith(".py"):
        spec = importlib.util.spec_from_file_location("faultline_nvml_fake", name)
        if spec is None or spec.loader is None:
            raise NvmlUnavailable(f"cannot load NVML module from {name}: check the path")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise NvmlUnavailable(f"cannot import {name} ({e}): pip install nvidia-ml-py") from None


def _s(v: Any) -> str:
    return v.decode(errors="replace") if isinstance(v, bytes) else str(v)


class _Gpu:
    __slots__ = ("index", "handle", "uuid", "pci", "unsupported", "nvlinks", "lost")

    def __init__(self, index: int, handle: Any) -> None:
        self.index = index
        self.handle = handle
        self.uuid = ""
        self.pci: str | None = None
        self.unsupported: set[str] = set()
        self.nvlinks: list[int] | None = None  # active link ids, found on first sample
        self.lost = False


class NvmlCollector(Collector):
    """Samples every GPU NVML sees; XIDs from the NVML event API when the driver offers it."""

    name = NAME
    interval_s = INTERVAL_S

    def __init__(self, node: str | None = None, nvml: ModuleType | None = None, *,
                 ecc: str = "volatile", xid_events: bool = True, nvlink: bool = True,
                 max_pending_xids: int = 10_000) -> None:
        self.node = node or hostname()
        self.source = f"nvml@{self.node}"
        self.nv = nvml if nvml is not None else load_nvml()
        nv = self.nv
        self._err = nv.NVMLError
        self._not_supported = tuple(
            getattr(nv, n) for n in ("NVMLError_NotSupported", "NVMLError_NoPermission",
                                     "NVMLError_FunctionNotFound", "NVMLError_InvalidArgument",
                                     "NVMLError_NotFound") if hasattr(nv, n))
        self._lost = getattr(nv, "NVMLError_GpuIsLost")
        try:
            nv.nvmlInit()
        except nv.NVMLError as e:
            raise NvmlUnavailable(
                f"NVML not available ({type(e).__name__}: {e}): is the NVIDIA driver loaded and "
                "libnvidia-ml.so.1 on the library path? Run `nvidia-smi` to check; on a node "
                "without GPUs, do not enable the nvml collector") from None
        self._ecc_counter = nv.NVML_AGGREGATE_ECC if ecc == "aggregate" else nv.NVML_VOLATILE_ECC
        self._nvlink = nvlink
        self._throttle = [(getattr(nv, a), b) for a, b in THROTTLE_BITS if hasattr(nv, a)]
        self._legacy_reasons_fn = getattr(nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        self._reasons_fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or self._legacy_reasons_fn
        self.gpus: list[_Gpu] = []
        self._xids: deque[tuple[int, int | None, str | None, int]] = deque(maxlen=max_pending_xids)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._evset = None
        self._discover()
        if xid_events:
            self._start_events()

    # ------------------------------------------------------------------ setup
    def _discover(self) -> None:
        nv = self.nv
        try:
            count = nv.nvmlDeviceGetCount()
        except nv.NVMLError as e:
            raise NvmlUnavailable(f"NVML cannot count GPUs ({type(e).__name__}: {e}): check `nvidia-smi`") from None
        for i in range(count):
            try:
                h = nv.nvmlDeviceGetHandleByIndex(i)
            except nv.NVMLError as e:
                g = _Gpu(i, None)
                g.lost = isinstance(e, self._lost)
                log.error("NVML cannot open GPU %d: %s", i, e, extra={"gpu": i, "node": self.node})
                self.gpus.append(g)
                continue
            g = _Gpu(i, h)
            try:
                g.uuid = _s(nv.nvmlDeviceGetUUID(h))
            except nv.NVMLError:
                g.uuid = f"GPU-index-{i}"
            try:
                g.pci = norm_pci(nv.nvmlDeviceGetPciInfo(h).busId)
            except nv.NVMLError:
                pass
            self.gpus.append(g)

    def pci_to_index(self) -> dict[str, int]:
        return {g.pci: g.index for g in self.gpus if g.pci}

    def _start_events(self) -> None:
        nv = self.nv
        try:
            self._evset = nv.nvmlEventSetCreate()
        except nv.NVMLError as e:
            log.warning("NVML event API unavailable (%s); XIDs only from the kernel collector", e)
            return
        registered = 0
        for g in self.gpus:
            if g.handle is None:
                continue
            try:
                nv.nvmlDeviceRegisterEvents(g.handle, nv.nvmlEventTypeXidCriticalError, self._evset)
                registered += 1
            except nv.NVMLError as e:
                log.warning("GPU %d: XID events not supported (%s)", g.index, e,
                            extra={"gpu": g.index, "node": self.node})
        if registered:
            self._thread = threading.Thread(target=self._event_loop, name="nvml-xid-events", daemon=True)
            self._thread.start()

    def _index_of(self, handle: Any) -> int | None:
        for g in self.gpus:
            if g.handle is handle or (g.handle is not None and _same_handle(g.handle, handle)):
                return g.index
        try:
            return int(self.nv.nvmlDeviceGetIndex(handle))
        except Exception:
            return None

    def _event_loop(self) -> None:
        nv = self.nv
        timeout = getattr(nv, "NVMLError_Timeout", None)
        while not self._stop.is_set():
            try:
                data = nv.nvmlEventSetWait(self._evset, 500)
            except nv.NVMLError as e:
                if timeout is not None and isinstance(e, timeout):
                    continue
                log.warning("NVML event wait failed: %s", e)
                self._stop.wait(1.0)
                continue
            if not (int(data.eventType) & nv.nvmlEventTypeXidCriticalError):
                continue
            idx = self._index_of(data.device)
            pci = next((g.pci for g in self.gpus if g.index == idx), None) if idx is not None else None
            self._xids.append((now_ms(), idx, pci, int(data.eventData)))

    async def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._evset is not None:
            try:
                self.nv.nvmlEventSetFree(self._evset)
            except Exception:
                pass
            self._evset = None
        try:
            self.nv.nvmlShutdown()
        except Exception:
            pass

    # ------------------------------------------------------------------ sampling
    def _get(self, g: _Gpu, field: str, fn: Callable[[], Any]) -> Any:
        """One NVML read: None if unsupported (remembered) or failing; GpuIsLost propagates."""
        if field in g.unsupported:
            return None
        try:
            return fn()
        except self._lost:
            raise
        except self._not_supported:
            g.unsupported.add(field)
            return None
        except self._err as e:
            log.debug("GPU %d: %s failed: %s", g.index, field, e)
            return None

    def _nvlink_errors(self, g: _Gpu) -> int | None:
        nv = self.nv
        if g.nvlinks is None:
            links = []
            for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
                try:
                    if nv.nvmlDeviceGetNvLinkState(g.handle, link):
                        links.append(link)
                except self._lost:
                    raise
                except self._err:  # NotSupported (no NVLink) or InvalidArgument (past the last link)
                    break
            g.nvlinks = links
        if not g.nvlinks:
            return None
        counters = [getattr(nv, c) for c in ("NVML_NVLINK_ERROR_DL_CRC_FLIT", "NVML_NVLINK_ERROR_DL_CRC_DATA",
                                             "NVML_NVLINK_ERROR_DL_REPLAY", "NVML_NVLINK_ERROR_DL_RECOVERY")
                    if hasattr(nv, c)]
        total = 0
        seen = False
        for link in g.nvlinks:
            for c in counters:
                key = f"nvlink{c}"
                v = self._get(g, key, lambda: nv.nvmlDeviceGetNvLinkErrorCounter(g.handle, link, c))
                if v is not None:
                    total += int(v)
                    seen = True
        return total if seen else None

    def _sample(self, g: _Gpu, ts: int) -> GpuSample:
        nv = self.nv
        h = g.handle
        util = self._get(g, "util", lambda: nv.nvmlDeviceGetUtilizationRates(h))
        mem = self._get(g, "mem", lambda: nv.nvmlDeviceGetMemoryInfo(h))
        temp = self._get(g, "temp", lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))
        power = self._get(g, "power", lambda: nv.nvmlDeviceGetPowerUsage(h))
        sm = self._get(g, "sm_clock", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))
        reasons = self._get(g, "throttle", lambda: self._reasons_fn(h))
        if reasons is None and "throttle" in g.unsupported and self._legacy_reasons_fn is not None:
            # binding newer than the driver: nvmlDeviceGetCurrentClocksEventReasons missing
            reasons = self._get(g, "throttle_legacy", lambda: self._legacy_reasons_fn(h))
        sbe = self._get(g, "ecc_sbe", lambda: nv.nvmlDeviceGetTotalEccErrors(
            h, nv.NVML_MEMORY_ERROR_TYPE_CORRECTED, self._ecc_counter))
        dbe = self._get(g, "ecc_dbe", lambda: nv.nvmlDeviceGetTotalEccErrors(
            h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, self._ecc_counter))
        remap = self._get(g, "remapped_rows", lambda: nv.nvmlDeviceGetRemappedRows(h))
        retired = None
        if remap is None:  # pre-Ampere: page retirement instead of row remapping
            a = self._get(g, "retired_sbe", lambda: nv.nvmlDeviceGetRetiredPages(
                h, nv.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS))
            b = self._get(g, "retired_dbe", lambda: nv.nvmlDeviceGetRetiredPages(
                h, nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR))
            if a is not None or b is not None:
                retired = len(a or ()) + len(b or ())
        replay = self._get(g, "pcie_replay", lambda: nv.nvmlDeviceGetPcieReplayCounter(h))
        nvl = self._nvlink_errors(g) if self._nvlink else None
        throttle = [name for bit, name in self._throttle if reasons and int(reasons) & bit]
        return GpuSample(
            v=1, id=new_id(), ts=ts, source=self.source, node=self.node,
            data=GpuSampleData(
                gpu=g.index, uuid=g.uuid,
                util_pct=float(util.gpu) if util is not None else None,
                mem_used_mib=mem.used / 1048576 if mem is not None else None,
                mem_total_mib=mem.total / 1048576 if mem is not None else None,
                temp_c=float(temp) if temp is not None else None,
                power_w=power / 1000.0 if power is not None else None,
                sm_clock_mhz=float(sm) if sm is not None else None,
                throttle=throttle,
                ecc_sbe=int(sbe) if sbe is not None else None,
                ecc_dbe=int(dbe) if dbe is not None else None,
                nvlink_errors=nvl,
                pcie_replay=int(replay) if replay is not None else None,
                retired_pages=retired,
                remapped_rows_pending=int(bool(remap[2])) if remap is not None else None,
            ))

    def _lost_event(self, g: _Gpu, ts: int, err: Exception) -> GpuXid:
        return GpuXid(v=1, id=new_id(), ts=ts, source=self.source, node=self.node,
                      data=GpuXidData(gpu=g.index, pci=g.pci, xid=XID_FALLEN_OFF_BUS, pid=None,
                                      message=f"NVML: GPU {g.index} ({g.pci or g.uuid}) is lost: "
                                              f"{type(err).__name__} ({err}); GPU has fallen off the bus"))

    def collect_sync(self) -> list[Envelope]:
        """One round (blocking NVML calls); ``collect`` runs it in a worker thread."""
        ts = now_ms()
        out: list[Envelope] = []
        while self._xids:
            xts, idx, pci, xid = self._xids.popleft()
            out.append(GpuXid(v=1, id=new_id(), ts=xts, source=self.source, node=self.node,
                              data=GpuXidData(gpu=idx, pci=pci, xid=xid, pid=None,
                                              message=f"NVML event: Xid {xid} on GPU {idx} ({pci})")))
        for g in self.gpus:
            if g.handle is None:
                continue
            if g.lost:  # probe once; a GPU only comes back after a reset
                try:
                    self.nv.nvmlDeviceGetUUID(g.handle)
                except self._err:
                    continue
                log.warning("GPU %d answers NVML again", g.index, extra={"gpu": g.index, "node": self.node})
                g.lost = False
            try:
                out.append(self._sample(g, ts))
            except self._lost as e:
                g.lost = True
                log.error("GPU %d lost (%s): reporting xid %d", g.index, e, XID_FALLEN_OFF_BUS,
                          extra={"gpu": g.index, "node": self.node})
                out.append(self._lost_event(g, ts, e))
        return out

    async def collect(self) -> list[Envelope]:
        import asyncio

        return await asyncio.to_thread(self.collect_sync)


def _same_handle(a: Any, b: Any) -> bool:
    """NVML handles are ctypes pointers: equal when they point at the same device."""
    try:
        import ctypes

        return ctypes.cast(a, ctypes.c_void_p).value == ctypes.cast(b, ctypes.c_void_p).value
    except Exception:
        return a == b


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--node", help="node name (default: this host)")
    p.add_argument("--ecc", choices=("volatile", "aggregate"), default="volatile",
                   help="ECC counters since driver load (volatile) or lifetime (aggregate)")
    p.add_argument("--no-xid-events", action="store_true", help="do not use the NVML event API")
    p.add_argument("--no-nvlink", action="store_true", help="skip NVLink error counters")
    p.add_argument("--nvml-module", default="pynvml",
                   help="NVML binding module or .py path (tests/fakes/pynvml.py runs without GPUs)")


def build(args: argparse.Namespace, settings: Settings) -> NvmlCollector:
    try:
        return NvmlCollector(args.node, load_nvml(args.nvml_module), ecc=args.ecc,
                             xid_events=not args.no_xid_events, nvlink=not args.no_nvlink)
    except NvmlUnavailable as e:
        raise CliError(str(e)) from None
