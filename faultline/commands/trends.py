"""``faultline trends NAME [--json]``: run a trend query (sinks/queries/NAME.sql):
repeat-offenders, lost-compute, mtbf, ettr, changes, checkpoints. Without NAME, list them."""

from __future__ import annotations

import argparse
import sys

from ..sinks.cli_support import add_store_arg, emit, parse_time, reader


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trends", help="run a trend query (repeat-offenders, lost-compute, mtbf, ettr, changes, checkpoints)",
                       description=__doc__)
    p.add_argument("name", nargs="?", help="trend query name; omit to list them with their parameters")
    p.add_argument("--json", action="store_true", help="one JSON object per row")
    p.add_argument("--csv", action="store_true", help="CSV with a header")
    p.add_argument("--since", default=None, metavar="T", help="window start (sets since_ms): epoch ms, ISO-8601, or 7d")
    p.add_argument("--until", default=None, metavar="T", help="window end (sets until_ms)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="set a query parameter (see `faultline trends` for each query's)")
    add_store_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..cli import CliError
    from ..sinks.store import StoreError
    from ..sinks.trends import get_query, load_queries
    from .query import parse_params

    if not args.name:
        for q in load_queries().values():
            print(f"{q.name}\n  {q.answers}")
            for prm in q.params:
                print(f"  --param {prm.name}=  ({prm.type}, default {prm.default!r}) {prm.help}")
        return 0
    try:
        q = get_query(args.name)
    except KeyError as e:
        raise CliError(f"{e.args[0]}") from None
    values: dict = dict(parse_params(args.param))
    names = {p.name for p in q.params}
    if args.since is not None:
        if "since_ms" not in names:
            raise CliError(f"trend {q.name} has no time window start")
        values["since_ms"] = parse_time(args.since)
    if args.until is not None:
        if "until_ms" not in names:
            raise CliError(f"trend {q.name} has no time window end")
        values["until_ms"] = parse_time(args.until)
    try:
        bound = q.bind(values)
    except (KeyError, ValueError) as e:
        raise CliError(str(e.args[0] if e.args else e)) from None
    r = reader(args)
    try:
        cols, rows = r.query_table(q.sql, bound)
    except StoreError as e:
        raise CliError(f"trend {q.name} failed: {e}") from None
    finally:
        r.close()
    if not rows and not (args.json or args.csv):
        print(f"{q.name}: no rows (is the store empty? `faultline ingest FILE`)", file=sys.stderr)
        return 0
    emit(cols, rows, "json" if args.json else "csv" if args.csv else "table", title=q.name)
    return 0
