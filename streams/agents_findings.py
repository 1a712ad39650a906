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
import zlib
from typing import Any

import msgspec
import orjson

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
#: the tracker's state is fleet-wide (it grows with the fleet: 1.16 MB at 256 nodes crashed
#: the worker's producer, over Kafka's 1 MB request size): saved zlib-compressed in parts of
#: at most this many bytes under ``fleet/<generation>/<i>``, then the ``fleet`` header naming them
STATE_PART_BYTES = 256 * 1024
_HEADER = b"P"


def state_records(blob: bytes, generation: int) -> list[tuple[bytes, bytes]]:
    """(key, value) records that save ``blob``: its parts first, the header last (a crash
    between them leaves the previous header, whose parts are still there)."""
    z = zlib.compress(blob, 1)
    parts = [z[i:i + STATE_PART_BYTES] for i in range(0, len(z), STATE_PART_BYTES)] or [b""]
    recs = [(STATE_KEY + b"/%d/%d" % (generation, i), p) for i, p in enumerate(parts)]
    return recs + [(STATE_KEY, _HEADER + orjson.dumps({"g": generation, "n": len(parts)}))]


def load_state(get: Any) -> tuple[bytes | None, int]:
    """The saved tracker state (None: none) and its generation, from ``get(key)``; a value
    saved whole by an earlier version is read as it is."""
    head = get(STATE_KEY)
    if not head:
        return None, 0
    if head[:1] != _HEADER:
        return head, 0
    h = orjson.loads(head[1:])
    parts = [get(STATE_KEY + b"/%d/%d" % (h["g"], i)) for i in range(h["n"])]
    if any(p is None for p in parts):
        log.error("findings state generation %d is missing parts: starting from empty trackers", h["g"])
        return None, int(h["g"])
    return zlib.decompress(b"".join(parts)), int(h["g"])

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
    st: dict[str, Any] = {"runner": None, "dirty": False, "saved": 0.0, "findings": 0, "generation": 0}

    def runner() -> FindingsRunner:
        r = st["runner"]
        if r is None:
            blob, st["generation"] = load_state(table.data.get)
            tracker = FindingsTracker.load(blob)
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
        old_prefix = STATE_KEY + b"/%d/" % st["generation"]
        st["generation"] += 1
        for key, value in state_records(blob, st["generation"]):
            table.data[key] = value
            table.send_changelog(0, key, value)
        for key in [k for k in list(table.data.keys()) if k.startswith(old_prefix)]:
            del table.data[key]
            table.send_changelog(0, key, None, value_serializer="raw")   # the previous parts: tombstones
        st["dirty"] = False
        st["saved"] = time.time()
        log.info("findings state saved", extra={"bytes": len(blob), "findings": st["findings"], **r.tracker.stats()})

    return st
