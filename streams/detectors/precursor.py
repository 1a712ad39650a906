"""Precursor detectors: a storage path's latency climbing far above its own baseline, and a
network segment's congestion counters (CNP / ECN marks, discards) surging without link
errors, each *sustained*, raised minutes before the job they slow down dies (docs/precursors.md).

State is per node key (``NodeState.pre``): one ``LatTrack`` per mount path seen from the node,
one ``CongTrack`` per host RDMA port or switch port facing it, and the node's own
``segments`` map from its ``inventory.topology`` (NIC or ``switch/port`` -> segment). Every
map is capped; the entry not seen for the longest time makes room for a new one.

The signals name the culprit in the contract's component form (``path:<mount>``,
``segment:<segment>``) as their subject, carry ``node=None`` (the node that saw it is in
``data["node"]`` and the summary), no category and no score: they are alerts ahead of a
failure, not evidence of one, so the join files the storage one nowhere and the segment one
only under ``segment:`` (read by correlation for congestion kinds only) and no verdict moves.
"""

from __future__ import annotations

from typing import Union

import msgspec
from msgspec import Struct

from ..signals import Signal, make
from ._util import delta
from .net import RDMA_CNP, RDMA_LINK_ERR

STORAGE_CLIMB = "storage_latency_climb"
SEGMENT_CONGESTION = "segment_congestion"

# ---- storage latency against the path's own baseline (per node x mount path)
#: Learned samples the baseline remembers: a quarter to half an hour at the usual 30-60 s
#: sample interval, long enough to hold a checkpoint cycle, short enough to follow the day's load.
LAT_RING = 32
#: The baseline is this quantile of the learned samples, so a path whose checkpoint bursts
#: regularly double its latency has those bursts inside its own normal.
LAT_QUANTILE = 0.9
#: Learned samples before the baseline is trusted (a freshly seen path never alerts).
LAT_WARMUP = 8
#: The quantile is recomputed after this many newly learned samples (a sort of LAT_RING
#: floats), not on every sample.
LAT_REQUANTILE = 8
#: Latency this many times the baseline is a climb: healthy load and checkpoint bursts stay
#: within ~4x of the path's p90, the failures this alert is for climb 50-100x.
LAT_CLIMB_FACTOR = 10.0
#: ... and at least this far above it in milliseconds, so sub-millisecond jitter of a local
#: NVMe path (0.1 -> 1.2 ms) is no climb.
LAT_MIN_EXCESS_MS = 2.0
#: Only a sample under this many times the baseline's median teaches the baseline, so a slow
#: climb cannot make itself normal.
LAT_LEARN_BELOW = 3.0
#: A climb must hold this long (first to latest sample above the threshold) ...
LAT_SUSTAIN_MS = 120_000
#: ... over at least this many consecutive samples: a one- or two-sample spike is not one.
LAT_SUSTAIN_SAMPLES = 3
#: Consecutive samples back under the threshold that end an alerted climb (re-arm).
LAT_REARM_SAMPLES = 5
#: A climb over hours teaches the recent baseline little by little; a long-memory reference
#: still holds the path's old normal: an average that follows a drop with weight LAT_REF_FALL
#: but rises by at most 1/LAT_REF_RISE_N of itself per sample (x1.27 an hour at 30 s samples:
#: enough for the day's load cycle, far too slow for a failing backend) ...
LAT_REF_FALL = 0.05
LAT_REF_RISE_N = 500
#: ... and latency this many times that reference is a climb too (the reference sits near the
#: day's quiet level; checkpoint bursts at peak load reach ~6x it).
LAT_REF_FACTOR = 10.0
#: Mount paths tracked per node key (a node with more forgets the one quiet the longest).
MAX_PATHS = 64

# ---- segment congestion (per host RDMA port / switch port facing the node)
#: Congestion counters of a host RDMA port (DCQCN notifications and ECN marks, mlx5 hw_counters).
CNP_COUNTERS = RDMA_CNP
#: Physical link error counters of a host RDMA port: any growth means a link fault, not congestion.
LINK_ERR_COUNTERS = RDMA_LINK_ERR + ("link_downed",)
#: A surge is this many times the port's own rate baseline (EWMA of its quiet intervals).
CONG_SURGE_FACTOR = 10.0
#: ... and at least this rate of CNP/ECN marks per second: DCQCN under all-reduce load marks
#: tens to a few hundred packets a second on a healthy fabric.
CONG_MIN_CNP_RATE = 1_000.0
#: ... or of switch-port discards per second (a healthy port drops a handful per minute).
CONG_MIN_DISCARD_RATE = 100.0
#: EWMA weight of a quiet interval in the rate baseline.
CONG_ALPHA = 0.1
#: Intervals before the rate baseline is trusted.
CONG_WARMUP = 3
#: A surge must hold this long and ...
CONG_SUSTAIN_MS = 60_000
#: ... over at least this many consecutive intervals.
CONG_SUSTAIN_SAMPLES = 2
#: Quiet intervals that end an alerted surge (re-arm).
CONG_REARM_SAMPLES = 5
#: Ports tracked per node key.
MAX_PORTS = 64
#: Topology links remembered per node key (segments map entries).
MAX_LINKS = 256


class LatTrack(Struct, kw_only=True):
    ts: int = 0
    ring: list[float] = []       # learned latencies (ms), a ring of at most LAT_RING
    pos: int = 0                 # next ring slot once full
    learned: int = 0             # samples learned in total
    fresh: int = 0               # learned since the quantile was computed
    base: float = 0.0            # LAT_QUANTILE of the ring (ms)
    med: float = 0.0             # its median (ms), the learning gate
    ref: float = 0.0             # long-memory reference (ms): falls fast, rises very slowly
    since: int = 0               # first ts of the current climb (0: none)
    since_id: str = ""
    above: int = 0               # consecutive samples above the threshold
    below: int = 0               # consecutive samples under it (after an alert)
    fired: bool = False


class CongTrack(Struct, kw_only=True):
    ts: int = 0
    marks: Union[int, None] = None   # cumulative CNP/ECN marks (host) or discards (switch)
    errs: Union[int, None] = None    # cumulative link errors
    base: float = -1.0               # EWMA of the quiet rate (/s)
    n: int = 0
    since: int = 0
    since_id: str = ""
    above: int = 0
    below: int = 0
    fired: bool = False


class PrecursorState(Struct, kw_only=True):
    lat: dict[str, LatTrack] = {}
    cong: dict[str, CongTrack] = {}
    segments: dict[str, str] = {}    # NIC name or "switch/port" -> segment (the node's own topology)


def _slot(table: dict, key: str, cap: int, new):
    """``table[key]``, created with ``new()``; at ``cap`` entries the one whose ``ts`` is oldest goes."""
    s = table.get(key)
    if s is None:
        if len(table) >= cap:
            del table[min(table, key=lambda k: table[k].ts)]
        s = table[key] = new()
    return s


def _emit(kind: str, subject: str, ev, summary: str, data: dict, evidence: list[str]) -> Signal:
    sig = make(kind, subject, ev, ev.layer, "warning", summary, component=subject, data=data, evidence=evidence)
    return msgspec.structs.replace(sig, node=None, job=None)


# ---------------------------------------------------------------- topology
def on_topology(st: PrecursorState, ev) -> None:
    """The node's own links: its NICs and the switch ports facing them, by segment."""
    seg: dict[str, str] = {}
    for l in ev.data.links[:MAX_LINKS]:
        if l.segment:
            seg[l.nic] = l.segment
            seg[f"{l.switch}/{l.port}"] = l.segment
    st.segments = seg


# ---------------------------------------------------------------- storage
def _learn(t: LatTrack, lat: float) -> None:
    if len(t.ring) < LAT_RING:
        t.ring.append(lat)
    else:
        t.ring[t.pos] = lat
        t.pos = (t.pos + 1) % LAT_RING
    t.learned += 1
    t.fresh += 1
    if t.learned <= LAT_WARMUP or t.fresh >= LAT_REQUANTILE:
        s = sorted(t.ring)
        t.base = s[min(len(s) - 1, int(LAT_QUANTILE * len(s)))]
        t.med = s[len(s) // 2]
        t.fresh = 0


def on_storage(st: PrecursorState, ev, out: list[Signal]) -> None:
    d = ev.data
    rl, wl = d.read_lat_ms, d.write_lat_ms
    if rl is None and wl is None:
        return
    lat = max(rl or 0.0, wl or 0.0)
    path = d.path
    t = _slot(st.lat, path, MAX_PATHS, LatTrack)
    t.ts = ev.ts
    if t.learned < LAT_WARMUP:
        _learn(t, lat)
        t.ref += (lat - t.ref) / t.learned
        return
    limit = max(min(LAT_CLIMB_FACTOR * t.base, LAT_REF_FACTOR * t.ref), t.base + LAT_MIN_EXCESS_MS)
    if lat >= limit:
        t.below = 0
        if t.above == 0:
            t.since, t.since_id = ev.ts, ev.id
        t.above += 1
        if (not t.fired and t.above >= LAT_SUSTAIN_SAMPLES and ev.ts - t.since >= LAT_SUSTAIN_MS):
            t.fired = True
            subj = f"path:{path}"
            base = min(t.base, t.ref)
            out.append(_emit(STORAGE_CLIMB, subj, ev,
                             f"{path} latency climbing on {ev.node}: {lat:.1f} ms, {lat / max(base, 1e-3):.0f}x its "
                             f"baseline {base:.2f} ms for {(ev.ts - t.since) // 1000} s",
                             {"path": path, "node": ev.node, "fs_type": d.fs_type, "lat_ms": lat,
                              "base_ms": round(base, 3), "factor": round(lat / max(base, 1e-3), 1),
                              "since": t.since}, [t.since_id, ev.id]))
        return
    t.above = 0
    if t.fired:
        t.below += 1
        if t.below >= LAT_REARM_SAMPLES:
            t.fired = False
            t.below = 0
    t.ref += (lat - t.ref) * LAT_REF_FALL if lat < t.ref else min(lat - t.ref, t.ref) / LAT_REF_RISE_N
    if lat < LAT_LEARN_BELOW * t.med:
        _learn(t, lat)


# ---------------------------------------------------------------- congestion
def _surge(st: PrecursorState, key: str, seg: Union[str, None], ev, marks: Union[int, None],
           errs: Union[int, None], floor: float, what: str, where: str, out: list[Signal], down: bool = False) -> None:
    """One port's congestion counter ``marks`` against its own rate baseline; any growth of
    its link error counter ``errs`` in the interval (or the port down) makes it a link
    fault, not congestion."""
    t = _slot(st.cong, key, MAX_PORTS, CongTrack)
    prev_ts, prev_m, prev_e = t.ts, t.marks, t.errs
    t.ts, t.marks, t.errs = ev.ts, marks, errs
    if prev_m is None or marks is None or ev.ts <= prev_ts:
        return
    dt = (ev.ts - prev_ts) / 1000.0
    rate = delta(prev_m, marks) / dt
    link_err = down or delta(prev_e, errs) > 0
    if t.n >= CONG_WARMUP and not link_err and rate >= floor and rate >= CONG_SURGE_FACTOR * t.base:
        t.below = 0
        if t.above == 0:
            t.since, t.since_id = prev_ts, ev.id
        t.above += 1
        if (seg is not None and not t.fired and t.above >= CONG_SUSTAIN_SAMPLES
                and ev.ts - t.since >= CONG_SUSTAIN_MS):
            t.fired = True
            subj = f"segment:{seg}"
            out.append(_emit(SEGMENT_CONGESTION, subj, ev,
                             f"segment {seg} congested: {what} {rate:.0f}/s on {where}, {rate / max(t.base, 1.0):.0f}x "
                             f"its baseline {t.base:.0f}/s for {(ev.ts - t.since) // 1000} s, no link errors",
                             {"segment": seg, "node": ev.node, "device": ev.data.device, "port": str(ev.data.port),
                              "what": what, "rate": round(rate, 1), "base": round(t.base, 1), "since": t.since},
                             [t.since_id, ev.id]))
        return
    t.above = 0
    if link_err:
        return   # a link fault's interval teaches nothing
    if t.fired:
        t.below += 1
        if t.below >= CONG_REARM_SAMPLES:
            t.fired = False
            t.below = 0
    t.base = rate if t.base < 0 else t.base + CONG_ALPHA * (rate - t.base)
    t.n += 1


def _total(c: dict, names: tuple[str, ...]) -> Union[int, None]:
    vals = [c[k] for k in names if k in c]
    return sum(vals) if vals else None


def on_rdma(st: PrecursorState, ev, out: list[Signal]) -> None:
    d = ev.data
    c = d.counters
    marks = _total(c, CNP_COUNTERS)
    if marks is None:
        return
    _surge(st, f"rdma:{d.device}/{d.port}", st.segments.get(d.device), ev, marks, _total(c, LINK_ERR_COUNTERS),
           CONG_MIN_CNP_RATE, "CNP/ECN marks", f"{ev.node} {d.device}/{d.port}", out)


def on_port(st: PrecursorState, ev, out: list[Signal]) -> None:
    d = ev.data
    disc = None if d.in_discards is None and d.out_discards is None else (d.in_discards or 0) + (d.out_discards or 0)
    if disc is None:
        return
    errs = None if d.in_errors is None and d.out_errors is None else (d.in_errors or 0) + (d.out_errors or 0)
    _surge(st, f"port:{d.device}/{d.port}", st.segments.get(f"{d.device}/{d.port}"), ev, disc, errs,
           CONG_MIN_DISCARD_RATE, "discards", f"{d.device} {d.port}", out, down=d.oper_status == "down")
