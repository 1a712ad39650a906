"""Version drift: a job attempt starting on nodes that report different driver / CUDA /
NCCL / firmware / OFED / image versions yields a finding at once, before it fails."""

from __future__ import annotations

from typing import Any

from ...schemas.outputs import Finding
from .common import ACTIONS, FindingsConfig, cap, finding_id, short
from .exposure import Inventory


def mixed_versions(nodes: list[str], inv: Inventory, components: tuple[str, ...]) -> tuple[list[str], set[str]]:
    """(one description per component that differs, the nodes in the minority of any)."""
    diffs: list[str] = []
    odd: set[str] = set()
    for comp in components:
        by_ver: dict[str, list[str]] = {}
        for n in nodes:
            v = inv.version(n, comp)
            if v is not None:
                by_ver.setdefault(v, []).append(n)
        if len(by_ver) > 1:
            ranked = sorted(by_ver.items(), key=lambda kv: (-len(kv[1]), kv[0]))
            odd.update(n for _, ns in ranked[1:] for n in ns)
            diffs.append(f"{comp} " + " vs ".join(f"{v} on {short(ns)}" for v, ns in ranked))
    return diffs, odd


class Drift:
    """At most one drift finding per attempt (bounded)."""

    def __init__(self, cfg: FindingsConfig, inv: Inventory) -> None:
        self.cfg = cfg
        self.inv = inv
        self.seen: dict[tuple[str, int], int] = {}

    def on_start(self, ev: Any) -> list[Finding]:
        """A ``sched.job`` ``running`` event that started an attempt."""
        d = ev.data
        key = (ev.job, d.attempt)
        nodes = sorted(set(d.nodes))
        if len(nodes) < 2 or key in self.seen:
            return []
        diffs, odd = mixed_versions(nodes, self.inv, self.cfg.drift_components)
        if not diffs:
            return []
        self.seen[key] = ev.ts
        cap(self.seen, self.cfg.max_attempts)
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

    def prune(self, horizon: int) -> None:
        for k in [k for k, t in self.seen.items() if t < horizon]:
            del self.seen[k]
