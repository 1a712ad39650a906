"""Proactive findings: repeat offenders, change regressions and version drift.

PURE (events + incidents in, findings out, no I/O) so the in-process ``Engine``,
``faultline ingest``/``findings --from`` and the Faust agent run the same code.

- **Exposure**: every ``sched.job`` attempt adds GPU-hours and one attempt to the subjects
  it ran on (node, gpu, switch port and segment via ``inventory.topology``, storage path,
  image, driver via ``inventory.versions``), in event-time buckets.
- **Interruptions**: an ``Incident`` counts for the subjects its root cause and ``affected``
  name (*blame* dimensions: node, gpu, port, segment, path) and for the job's image and
  driver versions (*context* dimensions). A critical ``Alert`` on a subject counts when no
  other counted interruption of that subject lies within ``alert_merge_ms``.
- **Repeat offenders**: per dimension and sliding window, each subject's count is tested
  against the fleet rate of the other subjects of that dimension (leave-one-out) times its
  exposure with an exact Poisson upper tail, then Benjamini-Hochberg (or Bonferroni) across
  the subjects of the dimension, plus a minimum count and rate ratio.
- **Change regression**: attempts on nodes that took an ``inventory.change`` (or a version
  seen to change in ``inventory.versions``) are compared with concurrent attempts without
  it (or, when the change went everywhere, with the same nodes before it) by an exact
  conditional binomial test of two Poisson rates.
- **Version drift**: a ``sched.job`` ``running`` event whose nodes report different
  driver/CUDA/NCCL/firmware/OFED/image versions yields a finding at once, before it fails.

State is bounded: exposure buckets and interruptions older than the longest window are
pruned on every ``evaluate``, and the attempt/interruption maps have hard caps.
"""

from __future__ import annotations

import hashlib
import math

import msgspec
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..schemas.events import INTERRUPTION_STATES, TERMINAL_JOB_STATES
from ..schemas.outputs import Alert, Finding, Incident

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS

#: dimension -> subject prefix (component forms of the contract)
DIMENSIONS: dict[str, str] = {
    "node": "node:",
    "gpu": "gpu:",
    "port": "port:",
    "segment": "segment:",
    "path": "path:",
    "image": "version:image=",
    "driver": "version:driver=",
}
BLAME_DIMS = ("node", "gpu", "port", "segment", "path")
CONTEXT_DIMS = ("image", "driver")

#: what to do about a repeat offender, per dimension
ACTIONS: dict[str, str] = {
    "node": "drain node {name} (scontrol update nodename={name} state=drain reason=faultline-repeat-offender), "
            "run dcgmi diag -r 3 and review the BMC SEL before returning it to service",
    "gpu": "drain node {node} and run dcgmi diag -r 3 on GPU {name}; RMA the GPU if its XIDs recur",
    "port": "inspect port {name}: error counters, reseat or replace the cable/transceiver; "
            "shut the port and reroute if it keeps flapping",
    "segment": "inspect segment {name}: uplinks, ECN/PFC configuration, congestion; place jobs off it meanwhile",
    "path": "check storage path {name}: backend/server health, latency and capacity; "
            "point checkpoints to another path meanwhile",
    "image": "pin jobs to the previous image or roll back {name}; diff it against the last good image",
    "driver": "pin or roll back driver {name} on the nodes that run it; compare with nodes on other versions",
    "version": "roll back {name} on the changed nodes (or pin jobs to nodes without it) and review the change",
    "job": "requeue the job on nodes with one consistent stack (exclude {odd}), or align their versions first",
}

#: components compared across a job's nodes for version drift
#: (the same list streams/correlate.py checks when it blames the odd node after a failure)
DRIFT_COMPONENTS: tuple[str, ...] = ("driver", "cuda", "nccl", "image", "framework", "gpu_firmware", "ofed", "kernel")
#: components whose changes are correlated with interruptions
CHANGE_COMPONENTS: tuple[str, ...] = (
    "driver", "cuda", "nccl", "gpu_firmware", "bmc_firmware", "bios", "kernel", "os", "image",
    "framework", "container_runtime", "ofed",
)
#: incident categories that say nothing about infrastructure (not counted anywhere)
EXCLUDED_CATEGORIES = frozenset({"scheduler"})
#: categories not blamed on a resource even if ``affected`` lists some
NO_BLAME_CATEGORIES = frozenset({"scheduler", "application", "unknown", "gpu_oom", "change_regression"})
#: our own detectors: their alerts are never counted back in
OWN_DETECTORS = frozenset({"repeat_offender", "change_regression", "version_drift"})


@dataclass(frozen=True)
class FindingsConfig:
    """Tunables; defaults are the documented ones (docs/findings.md)."""

    windows_ms: tuple[int, ...] = (DAY_MS, 7 * DAY_MS)
    bucket_ms: int = HOUR_MS
    #: FDR (BH) or FWER (Bonferroni) level per dimension and window
    alpha: float = 0.01
    correction: str = "bh"  # bh | bonferroni
    #: dimensions tested with the mid-p value of the exact rate test (less conservative with
    #: few events: shared resources with few peers); context dimensions (image, driver), whose
    #: counts include every interruption of a job and are overdispersed, keep the plain p
    mid_p_dims: tuple[str, ...] = BLAME_DIMS
    min_count: int = 3
    min_ratio: float = 2.0
    #: exposure unit per dimension; anything missing uses gpu_hours
    exposure: dict[str, str] = field(default_factory=lambda: {"image": "attempts"})
    alert_merge_ms: int = 30 * 60_000
    #: dimensions where *warning* alerts also count (shared resources that degrade before
    #: they fail: a path slowing down, a port with growing link errors); critical alerts
    #: count on every blame dimension
    warning_alert_dims: tuple[str, ...] = ("port", "path", "segment")
    #: rate a subject is compared with when it has no peer in its dimension (one storage
    #: path for the whole fleet): per GPU-hour, per attempt. 1e-4/GPU-h is 5x the overall
    #: interruption rate Meta reported for Llama 3 pre-training (419 in 54 days on 16k GPUs)
    prior_rates: dict[str, float] = field(default_factory=lambda: {"gpu_hours": 1e-4, "attempts": 0.05})
    #: change correlation
    change_alpha: float = 0.01
    change_min_count: int = 3
    change_window_ms: int = 7 * DAY_MS
    #: a concurrent control group needs at least this share of the cohort's exposure
    change_min_control_share: float = 0.1
    drift_components: tuple[str, ...] = DRIFT_COMPONENTS
    #: hard caps (bounded state)
    max_attempts: int = 200_000
    max_interruptions: int = 200_000
    max_nodes: int = 100_000
    max_incident_ids: int = 50


# ---------------------------------------------------------------- statistics
def poisson_sf(k: int, mu: float) -> float:
    """P(X >= k) for X ~ Poisson(mu), exact (log-space sums, no scipy)."""
    if k <= 0:
        return 1.0
    if mu <= 0.0:
        return 0.0
    lmu = math.log(mu)

    def lpmf(i: int) -> float:
        return -mu + i * lmu - math.lgamma(i + 1)

    if k > mu:  # sum the upper tail directly; terms fall monotonically past the mode
        first = lpmf(k)
        total, i = 0.0, k
        while True:
            t = math.exp(lpmf(i) - first)
            total += t
            if t < 1e-17 * total or i > k + 100_000:
                break
            i += 1
        return min(1.0, math.exp(first) * total)
    # k <= mu: 1 - CDF(k-1) by log-sum-exp
    logs = [lpmf(i) for i in range(k)]
    m = max(logs)
    cdf = math.exp(m) * sum(math.exp(x - m) for x in logs)
    return min(1.0, max(0.0, 1.0 - cdf))


def binom_sf(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), exact (log-space sum of the tail)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    lp, lq = math.log(p), math.log1p(-p)
    c = math.lgamma(n + 1)
    logs = [c - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq for i in range(k, n + 1)]
    m = max(logs)
    return min(1.0, math.exp(m) * sum(math.exp(x - m) for x in logs))


def rate_test(c: int, e: float, c_rest: int, e_rest: float, mid_p: bool = False) -> float:
    """One-sided exact p-value that a subject's Poisson rate (``c`` events over exposure
    ``e``) exceeds the rest of its dimension's (``c_rest`` over ``e_rest``).

    Conditioned on the total ``n = c + c_rest``, ``c ~ Binomial(n, e / (e + e_rest))``
    under equal rates: this is the exact Poisson rate-comparison test, and unlike
    ``poisson_sf(c, rate_rest * e)`` it accounts for the fleet rate being estimated
    (with a small fleet count the plug-in Poisson tail is anti-conservative). For a subject
    with a small share of the exposure both agree; ``poisson_sf`` is the limit.
    """
    if e <= 0 or e_rest <= 0:
        return 1.0
    n, q = c + c_rest, e / (e + e_rest)
    p = binom_sf(c, n, q)
    if mid_p:  # Lancaster's mid-p: P(X > c) + P(X = c) / 2, less conservative for small counts
        p -= 0.5 * (p - binom_sf(c + 1, n, q))
    return p


def adjust(pvalues: list[float], method: str = "bh") -> list[float]:
    """Multiplicity-adjusted p-values: Benjamini-Hochberg q-values or Bonferroni."""
    m = len(pvalues)
    if m == 0:
        return []
    if method == "bonferroni":
        return [min(1.0, p * m) for p in pvalues]
    order = sorted(range(m), key=lambda i: pvalues[i])
    out = [1.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, pvalues[i] * m / rank)
        out[i] = min(1.0, running)
    return out


def finding_id(kind: str, dimension: str, subject: str, window: int | str, bucket: int) -> str:
    """Stable id: same kind, dimension, subject and window bucket -> same id."""
    h = hashlib.sha1(f"{kind}|{dimension}|{subject}|{window}|{bucket}".encode()).hexdigest()
    return "fd-" + h[:24]


def dimension_of(subject: str) -> str | None:
    for dim in ("image", "driver", "node", "gpu", "port", "segment", "path"):
        if subject.startswith(DIMENSIONS[dim]):
            return dim
    return None


def _name(subject: str) -> str:
    return subject.split(":", 1)[1] if ":" in subject else subject


def _fmt_window(ms: int) -> str:
    if ms % DAY_MS == 0:
        return f"{ms // DAY_MS}d"
    if ms % HOUR_MS == 0:
        return f"{ms // HOUR_MS}h"
    return f"{ms // 60_000}m"


def to_alert(f: Finding) -> Alert:
    """The real-time alert for a finding (same id stem, so re-emission is idempotent)."""
    node = None
    if f.dimension in ("node", "gpu"):
        node = _name(f.subject).split("/", 1)[0]
    job = _name(f.subject) if f.dimension == "job" else None
    return Alert(
        id="al-" + f.id[3:], ts=f.ts, severity=f.severity, detector=f.kind, node=node, job=job,
        summary=f.summary, evidence=list(f.incidents), subject=f.subject,
    )


# ---------------------------------------------------------------- state records
class _Attempt:
    __slots__ = ("job", "attempt", "start", "end", "gpus", "weights", "versions", "image",
                 "context", "nodes", "incidents")

    def __init__(self, job: str, attempt: int, start: int, gpus: int, nodes: list[str]) -> None:
        self.job = job
        self.attempt = attempt
        self.start = start
        self.end: int | None = None
        self.gpus = gpus
        self.nodes = nodes
        self.weights: dict[str, float] = {}   # subject -> GPUs of this attempt on it
        self.versions: frozenset[str] = frozenset()  # "component=version" seen on its nodes
        self.image: str | None = None
        self.context: tuple[str, ...] = ()    # image/driver subjects
        self.incidents: set[str] = set()      # counted incident ids


class _Interruption:
    __slots__ = ("id", "ts", "revision", "subjects", "key", "alert", "node", "nodes")

    def __init__(self, id: str, ts: int, revision: int, subjects: tuple[str, ...],
                 key: tuple[str, int] | None, alert: bool, node: str | None = None,
                 nodes: tuple[str, ...] = ()) -> None:
        self.node = node    # the node that reported an alert
        self.nodes = nodes  # an incident's job nodes

        self.id = id
        self.ts = ts
        self.revision = revision
        self.subjects = subjects
        self.key = key
        self.alert = alert


class _Change:
    __slots__ = ("nodes", "first", "last", "froms", "actors", "tickets", "events")

    def __init__(self) -> None:
        self.nodes: dict[str, int] = {}  # node -> when it took the change
        self.first = 0
        self.last = 0
        self.froms: set[str] = set()
        self.actors: set[str] = set()
        self.tickets: set[str] = set()
        self.events: list[str] = []


# ---------------------------------------------------------------- tracker
class FindingsTracker:
    """Fleet-wide accounting and tests. Feed events in event-time order (roughly: late
    events within the caller's lateness bound are fine), incidents and alerts as they are
    produced, and call ``evaluate(now_ms)`` periodically (e.g. each event-time bucket)."""

    def __init__(self, config: FindingsConfig | None = None) -> None:
        self.cfg = config or FindingsConfig()
        self._versions: dict[str, tuple[int, dict[str, str]]] = {}   # node -> (ts, versions)
        self._links: dict[str, tuple[tuple[str, str | None], ...]] = {}  # node -> ((port subj, segment), ...)
        self._paths: dict[str, tuple[str, ...]] = {}                   # node -> path subjects
        self._nics: dict[str, dict[str, str]] = {}                     # node -> nic -> port subject
        self._gpn: dict[str, int] = {}                                 # node -> max GPUs per node seen
        self._running: dict[tuple[str, int], _Attempt] = {}
        self._closed: dict[tuple[str, int], _Attempt] = {}
        # subject -> bucket -> [gpu_hours, attempts]
        self._expo: dict[str, dict[int, list[float]]] = {}
        self._intr: dict[str, _Interruption] = {}
        self._changes: dict[tuple[str, str], _Change] = {}
        self._drift_seen: dict[tuple[str, int], int] = {}
        self._emitted: dict[str, tuple[int, int]] = {}  # finding id -> (count, window_end)
        #: ids the last ``evaluate`` emitted for the first time
        self.first_emitted: set[str] = set()
        self.now = 0

    # ------------------------------------------------------------ inputs
    def observe(self, ev: Any) -> list[Finding]:
        """Take one contract event; returns findings due at once (version drift)."""
        kind = ev.kind
        if ev.ts > self.now:
            self.now = ev.ts
        if kind == "sched.job":
            return self._on_job(ev)
        if kind == "inventory.versions":
            self._on_versions(ev.node, ev.ts, dict(ev.data), ev.id)
        elif kind == "inventory.topology":
            self._on_topology(ev)
        elif kind == "inventory.change":
            d = ev.data
            self._add_change(d.component, d.to, ev.node, ev.ts, d.from_, d.actor, d.ticket, ev.id)
            cur = self._versions.get(ev.node)
            if cur is None or cur[0] <= ev.ts:
                vers = dict(cur[1]) if cur else {}
                vers[d.component] = d.to
                self._versions[ev.node] = (ev.ts, vers)
        return []

    def on_incident(self, inc: Incident) -> None:
        """Count an incident (latest revision wins; the same id never counts twice)."""
        prev = self._intr.get(inc.id)
        if prev is not None and prev.revision > inc.revision:
            return
        rc = inc.root_cause
        if rc.category in EXCLUDED_CATEGORIES:
            if prev is not None:
                del self._intr[inc.id]
            return
        # blame: the root cause's component only. ``affected`` is the blast radius (every
        # node, port and path of the job in streams/correlate.py), not the culprit.
        subjects: set[str] = set()
        if rc.category not in NO_BLAME_CATEGORIES or rc.component.startswith("version:"):
            subjects.update(self._blame(rc.component))
        key = (inc.job, inc.attempt)
        att = self._running.get(key) or self._closed.get(key)
        if att is not None:
            subjects.update(att.context)
            att.incidents.add(inc.id)
        else:
            if inc.image:
                subjects.add(DIMENSIONS["image"] + inc.image)
            for n in inc.affected.nodes:
                drv = self._versions.get(n, (0, {}))[1].get("driver")
                if drv:
                    subjects.add(DIMENSIONS["driver"] + drv)
        self._intr[inc.id] = _Interruption(inc.id, inc.failure_ts, inc.revision, tuple(sorted(subjects)), key, False,
                                           None, tuple(inc.affected.nodes))
        if inc.failure_ts > self.now:
            self.now = inc.failure_ts
        self._cap(self._intr, self.cfg.max_interruptions)

    def on_alert(self, alert: Alert) -> None:
        """Count a critical alert on its subject, and a warning one on a shared resource
        (``warning_alert_dims``); info alerts and our own are ignored."""
        if alert.severity == "info" or alert.detector in OWN_DETECTORS or alert.id in self._intr:
            return
        subjects: set[str] = set()
        if alert.subject:
            subjects.update(self._blame(alert.subject))
        elif alert.node:
            subjects.add("node:" + alert.node)
        dims = BLAME_DIMS if alert.severity == "critical" else self.cfg.warning_alert_dims
        subjects = {s for s in subjects if dimension_of(s) in dims}
        if subjects:
            self._intr[alert.id] = _Interruption(alert.id, alert.ts, 0, tuple(sorted(subjects)), None, True, alert.node)
            self._cap(self._intr, self.cfg.max_interruptions)

    def feed(self, items: Iterable[Any]) -> list[Finding]:
        """Convenience: route events, incidents and alerts; returns immediate findings."""
        out: list[Finding] = []
        for it in items:
            if isinstance(it, Incident):
                self.on_incident(it)
            elif isinstance(it, Alert):
                self.on_alert(it)
            else:
                out.extend(self.observe(it))
        return out

    # ------------------------------------------------------------ event handlers
    def _blame(self, component: str) -> list[str]:
        if component.startswith("gpu:"):
            name = component[4:]
            return [component, "node:" + name.split("/", 1)[0]]
        if component.startswith("rdma:"):  # rdma:<node>/<nic>/<port>: the switch port of that NIC
            node, _, rest = component[5:].partition("/")
            port = self._nics.get(node, {}).get(rest.partition("/")[0])
            return [port] if port else []
        if component.startswith("port:") and "@" in component:  # port:<nic>@<node> (streams/join.py)
            nic, _, node = component[5:].partition("@")
            port = self._nics.get(node, {}).get(nic)
            return [port] if port else []
        if component.startswith(("node:", "port:", "path:", "segment:")):
            return [component]
        if component.startswith(("version:driver=", "version:image=")):
            return [component]
        return []

    def _on_versions(self, node: str | None, ts: int, vers: dict[str, str], ev_id: str) -> None:
        if not node:
            return
        cur = self._versions.get(node)
        if cur is not None and cur[0] > ts:
            return
        if cur is not None:  # an observed version change without an inventory.change event
            for comp, to in vers.items():
                old = cur[1].get(comp)
                if old is not None and old != to and comp in CHANGE_COMPONENTS:
                    ch = self._changes.get((comp, to))
                    if ch is None or node not in ch.nodes:
                        self._add_change(comp, to, node, ts, old, None, None, ev_id)
        elif len(self._versions) >= self.cfg.max_nodes:
            return
        self._versions[node] = (ts, vers)

    def _add_change(self, comp: str, to: str, node: str | None, ts: int, frm: str | None,
                    actor: str | None, ticket: str | None, ev_id: str) -> None:
        if not node:
            return
        ch = self._changes.setdefault((comp, to), _Change())
        if node not in ch.nodes or ts < ch.nodes[node]:
            ch.nodes[node] = ts
        ch.first = min(ch.nodes.values())
        ch.last = max(ch.nodes.values())
        if frm:
            ch.froms.add(frm)
        if actor:
            ch.actors.add(actor)
        if ticket:
            ch.tickets.add(ticket)
        if len(ch.events) < 20:
            ch.events.append(ev_id)

    def _on_topology(self, ev: Any) -> None:
        node = ev.node
        if node not in self._links and len(self._links) >= self.cfg.max_nodes:
            return
        self._links[node] = tuple((f"port:{l.switch}/{l.port}", l.segment) for l in ev.data.links)
        self._nics[node] = {l.nic: f"port:{l.switch}/{l.port}" for l in ev.data.links}
        self._paths[node] = tuple("path:" + s.path for s in ev.data.storage)

    def _on_job(self, ev: Any) -> list[Finding]:
        d = ev.data
        key = (ev.job, d.attempt)
        out: list[Finding] = []
        if d.state == "running":
            if key not in self._running and key not in self._closed:
                self._start(key, d, d.start_ts or ev.ts)
                out.extend(self._drift(ev))
        elif d.state in TERMINAL_JOB_STATES:
            att = self._running.pop(key, None)
            if att is None and key not in self._closed and d.start_ts:
                att = self._start(key, d, d.start_ts)
                self._running.pop(key, None)
            if att is not None:
                att.end = max(att.start, d.end_ts or ev.ts)
                self._book(att, att.start, att.end)
                self._closed[key] = att
                self._cap(self._closed, self.cfg.max_attempts)
        return out

    def _start(self, key: tuple[str, int], d: Any, start: int) -> _Attempt:
        nodes = list(d.nodes)
        att = _Attempt(key[0], key[1], start, d.gpus, nodes)
        gpn = d.gpus / len(nodes) if nodes else 0.0
        w: dict[str, float] = {}
        vers: set[str] = set()
        drivers: dict[str, float] = {}
        node_image = None
        for n in nodes:
            w["node:" + n] = w.get("node:" + n, 0.0) + gpn
            if gpn and int(gpn) > self._gpn.get(n, 0) and len(self._gpn) < self.cfg.max_nodes:
                self._gpn[n] = int(gpn)
            for port, seg in self._links.get(n, ()):
                w[port] = w.get(port, 0.0) + gpn
                if seg:
                    s = "segment:" + seg
                    w[s] = w.get(s, 0.0) + gpn
            for p in self._paths.get(n, ()):
                w[p] = w.get(p, 0.0) + gpn
            nv = self._versions.get(n)
            if nv:
                for comp, v in nv[1].items():
                    if comp in CHANGE_COMPONENTS:
                        vers.add(f"{comp}={v}")
                drv = nv[1].get("driver")
                if drv:
                    s = DIMENSIONS["driver"] + drv
                    drivers[s] = drivers.get(s, 0.0) + gpn
                node_image = node_image or nv[1].get("image")
        image = d.image or node_image
        if image:
            w[DIMENSIONS["image"] + image] = float(d.gpus)
            vers = {v for v in vers if not v.startswith("image=")} | {"image=" + image}
        w.update(drivers)
        att.weights = w
        att.versions = frozenset(vers)
        att.image = image
        att.context = tuple(sorted(s for s in w if s.startswith("version:")))
        self._running[key] = att
        if len(self._running) > self.cfg.max_attempts:  # attempts that never ended
            oldest = next(iter(self._running))
            self._book(self._running[oldest], self._running[oldest].start, self.now)
            del self._running[oldest]
        return att

    def _book(self, att: _Attempt, start: int, end: int) -> None:
        """Add an attempt's GPU-hours (and its one attempt) to its subjects' buckets."""
        bms = self.cfg.bucket_ms
        b0 = start // bms
        b1 = max(b0, (end - 1) // bms) if end > start else b0
        spans = []
        for b in range(b0, b1 + 1):
            lo, hi = max(start, b * bms), min(end, (b + 1) * bms)
            spans.append((b, max(0, hi - lo) / HOUR_MS))
        for subj, g in att.weights.items():
            bk = self._expo.setdefault(subj, {})
            for b, hours in spans:
                cell = bk.get(b)
                if cell is None:
                    cell = bk[b] = [0.0, 0.0]
                cell[0] += g * hours
            bk.setdefault(b0, [0.0, 0.0])[1] += 1.0

    @staticmethod
    def _cap(d: dict, limit: int) -> None:
        while len(d) > limit:
            del d[next(iter(d))]

    # ------------------------------------------------------------ version drift
    def _drift(self, ev: Any) -> list[Finding]:
        d = ev.data
        key = (ev.job, d.attempt)
        nodes = sorted(set(d.nodes))
        if len(nodes) < 2 or key in self._drift_seen:
            return []
        diffs: list[str] = []
        odd: set[str] = set()
        for comp in self.cfg.drift_components:
            by_ver: dict[str, list[str]] = {}
            for n in nodes:
                nv = self._versions.get(n)
                v = nv[1].get(comp) if nv else None
                if v is not None:
                    by_ver.setdefault(v, []).append(n)
            if len(by_ver) > 1:
                ranked = sorted(by_ver.items(), key=lambda kv: (-len(kv[1]), kv[0]))
                minority = [n for _, ns in ranked[1:] for n in ns]
                odd.update(minority)
                diffs.append(f"{comp} " + " vs ".join(f"{v} on {_short(ns)}" for v, ns in ranked))
        if not diffs:
            return []
        self._drift_seen[key] = ev.ts
        self._cap(self._drift_seen, self.cfg.max_attempts)
        subject = f"job:{ev.job}"
        odd_s = ",".join(sorted(odd))
        return [Finding(
            id=finding_id("version_drift", "job", subject, "attempt", d.attempt), ts=ev.ts,
            kind="version_drift", dimension="job", subject=subject,
            window_start=d.start_ts or ev.ts, window_end=ev.ts, count=len(odd),
            exposure=float(len(nodes)), exposure_unit="nodes", fleet_rate=0.0, score=1.0,
            summary=f"job {ev.job} attempt {d.attempt} started on {len(nodes)} nodes with mixed versions: "
                    + "; ".join(diffs) + f" (odd nodes: {odd_s})",
            action=ACTIONS["job"].format(odd=odd_s), incidents=[], severity="warning",
        )]

    # ------------------------------------------------------------ evaluation
    def evaluate(self, now_ms: int | None = None) -> list[Finding]:
        """Run the repeat-offender and change tests at ``now_ms`` (event time); returns the
        findings that are new or whose count grew since they were last returned."""
        now = self.now if now_ms is None else now_ms
        self.now = max(self.now, now)
        out = self._all_offenders(now)
        out.extend(self._change_findings(now))
        self._prune(now)
        fresh = []
        self.first_emitted = set()
        for f in out:
            prev = self._emitted.get(f.id)
            if prev is None or f.count > prev[0]:
                if prev is None:
                    self.first_emitted.add(f.id)
                self._emitted[f.id] = (f.count, f.window_end)
                fresh.append(f)
        return fresh

    def evaluate_with_alerts(self, now_ms: int | None = None) -> tuple[list[Finding], list[Alert]]:
        """``evaluate`` plus one ``Alert`` per finding id the first time it is emitted
        (re-emissions with a higher count update the finding, not the pager)."""
        found = self.evaluate(now_ms)
        return found, [to_alert(f) for f in found if f.id in self.first_emitted]

    def snapshot(self, now_ms: int | None = None) -> list[Finding]:
        """Every currently significant finding (not only the changed ones)."""
        now = self.now if now_ms is None else now_ms
        out = self._all_offenders(now)
        out.extend(self._change_findings(now))
        return out

    def _all_offenders(self, now: int) -> list[Finding]:
        """Every window's offenders; a longer window that holds nothing more than a shorter
        one (same count and exposure for the subject) adds no finding of its own."""
        out: list[Finding] = []
        seen: dict[tuple[str, str], tuple[int, float]] = {}
        for w in sorted(self.cfg.windows_ms):
            for f in self._offenders(now, w):
                key = (f.dimension, f.subject)
                if seen.get(key) == (f.count, f.exposure):
                    continue
                seen[key] = (f.count, f.exposure)
                out.append(f)
        return out

    def exposure(self, now: int, window_ms: int) -> dict[str, list[float]]:
        """subject -> [gpu_hours, attempts] over [now - window, now] (running attempts included)."""
        bms = self.cfg.bucket_ms
        lo_b = (now - window_ms) // bms
        hi_b = now // bms
        out: dict[str, list[float]] = {}
        for subj, bk in self._expo.items():
            gh = at = 0.0
            for b, cell in bk.items():
                if lo_b <= b <= hi_b:
                    gh += cell[0]
                    at += cell[1]
            if gh or at:
                out[subj] = [gh, at]
        lo = now - window_ms
        for att in self._running.values():
            s, e = max(att.start, lo), now
            hours = max(0, e - s) / HOUR_MS
            started_in = att.start >= lo
            for subj, g in att.weights.items():
                cell = out.setdefault(subj, [0.0, 0.0])
                cell[0] += g * hours
                if started_in:
                    cell[1] += 1.0
        # GPU subjects: a node's exposure spread over its GPUs
        for subj in [s for s in out if s.startswith("node:")]:
            n = subj[5:]
            k = self._gpn.get(n, 0)
            gh, at = out[subj]
            for i in range(k):
                out[f"gpu:{n}/{i}"] = [gh / k, at]
        return out

    def counts(self, now: int, window_ms: int) -> dict[str, list[_Interruption]]:
        """subject -> interruptions counted in [now - window, now] (alerts merged)."""
        lo = now - window_ms
        per: dict[str, list[_Interruption]] = {}
        for it in self._intr.values():
            if lo <= it.ts <= now:
                for s in it.subjects:
                    per.setdefault(s, []).append(it)
        merge = self.cfg.alert_merge_ms
        collateral = self._collateral(per, merge)
        for s, items in per.items():
            if not any(i.alert for i in items):
                continue
            items.sort(key=lambda i: i.ts)
            incs = [i for i in items if not i.alert]
            kept: list[_Interruption] = []
            last_alert: dict[str | None, int] = {}  # per reporting node
            for i in items:
                if not i.alert:
                    kept.append(i)
                    continue
                # the same failure seen as an alert: within ``merge`` of an incident, from one
                # of its job's nodes (another node seeing a shared path/port fail is new evidence)
                if any(abs(x.ts - i.ts) <= merge and (i.node is None or not x.nodes or i.node in x.nodes)
                       for x in incs) or (s, i.id) in collateral:
                    continue
                prev = last_alert.get(i.node)
                if prev is not None and i.ts - prev <= merge:
                    continue
                last_alert[i.node] = i.ts
                kept.append(i)
            per[s] = kept
        return per

    def _collateral(self, per: dict[str, list[_Interruption]], merge: int) -> set[tuple[str, str]]:
        """(port subject, alert id) pairs that are a node's failure seen on its links: the
        node behind the port has a node/gpu-blamed interruption within ``merge``, or alerts
        fire on two or more of that node's ports within ``merge`` (one cable cannot take
        down several rails; a node going down does)."""
        out: set[tuple[str, str]] = set()
        port_alerts = [(s, i) for s, items in per.items() if s.startswith("port:") for i in items if i.alert]
        if not port_alerts:
            return out
        behind: dict[str, list[str]] = {}
        for node, links in self._links.items():
            for port, _ in links:
                behind.setdefault(port, []).append(node)
        node_ts: dict[str, list[int]] = {}
        for s, items in per.items():
            if s.startswith("node:"):
                node_ts[s[5:]] = [i.ts for i in items if not i.alert]
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

    def _offenders(self, now: int, window_ms: int) -> list[Finding]:
        cfg = self.cfg
        expo = self.exposure(now, window_ms)
        counts = self.counts(now, window_ms)
        out: list[Finding] = []
        for dim, prefix in DIMENSIONS.items():
            unit = cfg.exposure.get(dim, "gpu_hours")
            col = 1 if unit == "attempts" else 0
            subs = [(s, e[col]) for s, e in expo.items() if e[col] > 0 and s.startswith(prefix)]
            if not subs:
                continue
            c_total = sum(len(counts.get(s, ())) for s, _ in subs)
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
                c = len(counts.get(s, ()))
                e_rest = e_total - e
                if prior is not None:  # no peer in the fleet: Poisson tail against the prior rate
                    tests.append((s, e, c, prior, poisson_sf(c, prior * e) if c >= cfg.min_count else 1.0))
                    continue
                if c < cfg.min_count or e_rest <= 0:
                    tests.append((s, e, c, 0.0, 1.0))
                    continue
                rate0 = max(c_total - c, 0.5) / e_rest  # leave-one-out fleet rate
                tests.append((s, e, c, rate0, rate_test(c, e, c_total - c, e_rest, dim in cfg.mid_p_dims)))
            qs = adjust([t[4] for t in tests], cfg.correction)
            for (s, e, c, rate0, p), q in zip(tests, qs):
                if q > cfg.alpha or c < cfg.min_count or c < cfg.min_ratio * rate0 * e:
                    continue
                items = sorted(counts[s], key=lambda i: i.ts)
                n_alerts = sum(1 for i in items if i.alert)
                name = _name(s) if not s.startswith("version:") else s.split("=", 1)[1]
                node = name.split("/", 1)[0]
                ratio = c / (rate0 * e) if rate0 * e > 0 else float("inf")
                unit_s = "GPU-h" if col == 0 else "attempts"
                out.append(Finding(
                    id=finding_id("repeat_offender", dim, s, window_ms, now // window_ms), ts=now,
                    kind="repeat_offender", dimension=dim, subject=s,
                    window_start=now - window_ms, window_end=now, count=c, exposure=round(e, 4),
                    exposure_unit=unit, fleet_rate=rate0, score=p,
                    summary=(f"{dim} {name}: {c} interruptions"
                             + (f" ({n_alerts} from alerts)" if n_alerts else "")
                             + f" in {_fmt_window(window_ms)} over {e:.1f} {unit_s}, {ratio:.1f}x the "
                             + ("prior rate (no other " + dim + " in the fleet) " if prior is not None else "fleet rate ")
                             + f"{rate0:.4g}/{unit_s[:-1] if col else 'GPU-h'} (exact Poisson rate test p={p:.2g}, "
                               f"{cfg.correction.upper()} q={q:.2g} over {len(tests)} {dim}s)"),
                    action=ACTIONS[dim].format(name=name, node=node),
                    incidents=[i.id for i in items if not i.alert][-cfg.max_incident_ids:],
                    severity="critical" if q <= cfg.alpha / 100 else "warning",
                ))
        return out

    def _attempts_since(self, lo: int) -> list[_Attempt]:
        return [a for a in list(self._closed.values()) + list(self._running.values()) if a.start >= lo]

    def _change_findings(self, now: int) -> list[Finding]:
        cfg = self.cfg
        lo = now - cfg.change_window_ms
        cohorts = [(k, ch) for k, ch in self._changes.items() if ch.first >= lo and ch.first <= now]
        if not cohorts:
            return []
        atts = self._attempts_since(lo - cfg.change_window_ms)
        intr = self._intr

        def stats(group: list[_Attempt], on: Any) -> tuple[int, float, list[str]]:
            """Node-level: GPU-hours on the nodes ``on(attempt, node)`` selects, and the
            attempt's interruptions blamed on such a node (or, with no node blamed, when
            every node of the attempt is selected)."""
            c, e, ids = 0, 0.0, []
            for a in group:
                if not a.nodes:
                    continue
                sel = {n for n in a.nodes if on(a, n)}
                if not sel:
                    continue
                end = a.end if a.end is not None else now
                e += a.gpus / len(a.nodes) * len(sel) * max(0, min(end, now) - a.start) / HOUR_MS
                for iid in a.incidents:
                    it = intr.get(iid)
                    if it is None or it.alert:
                        continue
                    blamed = {x[5:] for x in it.subjects if x.startswith("node:")}
                    if (blamed & sel) if blamed else len(sel) == len(set(a.nodes)):
                        c += 1
                        ids.append(iid)
            return c, e, ids

        tested = []
        for (comp, to), ch in cohorts:
            took = ch.nodes
            after = [a for a in atts if ch.first <= a.start <= now]
            before = [a for a in atts if ch.first - cfg.change_window_ms <= a.start < ch.first]

            def changed(a: _Attempt, n: str, took: dict = took) -> bool:
                t = took.get(n)
                return t is not None and t <= a.start

            def unchanged(a: _Attempt, n: str, took: dict = took) -> bool:
                t = took.get(n)
                return t is None or t > a.start

            c1, e1, ids = stats(after, changed)
            if c1 < cfg.change_min_count or e1 <= 0:
                continue
            c0, e0, _ = stats(after, unchanged)
            basis = "nodes without it since"
            if e0 < cfg.change_min_control_share * e1:
                c0, e0, _ = stats(before, lambda a, n, took=took: n in took)
                basis = "the same nodes before"
            if e0 <= 0:
                continue
            p = binom_sf(c1, c1 + c0, e1 / (e1 + e0))
            rate1, rate0 = c1 / e1, max(c0, 0.5) / e0
            tested.append((comp, to, ch, c1, e1, rate0, rate1, p, basis, ids))
        out: list[Finding] = []
        m = len(tested)
        for comp, to, ch, c1, e1, rate0, rate1, p, basis, ids in tested:
            if p * m > cfg.change_alpha or rate1 < cfg.min_ratio * rate0:
                continue
            subject = f"version:{comp}={to}"
            frm = ",".join(sorted(ch.froms)) or "?"
            who = ",".join(sorted(ch.actors)) or "unknown actor"
            tickets = ",".join(sorted(ch.tickets)) or "no ticket"
            out.append(Finding(
                id=finding_id("change_regression", "version", subject, "change", ch.first), ts=now,
                kind="change_regression", dimension="version", subject=subject,
                window_start=ch.first, window_end=now, count=c1, exposure=round(e1, 4),
                exposure_unit="gpu_hours", fleet_rate=rate0, score=p,
                summary=(f"change {comp} {frm}->{to} by {who} ({tickets}) on {len(ch.nodes)} nodes "
                         f"from {_iso(ch.first)} to {_iso(ch.last)}: {c1} interruptions over {e1:.1f} GPU-h "
                         f"= {rate1:.4g}/GPU-h vs {rate0:.4g}/GPU-h on {basis} "
                         f"({rate1 / rate0:.1f}x, binomial p={p:.2g}, Bonferroni over {m} changes)"),
                action=ACTIONS["version"].format(name=f"{comp} {to} (back to {frm})"),
                incidents=sorted(ids)[-cfg.max_incident_ids:],
                severity="critical" if p * m <= cfg.change_alpha / 100 else "warning",
            ))
        return out

    def _prune(self, now: int) -> None:
        horizon = now - max(max(self.cfg.windows_ms), 2 * self.cfg.change_window_ms)
        hb = horizon // self.cfg.bucket_ms
        for subj in list(self._expo):
            bk = self._expo[subj]
            for b in [b for b in bk if b < hb]:
                del bk[b]
            if not bk:
                del self._expo[subj]
        for k in [k for k, i in self._intr.items() if i.ts < horizon]:
            del self._intr[k]
        for k in [k for k, a in self._closed.items() if (a.end or 0) < horizon]:
            del self._closed[k]
        for k in [k for k, ch in self._changes.items() if ch.last < horizon]:
            del self._changes[k]
        for k in [k for k, t in self._drift_seen.items() if t < horizon]:
            del self._drift_seen[k]
        for k in [k for k, v in self._emitted.items() if v[1] < horizon]:
            del self._emitted[k]

    # ------------------------------------------------------------ persistence
    def dump(self) -> bytes:
        """The whole state as msgpack bytes (Faust changelog table value)."""
        def att(a: _Attempt, running: bool) -> list:
            return [a.job, a.attempt, a.start, a.end, a.gpus, a.nodes, a.weights, sorted(a.versions),
                    a.image, list(a.context), sorted(a.incidents), running]

        st = {
            "v": 1, "now": self.now,
            "versions": {n: [ts, v] for n, (ts, v) in self._versions.items()},
            "links": {n: [list(x) for x in ls] for n, ls in self._links.items()},
            "paths": {n: list(ps) for n, ps in self._paths.items()},
            "nics": self._nics,
            "gpn": self._gpn,
            "att": [att(a, True) for a in self._running.values()] + [att(a, False) for a in self._closed.values()],
            "expo": {s: [[b, c[0], c[1]] for b, c in bk.items()] for s, bk in self._expo.items()},
            "intr": [[i.id, i.ts, i.revision, list(i.subjects), list(i.key) if i.key else None, i.alert, i.node,
                      list(i.nodes)]
                     for i in self._intr.values()],
            "changes": [[k[0], k[1], c.nodes, sorted(c.froms), sorted(c.actors), sorted(c.tickets), c.events]
                        for k, c in self._changes.items()],
            "drift": [[k[0], k[1], t] for k, t in self._drift_seen.items()],
            "emitted": [[k, v[0], v[1]] for k, v in self._emitted.items()],
        }
        return msgspec.msgpack.encode(st)

    @classmethod
    def load(cls, blob: bytes | None, config: FindingsConfig | None = None) -> "FindingsTracker":
        """Rebuild a tracker from ``dump()`` bytes (None or empty -> a fresh tracker)."""
        tr = cls(config)
        if not blob:
            return tr
        st = msgspec.msgpack.decode(blob)
        tr.now = st["now"]
        tr._versions = {n: (x[0], x[1]) for n, x in st["versions"].items()}
        tr._links = {n: tuple((x[0], x[1]) for x in ls) for n, ls in st["links"].items()}
        tr._paths = {n: tuple(ps) for n, ps in st["paths"].items()}
        tr._nics = {n: dict(m) for n, m in st.get("nics", {}).items()}
        tr._gpn = dict(st["gpn"])
        for job, attempt, start, end, gpus, nodes, w, vers, image, ctx, incs, running in st["att"]:
            a = _Attempt(job, attempt, start, gpus, nodes)
            a.end, a.weights, a.versions, a.image = end, w, frozenset(vers), image
            a.context, a.incidents = tuple(ctx), set(incs)
            (tr._running if running else tr._closed)[(job, attempt)] = a
        tr._expo = {s: {b: [gh, at] for b, gh, at in cells} for s, cells in st["expo"].items()}
        for iid, ts, rev, subs, key, alert, node, nodes in st["intr"]:
            tr._intr[iid] = _Interruption(iid, ts, rev, tuple(subs), (key[0], key[1]) if key else None, alert, node,
                                          tuple(nodes))
        for comp, to, nodes, froms, actors, tickets, events in st["changes"]:
            c = _Change()
            c.nodes = dict(nodes)
            c.first, c.last = min(nodes.values()), max(nodes.values())
            c.froms, c.actors, c.tickets, c.events = set(froms), set(actors), set(tickets), list(events)
            tr._changes[(comp, to)] = c
        tr._drift_seen = {(j, a): t for j, a, t in st["drift"]}
        tr._emitted = {k: (c, we) for k, c, we in st["emitted"]}
        return tr

    def stats(self) -> dict[str, int]:
        """Sizes of the bounded state (for tests and metrics)."""
        return {
            "running": len(self._running), "closed": len(self._closed), "interruptions": len(self._intr),
            "exposure_subjects": len(self._expo), "exposure_cells": sum(len(b) for b in self._expo.values()),
            "changes": len(self._changes), "nodes": len(self._versions), "emitted": len(self._emitted),
        }


def _short(nodes: list[str]) -> str:
    return ",".join(nodes[:4]) + (f",+{len(nodes) - 4}" if len(nodes) > 4 else "")


def _iso(ms: int) -> str:
    import datetime as _dt

    return _dt.datetime.fromtimestamp(ms / 1000, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")


__all__ = [
    "FindingsConfig", "FindingsTracker", "poisson_sf", "binom_sf", "adjust", "finding_id",
    "to_alert", "dimension_of", "DIMENSIONS", "ACTIONS", "INTERRUPTION_STATES", "FindingsRunner",
    "StreamClock",
]


# ---------------------------------------------------------------- engine composition
class FindingsRunner:
    """``Engine`` + ``FindingsTracker`` in one deterministic step (``faultline ingest``,
    ``faultline findings --from``, tests): ``process(batch)`` returns the engine's alerts
    and incidents followed by the findings (and their alerts) that became due.

    The tracker sees events in ``(ts, id)`` order up to the engine's watermark, and the
    repeat-offender/change tests run at every ``step_ms`` boundary of event time once the
    watermark has passed it by ``settle_ms`` (so the incidents of failures before the
    boundary are in), which makes the findings independent of batch boundaries.
    """

    def __init__(self, engine: Any = None, tracker: FindingsTracker | None = None, *,
                 step_ms: int = HOUR_MS, settle_ms: int | None = None) -> None:
        if engine is None:
            from .engine import Engine

            engine = Engine()
        self.engine = engine
        self.tracker = tracker or FindingsTracker()
        self.step_ms = step_ms
        if settle_ms is None:
            ccfg = getattr(getattr(engine, "cfg", None), "correlate", None)
            settle_ms = 2 * int(getattr(ccfg, "settle_ms", 60_000))
        self.settle_ms = settle_ms
        self._buf: list[tuple[int, str, Any]] = []
        self._next: int | None = None
        self._done = -(1 << 62)                 # last evaluated boundary
        self.findings: dict[str, Finding] = {}  # latest emission per id

    def process(self, batch: Iterable[Any], outputs: Iterable[Any] = ()) -> list[Any]:
        """Events (bytes, dicts or decoded structs) in; alerts, incidents, findings out.
        ``outputs``: incidents/alerts produced elsewhere (the Faust agent reads them from
        ``fl.incidents``/``fl.alerts``); they are counted but not returned."""
        from ..schemas.codec import ContractError, decode, now_ms

        now = now_ms()
        evs = []
        for item in batch:
            ev = item
            if isinstance(item, (bytes, bytearray, str, dict)):
                try:
                    import orjson

                    ev = decode(orjson.dumps(item) if isinstance(item, dict) else item, now=now)
                except ContractError:
                    ev = item  # the engine counts and reports it
            evs.append(ev)
        out = self.engine.process(evs)
        extra = list(outputs)
        if extra and hasattr(self.engine, "outputs_seen"):
            self.engine.outputs_seen(extra)
        for ev in evs:
            if hasattr(ev, "kind") and ev.kind in _TRACKED_KINDS:
                self._buf.append((ev.ts, ev.id, ev))
        res = self._after(extra + out, self.engine.watermark)
        return res[len(extra):] if extra else res

    def advance(self, watermark_ms: int) -> list[Any]:
        return self._after(self.engine.advance(watermark_ms), watermark_ms)

    def finish(self) -> list[Any]:
        """End of input: close the engine, feed everything, evaluate once more at the end."""
        out = self.engine.finish()
        last = max([t for t, _, _ in self._buf] + [self.tracker.now])
        res = self._after(out, 1 << 62, final=last)
        return res

    def _after(self, out: list[Any], wm: int, final: int | None = None) -> list[Any]:
        tr = self.tracker
        res = list(out)
        late = False
        for o in out:
            if isinstance(o, Incident):
                tr.on_incident(o)
                late = late or o.failure_ts < self._done
            elif isinstance(o, Alert):
                tr.on_alert(o)
                late = late or o.ts < self._done
        self._buf.sort(key=lambda x: (x[0], x[1]))
        limit = wm if final is None else (1 << 62)
        if self._next is None and self._buf:
            self._next = (self._buf[0][0] // self.step_ms + 1) * self.step_ms
        i = 0
        buf = self._buf
        while True:
            # feed events up to the next boundary (or the watermark), evaluating boundaries on the way
            nb = self._next
            while i < len(buf) and buf[i][0] <= limit and (nb is None or buf[i][0] < nb):
                res.extend(self._emit(tr.observe(buf[i][2])))
                i += 1
            if nb is not None and nb + self.settle_ms <= limit and (final is None or nb <= final):
                res.extend(self._emit(*tr.evaluate_with_alerts(nb)))
                self._done = nb
                late = False
                self._next = nb + self.step_ms
                continue
            break
        del buf[:i]
        if late and final is None:
            # incidents/alerts from before the last evaluated boundary arrived after it (the
            # stream's correlation lags in wall-clock time): re-test at that boundary now
            # rather than waiting for event time to reach the next one
            res.extend(self._emit(*tr.evaluate_with_alerts(self._done)))
        if final is not None:
            res.extend(self._emit(*tr.evaluate_with_alerts(max(final, tr.now))))
        return res

    def _emit(self, found: list[Finding], alerts: list[Alert] | None = None) -> list[Any]:
        out: list[Any] = []
        for f in found:
            self.findings[f.id] = f
            out.append(f)
            if f.kind == "version_drift":
                out.append(to_alert(f))
        out.extend(alerts or ())
        return out


class StreamClock:
    """Engine stand-in for the Faust agent, where detectors and correlation run in other
    agents: no outputs of its own; the watermark is the highest event time seen (events and
    the failure times of incidents) minus the lateness bound."""

    def __init__(self, lateness_ms: int = 10_000) -> None:
        self.lateness_ms = lateness_ms
        self.max_ts = -(1 << 62)
        self.cfg = None

    def process(self, evs: list[Any]) -> list[Any]:
        for ev in evs:
            ts = getattr(ev, "ts", None)
            if isinstance(ts, int) and ts > self.max_ts:
                self.max_ts = ts
        return []

    def outputs_seen(self, outs: list[Any]) -> None:
        for o in outs:
            ts = o.failure_ts if isinstance(o, Incident) else getattr(o, "ts", None)
            if isinstance(ts, int) and ts > self.max_ts:
                self.max_ts = ts

    @property
    def watermark(self) -> int:
        return self.max_ts - self.lateness_ms

    def advance(self, watermark_ms: int) -> list[Any]:
        self.max_ts = max(self.max_ts, watermark_ms + self.lateness_ms)
        return []

    def finish(self) -> list[Any]:
        return []


_TRACKED_KINDS = frozenset({"sched.job", "inventory.versions", "inventory.topology", "inventory.change"})
