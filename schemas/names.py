"""Node names, one spelling per node (issue 16 item 8).

Collectors name one node differently: Slurm says ``node0042``, the kernel and NVML agents
``node0042.cluster.local``, a BMC ``NODE0042.CLUSTER.LOCAL``. Every event is brought to one
canonical name as it is decoded (``schemas.codec``), so the joins per node, the incidents and
the findings see one node.

The rule is configurable with ``FAULTLINE_NODE_NAMES`` (read once, at import; ``configure``
changes it in a process):

- ``short`` (default): the host name before the first dot, lower case
  (``NODE0042.CLUSTER.LOCAL`` -> ``node0042``). An IPv4 address is kept whole.
- ``fqdn``: the full name, lower case (sites whose short names collide across domains).
- ``exact``: names as the collectors send them (case-sensitive, no domain stripped).

What is renamed: the envelope's ``node``, and a ``sched.job``'s ``nodes`` and ``ranks`` values.
"""

from __future__ import annotations

import os
import re

from .events import SchedJob

MODES = ("short", "fqdn", "exact")
#: the default: a site's nodes are known by their short host names, whatever case or domain
DEFAULT_MODE = "short"
_IPV4 = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")

_mode = DEFAULT_MODE


def configure(mode: str | None = None) -> str:
    """Set the rule (``None``: from ``FAULTLINE_NODE_NAMES``, else the default); returns it."""
    global _mode
    m = (mode if mode is not None else os.environ.get("FAULTLINE_NODE_NAMES") or DEFAULT_MODE).strip().lower()
    if m not in MODES:
        raise ValueError(f"FAULTLINE_NODE_NAMES={m!r}: use one of {', '.join(MODES)}")
    _mode = m
    return m


def mode() -> str:
    return _mode


def canonical(name: str) -> str:
    """The canonical spelling of node ``name`` under the configured rule."""
    if _mode == "exact" or not name:
        return name
    n = name.lower()
    if _mode == "short" and "." in n and not _IPV4.fullmatch(n):
        n = n.split(".", 1)[0] or n
    return n


def _plain(name: str) -> bool:
    """Already canonical under short/fqdn (the common case, checked without building a string)."""
    return name.islower() and (_mode == "fqdn" or "." not in name)


def canonical_event(ev):
    """``ev`` with its node names canonical (in place; returned for chaining). On the decode
    hot path: a name already canonical costs two string checks."""
    n = ev.node
    if n is not None and ("." in n or not n.islower()) and _mode != "exact" and not _plain(n):
        ev.node = canonical(n)
    if type(ev) is SchedJob and _mode != "exact":
        d = ev.data
        if not all(_plain(x) for x in d.nodes):
            d.nodes = [canonical(x) for x in d.nodes]
        if d.ranks and not all(v is None or _plain(v) for v in d.ranks.values()):
            d.ranks = {r: (None if v is None else canonical(v)) for r, v in d.ranks.items()}
    return ev


def canonical_component(component: str) -> str:
    """A component in the contract's form with its node part canonical (``gpu:N/3``, ``node:N``)."""
    kind, sep, rest = component.partition(":")
    if kind == "node":
        return f"node:{canonical(rest)}"
    if kind == "gpu":
        n, slash, g = rest.rpartition("/")
        return f"gpu:{canonical(n)}/{g}" if slash else f"gpu:{canonical(rest)}"
    return component


configure()
