"""Repeat offenders: which subjects interrupt more attempts than their exposure explains.

``Interruptions`` holds what was counted: an ``Incident`` counts for the subject its root
cause names (*blame*: node, gpu, port, segment, path) and for the attempt's image and driver
(*context*); the count of a subject is the number of distinct interrupted **attempts**.
Alerts (critical on every blame dimension, warning on shared resources) are kept apart: a
finding reports them next to its count ("3 interrupted attempts; 12 alerts besides"), they
never count as interruptions.

``offenders`` tests, per dimension and window, each subject's count against the fleet rate
of the other subjects of that dimension (leave-one-out) times its exposure with the exact
conditional Poisson rate test, then Benjamini-Hochberg (or Bonferroni) across the subjects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...schemas.outputs import Alert, Finding, Incident
from .common import (ACTIONS, BLAME_DIMS, DIMENSIONS, EXCLUDED_CATEGORIES, NO_BLAME_CATEGORIES, OWN_DETECTORS,
                     FindingsConfig, cap, dimension_of, fmt_window, name_of)
from .exposure import Exposure, Inventory
from .stats import adjust, poisson_sf, rate_test


class Interruption:
    """An incident (``key`` = (job, attempt)) or an alert (``alert`` True) on its subjects."""

    __slots__ = ("id", "ts", "revision", "subjects", "key", "alert", "node", "nodes")

    def __init__(self, id: str, ts: int, revision: int, subjects: tuple[str, ...],
                 key: tuple[str, int] | None, alert: bool, node: str | None = None,
                 nodes: tuple[str, ...] = ()) -> None:
        self.id = id
        self.ts = ts
        self.revision = revision
        self.subjects = subjects
        self.key = key
        self.alert = alert
        self.node = node    # the node that reported an alert
        self.nodes = nodes  # an incident's job nodes

    def dump(self) -> list:
        return [self.id, self.ts, self.revision, list(self.subjects), list(self.key) if self.key else None,
                self.alert, self.node, list(self.nodes)]

    @classmethod
    def load(cls, row: list) -> "Interruption":
        iid, ts, rev, subs, key, alert, node, nodes = row
        return cls(iid, ts, rev, tuple(subs), (key[0], key[1]) if key else None, alert, node, tuple(nodes))


@dataclass
class Tally:
    """One subject in one window: the interrupted attempts (one incident each, the latest
    seen for the attempt) and the alerts reported apart."""

    attempts: list[Interruption] = field(default_factory=list)
    alerts: int = 0


def blame(component: str, inv: Inventory) -> list[str]:
    """The subjects a root-cause (or alert) component puts on the offender list."""
    if component.startswith("gpu:"):
        return [component, "node:" + component[4:].split("/", 1)[0]]
    if component.startswith("rdma:"):  # rdma:<node>/<nic>/<port>: the switch port of that NIC
        node, _, rest = component[5:].partition("/")
        port = inv.port_of(node, rest.partition("/")[0])
        return [port] if port else []
    if component.startswith("port:") and "@" in component:  # port:<nic>@<node> (streams/join.py)
        nic, _, node = component[5:].partition("@")
        port = inv.port_of(node, nic)
        return [port] if port else []
    if component.startswith(("node:", "port:", "path:", "segment:", "version:driver=", "version:image=")):
        return [component]
    return []


class Interruptions:
    """What was counted, by id (latest incident revision wins; bounded)."""

    def __init__(self, cfg: FindingsConfig, inv: Inventory, expo: Exposure) -> None:
        self.cfg = cfg
        self.inv = inv
        self.expo = expo
        self.items: dict[str, Interruption] = {}

    def on_incident(self, inc: Incident) -> int | None:
        """Count an incident; returns its failure time when counted."""
        prev = self.items.get(inc.id)
        if prev is not None and prev.revision > inc.revision:
            return None
        rc = inc.root_cause
        if rc.category in EXCLUDED_CATEGORIES:
            self.items.pop(inc.id, None)
            return None
        # blame: the root cause's component only. ``affected`` is the blast radius (every
        # node, port and path of the job in streams/correlate.py), not the culprit.
        subjects: set[str] = set()
        if rc.category not in NO_BLAME_CATEGORIES or rc.component.startswith("version:"):
            subjects.update(blame(rc.component, self.inv))
        key = (inc.job, inc.attempt)
        att = self.expo.get(key)
        if att is not None:
            subjects.update(att.context)
            att.incidents.add(inc.id)
        else:
            if inc.image:
                subjects.add(DIMENSIONS["image"] + inc.image)
            for n in inc.affected.nodes:
                drv = self.inv.version(n, "driver")
                if drv:
                    subjects.add(DIMENSIONS["driver"] + drv)
        self.items[inc.id] = Interruption(inc.id, inc.failure_ts, inc.revision, tuple(sorted(subjects)), key, False,
                                          None, tuple(inc.affected.nodes))
        cap(self.items, self.cfg.max_interruptions)
        return inc.failure_ts

    def on_alert(self, alert: Alert) -> None:
        """Keep a critical alert on its subject, and a warning one on a shared resource
        (``warning_alert_dims``); info alerts and our own are ignored."""
        if alert.severity == "info" or alert.detector in OWN_DETECTORS or alert.id in self.items:
            return
        subjects: set[str] = set()
        if alert.subject:
            subjects.update(blame(alert.subject, self.inv))
        elif alert.node:
            subjects.add("node:" + alert.node)
        dims = BLAME_DIMS if alert.severity == "critical" else self.cfg.warning_alert_dims
        subjects = {s for s in subjects if dimension_of(s) in dims}
        if subjects:
            self.items[alert.id] = Interruption(alert.id, alert.ts, 0, tuple(sorted(subjects)), None, True, alert.node)
            cap(self.items, self.cfg.max_interruptions)

    def window(self, now: int, window_ms: int) -> dict[str, Tally]:
        """subject -> ``Tally`` over [now - window, now]."""
        lo = now - window_ms
        per: dict[str, list[Interruption]] = {}
        for it in self.items.values():
            if lo <= it.ts <= now:
                for s in it.subjects:
                    per.setdefault(s, []).append(it)
        merge = self.cfg.alert_merge_ms
        collateral = self._collateral(per, merge)
        out: dict[str, Tally] = {}
        for s, items in per.items():
            items.sort(key=lambda i: (i.ts, i.id))
            by_attempt: dict[Any, Interruption] = {}
            for i in items:
                if not i.alert:
                    by_attempt[i.key if i.key is not None else i.id] = i
            t = out[s] = Tally(attempts=sorted(by_attempt.values(), key=lambda i: (i.ts, i.id)))
            last_alert: dict[str | None, int] = {}  # per reporting node
            for i in items:
                if not i.alert:
                    continue
                # the same failure seen as an alert: within ``merge`` of an incident, from one
                # of its job's nodes (another node seeing a shared path/port fail is new evidence)
                if any(abs(x.ts - i.ts) <= merge and (i.node is None or not x.nodes or i.node in x.nodes)
                       for x in t.attempts) or (s, i.id) in collateral:
                    continue
                prev = last_alert.get(i.node)
                if prev is not None and i.ts - prev <= merge:
                    continue
                last_alert[i.node] = i.ts
                t.alerts += 1
        return out

    def _collateral(self, per: dict[str, list[Interruption]], merge: int) -> set[tuple[str, str]]:
        """(port subject, alert id) pairs that are a node's failure seen on its links: the
        node behind the port has a node/gpu-blamed interruption within ``merge``, or alerts
        fire on two or more of that node's ports within ``merge`` (one cable cannot take
        down several rails; a node going down does)."""
        out: set[tuple[str, str]] = set()
        port_alerts = [(s, i) for s, items in per.items() if s.startswith("port:") for i in items if i.alert]
        if not port_alerts:
            return out
        behind = self.inv.nodes_behind()
        node_ts = {s[5:]: [i.ts for i in items if not i.alert] for s, items in per.items() if s.startswith("node:")}
        by_node: dict[str, list[tuple[int, str]]] = {}
        for s, i in port_alerts:
            for n in behind.get(s, ()):
                by_node.setdefault(n, []).append((i.ts, s))
        for s, i in port_alerts:
            for n in behind.get(s, ()):
                if any(abs(t - i.ts) <= merge for t in node_ts.get(n, ())) or \
                        len({p for t, p in by_node.get(n, ()) if abs(t - i.ts) <= merge}) >= 2:
                    out.add((s, i.id))
        return out

    def prune(self, horizon: int) -> None:
        for k in [k for k, i in self.items.items() if i.ts < horizon]:
            del self.items[k]


def offenders(cfg: FindingsConfig, now: int, window_ms: int, expo: dict[str, list[float]],
              tallies: dict[str, Tally]) -> list[Finding]:
    """The significant subjects of every dimension in one window (ids are set by the
    caller's ``Revisions``: one finding per subject and window)."""
    out: list[Finding] = []
    for dim, prefix in DIMENSIONS.items():
        unit = cfg.exposure.get(dim, "gpu_hours")
        col = 1 if unit == "attempts" else 0
        subs = [(s, e[col]) for s, e in expo.items() if e[col] > 0 and s.startswith(prefix)]
        if not subs:
            continue
        count = {s: len(tallies[s].attempts) if s in tallies else 0 for s, _ in subs}
        c_total = sum(count.values())
        e_total = sum(e for _, e in subs)
        if c_total < cfg.min_count:
            continue
        # a lone subject of a blame dimension (one storage path for the whole fleet) is
        # tested against the prior rate; a lone image/driver is the whole fleet: no test
        prior = cfg.prior_rates.get(unit) if len(subs) == 1 and dim in BLAME_DIMS else None
        if len(subs) == 1 and prior is None:
            continue
        tests = []
        for s, e in subs:
            c = count[s]
            e_rest = e_total - e
            if prior is not None:  # no peer in the fleet: Poisson tail against the prior rate
                tests.append((s, e, c, prior, poisson_sf(c, prior * e) if c >= cfg.min_count else 1.0))
            elif c < cfg.min_count or e_rest <= 0:
                tests.append((s, e, c, 0.0, 1.0))
            else:
                rate0 = max(c_total - c, 0.5) / e_rest  # leave-one-out fleet rate
                tests.append((s, e, c, rate0, rate_test(c, e, c_total - c, e_rest, dim in cfg.mid_p_dims)))
        qs = adjust([t[4] for t in tests], cfg.correction)
        for (s, e, c, rate0, p), q in zip(tests, qs):
            if q > cfg.alpha or c < cfg.min_count or c < cfg.min_ratio * rate0 * e:
                continue
            out.append(_finding(cfg, dim, s, now, window_ms, e, c, rate0, p, q, len(tests), col, prior is not None,
                                tallies[s]))
    return out


def _finding(cfg: FindingsConfig, dim: str, s: str, now: int, window_ms: int, e: float, c: int, rate0: float,
             p: float, q: float, m: int, col: int, prior: bool, tally: Tally) -> Finding:
    name = name_of(s) if not s.startswith("version:") else s.split("=", 1)[1]
    ratio = c / (rate0 * e) if rate0 * e > 0 else float("inf")
    unit_s = "GPU-h" if col == 0 else "attempts"
    alerts = f"; {tally.alerts} alert(s) on it besides, not counted" if tally.alerts else ""
    return Finding(
        id="", ts=now, kind="repeat_offender", dimension=dim, subject=s,
        window_start=now - window_ms, window_end=now, count=c, exposure=round(e, 4),
        exposure_unit=cfg.exposure.get(dim, "gpu_hours"), fleet_rate=rate0, score=p,
        summary=(f"{dim} {name}: {c} interrupted attempt(s) in {fmt_window(window_ms)} over {e:.1f} {unit_s}, "
                 f"{ratio:.1f}x the "
                 + ("prior rate (no other " + dim + " in the fleet) " if prior else "fleet rate ")
                 + f"{rate0:.4g}/{unit_s[:-1] if col else 'GPU-h'} (exact Poisson rate test p={p:.2g}, "
                   f"{cfg.correction.upper()} q={q:.2g} over {m} {dim}s){alerts}"),
        action=ACTIONS[dim].format(name=name, node=name.split("/", 1)[0]),
        incidents=[i.id for i in tally.attempts][-cfg.max_incident_ids:],
        severity="critical" if q <= cfg.alpha / 100 else "warning",
    )
