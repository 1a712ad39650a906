"""``faultline bundle export ID --out FILE``: the events behind one incident plus the incident,
as one portable JSON-lines file (``.zst`` compresses). ``faultline diagnose FILE`` on the
bundle reproduces the incident offline, with no broker."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from .. import config
from ..cli import CliError
from ..producers.bundle import header, open_writer
from ..producers.publish import BrokerUnreachable
from ..producers.timeparse import parse_time

#: how far before the attempt's start and after its end (or retry) a bundle reaches
LOOKBACK_MS = 30 * 60_000
AFTER_MS = 15 * 60_000


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bundle", help="export one incident with the events behind it",
                       description=__doc__)
    bsub = p.add_subparsers(dest="bundle_cmd", metavar="ACTION", required=True)
    e = bsub.add_parser("export", help="write a bundle for incident ID", description=__doc__)
    e.add_argument("incident", metavar="ID")
    e.add_argument("--out", required=True, metavar="FILE", help="bundle path (.jsonl, or .jsonl.zst)")
    e.add_argument("--search-since", default="-7d",
                   help="how far back to look for the incident on fl.incidents (default -7d)")
    e.set_defaults(func=run)


def window_of(incident: dict) -> tuple[int, int]:
    """The event-time range a bundle keeps for an incident."""
    start = incident.get("start_ts") or incident["failure_ts"] - 6 * 3_600_000
    end = incident["failure_ts"]
    retry = incident.get("retry") or {}
    if retry.get("ts"):
        end = max(end, retry["ts"])
    return start - LOOKBACK_MS, end + AFTER_MS


def writable_out(path: str) -> None:
    """Refuse an --out the bundle cannot be written to, before any scan of the topics."""
    out = Path(path)
    parent = out.parent
    if out.is_dir():
        raise CliError(f"--out {path} is a directory: give a file name (e.g. {out / 'incident.jsonl.zst'})")
    if not parent.is_dir():
        raise CliError(f"--out {path}: directory {parent} does not exist: create it (mkdir -p {parent}) "
                       "or choose another path")
    if not os.access(parent, os.W_OK):
        raise CliError(f"--out {path}: directory {parent} is not writable by this user: choose another path")


def run(args: argparse.Namespace) -> int:
    writable_out(args.out)
    settings = config.load(args.config)
    try:
        return asyncio.run(_export(settings, args))
    except BrokerUnreachable as e:
        raise CliError(str(e)) from None


async def prefix_hint(settings: config.Settings) -> str:
    """Where else incidents are: the other topic prefixes holding an fl.incidents topic (the
    demo writes under ``demo.<run>.``), as the FAULTLINE_TOPIC_PREFIX to set."""
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(**settings.kafka_kwargs(), request_timeout_ms=10_000)
    try:
        await admin.start()
        names = await admin.list_topics()
    except Exception:  # noqa: BLE001 - only a hint
        return ""
    finally:
        await admin.close()
    others = sorted(t[: -len("fl.incidents")] for t in names
                    if t.endswith("fl.incidents") and t != settings.topic("fl.incidents"))
    if not others:
        return ""
    return "; other incident topics on this broker: " + ", ".join(
        "FAULTLINE_TOPIC_PREFIX=" + (p or "''") for p in others[:5]) + (" ..." if len(others) > 5 else "")


async def _export(settings: config.Settings, args: argparse.Namespace) -> int:
    from ..producers.replay import JobScope, read_range
    from .replay import build_scope, find_incident, scoped_inventory

    since = parse_time(args.search_since)
    inc = await find_incident(settings, args.incident, since, parse_time("now"))
    if inc is None:
        raise CliError(f"incident {args.incident} not found on {settings.topic('fl.incidents')} "
                       f"since {args.search_since}: check the id (`faultline incidents`) or widen --search-since"
                       + await prefix_hint(settings))
    lo, hi = window_of(inc)
    scope: JobScope = await build_scope(settings, inc["job"], lo, hi, 60_000)
    out = open_writer(args.out)
    n = 0
    try:
        out.write(header(inc, lo, hi) + b"\n")

        async def write(records) -> None:
            nonlocal n
            for r in records:
                out.write(r.value + b"\n")
            n += len(records)

        await scoped_inventory(settings, scope, hi, 60_000, write)
        topics = ["fl.gpu", "fl.hw", "fl.net", "fl.storage", "fl.sched", "fl.runtime"]
        async for batch in read_range(settings, lo, hi, topics=topics):
            await write([r for r in batch if scope.keeps_raw(r.value)])
    finally:
        out.close()
    print(f"bundle: incident {inc['id']} (job {inc['job']} attempt {inc.get('attempt')}), "
          f"{n:,} events -> {args.out}", file=sys.stderr)
    return 0
