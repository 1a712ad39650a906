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

from bench.results import record  # noqa: E402
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
    ap.add_argument("--trend-rows", type=int, default=TREND_AT,
                    help="grow the store to this many stored rows (in-store copies of what was ingested) and time "
                         f"the trend queries again (default {TREND_AT:,}; 0: no growth, extrapolate)")
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
    chunk = min(args.chunk, max(1, n_tel // 2))   # two chunks at least: the trend queries are timed half way too
    half = None   # (events, slowest trend query s) at about half the size: the slope to extrapolate
    while left > 0:
        if half is None and done >= args.rows // 2:
            half = (stored_rows(st)[1], time_queries(st, done, None, quiet=True))
        n = min(chunk, left)
        t0 = time.perf_counter()
        lines = telemetry(n, ds.t0 + off * (span // max(n_tel, 1)), n * (span // max(n_tel, 1)), ds.nodes, seed=off)
        gen_s += time.perf_counter() - t0
        lines = [ln.replace(b'"id":"', b'"id":"%d-' % off, 1) for ln in lines]
        push(lines)
        off += n
        left -= n
    counts, stored = stored_rows(st)
    tables = list(counts)
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
    worst = time_queries(st, done, counts)
    grown = None
    if args.trend_rows and stored < args.trend_rows:
        grown = grow_store(st, stored, args.trend_rows)
        counts, grown_rows = stored_rows(st)
        print(f"store grown to {grown_rows:,} stored rows in {grown['seconds']:.0f} s ({grown['copies']} in-store copy(ies) of "
              f"every stored table, ids and jobs renamed per copy; samples_hourly through its view)", flush=True)
        grown |= {"rows": grown_rows, "worst": time_queries(st, grown_rows, counts, what="stored rows")}
    record("sink_rows_per_s", row_rate, "rows/s stored (raw events + samples + derived tables)",
           baseline="JSONEachRow serialisation of the same rows only (orjson, no store), same run",
           baseline_value=base_rate, note=f"{done:,} events through SinkWriter -> chDB, {ev_rate:,.0f} events/s")
    record("sink_events_per_s", ev_rate, "events/s into chDB (SinkWriter)",
           baseline="JSONEachRow serialisation of the same rows only, same run", baseline_value=base_rate,
           note=f"{stored / max(done, 1):.1f} stored rows per event")
    record_trend(stored, worst, half, grown)
    st.close()
    if not args.store:
        shutil.rmtree(path, ignore_errors=True)
    return 0


TREND_AT = 100_000_000
TABLES = ("events_gpu", "events_hw", "events_net", "events_storage", "events_sched", "events_runtime",
          "events_inventory", "samples", "samples_hourly", "checkpoints", "job_attempts", "incidents",
          "incident_evidence", "alerts")


def stored_rows(st) -> tuple[dict[str, int], int]:
    """Rows per table and in all (raw events, samples and derived tables)."""
    counts = {t: st.query(f"SELECT count() AS n FROM {t}")[0]["n"] for t in TABLES}
    return counts, sum(counts.values())


#: stored tables copied to grow the store (samples_hourly follows samples through its view; the
#: fleet's topology, inventory and changes stay: the same nodes, ``copies`` times the history)
GROW_TABLES = tuple(t for t in TABLES if t != "samples_hourly")
#: columns renamed per copy, so a copy is new jobs, incidents and events, not duplicates
RENAME = {"id": "concat(id, '~c{k}')", "job": "if(job = '', job, concat(job, '~c{k}'))",
          "incident_id": "concat(incident_id, '~c{k}')", "event_key": "bitXor(event_key, {k})"}


def grow_store(st, stored: int, target: int) -> dict:
    """Copy every stored table inside the store (INSERT ... SELECT, ids and jobs renamed) until
    it holds ``target`` stored rows: the same fleet with ``copies + 1`` times the jobs, incidents
    and telemetry. Not the sink's path (that rate is measured above): only a store of the size
    to time the trend queries on, in the minutes the bench has. Each copy reads the ingested
    rows only (``WHERE`` no renamed id; samples, which have none, from a snapshot)."""
    t0 = time.perf_counter()
    src: dict[str, tuple[list[str], str]] = {}
    for t in GROW_TABLES:
        names = [r["name"] for r in st.query("SELECT name FROM system.columns WHERE database = currentDatabase() "
                                             f"AND table = '{t}' ORDER BY position")]
        marker = next((c for c in ("id", "job", "incident_id") if c in names), None)
        if marker:
            # a subquery: in ClickHouse the outer SELECT's aliases (the renamed id) would shadow the column in WHERE
            src[t] = (names, f"(SELECT * FROM {t} WHERE position({marker}, '~c') = 0)")
        else:   # a snapshot table: a plain MergeTree, no view reads from it
            st.execute(f"DROP TABLE IF EXISTS bench_src_{t}")
            st.execute(f"CREATE TABLE bench_src_{t} ENGINE = MergeTree ORDER BY tuple() AS SELECT * FROM {t}")
            src[t] = (names, f"bench_src_{t}")
    k = 0
    rows = stored
    spent: dict[str, float] = {}
    try:
        while rows < target:
            k += 1
            for t, (names, frm) in src.items():
                sel = ", ".join(RENAME[c].format(k=k) + f" AS {c}" if c in RENAME else c for c in names)
                t1 = time.perf_counter()
                st.execute(f"INSERT INTO {t} ({', '.join(names)}) SELECT {sel} FROM {frm}")
                spent[t] = spent.get(t, 0.0) + time.perf_counter() - t1
            rows = stored_rows(st)[1]
            top = ", ".join(f"{t} {v:.0f} s" for t, v in sorted(spent.items(), key=lambda x: -x[1])[:3])
            print(f"  ... copy {k}: {rows:,} stored rows ({time.perf_counter() - t0:.0f} s; most in {top})",
                  file=sys.stderr, flush=True)
    finally:
        for t, (_, frm) in src.items():
            if frm.startswith("bench_src_"):
                st.execute(f"DROP TABLE IF EXISTS {frm}")
    return {"copies": k, "seconds": time.perf_counter() - t0, "from": stored}


def record_trend(done: int, worst: float, half: tuple[int, float] | None, grown: dict | None = None) -> None:
    """The slowest trend query at this size (``done`` stored rows), and at 100M stored rows:
    measured on the store grown to that size when ``grown`` (``grow_store`` + its timing), else
    extrapolated linearly from the two sizes measured in this run (half way and at the end),
    labelled as extrapolated."""
    record("trend_query_ms_measured", worst * 1000, "ms", baseline=f"the same query at {half[0]:,} rows" if half else None,
           baseline_value=half[1] * 1000 if half else None, note=f"slowest trend query (best of 3) at {done:,} stored rows")
    if grown is not None and grown["rows"] >= TREND_AT:
        record("trend_query_ms_100m", grown["worst"] * 1000, "ms", baseline=f"measured at {done:,} stored rows, same run",
               baseline_value=worst * 1000,
               note=f"measured at {grown['rows']:,} stored rows: the ingested store plus {grown['copies']} in-store copies "
                    f"of it (INSERT ... SELECT, jobs/ids renamed: {grown['copies'] + 1}x the jobs and incidents on the "
                    f"same fleet), grown in {grown['seconds']:.0f} s; slowest trend query, best of 3")
        return
    if done >= TREND_AT:
        record("trend_query_ms_100m", worst * 1000, "ms", note=f"measured at {done:,} stored rows")
        return
    if half is None or half[0] >= done:
        record("trend_query_ms_100m", None, "ms", note="not measured: one size only, nothing to extrapolate from")
        return
    slope = max(0.0, (worst - half[1]) / (done - half[0]))
    est = worst + slope * (TREND_AT - done)
    print(f"slowest trend query at 100M rows, EXTRAPOLATED linearly from {half[0]:,} ({half[1] * 1000:.0f} ms) and "
          f"{done:,} ({worst * 1000:.0f} ms): {est * 1000:,.0f} ms")
    record("trend_query_ms_100m", est * 1000, "ms (extrapolated)", baseline=f"measured at {done:,} stored rows, same run",
           baseline_value=worst * 1000,
           note=f"EXTRAPOLATED, not measured: linear in stored rows from {half[0]:,} rows ({half[1] * 1000:.0f} ms) and "
                f"{done:,} ({worst * 1000:.0f} ms); 100M rows (~10M events) could not be built in the time here")


def time_queries(st, done: int, counts: dict | None, quiet: bool = False, what: str = "events") -> float:
    """Each trend query 3 times; returns the slowest query's best time (s). ``done``: how
    many ``what`` (ingested events, or stored rows of a grown store) the store holds."""
    if not quiet:
        print(f"trend queries on {done:,} {what} ({counts['samples']:,} samples, {counts['incidents']:,} incident rows):")
    worst = 0.0
    for name in TREND_NAMES:
        times = []
        n = 0
        for _ in range(3):
            t0 = time.perf_counter()
            n = len(run_trend(st, name))
            times.append(time.perf_counter() - t0)
        worst = max(worst, min(times))
        if quiet:
            continue
        print(f"  {name:18s} best {min(times) * 1000:8.1f} ms  median {statistics.median(times) * 1000:8.1f} ms  {n:6d} rows")
    if quiet:
        print(f"slowest trend query at {done:,} events: {worst * 1000:.0f} ms", flush=True)
        return worst
    t0 = time.perf_counter()
    st.query("SELECT subject, max(max_value) AS m FROM samples_hourly WHERE metric = 'temp_c' GROUP BY subject ORDER BY m DESC LIMIT 10")
    print(f"  {'(rollup: hottest GPUs)':18s} {(time.perf_counter() - t0) * 1000:8.1f} ms")
    print(f"slowest trend query {worst * 1000:.0f} ms (target < 1000 ms: {'met' if worst < 1 else 'NOT met'})")
    return worst


if __name__ == "__main__":
    sys.exit(main())
