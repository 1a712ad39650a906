"""The explicit registry of one process's ``/metrics``: the sources it was given, refreshed
(bounded) and collected at scrape time.

    metrics = services.metrics             # one per process (streams.services.Services)
    metrics.add(WorkerSource(worker, s))   # what streams/agents.py's install does
    body = await metrics.render()          # the exposition (web.py) awaits this

No global registry: ``prometheus_client.REGISTRY`` stays untouched, so two apps in one
process (tests) never see each other's series.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Iterator

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric

from .sources import Source

log = logging.getLogger("faultline.metrics")

#: a scrape waits at most this long for the sources' refresh (offsets from the broker); a
#: refresh still running then goes on in the background (one per source at a time), the
#: scrape serves the source's last values and counts it (Prometheus' scrape timeout: 10 s)
REFRESH_TIMEOUT_S = 0.5
#: a failing refresh is logged at most once per this many seconds per source
LOG_EVERY_S = 60.0


class Metrics:
    """The sources of one process and the registry that collects them."""

    def __init__(self, *, process: bool = True) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.sources: list[Source] = []
        self.errors: dict[str, int] = {}
        self._logged: dict[str, float] = {}
        self._running: dict[int, asyncio.Future[None]] = {}
        self.registry.register(_Self(self))
        if process:   # process_cpu_seconds_total, process_resident_memory_bytes, ...
            ProcessCollector(registry=self.registry)

    def add(self, source: Source) -> Source:
        self.registry.register(source)   # type: ignore[arg-type]
        self.sources.append(source)
        return source

    async def refresh(self, timeout_s: float = REFRESH_TIMEOUT_S) -> None:
        await asyncio.gather(*(self._refresh(s, timeout_s) for s in self.sources))

    async def _refresh(self, source: Source, timeout_s: float) -> None:
        task = self._running.get(id(source))
        if task is None or task.done():
            task = self._running[id(source)] = asyncio.ensure_future(source.refresh())
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout_s)
        except Exception as err:  # noqa: BLE001 - a scrape never fails on one source: last values
            name = type(source).__name__
            self.errors[name] = self.errors.get(name, 0) + 1
            now = time.monotonic()
            if now - self._logged.get(name, -1e18) >= LOG_EVERY_S:
                self._logged[name] = now
                what = "is slower than" if isinstance(err, asyncio.TimeoutError) else "failed within"
                log.warning("metrics: refreshing %s %s %.1f s (%s: %s); serving its last values",
                            name, what, timeout_s, type(err).__name__, str(err)[:200])

    async def close(self) -> None:
        """Close the sources' clients (the app's shutdown); a refresh in flight is cancelled."""
        for task in self._running.values():
            task.cancel()
        for source in self.sources:
            try:
                await source.close()
            except Exception as err:  # noqa: BLE001 - shutting down: say it, go on
                log.warning("metrics: closing %s failed: %s: %s", type(source).__name__,
                            type(err).__name__, err)

    async def render(self) -> bytes:
        """The Prometheus text exposition, after a bounded refresh."""
        await self.refresh()
        return generate_latest(self.registry)


class _Self:
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        f = CounterMetricFamily("faultline_metrics_refresh_errors_total", "scrape-time refreshes of a "
                                "source that failed or timed out (its last values were served)",
                                labels=["source"])
        for name, n in self.metrics.errors.items():
            f.add_metric([name], n)
        yield f
