"""Rules from outside-check round 5's first-contact findings (tests/outside5/README.md), each on its
own with hand-made signals (the end-to-end shapes are the round's p07, p09, p14, p11 and p20):

- a kubelet eviction for a node's disk ("The node was low on resource: ephemeral-storage", a pod over
  its ephemeral-storage limit) is storage_full of the kubelet's root (nodefs), one for memory host_oom;
- NFS "server not responding" lines of a mount the collectors report stale / missing, with no latency
  measured high, are the mount gone (storage_unavailable), not slow;
- a kernel link-down line whose netdev the topology does not list joins the link fault of the node's
  own NIC it reports (one hypothesis in the contract's port:<device>/<port> form), and when none
  matches it is named port:<node>/<iface>, never a form outside the contract;
- GPUs power-braked right after their node's BMC reported a critical power fault are that fault's
  consequence: node_hardware of the node ranks above their throttling;
- a mount failing on one node only, minutes after one of that node's own links went down, is that
  link's consequence: the port ranks above the mount."""

from __future__ import annotations

from faultline.streams import correlate as co
from faultline.streams.detectors.job import AttemptRecord
from faultline.streams.join import Link, Mount, View
from faultline.streams.signals import Signal
from faultline.streams.signatures import classify

MIN = 60_000
ROLE_SCORE = {"cause": 0.85, "weak": 0.3, "symptom": 0.0, "info": 0.0}   # as streams/detectors/job.py feed_job
LOG_LINE_SCORE = {"nic_link_down": 0.5, "nfs_not_responding": 0.5}       # ... its kernel-line overrides


def _log(node: str, message: str, ts: int, rank: int | None = None, stream: str = "stderr") -> Signal:
    sig = classify(message)
    assert sig is not None, message
    return Signal(id=f"l{ts}-{node}-{rank}", ts=ts, layer=sig.layer, kind=f"log:{sig.name}", subject="job:j1",
                  node=node, severity=sig.severity, category=sig.category,
                  score=LOG_LINE_SCORE.get(sig.name, ROLE_SCORE[sig.role]), evidence=[f"e{ts}"],
                  summary=f"{sig.name} ({node}): {message[:80]}",
                  data={"signature": sig.name, "role": sig.role, "stream": stream, "rank": rank, **sig.fields})


def _run(rec: AttemptRecord, job_sigs, res_sigs=(), *, failure_ts: int, state: str = "failed", view: View = View(),
         layers=("gpu", "hw", "net", "storage"), stalled: bool = False, cutoff: int | None = None):
    return co.correlate(rec, job_sigs, list(res_sigs), view, list(layers),
                        cutoff=cutoff if cutoff is not None else failure_ts + MIN,
                        failure_ts=failure_ts, state=state, stalled=stalled)


def _mount(node: str, path: str, state: str, ts: int) -> Signal:
    cat = "storage_full" if state == "full" else "storage_unavailable"
    return Signal(id=f"m{node}{ts}", ts=ts, layer="storage", kind=f"mount_{state}", subject=f"path:{path}", node=node,
                  severity="critical", category=cat, component=f"path:{path}", score=0.9, evidence=[f"m{node}{ts}"],
                  summary=f"{path} {state} on {node}", data={"path": path, "state": state, "error": None})


def _nccl_remote(node: str, ts: int, rank: int) -> Signal:
    return _log(node, f"[rank{rank}]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank {rank}] Process group watchdog thread "
                      "terminated with exception: NCCL error: remote process exited or there was a network error",
                ts=ts, rank=rank)


# ---- p07: the kubelet evicts a pod for the node's disk ------------------------------------------
EVICT = ("Evicted: The node was low on resource: ephemeral-storage. Threshold quantity: 10%, available: 8.7%. "
         "Container trainer was using 1650Gi, request is 0, has larger consumption of ephemeral-storage.")


def test_kubelet_evictions_are_signatures_of_the_resource_they_name():
    s = classify(EVICT)
    assert (s.name, s.category, s.layer, s.role) == ("k8s_evicted_disk", "storage_full", "storage", "cause")
    assert s.fields == {"resource": "ephemeral-storage", "path": "/var/lib/kubelet"}
    assert classify("The node was low on resource: [DiskPressure].").fields["path"] == "/var/lib/kubelet"
    assert classify("The node was low on resource: imagefs.").fields["path"] == "/var/lib/containerd"
    for m in ("Pod ephemeral local storage usage exceeds the total limit of containers 10Gi.",
              'Usage of EmptyDir volume "cache" exceeds the limit "1Gi".'):
        assert classify(m).name == "k8s_evicted_disk", m
    mem = classify("Evicted: The node was low on resource: memory. Threshold quantity: 100Mi, available: 52Mi.")
    assert (mem.name, mem.category) == ("k8s_evicted_memory", "host_oom")
    # the eviction manager's own progress line and a pids eviction name no cause
    for m in ('eviction_manager.go:366] "Eviction manager: attempting to reclaim" resourceName="ephemeral-storage"',
              "The node was low on resource: pids."):
        assert classify(m) is None, m


def _k8s_case(line: str, mounts):
    rec = AttemptRecord(job="j1", attempt=0, start_ts=0, nodes=["k1", "k2"], gpus=16, state="failed",
                        ranks={str(r): "k1" if r < 8 else "k2" for r in range(16)}, prog_n=60, prog_last_ts=67 * MIN)
    t = 67 * MIN
    logs = [_log("k2", line, ts=t, stream="container")] + [_nccl_remote("k1", t + 8000 + r, r) for r in (0, 3)]
    view = View(mounts={n: mounts for n in ("k1", "k2")})
    return _run(rec, logs, failure_ts=t + MIN, view=view)


def test_an_ephemeral_storage_eviction_is_the_kubelet_disk_full():
    inc = _k8s_case(EVICT, [Mount("/var/lib/kubelet", "local", "nvme0n1p2"), Mount("/mnt/data", "nfs", "nas")])
    assert (inc.root_cause.category, inc.root_cause.component) == ("storage_full", "path:/var/lib/kubelet"), inc.root_cause
    assert "storage" not in inc.ruled_out
    # a node whose inventory lists only its root file system: the mount holding the kubelet's root
    inc = _k8s_case(EVICT, [Mount("/", "local", "nvme0n1p1")])
    assert (inc.root_cause.category, inc.root_cause.component) == ("storage_full", "path:/"), inc.root_cause
    # a memory-pressure eviction: the node's memory
    inc = _k8s_case("Evicted: The node was low on resource: memory.", [Mount("/", "local", "nvme0n1p1")])
    assert (inc.root_cause.category, inc.root_cause.component) == ("host_oom", "node:k2"), inc.root_cause


# ---- p09: NFS "not responding" on a mount reported stale --------------------------------------
HOME = View(mounts={n: [Mount("/home", "nfs", "home-nfs01"), Mount("/lustre/scratch", "lustre", "mds")]
                    for n in ("h1", "h2")})


def _nfs_hang(stale: bool):
    last = 40 * MIN
    rec = AttemptRecord(job="j1", attempt=0, start_ts=0, nodes=["h1", "h2"], gpus=16, state="running",
                        prog_n=40, prog_last_ts=last, intervals=[MIN] * 8)
    logs = [_log(n, "nfs: server home-nfs01 not responding, still trying", ts=last + 70_000 + i * 900, stream="kernel")
            for i, n in enumerate(("h1", "h2"))]
    res = [_mount(n, "/home", "stale", last + 150_000 + i * 1100) for i, n in enumerate(("h1", "h2"))] if stale else []
    return _run(rec, logs, res, failure_ts=last, state="running", stalled=True, view=HOME, cutoff=last + 45 * MIN)


def test_not_responding_on_a_mount_reported_stale_is_the_mount_gone():
    inc = _nfs_hang(stale=True)
    assert (inc.root_cause.category, inc.root_cause.component) == ("storage_unavailable", "path:/home"), inc.hypotheses
    assert not any(h.category == "storage_slow" for h in inc.hypotheses)
    assert {e.id for e in inc.evidence} >= {"e" + str(40 * MIN + 70_000), "mh1" + str(40 * MIN + 150_000)}
    # the kernel's lines alone still say slow (unchanged)
    inc = _nfs_hang(stale=False)
    assert (inc.root_cause.category, inc.root_cause.component) == ("storage_slow", "path:/home"), inc.hypotheses


# ---- p14: a kernel link-down line naming a netdev the topology does not list -------------------
G3 = View(links={"g3": [Link(f"mlx5_{i}", "leaf-c4", f"Ethernet{21 + i}", "pod-c4") for i in range(4)],
                 "g4": [Link(f"mlx5_{i}", "leaf-c4", f"Ethernet{25 + i}", "pod-c4") for i in range(4)]})
KLINK = "mlx5_core 0000:c1:00.0 ibp193s0f2: Link down"


def _downed(node: str, dev: str, ts: int) -> Signal:
    return Signal(id=f"rd{node}{dev}{ts}", ts=ts, layer="net", kind="rdma_link_downed", subject=f"rdma:{node}/{dev}/1",
                  node=node, severity="critical", category="network_link", score=0.8, evidence=[f"rd{ts}"],
                  summary=f"{node} {dev}/1: link downed x1", data={"device": dev, "port": 1, "new": 1})


def _hca_case(res):
    t = 130 * MIN
    rec = AttemptRecord(job="j1", attempt=0, start_ts=0, nodes=["g3", "g4"], gpus=16, state="failed",
                        ranks={str(r): "g3" if r < 8 else "g4" for r in range(16)}, prog_n=120, prog_last_ts=t)
    logs = [_log("g3", KLINK, ts=t, stream="kernel"), _nccl_remote("g4", t + 20_000, 9)]
    return _run(rec, logs, res, failure_ts=t + MIN, view=G3)


def test_a_kernel_link_line_joins_the_link_fault_of_its_nodes_nic():
    inc = _hca_case([_downed("g3", "mlx5_2", 130 * MIN + 30_000)])
    assert (inc.root_cause.category, inc.root_cause.component) == ("network_link", "port:leaf-c4/Ethernet23")
    assert [h.component for h in inc.hypotheses if h.category == "network_link"] == ["port:leaf-c4/Ethernet23"]
    assert "e" + str(130 * MIN) in {e.id for e in inc.evidence}
    # no NIC fault to pair it with: the host's interface, in the contract's port:<device>/<port> form
    inc = _hca_case([])
    assert (inc.root_cause.category, inc.root_cause.component) == ("network_link", "port:g3/ibp193s0f2"), inc.root_cause
    # a NIC fault of another node is not the line's link
    inc = _hca_case([_downed("g4", "mlx5_2", 130 * MIN + 30_000)])
    assert "port:g3/ibp193s0f2" in [h.component for h in inc.hypotheses]


# ---- p11: a failed PSU power-brakes the node's GPUs --------------------------------------------
def _sel(node: str, ts: int, severity: str, sensor_type: str, msg: str, score: float) -> Signal:
    return Signal(id=f"sel{node}{ts}", ts=ts, layer="hw", kind="bmc_sel", subject=f"node:{node}", node=node,
                  severity=severity, category="node_hardware", component=f"node:{node}", score=score,
                  evidence=[f"sel{ts}"], summary=f"SEL {node}: {sensor_type}: {msg}",
                  data={"entry_id": str(ts), "sensor_type": sensor_type, "severity": severity, "message_id": None})


def _throttle(node: str, g: int, since: int, reasons) -> Signal:
    return Signal(id=f"th{node}{g}", ts=since + 2 * MIN, layer="gpu", kind="thermal_throttle", subject=f"gpu:{node}/{g}",
                  node=node, severity="warning", category="thermal_throttle", component=f"gpu:{node}/{g}", score=0.3,
                  evidence=[f"th{node}{g}"], summary=f"GPU {node}/{g}: throttled ({', '.join(reasons)})",
                  data={"reasons": list(reasons), "since": since, "temp_c": 47, "sm_clock_mhz": 700})


def _psu_case(reasons, sel_type: str = "Power Supply"):
    tp, end = 60 * MIN, 245 * MIN
    rec = AttemptRecord(job="j1", attempt=0, start_ts=5 * MIN, nodes=["q1", "q2"], gpus=16, state="timeout",
                        prog_n=240, prog_last_ts=end)
    res = [_sel("q2", tp, "critical", sel_type, "Power supply 1 is failed.", 0.85)]
    res += [_throttle("q2", g, tp + 60_000, reasons) for g in range(8)]
    return _run(rec, [], res, failure_ts=end, state="timeout")


def test_gpus_power_braked_after_their_nodes_psu_failed_are_the_nodes_hardware():
    inc = _psu_case(["power_brake"])
    assert (inc.root_cause.category, inc.root_cause.component) == ("node_hardware", "node:q2"), inc.hypotheses
    assert inc.hypotheses[1].category == "thermal_throttle"
    # heat is the GPU's own throttling, whatever the BMC said (unchanged)
    inc = _psu_case(["power_brake", "hw_thermal"])
    assert inc.root_cause.category == "thermal_throttle", inc.hypotheses
    # a critical BMC event that is not about power does not explain a power brake
    inc = _psu_case(["power_brake"], sel_type="Memory")
    assert inc.root_cause.category == "thermal_throttle", inc.hypotheses


# ---- p20: a node's storage port goes down, then only its mount goes stale --------------------
S_VIEW = View(links={n: [Link("mlx5_0", "leaf-s1", f"Ethernet{i}", "pod-s"),
                         Link("ens1f0", "stor-sw1", f"Ethernet{16 + i}", "storage-net")] for i, n in ((1, "s1"), (2, "s2"))},
              mounts={n: [Mount("/nfs/data", "nfs", "nas-03")] for n in ("s1", "s2")})


def _port_down(node: str, dev: str, port: str, ts: int) -> Signal:
    return Signal(id=f"pd{dev}{port}{ts}", ts=ts, layer="net", kind="port_down", subject=f"port:{dev}/{port}", node=node,
                  severity="critical", category="network_link", component=f"port:{dev}/{port}", score=0.85,
                  evidence=[f"pd{ts}"], summary=f"{dev} {port} link down (trap)", data={"device": dev, "port": port})


def _storage_nic_case(other_stale: bool = False, down_at: int = 44 * MIN):
    td, end = 44 * MIN, 46 * MIN + 30_000
    rec = AttemptRecord(job="j1", attempt=0, start_ts=0, nodes=["s1", "s2"], gpus=16, state="failed",
                        ranks={str(r): "s1" if r < 8 else "s2" for r in range(16)}, prog_n=44, prog_last_ts=td + 2 * MIN)
    logs = [_log("s2", "ice 0000:17:00.0 ens1f0: NIC Link is Down", ts=down_at + 1000, stream="kernel"),
            _log("s2", "nfs: server nas-03 not responding, timed out", ts=td + 31_000, stream="kernel"),
            _log("s2", "[rank12]: OSError: [Errno 5] Input/output error: '/nfs/data/shards/train-00412.tar'",
                 ts=td + 2 * MIN, rank=12),
            _log("s2", "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: train.py FAILED",
                 ts=td + 2 * MIN + 15_000)]
    res = [_port_down("s2", "stor-sw1", "Ethernet18", down_at + 1200), _mount("s2", "/nfs/data", "stale", td + 40_000)]
    if other_stale:
        res.append(_mount("s1", "/nfs/data", "stale", td + 45_000))
    return _run(rec, logs, res, failure_ts=end, view=S_VIEW)


def test_a_mount_lost_on_one_node_after_its_storage_port_went_down_is_the_port():
    inc = _storage_nic_case()
    assert (inc.root_cause.category, inc.root_cause.component) == ("network_link", "port:stor-sw1/Ethernet18"), inc.hypotheses
    assert (inc.hypotheses[1].category, inc.hypotheses[1].component) == ("storage_unavailable", "path:/nfs/data")
    # the mount failed on the other node too: the server's trouble, the mount stays first
    inc = _storage_nic_case(other_stale=True)
    assert inc.root_cause.category == "storage_unavailable", inc.hypotheses
    # a link that went down long before the mount failed (and came through): not the mount's cause
    inc = _storage_nic_case(down_at=20 * MIN)
    assert inc.root_cause.category == "storage_unavailable", inc.hypotheses
