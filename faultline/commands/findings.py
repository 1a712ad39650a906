"""``faultline findings [--store PATH] [--json] [--from FILE.jsonl]``: list proactive findings
(repeat offenders, change regressions, version drift) from the ClickHouse store, or compute
them offline from a file of contract events through the same Engine + findings tracker the
stream runs."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import msgspec
import orjson

from ..humantime import show
from ..sinks.cli_support import add_store_arg, settings_of

KINDS = ("repeat_offender", "change_regression", "version_drift")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("findings", help="list proactive findings (store), or compute them from a file",
                       description=__doc__)
    add_store_arg(p)
    p.add_argument("--from", dest="from_file", metavar="FILE",
                   help="compute offline from a JSON-lines file of events (.jsonl, .jsonl.zst, - for stdin)")
    p.add_argument("--json", action="store_true", help="one finding per line as JSON")
    p.add_argument("--kind", choices=KINDS, help="only this kind")
    p.add_argument("--dimension", help="only this dimension (node, gpu, port, segment, image, driver, path, version, job)")
    p.add_argument("--limit", type=int, default=200, help="at most N findings, most significant first (default 200)")
    p.add_argument("--lateness-ms", type=int, default=None, help="reorder bound for --from (default: settings)")
    p.set_defaults(func=run)


def compute_from_file(path: str, lateness_ms: int | None = None, settings: Any = None) -> list[Any]:
    """The offline pipeline (``streams.offline``: the worker's Engine and config + the
    findings runner, as ``faultline ingest``) over a file; the latest revision of every finding."""
    from ..cli import CliError
    from ..streams.offline import OfflinePipeline
    from .diagnose import _open

    pipe = OfflinePipeline.from_settings(settings, lateness_ms=lateness_ms)
    fh = _open(path)
    try:
        pipe.feed_file(fh)
    except (OSError, EOFError, ValueError) as e:   # a truncated or corrupt .gz / .zst
        raise CliError(f"{path}: cannot read it: {e}") from None
    finally:
        if fh is not sys.stdin.buffer:
            fh.close()
    why = pipe.no_events("stdin" if path == "-" else path)
    if why:
        raise CliError(why)
    inv = pipe.stats.invalid
    if inv:
        print(f"{inv} invalid input lines skipped", file=sys.stderr)
    return pipe.findings()


SQL = ("SELECT id, toUnixTimestamp64Milli(ts) AS ts, kind, dimension, subject, "
       "toUnixTimestamp64Milli(window_start) AS window_start, toUnixTimestamp64Milli(window_end) AS window_end, "
       "count, exposure, exposure_unit, fleet_rate, score, severity, summary, action, incidents "
       "FROM findings FINAL")


def load_from_store(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The store's findings (latest revision each); through the worker's SQL API when a
    worker holds the chDB directory (``sinks.cli_support.reader``, as ``faultline query``)."""
    from ..cli import CliError
    from ..sinks.cli_support import reader
    from ..sinks.store import StoreError

    where, params = [], {}
    if args.kind:
        where.append("kind = {kind:String}")
        params["kind"] = args.kind
    if args.dimension:
        where.append("dimension = {dim:String}")
        params["dim"] = args.dimension
    sql = SQL + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY score ASC, ts DESC LIMIT {lim:UInt32}"
    params["lim"] = max(0, args.limit)
    r = reader(args)
    try:
        return r.query(sql, params)
    except StoreError as e:
        raise CliError(f"reading findings from {getattr(r, 'location', 'the store')} failed: {e}") from None
    finally:
        r.close()


def _fmt_ts(ms: int) -> str:
    return show(ms, seconds=False)


def run(args: argparse.Namespace) -> int:
    from ..schemas.outputs import Finding

    if args.from_file:
        found = compute_from_file(args.from_file, args.lateness_ms, settings_of(args))
        if args.kind:
            found = [f for f in found if f.kind == args.kind]
        if args.dimension:
            found = [f for f in found if f.dimension == args.dimension]
        found.sort(key=lambda f: (f.score, -f.ts, f.id))
        rows = [msgspec.to_builtins(f) for f in found[: max(0, args.limit)]]
    else:
        rows = load_from_store(args)
        rows = [msgspec.to_builtins(msgspec.convert(r, Finding)) for r in rows]
    out = sys.stdout
    if args.json:
        for r in rows:
            out.buffer.write(orjson.dumps(r) + b"\n")
        out.flush()
        return 0
    if not rows:
        print("no findings" + (" in the store" if not args.from_file else ""))
        return 0
    for r in rows:
        print(f"[{r['severity']:8}] {r['kind']:17} {r['subject']}  ({_fmt_ts(r['window_start'])} .. "
              f"{_fmt_ts(r['window_end'])})  id={r['id']}")
        print(f"    {r['summary']}")
        print(f"    action: {r['action']}")
        if r["incidents"]:
            inc = r["incidents"]
            print(f"    incidents: {', '.join(inc[:8])}" + (f" (+{len(inc) - 8})" if len(inc) > 8 else ""))
    print(f"{len(rows)} findings")
    return 0
