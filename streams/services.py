"""What one worker or sink process shares between its agents and its web views.

``create_app(settings, services=...)`` takes one ``Services`` (or builds one) and hands it to
every ``install`` and ``register_views``: the views close over it, the agents and the sink add
their ``/metrics`` sources to it, the sink puts its store in it. Nothing is stored on the Faust
app for other modules to look up (issue 14 item 8: no service-locator attributes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..config import Settings
from ..metrics.registry import Metrics


@dataclass(eq=False)
class Services:
    """``settings``; ``metrics`` (the process's explicit ``/metrics`` registry); ``store``: the
    sink's store once ``faust_sink.install`` ran, else the one the page or the SQL API opened
    on first use (``open_store``)."""

    settings: Settings
    metrics: Metrics = field(default_factory=Metrics)
    store: Any = None

    @property
    def api_token(self) -> str | None:
        """The token every web route asks for (None: loopback without a token)."""
        return self.settings.api_token

    def open_store(self) -> Any:
        """The store, opened from ``settings`` on first use when no sink gave one (in one
        process chDB shares one session per directory)."""
        if self.store is None:
            from ..sinks.store import open_store

            self.store = open_store(self.settings)
        return self.store
