"""Every Faust / aiokafka internal the worker relies on, in one module.

The worker's fast path (``fast_drain``, ``fast_conductor``, ``RawFeed``) and its rebalance
gate need a few things Faust does not offer publicly: its consumer's message pump, its
conductor's per-partition handlers, its buffer-full hooks, its recovery state, the aiokafka
consumer behind Faust's consumer thread. They are all here, and nowhere else, so a Faust or
aiokafka upgrade breaks this module (and ``tests/test_faust_compat.py``, which drives each
piece against the installed versions), not the agents.

``check_versions()`` refuses to start on versions outside ``TESTED`` (also the range pinned
in pyproject.toml) with an error naming what is installed and what is supported.

Public aiokafka / Faust API is preferred wherever it exists: high-water marks come from
``Consumer.highwater(tp)``, fetch positions from ``Consumer.position(tp)`` (both delegate to
aiokafka's public ``highwater()`` / ``position()``), end offsets from
``Consumer.highwaters()`` (aiokafka's ``end_offsets()``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from importlib import metadata
from typing import Any, Container, Iterable, Mapping


log = logging.getLogger("faultline.streams.compat")

#: the versions this module was written and tested against (pyproject.toml pins the same)
TESTED: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    "faust-streaming": ((0, 15, 3), (0, 16)),     # >= first, < second
    "aiokafka": ((0, 14, 0), (0, 15)),
    "mode-streaming": ((0, 7, 1), (0, 8)),
}


class IncompatibleVersions(RuntimeError):
    """An installed Faust / aiokafka / mode version is outside the tested range."""


def _parse(v: str) -> tuple[int, ...]:
    out = []
    for part in v.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        if not digits:
            break
        out.append(int(digits))
        if digits != part:
            break
    return tuple(out)


def check_versions(installed: Mapping[str, str] | None = None) -> dict[str, str]:
    """Raise ``IncompatibleVersions`` unless every package of ``TESTED`` is installed in its
    range. Returns ``{package: version}``. ``installed`` overrides the lookup (tests)."""
    found: dict[str, str] = {}
    bad: list[str] = []
    for pkg, (lo, hi) in TESTED.items():
        try:
            v = installed[pkg] if installed is not None else metadata.version(pkg)
        except (KeyError, metadata.PackageNotFoundError):
            bad.append(f"{pkg} is not installed")
            continue
        found[pkg] = v
        if not (lo <= _parse(v) < hi):
            bad.append(f"{pkg} {v} is installed; the worker is tested with "
                       f">={'.'.join(map(str, lo))},<{'.'.join(map(str, hi))}")
    if bad:
        raise IncompatibleVersions(
            "the faultline worker relies on Faust/aiokafka internals (streams/faust_compat.py): "
            + "; ".join(bad) + ". Install the tested versions: pip install 'faultline[...]' "
            "from this checkout (pyproject.toml pins them), or run tests/test_faust_compat.py "
            "against the new versions and widen TESTED")
    return found


# ------------------------------------------------------------------ consumer fast path
def fast_drain(consumer_cls: type) -> type:
    """A subclass of Faust's consumer class whose message pump skips ``wait_first`` when the
    delivery cannot block.

    Faust's ``Consumer._drain_messages`` hands every fetched record to the conductor with
    ``await self.wait_first(callback(message), self.suspend_flow.wait())``: four tasks and
    an ``asyncio.wait`` per message, which caps a worker at a few thousand events/s however
    cheap the agents are. The ``wait_first`` is there so a rebalance (``suspend_flow``) can
    abandon a delivery blocked on flow control or on a full stream buffer. Here a record
    is delivered with a plain ``await`` when neither can happen (flow control active,
    flow not suspended, every stream buffer of the partition below its maximum; nothing
    else runs on the loop between the check and the delivery); otherwise the original
    ``wait_first`` path runs. Offsets, acks and commits are Faust's, unchanged.
    """
    if getattr(consumer_cls, "_faultline_fast_drain", False):
        return consumer_cls

    async def _drain_messages(self: Any, fetcher: Any) -> None:  # pragma: no cover - worker loop
        import asyncio

        callback = self.callback
        getmany = self.getmany
        consumer_should_stop = self._stopped.is_set
        fetcher_should_stop = fetcher._stopped.is_set
        get_read_offset = self._read_offset.__getitem__
        set_read_offset = self._read_offset.__setitem__
        from faust.transport.consumer import CONSUMER_FETCHING

        set_flag = self.diag.set_flag
        unset_flag = self.diag.unset_flag
        commit_every = self._commit_every
        flow_active = self.app.flow_control.is_active
        suspended = self.suspend_flow.is_set
        tp_index = self.app.topics._tp_index
        app = self.app
        yield_every = 100
        num_since_yield = 0
        sleep = asyncio.sleep
        try:
            while not (consumer_should_stop() or fetcher_should_stop()):
                set_flag(CONSUMER_FETCHING)
                ait = getmany(timeout=1.0)
                await self.sleep(0)
                if not self.should_stop:
                    async for tp, message in ait:
                        num_since_yield += 1
                        if num_since_yield > yield_every:
                            await sleep(0)
                            num_since_yield = 0
                        offset = message.offset
                        r_offset = get_read_offset(tp)
                        if r_offset is None or offset >= r_offset:
                            # No ``_add_gap`` for a jump in offsets (Faust's, for compacted
                            # topics and transaction markers): faultline's topics are
                            # delete-only and not transactional, so a jump is records that
                            # exist and were skipped (dropped by getmany while the partition
                            # was not active, or fetched before a seek). Marked as a gap,
                            # the commit passed over them unprocessed, and when they came
                            # again the gap's offsets were acked twice, which stalled the
                            # commit (one offset per commit). Left as a hole, CommitWatch
                            # fetches them again.
                            if commit_every is not None and self._n_acked >= commit_every:
                                self._n_acked = 0
                                await self.commit()
                            if flow_active() and not suspended() and not any(
                                    ch.queue.full() for ch in tp_index.get(tp, ())):
                                await callback(message)
                            else:
                                await self.wait_first(callback(message), self.suspend_flow.wait())
                            # A delivery can block across a rebalance (flow control is
                            # acquired inside it): Faust popped this partition's read offset
                            # on revoke and seeked back to the committed one on assignment.
                            # Setting the old offset now would make every re-fetched record
                            # below it look already read: never delivered, never acked, the
                            # commit stuck at that gap for good. The seek set it already.
                            if message.generation_id == app.consumer_generation_id:
                                set_read_offset(tp, offset)
                    unset_flag(CONSUMER_FETCHING)
        except self.consumer_stopped_errors:
            if self.transport.app.should_stop:
                self.log.info("Broker stopped consumer, shutting down...")
                return
            raise
        except asyncio.CancelledError:
            if self.transport.app.should_stop:
                self.log.info("Consumer shutting down for user cancel.")
                return
            raise
        except Exception as exc:
            self.log.exception("Drain messages raised: %r", exc)
            raise
        finally:
            unset_flag(CONSUMER_FETCHING)

    async def _commit_offsets(self: Any, offsets: Any, start_new_transaction: bool = True) -> bool:
        """Faust's, except that a commit the broker refused is not recorded as done.

        Faust updates ``_committed_offset`` whether or not the commit went through (one
        that fails because the group "already rebalanced" returns False quietly), and the
        acks it covered were already popped: the partition then never commits those
        offsets again, and the group's committed offset stays behind wherever no record
        follows. Here the committed offset is put back and the popped acks restored, so the
        next commit retries them."""
        before = {tp: self._committed_offset.get(tp) for tp in offsets}
        generation = self.app.consumer_generation_id
        did = await consumer_cls._commit_offsets(self, offsets, start_new_transaction=start_new_transaction)
        if self.app.consumer_generation_id != generation:
            await self.faultline_resync_committed(offsets)
        elif not did:
            for tp, off in offsets.items():
                prev = before.get(tp)
                if self._committed_offset.get(tp) != off or prev is None or off <= prev:
                    continue
                self._committed_offset[tp] = prev
                back = [o for o in range(prev, off) if o not in self._acked_index[tp]]
                self._acked[tp].extend(back)
                self._acked[tp].sort()
                self._acked_index[tp].update(back)
                self._faultline_failed_commits += 1
        return did

    def _new_offset(self: Any, tp: Any) -> Any:
        """Faust's, on acked offsets without repeats: it commits the first run of consecutive
        acked offsets, and a repeated offset (a record acked again after a re-fetch, or a gap
        range filled over acked ones) ends the run, so the commit moved one offset per commit
        interval (the group's commit stayed thousands behind in the rebalance trials)."""
        acked = self._acked.get(tp)
        if acked and len(set(acked)) != len(acked):
            acked[:] = sorted(set(acked))
        if acked and not self._committed_offset.get(tp):
            # Faust skips its head-gap test when nothing was committed yet (None, or 0: its
            # ``if committed_offset:``) and commits the first run of acked offsets wherever it
            # starts: records at the partition's start fetched while it was not active yet
            # (dropped, never delivered) were committed over for good. Seen in session 12: a
            # fl.runtime partition whose first records were all produced after its owner was
            # SIGKILLed; the new owner committed 17..137 and never read 0..16 (a job's
            # cuda_error lost). Measured from the partition's start offset instead.
            start = starts(self).get(tp)
            if start is None or min(acked) > start:
                return None   # not yet known, or a head gap: CommitWatch fetches it again
        return consumer_cls._new_offset(self, tp)

    async def faultline_note_starts(self: Any) -> int:
        """The start offset (aiokafka's public ``beginning_offsets``, on the consumer's own
        thread) of each assigned partition with nothing committed yet: where its first commit
        must begin (``_new_offset``). Called after each assignment; returns how many."""
        from faust.transport.consumer import ensure_TP

        known = starts(self)
        want = [tp for tp in self.assignment() if not self._committed_offset.get(tp) and tp not in known]
        if not want:
            return 0
        thread = self._thread
        consumer = thread._ensure_consumer()
        got = await thread.call_thread(consumer.beginning_offsets, want)
        for tp, off in got.items():
            known[ensure_TP(tp)] = int(off)
        return len(got)

    async def faultline_resync_committed(self: Any, offsets: Any) -> None:
        """A rebalance ran while a commit was in flight (``producer.flush()`` and the commit
        both await): the revoke dropped these partitions' bookkeeping and the assignment's
        seek set the committed offsets from the broker, then Faust's update after the commit
        overwrote them with this commit's offsets whether it reached the broker or not (a
        partition revoked meantime is silently left out of the request). A committed offset
        ahead of the broker's means the partition never commits below it again, and where no
        record follows the group's commit stays behind for good. So the committed offset of
        each partition is read back from the broker (aiokafka's public ``committed()``, on
        the consumer's thread) and a revoked one is dropped."""
        from faust.transport.consumer import ensure_TP

        thread = self._thread
        consumer = thread._ensure_consumer()
        assigned = self.assignment()
        for tp in map(ensure_TP, offsets):
            if tp not in assigned:
                self._committed_offset.pop(tp, None)
                continue
            try:
                off = await thread.call_thread(consumer.committed, tp)
            except Exception:  # noqa: BLE001 - coordinator away: the next rebalance re-reads it
                continue
            if self._committed_offset.get(tp) != (off or None):
                self._faultline_resynced_commits += 1
            self._committed_offset[tp] = off or None

    async def faultline_refetch(self: Any, tp: Any, offset: int) -> bool:
        """Fetch ``tp`` again from ``offset``, on the consumer's own thread and loop (Faust's
        ``seek`` calls aiokafka's from the caller's thread, racing a fetch in flight there).
        The assignment test and the seek run there in one step, so a partition revoked in
        the meantime is left alone (aiokafka's ``seek`` on it raises IllegalStateError, which
        crashed the worker); returns whether it seeked."""
        from faust.transport.consumer import ensure_TP

        tp = ensure_TP(tp)
        thread = self._thread
        consumer = thread._ensure_consumer()

        def seek_if_assigned() -> bool:
            if tp not in consumer.assignment():
                return False
            consumer.seek(tp, offset)
            if offset > 0:
                self._read_offset[tp] = offset
            else:
                self._read_offset.pop(tp, None)
            return True

        return bool(await thread.call_thread(seek_if_assigned))

    async def _wait_next_records(self: Any, timeout: float) -> Any:
        """Faust's, except that records its ``getmany`` would drop are put back.

        ``getmany`` yields a fetched record only if its partition is in the active set it
        fetched with (or buffer-paused), and none at all while the flow is stopped. That set
        is Faust's live one: a rebalance pauses and resumes partitions while the fetch runs
        on the consumer's thread, so aiokafka can return records of a partition that is not in
        it by the time ``getmany`` filters them. They were dropped, with the fetch position
        already past them. A seek to the committed offset repairs that for a partition with
        a commit, but aiokafka's ``seek_to_committed`` leaves a partition with none where it
        is. Session 13 traced it: right after a SIGKILL's rebalance, fl.runtime/2@0..34 came
        back from aiokafka during recovery, outside the active set, and never reached the
        drain. Job evaluation then ran without them (a transient host_oom revision on the
        wrong node) until ``CommitWatch`` fetched them again 5 s later. Here each such
        partition is sought back to its first returned record, on the consumer's thread,
        before the next fetch, so it comes again once active."""
        records, active = await consumer_cls._wait_next_records(self, timeout)
        if records and (active is not None or not self.flow_active):   # None: client-only, all kept
            keep = active if self.flow_active else ()
            buffered = getattr(self, "_buffered_partitions", ())
            for tp, recs in list(records.items()):
                if recs and not (tp in keep or tp in buffered):
                    del records[tp]
                    if await self.faultline_refetch(tp, recs[0].offset):
                        self._faultline_putbacks += 1
        return records, active

    return type(consumer_cls.__name__, (consumer_cls,),
                {"_drain_messages": _drain_messages, "_faultline_fast_drain": True,
                 "_wait_next_records": _wait_next_records, "_faultline_putbacks": 0,
                 "faultline_refetch": faultline_refetch, "_commit_offsets": _commit_offsets,
                 "faultline_note_starts": faultline_note_starts,
                 "faultline_resync_committed": faultline_resync_committed, "_new_offset": _new_offset,
                 "_faultline_failed_commits": 0, "_faultline_resynced_commits": 0,
                 "__module__": consumer_cls.__module__})


#: how long a producer flush waits for the records handed to ``send_soon`` (table changelogs)
#: to be acknowledged before it gives up with ``ProducerFlushTimeout`` (aiokafka gives up on
#: a record after its request timeout, 40 s, and fails its future: this is a backstop)
FLUSH_TIMEOUT_S = 120.0


class ProducerFlushTimeout(RuntimeError):
    """Records handed to ``send_soon`` were still not acknowledged after ``FLUSH_TIMEOUT_S``:
    what they carry is not durable, so nothing may be committed that relies on it."""


def complete_flush(producer_cls: type) -> type:
    """A subclass of Faust's producer whose ``flush()`` returns only once every record handed
    to ``send_soon`` before the call is acknowledged by the broker.

    The tables' changelog writes (``Table.send_changelog``) go through ``send_soon`` into
    Faust's ``ProducerBuffer``, which a background task hands to aiokafka one record at a
    time. Faust's ``ProducerBuffer.flush`` waits at most 0.1 s for the next record to leave
    and then returns, whatever is still queued (``flush_atmost``: ``wait_for(message_sent,
    0.1)``, ``TimeoutError`` -> return), and not at all for the record its task took out of
    the queue but has not handed over yet. Faust's commit (``Consumer._commit_offsets``:
    ``producer.flush()`` then the offset commit) therefore committed offsets of batches
    whose state was still in that buffer whenever the loop was busy or aiokafka blocked for
    0.1 s (a partition's batch full, metadata); a worker killed then lost that state, and
    its partitions' next owner restored the older state and started after those records:
    the job's history lost for good (a rebalance trial: a job's container OOM and NCCL
    records missing, the incident's root cause from the scheduler's record alone). The
    same ``flush`` is what the revoke and the agents' ``Outbox.settle`` rely on.

    Each record's future resolves when the broker acknowledged it (or its delivery failed),
    so this ``flush`` waits for those futures, after Faust's own flush (which also flushes
    aiokafka's accumulator: records sent directly). ``_faultline_flush_waits`` counts the
    flushes that had to wait (each one a commit or a revoke Faust would have let go ahead
    of the state)."""
    if getattr(producer_cls, "_faultline_complete_flush", False):
        return producer_cls

    def send_soon(self: Any, fut: Any) -> None:
        unsent = self.__dict__.get("_faultline_unsent")
        if unsent is None:
            unsent = self._faultline_unsent = set()
        unsent.add(fut)
        fut.add_done_callback(unsent.discard)
        producer_cls.send_soon(self, fut)

    async def flush(self: Any) -> None:
        waiting = [f for f in self.__dict__.get("_faultline_unsent", ()) if not f.done()]
        await producer_cls.flush(self)
        waiting = [f for f in waiting if not f.done()]
        if not waiting:
            return
        self._faultline_flush_waits += 1
        _, pending = await asyncio.wait(waiting, timeout=FLUSH_TIMEOUT_S)
        if pending:
            raise ProducerFlushTimeout(
                f"{len(pending)} records handed to the producer (table changelogs) not acknowledged "
                f"after {FLUSH_TIMEOUT_S:.0f} s: refusing to report them flushed")

    return type(producer_cls.__name__, (producer_cls,),
                {"send_soon": send_soon, "flush": flush, "_faultline_complete_flush": True,
                 "_faultline_flush_waits": 0, "__module__": producer_cls.__module__})


def patch_recovery() -> None:
    """Faust's table recovery seeks the standby changelog partitions to the offsets it built
    for them, but a standby partition added after those were built (the assignment changed
    while recovery restarted: several rebalances in a row) still has ``None`` there; aiokafka's
    ``seek`` refuses it (``ValueError: Offset must be a positive integer``) and the worker
    crashed in a rebalance trial. An unknown offset is the beginning, as ``-1`` already is for
    Faust. A partition that is also active (the views GlobalTable's changelog) starts its
    standby read where recovery's active read stopped, not at the log start. Idempotent."""
    from faust.tables.recovery import Recovery

    if getattr(Recovery, "_faultline_seek_patched", False):
        return
    seek_offsets = Recovery._seek_offsets

    async def _seek_offsets(self: Any, consumer: Any, tps: Any, offsets: Any, title: str) -> None:
        active = getattr(self, "active_offsets", None) or {}
        active_tps = getattr(self, "active_tps", None) or ()
        for tp in tps:
            off = offsets.get(tp)
            if off is None or off < -1:
                offsets[tp] = -1
            if title == "standby" and tp in active_tps:
                # also active (a GlobalTable's changelog: every worker has it as both): recovery
                # has just read it up to ``active_offsets`` and every later record updates that
                # offset, never this one, so the standby offset is still the log start -
                # seeking there re-fetched the whole changelog after every rebalance (each
                # record skipped as already seen) and no other worker's write reached this
                # worker's copy until it was through (issue 14: a fabric signal filed meanwhile
                # missed a job). Go on from where the active read stopped.
                a = active.get(tp)
                if a is not None and a > offsets[tp]:
                    offsets[tp] = a
        await seek_offsets(self, consumer, tps, offsets, title)

    Recovery._seek_offsets = _seek_offsets
    Recovery._faultline_seek_patched = True


# ------------------------------------------------------------------ raw feeds (no Event/Stream)
class RawFeed:
    """Records of a topic handed to one consumer task as Faust ``Message`` objects, in
    batches, without Faust's per-record ``Event`` / stream-queue / ``Stream`` machinery.

    Install it with ``topic.faultline_feed = RawFeed(...)`` and ``app.topics.add(topic)``
    on an app whose conductor is ``fast_conductor`` (``streams.app.FaultlineApp``). The
    consumer ``take``s batches, processes them, then ``ack``s every message of a batch
    (``ack``): Faust commits an offset only once its message is acked, so a worker killed
    mid-batch re-reads the batch. Bounded like a Faust stream buffer: at half its size the
    partition a record came from stops being fetched (Faust's ``on_buffer_full``; the other
    partitions, job topics included, keep flowing) until a quarter is left; a full feed
    blocks the delivery. ``clear`` (on partitions revoked: Faust seeks to the committed
    offsets afterwards) drops what is queued and unblocks it; a message of an earlier
    consumer-group generation (fetched before a rebalance) is dropped, as Faust's streams
    drop theirs.
    """

    def bind(self, consumer: Any) -> None:
        # pause/resume a record's partition through pause_fetch/resume_fetch (Faust's TP)
        self.generation = lambda: consumer.app.consumer_generation_id
        self.pause = lambda tp: pause_fetch(consumer, tp)
        self.resume = lambda tp: resume_fetch(consumer, tp)

    def __init__(self, maxsize: int = 50_000) -> None:
        import asyncio

        self.maxsize = maxsize
        self.pause_at = maxsize // 2
        self.resume_at = maxsize // 4
        self.pause: Any = None       # consumer.on_buffer_full(tp) / on_buffer_drop(tp) (bind)
        self.resume: Any = None
        self.generation: Any = None  # the consumer group generation now (bind)
        self.stale = 0               # messages of an earlier generation dropped
        self._paused: set[Any] = set()
        self.items: list[Any] = []
        #: the batch ``take`` handed out and its taker has not acked yet (``done``): still
        #: in flight for whoever asks whether a record below some offset may yet be processed
        self.in_hand: list[Any] = []
        self._ready = asyncio.Event()
        self._space = asyncio.Event()
        self._space.set()
        self._enough = asyncio.Event()
        self._want = 0

    def full(self) -> bool:
        return len(self.items) >= self.maxsize

    def _is_stale(self, message: Any) -> bool:
        gen = self.generation
        return gen is not None and earlier_generation(message, gen())

    async def put(self, message: Any) -> None:
        while len(self.items) >= self.maxsize:
            self._space.clear()
            await self._space.wait()
        if self._is_stale(message):
            # fetched before a rebalance, delivered after it (the delivery waited on flow
            # control or on space): its partition may be another worker's now, and this
            # worker re-reads it from the committed offset if not; as Faust's streams do
            self.stale += 1
            return
        items = self.items
        items.append(message)
        if len(items) >= self.pause_at and self.pause is not None:
            tp = message.tp
            if tp not in self._paused:
                self._paused.add(tp)
                self.pause(tp)
        if not self._ready.is_set():
            self._ready.set()
        if self._want and len(items) >= self._want:
            self._enough.set()

    async def take(self, max_n: int, within: float) -> list[Any]:
        """Up to ``max_n`` messages: waits for the first, then up to ``within`` seconds
        for ``max_n`` of them (what accumulated while the previous batch was processed
        needs no wait)."""
        import asyncio

        while not self.items:
            self._ready.clear()
            await self._ready.wait()
        if len(self.items) < max_n and within > 0:
            self._want = max_n
            self._enough.clear()
            try:
                await asyncio.wait_for(self._enough.wait(), within)
            except asyncio.TimeoutError:
                pass
            finally:
                self._want = 0
        out = self.items[:max_n]
        del self.items[:max_n]
        if self.generation is not None and out and self._is_stale(out[0]):
            # generations only grow in arrival order: stale ones come first, if any
            n = len(out)
            out = [m for m in out if not self._is_stale(m)]
            self.stale += n - len(out)
        self.in_hand = out      # (the stale ones dropped are not: nothing will process them)
        if len(self.items) < self.maxsize:
            self._space.set()
        if self._paused and len(self.items) <= self.resume_at:
            self._resume_all()
        return out

    def _resume_all(self) -> None:
        paused, self._paused = self._paused, set()
        if self.resume is not None:
            for tp in paused:
                self.resume(tp)

    def clear(self) -> None:
        """Drop what is queued (partitions revoked). Paused partitions are forgotten, not
        resumed: the rebalance sets the fetched partitions anew."""
        self.items.clear()
        self._space.set()
        self._paused = set()

    @staticmethod
    def ack(consumer: Any, messages: list[Any]) -> None:
        for m in messages:
            m.ack(consumer)


def pause_fetch(consumer: Any, tp: Any) -> None:
    """Stop fetching ``tp`` (Faust's ``on_buffer_full``: what is fetched is still delivered).

    A message's ``tp`` is the aiokafka ``TopicPartition`` of the fetch response, not Faust's
    ``TP``: equal and hashing alike, but Faust asserts that its active set holds only
    ``TP``s (``Consumer._get_active_partitions``), and ``on_buffer_drop`` adds the object it
    is given. Handing it the aiokafka tuple made the fetcher's next ``getmany`` raise
    ``AssertionError`` (issue 14 items 3 and 6): convert (a plain ``(topic, partition)`` too)."""
    consumer.on_buffer_full(_as_TP(tp))


def _as_TP(tp: Any) -> Any:
    from faust.types import TP

    return tp if type(tp) is TP else TP(*tp)


def resume_fetch(consumer: Any, tp: Any) -> None:
    """Fetch ``tp`` again (Faust's ``on_buffer_drop``), unless the rebalance/recovery
    machinery paused it meanwhile."""
    tp = _as_TP(tp)
    if tp not in consumer._paused_partitions:
        consumer.on_buffer_drop(tp)


def earlier_generation(message: Any, generation: int | None) -> bool:
    """Whether ``message`` was fetched in a consumer-group generation before ``generation``
    (the one now): Faust stamps each message with the generation it was fetched in. False
    for a message that carries none."""
    got = getattr(message, "generation_id", None)
    return got is not None and got != generation


def fast_conductor(conductor_cls: type) -> type:
    """A subclass of Faust's conductor that hands the records of topics carrying a
    ``faultline_feed`` (``RawFeed``) to that feed; other subscribers of the same partition
    (sink, findings forwarder) get theirs through Faust's own handler, unchanged."""
    if getattr(conductor_cls, "_faultline_fast", False):
        return conductor_cls

    def _build_handler(self: Any, tp: Any, channels: Any) -> Any:
        feeds = [ch.faultline_feed for ch in channels if getattr(ch, "faultline_feed", None) is not None]
        if not feeds:
            return conductor_cls._build_handler(self, tp, channels)
        rest = {ch for ch in channels if getattr(ch, "faultline_feed", None) is None}
        inner = conductor_cls._build_handler(self, tp, rest) if rest else None
        acquire_flow_control = self.app.flow_control.acquire
        for f in feeds:
            f.bind(self.app.consumer)
        n_feeds = len(feeds)
        if n_feeds == 1 and inner is None:
            put = feeds[0].put

            # the feed is the message's only reader: no reference count (a message with
            # none is final-acked by its first ack), so no lock per record either
            async def on_message(message: Any) -> None:
                await acquire_flow_control()
                await put(message)
            return on_message

        async def on_message_shared(message: Any) -> None:
            await acquire_flow_control()
            # our references first: the other streams may ack theirs before we deliver
            message.incref(n_feeds)
            if inner is not None:
                await inner(message)
            for f in feeds:
                await f.put(message)
        return on_message_shared

    def _compile_message_handler(self: Any) -> Any:
        # Faust's handler takes an asyncio.Lock per record to read the tp -> callback map
        # (rebuilt under that lock on subscription changes); read it without the lock
        # unless a rebuild holds it or the partition has no callback yet
        locked = conductor_cls._compile_message_handler(self)
        if self.app.client_only:
            return locked
        get_callback = self._tp_to_callback.get
        lock = self._tp_to_callback_lock

        async def on_message(message: Any) -> None:
            cb = get_callback(message.tp)
            if cb is None or lock.locked():
                return await locked(message)
            return await cb(message)
        return on_message

    return type(conductor_cls.__name__, (conductor_cls,),
                {"_build_handler": _build_handler, "_compile_message_handler": _compile_message_handler,
                 "_faultline_fast": True,
                 "__module__": conductor_cls.__module__})


# ------------------------------------------------------------------ consumer state
def recovered(app: Any) -> bool:
    """True once Faust's table recovery for the current assignment finished and the
    streams were resumed (no rebalance under way)."""
    try:
        if app.rebalancing or getattr(app, "in_recovery", False):
            return False
        return bool(app.tables.recovery.completed.is_set())
    except AttributeError:   # no tables service yet
        return False


def assigned_actives(app: Any) -> set[tuple[str, int]]:
    """``(topic, partition)`` of every active partition assigned to this worker (Faust's
    partition assignor; the agents used to ask ``app.assignment``, which does not exist:
    the ``except`` hid it, and the tick's local advance never ran)."""
    try:
        return {(tp.topic, tp.partition) for tp in app.assignor.assigned_actives()}
    except Exception:  # noqa: BLE001 - no assignment yet
        return set()


def highwater(app: Any, topic: str, partition: int) -> int | None:
    """The partition's high-water mark as this worker's consumer last saw it (aiokafka's
    public ``highwater()``, from the last fetch response; None before one)."""
    from faust.types import TP

    try:
        return app.consumer.highwater(TP(topic, partition))
    except Exception:  # noqa: BLE001 - not assigned (any more), consumer not started
        return None


async def positions(app: Any, tps: Iterable[tuple[str, int]], timeout: float = 0.5
                    ) -> dict[tuple[str, int], int | None]:
    """Fetch positions of ``tps`` (aiokafka's public ``position()``, through Faust's
    consumer thread); None for a partition without a valid position within ``timeout``."""
    from faust.types import TP

    out: dict[tuple[str, int], int | None] = {}
    for t, p in tps:
        try:
            out[(t, p)] = await asyncio.wait_for(app.consumer.position(TP(t, p)), timeout)
        except Exception:  # noqa: BLE001 - not assigned (any more), no position yet
            out[(t, p)] = None
    return out


async def end_offsets(app: Any, tps: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The partitions' end offsets now (aiokafka's public ``end_offsets()``, one request)."""
    from faust.types import TP

    res = await app.consumer.highwaters(*(TP(t, p) for t, p in tps))
    return {(tp.topic, tp.partition): int(off) for tp, off in res.items() if off is not None}


async def committed(app: Any, tps: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int | None]:
    """The group's committed offsets of ``tps`` (aiokafka's public ``committed()``, run on
    Faust's consumer thread: the aiokafka consumer lives there)."""
    from faust.types import TP

    thread = app.consumer._thread
    consumer = thread._ensure_consumer()
    out: dict[tuple[str, int], int | None] = {}
    for t, p in tps:
        out[(t, p)] = await thread.call_thread(consumer.committed, TP(t, p))
    return out


async def beginning_offsets(app: Any, tps: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
    from faust.types import TP

    res = await app.consumer.earliest_offsets(*(TP(t, p) for t, p in tps))
    return {(tp.topic, tp.partition): int(off) for tp, off in res.items() if off is not None}


def producer_buffer_size(app: Any) -> int:
    return int(app.producer.buffer.size)


def consumer_counts(app: Any) -> dict[str, int]:
    """Partitions the consumer fetches from and those its buffers paused (stats log)."""
    c = app.consumer
    return {"flow": int(app.flow_control.is_active()), "active": len(c._active_partitions or ()),
            "paused": len(getattr(c, "_buffered_partitions", ()) or ()),
            "refused_commits": int(getattr(c, "_faultline_failed_commits", 0)),
            "resynced_commits": int(getattr(c, "_faultline_resynced_commits", 0)),
            "putbacks": int(getattr(c, "_faultline_putbacks", 0)),
            "flush_waits": int(getattr(app.producer, "_faultline_flush_waits", 0))}


def starts(consumer: Any) -> dict[Any, int]:
    """tp -> start offset of the partitions with nothing committed yet (``faultline_note_starts``);
    emptied on every assignment (``forget_starts``): retention moves a start."""
    return consumer.__dict__.setdefault("_faultline_starts", {})


def forget_starts(app: Any) -> None:
    starts(app.consumer).clear()


async def note_starts(app: Any) -> int:
    """``faultline_note_starts`` of the app's consumer (0 for a consumer without it)."""
    fn = getattr(app.consumer, "faultline_note_starts", None)
    return int(await fn()) if fn is not None else 0


def head_gaps(app: Any, topics: Container[str] | None = None) -> dict[Any, tuple[int, int]]:
    """tp -> (committed, lowest acked) of each partition (of ``topics``, default all) whose
    commit a head gap holds back; with nothing committed yet, measured from the partition's
    start offset (``starts``)."""
    c = app.consumer
    first = starts(c)
    out: dict[Any, tuple[int, int]] = {}
    for tp, acked in list(c._acked.items()):
        if not acked or (topics is not None and tp.topic not in topics):
            continue
        committed = c._committed_offset.get(tp)
        if committed and min(acked) - committed > 1:
            out[tp] = (committed, min(acked))
        elif not committed and first.get(tp) is not None and min(acked) > first[tp]:
            out[tp] = (first[tp], min(acked))
    return out


def tail_gaps(app: Any) -> dict[Any, tuple[int, int]]:
    """tp -> (committed, high-water mark) of each assigned partition (acked topics only)
    with records after its committed offset and nothing acked: records fetched and then
    dropped without an ack (Faust's ``getmany`` drops the records of a partition that is not
    active when they arrive, and aiokafka's position has moved past them) leave no head gap
    when no record follows, so nothing else would ever fetch them again. The caller tells
    a partition merely not fetched yet apart by time and by what is in flight."""
    c = app.consumer
    acks_enabled_for = app.topics.acks_enabled_for
    out: dict[Any, tuple[int, int]] = {}
    for tp in list(c.assignment()):
        if c._acked.get(tp) or not acks_enabled_for(tp.topic):
            continue
        hw = highwater(app, tp.topic, tp.partition)
        committed = c._committed_offset.get(tp) or 0
        if hw is not None and committed < hw:
            out[tp] = (committed, int(hw))
    return out


async def commit_drift(app: Any) -> dict[Any, tuple[int, int | None]]:
    """tp -> (the consumer's committed offset, the group's on the broker) of each assigned
    partition with nothing acked since whose group commit is behind what the consumer holds
    as committed: Faust never commits at or below its own committed offset, so wherever no
    record follows, the group's commit would stay behind for good."""
    c = app.consumer
    idle = [tp for tp in list(c.assignment())
            if not c._acked.get(tp) and c._committed_offset.get(tp) is not None]
    if not idle:
        return {}
    broker = await committed(app, ((tp.topic, tp.partition) for tp in idle))
    out: dict[Any, tuple[int, int | None]] = {}
    for tp in idle:
        mine, theirs = c._committed_offset.get(tp), broker.get((tp.topic, tp.partition))
        if mine is not None and (theirs is None or theirs < mine):
            out[tp] = (mine, theirs)
    return out


async def commit_view(app: Any) -> dict[str, tuple[Any, ...]]:
    """Debugging (``FAULTLINE_DEBUG_COMMITS=1``): per assigned acked partition whose group
    commit is behind its high-water mark: (the consumer's committed offset, the group's,
    high-water, read offset, acked count, active, paused)."""
    c = app.consumer
    tps = [tp for tp in list(c.assignment()) if app.topics.acks_enabled_for(tp.topic)]
    broker = await committed(app, ((tp.topic, tp.partition) for tp in tps))
    active = c._active_partitions or set()
    out: dict[str, tuple[Any, ...]] = {}
    for tp in tps:
        hw = highwater(app, tp.topic, tp.partition)
        theirs = broker.get((tp.topic, tp.partition))
        if hw is not None and (theirs or 0) < hw:
            out[f"{tp.topic.rsplit('.', 2)[-2]}.{tp.topic.rsplit('.', 1)[-1]}/{tp.partition}"] = (
                c._committed_offset.get(tp), theirs, hw, c._read_offset.get(tp), len(c._acked.get(tp) or ()),
                int(tp in active), int(tp in c._paused_partitions))
    return out


def forget_committed(app: Any, tp: Any, offset: int | None) -> None:
    """Take the group's committed offset as the consumer's own for ``tp`` (then fetch it
    again from there: ``reseek``)."""
    app.consumer._committed_offset[tp] = offset or None


def in_flight_below(app: Any, tp: Any, offset: int, queued: Iterable[Any] = ()) -> str:
    """Why a message of ``tp`` below ``offset`` may still be processed ("" when none may):
    unacked in a Faust stream, in ``queued`` (a ``RawFeed``'s items), or anything waiting in
    a stream channel of ``tp``'s topic (Faust tracks a message only once its stream takes
    it; the queue is shared by the topic's partitions, so a non-empty one counts for all)."""
    unacked = sorted(m.offset for m in list(app.consumer._unacked_messages) if m.tp == tp and m.offset < offset)
    if unacked:
        return f"unacked in a stream at offsets {unacked[:5]}"
    try:
        channels = app.topics._tp_index.get(tp, ())
        waiting = sum(ch.queue.qsize() for ch in channels)
        if waiting:
            return f"{waiting} records waiting in the topic's stream channel"
    except AttributeError:   # no conductor index (tests' fakes)
        pass
    mine = sorted(m.offset for m in queued if m.tp == tp and m.offset < offset)
    return f"queued in the feed at offsets {mine[:5]}" if mine else ""


async def reseek(app: Any, tp: Any, offset: int) -> bool:
    """Fetch ``tp`` again from ``offset`` (the read offset follows, so the re-fetched records
    are delivered; fences and de-duplication skip what was applied). False when ``tp`` is no
    longer assigned (a rebalance took it meanwhile): nothing to heal here then."""
    return bool(await app.consumer.faultline_refetch(tp, offset))


def commit_heads(app: Any) -> dict[str, tuple[Any, ...]]:
    """Per assigned partition whose commit cannot advance: (committed, lowest acked, acked
    count, read offset, gaps). Faust commits the first run of consecutive acked offsets
    after the committed one, so a head gap (lowest acked > committed + 1) holds it back."""
    c = app.consumer
    return {f"{tp.topic}/{tp.partition}": (committed, lowest, len(c._acked[tp]), c._read_offset.get(tp),
                                           len(c._gap.get(tp) or ()))
            for tp, (committed, lowest) in head_gaps(app).items()}


def mark_inbound(app: Any, tps: Iterable[Any]) -> None:
    """What Faust's stream sensor records per delivered record (its "stream idle" check
    reads it): records handed over by a ``RawFeed`` bypass that sensor."""
    inbound = app.monitor.stream_inbound_time
    now = time.monotonic()
    for tp in tps:
        inbound[tp] = now


# ------------------------------------------------------------------ broker-away logging
#: aiokafka loggers whose connection errors repeat many times a second while the broker is away
AIOKAFKA_LOGGERS = ("aiokafka", "aiokafka.conn", "aiokafka.client", "aiokafka.cluster",
                    "aiokafka.consumer.fetcher", "aiokafka.consumer.group_coordinator",
                    "aiokafka.consumer.consumer", "aiokafka.producer.sender",
                    "aiokafka.producer.producer", "aiokafka.producer.message_accumulator",
                    "faust.transport.drivers.aiokafka")
#: what aiokafka says when it cannot reach a broker (message templates, lower case)
_AWAY_HINTS = ("unable connect", "unable to connect", "connect call failed", "connection error",
               "connection refused", "unable to update metadata", "kafkaconnectionerror",
               "unable to request metadata", "no brokers available", "connection lost",
               "nodenotready", "node which is not ready", "error connecting")


class BrokerAwayFilter(logging.Filter):
    """Rate-limits aiokafka's connection errors and says once, clearly, that the broker is
    away.

    Attached to aiokafka's loggers (``install``). A record that looks like a connection
    failure is passed at most once per ``period_s`` per (logger, message template), with
    the count of the ones suppressed since; the first such record of a period also logs one
    WARNING on ``faultline.streams.broker`` naming the bootstrap address and what to do,
    once connection errors have gone on for ``confirm_s`` (a lone one while a group forms
    at start is no outage). Other records pass unchanged.
    """

    def __init__(self, bootstrap: str, period_s: float = 30.0, confirm_s: float = 2.0) -> None:
        super().__init__()
        self.bootstrap = bootstrap
        self.period_s = period_s
        self.confirm_s = confirm_s
        self._streak: tuple[float, float] | None = None   # (first, last) connection error of a run
        self._last: dict[tuple[str, Any], float] = {}
        self._suppressed: dict[tuple[str, Any], int] = {}
        self._warned_at = -1e18
        self.warnings = 0
        self.suppressed = 0
        self.out = logging.getLogger("faultline.streams.broker")

    @staticmethod
    def is_connection_error(record: logging.LogRecord) -> bool:
        try:
            text = (str(record.msg) + " " + record.getMessage()).lower()
        except Exception:  # noqa: BLE001 - a bad format string: judge the template only
            text = str(record.msg).lower()
        if record.exc_info and record.exc_info[0] is not None:
            text += " " + record.exc_info[0].__name__.lower()
        return any(h in text for h in _AWAY_HINTS)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or not self.is_connection_error(record):
            return True
        now = time.monotonic()
        if self._streak is None or now - self._streak[1] > self.period_s:
            self._streak = (now, now)          # a new run of connection errors
        else:
            self._streak = (self._streak[0], now)
        if now - self._streak[0] >= self.confirm_s and now - self._warned_at >= self.period_s:
            self._warned_at = now
            self.warnings += 1
            self.out.warning(
                "Kafka broker at %s is not reachable; the worker keeps retrying and resumes by "
                "itself. Start the broker (`make kafka-up`) or point FAULTLINE_KAFKA_BOOTSTRAP at "
                "a reachable one. aiokafka's connection errors are shown at most once per %.0f s.",
                self.bootstrap, self.period_s, extra={"bootstrap": self.bootstrap})
        key = (record.name, record.msg)
        last = self._last.get(key)
        if last is not None and now - last < self.period_s:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            self.suppressed += 1
            return False
        self._last[key] = now
        n = self._suppressed.pop(key, 0)
        if n:
            record.msg = f"{record.msg} ({n} similar suppressed in the last {self.period_s:.0f} s)"
        return True

    def install(self, names: Iterable[str] = AIOKAFKA_LOGGERS) -> "BrokerAwayFilter":
        """Attach to the named loggers and every ``aiokafka.*`` logger created so far
        (a logger's filter does not see its children's records)."""
        import aiokafka  # noqa: F401 - creates aiokafka's module loggers
        import aiokafka.consumer.fetcher  # noqa: F401
        import aiokafka.consumer.group_coordinator  # noqa: F401

        every = set(names) | {n for n in logging.Logger.manager.loggerDict if n.startswith("aiokafka")}
        for n in sorted(every):
            lg = logging.getLogger(n)
            if not any(isinstance(f, BrokerAwayFilter) for f in lg.filters):
                lg.addFilter(self)
        return self
