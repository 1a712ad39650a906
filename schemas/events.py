"""Typed models of every event kind of the faultline contract v1 (``shared/spec/events.md``).

The models are ``msgspec.Struct`` classes: decoding JSON straight into them validates
types, enums and ranges in one C pass (see ``bench/contract.py`` for the measurement
that chose msgspec over orjson+pydantic). ``Event`` is a tagged union on ``kind``.

Data fields that identify a thing (GPU index, port, mount path, state) are required;
measurements are ``None`` when the source could not read them (an NVML field a GPU
does not support is null, not a crash).
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

import msgspec
from msgspec import Meta, Struct, field

CONTRACT_VERSION = 1

Str64 = Annotated[str, Meta(min_length=1, max_length=64)]
#: `node` / `job` of the kinds the contract scopes to a node / a job: required, non-empty
NodeName = Annotated[str, Meta(min_length=1)]
JobId = Annotated[str, Meta(min_length=1)]

# Integer ranges (the contract says "int"; these bounds are faultline's, stated in
# docs/contract-bounds.md and in `faultline schema export`). msgspec decodes an integer of
# any size into a Python int, which later fails every msgpack (state, changelog) and
# orjson encode with an OverflowError/TypeError: one such event wedged every batch after
# it. So every integer is a signed 64-bit int, checked inside msgspec's C decoder (no
# measurable cost, bench/contract.py). Counters are >= 0 and also capped at 2^63-1, not
# 2^64-1: the store reads them as Int64 and the detectors add two of them (in + out
# errors), which must still fit msgpack's uint64. Epoch-ms times are 0..2^53-1 (exact in a
# double for JSON/JS readers; the envelope `ts` is further held to now + 24 h).
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
MAX_EPOCH_MS = 2**53 - 1
Int64 = Annotated[int, Meta(ge=INT64_MIN, le=INT64_MAX)]
NonNeg = Annotated[int, Meta(ge=0, le=INT64_MAX)]
EpochMs = Annotated[int, Meta(ge=0, le=MAX_EPOCH_MS)]
Pct = Annotated[float, Meta(ge=0, le=100)]
Counter = Union[NonNeg, None]  # cumulative counters as the device reports them
Num = Union[float, None]

Severity = Literal["ok", "warning", "critical"]
Throttle = Literal["hw_slowdown", "sw_thermal", "hw_thermal", "power_brake", "sw_power_cap"]
JobState = Literal[
    "pending", "running", "completed", "failed", "node_fail", "timeout",
    "out_of_memory", "cancelled", "preempted", "requeued",
]
#: sched.job states that end an attempt
TERMINAL_JOB_STATES = frozenset(
    {"completed", "failed", "node_fail", "timeout", "out_of_memory", "cancelled", "preempted", "requeued"}
)
#: terminal states that make an incident (the contract's "interruption")
INTERRUPTION_STATES = frozenset({"failed", "node_fail", "timeout", "out_of_memory", "preempted"})


class _Data(Struct, kw_only=True, omit_defaults=False, gc=False):
    """Base of every ``data`` object: unknown extra fields are accepted and ignored.

    ``gc=False`` (as the envelope): decoded events hold only scalars, strings, lists and
    dicts, so they can never be part of a reference cycle; untracked, the collector does
    not walk the millions of them a worker holds in buffers (diagnose is ~1.4x faster)."""


# ---------------------------------------------------------------- accelerator (fl.gpu)
class GpuSampleData(_Data):
    gpu: NonNeg
    uuid: str
    util_pct: Union[Pct, None] = None
    mem_used_mib: Num = None
    mem_total_mib: Num = None
    temp_c: Num = None
    power_w: Num = None
    sm_clock_mhz: Num = None
    # a tuple, not a list: the empty one is a shared constant and a tuple of strings is not
    # tracked by the garbage collector (a list per GPU sample made the collector walk them all)
    throttle: tuple[Throttle, ...] = ()
    ecc_sbe: Counter = None
    ecc_dbe: Counter = None
    nvlink_errors: Counter = None
    pcie_replay: Counter = None
    retired_pages: Counter = None
    remapped_rows_pending: Counter = None


class GpuXidData(_Data):
    xid: NonNeg
    message: str
    gpu: Union[NonNeg, None] = None
    pci: Union[str, None] = None
    pid: Union[Int64, None] = None


# ---------------------------------------------------------------- hardware (fl.hw)
class HwSensorData(_Data):
    sensor: str
    type: Literal["temperature", "fan", "voltage", "power", "current", "other"]
    value: Num
    unit: str
    status: Severity


class HwSelData(_Data):
    entry_id: str
    severity: Severity
    sensor_type: str
    message: str
    message_id: Union[str, None] = None


# ---------------------------------------------------------------- network (fl.net)
class NetPortData(_Data):
    device: str
    port: str
    oper_status: Literal["up", "down"]
    speed_mbps: Union[NonNeg, None] = None
    in_errors: Counter = None
    out_errors: Counter = None
    in_discards: Counter = None
    out_discards: Counter = None
    in_octets: Counter = None
    out_octets: Counter = None


class NetLinkData(_Data):
    device: str
    port: str
    state: Literal["up", "down"]


class NetRdmaData(_Data):
    device: str
    port: NonNeg
    counters: dict[str, NonNeg]


# ---------------------------------------------------------------- storage (fl.storage)
class StorageSampleData(_Data):
    path: str
    fs_type: Union[str, None] = None
    read_iops: Num = None
    write_iops: Num = None
    read_mbps: Num = None
    write_mbps: Num = None
    read_lat_ms: Num = None
    write_lat_ms: Num = None
    queue_depth: Num = None
    used_pct: Union[Pct, None] = None


class StorageMountData(_Data):
    path: str
    state: Literal["ok", "stale", "missing", "readonly", "full"]
    error: Union[str, None] = None


# ---------------------------------------------------------------- scheduler (fl.sched)
class SchedJobData(_Data):
    state: JobState
    attempt: NonNeg
    nodes: list[str]
    gpus: NonNeg
    name: str = ""
    user: str = ""
    ranks: dict[str, Union[str, None]] = {}
    exit_code: Union[Int64, None] = None
    signal: Union[Int64, None] = None
    image: Union[str, None] = None
    start_ts: Union[EpochMs, None] = None
    end_ts: Union[EpochMs, None] = None
    reason: Union[str, None] = None


class SchedNodeData(_Data):
    state: Literal["idle", "allocated", "drain", "down", "fail"]
    reason: Union[str, None] = None


# ---------------------------------------------------------------- runtime (fl.runtime)
class RuntimeLogData(_Data):
    stream: Literal["stdout", "stderr", "kernel", "container"]
    message: str
    rank: Union[Int64, None] = None
    signature: Union[str, None] = None


class RuntimeProgressData(_Data):
    step: NonNeg
    rank: Union[Int64, None] = None
    step_time_s: Num = None
    samples_per_s: Num = None


class RuntimeCheckpointData(_Data):
    phase: Literal["started", "succeeded", "failed"]
    step: NonNeg
    path: str
    bytes: Counter = None
    duration_s: Num = None
    error: Union[str, None] = None


class RuntimeContainerData(_Data):
    container: str
    event: Literal["oom_killed", "exited", "killed", "restarted"]
    exit_code: Union[Int64, None] = None


# ---------------------------------------------------------------- inventory (fl.inventory)
class InventoryChangeData(_Data):
    component: str
    to: str
    from_: Union[str, None] = field(default=None, name="from")
    actor: Union[str, None] = None
    ticket: Union[str, None] = None


class TopologyLink(_Data):
    nic: str
    switch: str
    port: str
    segment: Union[str, None] = None


class TopologyStorage(_Data):
    path: str
    backend: str
    server: Union[str, None] = None


class InventoryTopologyData(_Data):
    links: list[TopologyLink] = []
    storage: list[TopologyStorage] = []


# ---------------------------------------------------------------- envelope + kinds
class Envelope(Struct, kw_only=True, tag_field="kind", gc=False):
    """Fields every event carries. ``kind`` is the union tag (each subclass's ``tag``)."""

    v: Literal[1]
    id: Str64
    ts: EpochMs
    source: str
    node: Union[str, None] = None
    job: Union[str, None] = None
    tenant: Union[str, None] = None

    # set per kind by the subclasses below; node-/job-scoped kinds redeclare `node`/`job`
    # as a required non-empty string, so the check runs inside msgspec's C decoder
    # (a __post_init__ hook cost ~25% of decode throughput, see bench/contract.py)
    layer = ""
    needs_node = False
    needs_job = False
    #: the union tag as a plain class attribute set by ``_kind`` (a property reading
    #: ``__struct_config__.tag`` was 4 % of the worker's CPU: bench/worker.py --profile);
    #: not a field (no annotation), so msgspec still encodes the tag from the config
    kind = ""


def _kind(tag: str, layer: str, *, node: bool = False, job: bool = False):
    def wrap(cls):
        if cls.__struct_config__.tag != tag:
            raise TypeError(f"{cls.__name__}: _kind({tag!r}) but the struct's tag is {cls.__struct_config__.tag!r}")
        cls.kind = tag
        cls.layer = layer
        cls.needs_node = node
        cls.needs_job = job
        return cls

    return wrap


@_kind("gpu.sample", "gpu", node=True)
class GpuSample(Envelope, tag="gpu.sample"):
    node: NodeName
    data: GpuSampleData


@_kind("gpu.xid", "gpu", node=True)
class GpuXid(Envelope, tag="gpu.xid"):
    node: NodeName
    data: GpuXidData


@_kind("hw.sensor", "hw", node=True)
class HwSensor(Envelope, tag="hw.sensor"):
    node: NodeName
    data: HwSensorData


@_kind("hw.sel", "hw", node=True)
class HwSel(Envelope, tag="hw.sel"):
    node: NodeName
    data: HwSelData


@_kind("net.port", "net")
class NetPort(Envelope, tag="net.port"):
    data: NetPortData


@_kind("net.link", "net")
class NetLink(Envelope, tag="net.link"):
    data: NetLinkData


@_kind("net.rdma", "net")
class NetRdma(Envelope, tag="net.rdma"):
    data: NetRdmaData


@_kind("storage.sample", "storage", node=True)
class StorageSample(Envelope, tag="storage.sample"):
    node: NodeName
    data: StorageSampleData


@_kind("storage.mount", "storage", node=True)
class StorageMount(Envelope, tag="storage.mount"):
    node: NodeName
    data: StorageMountData


@_kind("sched.job", "sched", job=True)
class SchedJob(Envelope, tag="sched.job"):
    job: JobId
    data: SchedJobData


@_kind("sched.node", "sched", node=True)
class SchedNode(Envelope, tag="sched.node"):
    node: NodeName
    data: SchedNodeData


@_kind("runtime.log", "runtime", job=True)
class RuntimeLog(Envelope, tag="runtime.log"):
    job: JobId
    data: RuntimeLogData


@_kind("runtime.progress", "runtime", job=True)
class RuntimeProgress(Envelope, tag="runtime.progress"):
    job: JobId
    data: RuntimeProgressData


@_kind("runtime.checkpoint", "runtime", job=True)
class RuntimeCheckpoint(Envelope, tag="runtime.checkpoint"):
    job: JobId
    data: RuntimeCheckpointData


@_kind("runtime.container", "runtime", job=True)
class RuntimeContainer(Envelope, tag="runtime.container"):
    job: JobId
    data: RuntimeContainerData


@_kind("inventory.versions", "inventory", node=True)
class InventoryVersions(Envelope, tag="inventory.versions"):
    node: NodeName
    data: dict[str, str]


@_kind("inventory.change", "inventory", node=True)
class InventoryChange(Envelope, tag="inventory.change"):
    node: NodeName
    data: InventoryChangeData


@_kind("inventory.topology", "inventory", node=True)
class InventoryTopology(Envelope, tag="inventory.topology"):
    node: NodeName
    data: InventoryTopologyData


KIND_MODELS: dict[str, type[Envelope]] = {
    cls.__struct_config__.tag: cls  # type: ignore[misc]
    for cls in (
        GpuSample, GpuXid, HwSensor, HwSel, NetPort, NetLink, NetRdma, StorageSample,
        StorageMount, SchedJob, SchedNode, RuntimeLog, RuntimeProgress, RuntimeCheckpoint,
        RuntimeContainer, InventoryVersions, InventoryChange, InventoryTopology,
    )
}
KINDS: tuple[str, ...] = tuple(KIND_MODELS)

Event = Union[
    GpuSample, GpuXid, HwSensor, HwSel, NetPort, NetLink, NetRdma, StorageSample,
    StorageMount, SchedJob, SchedNode, RuntimeLog, RuntimeProgress, RuntimeCheckpoint,
    RuntimeContainer, InventoryVersions, InventoryChange, InventoryTopology,
]
