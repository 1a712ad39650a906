"""Change regressions: did a change (an ``inventory.change``, or a version seen to change
in ``inventory.versions``) raise the interruption rate of the attempts that ran with it?

The attempts on nodes that took the change are compared with concurrent attempts on nodes
without it (or, when it went everywhere, with the same nodes in the window before it) by an
exact conditional binomial test of two Poisson rates, Bonferroni across the changes. Counts
are interrupted attempts, as for the offenders.
"""

from __future__ import annotations

from typing import Callable

from ...schemas.outputs import Finding
from .common import ACTIONS, HOUR_MS, FindingsConfig, finding_id, iso
from .exposure import Attempt
from .offenders import Interruption
from .stats import binom_sf


class Change:
    """One (component, to-version) rollout: which nodes took it when, by whom."""

    __slots__ = ("nodes", "first", "last", "froms", "actors", "tickets", "events")

    def __init__(self) -> None:
        self.nodes: dict[str, int] = {}  # node -> when it took the change
        self.first = 0
        self.last = 0
        self.froms: set[str] = set()
        self.actors: set[str] = set()
        self.tickets: set[str] = set()
        self.events: list[str] = []


class Changes:
    """The rollouts seen, by (component, to)."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], Change] = {}

    def add(self, comp: str, to: str, node: str | None, ts: int, frm: str | None,
            actor: str | None, ticket: str | None, ev_id: str) -> None:
        if not node:
            return
        ch = self.items.setdefault((comp, to), Change())
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

    def observed(self, node: str, ts: int, comp: str, old: str, to: str, ev_id: str) -> None:
        """A version seen to change without an ``inventory.change`` event."""
        ch = self.items.get((comp, to))
        if ch is None or node not in ch.nodes:
            self.add(comp, to, node, ts, old, None, None, ev_id)

    def prune(self, horizon: int) -> None:
        for k in [k for k, ch in self.items.items() if ch.last < horizon]:
            del self.items[k]

    def dump(self) -> list:
        return [[k[0], k[1], c.nodes, sorted(c.froms), sorted(c.actors), sorted(c.tickets), c.events]
                for k, c in self.items.items()]

    def load(self, rows: list) -> None:
        for comp, to, nodes, froms, actors, tickets, events in rows:
            c = Change()
            c.nodes = dict(nodes)
            c.first, c.last = min(nodes.values()), max(nodes.values())
            c.froms, c.actors, c.tickets, c.events = set(froms), set(actors), set(tickets), list(events)
            self.items[(comp, to)] = c


def cohort(group: list[Attempt], on: Callable[[Attempt, str], bool], now: int,
           intr: dict[str, Interruption]) -> tuple[int, float, list[str]]:
    """Node-level: GPU-hours on the nodes ``on(attempt, node)`` selects, and the attempts
    interrupted by such a node (an incident blaming one of them, or, with no node blamed,
    when every node of the attempt is selected); one count per attempt."""
    c, e, ids = 0, 0.0, []
    for a in group:
        if not a.nodes:
            continue
        sel = {n for n in a.nodes if on(a, n)}
        if not sel:
            continue
        end = a.end if a.end is not None else now
        e += a.gpus / len(a.nodes) * len(sel) * max(0, min(end, now) - a.start) / HOUR_MS
        for iid in sorted(a.incidents):
            it = intr.get(iid)
            if it is None or it.alert:
                continue
            blamed = {x[5:] for x in it.subjects if x.startswith("node:")}
            if (blamed & sel) if blamed else len(sel) == len(set(a.nodes)):
                c += 1
                ids.append(iid)
                break
    return c, e, ids


def change_findings(cfg: FindingsConfig, now: int, changes: Changes, attempts: Callable[[int], list[Attempt]],
                    intr: dict[str, Interruption]) -> list[Finding]:
    lo = now - cfg.change_window_ms
    cohorts = [(k, ch) for k, ch in changes.items.items() if lo <= ch.first <= now]
    if not cohorts:
        return []
    atts = attempts(lo - cfg.change_window_ms)
    tested = []
    for (comp, to), ch in cohorts:
        took = ch.nodes
        after = [a for a in atts if ch.first <= a.start <= now]
        before = [a for a in atts if ch.first - cfg.change_window_ms <= a.start < ch.first]

        def changed(a: Attempt, n: str, took: dict = took) -> bool:
            t = took.get(n)
            return t is not None and t <= a.start

        def unchanged(a: Attempt, n: str, took: dict = took) -> bool:
            t = took.get(n)
            return t is None or t > a.start

        c1, e1, ids = cohort(after, changed, now, intr)
        if c1 < cfg.change_min_count or e1 <= 0:
            continue
        c0, e0, _ = cohort(after, unchanged, now, intr)
        basis = "nodes without it since"
        if e0 < cfg.change_min_control_share * e1:
            c0, e0, _ = cohort(before, lambda a, n, took=took: n in took, now, intr)
            basis = "the same nodes before"
        if e0 <= 0:
            continue
        p = binom_sf(c1, c1 + c0, e1 / (e1 + e0))
        tested.append((comp, to, ch, c1, e1, max(c0, 0.5) / e0, c1 / e1, p, basis, ids))
    m = len(tested)
    return [_finding(cfg, now, m, *t) for t in tested
            if t[7] * m <= cfg.change_alpha and t[6] >= cfg.min_ratio * t[5]]


def _finding(cfg: FindingsConfig, now: int, m: int, comp: str, to: str, ch: Change, c1: int, e1: float,
             rate0: float, rate1: float, p: float, basis: str, ids: list[str]) -> Finding:
    subject = f"version:{comp}={to}"
    frm = ",".join(sorted(ch.froms)) or "?"
    who = ",".join(sorted(ch.actors)) or "unknown actor"
    tickets = ",".join(sorted(ch.tickets)) or "no ticket"
    return Finding(
        id=finding_id("change_regression", "version", subject, "change", ch.first), ts=now,
        kind="change_regression", dimension="version", subject=subject,
        window_start=ch.first, window_end=now, count=c1, exposure=round(e1, 4),
        exposure_unit="gpu_hours", fleet_rate=rate0, score=p,
        summary=(f"change {comp} {frm}->{to} by {who} ({tickets}) on {len(ch.nodes)} nodes "
                 f"from {iso(ch.first)} to {iso(ch.last)}: {c1} interrupted attempt(s) over {e1:.1f} GPU-h "
                 f"= {rate1:.4g}/GPU-h vs {rate0:.4g}/GPU-h on {basis} "
                 f"({rate1 / rate0:.1f}x, binomial p={p:.2g}, Bonferroni over {m} changes)"),
        action=ACTIONS["version"].format(name=f"{comp} {to} (back to {frm})"),
        incidents=sorted(ids)[-cfg.max_incident_ids:],
        severity="critical" if p * m <= cfg.change_alpha / 100 else "warning",
    )


__all__ = ["Change", "Changes", "change_findings", "cohort"]
