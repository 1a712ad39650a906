"""Global event-time watermark across workers and partitions.

Each worker tracks the highest ``ts`` seen per input partition it consumes; its *local*
watermark is the minimum over the partitions that still advance (a partition whose maximum
has not moved for ``idle_s`` of wall time is idle and does not hold time back). When every
partition is idle the worker is *idle*: its watermark is the highest ts it has seen, and
when every worker is idle the job side closes its pending windows (as ``Engine.finish``
does at the end of a file). Workers broadcast ``(watermark, idle)`` on every job partition
once a second; the *global* watermark is the minimum over the workers heard from recently,
and never goes back.
"""

from __future__ import annotations

import time



class Watermarks:
    def __init__(self, *, idle_s: float = 5.0, worker_ttl_s: float = 10.0) -> None:
        self.idle_s = idle_s
        self.worker_ttl_s = worker_ttl_s
        self._parts: dict[tuple[str, int], list[float]] = {}   # tp -> [max ts, wall time it moved]
        self._workers: dict[str, tuple[int, bool, float]] = {}  # worker -> (wm, idle, wall time heard)
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

    def local(self) -> tuple[int, bool] | None:
        """This worker's ``(watermark, idle)``, or None before it has seen any input."""
        if not self._parts:
            return None
        now = time.monotonic()
        active = [p[0] for p in self._parts.values() if now - p[1] < self.idle_s]
        idle = not active
        wm = int(min(active)) if active else int(max(p[0] for p in self._parts.values()))
        if wm > self._local_last:
            self._local_last = wm
        return self._local_last, idle

    def heard(self, worker: str, wm: int, idle: bool) -> None:
        self._workers[worker] = (wm, idle, time.monotonic())

    def value(self, me: str) -> tuple[int, bool]:
        """The global ``(watermark, every worker idle)``; the watermark never goes back."""
        now = time.monotonic()
        vals = [(wm, idle) for w, (wm, idle, at) in self._workers.items()
                if w != me and now - at < self.worker_ttl_s]
        mine = self.local()
        if mine is not None:
            vals.append(mine)
        if vals:
            g = min(v[0] for v in vals)
            if g > self._global:
                self._global = g
        return self._global, bool(vals) and all(v[1] for v in vals)
