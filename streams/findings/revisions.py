"""One finding per subject and window: later evaluations update it as revisions.

A *series* is (kind, dimension, subject, window length). While a series stays significant
(no gap longer than its window between two significant evaluations) it is one finding with
one id; each evaluation whose count or severity differs from the last emitted one re-emits
it (same id, later ``ts``, the store keeps the latest). After a gap longer than the window a
new episode starts with a new id. Change regressions and drift carry their own stable ids
(one per change, one per attempt) and go through the same emission rule.
"""

from __future__ import annotations

import msgspec

from ...schemas.outputs import Finding
from .common import finding_id


class Revisions:
    def __init__(self) -> None:
        #: series -> [finding id, episode start, last significant at, last emitted count, severity]
        self.series: dict[tuple, list] = {}

    @staticmethod
    def key(f: Finding) -> tuple:
        if f.id:  # the finding names its own identity (a change, an attempt)
            return (f.kind, f.id)
        return (f.kind, f.dimension, f.subject, f.window_end - f.window_start)

    def name(self, f: Finding) -> Finding:
        """``f`` with the id of its current episode (no state change)."""
        if f.id:
            return f
        k = self.key(f)
        st = self.series.get(k)
        window = k[3]
        if st is None or f.ts - st[2] > window:
            return msgspec.structs.replace(f, id=finding_id(f.kind, f.dimension, f.subject, window, f.ts))
        return msgspec.structs.replace(f, id=st[0])

    def admit(self, f: Finding) -> tuple[Finding | None, bool]:
        """(the finding to emit or None when nothing changed, whether it is a new id)."""
        k = self.key(f)
        named = self.name(f)
        st = self.series.get(k)
        new = st is None or st[0] != named.id
        if new:
            self.series[k] = [named.id, f.ts, f.ts, f.count, f.severity]
            return named, True
        changed = (st[3], st[4]) != (f.count, f.severity)
        st[2] = max(st[2], f.ts)
        st[3], st[4] = f.count, f.severity
        return (named if changed else None), False

    def prune(self, horizon: int) -> None:
        for k in [k for k, st in self.series.items() if st[2] < horizon]:
            del self.series[k]

    def dump(self) -> list:
        return [[list(k), *st] for k, st in self.series.items()]

    def load(self, rows: list) -> None:
        self.series = {tuple(r[0]): list(r[1:]) for r in rows}
