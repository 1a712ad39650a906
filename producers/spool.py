"""Publishing that survives a broker outage: a bounded on-disk write-ahead spool.

``SpoolingPublisher`` has the API of ``Publisher`` (``start/stop/send/send_many/flush``)
but ``send`` never waits on Kafka: every event is appended to an append-only segment
file under ``settings.spool_dir`` and one background task drains the segments to Kafka in
order, advancing a persisted read position only after the broker acknowledged a batch.

- Broker away (at start or mid-stream): the drainer retries with backoff, events pile up
  on disk, the collector keeps collecting.
- Broker back: the backlog is sent in append order, so order per key is kept; a batch is
  acknowledged before the position moves. ONE idempotent producer lives across the outage:
  a batch in flight when the broker went away (written or not, nobody knows) is retried by
  that producer with its producer id and sequence number, so the broker writes it once; the
  spool only re-sends records the broker refused or that were never queued. Each event is
  delivered once (a crash between the acknowledgement and the position write may resend one
  batch: at-least-once across a crash; consumers deduplicate by event id, the contract's
  idempotency key).
- Collector restart: segments and the position file are on disk; the new process resumes.
- Full spool (``spool_max_mb``): the oldest segment is deleted, its undelivered events are
  counted in ``stats['dropped']`` and logged. Nothing is dropped silently.
- A record Kafka refuses for what it is (over the produce request limit, a timestamp the
  broker will not take, too large for the topic) never blocks the records behind it: one
  over ``MAX_RECORD_BYTES`` is not spooled; a batch the broker refuses with such an error is
  sent again one record per batch, and the record still refused is set aside in
  ``DEADLETTER_FILE`` (``fl.deadletter``-shaped lines: reason, topic, the value's first
  4 KiB, size, sha256; ``stats['set_aside']``, logged). Record timestamps are the event
  time held to the wall clock (``publish.record_ts``): Kafka 4 refuses a record more than
  1 h ahead, and with it its whole batch, while the contract allows an event 24 h ahead.

Record framing: ``>HHIq`` (topic length, key length, value length, timestamp ms) followed by
topic, key and value bytes. A torn record at the end of a segment (crash mid-write) is
skipped with a warning.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
import time
from pathlib import Path
from typing import Iterable

import orjson
from aiokafka import AIOKafkaProducer
from aiokafka.errors import (
    CorruptRecordException, InvalidTimestampError, KafkaError, MessageSizeTooLargeError,
    OutOfOrderSequenceNumber, RecordListTooLargeError, RecordTooLargeError, UnsupportedForMessageFormatError,
)
from aiokafka.partitioner import DefaultPartitioner

_PARTITIONER = DefaultPartitioner()

from ..config import Settings
from ..schemas import Envelope, dead_letter, encode, key_for, now_ms, topic_for
from .publish import BrokerRefused, connect_failure, new_producer, record_ts

log = logging.getLogger("faultline.spool")

_HDR = struct.Struct(">HHIq")

#: broker answers that refuse a record for what it is: sending it again can never succeed,
#: so it is set aside (``DEADLETTER_FILE``) instead of blocking every record behind it
REFUSED = (InvalidTimestampError, MessageSizeTooLargeError, RecordTooLargeError, RecordListTooLargeError,
           CorruptRecordException, UnsupportedForMessageFormatError)
#: a record (key + value) larger than this is never spooled: aiokafka's producer refuses a
#: request over max_request_size (1 MiB) and the broker one over message.max.bytes (~1 MiB)
MAX_RECORD_BYTES = 1_000_000
#: spool directories one base directory offers (the base, per command, per process and
#: per publisher of a process) before ``SpoolUnavailable``
MAX_PUBLISHERS_PER_DIR = 64


class SpoolUnavailable(RuntimeError):
    """No spool directory can be claimed; the message names the directory and what to do."""


#: while the drainer cannot reach the broker, it says why again this often (the first time at
#: once): a refused login or an untrusted certificate does not heal by itself
AWAY_REPEAT_S = 300.0
#: how long the drainer's diagnosis (``publish.connect_failure``) may take
AWAY_PROBE_TIMEOUT_S = 5.0
#: records set aside, one ``fl.deadletter``-shaped JSON line each (reason, topic, the first
#: 4 KiB of the value, its size and sha256), in the spool directory; at most this many bytes
DEADLETTER_FILE = "deadletter.jsonl"
DEADLETTER_FILE_MAX_BYTES = 64 << 20
_SEG_PREFIX = "seg-"
_SEG_SUFFIX = ".log"


def _seg_name(n: int) -> str:
    return f"{_SEG_PREFIX}{n:012d}{_SEG_SUFFIX}"


def _seg_no(name: str) -> int:
    return int(name[len(_SEG_PREFIX):-len(_SEG_SUFFIX)])


def frame(topic: str, key: bytes, value: bytes, ts: int) -> bytes:
    t = topic.encode()
    return _HDR.pack(len(t), len(key), len(value), ts) + t + key + value


def parse(buf: bytes | memoryview, start: int = 0) -> tuple[list[tuple[str, bytes, bytes, int, int]], int]:
    """Complete records in ``buf`` from ``start``: ``[(topic, key, value, ts, end_offset)]``
    and the offset after the last complete record."""
    out = []
    pos = start
    n = len(buf)
    hs = _HDR.size
    while pos + hs <= n:
        tl, kl, vl, ts = _HDR.unpack_from(buf, pos)
        end = pos + hs + tl + kl + vl
        if end > n:
            break
        p = pos + hs
        topic = bytes(buf[p:p + tl]).decode()
        key = bytes(buf[p + tl:p + tl + kl])
        value = bytes(buf[p + tl + kl:end])
        out.append((topic, key, value, ts, end))
        pos = end
    return out, pos


class SpoolingPublisher:
    """Kafka publisher with a bounded on-disk spool in front (same API as ``Publisher``)."""

    def __init__(self, settings: Settings, *, spool_dir: str | os.PathLike[str] | None = None,
                 max_mb: float | None = None, segment_bytes: int | None = None,
                 batch_records: int = 5000, request_timeout_ms: int = 8000,
                 retry_max_s: float = 5.0, linger_ms: int = 20, compression: str | None = "lz4") -> None:
        self.settings = settings
        self.dir = Path(spool_dir or settings.spool_dir)
        self.max_bytes = int((settings.spool_max_mb if max_mb is None else max_mb) * 1024 * 1024)
        self.segment_bytes = segment_bytes or max(64 * 1024, min(16 << 20, self.max_bytes // 8))
        self.batch_records = batch_records
        self.request_timeout_ms = request_timeout_ms
        self.retry_max_s = retry_max_s
        self.linger_ms = linger_ms
        from aiokafka import codec

        if compression == "lz4" and not codec.has_lz4():  # needs the lz4 package's frame support
            compression = "zstd" if codec.has_zstd() else "gzip"
        self.compression = compression
        #: counters: spooled (appended), sent (acknowledged), dropped (full spool), failures
        #: set_aside: refused for what they are (too large, bad timestamp), see DEADLETTER_FILE
        self.stats = {"spooled": 0, "sent": 0, "dropped": 0, "send_failures": 0, "set_aside": 0}
        self.connected = False
        self._producer: AIOKafkaProducer | None = None
        self._buf = bytearray()
        self._wfh = None
        self._wseg = 0
        self._wsize = 0
        self._sizes: dict[int, int] = {}
        self._rseg = 0
        self._roff = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._closing = False
        self._parts: dict[tuple[str, bytes], int] = {}
        self._lockfh = None
        self._solo = False   # next drain attempt: one record per batch (a batch was refused)
        self._away_told = -1e18   # time.monotonic() the drainer last said why it cannot send
        #: the last cause the drainer named (``connect_failure``'s message), for status lines
        self.away_cause: str | None = None

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> "SpoolingPublisher":
        """Open the spool (resuming a previous one) and start draining. Never fails because
        the broker is away: events are spooled until it answers."""
        self.dir = self._claim_dir(self.dir)
        ak = logging.getLogger("aiokafka")
        if ak.level == logging.NOTSET:  # it logs every failed reconnect; our own warning says it once
            ak.setLevel(logging.CRITICAL)
        segs = sorted(_seg_no(p.name) for p in self.dir.glob(f"{_SEG_PREFIX}*{_SEG_SUFFIX}"))
        for s in segs:
            self._sizes[s] = (self.dir / _seg_name(s)).stat().st_size
        pos = self._load_position()
        if segs:
            if pos and pos[0] in self._sizes:
                self._rseg, self._roff = pos
            else:
                self._rseg, self._roff = segs[0], 0
            backlog = self.backlog_bytes()
            if backlog:
                log.info("spool resumes with %d bytes not yet delivered", backlog,
                         extra={"spool_dir": str(self.dir), "backlog_bytes": backlog})
        self._open_segment((segs[-1] + 1) if segs else 0)
        if not segs:
            self._rseg, self._roff = self._wseg, 0
        self._task = asyncio.create_task(self._drain_loop(), name="faultline-spool-drain")
        return self

    def _claim_dir(self, base: Path) -> Path:
        """One publisher per spool directory (flock on ``lock``, per open file, so two
        publishers of one process exclude each other too). When another publisher holds
        ``base`` (two collectors with the same ``spool_dir``), use a subdirectory named after
        this command (``collect-storage``), stable across restarts so its spool is resumed;
        then ``<name>-<pid>``, ``<name>-<pid>-2`` ... for more publishers in one process."""
        import fcntl
        import re
        import sys

        name = re.sub(r"[^A-Za-z0-9_.-]+", "-", "-".join(a for a in sys.argv[1:3] if not a.startswith("-"))) or "proc"
        pid = os.getpid()
        tried: list[Path] = []
        candidates = [base, base / name, base / f"{name}-{pid}"] + [
            base / f"{name}-{pid}-{n}" for n in range(2, MAX_PUBLISHERS_PER_DIR + 1)]
        for d in candidates:
            tried.append(d)
            try:
                d.mkdir(parents=True, exist_ok=True)
                fh = open(d / "lock", "a+")
            except OSError as e:
                raise SpoolUnavailable(f"cannot use spool directory {d}: {e.strerror}; set FAULTLINE_SPOOL_DIR "
                                       f"(or spool_dir) to a writable directory") from None
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                fh.close()
                continue
            self._lockfh = fh
            if d != base:
                log.info("spool dir %s is used by another publisher; spooling to %s", base, d)
            return d
        msg = (f"no usable spool directory under {base}: all {len(tried)} candidates ({tried[0]}, "
               f"{tried[1]}, ... {tried[-1]}) are locked by other publishers; give this collector its own "
               f"spool directory (FAULTLINE_SPOOL_DIR / spool_dir) or stop the publishers holding them")
        log.error("%s", msg, extra={"spool_dir": str(base)})
        raise SpoolUnavailable(msg)

    async def stop(self, *, flush_timeout_s: float = 5.0) -> None:
        """Deliver what the broker takes within ``flush_timeout_s``; the rest stays on disk."""
        if self._task is None:
            return
        try:
            await self.flush(timeout_s=flush_timeout_s)
        finally:
            self._closing = True
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
            self._task = None
            # what the producer still holds stays spooled (position not moved): no long wait
            await self._close_producer(timeout_s=max(0.5, min(flush_timeout_s, 2.0)))
            self._write_out()
            if self._wfh is not None:
                self._wfh.flush()
                os.fsync(self._wfh.fileno())
                self._wfh.close()
                self._wfh = None
            self._save_position()
            if self._caught_up():  # everything delivered: leave no segment behind
                for n in list(self._sizes):
                    self._remove_segment(n)
            if self._lockfh is not None:
                self._lockfh.close()  # releases the flock
                self._lockfh = None

    async def __aenter__(self) -> "SpoolingPublisher":
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    # ------------------------------------------------------------------ API
    async def send_raw(self, topic: str, key: bytes | None, value: bytes,
                       timestamp_ms: int | None = None) -> None:
        """Append one message (topic name without prefix) to the spool. Its record timestamp
        is the event time held to the wall clock (``publish.record_ts``); a record too large
        for Kafka is set aside instead (``DEADLETTER_FILE``)."""
        key = key or b""
        if len(key) + len(value) > MAX_RECORD_BYTES:
            self._set_aside(topic, value, f"record of {len(key) + len(value)} bytes is larger than the "
                            f"{MAX_RECORD_BYTES}-byte limit of a Kafka produce request; not sent")
            return
        self._buf += frame(topic, key, value, record_ts(timestamp_ms) or 0)
        self.stats["spooled"] += 1
        if len(self._buf) >= 256 * 1024:
            self._write_out()
        self._wake.set()

    async def send(self, ev: Envelope) -> None:
        await self.send_raw(topic_for(ev), key_for(ev), encode(ev), ev.ts)

    async def send_many(self, events: Iterable[Envelope]) -> int:
        buf = self._buf
        n = 0
        now = now_ms()
        for ev in events:
            value = encode(ev)
            if len(value) > MAX_RECORD_BYTES:  # not a contract event (256 KiB), but never wedge on it
                self._set_aside(topic_for(ev), value, f"record of {len(value)} bytes is larger than the "
                                f"{MAX_RECORD_BYTES}-byte limit of a Kafka produce request; not sent")
                continue
            buf += frame(topic_for(ev), key_for(ev), value, record_ts(ev.ts, now) or 0)
            n += 1
        self.stats["spooled"] += n
        self._write_out()
        if n:
            self._wake.set()
        return n

    async def flush(self, timeout_s: float | None = 10.0) -> bool:
        """Wait until everything spooled so far is acknowledged by the broker, at most
        ``timeout_s`` seconds (None: no limit). True when drained; False when the broker did
        not take it all in time (the rest stays spooled and is sent later)."""
        self._write_out()
        self._wake.set()
        loop = asyncio.get_running_loop()
        deadline = None if timeout_s is None else loop.time() + timeout_s
        while not self._caught_up():
            if self._task is None or self._task.done():
                return False
            if deadline is not None and loop.time() >= deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    @property
    def sent(self) -> int:
        return self.stats["sent"]

    def backlog_bytes(self) -> int:
        """Bytes spooled and not yet acknowledged by the broker."""
        total = sum(sz for s, sz in self._sizes.items() if s >= self._rseg) - self._roff
        return total + len(self._buf)

    def metrics(self) -> dict[str, int]:
        return {**self.stats, "backlog_bytes": self.backlog_bytes(), "connected": int(self.connected)}

    def _set_aside(self, topic: str, value: bytes, reason: str) -> None:
        """Keep a record Kafka will never take in ``DEADLETTER_FILE`` (bounded) and go on."""
        self.stats["set_aside"] += 1
        path = self.dir / DEADLETTER_FILE
        try:
            if not path.exists() or path.stat().st_size < DEADLETTER_FILE_MAX_BYTES:
                with open(path, "ab") as fh:
                    fh.write(dead_letter(value, reason, topic) + b"\n")
        except OSError as e:
            log.error("spool: cannot write %s: %s", path, e.strerror, extra={"spool_dir": str(self.dir)})
        log.warning("spool: record for %s set aside in %s: %s", topic, path, reason,
                    extra={"spool_dir": str(self.dir), "set_aside": self.stats["set_aside"]})

    # ------------------------------------------------------------------ writer side
    def _open_segment(self, n: int) -> None:
        if self._wfh is not None:
            self._wfh.flush()
            os.fsync(self._wfh.fileno())
            self._wfh.close()
        self._wseg = n
        self._wfh = open(self.dir / _seg_name(n), "ab")
        self._wsize = self._wfh.tell()
        self._sizes[n] = self._wsize

    def _write_out(self) -> None:
        if not self._buf or self._wfh is None:
            return
        data = bytes(self._buf)
        self._buf.clear()
        # split on record boundaries only at rotation time: a segment may exceed its
        # nominal size by one write, which keeps records whole
        self._wfh.write(data)
        self._wfh.flush()
        self._wsize += len(data)
        self._sizes[self._wseg] = self._wsize
        if self._wsize >= self.segment_bytes:
            self._open_segment(self._wseg + 1)
        self._enforce_limit()

    def _enforce_limit(self) -> None:
        while sum(self._sizes.values()) > self.max_bytes:
            oldest = min(self._sizes)
            if oldest == self._wseg:
                break
            start = self._roff if oldest == self._rseg else 0
            if oldest < self._rseg:
                self._remove_segment(oldest)
                continue
            try:
                data = (self.dir / _seg_name(oldest)).read_bytes()
            except OSError:
                data = b""
            n = len(parse(data, start)[0])
            self.stats["dropped"] += n
            log.warning("spool full (%d MB): dropped %d oldest undelivered events", self.max_bytes >> 20, n,
                        extra={"spool_dir": str(self.dir), "dropped": n, "dropped_total": self.stats["dropped"]})
            self._remove_segment(oldest)
            if oldest == self._rseg:
                self._rseg, self._roff = min(self._sizes), 0
                self._save_position()

    def _remove_segment(self, n: int) -> None:
        self._sizes.pop(n, None)
        try:
            (self.dir / _seg_name(n)).unlink()
        except FileNotFoundError:
            pass

    # ------------------------------------------------------------------ position
    def _load_position(self) -> tuple[int, int] | None:
        try:
            d = orjson.loads((self.dir / "position.json").read_bytes())
            return int(d["segment"]), int(d["offset"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _save_position(self) -> None:
        tmp = self.dir / "position.json.tmp"
        tmp.write_bytes(orjson.dumps({"segment": self._rseg, "offset": self._roff}))
        os.replace(tmp, self.dir / "position.json")

    def _caught_up(self) -> bool:
        return not self._buf and self._rseg == self._wseg and self._roff >= self._wsize

    # ------------------------------------------------------------------ drainer
    async def _ensure_producer(self) -> AIOKafkaProducer:
        """The ONE idempotent producer of this publisher, kept across broker outages.

        Exactly-once rests on it: a batch that was sent before the broker went away may or
        may not have been written; aiokafka retries it with the same producer id and sequence
        number, so the broker (which keeps producer state across its restart) writes it once.
        Re-sending it through a new producer (new id) would duplicate it."""
        if self._producer is None:
            p = new_producer(   # acks=all + idempotence (publish.PRODUCER_GUARANTEES)
                self.settings, linger_ms=self.linger_ms, compression_type=self.compression,
                max_batch_size=1 << 20, request_timeout_ms=self.request_timeout_ms,
            )
            # aiokafka 0.14 fails a queued batch whose partition has no leader once it is older
            # than request_timeout_ms (MessageAccumulator.drain_by_nodes), even a RETRY of a batch
            # the broker may already have written (leaders are briefly unknown while a broker
            # restarts): the spool would then resend it, a duplicate. Idempotent batches must
            # never expire (aiokafka's own rule in SendProduceReqHandler._can_retry).
            acc = getattr(p, "_message_accumulator", None)
            if acc is not None and hasattr(acc, "_batch_ttl"):
                acc._batch_ttl = float("inf")
            else:  # pragma: no cover - a future aiokafka
                log.warning("aiokafka without MessageAccumulator._batch_ttl: batches may expire "
                            "during an outage and be resent (duplicates)")
            try:
                await p.start()
            except BaseException:
                try:
                    await p.stop()
                except Exception:
                    pass
                raise
            self._producer = p
            log.info("broker reachable at %s; draining spool", self.settings.kafka_bootstrap,
                     extra={"backlog_bytes": self.backlog_bytes()})
            self.connected = True
        return self._producer

    async def _close_producer(self, timeout_s: float | None = None) -> None:
        """Stop the producer: delivers what it holds if the broker answers in time, else
        aborts its sender (what it held stays spooled, position not moved)."""
        p, self._producer = self._producer, None
        if p is None:
            return
        t = self.request_timeout_ms / 1000 + 2 if timeout_s is None else timeout_s
        try:
            await asyncio.wait_for(p.stop(), t)
        except (asyncio.TimeoutError, Exception):
            # stop() waits for in-flight batches, which idempotence retries until the broker
            # answers: cancel the sender so it cannot deliver them later behind our back
            sender = getattr(p, "_sender", None)
            try:
                if sender is not None:
                    await asyncio.wait_for(sender.close(), t)
                acc = getattr(p, "_message_accumulator", None)
                if acc is not None:  # resolve its futures: stop()'s flush task then ends too
                    acc.fail_all(KafkaError("spool publisher stopped; records stay spooled"))
                await asyncio.wait_for(p.client.close(), t)
            except (asyncio.TimeoutError, Exception):
                pass

    def _read_batch(self) -> list[tuple[str, bytes, bytes, int, int]]:
        """Up to ``batch_records`` records from the read position (moving past fully read,
        closed segments)."""
        while True:
            if self._rseg not in self._sizes:  # dropped by the size limit, or deleted
                later = [s for s in self._sizes if s > self._rseg]
                self._rseg, self._roff = (min(later) if later else self._wseg), 0
            size = self._sizes.get(self._rseg, 0)
            if self._roff < size:
                with open(self.dir / _seg_name(self._rseg), "rb") as fh:
                    fh.seek(self._roff)
                    data = fh.read(min(size - self._roff, 4 << 20))
                recs, used = parse(data)
                if recs:
                    recs = recs[: self.batch_records]
                    return [(t, k, v, ts, self._roff + end) for t, k, v, ts, end in recs]
                if self._rseg == self._wseg:
                    return []  # partial write in progress (cannot happen: we write whole records)
                log.warning("spool segment %s ends with a torn record (%d bytes); skipped",
                            _seg_name(self._rseg), size - self._roff, extra={"spool_dir": str(self.dir)})
                self._roff = size
            if self._rseg == self._wseg:
                return []
            done = self._rseg
            later = [s for s in self._sizes if s > done]
            self._rseg, self._roff = (min(later) if later else self._wseg), 0
            self._remove_segment(done)
            self._save_position()

    async def _send_batches(self, prod: AIOKafkaProducer, batch, seg: int, skip,
                            solo: bool = False) -> tuple[list, list[list[int]], BaseException | None]:
        """Records -> one aiokafka batch per (topic, partition), in record order; the
        partition is the default partitioner's (murmur2 of the key, as ``Publisher`` routes),
        cached per key. ``solo``: one batch per record (after a refused batch, so the broker's
        answer names the one record it refuses). Returns the delivery futures, per future its
        records' ends, and the error that stopped queueing (None when all were queued). What
        was queued before an error is a prefix of each partition's records."""
        open_: dict[tuple[str, int], tuple[object, list[int]]] = {}
        futs: list = []
        groups: list[list[int]] = []
        try:
            for topic, key, value, ts, end in batch:
                if (seg, end) in skip:
                    continue
                full = self.settings.topic(topic)
                part = self._parts.get((full, key))
                if part is None:
                    parts = sorted(await prod.partitions_for(full))
                    part = _PARTITIONER(key or None, parts, parts)
                    if key:
                        if len(self._parts) > 100_000:
                            self._parts.clear()
                        self._parts[(full, key)] = part
                slot = open_.get((full, part))
                if slot is None:
                    slot = open_[(full, part)] = (prod.create_batch(), [])
                if slot[0].append(key=key or None, value=value, timestamp=ts or None) is None:  # full
                    del open_[(full, part)]
                    futs.append(await prod.send_batch(slot[0], full, partition=part))
                    groups.append(slot[1])
                    slot = open_[(full, part)] = (prod.create_batch(), [])
                    slot[0].append(key=key or None, value=value, timestamp=ts or None)
                slot[1].append(end)
                if solo:
                    del open_[(full, part)]
                    futs.append(await prod.send_batch(slot[0], full, partition=part))
                    groups.append(slot[1])
            while open_:
                (full, part), (b, ends) = next(iter(open_.items()))
                del open_[(full, part)]
                futs.append(await prod.send_batch(b, full, partition=part))
                groups.append(ends)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # not queued (metadata or queue timeout): sent again later
            return futs, groups, e
        return futs, groups, None

    async def _await_delivery(self, futs: list) -> list:
        """Wait for EVERY queued batch: while the broker is away aiokafka retries them (same
        producer id and sequence), so none is in doubt when this returns."""
        if not futs:
            return []
        _done, pending = await asyncio.wait(futs, timeout=self.request_timeout_ms / 1000)
        if pending:
            if self.connected:
                log.warning("broker not answering at %s; spooling to %s (in-flight batches are "
                            "retried by the same producer)", self.settings.kafka_bootstrap, self.dir,
                            extra={"spool_dir": str(self.dir), "backlog_bytes": self.backlog_bytes()})
            self.connected = False
            await asyncio.wait(pending)
        return await asyncio.gather(*futs, return_exceptions=True)

    async def _tell_away(self, err: BaseException) -> None:
        """Say why nothing can be sent: a refused SASL login, an untrusted certificate or
        another security protocol (ERROR: it does not heal by itself), else the broker away
        (WARNING). Called when the broker stops answering and every ``AWAY_REPEAT_S`` while
        it does not; never names a secret (``connect_failure``)."""
        self._away_told = time.monotonic()
        cause = await connect_failure(self.settings, timeout_s=AWAY_PROBE_TIMEOUT_S)
        self.away_cause = str(cause)
        extra = {"spool_dir": str(self.dir), "backlog_bytes": self.backlog_bytes()}
        if isinstance(cause, BrokerRefused):
            log.error("spool drainer cannot send: %s; events stay spooled in %s", cause, self.dir, extra=extra)
        else:
            log.warning("broker unreachable at %s (%s); spooling to %s", self.settings.kafka_bootstrap,
                        type(err).__name__, self.dir, extra=extra)

    async def _drain_loop(self) -> None:
        backoff = 0.2
        skip: set[tuple[int, int]] = set()  # (segment, end offset) already acknowledged within a partly failed batch
        while True:
            self._write_out()
            batch = self._read_batch()
            if not batch:
                self._wake.clear()
                await self._wake.wait()
                continue
            seg = self._rseg
            rejected = False
            try:
                prod = await self._ensure_producer()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # broker away at start: nothing was sent
                err: BaseException | None = e
            else:
                futs, groups, err = await self._send_batches(prod, batch, seg, skip, self._solo)
                for ends, r in zip(groups, await self._await_delivery(futs)):
                    if isinstance(r, REFUSED) and len(ends) == 1:
                        # the broker refuses this one record for what it is: set it aside, go on
                        t, _k, v = next((t, k, v) for t, k, v, _ts, e in batch if e == ends[0])
                        self._set_aside(t, v, f"refused by the broker: {type(r).__name__}: {r}")
                        skip.add((seg, ends[0]))
                        rejected = True
                    elif isinstance(r, BaseException):
                        err = err or r
                        rejected = True
                        if isinstance(r, REFUSED):
                            self._solo = True   # find the refused record: one per batch next time
                    else:
                        skip.update((seg, end) for end in ends)
                        self.stats["sent"] += len(ends)
            if err is None:
                self._solo = False
                if rejected:   # a refused record: the producer's sequence state may be off
                    await self._close_producer()
                if self._rseg == seg:  # else the size limit dropped this segment meanwhile
                    self._roff = batch[-1][4]
                skip.clear()
                self._save_position()
                if not self.connected:
                    log.info("broker answers again at %s; draining spool", self.settings.kafka_bootstrap,
                             extra={"backlog_bytes": self.backlog_bytes()})
                self.connected = True
                self._away_told, self.away_cause = -1e18, None
                backoff = 0.2
                continue
            # failure: what got through is in ``skip``; the rest is sent again after a backoff
            self._parts.clear()
            self.stats["send_failures"] += 1
            # a refusal (or the sequence gap it leaves behind it) is an answer: the broker is there
            refusal = isinstance(err, REFUSED + (OutOfOrderSequenceNumber,))
            if not isinstance(err, (KafkaError, OSError, asyncio.TimeoutError)):
                log.error("spool drainer: %s: %s", type(err).__name__, err, extra={"spool_dir": str(self.dir)})
            elif refusal:
                log.warning("broker refused a batch (%s); its records are sent one per batch to set the "
                            "refused one aside", type(err).__name__, extra={"spool_dir": str(self.dir)})
            elif self.connected or time.monotonic() - self._away_told >= AWAY_REPEAT_S:
                await self._tell_away(err)
            if not refusal:
                self.connected = False
            if rejected:
                # the broker refused a batch (a non-retriable error: a definite answer, nothing
                # is in flight now); its producer state may be unusable (sequence gap): new one
                await self._close_producer()
            await asyncio.sleep(backoff)
            backoff = min(self.retry_max_s, backoff * 2)
