"""faultline.metrics' collectors on the real worker (a Faust app with the agents installed,
not started) and the real sink (SinkConsumer over a chDB store), no broker: what their
counters hold is what the collectors yield."""

from __future__ import annotations

from dataclasses import replace

import pytest
from prometheus_client import generate_latest

from faultline.config import Settings
from faultline.metrics import Metrics, SinkSource, WorkerSource
from faultline.schemas.codec import now_ms
from faultline.schemas.registry import LAYER_TOPICS

from test_metrics_unit import Msg, ev, samples


@pytest.fixture
def offline(tmp_path) -> Settings:
    return replace(Settings(), kafka_bootstrap="127.0.0.1:1", topic_prefix="m.",
                   store_path=str(tmp_path / "store"), spool_dir=str(tmp_path / "spool"))


def test_worker_source_reads_the_real_worker(offline):
    """A real worker (Faust app, agents installed, not started): what its counters hold is
    what the collector yields; no partition is assigned, so no lag series."""
    from faultline.streams.agents import decode_events
    from faultline.streams.app import create_app
    from faultline.streams.services import Services

    services = Services(offline)
    create_app(offline, app_id="mtest", services=services)
    sources = [s for s in services.metrics.sources if isinstance(s, WorkerSource)]
    assert len(sources) == 1, "streams/agents.install registers one WorkerSource"
    w = sources[0].worker
    topic_layer = {offline.topic(t): layer for layer, t in LAYER_TOPICS.items()}
    ok, dead = decode_events([Msg(ev(id="a"), "m.fl.gpu"), Msg(ev(id="b"), "m.fl.gpu"),
                              Msg(b"nope", "m.fl.gpu")], topic_layer)
    w.stats.counts.add_events(ok)
    w.stats.counts.add_dead_letters(dead)
    w.stats.counts.node_batch.observe(0.003)
    w.stats.failed = 2
    src = WorkerSource(w, offline)
    m = Metrics(process=False)
    m.add(src)
    got = samples(generate_latest(m.registry).decode())
    assert got[("faultline_worker_events_total", (("kind", "gpu.sample"), ("topic", "m.fl.gpu")))] == 2
    assert got[("faultline_worker_dead_letters_total", (("reason", "invalid_json"),))] == 1
    assert got[("faultline_worker_failed_total", ())] == 2
    assert got[("faultline_worker_batch_seconds_count", (("side", "node"),))] == 1
    assert got[("faultline_worker_batch_seconds_bucket", (("le", "0.005"), ("side", "node")))] == 1
    assert got[("faultline_worker_batch_seconds_bucket", (("le", "0.0025"), ("side", "node")))] == 0
    assert not [k for k in got if k[0] == "faultline_consumer_lag"]


def test_sink_source_reads_the_real_sink(offline):
    """A real SinkConsumer over a real chDB store: records decoded, flushed, counted."""
    from faultline.sinks import SinkWriter, open_store
    from faultline.streams.faust_sink import SinkConsumer

    store = open_store(offline)
    try:
        writer = SinkWriter(store)
        sink = SinkConsumer(offline, writer, group_id="g-sink")
        sink.add_records("input", [Msg(ev(id="a")), Msg(ev(id="b")), Msg(b'{"v":1')], now_ms())
        sink.counts.add_flush(writer.flush())
        sink.counts.add_flush(writer.flush())   # nothing buffered: not a flush
        m = Metrics(process=False)
        m.add(SinkSource(sink))
        got = samples(generate_latest(m.registry).decode())
        assert got[("faultline_sink_rows_total", (("table", "ingest_events"),))] == 2
        assert got[("faultline_sink_invalid_input_total", ())] == 1
        assert got[("faultline_sink_flush_seconds_count", (("stage", "store"),))] == 1
        assert got[("faultline_sink_flush_seconds_sum", (("stage", "store"),))] > 0
    finally:
        store.close()


def test_docs_list_every_series_and_the_rules_use_real_ones(offline, tmp_path):
    """docs/metrics.md names exactly the series the collectors yield (worker, sink, spool,
    lag); infra/prometheus/faultline.rules.yml uses only those; promtool accepts the
    shipped config and rules."""
    import re
    import shutil
    import subprocess
    from pathlib import Path

    from faultline.metrics import CollectorsSource, SpoolSource
    from faultline.producers.collectors.prometheus import PrometheusCollector
    from faultline.producers.spool import SpoolingPublisher
    from faultline.sinks import SinkWriter, open_store
    from faultline.streams.app import create_app
    from faultline.streams.faust_sink import SinkConsumer
    from faultline.streams.services import Services

    root = Path(__file__).resolve().parent.parent
    services = Services(offline)
    create_app(offline, app_id="mdocs", services=services)
    wsrc = services.metrics.sources[0]
    wsrc.lag.set({("m.fl.gpu", 0): 5}, {("m.fl.gpu", 0): 3})
    store = open_store(offline)
    try:
        m = Metrics(process=False)
        m.add(wsrc)
        m.add(SinkSource(SinkConsumer(offline, SinkWriter(store), group_id="g")))
        m.add(SpoolSource(SpoolingPublisher(offline)))
        m.add(CollectorsSource([PrometheusCollector(["http://127.0.0.1:1/metrics"], "n1")]))
        text = generate_latest(m.registry).decode()
    finally:
        store.close()
    exposed = set(re.findall(r"^# TYPE (faultline_\w+) ", text, re.M))
    documented = set(re.findall(r"^\| `(faultline_\w+)`", (root / "docs/metrics.md").read_text(), re.M))
    assert exposed == documented, (exposed - documented, documented - exposed)
    rules = (root / "infra/prometheus/faultline.rules.yml").read_text()
    used = set(re.findall(r"\b(faultline_\w+)", rules))
    assert used and used <= exposed, used - exposed
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian's prometheus package has it)")
    for what, path in (("config", "prometheus.yml"), ("rules", "faultline.rules.yml")):
        p = subprocess.run([promtool, "check", what, str(root / "infra/prometheus" / path)],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stdout + p.stderr


async def test_collectors_source_counts_a_real_collectors_errors():
    """The node agent's prometheus collector against an exporter that is not there: its
    scrape errors are what /metrics says."""
    from faultline.metrics import CollectorsSource
    from faultline.producers.collectors.prometheus import PrometheusCollector

    c = PrometheusCollector(["http://127.0.0.1:1/metrics", "http://127.0.0.1:1/other"], "n1", timeout_s=2)
    try:
        assert await c.collect() == []
    finally:
        await c.close()
    m = Metrics(process=False)
    m.add(CollectorsSource([c]))
    got = samples((await m.render()).decode())
    assert got[("faultline_collector_stats_total", (("collector", c.name), ("stat", "scrape_errors")))] == 2
    assert got[("faultline_collector_stats_total", (("collector", c.name), ("stat", "scrapes")))] == 0
