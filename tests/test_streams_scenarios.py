"""Every simulator scenario through ``Engine`` (what ``faultline diagnose`` runs): each labeled
interruption gets the right category and component, healthy attempts get no incident, and
checkpoint step and lost GPU-hours match the ground truth (within 2 %).

Scenarios run on a smaller fleet (8 nodes, GPU samples every 30 s) to keep the suite fast;
``bench/streams.py --accuracy`` runs them at full size and prints the per-category table.
"""

from __future__ import annotations

import pytest

sim = pytest.importorskip("faultline.producers.simulate", reason="simulator not importable")

from faultline.streams.engine import Engine, EngineConfig  # noqa: E402

SCENARIOS = sim.scenario_names()


def score(name: str, seed: int = 1, **kw):
    lines, labels = sim.simulate(name, seed=seed, **kw)
    eng = Engine(EngineConfig())
    for i in range(0, len(lines), 8192):
        eng.process(lines[i:i + 8192])
    eng.finish()
    incs = {(i.job, i.attempt): i for i in eng.incidents()}
    problems = []
    for lab in labels["interruptions"]:
        key = (lab["job"], lab["attempt"])
        inc = incs.get(key)
        if inc is None:
            problems.append(f"missed {key} {lab['category']} {lab['component']}")
            continue
        got = (inc.root_cause.category, inc.root_cause.component)
        if got != (lab["category"], lab["component"]):
            problems.append(f"{key}: want {lab['category']} {lab['component']}, got {got[0]} {got[1]}")
        step = inc.last_checkpoint.step if inc.last_checkpoint else None
        if step != lab["last_checkpoint_step"]:
            problems.append(f"{key}: checkpoint step {step} != {lab['last_checkpoint_step']}")
        want = lab["lost_gpu_hours"]
        if abs(inc.lost_gpu_hours - want) > 0.02 * max(want, 1e-9) + 1e-6:
            problems.append(f"{key}: lost GPU-h {inc.lost_gpu_hours} != {want}")
    labeled = {(l["job"], l["attempt"]) for l in labels["interruptions"]}
    for key, inc in incs.items():
        if key not in labeled:
            problems.append(f"incident for a healthy attempt {key}: {inc.state} {inc.root_cause.category}")
    return labels, problems


@pytest.mark.slow
@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario(name):
    labels, problems = score(name, nodes=8, intervals=sim.Intervals(gpu=30))
    assert not problems, "\n".join(problems)
    if name == "healthy":
        assert labels["interruptions"] == []


def _incidents(lines):
    eng = Engine(EngineConfig(lateness_ms=10_000))
    for i in range(0, len(lines), 5000):
        eng.process(lines[i:i + 5000])
    eng.finish()
    return eng


@pytest.mark.slow
def test_delivery_faults_do_not_change_incidents():
    """Out-of-order (within the lateness bound), duplicated and malformed delivery of the
    same scenario gives byte-identical incidents."""
    from faultline.schemas import encode

    kw = {"nodes": 8, "intervals": sim.Intervals(gpu=30), "hours": 2.0}
    clean, _ = sim.simulate("port-down", seed=4, **kw)
    messy, labels = sim.simulate("port-down", seed=4,
                                 delivery=sim.Delivery(out_of_order=0.3, max_delay_s=4.0, duplicates=0.05,
                                                       malformed=0.001), **kw)
    a, b = _incidents(clean), _incidents(messy)
    assert b.stats.duplicates > 0 and b.stats.invalid > 0
    assert [encode(i) for i in a.incidents()] == [encode(i) for i in b.incidents()]
    assert len(a.incidents()) >= 1
