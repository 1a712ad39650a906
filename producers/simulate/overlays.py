"""Anomaly overlays: time-boxed changes a fault (or decoy) makes to background telemetry.

Each overlay is ``(t_from, t_to, effects)``; an effect value is a number or a
``(start, end)`` pair ramped linearly over the overlay's window. Telemetry looks an
overlay up only for subjects that have one, so the common path costs a dict miss.
"""

from __future__ import annotations

from collections import defaultdict

INF = 1 << 62


def ramp(v, t: int, t0: int, t1: int) -> float:
    if isinstance(v, tuple):
        a, b = v
        if t1 >= INF or t1 <= t0:
            return b
        f = min(1.0, max(0.0, (t - t0) / (t1 - t0)))
        return a + (b - a) * f
    return v


class Overlays:
    def __init__(self) -> None:
        self.gpu: dict[tuple[int, int], list] = defaultdict(list)      # (node, gpu)
        self.node: dict[int, list] = defaultdict(list)                 # node
        self.port: dict[int, list] = defaultdict(list)                 # switch port index
        self.rdma: dict[tuple[int, int], list] = defaultdict(list)     # (node, nic)
        self.storage: dict[str, list] = defaultdict(list)              # mount path
        self.reboots: dict[int, list[int]] = defaultdict(list)         # node -> reboot ts

    @staticmethod
    def active(lst: list, t: int):
        for t0, t1, eff in lst:
            if t0 <= t < t1:
                yield t0, t1, eff

    def add_gpu(self, node: int, gpu: int, t0: int, t1: int, **eff) -> None:
        self.gpu[(node, gpu)].append((t0, t1, eff))

    def add_node(self, node: int, t0: int, t1: int, **eff) -> None:
        self.node[node].append((t0, t1, eff))

    def add_port(self, port: int, t0: int, t1: int, **eff) -> None:
        self.port[port].append((t0, t1, eff))

    def add_rdma(self, node: int, nic: int, t0: int, t1: int, **eff) -> None:
        self.rdma[(node, nic)].append((t0, t1, eff))

    def add_storage(self, path: str, t0: int, t1: int, nodes: set[int] | None = None, **eff) -> None:
        eff["nodes"] = nodes
        self.storage[path].append((t0, t1, eff))
