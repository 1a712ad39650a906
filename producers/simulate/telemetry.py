"""Background telemetry for every layer, second by second, with fault overlays applied.

Each periodic stream (gpu.sample, hw.sensor, net.port, net.rdma, storage.sample,
storage.mount) has an interval; every subject gets a fixed phase inside it so a fleet's
samples are spread over the interval as real pollers are. ``Telemetry.iter()`` yields
``(ts, event_dict)`` in time order, one simulated second at a time, so memory stays flat
whatever the fleet size and window.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_right
from dataclasses import dataclass
from typing import Iterator

from .cluster import GPU_MEM_MIB, Cluster
from .overlays import INF, Overlays, ramp

MS = 1000


@dataclass
class Intervals:
    """Seconds between samples of each periodic stream."""

    gpu: int = 10
    hw: int = 60
    net_port: int = 30
    net_rdma: int = 30
    storage: int = 30
    mount: int = 300


def diurnal(ts: int) -> float:
    """0..1 load of the day (UTC), peak mid-afternoon."""
    h = (ts / 3_600_000) % 24
    return 0.5 + 0.5 * math.sin((h - 9) / 24 * 2 * math.pi)


_HW_SENSORS = (
    ("Inlet Temp", "temperature", "degrees C"),
    ("Exhaust Temp", "temperature", "degrees C"),
    ("CPU0 Temp", "temperature", "degrees C"),
    ("CPU1 Temp", "temperature", "degrees C"),
    ("FAN1", "fan", "RPM"),
    ("FAN4", "fan", "RPM"),
    ("Total Power", "power", "Watts"),
    ("P12V", "voltage", "Volts"),
)

_BENIGN_SEL = (
    ("ok", "Event Logging Disabled", None, "Log area reset/cleared"),
    ("warning", "Memory", "OpenBMC.0.1.MemoryECCCorrectable", "Memory ECC correctable error logging limit reached on DIMM_{d}"),
    ("ok", "System Event", "OpenBMC.0.1.BIOSPOSTCode", "OEM System boot event"),
    ("ok", "Power Supply", "OpenBMC.0.1.PowerSupplyPowerRestored", "Power Supply {p} redundancy regained"),
    ("warning", "Temperature", "OpenBMC.0.1.SensorThresholdWarningHighGoingHigh", "Inlet Temp sensor crossed a warning high threshold going high. Reading=31.0 Threshold=31.0."),
)

RDMA_COUNTERS = ("port_xmit_data", "port_rcv_data", "symbol_error", "link_downed", "port_rcv_errors",
                 "link_error_recovery", "local_ack_timeout_err", "out_of_sequence", "packet_seq_err",
                 "np_cnp_sent", "rp_cnp_handled", "np_ecn_marked_roce_packets")
_RC = {n: i for i, n in enumerate(RDMA_COUNTERS)}


def _buckets(n: int, interval: int, rng: random.Random) -> tuple[list[list[int]], list[int]]:
    b: list[list[int]] = [[] for _ in range(interval)]
    off = [0] * n
    for i in range(n):
        ph = rng.randrange(interval)
        b[ph].append(i)
        off[i] = rng.randrange(1000)
    return b, off


class Telemetry:
    def __init__(self, cluster: Cluster, allocs: list[list], overlays: Overlays, t0: int, t_end: int,
                 seed: int, iv: Intervals, sel_rate_per_node_h: float = 0.01) -> None:
        self.c = cluster
        self.allocs = allocs          # per node: sorted list of attempts (with start_ts/end_ts)
        self.ov = overlays
        self.t0, self.t_end = t0, t_end
        self.iv = iv
        self.rng = random.Random(seed * 7919 + 17)
        self.sel_rate = sel_rate_per_node_h
        n, g = len(cluster.nodes), cluster.gpus_per_node
        nics = cluster.nics_per_node
        r = self.rng
        self.b_gpu, self.o_node = _buckets(n, iv.gpu, r)
        self.b_hw, _ = _buckets(n, iv.hw, r)
        self.b_port, self.o_port = _buckets(len(cluster.ports), iv.net_port, r)
        self.b_rdma, _ = _buckets(n, iv.net_rdma, r)
        self.b_sto, _ = _buckets(n, iv.storage, r)
        self.b_mnt, _ = _buckets(n, iv.mount, r)
        # per-GPU static personality and counters
        self.gpu_temp_off = [r.uniform(-4, 6) for _ in range(n * g)]
        self.gpu_sbe = [r.choice((0, 0, 0, 0, 1, 2, 5)) for _ in range(n * g)]
        self.gpu_dbe = [0] * (n * g)
        self.gpu_nvl = [0] * (n * g)
        self.gpu_pcie = [0] * (n * g)
        self.gpu_remap = [0] * (n * g)
        self.sbe_rate = [(r.random() < 0.01) * r.uniform(0.5, 4) / 3600 for _ in range(n * g)]  # per s
        # switch ports: counters [in_err, out_err, in_disc, out_disc, in_oct, out_oct]
        self.port_ctr = [[r.randrange(0, 40), 0, r.randrange(0, 200), r.randrange(0, 500),
                          r.randrange(10**12, 10**15), r.randrange(10**12, 10**15)] for _ in cluster.ports]
        self.port_err_rate = [(r.random() < 0.01) * r.uniform(0.01, 0.2) for _ in cluster.ports]
        self.port_down = [False] * len(cluster.ports)
        # RDMA counters per (node, nic)
        self.rdma = [[r.randrange(10**11, 10**13), r.randrange(10**11, 10**13)] + [0] * (len(RDMA_COUNTERS) - 2)
                     for _ in range(n * nics)]
        self.reboot_seen = [0] * n
        self.ptr = [0] * n
        self._phase_cache: dict[int, str] = {}
        self._cache_sec = -1
        self.used_drift = {m.path: r.uniform(-1, 1) for m in cluster.mounts}
        self._gpu_ov_nodes = {k[0] for k in overlays.gpu}

    # ------------------------------------------------------------ job state
    def attempt_at(self, node: int, t: int):
        lst = self.allocs[node]
        i = self.ptr[node]
        while i < len(lst) and (lst[i].end_ts if lst[i].end_ts is not None else INF) <= t:
            i += 1
        self.ptr[node] = i
        if i < len(lst) and lst[i].start_ts <= t:
            return lst[i]
        return None

    def phase(self, att, t: int) -> str:
        key = id(att)
        ph = self._phase_cache.get(key)
        if ph is not None:
            return ph
        if t < att.start_ts + att.init_ms:
            ph = "init"
        elif att.stalled_ts is not None and t >= att.stalled_ts:
            ph = "io_wait"
        elif att.halt_ts is not None and t >= att.halt_ts:
            ph = getattr(att, "halt_phase", "hang")
        else:
            ph = "train"
            ck = getattr(att, "_ckwin", None)
            if ck is None:
                ck = []
                open_t = None
                for c in att.ckpts:
                    if c[1] == "started":
                        open_t = c[0]
                    elif open_t is not None:
                        ck.append((open_t, c[0]))
                        open_t = None
                att._ckwin = ck
                att._ckstarts = [a for a, _ in ck]
            if ck:
                j = bisect_right(att._ckstarts, t) - 1
                if j >= 0 and ck[j][0] <= t < ck[j][1]:
                    ph = "ckpt"
        self._phase_cache[key] = ph
        return ph

    # ------------------------------------------------------------ main loop
    def iter(self) -> Iterator[tuple[int, dict]]:
        for _, batch in self.batches():
            yield from batch

    def batches(self) -> Iterator[tuple[int, list[tuple[int, dict]]]]:
        """``(second start ts, unsorted events of that second)`` for every simulated second."""
        t0 = self.t0
        n_sec = (self.t_end - t0) // MS
        iv = self.iv
        for s in range(n_sec):
            base = t0 + s * MS
            self._phase_cache.clear()
            batch: list[tuple[int, dict]] = []
            self._gpu(batch, self.b_gpu[s % iv.gpu], base, iv.gpu)
            self._hw(batch, self.b_hw[s % iv.hw], base, iv.hw)
            self._port(batch, self.b_port[s % iv.net_port], base, iv.net_port)
            self._rdma_s(batch, self.b_rdma[s % iv.net_rdma], base, iv.net_rdma)
            self._storage(batch, self.b_sto[s % iv.storage], base, iv.storage)
            self._mount(batch, self.b_mnt[s % iv.mount], base, s < iv.mount)
            yield base, batch

    # ------------------------------------------------------------ node helpers
    def _node_down(self, node: int, t: int) -> bool:
        lst = self.ov.node.get(node)
        if not lst:
            return False
        for _, _, eff in Overlays.active(lst, t):
            if eff.get("down"):
                return True
        return False

    def _check_reboot(self, node: int, t: int) -> None:
        rb = self.ov.reboots.get(node)
        if not rb:
            return
        k = bisect_right(rb, t)
        if k > self.reboot_seen[node]:
            self.reboot_seen[node] = k
            g, nics = self.c.gpus_per_node, self.c.nics_per_node
            for i in range(node * g, node * g + g):
                self.gpu_nvl[i] = 0
                self.gpu_pcie[i] = 0
            for i in range(node * nics, node * nics + nics):
                self.rdma[i] = [0] * len(RDMA_COUNTERS)

    # ------------------------------------------------------------ gpu.sample
    # per phase: (util lo, util span, temp, power lo, power span, clock); NVML reports util, temp
    # and clocks as integers and power in mW (we keep 0.1 W)
    _PH = {
        "train": (90, 11, 61, 560, 120, 1980), "ckpt": (0, 15, 50, 160, 40, 1980),
        "hang": (100, 1, 52, 270, 40, 1980), "io_wait": (0, 1, 40, 95, 10, 1755),
        "init": (0, 30, 42, 140, 40, 1980), "dead": (0, 1, 36, 72, 4, 345), "idle": (0, 1, 31, 68, 6, 345),
    }

    def _gpu(self, out: list, nodes: list[int], base: int, interval: int) -> None:
        rnd = self.rng.random
        c = self.c
        g = c.gpus_per_node
        ovg = self.ov.gpu
        amb = 2.0 * diurnal(base)
        PH = self._PH
        sbe, dbe, nvl, pcie, remap = self.gpu_sbe, self.gpu_dbe, self.gpu_nvl, self.gpu_pcie, self.gpu_remap
        toffs, sbr = self.gpu_temp_off, self.sbe_rate
        node_ov = self.ov.node
        has_gpu_ov = self._gpu_ov_nodes
        for ni in nodes:
            t = base + self.o_node[ni]
            if ni in node_ov and self._node_down(ni, t):
                continue
            if self.ov.reboots:
                self._check_reboot(ni, t)
            node = c.nodes[ni]
            att = self.attempt_at(ni, t)
            if att is not None:
                ph = self.phase(att, t)
                jm = 56000 + (int(att.job.id) % 22) * 1000
            else:
                ph, jm = "idle", 0
            u0, us, tb, p0, ps, clock0 = PH[ph]
            busy = ph == "train"
            mem_span = 1500 if busy else (800 if ph == "ckpt" else 0)
            name = node.name
            src = node._src_dcgm if hasattr(node, "_src_dcgm") else f"dcgm@{name}"
            uuids = node.gpu_uuid
            temp_base = tb + amb
            for gi in range(g):
                k = ni * g + gi
                x = rnd()
                util = 100 if (busy and x < 0.45) else u0 + int(us * rnd())
                if ph == "init":
                    mem = int(jm * x)
                elif jm:
                    mem = jm + int(mem_span * x)
                else:
                    mem = int(3 * x)
                temp = temp_base + toffs[k] + (4 if busy else 2) * x
                power = p0 + ps * rnd()
                clock = clock0
                throttle: list[str] = ["sw_power_cap"] if (busy and x > 0.97) else []  # normal at full load
                sr = sbr[k]
                if sr and rnd() < sr * interval:
                    sbe[k] += 1
                if ni in has_gpu_ov:
                    lst = ovg.get((ni, gi))
                    if lst:
                        gone = False
                        hot = ph in ("train", "hang", "ckpt")
                        for a, b, eff in Overlays.active(lst, t):
                            if eff.get("gone"):
                                gone = True
                                break
                            if "temp" in eff and hot:
                                temp = ramp(eff["temp"], t, a, b) + rnd()
                            if "throttle" in eff and (hot or ph == "init"):
                                throttle = list(eff["throttle"])
                            if "clock" in eff and hot:
                                clock = int(ramp(eff["clock"], t, a, b))
                                power *= 0.75
                            if "sbe_rate" in eff:
                                sbe[k] += int(eff["sbe_rate"] * interval + rnd())
                            if "nvl_rate" in eff:
                                nvl[k] += int(ramp(eff["nvl_rate"], t, a, b) * interval + rnd())
                            if "pcie_rate" in eff:
                                pcie[k] += int(ramp(eff["pcie_rate"], t, a, b) * interval + rnd())
                            if "dbe" in eff:
                                dbe[k] = max(dbe[k], eff["dbe"])
                            if "remap" in eff:
                                remap[k] = eff["remap"]
                            if "util" in eff:
                                util = eff["util"]
                            if "mem" in eff:
                                mem = int(ramp(eff["mem"], t, a, b))
                        if gone:
                            continue
                out.append((t, {"v": 1, "id": "", "ts": t, "kind": "gpu.sample", "source": src, "node": name,
                                "data": {"gpu": gi, "uuid": uuids[gi], "util_pct": util, "mem_used_mib": mem,
                                         "mem_total_mib": GPU_MEM_MIB, "temp_c": int(temp),
                                         "power_w": int(power * 10) / 10, "sm_clock_mhz": clock, "throttle": throttle,
                                         "ecc_sbe": sbe[k], "ecc_dbe": dbe[k], "nvlink_errors": nvl[k],
                                         "pcie_replay": pcie[k], "remapped_rows_pending": remap[k]}}))

    # ------------------------------------------------------------ hw.sensor / hw.sel
    def _hw(self, out: list, nodes: list[int], base: int, interval: int) -> None:
        rnd = self.rng.random
        c = self.c
        amb = 2.0 * diurnal(base)
        for ni in nodes:
            t = base + self.o_node[ni] + 500
            node = c.nodes[ni]
            down = self._node_down(ni, t)
            att = None if down else self.attempt_at(ni, t)
            busy = att is not None and self.phase(att, t) in ("train", "hang", "ckpt")
            inlet = 23 + amb + 1.5 * rnd()
            vals = [
                inlet,
                inlet + (24 if busy else 9) + 3 * rnd(),
                (68 if busy else 42) + 6 * rnd(),
                (66 if busy else 41) + 6 * rnd(),
                (11200 if busy else 6200) + 600 * rnd(),
                (11100 if busy else 6100) + 600 * rnd(),
                (7600 if busy else 2100) + 500 * rnd() if not down else 0.0,
                12.0 + 0.1 * rnd() - 0.05 if not down else 0.0,
            ]
            status = ["ok"] * len(vals)
            if rnd() < 0.002:  # benign transient: one fan tach glitch
                vals[4] = 2400.0
                status[4] = "warning"
            lst = self.ov.node.get(ni)
            if lst:
                for a, b, eff in Overlays.active(lst, t):
                    for sname, (v, st) in (eff.get("sensors") or {}).items():
                        for j, (sn, _, _) in enumerate(_HW_SENSORS):
                            if sn == sname:
                                vals[j] = ramp(v, t, a, b)
                                status[j] = st
            src = f"redfish@{node.bmc}"
            for j, (sn, ty, unit) in enumerate(_HW_SENSORS):
                out.append((t + j, {"v": 1, "id": "", "ts": t + j, "kind": "hw.sensor", "source": src, "node": node.name,
                                    "data": {"sensor": sn, "type": ty, "value": round(vals[j], 1), "unit": unit,
                                             "status": status[j]}}))
            if rnd() < self.sel_rate * interval / 3600:
                sev, st, mid, msg = _BENIGN_SEL[int(rnd() * len(_BENIGN_SEL))]
                msg = msg.format(d=f"{'ABCDEFGH'[int(rnd() * 8)]}{1 + int(rnd() * 4)}", p=1 + int(rnd() * 6))
                out.append((t + 20, {"v": 1, "id": "", "ts": t + 20, "kind": "hw.sel", "source": src, "node": node.name,
                                     "data": {"entry_id": str(1000 + int(rnd() * 9000)), "severity": sev,
                                              "sensor_type": st, "message_id": mid, "message": msg}}))

    # ------------------------------------------------------------ net.port (switch side, SNMP)
    def _port(self, out: list, ports: list[int], base: int, interval: int) -> None:
        rnd = self.rng.random
        c = self.c
        node_ov = self.ov.node
        port_ov = self.ov.port
        for pi in ports:
            p = c.ports[pi]
            t = base + self.o_port[pi]
            ctr = self.port_ctr[pi]
            down = False
            if p.node is not None:
                node = c.nodes[p.node]
                if p.node in node_ov and self._node_down(p.node, t):
                    down = True
                    busy = False
                else:
                    att = self.attempt_at(p.node, t)
                    ph = self.phase(att, t) if att is not None else "idle"
                    busy = ph in ("train", "ckpt")
                rate = (9e9 + 14e9 * rnd()) if busy else (2e4 + 3e4 * rnd())
            else:
                node = None
                rate = 4e10 * (0.3 + 0.6 * rnd())
            er = self.port_err_rate[pi]
            lst = port_ov.get(pi)
            if lst:
                for a, b, eff in Overlays.active(lst, t):
                    if eff.get("down"):
                        down = True
                    if "in_err_rate" in eff:
                        er += ramp(eff["in_err_rate"], t, a, b)
                    if "out_disc_rate" in eff:
                        ctr[3] += int(ramp(eff["out_disc_rate"], t, a, b) * interval * (0.7 + 0.6 * rnd()))
                    if "rate_mult" in eff:
                        rate *= eff["rate_mult"]
            if down:
                rate = 0.0
            else:
                if er:
                    ctr[0] += int(er * interval + rnd())
                ctr[4] += int(rate * interval * (0.95 + 0.1 * rnd()))
                ctr[5] += int(rate * interval * (0.95 + 0.1 * rnd()))
                if rnd() < 0.02:
                    ctr[3] += int(rnd() * 20)
            ev = {"v": 1, "id": "", "ts": t, "kind": "net.port", "source": f"snmp@{p.switch}"}
            if node is not None:
                ev["node"] = node.name
            ev["data"] = {"device": p.switch, "port": p.port, "oper_status": "down" if down else "up",
                          "speed_mbps": p.speed_mbps, "in_errors": ctr[0], "out_errors": ctr[1],
                          "in_discards": ctr[2], "out_discards": ctr[3], "in_octets": ctr[4], "out_octets": ctr[5]}
            out.append((t, ev))

    # ------------------------------------------------------------ net.rdma (host HCA counters)
    def _rdma_s(self, out: list, nodes: list[int], base: int, interval: int) -> None:
        rnd = self.rng.random
        c = self.c
        node_ov = self.ov.node
        reboots = self.ov.reboots
        rdma_ov = self.ov.rdma
        nics = c.nics_per_node
        for ni in nodes:
            t = base + self.o_node[ni] + 250
            if ni in node_ov and self._node_down(ni, t):
                continue
            if reboots:
                self._check_reboot(ni, t)
            node = c.nodes[ni]
            att = self.attempt_at(ni, t)
            ph = self.phase(att, t) if att is not None else "idle"
            busy = ph in ("train", "ckpt")
            src = f"node_exporter@{node.name}"
            for k in range(nics):
                ctr = self.rdma[ni * nics + k]
                rate = (9e9 + 14e9 * rnd()) / 4 if busy else 5e3
                ctr[0] += int(rate * interval)
                ctr[1] += int(rate * interval * (0.95 + 0.1 * rnd()))
                if busy:  # normal DCQCN activity under all-reduce load
                    cnp = int(interval * (20 + 60 * rnd()))
                    ctr[_RC["np_ecn_marked_roce_packets"]] += cnp
                    ctr[_RC["np_cnp_sent"]] += cnp
                    ctr[_RC["rp_cnp_handled"]] += int(interval * (20 + 60 * rnd()))
                    if rnd() < 0.01:
                        ctr[_RC["out_of_sequence"]] += 1
                lst = rdma_ov.get((ni, k)) if rdma_ov else None
                if lst:
                    for a, b, eff in Overlays.active(lst, t):
                        for cname, crate in (eff.get("rates") or {}).items():
                            ctr[_RC[cname]] += int(ramp(crate, t, a, b) * interval * (0.7 + 0.6 * rnd()))
                        for cname, inc in (eff.get("bump") or {}).items():
                            if not eff.get("_done_" + cname):
                                ctr[_RC[cname]] += inc
                                eff["_done_" + cname] = True
                out.append((t + k, {"v": 1, "id": "", "ts": t + k, "kind": "net.rdma", "source": src, "node": node.name,
                                    "data": {"device": f"mlx5_{k}", "port": 1,
                                             "counters": dict(zip(RDMA_COUNTERS, ctr))}}))

    # ------------------------------------------------------------ storage
    def _sto_eff(self, path: str, ni: int, t: int):
        lst = self.ov.storage.get(path)
        if not lst:
            return None
        res = None
        for a, b, eff in Overlays.active(lst, t):
            nodes = eff.get("nodes")
            if nodes is not None and ni not in nodes:
                continue
            res = (a, b, eff)
        return res

    def _storage(self, out: list, nodes: list[int], base: int, interval: int) -> None:
        rnd = self.rng.random
        c = self.c
        load = 0.6 + 0.6 * diurnal(base)
        for ni in nodes:
            t = base + self.o_node[ni] + 700
            if self._node_down(ni, t):
                continue
            node = c.nodes[ni]
            att = self.attempt_at(ni, t)
            ph = self.phase(att, t) if att is not None else "idle"
            src = f"node_exporter@{node.name}"
            for j, m in enumerate(node.mounts):
                rl = m.read_lat_ms * load * (0.8 + 0.5 * rnd())
                wl = m.write_lat_ms * load * (0.8 + 0.5 * rnd())
                riops = wiops = rmb = wmb = 0.0
                qd = 0.1 * rnd()
                if m.path == "/datasets" and ph in ("train", "init"):
                    rmb = 250 + 400 * rnd()
                    riops = rmb * 4
                    qd = 2 + 4 * rnd()
                elif m.path == "/ckpt" and ph == "ckpt":
                    wmb = 1200 + 2400 * rnd()
                    wiops = wmb * 2
                    qd = 16 + 30 * rnd()
                    wl *= 2.5
                elif m.path == "/ckpt" and ph == "io_wait":
                    wiops, wmb, qd = 3 * rnd(), 0.4 * rnd(), 48 + 16 * rnd()
                elif m.path == "/scratch" and ph == "train":
                    rmb, wmb = 40 * rnd(), 60 * rnd()
                    riops, wiops = rmb * 8, wmb * 8
                used = m.base_used_pct + self.used_drift[m.path] + (t - self.t0) / 3.6e6 * 0.05
                e = self._sto_eff(m.path, ni, t)
                if e is not None:
                    a, b, eff = e
                    if "lat_mult" in eff:
                        f = ramp(eff["lat_mult"], t, a, b)
                        rl *= f * (0.7 + 0.6 * rnd())
                        wl *= f * (0.7 + 0.6 * rnd())
                        tf = 1.0 / max(1.0, f ** 0.7)
                        rmb, wmb, riops, wiops = rmb * tf, wmb * tf, riops * tf, wiops * tf
                        qd = qd + min(64, f / 4)
                    if "used_pct" in eff:
                        used = ramp(eff["used_pct"], t, a, b)
                    if eff.get("state") in ("stale", "missing"):
                        continue  # the exporter cannot stat the mount
                data = {"path": m.path, "fs_type": m.fs_type, "read_iops": round(riops, 1),
                        "write_iops": round(wiops, 1), "read_mbps": round(rmb, 1), "write_mbps": round(wmb, 1),
                        "read_lat_ms": round(rl, 2), "write_lat_ms": round(wl, 2), "queue_depth": round(qd, 1),
                        "used_pct": round(min(100.0, max(0.0, used)), 2)}
                out.append((t + j, {"v": 1, "id": "", "ts": t + j, "kind": "storage.sample", "source": src,
                                    "node": node.name, "data": data}))

    def _mount(self, out: list, nodes: list[int], base: int, first: bool) -> None:
        c = self.c
        for ni in nodes:
            t = base + self.o_node[ni] + 900
            if self._node_down(ni, t):
                continue
            node = c.nodes[ni]
            for j, m in enumerate(node.mounts):
                state, err = "ok", None
                e = self._sto_eff(m.path, ni, t)
                if e is not None and e[2].get("state"):
                    state, err = e[2]["state"], e[2].get("error")
                out.append((t + j, {"v": 1, "id": "", "ts": t + j, "kind": "storage.mount",
                                    "source": f"node_exporter@{node.name}", "node": node.name,
                                    "data": {"path": m.path, "state": state, "error": err}}))
