"""Rules from outside-check round 4's first-contact misses (tests/outside4/README.md), each on its
own with hand-made signals (the end-to-end shapes are the round's o04, o10, o13 and o18):

- an attempt that never started and printed no error of its own is not the application's fault
  (a kubelet image pull failure keeps the user's code from ever running): ``unknown``, saying why;
- the NVSwitch fabric manager dying (its segfault, systemd's unit failure) and CUDA's "system not
  yet initialized" are the node's driver stack, not a segfault of the user's code;
- munge / slurmd authentication failures on a node the scheduler then marks down: the scheduler's
  own machinery, not the node's hardware;
- RDMA retransmits that begin with a link fault on the job's path (an inter-switch port's error
  growth, then its flaps) are that link's losses, not congestion; the port's earlier error growth
  counts as its history once it has a fault near the failure."""

from __future__ import annotations

from faultline.streams import correlate as co
from faultline.streams.detectors.job import AttemptRecord
from faultline.streams.join import Link, View
from faultline.streams.signals import Signal
from faultline.streams.signatures import classify

MIN = 60_000
ROLE_SCORE = {"cause": 0.85, "weak": 0.3, "symptom": 0.0, "info": 0.0}   # as streams/detectors/job.py feed_job


def _log(node: str, message: str, ts: int, rank: int | None = None, stream: str = "stderr") -> Signal:
    sig = classify(message)
    assert sig is not None, message
    return Signal(id=f"l{ts}-{node}-{rank}", ts=ts, layer=sig.layer, kind=f"log:{sig.name}", subject="job:j1",
                  node=node, severity=sig.severity, category=sig.category, score=ROLE_SCORE[sig.role],
                  evidence=[f"e{ts}"], summary=f"{sig.name} ({node}): {message[:80]}",
                  data={"signature": sig.name, "role": sig.role, "stream": stream, "rank": rank, **sig.fields})


def _run(rec: AttemptRecord, job_sigs, res_sigs=(), *, failure_ts: int, state: str = "failed", view: View = View(),
         layers=("gpu", "hw", "net", "storage")):
    return co.correlate(rec, job_sigs, list(res_sigs), view, list(layers), cutoff=failure_ts + MIN,
                        failure_ts=failure_ts, state=state)


# ---- o04: the job never started ------------------------------------------------------------------
IMG = "registry.corp.internal/ml/trainer:2024.11.3"
PULL = [f'Failed to pull image "{IMG}": rpc error: code = Unknown desc = failed to pull and unpack image "{IMG}": '
        f'failed to resolve reference "{IMG}": failed to do request: Head "https://registry.corp.internal/v2/ml/'
        f'trainer/manifests/2024.11.3": dial tcp 10.40.0.9:443: i/o timeout',
        "Error: ErrImagePull", f'Back-off pulling image "{IMG}"']


def test_image_pull_errors_are_a_signature_with_the_image_and_why():
    sigs = [classify(m) for m in PULL]
    assert [s.name for s in sigs] == ["image_pull_failed"] * 3
    assert sigs[0].fields == {"image": IMG, "reason": "registry unreachable"}
    assert sigs[0].category is None and sigs[0].role == "symptom"
    nf = classify('Failed to pull image "nvcr.io/nvidia/pytorch:24.13-py3": rpc error: code = NotFound desc = failed '
                  'to pull and unpack image "nvcr.io/nvidia/pytorch:24.13-py3": not found')
    assert nf.fields["reason"] == "image not found"


def test_an_attempt_that_never_started_is_not_the_applications_fault():
    rec = AttemptRecord(job="j1", attempt=0, first_ts=0, start_ts=None, nodes=["n1"], gpus=8, state="failed",
                        reason="ImagePullBackOff")
    logs = [_log("n1", m, ts=20_000 + i * 1000, stream="container") for i, m in enumerate(PULL)]
    inc = _run(rec, logs, failure_ts=11 * MIN)
    assert (inc.root_cause.category, inc.root_cause.component) == ("unknown", "job:j1"), inc.root_cause
    assert "image could not be pulled (registry unreachable)" in inc.root_cause.summary and IMG in inc.root_cause.summary
    assert {e.id for e in inc.evidence} >= {"e20000", "e21000", "e22000"}
    # nothing said why: still not the application
    inc = _run(rec, [], failure_ts=11 * MIN)
    assert inc.root_cause.category == "unknown" and "never started" in inc.root_cause.summary
    # an attempt that started and failed with every layer clean: the application verdict stays
    ran = AttemptRecord(job="j1", attempt=0, first_ts=0, start_ts=60_000, nodes=["n1"], gpus=8, state="failed")
    assert _run(ran, [], failure_ts=11 * MIN).root_cause.category == "application"


# ---- o10: the fabric manager dies -----------------------------------------------------------------
FM = ["nv-fabricmanager[2231]: segfault at 0 ip 000055d1c2a3f6b1 sp 00007ffd8d7a0a10 error 4 in "
      "nv-fabricmanager[55d1c29f0000+1a4000]",
      "systemd[1]: nvidia-fabricmanager.service: Main process exited, code=killed, status=11/SEGV",
      "systemd[1]: nvidia-fabricmanager.service: Failed with result 'signal'."]


def test_fabric_manager_and_system_not_ready_signatures():
    assert [classify(m).name for m in FM] == ["fabric_manager_failed"] * 3
    assert classify(FM[0]).category == "driver_software" and classify(FM[0]).role == "cause"
    s = classify("hgx-f01:33100:33300 [0] NCCL WARN Cuda failure 'system not yet initialized'")
    assert (s.name, s.category, s.role) == ("cuda_system_not_ready", "driver_software", "cause")
    # a segfault of any other process is still the generic (application) one
    assert classify("python[4242]: segfault at 0 ip 00007f sp 00007ffd error 4 in libc.so.6").name == "segfault"


def test_a_fabric_manager_crash_is_the_nodes_driver_stack_not_user_code():
    rec = AttemptRecord(job="j1", attempt=0, start_ts=0, nodes=["a", "b"], gpus=16, state="failed",
                        ranks={str(r): "a" if r < 8 else "b" for r in range(16)}, prog_n=100, prog_last_ts=60 * MIN)
    t = 60 * MIN
    logs = [_log("a", m, ts=t + i, stream="kernel") for i, m in enumerate(FM)]
    logs += [_log("a", f"a:{33100 + g}:{33300 + g} [{g}] NCCL WARN Cuda failure 'system not yet initialized'",
                  ts=t + 3000 + g, rank=g) for g in range(8)]
    logs.append(_log("b", "[rank8]: torch.distributed.DistBackendError: NCCL error in: NCCLUtils.hpp:275, remote "
                          "process exited or there was a network error\nncclRemoteError: A call failed", ts=t + 25_000, rank=8))
    inc = _run(rec, logs, failure_ts=t + 50_000)
    assert (inc.root_cause.category, inc.root_cause.component) == ("driver_software", "node:a"), inc.root_cause
    assert "gpu" not in inc.ruled_out
    assert not any(h.category == "application" for h in inc.hypotheses)


# ---- o13: munge / slurmd lose authentication ------------------------------------------------------
MUNGE = ['munged[1833]: Error: Failed to lock "/run/munge/munged.socket.2.lock" -- exiting',
         'slurmd[2210]: error: Munge encode failed: Failed to access "/run/munge/munge.socket.2": No such file or directory',
         "slurmd[2210]: error: slurm_send_node_msg: auth_g_create: RESPONSE_PING has authentication error",
         "error: slurm_unpack_received_msg: auth_g_verify: REQUEST_PING has authentication error: Invalid credential",
         "error: Munge decode failed: Expired credential"]


def test_munge_and_slurm_auth_lines_are_the_schedulers():
    for m in MUNGE:
        s = classify(m)
        assert s is not None and (s.name, s.category, s.role) == ("slurm_auth_failure", "scheduler", "cause"), m
    for m in ("ValueError: could not munge the labels", "INFO: authentication error in wandb login"):
        s = classify(m)
        assert s is None or s.name != "slurm_auth_failure", m


def _node_down(ts: int) -> Signal:
    return Signal(id="nd", ts=ts, layer="sched", kind="node_down", subject="node:n2", node="n2", severity="critical",
                  category="node_hardware", component="node:n2", score=0.5, evidence=["nd"],
                  summary="scheduler marked n2 down: Not responding", data={"state": "down", "reason": "Not responding"})


def test_a_node_down_after_munge_failures_is_the_scheduler_not_hardware():
    rec = AttemptRecord(job="j1", attempt=0, start_ts=0, nodes=["n1", "n2", "n3"], gpus=24, state="node_fail",
                        prog_n=100, prog_last_ts=60 * MIN)
    t = 55 * MIN
    logs = [_log("n2", m, ts=t + i * 30_000, stream="kernel") for i, m in enumerate(MUNGE[:3])]
    inc = _run(rec, logs, [_node_down(60 * MIN)], failure_ts=60 * MIN + 1000, state="node_fail")
    assert (inc.root_cause.category, inc.root_cause.component) == ("scheduler", "job:j1"), inc.root_cause
    assert "hw" in inc.ruled_out
    # without the daemon's lines the node stays the suspect (unchanged)
    inc = _run(rec, [], [_node_down(60 * MIN)], failure_ts=60 * MIN + 1000, state="node_fail")
    assert inc.root_cause.category == "node_hardware"


# ---- o18: an inter-switch port's errors, then its flaps ------------------------------------------
VIEW = View(links={n: [Link("mlx5_0", leaf, f"Ethernet{i}", leaf)]
                   for i, (n, leaf) in enumerate((("r1", "leaf-1"), ("r2", "leaf-1"), ("r3", "leaf-2"), ("r4", "leaf-2")), 1)})


def _port(kind: str, ts: int, score: float, dev: str = "spine-02", port: str = "Ethernet12") -> Signal:
    return Signal(id=f"{kind}{ts}{dev}{port}", ts=ts, layer="net", kind=kind, subject=f"port:{dev}/{port}", node=None,
                  severity="critical", category="network_link", component=f"port:{dev}/{port}", score=score,
                  evidence=[f"p{ts}"], summary=f"{dev} {port} {kind}", data={"device": dev, "port": port})


def _rdma(node: str, ts: int, what: str = "retransmits/timeouts") -> Signal:
    return Signal(id=f"rd{node}{ts}", ts=ts, layer="net", kind="rdma_congestion", subject=f"rdma:{node}/mlx5_0/1",
                  node=node, severity="warning", category="network_congestion", score=0.6, evidence=[f"r{ts}"],
                  summary=f"{node} mlx5_0/1: {what} surge", data={"device": "mlx5_0", "port": 1, "what": what})


def _spine_case(rdma_onset: int, what: str = "retransmits/timeouts"):
    fail = 80 * MIN
    rec = AttemptRecord(job="j1", attempt=0, start_ts=0, nodes=["r1", "r2", "r3", "r4"], gpus=32, state="failed",
                        ranks={str(r): f"r{r // 8 + 1}" for r in range(32)}, prog_n=100, prog_last_ts=fail - 2 * MIN)
    te = fail - 17 * MIN                      # errors begin before the fabric window (15 min)
    res = [_port("port_errors", te, 0.55), _port("port_down", fail - 3 * MIN, 0.85),
           _port("port_down", fail - 3 * MIN + 40_000, 0.85)]
    res += [_rdma(n, rdma_onset + k * 60_000, what) for k, n in enumerate(("r3", "r4"))]
    logs = [_log(n, f"{n}:61002:61173 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
                    f"10.10.1.11<53470> with status=12 opcode=0", ts=fail - 2 * MIN + i, rank=8 * i)
            for i, n in enumerate(("r3", "r4"), 2)]
    return _run(rec, logs, res, failure_ts=fail, view=VIEW)


def test_retransmits_that_begin_with_an_uplinks_errors_are_the_links_losses():
    fail = 80 * MIN
    inc = _spine_case(rdma_onset=fail - 17 * MIN + 400)
    assert (inc.root_cause.category, inc.root_cause.component) == ("network_link", "port:spine-02/Ethernet12"), inc.hypotheses
    # the uplink's error growth before the fabric window is kept as the port's history
    assert "p" + str(fail - 17 * MIN) in {e.id for e in inc.evidence}


def test_retransmits_before_the_link_fault_or_cnp_storms_stay_congestion():
    fail = 80 * MIN
    # retransmits 10 min before the port's first error: congestion of their own
    inc = _spine_case(rdma_onset=fail - 27 * MIN)
    assert inc.root_cause.category == "network_congestion", inc.hypotheses
    # a CNP/ECN storm is congestion whatever the links do
    inc = _spine_case(rdma_onset=fail - 17 * MIN + 400, what="CNP/ECN marks")
    assert inc.root_cause.category == "network_congestion", inc.hypotheses
