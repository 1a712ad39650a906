"""The incident web page served by the worker (Faust web views): a list of recent incidents
and, per incident, its timeline with one swimlane per layer and the culprit highlighted.

Pages are rendered on the server as self-contained HTML (inline CSS and SVG, no scripts,
no external assets), so they work on a closed network and in a headless browser.
``render_incident`` and ``render_index`` are pure: ``faultline explain ID --html FILE``
writes the same page offline.
"""

from __future__ import annotations

import html
import logging
from datetime import datetime, timezone
from typing import Any, Iterable

import orjson

from ..schemas.outputs import LAYERS

log = logging.getLogger("faultline.web")

LANE_H = 46
LEFT = 110
WIDTH = 1100
_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1d2330;background:#fafbfc}
h1{font-size:20px;margin:0 0 4px} .muted{color:#667} .cause{font-size:16px;margin:8px 0 16px}
.cause b{color:#b3261e} table{border-collapse:collapse;margin:12px 0} td,th{padding:4px 10px;
border-bottom:1px solid #e3e6ea;text-align:left;vertical-align:top} .kv td:first-child{color:#667}
svg{background:#fff;border:1px solid #e3e6ea} .lane{fill:#f4f6f8} .lane-alt{fill:#fff}
.ev{fill:#5b7db1} .ev.culprit{fill:#d93025;stroke:#7a0f0a;stroke-width:2} .lbl{font-size:12px;fill:#445}
.tick{font-size:11px;fill:#889} .fail{stroke:#d93025;stroke-dasharray:4 3} .ckpt{stroke:#188038;stroke-dasharray:2 3}
li.culprit{color:#b3261e;font-weight:600} a{color:#1a56c4}
"""


def _utc(ms: int | None) -> str:
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v))


def culprit_ids(inc: dict) -> set[str]:
    """Evidence ids that back the root cause (empty when the cause names none)."""
    return set((inc.get("root_cause") or {}).get("evidence") or ())


def _culprit_nodes(inc: dict) -> set[str]:
    comp = (inc.get("root_cause") or {}).get("component", "")
    kind, _, rest = comp.partition(":")
    if kind in ("gpu", "node"):
        return {rest.split("/")[0]}
    return set()


def timeline_svg(inc: dict) -> str:
    """Swimlanes per layer; each evidence item a dot at its time, the culprit's in red."""
    ev = sorted(inc.get("evidence") or [], key=lambda e: e["ts"])
    t0 = min([e["ts"] for e in ev] + [inc.get("start_ts") or inc["failure_ts"]])
    t1 = max([e["ts"] for e in ev] + [inc["failure_ts"]])
    span = max(1, t1 - t0)
    x = lambda ts: LEFT + (ts - t0) / span * (WIDTH - LEFT - 20)  # noqa: E731
    lanes = list(LAYERS)
    h = LANE_H * len(lanes) + 30
    culprits, cnodes = culprit_ids(inc), _culprit_nodes(inc)
    out = [f'<svg role="img" aria-label="incident timeline" width="{WIDTH}" height="{h}" '
           f'viewBox="0 0 {WIDTH} {h}" xmlns="http://www.w3.org/2000/svg">']
    for i, lane in enumerate(lanes):
        y = i * LANE_H
        out.append(f'<rect class="{"lane" if i % 2 == 0 else "lane-alt"}" x="0" y="{y}" width="{WIDTH}" height="{LANE_H}"/>')
        out.append(f'<text class="lbl" x="8" y="{y + LANE_H / 2 + 4}">{_e(lane)}</text>')
    ck = inc.get("last_checkpoint")
    if ck and t0 <= ck["ts"] <= t1:
        out.append(f'<line class="ckpt" x1="{x(ck["ts"]):.1f}" x2="{x(ck["ts"]):.1f}" y1="0" y2="{h - 30}">'
                   f'<title>last checkpoint: step {_e(ck["step"])}</title></line>')
    fx = x(inc["failure_ts"])
    out.append(f'<line class="fail" x1="{fx:.1f}" x2="{fx:.1f}" y1="0" y2="{h - 30}"><title>failure</title></line>')
    for e in ev:
        lane = lanes.index(e["layer"]) if e["layer"] in lanes else len(lanes) - 1
        hot = e["id"] in culprits or (not culprits and e.get("node") in cnodes)
        cls = "ev culprit" if hot else "ev"
        out.append(f'<circle class="{cls}" data-id="{_e(e["id"])}" cx="{x(e["ts"]):.1f}" '
                   f'cy="{lane * LANE_H + LANE_H / 2}" r="{7 if hot else 5}"><title>{_e(_utc(e["ts"]))} '
                   f'{_e(e.get("node") or "")}: {_e(e["summary"])}</title></circle>')
    for k in range(5):
        ts = t0 + span * k / 4
        out.append(f'<text class="tick" x="{x(ts) - 30:.1f}" y="{h - 10}">'
                   f'{datetime.fromtimestamp(ts / 1000, timezone.utc).strftime("%H:%M:%S")}</text>')
    out.append("</svg>")
    return "".join(out)


def _page(title: str, body: str) -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
            f"<style>{_CSS}</style></head><body>{body}</body></html>")


def render_incident(inc: dict) -> str:
    """The whole incident page."""
    rc = inc.get("root_cause") or {}
    ck = inc.get("last_checkpoint")
    retry = inc.get("retry")
    aff = inc.get("affected") or {}
    culprits, cnodes = culprit_ids(inc), _culprit_nodes(inc)
    rows = [
        ("symptom", _e(inc.get("symptom"))),
        ("failed at", _e(_utc(inc.get("failure_ts")))),
        ("state", _e(inc.get("state"))),
        ("ruled out", _e(", ".join(inc.get("ruled_out") or []) or "none")),
        ("last checkpoint", _e(f"step {ck['step']} at {_utc(ck['ts'])} ({ck['path']})") if ck else "none"),
        ("lost GPU-hours", f"{inc.get('lost_gpu_hours', 0):.2f}"),
        ("retry", _e(f"attempt {retry['attempt']} {retry['state']} on {', '.join(retry['nodes']) or '-'}"
                     + (" (same nodes)" if retry.get("same_nodes") else "")) if retry else "not yet known"),
        ("affected", _e("; ".join(f"{k}: {', '.join(v)}" for k, v in aff.items() if v))),
    ]
    hyps = "".join(f"<tr><td>{_e(h.get('category'))}</td><td>{_e(h.get('component'))}</td>"
                   f"<td>{h.get('confidence', 0):.0%}</td><td>{_e(h.get('summary'))}</td></tr>"
                   for h in inc.get("hypotheses") or [])
    items = "".join(
        f'<li class="{"culprit" if (e["id"] in culprits or (not culprits and e.get("node") in cnodes)) else ""}">'
        f'{_e(_utc(e["ts"]))} <b>{_e(e["layer"])}</b> {_e(e.get("node") or "")} {_e(e["summary"])}</li>'
        for e in sorted(inc.get("evidence") or [], key=lambda e: e["ts"]))
    body = (
        f'<p><a href="/incidents">all incidents</a></p>'
        f'<h1 id="incident" data-id="{_e(inc["id"])}">Job {_e(inc.get("job"))} attempt {_e(inc.get("attempt"))}</h1>'
        f'<div class="muted">incident {_e(inc["id"])}, revision {_e(inc.get("revision"))}</div>'
        f'<p class="cause" id="root-cause">Root cause: <b>{_e(rc.get("category"))}</b> at '
        f'<b id="culprit">{_e(rc.get("component"))}</b> ({rc.get("confidence", 0):.0%}): {_e(rc.get("summary"))}</p>'
        f'{timeline_svg(inc)}'
        f'<table class="kv">{"".join(f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in rows)}</table>'
        f'<h2>Hypotheses</h2><table><tr><th>category</th><th>component</th><th>confidence</th><th>why</th></tr>{hyps}</table>'
        f'<h2>Evidence</h2><ul>{items}</ul>'
        f'<p class="muted">Dig further: <code>faultline explain {_e(inc["id"])}</code>, '
        f'<code>faultline replay --incident {_e(inc["id"])} --since=-7d --diagnose</code></p>')
    return _page(f"incident {inc['id']}", body)


def render_index(incidents: Iterable[dict]) -> str:
    rows = "".join(
        f'<tr><td><a href="/incidents/{_e(i["id"])}">{_e(i["job"])}#{_e(i.get("attempt"))}</a></td>'
        f'<td>{_e(_utc(i.get("failure_ts")))}</td><td>{_e(i.get("symptom"))}</td>'
        f'<td>{_e((i.get("root_cause") or {}).get("category"))}</td>'
        f'<td>{_e((i.get("root_cause") or {}).get("component"))}</td>'
        f'<td>{i.get("lost_gpu_hours", 0):.1f}</td></tr>'
        for i in incidents)
    return _page("faultline incidents",
                 "<h1>Incidents</h1><table><tr><th>job</th><th>failed at</th><th>symptom</th>"
                 f"<th>root cause</th><th>component</th><th>lost GPU-h</th></tr>{rows}</table>")


# ------------------------------------------------------------------ data + Faust views
#: the page's reads wait at most this long for the store (queued behind ingest + running)
PAGE_TIMEOUT_S = 10.0


def _incidents_query(incident_id: str | None, limit: int) -> tuple[str, dict[str, Any] | None]:
    """The page's query: it stops on the store's side too, so an abandoned page read never
    holds the store's owner longer than the page waits for it."""
    stop = f" SETTINGS max_execution_time = {int(PAGE_TIMEOUT_S)}"
    if incident_id is None:   # a withdrawn incident (latest revision 'recovered') is not listed
        return (f"SELECT record FROM incidents FINAL WHERE state != 'recovered' ORDER BY failure_ts DESC "
                f"LIMIT {int(limit)}" + stop, None)
    return ("SELECT record FROM incidents FINAL WHERE id = {id:String} OR job = {id:String} "
            "ORDER BY attempt DESC LIMIT 1" + stop, {"id": incident_id})


def _records(rows: list[Any]) -> list[dict]:
    return [orjson.loads(r["record"] if isinstance(r, dict) else r[0]) for r in rows]


def load_incidents(store: Any, incident_id: str | None = None, limit: int = 200) -> list[dict]:
    """Latest revisions from the ClickHouse store (``incidents FINAL``; ``record`` is the JSON);
    the list leaves out withdrawn incidents, one incident (by id or job) is shown whatever its state."""
    sql, params = _incidents_query(incident_id, limit)
    return _records(store.query(sql, params))


async def aload_incidents(store: Any, incident_id: str | None = None, limit: int = 200, *,
                          timeout_s: float = PAGE_TIMEOUT_S) -> list[dict]:
    """``load_incidents`` without blocking the event loop (the store's owner runs it)."""
    sql, params = _incidents_query(incident_id, limit)
    return _records(await store.aquery(sql, params, timeout_s=timeout_s))


def register_views(app: Any) -> None:
    """Add ``/incidents`` and ``/incidents/{id}`` to a Faust app (``streams.app`` calls this).
    Each view checks the API token too (``sinks.api.authorize``), whatever middleware the
    app has."""
    from faust import web

    from ..sinks.api import ApiError, authorize, store_error

    def store() -> Any:
        st = getattr(app, "faultline_store", None)
        if st is None:
            from ..config import load
            from ..sinks.store import open_store

            st = app.faultline_store = open_store(getattr(app, "faultline_settings", None) or load())
        return st

    def page(view: Any, text: str, status: int = 200, headers: dict | None = None) -> Any:
        return view.bytes(text.encode(), content_type="text/html", status=status, headers=headers)

    async def fetch(view: Any, request: Any, incident_id: str | None) -> Any:
        """The incidents, or the error page to answer instead."""
        token = getattr(getattr(app, "faultline_settings", None), "api_token", None)
        try:
            authorize(request.headers, getattr(request, "remote", None), token)
        except ApiError as e:
            return page(view, _page("unauthorized", f"<p>{_e(e.reason)}</p>"), e.status)
        try:
            return await aload_incidents(store(), incident_id)
        except Exception as e:  # store missing, busy or slow: say so on the page
            log.warning("incident page failed", extra={"error": str(e)})
            err = store_error(e)
            return page(view, _page("error", f"<p>{_e(err.reason)}</p>"), err.status, err.headers)

    @app.page("/incidents")
    class IndexView(web.View):
        async def get(self, request: web.Request) -> web.Response:
            found = await fetch(self, request, None)
            return found if not isinstance(found, list) else page(self, render_index(found))

    @app.page("/incidents/{incident_id}")
    class IncidentView(web.View):
        async def get(self, request: web.Request, incident_id: str) -> web.Response:
            found = await fetch(self, request, incident_id)
            if not isinstance(found, list):
                return found
            if not found:
                return page(self, _page("not found", f"<p>no incident or job {_e(incident_id)}</p>"), 404)
            return page(self, render_incident(found[0]))
