"""A fake ``pynvml`` for running the NVML collector without GPUs.

It re-exports the REAL ``NVMLError`` classes and constants of nvidia-ml-py, so the
collector's ``except`` clauses are tested against the exact types the real binding
raises. Device state is plain Python, set up by tests (``reset(8)``, ``GPUS[3].lost = True``,
``GPUS[1].unsupported.add('nvmlDeviceGetPowerUsage')``, ``inject_xid(2, 79)``,
``INIT_ERROR = NVMLError_LibraryNotFound``).

Loadable by path: ``faultline collect nvml --nvml-module tests/fakes/pynvml.py``
(``FAKE_NVML_GPUS`` sets the GPU count, default 8).
"""

from __future__ import annotations

import os
import queue
import types

import pynvml as _real
from pynvml import *  # noqa: F401,F403  (constants: NVML_*, nvmlClocks*, nvmlEventType*)
from pynvml import (  # noqa: F401  the real error types
    NVMLError, NVMLError_GpuIsLost, NVMLError_InvalidArgument, NVMLError_LibraryNotFound,
    NVMLError_DriverNotLoaded, NVMLError_NotSupported, NVMLError_NoPermission, NVMLError_Timeout,
    NVMLError_Unknown, NVMLError_Uninitialized,
)

for _n in dir(_real):  # every NVMLError_* subclass, also ones not named above
    if _n.startswith("NVMLError_"):
        globals()[_n] = getattr(_real, _n)


class FakeGpu:
    def __init__(self, index: int) -> None:
        self.index = index
        self.uuid = f"GPU-fake-{index:04d}-0000-0000-000000000000"
        self.bus_id = f"00000000:{0x18 + index * 0x10:02X}:00.0"
        self.util = 97
        self.mem_used = 70 * 1024**3
        self.mem_total = 80 * 1024**3
        self.temp = 61
        self.power_mw = 612_000
        self.sm_clock = 1980
        self.reasons = 0
        self.ecc = {0: 0, 1: 0}  # corrected, uncorrected
        self.remapped = (0, 0, 0, 0)  # corr, unc, pending, failure
        self.retired = None  # list per cause on pre-Ampere, None -> NotSupported
        self.nvlinks = 18
        self.nvlink_errors = {}  # (link, counter) -> value
        self.pcie_replay = 0
        self.lost = False
        #: names of nvml functions that raise NVMLError_NotSupported for this GPU
        self.unsupported: set[str] = set()
        #: function name -> exception instance to raise (any NVMLError subtype)
        self.raises: dict[str, Exception] = {}
        self.calls = 0


GPUS: list[FakeGpu] = []
INIT_ERROR: type | None = None
EVENTS: "queue.Queue[tuple[FakeGpu, int]]" = queue.Queue()
INITIALISED = False


def reset(n: int = 8) -> None:
    global GPUS, INIT_ERROR, EVENTS, INITIALISED
    GPUS = [FakeGpu(i) for i in range(n)]
    INIT_ERROR = None
    EVENTS = queue.Queue()
    INITIALISED = False


reset(int(os.environ.get("FAKE_NVML_GPUS", "8")))


def inject_xid(index: int, xid: int) -> None:
    EVENTS.put((GPUS[index], xid))


def _dev(h: FakeGpu, fn: str) -> FakeGpu:
    if not INITIALISED:
        raise NVMLError_Uninitialized()
    h.calls += 1
    if h.lost:
        raise NVMLError_GpuIsLost()
    if fn in h.raises:
        raise h.raises[fn]
    if fn in h.unsupported:
        raise NVMLError_NotSupported()
    return h


def nvmlInit() -> None:
    global INITIALISED
    if INIT_ERROR is not None:
        raise INIT_ERROR()
    INITIALISED = True


def nvmlShutdown() -> None:
    global INITIALISED
    INITIALISED = False


def nvmlSystemGetDriverVersion() -> str:
    return "570.86.10"


def nvmlSystemGetCudaDriverVersion() -> int:
    return 12080


def nvmlDeviceGetCount() -> int:
    if not INITIALISED:
        raise NVMLError_Uninitialized()
    return len(GPUS)


def nvmlDeviceGetHandleByIndex(i: int) -> FakeGpu:
    if not INITIALISED:
        raise NVMLError_Uninitialized()
    if i >= len(GPUS):
        raise NVMLError_InvalidArgument()
    return _dev(GPUS[i], "nvmlDeviceGetHandleByIndex")


def nvmlDeviceGetIndex(h: FakeGpu) -> int:
    return _dev(h, "nvmlDeviceGetIndex").index


def nvmlDeviceGetUUID(h: FakeGpu) -> str:
    return _dev(h, "nvmlDeviceGetUUID").uuid


def nvmlDeviceGetPciInfo(h: FakeGpu):
    return types.SimpleNamespace(busId=_dev(h, "nvmlDeviceGetPciInfo").bus_id.encode())


def nvmlDeviceGetVbiosVersion(h: FakeGpu) -> str:
    _dev(h, "nvmlDeviceGetVbiosVersion")
    return "96.00.89.00.01"


def nvmlDeviceGetUtilizationRates(h: FakeGpu):
    g = _dev(h, "nvmlDeviceGetUtilizationRates")
    return types.SimpleNamespace(gpu=g.util, memory=40)


def nvmlDeviceGetMemoryInfo(h: FakeGpu):
    g = _dev(h, "nvmlDeviceGetMemoryInfo")
    return types.SimpleNamespace(used=g.mem_used, total=g.mem_total, free=g.mem_total - g.mem_used)


def nvmlDeviceGetTemperature(h: FakeGpu, sensor: int) -> int:
    return _dev(h, "nvmlDeviceGetTemperature").temp


def nvmlDeviceGetPowerUsage(h: FakeGpu) -> int:
    return _dev(h, "nvmlDeviceGetPowerUsage").power_mw


def nvmlDeviceGetClockInfo(h: FakeGpu, clock: int) -> int:
    return _dev(h, "nvmlDeviceGetClockInfo").sm_clock


def nvmlDeviceGetCurrentClocksEventReasons(h: FakeGpu) -> int:
    return _dev(h, "nvmlDeviceGetCurrentClocksEventReasons").reasons


def nvmlDeviceGetCurrentClocksThrottleReasons(h: FakeGpu) -> int:
    return _dev(h, "nvmlDeviceGetCurrentClocksThrottleReasons").reasons


def nvmlDeviceGetTotalEccErrors(h: FakeGpu, error_type: int, counter_type: int) -> int:
    return _dev(h, "nvmlDeviceGetTotalEccErrors").ecc[error_type]


def nvmlDeviceGetRemappedRows(h: FakeGpu):
    return _dev(h, "nvmlDeviceGetRemappedRows").remapped


def nvmlDeviceGetRetiredPages(h: FakeGpu, cause: int):
    g = _dev(h, "nvmlDeviceGetRetiredPages")
    if g.retired is None:
        raise NVMLError_NotSupported()
    return g.retired[cause]


def nvmlDeviceGetPcieReplayCounter(h: FakeGpu) -> int:
    return _dev(h, "nvmlDeviceGetPcieReplayCounter").pcie_replay


def nvmlDeviceGetNvLinkState(h: FakeGpu, link: int) -> int:
    g = _dev(h, "nvmlDeviceGetNvLinkState")
    if link >= g.nvlinks:
        raise NVMLError_InvalidArgument()
    return 1


def nvmlDeviceGetNvLinkErrorCounter(h: FakeGpu, link: int, counter: int) -> int:
    g = _dev(h, "nvmlDeviceGetNvLinkErrorCounter")
    return g.nvlink_errors.get((link, counter), 0)


class _EventSet:
    pass


def nvmlEventSetCreate() -> _EventSet:
    if "nvmlEventSetCreate" in _UNSUPPORTED_GLOBAL:
        raise NVMLError_NotSupported()
    return _EventSet()


_UNSUPPORTED_GLOBAL: set[str] = set()


def nvmlDeviceRegisterEvents(h: FakeGpu, types_: int, evset: _EventSet) -> None:
    _dev(h, "nvmlDeviceRegisterEvents")


def nvmlEventSetWait(evset: _EventSet, timeout_ms: int):
    try:
        g, xid = EVENTS.get(timeout=timeout_ms / 1000)
    except queue.Empty:
        raise NVMLError_Timeout() from None
    return types.SimpleNamespace(device=g, eventType=_real.nvmlEventTypeXidCriticalError, eventData=xid,
                                 gpuInstanceId=0, computeInstanceId=0)


def nvmlEventSetFree(evset: _EventSet) -> None:
    return None
