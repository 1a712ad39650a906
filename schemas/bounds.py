"""Size bounds of every output record: named caps, the functions that apply them, and the
final size guard before a record is sent.

An input event is at most 256 KiB, but what the pipeline builds from events is not bounded
by that: a node name or a log line is copied into summaries, a job on 4,000 nodes lists
them all under ``affected``, a detector can gather any number of evidence ids. A Kafka
record over the producer's 1 MB request limit fails to send (``MessageSizeTooLargeError``)
and, retried, fails forever. So every alert, incident, finding and signal passes through a
``cap_*`` function: lists are cut to a cap, text to a length, and what was left out is
counted in the record's ``omitted`` field (``{"evidence": 412, "summary": 18000}``: list
items, or characters for text), an optional field the contract allows ("change it only by
adding optional fields"). A record within its caps comes back as the same object, so the
normal path costs a few ``len`` calls.

The caps are far above what the diagnosis produces today (40 evidence items, 6
hypotheses, 20 evidence ids per cause), so no existing incident changes; they only bite
on pathological input. ``guard_output`` is the last line: an encoded record still over
``MAX_OUTPUT_BYTES`` becomes a dead letter with the reason instead of being sent.

    from faultline.schemas.bounds import cap_alert, cap_incident, encode_output
    topic, value = encode_output(record, "fl.incidents")   # capped, encoded, guarded
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from .codec import (
    DEADLETTER_RAW_BYTES, MAX_DEADLETTER_BYTES, MAX_REASON_CHARS, clip, dead_letter, encode,
)
from .outputs import Alert, Cause, EvidenceItem, Finding, Incident
from .registry import DEADLETTER

__all__ = [
    "DEADLETTER_RAW_BYTES", "MAX_AFFECTED", "MAX_ALERT_EVIDENCE", "MAX_CAUSE_EVIDENCE",
    "MAX_DEADLETTER_BYTES", "MAX_FINDING_INCIDENTS", "MAX_HYPOTHESES", "MAX_INCIDENT_EVIDENCE",
    "MAX_ITEM_TEXT_CHARS", "MAX_NAME_CHARS", "MAX_OUTPUT_BYTES", "MAX_REASON_CHARS",
    "MAX_RULED_OUT", "MAX_SIGNAL_DATA_KEYS", "MAX_SIGNAL_EVIDENCE", "MAX_TEXT_CHARS",
    "cap_alert", "cap_finding", "cap_incident", "cap_output", "cap_signal", "encode_output",
    "guard_output",
]

#: the largest encoded output record sent (alert, incident, finding); above it, a dead letter.
#: The producer refuses requests over 1,000,000 bytes (Faust's producer_max_request_size).
MAX_OUTPUT_BYTES = 256 * 1024

# ---- text
MAX_TEXT_CHARS = 1000        # a summary, a symptom, a finding's action
MAX_ITEM_TEXT_CHARS = 500    # the summary of one incident evidence item
MAX_NAME_CHARS = 256         # one id / node / component / path inside a record

# ---- lists
MAX_INCIDENT_EVIDENCE = 200  # evidence items of an incident (correlate keeps 40 today)
MAX_HYPOTHESES = 16          # ranked alternatives (correlate keeps 6)
MAX_CAUSE_EVIDENCE = 50      # event ids per cause (correlate keeps 20)
MAX_RULED_OUT = 16           # layers (there are 7)
MAX_AFFECTED = 1024          # per list of ``affected`` and the retry's nodes
MAX_ALERT_EVIDENCE = 100     # event ids of one alert
MAX_FINDING_INCIDENTS = 500  # incident ids of one finding
MAX_SIGNAL_EVIDENCE = 100    # event ids of one signal
MAX_SIGNAL_DATA_KEYS = 64    # detector fields of one signal

#: when the per-field caps still leave an incident over ``MAX_OUTPUT_BYTES`` (thousands of
#: long names), every cap is divided by this, up to ``_SHRINK_ROUNDS`` times
_SHRINK = 4
_SHRINK_ROUNDS = 4

S = TypeVar("S", bound=msgspec.Struct)
_enc = msgspec.json.Encoder()


class _Cut:
    """Collects what one ``cap_*`` call left out (field -> count) and scales the caps."""

    __slots__ = ("omitted", "div")

    def __init__(self, omitted: dict[str, int] | None = None, div: int = 1) -> None:
        self.omitted: dict[str, int] = dict(omitted or {})
        self.div = div

    def _add(self, name: str, n: int) -> None:
        if n > 0:
            self.omitted[name] = self.omitted.get(name, 0) + n

    def text(self, name: str, s: str, limit: int) -> str:
        limit = max(16, limit // self.div)
        if len(s) <= limit and s.isascii():
            return s
        out = clip(s, limit)
        self._add(name, len(s) - len(out) + (1 if len(s) > limit else 0))
        return out

    def opt(self, name: str, s: str | None, limit: int) -> str | None:
        return None if s is None else self.text(name, s, limit)

    def names(self, name: str, items: list[str], cap: int) -> list[str]:
        """A list of ids/names: at most ``cap`` items, each at most ``MAX_NAME_CHARS``."""
        cap = max(1, cap // self.div)
        nlim = max(16, MAX_NAME_CHARS // self.div)
        if len(items) <= cap and all(len(x) <= nlim for x in items):
            return items
        self._add(name, len(items) - cap)
        return [clip(x, nlim) for x in items[:cap]]

    def keep(self, name: str, items: list[Any], cap: int) -> list[Any]:
        cap = max(1, cap // self.div)
        if len(items) <= cap:
            return items
        self._add(name, len(items) - cap)
        return items[:cap]


def _cause(c: Cause, cut: _Cut, where: str) -> Cause:
    summary = cut.text(f"{where}.summary", c.summary, MAX_TEXT_CHARS)
    component = cut.text(f"{where}.component", c.component, MAX_NAME_CHARS)
    evidence = cut.names(f"{where}.evidence", c.evidence, MAX_CAUSE_EVIDENCE)
    if summary is c.summary and component is c.component and evidence is c.evidence:
        return c
    return msgspec.structs.replace(c, summary=summary, component=component, evidence=evidence)


def _item(e: EvidenceItem, cut: _Cut) -> EvidenceItem:
    summary = cut.text("evidence[].summary", e.summary, MAX_ITEM_TEXT_CHARS)
    node = cut.opt("evidence[].node", e.node, MAX_NAME_CHARS)
    if summary is e.summary and node is e.node:
        return e
    return msgspec.structs.replace(e, summary=summary, node=node)


def _incident_once(i: Incident, div: int) -> Incident:
    cut = _Cut(i.omitted, div)
    af, rt = i.affected, i.retry
    evidence = [_item(e, cut) for e in cut.keep("evidence", i.evidence, MAX_INCIDENT_EVIDENCE)]
    hyps = [_cause(c, cut, "hypotheses[]") for c in cut.keep("hypotheses", i.hypotheses, MAX_HYPOTHESES)]
    changes: dict[str, Any] = dict(
        symptom=cut.text("symptom", i.symptom, MAX_TEXT_CHARS),
        root_cause=_cause(i.root_cause, cut, "root_cause"),
        hypotheses=hyps,
        ruled_out=cut.names("ruled_out", i.ruled_out, MAX_RULED_OUT),
        evidence=evidence,
        affected=msgspec.structs.replace(
            af, nodes=cut.names("affected.nodes", af.nodes, MAX_AFFECTED),
            gpus=cut.names("affected.gpus", af.gpus, MAX_AFFECTED),
            ports=cut.names("affected.ports", af.ports, MAX_AFFECTED),
            paths=cut.names("affected.paths", af.paths, MAX_AFFECTED)),
        image=cut.opt("image", i.image, MAX_NAME_CHARS),
    )
    if rt is not None:
        nodes = cut.names("retry.nodes", rt.nodes, MAX_AFFECTED)
        if nodes is not rt.nodes:
            changes["retry"] = msgspec.structs.replace(rt, nodes=nodes)
    if cut.omitted == i.omitted:
        return i
    return msgspec.structs.replace(i, omitted=cut.omitted, **changes)


def cap_incident(i: Incident) -> Incident:
    """``i`` within the incident caps, and encoded within ``MAX_OUTPUT_BYTES`` (the caps are
    divided by 4 until it is): the same object when nothing needed cutting. The order of
    every list is kept (the most relevant evidence and hypotheses come first), only its
    tail is cut."""
    out = _incident_once(i, 1)
    div = 1
    for _ in range(_SHRINK_ROUNDS):
        if len(_enc.encode(out)) <= MAX_OUTPUT_BYTES:
            break
        div *= _SHRINK
        out = _incident_once(out, div)
    return out


def cap_alert(a: Alert) -> Alert:
    """``a`` with at most ``MAX_ALERT_EVIDENCE`` evidence ids and a summary of at most
    ``MAX_TEXT_CHARS``; names at most ``MAX_NAME_CHARS``. The same object when within."""
    if (len(a.evidence) <= MAX_ALERT_EVIDENCE and len(a.summary) <= MAX_TEXT_CHARS
            and len(a.node or "") <= MAX_NAME_CHARS and len(a.job or "") <= MAX_NAME_CHARS
            and len(a.subject or "") <= MAX_NAME_CHARS and len(a.detector) <= MAX_NAME_CHARS
            and len(a.id) <= MAX_NAME_CHARS):
        return a
    cut = _Cut(a.omitted)
    return msgspec.structs.replace(
        a, evidence=cut.names("evidence", a.evidence, MAX_ALERT_EVIDENCE),
        summary=cut.text("summary", a.summary, MAX_TEXT_CHARS),
        node=cut.opt("node", a.node, MAX_NAME_CHARS), job=cut.opt("job", a.job, MAX_NAME_CHARS),
        subject=cut.opt("subject", a.subject, MAX_NAME_CHARS),
        detector=cut.text("detector", a.detector, MAX_NAME_CHARS), id=cut.text("id", a.id, MAX_NAME_CHARS),
        omitted=cut.omitted)


def cap_finding(f: Finding) -> Finding:
    """``f`` with at most ``MAX_FINDING_INCIDENTS`` incident ids and bounded text."""
    if (len(f.incidents) <= MAX_FINDING_INCIDENTS and len(f.summary) <= MAX_TEXT_CHARS
            and len(f.action) <= MAX_TEXT_CHARS and len(f.subject) <= MAX_NAME_CHARS):
        return f
    cut = _Cut(f.omitted)
    return msgspec.structs.replace(
        f, incidents=cut.names("incidents", f.incidents, MAX_FINDING_INCIDENTS),
        summary=cut.text("summary", f.summary, MAX_TEXT_CHARS),
        action=cut.text("action", f.action, MAX_TEXT_CHARS),
        subject=cut.text("subject", f.subject, MAX_NAME_CHARS), omitted=cut.omitted)


def _fits(v: Any, depth: int = 0) -> bool:
    """A signal data value within the caps: a scalar, short text, or a short list / dict of such."""
    if v is None or isinstance(v, (bool, int, float)):
        return True
    if isinstance(v, str):
        return len(v) <= MAX_ITEM_TEXT_CHARS
    if depth >= 2:
        return False
    if isinstance(v, (list, tuple)):
        return len(v) <= MAX_SIGNAL_EVIDENCE and all(_fits(x, depth + 1) for x in v)
    if isinstance(v, dict):
        return len(v) <= MAX_SIGNAL_DATA_KEYS and all(
            isinstance(k, str) and len(k) <= MAX_NAME_CHARS and _fits(x, depth + 1) for k, x in v.items())
    return False


def _fit(cut: _Cut, name: str, v: Any, depth: int = 0) -> Any:
    """``v`` made to fit (``_fits``): text clipped, lists and dicts cut to their first items,
    anything nested deeper than two levels or of another type as clipped text."""
    if _fits(v, depth):
        return v
    if isinstance(v, str):
        return cut.text(name, v, MAX_ITEM_TEXT_CHARS)
    if depth < 2 and isinstance(v, (list, tuple)):
        return [_fit(cut, f"{name}[]", x, depth + 1) for x in cut.keep(name, list(v), MAX_SIGNAL_EVIDENCE)]
    if depth < 2 and isinstance(v, dict):
        items = cut.keep(name, list(v.items()), MAX_SIGNAL_DATA_KEYS)
        return {clip(str(k), MAX_NAME_CHARS): _fit(cut, f"{name}.{k}", x, depth + 1) for k, x in items}
    return cut.text(name, str(v), MAX_ITEM_TEXT_CHARS)


def cap_signal(s: S) -> S:
    """A detector ``Signal`` (``streams.signals``; duck-typed, so ``schemas`` does not import
    ``streams``) with at most ``MAX_SIGNAL_EVIDENCE`` evidence ids, a summary of at most
    ``MAX_TEXT_CHARS``, and at most ``MAX_SIGNAL_DATA_KEYS`` data fields whose text values
    are at most ``MAX_ITEM_TEXT_CHARS`` (a list or dict value is cut to its first items).
    What was left out goes into ``data["omitted"]`` (a Signal has no field of its own for
    it). The same object when within the caps."""
    data = s.data  # type: ignore[attr-defined]
    if (len(s.evidence) <= MAX_SIGNAL_EVIDENCE and len(s.summary) <= MAX_TEXT_CHARS  # type: ignore[attr-defined]
            and len(s.subject) <= MAX_NAME_CHARS and _fits(data, 0)):  # type: ignore[attr-defined]
        return s
    prior = data.get("omitted")
    cut = _Cut(prior if isinstance(prior, dict) else None)
    fields = [(k, v) for k, v in data.items() if k != "omitted"]
    new = {clip(str(k), MAX_NAME_CHARS): _fit(cut, f"data.{k}", v, 1)
           for k, v in cut.keep("data", fields, MAX_SIGNAL_DATA_KEYS)}
    changes = dict(evidence=cut.names("evidence", s.evidence, MAX_SIGNAL_EVIDENCE),  # type: ignore[attr-defined]
                   summary=cut.text("summary", s.summary, MAX_TEXT_CHARS),  # type: ignore[attr-defined]
                   subject=cut.text("subject", s.subject, MAX_NAME_CHARS))  # type: ignore[attr-defined]
    if cut.omitted:
        new["omitted"] = cut.omitted
    return msgspec.structs.replace(s, data=new, **changes)


def cap_output(rec: S) -> S:
    """The ``cap_*`` of the record's type; any other record comes back unchanged."""
    if isinstance(rec, Incident):
        return cap_incident(rec)  # type: ignore[return-value]
    if isinstance(rec, Alert):
        return cap_alert(rec)  # type: ignore[return-value]
    if isinstance(rec, Finding):
        return cap_finding(rec)  # type: ignore[return-value]
    if hasattr(rec, "evidence") and hasattr(rec, "data") and hasattr(rec, "subject"):
        return cap_signal(rec)
    return rec


def guard_output(topic: str, value: bytes) -> tuple[str, bytes]:
    """``(topic, value)`` when the encoded record is at most ``MAX_OUTPUT_BYTES``, else a
    dead letter for ``fl.deadletter`` naming the topic and size (the record's first bytes,
    size and sha256 kept), so one oversized record is never sent and never retried."""
    n = len(value)
    if n <= MAX_OUTPUT_BYTES:
        return topic, value
    return DEADLETTER, dead_letter(
        value, f"output record of {n} bytes for {topic} is larger than the {MAX_OUTPUT_BYTES}-byte "
        f"output bound (schemas.bounds.MAX_OUTPUT_BYTES); not sent", topic)


def encode_output(rec: msgspec.Struct, topic: str) -> tuple[str, bytes]:
    """Cap, encode and guard one output record: ``(topic, value)`` to send."""
    return guard_output(topic, encode(cap_output(rec)))
