"""Network detectors: port down / flap, error and discard growth (with counter resets),
RDMA link errors and retransmit / timeout / CNP / ECN surges against the port's own
baseline. Counter names: Linux RDMA sysfs (see shared/reference/rdma_counters.csv, from
kernel Documentation/ABI/stable/sysfs-class-infiniband and NVIDIA's mlx5 counter notes)."""

from __future__ import annotations

from typing import Union

from msgspec import Struct

from ..signals import Signal, make
from ._util import delta
from .config import DetectorConfig

# physical-layer link errors (kernel ABI 'counters/'): cable/optic/SerDes
RDMA_LINK_ERR = ("symbol_error", "port_rcv_errors", "link_error_recovery", "local_link_integrity_errors",
                 "port_rcv_remote_physical_errors", "rx_icrc_encapsulated")
# loss / retransmit / timeout (mlx5 hw_counters/)
RDMA_RETRANS = ("local_ack_timeout_err", "out_of_sequence", "packet_seq_err", "implied_nak_seq_err",
                "duplicate_request", "roce_adp_retrans", "roce_adp_retrans_to", "req_transport_retries_exceeded")
# congestion notification (DCQCN) and ECN marks (mlx5 hw_counters/)
RDMA_CNP = ("np_cnp_sent", "rp_cnp_handled", "np_ecn_marked_roce_packets")


class PortState(Struct, kw_only=True):
    ts: int = 0
    status: str = ""
    downs: list[int] = []          # ts of recent down transitions (bounded by the flap window)
    err: Union[int, None] = None
    disc: Union[int, None] = None
    flap_fired: int = -(1 << 62)   # ts of the last flap signal
    err_base: float = 0.0          # EWMA of errors per interval (a noisy port's own normal)
    err_fired: bool = False


class RdmaState(Struct, kw_only=True):
    ts: int = 0
    counters: dict[str, int] = {}
    retrans_base: float = -1.0     # EWMA of the retransmit/timeout rate (/s)
    cnp_base: float = -1.0
    surging: bool = False
    n: int = 0


def _sum(a: Union[int, None], b: Union[int, None]) -> Union[int, None]:
    """in + out of a counter pair; None when the device reports neither."""
    if a is None:
        return b
    return a if b is None else a + b


def _transition(st: PortState, ev, device: str, port: str, state: str, cfg: DetectorConfig,
                out: list[Signal], via: str) -> None:
    prev = st.status
    st.status = state
    if state == prev:
        return
    subj = f"port:{device}/{port}"
    if state == "down":
        t = ev.ts
        st.downs = [x for x in st.downs if t - x <= cfg.flap_window_ms]
        st.downs.append(t)
        out.append(make("port_down", subj, ev, "net", "critical", f"{device} {port} link down ({via})",
                        category="network_link", component=subj, score=0.85,
                        data={"device": device, "port": port}))
        if len(st.downs) >= cfg.flap_count and t - st.flap_fired > cfg.flap_window_ms:
            st.flap_fired = t
            out.append(make("port_flap", subj, ev, "net", "critical",
                            f"{device} {port} flapping: {len(st.downs)} downs in {cfg.flap_window_ms // 60000} min",
                            category="network_link", component=subj, score=0.85,
                            data={"device": device, "port": port, "downs": len(st.downs)}))
    elif prev == "down":
        out.append(make("port_up", subj, ev, "net", "info", f"{device} {port} link up ({via})",
                        data={"device": device, "port": port}))


def on_port(st: PortState, ev, cfg: DetectorConfig, out: list[Signal]) -> None:
    d = ev.data
    if d.oper_status != st.status:
        _transition(st, ev, d.device, d.port, d.oper_status, cfg, out, "oper_status")
    err = _sum(d.in_errors, d.out_errors)
    disc = _sum(d.in_discards, d.out_discards)
    subj = None
    if err is not None:
        if st.err is not None:
            n = delta(st.err, err)
            if n >= cfg.port_err_burst and n >= 5 * st.err_base:
                if not st.err_fired:
                    st.err_fired = True
                    subj = f"port:{d.device}/{d.port}"
                    out.append(make("port_errors", subj, ev, "net", "warning",
                                    f"{d.device} {d.port}: +{n} errors in {(ev.ts - st.ts) // 1000} s",
                                    category="network_link", component=subj, score=0.55,
                                    data={"device": d.device, "port": d.port, "new": n}))
            else:
                st.err_fired = False
                st.err_base += 0.1 * (n - st.err_base)
        st.err = err
    if disc is not None:
        if st.disc is not None and disc != st.disc and (n := delta(st.disc, disc)) >= cfg.port_discard_burst:
            subj = f"port:{d.device}/{d.port}"
            out.append(make("port_discards", subj, ev, "net", "warning",
                            f"{d.device} {d.port}: +{n} discards in {(ev.ts - st.ts) // 1000} s",
                            category="network_congestion", score=0.4,
                            data={"device": d.device, "port": d.port, "new": n}))
        st.disc = disc
    st.ts = ev.ts


def on_link(st: PortState, ev, cfg: DetectorConfig, out: list[Signal]) -> None:
    d = ev.data
    _transition(st, ev, d.device, d.port, d.state, cfg, out, "link event")
    st.ts = ev.ts


#: watched counter -> its group: 0 link errors, 1 retransmits/timeouts, 2 congestion marks
_GROUP = {**{k: 0 for k in RDMA_LINK_ERR}, **{k: 1 for k in RDMA_RETRANS}, **{k: 2 for k in RDMA_CNP}}


def on_rdma(st: RdmaState, ev, cfg: DetectorConfig, out: list[Signal]) -> None:
    d = ev.data
    c = d.counters
    prev = st.counters
    first = not prev
    dt = (ev.ts - st.ts) / 1000.0 if not first else 0.0
    st.counters = c
    st.ts = ev.ts
    if first or dt <= 0:
        return
    subj = f"rdma:{ev.node}/{d.device}/{d.port}"
    pg = prev.get
    # hard link drop
    ld = delta(pg("link_downed"), c.get("link_downed"))
    if ld > 0:
        out.append(make("rdma_link_downed", subj, ev, "net", "critical",
                        f"{ev.node} {d.device}/{d.port}: link downed x{ld}",
                        category="network_link", score=0.8, data={"device": d.device, "port": d.port, "new": ld}))
    # growth per group over the watched counters this device reports (a reset counts from 0)
    grown = [0, 0, 0]
    for k in c.keys() & _GROUP.keys():
        v = c[k]
        pv = pg(k)
        if pv is not None and v != pv:
            grown[_GROUP[k]] += v - pv if v > pv else v
    le, rt_n, cn_n = grown
    if le >= cfg.rdma_err_burst:
        out.append(make("rdma_link_errors", subj, ev, "net", "warning",
                        f"{ev.node} {d.device}/{d.port}: +{le} physical link errors in {dt:.0f} s",
                        category="network_link", score=0.5, data={"device": d.device, "port": d.port, "new": le}))
    rt = rt_n / dt
    cn = cn_n / dt
    st.n += 1
    surge = None
    if st.retrans_base >= 0 and rt >= cfg.rdma_retrans_min_rate and rt >= cfg.rdma_surge_factor * st.retrans_base:
        surge = ("retransmits/timeouts", rt, st.retrans_base)
    elif st.cnp_base >= 0 and cn >= cfg.rdma_cnp_min_rate and cn >= cfg.rdma_surge_factor * st.cnp_base:
        surge = ("CNP/ECN marks", cn, st.cnp_base)
    if surge is not None:
        if not st.surging:
            st.surging = True
            out.append(make("rdma_congestion", subj, ev, "net", "warning",
                            f"{ev.node} {d.device}/{d.port}: {surge[0]} surge {surge[1]:.0f}/s (baseline {surge[2]:.0f}/s)",
                            category="network_congestion", score=0.6,
                            data={"device": d.device, "port": d.port, "what": surge[0], "rate": round(surge[1], 1), "baseline": round(surge[2], 1)}))
        return  # do not learn the anomaly into the baseline
    st.surging = False
    st.retrans_base = rt if st.retrans_base < 0 else st.retrans_base + 0.1 * (rt - st.retrans_base)
    st.cnp_base = cn if st.cnp_base < 0 else st.cnp_base + 0.1 * (cn - st.cnp_base)
