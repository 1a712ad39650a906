"""Bounded memory over time: a simulated week of a 256-node fleet and a day of a 2,000-node
fleet through one real `faultline worker`, its RSS sampled all along, then its state
restore time after a restart at the end.

    .venv/bin/python bench/memory.py [--fleets 256x168,2000x24] [--compress 120] [--scenario mixed]

For each fleet (NODESxHOURS): fresh topics; one worker (analysis only, in-memory tables on
their changelog topics) started and recovered; the simulator's ``--scenario`` for that fleet
and window (ending an hour before now) published as fast as the producer goes; the worker
drains it, so the week passes in minutes of wall time and the engine's retention (event
time) acts as in a week. Every ``--sample-s`` the worker's RSS (VmRSS) and its last stats
line (event-time watermark ``wm_released``, live jobs) are read. The telemetry intervals
are multiplied by ``--compress`` (default 120: a GPU sample every 20 min instead of 10 s;
job, log and scheduler events are not compressed): memory follows the subjects and the
jobs, not the sample rate; the event count it saves is printed.

Then the worker is stopped (SIGTERM) and a new one started on the same topics: the restore
time is from its start to its first stats line that says its tables are recovered
(``recovered=1``; stats every second), and its RSS then.

``--inprocess``: the same fleets through the worker's split of the engine in THIS process
(``NodeSide``/``JobSide``/``Shared`` over dict tables, driven as the agents drive them: the
driver of tests/reliability/test_memory_expiry.py), no Kafka: RSS of this process and the
bytes of the tables (what the changelogs hold) every 6 simulated hours, live jobs, and the
time to rebuild both sides from the tables (the decode half of a restore; the changelog
read is the worker's). Used while the worker process cannot run the week (NOTES 06:55).

Prints one line per sample (simulated hour, RSS, jobs) and a summary; figures go to
``bench/results.py`` (``record``). Needs the broker (``make kafka-up``). Not in bench/run.py:
it takes ~10-20 min on the 2-core machine (docs/reliability.md "Bounded memory").
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.results import record  # noqa: E402
from bench.worker import rss_bytes  # noqa: E402
from faultline import config  # noqa: E402
from faultline.producers.simulate import Simulation  # noqa: E402
from faultline.producers.simulate.telemetry import Intervals  # noqa: E402
from faultline.schemas.codec import now_ms  # noqa: E402
from faultline.schemas.registry import INPUT_TOPICS  # noqa: E402
from faultline.streams.app import default_app_id  # noqa: E402
from faultline.streams.faust_harness import WorkerProcess, produce, wait_caught_up  # noqa: E402
from faultline.streams.faust_topics import BrokerUnreachable, ensure_topics  # noqa: E402

HOUR_MS = 3_600_000
_STATS = re.compile(rb"worker stats (.*)")
#: the default telemetry intervals (producers/simulate/telemetry.py Intervals), in field order
_DEFAULT_IV = (10, 60, 30, 30, 30, 300)


def last_stats(path: Path, tail: int = 200_000) -> dict[str, str]:
    """The worker's last ``worker stats k=v ...`` line (empty before the first)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, fh.seek(0, 2) - tail))
            data = fh.read()
    except OSError:
        return {}
    hits = _STATS.findall(data)
    if not hits:
        return {}
    return dict(kv.split(b"=", 1) for kv in hits[-1].split() if b"=" in kv and not kv.startswith(b"{"))  # type: ignore[misc]


def stat(d: dict, key: str) -> int | None:
    v = d.get(key.encode()) if d else None
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


class Sampler(threading.Thread):
    """(wall s, RSS bytes, watermark, live jobs) of the worker every ``every_s``."""

    def __init__(self, w: WorkerProcess, every_s: float) -> None:
        super().__init__(daemon=True)
        self.w, self.every_s = w, every_s
        self.samples: list[tuple[float, int, int | None, int | None]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        t0 = time.monotonic()
        while not self.stop.wait(self.every_s):
            try:
                rss = rss_bytes(self.w.proc.pid)
            except (OSError, RuntimeError):
                return
            d = last_stats(self.w.log_path)
            self.samples.append((time.monotonic() - t0, rss, stat(d, "wm_released"), stat(d, "jobs")))


def wait_recovered(w: WorkerProcess, timeout_s: float) -> float:
    """Seconds from now until the worker's stats say recovered=1 (its tables are loaded)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if stat(last_stats(w.log_path), "recovered") == 1:
            return time.monotonic() - t0
        if not w.alive():
            raise RuntimeError(f"worker exited:\n{w.log()}")
        time.sleep(0.1)
    raise RuntimeError(f"worker not recovered within {timeout_s:.0f} s:\n{w.log()}")


def fleet_lines(scenario: str, nodes: int, hours: float, compress: int, counter: list[int]) -> Iterator[bytes]:
    iv = Intervals(*(x * compress for x in _DEFAULT_IV))
    start = (now_ms() - int((hours + 1) * HOUR_MS)) // 60_000 * 60_000
    for line in Simulation(scenario, seed=7, nodes=nodes, hours=hours, intervals=iv, start_ms=start).lines():
        counter[0] += 1
        yield line


#: --trim-baseline: after the drain, both runs wait this long before the end RSS is read (the
#: worker asks every 10 s whether a trim is due; its first is at most 60 s after the start)
TRIM_SETTLE_S = 75.0


def run_fleet(base, nodes: int, hours: float, args, tmp: str, *, align: bool = True,
              trim: bool = True, restart: bool = True) -> dict[str, Any]:
    s = replace(base, topic_prefix=f"benchmem{uuid.uuid4().hex[:6]}.")
    asyncio.run(ensure_topics(s))
    env = {"FAULTLINE_WORKER_STATS_S": "1"}
    if not align:   # the baseline: job topics fetched however far ahead of event time they are read
        env["FAULTLINE_ALIGN_AHEAD_MS"] = "0"
    if not trim:    # the baseline: freed heap kept mapped (streams/heap.py off)
        env["FAULTLINE_HEAP_TRIM_S"] = "0"
    w = WorkerProcess(s, f"{tmp}/w{nodes}{'' if align else 'x'}{'' if trim else 't'}", loglevel="info",
                      env=env).start()
    out: dict[str, Any] = {"nodes": nodes, "hours": hours, "align": align, "trim": trim}
    try:
        wait_recovered(w, 180)
        out["rss0"] = rss_bytes(w.proc.pid)
        sampler = Sampler(w, args.sample_s)
        sampler.start()
        n = [0]
        t0 = time.monotonic()
        asyncio.run(produce(s, fleet_lines(args.scenario, nodes, hours, args.compress, n)))  # type: ignore[arg-type]
        out["events"], out["produce_s"] = n[0], time.monotonic() - t0
        asyncio.run(wait_caught_up(s, default_app_id(s), timeout_s=args.drain_timeout_s,
                                   topics=INPUT_TOPICS))
        out["drain_s"] = time.monotonic() - t0
        time.sleep(TRIM_SETTLE_S if args.trim_baseline else 3 * args.sample_s)
        sampler.stop.set()
        sampler.join()
        out["samples"] = sampler.samples
        out["rss_end"] = rss_bytes(w.proc.pid)
        out["stats_end"] = {k.decode(): v.decode() for k, v in last_stats(w.log_path).items()}
    finally:
        w.stop(60)
    if not restart:
        return out
    # the restart: a new worker process on the same topics rebuilds its tables from the changelogs
    w2 = WorkerProcess(s, f"{tmp}/w{nodes}b", loglevel="info", env=env)
    t0 = time.monotonic()
    w2.start()
    try:
        wait_recovered(w2, 600)
        out["restore_s"] = time.monotonic() - t0
        time.sleep(2)
        out["rss_restored"] = rss_bytes(w2.proc.pid)
        out["stats_restored"] = {k.decode(): v.decode() for k, v in last_stats(w2.log_path).items()}
    finally:
        w2.stop(60)
    return out


def peak_rss(r: dict[str, Any]) -> int:
    return max((x[1] for x in r["samples"]), default=r["rss_end"])


def report(r: dict[str, Any], args, baseline: dict[str, Any] | None = None) -> None:
    mib = 2 ** 20
    nodes, hours = r["nodes"], r["hours"]
    samples = [x for x in r["samples"] if x[2] is not None and x[2] > 0]
    how = "" if r["align"] else ", BASELINE: event-time alignment off (FAULTLINE_ALIGN_AHEAD_MS=0)"
    how += "" if r.get("trim", True) else ", BASELINE: heap trim off (FAULTLINE_HEAP_TRIM_S=0)"
    print(f"\n{nodes} nodes x {hours:g} h (`{args.scenario}`, telemetry intervals x{args.compress}{how}): "
          f"{r['events']:,} events produced in {r['produce_s']:.0f} s, drained in {r['drain_s']:.0f} s")
    if samples:
        wm0 = samples[0][2]
        step = max(1, len(samples) // 24)
        print("  wall s   sim h   RSS MiB   jobs")
        for wall, rss, wm, jobs in samples[::step] + [samples[-1]]:
            print(f"  {wall:6.0f}  {(wm - wm0) / HOUR_MS:6.1f}  {rss / mib:8.1f}  {jobs}")
    peak = peak_rss(r)
    late = [x[1] for x in samples if x[2] - samples[0][2] >= (hours / 2) * HOUR_MS] if samples else []
    early = [x[1] for x in samples if x[2] - samples[0][2] < (hours / 2) * HOUR_MS] if samples else []
    print(f"  RSS: warm {r['rss0'] / mib:.1f} MiB, peak {peak / mib:.1f} MiB, end {r['rss_end'] / mib:.1f} MiB; "
          f"max first half {max(early, default=0) / mib:.1f} / second half {max(late, default=0) / mib:.1f} MiB; "
          f"live jobs at the end {r['stats_end'].get('jobs')}, max {max((x[3] or 0 for x in samples), default=0)}; "
          f"alignment holds {r['stats_end'].get('align_holds', '-')}; heap trims {r['stats_end'].get('trims', '-')} "
          f"({r['stats_end'].get('trimmed_mib', '-')} MiB given back, the last in {r['stats_end'].get('trim_ms', '-')} ms)")
    if "restore_s" not in r:
        return
    print(f"  restart: tables restored in {r['restore_s']:.1f} s (start to recovered=1), RSS then "
          f"{r['rss_restored'] / mib:.1f} MiB, jobs {r['stats_restored'].get('jobs')}")
    tag = f"{nodes}_nodes_{hours:g}h"
    cmd = f".venv/bin/python bench/memory.py --fleets {nodes}x{hours:g} --compress {args.compress} --scenario {args.scenario}"
    if baseline is not None and not baseline.get("trim", True):
        b = baseline["rss_end"]
        print(f"  RSS at the end {r['rss_end'] / mib:.1f} MiB vs {b / mib:.1f} MiB with heap trim off: "
              f"ratio {r['rss_end'] / b:.2f}")
        record(f"worker_rss_mib_after_drain_{tag}", r["rss_end"] / mib, "MiB", command=cmd + " --trim-baseline",
               baseline="the same fleet, same run, heap trim off (FAULTLINE_HEAP_TRIM_S=0)",
               baseline_value=b / mib, note=f"RSS {TRIM_SETTLE_S:.0f} s after the backlog drained")
    elif baseline is not None:
        b = peak_rss(baseline)
        print(f"  peak RSS {peak / mib:.1f} MiB vs {b / mib:.1f} MiB with alignment off: ratio {peak / b:.2f}")
        record(f"worker_rss_mib_peak_{tag}", peak / mib, "MiB", command=cmd + " --align-baseline",
               baseline="the same fleet, same run, event-time alignment off (FAULTLINE_ALIGN_AHEAD_MS=0)",
               baseline_value=b / mib, note="peak RSS while the fleet's backlog drains")
    note = f"{r['events']:,} events, telemetry intervals x{args.compress}; peak {peak / mib:.1f} MiB"
    record(f"worker_rss_mib_end_{tag}", r["rss_end"] / mib, "MiB", baseline="the same worker warm, before the fleet",
           baseline_value=r["rss0"] / mib, command=cmd, note=note)
    record(f"worker_rss_mib_second_half_max_{tag}", max(late, default=0) / mib, "MiB",
           baseline="max RSS over the first half of the simulated window", baseline_value=max(early, default=0) / mib,
           command=cmd, note="ratio ~1: flat (closed jobs expire)")
    record(f"worker_restore_s_{tag}", r["restore_s"], "s", command=cmd,
           note="new worker process on the same topics: start to tables recovered (in-memory tables from changelogs)")


def self_rss() -> int:
    return rss_bytes(os.getpid())


def run_inprocess(nodes: int, hours: float, args) -> dict[str, Any]:
    """One fleet through the worker's split in this process (see the module doc)."""
    from faultline.schemas.codec import decode
    from faultline.streams.engine import EngineConfig
    from faultline.streams.faust_engine import JobSide, NodeSide, Shared, side_config
    from tests.reliability.test_memory_expiry import Run, _batch, _sizes

    cfg = side_config(EngineConfig())
    data: dict = {}
    shared = Shared(data, lambda k, v: data.pop(k, None) if v is None else data.__setitem__(k, v),
                    retention_ms=cfg.retention_ms)
    r = Run(cfg, NodeSide(shared, cfg), JobSide(shared, cfg), shared, data)
    out: dict[str, Any] = {"nodes": nodes, "hours": hours, "rss0": self_rss(), "samples": []}
    n = [0]
    buf: list = []
    t0 = time.monotonic()
    wm0 = next_s = None
    for line in fleet_lines(args.scenario, nodes, hours, args.compress, n):
        buf.append(decode(line))
        if len(buf) >= 5_000:
            _batch(r, buf)
            buf = []
            if wm0 is None:
                wm0, next_s = r.wm, r.wm
            if r.wm >= next_s:
                out["samples"].append(((r.wm - wm0) / HOUR_MS, self_rss(), _sizes(r)))
                print(f"  sim h {(r.wm - wm0) / HOUR_MS:6.1f}  RSS {self_rss() / 2**20:7.1f} MiB  "
                      f"{_sizes(r)}", flush=True)
                next_s += 6 * HOUR_MS
    _batch(r, buf)
    out["events"], out["wall_s"] = n[0], time.monotonic() - t0
    out["end"] = _sizes(r)
    out["rss_end"] = self_rss()
    out["jobs_seen"] = len(r.jobs_seen)
    # restore: both sides rebuilt from the tables, as a restarted worker loads its partitions
    t1 = time.monotonic()
    shared2 = Shared(dict(data), lambda k, v: None, retention_ms=cfg.retention_ms)
    ns2, js2 = NodeSide(shared2, cfg), JobSide(shared2, cfg)
    for k, blob in r.ntab.items():
        ns2.load(k, blob)
    for j, blob in r.jtab.items():
        js2.load(j, blob)
    out["restore_s"] = time.monotonic() - t1
    out["restored"] = (len(ns2.nodes), len(js2.jobs))
    return out


def report_inprocess(r: dict[str, Any], args) -> None:
    mib = 2 ** 20
    end = r["end"]
    print(f"\n{r['nodes']} nodes x {r['hours']:g} h in-process (`{args.scenario}`, telemetry x{args.compress}): "
          f"{r['events']:,} events in {r['wall_s']:.0f} s; jobs seen {r['jobs_seen']}, live at the end {end['jobs']}")
    half = [x for x in r["samples"] if x[0] >= r["hours"] / 2]
    first = [x for x in r["samples"] if x[0] < r["hours"] / 2]
    print(f"  RSS start {r['rss0'] / mib:.1f} MiB, end {r['rss_end'] / mib:.1f} MiB; max first half "
          f"{max((x[1] for x in first), default=0) / mib:.1f}, second half {max((x[1] for x in half), default=0) / mib:.1f} MiB")
    print(f"  table bytes at the end {end['bytes']:,} ({end['node_rows']} node rows, {end['job_rows']} job rows, "
          f"{end['alloc']} alloc keys); max over the run {max(x[2]['bytes'] for x in r['samples']):,}")
    print(f"  restore (tables -> NodeSide/JobSide): {r['restore_s']:.2f} s for {r['restored'][0]} nodes, "
          f"{r['restored'][1]} jobs")
    tag = f"{r['nodes']}_nodes_{r['hours']:g}h"
    cmd = (f".venv/bin/python bench/memory.py --inprocess --fleets {r['nodes']}x{r['hours']:g} "
           f"--compress {args.compress} --scenario {args.scenario}")
    record(f"split_state_bytes_end_{tag}", end["bytes"], "bytes", baseline="max over the run",
           baseline_value=max(x[2]["bytes"] for x in r["samples"]), command=cmd,
           note=f"{r['events']:,} events; {end['jobs']} live jobs of {r['jobs_seen']} seen")
    record(f"split_rss_mib_end_{tag}", r["rss_end"] / mib, "MiB", baseline="RSS at the start",
           baseline_value=r["rss0"] / mib, command=cmd, note="this process: simulator + split sides")
    record(f"split_restore_s_{tag}", r["restore_s"], "s", command=cmd, note="decode of every table row")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fleets", default="256x168,2000x24", help="NODESxHOURS, comma separated (default 256x168,2000x24)")
    ap.add_argument("--compress", type=int, default=120, help="telemetry intervals multiplied by this (default 120)")
    ap.add_argument("--scenario", default="mixed", help="simulator scenario (default mixed: faults, incidents, decoys)")
    ap.add_argument("--sample-s", type=float, default=1.0, help="RSS sampling period, wall seconds (default 1)")
    ap.add_argument("--drain-timeout-s", type=float, default=1800)
    ap.add_argument("--inprocess", action="store_true", help="through NodeSide/JobSide in this process, no Kafka")
    ap.add_argument("--align-baseline", action="store_true",
                    help="first run each fleet with event-time alignment off (the baseline of the peak RSS)")
    ap.add_argument("--trim-baseline", action="store_true",
                    help="first run each fleet with the heap trim off (the baseline of the RSS after the drain)")
    args = ap.parse_args(argv)
    if args.inprocess:
        for spec in args.fleets.split(","):
            nodes, hours = spec.lower().split("x")
            report_inprocess(run_inprocess(int(nodes), float(hours), args), args)
        return 0
    s = config.load()
    try:
        asyncio.run(ensure_topics(replace(s, topic_prefix=f"benchmem{uuid.uuid4().hex[:6]}.")))
    except BrokerUnreachable as e:
        print(e, file=sys.stderr)
        return 2
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    with tempfile.TemporaryDirectory() as tmp:
        for spec in args.fleets.split(","):
            nodes, hours = spec.lower().split("x")
            base = None
            if args.align_baseline:
                base = run_fleet(s, int(nodes), float(hours), args, tmp, align=False, restart=False)
                report(base, args)
            elif args.trim_baseline:
                base = run_fleet(s, int(nodes), float(hours), args, tmp, trim=False, restart=False)
                report(base, args)
            report(run_fleet(s, int(nodes), float(hours), args, tmp), args, base)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
