"""``Signal``: a notable anomaly a detector found on one subject, the unit of the join.

Subjects: ``gpu:n1/3``, ``node:n1``, ``port:leaf-03/Eth1/7``, ``rdma:n1/mlx5_0/1``,
``path:/ckpt``, ``segment:leaf-03``, ``version:driver=570.86.10``, ``job:123``.

``category`` is the root-cause category the signal would blame when it is on a job's
path and in its window (None for symptoms: a stalled rank, a utilisation collapse, an
NCCL timeout); ``component`` is the culprit in the contract's component form;
``score`` (0..1) is how strongly the signal alone explains a job interruption.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal, Union

from msgspec import Struct

SignalSeverity = Literal["info", "warning", "critical"]


class Signal(Struct, kw_only=True, gc=False):
    id: str
    ts: int
    layer: str
    kind: str
    subject: str
    node: Union[str, None]
    severity: SignalSeverity
    summary: str
    evidence: list[str] = []
    data: dict[str, Any] = {}
    category: Union[str, None] = None
    component: Union[str, None] = None
    score: float = 0.0
    job: Union[str, None] = None


def signal_id(kind: str, subject: str, first_evidence: str) -> str:
    """Stable id: the same detector finding on the same evidence gives the same id."""
    h = hashlib.blake2b(f"{kind}|{subject}|{first_evidence}".encode(), digest_size=10)
    return "sig-" + h.hexdigest()


def make(kind: str, subject: str, ev: Any, layer: str, severity: SignalSeverity, summary: str, *,
         category: str | None = None, component: str | None = None, score: float = 0.0,
         data: dict[str, Any] | None = None, evidence: list[str] | None = None,
         node: str | None = None, job: str | None = None) -> Signal:
    """Build a signal anchored on event ``ev`` (its ts, node and id)."""
    evid = evidence if evidence is not None else [ev.id]
    return Signal(
        id=signal_id(kind, subject, evid[0]), ts=ev.ts, layer=layer, kind=kind, subject=subject,
        node=node if node is not None else ev.node, severity=severity, summary=summary,
        evidence=evid, data=data or {}, category=category, component=component, score=score,
        job=job if job is not None else getattr(ev, "job", None),
    )
