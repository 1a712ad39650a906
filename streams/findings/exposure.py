"""Exposure: what every subject was exposed to, from ``sched.job`` attempts.

``Inventory`` keeps what the fleet looks like (versions, links, storage paths per node);
``Exposure`` books each attempt's GPU-hours and its one attempt onto the subjects it ran on
(node, gpu, switch port, segment, storage path, image, driver) in event-time buckets, and
answers ``window(now, window_ms)``: subject -> [gpu_hours, attempts], running attempts included.
"""

from __future__ import annotations

from typing import Any

from ...schemas.events import TERMINAL_JOB_STATES
from .common import CHANGE_COMPONENTS, DIMENSIONS, HOUR_MS, FindingsConfig, cap


class Attempt:
    """One job attempt as the findings see it."""

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

    def dump(self, running: bool) -> list:
        return [self.job, self.attempt, self.start, self.end, self.gpus, self.nodes, self.weights,
                sorted(self.versions), self.image, list(self.context), sorted(self.incidents), running]

    @classmethod
    def load(cls, row: list) -> tuple["Attempt", bool]:
        job, attempt, start, end, gpus, nodes, w, vers, image, ctx, incs, running = row
        a = cls(job, attempt, start, gpus, nodes)
        a.end, a.weights, a.versions, a.image = end, w, frozenset(vers), image
        a.context, a.incidents = tuple(ctx), set(incs)
        return a, running


class Inventory:
    """Per node: the latest versions, the switch ports (and segments) of its NICs, its
    storage paths, and the most GPUs a job used on it (bounded by ``max_nodes``)."""

    def __init__(self, max_nodes: int) -> None:
        self.max_nodes = max_nodes
        self.versions: dict[str, tuple[int, dict[str, str]]] = {}   # node -> (ts, versions)
        self.links: dict[str, tuple[tuple[str, str | None], ...]] = {}  # node -> ((port subj, segment), ...)
        self.paths: dict[str, tuple[str, ...]] = {}                   # node -> path subjects
        self.nics: dict[str, dict[str, str]] = {}                     # node -> nic -> port subject
        self.gpn: dict[str, int] = {}                                 # node -> max GPUs per node seen

    def on_versions(self, node: str | None, ts: int, vers: dict[str, str]) -> list[tuple[str, str, str]]:
        """Take a node's versions; returns the observed changes ``(component, from, to)``."""
        if not node:
            return []
        cur = self.versions.get(node)
        if cur is not None and cur[0] > ts:
            return []
        changed: list[tuple[str, str, str]] = []
        if cur is not None:
            for comp, to in vers.items():
                old = cur[1].get(comp)
                if old is not None and old != to and comp in CHANGE_COMPONENTS:
                    changed.append((comp, old, to))
        elif len(self.versions) >= self.max_nodes:
            return []
        self.versions[node] = (ts, vers)
        return changed

    def set_version(self, node: str, ts: int, comp: str, to: str) -> None:
        """An ``inventory.change``: the node runs ``to`` from ``ts`` on."""
        cur = self.versions.get(node)
        if cur is None or cur[0] <= ts:
            vers = dict(cur[1]) if cur else {}
            vers[comp] = to
            self.versions[node] = (ts, vers)

    def version(self, node: str, comp: str) -> str | None:
        nv = self.versions.get(node)
        return nv[1].get(comp) if nv else None

    def on_topology(self, ev: Any) -> None:
        node = ev.node
        if node not in self.links and len(self.links) >= self.max_nodes:
            return
        self.links[node] = tuple((f"port:{l.switch}/{l.port}", l.segment) for l in ev.data.links)
        self.nics[node] = {l.nic: f"port:{l.switch}/{l.port}" for l in ev.data.links}
        self.paths[node] = tuple("path:" + s.path for s in ev.data.storage)

    def port_of(self, node: str, nic: str) -> str | None:
        return self.nics.get(node, {}).get(nic)

    def nodes_behind(self) -> dict[str, list[str]]:
        """port subject -> the nodes cabled to it."""
        behind: dict[str, list[str]] = {}
        for node, links in self.links.items():
            for port, _ in links:
                behind.setdefault(port, []).append(node)
        return behind

    def dump(self) -> dict[str, Any]:
        return {"versions": {n: [ts, v] for n, (ts, v) in self.versions.items()},
                "links": {n: [list(x) for x in ls] for n, ls in self.links.items()},
                "paths": {n: list(ps) for n, ps in self.paths.items()}, "nics": self.nics, "gpn": self.gpn}

    def load(self, st: dict[str, Any]) -> None:
        self.versions = {n: (x[0], x[1]) for n, x in st["versions"].items()}
        self.links = {n: tuple((x[0], x[1]) for x in ls) for n, ls in st["links"].items()}
        self.paths = {n: tuple(ps) for n, ps in st["paths"].items()}
        self.nics = {n: dict(m) for n, m in st.get("nics", {}).items()}
        self.gpn = dict(st["gpn"])


class Exposure:
    """Attempts (running and closed) and their GPU-hours per subject and bucket."""

    def __init__(self, cfg: FindingsConfig, inv: Inventory) -> None:
        self.cfg = cfg
        self.inv = inv
        self.running: dict[tuple[str, int], Attempt] = {}
        self.closed: dict[tuple[str, int], Attempt] = {}
        self.cells: dict[str, dict[int, list[float]]] = {}   # subject -> bucket -> [gpu_hours, attempts]

    def get(self, key: tuple[str, int]) -> Attempt | None:
        return self.running.get(key) or self.closed.get(key)

    def on_job(self, ev: Any, now: int) -> Attempt | None:
        """Take a ``sched.job`` event; returns the attempt when this event started it."""
        d = ev.data
        key = (ev.job, d.attempt)
        if d.state == "running":
            if key not in self.running and key not in self.closed:
                return self.start(key, d, d.start_ts or ev.ts, now)
        elif d.state in TERMINAL_JOB_STATES:
            att = self.running.pop(key, None)
            if att is None and key not in self.closed and d.start_ts:
                att = self.start(key, d, d.start_ts, now)
                self.running.pop(key, None)
            if att is not None:
                att.end = max(att.start, d.end_ts or ev.ts)
                self.book(att, att.start, att.end)
                self.closed[key] = att
                cap(self.closed, self.cfg.max_attempts)
        return None

    def start(self, key: tuple[str, int], d: Any, start: int, now: int) -> Attempt:
        inv = self.inv
        nodes = list(d.nodes)
        att = Attempt(key[0], key[1], start, d.gpus, nodes)
        gpn = d.gpus / len(nodes) if nodes else 0.0
        w: dict[str, float] = {}
        vers: set[str] = set()
        drivers: dict[str, float] = {}
        node_image = None
        for n in nodes:
            w["node:" + n] = w.get("node:" + n, 0.0) + gpn
            if gpn and int(gpn) > inv.gpn.get(n, 0) and len(inv.gpn) < self.cfg.max_nodes:
                inv.gpn[n] = int(gpn)
            for port, seg in inv.links.get(n, ()):
                w[port] = w.get(port, 0.0) + gpn
                if seg:
                    s = "segment:" + seg
                    w[s] = w.get(s, 0.0) + gpn
            for p in inv.paths.get(n, ()):
                w[p] = w.get(p, 0.0) + gpn
            nv = inv.versions.get(n)
            if nv:
                vers.update(f"{comp}={v}" for comp, v in nv[1].items() if comp in CHANGE_COMPONENTS)
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
        self.running[key] = att
        if len(self.running) > self.cfg.max_attempts:  # attempts that never ended
            oldest = next(iter(self.running))
            self.book(self.running[oldest], self.running[oldest].start, now)
            del self.running[oldest]
        return att

    def book(self, att: Attempt, start: int, end: int) -> None:
        """Add an attempt's GPU-hours (and its one attempt) to its subjects' buckets."""
        bms = self.cfg.bucket_ms
        b0 = start // bms
        b1 = max(b0, (end - 1) // bms) if end > start else b0
        spans = [(b, max(0, min(end, (b + 1) * bms) - max(start, b * bms)) / HOUR_MS) for b in range(b0, b1 + 1)]
        for subj, g in att.weights.items():
            bk = self.cells.setdefault(subj, {})
            for b, hours in spans:
                cell = bk.get(b)
                if cell is None:
                    cell = bk[b] = [0.0, 0.0]
                cell[0] += g * hours
            bk.setdefault(b0, [0.0, 0.0])[1] += 1.0

    def window(self, now: int, window_ms: int) -> dict[str, list[float]]:
        """subject -> [gpu_hours, attempts] over [now - window, now] (running attempts included)."""
        bms = self.cfg.bucket_ms
        lo_b = (now - window_ms) // bms
        hi_b = now // bms
        out: dict[str, list[float]] = {}
        for subj, bk in self.cells.items():
            gh = at = 0.0
            for b, cell in bk.items():
                if lo_b <= b <= hi_b:
                    gh += cell[0]
                    at += cell[1]
            if gh or at:
                out[subj] = [gh, at]
        lo = now - window_ms
        for att in self.running.values():
            hours = max(0, now - max(att.start, lo)) / HOUR_MS
            started_in = att.start >= lo
            for subj, g in att.weights.items():
                cell = out.setdefault(subj, [0.0, 0.0])
                cell[0] += g * hours
                if started_in:
                    cell[1] += 1.0
        # GPU subjects: a node's exposure spread over its GPUs
        for subj in [s for s in out if s.startswith("node:")]:
            n = subj[5:]
            k = self.inv.gpn.get(n, 0)
            gh, at = out[subj]
            for i in range(k):
                out[f"gpu:{n}/{i}"] = [gh / k, at]
        return out

    def attempts_since(self, lo: int) -> list[Attempt]:
        return [a for a in list(self.closed.values()) + list(self.running.values()) if a.start >= lo]

    def prune(self, horizon: int) -> None:
        hb = horizon // self.cfg.bucket_ms
        for subj in list(self.cells):
            bk = self.cells[subj]
            for b in [b for b in bk if b < hb]:
                del bk[b]
            if not bk:
                del self.cells[subj]
        for k in [k for k, a in self.closed.items() if (a.end or 0) < horizon]:
            del self.closed[k]

    def dump(self) -> dict[str, Any]:
        return {"att": [a.dump(True) for a in self.running.values()] + [a.dump(False) for a in self.closed.values()],
                "expo": {s: [[b, c[0], c[1]] for b, c in bk.items()] for s, bk in self.cells.items()}}

    def load(self, st: dict[str, Any]) -> None:
        for row in st["att"]:
            a, running = Attempt.load(row)
            (self.running if running else self.closed)[(a.job, a.attempt)] = a
        self.cells = {s: {b: [gh, at] for b, gh, at in cells} for s, cells in st["expo"].items()}
