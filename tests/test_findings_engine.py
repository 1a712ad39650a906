"""Findings through the real Engine (detectors + correlation -> incidents -> findings):
``FindingsRunner`` (the CLI's ``findings --from`` vs ``ingest`` + ``findings``:
tests/test_cli_findings.py)."""

from __future__ import annotations

import random

import orjson

from faultline.streams.findings import FindingsRunner

H = 3_600_000
T0 = 1_790_000_000_000 - (1_790_000_000_000 % (24 * H))


def engine_fleet(seed: int, *, lemon: str | None = "n07", drift: bool = False, hours: int = 48) -> list[dict]:
    """Raw contract events of a 16-node fleet: jobs of 1-4 nodes, every hour; a job that
    lands on the lemon node dies of XID 79 on it most of the time; elsewhere XIDs are rare."""
    rng = random.Random(seed)
    nodes = [f"n{i:02d}" for i in range(16)]
    evs: list[dict] = []

    def ev(kind, ts, data, node=None, job=None, eid=None):
        evs.append({"v": 1, "id": eid or f"e{len(evs)}-{seed}", "ts": ts, "kind": kind, "source": "sim",
                    "node": node, "job": job, "data": data})

    for i, n in enumerate(nodes):
        ev("inventory.topology", T0 - H, {"links": [{"nic": "mlx5_0", "switch": f"leaf-{i // 8}", "port": f"Eth1/{i % 8 + 1}",
                                                     "segment": f"leaf-{i // 8}"}],
                                          "storage": [{"path": "/ckpt", "backend": "nfs"}]}, node=n)
        drv = "535.161.08" if drift and n == "n03" else "550.54.15"
        ev("inventory.versions", T0 - H, {"driver": drv, "cuda": "12.4", "nccl": "2.21.5"}, node=n)
    free = {n: T0 for n in nodes}
    j = 0
    t = T0
    while t < T0 + hours * H:
        t += int(rng.expovariate(1 / (12 * 60_000)))
        k = rng.choice([1, 2, 2, 4])
        avail = [n for n in nodes if free[n] <= t]
        if len(avail) < k:
            continue
        js = sorted(rng.sample(avail, k))
        j += 1
        job = str(500 + j)
        dur = int(rng.uniform(0.5, 3) * H)
        common = {"attempt": 0, "nodes": js, "gpus": 8 * k, "image": "repo/train:v1", "name": "t", "user": "u",
                  "start_ts": t}
        ev("sched.job", t, dict(common, state="running"), job=job)
        culprit = None
        if lemon in js and rng.random() < 0.7:
            culprit = lemon
        elif rng.random() < 0.03 * k:
            culprit = rng.choice(js)
        end = t + (int(rng.uniform(0.1, 0.9) * dur) if culprit else dur)
        if culprit:
            g = rng.randrange(8)
            ev("gpu.xid", end - 5_000, {"gpu": g, "xid": 79, "pci": f"0000:{g:02x}:00.0", "pid": None,
                                        "message": f"NVRM: Xid (PCI:0000:{g:02x}:00): 79, pid=1234, GPU has fallen off the bus."},
               node=culprit)
            ev("sched.job", end, dict(common, state="failed", end_ts=end, exit_code=1), job=job)
        else:
            ev("sched.job", end, dict(common, state="completed", end_ts=end, exit_code=0), job=job)
        for n in js:
            free[n] = end
    evs.sort(key=lambda e: (e["ts"], e["id"]))
    return evs


def run_runner(evs, batch=500):
    r = FindingsRunner(step_ms=H)
    out = []
    for i in range(0, len(evs), batch):
        out.extend(r.process([orjson.dumps(e) for e in evs[i:i + batch]]))
    out.extend(r.finish())
    return r, out


def test_engine_lemon_node_found_with_incidents():
    evs = engine_fleet(1)
    r, out = run_runner(evs)
    incs = r.engine.incidents()
    assert incs, "engine produced no incidents"
    on_lemon = [i for i in incs if i.root_cause.component.startswith(("gpu:n07/", "node:n07"))]
    assert len(on_lemon) >= 3, [(i.root_cause.category, i.root_cause.component) for i in incs]
    found = [o for o in out if type(o).__name__ == "Finding" and o.kind == "repeat_offender"]
    subjects = {f.subject for f in found}
    assert "node:n07" in subjects, (subjects, [(i.root_cause.component) for i in incs])
    assert subjects <= {"node:n07"} | {f"gpu:n07/{g}" for g in range(8)}, subjects
    f = max((f for f in found if f.subject == "node:n07"), key=lambda f: f.count)
    assert set(f.incidents) <= {i.id for i in incs} and f.incidents
    alerts = [o for o in out if type(o).__name__ == "Alert" and o.detector == "repeat_offender"]
    assert any(a.subject == "node:n07" for a in alerts)


def test_engine_findings_do_not_depend_on_batching():
    evs = engine_fleet(2)
    _, a = run_runner(evs, batch=97)
    _, b = run_runner(evs, batch=2000)
    fa = {(o.id, o.count) for o in a if type(o).__name__ == "Finding"}
    fb = {(o.id, o.count) for o in b if type(o).__name__ == "Finding"}
    assert fa and fa == fb


def test_engine_version_drift_before_failure():
    evs = engine_fleet(3, lemon=None, drift=True, hours=12)
    r, out = run_runner(evs)
    drift = [o for o in out if type(o).__name__ == "Finding" and o.kind == "version_drift"]
    assert drift and all("n03" in f.summary for f in drift)
    jobs_with_n03 = {e["job"] for e in evs if e["kind"] == "sched.job" and "n03" in e["data"]["nodes"]
                     and len(e["data"]["nodes"]) > 1}
    assert {f.subject[4:] for f in drift} == jobs_with_n03
