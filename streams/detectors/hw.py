"""BMC detectors: sensor threshold crossings (status warning/critical) and SEL entries."""

from __future__ import annotations

from msgspec import Struct

from ..signals import Signal, make

# SEL sensor types whose critical entries take a node down (PSU, memory UE, CPU, thermal trip)
_FATAL_SEL = ("power", "memory", "processor", "cpu", "temperature", "fan", "voltage", "critical interrupt")


class HwState(Struct, kw_only=True):
    sensors: dict[str, str] = {}      # sensor -> last status
    sel_seen: list[str] = []          # recent SEL entry ids (bounded)


def on_sensor(st: HwState, ev, out: list[Signal]) -> None:
    d = ev.data
    prev = st.sensors.get(d.sensor, "ok")
    cur = d.status
    if cur == prev:
        return
    st.sensors[d.sensor] = cur
    if cur == "ok" or (cur == "warning" and prev == "critical"):
        return
    crit = cur == "critical"
    subj = f"node:{ev.node}"
    out.append(make("bmc_sensor", subj, ev, "hw", "critical" if crit else "warning",
                    f"BMC {ev.node}: {d.type} sensor {d.sensor} {cur} at {d.value} {d.unit}",
                    category="node_hardware", component=subj, score=0.6 if crit else 0.2,
                    data={"sensor": d.sensor, "type": d.type, "value": d.value, "status": cur}))


def on_sel(st: HwState, ev, out: list[Signal]) -> None:
    d = ev.data
    if d.severity == "ok":
        return
    if d.entry_id in st.sel_seen:
        return
    st.sel_seen.append(d.entry_id)
    if len(st.sel_seen) > 256:
        del st.sel_seen[:64]
    st_low = d.sensor_type.lower()
    crit = d.severity == "critical"
    fatal = crit and any(k in st_low for k in _FATAL_SEL)
    subj = f"node:{ev.node}"
    out.append(make("bmc_sel", subj, ev, "hw", "critical" if crit else "warning",
                    f"SEL {ev.node}: {d.sensor_type}: {d.message}",
                    category="node_hardware", component=subj,
                    score=0.85 if fatal else (0.6 if crit else 0.2),
                    data={"entry_id": d.entry_id, "sensor_type": d.sensor_type, "severity": d.severity,
                          "message_id": d.message_id}))
