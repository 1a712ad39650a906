"""The hard cases of attribution, pinned on hand-made event sets."""

from __future__ import annotations

import msgspec

from faultline.schemas import encode
from faultline.streams.engine import Engine, EngineConfig

from streams_fixtures import WATCHDOG, Sim, shuffled_within

MIN = 60_000


def run(events, lateness=10_000):
    eng = Engine(EngineConfig(lateness_ms=lateness))
    eng.process(events)
    eng.finish()
    return eng


def cluster(sim: Sim, nodes=("n1", "n2", "n3", "n4")):
    for i, n in enumerate(nodes):
        sim.topology(n, "leaf-01" if i < 2 else "leaf-02", f"Eth1/{i + 1}", "leaf-01" if i < 2 else "leaf-02")
        sim.versions(n, driver="570.86.10", nccl="2.21.5", image="repo/train:v1")


def telemetry(sim, nodes, t_to, gpus=4, gpu_over=None):
    for i, n in enumerate(nodes):
        sim.gpu_samples(n, gpus, 0, t_to, every=15_000, over=gpu_over(n) if gpu_over else None)
        sim.port_samples("leaf-01" if i < 2 else "leaf-02", f"Eth1/{i + 1}", 0, t_to, every=15_000)
        sim.storage_samples(n, "/ckpt", 0, t_to, every=15_000)
        sim.bmc(n, 0, t_to)


def gpu_fault_on_n2():
    """XID 79 on n2 GPU 1; every rank on healthy n1 prints the NCCL watchdog timeout first."""
    sim = Sim()
    cluster(sim)
    nodes = ["n1", "n2"]
    sim.job("100", 0, nodes, 4, 1 * MIN, 20 * MIN, state="failed")
    sim.progress("100", nodes, 4, 1 * MIN + 10_000, 9 * MIN)
    sim.ckpt("100", 5 * MIN, 300)

    def over(n):
        return (lambda t, g: {"util_pct": 0.0} if n == "n2" and g == 1 and t > 9 * MIN else None)
    telemetry(sim, ["n1", "n2", "n3", "n4"], 21 * MIN, gpu_over=over)
    sim.ev("gpu.xid", 9 * MIN + 5_000, {"gpu": 1, "pci": "0000:3b:00.0", "xid": 79,
                                        "message": "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."}, node="n2")
    for r in range(4):
        sim.log("100", 19 * MIN + 100 * r, WATCHDOG.format(r=r), rank=r)
    sim.log("100", 19 * MIN + 900, "RuntimeError: CUDA error: unspecified launch failure", rank=5, node="n2")
    return sim


def test_symptom_on_healthy_node_cause_elsewhere():
    eng = run(gpu_fault_on_n2().events)
    incs = eng.incidents()
    assert len(incs) == 1
    inc = incs[0]
    assert inc.symptom.startswith("nccl_timeout on rank 0")
    assert inc.root_cause.category == "gpu_hardware"
    assert inc.root_cause.component == "gpu:n2/1"
    assert "net" in inc.ruled_out and "storage" in inc.ruled_out and "hw" in inc.ruled_out
    assert inc.last_checkpoint is not None and inc.last_checkpoint.step == 300
    # 8 GPUs x (20 min - 5 min)
    assert abs(inc.lost_gpu_hours - 8 * 15 / 60) < 1e-6
    assert [e.ts for e in inc.evidence] == sorted(e.ts for e in inc.evidence)


def test_decoy_alarms_off_the_jobs_path():
    """A dead GPU and a down port on n3/n4 (not the job's) must not be blamed; the flapping
    switch port in front of n2 must."""
    sim = Sim()
    cluster(sim)
    nodes = ["n1", "n2"]
    sim.job("200", 0, nodes, 4, 1 * MIN, 22 * MIN, state="failed")
    sim.progress("200", nodes, 4, 1 * MIN + 10_000, 11 * MIN)
    telemetry(sim, ["n1", "n2", "n3", "n4"], 23 * MIN)
    # decoys
    sim.ev("gpu.xid", 10 * MIN, {"gpu": 0, "xid": 79, "message": "NVRM: Xid (PCI:0000:1b:00): 79, fallen off"}, node="n3")
    sim.ev("hw.sel", 10 * MIN, {"entry_id": "9", "severity": "critical", "sensor_type": "Power Supply",
                                "message": "PSU 2 failure"}, node="n4")
    sim.ev("net.link", 10 * MIN, {"device": "leaf-02", "port": "Eth1/4", "state": "down"})
    # the real fault: n2's switch port flaps
    for k in range(3):
        sim.ev("net.link", 11 * MIN + k * 20_000, {"device": "leaf-01", "port": "Eth1/2", "state": "down"})
        sim.ev("net.link", 11 * MIN + k * 20_000 + 5_000, {"device": "leaf-01", "port": "Eth1/2", "state": "up"})
    for r in range(8):
        sim.log("200", 21 * MIN + 50 * r, WATCHDOG.format(r=r), rank=r)
    inc = run(sim.events).incidents()[0]
    assert inc.root_cause.category == "network_link"
    assert inc.root_cause.component == "port:leaf-01/Eth1/2"
    comps = {h.component for h in inc.hypotheses}
    assert "gpu:n3/0" not in comps and "node:n4" not in comps and "port:leaf-02/Eth1/4" not in comps


def test_user_error_with_benign_xid_afterwards():
    sim = Sim()
    cluster(sim)
    nodes = ["n1"]
    sim.job("300", 0, nodes, 4, 1 * MIN, 6 * MIN, state="failed")
    sim.progress("300", nodes, 4, 1 * MIN + 10_000, 5 * MIN)
    telemetry(sim, ["n1"], 7 * MIN)
    sim.log("300", 5 * MIN + 2_000, "Traceback (most recent call last):\n  File \"train.py\", line 88, in <module>\n"
            "    batch = loader[idx]\nKeyError: 'input_ids'", rank=2, node="n1")
    sim.ev("gpu.xid", 5 * MIN + 4_000, {"gpu": 2, "xid": 43, "message": "NVRM: Xid (PCI:0000:5b:00): 43, pid=77, Ch 00000008"}, node="n1")
    sim.ev("gpu.xid", 5 * MIN + 4_500, {"gpu": 2, "xid": 13, "message": "NVRM: Xid (PCI:0000:5b:00): 13, Graphics Exception"}, node="n1")
    inc = run(sim.events).incidents()[0]
    assert inc.root_cause.category == "application", inc.root_cause
    assert inc.root_cause.component == "job:300"
    assert inc.symptom == "KeyError on rank 2"


def test_cuda_oom_blames_the_gpu():
    sim = Sim()
    cluster(sim)
    sim.job("310", 0, ["n1"], 4, 1 * MIN, 6 * MIN, state="failed")
    sim.progress("310", ["n1"], 4, 1 * MIN + 10_000, 5 * MIN)
    telemetry(sim, ["n1"], 7 * MIN)
    sim.log("310", 5 * MIN + 2_000, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. "
            "GPU 3 has a total capacity of 79.15 GiB of which 120 MiB is free.", rank=3)
    inc = run(sim.events).incidents()[0]
    assert (inc.root_cause.category, inc.root_cause.component) == ("gpu_oom", "gpu:n1/3")


def test_stall_on_stale_mount_then_cancel_is_one_incident():
    sim = Sim()
    cluster(sim)
    nodes = ["n1", "n2"]
    sim.job("400", 0, nodes, 4, 1 * MIN, 40 * MIN, state="cancelled", exit_code=None)
    last = 10 * MIN
    sim.progress("400", nodes, 4, 1 * MIN + 10_000, last)
    telemetry(sim, ["n1", "n2", "n3"], 41 * MIN)
    sim.ev("storage.mount", last + 2_000, {"path": "/ckpt", "state": "stale", "error": "Stale file handle"}, node="n2")
    eng = run(sim.events)
    incs = eng.incidents()
    assert len(incs) == 1
    inc = incs[0]
    assert inc.failure_ts == sim.t0 + last
    assert (inc.root_cause.category, inc.root_cause.component) == ("storage_unavailable", "path:/ckpt")
    assert inc.state == "cancelled" and inc.revision >= 2
    assert inc.symptom.startswith("stall")


def test_completed_and_user_cancelled_jobs_have_no_incident():
    sim = Sim()
    cluster(sim)
    sim.job("500", 0, ["n1"], 4, 1 * MIN, 8 * MIN, state="completed", exit_code=0)
    sim.progress("500", ["n1"], 4, 1 * MIN + 10_000, 8 * MIN - 5_000)
    sim.job("501", 0, ["n2"], 4, 1 * MIN, 8 * MIN, state="cancelled", exit_code=None)
    sim.progress("501", ["n2"], 4, 1 * MIN + 10_000, 8 * MIN - 5_000)
    telemetry(sim, ["n1", "n2"], 9 * MIN)
    assert run(sim.events).incidents() == []


def test_retry_reemits_same_id_with_higher_revision():
    sim = gpu_fault_on_n2()
    sim.job("100", 1, ["n1", "n3"], 4, 30 * MIN, None)
    eng = Engine(EngineConfig(lateness_ms=10_000))
    outs = eng.process(sim.events) + eng.finish()
    incs = [o for o in outs if type(o).__name__ == "Incident"]
    assert len({i.id for i in incs}) == 1
    final = eng.incidents()[0]
    assert final.retry is not None and final.retry.attempt == 1 and final.retry.same_nodes is False
    assert final.revision == max(i.revision for i in incs)


def test_out_of_order_and_duplicates_give_the_same_incidents():
    sim = gpu_fault_on_n2()
    sim.job("100", 1, ["n1", "n3"], 4, 30 * MIN, None)
    base = [encode(i) for i in run(sim.events).incidents()]
    for seed in (1, 2, 3):
        shuffled = shuffled_within(sim.events, 10_000, seed=seed)
        got = [encode(i) for i in run(shuffled, lateness=10_000).incidents()]
        assert got == base
    eng = run(shuffled_within(sim.events, 10_000, seed=4))
    assert eng.stats.duplicates > 0


def test_invalid_input_is_counted_not_fatal():
    sim = gpu_fault_on_n2()
    raw = [msgspec.json.encode(e) for e in sim.events] + [b"{not json", b'{"v":1}', b'{"v":1,"id":"x","ts":1,"kind":"nope","source":"s","data":{}}']
    eng = run(raw)
    assert eng.stats.invalid == 3 and len(eng.incidents()) == 1
