"""Decoys: alarms that look like causes but hurt no job (nodes outside the job, unused
ports, benign XIDs, short storage blips, harmless firmware changes)."""

from __future__ import annotations

from .faults import MIN, link_flap, sched_node, xid_event
from .plan import Plan, mk


def _idle_node(plan: Plan, t0: int, t1: int) -> int | None:
    cands = [i for i in range(len(plan.cluster.nodes)) if not plan.node_busy(i, t0, t1) and i not in plan.drained]
    return plan.rng.choice(cands) if cands else None


def _healthy_running(plan: Plan, t: int):
    c = [a for a in plan.running_at(t) if a.label is None and a.fault is None and a.halt_ts is None]
    return plan.rng.choice(c) if c else None


def apply(plan: Plan, kinds: tuple[str, ...]) -> None:
    r = plan.rng
    span = plan.t_end - plan.t0
    for kind in kinds:
        t = plan.t0 + int(span * r.uniform(0.15, 0.85))
        if kind == "sel_idle":
            a = _healthy_running(plan, t)
            node = r.choice(a.nodes) if a is not None and r.random() < 0.5 else _idle_node(plan, t - 30 * MIN, t + 30 * MIN)
            if node is None:
                continue
            n = plan.cluster.nodes[node]
            p = r.randrange(1, 7)
            plan.add(t, mk(t, "hw.sel", f"redfish@{n.bmc}", {
                "entry_id": str(r.randrange(100, 9000)), "severity": "critical", "sensor_type": "Power Supply",
                "message_id": "OpenBMC.0.1.PowerSupplyACLost",
                "message": f"Power Supply {p} AC input lost; power supply redundancy degraded (5 of 6 online)."}, node=n.name))
            plan.add(t + 40 * MIN, mk(t + 40 * MIN, "hw.sel", f"redfish@{n.bmc}", {
                "entry_id": str(r.randrange(100, 9000)), "severity": "ok", "sensor_type": "Power Supply",
                "message_id": "OpenBMC.0.1.PowerSupplyPowerRestored",
                "message": f"Power Supply {p} input restored; redundancy regained."}, node=n.name))
            plan.decoys.append({"kind": kind, "node": n.name, "ts": t})
        elif kind == "flap_unused":
            node = _idle_node(plan, t - 20 * MIN, t + 20 * MIN)
            if node is None or r.random() < 0.4:
                ups = [i for i, p in enumerate(plan.cluster.ports) if p.node is None]
                pi = r.choice(ups)
                p = plan.cluster.ports[pi]
                d = r.randrange(2_000, 20_000)
                plan.ov.add_port(pi, t, t + d, down=True, in_err_rate=3.0)
                plan.add(t, mk(t, "net.link", f"snmp@{p.switch}", {"device": p.switch, "port": p.port, "state": "down"}))
                plan.add(t + d, mk(t + d, "net.link", f"snmp@{p.switch}", {"device": p.switch, "port": p.port, "state": "up"}))
                plan.decoys.append({"kind": kind, "port": f"{p.switch}/{p.port}", "ts": t})
            else:
                k = r.randrange(plan.cluster.nics_per_node)
                link_flap(plan, node, k, t, r.randrange(2_000, 15_000), None)
                lk = plan.cluster.nodes[node].links[k]
                plan.decoys.append({"kind": kind, "port": f"{lk.switch}/{lk.port}", "node": plan.name(node), "ts": t})
        elif kind == "xid79_idle":
            node = _idle_node(plan, t - 10 * MIN, plan.t_end + 1)
            if node is None:
                continue
            g = r.randrange(plan.cluster.gpus_per_node)
            xid_event(plan, node, g, 79, t, None, None)
            plan.ov.add_gpu(node, g, t, plan.t_end + 1, gone=True)
            sched_node(plan, node, t + r.randrange(20_000, 90_000), "drain", f"NHC: GPU {g} Xid 79")
            plan.drained[node] = plan.t_end + 1
            plan.decoys.append({"kind": kind, "node": plan.name(node), "gpu": g, "ts": t})
        elif kind == "thermal_idle":
            node = _idle_node(plan, t - 10 * MIN, t + 40 * MIN)
            if node is None:
                continue
            plan.ov.add_node(node, t, t + 30 * MIN, sensors={"Inlet Temp": ((27.0, 34.0), "warning"),
                                                            "Exhaust Temp": ((36.0, 44.0), "warning")})
            plan.decoys.append({"kind": kind, "node": plan.name(node), "ts": t})
        elif kind == "xid63":
            a = _healthy_running(plan, t)
            if a is None:
                continue
            node = r.choice(a.nodes)
            g = r.randrange(a.job.gpn)
            xid_event(plan, node, g, 63, t, None, None)
            plan.ov.add_gpu(node, g, t, plan.t_end + 1, remap=1, sbe_rate=0.02)
            plan.decoys.append({"kind": kind, "node": plan.name(node), "gpu": g, "ts": t, "job": a.job.id})
        elif kind == "storage_blip":
            d = r.randrange(2, 5) * MIN
            plan.ov.add_storage("/datasets", t, t + d, lat_mult=r.uniform(5, 12))
            plan.decoys.append({"kind": kind, "path": "/datasets", "ts": t, "duration_ms": d})
        elif kind == "benign_change":
            for _ in range(2):
                node = _idle_node(plan, t - 5 * MIN, t + 15 * MIN)
                if node is None:
                    continue
                n = plan.cluster.nodes[node]
                plan.add(t, mk(t, "inventory.change", "redfish-updater@mgmt-1", {
                    "component": "bmc_firmware", "from": n.versions["bmc_firmware"], "to": "24.09.03",
                    "actor": "redfish-updater", "ticket": f"CHG-{r.randrange(1000, 9999)}"}, node=n.name))
                plan.changes.append({"node": n.name, "ts": t, "component": "bmc_firmware", "to": "24.09.03"})
                plan.decoys.append({"kind": kind, "node": n.name, "ts": t})
                t += r.randrange(60_000, 600_000)
