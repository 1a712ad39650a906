"""Alerts and incidents -> Alertmanager v2 alerts (pure: records and a clock in, alerts out).

One Alertmanager alert is identified by its label set, so everything here is about labels:

- a detector alert (``fl.alerts``): ``alertname`` ``Faultline<Detector>`` (``xid`` ->
  ``FaultlineXid``, ``log:cuda_oom`` -> ``FaultlineLogCudaOom``), ``severity``, ``node``,
  ``gpu`` (index, from a ``gpu:<node>/<i>`` subject), ``job``, ``category``, ``subject``;
- an incident (``fl.incidents``): ``alertname="FaultlineIncident"``, ``severity``
  (``INCIDENT_SEVERITY``), ``job``, ``category`` and ``component`` of the root cause,
  ``node``/``gpu`` when the component names them, ``incident`` (its id) and ``role="cause"``;
- a detector alert the incident explains carries the incident's id as ``incident`` and
  ``role="symptom"`` (or ``role="cause"`` when it is about the root-cause component itself:
  the XID on the GPU that fell off the bus). The shipped inhibit rule
  (``infra/alertmanager/alertmanager.yml``: source ``role="cause"``, target
  ``role="symptom"``, equal ``incident``) silences symptoms while the cause fires.

Time: ``startsAt`` is the record's event time; ``endsAt`` is when the notifier stops
asserting it (``alert_ttl`` after the alert's last occurrence, ``incident_ttl`` after the
incident revision was emitted), or the moment it was resolved: an incident closes when the
job's next attempt is known (any state but ``pending``) or the incident is withdrawn
(``state="recovered"``: a stall whose progress resumed); its symptoms resolve with it.

``AlertBook`` holds the notifier's bounded state and turns records into ``Delta``s: the
Alertmanager alerts to post (firing and resolved) and the webhook notices (first firing,
resolved) with the same inhibition the rule gives Alertmanager.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from functools import lru_cache
from datetime import datetime, timezone
from typing import Any, Iterable, Union

from msgspec import Struct

from ..schemas.outputs import Alert, Incident
from ..streams.xid import lookup as xid_lookup

INCIDENT_ALERTNAME = "FaultlineIncident"
ALERTNAME_PREFIX = "Faultline"
ROLE_CAUSE = "cause"
ROLE_SYMPTOM = "symptom"
#: severity of an incident alert by root-cause category (infrastructure faults page)
INCIDENT_SEVERITY: dict[str, str] = {"application": "warning", "scheduler": "info", "unknown": "warning"}
INCIDENT_SEVERITY_DEFAULT = "critical"
#: an incident whose job's next attempt is in one of these states is still open
OPEN_RETRY_STATES = frozenset({"pending"})
WITHDRAWN_STATE = "recovered"
#: category of a detector alert when the record does not carry one (the contract's
#: alerts have no ``category`` field yet): by detector, the category its signal blames
DETECTOR_CATEGORY: dict[str, str] = {
    "gpu_lost": "gpu_hardware", "ecc_dbe": "gpu_hardware", "ecc_sbe_burst": "gpu_hardware",
    "remap_pending": "gpu_hardware", "retired_pages": "gpu_hardware", "pcie_replay": "gpu_hardware",
    "nvlink_errors": "gpu_nvlink", "thermal_throttle": "thermal_throttle", "gpu_mem_high": "gpu_oom",
    "bmc_sensor": "node_hardware", "bmc_sel": "node_hardware", "node_down": "node_hardware",
    "port_down": "network_link", "port_flap": "network_link", "port_errors": "network_link",
    "rdma_link_downed": "network_link", "rdma_link_errors": "network_link",
    "port_discards": "network_congestion", "rdma_congestion": "network_congestion",
    "storage_slow": "storage_slow", "storage_full": "storage_full", "mount_full": "storage_full",
    "mount_stale": "storage_unavailable", "mount_missing": "storage_unavailable",
    "mount_readonly": "storage_unavailable", "container_oom": "host_oom", "log:oom_killer": "host_oom",
    "log:cgroup_oom": "host_oom", "log:cuda_oom": "gpu_oom", "log:enospc": "storage_full",
    "log:stale_file_handle": "storage_unavailable",
}
_XID_SUMMARY = re.compile(r"^XID (\d+)\b")
_GPU_SUBJECT = re.compile(r"^gpu:(?P<node>[^/]+)/(?P<gpu>.+)$")
#: an alert on the incident's job counts for it from this long before the attempt's start
LINK_LOOKBACK_MS = 30 * 60_000
#: evidence ids kept per Alertmanager alert for linking (bounded)
MAX_EVIDENCE_IDS = 64
MAX_ANNOTATION_CHARS = 1024


class AmAlert(Struct, kw_only=True):
    """One Alertmanager alert as posted (``to_json``); ``labels`` is its identity."""

    labels: dict[str, str]
    annotations: dict[str, str]
    starts_ms: int
    ends_ms: int
    generator_url: Union[str, None] = None

    def fingerprint(self) -> tuple[tuple[str, str], ...]:
        return tuple(sorted(self.labels.items()))

    def resolved(self, now_ms: int) -> bool:
        return self.ends_ms <= now_ms

    def to_json(self) -> dict[str, Any]:
        """The ``postableAlert`` of Alertmanager's v2 API."""
        out: dict[str, Any] = {"labels": self.labels, "annotations": self.annotations,
                               "startsAt": iso(self.starts_ms), "endsAt": iso(self.ends_ms)}
        if self.generator_url:
            out["generatorURL"] = self.generator_url
        return out


class Notice(Struct, kw_only=True):
    """A webhook message: ``status`` ``firing`` (first time) or ``resolved``; ``kind``
    ``alert`` or ``incident``."""

    status: str
    kind: str
    alert: AmAlert


class Delta(Struct, kw_only=True):
    """What one step changed: Alertmanager alerts to post, webhook notices to send, and the
    records skipped because they had already ended (``stale``)."""

    am: list[AmAlert] = []
    notices: list[Notice] = []
    stale: int = 0

    def extend(self, other: "Delta") -> None:
        self.am.extend(other.am)
        self.notices.extend(other.notices)
        self.stale += other.stale


def iso(ms: int) -> str:
    """RFC 3339 UTC with milliseconds (what Alertmanager parses)."""
    dt = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


@lru_cache(maxsize=4096)
def alertname(detector: str) -> str:
    """``xid`` -> ``FaultlineXid``, ``log:cuda_oom`` -> ``FaultlineLogCudaOom``."""
    parts = re.split(r"[^0-9A-Za-z]+", detector)
    return ALERTNAME_PREFIX + "".join(p[:1].upper() + p[1:] for p in parts if p)


def gpu_of(subject: str | None) -> tuple[str | None, str | None]:
    """(node, gpu index) of a ``gpu:<node>/<index>`` subject or component, else (None, None)."""
    m = _GPU_SUBJECT.match(subject or "")
    return (m.group("node"), m.group("gpu")) if m else (None, None)


def node_of(component: str | None) -> str | None:
    if component and component.startswith("node:"):
        return component[5:]
    return gpu_of(component)[0]


def alert_category(a: Alert) -> str | None:
    """The alert's own ``category`` when the record has one, else by detector (XID: the
    NVIDIA catalog's category for the number in the summary)."""
    own = getattr(a, "category", None)
    if own:
        return own
    if a.detector == "xid":
        m = _XID_SUMMARY.match(a.summary)
        return xid_lookup(int(m.group(1))).category if m else None
    return DETECTOR_CATEGORY.get(a.detector)


def _clean(labels: dict[str, str | None]) -> dict[str, str]:
    # an empty label value is the same as no label to Alertmanager: leave it out
    return {k: str(v) for k, v in labels.items() if v not in (None, "")}


def _clip(text: str) -> str:
    return text if len(text) <= MAX_ANNOTATION_CHARS else text[: MAX_ANNOTATION_CHARS - 1] + "\u2026"


def alert_labels(a: Alert, incident: str | None = None, role: str | None = None) -> dict[str, str]:
    node, gpu = gpu_of(a.subject)
    return _clean({
        "alertname": alertname(a.detector), "severity": a.severity, "node": a.node or node,
        "gpu": gpu, "job": a.job, "category": alert_category(a), "subject": a.subject,
        "incident": incident, "role": role if incident else None,
    })


def incident_labels(inc: Incident) -> dict[str, str]:
    rc = inc.root_cause
    node, gpu = gpu_of(rc.component)
    if node is None:
        node = node_of(rc.component)
    if node is None and len(inc.affected.nodes) == 1:
        node = inc.affected.nodes[0]
    return _clean({
        "alertname": INCIDENT_ALERTNAME,
        "severity": INCIDENT_SEVERITY.get(rc.category, INCIDENT_SEVERITY_DEFAULT),
        "node": node, "gpu": gpu, "job": inc.job, "category": rc.category, "component": rc.component,
        "incident": inc.id, "role": ROLE_CAUSE,
    })


def incident_link(page_url: str | None, incident_id: str) -> str | None:
    return f"{page_url.rstrip('/')}/incidents/{incident_id}" if page_url else None


def incident_annotations(inc: Incident, page_url: str | None) -> dict[str, str]:
    rc = inc.root_cause
    out = {
        "summary": _clip(f"job {inc.job} attempt {inc.attempt} stopped ({inc.state or 'interrupted'}): "
                         f"{rc.category} {rc.component} - {rc.summary}"),
        "description": _clip(f"symptom: {inc.symptom}; confidence {rc.confidence:.2f}; "
                             f"lost {inc.lost_gpu_hours:.2f} GPU-h; revision {inc.revision}"),
        "incident_id": inc.id,
    }
    link = incident_link(page_url, inc.id)
    if link:
        out["incident_url"] = link
    return out


def incident_closed(inc: Incident) -> bool:
    """Withdrawn (a stall that resumed), or the job's next attempt is known and past pending."""
    if inc.state == WITHDRAWN_STATE:
        return True
    return inc.retry is not None and inc.retry.state not in OPEN_RETRY_STATES


def incident_window(inc: Incident) -> tuple[int, int | None]:
    """[from, until) in event time in which an alert on the incident's job belongs to it."""
    start = inc.start_ts if inc.start_ts is not None else inc.failure_ts
    until = inc.retry.ts if inc.retry is not None else None
    return start - LINK_LOOKBACK_MS, until


def evidence_ids(inc: Incident) -> set[str]:
    ids = {e.id for e in inc.evidence}
    ids.update(inc.root_cause.evidence)
    return ids


def relation(entry: "Entry", inc: Incident, inc_evidence: set[str]) -> str | None:
    """How a detector alert relates to an incident: ``cause`` (about the root-cause
    component, in the attempt's window), ``symptom`` (its evidence is the incident's, or it
    is on the incident's job in the window), or None."""
    lo, hi = incident_window(inc)
    in_window = entry.last_ts >= lo and (hi is None or entry.first_ts < hi)
    if not in_window:
        return None
    shares = not inc_evidence.isdisjoint(entry.evidence)
    if entry.subject is not None and entry.subject == inc.root_cause.component:
        return ROLE_CAUSE
    if shares or (entry.job is not None and entry.job == inc.job):
        return ROLE_SYMPTOM
    return None


class Entry:
    """One detector alert label set (records with the same labels merge, as in Alertmanager)."""

    __slots__ = ("base", "alert", "first_ts", "last_ts", "evidence", "subject", "job", "incident",
                 "role", "notified", "seen_ms")

    def __init__(self, base: Alert, alert: AmAlert, seen_ms: int) -> None:
        self.base = base           # latest record (labels are computed from it)
        self.alert = alert
        self.first_ts = base.ts
        self.last_ts = base.ts
        self.evidence: set[str] = set(base.evidence[:MAX_EVIDENCE_IDS])
        self.subject = base.subject
        self.job = base.job
        self.incident: str | None = None
        self.role: str | None = None
        self.notified = False
        self.seen_ms = seen_ms


class IncEntry:
    __slots__ = ("inc", "alert", "closed", "evidence", "notified", "seen_ms", "keep_until")

    def __init__(self, inc: Incident, alert: AmAlert, seen_ms: int, keep_until: int) -> None:
        self.inc = inc
        self.alert = alert
        self.closed = incident_closed(inc)
        self.evidence = evidence_ids(inc)
        self.notified = False      # a firing notice went out and no resolved one yet
        self.seen_ms = seen_ms
        self.keep_until = keep_until   # kept (closed too) until then, to absorb late symptoms


class AlertBook:
    """The notifier's state: live detector alerts (by label set) and incidents (by id), each
    bounded (``max_active``; the oldest go first and simply run out at their ``endsAt`` in
    Alertmanager). Every method takes the wall clock ``now_ms`` and returns a ``Delta``.

    ``group_wait_ms``: a webhook notice for a firing alert waits this long (an incident
    arriving in the meantime inhibits its symptoms, as Alertmanager's group_wait does);
    notices are made by ``pending_notices`` (``apply_all`` and ``tick`` call it).
    """

    def __init__(self, *, alert_ttl_ms: int, incident_ttl_ms: int, page_url: str | None = None,
                 max_active: int = 10_000, group_wait_ms: int = 0, notices: bool = True) -> None:
        self.notices = notices          # False: no webhook, so no notices to make
        self.alert_ttl_ms = alert_ttl_ms
        self.incident_ttl_ms = incident_ttl_ms
        self.page_url = page_url
        self.max_active = max_active
        self.group_wait_ms = group_wait_ms
        self.alerts: OrderedDict[tuple, Entry] = OrderedDict()
        self.incidents: OrderedDict[str, IncEntry] = OrderedDict()
        self.evicted = 0

    # ------------------------------------------------------------------ records
    def on_alert(self, a: Alert, now_ms: int, quiet: bool = False) -> Delta:
        """``quiet``: a record read again after a restart or rebalance (already announced
        before): it rebuilds the state and goes to Alertmanager, but makes no firing notice."""
        d = Delta()
        if a.ts + self.alert_ttl_ms <= now_ms:
            d.stale += 1
            return d
        base = AmAlert(labels=alert_labels(a), annotations={}, starts_ms=a.ts, ends_ms=a.ts + self.alert_ttl_ms)
        entry = self.alerts.get(base.fingerprint())
        if entry is None:
            entry = Entry(a, base, now_ms)
            ie = self._incident_for(entry)
            if ie is not None:
                entry.incident, entry.role = ie.inc.id, relation(entry, ie.inc, ie.evidence)
                if entry.role == ROLE_SYMPTOM and ie.closed:
                    d.stale += 1            # a late symptom of a closed incident: absorbed
                    return d
            entry.alert = self._entry_alert(entry)
            if quiet and entry.incident is not None:
                # read again after a restart: its unlinked label set may be firing in Alertmanager
                d.extend(self._resolved(base, "alert", False, now_ms))
            existing = self.alerts.get(entry.alert.fingerprint())
            if existing is not None:        # linked labels of an alert we already have
                self._merge(existing, a)
                entry = existing
            else:
                self._put_alert(entry)
        else:
            self._merge(entry, a)
        if quiet:
            entry.notified = True
        d.am.append(entry.alert)
        return d

    def on_incident(self, inc: Incident, record_ms: int, now_ms: int, quiet: bool = False) -> Delta:
        d = Delta()
        old = self.incidents.get(inc.id)
        if old is not None and old.inc.revision >= inc.revision:
            return d                        # a revision we already have (or an older one)
        keep_until = max(record_ms, inc.failure_ts) + self.incident_ttl_ms
        closed = incident_closed(inc)
        am = AmAlert(labels=incident_labels(inc), annotations=incident_annotations(inc, self.page_url),
                     starts_ms=inc.failure_ts, ends_ms=min(now_ms, keep_until) if closed else keep_until,
                     generator_url=incident_link(self.page_url, inc.id))
        ie = IncEntry(inc, am, old.seen_ms if old is not None else now_ms, keep_until)
        if old is not None and not old.alert.resolved(now_ms):
            if am.resolved(now_ms):
                d.extend(self._resolved(old.alert, "incident", False, now_ms))
                if not old.notified:        # closed before its notice went out: still say it happened
                    d.notices.append(Notice(status="firing", kind="incident", alert=old.alert))
                d.notices.append(Notice(status="resolved", kind="incident", alert=am))
            elif old.alert.fingerprint() != am.fingerprint():
                # a revision with another root cause: a new Alertmanager alert (the old label set
                # resolves there); the webhook gets a new firing notice, no resolved one
                d.extend(self._resolved(old.alert, "incident", False, now_ms))
            else:
                ie.notified = old.notified
        elif old is None and am.resolved(now_ms):
            d.stale += 1                    # already over when first seen: never fires
        if not am.resolved(now_ms):
            d.am.append(am)
            if quiet:
                ie.notified = True
        self.incidents[inc.id] = ie
        self.incidents.move_to_end(inc.id)
        while len(self.incidents) > self.max_active:
            self.incidents.popitem(last=False)
            self.evicted += 1
        d.extend(self._relink(ie, now_ms))
        return d

    # ------------------------------------------------------------------ clock
    def tick(self, now_ms: int) -> Delta:
        """Expire what ran out (resolved notices) and send webhook notices whose wait is over."""
        d = Delta()
        for fp in [fp for fp, e in self.alerts.items() if e.alert.resolved(now_ms)]:
            e = self.alerts.pop(fp)
            if e.notified:
                d.notices.append(Notice(status="resolved", kind="alert", alert=e.alert))
        for iid, ie in list(self.incidents.items()):
            if ie.notified and ie.alert.resolved(now_ms):
                ie.notified = False
                d.notices.append(Notice(status="resolved", kind="incident", alert=ie.alert))
            if ie.keep_until <= now_ms and ie.alert.resolved(now_ms):
                del self.incidents[iid]
        d.extend(self.pending_notices(now_ms))
        return d

    def active(self, now_ms: int) -> list[AmAlert]:
        """Every alert still firing (re-posted periodically: Alertmanager keeps alerts in
        memory only, so a restarted one gets them back)."""
        out = [e.alert for e in self.incidents.values() if not e.alert.resolved(now_ms)]
        out += [e.alert for e in self.alerts.values() if not e.alert.resolved(now_ms)]
        return out

    def pending_notices(self, now_ms: int) -> Delta:
        """Firing notices for what fires, has waited ``group_wait_ms`` and is not inhibited."""
        d = Delta()
        if not self.notices:
            return d
        for ie in self.incidents.values():
            if not ie.notified and not ie.alert.resolved(now_ms) and now_ms - ie.seen_ms >= self.group_wait_ms:
                ie.notified = True
                d.notices.append(Notice(status="firing", kind="incident", alert=ie.alert))
        for e in self.alerts.values():
            if (not e.notified and not e.alert.resolved(now_ms) and now_ms - e.seen_ms >= self.group_wait_ms
                    and not self.inhibited(e, now_ms)):
                e.notified = True
                d.notices.append(Notice(status="firing", kind="alert", alert=e.alert))
        return d

    def inhibited(self, e: Entry, now_ms: int) -> bool:
        """The shipped inhibit rule, for the webhook: a symptom while its incident fires."""
        if e.role != ROLE_SYMPTOM or e.incident is None:
            return False
        ie = self.incidents.get(e.incident)
        return ie is not None and not ie.alert.resolved(now_ms)

    # ------------------------------------------------------------------ internals
    def _alert_annotations(self, a: Alert) -> dict[str, str]:
        out = {"summary": _clip(a.summary), "alert_id": a.id}
        if a.evidence:
            out["evidence"] = _clip(",".join(a.evidence[:10]))
        return out

    def _entry_alert(self, e: Entry) -> AmAlert:
        ann = self._alert_annotations(e.base)
        link = None
        if e.incident is not None:
            ann["incident_id"] = e.incident
            link = incident_link(self.page_url, e.incident)
            if link:
                ann["incident_url"] = link
        return AmAlert(labels=alert_labels(e.base, e.incident, e.role), annotations=ann,
                       starts_ms=e.first_ts, ends_ms=e.last_ts + self.alert_ttl_ms, generator_url=link)

    def _merge(self, e: Entry, a: Alert) -> None:
        """Another record with ``e``'s labels: the later occurrence extends it."""
        if a.ts >= e.last_ts:
            e.base = a
        e.first_ts, e.last_ts = min(e.first_ts, a.ts), max(e.last_ts, a.ts)
        for ev in a.evidence:
            if len(e.evidence) >= MAX_EVIDENCE_IDS:
                break
            e.evidence.add(ev)
        e.alert = self._entry_alert(e)

    def _put_alert(self, e: Entry) -> None:
        fp = e.alert.fingerprint()
        self.alerts[fp] = e
        self.alerts.move_to_end(fp)
        while len(self.alerts) > self.max_active:
            self.alerts.popitem(last=False)
            self.evicted += 1

    def _incident_for(self, e: Entry) -> IncEntry | None:
        best: IncEntry | None = None
        for ie in reversed(self.incidents.values()):
            role = relation(e, ie.inc, ie.evidence)
            if role == ROLE_CAUSE:
                return ie
            if role is not None and best is None:
                best = ie
        return best

    def _relink(self, ie: IncEntry, now_ms: int) -> Delta:
        """(Re)label the detector alerts this incident explains; a changed label set is a new
        Alertmanager alert, so the old one is resolved. Symptoms of a closed incident resolve."""
        d = Delta()
        for fp, e in list(self.alerts.items()):
            if e.incident is not None and e.incident != ie.inc.id:
                continue
            role = relation(e, ie.inc, ie.evidence)
            if role is None and e.incident is None:
                continue
            new_inc = ie.inc.id if role is not None else None
            if (new_inc, role) != (e.incident, e.role):
                # new labels = a new Alertmanager alert (the old label set resolves there); for
                # the webhook it is the same alert: no notice, and it keeps its notified state
                old = e.alert
                del self.alerts[fp]
                e.incident, e.role = new_inc, role
                e.alert = self._entry_alert(e)
                d.extend(self._resolved(old, "alert", False, now_ms))
                if role == ROLE_SYMPTOM and ie.closed:
                    continue                # its incident is over: resolved with it
                if e.alert.fingerprint() in self.alerts:
                    self._merge(self.alerts[e.alert.fingerprint()], e.base)
                    continue                # merged into an alert that already has these labels
                self._put_alert(e)
                d.am.append(e.alert)
            elif role == ROLE_SYMPTOM and ie.closed:
                del self.alerts[fp]
                d.extend(self._resolved(e.alert, "alert", e.notified, now_ms))
        return d

    def _resolved(self, am: AmAlert, kind: str, notified: bool, now_ms: int) -> Delta:
        done = AmAlert(labels=am.labels, annotations=am.annotations, starts_ms=am.starts_ms,
                       ends_ms=min(am.ends_ms, now_ms), generator_url=am.generator_url)
        d = Delta(am=[done])
        if notified:
            d.notices.append(Notice(status="resolved", kind=kind, alert=done))
        return d


def apply_all(book: AlertBook, records: Iterable[tuple[Any, int]], now_ms: int, *,
              quiet: bool = False) -> Delta:
    """Feed ``(record, kafka timestamp ms)`` pairs (Alert or Incident) into ``book``
    (``quiet``: records read again, see ``AlertBook.on_alert``)."""
    d = Delta()
    for rec, record_ms in records:
        if isinstance(rec, Incident):
            d.extend(book.on_incident(rec, record_ms, now_ms, quiet))
        else:
            d.extend(book.on_alert(rec, now_ms, quiet))
    d.extend(book.pending_notices(now_ms))
    return d
