"""Every trend query on a simulated fleet with injected patterns, checked against the
dataset's ground truth; and re-delivery (every event, alert and incident revision twice,
stale revisions last) must not change any answer. Incidents the worker raised and then
withdrew (latest revision ``recovered``) are in the store and count nowhere."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from faultline.sinks import dataset, open_store
from faultline.sinks.trends import TREND_NAMES, load_queries, run_trend


# runs first: chDB opens one data directory per process, and the module store stays open
def test_every_trend_runs_on_an_empty_store(tmp_path):
    st = open_store(path=str(tmp_path / "empty"))
    try:
        for name in TREND_NAMES:
            assert run_trend(st, name) == [], name
    finally:
        st.close()


@pytest.fixture(scope="module")
def ds():
    return dataset.build(seed=11, withdrawn=3)


@pytest.fixture(scope="module")
def store(ds, tmp_path_factory):
    st = open_store(path=str(tmp_path_factory.mktemp("store")))
    dataset.write(st, ds, twice=True)  # re-delivered: every record twice, stale revisions last
    yield st
    st.close()


def test_every_trend_name_has_a_query_with_header():
    qs = load_queries()
    assert set(TREND_NAMES) <= set(qs)
    for q in qs.values():
        assert q.answers, q.name
        assert all(p.help for p in q.params), q.name


def test_duplicates_collapse_in_counts(store, ds):
    assert store.query("SELECT count() AS n FROM incidents_latest WHERE state != 'recovered'")[0]["n"] \
        == len(ds.incidents)
    assert store.query("SELECT uniqExact(id) AS n FROM events_sched")[0]["n"] == sum(
        1 for e in ds.events if b'"kind":"sched.job"' in e)
    # every latest revision wins even though the stale one was inserted last
    revs = {r["id"]: r["revision"] for r in store.query("SELECT id, revision FROM incidents_latest")}
    assert revs == {i.id: i.revision for i in [*ds.incidents, *ds.withdrawn[1::2]]}
    assert store.query("SELECT count() AS n FROM attempts")[0]["n"] == ds.truth["attempts"]


def test_repeat_offenders_injected_rank_first(store, ds):
    rows = run_trend(store, "repeat-offenders", {"top": 50})
    top = {r["dimension"]: r for r in rows if r["rank"] == 1}
    assert top["node"]["subject"] == ds.offender_node
    assert top["gpu"]["subject"] == ds.offender_gpu
    assert top["port"]["subject"] == ds.flaky_port
    assert top["driver"]["subject"] == "570.86.10"
    # counts equal the incidents (latest revisions, duplicates collapsed) naming the subject
    want_node = Counter(n for i in ds.incidents if i.root_cause.category not in ("application", "scheduler")
                        for n in set(i.affected.nodes))
    got_node = {r["subject"]: r["incidents"] for r in rows if r["dimension"] == "node"}
    for subj, n in got_node.items():
        assert n == want_node[subj], subj
    # the offender's rate is far above the fleet baseline given beside it
    assert top["node"]["rate"] > 1.5 * top["node"]["fleet_rate"]
    assert top["gpu"]["ratio"] > 3


def test_lost_compute_equals_sum_over_incidents(store, ds):
    rows = run_trend(store, "lost-compute", {"bucket": "day"})
    got = defaultdict(float)
    for r in rows:
        got[r["category"]] += r["gpu_hours_lost"]
    want = ds.truth["lost_by_category"]
    assert set(got) == set(want)
    for cat, v in want.items():
        assert got[cat] == pytest.approx(v, abs=1e-4), cat
    weeks = run_trend(store, "lost-compute", {"bucket": "week"})
    assert sum(r["incidents"] for r in weeks) == len(ds.incidents)
    assert sum(r["gpu_hours_lost"] for r in weeks) == pytest.approx(sum(want.values()), abs=1e-3)


def test_mtbf_offender_has_shortest(store, ds):
    rows = run_trend(store, "mtbf")
    nodes = [r for r in rows if r["scope"] == "node" and r["mtbf_h"] is not None]
    assert nodes[0]["subject"] == ds.offender_node
    infra = [i for i in ds.incidents if i.root_cause.category not in ("application", "scheduler")]
    off = next(r for r in rows if r["scope"] == "node" and r["subject"] == ds.offender_node)
    assert off["failures"] == sum(1 for i in infra if ds.offender_node in i.affected.nodes)
    hours = sum((a["end"] - a["start"]) / 3_600_000 for a in ds.truth["attempts_meta"] if ds.offender_node in a["nodes"])
    assert off["hours"] == pytest.approx(hours, abs=1e-2)
    assert off["mtbf_h"] == pytest.approx(hours / off["failures"], rel=1e-3)
    assert any(r["scope"] == "segment" for r in rows)


def test_ettr_matches_hand_computation(store, ds):
    rows = {r["job"]: r for r in run_trend(store, "ettr")}
    assert len(rows) == len({a["job"] for a in ds.truth["attempts_meta"]})
    inc = {(i.job, i.attempt): i for i in ds.incidents}
    sched = defaultdict(int)
    lost = defaultdict(int)
    for a in ds.truth["attempts_meta"]:
        sched[a["job"]] += a["end"] - a["start"]
        i = inc.get((a["job"], a["attempt"]))
        if i:
            ck = max(i.last_checkpoint.ts, a["start"]) if i.last_checkpoint else a["start"]
            lost[a["job"]] += a["end"] - ck
    for job, r in rows.items():
        assert r["ettr"] == pytest.approx((sched[job] - lost[job]) / sched[job], abs=1e-4), job
    assert all(0 <= r["ettr"] <= 1 for r in rows.values())
    clean = [j for j in rows if lost[j] == 0]
    assert clean and all(rows[j]["ettr"] == 1 for j in clean)


def test_changes_show_regression(store, ds):
    rows = run_trend(store, "changes", {"window_h": 72})
    drv = next(r for r in rows if r["component"] == "driver" and r["to_version"] == "570.86.10")
    assert drv["nodes"] == len(ds.change_nodes)
    assert drv["rate_after"] > drv["rate_before"]
    assert drv["attempts_before"] > 0 and drv["attempts_after"] > 0


def test_checkpoints_rates(store, ds):
    rows = {r["job"]: r for r in run_trend(store, "checkpoints")}
    ok = Counter()
    bad = Counter()
    for e in ds.events:
        if b'"phase":"succeeded"' in e:
            ok[e.split(b'"job":"')[1].split(b'"')[0].decode()] += 1
        elif b'"phase":"failed"' in e:
            bad[e.split(b'"job":"')[1].split(b'"')[0].decode()] += 1
    for job, r in rows.items():
        assert r["succeeded"] == ok[job] and r["failed"] == bad[job], job
        if ok[job] + bad[job]:
            assert r["success_rate"] == pytest.approx(ok[job] / (ok[job] + bad[job]), abs=1e-4)
    assert any(r["age_min"] is not None and r["age_min"] > 0 for r in rows.values())


def test_withdrawn_incidents_count_nowhere(store, ds):
    """A withdrawn incident (latest revision ``recovered``; its first revision blamed the
    offender GPU with 100 GPU-h) is stored, and no trend counts it or its loss."""
    assert len(ds.withdrawn) == 6
    ids = tuple(i.id for i in ds.withdrawn[1::2])
    got = store.query("SELECT id, state FROM incidents FINAL WHERE id IN {ids:Array(String)}", {"ids": list(ids)})
    assert {r["id"]: r["state"] for r in got} == {i: dataset.WITHDRAWN_STATE for i in ids}
    lost = run_trend(store, "lost-compute", {"bucket": "week"})
    assert sum(r["incidents"] for r in lost) == len(ds.incidents)
    assert sum(r["gpu_hours_lost"] for r in lost) == pytest.approx(sum(ds.truth["lost_by_category"].values()), abs=1e-3)
    ettr = run_trend(store, "ettr")
    assert sum(r["interruptions"] for r in ettr) == len(ds.incidents)
    infra = [i for i in ds.incidents if i.root_cause.category not in ("application", "scheduler")]
    gpu = [r for r in run_trend(store, "repeat-offenders", {"top": 100})
           if r["dimension"] == "gpu" and r["subject"] == ds.offender_gpu]
    assert gpu and gpu[0]["incidents"] == sum(ds.offender_gpu in i.affected.gpus or
                                              i.root_cause.component == f"gpu:{ds.offender_gpu}" for i in infra)
    mtbf = {r["subject"]: r for r in run_trend(store, "mtbf") if r["scope"] == "node"}
    assert mtbf[ds.offender_node]["failures"] == sum(ds.offender_node in i.affected.nodes for i in infra)


def test_every_query_reading_incidents_skips_withdrawn_ones():
    """Every trend that reads the incidents table counts latest revisions (FINAL) without
    the withdrawn ones: a new query that forgets it fails here."""
    for q in load_queries().values():
        if "FROM incidents" in q.sql:
            assert "incidents FINAL" in q.sql or "incidents AS i FINAL" in q.sql, q.name
            assert f"state != '{dataset.WITHDRAWN_STATE}'" in q.sql, q.name
