"""kubernetes collector: pod/node JSON in the API server's shape -> sched.job, runtime.container, sched.node.

No API server can run on the test machine (no kube-apiserver / kind / k3s binaries, no internet),
so the folding logic is tested on recorded-shape objects; the client calls are thin."""

from faultline.producers.collectors.kubernetes import KubernetesCollector, job_record, node_record
from faultline.schemas import decode, encode


def pod(name, job, phase, node="gpu01", gpus=8, restarts=0, term=None, last=None, reason=None, start="2026-11-29T14:00:00Z"):
    cs = {"name": "trainer", "restartCount": restarts, "state": {"terminated": term} if term else {"running": {}},
          "lastState": {"terminated": last} if last else {}}
    st = {"phase": phase, "startTime": start, "containerStatuses": [cs]}
    if reason:
        st["reason"] = reason
    return {"metadata": {"name": name, "namespace": "vision", "labels": {"job-name": job}},
            "spec": {"nodeName": node, "containers": [{"name": "trainer", "image": "repo/train:v2",
                                                        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]},
            "status": st}


def test_job_folding():
    r = job_record("j1", [pod("a", "j1", "Running"), pod("b", "j1", "Running", node="gpu02")])
    assert (r["state"], r["nodes"], r["gpus"], r["image"], r["tenant"]) == ("running", ["gpu01", "gpu02"], 16, "repo/train:v2", "vision")
    oom = {"exitCode": 137, "reason": "OOMKilled", "finishedAt": "2026-11-29T14:10:00Z"}
    r = job_record("j2", [pod("a", "j2", "Failed", term=oom)])
    assert (r["state"], r["reason"]) == ("out_of_memory", "OOMKilled")
    r = job_record("j3", [pod("a", "j3", "Failed", term={"exitCode": 3, "reason": "Error", "finishedAt": "2026-11-29T14:10:00Z"})])
    assert (r["state"], r["exit_code"], r["end_ts"]) == ("failed", 3, 1795961400000)
    assert job_record("j4", [pod("a", "j4", "Failed", reason="Evicted")])["state"] == "preempted"
    assert job_record("j5", [pod("a", "j5", "Failed", reason="DeadlineExceeded")])["state"] == "timeout"
    assert job_record("j6", [pod("a", "j6", "Succeeded", term={"exitCode": 0})] * 2)["state"] == "completed"
    assert job_record("j7", [pod("a", "j7", "Pending", node=None)])["state"] == "pending"


def test_nodes():
    cordoned = {"metadata": {"name": "gpu03"}, "spec": {"unschedulable": True, "taints": [
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}}
    notready = {"metadata": {"name": "gpu04"}, "spec": {}, "status": {"conditions": [
        {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "message": "Kubelet stopped posting node status."}]}}
    ok = {"metadata": {"name": "gpu01"}, "spec": {}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert node_record(cordoned, set()) == ("gpu03", "drain", "node.kubernetes.io/unschedulable")
    assert node_record(notready, set()) == ("gpu04", "down", "Kubelet stopped posting node status.")
    assert node_record(ok, {"gpu01"}) == ("gpu01", "allocated", None) and node_record(ok, set())[1] == "idle"


def test_changes_only_restarts_and_oom_events():
    c = KubernetesCollector()
    ok_node = {"metadata": {"name": "gpu01"}, "spec": {}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    r1 = c.changes([pod("a", "j1", "Running")], [ok_node], 1795961000000)
    assert [(e.kind, getattr(e.data, "state", None)) for e in r1] == [("sched.job", "running"), ("sched.node", "allocated")]
    assert c.changes([pod("a", "j1", "Running")], [ok_node], 1795961001000) == []
    oom = {"exitCode": 137, "reason": "OOMKilled", "finishedAt": "2026-11-29T14:10:00Z"}
    r3 = c.changes([pod("a", "j1", "Running", restarts=1, last=oom)], [ok_node], 1795961700000)
    kinds = [(e.kind, getattr(e.data, "event", None) or e.data.state, getattr(e.data, "attempt", None)) for e in r3]
    assert ("sched.job", "running", 1) in kinds and ("runtime.container", "oom_killed", None) in kinds
    assert ("runtime.container", "restarted", None) in kinds
    assert all(e.job == "j1" for e in r3 if e.kind != "sched.node")
    for e in r1 + r3:
        assert decode(encode(e)).kind == e.kind
    assert c.changes([pod("a", "j1", "Running", restarts=1, last=oom)], [ok_node], 1795961800000) == []
