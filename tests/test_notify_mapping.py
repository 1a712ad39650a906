"""The notifier's pure part (faultline/notify/mapping.py, payloads.py, transport.backoff) on
the real engine's outputs for an injected fault: the simulator's gpu-xid79 scenario (GPU 6
of gpu-004 falls off the bus, job 490000 stalls, then fails, then is retried), diagnosed by
``Engine`` exactly as the worker would, fed to ``AlertBook`` in emission order. No I/O."""

from __future__ import annotations

import msgspec
import orjson
import pytest

from faultline.config import Settings
from faultline.notify.config import NotifySettings, where
from faultline.notify.mapping import (AlertBook, AmAlert, alertname, apply_all, incident_closed, iso)
from faultline.notify.payloads import am_bodies, webhook_body
from faultline.notify.transport import backoff
from faultline.producers.simulate import DEFAULT_START_MS, simulate
from faultline.schemas.codec import now_ms
from faultline.schemas.outputs import Alert, Incident
from faultline.streams.engine import Engine, EngineConfig

HOUR = 3_600_000
PAGE = "http://127.0.0.1:6066"


@pytest.fixture(scope="module")
def outputs() -> tuple[int, list]:
    """(now, the engine's alerts and incidents in emission order) for a fault ~20 min ago."""
    now = now_ms()
    start = (now - 40 * 60_000) // 60_000 * 60_000
    lines, truth = simulate("gpu-xid79", seed=1, nodes=4, hours=1.0, start_ms=start,
                         day_start_ms=DEFAULT_START_MS)  # the same story at any hour (job arrivals follow the day)
    assert truth["interruptions"][0]["component"] == "gpu:gpu-004/6"
    eng = Engine(EngineConfig.from_settings(Settings()))
    outs = list(eng.process(lines)) + list(eng.finish() or [])
    return now, outs


def book() -> AlertBook:
    return AlertBook(alert_ttl_ms=2 * HOUR, incident_ttl_ms=2 * HOUR, page_url=PAGE)


def firing(b: AlertBook, now: int) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for a in b.active(now):
        out.setdefault(a.labels["alertname"], []).append(a.labels)
    return out


def feed_until(b: AlertBook, outs: list, now: int, stop) -> list:
    """Feed records up to (not including) the first for which ``stop(rec)``; returns the rest."""
    for i, o in enumerate(outs):
        if stop(o):
            return outs[i:]
        apply_all(b, [(o, now)], now)
    return []


def is_closing(o) -> bool:
    return isinstance(o, Incident) and incident_closed(o)


def test_alert_and_incident_labels_link_and_resolve(outputs):
    now, outs = outputs
    b = book()
    rest = feed_until(b, outs, now, is_closing)
    assert rest, "the scenario's retry must close the incident"
    live = firing(b, now)
    inc = live["FaultlineIncident"]
    assert len(inc) == 1
    iid = inc[0]["incident"]
    assert inc[0] == {"alertname": "FaultlineIncident", "severity": "critical", "node": "gpu-004", "gpu": "6",
                      "job": "490000", "category": "gpu_hardware", "component": "gpu:gpu-004/6",
                      "incident": iid, "role": "cause"}
    xid = [l for l in live["FaultlineXid"] if l["node"] == "gpu-004"]
    assert xid == [{"alertname": "FaultlineXid", "severity": "critical", "node": "gpu-004", "gpu": "6",
                    "job": "490000", "category": "gpu_hardware", "subject": "gpu:gpu-004/6",
                    "incident": iid, "role": "cause"}]
    assert live["FaultlineStall"] == [{"alertname": "FaultlineStall", "severity": "critical", "job": "490000",
                                       "subject": "job:490000", "incident": iid, "role": "symptom"}]
    # the decoy XID 63 on another node and job is not part of the incident
    decoy = [l for l in live["FaultlineXid"] if l["node"] == "gpu-001"]
    assert decoy and all("incident" not in l and "role" not in l for l in decoy)
    ann = next(a for a in b.active(now) if a.labels["alertname"] == "FaultlineIncident").annotations
    assert ann["incident_url"] == f"{PAGE}/incidents/{iid}" and "gpu:gpu-004/6" in ann["summary"]

    # the retry runs: the incident closes, its symptom resolves with it, the cause alert stays
    closing = rest[0]
    d = apply_all(b, [(closing, now)], now)
    resolved = {a.labels["alertname"] for a in d.am if a.resolved(now)}
    assert {"FaultlineIncident", "FaultlineStall"} <= resolved
    live = firing(b, now)
    assert "FaultlineIncident" not in live and "FaultlineStall" not in live
    assert any(l.get("incident") == iid and l["role"] == "cause" for l in live["FaultlineXid"])


def test_withdrawn_stall_resolves_and_old_revisions_are_ignored(outputs):
    now, outs = outputs
    b = book()
    first = next(o for o in outs if isinstance(o, Incident))
    apply_all(b, [(o, now) for o in outs if isinstance(o, Alert) and o.ts <= first.failure_ts + 700_000], now)
    apply_all(b, [(first, now)], now)
    assert "FaultlineIncident" in firing(b, now)
    withdrawn = msgspec.structs.replace(first, revision=first.revision + 1, state="recovered")
    d = apply_all(b, [(withdrawn, now)], now)
    assert any(a.labels["alertname"] == "FaultlineIncident" and a.resolved(now) for a in d.am)
    assert "FaultlineIncident" not in firing(b, now) and "FaultlineStall" not in firing(b, now)
    # a re-delivered older revision changes nothing
    assert apply_all(b, [(first, now)], now).am == []


def test_ttl_staleness_webhook_wait_and_bounds(outputs):
    now, outs = outputs
    alert = next(o for o in outs if isinstance(o, Alert) and o.detector == "xid")
    b = AlertBook(alert_ttl_ms=HOUR, incident_ttl_ms=HOUR, max_active=2, group_wait_ms=5_000)
    # an alert whose TTL ran out before it was read never fires
    old = msgspec.structs.replace(alert, ts=now - 2 * HOUR)
    d = apply_all(b, [(old, now)], now)
    assert d.stale == 1 and d.am == [] and b.active(now) == []
    # a live one fires at once in Alertmanager; the webhook notice waits group_wait
    d = apply_all(b, [(alert, now)], now)
    assert len(d.am) == 1 and d.notices == []
    assert [n.status for n in b.tick(now + 5_000).notices] == ["firing"]
    # it resolves TTL after its last occurrence: tick drops it and says so once
    end = alert.ts + HOUR
    assert b.tick(end - 1).notices == []
    assert [n.status for n in b.tick(end).notices] == ["resolved"] and b.active(end) == []
    # bounded: at most max_active label sets, the oldest evicted
    for i in range(5):
        apply_all(b, [(msgspec.structs.replace(alert, subject=f"gpu:gpu-004/{i}"), now)], now)
    assert len(b.alerts) == 2 and b.evicted == 3


def test_payloads_and_helpers(outputs):
    now, outs = outputs
    assert alertname("xid") == "FaultlineXid" and alertname("log:cuda_oom") == "FaultlineLogCudaOom"
    assert iso(1_700_000_000_123) == "2023-11-14T22:13:20.123Z"
    b = book()
    d = apply_all(b, [(o, now) for o in outs if not is_closing(o)], now)
    body = orjson.loads(am_bodies(d.am)[0][1])
    assert {"labels", "annotations", "startsAt", "endsAt"} <= set(body[0])
    # one entry per label set in a POST (the last state of each)
    assert len({tuple(sorted(a["labels"].items())) for a in body}) == len(body)
    inc = next(n for n in d.notices if n.kind == "incident")
    j = orjson.loads(webhook_body(inc, "json"))
    assert j["version"] == "4" and j["status"] == "firing" and j["alerts"][0]["labels"]["role"] == "cause"
    s = orjson.loads(webhook_body(inc, "slack"))
    assert s["text"].startswith(":red_circle: [CRITICAL] FaultlineIncident") and "incidents/inc-" in s["text"]
    assert s["blocks"][0]["type"] == "section"
    it = backoff(0.5, 4.0)
    assert [next(it) for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]


def test_notify_settings_env_toml_and_secrets():
    s = Settings(extra={"notify": {"alertmanager_url": "http://127.0.0.1:9094/", "alert_ttl_s": 60}})
    ns = NotifySettings.from_settings(s, env={"FAULTLINE_NOTIFY_WEBHOOK_URL": "https://hooks.example/T1/SECRET",
                                              "FAULTLINE_NOTIFY_ALERT_TTL_S": "120"})
    assert ns.alertmanager_urls() == ["http://127.0.0.1:9094"] and ns.alert_ttl_s == 120
    assert ns.page() == "http://127.0.0.1:6066"
    assert ns.masked()["webhook_url"] == "***" and where(ns.webhook_url) == "https://hooks.example"
    from faultline.config import ConfigError

    with pytest.raises(ConfigError, match="nothing to notify"):
        NotifySettings.from_settings(Settings(), env={})
    with pytest.raises(ConfigError, match="webhook_format"):
        NotifySettings.from_settings(s, env={"FAULTLINE_NOTIFY_WEBHOOK_FORMAT": "xml"})
    with pytest.raises(ConfigError, match="must be a number"):
        NotifySettings.from_settings(s, env={"FAULTLINE_NOTIFY_RESEND_S": "soon"})
    with pytest.raises(ConfigError, match="unknown notify setting"):
        NotifySettings.from_settings(Settings(extra={"notify": {"alertmanger_url": "x"}}), env={})


def test_replayed_records_rebuild_links_without_new_notices(outputs):
    """After a restart the alerts are read again quietly: their unlinked label sets are
    resolved in Alertmanager once an incident links them, and no firing notice repeats."""
    now, outs = outputs
    first_inc = next(i for i, o in enumerate(outs) if isinstance(o, Incident))
    alerts, inc = outs[:first_inc], outs[first_inc]
    b = book()
    d = apply_all(b, [(o, now) for o in alerts], now, quiet=True)
    assert d.notices == [] and "FaultlineStall" in firing(b, now)
    d = apply_all(b, [(inc, now)], now)
    resolved = [a.labels for a in d.am if a.resolved(now)]
    assert {"alertname": "FaultlineStall", "severity": "critical", "job": "490000",
            "subject": "job:490000"} in resolved
    assert [n.kind for n in d.notices] == ["incident"]   # the replayed alerts are not announced again
    # replayed after the incident (the other order): linked at once, the unlinked set resolved
    b = book()
    apply_all(b, [(inc, now)], now)
    stall = next(o for o in alerts if isinstance(o, Alert) and o.detector == "stall")
    d = apply_all(b, [(stall, now)], now, quiet=True)
    assert [a.labels.get("role") for a in d.am if a.resolved(now)] == [None]
    assert [a.labels.get("role") for a in d.am if not a.resolved(now)] == ["symptom"]
