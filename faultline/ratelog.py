"""Rate-limited logging: one line per kind at most once per period, with the count of the
lines suppressed since riding on the next one (the worker's errors, the notifier's
delivery warnings). Structured fields go to ``extra``."""

from __future__ import annotations

import logging
import time
from typing import Any

#: a kind of line is logged at most once per this many seconds by default
EVERY_S = 30.0


class RateLimitedLog:
    """``log(level, kind, msg, *args)`` at most once per ``every_s`` per ``kind``."""

    def __init__(self, logger: logging.Logger, every_s: float = EVERY_S) -> None:
        self.log_ = logger
        self.every_s = every_s
        self._last: dict[str, float] = {}
        self._n: dict[str, int] = {}

    def log(self, level: int, kind: str, msg: str, *args: Any, exc_info: bool = False, **extra: Any) -> None:
        now = time.monotonic()
        if now - self._last.get(kind, -1e18) < self.every_s:
            self._n[kind] = self._n.get(kind, 0) + 1
            return
        self._last[kind] = now
        n = self._n.pop(kind, 0)
        if n:
            msg += f" ({n} more like it in the last {self.every_s:.0f} s)"
        self.log_.log(level, msg, *args, exc_info=exc_info, extra=extra or None)

    def error(self, kind: str, msg: str, *args: Any, exc_info: bool = False, **extra: Any) -> None:
        self.log(logging.ERROR, kind, msg, *args, exc_info=exc_info, **extra)

    def warning(self, kind: str, msg: str, *args: Any, **extra: Any) -> None:
        self.log(logging.WARNING, kind, msg, *args, **extra)
