"""Precursor lead time: how long before a job dies an alert names its culprit.

Runs the simulator's precursor scenarios through ``Engine`` (what ``faultline diagnose``
runs) and, for every labelled interruption whose fault shows itself in telemetry first (the
label's ``precursor``: what sign, from when), takes the first alert whose subject is the
label's component (``gpu:<node>/<i>``, ``port:<switch>/<port>``, ``path:<mount>``,
``segment:<segment>``) between the sign's start and the failure:
lead time = failure_ts - that alert's ts. Prints a table per fault kind, the share of
precursor faults alerted at least ``--lead-min`` minutes ahead (issue 16: >= 80 % at >= 5 min),
and the precursor alerts (``storage_latency_climb``, ``segment_congestion``) raised on the
healthy scenario (must be 0). See docs/precursors.md.

    .venv/bin/python bench/precursors.py [--seeds 1,2,3] [--nodes 8] [--scenarios gpu-xid79,congestion]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Iterable

#: the simulator scenarios whose faults announce themselves before the job dies
PRECURSOR_SCENARIOS = ("gpu-xid79", "gpu-nvlink", "thermal-straggler", "port-down", "storage-slow",
                       "congestion")
#: the detectors of the precursor alerts this bench is about (issue 16 item 6)
PRECURSOR_KINDS = frozenset({"storage_latency_climb", "segment_congestion"})
LEAD_MS = 5 * 60_000
TARGET = 0.8


@dataclass(frozen=True)
class Row:
    scenario: str
    seed: int
    fault: str
    sign: str
    component: str
    failure_ts: int
    lead_ms: int | None      # None: no alert named the culprit before the failure
    detector: str | None
    #: the same, counting only the alerts of PRECURSOR_KINDS
    precursor_lead_ms: int | None = None


def run_engine(lines: list[bytes]) -> list:
    """The alerts ``Engine`` raises on ``lines``."""
    from faultline.streams.offline import OfflinePipeline

    pipe = OfflinePipeline.from_settings(findings=False)   # what `faultline diagnose` runs
    for i in range(0, len(lines), 8192):
        pipe.process(lines[i:i + 8192])
    pipe.finish()
    return pipe.engine.alerts()


def lead_rows(scenario: str, seed: int, labels: dict, alerts: Iterable) -> list[Row]:
    """One row per labelled interruption with a precursor sign."""
    by_subject: dict[str, list] = {}
    for a in alerts:
        if a.subject:
            by_subject.setdefault(a.subject, []).append(a)
    rows = []
    for lab in labels["interruptions"]:
        pre = lab.get("precursor")
        if not pre:
            continue
        fail = lab["failure_ts"]
        hits = sorted((a for a in by_subject.get(lab["component"], ()) if pre["ts"] <= a.ts <= fail),
                      key=lambda a: (a.ts, a.id))
        first = hits[0] if hits else None
        own = next((a for a in hits if a.detector in PRECURSOR_KINDS), None)
        rows.append(Row(scenario, seed, lab["fault"], pre["sign"], lab["component"], fail,
                        fail - first.ts if first else None, first.detector if first else None,
                        fail - own.ts if own else None))
    return rows


def measure(scenarios: Iterable[str], seeds: Iterable[int], **sim_kw) -> list[Row]:
    from faultline.producers.simulate import simulate

    rows: list[Row] = []
    for name in scenarios:
        for seed in seeds:
            lines, labels = simulate(name, seed=seed, **sim_kw)
            rows += lead_rows(name, seed, labels, run_engine(lines))
    return rows


def ahead_share(rows: list[Row], lead_ms: int = LEAD_MS) -> float:
    """Share of precursor faults alerted at least ``lead_ms`` before the failure."""
    return sum(1 for r in rows if r.lead_ms is not None and r.lead_ms >= lead_ms) / len(rows) if rows else 0.0


def healthy_precursor_alerts(seeds: Iterable[int], **sim_kw) -> list:
    from faultline.producers.simulate import simulate

    out = []
    for seed in seeds:
        lines, _ = simulate("healthy", seed=seed, **sim_kw)
        out += [a for a in run_engine(lines) if a.detector in PRECURSOR_KINDS]
    return out


def table(rows: list[Row], lead_ms: int = LEAD_MS) -> str:
    by: dict[str, list[Row]] = {}
    for r in rows:
        by.setdefault(r.fault, []).append(r)
    m = lead_ms / 60_000
    head = f"{'fault kind':<16}{'sign':<18}{'faults':>7}{'alerted':>8}{f'>={m:g} min':>10}" \
           f"{'min':>7}{'median':>8}{'max':>7}  first detector"
    lines = [head, "-" * len(head)]
    for fault in sorted(by):
        rs = by[fault]
        leads = [r.lead_ms / 60_000 for r in rs if r.lead_ms is not None]
        dets = sorted({r.detector for r in rs if r.detector})
        fmt = (lambda x: f"{x:7.1f}") if leads else (lambda x: f"{'-':>7}")
        lines.append(f"{fault:<16}{rs[0].sign:<18}{len(rs):>7}{len(leads):>8}"
                     f"{sum(1 for x in leads if x >= m):>10}{fmt(min(leads) if leads else 0)}"
                     f"{fmt(statistics.median(leads) if leads else 0):>8}{fmt(max(leads) if leads else 0)}  "
                     f"{', '.join(dets) or '-'}")
    share = ahead_share(rows, lead_ms)
    lines.append("-" * len(head))
    for fault, kind in (("storage_slow", "storage_latency_climb"), ("congestion", "segment_congestion")):
        rs = by.get(fault, [])
        own = [r.precursor_lead_ms / 60_000 for r in rs if r.precursor_lead_ms is not None]
        if rs:
            lines.append(f"{kind} alone on {fault}: {sum(1 for x in own if x >= m)}/{len(rs)} >= {m:g} min ahead"
                         + (f", median {statistics.median(own):.1f} min" if own else ""))
    lines.append(f"all: {sum(1 for r in rows if r.lead_ms is not None and r.lead_ms >= lead_ms)}/{len(rows)} "
                 f"precursor faults alerted >= {m:g} min ahead = {100 * share:.0f} % (target >= {100 * TARGET:.0f} %)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="1,2,3", help="simulator seeds, comma-separated (default 1,2,3)")
    ap.add_argument("--nodes", type=int, default=8, help="fleet size of every scenario (default 8)")
    ap.add_argument("--gpu-interval", type=int, default=30, help="seconds between GPU samples (default 30)")
    ap.add_argument("--scenarios", default=",".join(PRECURSOR_SCENARIOS), help="comma-separated scenario names")
    ap.add_argument("--lead-min", type=float, default=5.0, help="lead time that counts as ahead (default 5)")
    ap.add_argument("--misses", action="store_true", help="also list the faults alerted late or not at all")
    a = ap.parse_args(argv)
    from faultline.producers.simulate import Intervals

    seeds = [int(s) for s in a.seeds.split(",") if s]
    kw = {"nodes": a.nodes, "intervals": Intervals(gpu=a.gpu_interval)}
    lead_ms = int(a.lead_min * 60_000)
    t = time.perf_counter()
    rows = measure([s for s in a.scenarios.split(",") if s], seeds, **kw)
    print(f"precursor lead time, scenarios x seeds {seeds}, {a.nodes} nodes ({time.perf_counter() - t:.0f} s)\n")
    print(table(rows, lead_ms))
    if a.misses:
        for r in rows:
            if r.lead_ms is None or r.lead_ms < lead_ms:
                lead = "none" if r.lead_ms is None else f"{r.lead_ms / 60_000:.1f} min"
                print(f"  late: {r.scenario} seed {r.seed} {r.fault} {r.component}: {lead} ({r.detector or '-'})")
    false = healthy_precursor_alerts(seeds, **kw)
    print(f"\nhealthy fleet, seeds {seeds}: {len(false)} precursor alerts (want 0)")
    for x in false[:10]:
        print(f"  {x.detector} {x.subject}: {x.summary}")
    return 0 if ahead_share(rows, lead_ms) >= TARGET and not false else 1


if __name__ == "__main__":
    sys.exit(main())
