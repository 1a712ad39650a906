"""The notifier: its own consumer group on fl.alerts + fl.incidents, delivering to
Alertmanager and a webhook, committing each batch only after it was delivered (or the
bounded retry gave up into a dead letter with the reason).

It never blocks the worker: a separate consumer group (``<app id>-notify``) in its own
process (``faultline notify``); a receiver that is down only makes this group's lag grow.

One step = one batch (at most ``batch`` records): decode -> ``AlertBook`` (pure mapping) ->
``Delta`` -> Alertmanager and webhook concurrently, each with capped exponential backoff
for up to ``retry_give_up_s`` -> dead letters for what gave up -> commit. Between batches
(at least once a second) the book's clock runs: expiries become resolved notices, webhook
notices whose group wait is over go out, and every ``resend_s`` the firing set is
re-posted to Alertmanager (which keeps alerts in memory only).

In memory: at most ``batch`` records in flight and ``max_active`` alerts + incidents in the
book. The book is rebuilt after a restart or a rebalance: a newly assigned partition that
the group has committed on is first read again from ``max(alert_ttl, incident_ttl)`` before
now up to the committed offset ("replay": the records go into the book and to Alertmanager,
which de-duplicates by labels, but make no webhook firing notice), so an incident arriving
after the restart still links the alerts read before it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable

import msgspec
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, KafkaError

from ..config import Settings
from ..producers.publish import new_producer
from ..ratelog import RateLimitedLog
from ..schemas.codec import dead_letter, now_ms
from ..schemas.outputs import Alert, Incident
from ..schemas.registry import ALERTS, DEADLETTER, INCIDENTS
from .config import NotifySettings, where
from .mapping import AlertBook, AmAlert, Delta, Notice, apply_all
from .payloads import am_bodies, webhook_body
from .transport import DeliveryError, GaveUp, Http, Stopped, deliver

log = logging.getLogger("faultline.notify")
LOG_EVERY_S = 30.0
AM_ALERTS_PATH = "/api/v2/alerts"


class AlertIn(Alert, kw_only=True):
    """An fl.alerts record; ``category`` / ``component`` are read when a producer adds them."""

    category: str | None = None
    component: str | None = None


def notify_group_id(settings: Settings, app_id: str | None = None) -> str:
    """The notifier's consumer group: ``<app id>-notify``."""
    from ..streams.app import default_app_id

    return f"{app_id or default_app_id(settings)}-notify"


class Stats:
    __slots__ = ("records", "replayed", "invalid", "stale", "am_posts", "am_alerts", "notices", "retries",
                 "gave_up", "dead_letters", "commits", "resends")

    def __init__(self) -> None:
        for k in self.__slots__:
            setattr(self, k, 0)

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in self.__slots__}


class _Listener(ConsumerRebalanceListener):
    def __init__(self, n: "Notifier") -> None:
        self.n = n

    async def on_partitions_revoked(self, revoked: Any) -> None:
        if revoked:   # let the step in flight deliver and commit first (bounded)
            try:
                await asyncio.wait_for(self.n._idle.wait(), 10.0)
            except asyncio.TimeoutError:
                log.warning("notify: a batch was still being delivered at a rebalance; the next owner "
                            "re-reads it (Alertmanager de-duplicates by labels)")

    async def on_partitions_assigned(self, assigned: Any) -> None:
        log.info("notify partitions assigned: %d", len(assigned))
        self.n._new_tps.update(assigned)   # rewound by the loop before their records count


class Notifier:
    """``await run()`` until ``stop()``. ``on_step(stats)`` is called after each committed
    batch (tests, progress)."""

    def __init__(self, settings: Settings, ns: NotifySettings, *, group_id: str,
                 on_step: Callable[[Stats], None] | None = None) -> None:
        self.settings = settings
        self.ns = ns
        self.group_id = group_id
        self.on_step = on_step
        self.book = AlertBook(alert_ttl_ms=ns.alert_ttl_s * 1000, incident_ttl_ms=ns.incident_ttl_s * 1000,
                              page_url=ns.page(), max_active=ns.max_active, group_wait_ms=ns.group_wait_s * 1000,
                              notices=bool(ns.webhook_url))
        self.stats = Stats()
        self._topics = {settings.topic(ALERTS): AlertIn, settings.topic(INCIDENTS): Incident}
        self._decoders = {t: msgspec.json.Decoder(tp) for t, tp in self._topics.items()}
        self._stop = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._say = RateLimitedLog(log, LOG_EVERY_S).log
        self._dead: list[bytes] = []
        self._http: Http | None = None
        self._last_resend = time.monotonic()
        self._new_tps: set[TopicPartition] = set()
        #: per partition, the committed offset found at assignment: records below it are replay
        self._replay_until: dict[TopicPartition, int] = {}
        self.consumer: AIOKafkaConsumer | None = None
        self.producer: AIOKafkaProducer | None = None

    def stop(self) -> None:
        self._stop.set()

    def new_producer(self) -> AIOKafkaProducer:
        """The dead-letter producer: acks=all with idempotence (``publish.new_producer``), so a
        dead letter retried after a broker failure is written once."""
        return new_producer(self.settings)

    # ------------------------------------------------------------------ loop
    async def run(self) -> None:
        c = self.consumer = AIOKafkaConsumer(
            **self.settings.kafka_kwargs(), group_id=self.group_id, enable_auto_commit=False,
            auto_offset_reset="earliest", max_poll_records=self.ns.batch,
            session_timeout_ms=15_000, heartbeat_interval_ms=3_000)
        c.subscribe(topics=sorted(self._topics), listener=_Listener(self))
        p = self.producer = self.new_producer()
        await c.start()
        try:
            await p.start()
            log.info("notify consuming %s as group %s; alertmanager: %s; webhook: %s", ", ".join(sorted(self._topics)),
                     self.group_id, ", ".join(where(u) for u in self.ns.alertmanager_urls()) or "off",
                     where(self.ns.webhook_url) if self.ns.webhook_url else "off")
            async with Http(self.ns.timeout_s) as self._http:
                while not self._stop.is_set():
                    got = await c.getmany(timeout_ms=1000, max_records=self.ns.batch)
                    if self._new_tps:
                        for tp in await self._rewind():
                            got.pop(tp, None)      # read again from the rewound position
                    self._idle.clear()
                    try:
                        if not await self.step(got):
                            break
                    finally:
                        self._idle.set()
        finally:
            try:
                await p.stop()
            finally:
                await c.stop()

    async def _rewind(self) -> set[TopicPartition]:
        """Seek each newly assigned partition the group has committed on back to the state
        horizon (records from then up to the committed offset are replay); returns them."""
        assert self.consumer is not None
        c = self.consumer
        tps, self._new_tps = self._new_tps & c.assignment(), set()
        horizon = now_ms() - 1000 * max(self.ns.alert_ttl_s, self.ns.incident_ttl_s)
        moved: set[TopicPartition] = set()
        for tp in sorted(tps):
            committed = await c.committed(tp)
            if not committed:
                self._replay_until.pop(tp, None)
                continue
            found = (await c.offsets_for_times({tp: horizon})).get(tp)
            start = committed if found is None else min(found.offset, committed)
            self._replay_until[tp] = committed
            if start < committed:
                c.seek(tp, start)
                moved.add(tp)
                log.info("notify: %s[%d] replays offsets %d..%d to rebuild its state", tp.topic, tp.partition,
                         start, committed - 1)
        return moved

    async def step(self, got: dict[TopicPartition, list[Any]]) -> bool:
        """One batch: map, deliver, dead-letter, commit. False when stopped mid-delivery
        (nothing committed: the batch is read again)."""
        now = now_ms()
        records, replay = [], []
        offsets: dict[TopicPartition, int] = {}
        for tp, recs in got.items():
            if not recs:
                continue
            offsets[tp] = recs[-1].offset + 1
            until = self._replay_until.get(tp, -1)
            for r in recs:
                rec = self._decode(r, dead=r.offset >= until)   # a replayed one was dead-lettered before
                if rec is not None:
                    (replay if r.offset < until else records).append(
                        (rec, r.timestamp if r.timestamp and r.timestamp > 0 else now))
        self.stats.records += len(records)
        self.stats.replayed += len(replay)
        delta = apply_all(self.book, replay, now, quiet=True)
        delta.extend(apply_all(self.book, records, now))
        delta.extend(self.book.tick(now))
        if time.monotonic() - self._last_resend >= self.ns.resend_s:
            self._last_resend = time.monotonic()
            active = self.book.active(now)
            self.stats.resends += 1
            delta.am = active + delta.am   # the batch's own updates come last and win
        self.stats.stale += delta.stale
        try:
            await self._deliver(delta)
        except Stopped:
            return False
        await self._flush_dead()
        if offsets:
            await self._commit(offsets)
        if self.on_step is not None:
            self.on_step(self.stats)
        return True

    def _decode(self, r: Any, dead: bool = True) -> Any:
        try:
            if r.value is None:
                raise ValueError("empty record value")
            return self._decoders[r.topic].decode(r.value)
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError, KeyError) as err:
            if not dead:
                return None
            self.stats.invalid += 1
            reason = f"notify: {r.topic} record is not a contract {'incident' if 'incident' in r.topic else 'alert'}: {err}"
            self._dead.append(dead_letter(r.value, reason, r.topic, r.partition, r.offset))
            self._say(logging.WARNING, "invalid", "%s (partition %d offset %d): dead-lettered", reason,
                      r.partition, r.offset)
            return None

    # ------------------------------------------------------------------ delivery
    async def _deliver(self, delta: Delta) -> None:
        jobs = []
        if delta.am:
            for base in self.ns.alertmanager_urls():
                jobs.append(self._to_alertmanager(base, delta.am))
        if delta.notices and self.ns.webhook_url:
            jobs.append(self._to_webhook(delta.notices))
        if jobs:
            for res in await asyncio.gather(*jobs, return_exceptions=True):
                if isinstance(res, BaseException):
                    raise res

    def _retry_kw(self) -> dict[str, Any]:
        def on_retry(err: DeliveryError, attempt: int, wait: float) -> None:
            self.stats.retries += 1
            self._say(logging.WARNING, "retry:" + err.target, "notify: delivery to %s failed (attempt %d): %s; "
                      "retrying in %.1f s, offsets stay uncommitted", err.target, attempt, err.reason, wait)

        return {"first_s": self.ns.retry_first_s, "cap_s": self.ns.retry_cap_s,
                "give_up_s": self.ns.retry_give_up_s, "stop": self._stop, "on_retry": on_retry}

    async def _to_alertmanager(self, base: str, alerts: list[AmAlert]) -> None:
        url = base + AM_ALERTS_PATH
        assert self._http is not None
        http = self._http
        for n, body in am_bodies(alerts):
            try:
                await deliver(lambda b=body: http.post_json(url, b), where(base), **self._retry_kw())
                self.stats.am_posts += 1
                self.stats.am_alerts += n
            except GaveUp as g:
                self._gave_up(g, body)

    async def _to_webhook(self, notices: list[Notice]) -> None:
        assert self._http is not None
        http = self._http
        headers = {"Authorization": f"Bearer {self.ns.webhook_token}"} if self.ns.webhook_token else {}
        target = where(self.ns.webhook_url)
        down: GaveUp | None = None
        for n in notices:
            body = webhook_body(n, self.ns.webhook_format)
            if down is not None:     # gave up on this target in this step: no retry storm per message
                self._gave_up(GaveUp(target, f"target down ({down.reason})", 0), body)
                continue
            try:
                await deliver(lambda b=body: http.post_json(self.ns.webhook_url, b, headers), target,
                              **self._retry_kw())
                self.stats.notices += 1
            except GaveUp as g:
                down = g
                self._gave_up(g, body)

    def _gave_up(self, g: GaveUp, body: bytes) -> None:
        self.stats.gave_up += 1
        reason = f"notify: delivery to {g.target} gave up after {g.attempts} attempt(s): {g.reason}"
        self._dead.append(dead_letter(body, reason, None, None, None))
        self._say(logging.ERROR, "gaveup:" + g.target, "%s; the undelivered request is on %s", reason,
                  self.settings.topic(DEADLETTER))

    async def _flush_dead(self) -> None:
        if not self._dead or self.producer is None:
            return
        blobs, self._dead = self._dead, []
        topic = self.settings.topic(DEADLETTER)
        for b in blobs:
            await self.producer.send(topic, value=b)
        await self.producer.flush()
        self.stats.dead_letters += len(blobs)

    async def _commit(self, offsets: dict[TopicPartition, int]) -> None:
        assert self.consumer is not None
        mine = self.consumer.assignment()
        keep = {tp: off for tp, off in offsets.items() if tp in mine}
        if not keep:
            return
        try:
            await self.consumer.commit(keep)
            self.stats.commits += 1
        except (CommitFailedError, KafkaError) as err:
            self._say(logging.WARNING, "commit", "notify: commit failed after delivery (%s); the batch is "
                      "re-read and re-posted (Alertmanager de-duplicates by labels)", str(err)[:300])
