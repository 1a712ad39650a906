"""`faultline notify` end to end: real Kafka topics (the test's private prefix), records
published the way the worker's Outbox writes them (``schemas.bounds.encode_output``, key =
job / node / subject), the notifier's own consumer group, and real receivers:

- the Debian ``prometheus-alertmanager`` with the shipped ``infra/alertmanager/alertmanager.yml``:
  the injected fault (gpu-xid79: GPU 6 of gpu-004 falls off the bus) shows in
  ``GET /api/v2/alerts`` with its labels, the job's stall alert is inhibited by the incident
  (``status.inhibitedBy``), an unrelated XID is not, and the incident and its symptom resolve
  once the job's retry runs;
- a local HTTP receiver for the webhook: not listening at first (the notifier retries and
  commits nothing), then up (every notice arrives, offsets committed); and one that stays
  down past the give-up bound (dead letters on fl.deadletter with the reason, then commit).

The records are the in-process Engine's outputs on the simulator's events (what
`faultline diagnose --alerts` prints and the worker emits), ending ~20 minutes ago.
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import orjson
import pytest
from aiohttp import web
from aiokafka import AIOKafkaConsumer, TopicPartition

from conftest import free_port
from helpers_proc import stop_process
from faultline.config import Settings
from faultline.notify.config import NotifySettings
from faultline.notify.mapping import incident_closed
from faultline.notify.service import Notifier, notify_group_id
from faultline.producers.publish import Publisher
from faultline.producers.simulate import DEFAULT_START_MS, simulate
from faultline.schemas.bounds import encode_output
from faultline.schemas.codec import now_ms
from faultline.schemas.outputs import Incident
from faultline.schemas.registry import ALERTS, DEADLETTER, INCIDENTS
from faultline.streams.engine import Engine, EngineConfig
from faultline.streams.faust_harness import read_topic
from faultline.topics import list_topics

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parent.parent
AM_CONFIG = ROOT / "infra" / "alertmanager" / "alertmanager.yml"
AM_BIN = shutil.which("prometheus-alertmanager") or "/usr/bin/prometheus-alertmanager"
FAULT_NODE, FAULT_GPU, FAULT_JOB = "gpu-004", "6", "490000"


@pytest.fixture(scope="module")
def outputs() -> tuple[list, list]:
    """The engine's alerts/incidents for gpu-xid79: (before the retry closes the incident, the rest)."""
    now = now_ms()
    start = (now - 40 * 60_000) // 60_000 * 60_000
    lines, _ = simulate("gpu-xid79", seed=1, nodes=4, hours=1.0, start_ms=start,
                         day_start_ms=DEFAULT_START_MS)  # the same story at any hour (job arrivals follow the day)
    eng = Engine(EngineConfig.from_settings(Settings()))
    outs = list(eng.process(lines)) + list(eng.finish() or [])
    cut = next(i for i, o in enumerate(outs) if isinstance(o, Incident) and incident_closed(o))
    return outs[:cut], outs[cut:]


async def publish(settings: Settings, outs: list) -> None:
    """As ``streams.agents.Outbox.outputs``: incidents keyed by job, alerts by job/node/subject."""
    async with Publisher(settings, compression=None) as pub:
        for o in outs:
            if isinstance(o, Incident):
                topic, key = INCIDENTS, o.job.encode()
            else:
                topic, key = ALERTS, (o.job or o.node or o.subject or "").encode()
            out_topic, value = encode_output(o, topic)
            assert out_topic == topic
            await pub.send_raw(topic, key, value)
        await pub.flush()


async def committed_vs_end(settings: Settings, group: str) -> tuple[dict, dict]:
    parts = {t["topic"]: t["partitions"] or 0 for t in await list_topics(settings)}
    c = AIOKafkaConsumer(**settings.kafka_kwargs(), group_id=group, enable_auto_commit=False)
    await c.start()
    try:
        tps = [TopicPartition(settings.topic(t), p) for t in (ALERTS, INCIDENTS)
               for p in range(parts[settings.topic(t)])]
        end = await c.end_offsets(tps)
        got = {tp: await c.committed(tp) for tp in tps}
        return {tp: got[tp] or 0 for tp in tps}, {tp: end[tp] for tp in tps}
    finally:
        await c.stop()


async def until(what: str, fn, timeout_s: float = 60.0, every_s: float = 0.5):
    t0 = time.monotonic()
    last = None
    while time.monotonic() - t0 < timeout_s:
        last = await fn()
        if last:
            return last
        await asyncio.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}; last: {last!r}")


class Running:
    """A Notifier as a task of the test's loop; ``await stop()`` ends it and re-raises its error."""

    def __init__(self, n: Notifier) -> None:
        self.n = n
        self.task = asyncio.create_task(n.run())

    async def stop(self) -> None:
        self.n.stop()
        await asyncio.wait_for(self.task, 30)


# ------------------------------------------------------------------ Alertmanager
@pytest.fixture
def alertmanager(tmp_path):
    """The real Debian Alertmanager on a free loopback port with the shipped config."""
    if not os.path.exists(AM_BIN):
        pytest.skip("prometheus-alertmanager is not installed (infra/peers/install.sh installs it)")
    port = free_port()
    log = open(tmp_path / "alertmanager.log", "wb")
    proc = subprocess.Popen([AM_BIN, f"--config.file={AM_CONFIG}", f"--storage.path={tmp_path / 'am'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=",
                             "--log.level=warn"], stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(base + "/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"alertmanager did not start: {(tmp_path / 'alertmanager.log').read_text()[-2000:]}")
            time.sleep(0.2)
        yield base
    finally:
        stop_process(proc, log=log)


def test_stop_process_kills_what_ignores_sigterm_and_returns_its_output(tmp_path):
    """The helper the Alertmanager fixture stops it with (tests/helpers_proc.py)."""
    code = "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "up\n"
    t0 = time.monotonic()
    assert stop_process(p, timeout=0.5) == "" and p.returncode == -9 and time.monotonic() - t0 < 5
    log = open(tmp_path / "child.log", "w+")
    p = subprocess.Popen([sys.executable, "-c", "print('bye')"], stdout=log)
    p.wait(30)   # already gone: only reaped, its log still read
    assert stop_process(p, log=log) == "bye\n" and p.returncode == 0 and log.closed


def am_alerts(base: str) -> list[dict]:
    with urllib.request.urlopen(base + "/api/v2/alerts", timeout=5) as r:
        return orjson.loads(r.read())


def by_name(alerts: list[dict], name: str) -> list[dict]:
    return [a for a in alerts if a["labels"].get("alertname") == name]


async def test_alertmanager_labels_inhibition_resolution(settings, contract_topics, alertmanager, outputs):
    before, after = outputs
    await contract_topics()
    await publish(settings, before)
    ns = NotifySettings(alertmanager_url=alertmanager, alert_ttl_s=7200, incident_ttl_s=7200,
                        group_wait_s=0, retry_first_s=0.2, retry_give_up_s=30, page_url="http://127.0.0.1:6066")
    group = notify_group_id(settings)
    run = Running(Notifier(settings, ns, group_id=group))
    try:
        async def inhibited_stall():
            got = await asyncio.to_thread(am_alerts, alertmanager)
            stall = by_name(got, "FaultlineStall")
            return got if stall and stall[0]["status"]["inhibitedBy"] and by_name(got, "FaultlineIncident") else None

        got = await until("the incident and its inhibited stall symptom in Alertmanager", inhibited_stall)
        inc, = by_name(got, "FaultlineIncident")
        iid = inc["labels"]["incident"]
        assert inc["labels"] == {"alertname": "FaultlineIncident", "severity": "critical", "node": FAULT_NODE,
                                 "gpu": FAULT_GPU, "job": FAULT_JOB, "category": "gpu_hardware",
                                 "component": f"gpu:{FAULT_NODE}/{FAULT_GPU}", "incident": iid, "role": "cause"}
        assert inc["status"]["state"] == "active"
        assert inc["annotations"]["incident_url"] == f"http://127.0.0.1:6066/incidents/{iid}"
        assert "fell off the bus" in inc["annotations"]["summary"] or "fallen off the bus" in inc["annotations"]["summary"]
        xid = [a for a in by_name(got, "FaultlineXid") if a["labels"]["node"] == FAULT_NODE]
        assert len(xid) == 1 and xid[0]["labels"] == {
            "alertname": "FaultlineXid", "severity": "critical", "node": FAULT_NODE, "gpu": FAULT_GPU,
            "job": FAULT_JOB, "category": "gpu_hardware", "subject": f"gpu:{FAULT_NODE}/{FAULT_GPU}",
            "incident": iid, "role": "cause"}
        stall, = by_name(got, "FaultlineStall")
        assert stall["labels"] == {"alertname": "FaultlineStall", "severity": "critical", "job": FAULT_JOB,
                                   "subject": f"job:{FAULT_JOB}", "incident": iid, "role": "symptom"}
        # inhibited by the shipped rule: by the cause alerts of its incident, nothing else
        cause_fps = {a["fingerprint"] for a in got if a["labels"].get("incident") == iid
                     and a["labels"].get("role") == "cause"}
        assert stall["status"]["state"] == "suppressed" and set(stall["status"]["inhibitedBy"]) <= cause_fps
        assert inc["fingerprint"] in cause_fps
        # an unrelated fault (the scenario's decoy XID 63 on gpu-001) is active, not inhibited
        decoy = [a for a in by_name(got, "FaultlineXid") if a["labels"]["node"] == "gpu-001"]
        assert decoy and all(a["status"]["state"] == "active" and "incident" not in a["labels"] for a in decoy)
        # the label sets from before the incident linked them were resolved (gone from the API)
        assert all("incident" in a["labels"] for a in by_name(got, "FaultlineStall"))

        # the job's retry runs: the incident closes; it and its symptom resolve
        await publish(settings, after)

        async def resolved():
            got = await asyncio.to_thread(am_alerts, alertmanager)
            return got if not by_name(got, "FaultlineIncident") and not by_name(got, "FaultlineStall") else None

        got = await until("the incident and its symptom resolved in Alertmanager", resolved)
        assert [a["labels"]["incident"] for a in by_name(got, "FaultlineXid")
                if a["labels"]["node"] == FAULT_NODE] == [iid]   # the faulty GPU's own alert stays (TTL)

        seen: list = []

        async def all_committed():
            c, e = await committed_vs_end(settings, group)
            seen[:] = [c, e]
            return (c, e) if c == e and sum(e.values()) > 0 else None

        try:
            await until("the notifier's commits to reach the end of both topics", all_committed, 30)
        except AssertionError as err:
            raise AssertionError(f"{err}: committed, end = {seen}; stats {run.n.stats.as_dict()}") from None
        assert run.n.stats.invalid == 0 and run.n.stats.gave_up == 0
    finally:
        await run.stop()


async def test_alertmanager_restart_rebuilds_links(settings, contract_topics, alertmanager, outputs):
    """A notifier that read the alerts, then stopped; its successor (same group) reads only
    the incident, yet relabels the stall as its symptom (inhibited) and resolves the unlinked
    label set: the book is rebuilt from the committed partitions. A record that is not a
    contract alert is dead-lettered once, not again on the replay."""
    before, _ = outputs
    await contract_topics()
    alerts = [o for o in before if not isinstance(o, Incident)]
    await publish(settings, alerts)
    async with Publisher(settings, compression=None) as pub:
        await pub.send_raw(ALERTS, b"x", b'{"id": "not an alert"}')
        await pub.flush()
    ns = NotifySettings(alertmanager_url=alertmanager, alert_ttl_s=7200, incident_ttl_s=7200,
                        group_wait_s=0, retry_first_s=0.2, retry_give_up_s=30)
    group = notify_group_id(settings)

    async def committed():
        c, e = await committed_vs_end(settings, group)
        return c if c == e and sum(e.values()) > 0 else None

    first = Running(Notifier(settings, ns, group_id=group))
    try:
        await until("the alerts delivered and committed", committed, 60)
        got = await asyncio.to_thread(am_alerts, alertmanager)
        stall, = by_name(got, "FaultlineStall")
        assert "incident" not in stall["labels"] and stall["status"]["state"] == "active"
        assert first.n.stats.invalid == 1
    finally:
        await first.stop()
    await publish(settings, [o for o in before if isinstance(o, Incident)])
    second = Running(Notifier(settings, ns, group_id=group))
    try:
        async def relinked():
            got = await asyncio.to_thread(am_alerts, alertmanager)
            stall = by_name(got, "FaultlineStall")
            return got if (len(stall) == 1 and stall[0]["labels"].get("role") == "symptom"
                           and stall[0]["status"]["inhibitedBy"]) else None

        got = await until("the stall relinked as the incident's inhibited symptom after the restart", relinked)
        inc, = by_name(got, "FaultlineIncident")
        assert by_name(got, "FaultlineStall")[0]["labels"]["incident"] == inc["labels"]["incident"]
        assert second.n.stats.replayed >= len(alerts) and second.n.stats.invalid == 0
        await until("the successor's commits at the end", committed, 30)
    finally:
        await second.stop()


# ------------------------------------------------------------------ webhook
class Receiver:
    """A local HTTP receiver (aiohttp.web) that records what it is sent."""

    def __init__(self, port: int, status: int = 200) -> None:
        self.port = port
        self.status = status
        self.got: list[dict] = []
        self.headers: list[dict] = []
        self._runner: web.AppRunner | None = None

    async def _hook(self, request: web.Request) -> web.Response:
        self.got.append(orjson.loads(await request.read()))
        self.headers.append(dict(request.headers))
        return web.Response(status=self.status)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/hook/{rest:.*}", self._hook)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


async def test_webhook_retries_while_down_then_delivers(settings, contract_topics, outputs):
    before, after = outputs
    await contract_topics()
    await publish(settings, before + after)
    port = free_port()
    ns = NotifySettings(webhook_url=f"http://127.0.0.1:{port}/hook/T000/SECRET", webhook_token="tok-1",
                        alert_ttl_s=7200, incident_ttl_s=7200, group_wait_s=0, retry_first_s=0.2,
                        retry_cap_s=1.0, retry_give_up_s=120)
    group = notify_group_id(settings)
    run = Running(Notifier(settings, ns, group_id=group))
    rx = Receiver(port)
    try:
        # receiver down (nothing listens): the notifier retries and commits nothing
        await until("retries against the down receiver", lambda: _ready(run.n.stats.retries >= 3), 30, 0.2)
        c, _ = await committed_vs_end(settings, group)
        assert sum(c.values()) == 0 and run.n.stats.notices == 0
        await rx.start()

        async def delivered():
            c, e = await committed_vs_end(settings, group)
            return rx.got if c == e and any(m["kind"] == "incident" and m["status"] == "resolved" for m in rx.got) else None

        got = await until("every notice delivered and the batch committed", delivered, 60)
        assert all(h.get("Authorization") == "Bearer tok-1" for h in rx.headers)
        incs = [m for m in got if m["kind"] == "incident"]
        assert [m["status"] for m in incs] == ["firing", "resolved"]
        labels = incs[0]["alerts"][0]["labels"]
        assert labels["alertname"] == "FaultlineIncident" and labels["component"] == f"gpu:{FAULT_NODE}/{FAULT_GPU}"
        assert incs[0]["version"] == "4" and incs[0]["alerts"][0]["status"] == "firing"
        # the XID on the faulty GPU was sent once, firing (linking it to the incident is not a new notice)
        xid = [m for m in got if m["alerts"][0]["labels"]["alertname"] == "FaultlineXid"
               and m["alerts"][0]["labels"]["node"] == FAULT_NODE]
        assert [m["status"] for m in xid] == ["firing"]
        assert run.n.stats.retries >= 3 and run.n.stats.gave_up == 0 and run.n.stats.dead_letters == 0
    finally:
        await run.stop()
        await rx.stop()


async def test_webhook_gives_up_into_dead_letters(settings, contract_topics, outputs):
    before, _ = outputs
    await contract_topics()
    await publish(settings, before)
    port = free_port()   # nobody ever listens here
    ns = NotifySettings(webhook_url=f"http://127.0.0.1:{port}/hook/SECRET", webhook_format="slack",
                        alert_ttl_s=7200, incident_ttl_s=7200, group_wait_s=0, retry_first_s=0.2,
                        retry_cap_s=0.4, retry_give_up_s=1.5)
    group = notify_group_id(settings, "giveup")
    run = Running(Notifier(settings, ns, group_id=group))
    try:
        async def committed():
            c, e = await committed_vs_end(settings, group)
            return c if c == e and sum(e.values()) > 0 else None

        await until("the batch committed after giving up", committed, 60)
        recs = await read_topic(settings, DEADLETTER, until=lambda r: len(r) >= run.n.stats.dead_letters > 0,
                                timeout_s=20)
        dead = [orjson.loads(r.value) for r in recs]
        assert dead and len(dead) == run.n.stats.gave_up
        assert all(f"delivery to http://127.0.0.1:{port} gave up" in d["reason"] for d in dead)
        assert "cannot connect" in dead[0]["reason"] and all("SECRET" not in d["reason"] for d in dead)
        body = orjson.loads(base64.b64decode(dead[0]["raw_b64"]))
        assert "text" in body and "blocks" in body   # the undelivered Slack message itself
    finally:
        await run.stop()


async def _ready(v: bool) -> bool:
    return v
