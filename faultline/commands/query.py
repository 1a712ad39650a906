"""``faultline query "SQL" [--format json|table|csv]``: run a read-only query against the
store (or, while a worker or sink owns it, through its read-only API).

Only one SELECT or WITH statement is accepted, on every path; anything else (DROP, INSERT,
ALTER, SETTINGS, INTO OUTFILE...) exits 2 without running. On the store itself the query
runs with ``readonly = 1``; through the API it must also pass the API's allow-list (the
store's own tables, safe functions; see sinks/api.py). Maintenance is `faultline store`."""

from __future__ import annotations

import argparse
import sys

from ..sinks.cli_support import add_store_arg, emit, reader


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("query", help="run a read-only SELECT/WITH query against the store", description=__doc__ +
                       " Query parameters use ClickHouse syntax: {name:Type} in the SQL, --param name=value.",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sql", help="the SQL, or - to read it from stdin")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table",
                   help="table (default), json (one object per line) or csv")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="query parameter")
    add_store_arg(p)
    p.set_defaults(func=run)


def parse_params(items: list[str]) -> dict[str, str]:
    from ..cli import CliError

    out = {}
    for it in items:
        k, sep, v = it.partition("=")
        if not sep or not k:
            raise CliError(f"--param {it!r}: write it as NAME=VALUE")
        out[k.strip()] = v
    return out


def readonly_sql(sql: str) -> str:
    """``sql`` checked (one SELECT/WITH, no SETTINGS/FORMAT/INTO) and run with readonly = 1."""
    from ..sinks.sqlcheck import check_select

    toks = check_select(sql)
    body = sql[toks[0].pos:toks[-1].end]
    return f"SELECT * FROM (\n{body}\n) SETTINGS readonly = 1"


def run(args: argparse.Namespace) -> int:
    from ..cli import CliError
    from ..sinks.store import QueryRejected, StoreError

    sql = sys.stdin.read() if args.sql == "-" else args.sql
    try:
        checked = readonly_sql(sql)
    except QueryRejected as e:
        raise CliError(f"query refused: {e}") from None
    params = parse_params(args.param) or None
    r = reader(args)
    try:
        # the API checks and wraps the query itself: send it as written
        cols, rows = r.query_table(sql if r.backend == "api" else checked, params)
    except StoreError as e:
        raise CliError(f"query failed: {e}") from None
    finally:
        r.close()
    emit(cols, rows, args.format)
    return 0
