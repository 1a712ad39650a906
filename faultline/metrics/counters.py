"""The counters a component keeps for ``/metrics`` where its own ``Stats`` has only totals:
labelled tallies (bounded label sets) and latency histograms (fixed buckets).

Plain Python, no prometheus_client: the hot path adds to a dict or a list, the collectors
(``faultline.metrics.sources``) read them at scrape time. Every label set is bounded
(``MAX_LABEL_SETS``: later new label values count under ``other``); dead-letter reasons,
free text up to 1,000 characters, are counted by class (``reason_class``), never verbatim.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from typing import Any, Iterable, Mapping, Sequence

import orjson

#: distinct label sets one tally keeps at most; a new one past it counts under OTHER
MAX_LABEL_SETS = 256
OTHER = "other"

#: seconds; batches of the worker (5,000 records at most) and sink flushes (20,000 rows)
LATENCY_BUCKETS: tuple[float, ...] = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                      1.0, 2.5, 5.0, 10.0, 30.0)

#: dead-letter reason classes: (class, the reason starts with one of, or contains one of)
#: - the first rule that matches wins; the reasons are written in schemas/codec.py,
#: schemas/bounds.py, streams/agents.py, streams/engine.py and streams/faust_sink.py
REASON_RULES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("empty", ("empty message",), ()),
    ("oversized", ("event is ",), ("larger than the",)),
    ("output_oversized", ("output record of ",), ()),
    ("invalid_json", ("not valid JSON",), ()),
    ("unknown_kind", ("unknown kind",), ()),
    ("future_ts", (), ("in the future",)),
    ("wrong_topic", (), ("does not belong on",)),
    ("sink_refused", (), ("record refused by the sink",)),
    ("undecodable", ("undecodable:",), ()),
    ("processing_failed", (), (" failed on this record:", " failed: ")),
    ("schema", ("Expected ", "Object missing required field", "Object contains unknown field",
                "Integer value out of range", "Invalid value", "Invalid enum value"), ()),
)
REASON_CLASSES: tuple[str, ...] = tuple(r[0] for r in REASON_RULES) + (OTHER,)


def reason_class(reason: str) -> str:
    """The class of a dead letter's reason (one of ``REASON_CLASSES``)."""
    for name, starts, contains in REASON_RULES:
        if starts and reason.startswith(starts):
            return name
        if contains and any(c in reason for c in contains):
            return name
    return OTHER


class Tally:
    """Counts per label tuple, at most ``limit`` distinct tuples (then ``(other, ...)``)."""

    __slots__ = ("labels", "limit", "_n")

    def __init__(self, labels: tuple[str, ...], limit: int = MAX_LABEL_SETS) -> None:
        self.labels = labels
        self.limit = limit
        self._n: dict[tuple[str, ...], int] = {}

    def add(self, key: tuple[str, ...], n: int = 1) -> None:
        d = self._n
        if key not in d and len(d) >= self.limit:
            key = (OTHER,) * len(self.labels)
        d[key] = d.get(key, 0) + n

    def add_all(self, counts: Mapping[tuple[str, ...], int]) -> None:
        """``add`` for each key of ``counts`` (a batch counted first: one dict update per key)."""
        for key, n in counts.items():
            self.add(key, n)

    def items(self) -> list[tuple[tuple[str, ...], int]]:
        return list(self._n.items())

    def total(self) -> int:
        return sum(self._n.values())

    def __repr__(self) -> str:   # short: the worker's stats log line prints it
        return str(self.total())


class Timing:
    """A latency histogram: ``observe(seconds)``; cumulative buckets read at scrape time."""

    __slots__ = ("bounds", "_counts", "count", "sum")

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        self.bounds = tuple(sorted(bounds))
        self._counts = [0] * (len(self.bounds) + 1)   # the last one: above every bound
        self.count = 0
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self._counts[bisect_left(self.bounds, seconds)] += 1
        self.count += 1
        self.sum += seconds

    def buckets(self) -> list[tuple[str, int]]:
        """``(le, cumulative count)`` pairs ending with ``+Inf`` (Prometheus' order)."""
        out, acc = [], 0
        for b, n in zip(self.bounds, self._counts):
            acc += n
            out.append((_le(b), acc))
        out.append(("+Inf", acc + self._counts[-1]))
        return out

    def __repr__(self) -> str:
        return str(self.count)


def _le(b: float) -> str:
    return repr(float(b))


class WorkerCounts:
    """What the worker counts for ``/metrics`` beyond ``Stats``' totals (``Stats.counts``):
    valid events by topic and kind, dead letters by reason class, alerts by detector and
    severity, incidents by root-cause category, node and job batch latency."""

    __slots__ = ("events", "dead", "alerts", "incidents", "node_batch", "job_batch")

    def __init__(self) -> None:
        self.events = Tally(("topic", "kind"))
        self.dead = Tally(("reason",))
        self.alerts = Tally(("detector", "severity"))
        self.incidents = Tally(("category",))
        self.node_batch = Timing()
        self.job_batch = Timing()

    def add_events(self, pairs: Sequence[tuple[Any, Any]]) -> None:
        """``(event, Kafka message)`` pairs of valid input (``agents.decode_events``' ok list).

        Counted per batch: a batch of one topic and one event class (the usual case) is one
        tally update without a tuple per event (~170 -> ~60 ns per event, 5,000-event batch, this machine);
        a mixed batch is counted per (topic, kind)."""
        if not pairs:
            return
        topics = {m.topic for _, m in pairs}
        if len(topics) == 1:
            (topic,) = topics
            classes = {type(ev) for ev, _ in pairs}
            if len(classes) == 1:
                (cls,) = classes
                self.events.add((topic, cls.kind), len(pairs))
                return
            for cls, n in Counter([type(ev) for ev, _ in pairs]).items():
                self.events.add((topic, cls.kind), n)
            return
        self.events.add_all(Counter([(m.topic, ev.kind) for ev, m in pairs]))

    def add_dead_letters(self, blobs: Iterable[bytes]) -> None:
        """``fl.deadletter`` records as sent (``schemas.codec.dead_letter`` output)."""
        for b in blobs:
            self.dead.add((reason_class(_reason_of(b)),))

    def add_output(self, o: Any) -> None:
        """An alert or incident the worker sent."""
        if hasattr(o, "revision"):
            self.incidents.add((o.root_cause.category,))
        else:
            self.alerts.add((o.detector, o.severity))

    def __repr__(self) -> str:   # the stats log line
        return (f"events={self.events!r}/dead={self.dead!r}/alerts={self.alerts!r}/"
                f"incidents={self.incidents!r}")


#: ``sinks.writer.FlushStats`` field -> the store table its rows went to
FLUSH_TABLES: dict[str, str] = {"events": "ingest_events", "alerts": "alerts", "incidents": "incidents",
                                "evidence": "incident_evidence", "findings": "findings",
                                "deadletters": "deadletters"}


class SinkCounts:
    """What the sink counts for ``/metrics`` (``SinkConsumer.counts``): rows inserted by
    table and the latency of each store flush."""

    __slots__ = ("rows", "flush")

    def __init__(self) -> None:
        self.rows = Tally(("table",))
        self.flush = Timing()

    def add_flush(self, st: Any) -> None:
        """One ``SinkWriter.flush()`` result (``sinks.writer.FlushStats``); an empty one
        (nothing was buffered) is not a flush."""
        n = 0
        for field, table in FLUSH_TABLES.items():
            k = int(getattr(st, field, 0) or 0)
            if k:
                self.rows.add((table,), k)
                n += k
        if n:
            self.flush.observe(float(st.seconds))

    def __repr__(self) -> str:
        return f"rows={self.rows!r}/flushes={self.flush!r}"


def _reason_of(blob: bytes) -> str:
    try:
        d = orjson.loads(blob)
    except orjson.JSONDecodeError:
        return ""
    r = d.get("reason") if isinstance(d, dict) else None
    return r if isinstance(r, str) else ""
