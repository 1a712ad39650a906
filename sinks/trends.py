"""Trend queries: ``sinks/queries/<name>.sql`` files with a docstring-like header.

Header lines (SQL comments at the top of the file)::

    -- name: repeat-offenders
    -- answers: what it answers (may continue on indented comment lines)
    -- param: since_ms Int64 = 0   description

Parameters are ClickHouse query parameters (``{since_ms:Int64}`` in the body), the same
syntax for chDB and a server; defaults are JSON literals.

Counting rule for every query that reads ``incidents``: each incident counts by its latest
revision (``incidents FINAL``, the table is a ReplacingMergeTree on ``revision``), and one
whose latest revision is withdrawn (``state != 'recovered'``: a stall that resolved itself,
``streams.engine`` ``_withdraw``) counts nowhere. ``tests/test_sinks_trends.py`` checks it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Mapping

import orjson

from .store import Store

__all__ = ["TrendQuery", "Param", "load_queries", "get_query", "run_trend", "TREND_NAMES", "WITHDRAWN_STATE"]

#: the state of an incident's last revision when the worker withdrew it (``Engine._withdraw``:
#: a stall that resolved itself); such an incident counts nowhere
WITHDRAWN_STATE = "recovered"


@dataclass(frozen=True)
class Param:
    name: str
    type: str
    default: Any
    help: str


@dataclass(frozen=True)
class TrendQuery:
    name: str
    answers: str
    params: tuple[Param, ...]
    sql: str
    path: str = field(default="", compare=False)

    def bind(self, values: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Defaults overridden by ``values`` (unknown names raise ``KeyError``)."""
        out = {p.name: p.default for p in self.params}
        for k, v in (values or {}).items():
            if k not in out:
                raise KeyError(f"trend {self.name} has no parameter {k!r} (has: {', '.join(out)})")
            if v is not None:
                out[k] = _coerce(self.params[[p.name for p in self.params].index(k)], v)
        return out


_PARAM = re.compile(r"^--\s*param:\s*(\w+)\s+(\S+)\s*=\s*(.+?)(?:\s{2,}(.*))?$")


def _coerce(p: Param, v: Any) -> Any:
    if not isinstance(v, str):
        return v
    t = p.type
    if t.startswith(("Int", "UInt")):
        return int(v)
    if t.startswith("Float"):
        return float(v)
    if t.startswith("Array"):
        return [x.strip() for x in v.split(",") if x.strip()] if not v.startswith("[") else orjson.loads(v)
    return v


def parse(text: str, path: str = "") -> TrendQuery:
    name = answers = ""
    params: list[Param] = []
    last = None
    for line in text.splitlines():
        s = line.strip()
        if not s.startswith("--"):
            if s:
                break
            continue
        if m := re.match(r"^--\s*name:\s*(\S+)", s):
            name, last = m.group(1), None
        elif m := re.match(r"^--\s*answers:\s*(.*)", s):
            answers, last = m.group(1), "answers"
        elif m := _PARAM.match(s):
            params.append(Param(m.group(1), m.group(2), orjson.loads(m.group(3)), (m.group(4) or "").strip()))
            last = None
        elif last == "answers":
            answers += " " + s.lstrip("-").strip()
    if not name:
        raise ValueError(f"{path}: trend query has no '-- name:' header")
    return TrendQuery(name, answers.strip(), tuple(params), text, path)


_cache: dict[str, TrendQuery] | None = None


def load_queries() -> dict[str, TrendQuery]:
    """Every trend query shipped in ``sinks/queries``, by name."""
    global _cache
    if _cache is None:
        out = {}
        for f in sorted(resources.files("faultline.sinks").joinpath("queries").iterdir(), key=lambda p: p.name):
            if f.name.endswith(".sql"):
                q = parse(f.read_text(), f.name)
                out[q.name] = q
        _cache = out
    return dict(_cache)


TREND_NAMES = ("repeat-offenders", "lost-compute", "mtbf", "ettr", "changes", "checkpoints")


def get_query(name: str) -> TrendQuery:
    qs = load_queries()
    if name not in qs:
        raise KeyError(f"no trend query {name!r}; known: {', '.join(sorted(qs))}")
    return qs[name]


def run_trend(store: Store, name: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Run trend ``name`` with its defaults overridden by ``params``; rows as dicts."""
    q = get_query(name)
    return store.query(q.sql, q.bind(params))
