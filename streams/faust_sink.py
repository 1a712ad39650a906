"""The sink: every valid input event and every output record (alerts, incidents, findings,
dead letters) into ClickHouse / chDB through ``faultline.sinks.SinkWriter``.

The sink is its own consumer group (``sink_group_id``: ``<app id>-sink``), a plain aiokafka
consumer with manual commits: it reads every partition of every input topic and of
fl.alerts, fl.incidents, fl.findings and fl.deadletter whatever the analysis workers do,
so no number of workers (nor ``--sink`` on any of them) can leave a partition unstored.
``faultline sink`` hosts it (with the SQL API and the incident page); ``faultline worker
--sink`` hosts it next to the analysis in one process, still under the sink's own group.

Delivery: a batch (up to ``max_rows`` records or ``within_s`` seconds) is decoded into the
writer, flushed to the store, and only THEN are its offsets committed. A store failure
retries the same batch with exponential backoff (``RETRY_FIRST_S`` doubling up to
``RETRY_CAP_S``), one log line per attempt at most every ``RETRY_LOG_EVERY_S``; nothing is
acked while unstored, so the group's lag rises and drains once the store is back. The next
batch is read and decoded (into a second writer) while one is being stored; batches are
stored and committed strictly in order, so memory holds two batches at most. A crash
re-delivers at most those two; every table is keyed by record id (incidents by id and
revision), so re-inserted rows collapse under FINAL.

One decode per record: input events go through ``schemas.codec.decode`` (the function the
worker's agents use, so the two agree exactly on what is invalid) and the writer takes the
envelope columns and ``data`` from the decoded struct; output records are decoded once into
their typed struct. Invalid input is skipped here: the worker dead-letters it, and its
fl.deadletter record lands in table ``deadletters``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path
from typing import Any, Callable, TYPE_CHECKING

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, KafkaError

from ..config import Settings
from ..metrics.counters import SinkCounts
from ..schemas.codec import ContractError, dead_letter, decode, now_ms
from ..schemas.registry import DEADLETTER, INPUT_TOPICS, OUTPUT_TOPICS

if TYPE_CHECKING:
    from .services import Services

log = logging.getLogger("faultline.streams.sink")

#: every topic the sink stores (base names): the input topics and the output topics
SINK_TOPICS: tuple[str, ...] = (*INPUT_TOPICS, *OUTPUT_TOPICS)
RETRY_FIRST_S = 0.5
RETRY_CAP_S = 30.0
RETRY_LOG_EVERY_S = 5.0
#: how long a revocation waits for the batch in flight to be stored and committed
REVOKE_WAIT_S = 10.0
SKIP_LOG_EVERY_S = 10.0
#: how long a shutdown waits for the batch in flight
STOP_WAIT_S = 15.0
#: a commit that has not answered in this long is given up (the rows are stored: the batch
#: is re-read after the next commit and collapses under FINAL); aiokafka's own commit retries
#: for as long as the group coordinator is unknown
COMMIT_TIMEOUT_S = 30.0
#: no record received for this long while the sink's partitions hold records it has not
#: committed: its Kafka consumer is wedged (aio-libs/aiokafka#703: a consumer can stay silent
#: for good after the whole cluster was away) and is replaced by a new one
STALL_S = 30.0
#: how often a silent sink asks the broker for its lag (a group-less client of its own)
STALL_CHECK_EVERY_S = 10.0
#: how long that question, and the wedged consumer's stop, may take
STALL_CHECK_TIMEOUT_S = 15.0

__all__ = ["SINK_TOPICS", "SinkConsumer", "SinkStoreBusy", "StallGuard", "sink_group_id", "open_sink", "install"]


class SinkStoreBusy(RuntimeError):
    """The embedded store is owned by another process: one sink per chDB directory."""


def sink_group_id(settings: Settings, app_id: str | None = None) -> str:
    """The sink's consumer group: ``<app id>-sink`` (the app id is the analysis group)."""
    from .app import default_app_id

    return f"{app_id or default_app_id(settings)}-sink"


#: the file in a chDB directory that names the sink owning it (its pid): a store locked by
#: that process refuses a second sink; locked by any other process, the sink waits for it
SINK_MARKER = "faultline-sink.pid"
#: a server error that means "not reachable now" (retried), not a wrong URL or credentials
_UNREACHABLE = ("connection refused", "failed to establish", "max retries", "timed out", "timeout",
                "name or service not known", "temporary failure in name resolution", "connection reset",
                "remote end closed", "network is unreachable")


def open_sink(settings: Settings, *, max_rows: int = 50_000) -> tuple[Any, Any]:
    """Open the store and a writer. ``SinkStoreBusy`` names the owner when another SINK owns
    the embedded store (one sink per chDB directory). When something else holds it (a CLI
    query, a notebook, a backup), or the ClickHouse server refuses connections, the store
    is a ``DeferredStore``: the sink starts, and each flush tries to open it again (backoff,
    offsets uncommitted, lag rising) until it is available."""
    from ..sinks import SinkWriter
    from ..sinks.store import DeferredStore, StoreError, StoreLocked

    try:
        store = _open_marked(settings)
    except StoreLocked as e:
        if e.pid is not None and e.pid == _marker_pid(e.path):
            raise _busy(e) from None
        log.warning("the embedded store is held by %s (not a sink); the sink starts and retries opening it "
                    "with backoff, storing nothing meanwhile: stop that process to let it in",
                    f"process {e.pid}" if e.pid else "another process", extra={"store": e.path, "pid": e.pid})
        store = DeferredStore(lambda: _open_marked(settings), backend="chdb", location=e.path, error=e)
    except StoreError as e:
        if not settings.clickhouse_url or not any(m in str(e).lower() for m in _UNREACHABLE):
            raise
        log.warning("the ClickHouse server is not reachable; the sink starts and retries with backoff, "
                    "storing nothing meanwhile: %s", str(e)[:300])
        store = DeferredStore(lambda: _open_marked(settings), backend="clickhouse",
                              location=_server_location(settings.clickhouse_url), error=e)
    return store, SinkWriter(store, max_rows=max_rows, max_delay_s=1.0)


def _open_marked(settings: Settings) -> Any:
    """``open_store``; on chDB, write this process's pid to ``SINK_MARKER`` (it owns it now)."""
    from ..sinks import open_store

    store = open_store(settings)
    if store.backend == "chdb":
        try:
            (Path(store.location) / SINK_MARKER).write_text(f"{os.getpid()}\n")
        except OSError as err:   # read-only directory: a second sink would wait instead of refusing
            log.warning("cannot write the sink marker: %s", err, extra={"store": store.location})
    return store


def _marker_pid(path: str) -> int | None:
    try:
        return int((Path(path) / SINK_MARKER).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _server_location(url: str) -> str:
    from urllib.parse import urlsplit

    p = urlsplit(url)
    return f"{p.scheme}://{p.hostname}:{p.port or 8123}{p.path or ''}"   # never the credentials


def _busy(e: Any) -> SinkStoreBusy:
    who = f"process {e.pid}" if e.pid else "another process"
    stop = f"stop that sink (kill {e.pid})" if e.pid else "stop the process that owns it"
    return SinkStoreBusy(
        f"the embedded store {e.path} is owned by {who}; exactly one sink (`faultline sink` or "
        f"`faultline worker --sink`) may own an embedded chDB store: {stop}, or run the sinks "
        "against a ClickHouse server (FAULTLINE_CLICKHOUSE_URL), which any number of sinks share")


class _RateLimited:
    """At most one log line per ``every_s`` (the suppressed count rides on the next one)."""

    def __init__(self, every_s: float) -> None:
        self.every_s = every_s
        self._last = -1e18
        self.suppressed = 0

    def ready(self) -> bool:
        now = time.monotonic()
        if now - self._last >= self.every_s:
            self._last = now
            return True
        self.suppressed += 1
        return False

    def take_suppressed(self) -> int:
        n, self.suppressed = self.suppressed, 0
        return n


async def _quietly(aw: Any, timeout_s: float) -> bool:
    """Await a clean-up (a client's stop or close) for at most ``timeout_s``; False when it
    failed or did not finish (the client is abandoned)."""
    try:
        await asyncio.wait_for(aw, timeout_s)
        return True
    except Exception:  # noqa: BLE001 - best effort: the caller logs what it abandons
        return False


class StallGuard:
    """When a silent sink's consumer counts as wedged: no record received for ``stall_s``
    while its partitions hold records the group has not committed (asked at most every
    ``every_s``). Silence while caught up, or while the store refuses a batch (the loop
    then waits in the store's own backoff, not here), is not a stall. Pure: the sink gives
    it the clock readings and the offsets."""

    def __init__(self, stall_s: float = STALL_S, every_s: float = STALL_CHECK_EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stall_s = stall_s
        self.every_s = every_s
        self.clock = clock
        self.last_progress = clock()
        self._last_check = -1e18

    def progressed(self) -> None:
        """Records arrived, or a new consumer started: the silence starts again."""
        self.last_progress = self.clock()

    def silent_s(self) -> float:
        return self.clock() - self.last_progress

    def due(self) -> bool:
        """Silent long enough to ask the broker (and not asked within ``every_s``)."""
        now = self.clock()
        if now - self.last_progress < self.stall_s or now - self._last_check < self.every_s:
            return False
        self._last_check = now
        return True

    @staticmethod
    def behind(ends: dict[Any, int], committed: dict[Any, int]) -> int:
        """Records of these partitions the group has not committed (end - committed)."""
        return sum(max(0, end - committed.get(tp, 0)) for tp, end in ends.items())


class _Listener(ConsumerRebalanceListener):
    """On revocation, let the batch in flight finish storing and committing (bounded), so
    the partitions' next owner does not re-store it; on assignment, log it."""

    def __init__(self, sink: "SinkConsumer") -> None:
        self.sink = sink

    async def on_partitions_revoked(self, revoked: Any) -> None:
        if revoked:
            await self.sink.wait_idle(REVOKE_WAIT_S)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        log.info("sink partitions assigned", extra={"group": self.sink.group_id, "partitions": len(assigned)})


class SinkConsumer:
    """The sink's consumer loop (``await run()``; ``stop()`` ends it after the batch in flight).

    ``writer``: a ``SinkWriter``; its ``flush`` runs in an executor thread, never on the loop.
    ``on_stored(n_records)`` (tests, progress) is called after each stored and committed batch.
    """

    def __init__(self, settings: Settings, writer: Any, *, group_id: str, max_rows: int = 20_000,
                 within_s: float = 1.0, retry_cap_s: float = RETRY_CAP_S,
                 on_stored: Callable[[int], None] | None = None) -> None:
        self.settings = settings
        self.writer = writer
        self.group_id = group_id
        self.max_rows = max_rows
        self.within_s = within_s
        self.retry_cap_s = retry_cap_s
        self.on_stored = on_stored
        T = settings.topic
        self._kind = {T(t): ("input" if t in INPUT_TOPICS else t) for t in SINK_TOPICS}
        self._stopping = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._skips = _RateLimited(SKIP_LOG_EVERY_S)
        self._done = asyncio.Event()
        self.counts = SinkCounts()   # /metrics: rows by table, flush latency
        self._stop_ev = asyncio.Event()
        self.consumer: AIOKafkaConsumer | None = None
        self.stored = 0
        self.skipped = 0          # invalid input records (the worker dead-letters them)
        self.dead_lettered = 0    # invalid output / dead-letter records, stored as dead letters
        self._batch_n = 0
        self.failed_attempts = 0   # store flushes that failed (and were retried), in total
        self.commit_timeouts = 0   # commits given up after COMMIT_TIMEOUT_S (batch re-read)
        self.consumer_restarts = 0   # wedged Kafka consumers replaced (StallGuard)
        self.last_behind = 0
        self.guard = StallGuard()
        self._stall_said = _RateLimited(60.0)
        from ..metrics.sources import GroupOffsets

        #: the group's offsets with clients of its own: the stall check, and /metrics (SinkSource)
        self.offsets = GroupOffsets(settings, group_id)

    # ------------------------------------------------------------ lifecycle
    def stop(self) -> None:
        self._stopping = True
        self._stop_ev.set()

    async def close(self, timeout_s: float) -> None:
        """Stop after the batch in flight is stored and committed (waits at most ``timeout_s``)."""
        self.stop()
        if self.consumer is not None:
            try:
                await asyncio.wait_for(self._done.wait(), timeout_s)
            except asyncio.TimeoutError:
                log.warning("sink did not finish its batch within %.0f s of shutdown; it is re-read "
                            "on restart", timeout_s, extra={"group": self.group_id})

    async def wait_idle(self, timeout_s: float) -> bool:
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
            return True
        except asyncio.TimeoutError:
            log.warning("sink batch still unstored at a partition revocation; the next owner "
                        "re-reads it (rows are idempotent)", extra={"group": self.group_id})
            return False

    def _new_consumer(self) -> AIOKafkaConsumer:
        c = AIOKafkaConsumer(
            **self.settings.kafka_kwargs(), group_id=self.group_id, enable_auto_commit=False,
            auto_offset_reset="earliest", max_poll_records=self.max_rows,
            session_timeout_ms=15_000, heartbeat_interval_ms=3_000)
        c.subscribe(topics=sorted(self._kind), listener=_Listener(self))
        return c

    async def _start_consumer(self) -> None:
        """A new consumer, started; the broker away: retried with backoff until it answers
        (or the sink stops)."""
        delay = RETRY_FIRST_S
        while True:
            c = self.consumer = self._new_consumer()
            try:
                await c.start()
                self.guard.progressed()
                return
            except KafkaError as err:
                log.warning("sink: starting a new Kafka consumer failed (%s: %s); retrying in %.1f s",
                            type(err).__name__, str(err)[:200], delay, extra={"group": self.group_id})
                await _quietly(c.stop(), STALL_CHECK_TIMEOUT_S)
            try:
                await asyncio.wait_for(self._stop_ev.wait(), delay)
                return
            except asyncio.TimeoutError:
                delay = min(delay * 2, self.retry_cap_s)

    async def run(self) -> None:
        await self._start_consumer()   # a broker away at start is waited for, like after a stall
        log.info("sink consuming", extra={"group": self.group_id, "topics": len(self._kind)})
        # two writers: the next batch is read and decoded into one while the other is stored;
        # batches are stored and committed strictly in order (at most one in flight)
        spare = type(self.writer)(self.writer.store, max_rows=self.writer.max_rows,
                                  max_delay_s=self.writer.max_delay_s)
        pending: asyncio.Task[None] | None = None
        try:
            while not self._stopping:
                offsets = await self._take()
                if not offsets:
                    if (pending is None or pending.done()) and self.guard.due() and await self._stalled():
                        await self._replace_consumer()
                    continue
                if pending is not None:
                    await pending
                self._idle.clear()
                pending = asyncio.create_task(self._store_and_commit(self.writer, offsets, self._batch_n))
                self.writer, spare = spare, self.writer
        finally:
            try:
                if pending is not None and not pending.done():
                    self.stop()   # a retrying store gives up at once; the batch is re-read on restart
                    await asyncio.wait([pending], timeout=STOP_WAIT_S)
                await self.consumer.stop()
            finally:
                await _quietly(self.offsets.close(), STALL_CHECK_TIMEOUT_S)
                self._done.set()

    # ------------------------------------------------------------ a wedged consumer
    def _partitions(self) -> list[tuple[str, int]]:
        """The partitions whose lag says whether this sink is wedged: its assignment, or,
        holding none (it may never have re-joined its group), every partition it reads."""
        c = self.consumer
        assert c is not None
        mine = c.assignment()
        if mine:
            return sorted((tp.topic, tp.partition) for tp in mine)
        return sorted((t, p) for t in self._kind for p in (c.partitions_for_topic(t) or ()))

    async def _stalled(self) -> bool:
        """Silent for ``STALL_S`` (``guard.due``): are records waiting on its partitions? Asked
        with clients of its own (``GroupOffsets``); no answer (the broker still away) is no."""
        tps = self._partitions()
        if not tps:
            return False
        try:
            ends, done = await asyncio.wait_for(self.offsets.fetch(tps), STALL_CHECK_TIMEOUT_S)
        except Exception as err:  # noqa: BLE001 - unreachable, timed out: ask again later
            if self._stall_said.ready():
                log.warning("sink: silent for %.0f s and its lag cannot be read (%s: %s); asking again "
                            "in %.0f s", self.guard.silent_s(), type(err).__name__, str(err)[:200],
                            self.guard.every_s, extra={"group": self.group_id})
            await _quietly(self.offsets.close(), STALL_CHECK_TIMEOUT_S)   # fresh clients next time
            return False
        behind = self.guard.behind(ends, done)
        self.last_behind = behind
        return behind > 0

    async def _replace_consumer(self) -> None:
        """Stop the wedged consumer (bounded: a wedged one may not stop) and start a new one
        under the same group; it resumes from the group's committed offsets (every batch
        stored before its commit, so nothing is lost; a re-read batch collapses under FINAL)."""
        old = self.consumer
        assert old is not None
        self.consumer_restarts += 1
        log.warning("sink: no record received for %.0f s while %d records wait on its partitions; "
                    "replacing its Kafka consumer (restart %d): it resumes from the group's committed "
                    "offsets", self.guard.silent_s(), self.last_behind, self.consumer_restarts,
                    extra={"group": self.group_id, "behind": self.last_behind})
        if not await _quietly(old.stop(), STALL_CHECK_TIMEOUT_S):
            log.warning("sink: the wedged consumer did not stop cleanly; abandoned (its group "
                        "membership times out)", extra={"group": self.group_id})
        await self._start_consumer()

    async def _store_and_commit(self, writer: Any, offsets: dict[TopicPartition, int], n: int) -> None:
        try:
            if await self._store(writer):
                await self._commit(offsets, n)
        finally:
            self._idle.set()

    # ------------------------------------------------------------ one batch
    async def _take(self) -> dict[TopicPartition, int]:
        """Fill the writer with up to ``max_rows`` records or ``within_s`` seconds of them;
        returns the next offset of each partition read (empty: nothing arrived)."""
        assert self.consumer is not None
        offsets: dict[TopicPartition, int] = {}
        n = 0
        deadline: float | None = None
        while not self._stopping and n < self.max_rows:
            wait = 0.5 if deadline is None else deadline - time.monotonic()
            if wait <= 0:
                break
            got = await self.consumer.getmany(timeout_ms=int(wait * 1000), max_records=self.max_rows - n)
            if not got:
                if deadline is None:
                    return offsets
                continue
            if deadline is None:
                deadline = time.monotonic() + self.within_s
            now = now_ms()
            for tp, recs in got.items():
                if recs:
                    self.guard.progressed()
                    self.add_records(self._kind.get(tp.topic, "input"), recs, now)
                    offsets[tp] = recs[-1].offset + 1
                    n += len(recs)
        self._batch_n = n
        return offsets

    def add_records(self, kind: str, recs: list[Any], now: int) -> None:
        """Records of one topic (``kind``: "input" or the output topic's base name) into the
        writer, one decode each. An invalid input record is skipped (counted in ``skipped``);
        an output record the store cannot hold becomes a ``deadletters`` row with its reason."""
        w = self.writer
        if kind == "input":
            evs = []
            for r in recs:
                if r.value is None:
                    continue
                try:
                    evs.append(decode(r.value, now=now))
                except ContractError:
                    self.skipped += 1   # the worker dead-letters it (same decode function)
            w.add_events(evs)
            return
        for r in recs:
            if r.value is None:
                continue
            try:
                if kind == DEADLETTER:
                    w.add_deadletter(r.value)
                else:
                    w.add_output_raw(kind, r.value)
            except (ValueError, TypeError) as err:
                # not a record the store can hold (a foreign producer, a bug): keep it as a
                # dead letter with the reason, so it is neither lost nor able to fail its batch
                reason = f"{kind} record refused by the sink: {err}"
                w.add_deadletter(dead_letter(r.value, reason, r.topic, r.partition, r.offset))
                self.dead_lettered += 1
                if self._skips.ready():
                    log.warning("sink stored an invalid %s record as a dead letter", kind,
                                extra={"topic": r.topic, "partition": r.partition, "offset": r.offset,
                                       "error": str(err)[:300], "suppressed": self._skips.take_suppressed()})

    async def _store(self, writer: Any) -> bool:
        """Flush until stored (backoff, rate-limited log lines); False when stopped first."""
        loop = asyncio.get_running_loop()
        delay, attempt, t0 = RETRY_FIRST_S, 0, time.monotonic()
        said = _RateLimited(RETRY_LOG_EVERY_S)
        while True:
            try:
                st = await loop.run_in_executor(None, writer.flush)
                self.counts.add_flush(st)
                break
            except Exception as err:  # noqa: BLE001 - keep the batch; retry (rows are idempotent)
                attempt += 1
                self.failed_attempts += 1
                if said.ready():
                    log.error("sink: storing a batch failed (attempt %d, unstored for %.0f s); retrying in "
                              "%.1f s, offsets stay uncommitted: %s", attempt, time.monotonic() - t0, delay,
                              str(err)[:300], extra={"group": self.group_id, "attempt": attempt})
                try:
                    await asyncio.wait_for(self._stop_ev.wait(), delay)
                    return False   # stopping: the batch stays uncommitted, re-read on restart
                except asyncio.TimeoutError:
                    pass
                delay = min(delay * 2, self.retry_cap_s)
        if attempt:
            log.warning("sink: store back after %d failed attempts (%.1f s); catching up", attempt,
                        time.monotonic() - t0, extra={"group": self.group_id})
        return True

    async def _commit(self, offsets: dict[TopicPartition, int], n: int) -> None:
        assert self.consumer is not None
        mine = self.consumer.assignment()
        keep = {tp: off for tp, off in offsets.items() if tp in mine}
        self.stored += n
        if keep:
            try:
                await asyncio.wait_for(self.consumer.commit(keep), COMMIT_TIMEOUT_S)
            except asyncio.TimeoutError:
                self.commit_timeouts += 1
                log.warning("sink commit not answered within %.0f s after storing; given up, the batch "
                            "will be re-read (its rows collapse under FINAL)", COMMIT_TIMEOUT_S,
                            extra={"group": self.group_id})
            except (CommitFailedError, KafkaError) as err:
                # the group moved on (rebalance): the partitions' owner re-reads from the last
                # commit; the rows are stored already and collapse under FINAL
                log.warning("sink commit failed after storing; the batch will be re-read",
                            extra={"group": self.group_id, "error": str(err)[:300]})
        if self.on_stored is not None:
            self.on_stored(n)


def install(app: Any, services: Services, store: Any, writer: Any, *, group_id: str,
            max_rows: int = 20_000, within_s: float = 1.0) -> SinkConsumer:
    """Host the sink in the Faust ``app`` as a task (``faultline worker --sink``, ``faultline
    sink``); ``services.store`` (``streams.services.Services``) lets the SQL API and the
    incident page read the store, ``services.metrics`` gets the sink's ``/metrics`` source.
    On shutdown the batch in flight is stored and committed first (bounded by STOP_WAIT_S)."""
    services.store = store
    sink = SinkConsumer(services.settings, writer, group_id=group_id, max_rows=max_rows, within_s=within_s)
    from ..metrics import SinkSource

    services.metrics.add(SinkSource(sink))   # GET /metrics (faultline.metrics.web) reads it when scraped

    @app.task
    async def faultline_sink() -> None:
        try:
            await sink.run()
        except asyncio.CancelledError:
            raise
        except Exception as err:  # a dead sink must not look alive: crash the worker, loudly
            log.exception("the sink stopped: %s", err)
            await app.crash(err)

    @app.on_before_shutdown.connect
    async def _stop_sink(sender: Any, **kw: Any) -> None:
        await sink.close(STOP_WAIT_S)

    return sink
