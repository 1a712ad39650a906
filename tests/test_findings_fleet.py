"""Proactive findings on synthetic fleets (seeded): each injected fault is found with the
right subject, healthy subjects are not, and the false-positive rate over many healthy
seeds is measured and bounded. The generator is reused by the other findings tests."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import pytest

from faultline.schemas.events import (
    InventoryChange, InventoryChangeData, InventoryTopology, InventoryTopologyData,
    InventoryVersions, SchedJob, SchedJobData, TopologyLink, TopologyStorage,
)
from faultline.schemas.outputs import Affected, Alert, Cause, Incident
from faultline.streams.findings import FindingsConfig, FindingsTracker

H = 3_600_000
T0 = 1_790_000_000_000 - (1_790_000_000_000 % (7 * 24 * H))  # a week boundary
DAYS = 7
NODES = [f"n{i:03d}" for i in range(64)]
GPN = 8
# base hazards per GPU-hour
L_GPU, L_NODE, L_PORT, L_SEG, L_PATH = 1 / 6000, 1 / 8000, 1 / 40000, 1 / 40000, 1 / 60000
P_APP, P_PREEMPT = 0.04, 0.03
IMAGES = ["repo/train:v1", "repo/train:v2", "repo/eval:v7"]


def seg_of(n: str) -> str:
    return f"leaf-{int(n[1:]) // 8:02d}"


def port_of(n: str) -> str:
    return f"{seg_of(n)}/Eth1/{int(n[1:]) % 8 + 1}"


def ckpt_of(n: str) -> str:
    return "/ckpt-" + "abcd"[int(n[1:]) % 4]


@dataclass
class Faults:
    lemon: str | None = None            # node with 15x hardware hazard
    flap: str | None = None             # port "leaf-xx/Eth1/y": 300x link hazard + flap alerts
    bad_image: str | None = None        # image rolled out at day 2 with 40% early failures
    storage: str | None = None          # path whose hazard grows 1 -> 80x over the run
    driver_change: int = 0              # nodes taking driver 570.86.10 at day 3.5
    driver_factor: float = 1.0          # their hazard multiplier after the change
    drift_job: bool = False


@dataclass
class Fleet:
    items: list = field(default_factory=list)  # (ts, order, item)

    def add(self, ts, item, order=0):
        self.items.append((ts, order, item))


def make_fleet(seed: int, faults: Faults | None = None, days: int = DAYS) -> list[tuple[int, object]]:
    """A week of a 64-node, 512-GPU fleet: inventory, sched.job lifecycles and the incidents a
    correlator would emit, in event-time order. Faults multiply hazards of one subject."""
    f = faults or Faults()
    rng = random.Random(seed)
    irng = random.Random(seed * 7919 + 1)  # image choice on its own stream
    fl = Fleet()
    end_t = T0 + days * 24 * H
    changed: dict[str, int] = {}
    if f.driver_change:
        t_ch = T0 + int(3.5 * 24 * H)
        for k, n in enumerate(sorted(rng.sample(NODES, f.driver_change))):
            changed[n] = t_ch + k * 60_000
    for n in NODES:
        fl.add(T0 - H, InventoryTopology(v=1, id=f"topo-{n}", ts=T0 - H, source="sim", node=n,
               data=InventoryTopologyData(
                   links=[TopologyLink(nic="mlx5_0", switch=seg_of(n), port=port_of(n).split("/", 1)[1], segment=seg_of(n))],
                   storage=[TopologyStorage(path="/data", backend="nfs"), TopologyStorage(path=ckpt_of(n), backend="lustre")])))
        drv = "550.54.15"
        if f.drift_job and n == "n001":
            drv = "535.161.08"
        fl.add(T0 - H, InventoryVersions(v=1, id=f"ver-{n}", ts=T0 - H, source="sim", node=n,
               data={"driver": drv, "cuda": "12.4", "nccl": "2.21.5", "gpu_firmware": "96.00.89.00"}))
    for n, t in changed.items():
        fl.add(t, InventoryChange(v=1, id=f"chg-{n}", ts=t, source="sim", node=n,
               data=InventoryChangeData(component="driver", from_="550.54.15", to="570.86.10",
                                        actor="alice", ticket="CHG-4711")))
    # critical link alerts: background (each port ~once in 3 weeks) and the flapping port every ~4 h
    arng = random.Random(seed * 31 + 7)
    for n in NODES:
        p = port_of(n)
        rate = 1 / (4 * H) if p == f.flap else 1 / (21 * 24 * H)
        ta = T0 + int(arng.expovariate(rate))
        while ta < end_t:
            fl.add(ta, Alert(id=f"al-flap-{p}-{ta}", ts=ta, severity="critical", detector="link_flap",
                             summary=f"port {p} down/up", node=n, subject=f"port:{p}"))
            ta += int(arng.expovariate(rate))
    free = {n: T0 for n in NODES}
    t = T0
    j = 0
    while True:
        t += int(rng.expovariate(1 / (25 * 60_000)))
        if t >= end_t:
            break
        k = rng.choice([1, 2, 4, 4, 8])
        avail = [n for n in NODES if free[n] <= t]
        if len(avail) < k:
            continue
        nodes = sorted(rng.sample(avail, k))
        j += 1
        job = str(10_000 + j)
        dur = int(min(24 * H, max(H / 2, rng.expovariate(1 / (6 * H)))))
        image = irng.choice(IMAGES)
        if f.bad_image and t >= T0 + 2 * 24 * H and irng.random() < 0.4:
            image = f.bad_image
        # hazards (per hour) -> (rate, category, component, affected)
        hz: list[tuple[float, str, str, Affected]] = []
        frac = (t - T0) / (days * 24 * H)
        for n in nodes:
            m_hw = 40.0 if n == f.lemon else 1.0
            if n in changed and t >= changed[n]:
                hz.append((L_GPU * GPN * (f.driver_factor - 1) + 1e-12, "driver_software",
                           f"gpu:{n}/{rng.randrange(GPN)}", Affected(nodes=[n])))
            g = rng.randrange(GPN)
            hz.append((L_GPU * GPN * m_hw, "gpu_hardware", f"gpu:{n}/{g}", Affected(nodes=[n], gpus=[f"{n}/{g}"])))
            hz.append((L_NODE * GPN * m_hw, "node_hardware", f"node:{n}", Affected(nodes=[n])))
            p = port_of(n)
            hz.append((L_PORT * GPN * (300.0 if p == f.flap else 1.0), "network_link", f"port:{p}", Affected(ports=[p])))
            for path in ("/data", ckpt_of(n)):
                m = 1.0 + (79.0 * frac if path == f.storage else 0.0)
                hz.append((L_PATH * GPN * m, "storage_slow", f"path:{path}", Affected(paths=[path])))
        for s in sorted({seg_of(n) for n in nodes}):
            hz.append((L_SEG * GPN * sum(1 for n in nodes if seg_of(n) == s), "network_congestion", f"segment:{s}", Affected()))
        total = sum(h[0] for h in hz)
        fail_at, cause = None, None
        x = rng.expovariate(total) * H
        if x < dur:
            fail_at = t + int(x)
            r = rng.random() * total
            for h in hz:
                r -= h[0]
                if r <= 0:
                    cause = h
                    break
            cause = cause or hz[-1]
        p_app = 0.4 if image == f.bad_image else P_APP
        if rng.random() < p_app:
            ta = t + int(rng.random() * (dur if image != f.bad_image else H / 2))
            if fail_at is None or ta < fail_at:
                fail_at, cause = ta, (0, "application", f"job:{job}", Affected())
        if rng.random() < P_PREEMPT:
            tp = t + int(rng.random() * dur)
            if fail_at is None or tp < fail_at:
                fail_at, cause = tp, (0, "scheduler", f"job:{job}", Affected())
        end = fail_at if fail_at is not None else t + dur
        end = min(end, end_t)
        for n in nodes:
            free[n] = end
        common = dict(attempt=0, nodes=nodes, gpus=GPN * len(nodes), image=image, name="train", user="u")
        fl.add(t, SchedJob(v=1, id=f"job-{job}-run", ts=t, source="sim", job=job,
                           data=SchedJobData(state="running", start_ts=t, **common)))
        if end >= end_t and fail_at is None:
            continue
        state = "completed" if fail_at is None else ("preempted" if cause[1] == "scheduler" else "failed")
        fl.add(end, SchedJob(v=1, id=f"job-{job}-end", ts=end, source="sim", job=job,
                             data=SchedJobData(state=state, start_ts=t, end_ts=end, **common)))
        if fail_at is not None:
            fl.add(end + 60_000, Incident(
                id=f"inc-{job}-0", revision=1, job=job, attempt=0, tenant=None, failure_ts=end,
                symptom="nccl timeout", root_cause=Cause(category=cause[1], component=cause[2], summary="sim", confidence=0.8),
                # like streams/correlate.py: the blast radius (every node, port and path of the job)
                affected=Affected(nodes=nodes, gpus=cause[3].gpus, ports=sorted({port_of(n) for n in nodes}),
                                  paths=sorted({"/data"} | {ckpt_of(n) for n in nodes})),
                image=image, start_ts=t, gpus=GPN * len(nodes), state=state), order=1)
    fl.items.sort(key=lambda x: (x[0], x[1]))
    return [(ts, it) for ts, _, it in fl.items]


def run(items, cfg: FindingsConfig | None = None, step_ms: int = 6 * H, tracker: FindingsTracker | None = None):
    """Feed a timeline in order, evaluating every ``step_ms`` of event time like the stream."""
    tr = tracker or FindingsTracker(cfg)
    found = []
    next_eval = T0 + step_ms
    for ts, it in items:
        while ts >= next_eval:
            found.extend(tr.evaluate(next_eval))
            next_eval += step_ms
        found.extend(tr.feed([it]))
    found.extend(tr.evaluate(next_eval))
    return tr, found


def flagged(found, kind="repeat_offender"):
    return {(f.dimension, f.subject) for f in found if f.kind == kind}


# ---------------------------------------------------------------------- tests
def test_lemon_node_found():
    _, found = run(make_fleet(1, Faults(lemon="n017")))
    subs = flagged(found)
    assert ("node", "node:n017") in subs, subs
    healthy = {s for s in subs if "n017" not in s[1]}
    assert not healthy, healthy
    f = next(f for f in found if f.subject == "node:n017")
    assert f.count >= 3 and f.exposure > 0 and f.fleet_rate > 0 and f.score < 1e-3
    assert "drain node n017" in f.action and f.incidents


def test_flapping_port_found():
    _, found = run(make_fleet(2, Faults(flap="leaf-03/Eth1/2")))
    subs = flagged(found)
    assert ("port", "port:leaf-03/Eth1/2") in subs, subs
    assert subs == {("port", "port:leaf-03/Eth1/2")}, subs
    f = max((f for f in found if f.subject == "port:leaf-03/Eth1/2"), key=lambda f: f.count)
    assert "cable" in f.action
    assert len({i.split("-")[1] for i in f.incidents}) >= 3  # several jobs behind it


def test_bad_image_rollout_found():
    _, found = run(make_fleet(3, Faults(bad_image="repo/train:v3-bad")))
    subs = flagged(found)
    assert ("image", "version:image=repo/train:v3-bad") in subs, subs
    assert subs == {("image", "version:image=repo/train:v3-bad")}, subs
    f = next(f for f in found if f.dimension == "image")
    assert f.exposure_unit == "attempts" and "roll back" in f.action


def test_degrading_storage_path_found():
    _, found = run(make_fleet(4, Faults(storage="/ckpt-c")))
    subs = flagged(found)
    assert ("path", "path:/ckpt-c") in subs, subs
    assert subs == {("path", "path:/ckpt-c")}, subs
    f = min((f for f in found if f.subject == "path:/ckpt-c"), key=lambda f: f.ts)
    # slowly failing: found before the end of the run, not only in hindsight
    assert f.ts < T0 + DAYS * 24 * H, f
    print(f"degrading path first flagged after {(f.ts - T0) / H:.0f} h: {f.summary}")


def test_all_faults_together():
    faults = Faults(lemon="n040", flap="leaf-01/Eth1/5", bad_image="repo/train:v3-bad", storage="/ckpt-b")
    _, found = run(make_fleet(5, faults))
    subs = {s for _, s in flagged(found)}
    for want in ("node:n040", "port:leaf-01/Eth1/5", "version:image=repo/train:v3-bad", "path:/ckpt-b"):
        assert want in subs, (want, subs)
    extra = {s for s in subs if "n040" not in s} - {"port:leaf-01/Eth1/5", "version:image=repo/train:v3-bad", "path:/ckpt-b"}
    assert not extra, extra


def test_false_positive_rate_healthy_fleets():
    """50 healthy weeks, evaluated every 6 h of event time on 24 h and 7 d windows over 7
    dimensions (each family at BH alpha=0.01): count flagged subjects."""
    seeds = 50
    flagged_subjects = 0
    seeds_with_flag = 0
    subjects_tested = 0
    for seed in range(1000, 1000 + seeds):
        tr, found = run(make_fleet(seed))
        subs = flagged(found) | flagged(found, "change_regression")
        flagged_subjects += len(subs)
        seeds_with_flag += bool(subs)
        subjects_tested += len({s for s in tr.exposure(T0 + DAYS * 24 * H, 7 * 24 * H)})
    alpha = FindingsConfig().alpha
    families = 7 * 2
    rate = seeds_with_flag / seeds
    print(f"\nFP: {flagged_subjects} healthy subjects flagged in {seeds} healthy fleet-weeks "
          f"({seeds_with_flag} weeks with any flag = {rate:.2%}); ~{subjects_tested // seeds} subjects/week tested; "
          f"per-subject-week FP = {flagged_subjects / subjects_tested:.2e}")
    # BH controls the family-wise error under the global null at alpha per family and look;
    # bound: families x alpha per week (the 28 looks per week are strongly correlated)
    assert rate <= families * alpha, rate


def test_findings_idempotent_and_state_roundtrip():
    items = make_fleet(7, Faults(lemon="n005", flap="leaf-06/Eth1/3"))
    tr1, found1 = run(items)
    tr2, found2 = run(items)
    assert found1 and [f.id for f in found1] == [f.id for f in found2]
    now = tr1.now  # the time of the last evaluation
    snap = tr1.snapshot(now)
    assert {f.id for f in snap} == {f.id for f in tr1.snapshot(now)}
    assert tr1.evaluate(now) == []  # nothing new at the same time: no re-emission
    # one finding per subject and window: an id belongs to one (kind, dimension, subject,
    # window) series, and a series keeps its id while it stays significant (later windows
    # are revisions of it, with later ts); a new id only after a gap longer than the window
    series: dict[str, set] = {}
    for f in found1:
        series.setdefault(f.id, set()).add((f.kind, f.dimension, f.subject, f.window_end - f.window_start))
    assert all(len(s) == 1 for s in series.values()), series
    by_series: dict[tuple, list] = {}
    for f in found1:
        by_series.setdefault(next(iter(series[f.id])), []).append(f)
    assert any(len(fs) > 1 and len({f.id for f in fs}) == 1 for fs in by_series.values())  # revisions
    for fs in by_series.values():
        fs.sort(key=lambda f: f.ts)
        for a, b in zip(fs, fs[1:]):
            assert b.ts > a.ts
            if b.id != a.id:  # a new episode: the series was not significant for a whole window
                assert b.window_start > a.window_end, (a, b)
    # the state survives dump/load (Faust changelog table) and gives the same answers
    tr3 = FindingsTracker.load(tr1.dump())
    assert [(f.id, f.count, f.score) for f in tr3.snapshot(now)] == [(f.id, f.count, f.score) for f in snap]
    # a half-way restart gives the same findings as an uninterrupted run
    half = len(items) // 2
    tr4, part1 = run(items[:half])
    tr5 = FindingsTracker.load(tr4.dump())
    _, part2 = run(items[half:], tracker=tr5)
    assert {f.id for f in part1 + part2} == {f.id for f in found1}


def test_bounded_state():
    tr, _ = run(make_fleet(8))
    before = tr.stats()
    # two quiet weeks later every window has moved past the data
    tr.evaluate(T0 + (DAYS + 30) * 24 * H)
    after = tr.stats()
    assert after["exposure_cells"] == 0 and after["interruptions"] == 0 and after["closed"] == 0, (before, after)
    cfg = FindingsConfig(max_attempts=50, max_interruptions=20)
    tr2, _ = run(make_fleet(8), cfg)
    assert tr2.stats()["closed"] <= 50 and tr2.stats()["interruptions"] <= 20


def test_change_regression_names_the_change():
    _, found = run(make_fleet(11, Faults(driver_change=16, driver_factor=12.0)))
    ch = [f for f in found if f.kind == "change_regression"]
    assert ch, [f.summary for f in found]
    assert {f.subject for f in ch} == {"version:driver=570.86.10"}
    f = ch[-1]
    assert f.dimension == "version" and f.count >= 3 and f.score < 0.01
    for word in ("550.54.15->570.86.10", "alice", "CHG-4711", "16 nodes"):
        assert word in f.summary, f.summary
    assert f.window_start == T0 + int(3.5 * 24 * H)  # when the change was made
    assert "roll back" in f.action


def test_benign_change_not_flagged():
    """Same rollout with no effect on the hazard: over 20 seeds, no change is flagged."""
    hits = 0
    for seed in range(2000, 2020):
        _, found = run(make_fleet(seed, Faults(driver_change=16, driver_factor=1.0)))
        hits += any(f.kind == "change_regression" for f in found)
    print(f"\nbenign driver change flagged in {hits}/20 seeds")
    assert hits <= 1


def test_version_drift_flagged_at_job_start():
    items = make_fleet(12, Faults(drift_job=True))
    tr = FindingsTracker()
    drift = []
    for ts, it in items:
        got = tr.feed([it])
        if got:
            assert isinstance(it, SchedJob) and it.data.state == "running"  # at start, not at failure
            assert "n001" in it.data.nodes
            drift.extend(got)
    assert drift
    f = drift[0]
    assert f.kind == "version_drift" and f.dimension == "job" and f.subject.startswith("job:")
    assert "driver" in f.summary and "535.161.08" in f.summary and "n001" in f.action
    # jobs without n001 are never flagged
    jobs_with_n001 = {it.job for _, it in items if isinstance(it, SchedJob) and "n001" in it.data.nodes and len(it.data.nodes) > 1}
    assert {f.subject[4:] for f in drift} <= jobs_with_n001
    from faultline.streams.findings import to_alert
    a = to_alert(f)
    assert a.detector == "version_drift" and a.job == f.subject[4:]
