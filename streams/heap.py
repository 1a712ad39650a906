"""Freed heap handed back to the operating system (issue 18: RSS after a drain).

A worker that drained a backlog freed most of what the drain held (the reorder buffer's
records, the Kafka clients' fetch buffers), but glibc keeps freed heap memory mapped, so the
process stayed at its peak RSS for good (320 MiB after a 64-node week, where a restarted
worker with the same state sits at 151 MiB). ``malloc_trim(0)`` returns the free pages of
every glibc arena (``madvise(MADV_DONTNEED)``, also in the middle of the heap), which is
the part a Python process can give back without moving objects; CPython's own small-object
arenas are unmapped by CPython when they empty.

A trim walks the whole heap with the arena locked (0.55 s for a 745 MiB heap on the
development machine): the event loop waits for it, so it is done rarely and when it pays.
``HeapTrim.check(held)`` runs at most every ``TRIM_EVERY_S`` and trims only when the process
grew by ``TRIM_GROWTH_BYTES`` over its RSS after the last trim *and* what the worker holds
(``held``: records in its reorder buffer and node feed) fell to at most half of its peak
since then: a drain is over, or a rebalance dropped the caches. A steady worker, or one
still draining (its memory in use, nothing to give back), is not trimmed. Each trim's
duration and the RSS it gave back are counted (the worker's stats line: ``trims=``,
``trimmed_mib=``, ``trim_ms=``). Where the C library has no
``malloc_trim`` (musl, macOS) it does nothing and says so once.
``FAULTLINE_HEAP_TRIM_S``: the period (default 60 s; 0 = off).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import time
from typing import Callable

log = logging.getLogger("faultline.heap")

#: the least time between two trims (seconds)
TRIM_EVERY_S = float(os.environ.get("FAULTLINE_HEAP_TRIM_S", "60"))
#: trim only once RSS is this much above what the last trim left
TRIM_GROWTH_BYTES = 32 * 2 ** 20


def rss_bytes(pid: int | str = "self") -> int:
    """Resident set size of a process (``VmRSS``; 0 when unreadable)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def libc_malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none."""
    name = ctypes.util.find_library("c")
    try:
        fn = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


class HeapTrim:
    """When to trim, and what trimming gave back (see the module doc)."""

    def __init__(self, every_s: float = TRIM_EVERY_S, growth_bytes: int = TRIM_GROWTH_BYTES, *,
                 trim: Callable[[int], int] | None | bool = True,
                 rss: Callable[[], int] = rss_bytes) -> None:
        self.every_s = every_s
        self.growth_bytes = growth_bytes
        self._trim = libc_malloc_trim() if trim is True else (trim or None)
        self._rss = rss
        self._last_at: float | None = None
        self._floor = rss()            # RSS after the last trim (or at the start)
        self._peak_held = 0            # the most records held since the last trim
        self.trims = 0
        self.trimmed_bytes = 0
        self.last_ms = 0.0
        if self._trim is None and every_s > 0:
            log.info("heap trim unavailable: the C library has no malloc_trim (RSS stays at its peak "
                     "after a backlog drains)")

    @property
    def enabled(self) -> bool:
        return self._trim is not None and self.every_s > 0

    def check(self, held: int = 0, now: float | None = None) -> bool:
        """Trim if it is due (``held``: records the worker holds now); True when it trimmed."""
        if not self.enabled:
            return False
        if held > self._peak_held:
            self._peak_held = held
        now = time.monotonic() if now is None else now
        if self._last_at is not None and now - self._last_at < self.every_s:
            return False
        if held * 2 > self._peak_held:
            return False            # still holding what it grew for: nothing to give back
        before = self._rss()
        if before - self._floor < self.growth_bytes:
            self._floor = min(self._floor, before)
            return False
        self._last_at = now
        t0 = time.perf_counter()
        self._trim(0)   # type: ignore[misc]
        self.last_ms = (time.perf_counter() - t0) * 1000
        after = self._rss()
        self.trims += 1
        self.trimmed_bytes += max(0, before - after)
        self._floor = after
        self._peak_held = held
        return True

    def stats(self) -> dict[str, float]:
        return {"trims": self.trims, "trimmed_mib": round(self.trimmed_bytes / 2 ** 20, 1),
                "trim_ms": round(self.last_ms, 1)}
