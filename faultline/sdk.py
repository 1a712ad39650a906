"""Report training progress and checkpoints from the training process itself.

    from faultline import sdk
    sdk.init()                                # job/rank from SLURM_JOB_ID / RANK, settings from env
    for step, batch in enumerate(loader):
        ...
        sdk.progress(step, samples_per_s=tput)
        if step % 1000 == 0:
            sdk.checkpoint_started(step, path)
            save(path)
            sdk.checkpoint_succeeded(step, path)   # or checkpoint_failed(step, path, str(err))

Never blocking: every call puts one small tuple on a bounded queue and returns (a few µs);
a daemon thread with its own event loop and one Kafka producer turns them into
``runtime.progress`` / ``runtime.checkpoint`` events. When the queue is full (broker away
for long) new events are dropped and counted (``stats()['dropped']``), the training loop
never waits on Kafka. ``progress`` is thinned to one event per ``progress_every_s`` (default
1 s, the latest step wins) so a 20 steps/s loop does not flood the topic.

Framework callbacks built on this: ``faultline.integrations.lightning.FaultlineCallback``
and ``faultline.integrations.hf.FaultlineCallback``.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import queue
import socket
import threading
import time
import uuid
from typing import Any

from .config import Settings, load

log = logging.getLogger("faultline.sdk")

_PROGRESS = 0
_CKPT = 1
_STOP = 2
#: how often the sender thread looks at the queue when it is empty
_POLL_S = 0.02


class Reporter:
    """Non-blocking reporter for one training process (one rank)."""

    def __init__(self, job: str | None = None, rank: int | None = None, *, node: str | None = None,
                 settings: Settings | None = None, max_queue: int = 10_000, progress_every_s: float = 1.0,
                 tenant: str | None = None, source: str | None = None, start: bool = True) -> None:
        self.job = str(job or os.environ.get("SLURM_JOB_ID") or os.environ.get("FAULTLINE_JOB") or "") or None
        r = rank if rank is not None else os.environ.get("RANK", os.environ.get("SLURM_PROCID"))
        self.rank = int(r) if r is not None and str(r).isdigit() else None
        self.node = node or socket.gethostname().split(".")[0]
        self.tenant = tenant
        self.settings = settings or load()
        self.source = source or f"sdk@{self.node}"
        self.progress_every_s = progress_every_s
        self._q: queue.Queue = queue.Queue(max_queue)
        self._stats = {"queued": 0, "sent": 0, "dropped": 0, "errors": 0}
        self._last_progress = float("-inf")
        self._held: tuple | None = None  # latest thinned-out progress, sent on the next slot or close
        self._prev_step: tuple[int, float] | None = None
        self._ckpt_started: dict[tuple[int, str], float] = {}
        self._thread: threading.Thread | None = None
        self._closed = False
        if self.job is None:
            log.warning("faultline sdk: no job id (set SLURM_JOB_ID or pass job=); events are not sent")
        if start:
            self.start()

    # ------------------------------------------------------------------ public API
    def progress(self, step: int, *, step_time_s: float | None = None, samples_per_s: float | None = None) -> None:
        """A training heartbeat at ``step`` (thinned to one per ``progress_every_s``)."""
        t = time.monotonic()
        if step_time_s is None and self._prev_step is not None and step > self._prev_step[0]:
            step_time_s = (t - self._prev_step[1]) / (step - self._prev_step[0])
        self._prev_step = (step, t)
        item = (_PROGRESS, time.time_ns() // 1_000_000, int(step), step_time_s, samples_per_s)
        if t - self._last_progress >= self.progress_every_s:
            self._last_progress = t
            self._held = None
            self._put(item)
        else:
            self._held = item

    def checkpoint_started(self, step: int, path: str) -> None:
        self._ckpt_started[(int(step), str(path))] = time.monotonic()
        self._put((_CKPT, time.time_ns() // 1_000_000, "started", int(step), str(path), None, None, None))

    def checkpoint_succeeded(self, step: int, path: str, *, bytes: int | None = None,
                             duration_s: float | None = None) -> None:
        t0 = self._ckpt_started.pop((int(step), str(path)), None)
        if duration_s is None and t0 is not None:
            duration_s = round(time.monotonic() - t0, 3)
        self._put((_CKPT, time.time_ns() // 1_000_000, "succeeded", int(step), str(path), bytes, duration_s, None))

    def checkpoint_failed(self, step: int, path: str, error: str | None = None) -> None:
        t0 = self._ckpt_started.pop((int(step), str(path)), None)
        dur = round(time.monotonic() - t0, 3) if t0 is not None else None
        self._put((_CKPT, time.time_ns() // 1_000_000, "failed", int(step), str(path), None, dur,
                   (error or "checkpoint failed")[:4000]))

    def stats(self) -> dict[str, int]:
        return dict(self._stats)

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait (bounded) until queued events are handed to Kafka; True when the queue is empty."""
        if self._held is not None:
            self._put(self._held)
            self._held = None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._q.unfinished_tasks == 0:
                return True
            time.sleep(0.01)
        return False

    def close(self, timeout_s: float = 5.0) -> None:
        """Flush (bounded) and stop the background thread."""
        if self._closed:
            return
        self.flush(timeout_s)
        self._closed = True
        try:
            self._q.put_nowait((_STOP,))
        except queue.Full:
            pass
        if self._thread is not None:
            self._thread.join(timeout_s)

    # ------------------------------------------------------------------ internals
    def _put(self, item: tuple) -> None:
        if self._closed or self.job is None:
            return
        try:
            self._q.put_nowait(item)
            self._stats["queued"] += 1
        except queue.Full:
            self._stats["dropped"] += 1

    def start(self) -> "Reporter":
        if self._thread is None:
            self._thread = threading.Thread(target=lambda: asyncio.run(self._main()),
                                            name="faultline-sdk", daemon=True)
            self._thread.start()
        return self

    def _event(self, item: tuple):
        from .schemas.events import (RuntimeCheckpoint, RuntimeCheckpointData, RuntimeProgress,
                                     RuntimeProgressData)

        common = dict(v=1, id=uuid.uuid4().hex, ts=item[1], source=self.source, node=self.node,
                      job=self.job, tenant=self.tenant)
        if item[0] == _PROGRESS:
            return RuntimeProgress(**common, data=RuntimeProgressData(
                step=item[2], rank=self.rank, step_time_s=item[3], samples_per_s=item[4]))
        return RuntimeCheckpoint(**common, data=RuntimeCheckpointData(
            phase=item[2], step=item[3], path=item[4], bytes=item[5], duration_s=item[6], error=item[7]))

    async def _main(self) -> None:
        from .producers.publish import Publisher

        pub = None
        backoff = 0.5
        next_try = 0.0
        stopping = False
        while True:
            batch = []
            # poll, not asyncio.to_thread(self._q.get): at interpreter exit (a rank dying of
            # an uncaught exception) concurrent.futures shuts executors down *before* atexit
            # runs close(), and to_thread then raises "cannot schedule new futures after
            # shutdown", losing the events that say how the rank ended (seen on a real job)
            waited = 0.0
            while not batch and waited < 0.5:
                try:
                    batch.append(self._q.get_nowait())
                except queue.Empty:
                    await asyncio.sleep(_POLL_S)
                    waited += _POLL_S
            while len(batch) < 1000:
                try:
                    batch.append(self._q.get_nowait())
                except queue.Empty:
                    break
            evs = []
            for it in batch:
                if it[0] == _STOP:
                    stopping = True
                else:
                    evs.append(self._event(it))
            if evs and pub is None and time.monotonic() >= next_try:
                try:
                    pub = await Publisher(self.settings).start()
                    backoff = 0.5
                except Exception as e:
                    next_try = time.monotonic() + backoff
                    backoff = min(30.0, backoff * 2)
                    log.debug("faultline sdk: broker unreachable (%s)", e)
            if evs:
                if pub is None:
                    self._stats["dropped"] += len(evs)
                else:
                    try:
                        await pub.send_many(evs)
                        await pub.flush()
                        self._stats["sent"] += len(evs)
                    except Exception as e:
                        self._stats["errors"] += 1
                        self._stats["dropped"] += len(evs)
                        log.debug("faultline sdk: send failed (%s)", e)
            for _ in batch:
                self._q.task_done()
            if stopping:
                if pub is not None:
                    await pub.stop()
                return


_default: Reporter | None = None
_lock = threading.Lock()


def init(job: str | None = None, rank: int | None = None, **kw: Any) -> Reporter:
    """Create (or replace) the process-wide reporter the module functions use."""
    global _default
    with _lock:
        if _default is not None:
            _default.close(1.0)
        _default = Reporter(job, rank, **kw)
        return _default


def reporter() -> Reporter:
    global _default
    with _lock:
        if _default is None:
            _default = Reporter()
        return _default


def progress(step: int, **kw: Any) -> None:
    reporter().progress(step, **kw)


def checkpoint_started(step: int, path: str) -> None:
    reporter().checkpoint_started(step, path)


def checkpoint_succeeded(step: int, path: str, **kw: Any) -> None:
    reporter().checkpoint_succeeded(step, path, **kw)


def checkpoint_failed(step: int, path: str, error: str | None = None) -> None:
    reporter().checkpoint_failed(step, path, error)


@atexit.register
def _close_default() -> None:
    if _default is not None:
        _default.close(2.0)
