"""``faultline replay``: read an event-time range back from the input topics and either
re-publish it to prefixed topics (for a separate worker group) or diagnose it in-process.

Live consumers are not disturbed (replay reads with no consumer group) and live output
topics are never written: ``--to-prefix`` writes ``PREFIX + topic`` only.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

import orjson

from .. import config
from ..cli import CliError
from ..producers.publish import BrokerUnreachable, Publisher
from ..producers.replay import JobScope, RangeStats, RangeTooOld, read_range
from ..producers.timeparse import parse_time
from ..schemas import INCIDENTS, INPUT_TOPICS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="replay a time range of the input topics (re-publish or diagnose)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--since", required=True, help="range start: epoch ms, ISO 8601, or an age: 2h (or --since=-2h)")
    p.add_argument("--until", default="now", help="range end (default now)")
    sel = p.add_mutually_exclusive_group()
    sel.add_argument("--job", help="keep only what this job's diagnosis needs (its events, nodes, ports, paths)")
    sel.add_argument("--incident", metavar="ID", help="like --job, for the job attempt of this incident (looked up on fl.incidents)")
    p.add_argument("--topics", nargs="+", choices=INPUT_TOPICS, default=list(INPUT_TOPICS),
                   help="input topics to read (default: all)")
    out = p.add_mutually_exclusive_group(required=True)
    out.add_argument("--to-prefix", metavar="PREFIX", help="re-publish to PREFIX+topic (e.g. replay1.)")
    out.add_argument("--diagnose", action="store_true", help="diagnose in-process and print the incidents")
    out.add_argument("--out", metavar="FILE", help="write the events as JSON lines (.zst compresses)")
    p.add_argument("--json", action="store_true", help="with --diagnose: one incident JSON per line")
    p.add_argument("--slack", type=int, default=60_000, metavar="MS",
                   help="how far timestamps may trail offset order (default 60000)")
    p.set_defaults(func=run)


async def find_incident(settings: config.Settings, incident_id: str, since: int, until: int) -> dict | None:
    """The highest revision of an incident on fl.incidents within the range (+1 day for late revisions)."""
    best = None
    async for batch in read_range(settings, since, until + 86_400_000, topics=[INCIDENTS]):
        for rec in batch:
            try:
                inc = orjson.loads(rec.value)
            except orjson.JSONDecodeError:
                continue
            if inc.get("id") == incident_id and (best is None or inc.get("revision", 0) > best.get("revision", 0)):
                best = inc
    return best


async def build_scope(settings: config.Settings, job: str, since: int, until: int, slack: int) -> JobScope:
    """The job's nodes, from its sched.job events in the range (ports and paths come with
    ``scoped_inventory``)."""
    scope = JobScope(job)
    async for batch in read_range(settings, since, until, topics=["fl.sched"], slack_ms=slack):
        for rec in batch:
            try:
                scope.learn(orjson.loads(rec.value))
            except orjson.JSONDecodeError:
                continue
    return scope


async def scoped_inventory(settings: config.Settings, scope: JobScope, until: int, slack: int, emit=None) -> None:
    """One pass over fl.inventory from its start (topology and versions are published at
    start-up and on change, so they may predate the range): learn the job's fabric ports and
    storage paths, and hand the job's nodes' inventory records to ``emit`` when given."""
    async for batch in read_range(settings, 0, until, topics=["fl.inventory"], slack_ms=slack):
        kept = []
        for rec in batch:
            try:
                ev = orjson.loads(rec.value)
            except orjson.JSONDecodeError:
                ev = None
            if not isinstance(ev, dict):  # malformed records go along, as in the range
                kept.append(rec)
                continue
            scope.learn_topology(ev)
            if scope.keeps(ev):
                kept.append(rec)
        if kept and emit is not None:
            await emit(kept)


async def collect(settings: config.Settings, args: argparse.Namespace, since: int, until: int,
                  emit, stats: RangeStats) -> None:
    """Read the range (scoped when asked) and hand each kept batch of records to ``emit``."""
    job = args.job
    if args.incident:
        inc = await find_incident(settings, args.incident, since, until)
        if inc is None:
            raise CliError(f"incident {args.incident} not found on {settings.topic(INCIDENTS)} "
                           "in that range: widen --since/--until or check the id with `faultline incidents`")
        job = inc["job"]
    scope = await build_scope(settings, job, since, until, args.slack) if job else None
    if scope is not None and not scope.nodes:
        raise CliError(f"job {job} has no sched.job event in the range: widen --since/--until")
    topics = list(args.topics)
    if scope is not None:
        wanted = "fl.inventory" in topics
        await scoped_inventory(settings, scope, until, args.slack, emit if wanted else None)
        if wanted:
            topics.remove("fl.inventory")
    async for batch in read_range(settings, since, until, topics=topics, stats=stats,
                                  slack_ms=args.slack, strict_retention=True):
        if scope is not None:
            batch = [r for r in batch if scope.keeps_raw(r.value)]
        if batch:
            await emit(batch)


def run(args: argparse.Namespace) -> int:
    settings = config.load(args.config)
    try:
        since, until = parse_time(args.since), parse_time(args.until)
    except ValueError as e:
        raise CliError(str(e)) from None
    if until < since:
        raise CliError("--until is before --since")
    try:
        return asyncio.run(_run(settings, args, since, until))
    except BrokerUnreachable as e:
        raise CliError(str(e)) from None
    except RangeTooOld as e:
        raise CliError(str(e)) from None


async def _run(settings: config.Settings, args: argparse.Namespace, since: int, until: int) -> int:
    from rich.progress import Progress, TextColumn

    stats = RangeStats()
    t0 = time.perf_counter()
    records: list = []
    pub = None
    sink = None
    if args.to_prefix:
        pub = await Publisher(settings).start()
    elif args.out:
        from ..producers.bundle import open_writer

        sink = open_writer(args.out)

    with Progress(TextColumn("{task.description}"), transient=True, disable=not sys.stderr.isatty()) as bar:
        task = bar.add_task("replaying", total=None)

        async def emit(batch) -> None:
            if pub is not None:
                for r in batch:
                    await pub._producer.send(args.to_prefix + r.topic, r.value, key=r.key,  # noqa: SLF001
                                             timestamp_ms=r.timestamp)
            elif sink is not None:
                for r in batch:
                    sink.write(r.value + b"\n")
            else:
                records.extend(batch)
            n = len(records) if pub is None and sink is None else stats.kept
            rate = n / max(1e-6, time.perf_counter() - t0)
            bar.update(task, description=f"replaying: {stats.read:,} read, {n:,} kept, {rate:,.0f} events/s")

        try:
            await collect(settings, args, since, until, emit, stats)
        finally:
            if pub is not None:
                await pub.flush()
                await pub.stop()
            if sink is not None:
                sink.close()
    elapsed = time.perf_counter() - t0
    print(f"replay: {stats.read:,} records read from {stats.partitions} partitions, "
          f"{stats.kept:,} in range, {elapsed:.1f} s", file=sys.stderr)
    if args.diagnose:
        print_diagnosis(diagnose_records(records, settings=settings), as_json=args.json)
    return 0


def diagnose_records(records: list, lateness_ms: int | None = None, settings: config.Settings | None = None):
    """The offline pipeline of ``faultline diagnose`` (``streams.offline``: the worker's
    Engine and config) over replayed records, in record-timestamp order; returns it, finished."""
    from ..streams.offline import OfflinePipeline

    records.sort(key=lambda r: (r.timestamp, r.topic, r.partition, r.offset))
    pipe = OfflinePipeline.from_settings(settings, lateness_ms=lateness_ms, findings=False)
    for i in range(0, len(records), 10_000):
        pipe.process([r.value for r in records[i:i + 10_000]])
    pipe.finish()
    return pipe


def print_diagnosis(eng, *, as_json: bool) -> None:
    from ..schemas import encode
    from .diagnose import _report

    if as_json:
        out = sys.stdout.buffer
        for inc in eng.incidents():
            out.write(encode(inc) + b"\n")
        out.flush()
    else:
        _report(eng, sys.stdout)
