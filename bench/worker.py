"""The worker against a bare consumer of the same topics, scaling, incidents and memory.

    .venv/bin/python bench/worker.py [--events 100000] [--workers 1,2,4] [--jobs 12]
        [--memory 256,2000,16000] [--profile] [--only throughput|memory]

1. Throughput, for each worker count (fresh topics each time, the workers in one group on
   the same ``--partitions``): ``--jobs`` jobs are opened, ``--events`` gpu.sample events
   are produced as fast as the producer can, then one fault per partition; from the first
   send to the last fault's alert gives events/s of wall time, the workers' CPU time
   (/proc) events per worker CPU-second. Baseline, same run, same topic: a bare aiokafka
   consumer (``getmany`` + ``orjson.loads``, every partition, large fetches) draining
   fl.gpu from the beginning in this process, events per CPU-second of this process.
2. Incidents, same run: every job gets an XID on its node and ends ``failed``; the time
   from its end event to its incident on fl.incidents, and the incidents' root causes,
   which must be the same for every worker count. The bench workers' evidence settle
   time is ``--settle-ms`` (default 5 s; the product default is 60 s): an incident cannot
   come before its end + settle + lateness in event time, the baseline printed beside it.
3. ``--profile``: one more worker, started under py-spy (fresh topics), drains 2 x
   ``--events`` (not a measured drain: py-spy takes CPU on a 2-core machine); the functions
   with the largest share of samples (own and cumulative) are printed.
4. Memory: one worker; simulated nodes (8 GPUs + one mount each, two rounds) are added up
   to each ``--memory`` size, RSS (VmRSS) read once the worker answered a fault on every
   partition behind them; then one open job per node (JOB_NODES; more jobs than one per 8 nodes:
   RSS resolves them): bytes per node and per open job.

Figures go to ``bench/results.py`` (``record``); needs the broker (``make kafka-up``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import streams_latency as sl  # noqa: E402
from bench.results import record  # noqa: E402
from faultline import config  # noqa: E402
from faultline.schemas.codec import now_ms  # noqa: E402
from faultline.streams.app import default_app_id  # noqa: E402
from faultline.streams.faust_harness import WorkerProcess, wait_caught_up, worker_env  # noqa: E402
from faultline.streams.faust_topics import BrokerUnreachable, ensure_topics  # noqa: E402
from faultline.streams.heap import rss_bytes as heap_rss  # noqa: E402

JOB_GPU = sl.GPUS - 2   # the jobs' XIDs: not the GPUs the latency and drain faults use
JOB_NODES = 1           # memory: nodes per open job (one job per simulated node)


def job_event(job: str, node: str, state: str, ts: int, start_ts: int) -> bytes:
    end = state != "running"
    return orjson.dumps({
        "v": 1, "id": f"{job}-{state}", "ts": ts, "kind": "sched.job", "source": "bench", "node": None,
        "job": job, "tenant": "bench",
        "data": {"state": state, "attempt": 0, "nodes": [node], "gpus": 8, "ranks": {"0": node},
                 "exit_code": 1 if end else None, "signal": None, "image": None, "name": job, "user": "bench",
                 "start_ts": start_ts, "end_ts": ts if end else None, "reason": "NonZeroExitCode" if end else None}})


def rss_bytes(pid: int) -> int:
    n = heap_rss(pid)
    if not n:
        raise RuntimeError(f"no VmRSS for pid {pid}")
    return n


def fresh(base, settle_ms: int, tmp: str) -> tuple[Any, dict[str, str]]:
    """New topic prefix (topics created) and the workers' environment (settle time)."""
    s = replace(base, topic_prefix=f"bench{uuid.uuid4().hex[:6]}.")
    asyncio.run(ensure_topics(s))
    cfg = Path(tmp) / "faultline.toml"
    cfg.write_text(f"settle_ms = {settle_ms}\n")
    return s, {"FAULTLINE_CONFIG": str(cfg)}


# ---------------------------------------------------------------- bare baseline
async def bare_drain(settings, topics: list[str], timeout_s: float = 120) -> tuple[int, float, float]:
    """Drain ``topics`` (full names) from the beginning to their current end with getmany +
    orjson.loads, every partition: (events, wall s, CPU s of this process)."""
    c = AIOKafkaConsumer(**settings.kafka_kwargs(), group_id=None, enable_auto_commit=False, auto_offset_reset="earliest",
                         fetch_max_bytes=64 << 20, max_partition_fetch_bytes=16 << 20)
    await c.start()
    try:
        tps: list[TopicPartition] = []
        for _ in range(50):   # a topic created moments ago may be missing from the first metadata
            await c._client.force_metadata_update()  # noqa: SLF001 - metadata for every topic
            known = {t: c.partitions_for_topic(t) for t in topics}
            if all(known.values()):
                tps = [TopicPartition(t, p) for t in topics for p in sorted(known[t])]
                break
            await asyncio.sleep(0.2)
        if not tps:
            raise RuntimeError(f"bare drain: no partitions known for {topics}")
        c.assign(tps)
        ends = await c.end_offsets(tps)
        await c.seek_to_beginning(*tps)
        left = {tp for tp in tps if ends[tp] > 0}
        seen: dict[TopicPartition, int] = {}
        n = 0
        w0, c0 = time.monotonic(), time.process_time()
        t_end = w0 + timeout_s
        while left:
            batch = await c.getmany(timeout_ms=500)
            for tp, recs in batch.items():
                for r in recs:
                    orjson.loads(r.value)
                n += len(recs)
                if recs:
                    seen[tp] = recs[-1].offset + 1
            for tp in list(left):   # after records came: the position also moves past control records
                if tp in seen and (seen[tp] >= ends[tp] or await c.position(tp) >= ends[tp]):
                    left.discard(tp)
            if left and time.monotonic() > t_end:
                raise RuntimeError(f"bare drain: {len(left)} partitions not at their end after {timeout_s:.0f} s "
                                   f"({n:,} events read)")
        return n, time.monotonic() - w0, time.process_time() - c0
    finally:
        await c.stop()


# ---------------------------------------------------------------- incidents
async def fail_jobs(settings, jobs: dict[str, str], started: int, timeout_s: float,
                    bg_rate: float) -> dict[str, tuple[float, tuple]]:
    """Give every job an XID on its node and a ``failed`` end; wait for their incidents
    (background samples at ``bg_rate`` move event time meanwhile). job -> (latency s,
    (category, component))."""
    kw = settings.kafka_kwargs()
    producer = AIOKafkaProducer(**kw, linger_ms=5)
    consumer = AIOKafkaConsumer(settings.topic("fl.incidents"), **kw, auto_offset_reset="latest", group_id=None)
    await producer.start()
    await consumer.start()
    stop = asyncio.Event()
    counter = [0]
    bg = asyncio.create_task(sl.background(producer, settings.topic("fl.gpu"), bg_rate, stop, counter,
                                           settings.topic_partitions, seq0=sl._bg_seq[0]))
    try:
        await consumer.seek_to_end()
        sent: dict[str, float] = {}
        for job, node in jobs.items():
            ts = now_ms()
            await producer.send_and_wait(settings.topic("fl.gpu"), sl.xid(f"{job}-xid", int(node[1:]), JOB_GPU, ts),
                                         key=node.encode())
            await producer.send_and_wait(settings.topic("fl.sched"), job_event(job, node, "failed", ts + 50, started),
                                         key=job.encode())
            sent[job] = time.monotonic()
        got: dict[str, tuple[float, tuple]] = {}
        t_end = time.monotonic() + timeout_s
        while len(got) < len(jobs) and time.monotonic() < t_end:
            batch = await consumer.getmany(timeout_ms=200)
            now = time.monotonic()
            for recs in batch.values():
                for r in recs:
                    d = orjson.loads(r.value)
                    job = d.get("job")
                    if job in sent and job not in got:
                        rc = d.get("root_cause") or {}
                        got[job] = (now - sent[job], (rc.get("category"), rc.get("component")))
        return got
    finally:
        stop.set()
        await bg
        sl._bg_seq[0] += counter[0] + 1_000_000
        await producer.stop()
        await consumer.stop()


async def open_jobs(producer: AIOKafkaProducer, settings, jobs: dict[str, str], ts: int) -> None:
    await sl.send_keyed(producer, settings.topic("fl.sched"),
                        ((j.encode(), job_event(j, n, "running", ts, ts)) for j, n in jobs.items()))


# ---------------------------------------------------------------- profile
def profile(base, args, tmp: str) -> list[str]:
    """One worker started under ``py-spy record`` (attaching to a running worker by pid
    fails on this machine: "Failed to find python version"), fresh topics, warmed up, then
    a drain of ``2 x --events``; py-spy stops at SIGINT and writes its raw collapsed stacks.
    Returns the top functions by own and by cumulative share of the samples."""
    spy = Path(sys.executable).parent / "py-spy"
    if not spy.exists():
        return ["py-spy not installed (pip install -e '.[bench]'): no profile"]
    s, env = fresh(base, args.settle_ms, tmp)
    out = Path(tmp) / "worker.pyspy.txt"
    w = WorkerProcess(s, f"{tmp}/wspy", loglevel="warning", env=env)
    cmd = [str(spy), "record", "--rate", "50", "--nonblocking", "--format", "raw", "--output", str(out), "--",
           sys.executable, "-m", "faultline.cli", "worker", "--workdir", str(w.workdir), "--loglevel", "warning"]
    with open(w.log_path, "ab") as log:
        spy_p = subprocess.Popen(cmd, env=worker_env(s, **env), stdout=log, stderr=log, start_new_session=True)
    try:
        sl.warm_up(s, 1, [w])
        t0 = time.monotonic()
        asyncio.run(sl.drain(s, int(args.events * 2)))
        seconds = time.monotonic() - t0
    finally:
        spy_p.send_signal(signal.SIGINT)      # py-spy writes the profile and stops its child
        try:
            spy_p.wait(60)
        except subprocess.TimeoutExpired:
            spy_p.kill()
        try:
            os.killpg(spy_p.pid, signal.SIGTERM)   # the worker, py-spy's child, in its session
        except ProcessLookupError:
            pass
    if not out.exists():
        return [f"py-spy wrote no profile ({spy_p.returncode}): {w.log()[-300:]}"]
    own: Counter[str] = Counter()
    cum: Counter[str] = Counter()
    total = 0
    for line in out.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        k = int(n)
        frames = [f for f in stack.split(";") if f and not f.startswith("process ") and not f.startswith("thread ")]
        if not frames:
            continue
        total += k
        own[_fn(frames[-1])] += k
        for f in {_fn(f) for f in frames}:
            cum[f] += k
    if not total:
        return ["py-spy: no samples"]
    lines = [f"py-spy: {total} samples (warm-up and a {seconds:.0f} s drain of {args.events * 2:,} events)"]
    lines.append("  own share (the function itself):")
    lines += [f"    {v / total:6.1%}  {f}" for f, v in own.most_common(15)]
    lines.append("  cumulative share (the function and what it calls), project code:")
    lines += [f"    {v / total:6.1%}  {f}" for f, v in cum.most_common(300)
              if f.split(" (", 1)[-1].startswith(("streams/", "schemas/", "sinks/", "faultline/"))][:20]
    return lines


def _fn(frame: str) -> str:
    """``fn (path/file.py:line)`` -> ``fn (file.py)`` relative to the project or site-packages."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")").rsplit(":", 1)[0]
    for cut in ("site-packages/", str(ROOT) + "/"):
        if cut in where:
            where = where.split(cut, 1)[1]
    return f"{name} ({where})"


# ---------------------------------------------------------------- runs
def throughput(base, n_workers: int, args, tmp: str) -> dict[str, Any]:
    s, env = fresh(base, args.settle_ms, tmp)
    # the same input for every worker count: the warm-up and drain faults start from the same
    # nodes again (fresh workers and topics: no rate limit carried over), the jobs sit on the
    # highest nodes, away from those faults (the warm-up's XIDs on a job's node would become
    # its root cause, differently per run)
    sl._fault_seq[0] = sl._drain_seq[0] = 0
    jobs = {f"bjob-{i}": f"n{sl.NODES - 1 - i % sl.NODES:03d}" for i in range(args.jobs)}
    started = now_ms()
    ws = [WorkerProcess(s, f"{tmp}/w{n_workers}-{i}", loglevel="warning", env=env).start() for i in range(n_workers)]
    try:
        sl.warm_up(s, n_workers, ws)
        time.sleep(2)
        c0 = sum(sl.cpu_seconds(w.proc.pid) for w in ws)
        dt = asyncio.run(sl.drain(s, args.events, before=lambda p: open_jobs(p, s, jobs, started)))
        dc = sum(sl.cpu_seconds(w.proc.pid) for w in ws) - c0
        bare_n, bare_wall, bare_cpu = asyncio.run(bare_drain(s, [s.topic("fl.gpu")]))
        got = asyncio.run(fail_jobs(s, jobs, started, args.settle_ms / 1000 + s.lateness_ms / 1000 + 60,
                                    args.bg_rate))
        rss = rss_bytes(ws[0].proc.pid)
        return {"workers": n_workers, "wall_rate": args.events / dt, "cpu_rate": args.events / max(dc, 1e-6),
                "cpu_s": dc, "bare_n": bare_n, "bare_wall_rate": bare_n / bare_wall,
                "bare_cpu_rate": bare_n / max(bare_cpu, 1e-6), "incidents": got, "rss": rss,
                "lateness_ms": s.lateness_ms}
    finally:
        for w in ws:
            w.stop()


def node_records(lo: int, hi: int, rnd: int) -> tuple[list, list]:
    """One round of gpu.sample x 8 (fl.gpu) and storage.sample (fl.storage) for nodes ``lo..hi-1``."""
    ts = now_ms()
    gpu, sto = [], []
    for i in range(lo, hi):
        node = f"m{i:05d}"
        key = node.encode()
        for g in range(sl.GPUS):
            gpu.append((key, orjson.dumps({
                "v": 1, "id": f"m{i}-{g}-{rnd}", "ts": ts, "kind": "gpu.sample", "source": "bench", "node": node,
                "data": {"gpu": g, "uuid": f"GPU-{node}-{g}", "util_pct": 97.0, "mem_used_mib": 60000.0,
                         "mem_total_mib": 81920.0, "temp_c": 61.0, "power_w": 520.0, "sm_clock_mhz": 1980.0,
                         "throttle": [], "ecc_sbe": 0, "ecc_dbe": 0, "nvlink_errors": 0, "pcie_replay": 0}})))
        sto.append((key, orjson.dumps({
            "v": 1, "id": f"m{i}-s-{rnd}", "ts": ts, "kind": "storage.sample", "source": "bench", "node": node,
            "data": {"path": "/ckpt", "fs_type": "lustre", "read_iops": 1200.0, "write_iops": 310.5,
                     "read_mbps": 850.0, "write_mbps": 2100.0, "read_lat_ms": 1.8, "write_lat_ms": 4.2,
                     "queue_depth": 3.0, "used_pct": 61.5}})))
    return gpu, sto


def feed_nodes(settings, lo: int, hi: int, rounds: int = 2) -> None:
    """``rounds`` rounds of samples for nodes ``lo..hi-1``, then a fault per partition
    answered (``streams_latency.drain`` of 0 background events): every one is processed."""
    async def send(producer: AIOKafkaProducer) -> None:
        for rnd in range(rounds):
            gpu, sto = node_records(lo, hi, rnd)
            await sl.send_keyed(producer, settings.topic("fl.gpu"), gpu)
            await sl.send_keyed(producer, settings.topic("fl.storage"), sto)

    asyncio.run(sl.drain(settings, 0, before=send))


async def open_jobs_on(settings, n_nodes: int, per: int = 8) -> int:
    """One running job on every ``per`` consecutive simulated nodes."""
    ts = now_ms()
    recs = []
    for i in range(n_nodes // per):
        job, nodes = f"mjob-{i}", [f"m{i * per + k:05d}" for k in range(per)]
        ev = orjson.loads(job_event(job, nodes[0], "running", ts, ts))
        ev["data"].update(nodes=nodes, gpus=8 * per, ranks={str(8 * k): n for k, n in enumerate(nodes)})
        recs.append((job.encode(), orjson.dumps(ev)))
    producer = AIOKafkaProducer(**settings.kafka_kwargs(), linger_ms=5, max_batch_size=1 << 20)
    await producer.start()
    try:
        await sl.send_keyed(producer, settings.topic("fl.sched"), recs)
    finally:
        await producer.stop()
    return len(recs)


def jobs_committed(settings, timeout_s: float = 90) -> str | None:
    """Wait until the worker's group has committed fl.sched to its end (every job record
    processed: the worker commits what it has handled). None when it did; else why not."""
    try:
        asyncio.run(wait_caught_up(settings, default_app_id(settings), ["fl.sched"], timeout_s=timeout_s))
    except (TimeoutError, LookupError) as e:
        return str(e)
    return None


def memory(base, sizes: list[int], args, tmp: str) -> dict[str, Any]:
    s, env = fresh(base, args.settle_ms, tmp)
    w = WorkerProcess(s, f"{tmp}/wmem", loglevel="warning", env=env).start()
    try:
        sl.warm_up(s, 1, [w])
        out: dict[str, Any] = {"rss0": rss_bytes(w.proc.pid), "sizes": {}}
        lo = 0
        for n in sizes:
            feed_nodes(s, lo, n)
            lo = n
            time.sleep(2)
            out["sizes"][n] = rss_bytes(w.proc.pid)
            print(f"  {n:>6} nodes: worker RSS {out['sizes'][n] / 2**20:7.1f} MiB", flush=True)
        time.sleep(2)
        out["rss_before_jobs"] = rss_bytes(w.proc.pid)
        jobs = asyncio.run(open_jobs_on(s, sizes[-1], per=JOB_NODES))
        feed_nodes(s, 0, min(sizes[-1], 64), rounds=1)   # a fault per partition behind the jobs
        out["jobs_awaited"] = jobs_committed(s)
        time.sleep(2)
        out["jobs"] = jobs
        out["rss_jobs"] = rss_bytes(w.proc.pid)
        return out
    finally:
        w.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=100_000, help="drained events per worker count (default 100,000)")
    ap.add_argument("--workers", default="1,2,4", help="worker counts, comma separated (default 1,2,4)")
    ap.add_argument("--jobs", type=int, default=12, help="jobs failed per worker count (incidents; default 12)")
    ap.add_argument("--settle-ms", type=int, default=5000, help="the bench workers' evidence settle time (default 5000)")
    ap.add_argument("--bg-rate", type=float, default=500, help="background ev/s while incidents are awaited (default 500)")
    ap.add_argument("--memory", default="256,2000,16000", help="simulated node counts (default 256,2000,16000)")
    ap.add_argument("--profile", action="store_true", help="py-spy a worker over a drain of 2 x --events (default off)")
    ap.add_argument("--partitions", type=int, default=None)
    ap.add_argument("--only", choices=("throughput", "memory"))
    args = ap.parse_args(argv)
    s = config.load()
    s = replace(s, topic_partitions=args.partitions or s.topic_partitions)
    try:
        asyncio.run(ensure_topics(replace(s, topic_prefix=f"bench{uuid.uuid4().hex[:6]}.")))
    except BrokerUnreachable as e:
        print(e, file=sys.stderr)
        return 2
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores); "
          f"{s.topic_partitions} partitions")
    rc = 0
    with tempfile.TemporaryDirectory() as tmp:
        if args.only in (None, "throughput"):
            rc |= report_throughput(s, args, tmp)
        if args.profile:
            print("\n".join(profile(s, args, tmp)), flush=True)
        if args.only in (None, "memory"):
            rc |= report_memory(s, args, tmp)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return rc


def report_throughput(s, args, tmp: str) -> int:
    """Each worker count in turn; its figures are recorded as soon as it ran (a count that
    fails is recorded as not measured, with the reason, and the next one still runs)."""
    rc = 0
    runs = []
    cmd = f".venv/bin/python bench/worker.py --events {args.events} --workers {args.workers} --jobs {args.jobs}"
    for n in [int(x) for x in args.workers.split(",")]:
        who = f"{n} worker{'s' if n > 1 else ''}"
        r, failures = None, []
        for _attempt in range(2):   # a failed attempt (e.g. no answer in the warm-up) is retried once on fresh topics
            try:
                r = throughput(s, n, args, tmp)
                break
            except RuntimeError as e:
                failures.append(str(e).splitlines()[0])
                print(f"{who}: attempt {len(failures)} FAILED: {failures[-1]}", flush=True)
        if r is None:
            record("worker_events_per_cpu_s" if n == 1 else f"workers_{n}_events_per_s", None, "events/s", command=cmd,
                   note=f"{who} on {s.topic_partitions} partitions: not measured: {'; '.join(failures)}")
            rc = 1
            continue
        r["failed_attempts"] = failures
        runs.append(r)
        lat = sorted(v[0] for v in r["incidents"].values())
        print(f"{who}: drain {args.events:,} events {r['wall_rate']:,.0f} ev/s wall, "
              f"{r['cpu_rate']:,.0f} ev per worker CPU-s ({r['cpu_s']:.1f} CPU-s); bare getmany+orjson.loads of the "
              f"same topic ({r['bare_n']:,} events): {r['bare_cpu_rate']:,.0f} ev/CPU-s, {r['bare_wall_rate']:,.0f} ev/s "
              f"wall; ratio {r['cpu_rate'] / max(r['bare_cpu_rate'], 1e-9):.2f}; incidents {len(lat)}/{args.jobs}"
              + (f", end -> incident p50 {lat[len(lat) // 2] * 1000:.0f} ms max {lat[-1] * 1000:.0f} ms" if lat else ""),
              flush=True)
        record_run(s, args, r, runs[0], cmd)
    if not runs:
        return 1
    first = runs[0]
    same = all(r["incidents"] and {j: v[1] for j, v in r["incidents"].items()} ==
               {j: v[1] for j, v in first["incidents"].items()} for r in runs)
    complete = all(len(r["incidents"]) == args.jobs for r in runs)
    print(f"correctness: {'every' if complete else 'NOT every'} run found all {args.jobs} incidents; root causes "
          f"{'identical' if same else 'DIFFER'} across {', '.join(str(r['workers']) for r in runs)} workers: "
          f"{sorted(Counter(v[1] for v in first['incidents'].values()).items(), key=str)}")
    if not (same and complete):
        rc = 1
    ref = {j: v[1] for j, v in first["incidents"].items()}
    agree = sum(1 for r in runs if len(r["incidents"]) == args.jobs and {j: v[1] for j, v in r["incidents"].items()} == ref)
    record("workers_same_incidents", agree, "worker counts (of those run) with all incidents and the 1st run's root causes",
           baseline="worker counts run", baseline_value=len(runs), command=cmd,
           note=f"{args.jobs} failed jobs per run; {', '.join(str(r['workers']) for r in runs)} workers; "
                f"{len(first['incidents'])} incidents in the {first['workers']}-worker run: "
                f"{sorted(Counter(v[1] for v in first['incidents'].values()).items(), key=str)}")
    lat = sorted(v[0] for r in runs for v in r["incidents"].values())
    if lat:
        floor = args.settle_ms + first["lateness_ms"]
        record("incident_latency_p99_ms", sl.pct(lat, 99) * 1000, "ms",
               baseline="settle + lateness: the event-time wait before an incident by design (bench settle)",
               baseline_value=floor, command=cmd,
               note=f"n={len(lat)} job ends over {len(runs)} runs ({', '.join(str(r['workers']) for r in runs)} workers), "
                    f"settle_ms={args.settle_ms} for the bench (the product default 60,000 ms adds the difference); "
                    f"{args.bg_rate:.0f} ev/s background; root causes {'identical' if same else 'DIFFER'} across runs")
    else:
        record("incident_latency_p99_ms", None, "ms", command=cmd, note="no incident arrived: see the bench output")
        rc = 1
    return rc


def record_run(s, args, r: dict, first: dict, cmd: str) -> None:
    n = r["workers"]
    if r is first and n == 1:
        record("worker_events_per_cpu_s", r["cpu_rate"], "events per worker CPU-second",
               baseline="bare aiokafka getmany + orjson.loads of the same fl.gpu topic, same run (events per CPU-second)",
               baseline_value=r["bare_cpu_rate"], command=cmd,
               note=f"1 worker, drain of {args.events:,} gpu.sample events; target >= 100,000 and >= 0.4 of the bare drain"
                    + _retried(r))
        record("worker_events_per_s", r["wall_rate"], "events/s (wall)",
               baseline="bare aiokafka drain of the same topic, wall", baseline_value=r["bare_wall_rate"], command=cmd)
        return
    one = first if first["workers"] == 1 else None
    record(f"workers_{n}_events_per_cpu_s", r["cpu_rate"], "events per worker CPU-second (all workers' CPU)",
           baseline="1 worker, same bench run" if one else None, baseline_value=one["cpu_rate"] if one else None,
           command=cmd, note=f"{n} workers on {os.cpu_count()} cores; bare drain of the same topic "
                             f"{r['bare_cpu_rate']:,.0f} ev/CPU-s in this run")
    record(f"workers_{n}_events_per_s", r["wall_rate"], "events/s (wall)",
           baseline="1 worker, same bench run" if one else None, baseline_value=one["wall_rate"] if one else None,
           command=cmd,
           note=f"{n} workers sharing {s.topic_partitions} partitions on {os.cpu_count()} cores; "
                f"{r['cpu_rate']:,.0f} ev per worker CPU-s" + (f" (1 worker: {one['cpu_rate']:,.0f})" if one else "") + "; "
                f"bare drain {r['bare_cpu_rate']:,.0f} ev/CPU-s; incidents {len(r['incidents'])}/{args.jobs}" + _retried(r))


def _retried(r: dict) -> str:
    f = r.get("failed_attempts") or []
    return f"; measured on attempt {len(f) + 1} (before: {'; '.join(f)})" if f else ""


def report_memory(s, args, tmp: str) -> int:
    sizes = [int(x) for x in args.memory.split(",")]
    m = memory(s, sizes, args, tmp)
    cmd = f".venv/bin/python bench/worker.py --only memory --memory {args.memory}"
    lo, hi = sizes[0], sizes[-1]
    per_node = (m["sizes"][hi] - m["sizes"][lo]) / max(1, hi - lo)
    per_job = (m["rss_jobs"] - m["rss_before_jobs"]) / max(1, m["jobs"])
    print(f"worker RSS warm, no nodes: {m['rss0'] / 2**20:.1f} MiB; per node {per_node:,.0f} B "
          f"({lo} -> {hi} nodes); {m['jobs']} open jobs on {hi} nodes: {m['rss_jobs'] / 2**20:.1f} MiB, "
          f"{per_job:,.0f} B per open job")
    for n in sizes:
        name = {2000: "worker_rss_mib_2k_nodes", 16000: "worker_rss_mib_16k_nodes"}.get(n, f"worker_rss_mib_{n}_nodes")
        record(name, m["sizes"][n] / 2**20, "MiB", baseline="the same worker warm, before any simulated node",
               baseline_value=m["rss0"] / 2**20, command=cmd,
               note=f"{(m['sizes'][n] - m['rss0']) / n:,.0f} B per node above the warm worker; "
                    "8 GPUs + 1 mount per node, 2 rounds of samples")
    record("worker_bytes_per_node", per_node, "bytes per simulated node (RSS slope)",
           baseline=f"RSS of the warm worker per node at {hi:,} nodes (same run)",
           baseline_value=(m["sizes"][hi] - m["rss0"]) / hi, command=cmd,
           note=f"slope {lo:,} -> {hi:,} nodes; 8 GPUs + 1 mount per node")
    awaited = m["jobs_awaited"]
    record("worker_bytes_per_open_job", per_job, "bytes per open job (RSS)", baseline="bytes per node (same run)",
           baseline_value=per_node, command=cmd,
           note=f"{m['jobs']:,} running jobs of {JOB_NODES} node(s) each on the {hi:,}-node worker; RSS before them "
                f"{m['rss_before_jobs'] / 2**20:.1f} MiB, after {m['rss_jobs'] / 2**20:.1f} MiB; "
                + ("every job record processed (the worker's group committed fl.sched to its end)" if awaited is None
                   else f"job records NOT confirmed processed: {awaited}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
