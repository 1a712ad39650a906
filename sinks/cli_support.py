"""Shared bits of the store-facing CLI commands (ingest, incidents, explain, trends, query)."""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import re
import sys
from typing import Any, Iterable, Sequence

import orjson

from ..humantime import show

__all__ = ["add_store_arg", "settings_of", "reader", "print_table", "emit", "parse_time", "fmt_ms"]


def add_store_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", metavar="PATH", default=None,
                   help="chDB data directory (default: settings store_path, var/store; "
                        "ignored when FAULTLINE_CLICKHOUSE_URL is set)")


def settings_of(args: argparse.Namespace) -> Any:
    from faultline import config
    from faultline.cli import CliError

    try:
        return config.load(getattr(args, "config", None))
    except config.ConfigError as e:
        raise CliError(str(e)) from None


def reader(args: argparse.Namespace) -> Any:
    """The store, or the worker's API when a worker owns the chDB directory."""
    from faultline.cli import CliError

    from .client import open_reader
    from .store import StoreError

    from faultline.commands._store import existing_store

    existing_store(args)   # a read never creates a store (`--store /typo` made an empty one)
    settings = settings_of(args)
    try:
        return open_reader(settings, getattr(args, "store", None))
    except StoreError as e:
        raise CliError(str(e)) from None


def parse_time(s: str | None) -> int | None:
    """Epoch ms from: epoch ms/seconds, ISO-8601 (UTC if no zone), or a relative age like
    ``2h``, ``3d``, ``45m``, ``1w`` (before now)."""
    if s is None:
        return None
    s = s.strip()
    if re.fullmatch(r"\d+", s):
        v = int(s)
        return v if v > 10**11 else v * 1000
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhdw])", s)
    if m:
        mult = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[m.group(2)]
        return int((_dt.datetime.now(_dt.timezone.utc).timestamp() - float(m.group(1)) * mult) * 1000)
    try:
        d = _dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        from faultline.cli import CliError

        raise CliError(f"cannot read time {s!r}: give epoch ms, ISO-8601 (2026-01-31T12:00) or an age (6h, 2d)") from None
    if d.tzinfo is None:
        d = d.replace(tzinfo=_dt.timezone.utc)
    return int(d.timestamp() * 1000)


def fmt_ms(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    return show(int(v))


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e6 else f"{v:.0f}"
    if isinstance(v, (list, dict)):
        return orjson.dumps(v).decode()
    return str(v)


def print_table(cols: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title, box=None, pad_edge=False, header_style="bold")
    for c in cols:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*(_cell(v) for v in r))
    Console(highlight=False, width=None if sys.stdout.isatty() else 200).print(t)


def emit(cols: Sequence[str], rows: list[Sequence[Any]], fmt: str, title: str | None = None) -> None:
    """Print rows as ``json`` (one object per line), ``csv`` or a ``table``."""
    out = sys.stdout
    if fmt == "json":
        buf = b"".join(orjson.dumps(dict(zip(cols, r))) + b"\n" for r in rows)
        out.buffer.write(buf)
        out.flush()
    elif fmt == "csv":
        w = csv.writer(out)
        w.writerow(cols)
        for r in rows:
            w.writerow(["" if v is None else (orjson.dumps(v).decode() if isinstance(v, (list, dict)) else v) for v in r])
    else:
        print_table(cols, rows, title)
