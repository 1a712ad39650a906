"""GPU detectors: XIDs (catalog), ECC, row remapping, NVLink/PCIe error growth, thermal and
power throttling, utilisation collapse, memory near capacity. State per GPU index."""

from __future__ import annotations

from typing import Union

from msgspec import Struct

from ..signals import Signal, make
from ..xid import lookup
from ._util import delta
from .config import DetectorConfig

# throttle reasons that slow a GPU against its will (sw_power_cap is the normal power limit)
_BAD_THROTTLE = frozenset({"hw_slowdown", "sw_thermal", "hw_thermal", "power_brake"})


class GpuState(Struct, kw_only=True):
    ts: int = 0
    sbe: Union[int, None] = None
    dbe: Union[int, None] = None
    nvl: Union[int, None] = None
    pcie: Union[int, None] = None
    retired: Union[int, None] = None
    remap: Union[int, None] = None
    thr_since: int = 0
    thr_fired: bool = False
    util_ewma: float = -1.0
    low_n: int = 0
    util_fired: bool = False
    mem_fired: bool = False
    iv: float = 0.0                # EWMA of this GPU's sample interval (ms)
    last_id: str = ""              # its last sample's event id
    lost_fired: bool = False


#: cumulative counters: (data field, state field, signal kind, DetectorConfig threshold field
#: (None: any growth), severity, category, score, what the summary says grew)
_GROWTH = (
    ("ecc_dbe", "dbe", "ecc_dbe", None, "critical", "gpu_hardware", 0.9, "new uncorrectable (DBE) ECC error(s)"),
    ("ecc_sbe", "sbe", "ecc_sbe_burst", "sbe_burst", "warning", "gpu_hardware", 0.35,
     "corrected ECC errors in one interval"),
    ("nvlink_errors", "nvl", "nvlink_errors", "nvlink_burst", "warning", "gpu_nvlink", 0.6,
     "NVLink errors in one interval"),
    ("pcie_replay", "pcie", "pcie_replay", "pcie_burst", "warning", "gpu_hardware", 0.35,
     "PCIe replays in one interval"),
)
#: gauges whose any rise matters: (data field, state field, signal kind)
_RISE = (("retired_pages", "retired", "retired_pages"), ("remapped_rows_pending", "remap", "remap_pending"))


def _counters(st: GpuState, ev, subj: str, cfg: DetectorConfig, out: list[Signal]) -> None:
    """Growth of the cumulative error counters (with resets) and rises of the retirement
    gauges since the GPU's previous sample; a missing field keeps the last value."""
    d = ev.data
    for field, attr, kind, th, severity, category, score, what in _GROWTH:
        x = getattr(d, field)
        if x is None:
            continue
        prev = getattr(st, attr)
        if prev is not None and (n := delta(prev, x)) > 0 and (th is None or n >= getattr(cfg, th)):
            data = {"new": n, "total": x} if th is None else {"new": n}
            out.append(make(kind, subj, ev, "gpu", severity, f"GPU {subj[4:]}: {n} {what}",
                            category=category, component=subj, score=score, data=data))
        setattr(st, attr, x)
    for field, attr, kind in _RISE:
        x = getattr(d, field)
        if x is None:
            continue
        prev = getattr(st, attr)
        if prev is not None and x > prev:
            out.append(make(kind, subj, ev, "gpu", "warning",
                            f"GPU {subj[4:]}: {field.replace('_', ' ')} {prev} -> {x}",
                            category="gpu_hardware", component=subj, score=0.45, data={"from": prev, "to": x}))
        setattr(st, attr, x)


def on_sample(st: GpuState, ev, cfg: DetectorConfig, out: list[Signal]) -> None:
    d = ev.data
    node = ev.node
    g = d.gpu
    subj = f"gpu:{node}/{g}"
    # ---- cumulative counters: one comparison on the common path (nothing changed)
    if (d.ecc_dbe != st.dbe or d.ecc_sbe != st.sbe or d.nvlink_errors != st.nvl or d.pcie_replay != st.pcie
            or d.retired_pages != st.retired or d.remapped_rows_pending != st.remap):
        _counters(st, ev, subj, cfg, out)
    # ---- throttling episodes
    thr = d.throttle
    bad = [r for r in thr if r in _BAD_THROTTLE] if thr else None
    if bad:
        if st.thr_since == 0:
            st.thr_since = ev.ts
        elif not st.thr_fired and ev.ts - st.thr_since >= cfg.throttle_min_ms:
            st.thr_fired = True
            out.append(make("thermal_throttle", subj, ev, "gpu", "warning",
                            f"GPU {node}/{g}: throttled ({', '.join(bad)}) for {(ev.ts - st.thr_since) // 1000} s"
                            + (f" at {d.temp_c:.0f} C" if d.temp_c is not None else ""),
                            category="thermal_throttle", component=subj, score=0.3,
                            data={"reasons": bad, "since": st.thr_since, "temp_c": d.temp_c,
                                  "sm_clock_mhz": d.sm_clock_mhz}))
    elif st.thr_since:
        st.thr_since = 0
        st.thr_fired = False
    # ---- utilisation collapse (a busy GPU going idle)
    u = d.util_pct
    if u is not None:
        if st.util_ewma < 0:
            st.util_ewma = u
        if u < cfg.util_idle_pct and st.util_ewma >= cfg.util_busy_pct:
            st.low_n += 1
            if st.low_n >= cfg.util_collapse_samples and not st.util_fired:
                st.util_fired = True
                out.append(make("util_collapse", subj, ev, "gpu", "info",
                                f"GPU {node}/{g}: utilisation fell from ~{st.util_ewma:.0f}% to {u:.0f}%",
                                data={"baseline": round(st.util_ewma, 1), "util": u}))
        else:
            st.low_n = 0
            st.util_ewma += 0.2 * (u - st.util_ewma)
            if u >= cfg.util_busy_pct:
                st.util_fired = False
    # ---- memory near capacity
    mu, mt = d.mem_used_mib, d.mem_total_mib
    if mu is not None and mt:
        if mu >= cfg.mem_high_ratio * mt:
            if not st.mem_fired:
                st.mem_fired = True
                out.append(make("gpu_mem_high", subj, ev, "gpu", "warning",
                                f"GPU {node}/{g}: memory {mu:.0f}/{mt:.0f} MiB ({100 * mu / mt:.1f}%)",
                                category="gpu_oom", component=subj, score=0.3, data={"used_mib": mu, "total_mib": mt}))
        else:
            st.mem_fired = False
    t = ev.ts
    if st.ts:
        gap = t - st.ts
        if gap > 0 and (st.iv <= 0 or gap < 4 * st.iv):   # a silence does not teach the interval
            st.iv = gap if st.iv <= 0 else st.iv + 0.2 * (gap - st.iv)
    st.ts = t
    st.last_id = ev.id
    st.lost_fired = False


def scan_lost(gpus: dict[int, GpuState], ev, cfg: DetectorConfig, out: list[Signal]) -> None:
    """GPUs whose samples stopped while their node's other GPUs keep reporting (``ev`` is a
    sample of one of those): what NVML/DCGM shows when a GPU falls off the bus or is lost
    to the driver. A node that goes quiet as a whole is not this (every GPU stops at once)."""
    if len(gpus) < 2:
        return
    t = ev.ts
    node = ev.node
    for idx, g in gpus.items():
        if g.lost_fired or g.iv <= 0 or not g.ts:
            continue
        silent = t - g.ts
        if silent > max(cfg.gpu_lost_min_ms, cfg.gpu_lost_factor * g.iv):
            g.lost_fired = True
            subj = f"gpu:{node}/{idx}"
            out.append(make("gpu_lost", subj, ev, "gpu", "warning",
                            f"GPU {node}/{idx}: no samples for {silent // 1000} s while the node's other GPUs report "
                            "(lost to the driver / off the bus?)",
                            category="gpu_hardware", component=subj, score=0.3, evidence=[g.last_id or ev.id],
                            data={"gpu": idx, "last_ts": g.ts, "silent_ms": silent}))


def on_xid(ev, out: list[Signal]) -> None:
    d = ev.data
    info = lookup(d.xid)
    g = d.gpu if d.gpu is not None else (d.pci or "?")
    subj = f"gpu:{ev.node}/{g}"
    score = {"critical": 0.95, "warning": 0.7, "info": 0.15}[info.severity]
    if not info.fatal:
        score = min(score, 0.2)
    if info.category == "application":
        score = min(score, 0.5)
    out.append(make("xid", subj, ev, "gpu", "critical" if info.severity == "critical" else "warning",
                    f"XID {d.xid} on GPU {ev.node}/{g}: {info.meaning} (action: {info.action.split(' / ')[0]})",
                    category=info.category, component=subj, score=score,
                    data={"xid": d.xid, "gpu": d.gpu, "pci": d.pci, "pid": d.pid, "fatal": info.fatal,
                          "app_induced": info.app_induced, "action": info.action}))
