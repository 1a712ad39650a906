"""Exposition: ``GET /metrics`` (Prometheus text format).

- ``register_views(app, services)``: the route on a Faust app's web server (``streams.app`` calls every
  ``VIEW_MODULES`` entry's ``register_views``), so the worker's and the sink's ``--web-port``
  serve it, behind the same guard as every other route (``sinks.api.web_options``: loopback
  only, or ``Authorization: Bearer $FAULTLINE_API_TOKEN``).
- ``metrics_handler(metrics, token)``: the same as a plain aiohttp handler.
- ``start_metrics_server(bind, port, metrics=...)``: a standalone aiohttp server for a process
  without a web app (the node agent), bound to loopback unless told otherwise; a non-loopback
  bind needs a token.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, TYPE_CHECKING

from .registry import Metrics

if TYPE_CHECKING:
    from ..streams.services import Services

PATH = "/metrics"
DEFAULT_BIND = "127.0.0.1"
#: the standalone server's default port (OpenTelemetry's Prometheus exporter port, unused by faultline)
DEFAULT_PORT = 9464
#: the classic text format ``generate_latest`` writes (names escaped to underscores), which
#: every Prometheus 2.x parses; prometheus_client >= 0.22 calls its own default 1.0.0
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
HEADERS = {"Content-Type": CONTENT_TYPE}


def _denied(headers: Any, remote: str | None, token: str | None) -> tuple[int, str] | None:
    from ..sinks.api import ApiError, authorize

    try:
        authorize(headers, remote, token)
    except ApiError as e:
        return e.status, e.reason
    return None


def register_views(app: Any, services: Services) -> None:
    """Add ``GET /metrics`` to a Faust app; it serves ``services.metrics``
    (``streams.services.Services``), behind ``services.api_token``."""
    from faust import web

    def token() -> str | None:
        return services.api_token

    @app.page(PATH)
    class MetricsView(web.View):
        async def get(self, request: Any) -> Any:
            no = _denied(request.headers, getattr(request, "remote", None), token())
            if no is not None:
                return self.json({"error": no[1]}, status=no[0])
            return self.bytes(await services.metrics.render(), headers=dict(HEADERS))


def metrics_handler(metrics: Metrics, token: str | None = None) -> Callable[[Any], Awaitable[Any]]:
    """An aiohttp handler serving ``metrics`` (same guard as the Faust route)."""
    from aiohttp import web

    async def handle(request: Any) -> Any:
        no = _denied(request.headers, request.remote, token)
        if no is not None:
            return web.json_response({"error": no[1]}, status=no[0])
        return web.Response(body=await metrics.render(), headers=dict(HEADERS))

    return handle


class MetricsServer:
    """A running standalone ``/metrics`` server: ``port`` (the bound one), ``await close()``."""

    def __init__(self, runner: Any, bind: str, port: int) -> None:
        self.runner, self.bind, self.port = runner, bind, port

    @property
    def url(self) -> str:
        host = f"[{self.bind}]" if ":" in self.bind else self.bind
        return f"http://{host}:{self.port}{PATH}"

    async def close(self) -> None:
        await self.runner.cleanup()


async def start_metrics_server(bind: str = DEFAULT_BIND, port: int = DEFAULT_PORT, *, metrics: Metrics,
                               token: str | None = None) -> MetricsServer:
    """Serve ``metrics`` on ``http://bind:port/metrics`` from the running event loop
    (``port=0``: a free port, see ``.port``). A non-loopback ``bind`` without ``token``
    raises ``ConfigError``."""
    from aiohttp import web

    from ..config import ConfigError
    from ..sinks.api import is_loopback

    if not token and not is_loopback(bind):
        raise ConfigError(f"metrics bind {bind} is not a loopback address: set FAULTLINE_API_TOKEN "
                          "(Prometheus then sends it as a bearer token) or bind 127.0.0.1")
    webapp = web.Application(client_max_size=1 << 16)
    webapp.router.add_get(PATH, metrics_handler(metrics, token))
    runner = web.AppRunner(webapp, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, bind, port)
    await site.start()
    bound = port
    server = getattr(site, "_server", None)
    if server is not None and server.sockets:
        bound = server.sockets[0].getsockname()[1]
    return MetricsServer(runner, bind, bound)
