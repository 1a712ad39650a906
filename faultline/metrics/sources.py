"""One collector per source (client_python custom collectors): each reads the counters its
component keeps anyway, at scrape time, and yields metric families. Nothing here is on a
component's hot path.

A source is anything with ``collect()`` (prometheus_client's collector protocol), an async
``refresh()`` the exposition awaits before a scrape (offsets need the broker: the consumer
lag is fetched there, bounded by ``registry.REFRESH_TIMEOUT_S``) and an async ``close()``
(its clients, at the app's shutdown).

- ``WorkerSource(worker, settings)``  ``streams.agents.Worker``: events, dead letters, alerts,
  incidents, batches, state sizes, and the lag of the worker's group on the partitions it owns.
- ``SinkSource(sink)``      ``streams.faust_sink.SinkConsumer``: records stored, invalid input,
  store rows by table, flush latency, store failures, the sink group's lag.
- ``SpoolSource(publisher)`` ``producers.spool.SpoolingPublisher``: spool depth (bytes), records
  spooled / sent / dropped / set aside, broker connection.
- ``CollectorsSource(collectors)`` the node agent's collectors: each one's ``stats`` counters
  (scrape errors, lines, rate-limited, ...).

Every series is listed in docs/metrics.md.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Iterable, Iterator, Protocol

from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily,
                                    Metric)

from .counters import Tally, Timing

TP = tuple[str, int]


class Source(Protocol):
    """What the registry takes: a collector that may refresh asynchronously before a scrape."""

    def collect(self) -> Iterable[Metric]: ...

    async def refresh(self) -> None: ...

    async def close(self) -> None: ...


# ------------------------------------------------------------------ family helpers
#: (series, help, attribute) of the plain counters of ``streams.agents.Stats`` ...
WORKER_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("faultline_worker_failed_total", "records dead-lettered because processing them raised", "failed"),
    ("faultline_worker_duplicates_total", "input records skipped as duplicates", "dups"),
    ("faultline_worker_signals_total", "signals sent to the internal signals topic", "signals"),
    ("faultline_worker_unwritten_changelog_total", "state records over the changelog size limit, kept "
     "in memory only", "unwritten"),
    ("faultline_worker_deferred_dropped_total", "re-evaluations dropped while the recovery gate was "
     "closed", "deferred_dropped"),
)
#: ... and of ``streams.faust_sink.SinkConsumer``
SINK_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("faultline_sink_records_total", "records stored and committed (all topics)", "stored"),
    ("faultline_sink_invalid_input_total", "input records not stored as events because they are "
     "invalid (the worker dead-letters them)", "skipped"),
    ("faultline_sink_refused_outputs_total", "output records the store could not hold, stored as "
     "dead letters instead", "dead_lettered"),
    ("faultline_sink_store_failures_total", "store flushes that failed and were retried", "failed_attempts"),
    ("faultline_sink_commit_timeouts_total", "commits not answered within the sink's commit timeout "
     "(the batch is re-read)", "commit_timeouts"),
    ("faultline_sink_consumer_restarts_total", "Kafka consumers replaced because they stayed silent "
     "while records waited on their partitions", "consumer_restarts"),
)


def counters(obj: Any, table: tuple[tuple[str, str, str], ...]) -> Iterator[CounterMetricFamily]:
    for name, doc, attr in table:
        yield CounterMetricFamily(name, doc, value=getattr(obj, attr))


def tally_counter(name: str, doc: str, t: Tally) -> CounterMetricFamily:
    f = CounterMetricFamily(name, doc, labels=list(t.labels))
    for key, n in t.items():
        f.add_metric(list(key), n)
    return f


def histogram(name: str, doc: str, timings: dict[str, Timing], label: str) -> HistogramMetricFamily:
    """One histogram family, a series per ``timings`` key (label ``label``)."""
    f = HistogramMetricFamily(name, doc, labels=[label])
    for value, t in timings.items():
        f.add_metric([value], t.buckets(), t.sum)
    return f


class Lag:
    """A consumer group's committed and end offsets per partition, as last refreshed."""

    def __init__(self, group: str) -> None:
        self.group = group
        self.ends: dict[TP, int] = {}
        self.committed: dict[TP, int] = {}
        self.refreshed: float | None = None   # time.time() of the last complete refresh

    def set(self, ends: dict[TP, int], committed: dict[TP, int]) -> None:
        self.ends = {tp: int(v) for tp, v in ends.items()}
        self.committed = {tp: int(v) for tp, v in committed.items() if tp in self.ends}
        self.refreshed = time.time()

    def collect(self) -> Iterator[Metric]:
        lag = GaugeMetricFamily("faultline_consumer_lag", "records of the partition the group has not "
                                "committed (end offset - committed offset)",
                                labels=["group", "topic", "partition"])
        end = GaugeMetricFamily("faultline_consumer_end_offset", "the partition's end (high-water) offset",
                                labels=["group", "topic", "partition"])
        done = GaugeMetricFamily("faultline_consumer_committed_offset", "the group's committed offset of "
                                 "the partition (its log start offset when never committed)",
                                 labels=["group", "topic", "partition"])
        for tp in sorted(self.ends):
            labels = [self.group, tp[0], str(tp[1])]
            e = self.ends[tp]
            end.add_metric(labels, e)
            if tp in self.committed:
                c = self.committed[tp]
                done.add_metric(labels, c)
                lag.add_metric(labels, max(0, e - c))
        yield from (lag, end, done)
        if self.refreshed is not None:
            at = GaugeMetricFamily("faultline_consumer_offsets_refreshed_timestamp_seconds",
                                   "when the offsets above were fetched", labels=["group"])
            at.add_metric([self.group], self.refreshed)
            yield at


class GroupOffsets:
    """A group's committed offsets and the partitions' start and end offsets, fetched with
    clients of its own (an admin client and a group-less consumer, started on first use):
    three requests per refresh whatever the partition count, and the component's own
    consumer is never asked (the worker's lives on Faust's consumer thread). One instance
    may serve several callers (the sink's stall check and its /metrics source): the clients
    are started once."""

    def __init__(self, settings: Any, group: str) -> None:
        self.settings = settings
        self.group = group
        self._admin: Any = None
        self._consumer: Any = None
        self._starting: asyncio.Lock | None = None

    async def _clients(self) -> tuple[Any, Any]:
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            return await self._start_clients()

    async def _start_clients(self) -> tuple[Any, Any]:
        if self._admin is None:
            from aiokafka import AIOKafkaConsumer
            from aiokafka.admin import AIOKafkaAdminClient

            kw = self.settings.kafka_kwargs()
            admin = AIOKafkaAdminClient(**kw, request_timeout_ms=10_000)
            consumer = AIOKafkaConsumer(**kw, group_id=None, enable_auto_commit=False)
            await admin.start()
            try:
                await consumer.start()
            except BaseException:
                await admin.close()
                raise
            self._admin, self._consumer = admin, consumer
        return self._admin, self._consumer

    async def fetch(self, tps: list[TP]) -> tuple[dict[TP, int], dict[TP, int]]:
        """(end offsets, committed offsets) of ``tps``; a partition the group never
        committed gets its log start offset (where the group starts reading it)."""
        from aiokafka import TopicPartition

        admin, consumer = await self._clients()
        want = [TopicPartition(t, p) for t, p in tps]
        ends = await consumer.end_offsets(want)
        meta = await admin.list_consumer_group_offsets(self.group, partitions=want)
        done = {tp: m.offset for tp, m in meta.items() if m is not None and m.offset >= 0}
        missing = [tp for tp in want if tp not in done]
        if missing:
            done.update(await consumer.beginning_offsets(missing))
        key = lambda tp: (tp.topic, tp.partition)  # noqa: E731
        return {key(tp): int(v) for tp, v in ends.items()}, {key(tp): int(v) for tp, v in done.items()}

    async def close(self) -> None:
        admin, consumer, self._admin, self._consumer = self._admin, self._consumer, None, None
        if consumer is not None:
            await consumer.stop()
        if admin is not None:
            await admin.close()


# ------------------------------------------------------------------ worker
class WorkerSource:
    """The analysis worker (``streams.agents.Worker``): ``Stats``, ``Stats.counts``
    (``counters.WorkerCounts``) and the group's offsets on the partitions this worker owns."""

    def __init__(self, worker: Any, settings: Any) -> None:
        self.worker = worker
        self.app = worker.app
        group = str(self.app.conf.id)
        self.lag = Lag(group)
        self.offsets = GroupOffsets(settings, group)
        self.topics = set(worker.input_topics) | {worker.jobs_in}

    async def refresh(self) -> None:
        """The group's offsets on the partitions this worker owns now."""
        from ..streams import faust_compat as compat

        tps = sorted(tp for tp in compat.assigned_actives(self.app) if tp[0] in self.topics)
        ends, done = await self.offsets.fetch(tps) if tps else ({}, {})
        self.lag.set(ends, done)

    async def close(self) -> None:
        await self.offsets.close()

    def collect(self) -> Iterator[Metric]:
        s = self.worker.stats
        c = s.counts
        yield tally_counter("faultline_worker_events_total", "valid input events processed, by topic "
                            "and kind", c.events)
        yield tally_counter("faultline_worker_dead_letters_total", "dead letters sent to fl.deadletter, "
                            "by reason class (docs/metrics.md)", c.dead)
        yield tally_counter("faultline_worker_alerts_total", "alerts sent, by detector and severity", c.alerts)
        yield tally_counter("faultline_worker_incidents_total", "incident revisions sent, by root-cause "
                            "category", c.incidents)
        yield from counters(s, WORKER_COUNTERS)
        yield histogram("faultline_worker_batch_seconds", "time to process one batch, by side",
                        {"node": c.node_batch, "job": c.job_batch}, "side")
        wm = GaugeMetricFamily("faultline_worker_watermark_timestamp_seconds",
                               "this worker's event-time watermark (0: none yet)")
        wm.add_metric([], s.watermark / 1000 if s.watermark and s.watermark > 0 else 0)
        yield wm
        yield from self._state()
        yield from self.lag.collect()

    def _state(self) -> Iterator[Metric]:
        cur = self.worker.sides.current()
        g = GaugeMetricFamily("faultline_worker_jobs", "jobs in this worker's job side, by state",
                              labels=["state"])
        if cur is not None:
            n = cur[1].counts()
            for k in ("jobs", "buffered", "pending"):
                g.add_metric([k], n[k])
        yield g


# ------------------------------------------------------------------ sink
class SinkSource:
    """The sink (``streams.faust_sink.SinkConsumer``): its counters, ``counts``
    (``counters.SinkCounts``) and its group's offsets on the partitions it owns."""

    def __init__(self, sink: Any) -> None:
        self.sink = sink
        self.lag = Lag(sink.group_id)
        # the sink's own (its stall check asks the same questions): one pair of clients a sink
        self.offsets = sink.offsets

    async def refresh(self) -> None:
        """The group's offsets on the partitions this sink owns now."""
        c = self.sink.consumer
        tps = sorted((tp.topic, tp.partition) for tp in c.assignment()) if c is not None else []
        ends, done = await self.offsets.fetch(tps) if tps else ({}, {})
        self.lag.set(ends, done)

    async def close(self) -> None:
        await self.offsets.close()

    def collect(self) -> Iterator[Metric]:
        s = self.sink
        yield from counters(s, SINK_COUNTERS)
        yield tally_counter("faultline_sink_rows_total", "rows inserted into the store, by table", s.counts.rows)
        yield histogram("faultline_sink_flush_seconds", "time to insert one batch into the store",
                        {"store": s.counts.flush}, "stage")
        yield from self.lag.collect()


# ------------------------------------------------------------------ spool
class SpoolSource:
    """A spooling publisher (``producers.spool.SpoolingPublisher``): its ``metrics()``."""

    COUNTERS = {"spooled": "records written to the spool", "sent": "records acknowledged by the broker",
                "dropped": "records dropped because the spool was full",
                "send_failures": "failed send attempts (retried)",
                "set_aside": "records the broker refused for good, set aside in the spool directory"}

    def __init__(self, publisher: Any, name: str = "node") -> None:
        self.publisher = publisher
        self.name = name

    async def refresh(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def collect(self) -> Iterator[Metric]:
        m = self.publisher.metrics()
        for key, doc in self.COUNTERS.items():
            f = CounterMetricFamily(f"faultline_spool_{key}_total", doc, labels=["spool"])
            f.add_metric([self.name], m.get(key, 0))
            yield f
        depth = GaugeMetricFamily("faultline_spool_backlog_bytes", "bytes spooled and not yet "
                                  "acknowledged by the broker (spool depth)", labels=["spool"])
        depth.add_metric([self.name], m.get("backlog_bytes", 0))
        yield depth
        up = GaugeMetricFamily("faultline_spool_connected", "1 while the publisher has a broker connection",
                               labels=["spool"])
        up.add_metric([self.name], m.get("connected", 0))
        yield up


# ------------------------------------------------------------------ node agent collectors
class CollectorsSource:
    """The node agent's collectors (``producers.collectors``): the ``stats`` dict each keeps
    (``{"scrapes": 3, "scrape_errors": 1}``), one series per collector and counter."""

    def __init__(self, collectors: Iterable[Any]) -> None:
        self.collectors = list(collectors)

    async def refresh(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def collect(self) -> Iterator[Metric]:
        f = CounterMetricFamily("faultline_collector_stats_total", "a collector's own counters (its "
                                "stats: scrape_errors, lines, rate_limited, ...)", labels=["collector", "stat"])
        for c in self.collectors:
            for stat, n in (getattr(c, "stats", None) or {}).items():
                if isinstance(n, (int, float)) and not isinstance(n, bool):
                    f.add_metric([str(c.name), str(stat)], n)
        yield f
