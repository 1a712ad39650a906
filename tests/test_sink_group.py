"""The sink is its own consumer group (issue 14, build 2): real broker, real chDB store.

- two analysis workers + one `faultline sink`: every produced event is in the store exactly
  once under FINAL, and every incident on fl.incidents is stored (its latest revision);
- a second sink on the same embedded store refuses, naming the owner's pid and what to do;
- a sink killed with SIGKILL mid-batch and restarted loses nothing and duplicates nothing;
- the store briefly unavailable: the sink retries the same batch, commits nothing meanwhile,
  and stores everything once the store is back.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time
from dataclasses import replace

import orjson
import pytest

from faultline.producers.simulate import simulate
from faultline.schemas.codec import ContractError, decode, now_ms
from faultline.sinks.store import open_store
from faultline.sinks.writer import SinkWriter
from faultline.streams.faust_harness import (produce, SinkProcess, WorkerProcess, group_lag, latest_incidents,
                                             read_topic, sink_group_id, wait_caught_up, worker_env)
from faultline.streams.faust_sink import SinkConsumer
from faultline.streams.faust_topics import ensure_topics

pytestmark = pytest.mark.kafka

APP = "sinktest"
LAYERS = ("gpu", "hw", "net", "storage", "sched", "runtime", "inventory")
#: a record the contract rejects (integer outside 64 bits), among valid traffic
POISON = (b'{"v":1,"id":"poison-1","ts":1,"kind":"gpu.sample","source":"t","node":"n1",'
          b'"data":{"gpu":0,"uuid":"u","ecc_sbe":1180591620717411303424}}')
TRUNCATED = b'{"v":1,"id":"x1","ts":1,'


@pytest.fixture
def fsettings(settings):
    return replace(settings, topic_partitions=3)


@pytest.fixture(scope="module")
def sim_lines() -> list[bytes]:
    start = (now_ms() - 90 * 60_000) // 60_000 * 60_000
    lines, _ = simulate("gpu-xid79", seed=1, nodes=4, hours=1.0, start_ms=start)
    return lines




class _Rec:
    """The fields of an aiokafka ConsumerRecord the sink reads."""

    def __init__(self, value: bytes, topic: str = "fl.gpu", offset: int = 0) -> None:
        self.value, self.topic, self.partition, self.offset = value, topic, 0, offset


def layer_counts(store) -> tuple[int, int]:
    """(rows under FINAL, distinct ids) summed over the event tables."""
    rows = ids = 0
    for layer in LAYERS:
        r = store.query(f"SELECT count() AS n, uniqExact(id) AS u FROM events_{layer} FINAL")[0]
        rows += int(r["n"])
        ids += int(r["u"])
    return rows, ids


def all_incidents(settings) -> list:
    """Every record on fl.incidents now, read once nothing produces them any more (the
    comparison with the store must not race a late revision: a re-check may revise an
    incident well after the input ended, more so on a slow machine)."""
    return asyncio.run(read_topic(settings, "fl.incidents", until=lambda r: True,
                                  timeout_s=60, idle_s=2))


@pytest.mark.slow
def test_two_workers_one_sink_store_everything_once(fsettings, sim_lines, tmp_path):
    asyncio.run(ensure_topics(fsettings))
    group = sink_group_id(fsettings, APP)
    with SinkProcess(fsettings, tmp_path / "sink", app_id=APP) as sink:
        with WorkerProcess(fsettings, tmp_path / "a", app_id=APP, loglevel="info") as a, \
                WorkerProcess(fsettings, tmp_path / "b", app_id=APP, loglevel="info") as b:
            asyncio.run(produce(fsettings, sim_lines, raw=[("fl.gpu", b"n1", TRUNCATED)]))
            # the workers' incidents: wait until they stop changing
            recs = asyncio.run(read_topic(fsettings, "fl.incidents", until=lambda r: len(r) >= 1,
                                          timeout_s=180, idle_s=8))
            assert recs, a.log() + b.log()
            assert a.alive() and b.alive(), a.log() + b.log()
        # the workers are gone: what the sink must store is final now
        asyncio.run(wait_caught_up(fsettings, group, timeout_s=120))
        assert sink.alive(), sink.log()
        topic_incidents = latest_incidents(all_incidents(fsettings))
    st = open_store(fsettings)
    try:
        rows, ids = layer_counts(st)
        got = {r["id"]: orjson.loads(r["record"]) for r in st.query("SELECT id, record FROM incidents FINAL")}
        dead = st.query("SELECT count() AS n FROM deadletters FINAL WHERE reason LIKE '%JSON%'")[0]["n"]
    finally:
        st.close()
    assert (rows, ids) == (len(sim_lines), len(sim_lines)), sink.log()
    assert {k: {x: y for x, y in v.items() if x != "revision"} for k, v in got.items()} == topic_incidents
    assert int(dead) == 1, sink.log()   # the worker dead-lettered it; the sink stored the dead letter


@pytest.mark.slow
def test_worker_with_sink_and_a_joining_worker_store_everything(fsettings, sim_lines, tmp_path):
    """`worker --sink` keeps the sink in the sink's own group: a second analysis worker that
    joins takes analysis partitions only, never the sink's, so nothing goes unstored (what
    `--no-sink` on the second worker lost before: issue 14 item 5)."""
    asyncio.run(ensure_topics(fsettings))
    group = sink_group_id(fsettings, APP)
    with WorkerProcess(fsettings, tmp_path / "a", app_id=APP, sink=True, loglevel="info") as a:
        deadline = time.monotonic() + 90
        while "sink consuming" not in a.log(10_000_000):
            assert a.alive() and time.monotonic() < deadline, a.log()
            time.sleep(0.3)
        with WorkerProcess(fsettings, tmp_path / "b", app_id=APP, loglevel="info") as b:
            asyncio.run(produce(fsettings, sim_lines))
            recs = asyncio.run(read_topic(fsettings, "fl.incidents", until=lambda r: len(r) >= 1,
                                          timeout_s=180, idle_s=8))
            assert recs and a.alive() and b.alive(), a.log() + b.log()
        # b is gone; a (analysis + sink) alone: its sink catches up with what both wrote
        asyncio.run(wait_caught_up(fsettings, group, timeout_s=120))
        assert a.alive(), a.log()
    final = set(latest_incidents(all_incidents(fsettings)))
    st = open_store(fsettings)
    try:
        assert layer_counts(st) == (len(sim_lines), len(sim_lines)), a.log()
        stored = {r["id"] for r in st.query("SELECT id FROM incidents FINAL")}
    finally:
        st.close()
    assert set(latest_incidents(recs)) <= final and stored == final, a.log()


@pytest.mark.slow
def test_second_sink_on_embedded_store_refuses(fsettings, tmp_path):
    asyncio.run(ensure_topics(fsettings))
    with SinkProcess(fsettings, tmp_path / "s1", app_id=APP, loglevel="info") as first:
        deadline = time.monotonic() + 60
        while "sink consuming" not in first.log() and time.monotonic() < deadline:
            assert first.alive(), first.log()
            time.sleep(0.3)
        second = subprocess.run([sys.executable, "-m", "faultline.cli", "sink", "--no-web", "--app-id", APP,
                                 "--workdir", str(tmp_path / "s2")],
                                env=worker_env(fsettings), capture_output=True, timeout=120)
        assert first.alive(), first.log()
    err = second.stderr.decode()
    assert second.returncode == 2, err
    assert f"process {first.pid}" in err and "FAULTLINE_CLICKHOUSE_URL" in err, err
    assert "exactly one sink" in err, err


@pytest.mark.slow
def test_sink_killed_mid_batch_loses_and_duplicates_nothing(fsettings, sim_lines, tmp_path):
    asyncio.run(ensure_topics(fsettings))
    group = sink_group_id(fsettings, APP)
    lines = sim_lines
    asyncio.run(produce(fsettings, lines))
    total = asyncio.run(group_lag(fsettings, group))
    assert total == len(lines)
    # small batches: many commits while it works, so a kill lands between two of them
    s1 = SinkProcess(fsettings, tmp_path / "s1", app_id=APP, batch_rows=500).start()
    try:
        # kill it once part of the input is committed and part is not (a batch in flight)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            lag = asyncio.run(group_lag(fsettings, group))
            if 0 < lag < total:
                break
            assert s1.alive(), s1.log()
            time.sleep(0.05)
        else:
            pytest.fail(f"the sink never got part-way (lag {lag} of {total})\n{s1.log()}")
    finally:
        s1.kill()
    left = asyncio.run(group_lag(fsettings, group))
    assert 0 < left < total   # killed mid-way: a restart must pick up the rest
    with SinkProcess(fsettings, tmp_path / "s2", app_id=APP) as s2:
        asyncio.run(wait_caught_up(fsettings, group, timeout_s=120))
        assert s2.alive(), s2.log()
    st = open_store(fsettings)
    try:
        assert layer_counts(st) == (len(lines), len(lines))
    finally:
        st.close()


@pytest.mark.slow
def test_store_unavailable_retries_and_drops_nothing(fsettings, sim_lines, tmp_path, caplog):
    """A real store failure (a layer table detached: every insert into ingest_events fails)
    while the sink runs in this process: it retries the batch with backoff and one line per
    attempt, commits nothing meanwhile, and stores everything once the table is back."""
    asyncio.run(ensure_topics(fsettings))
    group = sink_group_id(fsettings, APP)
    asyncio.run(produce(fsettings, sim_lines, raw=[("fl.gpu", b"n1", POISON)]))
    n_valid = len(sim_lines)
    store = open_store(fsettings)
    caplog.set_level(logging.WARNING, logger="faultline.streams.sink")

    async def scenario() -> None:
        writer = SinkWriter(store)
        sink = SinkConsumer(fsettings, writer, group_id=group, max_rows=5_000, within_s=0.3, retry_cap_s=1.0)
        store.execute("DETACH TABLE events_gpu")
        task = asyncio.create_task(sink.run())
        try:
            deadline = time.monotonic() + 60
            while sink.failed_attempts < 4:
                assert time.monotonic() < deadline, caplog.text
                assert not task.done(), task
                await asyncio.sleep(0.2)
            # nothing acked while the batch is unstored
            assert await group_lag(fsettings, group) == n_valid + 1
            store.execute("ATTACH TABLE events_gpu")
            await wait_caught_up(fsettings, group, timeout_s=60)
        finally:
            await sink.close(15)
            await asyncio.wait_for(task, 15)
        assert sink.skipped == 1   # the poison record: invalid for the worker, skipped here

    try:
        asyncio.run(scenario())
        assert layer_counts(store) == (n_valid, n_valid)
    finally:
        store.close()
    fails = [r for r in caplog.records if "storing a batch failed" in r.getMessage()]
    assert fails and "events_gpu" in fails[0].getMessage(), caplog.text   # what failed, named
    assert any("store back after" in r.getMessage() for r in caplog.records), caplog.text


def test_sink_skips_exactly_what_the_worker_rejects(tmp_path):
    """The sink's one decode is ``schemas.decode`` (the worker's): a record it stores is one
    the worker accepts, a record the worker dead-letters is skipped."""
    from faultline.config import Settings

    good = simulate("gpu-xid79", seed=1, nodes=2, hours=0.1, start_ms=now_ms() - 3_600_000)[0][:50]
    bad = [POISON, TRUNCATED, b"\xff\xfe", b'{"v":1,"id":"a","ts":1,"kind":"gpu.sample","source":"s","data":{}}']
    for b in bad:
        with pytest.raises(ContractError):
            decode(b)
    store = open_store(path=str(tmp_path / "store"))
    try:
        writer = SinkWriter(store)
        sink = SinkConsumer(Settings(), writer, group_id="unused")
        sink.add_records("input", [_Rec(v) for v in [*good, *bad]], now_ms())
        assert sink.skipped == len(bad)
        writer.flush()
        assert layer_counts(store) == (len(good), len(good))
    finally:
        store.close()



def test_output_records_the_store_cannot_hold_become_dead_letters(tmp_path):
    """An alert stamped beyond what DateTime64 holds, an incident revision beyond UInt32, a
    non-JSON incident and a dead letter without a reason (a foreign producer, a bug) would
    fail their whole insert, or be stored wrapped: each becomes a ``deadletters`` row with
    its reason, the valid records beside them are stored, and the flush succeeds."""
    import msgspec

    from faultline.config import Settings
    from faultline.schemas.codec import dead_letter, encode
    from faultline.sinks import dataset

    ds = dataset.build(seed=3, n_jobs=12)
    inc, alert = ds.incidents[0], ds.alerts[0]
    bad = [("fl.alerts", encode(msgspec.structs.replace(alert, id="a-bad", ts=1 << 53)), "ts"),
           ("fl.incidents", encode(msgspec.structs.replace(inc, id="i-bad", revision=1 << 40)), "revision"),
           ("fl.incidents", b'{"id": "i-trunc", "rev', "not a fl.incidents record"),
           ("fl.deadletter", b'{"ts": 1, "topic": "fl.gpu"}', "not a dead-letter record")]
    good = [("fl.alerts", encode(a)) for a in ds.alerts] + [("fl.incidents", encode(i)) for i in ds.incidents] \
        + [("fl.deadletter", dead_letter(b"{", "not valid JSON", "fl.gpu", 0, 7))]
    store = open_store(path=str(tmp_path / "store"))
    try:
        writer = SinkWriter(store)
        sink = SinkConsumer(Settings(), writer, group_id="unused")
        for off, (topic, value, *_) in enumerate([*good, *bad]):
            sink.add_records(topic, [_Rec(value, topic, off)], now_ms())
        writer.flush()
        assert sink.dead_lettered == len(bad)
        assert store.query("SELECT count() AS n FROM alerts FINAL")[0]["n"] == len(ds.alerts)
        assert store.query("SELECT count() AS n FROM incidents FINAL")[0]["n"] == len(ds.incidents)
        rows = store.query("SELECT topic, offset, reason FROM deadletters FINAL WHERE topic != 'fl.gpu' ORDER BY offset")
        assert [(r["topic"], r["offset"]) for r in rows] == [(t, len(good) + k) for k, (t, *_) in enumerate(bad)]
        for r, (_, _, why) in zip(rows, bad):
            assert "refused by the sink" in r["reason"] and why in r["reason"], r
    finally:
        store.close()
