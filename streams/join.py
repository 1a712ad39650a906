"""The join: which resources a job attempt touches, and which signals sit on them.

``View`` holds the slowly-changing maps built from ``inventory.topology``,
``inventory.versions`` / ``inventory.change`` (per node) and the allocation from
``sched.job`` (node -> job attempts). ``resources(rec)`` lists the index keys of a job's
path (``node:``, ``port:``, ``path:``, ``segment:``); ``SignalIndex`` keeps recent signals
under those keys (bounded, time-evicted) and answers "signals on these keys in [t0, t1]".

A port anomaly reaches every job whose nodes sit behind the port (topology link), a
storage anomaly every job on a node that mounts the path, a segment congestion every job
with a node in the segment.
"""

from __future__ import annotations

import bisect
from typing import Iterable, Union

from msgspec import Struct

from .signals import Signal

# kinds whose scope is the whole backend / segment rather than the node that saw it
BACKEND_WIDE = frozenset({"storage_slow", "storage_full", "mount_full"})
CONGESTION = frozenset({"rdma_congestion", "port_discards"})
# link faults of a switch-keyed port: also filed under FABRIC_KEY, so a job can see an
# inter-switch (spine) port its traffic may cross; correlation keeps only those (see correlate)
FABRIC_LINK = frozenset({"port_down", "port_flap", "port_errors"})
FABRIC_KEY = "fabric:*"


class Link(Struct, array_like=True, frozen=True):
    nic: str
    switch: str
    port: str
    segment: Union[str, None]


class Mount(Struct, array_like=True, frozen=True):
    path: str
    backend: str
    server: Union[str, None]


class Change(Struct, array_like=True, frozen=True):
    ts: int
    node: str
    component: str
    from_: Union[str, None]
    to: str
    id: str


class Resources(Struct, kw_only=True):
    nodes: list[str]
    keys: list[str]                 # signal index keys on the job's path
    ports: list[str]                # "switch/port" of the job's links
    paths: list[str]
    segments: list[str]
    congestion_keys: list[str]      # node:/port: keys in the job's segments (congestion only)


class View(Struct, kw_only=True):
    links: dict[str, list[Link]] = {}
    mounts: dict[str, list[Mount]] = {}
    versions: dict[str, dict[str, str]] = {}
    history: dict[str, list[tuple[int, dict[str, str]]]] = {}   # node -> (ts, full stack), bounded
    changes: list[Change] = []      # bounded, time-ordered
    max_changes: int = 10_000

    # ---------------------------------------------------------------- updates
    def update(self, ev) -> bool:
        """Apply an inventory event; True when it changed the view."""
        k = ev.kind
        if k == "inventory.topology":
            d = ev.data
            self.links[ev.node] = [Link(l.nic, l.switch, l.port, l.segment) for l in d.links]
            self.mounts[ev.node] = [Mount(s.path, s.backend, s.server) for s in d.storage]
            return True
        if k == "inventory.versions":
            self.versions[ev.node] = dict(ev.data)
            self._snap(ev.node, ev.ts)
            return True
        if k == "inventory.change":
            d = ev.data
            c = Change(ev.ts, ev.node, d.component, d.from_, d.to, ev.id)
            if not self.changes or c.ts >= self.changes[-1].ts:
                self.changes.append(c)
            else:
                bisect.insort(self.changes, c, key=lambda x: (x.ts, x.id))
            if len(self.changes) > self.max_changes:
                del self.changes[: len(self.changes) - self.max_changes]
            self.versions.setdefault(ev.node, {})[d.component] = d.to
            self._snap(ev.node, ev.ts)
            return True
        return False

    def _snap(self, node: str, ts: int) -> None:
        h = self.history.setdefault(node, [])
        snap = (ts, dict(self.versions[node]))
        if not h or ts >= h[-1][0]:
            h.append(snap)
        else:
            bisect.insort(h, snap, key=lambda x: x[0])
        if len(h) > 64:
            del h[0]

    def versions_at(self, node: str, ts: int) -> dict[str, str]:
        """The node's stack as known at ``ts`` (the first report when nothing is older)."""
        h = self.history.get(node)
        if not h:
            return self.versions.get(node, {})
        i = bisect.bisect_right(h, ts, key=lambda x: x[0])
        return h[i - 1][1] if i else h[0][1]

    # ---------------------------------------------------------------- lookups
    def segment_of(self, node: str, nic: str | None = None) -> str | None:
        for l in self.links.get(node, ()):
            if (nic is None or l.nic == nic) and l.segment:
                return l.segment
        return None

    def switch_port_of(self, node: str, nic: str) -> str | None:
        for l in self.links.get(node, ()):
            if l.nic == nic:
                return f"{l.switch}/{l.port}"
        return None

    def node_facing_ports(self) -> set[tuple[str, str]]:
        """(switch, port) of every link in the topology (the ports that face a node)."""
        return {(l.switch, l.port) for ls in self.links.values() for l in ls}

    def port_segment(self, device: str, port: str) -> str | None:
        for ls in self.links.values():
            for l in ls:
                if l.switch == device and l.port == port:
                    return l.segment
        return None

    def nodes_behind(self, device: str, port: str) -> list[str]:
        return sorted(n for n, ls in self.links.items() if any(l.switch == device and l.port == port for l in ls))

    def mount_of(self, node: str | None, file_path: str) -> str | None:
        """Longest mount point (from topology) that contains ``file_path``."""
        best = None
        cands: Iterable[Mount] = self.mounts.get(node, ()) if node else (m for ms in self.mounts.values() for m in ms)
        for m in cands:
            p = m.path.rstrip("/") or "/"
            if (file_path == p or file_path.startswith(p + "/") or p == "/") and (best is None or len(p) > len(best)):
                best = p
        return best

    def resources(self, nodes: list[str]) -> Resources:
        nodes = sorted(set(nodes))
        keys = [f"node:{n}" for n in nodes]
        ports: list[str] = []
        segs: set[str] = set()
        paths: set[str] = set()
        for n in nodes:
            for l in self.links.get(n, ()):
                ports.append(f"{l.switch}/{l.port}")
                keys.append(f"port:{l.switch}/{l.port}")
                keys.append(f"port:{l.nic}@{n}")
                if l.segment:
                    segs.add(l.segment)
            for m in self.mounts.get(n, ()):
                paths.add(m.path)
        for p in sorted(paths):
            keys.append(f"path:{p}")
        if len({l.switch for n in nodes for l in self.links.get(n, ())}) > 1:
            keys.append(FABRIC_KEY)  # the job's traffic crosses switches: inter-switch ports matter
        cong: list[str] = []
        if segs:
            for n, ls in self.links.items():
                for l in ls:
                    if l.segment in segs:
                        cong.append(f"node:{n}")
                        cong.append(f"port:{l.switch}/{l.port}")
            for s in sorted(segs):
                cong.append(f"segment:{s}")
        return Resources(nodes=nodes, keys=sorted(set(keys)), ports=sorted(set(ports)), paths=sorted(paths),
                         segments=sorted(segs), congestion_keys=sorted(set(cong) - set(keys)))

    def changes_on(self, nodes: Iterable[str], t0: int, t1: int) -> list[Change]:
        ns = set(nodes)
        lo = bisect.bisect_left(self.changes, t0, key=lambda c: c.ts)
        return [c for c in self.changes[lo:] if c.ts <= t1 and c.node in ns]

    def ran_before(self, node: str, component: str, version: str, ts: int) -> bool:
        """True when ``node`` reported ``component`` at ``version`` before ``ts`` (in the
        bounded history), i.e. a change to it returns to a known state."""
        return any(t < ts and v.get(component) == version for t, v in self.history.get(node, ()))

    def version_changes(self, nodes: Iterable[str], t0: int, t1: int) -> list[tuple[Change, bool]]:
        """Real version changes on ``nodes`` in ``[t0, t1]``, as ``(change, announced)``:
        ``inventory.change`` events that replace a known version with another one
        (announced), plus changes seen only as a differing ``inventory.versions`` report of
        the same node (not announced). A first registration (no ``from`` version, or no
        earlier report) and a no-op (``from == to``) are not changes."""
        ns = sorted(set(nodes))
        out: list[tuple[Change, bool]] = []
        seen: set[tuple[str, str, str]] = set()
        for c in self.changes_on(ns, t0, t1):
            if c.from_ is None or c.from_ == c.to:
                continue
            out.append((c, True))
            seen.add((c.node, c.component, c.to))
        for n in ns:
            h = self.history.get(n)
            if not h or len(h) < 2:
                continue
            i = bisect.bisect_left(h, t0, key=lambda x: x[0])
            for j in range(max(1, i), len(h)):
                ts, cur = h[j]
                if ts > t1:
                    break
                prev = h[j - 1][1]
                for comp, v in cur.items():
                    old = prev.get(comp)
                    if old is None or old == v or (n, comp, v) in seen:
                        continue
                    seen.add((n, comp, v))
                    out.append((Change(ts, n, comp, old, v, f"versions@{n}/{ts}/{comp}"), False))
        out.sort(key=lambda cv: (cv[0].ts, cv[0].node, cv[0].component))
        return out


def index_keys(sig: Signal) -> list[str]:
    """Where a signal is filed in the ``SignalIndex``."""
    keys = []
    if sig.node:
        keys.append(f"node:{sig.node}")
    s = sig.subject
    if s.startswith("port:"):
        keys.append(s if not sig.node else f"port:{sig.data.get('device')}@{sig.node}")
        if not sig.node and sig.kind in FABRIC_LINK:
            keys.append(FABRIC_KEY)
    elif s.startswith("path:") and sig.kind in BACKEND_WIDE:
        keys.append(s)
    elif s.startswith("segment:"):
        keys.append(s)
    return keys


class SignalIndex:
    """Recent signals per resource key, time-ordered, bounded per key and evicted by age."""

    def __init__(self, per_key_cap: int = 2_000) -> None:
        self._by_key: dict[str, list[Signal]] = {}
        self._ids: set[str] = set()
        self.cap = per_key_cap

    def add(self, sig: Signal) -> bool:
        if sig.id in self._ids:
            return False
        self._ids.add(sig.id)
        for k in index_keys(sig):
            lst = self._by_key.setdefault(k, [])
            if not lst or (sig.ts, sig.id) >= (lst[-1].ts, lst[-1].id):
                lst.append(sig)
            else:
                bisect.insort(lst, sig, key=lambda s: (s.ts, s.id))
            if len(lst) > self.cap:
                del lst[0]
        return True

    def query(self, keys: Iterable[str], t0: int, t1: int, kinds: frozenset[str] | None = None) -> list[Signal]:
        seen: set[str] = set()
        out: list[Signal] = []
        for k in keys:
            lst = self._by_key.get(k)
            if not lst:
                continue
            i = bisect.bisect_left(lst, t0, key=lambda s: s.ts)
            for s in lst[i:]:
                if s.ts > t1:
                    break
                if s.id not in seen and (kinds is None or s.kind in kinds):
                    seen.add(s.id)
                    out.append(s)
        out.sort(key=lambda s: (s.ts, s.id))
        return out

    def evict(self, before_ts: int) -> None:
        dead = []
        for k, lst in self._by_key.items():
            i = bisect.bisect_left(lst, before_ts, key=lambda s: s.ts)
            if i:
                for s in lst[:i]:
                    self._ids.discard(s.id)
                del lst[:i]
            if not lst:
                dead.append(k)
        for k in dead:
            del self._by_key[k]

    def __len__(self) -> int:
        return len(self._ids)
