"""One valid example per kind of the contract v1, as plain JSON-ready dicts.

Used by the contract tests, the schema-export test and ``bench/contract.py``; other
tests may build on them: ``example("gpu.xid", node="n7", data={"xid": 48})`` returns a
deep copy with envelope fields replaced and ``data`` fields merged.
"""

from __future__ import annotations

import copy
from typing import Any

#: 2025-11-24T12:00:00Z, a fixed past instant so examples never trip the future-ts rule
EXAMPLE_TS = 1_764_000_000_000

EXAMPLES: dict[str, dict[str, Any]] = {
    "gpu.sample": {
        "v": 1, "id": "01JEXAMPLEGPUSAMPLE000000001", "ts": EXAMPLE_TS, "kind": "gpu.sample",
        "source": "nvml@gpu-017", "node": "gpu-017", "job": "48213", "tenant": "llm-pretrain",
        "data": {"gpu": 3, "uuid": "GPU-5e8c2a1d-77f1-4c3e-9a0b-1f2e3d4c5b6a", "util_pct": 97.5,
                 "mem_used_mib": 71234.0, "mem_total_mib": 81559.0, "temp_c": 71.0,
                 "power_w": 655.2, "sm_clock_mhz": 1980.0, "throttle": ["sw_power_cap"],
                 "ecc_sbe": 2, "ecc_dbe": 0, "nvlink_errors": 0, "pcie_replay": 1,
                 "retired_pages": 0, "remapped_rows_pending": 0},
    },
    "gpu.xid": {
        "v": 1, "id": "01JEXAMPLEGPUXID0000000001", "ts": EXAMPLE_TS, "kind": "gpu.xid",
        "source": "kmsg@gpu-017", "node": "gpu-017", "job": None, "tenant": None,
        "data": {"gpu": 3, "pci": "0000:3b:00.0", "xid": 79, "pid": None,
                 "message": "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, "
                            "GPU has fallen off the bus."},
    },
    "hw.sensor": {
        "v": 1, "id": "01JEXAMPLEHWSENSOR00000001", "ts": EXAMPLE_TS, "kind": "hw.sensor",
        "source": "ipmi@gpu-017-bmc", "node": "gpu-017",
        "data": {"sensor": "PSU1 Temp", "type": "temperature", "value": 48.0, "unit": "degrees C",
                 "status": "ok"},
    },
    "hw.sel": {
        "v": 1, "id": "01JEXAMPLEHWSEL00000000001", "ts": EXAMPLE_TS, "kind": "hw.sel",
        "source": "redfish@gpu-017-bmc", "node": "gpu-017",
        "data": {"entry_id": "42", "severity": "critical", "sensor_type": "Power Supply",
                 "message_id": "PSU0003", "message": "Power supply PSU2 input lost"},
    },
    "net.port": {
        "v": 1, "id": "01JEXAMPLENETPORT000000001", "ts": EXAMPLE_TS, "kind": "net.port",
        "source": "snmp@leaf-03", "node": "gpu-017",
        "data": {"device": "leaf-03", "port": "Ethernet1/7", "oper_status": "up",
                 "speed_mbps": 400000, "in_errors": 12, "out_errors": 0, "in_discards": 3,
                 "out_discards": 0, "in_octets": 981234567890, "out_octets": 876543210987},
    },
    "net.link": {
        "v": 1, "id": "01JEXAMPLENETLINK000000001", "ts": EXAMPLE_TS, "kind": "net.link",
        "source": "snmptrap@leaf-03", "node": None,
        "data": {"device": "leaf-03", "port": "Ethernet1/7", "state": "down"},
    },
    "net.rdma": {
        "v": 1, "id": "01JEXAMPLENETRDMA000000001", "ts": EXAMPLE_TS, "kind": "net.rdma",
        "source": "sysfs@gpu-017", "node": "gpu-017",
        "data": {"device": "mlx5_0", "port": 1,
                 "counters": {"link_downed": 0, "symbol_error": 0, "port_rcv_errors": 0,
                              "local_ack_timeout_err": 17, "out_of_sequence": 120,
                              "packet_seq_err": 4, "np_cnp_sent": 3012, "rp_cnp_handled": 2987,
                              "np_ecn_marked_roce_packets": 45012}},
    },
    "storage.sample": {
        "v": 1, "id": "01JEXAMPLESTORSAMPLE000001", "ts": EXAMPLE_TS, "kind": "storage.sample",
        "source": "node_exporter@gpu-017", "node": "gpu-017",
        "data": {"path": "/ckpt", "fs_type": "lustre", "read_iops": 1200.0, "write_iops": 310.5,
                 "read_mbps": 850.0, "write_mbps": 2100.0, "read_lat_ms": 1.8,
                 "write_lat_ms": 4.2, "queue_depth": 3.0, "used_pct": 61.5},
    },
    "storage.mount": {
        "v": 1, "id": "01JEXAMPLESTORMOUNT0000001", "ts": EXAMPLE_TS, "kind": "storage.mount",
        "source": "mountwatch@gpu-017", "node": "gpu-017",
        "data": {"path": "/ckpt", "state": "stale", "error": "Stale file handle"},
    },
    "sched.job": {
        "v": 1, "id": "01JEXAMPLESCHEDJOB00000001", "ts": EXAMPLE_TS, "kind": "sched.job",
        "source": "slurm@ctl-1", "node": None, "job": "48213", "tenant": "llm-pretrain",
        "data": {"state": "failed", "attempt": 0, "nodes": ["gpu-017", "gpu-018"], "gpus": 16,
                 "ranks": {"0": "gpu-017", "8": "gpu-018"}, "exit_code": 1, "signal": None,
                 "image": "registry.local/train:v2", "name": "llama-70b-pt", "user": "alice",
                 "start_ts": EXAMPLE_TS - 3_600_000, "end_ts": EXAMPLE_TS, "reason": "NonZeroExitCode"},
    },
    "sched.node": {
        "v": 1, "id": "01JEXAMPLESCHEDNODE0000001", "ts": EXAMPLE_TS, "kind": "sched.node",
        "source": "slurm@ctl-1", "node": "gpu-017",
        "data": {"state": "drain", "reason": "GPU XID 79"},
    },
    "runtime.log": {
        "v": 1, "id": "01JEXAMPLERTLOG00000000001", "ts": EXAMPLE_TS, "kind": "runtime.log",
        "source": "logtail@gpu-018", "node": "gpu-018", "job": "48213",
        "data": {"rank": 12, "stream": "stderr",
                 "message": "[Rank 12] Watchdog caught collective operation timeout: "
                            "WorkNCCL(SeqNum=88123, OpType=ALLREDUCE) ran for 600000 ms",
                 "signature": "nccl_timeout"},
    },
    "runtime.progress": {
        "v": 1, "id": "01JEXAMPLERTPROGRESS000001", "ts": EXAMPLE_TS, "kind": "runtime.progress",
        "source": "trainer@gpu-017", "node": "gpu-017", "job": "48213",
        "data": {"rank": 0, "step": 15230, "step_time_s": 2.41, "samples_per_s": 425.0},
    },
    "runtime.checkpoint": {
        "v": 1, "id": "01JEXAMPLERTCKPT0000000001", "ts": EXAMPLE_TS, "kind": "runtime.checkpoint",
        "source": "trainer@gpu-017", "node": "gpu-017", "job": "48213",
        "data": {"phase": "succeeded", "step": 15000, "path": "/ckpt/48213/step-15000",
                 "bytes": 140_000_000_000, "duration_s": 95.2, "error": None},
    },
    "runtime.container": {
        "v": 1, "id": "01JEXAMPLERTCONTAINER00001", "ts": EXAMPLE_TS, "kind": "runtime.container",
        "source": "containerd@gpu-018", "node": "gpu-018", "job": "48213",
        "data": {"container": "train-48213-rank8", "event": "oom_killed", "exit_code": 137},
    },
    "inventory.versions": {
        "v": 1, "id": "01JEXAMPLEINVVERSIONS00001", "ts": EXAMPLE_TS, "kind": "inventory.versions",
        "source": "inventory@gpu-017", "node": "gpu-017",
        "data": {"driver": "570.86.10", "cuda": "12.8", "nccl": "2.25.1", "gpu_firmware": "96.00.9F.00.01",
                 "bmc_firmware": "1.12", "bios": "2.3.4", "kernel": "6.8.0-49-generic",
                 "os": "Ubuntu 24.04", "image": "registry.local/train:v2", "framework": "torch 2.6.0",
                 "container_runtime": "containerd 1.7.24", "ofed": "24.10-1.1.4"},
    },
    "inventory.change": {
        "v": 1, "id": "01JEXAMPLEINVCHANGE0000001", "ts": EXAMPLE_TS, "kind": "inventory.change",
        "source": "ansible@deploy-1", "node": "gpu-017",
        "data": {"component": "driver", "from": "565.57.01", "to": "570.86.10",
                 "actor": "ops-bot", "ticket": "CHG-1234"},
    },
    "inventory.topology": {
        "v": 1, "id": "01JEXAMPLEINVTOPOLOGY00001", "ts": EXAMPLE_TS, "kind": "inventory.topology",
        "source": "inventory@gpu-017", "node": "gpu-017",
        "data": {"links": [{"nic": "mlx5_0", "switch": "leaf-03", "port": "Ethernet1/7", "segment": "leaf-03"},
                           {"nic": "mlx5_1", "switch": "leaf-04", "port": "Ethernet1/7", "segment": "leaf-04"}],
                 "storage": [{"path": "/ckpt", "backend": "lustre", "server": "mds-1"}]},
    },
}

#: data fields each kind requires (no default in the model), for tests of missing fields
REQUIRED_DATA: dict[str, tuple[str, ...]] = {}
#: envelope fields every event requires
REQUIRED_ENVELOPE: tuple[str, ...] = ("v", "id", "ts", "kind", "source", "data")


def _required_data() -> dict[str, tuple[str, ...]]:
    import msgspec

    from .events import KIND_MODELS

    out = {}
    for kind, model in KIND_MODELS.items():
        data_t = msgspec.structs.fields(model)
        dt = next(f.type for f in data_t if f.name == "data")
        if isinstance(dt, type) and issubclass(dt, msgspec.Struct):
            out[kind] = tuple(f.encode_name for f in msgspec.structs.fields(dt) if f.required)
        else:
            out[kind] = ()
    return out


REQUIRED_DATA.update(_required_data())


def example(kind: str, /, *, data: dict[str, Any] | None = None, **envelope: Any) -> dict[str, Any]:
    """A deep copy of ``EXAMPLES[kind]`` with envelope fields replaced and ``data`` merged."""
    ev = copy.deepcopy(EXAMPLES[kind])
    ev.update(envelope)
    if data:
        ev["data"].update(data)
    return ev
