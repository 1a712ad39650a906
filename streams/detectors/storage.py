"""Storage detectors: latency / throughput against the mount's own EWMA baseline, mount
state, capacity. Sample-based signals carry the sample's ``fs_type`` (None when the
collector omits it): correlation's locality rule reads it (a local file system explains
only jobs on its own node)."""

from __future__ import annotations

from msgspec import Struct

from ..signals import Signal, make
from .config import DetectorConfig


class MountState(Struct, kw_only=True):
    n: int = 0
    lat: float = 0.0       # EWMA of max(read, write) latency, ms
    tput: float = 0.0      # EWMA of read+write MB/s
    bad: int = 0           # consecutive anomalous samples
    slow_fired: bool = False
    full_fired: bool = False
    state: str = "ok"
    ref: float = 0.0       # long-memory latency reference: follows drops fast, rises very slowly
    ref_bad: int = 0


def on_sample(st: MountState, ev, cfg: DetectorConfig, out: list[Signal]) -> None:
    d = ev.data
    path = d.path
    subj = f"path:{path}"
    u = d.used_pct
    if u is not None:
        if u >= cfg.storage_full_pct:
            if not st.full_fired:
                st.full_fired = True
                out.append(make("storage_full", subj, ev, "storage", "critical",
                                f"{path} {u:.1f}% full (seen from {ev.node})",
                                category="storage_full", component=subj, score=0.75,
                                data={"path": path, "used_pct": u, "fs_type": d.fs_type}))
        elif u < cfg.storage_full_pct - 2:
            st.full_fired = False
    rl, wl = d.read_lat_ms, d.write_lat_ms
    if rl is None and wl is None:
        return
    lat = max(rl or 0.0, wl or 0.0)
    tput = (d.read_mbps or 0.0) + (d.write_mbps or 0.0)
    if st.n >= cfg.storage_warmup:
        # slow degradation (hours): against the long-memory reference the fast baseline forgets
        if lat >= cfg.storage_lat_min_ms and lat >= cfg.storage_ref_factor * st.ref:
            st.ref_bad += 1
        else:
            st.ref_bad = 0
            st.ref += (0.05 if lat < st.ref else cfg.storage_ref_alpha_up) * (lat - st.ref)
        slow = (lat >= cfg.storage_lat_min_ms and lat >= cfg.storage_lat_factor * st.lat) \
            or st.ref_bad >= cfg.storage_anomaly_samples
        # throughput alone says nothing (a job that stops writing drops it too): it only
        # corroborates a latency rise
        starved = (st.tput > 1.0 and tput < cfg.storage_tput_drop * st.tput and lat >= 4 * st.lat
                   and lat >= cfg.storage_lat_min_ms)
        if slow or starved:
            st.bad += 1
            if st.bad >= cfg.storage_anomaly_samples and not st.slow_fired:
                st.slow_fired = True
                out.append(make("storage_slow", subj, ev, "storage", "warning",
                                f"{path} slow from {ev.node}: latency {lat:.0f} ms (baseline {min(st.lat, st.ref):.1f} ms), "
                                f"{tput:.0f} MB/s (baseline {st.tput:.0f} MB/s)",
                                category="storage_slow", component=subj, score=0.65,
                                data={"path": path, "lat_ms": lat, "base_lat_ms": round(st.lat, 2),
                                      "mbps": tput, "base_mbps": round(st.tput, 1), "fs_type": d.fs_type}))
            return  # anomalies stay out of the baseline
        st.bad = 0
        st.slow_fired = False
    if st.n >= cfg.storage_warmup and lat > cfg.storage_learn_below * st.lat:
        return  # suspicious: do not let a slow degradation teach the baseline that it is normal
    a = cfg.storage_alpha if st.n >= cfg.storage_warmup else 1.0 / (st.n + 1)
    if st.n < cfg.storage_warmup:
        st.ref += a * (lat - st.ref)
    st.lat += a * (lat - st.lat)
    st.tput += a * (tput - st.tput)
    st.n += 1


def on_mount(st: MountState, ev, out: list[Signal]) -> None:
    d = ev.data
    prev, cur = st.state, d.state
    st.state = cur
    if cur == prev or cur == "ok":
        return
    subj = f"path:{d.path}"
    cat = "storage_full" if cur == "full" else "storage_unavailable"
    out.append(make("mount_" + cur, subj, ev, "storage", "critical",
                    f"{d.path} {cur} on {ev.node}" + (f": {d.error}" if d.error else ""),
                    category=cat, component=subj, score=0.9, data={"path": d.path, "state": cur, "error": d.error}))
