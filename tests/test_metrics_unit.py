"""faultline.metrics without a broker: dead-letter reason classes of the real codec's and
agents' dead letters, the histogram against client_python's own, bounded tallies, the
exposition (standalone server: loopback default, token, content type) with the real spool's
depth, and the worker's and the sink's collectors on their real objects."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import aiohttp
import orjson
import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from faultline.config import ConfigError, Settings
from faultline.metrics import (REASON_CLASSES, Metrics, SpoolSource, Tally, Timing, WorkerCounts,
                               start_metrics_server)
from faultline.metrics.counters import LATENCY_BUCKETS, OTHER
from faultline.metrics.sources import histogram
from faultline.schemas.codec import MAX_EVENT_BYTES, now_ms
from faultline.schemas.registry import LAYER_TOPICS

GOOD = {"v": 1, "id": "e1", "ts": 1_700_000_000_000, "kind": "gpu.sample", "source": "t", "node": "n1",
        "data": {"gpu": 0, "uuid": "GPU-1", "util": 50}}


class Msg:
    """The fields of a Kafka message the agents read."""

    def __init__(self, value: bytes | None, topic: str = "fl.gpu", offset: int = 0) -> None:
        self.value, self.topic, self.partition, self.offset, self.key = value, topic, 0, offset, b"n1"


def ev(**over) -> bytes:
    return orjson.dumps({**GOOD, **over})


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


# ------------------------------------------------------------------ reason classes
def test_dead_letters_of_the_agents_decode_are_counted_by_reason_class():
    """Every way ``agents.decode_events`` rejects a record, through the real dead-letter
    records it writes, lands in its own class; nothing falls into ``other``."""
    from faultline.streams.agents import decode_events, failed_letter

    cases = {
        "empty": Msg(None),
        "invalid_json": Msg(b'{"v":1,"id":"x1","ts":1,'),
        "oversized": Msg(b"{" + b" " * MAX_EVENT_BYTES + b"}"),
        "unknown_kind": Msg(ev(kind="gpu.nonsense")),
        "future_ts": Msg(ev(ts=now_ms() + 48 * 3600_000)),
        "schema": Msg(ev(ts="yesterday")),
        "wrong_topic": Msg(ev(), topic="fl.net"),
    }
    topic_layer = {t: layer for layer, t in LAYER_TOPICS.items()}
    c = WorkerCounts()
    for want, m in cases.items():
        ok, dead = decode_events([m], topic_layer)
        assert not ok and len(dead) == 1, want
        before = dict(c.dead.items())
        c.add_dead_letters(dead)
        got = [k for k, n in c.dead.items() if n != before.get(k, 0)]
        assert got == [(want,)], (want, orjson.loads(dead[0])["reason"])
    c.add_dead_letters([failed_letter(Msg(ev()), ZeroDivisionError("x"), "the node detectors")])
    assert dict(c.dead.items())[("processing_failed",)] == 1
    assert set(k[0] for k, _ in c.dead.items()) <= set(REASON_CLASSES) - {OTHER}
    ok, dead = decode_events([Msg(ev())], topic_layer)     # and a valid one is an event, not a letter
    c.add_events(ok)
    assert c.events.items() == [(("fl.gpu", "gpu.sample"), 1)]


# ------------------------------------------------------------------ counters
def test_timing_buckets_equal_client_python_histogram():
    values = [0.0005, 0.001, 0.0011, 0.02, 0.02, 0.7, 3.0, 29.0, 31.0, 120.0]
    t = Timing()
    reg = CollectorRegistry()
    h = Histogram("faultline_x_seconds", "x", ["side"], buckets=LATENCY_BUCKETS, registry=reg)
    for v in values:
        t.observe(v)
        h.labels("node").observe(v)

    class One:
        def collect(self):
            yield histogram("faultline_x_seconds", "x", {"node": t}, "side")

    mine = CollectorRegistry(auto_describe=False)
    mine.register(One())
    want = {k: v for k, v in samples(generate_latest(reg).decode()).items() if not k[0].endswith("_created")}
    assert samples(generate_latest(mine).decode()) == want
    assert want[("faultline_x_seconds_count", (("side", "node"),))] == len(values)


def test_tally_is_bounded():
    t = Tally(("topic", "kind"), limit=3)
    for i in range(10):
        t.add((f"t{i}", "k"))
    d = dict(t.items())
    assert len(d) == 4 and d[(OTHER, OTHER)] == 7 and t.total() == 10


# ------------------------------------------------------------------ exposition
@pytest.fixture
def offline(tmp_path) -> Settings:
    """Settings with a broker that never answers (port 1) and private dirs."""
    return replace(Settings(), kafka_bootstrap="127.0.0.1:1", topic_prefix="m.",
                   store_path=str(tmp_path / "store"), spool_dir=str(tmp_path / "spool"))


async def _get(url: str, **headers: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as s, s.get(url, headers=headers) as r:
        return r.status, r.headers.get("Content-Type", ""), await r.text()


async def test_standalone_server_serves_the_spool_depth(offline):
    """A spool whose broker is away: records spooled, none sent, the backlog in bytes, not
    connected - on a loopback server of its own, in Prometheus' text format."""
    from faultline.producers.spool import SpoolingPublisher

    pub = await SpoolingPublisher(offline, request_timeout_ms=500).start()
    metrics = Metrics()
    metrics.add(SpoolSource(pub))
    server = await start_metrics_server(port=0, metrics=metrics)
    try:
        for i in range(5):
            await pub.send_raw("m.fl.gpu", b"n1", ev(id=f"e{i}"))
        pub._write_out()
        status, ctype, text = await _get(server.url)
        assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
        got = samples(text)
        sp = (("spool", "node"),)
        assert got[("faultline_spool_spooled_total", sp)] == 5
        assert got[("faultline_spool_sent_total", sp)] == 0
        assert got[("faultline_spool_connected", sp)] == 0
        assert got[("faultline_spool_backlog_bytes", sp)] == pub.backlog_bytes() > 5 * len(ev())
        assert ("process_resident_memory_bytes", ()) in got
        assert server.bind == "127.0.0.1"
    finally:
        await server.close()
        await pub.stop(flush_timeout_s=0.1)


async def test_standalone_server_token_and_bind():
    metrics = Metrics(process=False)
    with pytest.raises(ConfigError, match="not a loopback address"):
        await start_metrics_server("0.0.0.0", 0, metrics=metrics)
    server = await start_metrics_server(port=0, metrics=metrics, token="s3cret")
    try:
        assert (await _get(server.url))[0] == 401
        assert (await _get(server.url, Authorization="Bearer wrong"))[0] == 401
        status, _, text = await _get(server.url, Authorization="Bearer s3cret")
        assert status == 200 and "faultline_metrics_refresh_errors_total" in text
    finally:
        await server.close()


async def test_a_source_that_cannot_refresh_is_served_with_its_last_values():
    class Stuck:
        def __init__(self):
            self.n = 0

        async def refresh(self):
            self.n += 1
            if self.n > 1:
                await asyncio.sleep(60)

        async def close(self):
            self.closed = True

        def collect(self):
            from prometheus_client.core import GaugeMetricFamily

            yield GaugeMetricFamily("faultline_t", "t", value=self.n)

    m = Metrics(process=False)
    m.add(Stuck())
    first = samples((await m.render()).decode())
    assert first[("faultline_t", ())] == 1
    await m.refresh(timeout_s=0.2)
    assert m.sources[0].n == 2
    got = samples(generate_latest(m.registry).decode())
    assert got[("faultline_t", ())] == 2   # collected all the same
    assert got[("faultline_metrics_refresh_errors_total", (("source", "Stuck"),))] == 1
    running = list(m._running.values())
    await m.close()                                # the app's shutdown: the slow refresh goes
    await asyncio.sleep(0)
    assert m.sources[0].closed and all(t.cancelled() for t in running)
