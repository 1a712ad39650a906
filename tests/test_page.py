"""The incident pages (issue 17 "Page"): Jinja2 templates with autoescape, the legend, sorted
hypotheses, grouped evidence, the list's filters and sort over a real chDB store, the fleet
and history pages, and reads that never run chDB on the event loop.

``page_data`` builds the store the headless-Chromium test (tests/test_chromium_page.py)
serves too, with the answers each filter must give computed here from the records."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import msgspec
import orjson
import pytest

from faultline.schemas import encode
from faultline.schemas.outputs import Alert, Cause, EvidenceItem, Finding
from faultline.sinks import dataset
from faultline.sinks.sqlcheck import check_query
from faultline.sinks.store import open_store, store_tables
from faultline.streams import web

ROOT = Path(__file__).resolve().parent.parent
MIN = 60_000
HOUR = 60 * MIN
XSS = "<script>alert('x')</script>&"
#: states given to the dataset's incidents (it has only "failed"), round robin
STATES = ("failed", "timeout", "failed", "node_fail", "stalled")


def page_data(now_ms: int) -> dict:
    """Incidents over the last 6 days (several categories, nodes, states, one withdrawn),
    alerts (some live, grouped by subject; one stale), findings (two emissions for one
    subject: only the later is the latest): the records as the sink stores them."""
    ds = dataset.build(seed=9, n_jobs=30, withdrawn=1, t0=now_ms - 6 * 24 * HOUR)   # times fixed relative to now
    incs = [msgspec.structs.replace(i, state=STATES[k % len(STATES)]) for k, i in enumerate(ds.incidents)]
    for k in (1, 2, 6):   # a few in the last day (the dataset's end 12 h ago): the 24 h range keeps them
        incs[k] = msgspec.structs.replace(incs[k], failure_ts=now_ms - k * 2 * HOUR)
    # one incident with a log storm (35 identical watchdog lines) and text that must be escaped
    storm = incs[0]
    lines = [EvidenceItem(id=f"storm-{k}", ts=storm.failure_ts - (40 - k) * 1000, layer="runtime",
                          node=storm.affected.nodes[0], summary="NCCL watchdog timeout") for k in range(35)]
    incs[0] = msgspec.structs.replace(storm, symptom=XSS, evidence=list(storm.evidence) + lines, hypotheses=[
        Cause(category="network_link", component="port:leaf-00/Eth1/1", summary="a flap", confidence=0.2),
        Cause(category=storm.root_cause.category, component=storm.root_cause.component,
              summary=storm.root_cause.summary, confidence=storm.root_cause.confidence),
        Cause(category="storage_slow", component="path:/ckpt", summary="slow", confidence=0.4)])
    g = ds.offender_gpu
    alerts = [Alert(id=f"live-{k}", ts=now_ms - (k + 1) * MIN, severity="critical", detector="xid",
                    summary=f"XID 79 on gpu {g}", node=g.split("/")[0], subject=f"gpu:{g}") for k in range(3)]
    alerts += [Alert(id="live-port", ts=now_ms - 4 * MIN, severity="warning", detector="link_flap",
                     summary=f"{ds.flaky_port} flapping {XSS}", subject=f"port:{ds.flaky_port}"),
               Alert(id="stale", ts=now_ms - 3 * HOUR, severity="warning", detector="thermal",
                     summary="hot an hour ago", node="n03", subject="gpu:n03/0")]
    findings = [Finding(id=f"f-gpu-{b}", ts=now_ms - (2 - b) * HOUR, kind="repeat_offender", dimension="gpu",
                        subject=f"gpu:{g}", window_start=now_ms - 7 * 24 * HOUR, window_end=now_ms, count=5 + b,
                        exposure=100.0, exposure_unit="gpu_hours", fleet_rate=0.001, score=1e-6, severity="critical",
                        summary=f"gpu {g}: {5 + b} interruptions (emission {b})", action="drain it")
                for b in range(2)]
    findings.append(Finding(id="f-port", ts=now_ms - HOUR, kind="repeat_offender", dimension="port",
                            subject=f"port:{ds.flaky_port}", window_start=now_ms - 7 * 24 * HOUR, window_end=now_ms,
                            count=4, exposure=80.0, exposure_unit="gpu_hours", fleet_rate=0.001, score=1e-3,
                            severity="warning", summary=f"port {ds.flaky_port}: 4 interruptions", action="reseat"))
    return {"ds": ds, "incidents": incs, "withdrawn": ds.withdrawn, "alerts": alerts + ds.alerts,
            "findings": findings, "now_ms": now_ms}


def write_page_data(store, data: dict) -> None:
    from faultline.sinks.writer import SinkWriter

    w = SinkWriter(store, max_rows=1_000_000)
    for a in data["alerts"]:
        w.add_alert(a)
    for i in data["incidents"] + data["withdrawn"]:
        w.add_incident(i)
    for f in data["findings"]:
        w.add_finding(f)
    w.flush()


def listed(data: dict) -> list[dict]:
    """The incidents the list may show (latest revision, not withdrawn), as JSON records."""
    return [orjson.loads(encode(i)) for i in data["incidents"]]


def expected(data: dict, **flt) -> set[str]:
    """Ids a filter must list, computed from the records (not from the page's SQL)."""
    now = data["now_ms"]
    out = set()
    for i in listed(data):
        if flt.get("category") and i["root_cause"]["category"] != flt["category"]:
            continue
        if flt.get("node") and flt["node"] not in i["affected"]["nodes"]:
            continue
        if flt.get("state") and i["state"] != flt["state"]:
            continue
        if flt.get("range") and i["failure_ts"] < now - web.RANGES[flt["range"]]:
            continue
        if flt.get("lo") and i["failure_ts"] < flt["lo"]:
            continue
        if flt.get("hi") and i["failure_ts"] >= flt["hi"]:
            continue
        out.add(i["id"])
    return out


def utc_minute(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M", time.gmtime(ms / 1000))


def filters_to_try(data: dict) -> list[tuple[dict, dict]]:
    """(query parameters, ``expected`` arguments) for each filter, chosen so every one keeps
    some incidents and leaves out others."""
    ds, incs = data["ds"], listed(data)
    ts = sorted(i["failure_ts"] for i in incs)
    lo_ms = ts[len(ts) // 4] // MIN * MIN
    hi_ms = ts[3 * len(ts) // 4] // MIN * MIN
    return [
        ({"category": "gpu_hardware"}, {"category": "gpu_hardware"}),
        ({"node": ds.offender_node}, {"node": ds.offender_node}),
        ({"state": "timeout"}, {"state": "timeout"}),
        ({"range": "24h"}, {"range": "24h"}),
        ({"since": utc_minute(lo_ms), "until": utc_minute(hi_ms)}, {"lo": lo_ms, "hi": hi_ms}),
        ({"category": "network_link", "state": "failed"}, {"category": "network_link", "state": "failed"}),
    ]


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    store = open_store(path=str(tmp_path_factory.mktemp("page") / "store"))
    data = page_data(int(time.time() * 1000))
    write_page_data(store, data)
    yield store, data
    store.close()


def ids(store, sql_params) -> list[str]:
    sql, params = sql_params
    return [r["id"] for r in web._records(store.query(sql, params))]


def test_every_page_query_passes_the_allow_list_and_runs(loaded):
    """The page reads the store itself, but only SQL the readonly API would run too."""
    store, data = loaded
    now = data["now_ms"]
    queries = {f"list {p}": web.list_query(web.parse_filter({**p, "q": "x", "sort": "confidence"}), now)
               for p, _ in filters_to_try(data)}
    queries["facets"] = (web.FACETS_SQL, None)
    queries.update({f"fleet {k}": v for k, v in web.fleet_queries(now, web.LIVE_MIN).items()})
    for kind, name in (("node", "n07"), ("gpu", "n07/3"), ("port", data["ds"].flaky_port)):
        queries.update({f"history {kind} {k}": v for k, v in web.history_queries(kind, name).items()})
    for name, (sql, params) in queries.items():
        check_query(sql, store_tables())
        store.query(sql + web._STOP, params)   # runs (a wrong column or type fails here)


@pytest.mark.parametrize("case", range(6))
def test_each_list_filter_keeps_exactly_what_it_names(loaded, case):
    store, data = loaded
    query, want = filters_to_try(data)[case]
    every = expected(data)
    should = expected(data, **want)
    assert should and should < every, f"the case {query} must keep some and leave out some"
    got = ids(store, web.list_query(web.parse_filter(query), data["now_ms"]))
    assert set(got) == should and len(got) == len(should), query


def test_the_list_sorts_and_hides_withdrawn_unless_asked(loaded):
    store, data = loaded
    got = web._records(store.query(*web.list_query(web.parse_filter({"sort": "lost_gpu_hours", "order": "asc"}))))
    lost = [i["lost_gpu_hours"] for i in got]
    assert lost == sorted(lost) and lost[0] < lost[-1]
    got = web._records(store.query(*web.list_query(web.parse_filter({}))))
    tss = [i["failure_ts"] for i in got]
    assert tss == sorted(tss, reverse=True) and {i["id"] for i in got} == expected(data)
    withdrawn = {i.id for i in data["withdrawn"]}
    assert withdrawn and not withdrawn & {i["id"] for i in got}
    assert set(ids(store, web.list_query(web.parse_filter({"state": web.WITHDRAWN})))) == withdrawn
    q = data["incidents"][3].job
    assert {i["job"] for i in web._records(store.query(*web.list_query(web.parse_filter({"q": q})))) } == {q}


@pytest.mark.parametrize("bad", [{"category": "nope"}, {"range": "2y"}, {"sort": "id; DROP"}, {"order": "up"},
                                 {"since": "yesterday"}, {"refresh": "-1"}, {"limit": "100000"}])
def test_a_bad_parameter_is_refused_with_its_name(bad):
    with pytest.raises(web.BadRequest) as e:
        web.parse_filter(bad)
    assert next(iter(bad)) in str(e.value)


def test_incident_page_legend_sorted_hypotheses_grouped_evidence(loaded):
    _, data = loaded
    inc = listed(data)[0]
    page = web.render_incident(inc)
    legend = page.split('id="legend"')[1].split("</div>")[0]
    assert "key-fail" in legend and "failure" in legend and "key-ckpt" in legend and "last checkpoint" in legend
    rows = page.split('id="hypotheses"')[1].split("</table>")[0].split("</tr>")[1:-1]
    rc = inc["root_cause"]
    assert 'class="root"' in rows[0] and rc["component"] in rows[0] and f"<td>{rc['confidence']:.0%}</td>" in rows[0]
    confs = [float(r.split("<td>")[3].split("%")[0]) for r in rows]
    assert confs == sorted(confs, reverse=True) and len(rows) == 3, rows   # root listed once, rest by confidence
    ev = page.split('id="evidence"')[1].split("</table>")[0]
    assert ev.count("NCCL watchdog timeout") == 1 and 'data-n="35"' in ev and "&times;35" in ev
    assert ev.count("<tr") == 1 + len({(e["layer"], e["node"], e["summary"]) for e in inc["evidence"]})
    assert page.count("<circle") == len(inc["evidence"])   # every event still a dot of the timeline


def test_values_are_escaped_and_subjects_link_to_their_history(loaded):
    _, data = loaded
    inc = listed(data)[0]
    page = web.render_incident(inc) + web.render_index([inc])
    assert "<script>" not in page and "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;" in page
    g = data["ds"].offender_gpu
    for n in inc["affected"]["nodes"]:
        assert f'href="/history?node={n}"' in page
    if inc["root_cause"]["component"] == f"gpu:{g}":
        assert f'href="/history?gpu={g.replace("/", "%2F")}"' in page


def test_fleet_shows_live_alerts_grouped_and_latest_findings(loaded):
    store, data = loaded
    now = data["now_ms"]
    got = {k: store.query(sql, p) for k, (sql, p) in web.fleet_queries(now, web.LIVE_MIN).items()}
    g = data["ds"].offender_gpu
    alerts = {(a["detector"], a["subject"]): a["n"] for a in got["alerts"]}
    assert alerts == {("xid", f"gpu:{g}"): 3, ("link_flap", f"port:{data['ds'].flaky_port}"): 1}, alerts
    assert [f["id"] for f in got["findings"]] == ["f-gpu-1", "f-port"]   # the later emission, critical first
    day = {i["root_cause"]["category"] for i in listed(data) if i["failure_ts"] >= now - 24 * HOUR}
    assert {c["category"] for c in got["categories"]} == day
    page = web.render_fleet(got, now_ms=now)
    assert '<meta http-equiv="refresh" content="30">' in page and "&times;3" in page and "<script>" not in page
    wide = store.query(*web.fleet_queries(now, 4 * 60)["alerts"])
    assert ("thermal", "gpu:n03/0") in {(a["detector"], a["subject"]) for a in wide}


def test_history_of_a_node_gpu_and_port(loaded):
    store, data = loaded
    ds = data["ds"]
    for kind, name in (("gpu", ds.offender_gpu), ("port", ds.flaky_port), ("node", ds.offender_node)):
        got = {k: store.query(sql, p) for k, (sql, p) in web.history_queries(kind, name).items()}
        incs = web._records(got["incidents"])
        col = {"gpu": "gpus", "port": "ports", "node": "nodes"}[kind]
        want = {i["id"] for i in listed(data) if name in i["affected"][col]
                or i["root_cause"]["component"] == f"{kind}:{name}"}
        assert want and {i["id"] for i in incs} == want, kind
        assert got["alerts"], kind
        if kind != "node":
            assert got["findings"] and all(f["subject"] == f"{kind}:{name}" for f in got["findings"])
        page = web.render_history(kind, name, {**got, "incidents": incs})
        assert page.count('class="incident"') == len(want)
    with pytest.raises(web.BadRequest):
        web.parse_subject({"node": "a", "gpu": "b"})


def test_page_reads_never_run_chdb_on_the_event_loop(loaded):
    store, data = loaded
    calls: list[int] = []
    real = store._s.query

    def recording(*a, **kw):
        calls.append(threading.get_ident())
        return real(*a, **kw)

    async def pages() -> tuple[int, list[str]]:
        now = int(time.time() * 1000)
        out = [await web.build_list(store, {"category": "gpu_hardware", "refresh": "10"}, now),
               await web.build_fleet(store, {}, now),
               await web.build_history(store, {"gpu": data["ds"].offender_gpu}, now)]
        return threading.get_ident(), out

    store._s.query = recording
    try:
        loop_thread, out = asyncio.run(pages())
    finally:
        store._s.query = real
    assert len(calls) >= 6 and loop_thread not in calls
    assert '<meta http-equiv="refresh" content="10">' in out[0] and 'selected>gpu_hardware<' in out[0]



def test_dig_further_commands_carry_the_serving_settings(loaded):
    import dataclasses

    from faultline.config import Settings

    _, data = loaded
    inc = listed(data)[1]
    page = web.render_incident(inc, dataclasses.replace(Settings(), topic_prefix="demo.r1."))
    dig = page.split('id="dig"')[1].split("</p>")[0]
    assert f"FAULTLINE_TOPIC_PREFIX=demo.r1. " in dig and f"replay --incident {inc['id']} --since=-7d --diagnose" in dig
    assert "faultline explain " + inc["id"] in web.render_incident(inc)   # offline: the plain command
