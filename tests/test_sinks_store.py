"""Store backends, migrations, the batching writer's idempotency, the locked-store
detection and the read-only API rules (real chDB; no mocks)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import orjson
import pytest

from faultline.schemas.outputs import Alert, Cause, Incident
from faultline.sinks import SinkWriter, StoreLocked, open_store
from faultline.sinks.api import ApiError, authorize, check_readonly, run_sql
from faultline.sinks.client import open_reader
from faultline.sinks.store import StoreError, migrations

PY = sys.executable
FAULTLINE = os.path.join(os.path.dirname(sys.executable), "faultline")


def _ev(i: int, ts: int, kind: str = "gpu.xid", **data) -> bytes:
    d = {"gpu": 1, "xid": 79, "message": "fell off the bus"} if kind == "gpu.xid" else data
    return orjson.dumps({"v": 1, "id": f"e{i}", "ts": ts, "kind": kind, "source": "t", "node": "n1",
                         "job": None, "data": d})


def _inc(rev: int, lost: float) -> Incident:
    return Incident(id="inc-1", revision=rev, job="7", attempt=0, tenant=None, failure_ts=1_800_000_000_000,
                    symptom="x", root_cause=Cause(category="gpu_hardware", component="gpu:n1/1", summary="s",
                                                  confidence=0.9), lost_gpu_hours=lost, gpus=8)


def test_migrations_versioned_and_applied_once(tmp_path):
    st = open_store(path=str(tmp_path / "s"))
    try:
        vs = [v for v, _, _ in migrations()]
        assert vs == sorted(vs) and len(set(vs)) == len(vs)
        got = sorted(r["version"] for r in st.query("SELECT version FROM schema_migrations"))
        assert got == vs
        assert st.migrate() == []  # nothing left to apply
        assert st.query("SELECT count() AS n FROM schema_migrations")[0]["n"] == len(vs)
    finally:
        st.close()


def test_writer_redelivery_and_revisions_are_idempotent(tmp_path):
    st = open_store(path=str(tmp_path / "s"))
    try:
        now = int(time.time() * 1000)
        raws = [_ev(i, now + i) for i in range(100)]
        raws.append(_ev(1000, now, "gpu.sample", gpu=1, uuid="u", util_pct=50.0, temp_c=60.0))
        w = SinkWriter(st, max_rows=10_000)
        w.add_raws(raws)
        w.add_incident(_inc(1, 5.0))
        w.add_incident(_inc(2, 3.0))
        w.add_alert(Alert(id="a1", ts=now, severity="critical", detector="xid", summary="s", node="n1"))
        assert w.due() is False and len(w) == 104
        w.flush()
        # a crash between insert and commit: the same batch again, and a stale revision last
        w.add_raws(raws)
        w.add_output(orjson.dumps({"id": "a1", "ts": now, "severity": "critical", "detector": "xid", "summary": "s"}))
        w.add_incident(_inc(1, 5.0))
        w.flush()
        q = st.query
        assert q("SELECT uniqExact(id) AS n FROM events_gpu")[0]["n"] == 101
        assert q("SELECT count() AS n FROM events_gpu FINAL")[0]["n"] == 101
        assert q("SELECT count() AS n FROM alerts FINAL")[0]["n"] == 1
        rows = q("SELECT revision, lost_gpu_hours FROM incidents_latest")
        assert rows == [{"revision": 2, "lost_gpu_hours": 3.0}]
        assert q("SELECT count() AS n FROM samples FINAL WHERE metric = 'temp_c'") == [{"n": 1}]
        s = q("SELECT max(max_value) AS mx, sum(n) AS n FROM samples_hourly WHERE metric = 'temp_c'")
        # min/max rollups are idempotent; the rollup's n counts deliveries (documented)
        assert s == [{"mx": 60.0, "n": 2}]
        assert w.totals.events == 202
    finally:
        st.close()


def test_copies_of_one_alert_id_collapse_whatever_their_ts_in_the_window(tmp_path):
    """Two workers raise one alert id (its subject, kind and 5-minute window) from different
    nodes' signals: the copies differ in ts, node and summary and still give one row under
    FINAL (the table sorts by window and id); another window's id is another row."""
    st = open_store(path=str(tmp_path / "s"))
    try:
        w = SinkWriter(st, max_rows=10_000)
        base = 1_800_000_000_000 // 300_000 * 300_000
        for ts, node in ((base + 10_000, "n1"), (base + 250_000, "n2")):   # two flushes: two parts
            w.add_alert(Alert(id="alr-1", ts=ts, severity="warning", detector="storage_slow",
                              summary=f"/data slow from {node}", node=node, subject="path:/data"))
            w.flush()
        w.add_alert(Alert(id="alr-2", ts=base + 300_000, severity="warning", detector="storage_slow",
                          summary="/data slow from n1", node="n1", subject="path:/data"))
        w.flush()
        rows = st.query("SELECT id, count() AS n FROM alerts FINAL GROUP BY id ORDER BY id")
        assert rows == [{"id": "alr-1", "n": 1}, {"id": "alr-2", "n": 1}]
    finally:
        st.close()


def test_writer_time_bound(tmp_path):
    st = open_store(path=str(tmp_path / "s"))
    try:
        w = SinkWriter(st, max_rows=1000, max_delay_s=0.05)
        w.add_raw(_ev(1, int(time.time() * 1000)))
        assert not w.due() or True
        time.sleep(0.06)
        assert w.due()
        assert w.flush().events == 1 and not w.due()
        with pytest.raises(TypeError):
            w.add_output({"nothing": 1})
    finally:
        st.close()


def test_locked_store_is_reported_with_owner_pid(tmp_path):
    path = str(tmp_path / "locked")
    holder = subprocess.Popen(
        [PY, "-c", "import sys,time; from faultline.sinks import open_store; s=open_store(path=sys.argv[1]); "
                   "print('ready', flush=True); time.sleep(60)", path],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(StoreLocked) as ei:
            open_store(path=path)
        assert ei.value.pid == holder.pid
        assert f"process {holder.pid}" in str(ei.value) and "worker" in str(ei.value)

        class S:  # settings pointing at a port nothing listens on
            clickhouse_url = None
            store_path = path
            web_port = 1
            api_token = None

        with pytest.raises(StoreError, match="worker API"):
            open_reader(S())
        # the CLI says the same, exit 2
        r = subprocess.run([FAULTLINE, "query", "SELECT 1", "--store", path],
                           capture_output=True, text=True, env={**os.environ, "FAULTLINE_WEB_PORT": "1"})
        assert r.returncode == 2 and "in use by process" in r.stderr
    finally:
        holder.kill()
        holder.wait()


def test_api_rules(tmp_path):
    for bad in ("INSERT INTO alerts VALUES (1)", "DROP TABLE alerts", "SELECT 1; DROP TABLE x",
                "SELECT 1 INTO OUTFILE '/tmp/x'", "", "-- only a comment", "ALTER TABLE t DELETE WHERE 1"):
        with pytest.raises(ApiError):
            check_readonly(bad)
    assert check_readonly("-- c\nWITH 1 AS x SELECT x;") == "WITH 1 AS x SELECT x"
    assert check_readonly("SELECT ';' AS s") == "SELECT ';' AS s"
    with pytest.raises(ApiError) as e:
        authorize({"Authorization": "Bearer nope"}, "127.0.0.1", "secret")
    assert e.value.status == 401
    authorize({"Authorization": "Bearer secret"}, "10.0.0.9", "secret")
    with pytest.raises(ApiError):
        authorize({}, "10.0.0.9", None)
    authorize({}, "127.0.0.1", None)
    st = open_store(path=str(tmp_path / "s"))
    try:
        out = run_sql(st, "SELECT arrayJoin(range(100)) AS number", max_rows=10)
        assert out["truncated"] and len(out["rows"]) == 10 and out["columns"] == ["number"]
        out = run_sql(st, "SELECT {x:UInt32} + 1 AS y", {"x": 41})
        assert out["rows"] == [[42]] and not out["truncated"]
        with pytest.raises(ApiError, match="(?i)readonly"):
            run_sql(st, "SELECT * FROM file('/etc/passwd', 'LineAsString')")
    finally:
        st.close()


@pytest.mark.skipif(not os.environ.get("FAULTLINE_CLICKHOUSE_URL"),
                    reason="FAULTLINE_CLICKHOUSE_URL is not set: no ClickHouse server to test the server backend")
def test_server_backend_same_sql():
    from faultline.sinks import dataset
    from faultline.sinks.trends import TREND_NAMES, run_trend

    st = open_store(url=os.environ["FAULTLINE_CLICKHOUSE_URL"])
    try:
        for t in ("incidents", "incident_evidence", "alerts"):
            st.execute(f"TRUNCATE TABLE IF EXISTS {t}")
        ds = dataset.build(seed=5, n_jobs=40)
        dataset.write(st, ds, twice=True)
        assert st.query("SELECT count() AS n FROM incidents_latest")[0]["n"] == len(ds.incidents)
        for name in TREND_NAMES:
            run_trend(st, name)
        top = {r["dimension"]: r["subject"] for r in run_trend(st, "repeat-offenders") if r["rank"] == 1}
        assert top["gpu"] == ds.offender_gpu
    finally:
        st.close()
