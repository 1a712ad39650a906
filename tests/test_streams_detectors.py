"""Per-detector unit tests: each detector fires on its anomaly, stays quiet on normal
traffic and survives counter resets."""

from __future__ import annotations

import msgspec

from faultline.schemas import Event
from faultline.streams.detectors.config import DetectorConfig
from faultline.streams.detectors.job import JobState, feed_job, stalled, checkpoint_stale
from faultline.streams.detectors.node import NodeState, feed_node

CFG = DetectorConfig()
_n = 0


def E(kind, ts, data, node="n1", job=None):
    global _n
    _n += 1
    return msgspec.convert({"v": 1, "id": f"d{_n}", "ts": ts, "kind": kind, "source": "t", "node": node, "job": job,
                            "data": data}, Event)


def run_node(evs):
    st = NodeState()
    out = []
    for e in evs:
        feed_node(st, e, CFG, out)
    return out


def gs(ts, **kw):
    d = {"gpu": 0, "uuid": "u", "util_pct": 95.0, "mem_used_mib": 1000.0, "mem_total_mib": 80000.0, "throttle": [],
         "ecc_sbe": 0, "ecc_dbe": 0, "nvlink_errors": 0, "pcie_replay": 0}
    d.update(kw)
    return E("gpu.sample", ts, d)


def kinds(out):
    return [s.kind for s in out]


def test_ecc_dbe_growth_and_reset():
    out = run_node([gs(0), gs(10_000, ecc_dbe=2), gs(20_000, ecc_dbe=2), gs(30_000, ecc_dbe=0)])
    assert kinds(out) == ["ecc_dbe"]
    assert out[0].category == "gpu_hardware" and out[0].component == "gpu:n1/0" and out[0].data["new"] == 2


def test_nvlink_pcie_sbe_bursts_and_quiet_baseline():
    out = run_node([gs(0, nvlink_errors=100, pcie_replay=5, ecc_sbe=3), gs(10_000, nvlink_errors=102, pcie_replay=6, ecc_sbe=4)])
    assert out == []  # small growth: quiet
    out = run_node([gs(0), gs(10_000, nvlink_errors=50, pcie_replay=100, ecc_sbe=500)])
    assert set(kinds(out)) == {"nvlink_errors", "pcie_replay", "ecc_sbe_burst"}
    # counter reset (driver reload) then small growth: no signal
    assert run_node([gs(0, nvlink_errors=1000), gs(10_000, nvlink_errors=0), gs(20_000, nvlink_errors=2)]) == []


def test_remapped_rows_pending():
    out = run_node([gs(0, remapped_rows_pending=0), gs(10_000, remapped_rows_pending=1)])
    assert kinds(out) == ["remap_pending"]


def test_thermal_throttle_episode_once_and_power_cap_ignored():
    evs = [gs(t, throttle=["hw_thermal"], temp_c=92.0) for t in range(0, 60_000, 10_000)]
    out = run_node(evs)
    assert kinds(out) == ["thermal_throttle"]
    assert run_node([gs(t, throttle=["sw_power_cap"]) for t in range(0, 60_000, 10_000)]) == []


def test_util_collapse_and_memory_near_capacity():
    evs = [gs(t) for t in range(0, 50_000, 10_000)] + [gs(50_000 + t, util_pct=0.0) for t in range(0, 40_000, 10_000)]
    assert "util_collapse" in kinds(run_node(evs))
    out = run_node([gs(0, mem_used_mib=79_500.0), gs(10_000, mem_used_mib=79_600.0)])
    assert kinds(out) == ["gpu_mem_high"]


def test_xid_from_catalog():
    out = run_node([E("gpu.xid", 0, {"gpu": 3, "xid": 79, "message": "NVRM: Xid (PCI:0000:3b:00): 79, fallen off"})])
    assert out[0].category == "gpu_hardware" and out[0].score >= 0.9 and out[0].component == "gpu:n1/3"
    out = run_node([E("gpu.xid", 0, {"gpu": 1, "xid": 43, "message": "NVRM: Xid (PCI:0000:3b:00): 43, Ch 08"})])
    assert out[0].score <= 0.2 and out[0].data["fatal"] is False


def test_bmc_sensor_threshold_and_sel():
    def sensor(ts, status, v):
        return E("hw.sensor", ts, {"sensor": "PSU1", "type": "power", "value": v, "unit": "W", "status": status})
    out = run_node([sensor(0, "ok", 500), sensor(1, "critical", 0), sensor(2, "critical", 0), sensor(3, "ok", 500)])
    assert kinds(out) == ["bmc_sensor"] and out[0].severity == "critical"
    sel = {"entry_id": "7", "severity": "critical", "sensor_type": "Power Supply", "message": "PSU failure"}
    out = run_node([E("hw.sel", 0, sel), E("hw.sel", 5, sel)])
    assert kinds(out) == ["bmc_sel"] and out[0].score >= 0.85


def port(ts, status="up", err=0, disc=0):
    return E("net.port", ts, {"device": "leaf-01", "port": "Eth1/2", "oper_status": status, "in_errors": err,
                              "out_errors": 0, "in_discards": disc, "out_discards": 0}, node=None)


def test_port_down_and_flap():
    evs = []
    for k in range(3):
        evs += [port(k * 60_000, "up"), port(k * 60_000 + 30_000, "down")]
    out = run_node(evs)
    assert kinds(out).count("port_down") == 3 and "port_flap" in kinds(out)
    assert out[0].component == "port:leaf-01/Eth1/2"


def test_port_errors_with_counter_reset_and_noisy_baseline():
    assert "port_errors" in kinds(run_node([port(0, err=0), port(30_000, err=500)]))
    # a reset (lower value) is not an error burst
    assert run_node([port(0, err=10_000), port(30_000, err=3)]) == []
    # a port that always makes ~6 errors per interval is its own normal
    noisy = [port(i * 30_000, err=6 * i) for i in range(30)]
    assert "port_errors" not in kinds(run_node(noisy))


def rdma(ts, **c):
    base = {"port_xmit_data": ts, "np_cnp_sent": 0, "local_ack_timeout_err": 0, "link_downed": 0, "symbol_error": 0}
    base.update(c)
    return E("net.rdma", ts, {"device": "mlx5_0", "port": 1, "counters": base})


def test_rdma_retransmit_surge_reset_and_link_downed():
    evs = [rdma(i * 30_000, np_cnp_sent=50 * 30 * i) for i in range(10)]
    evs.append(rdma(300_000, np_cnp_sent=50 * 30 * 10, local_ack_timeout_err=30 * 200))
    out = run_node(evs)
    assert kinds(out) == ["rdma_congestion"] and out[0].category == "network_congestion"
    # counters reset to zero after a reboot: no surge, no link event
    assert run_node([rdma(0, np_cnp_sent=10**9), rdma(30_000), rdma(60_000, np_cnp_sent=1500)]) == []
    assert kinds(run_node([rdma(0), rdma(30_000, link_downed=1)])) == ["rdma_link_downed"]


def sto(ts, lat=2.0, mbps=500.0, used=40.0):
    return E("storage.sample", ts, {"path": "/ckpt", "read_lat_ms": lat, "write_lat_ms": lat, "read_mbps": mbps,
                                    "write_mbps": 0.0, "used_pct": used})


def test_storage_latency_against_own_baseline():
    normal = [sto(i * 10_000, lat=2.0 + (i % 3) * 0.3) for i in range(20)]
    assert run_node(normal) == []
    slow = normal + [sto(200_000 + i * 10_000, lat=80.0, mbps=20.0) for i in range(3)]
    out = run_node(slow)
    assert kinds(out) == ["storage_slow"] and out[0].component == "path:/ckpt"
    # a mount that is always ~60 ms is not "slow" by its own standard
    assert run_node([sto(i * 10_000, lat=60.0 + i % 5) for i in range(30)]) == []


def test_mount_state_and_capacity():
    out = run_node([E("storage.mount", 0, {"path": "/ckpt", "state": "ok"}),
                    E("storage.mount", 1, {"path": "/ckpt", "state": "stale", "error": "ESTALE"}),
                    E("storage.mount", 2, {"path": "/ckpt", "state": "stale"})])
    assert kinds(out) == ["mount_stale"] and out[0].category == "storage_unavailable"
    out = run_node([sto(0, used=90.0), sto(10_000, used=99.2), sto(20_000, used=99.5)])
    assert kinds(out) == ["storage_full"]


def job_events(js, evs):
    out = []
    for e in evs:
        feed_job(js, e, CFG, out)
    return out


def sched(ts, state, attempt=0, nodes=("n1", "n2")):
    ranks = {str(i): nodes[i // 4] for i in range(4 * len(nodes))}
    return E("sched.job", ts, {"state": state, "attempt": attempt, "nodes": list(nodes), "gpus": 4 * len(nodes),
                               "ranks": ranks, "start_ts": ts if state == "running" else None}, node=None, job="9")


def prog(ts, rank, step, st=1.0):
    return E("runtime.progress", ts, {"rank": rank, "step": step, "step_time_s": st}, node=None, job="9")


def test_stall_threshold_from_own_step_times_with_floor():
    js = JobState(job="9")
    evs = [sched(0, "running")] + [prog(1000 + i * 20_000, r, i) for i in range(20) for r in range(8)]
    job_events(js, evs)
    rec = js.attempts[0]
    th = rec.stall_threshold_ms(CFG)
    assert th == max(CFG.stall_floor_ms, int(CFG.stall_factor * 20_000))
    last = rec.prog_last_ts
    assert not stalled(rec, last + th - 1, CFG) and stalled(rec, last + th + 1, CFG)


def test_straggler_rank():
    js = JobState(job="9")
    evs = [sched(0, "running")] + [prog(1000 + i * 20_000, r, i, st=(3.0 if r == 5 else 1.0))
                                   for i in range(10) for r in range(8)]
    out = job_events(js, evs)
    st = [s for s in out if s.kind == "straggler"]
    assert len(st) == 1 and st[0].data["rank"] == 5 and st[0].node == "n2"


def test_checkpoint_failure_staleness_and_container_oom():
    js = JobState(job="9")
    evs = [sched(0, "running")]
    evs += [E("runtime.checkpoint", 60_000 * k, {"phase": "succeeded", "step": k * 100, "path": "/ckpt/a"}, node=None, job="9")
            for k in range(1, 5)]
    evs.append(E("runtime.checkpoint", 300_000, {"phase": "failed", "step": 500, "path": "/ckpt/run/s500.pt",
                                                 "error": "OSError: [Errno 28] No space left on device"}, node=None, job="9"))
    evs.append(E("runtime.container", 310_000, {"container": "c1", "event": "oom_killed", "exit_code": 137}, node="n2", job="9"))
    out = job_events(js, evs)
    cf = [s for s in out if s.kind == "checkpoint_failed"][0]
    assert cf.category == "storage_full" and cf.component == "path:/ckpt"
    oom = [s for s in out if s.kind == "container_oom"][0]
    assert oom.category == "host_oom" and oom.component == "node:n2"
    rec = js.attempts[0]
    assert rec.last_checkpoint(10**9).step == 400
    assert not checkpoint_stale(rec, 240_000 + 100_000, CFG) and checkpoint_stale(rec, 240_000 + 200_000, CFG)


def test_log_signature_signal_maps_rank_to_node():
    js = JobState(job="9")
    out = job_events(js, [sched(0, "running"), E("runtime.log", 5_000, {"rank": 6, "stream": "stderr",
                          "message": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB"}, node=None, job="9")])
    s = [x for x in out if x.kind == "log:cuda_oom"][0]
    assert s.node == "n2" and s.category == "gpu_oom" and s.data["rank"] == 6


def _sched(ts, attempt, state, **kw):
    d = {"attempt": attempt, "state": state, "nodes": ["n1"], "gpus": 8, **kw}
    return E("sched.job", ts, d, node=None, job="j1")


def _ck(ts, step, phase="succeeded"):
    return E("runtime.checkpoint", ts, {"phase": phase, "step": step, "path": f"/ckpt/s{step}"}, node=None, job="j1")


def _prog(ts, step):
    return E("runtime.progress", ts, {"rank": 0, "step": step, "step_time_s": 1.0}, node=None, job="j1")


def test_runtime_before_the_first_scheduler_record_is_kept():
    """A scheduler collector that reports a job only when it ended (sacct polling): the
    progress and checkpoints that came first belong to that attempt."""
    js, out = JobState(job="j1"), []
    for ev in [_prog(10_000, 1), _ck(20_000, 1), _prog(30_000, 2), _ck(40_000, 2), _prog(50_000, 3),
               _sched(90_000, 0, "failed", start_ts=5_000, end_ts=60_000)]:
        feed_job(js, ev, CFG, out)
    rec = js.attempts[0]
    assert js.early is None and rec.prog_n == 3 and rec.prog_last_step == 3
    assert rec.last_checkpoint(60_000).step == 2 and rec.first_ts == 10_000


def test_retry_resumes_from_the_earlier_attempts_checkpoint():
    js, out = JobState(job="j1"), []
    for ev in [_sched(0, 0, "running", start_ts=0), _ck(20_000, 7), _sched(30_000, 0, "failed", end_ts=30_000),
               _sched(40_000, 1, "running", start_ts=40_000), _sched(50_000, 1, "failed", end_ts=50_000)]:
        feed_job(js, ev, CFG, out)
    a1 = js.attempts[1]
    assert not a1.ckpts and a1.last_checkpoint(50_000).step == 7   # what attempt 1 resumed from
    assert js.attempts[0].last_checkpoint(30_000).step == 7


def test_gpu_lost_when_one_gpu_goes_silent():
    """GPU 3 stops reporting while GPU 0 goes on: one gpu_lost for GPU 3, citing its last
    sample; a node whose GPUs all stop together raises nothing; a GPU that comes back re-arms."""
    def s(ts, g):
        return gs(ts, gpu=g)

    evs = [s(t, g) for t in range(0, 60_000, 10_000) for g in (0, 3)]      # both report
    last3 = evs[-1]
    evs += [s(t, 0) for t in range(60_000, 200_000, 10_000)]                # then only GPU 0
    out = [x for x in run_node(evs) if x.kind == "gpu_lost"]
    assert len(out) == 1 and out[0].component == "gpu:n1/3" and out[0].category == "gpu_hardware"
    assert out[0].evidence == [last3.id] and out[0].data["last_ts"] == 50_000
    # every GPU silent at once (the node went down): nothing to blame on one GPU
    quiet = [s(t, g) for t in range(0, 60_000, 10_000) for g in (0, 3)] + [s(400_000, 0), s(400_000, 3)]
    assert [x for x in run_node(quiet) if x.kind == "gpu_lost"] == []
