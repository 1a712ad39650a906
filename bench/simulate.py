"""Simulator throughput at fleet scale: events/s for a 2,000-node x 8-GPU fleet, one hour.

    .venv/bin/python bench/simulate.py                   # full hour (several minutes)
    .venv/bin/python bench/simulate.py --minutes 5       # quick run
    .venv/bin/python bench/simulate.py --nodes 256 --minutes 10 --scenario healthy

Prints the generation rate (events/s, encoded JSON lines) beside a baseline measured in
the same pass: bare ``orjson.dumps`` of the very same dicts (the floor any Python producer
pays), plus the plan time and the peak RSS, which must stay flat (streaming generator).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.results import record  # noqa: E402
from faultline.producers.simulate import Intervals, Simulation  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", default="mixed")
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--minutes", type=float, default=60.0, help="simulated minutes (default 60)")
    ap.add_argument("--gpu-interval", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sample", type=int, default=50_000, help="dicts kept for the baseline (default 50,000)")
    args = ap.parse_args()

    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    sim = Simulation(args.scenario, args.seed, nodes=args.nodes, gpus_per_node=args.gpus_per_node,
                     hours=args.minutes / 60, intervals=Intervals(gpu=args.gpu_interval))
    t = time.perf_counter()
    plan = sim.plan
    t_plan = time.perf_counter() - t
    rss_plan = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    # pass 1: the simulator end to end (generation, merge, ids, orjson encoding)
    n = nbytes = 0
    sample: list[dict] = []
    c0, w0 = time.process_time(), time.perf_counter()
    for ev in sim.records():
        b = orjson.dumps(ev)
        n += 1
        nbytes += len(b)
        if len(sample) < args.sample and n % 7 == 0:
            sample.append(ev)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # baseline: bare orjson.dumps of the same dicts (a sample held in memory), same process
    dumps = orjson.dumps
    reps = max(1, 400_000 // max(1, len(sample)))
    c1 = time.process_time()
    for _ in range(reps):
        for ev in sample:
            dumps(ev)
    base_cpu = (time.process_time() - c1) / (reps * max(1, len(sample)))
    sim_rate = n / max(cpu, 1e-9)
    base_rate = 1 / max(base_cpu, 1e-12)
    labels = sim.labels()
    print(f"fleet           : {args.nodes} nodes x {args.gpus_per_node} GPUs, {args.minutes:g} simulated min, "
          f"scenario {args.scenario}, gpu interval {args.gpu_interval}s")
    print(f"plan            : {t_plan:.2f} s ({len(plan.jobs)} jobs, {len(plan.attempts)} attempts, "
          f"{len(labels['interruptions'])} interruptions)")
    print(f"events          : {n:,} ({nbytes / 1e6:,.0f} MB JSON, {nbytes / max(n, 1):.0f} B/event)")
    print(f"simulate        : {sim_rate:,.0f} events/s of CPU ({cpu:.1f} s CPU, {wall:.1f} s wall on a shared box; "
          f"generation + merge + ids + orjson encoding)")
    print(f"baseline        : {base_rate:,.0f} events/s of CPU (bare orjson.dumps of {len(sample):,} of the same dicts)")
    print(f"ratio           : simulate / baseline = {sim_rate / base_rate:.3f} "
          f"(encoding alone is {100 * sim_rate / base_rate:.0f}% of the simulator's CPU)")
    print(f"per sim-hour    : {n * 60 / args.minutes:,.0f} events, {n * 60 / args.minutes / sim_rate:,.0f} s of CPU to generate")
    print(f"peak RSS        : {rss / 1024:.0f} MiB (before plan {rss0 / 1024:.0f} MiB, after plan {rss_plan / 1024:.0f} MiB)")
    record("simulate_events_per_s", sim_rate, "events per CPU-second", baseline="bare orjson.dumps of the same dicts, same run",
           baseline_value=base_rate, note=f"{args.nodes} nodes x {args.gpus_per_node} GPUs, {args.minutes:g} simulated min; "
                                          f"peak RSS {rss / 1024:.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
