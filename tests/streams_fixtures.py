"""Hand-made contract event fixtures for the streams tests (until/besides the simulator)."""

from __future__ import annotations

import random

T0 = 1_767_000_000_000  # 2025-12-29, well in the past


class Sim:
    """Tiny scenario builder: a cluster, jobs, telemetry, faults. Events are dicts."""

    def __init__(self, t0: int = T0) -> None:
        self.t0 = t0
        self.events: list[dict] = []
        self.n = 0

    def ev(self, kind: str, ts: int, data: dict, node: str | None = None, job: str | None = None,
           tenant: str | None = None) -> dict:
        self.n += 1
        e = {"v": 1, "id": f"ev-{self.n:06d}", "ts": self.t0 + ts, "kind": kind, "source": "test",
             "node": node, "job": job, "tenant": tenant, "data": data}
        self.events.append(e)
        return e

    # ---- building blocks
    def topology(self, node: str, switch: str, port: str, segment: str, paths=("/ckpt",)):
        self.ev("inventory.topology", 0, {"links": [{"nic": "mlx5_0", "switch": switch, "port": port, "segment": segment}],
                                          "storage": [{"path": p, "backend": "nfs", "server": "nfs01"} for p in paths]}, node=node)

    def versions(self, node: str, **v):
        self.ev("inventory.versions", 0, dict(v), node=node)

    def job(self, job: str, attempt: int, nodes: list[str], gpus_per_node: int, start: int, end: int | None,
            state: str = "failed", exit_code: int | None = 1, image: str = "repo/train:v1"):
        ranks = {str(i * gpus_per_node + g): n for i, n in enumerate(nodes) for g in range(gpus_per_node)}
        base = {"attempt": attempt, "nodes": nodes, "gpus": gpus_per_node * len(nodes), "ranks": ranks,
                "image": image, "name": "pretrain", "user": "alice", "start_ts": self.t0 + start}
        self.ev("sched.job", start, {**base, "state": "running"}, job=job, tenant="t1")
        if end is not None:
            self.ev("sched.job", end, {**base, "state": state, "exit_code": exit_code, "end_ts": self.t0 + end},
                    job=job, tenant="t1")

    def progress(self, job: str, nodes: list[str], gpus_per_node: int, t_from: int, t_to: int, every: int = 10_000,
                 step0: int = 0, step_time: float = 1.0, slow_rank: int | None = None):
        step = step0
        for t in range(t_from, t_to + 1, every):
            step += 10
            for r in range(len(nodes) * gpus_per_node):
                st = step_time * (2.5 if r == slow_rank else 1.0)
                self.ev("runtime.progress", t, {"rank": r, "step": step, "step_time_s": st}, job=job)
        return step

    def gpu_samples(self, node: str, gpus: int, t_from: int, t_to: int, every: int = 10_000, over=None):
        """``over(t, gpu) -> dict`` overrides fields of one sample."""
        for t in range(t_from, t_to + 1, every):
            for g in range(gpus):
                d = {"gpu": g, "uuid": f"GPU-{node}-{g}", "util_pct": 95.0, "mem_used_mib": 60000.0,
                     "mem_total_mib": 81920.0, "temp_c": 60.0, "power_w": 500.0, "sm_clock_mhz": 1980.0,
                     "throttle": [], "ecc_sbe": 0, "ecc_dbe": 0, "nvlink_errors": 0, "pcie_replay": 0}
                if over is not None:
                    d.update(over(t, g) or {})
                self.ev("gpu.sample", t, d, node=node)

    def port_samples(self, device: str, port: str, t_from: int, t_to: int, every: int = 10_000, node=None,
                     down_at: int | None = None):
        for t in range(t_from, t_to + 1, every):
            st = "down" if down_at is not None and t >= down_at else "up"
            self.ev("net.port", t, {"device": device, "port": port, "oper_status": st, "in_errors": 0, "out_errors": 0,
                                    "in_discards": 0, "out_discards": 0, "in_octets": t, "out_octets": t}, node=node)

    def storage_samples(self, node: str, path: str, t_from: int, t_to: int, every: int = 10_000, lat=2.0):
        for t in range(t_from, t_to + 1, every):
            self.ev("storage.sample", t, {"path": path, "fs_type": "nfs", "read_mbps": 500.0, "write_mbps": 200.0,
                                          "read_lat_ms": lat, "write_lat_ms": lat, "used_pct": 40.0}, node=node)

    def bmc(self, node: str, t_from: int, t_to: int, every: int = 30_000):
        for t in range(t_from, t_to + 1, every):
            self.ev("hw.sensor", t, {"sensor": "CPU1 Temp", "type": "temperature", "value": 55.0, "unit": "C",
                                     "status": "ok"}, node=node)

    def log(self, job: str, ts: int, message: str, rank: int | None = None, node: str | None = None,
            stream: str = "stderr"):
        self.ev("runtime.log", ts, {"rank": rank, "stream": stream, "message": message}, job=job, node=node)

    def ckpt(self, job: str, ts: int, step: int, phase: str = "succeeded", path: str = "/ckpt/run/step.pt", error=None):
        self.ev("runtime.checkpoint", ts, {"phase": phase, "step": step, "path": path, "error": error}, job=job)


def shuffled_within(events: list[dict], bound_ms: int, seed: int = 7, dup_share: float = 0.1) -> list[dict]:
    """Arrival order differing from event time by less than ``bound_ms``, with duplicates."""
    rnd = random.Random(seed)
    keyed = [(e["ts"] + rnd.uniform(0, bound_ms * 0.9), i, e) for i, e in enumerate(events)]
    keyed.sort()
    out = [e for _, _, e in keyed]
    for e in rnd.sample(events, int(len(events) * dup_share)):
        out.insert(rnd.randrange(len(out)), e)
    return out


WATCHDOG = ("[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE, "
            "NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600031 milliseconds before timing out.")
