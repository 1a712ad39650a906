"""Sink benchmark: ingest rate into chDB through ``SinkWriter`` and trend-query latency.

    .venv/bin/python bench/sink.py                 # 10 million events (minutes)
    .venv/bin/python bench/sink.py --rows 1000000  # smaller

1. Builds a fleet's worth of contract events: a job history (``sinks.dataset``, with
   incidents and checkpoints) plus telemetry filling up to ``--rows`` (gpu.sample 80 %,
   net.port 8 %, storage.sample 6 %, hw.sensor 4 %, runtime.progress 2 %).
2. Baseline: the same events serialised to JSONEachRow only (orjson, no store): the cost of
   merely producing the bytes a text insert would need.
3. Ingest: every event through ``SinkWriter.add_raws`` + ``flush`` (batches of ``--batch``);
   prints events/s and stored rows/s (raw events + samples + derived tables; materialized
   views do the parsing and fan-out) and the ratio to the baseline.
4. Each trend query (``sinks/queries``) 3 times on the loaded store: best and median latency.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

import orjson

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from faultline.sinks import SinkWriter, dataset, open_store  # noqa: E402
from faultline.sinks.trends import TREND_NAMES, run_trend  # noqa: E402

GPU = (b'{"v":1,"id":"g%d","ts":%d,"kind":"gpu.sample","source":"nvml@%s","node":"%s","data":{"gpu":%d,'
       b'"uuid":"GPU-%s-%d","util_pct":%d.5,"mem_used_mib":%d,"mem_total_mib":81920,"temp_c":%d,"power_w":%d.0,'
       b'"sm_clock_mhz":1980,"throttle":[],"ecc_sbe":%d,"ecc_dbe":0,"nvlink_errors":%d,"pcie_replay":0}}')
NET = (b'{"v":1,"id":"p%d","ts":%d,"kind":"net.port","source":"snmp@%s","node":"%s","data":{"device":"%s",'
       b'"port":"Eth1/%d","oper_status":"up","speed_mbps":400000,"in_errors":%d,"out_errors":0,'
       b'"in_discards":%d,"out_discards":0,"in_octets":%d,"out_octets":%d}}')
STO = (b'{"v":1,"id":"s%d","ts":%d,"kind":"storage.sample","source":"node@%s","node":"%s","data":{"path":"/ckpt",'
       b'"fs_type":"nfs","read_iops":%d,"write_iops":%d,"read_mbps":%d.0,"write_mbps":%d.0,"read_lat_ms":%d.2,'
       b'"write_lat_ms":%d.4,"queue_depth":3,"used_pct":%d.0}}')
SEN = (b'{"v":1,"id":"h%d","ts":%d,"kind":"hw.sensor","source":"ipmi@%s","node":"%s","data":{"sensor":"CPU%d Temp",'
       b'"type":"temperature","value":%d.0,"unit":"C","status":"ok"}}')
PRO = (b'{"v":1,"id":"r%d","ts":%d,"kind":"runtime.progress","source":"sim","node":"%s","job":"%d",'
       b'"data":{"rank":0,"step":%d,"step_time_s":1.5,"samples_per_s":2048.0}}')


def telemetry(n: int, t0: int, span_ms: int, nodes: list[str], seed: int = 1) -> list[bytes]:
    rnd = random.Random(seed)
    out = []
    step = max(1, span_ms // max(n, 1))
    for i in range(n):
        ts = t0 + i * step
        node = nodes[i % len(nodes)]
        b = nodes.index(node) if len(nodes) < 64 else i % len(nodes)
        k = rnd.random()
        nb = node.encode()
        if k < 0.80:
            g = i % 8
            out.append(GPU % (i, ts, nb, nb, g, nb, g, 90 + i % 10, 60000 + i % 9000, 55 + i % 30, 600 + i % 100, i // 1000, i // 5000))
        elif k < 0.88:
            out.append(NET % (i, ts, nb, nb, f"leaf-{b // 4:02d}".encode(), b % 4 + 1, i // 100, i // 50, i * 1000, i * 900))
        elif k < 0.94:
            out.append(STO % (i, ts, nb, nb, 1000 + i % 500, 800 + i % 300, 200 + i % 50, 150 + i % 40, 1 + i % 5, 2 + i % 7, 40 + i % 50))
        elif k < 0.98:
            out.append(SEN % (i, ts, nb, nb, i % 2, 50 + i % 30))
        else:
            out.append(PRO % (i, ts, nb, 48000 + i % 500, i // 10))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000, help="events to ingest (default 10,000,000)")
    ap.add_argument("--batch", type=int, default=100_000, help="events per flush (default 100,000)")
    ap.add_argument("--store", default=None, help="chDB directory (default: a temporary one, removed after)")
    ap.add_argument("--chunk", type=int, default=500_000, help="events generated at a time (memory bound)")
    ap.add_argument("--queries-only", action="store_true",
                    help="skip the ingest: time the trend queries on an existing --store")
    args = ap.parse_args()

    path = args.store or tempfile.mkdtemp(prefix="fl-bench-sink-")
    if args.queries_only:
        if not args.store:
            ap.error("--queries-only needs --store PATH of a store a previous run kept")
        st = open_store(path=path)
        done = st.query("SELECT sum(n) AS n FROM (SELECT uniqExact(id) AS n FROM events_gpu UNION ALL "
                        "SELECT uniqExact(id) FROM events_hw UNION ALL SELECT uniqExact(id) FROM events_net UNION ALL "
                        "SELECT uniqExact(id) FROM events_storage UNION ALL SELECT uniqExact(id) FROM events_sched UNION ALL "
                        "SELECT uniqExact(id) FROM events_runtime UNION ALL SELECT uniqExact(id) FROM events_inventory)")[0]["n"]
        counts = {t: st.query(f"SELECT count() AS n FROM {t}")[0]["n"] for t in ("samples", "incidents")}
        time_queries(st, done, counts)
        st.close()
        return 0
    if args.store and os.path.exists(path):
        shutil.rmtree(path)
    # a job history scaled to the size: one job per 5,000 events (2,000 jobs at 10 M)
    n_jobs = max(40, args.rows // 5000)
    ds = dataset.build(n_nodes=64, n_jobs=n_jobs, seed=3, samples_per_attempt=2)
    hist = ds.events
    n_tel = max(0, args.rows - len(hist))
    span = 6 * 24 * 3_600_000
    print(f"sink bench: {args.rows:,} events ({len(hist):,} job history for {n_jobs:,} jobs, "
          f"{len(ds.incidents):,} incidents; {n_tel:,} telemetry), batch {args.batch:,}, store {path}")

    # baseline: JSONEachRow serialisation of the same rows, from dicts (first chunk)
    sample = telemetry(min(n_tel, 200_000) or 1000, ds.t0, span, ds.nodes)
    dicts = [orjson.loads(x) for x in sample]
    t = time.perf_counter()
    blob = b"\n".join(orjson.dumps(d) for d in dicts)
    base_rate = len(dicts) / (time.perf_counter() - t)
    del dicts, blob, sample
    print(f"baseline  JSONEachRow serialisation only: {base_rate:12,.0f} rows/s")

    st = open_store(path=path)
    w = SinkWriter(st, max_rows=args.batch)
    ingest_s = 0.0
    gen_s = 0.0
    done = 0

    def push(lines: list[bytes]) -> None:
        nonlocal ingest_s, done
        for i in range(0, len(lines), args.batch):
            part = lines[i:i + args.batch]
            t0 = time.perf_counter()
            w.add_raws(part)
            w.flush()
            ingest_s += time.perf_counter() - t0
            done += len(part)
        print(f"  ... {done:,} events, {done / ingest_s:,.0f} events/s", file=sys.stderr, flush=True)

    push(hist)
    for a in ds.alerts:
        w.add_alert(a)
    for inc in ds.incidents:
        w.add_incident(inc)
    t0 = time.perf_counter()
    w.flush()
    ingest_s += time.perf_counter() - t0
    left = n_tel
    off = 0
    while left > 0:
        n = min(args.chunk, left)
        t0 = time.perf_counter()
        lines = telemetry(n, ds.t0 + off * (span // max(n_tel, 1)), n * (span // max(n_tel, 1)), ds.nodes, seed=off)
        gen_s += time.perf_counter() - t0
        lines = [ln.replace(b'"id":"', b'"id":"%d-' % off, 1) for ln in lines]
        push(lines)
        off += n
        left -= n
    tables = ["events_gpu", "events_hw", "events_net", "events_storage", "events_sched", "events_runtime",
              "events_inventory", "samples", "samples_hourly", "checkpoints", "job_attempts", "incidents",
              "incident_evidence", "alerts"]
    counts = {t: st.query(f"SELECT count() AS n FROM {t}")[0]["n"] for t in tables}
    stored = sum(counts.values())
    disk = st.query("SELECT sum(bytes_on_disk) AS b FROM system.parts WHERE active AND database = currentDatabase()")[0]["b"]
    ev_rate = done / ingest_s
    row_rate = stored / ingest_s
    print(f"ingest    SinkWriter -> chDB:            {ev_rate:12,.0f} events/s  "
          f"({ingest_s:.1f} s for {done:,} events; generation {gen_s:.1f} s not counted)")
    print(f"          rows stored by the views:      {row_rate:12,.0f} rows/s    ({stored:,} rows in {len(tables)} tables, "
          f"{disk / 1e6:,.0f} MB on disk)")
    print(f"          ratio to baseline: events {ev_rate / base_rate:.2f}x, stored rows {row_rate / base_rate:.2f}x "
          f"(target >= 200,000 rows/s: {'met' if row_rate >= 200_000 else 'NOT met'} for stored rows, "
          f"{'met' if ev_rate >= 200_000 else 'not met'} for events)")
    print("          " + ", ".join(f"{t}={n:,}" for t, n in counts.items()))
    time_queries(st, done, counts)
    st.close()
    if not args.store:
        shutil.rmtree(path, ignore_errors=True)
    return 0


def time_queries(st, done: int, counts: dict) -> None:
    print(f"trend queries on {done:,} events ({counts['samples']:,} samples, {counts['incidents']:,} incident rows):")
    worst = 0.0
    for name in TREND_NAMES:
        times = []
        n = 0
        for _ in range(3):
            t0 = time.perf_counter()
            n = len(run_trend(st, name))
            times.append(time.perf_counter() - t0)
        worst = max(worst, min(times))
        print(f"  {name:18s} best {min(times) * 1000:8.1f} ms  median {statistics.median(times) * 1000:8.1f} ms  {n:6d} rows")
    t0 = time.perf_counter()
    st.query("SELECT subject, max(max_value) AS m FROM samples_hourly WHERE metric = 'temp_c' GROUP BY subject ORDER BY m DESC LIMIT 10")
    print(f"  {'(rollup: hottest GPUs)':18s} {(time.perf_counter() - t0) * 1000:8.1f} ms")
    print(f"slowest trend query {worst * 1000:.0f} ms (target < 1000 ms: {'met' if worst < 1 else 'NOT met'})")


if __name__ == "__main__":
    sys.exit(main())
