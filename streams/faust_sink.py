"""Sink task: every valid input event and every output record (alerts, incidents,
findings) into ClickHouse / chDB through ``faultline.sinks.SinkWriter``.

Records arrive through a ``RawFeed`` (batches of Faust messages, no Faust event or stream
per record), up to ``max_rows`` records or ``within_s`` seconds a batch; each batch is
flushed (in an executor thread, never on the event loop) *before* its messages are acked,
so Faust commits the offsets only after the rows are stored. A crash re-delivers at most the batch in
flight; the store is keyed by record id, so re-inserted rows never double-count.
Invalid input is skipped here: the node / job agents dead-letter it, and the fl.deadletter
records land in table ``deadletters``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import faust

from ..config import Settings
from ..schemas.codec import ContractError, decode, now_ms
from ..schemas.registry import ALERTS, DEADLETTER, FINDINGS, INCIDENTS, INPUT_TOPICS
from .faust_io import RawFeed

log = logging.getLogger("faultline.streams.sink")


def open_sink(settings: Settings) -> Any:
    """Open the store (raises ``sinks.StoreLocked`` when another process owns it)."""
    from ..sinks import SinkWriter, open_store

    store = open_store(settings)
    return store, SinkWriter(store, max_rows=50_000, max_delay_s=1.0)


def install(app: faust.App, settings: Settings, store: Any, writer: Any, *,
            max_rows: int = 20_000, within_s: float = 1.0) -> None:
    """Add the sink agent to ``app`` (``store``/``writer`` from ``open_sink``)."""
    T = settings.topic
    outputs = {T(ALERTS), T(INCIDENTS), T(FINDINGS)}
    dead = T(DEADLETTER)
    topic = app.topic(*(T(t) for t in INPUT_TOPICS), *sorted(outputs), dead)
    app.faultline_store = store  # type: ignore[attr-defined]   # sinks.api reads through it
    app.faultline_sink = writer  # type: ignore[attr-defined]

    # every input record passes here: a RawFeed (batches of Faust messages, no Faust event
    # or stream per record), acked only once the batch is stored
    feed = RawFeed(maxsize=4 * max_rows)   # fetching of a partition pauses at half of it
    topic.faultline_feed = feed  # type: ignore[attr-defined]
    app.topics.add(topic)

    @app.on_partitions_revoked.connect
    async def _on_revoked(sender: Any, revoked: Any = None, **kw: Any) -> None:
        feed.clear()   # unacked: Faust seeks to the committed offsets after the rebalance

    @app.task
    async def sink() -> None:
        loop = asyncio.get_running_loop()
        consumer = app.consumer
        while not app.should_stop:
            batch = await feed.take(max_rows, within_s)
            now = now_ms()
            raws: list[bytes] = []
            for m in batch:
                v = m.value
                if v is None:
                    continue
                try:
                    if m.topic in outputs:
                        writer.add_output(v)
                    elif m.topic == dead:
                        writer.add_deadletter(v)
                    else:
                        decode(v, now=now)   # validate; invalid input is dead-lettered elsewhere
                        raws.append(v)
                except (ContractError, ValueError, TypeError):
                    continue
                except Exception as err:  # noqa: BLE001 - one record never stops the sink
                    log.warning("sink skipped a record", extra={"error": str(err)})
            if raws:
                writer.add_raws(raws)
            while True:
                try:
                    await loop.run_in_executor(None, writer.flush)
                    break
                except Exception as err:  # noqa: BLE001 - keep the batch; retry (rows are idempotent)
                    log.error("sink flush failed; retrying in 2 s", extra={"error": str(err)})
                    await asyncio.sleep(2.0)
            RawFeed.ack(consumer, batch)
            inbound = app.monitor.stream_inbound_time   # Faust's "stream idle" check reads it
            t = time.monotonic()
            for tp in {m.tp for m in batch}:
                inbound[tp] = t
