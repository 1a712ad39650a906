"""``streams.faust_compat``: every Faust / aiokafka internal the worker's fast path relies on,
driven directly against the installed faust-streaming / aiokafka, so an upgrade that changes
one of them fails here (not in a worker under load). No broker: the consumer, conductor and
topics are Faust's real objects, never started."""

from __future__ import annotations

import asyncio
import logging

import pytest
from aiokafka import TopicPartition
from faust.types import TP

from faultline.config import load
from faultline.streams import faust_compat as compat
from faultline.streams.app import create_app
from faultline.streams.faust_compat import BrokerAwayFilter, IncompatibleVersions, RawFeed, check_versions


@pytest.fixture
def app(tmp_path):
    return create_app(load(), install=False, datadir=tmp_path / "faust")


class Msg:
    """The fields of a Faust ``ConsumerMessage`` the feed and the pump read."""

    def __init__(self, topic: str, partition: int, offset: int, tp=None) -> None:
        self.topic, self.partition, self.offset = topic, partition, offset
        self.tp = tp if tp is not None else TopicPartition(topic, partition)
        self.generation_id = 0           # Faust's app.consumer_generation_id before a rebalance
        self.acked = []

    def ack(self, consumer) -> None:
        self.acked.append(consumer)


# ------------------------------------------------------------------ versions
def test_installed_versions_are_the_tested_ones():
    found = check_versions()
    assert set(found) == set(compat.TESTED)


def test_untested_version_is_refused_with_what_to_do():
    with pytest.raises(IncompatibleVersions) as e:
        check_versions({"faust-streaming": "0.16.0", "aiokafka": "0.14.0", "mode-streaming": "0.7.1"})
    msg = str(e.value)
    assert "faust-streaming 0.16.0" in msg and ">=0.15.3,<0.16" in msg
    with pytest.raises(IncompatibleVersions, match="aiokafka is not installed"):
        check_versions({"faust-streaming": "0.15.3", "mode-streaming": "0.7.1"})
    assert check_versions({"faust-streaming": "0.15.9", "aiokafka": "0.14.2rc1", "mode-streaming": "0.7.1"})


def test_pyproject_pins_the_tested_range():
    import tomllib
    from pathlib import Path

    deps = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]["dependencies"]
    for pkg, (lo, hi) in compat.TESTED.items():
        spec = next(d for d in deps if d.split(">")[0].split("<")[0].strip() == pkg)
        assert f">={'.'.join(map(str, lo))}" in spec and f"<{'.'.join(map(str, hi))}" in spec, spec


# ------------------------------------------------------------------ RawFeed on Faust's consumer
async def test_rawfeed_pause_resume_keeps_faust_active_set_valid(app):
    """Pause at half the feed, resume at a quarter, on Faust's real consumer, with messages
    carrying aiokafka ``TopicPartition``s as fetched records do. Faust's fetcher asserts its
    active set holds only Faust ``TP``s: the AssertionError of issue 14 items 3 and 6."""
    consumer = app.consumer
    tp = TP("t.gpu", 0)
    consumer._set_active_tps({tp, TP("t.gpu", 1)})
    feed = RawFeed(maxsize=8)
    feed.bind(consumer)
    for off in range(4):                       # pause_at = 4
        await feed.put(Msg("t.gpu", 0, off))
    assert tp not in consumer._get_active_partitions()     # no longer fetched
    assert tp in consumer._buffered_partitions
    got = await feed.take(3, within=0)         # 1 left <= resume_at = 2: fetched again
    assert [m.offset for m in got] == [0, 1, 2]
    active = consumer._get_active_partitions()  # raised AssertionError before the fix
    assert tp in active and all(type(x) is TP for x in active)
    assert tp not in consumer._buffered_partitions


async def test_rawfeed_does_not_resume_what_the_rebalance_paused(app):
    consumer = app.consumer
    tp = TP("t.gpu", 0)
    consumer._set_active_tps({tp})
    feed = RawFeed(maxsize=4)
    feed.bind(consumer)
    for off in range(2):
        await feed.put(Msg("t.gpu", 0, off))
    consumer.pause_partitions({tp})            # what a rebalance / recovery does
    await feed.take(2, within=0)
    assert tp not in consumer._get_active_partitions()


async def test_rawfeed_full_blocks_and_clear_unblocks():
    feed = RawFeed(maxsize=2)
    await feed.put(Msg("t", 0, 0))
    await feed.put(Msg("t", 0, 1))
    assert feed.full()
    blocked = asyncio.ensure_future(feed.put(Msg("t", 0, 2)))
    await asyncio.sleep(0.01)
    assert not blocked.done()
    feed.clear()                               # partitions revoked
    await asyncio.wait_for(blocked, 1)
    assert [m.offset for m in feed.items] == [2]


async def test_rawfeed_take_waits_within_for_a_full_batch():
    feed = RawFeed(maxsize=100)
    await feed.put(Msg("t", 0, 0))

    async def later():
        await asyncio.sleep(0.02)
        for off in (1, 2):
            await feed.put(Msg("t", 0, off))
    asyncio.ensure_future(later())
    got = await feed.take(3, within=1.0)
    assert [m.offset for m in got] == [0, 1, 2]
    msgs = [Msg("t", 0, 5)]
    RawFeed.ack("consumer", msgs)
    assert msgs[0].acked == ["consumer"]


# ------------------------------------------------------------------ the conductor
async def test_fast_conductor_hands_feed_topics_to_their_feed(app):
    topic = app.topic("t.gpu")
    feed = RawFeed(maxsize=100)
    topic.faultline_feed = feed
    conductor = app.topics
    assert getattr(type(conductor), "_faultline_fast", False), "FaultlineApp's conductor is the fast one"
    app.flow_control.resume()
    handler = conductor._build_handler(TP("t.gpu", 0), {topic})
    m = Msg("t.gpu", 0, 7, tp=TP("t.gpu", 0))
    await handler(m)
    assert feed.items == [m]
    on_message = conductor._compile_message_handler()
    conductor._tp_to_callback[TP("t.gpu", 0)] = handler
    m2 = Msg("t.gpu", 0, 8, tp=TP("t.gpu", 0))
    await on_message(m2)
    assert feed.items == [m, m2]


# ------------------------------------------------------------------ the consumer pump
async def test_fast_drain_delivers_records_in_order_and_tracks_offsets(app):
    """``fast_drain``'s ``_drain_messages`` on Faust's real consumer: records from
    ``getmany`` reach the callback with a plain await when nothing can block, the read
    offsets advance, and the pump stops with the fetcher."""
    consumer = app.consumer
    assert getattr(type(consumer), "_faultline_fast_drain", False)
    tp = TP("t.gpu", 0)
    delivered = []

    class Fetcher:
        _stopped = asyncio.Event()

    async def callback(message):
        delivered.append(message.offset)

    async def getmany(timeout):
        for off in range(5):
            yield tp, Msg("t.gpu", 0, off, tp=tp)
        Fetcher._stopped.set()

    consumer.callback = callback
    consumer.getmany = getmany
    app.flow_control.resume()
    consumer.suspend_flow.clear()
    await asyncio.wait_for(consumer._drain_messages(Fetcher()), 5)
    assert delivered == [0, 1, 2, 3, 4]
    assert consumer._read_offset[tp] == 4


async def test_fast_drain_takes_faust_path_when_flow_is_suspended(app):
    consumer = app.consumer
    tp = TP("t.gpu", 0)
    waited = []

    class Fetcher:
        _stopped = asyncio.Event()

    async def callback(message):
        pass

    async def wait_first(*coros):
        waited.append(len(coros))
        for c in coros[:1]:
            await c
        for c in coros[1:]:
            c.close() if hasattr(c, "close") else None

    async def getmany(timeout):
        yield tp, Msg("t.gpu", 0, 0, tp=tp)
        Fetcher._stopped.set()

    consumer.callback = callback
    consumer.getmany = getmany
    consumer.wait_first = wait_first
    app.flow_control.suspend()                 # a rebalance: the delivery may block
    await asyncio.wait_for(consumer._drain_messages(Fetcher()), 5)
    assert waited == [2]


# ------------------------------------------------------------------ consumer state
def test_consumer_state_accessors_before_start(app):
    assert compat.recovered(app) is False
    assert compat.assigned_actives(app) == set()
    assert compat.highwater(app, "t.gpu", 0) is None


# ------------------------------------------------------------------ broker away
@pytest.fixture
def broker_log(caplog):
    """``caplog`` that sees the filter's own logger whatever earlier tests in this process did
    to logging (an in-process Faust app's logging setup disables loggers that exist already;
    a worker run sets the ``faultline`` level): the handler sits on that logger itself."""
    blg = logging.getLogger("faultline.streams.broker")
    saved = (blg.disabled, blg.level, blg.propagate)
    blg.disabled, blg.propagate = False, False   # once, through the handler below
    blg.setLevel(logging.INFO)
    blg.addHandler(caplog.handler)
    try:
        yield caplog
    finally:
        blg.removeHandler(caplog.handler)
        blg.disabled, _, blg.propagate = saved
        blg.setLevel(saved[1])


def _aiokafka_child(name):
    """A child of ``aiokafka`` that emits ERRORs whatever its parent's level: a spooling
    publisher started earlier in this process sets ``aiokafka`` to CRITICAL (it says the
    broker is away once itself), and then no record would reach the filter at all."""
    lg = logging.getLogger(name)
    lg.setLevel(logging.INFO)
    lg.disabled = False
    return lg


def _ours(caplog):
    return [r for r in caplog.records if r.name == "faultline.streams.broker"]


def test_broker_away_one_warning_and_rate_limited_errors(broker_log):
    caplog = broker_log
    f = BrokerAwayFilter("127.0.0.1:1", period_s=60, confirm_s=0)
    lg = _aiokafka_child("aiokafka.test_conn")
    lg.addFilter(f)
    try:
        with caplog.at_level(logging.INFO):
            for _ in range(200):
                lg.error("Unable connect to node with id %s: %s", 1, "Connect call failed")
            lg.error("Unable to update metadata from [1]")
            lg.warning("Heartbeat failed: local member_id was not recognized")   # not a connection error
    finally:
        lg.removeFilter(f)
    ours = _ours(caplog)
    theirs = [r for r in caplog.records if r.name == "aiokafka.test_conn"]
    assert len(ours) == 1 and ours[0].levelno == logging.WARNING
    assert "127.0.0.1:1" in ours[0].getMessage() and "make kafka-up" in ours[0].getMessage()
    assert [r.getMessage()[:22] for r in theirs] == ["Unable connect to node", "Unable to update metad",
                                                      "Heartbeat failed: loca"]
    assert f.suppressed == 199


def test_broker_away_lone_error_at_start_is_no_outage(broker_log):
    caplog = broker_log
    f = BrokerAwayFilter("127.0.0.1:1", period_s=60, confirm_s=0.05)
    lg = _aiokafka_child("aiokafka.test_conn2")
    lg.addFilter(f)
    try:
        with caplog.at_level(logging.INFO):
            lg.error("Unable to update metadata from [1]")       # a group forming, once
            assert not [r for r in caplog.records if r.name == "faultline.streams.broker"]
            import time
            time.sleep(0.06)
            lg.error("Unable connect to node with id %s", 1)     # still failing: an outage
    finally:
        lg.removeFilter(f)
    assert len([r for r in caplog.records if r.name == "faultline.streams.broker"]) == 1


def test_broker_away_filter_is_on_aiokafka_loggers_after_create_app(app):
    for name in ("aiokafka.conn", "aiokafka.client", "aiokafka.consumer.group_coordinator"):
        assert any(isinstance(f, BrokerAwayFilter) for f in logging.getLogger(name).filters), name


async def test_rawfeed_drops_messages_of_an_earlier_generation(app):
    """Fetched before a rebalance, delivered after it: dropped (its partition may be another
    worker's now; Faust's streams drop theirs the same way)."""
    feed = RawFeed(maxsize=10)
    feed.bind(app.consumer)
    app.consumer_generation_id = 3
    old, new = Msg("t.gpu", 0, 1), Msg("t.gpu", 0, 2)
    old.generation_id, new.generation_id = 2, 3
    await feed.put(old)
    await feed.put(new)
    assert feed.items == [new] and feed.stale == 1
    app.consumer_generation_id = 4           # another rebalance while it waited in the feed
    assert await feed.take(10, within=0) == [] and feed.stale == 2


async def test_fast_drain_keeps_the_seeked_offset_after_a_delivery_across_a_rebalance(app):
    """A delivery that blocked across a rebalance must not set the old read offset over the
    one the seek set: every re-fetched record below it would be skipped, never acked, and
    the commit would stick there (the stuck commits of issue 14's rebalance trials)."""
    consumer = app.consumer
    tp = TP("t.gpu", 0)

    class Fetcher:
        _stopped = asyncio.Event()

    async def callback(message):
        app.consumer_generation_id = 8        # the rebalance happened during this delivery
        consumer._read_offset[tp] = 40        # recovery seeked back to the committed offset

    async def getmany(timeout):
        m = Msg("t.gpu", 0, 95, tp=tp)
        m.generation_id = 7
        yield tp, m
        Fetcher._stopped.set()

    consumer.callback = callback
    consumer.getmany = getmany
    app.consumer_generation_id = 7
    app.flow_control.resume()
    consumer.suspend_flow.clear()
    await asyncio.wait_for(consumer._drain_messages(Fetcher()), 5)
    assert consumer._read_offset[tp] == 40


class _Consumer:
    """The commit bookkeeping of a Faust consumer that CommitWatch reads, and its seek."""

    def __init__(self) -> None:
        self._acked, self._committed_offset, self._unacked_messages = {}, {}, set()
        self.seeks = []

    async def faultline_refetch(self, tp, offset):
        self.seeks.append((tp, offset))


class _App:
    def __init__(self) -> None:
        self.consumer = _Consumer()
        self.rebalancing, self.in_recovery = False, False

        class _Rec:
            completed = asyncio.Event()
        _Rec.completed.set()

        class _Tables:
            recovery = _Rec
        self.tables = _Tables


async def test_commit_watch_refetches_a_partition_whose_commit_a_gap_holds():
    from faultline.streams.agents import CommitWatch, RateLimitedLog, Stats

    app, feed, stats = _App(), RawFeed(maxsize=10), Stats()
    stuck, slow, fine = TP("t.gpu", 0), TP("t.net", 1), TP("t.hw", 2)
    c = app.consumer
    c._committed_offset.update({stuck: 100, slow: 50, fine: 10})
    c._acked.update({stuck: [195, 196], slow: [60], fine: [10, 11]})
    feed.items.append(Msg("t.net", 1, 55, tp=slow))       # still queued below the gap: not stuck
    w = CommitWatch(app, feed, RateLimitedLog(logging.getLogger("t.commitwatch")), stats, after_s=20)
    assert await w.check(now=1000.0) == [] and c.seeks == []
    assert await w.check(now=1019.0) == []                 # not long enough yet
    assert await w.check(now=1021.0) == [stuck] and c.seeks == [(stuck, 100)] and stats.reseeks == 1
    c._committed_offset[stuck] = 197                       # healed: the commit moved on
    c._acked[stuck] = [197]
    feed.items.clear()
    # nothing below the slow one's gap in flight any more, and it has been held since 1000
    assert await w.check(now=1050.0) == [slow] and c.seeks[-1] == (slow, 50) and stats.reseeks == 2
    app.rebalancing = True                                 # no verdict while a rebalance runs
    c._committed_offset[fine], c._acked[fine] = 10, [30]
    assert await w.check(now=1200.0) == [] and await w.check(now=1300.0) == []


async def test_refetch_goes_through_the_consumer_thread(app):
    """CommitWatch's re-fetch seeks with ``seek_wait`` (run on aiokafka's own thread and
    loop; Faust's ``seek`` calls aiokafka from the caller's thread, racing a fetch in flight
    there)."""
    consumer = app.consumer
    a = TP("t.gpu", 0)
    calls = []

    async def seek_wait(partitions):
        calls.append(dict(partitions))

    consumer.seek_wait = seek_wait
    consumer._seek = None                     # the thread-unsafe path must not be taken
    await consumer.faultline_refetch(a, 17)
    assert calls == [{a: 17}]


async def test_a_refused_commit_is_not_recorded_as_done(app, monkeypatch):
    """Faust records a commit as done even when the broker refused it (the group "already
    rebalanced"), with its acks popped: that partition never committed those offsets
    again. The wrapper puts the committed offset and the acks back, so the next commit
    retries them; a commit that went through is recorded as before."""
    consumer = app.consumer
    tp = TP("t.gpu", 0)
    monkeypatch.setattr(consumer, "assignment", lambda: {tp})
    consumer._committed_offset[tp] = 100
    consumer._acked[tp] = list(range(100, 110))
    consumer._acked_index[tp] = set(range(100, 110))
    answers = []

    async def _commit(offsets):
        answers.append(dict(offsets))
        return len(answers) > 1          # refused the first time, accepted the second

    monkeypatch.setattr(consumer, "_commit", _commit)

    async def flush():
        return None
    monkeypatch.setattr(app.producer, "flush", flush)
    assert await consumer.force_commit() is False
    assert consumer._committed_offset[tp] == 100 and sorted(consumer._acked[tp]) == list(range(100, 110))
    assert await consumer.force_commit() is True
    assert answers == [{tp: 110}, {tp: 110}] and consumer._committed_offset[tp] == 110
