"""A small, independent builder of contract-v1 events (not the simulator, not streams_fixtures).

Written from the contract (shared/spec/events.md) only: UUID-shaped ids, explicit
sources, site-style names given by each scenario, per-layer sampling intervals chosen
per scenario, optional layers, rank layouts other than "consecutive ranks per node",
and an arrival order that is not event-time order (bounded jitter, layers interleaved).
"""

from __future__ import annotations

import hashlib
import random
from typing import Callable, Iterable

SEC = 1_000
MIN = 60 * SEC
HOUR = 60 * MIN


class Attempt:
    def __init__(self, job: str, attempt: int, nodes: list[str], gpn: int, ranks: dict[str, str], start: int) -> None:
        self.job, self.attempt, self.nodes, self.gpn, self.ranks, self.start = job, attempt, nodes, gpn, ranks, start

    @property
    def gpus(self) -> int:
        return self.gpn * len(self.nodes)

    def ranks_on(self, node: str) -> list[int]:
        return sorted(int(r) for r, n in self.ranks.items() if n == node)

    def rank_of(self, node: str, local_gpu: int) -> int:
        return self.ranks_on(node)[local_gpu]


class Story:
    """Events of one failure story. Times are ms relative to ``t0``."""

    def __init__(self, name: str, t0: int = 1_772_539_200_000, seed: int = 0) -> None:
        self.name = name
        self.t0 = t0
        self.rnd = random.Random(f"{name}/{seed}")
        self.events: list[dict] = []
        self._n = 0

    # ------------------------------------------------------------ envelope
    def _id(self) -> str:
        self._n += 1
        h = hashlib.sha1(f"{self.name}:{self._n}".encode()).hexdigest()
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"

    def emit(self, kind: str, ts: int, data: dict, *, node: str | None = None, job: str | None = None,
             source: str = "agent", tenant: str | None = None) -> dict:
        e = {"v": 1, "id": self._id(), "ts": self.t0 + int(ts), "kind": kind, "source": source,
             "node": node, "job": job, "tenant": tenant, "data": data}
        self.events.append(e)
        return e

    # ------------------------------------------------------------ inventory
    def attach(self, node: str, links: Iterable[tuple[str, str, str, str | None]],
               mounts: Iterable[tuple[str, str, str | None]] = (), ts: int = -2 * HOUR) -> None:
        self.emit("inventory.topology", ts, {
            "links": [{"nic": n, "switch": s, "port": p, "segment": g} for n, s, p, g in links],
            "storage": [{"path": p, "backend": b, "server": sv} for p, b, sv in mounts]},
            node=node, source=f"inventory@{node}")

    def stack(self, node: str, ts: int = -2 * HOUR, **versions: str) -> None:
        self.emit("inventory.versions", ts, dict(versions), node=node, source=f"inventory@{node}")

    def change(self, node: str, ts: int, component: str, frm: str | None, to: str, actor: str = "ansible",
               ticket: str | None = None) -> None:
        self.emit("inventory.change", ts, {"component": component, "from": frm, "to": to, "actor": actor,
                                           "ticket": ticket}, node=node, source="cmdb")

    # ------------------------------------------------------------ scheduler
    def run(self, job: str, attempt: int, nodes: list[str], gpn: int, start: int, end: int | None = None,
            state: str = "failed", *, image: str | None = "nvcr.io/nvidia/pytorch:24.05-py3",
            exit_code: int | None = 1, signal: int | None = None, reason: str | None = None,
            layout: str = "blocked", tenant: str = "research", pending_for: int = 20 * SEC,
            source: str = "slurmctld") -> Attempt:
        if layout == "blocked":
            ranks = {str(i * gpn + g): n for i, n in enumerate(nodes) for g in range(gpn)}
        else:  # round robin: rank r on node r % len(nodes)
            ranks = {str(r): nodes[r % len(nodes)] for r in range(gpn * len(nodes))}
        base = {"attempt": attempt, "nodes": list(nodes), "gpus": gpn * len(nodes), "ranks": ranks,
                "image": image, "name": f"{job}-train", "user": "mlops"}
        self.emit("sched.job", start - pending_for, {**base, "state": "pending", "nodes": [], "ranks": {}},
                  job=job, tenant=tenant, source=source)
        self.emit("sched.job", start, {**base, "state": "running", "start_ts": self.t0 + start},
                  job=job, tenant=tenant, source=source)
        if end is not None:
            self.end(job, attempt, nodes, gpn, ranks, start, end, state, image=image, exit_code=exit_code,
                     signal=signal, reason=reason, tenant=tenant, source=source)
        return Attempt(job, attempt, list(nodes), gpn, ranks, start)

    def end(self, job, attempt, nodes, gpn, ranks, start, end, state, *, image=None, exit_code=None, signal=None,
            reason=None, tenant="research", source="slurmctld") -> None:
        self.emit("sched.job", end, {"attempt": attempt, "nodes": list(nodes), "gpus": gpn * len(nodes),
                                     "ranks": ranks, "image": image, "name": f"{job}-train", "user": "mlops",
                                     "state": state, "start_ts": self.t0 + start, "end_ts": self.t0 + end,
                                     "exit_code": exit_code, "signal": signal, "reason": reason},
                  job=job, tenant=tenant, source=source)

    def finish_attempt(self, a: Attempt, end: int, state: str, **kw) -> None:
        self.end(a.job, a.attempt, a.nodes, a.gpn, a.ranks, a.start, end, state, **kw)

    def node_state(self, node: str, ts: int, state: str, reason: str | None = None) -> None:
        self.emit("sched.node", ts, {"state": state, "reason": reason}, node=node, source="slurmctld")

    # ------------------------------------------------------------ runtime
    def heartbeat(self, a: Attempt, t_from: int, t_to: int, every: int, *, ranks: str = "all",
                  step_time: float = 1.2, step0: int = 0, steps_per_beat: int = 10,
                  rank_time: Callable[[int, int], float] | None = None) -> int:
        """Progress. ``ranks``: "all" (every rank), "zero" (rank 0 only), "none" (rank null)."""
        step = step0
        t = t_from
        while t <= t_to:
            step += steps_per_beat
            rs: list[int | None] = (list(range(a.gpus)) if ranks == "all" else [0] if ranks == "zero" else [None])
            for r in rs:
                st = rank_time(r, t) if (rank_time is not None and r is not None) else step_time
                self.emit("runtime.progress", t + self.rnd.randrange(0, 400), {
                    "rank": r, "step": step, "step_time_s": round(st * (1 + self.rnd.uniform(-0.03, 0.03)), 3),
                    "samples_per_s": None}, job=a.job, source="sdk")
            t += every
        return step

    def ckpt(self, a: Attempt, ts: int, step: int, path: str, phase: str = "succeeded", *, error: str | None = None,
             start_offset: int = 30 * SEC) -> None:
        if phase in ("succeeded", "failed"):
            self.emit("runtime.checkpoint", ts - start_offset, {"phase": "started", "step": step, "path": path},
                      job=a.job, source="sdk")
        self.emit("runtime.checkpoint", ts, {"phase": phase, "step": step, "path": path, "bytes": 7 << 30,
                                             "duration_s": start_offset / 1000, "error": error},
                  job=a.job, source="sdk")

    def say(self, a: Attempt, ts: int, message: str, *, rank: int | None = None, node: str | None = None,
            stream: str = "stderr") -> None:
        self.emit("runtime.log", ts, {"rank": rank, "stream": stream, "message": message}, job=a.job,
                  node=node, source="logs")

    def container(self, a: Attempt, ts: int, node: str, event: str, exit_code: int | None = None) -> None:
        self.emit("runtime.container", ts, {"container": f"{a.job}-worker", "event": event, "exit_code": exit_code},
                  job=a.job, node=node, source="containerd")

    # ------------------------------------------------------------ telemetry
    def gpus(self, node: str, n: int, t_from: int, t_to: int, every: int,
             tweak: Callable[[int, int], dict | None] | None = None, total_mib: float = 97_871.0) -> None:
        ecc = {g: self.rnd.randrange(0, 40) for g in range(n)}
        t = t_from
        while t <= t_to:
            for g in range(n):
                ecc[g] += self.rnd.randrange(0, 3)
                d = {"gpu": g, "uuid": f"GPU-{hashlib.md5(f'{node}{g}'.encode()).hexdigest()[:18]}",
                     "util_pct": float(self.rnd.randrange(88, 100)), "mem_used_mib": 71_000.0 + self.rnd.randrange(0, 900),
                     "mem_total_mib": total_mib, "temp_c": float(self.rnd.randrange(52, 68)),
                     "power_w": float(self.rnd.randrange(520, 690)), "sm_clock_mhz": 1_980.0,
                     "throttle": ["sw_power_cap"] if self.rnd.random() < 0.2 else [],
                     "ecc_sbe": ecc[g], "ecc_dbe": 0, "nvlink_errors": 0, "pcie_replay": 0}
                if tweak is not None:
                    d.update(tweak(t, g) or {})
                self.emit("gpu.sample", t + g * 7, d, node=node, source=f"dcgm@{node}")
            t += every

    def switch_port(self, switch: str, port: str, t_from: int, t_to: int, every: int, *, node: str | None = None,
                    tweak: Callable[[int], dict | None] | None = None, noise_errors: int = 0) -> None:
        err = disc = 0
        octets = 10**9
        t = t_from
        while t <= t_to:
            err += self.rnd.randrange(0, noise_errors + 1)
            disc += self.rnd.randrange(0, 20)
            octets += 10**9
            d = {"device": switch, "port": port, "oper_status": "up", "speed_mbps": 400_000, "in_errors": err,
                 "out_errors": 0, "in_discards": disc, "out_discards": 0, "in_octets": octets, "out_octets": octets}
            if tweak is not None:
                extra = tweak(t) or {}
                d.update(extra)
                err = d["in_errors"]
                disc = d["in_discards"]
            self.emit("net.port", t, d, node=node, source=f"snmp@{switch}")
            t += every

    def link(self, switch: str, port: str, ts: int, state: str, node: str | None = None) -> None:
        self.emit("net.link", ts, {"device": switch, "port": port, "state": state}, node=node, source=f"snmptrap@{switch}")

    def hca(self, node: str, device: str, t_from: int, t_to: int, every: int,
            tweak: Callable[[int, dict], None] | None = None) -> None:
        c = {"link_downed": 0, "symbol_error": 0, "port_rcv_errors": 0, "local_ack_timeout_err": 0,
             "out_of_sequence": 0, "packet_seq_err": 0, "np_cnp_sent": 0, "rp_cnp_handled": 0,
             "np_ecn_marked_roce_packets": 0, "port_xmit_data": 0}
        t = t_from
        while t <= t_to:
            dt = every / 1000
            c["np_cnp_sent"] += int(self.rnd.uniform(20, 60) * dt)
            c["rp_cnp_handled"] += int(self.rnd.uniform(20, 60) * dt)
            c["out_of_sequence"] += self.rnd.randrange(0, 3)
            c["port_xmit_data"] += int(3e9 * dt)
            if tweak is not None:
                tweak(t, c)
            self.emit("net.rdma", t, {"device": device, "port": 1, "counters": dict(c)}, node=node, source=f"rdma@{node}")
            t += every

    def mount(self, node: str, path: str, t_from: int, t_to: int, every: int, *, fs: str = "nfs4",
              tweak: Callable[[int], dict | None] | None = None, used: float = 61.0) -> None:
        t = t_from
        while t <= t_to:
            lat = round(self.rnd.uniform(1.2, 3.5), 2)
            d = {"path": path, "fs_type": fs, "read_iops": 900.0, "write_iops": 300.0, "read_mbps": 850.0,
                 "write_mbps": 240.0, "read_lat_ms": lat, "write_lat_ms": lat * 1.4, "queue_depth": 2.0,
                 "used_pct": used}
            if tweak is not None:
                d.update(tweak(t) or {})
            self.emit("storage.sample", t, d, node=node, source=f"statfs@{node}")
            t += every

    def mount_state(self, node: str, path: str, ts: int, state: str, error: str | None = None) -> None:
        self.emit("storage.mount", ts, {"path": path, "state": state, "error": error}, node=node, source=f"statfs@{node}")

    def bmc(self, node: str, t_from: int, t_to: int, every: int) -> None:
        t = t_from
        while t <= t_to:
            for sensor, typ, val, unit in (("Inlet Temp", "temperature", 24.0, "C"), ("PSU2 Input", "power", 1_450.0, "W"),
                                           ("Fan3A", "fan", 9_800.0, "RPM")):
                self.emit("hw.sensor", t, {"sensor": sensor, "type": typ, "value": val + self.rnd.uniform(-1, 1),
                                           "unit": unit, "status": "ok"}, node=node, source=f"redfish@{node}-bmc")
            t += every

    def sel(self, node: str, ts: int, severity: str, sensor_type: str, message: str, message_id: str | None = None) -> None:
        self.emit("hw.sel", ts, {"entry_id": f"{abs(hash((node, ts))) % 10**6}", "severity": severity,
                                 "sensor_type": sensor_type, "message_id": message_id, "message": message},
                  node=node, source=f"redfish@{node}-bmc")

    def xid(self, node: str, ts: int, gpu: int, xid: int, text: str, pid: int | None = None,
            pci: str = "0000:9a:00") -> None:
        self.emit("gpu.xid", ts, {"gpu": gpu, "pci": pci, "xid": xid, "pid": pid,
                                  "message": f"NVRM: Xid (PCI:{pci}): {xid}, pid={pid or 'N/A'}, {text}"},
                  node=node, source=f"kmsg@{node}")

    # ------------------------------------------------------------ output
    def arrival(self, jitter_ms: int = 4_000, dup_share: float = 0.03) -> list[dict]:
        """Arrival order: event time plus a bounded random delay, a few duplicates."""
        keyed = sorted(((e["ts"] + self.rnd.uniform(0, jitter_ms), i, e) for i, e in enumerate(self.events)))
        out = [e for _, _, e in keyed]
        for e in self.rnd.sample(self.events, int(len(self.events) * dup_share)):
            out.insert(self.rnd.randrange(len(out)), e)
        return out


# ------------------------------------------------------------------ real log lines
def nccl_watchdog(rank: int, seq: int = 18_233, op: str = "_ALLGATHER_BASE", timeout_ms: int = 1_800_000) -> str:
    return (f"[rank{rank}]:[E ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective operation timeout: "
            f"WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=131334144, NumelOut=2101346304, Timeout(ms)={timeout_ms}) "
            f"ran for {timeout_ms + 47} milliseconds before timing out.")


def traceback(exc: str, frames: tuple[str, ...] = ("train.py", "model/loop.py")) -> str:
    body = "".join(f'  File "/workspace/{f}", line {100 + 17 * i}, in step\n    out = fn(batch)\n' for i, f in enumerate(frames))
    return f"Traceback (most recent call last):\n{body}{exc}"


def child_failed(rank: int, node: str, exitcode: int = 1) -> str:
    return ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
            "============================================================\n"
            "train.py FAILED\n"
            "------------------------------------------------------------\n"
            f"Root Cause (first observed failure):\n[0]:\n  time      : 2026-03-03_12:00:00\n  host      : {node}\n"
            f"  rank      : {rank} (local_rank: 0)\n  exitcode  : {exitcode} (pid: 41123)")
