"""Issue 16 items 3, 4 and 8 as general mechanisms, each rule on its own (the end-to-end shapes
are tests/outside2's s03_ridge, s04_mesa and s07_harbor and the suites):

- a kernel storage line resolves to its mount: an NFS server by its host name, a Lustre
  eviction by the file system name in its target (``proj-OST0007`` -> the mount ``<MGS>:/proj``);
- a process-local ``GPU 0`` of a rank that is not its node's first is that rank's own GPU;
- a storage alarm on a mount the job's own storage signs do not name was not felt by the job;
- a stalled job's hang report (NFS "not responding") a few minutes after its last progress is
  the hang's cause;
- node names: one spelling per node, at decode (schemas/names.py)."""

from __future__ import annotations

import orjson
import pytest

from faultline.schemas import names
from faultline.schemas.codec import decode
from faultline.streams import correlate as co
from faultline.streams.detectors.job import AttemptRecord, Ckpt
from faultline.streams.join import Mount, View
from faultline.streams.signals import Signal
from faultline.streams.signatures import classify

RIDGE = [Mount("/", "ext4", None), Mount("/mnt/ckpt", "nfs", "ckpt-nas.ridge"), Mount("/datasets", "nfs", "filer-02"),
         Mount("/lustre/scratch", "lustre", "10.20.0.11@o2ib:/scratch"),
         Mount("/lustre/proj", "lustre", "10.20.0.11@o2ib:/proj")]


def _log(node: str, message: str, ts: int = 1_000, rank: int | None = None) -> Signal:
    sig = classify(message)
    assert sig is not None, message
    return Signal(id=f"l{ts}", ts=ts, layer=sig.layer, kind=f"log:{sig.name}", subject="job:j1", node=node,
                  severity=sig.severity, category=sig.category, score=0.6, evidence=["e"], summary=message[:60],
                  data={"signature": sig.name, "rank": rank, **sig.fields})


def _rec(**kw) -> AttemptRecord:
    return AttemptRecord(job="j1", attempt=0, start_ts=0, **kw)


def test_lustre_eviction_resolves_by_file_system_name():
    line = ("LustreError: 167-0: proj-OST0007-osc-ffff9a3c5e4d1800: This client was evicted by proj-OST0007; "
            "in progress operations using this service will fail.")
    s = _log("r02n03", line)
    assert s.data["fsname"] == "proj"
    view = View(mounts={"r02n03": RIDGE})
    rec = _rec(nodes=["r02n03"])
    assert co._mount_for_log(s, rec, view) == "/lustre/proj"
    assert co._component(s, rec, view) == "path:/lustre/proj"
    # two Lustre mounts and a name neither serves: not guessed
    other = _log("r02n03", line.replace("proj-OST", "arch-OST"))
    assert co._mount_for_log(other, rec, view) is None


def test_nfs_server_matches_by_host_name_with_or_without_domain():
    view = View(mounts={"n1": [Mount("/", "ext4", None), Mount("/home", "nfs", "filer-01.site.org:/export/home"),
                               Mount("/data", "nfs", "filer-02.site.org:/export/data")]})
    rec = _rec(nodes=["n1"])
    s = _log("n1", "nfs: server filer-02 not responding, still trying")
    assert s.data["server"] == "filer-02"
    assert co._component(s, rec, view) == "path:/data"
    assert co._component(_log("n1", "nfs: server FILER-01.site.org not responding, still trying"), rec, view) == "path:/home"


def test_process_local_gpu_zero_is_the_ranks_own_gpu():
    """--gpus-per-task=1: every task's OOM says GPU 0; rank 6 is the third rank of node b."""
    ranks = {str(r): ("a" if r < 4 else "b") for r in range(8)}
    rec = _rec(nodes=["a", "b"], gpus=8, ranks=ranks)
    oom = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 0 has a total capacity of "
           "79.10 GiB of which 1.91 GiB is free.")
    s = _log("b", "[rank6]: " + oom, rank=6)
    assert s.data["gpu"] == 0 and s.kind in co.PROCESS_LOCAL_GPU_KINDS
    assert co._component(s, rec, View()) == "gpu:b/2"
    # the node's first rank: GPU 0 either way; a GPU the message names other than 0 is kept
    assert co._component(_log("b", "[rank4]: " + oom, rank=4), rec, View()) == "gpu:b/0"
    assert co._component(_log("b", "[rank6]: " + oom.replace("GPU 0", "GPU 5"), rank=6), rec, View()) == "gpu:b/5"


def _alarm(path: str) -> Signal:
    return Signal(id=f"a{path}", ts=1, layer="storage", kind="storage_full", subject=f"path:{path}", node="n1",
                  severity="warning", category="storage_full", score=0.9, evidence=["e"], summary="full",
                  data={"path": path})


def test_storage_alarm_on_a_mount_the_jobs_signs_do_not_name_is_not_felt():
    view = View(mounts={"n1": RIDGE})
    rec = _rec(nodes=["n1"], ckpts=[Ckpt(5, 10, "/lustre/scratch/u/run/step_10", "c1")])
    nfs = _log("n1", "nfs: server filer-02 not responding, still trying")
    felt = co._felt_paths(rec, [nfs], view, {})
    assert felt == {"/datasets", "/lustre/scratch/u/run/step_10"}
    assert co._felt_here(_alarm("/datasets"), felt) and co._felt_here(_alarm("/lustre/scratch"), felt)
    assert not co._felt_here(_alarm("/mnt/ckpt"), felt)
    # signs that name no path: any mount may be the one the job felt
    io = Signal(id="io", ts=1, layer="storage", kind="log:io_error", subject="job:j1", node="n1", severity="warning",
                evidence=["e"], summary="EIO", data={"signature": "io_error"})
    assert co._felt_paths(rec, [io], view, {}) == set()
    assert co._felt_here(_alarm("/mnt/ckpt"), set())


def test_a_stalled_jobs_late_nfs_report_is_the_hangs_cause():
    """The job's last progress at 100 s, the kernel's 'not responding' 70 s later (its major
    timeout), the job cancelled while hung: the NFS mount is the verdict, not 'unknown'."""
    view = View(mounts={"n1": RIDGE})
    rec = _rec(nodes=["n1"], gpus=4, prog_n=50, prog_first_ts=1_000, prog_last_ts=100_000, prog_last_step=50,
               intervals=[2_000] * 8, state="cancelled")
    nfs = _log("n1", "nfs: server filer-02 not responding, still trying", ts=170_000)
    inc = co.correlate(rec, [nfs], [], view, ["storage"], cutoff=400_000, failure_ts=100_000, state="cancelled",
                       stalled=True)
    assert (inc.root_cause.category, inc.root_cause.component) == ("storage_slow", "path:/datasets"), inc.root_cause
    late = _log("n1", "nfs: server filer-02 not responding, still trying", ts=100_000 + co.HANG_REPORT_MS + 60_000)
    inc = co.correlate(rec, [late], [], view, ["storage"], cutoff=400_000, failure_ts=100_000, state="cancelled",
                       stalled=True)
    assert inc.root_cause.category == "unknown", inc.root_cause


@pytest.fixture
def name_mode():
    yield names
    names.configure("short")


def _ev(kind: str, node: str | None, data: dict, job: str | None = None) -> bytes:
    return orjson.dumps({"v": 1, "id": "e1", "ts": 1, "kind": kind, "source": "t", "node": node, "job": job,
                         "data": data})


def test_node_names_are_canonical_at_decode(name_mode):
    xid = {"gpu": 3, "xid": 79, "message": "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."}
    assert decode(_ev("gpu.xid", "node0042.cluster.local", xid)).node == "node0042"
    assert decode(_ev("hw.sel", "NODE0044.CLUSTER.LOCAL", {"entry_id": "7", "severity": "critical", "sensor_type": "Memory", "message": "ECC"})).node == "node0044"
    job = decode(_ev("sched.job", None, {"state": "running", "attempt": 0, "nodes": ["node0042.cluster.local", "Node0043"],
                                         "gpus": 16, "ranks": {"0": "node0042.cluster.local", "8": None}}, job="9"))
    assert job.data.nodes == ["node0042", "node0043"] and job.data.ranks == {"0": "node0042", "8": None}
    assert names.canonical("10.1.2.3") == "10.1.2.3"               # an address is not a domain name
    assert names.canonical_component("gpu:NODE7.x.y/3") == "gpu:node7/3"
    names.configure("fqdn")
    assert decode(_ev("gpu.xid", "NODE0042.Cluster.Local", xid)).node == "node0042.cluster.local"
    names.configure("exact")
    assert decode(_ev("gpu.xid", "NODE0042.Cluster.Local", xid)).node == "NODE0042.Cluster.Local"
    with pytest.raises(ValueError, match="FAULTLINE_NODE_NAMES"):
        names.configure("long")


def test_a_line_naming_a_node_names_it_like_the_events():
    oom = classify("srun: error: NODE0042.cluster.local: task 3: Out Of Memory")
    assert oom is not None and oom.fields["host"] == "node0042", oom
    fail = classify("srun: error: Node failure on node0043.Cluster.Local")
    assert fail is not None and fail.fields["failed_node"] == "node0043", fail
