"""The findings units one at a time (``streams/findings/``): statistics, exposure,
offenders (counts are interrupted attempts, alerts apart), changes, drift and revisions
(one finding per subject and window). Small hand-made inputs, exact expected values."""

from __future__ import annotations

import math

from faultline.schemas.events import (InventoryTopology, InventoryTopologyData, SchedJob, SchedJobData,
                                      TopologyLink, TopologyStorage)
from faultline.schemas.outputs import Affected, Alert, Cause, Finding, Incident
from faultline.streams.findings import FindingsConfig, FindingsTracker
from faultline.streams.findings.changes import Changes, change_findings, cohort
from faultline.streams.findings.drift import Drift, mixed_versions
from faultline.streams.findings.exposure import Exposure, Inventory
from faultline.streams.findings.offenders import Interruptions, Tally, blame, offenders
from faultline.streams.findings.revisions import Revisions
from faultline.streams.findings.stats import adjust, binom_sf, poisson_sf, rate_test

H = 3_600_000
T0 = 1_790_000_000_000 - (1_790_000_000_000 % H)


def job(jid: str, state: str, ts: int, nodes: list[str], start: int, gpus: int = 8, attempt: int = 0,
        image: str = "img:v1") -> SchedJob:
    return SchedJob(v=1, id=f"{jid}-{attempt}-{state}", ts=ts, source="t", job=jid,
                    data=SchedJobData(state=state, attempt=attempt, nodes=nodes, gpus=gpus, start_ts=start,
                                      end_ts=ts if state != "running" else None, image=image))


def incident(iid: str, jid: str, ts: int, component: str, attempt: int = 0, revision: int = 1,
             category: str = "gpu_hardware") -> Incident:
    return Incident(id=iid, revision=revision, job=jid, attempt=attempt, tenant=None, failure_ts=ts, symptom="x",
                    root_cause=Cause(category=category, component=component, summary="s", confidence=0.9),
                    affected=Affected(nodes=[component.split(":")[1].split("/")[0]]), start_ts=ts - H, gpus=8,
                    state="failed")


def test_stats_exact_values():
    # P(X >= 2), X ~ Poisson(1) = 1 - 2/e
    assert math.isclose(poisson_sf(2, 1.0), 1 - 2 / math.e, rel_tol=1e-12)
    assert poisson_sf(0, 5.0) == 1.0 and poisson_sf(3, 0.0) == 0.0
    # P(X >= 9), X ~ Binomial(10, 0.5) = 11/1024
    assert math.isclose(binom_sf(9, 10, 0.5), 11 / 1024, rel_tol=1e-12)
    # equal exposure, 6 vs 0 events: binomial(6, 1/2) tail = 1/64; mid-p halves the last term
    assert math.isclose(rate_test(6, 10.0, 0, 10.0), 1 / 64, rel_tol=1e-12)
    assert math.isclose(rate_test(6, 10.0, 0, 10.0, mid_p=True), 1 / 128, rel_tol=1e-12)
    assert adjust([0.01, 0.04, 0.03], "bonferroni") == [0.03, 0.12, 0.09]
    assert [round(q, 6) for q in adjust([0.01, 0.04, 0.03])] == [0.03, 0.04, 0.04]   # BH step-up


def test_exposure_books_gpu_hours_per_subject_and_bucket():
    cfg = FindingsConfig()
    inv = Inventory(cfg.max_nodes)
    inv.on_topology(InventoryTopology(v=1, id="t", ts=T0, source="t", node="n1", data=InventoryTopologyData(
        links=[TopologyLink(nic="mlx5_0", switch="leaf1", port="Eth1/1", segment="seg1")],
        storage=[TopologyStorage(path="/ckpt", backend="nfs")])))
    assert inv.on_versions("n1", T0, {"driver": "550"}) == []
    assert inv.on_versions("n1", T0 + 1, {"driver": "570"}) == [("driver", "550", "570")]
    ex = Exposure(cfg, inv)
    assert ex.on_job(job("j1", "running", T0, ["n1", "n2"], T0), T0) is not None
    ex.on_job(job("j1", "completed", T0 + 2 * H, ["n1", "n2"], T0), T0 + 2 * H)
    w = ex.window(T0 + 2 * H, 24 * H)
    assert w["node:n1"] == [8.0, 1.0] and w["node:n2"] == [8.0, 1.0]       # 4 GPUs x 2 h each
    assert w["port:leaf1/Eth1/1"] == [8.0, 1.0] and w["segment:seg1"] == [8.0, 1.0] and w["path:/ckpt"] == [8.0, 1.0]
    assert w["version:image=img:v1"] == [16.0, 1.0] and w["version:driver=570"] == [8.0, 1.0]
    assert w["gpu:n1/0"] == [2.0, 1.0]                                      # a node's exposure over its 4 GPUs
    assert ex.window(T0 + 30 * H, 24 * H) == {}                             # out of the window
    ex.prune(T0 + 3 * H)
    assert not ex.cells and not ex.closed


def test_offenders_count_interrupted_attempts_and_report_alerts_apart():
    cfg = FindingsConfig()
    inv = Inventory(cfg.max_nodes)
    ex = Exposure(cfg, inv)
    intr = Interruptions(cfg, inv, ex)
    for k in range(4):  # four attempts on n1, each failed with its incident ...
        ex.on_job(job(f"j{k}", "running", T0 + k * H, ["n1"], T0 + k * H), 0)
        ex.on_job(job(f"j{k}", "failed", T0 + k * H + H // 2, ["n1"], T0 + k * H), 0)
        intr.on_incident(incident(f"inc-{k}", f"j{k}", T0 + k * H + H // 2, "gpu:n1/3"))
    # ... a later revision of one of them, a second incident id for the same attempt ...
    intr.on_incident(incident("inc-0", "j0", T0 + H // 2, "gpu:n1/3", revision=2))
    intr.on_incident(incident("inc-0b", "j0", T0 + H // 2 + 1000, "gpu:n1/3"))
    # ... and a storm of critical alerts on the node, far from the incidents (own episodes)
    for m in range(40):
        intr.on_alert(Alert(id=f"al-{m}", ts=T0 + 10 * H + m * 3_600_000, severity="critical", detector="xid",
                            summary="xid", node="n1", subject="gpu:n1/3"))
    for k in range(12):  # healthy peers
        ex.on_job(job(f"h{k}", "running", T0, [f"n{k + 2}"], T0), 0)
        ex.on_job(job(f"h{k}", "completed", T0 + 4 * H, [f"n{k + 2}"], T0), 0)
    intr.on_incident(incident("inc-h", "h0", T0 + 3 * H, "node:n2"))
    now = T0 + 50 * H
    tallies = intr.window(now, 7 * 24 * H)
    assert len(tallies["node:n1"].attempts) == 4 and tallies["node:n1"].alerts == 40
    assert len(tallies["gpu:n1/3"].attempts) == 4
    found = offenders(cfg, now, 7 * 24 * H, ex.window(now, 7 * 24 * H), tallies)
    node = next(f for f in found if f.subject == "node:n1")
    assert node.count == 4 and len(node.incidents) == 4
    assert "4 interrupted attempt(s)" in node.summary and "40 alert(s) on it besides, not counted" in node.summary
    assert {f.subject for f in found} <= {"node:n1", "gpu:n1/3"}
    # alerts alone make no offender, however many
    only = {"node:n9": Tally(alerts=500)}
    assert offenders(cfg, now, 7 * 24 * H, {"node:n9": [10.0, 1.0], "node:n8": [10.0, 1.0]}, only) == []
    assert blame("rdma:n1/mlx5_0/1", inv) == [] and blame("gpu:n1/3", inv) == ["gpu:n1/3", "node:n1"]


def test_change_cohort_counts_each_interrupted_attempt_once():
    cfg = FindingsConfig()
    inv = Inventory(cfg.max_nodes)
    ex = Exposure(cfg, inv)
    intr = Interruptions(cfg, inv, ex)
    ch = Changes()
    ch.add("driver", "570", "n1", T0, "550", "alice", "CHG-1", "e1")
    ch.observed("n1", T0 + 5, "driver", "550", "570", "e2")   # already known for n1: no second entry
    assert ch.items[("driver", "570")].nodes == {"n1": T0}
    for k in range(8):
        s = T0 + H + k * 2 * H
        ex.on_job(job(f"c{k}", "running", s, ["n1"], s), 0)
        ex.on_job(job(f"c{k}", "failed", s + H, ["n1"], s), 0)
        intr.on_incident(incident(f"i{k}", f"c{k}", s + H, "node:n1"))
        intr.on_incident(incident(f"i{k}x", f"c{k}", s + H + 1, "node:n1"))  # 2 incident ids, 1 attempt
        ex.on_job(job(f"u{k}", "running", s, ["n2"], s), 0)
        ex.on_job(job(f"u{k}", "completed", s + H, ["n2"], s), 0)
    now = T0 + 20 * H
    atts = ex.attempts_since(T0)
    c, e, ids = cohort(atts, lambda a, n: n == "n1", now, intr.items)
    assert (c, e, len(ids)) == (8, 64.0, 8)      # 8 attempts x 8 GPUs x 1 h
    # the binomial test: 8 vs 0 on equal exposure, p = 2^-8, Bonferroni over 1 change
    found = change_findings(cfg, now, ch, ex.attempts_since, intr.items)
    assert len(found) == 1 and found[0].count == 8 and math.isclose(found[0].score, 2 ** -8) and "550->570 by alice (CHG-1)" in found[0].summary


def test_drift_once_per_attempt_names_the_odd_node():
    cfg = FindingsConfig()
    inv = Inventory(cfg.max_nodes)
    for n, drv in (("n1", "550"), ("n2", "550"), ("n3", "535")):
        inv.on_versions(n, T0, {"driver": drv, "cuda": "12.4"})
    diffs, odd = mixed_versions(["n1", "n2", "n3"], inv, cfg.drift_components)
    assert odd == {"n3"} and diffs == ["driver 550 on n1,n2 vs 535 on n3"]
    d = Drift(cfg, inv)
    ev = job("j", "running", T0, ["n1", "n2", "n3"], T0)
    got = d.on_start(ev)
    assert len(got) == 1 and got[0].subject == "job:j" and "n3" in got[0].action
    assert d.on_start(ev) == []                                   # once per attempt
    assert d.on_start(job("k", "running", T0, ["n1", "n2"], T0)) == []


def finding(ts: int, count: int, window: int = 24 * H) -> Finding:
    return Finding(id="", ts=ts, kind="repeat_offender", dimension="node", subject="node:n1",
                   window_start=ts - window, window_end=ts, count=count, exposure=1.0, exposure_unit="gpu_hours",
                   fleet_rate=0.1, score=0.001, summary="s", action="a")


def test_revisions_one_finding_per_subject_and_window():
    rv = Revisions()
    a, new = rv.admit(finding(T0, 3))
    assert new and a.id.startswith("fd-")
    b, new = rv.admit(finding(T0 + H, 3))
    assert b is None and not new                                   # nothing changed: no re-emission
    c, new = rv.admit(finding(T0 + 2 * H, 5))
    assert not new and c.id == a.id and c.count == 5               # a revision of the same finding
    assert rv.name(finding(T0 + 3 * H, 5)).id == a.id
    other, new = rv.admit(finding(T0 + 2 * H, 5, window=7 * 24 * H))
    assert new and other.id != a.id                                # another window, another finding
    later, new = rv.admit(finding(T0 + 2 * H + 25 * H, 4))
    assert new and later.id != a.id                                # after a gap longer than its window
    rv2 = Revisions()
    rv2.load(rv.dump())
    assert rv2.series == rv.series


def test_tracker_state_roundtrip_keeps_revisions():
    tr = FindingsTracker()
    for k in range(12):
        tr.observe(job(f"h{k}", "running", T0, [f"n{k}"], T0))
    for k in range(1, 6):
        tr.observe(job("h0", "running", T0 + (k - 1) * H, ["n0"], T0 + (k - 1) * H, attempt=k))
    for k in range(6):
        tr.on_incident(incident(f"inc-{k}", "h0", T0 + (k + 1) * H // 2, "node:n0", attempt=k))
    first = tr.evaluate(T0 + 5 * H)
    assert any(f.subject == "node:n0" and f.count == 6 for f in first), [f.summary for f in first]
    tr2 = FindingsTracker.load(tr.dump())
    assert tr2.evaluate(T0 + 5 * H) == [] and tr.evaluate(T0 + 5 * H) == []
    assert [f.id for f in tr2.snapshot(T0 + 6 * H)] == [f.id for f in tr.snapshot(T0 + 6 * H)]
    assert {f.id for f in first} >= {f.id for f in tr.snapshot(T0 + 6 * H) if f.subject == "node:n0"}
