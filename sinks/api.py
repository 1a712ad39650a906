"""The worker's read-only SQL API (Faust web views over the store the worker owns).

chDB lets one process open a data directory; while a worker runs, ``faultline incidents``,
``explain``, ``trends`` and ``query`` send their SQL here instead (``sinks/client.py``).

    POST /faultline/api/sql   {"sql": "SELECT ...", "params": {...}, "max_rows": 1000}
    GET  /faultline/api/sql?q=SELECT...&max_rows=...
      -> {"columns": [...], "rows": [[...], ...], "truncated": bool, "elapsed_ms": float}
    GET  /faultline/api/health -> {"ok": true, "store": "chdb:/path"}

Rules: one SELECT or WITH statement (comments allowed); it runs wrapped as
``SELECT * FROM (<sql>) LIMIT max_rows+1 SETTINGS readonly = 1, max_execution_time = T``
so it cannot write, create, or read files/URLs through table functions, and cannot run
for longer than ``T`` seconds or return more than ``max_rows`` rows.
Auth: ``Authorization: Bearer <FAULTLINE_API_TOKEN>``; with no token configured, only
loopback clients are served.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import re
import time
from typing import Any, Mapping

log = logging.getLogger("faultline.sinks.api")

MAX_ROWS = 10_000          # hard ceiling per request
DEFAULT_ROWS = 1_000
TIMEOUT_S = 10

__all__ = ["ApiError", "check_readonly", "run_sql", "handle_sql", "register_views"]


class ApiError(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


_COMMENTS = re.compile(r"--[^\n]*|/\*.*?\*/", re.S)


def check_readonly(sql: str) -> str:
    """The statement without comments and trailing ``;`` if it is one SELECT/WITH, else
    ``ApiError(400)``. (The server-side ``readonly = 1`` setting is the real guard.)"""
    body = _COMMENTS.sub(" ", sql).strip().rstrip(";").strip()
    if not body:
        raise ApiError(400, "empty query")
    if ";" in _strip_strings(body):
        raise ApiError(400, "one statement per request")
    first = body.split(None, 1)[0].upper()
    if first not in ("SELECT", "WITH"):
        raise ApiError(400, f"read-only API: only SELECT or WITH queries, not {first}")
    if re.search(r"\bINTO\s+OUTFILE\b|\bFORMAT\s+\w+\s*$", _strip_strings(body), re.I):
        raise ApiError(400, "INTO OUTFILE / FORMAT are not allowed: the API returns JSON")
    return body


def _strip_strings(s: str) -> str:
    return re.sub(r"'(?:[^'\\]|\\.)*'", "''", s)


def run_sql(store: Any, sql: str, params: Mapping[str, Any] | None = None, *,
            max_rows: int = DEFAULT_ROWS, timeout_s: int = TIMEOUT_S) -> dict[str, Any]:
    """Run one read-only query with the row and time limits (blocking)."""
    body = check_readonly(sql)
    n = max(1, min(int(max_rows), MAX_ROWS))
    wrapped = (f"SELECT * FROM (\n{body}\n) LIMIT {n + 1} "
               f"SETTINGS readonly = 1, max_execution_time = {int(timeout_s)}")
    t0 = time.perf_counter()
    from .store import StoreError

    try:
        cols, rows = store.query_table(wrapped, params)
    except StoreError as e:
        msg = str(e)
        status = 408 if "TIMEOUT_EXCEEDED" in msg else 400
        raise ApiError(status, msg.split(": ", 1)[-1] if len(msg) > 300 else msg) from None
    return {"columns": cols, "rows": rows[:n], "truncated": len(rows) > n,
            "elapsed_ms": round((time.perf_counter() - t0) * 1000, 2)}


def authorize(headers: Mapping[str, str], remote: str | None, token: str | None) -> None:
    if token:
        got = headers.get("Authorization") or headers.get("authorization") or ""
        if not got.startswith("Bearer ") or not hmac.compare_digest(got[7:].strip(), token):
            raise ApiError(401, "missing or wrong bearer token (Authorization: Bearer $FAULTLINE_API_TOKEN)")
    elif remote not in ("127.0.0.1", "::1", "localhost", None):
        raise ApiError(403, "no FAULTLINE_API_TOKEN configured: only loopback clients are served")


def handle_sql(store: Any, payload: Mapping[str, Any]) -> dict[str, Any]:
    sql = payload.get("sql") or payload.get("q")
    if not isinstance(sql, str):
        raise ApiError(400, "give the query as 'sql' (POST JSON) or 'q' (GET)")
    params = payload.get("params") or None
    if params is not None and not isinstance(params, dict):
        raise ApiError(400, "'params' must be an object of query parameters")
    try:
        max_rows = int(payload.get("max_rows", DEFAULT_ROWS))
    except (TypeError, ValueError):
        raise ApiError(400, "'max_rows' must be an integer") from None
    return run_sql(store, sql, params, max_rows=max_rows)


def register_views(app: Any) -> None:
    """Add the SQL API views to a Faust app (``streams.app.create_app`` calls this).

    The store is ``app.faultline_store`` when the sink agent set it, else opened lazily from
    ``app.faultline_settings`` (in the same process chDB shares one session per directory).
    """
    from faust import web

    state: dict[str, Any] = {}

    def get_store() -> Any:
        st = getattr(app, "faultline_store", None) or state.get("store")
        if st is None:
            from ..config import load
            from .store import open_store

            settings = getattr(app, "faultline_settings", None) or load()
            st = state["store"] = open_store(settings)
        return st

    def token() -> str | None:
        s = getattr(app, "faultline_settings", None)
        return getattr(s, "api_token", None)

    def remote_of(request: Any) -> str | None:
        return getattr(request, "remote", None)

    async def respond(view: Any, request: Any, payload: Mapping[str, Any]) -> Any:
        try:
            authorize(request.headers, remote_of(request), token())
            loop = asyncio.get_running_loop()
            out = await loop.run_in_executor(None, lambda: handle_sql(get_store(), payload))
        except ApiError as e:
            return view.error(e.status, e.reason)
        except Exception as e:  # store missing, locked, ...: say what failed
            log.warning("sql api failure", extra={"error": str(e)})
            return view.error(503, f"store unavailable: {e}")
        return view.bytes(_dumps(out), content_type="application/json")

    @app.page("/faultline/api/sql")
    class SqlView(web.View):
        async def get(self, request: Any) -> Any:
            return await respond(self, request, dict(request.query))

        async def post(self, request: Any) -> Any:
            try:
                payload = await request.json()
            except Exception:
                return self.error(400, "body must be JSON: {\"sql\": ..., \"params\": {...}}")
            if not isinstance(payload, dict):
                return self.error(400, "body must be a JSON object")
            return await respond(self, request, payload)

    @app.page("/faultline/api/health")
    class HealthView(web.View):
        async def get(self, request: Any) -> Any:
            st = getattr(app, "faultline_store", None) or state.get("store")
            where = f"{st.backend}:{st.location}" if st is not None else "not opened yet"
            return self.json({"ok": True, "store": where})


def _dumps(obj: Any) -> bytes:
    import orjson

    return orjson.dumps(obj)
