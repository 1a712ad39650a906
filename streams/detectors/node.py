"""``NodeState`` + ``feed_node``: every detector of the node-keyed topics (fl.gpu, fl.hw,
fl.net, fl.storage, fl.inventory, sched.node) for one Kafka key (a node, or a switch for
fl.net events without a node). State is one msgspec Struct: encode it with
``msgspec.msgpack`` to checkpoint it (Faust changelog) and decode it to resume."""

from __future__ import annotations

from msgspec import Struct, field

from ..signals import Signal, make
from . import gpu, hw, net, precursor, storage
from .config import DetectorConfig


class NodeState(Struct, kw_only=True):
    ts: int = 0
    gpus: dict[int, gpu.GpuState] = {}
    hw: hw.HwState = field(default_factory=hw.HwState)
    ports: dict[str, net.PortState] = {}
    rdma: dict[str, net.RdmaState] = {}
    mounts: dict[str, storage.MountState] = {}
    sched_state: str = ""
    cover: dict[str, list[int]] = {}      # layer -> [first ts, last ts] of telemetry seen (for ruled_out)
    gpu_scan: int = 0                     # last look for GPUs gone silent
    pre: precursor.PrecursorState = field(default_factory=precursor.PrecursorState)  # precursor baselines


def feed_node(st: NodeState, ev, cfg: DetectorConfig, out: list[Signal], kind: str | None = None) -> None:
    """Run the detectors of ``ev``'s kind on ``st``; append signals to ``out``."""
    k = kind or ev.kind
    if k == "inventory.topology":   # the node's own links, for naming segments (no telemetry coverage)
        precursor.on_topology(st.pre, ev)
        return
    ts = ev.ts
    if ts > st.ts:
        st.ts = ts
    span = st.cover.get(ev.layer)
    if span is None:
        st.cover[ev.layer] = [ts, ts]
    elif ts > span[1]:
        span[1] = ts
    elif ts < span[0]:
        span[0] = ts
    if k == "gpu.sample":
        g = ev.data.gpu
        s = st.gpus.get(g)
        if s is None:
            s = st.gpus[g] = gpu.GpuState()
        prev = s.ts
        gpu.on_sample(s, ev, cfg, out)
        # look for silent GPUs now and then, on a sample of a GPU that itself kept reporting
        if ts - st.gpu_scan >= 15_000 and prev and ts - prev <= max(cfg.gpu_lost_min_ms, cfg.gpu_lost_factor * s.iv):
            st.gpu_scan = ts
            gpu.scan_lost(st.gpus, ev, cfg, out)
    elif k == "gpu.xid":
        gpu.on_xid(ev, out)
    elif k == "net.port" or k == "net.link":
        key = f"{ev.data.device}/{ev.data.port}"
        s = st.ports.get(key)
        if s is None:
            s = st.ports[key] = net.PortState()
        if k == "net.port":
            net.on_port(s, ev, cfg, out)
            precursor.on_port(st.pre, ev, out)
        else:
            net.on_link(s, ev, cfg, out)
    elif k == "net.rdma":
        key = f"{ev.data.device}/{ev.data.port}"
        s = st.rdma.get(key)
        if s is None:
            s = st.rdma[key] = net.RdmaState()
        net.on_rdma(s, ev, cfg, out)
        precursor.on_rdma(st.pre, ev, out)
    elif k == "storage.sample" or k == "storage.mount":
        key = ev.data.path
        s = st.mounts.get(key)
        if s is None:
            s = st.mounts[key] = storage.MountState()
        if k == "storage.sample":
            storage.on_sample(s, ev, cfg, out)
            precursor.on_storage(st.pre, ev, out)
        else:
            storage.on_mount(s, ev, out)
    elif k == "hw.sensor":
        hw.on_sensor(st.hw, ev, out)
    elif k == "hw.sel":
        hw.on_sel(st.hw, ev, out)
    elif k == "sched.node":
        cur = ev.data.state
        prev, st.sched_state = st.sched_state, cur
        if cur in ("down", "fail") and prev not in ("down", "fail"):
            subj = f"node:{ev.node}"
            out.append(make("node_down", subj, ev, "sched", "critical",
                            f"scheduler marked {ev.node} {cur}" + (f": {ev.data.reason}" if ev.data.reason else ""),
                            category="node_hardware", component=subj, score=0.5,
                            data={"state": cur, "reason": ev.data.reason}))
    elif k == "inventory.change":
        d = ev.data
        out.append(make("version_change", f"version:{d.component}={d.to}", ev, "inventory", "info",
                        f"{ev.node}: {d.component} {d.from_ or '?'} -> {d.to}" + (f" ({d.ticket})" if d.ticket else ""),
                        data={"component": d.component, "from": d.from_, "to": d.to, "actor": d.actor}))
