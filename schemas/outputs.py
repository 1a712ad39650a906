"""Output records of the pipeline: alerts, incidents, findings (contract v1, "Output topics").

The stream agents, ``faultline diagnose``, replay and the ClickHouse sink all build and
read these same structs; ``schemas.encode`` serialises them.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from msgspec import Meta, Struct, field

from .events import INT64_MAX, INT64_MIN

#: every integer of an output record is a signed 64-bit int: built from range-checked
#: events they always are; the range makes a decoder of an output topic (the sink, the
#: findings agent) reject a foreign record whose integer would fail a later encode
Int64 = Annotated[int, Meta(ge=INT64_MIN, le=INT64_MAX)]

AlertSeverity = Literal["info", "warning", "critical"]

#: root-cause categories of the contract, in the order the spec lists them
CATEGORIES: tuple[str, ...] = (
    "gpu_hardware", "gpu_nvlink", "node_hardware", "thermal_throttle", "network_link",
    "network_congestion", "storage_slow", "storage_unavailable", "storage_full", "gpu_oom",
    "host_oom", "driver_software", "change_regression", "application", "scheduler", "unknown",
)
LAYERS: tuple[str, ...] = ("gpu", "hw", "net", "storage", "sched", "runtime", "inventory")


class Alert(Struct, kw_only=True):
    id: str
    ts: Int64
    severity: AlertSeverity
    detector: str
    summary: str
    node: Union[str, None] = None
    job: Union[str, None] = None
    evidence: list[str] = []
    #: what the alert is about, e.g. ``gpu:n1/3``, ``port:leaf-03/Eth1/7`` (extension)
    subject: Union[str, None] = None
    #: what ``schemas.bounds`` left out to keep the record bounded: field -> count of list
    #: items (or characters, for text) left out, e.g. ``{"evidence": 412}`` (extension; empty
    #: when nothing was)
    omitted: dict[str, Int64] = {}


class Cause(Struct, kw_only=True):
    category: str
    component: str
    summary: str
    confidence: float
    evidence: list[str] = []  # event ids (used by hypotheses)


class EvidenceItem(Struct, kw_only=True):
    id: str
    ts: Int64
    layer: str
    node: Union[str, None]
    summary: str


class Checkpoint(Struct, kw_only=True):
    ts: Int64
    step: Int64
    path: str


class Affected(Struct, kw_only=True):
    nodes: list[str] = []
    gpus: list[str] = []   # "node/index"
    ports: list[str] = []  # "device/port"
    paths: list[str] = []


class Retry(Struct, kw_only=True):
    attempt: Int64
    state: str
    ts: Int64
    nodes: list[str]
    same_nodes: bool


class Incident(Struct, kw_only=True):
    id: str
    revision: Int64
    job: str
    attempt: Int64
    tenant: Union[str, None]
    failure_ts: Int64
    symptom: str
    root_cause: Cause
    hypotheses: list[Cause] = []
    ruled_out: list[str] = []
    evidence: list[EvidenceItem] = []
    last_checkpoint: Union[Checkpoint, None] = None
    lost_gpu_hours: float = 0.0
    affected: Affected = field(default_factory=Affected)
    retry: Union[Retry, None] = None
    # extensions (optional, additive)
    state: Union[str, None] = None      # terminal sched state, or "stalled"
    start_ts: Union[Int64, None] = None
    gpus: Int64 = 0
    image: Union[str, None] = None
    #: what ``schemas.bounds.cap_incident`` left out, as in ``Alert.omitted``
    omitted: dict[str, Int64] = {}


class Finding(Struct, kw_only=True):
    id: str             # stable: same subject + window -> same id
    ts: Int64
    kind: str           # repeat_offender | change_regression | version_drift
    dimension: str      # node | gpu | port | segment | image | driver | path | version | job
    subject: str
    window_start: Int64
    window_end: Int64
    count: Int64
    exposure: float
    exposure_unit: str  # gpu_hours | attempts
    fleet_rate: float
    score: float        # p-value (lower = more significant) unless stated in summary
    summary: str
    action: str
    incidents: list[str] = []
    severity: AlertSeverity = "warning"
    #: what ``schemas.bounds.cap_finding`` left out, as in ``Alert.omitted``
    omitted: dict[str, Int64] = {}
