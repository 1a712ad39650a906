"""The store-facing CLI end to end, as a user runs it: ingest a simulated file (twice),
then incidents / explain / trends / query read the answers back."""

from __future__ import annotations

import base64
import csv
import io
import os
import subprocess
import sys

import orjson
import pytest

from faultline.sinks import dataset

FAULTLINE = os.path.join(os.path.dirname(sys.executable), "faultline")


def fl(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([FAULTLINE, *args], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "COLUMNS": "200"})
    if ok:
        assert r.returncode == 0, r.stderr
    return r


@pytest.fixture(scope="module")
def ingested(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    ds = dataset.build(seed=21, n_jobs=30, samples_per_attempt=2)
    f = d / "events.jsonl"
    f.write_bytes(b"\n".join(ds.events) + b"\n{not json}\n")
    store = str(d / "store")
    r1 = fl("ingest", str(f), "--store", store, "--quiet")
    first = fl("incidents", "--store", store, "--json").stdout
    r2 = fl("ingest", str(f), "--store", store, "--quiet")  # re-ingest: nothing may double
    return ds, store, r1, r2, first


def test_ingest_reports_and_is_idempotent(ingested):
    ds, store, r1, r2, first = ingested
    assert f"stored {len(ds.events)} events" in r1.stderr
    assert "1 invalid line(s)" in r1.stderr and "line " in r1.stderr
    n_events = fl("query", "SELECT uniqExact(id) AS n, count() AS c FROM events_sched FINAL", "--store", store,
                  "--format", "json").stdout
    row = orjson.loads(n_events)
    assert row["n"] == row["c"] == sum(1 for e in ds.events if b'"kind":"sched.job"' in e)
    again = fl("incidents", "--store", store, "--json").stdout
    assert sorted(again.splitlines()) == sorted(first.splitlines())
    # the invalid line is kept with its reason where SQL sees it, once despite two ingests
    dead = fl("query", "SELECT topic, offset, reason, raw_b64 FROM deadletters FINAL", "--store", store,
              "--format", "json").stdout
    rows = [orjson.loads(x) for x in dead.splitlines()]
    assert len(rows) == 1, rows
    n_lines = len(ds.events) + 1
    assert rows[0]["topic"].endswith("events.jsonl") and int(rows[0]["offset"]) == n_lines
    assert "not valid JSON" in rows[0]["reason"]
    assert base64.b64decode(rows[0]["raw_b64"]) == b"{not json}"


def test_incidents_json_and_filters(ingested):
    ds, store, *_ = ingested
    lines = fl("incidents", "--store", store, "--json", "--limit", "1000").stdout.splitlines()
    incs = [orjson.loads(x) for x in lines]
    assert incs, "the engine found no incident in a dataset full of failures"
    assert all({"id", "revision", "job", "root_cause", "lost_gpu_hours"} <= set(i) for i in incs)
    job = incs[0]["job"]
    only = [orjson.loads(x) for x in fl("incidents", "--store", store, "--json", "--job", job).stdout.splitlines()]
    assert only and all(i["job"] == job for i in only)
    table = fl("incidents", "--store", store, "--job", job).stdout
    assert job in table and "category" in table
    assert fl("incidents", "--store", store, "--json", "--since", "2999-01-01").stdout == ""


def test_explain_by_job_and_id(ingested):
    ds, store, *_ = ingested
    inc = orjson.loads(fl("incidents", "--store", store, "--json", "--limit", "1").stdout.splitlines()[0])
    out = fl("explain", inc["job"], "--store", store).stdout
    assert f"Job {inc['job']}" in out and "because of" in out
    assert "ruled out" in out and "lost" in out and "GPU-hours" in out and "next" in out
    assert "✖" in out  # the failure on the swimlanes
    by_id = fl("explain", inc["id"], "--store", store, "--json").stdout
    assert orjson.loads(by_id)["id"] == inc["id"]
    r = fl("explain", "no-such-job", "--store", store, ok=False)
    assert r.returncode == 2 and "faultline incidents" in r.stderr


def test_trends_and_query_formats(ingested):
    ds, store, *_ = ingested
    listing = fl("trends").stdout
    for name in ("repeat-offenders", "lost-compute", "mtbf", "ettr", "changes", "checkpoints"):
        assert name in listing
        fl("trends", name, "--store", store, "--json")
    lost = [orjson.loads(x) for x in fl("trends", "lost-compute", "--store", store, "--json").stdout.splitlines()]
    total = orjson.loads(fl("query", "SELECT sum(lost_gpu_hours) AS s FROM incidents FINAL", "--store", store,
                            "--format", "json").stdout)["s"]
    assert sum(r["gpu_hours_lost"] for r in lost) == pytest.approx(total, abs=1e-3)
    ck = fl("trends", "checkpoints", "--store", store, "--csv").stdout
    rows = list(csv.DictReader(io.StringIO(ck)))
    assert rows and "success_rate" in rows[0]
    out = fl("query", "SELECT {k:String} AS k, 2 AS v", "--param", "k=hi", "--store", store, "--format", "csv").stdout
    assert out.splitlines() == ["k,v", "hi,2"]
    bad = fl("query", "SELECT nope FROM nowhere", "--store", store, ok=False)
    assert bad.returncode == 2 and "query failed" in bad.stderr
    bad = fl("trends", "nope", "--store", store, ok=False)
    assert bad.returncode == 2 and "repeat-offenders" in bad.stderr


def test_withdrawn_incidents_are_not_listed_and_explain_marks_them(tmp_path):
    """An incident the worker withdrew (latest revision ``recovered``) is stored but not
    listed by `faultline incidents`; `faultline explain ID` shows it, marked withdrawn."""
    from faultline.sinks import open_store

    ds = dataset.build(seed=5, n_jobs=12, withdrawn=2)
    store = str(tmp_path / "store")
    st = open_store(path=store)
    try:
        dataset.write(st, ds)
    finally:
        st.close()
    listed = {orjson.loads(x)["id"] for x in fl("incidents", "--store", store, "--json", "--limit", "1000").stdout.splitlines()}
    assert listed == {i.id for i in ds.incidents}
    gone = ds.withdrawn[1]
    out = fl("explain", gone.id, "--store", store).stdout
    assert "withdrawn" in out and gone.job in out, out
    # by job id, explain prefers the job's real incident over a withdrawn one
    assert "withdrawn" not in fl("explain", ds.incidents[0].job, "--store", store).stdout
