"""Scale model: the event rates a real fleet produces and what it needs, from bench/results.json.

    .venv/bin/python bench/scale.py [--results bench/results.json]

Prints the Markdown tables of docs/scale.md: every input is a named constant below (what a
collector emits per node and how often: the product's defaults), every capacity figure is
read from results.json (measured by `make bench` on this machine) or is a named assumption
(``NOT MEASURED``). Not a bench: bench/run.py does not run it.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent

GPUS_PER_NODE = 8
#: (stream, events per node per second, how that follows from the defaults)
INPUTS: list[tuple[str, float, str]] = [
    ("gpu.sample", 8 / 10, "8 GPUs, one sample each every 10 s (collect node nvml interval)"),
    ("net.rdma", 8 / 10, "8 RDMA NIC ports (one per GPU, rail-optimised), every 10 s (rdma collector)"),
    ("net.port", 16 / 30, "2 switch ports per NIC port (leaf downlink + its share of uplinks), SNMP every 30 s"),
    ("storage.sample", 2 / 10, "2 mounts (checkpoint + data), every 10 s"),
    ("storage.mount", 2 / 300, "2 mounts, state every 300 s"),
    ("hw.sensor", 40 / 60, "40 BMC sensors, every 60 s"),
    ("runtime.progress", 8 / 1, "8 ranks, one heartbeat each per second (faultline.sdk progress_every_s=1)"),
    ("runtime.log", 1 / 60, "interesting lines only: ~1 per node per minute when healthy"),
    ("sched.job / inventory / xid", 1 / 600, "job state changes, inventory, XIDs: rare"),
]
#: a log storm: every rank of one job prints this many lines a second for STORM_S seconds
STORM_LINES_PER_RANK_S = 20
STORM_S = 10
STORM_JOB_SHARE = 0.25          # the storming job holds this share of the fleet's GPUs
EVENT_BYTES = 360               # average contract event (issue 19's bare-drain corpus)
FLEETS = (1_000, 16_000, 100_000, 1_000_000)
HEADROOM = 2.0                  # provision for twice the steady rate (catch-up after a restart, bursts)
#: NOT MEASURED here: one Kafka broker's sustained ingress with replication 3 on commodity
#: servers (public Kafka guidance is 50-100+ MB/s per broker for produce with RF 3)
BROKER_INGRESS_MB_S = 75
BROKER_PARTITIONS_MAX = 4000    # NOT MEASURED: a conservative partitions-per-broker ceiling (KRaft)


def per_node() -> float:
    return sum(r for _, r, _ in INPUTS)


def figures(path: Path) -> dict[str, dict]:
    doc = orjson.loads(path.read_bytes())
    return {f["name"]: f for f in doc["figures"]}, doc["machine"]


def plan(gpus: int, worker_cpu_rate: float, sink_rows_s: float, rows_per_event: float) -> dict[str, float]:
    nodes = gpus / GPUS_PER_NODE
    rate = nodes * per_node()
    storm = gpus * STORM_JOB_SHARE * STORM_LINES_PER_RANK_S
    workers = math.ceil(rate * HEADROOM / worker_cpu_rate)
    partitions = max(6, 2 ** math.ceil(math.log2(max(1, 2 * workers))))
    mb_s = rate * EVENT_BYTES / 1e6
    brokers = max(3, math.ceil(mb_s * HEADROOM / BROKER_INGRESS_MB_S),
                  math.ceil(partitions * 9 * 3 / BROKER_PARTITIONS_MAX))   # 9 topics x RF 3
    shards = math.ceil(rate * rows_per_event * HEADROOM / sink_rows_s)
    return {"gpus": gpus, "nodes": nodes, "rate": rate, "storm": storm, "mb_s": mb_s, "workers": workers,
            "partitions": partitions, "brokers": brokers, "shards": shards,
            "storm_drain_s": storm * STORM_S / max(1.0, workers * worker_cpu_rate - rate)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default=str(ROOT / "bench" / "results.json"))
    a = ap.parse_args(argv)
    figs, m = figures(Path(a.results))
    w = figs["worker_events_per_cpu_s"]["value"]
    sink = figs["sink_rows_per_s"]
    rows_per_event = figs["sink_events_per_s"]["value"] and sink["value"] / figs["sink_events_per_s"]["value"]
    print("| stream | events per node (8 GPUs) per s | input |\n|---|---:|---|")
    for name, r, why in INPUTS:
        print(f"| {name} | {r:.3f} | {why} |")
    print(f"| **total** | **{per_node():.2f}** | {per_node() / GPUS_PER_NODE:.2f} per GPU |\n")
    print(f"Capacity inputs from `bench/results.json` ({m.get('started_utc')}, load {m['load_before']} -> "
          f"{m['load_after']}): one worker {w:,.0f} events per CPU-second "
          f"(bare drain {figs['worker_events_per_cpu_s']['baseline_value']:,.0f}); "
          f"sink {sink['value']:,.0f} stored rows/s per chDB process, {rows_per_event:.1f} stored rows per event.\n")
    print("| GPUs | nodes | steady events/s | MB/s in | log storm events/s | workers (1 core each) | partitions "
          "| brokers | ClickHouse shards | storm drained in |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for g in FLEETS:
        p = plan(g, w, sink["value"], rows_per_event)
        print(f"| {g:,} | {p['nodes']:,.0f} | {p['rate']:,.0f} | {p['mb_s']:,.1f} | {p['storm']:,.0f} | "
              f"{p['workers']:,} | {p['partitions']:,} | {p['brokers']:,} | {p['shards']:,} | {p['storm_drain_s']:,.0f} s |")
    print()
    print_scaling(figs)
    print()
    print_memory(figs)
    return 0


def _v(figs: dict, name: str) -> float | None:
    f = figs.get(name)
    return f and f["value"]


def print_scaling(figs: dict) -> None:
    """1 / 2 / 4 workers of the same run: wall rate, CPU rate, and the incidents check."""
    one_cpu, one_wall = _v(figs, "worker_events_per_cpu_s"), _v(figs, "worker_events_per_s")
    print("| workers | events/s wall | events per worker CPU-s | CPU per event vs 1 worker |\n|---:|---:|---:|---:|")
    print(f"| 1 | {one_wall or 0:,.0f} | {one_cpu or 0:,.0f} | 1.00 |")
    for n in (2, 4):
        cpu, wall = _v(figs, f"workers_{n}_events_per_cpu_s"), _v(figs, f"workers_{n}_events_per_s")
        if cpu is None or wall is None:
            print(f"| {n} | not measured | | |")
            continue
        print(f"| {n} | {wall:,.0f} | {cpu:,.0f} | {one_cpu / cpu:.2f}x |" if one_cpu else f"| {n} | {wall:,.0f} | {cpu:,.0f} | |")
    same = figs.get("workers_same_incidents")
    if same:
        print(f"\nIncidents: {same['value']:.0f} of {same['baseline_value']:.0f} worker counts found every incident with "
              f"the first run's root causes ({same['note']}).")


def print_memory(figs: dict) -> None:
    """Worker RSS per simulated fleet size, bytes per node and per open job."""
    print("| nodes | worker RSS MiB | vs warm worker | bytes per node above the warm worker |\n|---:|---:|---:|---:|")
    for n, name in ((256, "worker_rss_mib_256_nodes"), (2000, "worker_rss_mib_2k_nodes"), (16000, "worker_rss_mib_16k_nodes")):
        f = figs.get(name)
        if not f or f["value"] is None:
            print(f"| {n:,} | not measured | | |")
            continue
        per = (f["value"] - f["baseline_value"]) * 2**20 / n
        print(f"| {n:,} | {f['value']:.1f} | {f['ratio']:.2f} (warm {f['baseline_value']:.1f}) | {per:,.0f} |")
    node, job = figs.get("worker_bytes_per_node"), figs.get("worker_bytes_per_open_job")
    if node:
        print(f"\nBytes per node (RSS slope): {node['value']:,.0f} ({node['note']}).")
    if job:
        print(f"Bytes per open job: {job['value']:,.0f} ({job['note']}).")


if __name__ == "__main__":
    sys.exit(main())
