"""Batch decoding with dead-lettering, and bounded de-duplication, for the Faust agents."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterable

from ..schemas.codec import ContractError, dead_letter, decode, now_ms
from ..schemas.events import Envelope


def decode_batch(records: Iterable[tuple[bytes | None, str, int, int]]
                 ) -> tuple[list[Envelope], list[bytes]]:
    """Decode ``(raw, topic, partition, offset)`` records.

    Returns the valid events in input order and one ``fl.deadletter`` record (bytes) per
    rejected input, carrying the reason, where it came from and the raw bytes.
    """
    now = now_ms()
    events: list[Envelope] = []
    dead: list[bytes] = []
    for raw, topic, partition, offset in records:
        if raw is None:
            dead.append(dead_letter(b"", "empty message (null value)", topic, partition, offset, now))
            continue
        try:
            events.append(decode(raw, now=now))
        except ContractError as e:
            dead.append(dead_letter(raw, e.reason, topic, partition, offset, now))
        except Exception as e:  # noqa: BLE001 - never crash an agent on one message
            dead.append(dead_letter(raw, f"undecodable: {type(e).__name__}: {e}", topic,
                                    partition, offset, now))
    return events, dead


class Dedup:
    """Bounded "seen" set of event ids (LRU): ``fresh(id)`` is True the first time only.

    Bounded by ``size`` ids; duplicates further apart than that are processed again,
    which every consumer tolerates (signal and incident ids are stable).
    """

    __slots__ = ("_seen", "size", "dropped")

    def __init__(self, size: int = 200_000) -> None:
        self._seen: OrderedDict[str, None] = OrderedDict()
        self.size = size
        self.dropped = 0

    def fresh(self, event_id: str) -> bool:
        seen = self._seen
        if event_id in seen:
            seen.move_to_end(event_id)
            self.dropped += 1
            return False
        seen[event_id] = None
        if len(seen) > self.size:
            seen.popitem(last=False)
        return True

    def __len__(self) -> int:
        return len(self._seen)


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
        acks_enabled_for = self.app.topics.acks_enabled_for
        flow_active = self.app.flow_control.is_active
        suspended = self.suspend_flow.is_set
        tp_index = self.app.topics._tp_index
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
                            gap = offset - (r_offset or 0)
                            if gap > 1 and r_offset:
                                if acks_enabled_for(message.topic):
                                    await self._add_gap(tp, r_offset + 1, offset)
                            if commit_every is not None and self._n_acked >= commit_every:
                                self._n_acked = 0
                                await self.commit()
                            if flow_active() and not suspended() and not any(
                                    ch.queue.full() for ch in tp_index.get(tp, ())):
                                await callback(message)
                            else:
                                await self.wait_first(callback(message), self.suspend_flow.wait())
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

    return type(consumer_cls.__name__, (consumer_cls,),
                {"_drain_messages": _drain_messages, "_faultline_fast_drain": True,
                 "__module__": consumer_cls.__module__})


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
    offsets afterwards) drops what is queued and unblocks it.
    """

    def bind(self, consumer: Any) -> None:
        self.pause = consumer.on_buffer_full

        def resume(tp: Any) -> None:
            # not a partition the rebalance/recovery machinery paused meanwhile
            if tp not in consumer._paused_partitions:
                consumer.on_buffer_drop(tp)
        self.resume = resume

    def __init__(self, maxsize: int = 50_000) -> None:
        import asyncio

        self.maxsize = maxsize
        self.pause_at = maxsize // 2
        self.resume_at = maxsize // 4
        self.pause: Any = None       # consumer.on_buffer_full(tp) / on_buffer_drop(tp) (bind)
        self.resume: Any = None
        self._paused: set[Any] = set()
        self.items: list[Any] = []
        self._ready = asyncio.Event()
        self._space = asyncio.Event()
        self._space.set()
        self._enough = asyncio.Event()
        self._want = 0

    def full(self) -> bool:
        return len(self.items) >= self.maxsize

    async def put(self, message: Any) -> None:
        while len(self.items) >= self.maxsize:
            self._space.clear()
            await self._space.wait()
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
