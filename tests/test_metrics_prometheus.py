"""The real Debian ``prometheus`` scrapes a real `faultline worker` and `faultline sink`
(issue 17, Must show): after a known input - a simulated fleet's events plus invalid records
of known kinds - the series Prometheus stored have the values the input implies:

- worker: events by topic and kind = the input's valid events by topic and kind; dead
  letters by reason class = the invalid records by class; alerts by detector/severity and
  incidents by category = what the worker wrote on fl.alerts / fl.incidents;
- sink: rows by table = the events and dead letters; invalid input = the invalid records;
- lag: for both groups, one series per partition of every input topic, end offsets summing
  to the records produced, committed = end, lag 0.

Prometheus runs on a free loopback port with its own TSDB directory and a generated scrape
config (1 s interval); it is stopped by its pid.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections import Counter
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from conftest import free_port
from faultline.producers.simulate import simulate
from faultline.schemas.codec import decode, now_ms
from faultline.schemas.registry import INPUT_TOPICS, LAYER_TOPICS
from faultline.streams.faust_harness import (produce, SinkProcess, WorkerProcess, read_topic, sink_group_id,
                                             wait_caught_up)
from faultline.streams.faust_topics import ensure_topics

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
APP = "metricstest"
PARTITIONS = 3
#: invalid records on fl.gpu and the reason class the worker must count each under
INVALID = [(b'{"v":1,"id":"x1","ts":1,', "invalid_json"),
           (b'{"v":1,"id":"x2","ts":1,"kind":"gpu.nonsense","source":"t","node":"n1","data":{}}', "unknown_kind"),
           (b'{"v":1,"id":"x3","ts":1,', "invalid_json"),
           (b'{"v":1,"id":"x4","ts":"noon","kind":"gpu.sample","source":"t","node":"n1","data":{}}', "schema")]


class Prometheus:
    """``/usr/bin/prometheus`` scraping ``targets`` (job name -> host:port) every second."""

    def __init__(self, workdir: Path, targets: dict[str, str]) -> None:
        self.dir = workdir
        self.port = free_port()
        self.dir.mkdir(parents=True, exist_ok=True)
        cfg = {"global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
               "scrape_configs": [{"job_name": job, "static_configs": [{"targets": [t]}]}
                                  for job, t in targets.items()]}
        self.config = self.dir / "prometheus.yml"
        self.config.write_text(json.dumps(cfg, indent=2))   # JSON is YAML
        self.log_path = self.dir / "prometheus.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> "Prometheus":
        fh = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={self.config}", f"--storage.tsdb.path={self.dir / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=fh, stderr=fh, start_new_session=True)
        fh.close()
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            assert self.proc.poll() is None, self.log()
            assert time.monotonic() < deadline, "prometheus not ready in 30 s: " + self.log()
            time.sleep(0.2)

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def query(self, q: str) -> dict[tuple[tuple[str, str], ...], float]:
        """Instant query: labels (without __name__, job, instance) -> value."""
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": q})
        with urllib.request.urlopen(url, timeout=10) as r:
            body = orjson.loads(r.read())
        assert body["status"] == "success", body
        out = {}
        for row in body["data"]["result"]:
            labels = tuple(sorted((k, v) for k, v in row["metric"].items()
                                  if k not in ("__name__", "job", "instance")))
            out[labels] = float(row["value"][1])
        return out

    def wait_for(self, q: str, want: dict, timeout_s: float = 45.0) -> dict:
        """Poll ``q`` until it answers ``want`` (Prometheus scrapes once a second)."""
        deadline = time.monotonic() + timeout_s
        while True:
            got = self.query(q)
            if got == want or time.monotonic() > deadline:
                return got
            time.sleep(0.5)




def by(records, key) -> dict:
    return dict(Counter(key(orjson.loads(r.value)) for r in records))


def output_series(settings) -> tuple[dict, dict]:
    """What fl.alerts and fl.incidents hold, as the labels of the worker's output counters."""
    alerts = asyncio.run(read_topic(settings, "fl.alerts", until=lambda r: True, timeout_s=20, idle_s=1))
    incidents = asyncio.run(read_topic(settings, "fl.incidents", until=lambda r: True, timeout_s=20, idle_s=1))
    return ({(("detector", d), ("severity", v)): n for (d, v), n in
             by(alerts, lambda a: (a["detector"], a["severity"])).items()},
            {(("category", c),): n for c, n in by(incidents, lambda i: i["root_cause"]["category"]).items()})


@pytest.mark.skipif(not Path(PROMETHEUS).exists(), reason="prometheus is not installed "
                    "(infra/peers/install.sh installs Debian's prometheus)")
def test_prometheus_scrapes_worker_and_sink(settings, tmp_path):
    s = replace(settings, topic_partitions=PARTITIONS)
    asyncio.run(ensure_topics(s))
    start = (now_ms() - 90 * 60_000) // 60_000 * 60_000
    lines, _ = simulate("gpu-xid79", seed=1, nodes=2, hours=0.5, start_ms=start)
    evs = [decode(x) for x in lines]
    want_events = dict(Counter(((("kind", e.kind), ("topic", s.topic(LAYER_TOPICS[e.layer])))) for e in evs))
    want_dead = {(("reason", c),): n for c, n in Counter(cls for _, cls in INVALID).items()}
    per_topic = Counter(s.topic(LAYER_TOPICS[e.layer]) for e in evs)
    per_topic[s.topic("fl.gpu")] += len(INVALID)
    wport, sport = free_port(), free_port()
    wgroup, sgroup = APP, sink_group_id(s, APP)
    with SinkProcess(s, tmp_path / "sink", app_id=APP, web_port=sport) as sink, \
            WorkerProcess(s, tmp_path / "w", app_id=APP, web_port=wport) as w, \
            Prometheus(tmp_path / "prom", {"worker": f"127.0.0.1:{wport}", "sink": f"127.0.0.1:{sport}"}) as prom:
        asyncio.run(produce(s, lines, [("fl.gpu", b"n1", raw) for raw, _ in INVALID]))
        asyncio.run(wait_caught_up(s, wgroup, INPUT_TOPICS, timeout_s=180))
        asyncio.run(wait_caught_up(s, sgroup, timeout_s=180))
        logs = lambda: w.log() + sink.log() + prom.log()  # noqa: E731
        assert w.alive() and sink.alive(), logs()
        assert prom.wait_for("count(up == 1)", {(): 2.0}) == {(): 2.0}, logs()

        # events by topic and kind, dead letters by reason: exactly the known input
        got = prom.wait_for("faultline_worker_events_total", want_events)
        assert got == want_events, logs()
        got = prom.wait_for("faultline_worker_dead_letters_total", want_dead)
        assert got == want_dead, logs()
        assert prom.query("faultline_worker_failed_total") == {(): 0.0}

        # the outputs the worker counted are the records on its output topics (the XID 79
        # incident comes once event time passes its settle window; a re-check may revise it
        # later, so both sides are read again until they agree)
        outputs = lambda: output_series(s)  # noqa: E731
        deadline = time.monotonic() + 120
        while True:
            want_alerts, want_incidents = outputs()
            got = prom.query("faultline_worker_alerts_total"), prom.query("faultline_worker_incidents_total")
            if (want_incidents and got == (want_alerts, want_incidents)) or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert want_alerts and want_incidents, "the simulated XID 79 raises alerts and an incident: " + logs()
        assert (("category", "gpu_hardware"),) in want_incidents, want_incidents
        assert got == (want_alerts, want_incidents)

        # the sink: every event and dead letter stored, the invalid input counted
        rows = {(("table", "ingest_events"),): float(len(lines)), (("table", "deadletters"),): float(len(INVALID))}
        got = prom.wait_for('faultline_sink_rows_total{table=~"ingest_events|deadletters"}', rows)
        assert got == rows, logs()
        assert prom.query("faultline_sink_invalid_input_total") == {(): float(len(INVALID))}
        assert prom.query("sum(faultline_sink_flush_seconds_count) > 0")

        # lag per topic/partition for both groups: every input partition, offsets = input
        for group in (wgroup, sgroup):
            names = "|".join(s.topic(t).replace(".", "[.]") for t in INPUT_TOPICS)
            sel = f'{{group="{group}",topic=~"{names}"}}'
            want_ends = {(("topic", s.topic(t)),): float(per_topic.get(s.topic(t), 0)) for t in INPUT_TOPICS}
            ends = prom.wait_for(f"sum by (topic) (faultline_consumer_end_offset{sel})", want_ends)
            assert ends == want_ends, (group, logs())
            lag = prom.wait_for(f"faultline_consumer_lag{sel}",
                                {(("group", group), ("partition", str(p)), ("topic", s.topic(t))): 0.0
                                 for t in INPUT_TOPICS for p in range(PARTITIONS)})
            assert len(lag) == len(INPUT_TOPICS) * PARTITIONS and set(lag.values()) == {0.0}, (group, lag)
            done = prom.query(f"sum(faultline_consumer_committed_offset{sel})")
            assert done == {(): float(len(lines) + len(INVALID))}, (group, done)
