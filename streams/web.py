"""The incident web pages served by the worker and the sink (Faust web views), rendered from
the Jinja2 templates in ``streams/templates/`` (autoescaped: every value from a record is
escaped, none is trusted as markup).

- ``/incidents``: the list, with filters (category, node, state, time range, text), a sort
  and an auto-refresh, all plain GET parameters of one form (a filtered view is a URL);
- ``/incidents/{id}``: one incident (by id or job): its timeline with one swimlane per layer,
  the culprit highlighted and a legend of the lines, the hypotheses best first, the evidence
  with identical lines grouped (``xN``);
- ``/fleet``: live alerts (the last ``live`` minutes), the latest finding per subject and the
  incidents of the last 24 h by category;
- ``/history?node=|gpu=|port=``: everything about one node, GPU or switch port; every node,
  GPU and port the pages show links there.

Pages are self-contained HTML (inline CSS and SVG, no scripts, no external assets), so they
work on a closed network and in a headless browser; auto-refresh is a ``<meta refresh>``.
The ``render_*`` functions are pure (records in, HTML out): the same page renders without a
server. The views read the store through its owner (``store.aquery``, never
chDB on the event loop), each read bounded by ``PAGE_TIMEOUT_S`` on both sides; every view
checks the API token (``sinks.api.authorize``) whatever middleware the app has.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping, TYPE_CHECKING
from urllib.parse import urlencode

import orjson

from ..schemas.outputs import CATEGORIES, LAYERS

if TYPE_CHECKING:
    from .services import Services

log = logging.getLogger("faultline.web")

TEMPLATES = Path(__file__).with_name("templates")
LANE_H = 46
LEFT = 110
WIDTH = 1100

#: the page's reads wait at most this long for the store (queued behind ingest + running)
PAGE_TIMEOUT_S = 10.0
#: rows of the list at most (``limit=`` may ask for fewer)
LIST_LIMIT = 200
MAX_LIST_LIMIT = 1000
#: an alert is live this long after its last occurrence (as ``notify``'s ``alert_ttl_s``)
LIVE_MIN = 15
MAX_LIVE_MIN = 7 * 24 * 60
#: rows per section of the fleet and history pages
FLEET_ROWS = 100
#: the fleet page's incident summary covers this window
FLEET_INCIDENT_WINDOW_MS = 24 * 3_600_000
#: auto-refresh choices, s (0: off); the fleet page refreshes every FLEET_REFRESH_S unless told
REFRESH_CHOICES = (0, 10, 30, 60, 300)
FLEET_REFRESH_S = 30
#: relative time ranges of the list, name -> ms
RANGES: dict[str, int] = {"1h": 3_600_000, "6h": 6 * 3_600_000, "24h": 24 * 3_600_000,
                          "7d": 7 * 24 * 3_600_000, "30d": 30 * 24 * 3_600_000}
#: the list's sort keys -> SQL column
SORTS: dict[str, str] = {"failure_ts": "failure_ts", "lost_gpu_hours": "lost_gpu_hours",
                         "confidence": "confidence", "job": "job", "category": "category"}
#: the latest revision of a withdrawn incident (a stall that resolved itself): not listed
#: unless asked for by state
WITHDRAWN = "recovered"
#: subjects with a history page: kind -> incident column holding them
HISTORY_KINDS: dict[str, str] = {"node": "affected_nodes", "gpu": "affected_gpus", "port": "affected_ports"}
_MAX_TEXT = 200
_STOP = f" SETTINGS max_execution_time = {int(PAGE_TIMEOUT_S)}"


class BadRequest(ValueError):
    """A page parameter the page cannot use (answered 400 with the reason)."""


# ------------------------------------------------------------------ formatting helpers
def _utc(ms: int | None) -> str:
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _hms(ms: float) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%H:%M:%S")


def history_url(subject: str | None) -> str | None:
    """``/history?...`` for a node, GPU or port named as a component (``gpu:n1/3``,
    ``node:n1``, ``port:leaf-03/Eth1/7``); None for anything else."""
    kind, _, rest = (subject or "").partition(":")
    if kind in HISTORY_KINDS and rest:
        return "/history?" + urlencode({kind: rest})
    return None


@lru_cache(maxsize=1)
def environment() -> Any:
    """The pages' Jinja2 environment (autoescape on for every template)."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters.update(utc=_utc, pct=lambda v: f"{(v or 0):.0%}", hist=history_url)
    env.globals.update(node_url=lambda n: "/history?" + urlencode({"node": n}) if n else None,
                       gpu_url=lambda g: "/history?" + urlencode({"gpu": g}) if g else None,
                       port_url=lambda p: "/history?" + urlencode({"port": p}) if p else None)
    return env


def _render(template: str, **ctx: Any) -> str:
    return environment().get_template(template).render(**ctx)


def error_page(title: str, reason: str) -> str:
    return _render("error.html", title=title, reason=reason)


# ------------------------------------------------------------------ the incident page
def culprit_ids(inc: dict) -> set[str]:
    """Evidence ids that back the root cause (empty when the cause names none)."""
    return set((inc.get("root_cause") or {}).get("evidence") or ())


def _culprit_nodes(inc: dict) -> set[str]:
    comp = (inc.get("root_cause") or {}).get("component", "")
    kind, _, rest = comp.partition(":")
    if kind in ("gpu", "node"):
        return {rest.split("/")[0]}
    return set()


def _hot(inc: dict) -> Any:
    """``hot(evidence item)``: does it back the culprit (its evidence, else its node's)?"""
    culprits, cnodes = culprit_ids(inc), _culprit_nodes(inc)
    return lambda e: e["id"] in culprits or (not culprits and e.get("node") in cnodes)


def timeline_svg(inc: dict) -> str:
    """Swimlanes per layer; each evidence item a dot at its time, the culprit's in red; the
    failure and the last checkpoint as vertical lines (the page's legend names them)."""
    ev = sorted(inc.get("evidence") or [], key=lambda e: e["ts"])
    t0 = min([e["ts"] for e in ev] + [inc.get("start_ts") or inc["failure_ts"]])
    t1 = max([e["ts"] for e in ev] + [inc["failure_ts"]])
    span = max(1, t1 - t0)
    x = lambda ts: round(LEFT + (ts - t0) / span * (WIDTH - LEFT - 20), 1)  # noqa: E731
    lanes = list(LAYERS)
    hot = _hot(inc)
    ck = inc.get("last_checkpoint")
    dots = [{"id": e["id"], "x": x(e["ts"]),
             "y": (lanes.index(e["layer"]) if e["layer"] in lanes else len(lanes) - 1) * LANE_H + LANE_H / 2,
             "hot": hot(e), "title": f"{_utc(e['ts'])} {e.get('node') or ''}: {e['summary']}"} for e in ev]
    from markupsafe import Markup

    return Markup(_render("timeline.html", width=WIDTH, height=LANE_H * len(lanes) + 30, lane_h=LANE_H,
                   lanes=lanes, dots=dots, fail_x=x(inc["failure_ts"]),
                   ckpt=({"x": x(ck["ts"]), "step": ck["step"]} if ck and t0 <= ck["ts"] <= t1 else None),
                   ticks=[{"x": round(x(t0 + span * k / 4) - 30, 1), "label": _hms(t0 + span * k / 4)}
                          for k in range(5)]))


def sorted_hypotheses(inc: dict) -> list[dict]:
    """The hypotheses best first, the root cause first with the header's confidence (added
    when the incident's list does not hold it); each with ``root`` set on the root's row."""
    rc = inc.get("root_cause") or {}
    key = (rc.get("category"), rc.get("component"))
    rest = [h for h in inc.get("hypotheses") or [] if (h.get("category"), h.get("component")) != key]
    rest.sort(key=lambda h: (-(h.get("confidence") or 0), h.get("category") or "", h.get("component") or ""))
    out = [{**rc, "root": True}] if rc else []
    return out + [{**h, "root": False} for h in rest]


def group_evidence(inc: dict) -> list[dict]:
    """Evidence lines in time order, identical lines (same layer, node and summary) as one
    row at their first time with ``n`` and ``last_ts``; ``hot`` if any of them backs the
    culprit."""
    hot = _hot(inc)
    groups: dict[tuple, dict] = {}
    for e in sorted(inc.get("evidence") or [], key=lambda e: (e["ts"], e["id"])):
        k = (e.get("layer"), e.get("node"), e.get("summary"))
        g = groups.get(k)
        if g is None:
            groups[k] = {"ts": e["ts"], "last_ts": e["ts"], "layer": e.get("layer"), "node": e.get("node"),
                         "summary": e.get("summary"), "n": 1, "hot": hot(e)}
        else:
            g["n"] += 1
            g["last_ts"] = e["ts"]
            g["hot"] = g["hot"] or hot(e)
    return list(groups.values())


def dig_further(inc_id: str, settings: Any = None) -> list[str]:
    """The commands the page suggests, spelled to run as printed (``faultline.printed``: the
    venv's script, the topic prefix and store of ``settings`` when not the defaults)."""
    args = [("explain", inc_id), ("replay", "--incident", inc_id, "--since=-7d", "--diagnose")]
    if settings is None:
        return [" ".join(("faultline",) + a) for a in args]
    from ..printed import command

    return [command(settings, *a) for a in args]


def render_incident(inc: dict, settings: Any = None) -> str:
    """The whole incident page (``settings``: the serving process's, for the commands it
    suggests; none offline)."""
    ck = inc.get("last_checkpoint")
    retry = inc.get("retry")
    facts = [
        ("symptom", inc.get("symptom")),
        ("failed at", _utc(inc.get("failure_ts"))),
        ("state", inc.get("state")),
        ("ruled out", ", ".join(inc.get("ruled_out") or []) or "none"),
        ("last checkpoint", f"step {ck['step']} at {_utc(ck['ts'])} ({ck['path']})" if ck else "none"),
        ("lost GPU-hours", f"{inc.get('lost_gpu_hours', 0):.2f}"),
        ("retry", (f"attempt {retry['attempt']} {retry['state']} on {', '.join(retry['nodes']) or '-'}"
                   + (" (same nodes)" if retry.get("same_nodes") else "")) if retry else "not yet known"),
    ]
    aff = inc.get("affected") or {}
    return _render("incident.html", inc=inc, rc=inc.get("root_cause") or {}, facts=facts,
                   affected={k: aff.get(k) or [] for k in ("nodes", "gpus", "ports", "paths")},
                   svg=timeline_svg(inc), has_ckpt=bool(ck), hypotheses=sorted_hypotheses(inc),
                   evidence=group_evidence(inc), commands=dig_further(inc["id"], settings),
                   title=f"incident {inc['id']}")


# ------------------------------------------------------------------ the list: filters
@dataclass(frozen=True)
class ListFilter:
    """The list's GET parameters, checked. Times are UTC epoch ms; ``range`` is relative to
    the request's time, ``since``/``until`` are absolute (``YYYY-MM-DDTHH:MM`` in UTC)."""

    category: str = ""
    node: str = ""
    state: str = ""
    q: str = ""
    range: str = ""
    since: str = ""
    until: str = ""
    sort: str = "failure_ts"
    order: str = "desc"
    refresh: int = 0
    limit: int = LIST_LIMIT

    def params(self, **change: Any) -> str:
        """The query string of this filter (with ``change``), defaults left out."""
        f = replace(self, **change)
        base = ListFilter()
        return urlencode({k: getattr(f, k) for k in self.__dataclass_fields__ if getattr(f, k) != getattr(base, k)})

    def active(self) -> bool:
        return any(getattr(self, k) for k in ("category", "node", "state", "q", "range", "since", "until"))


_DT = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?$")


def _utc_ms(text: str, what: str) -> int:
    if not _DT.match(text):
        raise BadRequest(f"{what}={text!r}: give a UTC time as YYYY-MM-DDTHH:MM")
    try:
        dt = datetime.fromisoformat(text.replace(" ", "T"))
    except ValueError:
        raise BadRequest(f"{what}={text!r} is not a date") from None
    return int(dt.replace(tzinfo=timezone.utc).timestamp() * 1000)


def _text(query: Mapping[str, str], key: str) -> str:
    v = (query.get(key) or "").strip()
    if len(v) > _MAX_TEXT:
        raise BadRequest(f"{key}: at most {_MAX_TEXT} characters")
    return v


def _int_choice(query: Mapping[str, str], key: str, default: int, lo: int, hi: int) -> int:
    raw = (query.get(key) or "").strip()
    if not raw:
        return default
    try:
        v = int(raw)
    except ValueError:
        raise BadRequest(f"{key}={raw!r}: give a whole number") from None
    if not lo <= v <= hi:
        raise BadRequest(f"{key}={v}: give {lo} to {hi}")
    return v


def parse_filter(query: Mapping[str, str]) -> ListFilter:
    """The list's filter from a request's query parameters (BadRequest names a bad one)."""
    f = ListFilter(category=_text(query, "category"), node=_text(query, "node"), state=_text(query, "state"),
                   q=_text(query, "q"), range=_text(query, "range"), since=_text(query, "since"),
                   until=_text(query, "until"), sort=_text(query, "sort") or "failure_ts",
                   order=_text(query, "order") or "desc",
                   refresh=_int_choice(query, "refresh", 0, 0, 3600),
                   limit=_int_choice(query, "limit", LIST_LIMIT, 1, MAX_LIST_LIMIT))
    if f.category and f.category not in CATEGORIES:
        raise BadRequest(f"category={f.category!r}: one of {', '.join(CATEGORIES)}")
    if f.range and f.range not in RANGES:
        raise BadRequest(f"range={f.range!r}: one of {', '.join(RANGES)}")
    if f.sort not in SORTS:
        raise BadRequest(f"sort={f.sort!r}: one of {', '.join(SORTS)}")
    if f.order not in ("asc", "desc"):
        raise BadRequest(f"order={f.order!r}: asc or desc")
    for what in ("since", "until"):
        if getattr(f, what):
            _utc_ms(getattr(f, what), what)
    return f


#: the list's filters that are one clause on one parameter of the same name
_LIST_CLAUSES: dict[str, str] = {
    "state": "state = {state:String}",
    "category": "category = {category:String}",
    "node": "has(affected_nodes, {node:String})",
    "q": "positionCaseInsensitive(concat(job, ' ', component, ' ', symptom, ' ', cause_summary), {q:String}) > 0",
}


def list_query(f: ListFilter, now_ms: int | None = None) -> tuple[str, dict[str, Any]]:
    """The list's SQL for filter ``f``: every value a query parameter, the sort a known column."""
    where, params = [], {}
    if not f.state:   # a withdrawn incident (latest revision 'recovered') is listed only when asked for
        where.append("state != {withdrawn:String}")
        params["withdrawn"] = WITHDRAWN
    for name, clause in _LIST_CLAUSES.items():
        if getattr(f, name):
            where.append(clause)
            params[name] = getattr(f, name)
    lo = [_utc_ms(f.since, "since")] if f.since else []
    if f.range:
        lo.append((now_ms if now_ms is not None else int(time.time() * 1000)) - RANGES[f.range])
    if lo:
        where.append("failure_ts >= fromUnixTimestamp64Milli({lo:Int64}, 'UTC')")
        params["lo"] = max(lo)
    if f.until:
        where.append("failure_ts < fromUnixTimestamp64Milli({hi:Int64}, 'UTC')")
        params["hi"] = _utc_ms(f.until, "until")
    order = f"{SORTS[f.sort]} {f.order.upper()}" + (", failure_ts DESC" if f.sort != "failure_ts" else "")
    return (f"SELECT record FROM incidents FINAL WHERE {' AND '.join(where)} ORDER BY {order}, id "
            f"LIMIT {int(f.limit)}", params)


FACETS_SQL = ("SELECT groupUniqArray(100)(state) AS states, groupUniqArrayArray(1000)(affected_nodes) AS nodes, "
              "count() AS n FROM incidents FINAL")


def render_index(incidents: Iterable[dict], f: ListFilter | None = None, facets: Mapping[str, Any] | None = None,
                 *, now_ms: int | None = None) -> str:
    """The incident list with its filter form (``f``: the filter it shows; ``facets``: the
    states and nodes the store holds, for the form's choices)."""
    f = f or ListFilter()
    facets = facets or {}
    rows = list(incidents)
    return _render("incidents.html", rows=rows, f=f, categories=CATEGORIES,
                   states=sorted(set(facets.get("states") or ()) | ({f.state} if f.state else set())),
                   nodes=sorted(facets.get("nodes") or ()), total=facets.get("n"), ranges=list(RANGES),
                   sorts=list(SORTS), refresh_choices=REFRESH_CHOICES, refresh=f.refresh,
                   generated=_utc(now_ms or int(time.time() * 1000)), title="faultline incidents")


# ------------------------------------------------------------------ fleet + history
def fleet_queries(now_ms: int, live_min: int) -> dict[str, tuple[str, dict[str, Any]]]:
    """The fleet page's reads: live alerts grouped by what they are about, the latest
    finding per subject, the last 24 h of incidents by category."""
    return {
        "alerts": ("SELECT detector, severity, node, subject, any(summary) AS summary, count() AS n, "
                   "toUnixTimestamp64Milli(min(ts)) AS first_ts, toUnixTimestamp64Milli(max(ts)) AS last_ts, "
                   "any(job) AS job FROM alerts FINAL WHERE ts >= fromUnixTimestamp64Milli({lo:Int64}, 'UTC') "
                   "GROUP BY detector, severity, node, subject "
                   "ORDER BY severity = 'critical' DESC, last_ts DESC LIMIT {rows:UInt32}",
                   {"lo": now_ms - live_min * 60_000, "rows": FLEET_ROWS}),
        "findings": ("SELECT id, ts, kind, dimension, subject, count, score, severity, summary, action FROM ("
                     "SELECT id, toUnixTimestamp64Milli(ts) AS ts, kind, dimension, subject, count, score, "
                     "severity, summary, action FROM findings FINAL ORDER BY ts DESC "
                     "LIMIT 1 BY kind, dimension, subject) "
                     "ORDER BY severity = 'critical' DESC, score ASC, ts DESC LIMIT {rows:UInt32}",
                     {"rows": FLEET_ROWS}),
        "categories": ("SELECT category, count() AS n, sum(lost_gpu_hours) AS lost, "
                       "toUnixTimestamp64Milli(max(failure_ts)) AS last_ts FROM incidents FINAL "
                       "WHERE state != {withdrawn:String} AND failure_ts >= fromUnixTimestamp64Milli({lo:Int64}, 'UTC') "
                       "GROUP BY category ORDER BY n DESC, category",
                       {"withdrawn": WITHDRAWN, "lo": now_ms - FLEET_INCIDENT_WINDOW_MS}),
    }


def render_fleet(data: Mapping[str, list[dict]], *, now_ms: int, live_min: int = LIVE_MIN,
                 refresh: int = FLEET_REFRESH_S) -> str:
    return _render("fleet.html", alerts=data.get("alerts") or [], findings=data.get("findings") or [],
                   categories=data.get("categories") or [], live_min=live_min, refresh=refresh,
                   generated=_utc(now_ms), title="faultline fleet")


def parse_subject(query: Mapping[str, str]) -> tuple[str, str]:
    """``(kind, name)`` of a history request: exactly one of node=, gpu=, port=."""
    given = [(k, _text(query, k)) for k in HISTORY_KINDS if _text(query, k)]
    if len(given) != 1:
        raise BadRequest("give one of node=NAME, gpu=NODE/INDEX, port=SWITCH/PORT")
    return given[0]


def history_queries(kind: str, name: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """Everything the store holds about one node, GPU or port: the incidents that named it
    (affected or culprit), its alerts, its findings."""
    comp = f"{kind}:{name}"
    on_node = "node = {name:String} OR " if kind == "node" else ""
    p = {"name": name, "comp": comp, "rows": FLEET_ROWS}
    return {
        "incidents": (f"SELECT record FROM incidents FINAL WHERE state != {{withdrawn:String}} AND "
                      f"(has({HISTORY_KINDS[kind]}, {{name:String}}) OR component = {{comp:String}}) "
                      "ORDER BY failure_ts DESC LIMIT {rows:UInt32}", {**p, "withdrawn": WITHDRAWN}),
        "alerts": ("SELECT toUnixTimestamp64Milli(ts) AS ts, severity, detector, node, job, subject, summary "
                   f"FROM alerts FINAL WHERE {on_node}subject = {{comp:String}} "
                   "ORDER BY ts DESC LIMIT {rows:UInt32}", p),
        "findings": ("SELECT toUnixTimestamp64Milli(ts) AS ts, kind, dimension, subject, count, score, severity, "
                     "summary, action FROM findings FINAL WHERE subject = {comp:String} "
                     "ORDER BY ts DESC LIMIT {rows:UInt32}", p),
    }


def render_history(kind: str, name: str, data: Mapping[str, list[dict]]) -> str:
    return _render("history.html", kind=kind, name=name, incidents=data.get("incidents") or [],
                   alerts=data.get("alerts") or [], findings=data.get("findings") or [],
                   title=f"history of {kind} {name}")


# ------------------------------------------------------------------ data + Faust views
def _incidents_query(incident_id: str | None, limit: int) -> tuple[str, dict[str, Any] | None]:
    """The page's query: it stops on the store's side too, so an abandoned page read never
    holds the store's owner longer than the page waits for it."""
    if incident_id is None:
        sql, params = list_query(replace(ListFilter(), limit=limit))
        return sql + _STOP, params
    return ("SELECT record FROM incidents FINAL WHERE id = {id:String} OR job = {id:String} "
            "ORDER BY attempt DESC LIMIT 1" + _STOP, {"id": incident_id})


def _records(rows: list[Any]) -> list[dict]:
    return [orjson.loads(r["record"] if isinstance(r, dict) else r[0]) for r in rows]


def load_incidents(store: Any, incident_id: str | None = None, limit: int = LIST_LIMIT) -> list[dict]:
    """Latest revisions from the ClickHouse store (``incidents FINAL``; ``record`` is the JSON);
    the list leaves out withdrawn incidents, one incident (by id or job) is shown whatever its state."""
    sql, params = _incidents_query(incident_id, limit)
    return _records(store.query(sql, params))


async def aload_incidents(store: Any, incident_id: str | None = None, limit: int = LIST_LIMIT, *,
                          timeout_s: float = PAGE_TIMEOUT_S) -> list[dict]:
    """``load_incidents`` without blocking the event loop (the store's owner runs it)."""
    sql, params = _incidents_query(incident_id, limit)
    return _records(await store.aquery(sql, params, timeout_s=timeout_s))


async def _read(store: Any, sql: str, params: Mapping[str, Any] | None) -> list[dict]:
    return await store.aquery(sql + _STOP, params, timeout_s=PAGE_TIMEOUT_S)


async def build_list(store: Any, query: Mapping[str, str], now_ms: int) -> str:
    f = parse_filter(query)
    sql, params = list_query(f, now_ms)
    rows = _records(await _read(store, sql, params))
    facets = (await _read(store, FACETS_SQL, None) or [{}])[0]
    return render_index(rows, f, facets, now_ms=now_ms)


async def build_fleet(store: Any, query: Mapping[str, str], now_ms: int) -> str:
    live = _int_choice(query, "live", LIVE_MIN, 1, MAX_LIVE_MIN)
    refresh = _int_choice(query, "refresh", FLEET_REFRESH_S, 0, 3600)
    data = {k: await _read(store, sql, p) for k, (sql, p) in fleet_queries(now_ms, live).items()}
    return render_fleet(data, now_ms=now_ms, live_min=live, refresh=refresh)


async def build_history(store: Any, query: Mapping[str, str], now_ms: int) -> str:
    kind, name = parse_subject(query)
    data = {k: await _read(store, sql, p) for k, (sql, p) in history_queries(kind, name).items()}
    data["incidents"] = _records(data["incidents"])
    return render_history(kind, name, data)


def register_views(app: Any, services: Services) -> None:
    """Add ``/incidents``, ``/incidents/{id}``, ``/fleet`` and ``/history`` to a Faust app
    (``streams.app`` calls this). They read ``services.store`` (opened on first use when no
    sink gave one). Each view checks the API token too (``sinks.api.authorize``), whatever
    middleware the app has."""
    from faust import web

    from ..sinks.api import ApiError, authorize, store_error

    def page(view: Any, text: str, status: int = 200, headers: dict | None = None) -> Any:
        return view.bytes(text.encode(), content_type="text/html", status=status, headers=headers)

    async def serve(view: Any, request: Any, build: Any, *args: Any) -> Any:
        """Authorize, then ``await build(store, *args)`` (a page's text), or the error page."""
        try:
            authorize(request.headers, getattr(request, "remote", None), services.api_token)
        except ApiError as e:
            return page(view, error_page("unauthorized", e.reason), e.status)
        try:
            return page(view, await build(services.open_store(), *args))
        except BadRequest as e:
            return page(view, error_page("bad request", str(e)), 400)
        except LookupError as e:
            return page(view, error_page("not found", str(e.args[0] if e.args else e)), 404)
        except Exception as e:  # store missing, busy or slow: say so on the page
            log.warning("incident page failed", extra={"error": str(e)})
            err = store_error(e)
            return page(view, error_page("error", err.reason), err.status, err.headers)

    def now() -> int:
        return int(time.time() * 1000)

    async def one(st: Any, incident_id: str) -> str:
        found = await aload_incidents(st, incident_id)
        if not found:
            raise LookupError(f"no incident or job {incident_id}")
        return render_incident(found[0], services.settings)

    def query_page(build: Any) -> type:
        class QueryView(web.View):
            async def get(self, request: web.Request) -> web.Response:
                return await serve(self, request, build, dict(request.query), now())
        return QueryView

    for path, name, build in (("/incidents", "IndexView", build_list), ("/fleet", "FleetView", build_fleet),
                              ("/history", "HistoryView", build_history)):
        app.page(path, name=name)(query_page(build))

    @app.page("/incidents/{incident_id}")
    class IncidentView(web.View):
        async def get(self, request: web.Request, incident_id: str) -> web.Response:
            return await serve(self, request, one, incident_id)
