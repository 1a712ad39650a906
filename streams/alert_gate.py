"""Which detector signals become real-time alerts, and under which id (pure, no I/O).

At most one alert per subject, detector kind and **window** of event time: the windows are
``interval_ms`` long and aligned to the epoch, and an alert's id names its window. The
decision and the id depend on the signal alone, not on the order signals arrive in nor on
which worker sees them, so

- the worker (arrival order per node) and ``faultline diagnose`` (event-time order) raise the
  same alert ids;
- two workers that both see a subject several nodes share (``path:/datasets``, a segment), or
  a worker that took a node over after a rebalance, emit the *same* id again, never a new
  one: the store keeps one row per id (``ReplacingMergeTree``, FINAL) and Alertmanager merges
  records with the same labels. That is the at-least-once statement of docs/reliability.md.

A storm that crosses a window boundary is alerted once per window it touches (the old
"300 s after the last alert" rule gave different alerts in different arrival orders: 0, 200,
400 s arriving as 200, 0, 400 gave 200 and 0 where event order gives 0 and 400).
"""

from __future__ import annotations

import hashlib

#: one alert per subject and kind per this much event time (the windows are aligned to it)
ALERT_WINDOW_MS = 300_000
#: windows remembered at most (oldest dropped first when full; ``evict`` keeps it far lower)
MAX_WINDOWS = 200_000


def alert_id(subject: str, kind: str, window: int) -> str:
    """Stable: every worker and ``diagnose`` name one subject's alert of one window alike."""
    return "alr-" + hashlib.blake2b(f"{subject}|{kind}|{window}".encode(), digest_size=10).hexdigest()


class AlertGate:
    """``admit(subject, kind, ts)``: the alert id when this is the window's first signal of the
    subject and kind, else None (suppressed). ``evict(before_ms)``: forget windows that ended
    before ``before_ms`` (event time). Bounded by ``max_windows``."""

    __slots__ = ("interval_ms", "max_windows", "seen")

    def __init__(self, interval_ms: int = ALERT_WINDOW_MS, max_windows: int = MAX_WINDOWS) -> None:
        if interval_ms <= 0:
            raise ValueError(f"alert interval must be positive, got {interval_ms} ms")
        self.interval_ms, self.max_windows = interval_ms, max_windows
        self.seen: dict[tuple[str, str, int], int] = {}   # (subject, kind, window) -> window end (ms)

    def admit(self, subject: str, kind: str, ts: int) -> str | None:
        window = ts // self.interval_ms
        key = (subject, kind, window)
        if key in self.seen:
            return None
        if len(self.seen) >= self.max_windows:
            del self.seen[next(iter(self.seen))]
        self.seen[key] = (window + 1) * self.interval_ms
        return alert_id(subject, kind, window)

    def evict(self, before_ms: int) -> None:
        if self.seen:
            self.seen = {k: end for k, end in self.seen.items() if end >= before_ms}

    def __len__(self) -> int:
        return len(self.seen)
