"""``FindingsTracker``: the findings units composed (pure: events, incidents and alerts in,
findings out, no I/O). Feed events in event-time order (late events within the caller's
lateness bound are fine), incidents and alerts as they are produced, and call
``evaluate(now_ms)`` periodically (e.g. each event-time bucket).

State is bounded: exposure buckets, interruptions, changes and emitted series older than
the longest window are pruned on every ``evaluate``; the maps have hard caps.
"""

from __future__ import annotations

from typing import Any, Iterable

import msgspec

from ...schemas.outputs import Alert, Finding, Incident
from .changes import Changes, change_findings
from .common import FindingsConfig, to_alert
from .drift import Drift
from .exposure import Exposure, Inventory
from .offenders import Interruption, Interruptions, Tally, offenders
from .revisions import Revisions

STATE_VERSION = 2


class FindingsTracker:
    def __init__(self, config: FindingsConfig | None = None) -> None:
        self.cfg = cfg = config or FindingsConfig()
        self.inventory = Inventory(cfg.max_nodes)
        self.attempts = Exposure(cfg, self.inventory)
        self.interruptions = Interruptions(cfg, self.inventory, self.attempts)
        self.changes = Changes()
        self.drift = Drift(cfg, self.inventory)
        self.revisions = Revisions()
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
            started = self.attempts.on_job(ev, self.now)
            return self.drift.on_start(ev) if started is not None else []
        if kind == "inventory.versions":
            for comp, old, to in self.inventory.on_versions(ev.node, ev.ts, dict(ev.data)):
                self.changes.observed(ev.node, ev.ts, comp, old, to, ev.id)
        elif kind == "inventory.topology":
            self.inventory.on_topology(ev)
        elif kind == "inventory.change" and ev.node:
            d = ev.data
            self.changes.add(d.component, d.to, ev.node, ev.ts, d.from_, d.actor, d.ticket, ev.id)
            self.inventory.set_version(ev.node, ev.ts, d.component, d.to)
        return []

    def on_incident(self, inc: Incident) -> None:
        """Count an incident (latest revision wins; one count per interrupted attempt)."""
        ts = self.interruptions.on_incident(inc)
        if ts is not None and ts > self.now:
            self.now = ts

    def on_alert(self, alert: Alert) -> None:
        """Keep an alert, reported next to the counts (never counted as an interruption)."""
        self.interruptions.on_alert(alert)

    def feed(self, items: Iterable[Any]) -> list[Finding]:
        """Route events, incidents and alerts; returns immediate findings."""
        out: list[Finding] = []
        for it in items:
            if isinstance(it, Incident):
                self.on_incident(it)
            elif isinstance(it, Alert):
                self.on_alert(it)
            else:
                out.extend(self.observe(it))
        return out

    # ------------------------------------------------------------ evaluation
    def evaluate(self, now_ms: int | None = None) -> list[Finding]:
        """Run the repeat-offender and change tests at ``now_ms`` (event time); returns the
        findings that are new or changed (count, severity) since they were last returned."""
        now = self.now if now_ms is None else now_ms
        self.now = max(self.now, now)
        found = self._significant(now)
        self._prune(now)
        return self._emit(found)

    def evaluate_with_alerts(self, now_ms: int | None = None) -> tuple[list[Finding], list[Alert]]:
        """``evaluate`` plus one ``Alert`` per finding id the first time it is emitted
        (revisions update the finding, not the pager)."""
        found = self.evaluate(now_ms)
        return found, [to_alert(f) for f in found if f.id in self.first_emitted]

    def snapshot(self, now_ms: int | None = None) -> list[Finding]:
        """Every currently significant finding (not only the changed ones), no state change."""
        now = self.now if now_ms is None else now_ms
        return [self.revisions.name(f) for f in self._significant(now)]

    def exposure(self, now: int, window_ms: int) -> dict[str, list[float]]:
        """subject -> [gpu_hours, attempts] over [now - window, now]."""
        return self.attempts.window(now, window_ms)

    def counts(self, now: int, window_ms: int) -> dict[str, Tally]:
        """subject -> interrupted attempts and alerts over [now - window, now]."""
        return self.interruptions.window(now, window_ms)

    def _significant(self, now: int) -> list[Finding]:
        """Every window's offenders, then the change regressions; a longer window that holds
        nothing more than a shorter one (same count and exposure) adds no finding of its own."""
        out: list[Finding] = []
        seen: dict[tuple[str, str], tuple[int, float]] = {}
        for w in sorted(self.cfg.windows_ms):
            for f in offenders(self.cfg, now, w, self.exposure(now, w), self.counts(now, w)):
                key = (f.dimension, f.subject)
                if seen.get(key) == (f.count, f.exposure):
                    continue
                seen[key] = (f.count, f.exposure)
                out.append(f)
        out.extend(change_findings(self.cfg, now, self.changes, self.attempts.attempts_since,
                                   self.interruptions.items))
        return out

    def _emit(self, found: list[Finding]) -> list[Finding]:
        fresh = []
        self.first_emitted = set()
        for f in found:
            g, new = self.revisions.admit(f)
            if g is not None:
                if new:
                    self.first_emitted.add(g.id)
                fresh.append(g)
        return fresh

    def _prune(self, now: int) -> None:
        horizon = now - max(max(self.cfg.windows_ms), 2 * self.cfg.change_window_ms)
        self.attempts.prune(horizon)
        self.interruptions.prune(horizon)
        self.changes.prune(horizon)
        self.drift.prune(horizon)
        self.revisions.prune(horizon)

    # ------------------------------------------------------------ persistence
    def dump(self) -> bytes:
        """The whole state as msgpack bytes (Faust changelog table value)."""
        st = {"v": STATE_VERSION, "now": self.now, **self.inventory.dump(), **self.attempts.dump(),
              "intr": [i.dump() for i in self.interruptions.items.values()],
              "changes": self.changes.dump(),
              "drift": [[k[0], k[1], t] for k, t in self.drift.seen.items()],
              "series": self.revisions.dump()}
        return msgspec.msgpack.encode(st)

    @classmethod
    def load(cls, blob: bytes | None, config: FindingsConfig | None = None) -> "FindingsTracker":
        """Rebuild a tracker from ``dump()`` bytes (None or empty -> a fresh tracker; a
        version-1 blob keeps everything but its emitted ids, which were per window bucket)."""
        tr = cls(config)
        if not blob:
            return tr
        st = msgspec.msgpack.decode(blob)
        tr.now = st["now"]
        tr.inventory.load(st)
        tr.attempts.load(st)
        for row in st["intr"]:
            it = Interruption.load(row)
            tr.interruptions.items[it.id] = it
        tr.changes.load(st["changes"])
        tr.drift.seen = {(j, a): t for j, a, t in st["drift"]}
        if st.get("v") == STATE_VERSION:
            tr.revisions.load(st["series"])
        return tr

    def stats(self) -> dict[str, int]:
        """Sizes of the bounded state (for tests and metrics)."""
        a = self.attempts
        return {
            "running": len(a.running), "closed": len(a.closed), "interruptions": len(self.interruptions.items),
            "exposure_subjects": len(a.cells), "exposure_cells": sum(len(b) for b in a.cells.values()),
            "changes": len(self.changes.items), "nodes": len(self.inventory.versions),
            "emitted": len(self.revisions.series),
        }
