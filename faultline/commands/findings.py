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

KINDS = ("repeat_offender", "change_regression", "version_drift")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("findings", help="list proactive findings (store), or compute them from a file",
                       description=__doc__)
    p.add_argument("--store", metavar="PATH", help="chDB store directory (default: settings store_path / clickhouse_url)")
    p.add_argument("--from", dest="from_file", metavar="FILE",
                   help="compute offline from a JSON-lines file of events (.jsonl, .jsonl.zst, - for stdin)")
    p.add_argument("--json", action="store_true", help="one finding per line as JSON")
    p.add_argument("--kind", choices=KINDS, help="only this kind")
    p.add_argument("--dimension", help="only this dimension (node, gpu, port, segment, image, driver, path, version, job)")
    p.add_argument("--limit", type=int, default=200, help="at most N findings, most significant first (default 200)")
    p.add_argument("--lateness-ms", type=int, default=None, help="reorder bound for --from (default: settings)")
    p.set_defaults(func=run)


def compute_from_file(path: str, lateness_ms: int | None = None) -> list[Any]:
    """Run Engine + FindingsRunner over a file; the latest emission of every finding."""
    from .. import config as _config
    from ..streams.engine import Engine, EngineConfig
    from ..streams.findings import FindingsRunner
    from .diagnose import _lines, _open

    if lateness_ms is None:
        try:
            lateness_ms = _config.load().lateness_ms
        except Exception:  # a broken config file must not stop an offline run
            lateness_ms = 10_000
    runner = FindingsRunner(Engine(EngineConfig(lateness_ms=lateness_ms)))
    fh = _open(path)
    try:
        for batch in _lines(fh):
            runner.process([ln for ln in batch if ln.strip()])
        runner.finish()
    finally:
        if fh is not sys.stdin.buffer:
            fh.close()
    inv = runner.engine.stats.invalid
    if inv:
        print(f"{inv} invalid input lines skipped", file=sys.stderr)
    return list(runner.findings.values())


def load_from_store(args: argparse.Namespace) -> list[dict[str, Any]]:
    from .. import config as _config
    from ..cli import CliError
    from ..sinks.store import StoreError, open_store

    settings = _config.load(args.config) if getattr(args, "config", None) else _config.load()
    try:
        store = open_store(settings, path=args.store)
    except StoreError as e:
        raise CliError(f"{e}; pass --store PATH or stop the process holding the store") from None
    where, params = [], {}
    if args.kind:
        where.append("kind = {kind:String}")
        params["kind"] = args.kind
    if args.dimension:
        where.append("dimension = {dim:String}")
        params["dim"] = args.dimension
    sql = ("SELECT id, toUnixTimestamp64Milli(ts) AS ts, kind, dimension, subject, "
           "toUnixTimestamp64Milli(window_start) AS window_start, toUnixTimestamp64Milli(window_end) AS window_end, "
           "count, exposure, exposure_unit, fleet_rate, score, severity, summary, action, incidents "
           "FROM findings FINAL" + (" WHERE " + " AND ".join(where) if where else "")
           + " ORDER BY score ASC, ts DESC LIMIT {lim:UInt32}")
    params["lim"] = max(0, args.limit)
    try:
        return store.query(sql, params)
    finally:
        store.close()


def _fmt_ts(ms: int) -> str:
    return show(ms, seconds=False)


def run(args: argparse.Namespace) -> int:
    from ..schemas.outputs import Finding

    if args.from_file:
        found = compute_from_file(args.from_file, args.lateness_ms)
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
