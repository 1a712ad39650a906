"""Streams benchmark, part 1: offline diagnose throughput (events/s on one core).

Baseline measured in the same run: bare contract decode (``schemas.decode``) of the same
corpus. The corpus is the simulator's output when ``--file`` is given (e.g. from
``faultline simulate``), else a built-in synthetic fleet: N nodes x 8 GPUs with GPU, BMC,
switch-port, RDMA and storage telemetry every 10-30 s, jobs with per-rank progress, and a
few faults (mostly samples that only update counters, like real traffic).

    .venv/bin/python bench/streams.py [--nodes 64] [--minutes 60] [--file events.jsonl | --sim mixed]
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import sys
import time

import orjson

T0 = 1_767_000_000_000


def synth(nodes: int, minutes: int, seed: int = 1) -> list[bytes]:
    rnd = random.Random(seed)
    evs: list[dict] = []
    n = 0

    def add(kind, ts, data, node=None, job=None):
        nonlocal n
        n += 1
        evs.append({"v": 1, "id": f"b{n:09d}", "ts": T0 + ts, "kind": kind, "source": "bench", "node": node,
                    "job": job, "data": data})

    names = [f"gpu-{i:03d}" for i in range(nodes)]
    for i, nd in enumerate(names):
        add("inventory.topology", 0, {"links": [{"nic": f"mlx5_{k}", "switch": f"leaf{i // 32:02d}-r{k}",
                                                  "port": f"Eth1/{i % 32 + 1}", "segment": f"leaf{i // 32:02d}-r{k}"}
                                                 for k in range(8)],
                                       "storage": [{"path": "/ckpt", "backend": "nfs", "server": "nfs01"}]}, node=nd)
        add("inventory.versions", 0, {"driver": "570.86.10", "nccl": "2.21.5"}, node=nd)
    end = minutes * 60_000
    # jobs of 4 nodes, one fails with an XID
    jobs = []
    for j in range(nodes // 4):
        jn = names[j * 4:(j + 1) * 4]
        job = str(1000 + j)
        jobs.append((job, jn))
        ranks = {str(k * 8 + g): nd for k, nd in enumerate(jn) for g in range(8)}
        base = {"attempt": 0, "nodes": jn, "gpus": 32, "ranks": ranks, "start_ts": T0 + 60_000}
        add("sched.job", 60_000, {**base, "state": "running"}, job=job)
        fail = j == 0
        if fail:
            add("gpu.xid", end // 2, {"gpu": 3, "xid": 79, "message": "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."}, node=jn[1])
            add("sched.job", end // 2 + 600_000, {**base, "state": "failed", "exit_code": 1, "end_ts": T0 + end // 2 + 600_000}, job=job)
    ctr = {}
    for t in range(0, end, 10_000):
        for i, nd in enumerate(names):
            for g in range(8):
                k = (i, g)
                c = ctr.get(k, 0) + (1 if rnd.random() < 0.001 else 0)
                ctr[k] = c
                add("gpu.sample", t + i, {"gpu": g, "uuid": f"GPU-{i}-{g}", "util_pct": 90 + 10 * rnd.random(),
                                          "mem_used_mib": 60000.0, "mem_total_mib": 81559.0, "temp_c": 60.0,
                                          "power_w": 600.0, "sm_clock_mhz": 1980.0, "throttle": [], "ecc_sbe": c,
                                          "ecc_dbe": 0, "nvlink_errors": 0, "pcie_replay": 0}, node=nd)
            if t % 30_000 == 0:
                add("hw.sensor", t + i + 1, {"sensor": "CPU1 Temp", "type": "temperature", "value": 55.0, "unit": "C",
                                             "status": "ok"}, node=nd)
                for k in range(8):
                    add("net.port", t + i + 2, {"device": f"leaf{i // 32:02d}-r{k}", "port": f"Eth1/{i % 32 + 1}",
                                                "oper_status": "up", "in_errors": 0, "out_errors": 0, "in_discards": 0,
                                                "out_discards": 0, "in_octets": t * 1000, "out_octets": t * 1000}, node=nd)
                    add("net.rdma", t + i + 3, {"device": f"mlx5_{k}", "port": 1,
                                                "counters": {"port_xmit_data": t * 100, "port_rcv_data": t * 100,
                                                             "np_cnp_sent": t // 100, "out_of_sequence": 0}}, node=nd)
                add("storage.sample", t + i + 4, {"path": "/ckpt", "fs_type": "nfs", "read_mbps": 100.0,
                                                  "write_mbps": 50.0, "read_lat_ms": 2.0 + rnd.random(),
                                                  "write_lat_ms": 3.0 + rnd.random(), "used_pct": 40.0}, node=nd)
        if t % 20_000 == 0 and t >= 70_000:
            for job, jn in jobs:
                if job == "1000" and t > end // 2 - 20_000:
                    continue
                for nd_i, nd in enumerate(jn):
                    add("runtime.progress", t + 5, {"rank": nd_i * 8, "step": t // 1000, "step_time_s": 1.0}, job=job)
    evs.sort(key=lambda e: e["ts"])
    return [orjson.dumps(e) for e in evs]


def accuracy(seeds: list[int], **kw) -> None:
    """Every simulator scenario through the Engine; a per-category table (markdown)."""
    from collections import defaultdict

    from faultline.producers.simulate import scenario_names, simulate
    from faultline.streams.offline import OfflinePipeline

    rows: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])  # n, cat, cat+comp, ckpt, lost
    fp = healthy = 0
    for name in scenario_names():
        for seed in seeds:
            lines, labels = simulate(name, seed=seed, **kw)
            pipe = OfflinePipeline.from_settings(findings=False)   # what `faultline diagnose` runs
            for i in range(0, len(lines), 8192):
                pipe.process(lines[i:i + 8192])
            pipe.finish()
            incs = {(i.job, i.attempt): i for i in pipe.incidents()}
            labeled = set()
            for lab in labels["interruptions"]:
                key = (lab["job"], lab["attempt"])
                labeled.add(key)
                r = rows[lab["category"]]
                r[0] += 1
                inc = incs.get(key)
                if inc is None:
                    continue
                r[1] += inc.root_cause.category == lab["category"]
                r[2] += (inc.root_cause.category, inc.root_cause.component) == (lab["category"], lab["component"])
                r[3] += (inc.last_checkpoint.step if inc.last_checkpoint else None) == lab["last_checkpoint_step"]
                want = lab["lost_gpu_hours"]
                r[4] += abs(inc.lost_gpu_hours - want) <= 0.02 * max(want, 1e-9) + 1e-6
            healthy += len(labels["healthy"])
            fp += sum(1 for k in incs if k not in labeled)
            print(f"  {name} seed {seed}: {len(labels['interruptions'])} interruptions, {len(incs)} incidents", flush=True)
    print("\n| category | interruptions | category right | category + component right | checkpoint step right | lost GPU-h within 2 % |")
    print("|---|---|---|---|---|---|")
    tot = [0] * 5
    for cat in sorted(rows):
        r = rows[cat]
        tot = [a + b for a, b in zip(tot, r)]
        print(f"| {cat} | {r[0]} | " + " | ".join(f"{v}/{r[0]} ({100 * v / r[0]:.0f} %)" for v in r[1:]) + " |")
    print(f"| **all** | {tot[0]} | " + " | ".join(f"{v}/{tot[0]} ({100 * v / max(1, tot[0]):.0f} %)" for v in tot[1:]) + " |")
    print(f"\nincidents for healthy attempts: {fp} (of {healthy} healthy attempts)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--minutes", type=int, default=60)
    ap.add_argument("--file", help="a JSON-lines corpus (.jsonl or .jsonl.zst) instead of the synthetic one")
    ap.add_argument("--sim", metavar="SCENARIO",
                    help="the simulator's output for SCENARIO (seed 2, first --limit events) instead of the synthetic "
                         "corpus: heavier events (every RDMA counter, sensors, storage, logs)")
    ap.add_argument("--limit", type=int, default=400_000, help="events taken from --sim (default 400,000)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--accuracy", action="store_true", help="run every simulator scenario and print the per-category table")
    ap.add_argument("--seeds", default="1", help="comma-separated seeds for --accuracy")
    ap.add_argument("--small", action="store_true", help="--accuracy on 8 nodes with 30 s GPU samples (as the tests)")
    args = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if args.accuracy:
        kw = {}
        if args.small:
            from faultline.producers.simulate import Intervals

            kw = {"nodes": 8, "intervals": Intervals(gpu=30)}
        accuracy([int(x) for x in args.seeds.split(",")], **kw)
        return 0
    from faultline.schemas.codec import ContractError, decode, now_ms
    from faultline.streams.offline import OfflinePipeline

    if args.file:
        from faultline.commands.diagnose import _lines, _open

        fh = _open(args.file)
        lines = [ln for batch in _lines(fh) for ln in batch if ln.strip()]
        src = args.file
    elif args.sim:
        from faultline.producers.simulate import simulate

        lines = simulate(args.sim, seed=2)[0][: args.limit]
        src = f"simulator {args.sim} seed 2, first {len(lines)} events"
    else:
        lines = synth(args.nodes, args.minutes)
        src = f"synthetic {args.nodes} nodes x {args.minutes} min"
    n = len(lines)
    print(f"corpus: {src}: {n} events, {sum(map(len, lines)) / 1e6:.1f} MB")

    def bare() -> int:
        """Decode every line; a line that is not a valid event is counted (the engine counts it
        as invalid and goes on), not a crash."""
        now = now_ms()
        bad = 0
        for ln in lines:
            try:
                decode(ln, now=now)
            except ContractError:
                bad += 1
        return bad

    invalid = bare()
    if invalid:
        print(f"invalid lines: {invalid} of {n} (not valid contract events: decoded as errors in both runs)")

    def diagnose() -> None:
        pipe = OfflinePipeline.from_settings(findings=False)   # what `faultline diagnose` runs
        for i in range(0, n, 4096):
            pipe.process(lines[i:i + 4096])
        pipe.finish()
        diagnose.incidents = len(pipe.incidents())  # type: ignore[attr-defined]
        diagnose.invalid = pipe.stats.invalid  # type: ignore[attr-defined]

    res = {}
    for name, fn in (("decode only (baseline)", bare), ("diagnose (decode+detect+correlate)", diagnose)):
        best = None
        for _ in range(args.repeat):
            gc.collect()
            t = time.perf_counter()
            fn()
            dt = time.perf_counter() - t
            best = dt if best is None else min(best, dt)
        res[name] = n / best
        print(f"{name:38} {n / best:>12,.0f} events/s  ({best:.2f} s best of {args.repeat})")
    base, full = res["decode only (baseline)"], res["diagnose (decode+detect+correlate)"]
    print(f"ratio diagnose / bare decode: {full / base:.2f}  (target >= 100,000 events/s on one core: "
          f"{'met' if full >= 100_000 else 'NOT met'}); incidents found: {getattr(diagnose, 'incidents', '?')}"
          + (f"; invalid lines: {invalid} (engine counted {getattr(diagnose, 'invalid', '?')})" if invalid else ""))
    from bench.results import record  # a no-op unless FAULTLINE_BENCH_RESULTS is set (make bench)

    record("diagnose_events_per_s", full, "events/s", baseline="schemas.decode of the same corpus (one core)",
           baseline_value=base)
    return 0


if __name__ == "__main__":
    sys.exit(main())
