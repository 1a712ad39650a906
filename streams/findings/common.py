"""What every findings unit shares: the dimensions and their subject forms, the actions,
the tunables (``FindingsConfig``), stable ids and the finding -> alert mapping."""

from __future__ import annotations

import datetime as _dt
import hashlib
from dataclasses import dataclass, field

from ...schemas.outputs import Alert, Finding

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
    #: an alert within this much of an interrupted attempt on the same subject (from one of
    #: its nodes) is that failure seen early, not an alert of its own
    alert_merge_ms: int = 30 * 60_000
    #: dimensions where *warning* alerts are reported too (shared resources that degrade
    #: before they fail); critical alerts are reported on every blame dimension. Alerts are
    #: reported next to the count, never counted as interruptions.
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


def finding_id(kind: str, dimension: str, subject: str, window: int | str, bucket: int) -> str:
    """Stable id: same kind, dimension, subject, window and episode (or change, attempt) -> same id."""
    h = hashlib.sha1(f"{kind}|{dimension}|{subject}|{window}|{bucket}".encode()).hexdigest()
    return "fd-" + h[:24]


def dimension_of(subject: str) -> str | None:
    for dim in ("image", "driver", "node", "gpu", "port", "segment", "path"):
        if subject.startswith(DIMENSIONS[dim]):
            return dim
    return None


def name_of(subject: str) -> str:
    return subject.split(":", 1)[1] if ":" in subject else subject


def fmt_window(ms: int) -> str:
    if ms % DAY_MS == 0:
        return f"{ms // DAY_MS}d"
    if ms % HOUR_MS == 0:
        return f"{ms // HOUR_MS}h"
    return f"{ms // 60_000}m"


def short(nodes: list[str]) -> str:
    return ",".join(nodes[:4]) + (f",+{len(nodes) - 4}" if len(nodes) > 4 else "")


def iso(ms: int) -> str:
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")


def cap(d: dict, limit: int) -> None:
    """Drop the oldest entries (insertion order) of ``d`` beyond ``limit``."""
    while len(d) > limit:
        del d[next(iter(d))]


def to_alert(f: Finding) -> Alert:
    """The real-time alert for a finding (same id stem, so re-emission is idempotent)."""
    node = None
    if f.dimension in ("node", "gpu"):
        node = name_of(f.subject).split("/", 1)[0]
    job = name_of(f.subject) if f.dimension == "job" else None
    return Alert(
        id="al-" + f.id[3:], ts=f.ts, severity=f.severity, detector=f.kind, node=node, job=job,
        summary=f.summary, evidence=list(f.incidents), subject=f.subject,
    )
