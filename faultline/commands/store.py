"""``faultline store migrate|optimize``: maintenance of the store (the only commands that
change its schema or merge its parts; `faultline query` is read-only).

  migrate             apply the schema migrations not applied yet (sinks/sql/*.sql); prints
                      the versions applied (none: the store is current)
  optimize [--table T]  merge parts now (OPTIMIZE TABLE ... FINAL) so replaced rows collapse;
                      every table of the store by default

Both open the store directly: with the embedded chDB store, stop the worker or sink that owns
it first (chDB allows one process per data directory)."""

from __future__ import annotations

import argparse

from ..sinks.cli_support import add_store_arg, settings_of


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("store", help="store maintenance: migrate, optimize", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    ops = p.add_subparsers(dest="op", metavar="OP", required=True)
    m = ops.add_parser("migrate", help="apply pending schema migrations")
    add_store_arg(m)
    m.set_defaults(func=run_migrate)
    o = ops.add_parser("optimize", help="merge parts (OPTIMIZE TABLE ... FINAL)")
    o.add_argument("--table", action="append", default=[], metavar="T", help="only this table (repeatable)")
    add_store_arg(o)
    o.set_defaults(func=run_optimize)


def _open(args: argparse.Namespace, migrate: bool) -> object:
    from ..cli import CliError
    from ..sinks.store import StoreError, open_store

    try:
        return open_store(settings_of(args), path=args.store, migrate=migrate)
    except StoreError as e:
        raise CliError(f"{e}; maintenance needs the store itself: stop the worker or sink first") from None


def run_migrate(args: argparse.Namespace) -> int:
    from ..cli import CliError
    from ..sinks.store import StoreError

    store = _open(args, migrate=False)
    try:
        applied = store.migrate()  # type: ignore[attr-defined]
    except StoreError as e:
        raise CliError(str(e)) from None
    finally:
        store.close()  # type: ignore[attr-defined]
    print(f"applied migrations {', '.join(f'{v:03d}' for v in applied)}" if applied else "store is up to date")
    return 0


def run_optimize(args: argparse.Namespace) -> int:
    from ..cli import CliError
    from ..sinks.store import StoreError, store_tables

    store = _open(args, migrate=True)
    try:
        known = {r["name"] for r in store.query(  # type: ignore[attr-defined]
            "SELECT name FROM system.tables WHERE database = currentDatabase() AND engine LIKE '%MergeTree'")}
        tables = args.table or sorted(known & store_tables())
        for t in tables:
            if t not in known:
                raise CliError(f"table {t} is not a MergeTree table of the store ({', '.join(sorted(known))})")
            store.execute(f"OPTIMIZE TABLE {t} FINAL")  # type: ignore[attr-defined]
            print(f"optimized {t}")
    except StoreError as e:
        raise CliError(str(e)) from None
    finally:
        store.close()  # type: ignore[attr-defined]
    return 0
