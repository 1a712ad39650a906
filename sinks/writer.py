"""Batching, idempotent writer: contract events and output records -> store rows.

Usage (the Faust sink agent, ``faultline ingest``, tests)::

    w = SinkWriter(store, max_rows=50_000, max_delay_s=1.0)
    w.add_raw(value_bytes)          # a validated contract event, as on the wire
    w.add_event(ev)                 # or a decoded event struct
    w.add_output(alert_or_incident_or_finding)
    if w.due():                     # size or age bound reached
        w.flush()                   # blocking: run it in an executor from asyncio code
    ...
    w.close()                       # flushes what is left

Every buffer goes to the store in ONE insert per table per flush. Events are split into their
envelope columns (msgspec, ``data`` kept as raw JSON text) and inserted column-oriented into
``ingest_events``; materialized views parse ``data`` and route rows in ClickHouse. Every
table is keyed by the record id (incidents by id + revision), so a batch inserted twice - a
crash after insert and before the offset commit - collapses on merge, and every query is
written to be right before the merge. Commit the consumer offsets only after ``flush()``
returned.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Union

import msgspec
import orjson

from ..schemas.outputs import Alert, Finding, Incident
from ..schemas.registry import ALERTS, FINDINGS, INCIDENTS
from .store import Store, ms

log = logging.getLogger("faultline.sinks.writer")

__all__ = ["SinkWriter", "FlushStats", "alert_row", "incident_rows", "finding_row", "deadletter_row"]

_enc = msgspec.json.Encoder()


class _Envelope(msgspec.Struct):
    """The envelope only; ``data`` stays raw JSON (ClickHouse parses it in the views)."""

    id: str
    ts: int
    kind: str
    source: str
    data: msgspec.Raw
    node: Union[str, None] = None
    job: Union[str, None] = None
    tenant: Union[str, None] = None


_env_dec = msgspec.json.Decoder(_Envelope)
#: one typed decoder per output topic (base name): the sink decodes each record once
_OUT_DEC: dict[str, msgspec.json.Decoder] = {
    ALERTS: msgspec.json.Decoder(Alert),
    INCIDENTS: msgspec.json.Decoder(Incident),
    FINDINGS: msgspec.json.Decoder(Finding),
}
_EV_COLS = ("id", "ts", "kind", "source", "node", "job", "tenant", "data")


@dataclass
class FlushStats:
    events: int = 0
    alerts: int = 0
    incidents: int = 0
    evidence: int = 0
    findings: int = 0
    seconds: float = 0.0
    deadletters: int = 0

    def __iadd__(self, o: "FlushStats") -> "FlushStats":
        for k in ("events", "alerts", "incidents", "evidence", "findings", "seconds", "deadletters"):
            setattr(self, k, getattr(self, k) + getattr(o, k))
        return self


#: the latest epoch ms a DateTime64(3) column holds (2299-12-31 23:59:59.999 UTC); the rows
#: below refuse ts values outside [0, MAX_STORE_MS] and integers outside their column's type
#: with a ``ValueError``: ClickHouse cannot parse such a ts (the whole insert fails, and a
#: sink retrying it would wedge) and silently wraps an out-of-range UInt (a revision 2^40
#: would be stored as 0)
MAX_STORE_MS = 10_413_791_999_999
_UINT16, _UINT32, _INT32 = (0, 0xFFFF), (0, 0xFFFF_FFFF), (-(1 << 31), (1 << 31) - 1)


def _ts(v: int | None, name: str) -> str | None:
    """``ms(v)`` for a DateTime64(3) column, refusing what the column cannot hold."""
    if v is not None and not 0 <= v <= MAX_STORE_MS:
        raise ValueError(f"{name} {v} is outside the store's time range (0..{MAX_STORE_MS} epoch ms)")
    return ms(v)


def _int(v: int | None, bounds: tuple[int, int], name: str) -> int | None:
    if v is not None and not bounds[0] <= v <= bounds[1]:
        raise ValueError(f"{name} {v} is outside its column's range {bounds[0]}..{bounds[1]}")
    return v


def alert_row(a: Alert) -> dict[str, Any]:
    return {
        "id": a.id, "ts": _ts(a.ts, "ts"), "severity": a.severity, "detector": a.detector,
        "node": a.node or "", "job": a.job or "", "subject": a.subject or "",
        "summary": a.summary, "evidence": a.evidence,
    }


def incident_rows(i: Incident, record: str | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ``incidents`` row and the ``incident_evidence`` rows of one incident revision
    (``record``: its JSON when the caller has it, as on fl.incidents)."""
    rc, ck, af, rt = i.root_cause, i.last_checkpoint, i.affected, i.retry
    row = {
        "id": i.id, "revision": _int(i.revision, _UINT32, "revision"), "job": i.job,
        "attempt": _int(i.attempt, _UINT16, "attempt"), "tenant": i.tenant or "",
        "failure_ts": _ts(i.failure_ts, "failure_ts"), "start_ts": _ts(i.start_ts, "start_ts"),
        "state": i.state or "", "symptom": i.symptom,
        "category": rc.category, "component": rc.component, "cause_summary": rc.summary,
        "confidence": rc.confidence, "ruled_out": i.ruled_out,
        "last_checkpoint_ts": _ts(ck.ts, "last_checkpoint.ts") if ck else None,
        "last_checkpoint_step": ck.step if ck else None,
        "last_checkpoint_path": ck.path if ck else "",
        "lost_gpu_hours": i.lost_gpu_hours, "gpus": _int(i.gpus, _UINT32, "gpus"), "image": i.image or "",
        "affected_nodes": af.nodes, "affected_gpus": af.gpus, "affected_ports": af.ports,
        "affected_paths": af.paths,
        "retry_attempt": _int(rt.attempt, _UINT16, "retry.attempt") if rt else None, "retry_state": rt.state if rt else "",
        "retry_ts": _ts(rt.ts, "retry.ts") if rt else None,
        "retry_same_nodes": (1 if rt.same_nodes else 0) if rt else None,
        "hypotheses": _enc.encode(i.hypotheses).decode(),
        "record": record if record is not None else _enc.encode(i).decode(),
    }
    ev = [{"incident_id": i.id, "revision": i.revision, "evidence_id": e.id, "ts": _ts(e.ts, "evidence.ts"),
           "layer": e.layer, "node": e.node or "", "summary": e.summary} for e in i.evidence]
    return row, ev


def finding_row(f: Finding) -> dict[str, Any]:
    return {
        "id": f.id, "ts": _ts(f.ts, "ts"), "kind": f.kind, "dimension": f.dimension, "subject": f.subject,
        "window_start": _ts(f.window_start, "window_start"), "window_end": _ts(f.window_end, "window_end"),
        "count": _int(f.count, _UINT32, "count"),
        "exposure": f.exposure, "exposure_unit": f.exposure_unit, "fleet_rate": f.fleet_rate,
        "score": f.score, "severity": f.severity, "summary": f.summary, "action": f.action,
        "incidents": f.incidents,
    }


def deadletter_row(rec: bytes | bytearray | memoryview | str | dict[str, Any]) -> dict[str, Any]:
    """The ``deadletters`` row of one ``fl.deadletter`` record (``schemas.dead_letter``)."""
    d = orjson.loads(rec) if not isinstance(rec, dict) else rec
    try:
        reason = str(d["reason"])
        return {"ts": _ts(int(d["ts"]), "ts"), "reason": reason, "reason_key": reason.split(" - at ")[0][:120],
                "topic": str(d.get("topic") or ""), "partition": _int(int(d.get("partition") or 0), _INT32, "partition"),
                "offset": _int(int(d["offset"]), (-(1 << 63), (1 << 63) - 1), "offset") if d.get("offset") is not None else -1,
                "raw_b64": str(d.get("raw_b64") or "")}
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"not a dead-letter record (needs ts, reason; see fl.deadletter in the contract): {e!r}") from None


class SinkWriter:
    """Buffers events and output records; ``flush()`` writes one insert per table.

    Bounded by ``max_rows`` (buffered records of all kinds) and ``max_delay_s`` (age of the
    oldest buffered record): ``due()`` says when to flush; ``add_*`` never flushes by itself,
    so the caller decides where the blocking insert runs. Thread-safe.
    """

    def __init__(self, store: Store, *, max_rows: int = 50_000, max_delay_s: float = 1.0) -> None:
        self.store = store
        self.max_rows = max_rows
        self.max_delay_s = max_delay_s
        self._lock = threading.Lock()
        self._ev: dict[str, list[Any]] = {c: [] for c in _EV_COLS}
        self._n_ev = 0
        self._alerts: list[dict[str, Any]] = []
        self._incidents: list[dict[str, Any]] = []
        self._evidence: list[dict[str, Any]] = []
        self._findings: list[dict[str, Any]] = []
        self._dead: list[dict[str, Any]] = []
        self._n = 0
        self._first = 0.0
        self.totals = FlushStats()

    # ------------------------------------------------------------ buffering
    def _added(self, n: int = 1) -> None:
        if self._n == 0:
            self._first = time.monotonic()
        self._n += n

    def add_raw(self, raw: bytes | bytearray | memoryview | str) -> None:
        """One contract event as its JSON bytes (validate with ``schemas.decode`` upstream;
        this only splits the envelope, and raises ``ValueError`` on non-JSON)."""
        self.add_raws((raw,))

    def add_raws(self, raws: Iterable[bytes | bytearray | memoryview | str]) -> None:
        """Contract events as JSON bytes (see ``add_raw``); all or none are buffered."""
        def rows() -> Iterator[tuple[Any, ...]]:
            dec = _env_dec.decode
            for raw in raws:
                try:
                    e = dec(raw)
                except msgspec.DecodeError as err:
                    raise ValueError(f"not a contract event envelope: {err}") from None
                yield (e.id, e.ts, e.kind, e.source, e.node or "", e.job or "", e.tenant or "",
                       bytes(e.data).decode())

        self._extend(rows())

    def add_events(self, evs: Iterable[Any]) -> None:
        """Decoded contract events (``schemas.decode``: the sink's one decode per record);
        ``data`` is re-encoded from the validated struct (the fields the contract defines)."""
        enc = _enc.encode
        self._extend((e.id, e.ts, e.kind, e.source, e.node or "", e.job or "", e.tenant or "",
                      enc(e.data).decode()) for e in evs)

    def add_event(self, ev: Any) -> None:
        """A decoded contract event (``schemas.Event``)."""
        self.add_events((ev,))

    def _extend(self, rows: Iterable[tuple[Any, ...]]) -> None:
        """Event rows in ``_EV_COLS`` order, appended column-wise (transposed in C)."""
        batch = list(rows)   # built before the lock: a bad row buffers nothing
        if not batch:
            return
        with self._lock:
            for name, values in zip(_EV_COLS, zip(*batch)):
                self._ev[name].extend(values)
            self._n_ev += len(batch)
            self._added(len(batch))

    def add_alert(self, a: Alert) -> None:
        row = alert_row(a)
        with self._lock:
            self._alerts.append(row)
            self._added()

    def add_incident(self, i: Incident) -> None:
        row, ev = incident_rows(i)
        with self._lock:
            self._incidents.append(row)
            self._evidence.extend(ev)
            self._added()

    def add_finding(self, f: Finding) -> None:
        row = finding_row(f)
        with self._lock:
            self._findings.append(row)
            self._added()

    def add_deadletter(self, rec: bytes | bytearray | memoryview | str | dict[str, Any]) -> None:
        """A rejected input, as the ``fl.deadletter`` record that describes it."""
        row = deadletter_row(rec)
        with self._lock:
            self._dead.append(row)
            self._added()

    def add_output(self, rec: Any) -> None:
        """An ``Alert``, ``Incident`` or ``Finding`` (struct, or a dict as on the topic)."""
        if isinstance(rec, (bytes, bytearray, memoryview, str)):
            rec = orjson.loads(rec)
        if isinstance(rec, dict):
            rec = _convert_output(rec)
        if isinstance(rec, Incident):
            self.add_incident(rec)
        elif isinstance(rec, Alert):
            self.add_alert(rec)
        elif isinstance(rec, Finding):
            self.add_finding(rec)
        else:
            raise TypeError(f"add_output takes Alert, Incident or Finding, not {type(rec).__name__}")

    def add_output_raw(self, topic: str, raw: bytes | bytearray | memoryview) -> None:
        """One record as on output topic ``topic`` (base name: fl.alerts, fl.incidents,
        fl.findings), decoded once into its struct; ``ValueError`` when it is not one."""
        dec = _OUT_DEC.get(topic)
        if dec is None:
            raise TypeError(f"add_output_raw takes a record of {', '.join(_OUT_DEC)}, not of {topic}")
        try:
            rec = dec.decode(raw)
        except msgspec.DecodeError as err:   # ValidationError is a DecodeError
            raise ValueError(f"not a {topic} record: {err}") from None
        if isinstance(rec, Incident):
            row, ev = incident_rows(rec, record=bytes(raw).decode())
            with self._lock:
                self._incidents.append(row)
                self._evidence.extend(ev)
                self._added()
        elif isinstance(rec, Alert):
            row = alert_row(rec)
            with self._lock:
                self._alerts.append(row)
                self._added()
        else:
            row = finding_row(rec)
            with self._lock:
                self._findings.append(row)
                self._added()

    def __len__(self) -> int:
        return self._n

    def due(self) -> bool:
        """True when the buffer reached ``max_rows`` or its oldest record ``max_delay_s``."""
        return self._n >= self.max_rows or (self._n > 0 and time.monotonic() - self._first >= self.max_delay_s)

    # ------------------------------------------------------------ writing
    def flush(self) -> FlushStats:
        """Insert everything buffered (blocking). On error the batch stays buffered and the
        error propagates: retrying is safe, rows are idempotent by id."""
        with self._lock:
            n_ev, alerts, incidents = self._n_ev, self._alerts, self._incidents
            evidence, findings, dead = self._evidence, self._findings, self._dead
            if not self._n:
                return FlushStats()
            t0 = time.perf_counter()
            st = self.store
            # outputs first is arbitrary; each insert is idempotent, so a failure midway
            # and a retry of the whole batch leaves no duplicates behind in query results
            if n_ev:
                st.insert_columns("ingest_events", self._ev)
                self._ev = {c: [] for c in _EV_COLS}
                self._n_ev = 0
            if alerts:
                st.insert("alerts", alerts)
                self._alerts = []
            if incidents:
                st.insert("incidents", incidents)
                self._incidents = []
            if evidence:
                st.insert("incident_evidence", evidence)
                self._evidence = []
            if findings:
                st.insert("findings", findings)
                self._findings = []
            if dead:
                st.insert("deadletters", dead)
                self._dead = []
            stats = FlushStats(n_ev, len(alerts), len(incidents), len(evidence), len(findings),
                               time.perf_counter() - t0, len(dead))
            self._n = 0
            self.totals += stats
        log.debug("sink flush", extra={"events": stats.events, "alerts": stats.alerts,
                                       "incidents": stats.incidents, "seconds": round(stats.seconds, 4)})
        return stats

    def close(self) -> FlushStats:
        return self.flush()

    def __enter__(self) -> "SinkWriter":
        return self

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        if exc_type is None:
            self.flush()


def _convert_output(d: dict[str, Any]) -> Any:
    if "root_cause" in d and "revision" in d:
        return msgspec.convert(d, Incident)
    if "detector" in d:
        return msgspec.convert(d, Alert)
    if "dimension" in d:
        return msgspec.convert(d, Finding)
    raise TypeError(f"record with keys {sorted(d)[:6]} is not an alert, incident or finding")
