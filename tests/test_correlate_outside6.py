"""Rules from outside-check round 6's first-contact findings (tests/outside6/README.md), on their
own with hand-made signals (the end-to-end shape is the round's q11):

- a silent stall (no error line from the job) that begins as a shared mount turns slow on the
  job's own nodes is the job waiting on that mount: storage_slow of the mount, not unknown. The
  same slow mount on a minority of the job's nodes, or turning slow long before the stall, is
  not enough on its own (it stays the weak, unfelt alarm it was);
- PyTorch's DataLoader bus error "insufficient shared memory (shm)" / "out of shared memory" is
  /dev/shm's capacity (storage_full path:/dev/shm), not the user's code (q10)."""

from __future__ import annotations

from faultline.streams import correlate as co
from faultline.streams.detectors.job import AttemptRecord
from faultline.streams.join import Mount, View
from faultline.streams.rules.storage import STALL_SLOW_BEFORE_MS, slow_at_stall
from faultline.streams.signals import Signal
from faultline.streams.signatures import classify

MIN = 60_000
NODES = ("t1", "t2", "t3", "t4")
LUSTRE = View(mounts={n: [Mount("/lustre/data", "lustre", "mgs@o2ib:/data"),
                          Mount("/lustre/ckpt", "lustre", "mgs@o2ib:/ckpt")] for n in NODES})


def _slow(node: str, path: str, ts: int) -> Signal:
    return Signal(id=f"s{node}{ts}", ts=ts, layer="storage", kind="storage_slow", subject=f"path:{path}", node=node,
                  severity="warning", category="storage_slow", component=f"path:{path}", score=0.65,
                  evidence=[f"s{node}{ts}"], summary=f"{path} slow from {node}: latency 3000 ms (baseline 2.2 ms)",
                  data={"path": path, "lat_ms": 3000.0, "base_lat_ms": 2.2, "mbps": 15.0, "base_mbps": 500.0,
                        "fs_type": "lustre"})


def _stall(slow_nodes, onset_from_last: int):
    last = 100 * MIN
    rec = AttemptRecord(job="j1", attempt=0, start_ts=0, nodes=list(NODES), gpus=32, state="running",
                        ranks={str(r): NODES[r // 8] for r in range(32)}, prog_n=100, prog_last_ts=last,
                        intervals=[MIN] * 8)
    res = [_slow(n, "/lustre/data", last + onset_from_last + i * 300) for i, n in enumerate(slow_nodes)]
    return co.correlate(rec, [], res, LUSTRE, ["gpu", "hw", "net", "storage"], cutoff=last + 50 * MIN,
                        failure_ts=last, state="running", stalled=True)


def test_a_stall_as_the_shared_mount_turns_slow_on_every_node_is_storage_slow():
    inc = _stall(NODES, onset_from_last=-200)
    assert (inc.root_cause.category, inc.root_cause.component) == ("storage_slow", "path:/lustre/data"), inc.hypotheses
    assert inc.root_cause.confidence >= 0.5
    assert "storage" not in inc.ruled_out


def test_half_the_nodes_is_enough_but_one_of_four_is_not():
    assert _stall(NODES[:2], onset_from_last=30_000).root_cause.category == "storage_slow"
    inc = _stall(NODES[:1], onset_from_last=30_000)
    assert inc.root_cause.category != "storage_slow" or inc.root_cause.confidence < 0.5, inc.hypotheses


def test_a_slowdown_long_before_the_stall_is_not_its_cause():
    inc = _stall(NODES, onset_from_last=-(STALL_SLOW_BEFORE_MS + 5 * MIN))
    assert inc.root_cause.category != "storage_slow" or inc.root_cause.confidence < 0.5, inc.hypotheses


def test_slow_at_stall_names_the_mount_only_where_enough_nodes_saw_it():
    rec = AttemptRecord(job="j1", attempt=0, start_ts=0, nodes=list(NODES), gpus=32, state="running")
    sigs = [_slow(n, "/lustre/data", 1000) for n in NODES] + [_slow("t1", "/lustre/ckpt", 1000),
                                                              _slow("x9", "/lustre/ckpt", 1000)]
    assert slow_at_stall(rec, sigs, last_progress=1000, post_grace=MIN) == {"/lustre/data"}
    assert slow_at_stall(rec, sigs, last_progress=1000 + STALL_SLOW_BEFORE_MS + MIN, post_grace=MIN) == set()


# ---- q10: the DataLoader's shared memory runs out ----------------------------------------------
SHM_LINES = ("ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
             "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible that dataloader's "
             "workers are out of shared memory. Please try to raise your shared memory limit.")


def test_dataloader_bus_error_lines_are_dev_shm_capacity():
    for line in SHM_LINES:
        sig = classify(line)
        assert sig is not None and (sig.name, sig.category, sig.role) == ("shm_exhausted", "storage_full", "cause"), line
        assert sig.fields["path"] == "/dev/shm"
    other = classify("RuntimeError: DataLoader worker (pid 4242) exited unexpectedly with exit code 1.")
    assert other is None or other.category != "storage_full"


def test_a_rank_dying_of_a_full_dev_shm_is_storage_full_not_application():
    end = 60 * MIN
    rec = AttemptRecord(job="j1", attempt=0, start_ts=0, nodes=["m1", "m2"], gpus=16, state="failed",
                        ranks={str(r): "m1" if r < 8 else "m2" for r in range(16)}, prog_n=60, prog_last_ts=end - MIN)
    sig = classify(SHM_LINES[1])
    line = Signal(id="l1", ts=end - 20_000, layer=sig.layer, kind="log:shm_exhausted", subject="job:j1", node="m2",
                  severity=sig.severity, category=sig.category, score=0.85, evidence=["e1"],
                  summary="shm_exhausted on rank 10 (m2)", data={"signature": sig.name, "role": sig.role,
                                                                  "stream": "stderr", "rank": 10, **sig.fields})
    full = Signal(id="f1", ts=end - 5 * MIN, layer="storage", kind="storage_full", subject="path:/dev/shm", node="m2",
                  severity="critical", category="storage_full", component="path:/dev/shm", score=0.75, evidence=["f1"],
                  summary="/dev/shm 98.0% full (seen from m2)", data={"path": "/dev/shm", "used_pct": 98.0, "fs_type": "tmpfs"})
    inc = co.correlate(rec, [line], [full], View(), ["gpu", "hw", "net", "storage"], cutoff=end + MIN,
                       failure_ts=end, state="failed", stalled=False)
    assert (inc.root_cause.category, inc.root_cause.component) == ("storage_full", "path:/dev/shm"), inc.hypotheses
