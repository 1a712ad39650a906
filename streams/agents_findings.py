"""Faust agents of the proactive findings (``install(app, settings)``, called by
``streams.app.create_app``).

Findings compare every subject with the fleet, so their state is fleet-wide, not keyed:

1. ``faultline.findings_forward`` consumes ``fl.sched``, ``fl.inventory``, ``fl.incidents``
   and ``fl.alerts`` (any partition, any worker) and forwards the records the tracker needs
   to the single-partition internal topic ``fl.internal.findings`` (tag byte + raw value).
2. ``faultline.findings`` consumes that topic (one partition: exactly one worker owns the
   fleet state at a time), runs the pure ``FindingsRunner`` (``streams.findings``) on a
   ``StreamClock`` watermark, and publishes findings to ``fl.findings`` (key = subject) and
   the first emission of each finding id as an ``Alert`` to ``fl.alerts``.
3. The tracker state lives in the changelog-backed table ``findings_state`` (key ``fleet``,
   msgpack of ``FindingsTracker.dump()``), saved every ``SAVE_S`` seconds when it changed,
   and loaded when the agent (re)starts.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import msgspec

from ..config import Settings
from ..schemas.bounds import encode_output
from ..schemas.codec import ContractError, decode, now_ms
from ..schemas.outputs import Alert, Incident
from ..schemas.registry import ALERTS, DEADLETTER, FINDINGS, INCIDENTS
from .findings import HOUR_MS, FindingsRunner, FindingsTracker, StreamClock

log = logging.getLogger("faultline.streams.findings")

FEED = "fl.internal.findings"
SOURCES = ("fl.sched", "fl.inventory", INCIDENTS, ALERTS)
TRACKED_PREFIXES = (b'"sched.job"', b'"inventory.')
BATCH = 2000
WITHIN_S = 0.05
SAVE_S = 10.0
STATE_KEY = b"fleet"

_inc_dec = msgspec.json.Decoder(Incident)
_alert_dec = msgspec.json.Decoder(Alert)


def _tag(topic: str, value: bytes) -> bytes | None:
    """Tag byte for the feed (E event, I incident, A alert), or None to drop the record."""
    if topic.endswith(INCIDENTS):
        return b"I"
    if topic.endswith(ALERTS):
        # our own alerts come back on fl.alerts: the tracker ignores them, save the hop
        if b'"critical"' not in value or b'"repeat_offender"' in value or b'"version_drift"' in value \
                or b'"change_regression"' in value:
            return None
        return b"A"
    if b'"sched.node"' in value:
        return None
    return b"E"


def install(app: Any, settings: Settings, *, step_ms: int = HOUR_MS, settle_ms: int = 120_000) -> dict[str, Any]:
    """Define the findings topics, table, agents and timer on ``app``; returns the agent's
    state (runner, dirty flag, last save, findings count)."""
    T = settings.topic
    sources = app.topic(*(T(t) for t in SOURCES))
    feed = app.topic(T(FEED), partitions=1, internal=True, key_type=bytes, value_type=bytes)
    findings_out = app.topic(T(FINDINGS))
    alerts_out = app.topic(T(ALERTS))
    dead_out = app.topic(T(DEADLETTER))
    table = app.Table("findings_state", partitions=1, default=None, key_type=bytes, value_type=bytes)
    st: dict[str, Any] = {"runner": None, "dirty": False, "saved": 0.0, "findings": 0}

    def runner() -> FindingsRunner:
        r = st["runner"]
        if r is None:
            tracker = FindingsTracker.load(table.data.get(STATE_KEY))
            r = FindingsRunner(StreamClock(settings.lateness_ms), tracker, step_ms=step_ms, settle_ms=settle_ms)
            st["runner"] = r
            log.info("findings state loaded", extra=tracker.stats())
        return r

    @app.agent(sources, name="faultline.findings_forward")
    async def forward(stream: Any) -> None:
        async for batch in stream.take_events(BATCH, within=WITHIN_S):
            for e in batch:
                v = e.value
                if not v:
                    continue
                tag = _tag(e.message.topic, v)
                if tag is not None:
                    await feed.send(key=STATE_KEY, value=tag + v, partition=0)

    @app.agent(feed, name="faultline.findings")
    async def findings_agent(stream: Any) -> None:
        async for batch in stream.take_events(BATCH, within=WITHIN_S):
            try:
                await _batch(batch)
            except Exception:  # noqa: BLE001 - one bad batch never stops the agent
                log.exception("findings batch failed", extra={"size": len(batch)})

    async def _batch(batch: list[Any]) -> None:
        now = now_ms()
        evs: list[Any] = []
        outs: list[Any] = []
        for e in batch:
            v = e.value or b""
            tag, raw = v[:1], v[1:]
            try:
                if tag == b"E":
                    evs.append(decode(raw, now=now))
                elif tag == b"I":
                    outs.append(_inc_dec.decode(raw))
                elif tag == b"A":
                    outs.append(_alert_dec.decode(raw))
            except (ContractError, msgspec.DecodeError, msgspec.ValidationError):
                continue  # the input agents dead-letter bad events; outputs are ours
        r = runner()
        res = r.process(evs, outs)
        n = 0
        for o in res:
            if isinstance(o, Alert):
                out, key = alerts_out, (o.job or o.node or o.subject or "").encode()
            else:
                out, key = findings_out, o.subject.encode()
                n += 1
            topic, value = encode_output(o, out.get_topic_name())   # capped; oversized -> dead letter
            if topic == DEADLETTER:
                await dead_out.send(value=value)
                continue
            await out.send(key=key, value=value)
        st["findings"] += n
        st["dirty"] = True

    @app.timer(interval=SAVE_S, name="faultline.findings_save")
    async def save() -> None:
        r = st["runner"]
        if r is None or not st["dirty"]:
            return
        blob = r.tracker.dump()
        table.data[STATE_KEY] = blob
        table.send_changelog(0, STATE_KEY, blob)
        st["dirty"] = False
        st["saved"] = time.time()
        log.info("findings state saved", extra={"bytes": len(blob), "findings": st["findings"], **r.tracker.stats()})

    return st
