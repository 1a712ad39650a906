"""faultline's own ``/metrics`` (Prometheus): collection apart from exposition.

- ``counters``: the pure tallies and latency histograms a component adds to on its hot path
  (``WorkerCounts``, ``SinkCounts``), and the dead-letter reason classes.
- ``sources``: one client_python custom collector per source (``WorkerSource``,
  ``SinkSource``, ``SpoolSource``, ``CollectorsSource``), reading the component's counters at scrape time.
- ``registry``: ``Metrics``, the explicit registry of one process (``Services.metrics``); ``metrics.add(source)``.
- ``web``: ``GET /metrics`` on a Faust app (``register_views``), a plain aiohttp handler, and
  ``start_metrics_server(bind, port, metrics=...)`` for processes without a web app.

Every series: docs/metrics.md.
"""

from .counters import REASON_CLASSES, SinkCounts, Tally, Timing, WorkerCounts, reason_class
from .registry import Metrics
from .sources import CollectorsSource, SinkSource, Source, SpoolSource, WorkerSource
from .web import metrics_handler, register_views, start_metrics_server

__all__ = ["CollectorsSource", "REASON_CLASSES", "Metrics", "SinkCounts", "SinkSource", "Source", "SpoolSource", "Tally",
           "Timing", "WorkerCounts", "WorkerSource", "metrics_handler", "reason_class",
           "register_views", "start_metrics_server"]
