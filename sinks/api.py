"""The read-only SQL API (Faust web views over the store the sink owns), and the guard of
every web route.

chDB lets one process open a data directory; while a worker or sink runs, ``faultline
incidents``, ``explain``, ``trends`` and ``query`` send their SQL here instead
(``sinks/client.py``).

    POST /faultline/api/sql   {"sql": "SELECT ...", "params": {...}, "max_rows": 1000}
    GET  /faultline/api/sql?q=SELECT...&max_rows=...
      -> {"columns": [...], "rows": [[...], ...], "truncated": bool, "elapsed_ms": float}
    GET  /faultline/api/health -> {"ok": true, "store": "chdb:/path"}

What may run: the allow-list of ``sinks/sqlcheck.py`` (one SELECT/WITH over the store's own
tables, known-safe functions only: nothing reads files, URLs, other databases, settings or
the environment). Every query runs wrapped as::

    SELECT * FROM (<sql>) LIMIT max_rows+1 SETTINGS max_execution_time = 5,
        max_memory_usage = 512 MiB, max_result_rows = max_rows+1, max_result_bytes = 16 MiB,
        result_overflow_mode = 'throw', readonly = 1

on the store's owner (``sinks/store.py``): behind ingest's writes, at most 32 requests
waiting (one more gets 503 with Retry-After), each request answered or refused within
``REQUEST_TIMEOUT_S`` (504); a timed-out request's answer is dropped, never delivered to
another request. The serialised answer is capped at ``MAX_RESPONSE_BYTES`` (413).

Status codes: 400 refused SQL or bad request, 401/403 token, 408 query ran past its time
limit, 413 answer too large or memory limit, 503 store busy or unavailable, 504 no answer in
time.

Auth (every route of the web server, the page and Faust's own views included, through
:func:`web_options`' middleware): ``Authorization: Bearer <FAULTLINE_API_TOKEN>`` when a
token is configured; with none, only loopback clients are served, and a non-loopback
``web_bind`` refuses to start.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import re
import time
from typing import Any, Mapping, TYPE_CHECKING

import orjson

from .store import QueryRejected, StoreBusy, StoreError, StoreTimeout, store_tables

if TYPE_CHECKING:
    from ..streams.services import Services

log = logging.getLogger("faultline.sinks.api")

MAX_ROWS = 10_000              # hard ceiling per request
DEFAULT_ROWS = 1_000
TIMEOUT_S = 5                  # max_execution_time of one query
REQUEST_TIMEOUT_S = 10.0       # queue wait + run: no request waits longer
MAX_MEMORY_BYTES = 512 << 20   # max_memory_usage of one query
MAX_RESULT_BYTES = 16 << 20    # max_result_bytes (ClickHouse's count, uncompressed)
MAX_RESPONSE_BYTES = 16 << 20  # the serialised JSON answer
MAX_PARAMS = 64
RETRY_AFTER_S = 1

__all__ = ["ApiError", "check_readonly", "arun_sql", "run_sql", "handle_sql", "register_views", "authorize",
           "web_options", "is_loopback", "MAX_RESPONSE_BYTES", "REQUEST_TIMEOUT_S", "TIMEOUT_S"]


class ApiError(Exception):
    """An HTTP answer other than 200: ``status``, ``reason`` and extra ``headers``."""

    def __init__(self, status: int, reason: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.headers = dict(headers or {})


def check_readonly(sql: str) -> str:
    """The statement if the API's allow-list accepts it, else ``ApiError(400)``."""
    from .sqlcheck import check_query

    try:
        return check_query(sql, store_tables())
    except QueryRejected as e:
        raise ApiError(400, f"refused by the readonly API: {e}") from None


def wrap(body: str, max_rows: int) -> str:
    """``body`` with the row, time, memory and size limits (``readonly = 1`` last, so the
    settings before it still apply)."""
    n = max_rows + 1
    return (f"SELECT * FROM (\n{body}\n) LIMIT {n} SETTINGS max_execution_time = {TIMEOUT_S}, "
            f"max_memory_usage = {MAX_MEMORY_BYTES}, max_result_rows = {n}, "
            f"max_result_bytes = {MAX_RESULT_BYTES}, result_overflow_mode = 'throw', readonly = 1")


_PARAM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _check_params(params: Any) -> dict[str, Any] | None:
    if params is None or params == {}:
        return None
    if not isinstance(params, dict) or len(params) > MAX_PARAMS:
        raise ApiError(400, f"'params' must be an object of at most {MAX_PARAMS} query parameters")
    for k, v in params.items():
        if not _PARAM_NAME.match(str(k)):
            raise ApiError(400, f"parameter name {k!r} is not an identifier")
        items = v if isinstance(v, list) else [v]
        if not all(x is None or isinstance(x, (str, int, float, bool)) for x in items):
            raise ApiError(400, f"parameter {k}: give a string, number, boolean or a list of them")
    return params


def _status_of(err: StoreError) -> int:
    msg = str(err)
    if "TIMEOUT_EXCEEDED" in msg:
        return 408
    if "MEMORY_LIMIT_EXCEEDED" in msg or "TOO_MANY_ROWS_OR_BYTES" in msg or "memory limit" in msg.lower():
        return 413
    return 400


def _translate(e: StoreError) -> ApiError:
    if isinstance(e, StoreBusy):
        return ApiError(503, str(e), {"Retry-After": str(e.retry_after_s)})
    if isinstance(e, StoreTimeout):
        return ApiError(504, str(e), {"Retry-After": str(RETRY_AFTER_S)})
    msg = str(e)
    return ApiError(_status_of(e), msg.split(": ", 1)[-1] if len(msg) > 300 else msg)


def _answer(cols: list[str], rows: list[list[Any]], n: int, t0: float) -> bytes:
    out = orjson.dumps({"columns": cols, "rows": rows[:n], "truncated": len(rows) > n,
                        "elapsed_ms": round((time.perf_counter() - t0) * 1000, 2)})
    if len(out) > MAX_RESPONSE_BYTES:
        raise ApiError(413, f"answer of {len(out):,} bytes is over the API's {MAX_RESPONSE_BYTES:,}: "
                            "select fewer columns or rows")
    return out


async def arun_sql(store: Any, sql: str, params: Mapping[str, Any] | None = None, *,
                   max_rows: int = DEFAULT_ROWS) -> bytes:
    """Run one allowed query with the limits on the store's owner; the JSON answer."""
    n = max(1, min(int(max_rows), MAX_ROWS))
    wrapped, t0 = wrap(check_readonly(sql), n), time.perf_counter()
    try:
        cols, rows = await store.aquery_table(wrapped, params, timeout_s=REQUEST_TIMEOUT_S)
    except StoreError as e:
        raise _translate(e) from None
    return _answer(cols, rows, n, t0)


def run_sql(store: Any, sql: str, params: Mapping[str, Any] | None = None, *,
            max_rows: int = DEFAULT_ROWS) -> dict[str, Any]:
    """``arun_sql`` for blocking callers (tests, tools): the answer as a dict."""
    n = max(1, min(int(max_rows), MAX_ROWS))
    wrapped, t0 = wrap(check_readonly(sql), n), time.perf_counter()
    try:
        cols, rows = store.query_table(wrapped, params, timeout_s=REQUEST_TIMEOUT_S)
    except StoreError as e:
        raise _translate(e) from None
    return orjson.loads(_answer(cols, rows, n, t0))


async def handle_sql(store: Any, payload: Mapping[str, Any]) -> bytes:
    sql = payload.get("sql") or payload.get("q")
    if not isinstance(sql, str):
        raise ApiError(400, "give the query as 'sql' (POST JSON) or 'q' (GET)")
    params = _check_params(payload.get("params") or None)
    try:
        max_rows = int(payload.get("max_rows", DEFAULT_ROWS))
    except (TypeError, ValueError):
        raise ApiError(400, "'max_rows' must be an integer") from None
    return await arun_sql(store, sql, params, max_rows=max_rows)


# ------------------------------------------------------------------ auth, bind
def is_loopback(host: str | None) -> bool:
    if host in (None, "localhost"):
        return True
    try:
        return ipaddress.ip_address(str(host).strip("[]")).is_loopback
    except ValueError:
        return False


def _token_ok(got: str, token: str) -> bool:
    """Constant-time compare of bytes (a non-ASCII header or token must not raise)."""
    enc = lambda s: s.encode("utf-8", "surrogateescape")  # noqa: E731
    return hmac.compare_digest(enc(got), enc(token))


def authorize(headers: Mapping[str, str], remote: str | None, token: str | None) -> None:
    """Raise ApiError(401/403) unless the request may be served."""
    if token:
        got = headers.get("Authorization") or headers.get("authorization") or ""
        if not got.startswith("Bearer ") or not _token_ok(got[7:].strip(), token):
            raise ApiError(401, "missing or wrong bearer token (Authorization: Bearer $FAULTLINE_API_TOKEN)")
    elif not is_loopback(remote):
        raise ApiError(403, "no FAULTLINE_API_TOKEN configured: only loopback clients are served")


def web_options(settings: Any, *, enabled: bool = True) -> dict[str, Any]:
    """Faust settings for a web server that serves faultline's views safely: bound to
    ``settings.web_bind`` (127.0.0.1 unless configured), every route behind the token (an
    aiohttp middleware, so Faust's own views too), Faust's router/table/graph/stats/metrics
    views off. A non-loopback bind without ``FAULTLINE_API_TOKEN`` raises ConfigError (when
    the web server is ``enabled``)."""
    from aiohttp import web as aioweb

    from ..config import ConfigError

    bind = getattr(settings, "web_bind", None) or "127.0.0.1"
    token = getattr(settings, "api_token", None)
    if enabled and not token and not is_loopback(bind):
        raise ConfigError(f"web_bind {bind} is not a loopback address: set FAULTLINE_API_TOKEN (or "
                          "FAULTLINE_API_TOKEN_FILE) so the page and SQL API need a token, or bind "
                          "127.0.0.1 (FAULTLINE_WEB_BIND)")

    @aioweb.middleware
    async def guard(request: Any, handler: Any) -> Any:
        try:
            authorize(request.headers, request.remote, token)
        except ApiError as e:
            return aioweb.json_response({"error": e.reason}, status=e.status)
        return await handler(request)

    return dict(
        web_bind=bind,
        web_application_options={"middlewares": [guard], "client_max_size": 1 << 20},
        web_router_enabled=False, web_tables_enabled=False, web_graph_enabled=False,
        web_stats_enabled=False, web_metrics_enabled=False,
    )


def error_response(view: Any, e: ApiError) -> Any:
    return view.json({"error": e.reason}, status=e.status, headers=e.headers or None)


def store_error(e: Exception) -> ApiError:
    """The HTTP answer for a store failure outside a query (busy, timed out, unavailable)."""
    if isinstance(e, (StoreBusy, StoreTimeout)):
        return _translate(e)
    return ApiError(503, f"store unavailable: {e}", {"Retry-After": str(RETRY_AFTER_S)})


# ------------------------------------------------------------------ views
def register_views(app: Any, services: Services) -> None:
    """Add the SQL API views to a Faust app (``streams.app.create_app`` calls this).

    The store is ``services.store`` (``streams.services.Services``) when the sink set it,
    else opened from ``services.settings`` on first use (in the same process chDB shares one
    session per directory). Each view checks the token itself too (an app built without
    :func:`web_options`).
    """
    from faust import web

    def get_store() -> Any:
        return services.open_store()

    def token() -> str | None:
        return services.api_token

    async def respond(view: Any, request: Any, payload: Mapping[str, Any]) -> Any:
        try:
            authorize(request.headers, getattr(request, "remote", None), token())
            try:
                store = get_store()
            except Exception as e:  # store missing, locked, ...: say what failed
                log.warning("sql api: store unavailable", extra={"error": str(e)})
                raise store_error(e) from None
            out = await handle_sql(store, payload)
        except ApiError as e:
            return error_response(view, e)
        return view.bytes(out, content_type="application/json")

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
            try:
                authorize(request.headers, getattr(request, "remote", None), token())
            except ApiError as e:
                return error_response(self, e)
            st = services.store
            where = f"{st.backend}:{st.location}" if st is not None else "not opened yet"
            return self.json({"ok": True, "store": where})
