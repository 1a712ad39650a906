"""The trend queries on the simulator's lemon-node fleet, diagnosed by the real engine
through `faultline ingest`: the lemon node (labels) ranks first, lost GPU-hours per category
equal the sum over the stored incidents, and re-delivered events (the simulator's duplicates,
then the whole file again) change no count."""

from __future__ import annotations

from collections import defaultdict

import pytest

from faultline.commands.ingest import ingest_stream
from faultline.sinks import open_store
from faultline.sinks.trends import TREND_NAMES, run_trend

sim = pytest.importorskip("faultline.producers.simulate", reason="the simulator (producers/simulate) is not there")


@pytest.fixture(scope="module")
def lemon(tmp_path_factory):
    d = tmp_path_factory.mktemp("sim")
    lines, labels = sim.simulate("lemon-node", seed=1, hours=4,
                                 intervals=sim.Intervals(gpu=120, hw=300, net_port=120, net_rdma=120, storage=120, mount=600),
                                 delivery=sim.Delivery(duplicates=0.05))
    f = d / "lemon.jsonl"
    f.write_bytes(b"\n".join(lines) + b"\n")
    store = open_store(path=str(d / "store"))
    with open(f, "rb") as fh:
        res = ingest_stream(fh, store)
    assert res["invalid"] == 0 and res["incidents"] >= 1
    before = {
        "incidents": store.query("SELECT id, revision, lost_gpu_hours FROM incidents FINAL ORDER BY id"),
        "events": store.query("SELECT uniqExact(id) AS n, count() AS c FROM events_gpu FINAL"),
        "trends": {n: run_trend(store, n) for n in TREND_NAMES},
    }
    with open(f, "rb") as fh:  # the whole file re-delivered
        ingest_stream(fh, store)
    yield store, labels, before
    store.close()


def test_lemon_node_ranks_first(lemon):
    store, labels, _ = lemon
    want = labels["fleet"]["lemon_nodes"][0]
    ro = run_trend(store, "repeat-offenders")
    top = {r["dimension"]: r for r in ro if r["rank"] == 1}
    assert top["node"]["subject"] == want, ro
    assert top["node"]["rate"] > top["node"]["fleet_rate"]
    lemon_gpus = {i["component"][4:] for i in labels["interruptions"] if i["component"].startswith("gpu:")}
    assert top["gpu"]["subject"] in lemon_gpus


def test_lost_compute_is_sum_over_incidents(lemon):
    store, labels, _ = lemon
    incs = store.query("SELECT category, lost_gpu_hours FROM incidents_latest")
    assert len(incs) >= 1
    want = defaultdict(float)
    for i in incs:
        want[i["category"]] += i["lost_gpu_hours"]
    got = defaultdict(float)
    for r in run_trend(store, "lost-compute"):
        got[r["category"]] += r["gpu_hours_lost"]
    assert set(got) == set(want)
    for c in want:
        assert got[c] == pytest.approx(want[c], abs=1e-4)


def test_redelivery_changes_nothing(lemon):
    store, _, before = lemon
    assert store.query("SELECT id, revision, lost_gpu_hours FROM incidents FINAL ORDER BY id") == before["incidents"]
    ev = store.query("SELECT uniqExact(id) AS n, count() AS c FROM events_gpu FINAL")
    assert ev == before["events"] and ev[0]["n"] == ev[0]["c"]
    for name, out in before["trends"].items():
        assert run_trend(store, name) == out, name
