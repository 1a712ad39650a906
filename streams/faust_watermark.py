"""Global event-time watermark across workers and partitions.

Each worker tracks the highest ``ts`` seen per input partition it consumes; its *local*
watermark is the minimum over the partitions that still advance (a partition whose maximum
has not moved for ``idle_s`` of wall time is idle and does not hold time back; when every
partition is idle the local watermark becomes the wall clock, so a quiet pipeline still
closes its windows). Workers broadcast their local watermark on every job partition once a
second; the *global* watermark is the minimum over the workers heard from recently, and
never goes back.
"""

from __future__ import annotations

import time

from ..schemas.codec import now_ms


class Watermarks:
    def __init__(self, *, idle_s: float = 5.0, worker_ttl_s: float = 10.0) -> None:
        self.idle_s = idle_s
        self.worker_ttl_s = worker_ttl_s
        self._parts: dict[tuple[str, int], list[float]] = {}   # tp -> [max ts, wall time it moved]
        self._workers: dict[str, tuple[int, float]] = {}        # worker id -> (wm, wall time heard)
        self._global = -(1 << 62)
        self._local_last = -(1 << 62)

    def observe(self, topic: str, partition: int, ts: int) -> None:
        p = self._parts.get((topic, partition))
        if p is None:
            self._parts[(topic, partition)] = [ts, time.monotonic()]
        elif ts > p[0]:
            p[0] = ts
            p[1] = time.monotonic()

    def forget_partitions(self) -> None:
        """After a rebalance the partitions this worker reads change."""
        self._parts.clear()

    def local(self) -> int | None:
        """This worker's watermark, or None before it has seen any input."""
        if not self._parts:
            return None
        now = time.monotonic()
        active = [p[0] for p in self._parts.values() if now - p[1] < self.idle_s]
        if active:
            wm = int(min(active))
        else:
            wm = max(now_ms(), int(max(p[0] for p in self._parts.values())))
        if wm > self._local_last:
            self._local_last = wm
        return self._local_last

    def heard(self, worker: str, wm: int) -> None:
        self._workers[worker] = (wm, time.monotonic())

    def value(self, me: str) -> int:
        """The global watermark (monotonic)."""
        now = time.monotonic()
        vals = [wm for w, (wm, at) in self._workers.items() if w != me and now - at < self.worker_ttl_s]
        mine = self.local()
        if mine is not None:
            vals.append(mine)
        if vals:
            g = min(vals)
            if g > self._global:
                self._global = g
        return self._global
