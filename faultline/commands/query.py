"""``faultline query "SQL" [--format json|table|csv]``: run SQL against the store (or, while
a worker owns it, through the worker's read-only API)."""

from __future__ import annotations

import argparse
import sys

from ..sinks.cli_support import add_store_arg, emit, reader


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("query", help="run SQL against the store", description=__doc__ +
                       " Query parameters use ClickHouse syntax: {name:Type} in the SQL, --param name=value.")
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


def run(args: argparse.Namespace) -> int:
    from ..cli import CliError
    from ..sinks.store import StoreError

    sql = sys.stdin.read() if args.sql == "-" else args.sql
    r = reader(args)
    try:
        cols, rows = r.query_table(sql, parse_params(args.param) or None)
    except StoreError as e:
        raise CliError(f"query failed: {e}") from None
    finally:
        r.close()
    emit(cols, rows, args.format)
    return 0
