"""One store owner (issue 14, build 1): every chDB call runs on the store's owner thread, so
page readers during sink flushes cannot deadlock the worker; reads time out with a clear
error, a full read queue says busy, writes go before queued reads, and a failed or
abandoned query's answer never reaches another caller. Real chDB store, no mocks (the
session's ``query`` is wrapped only to record which thread called it)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from faultline.sinks import SinkWriter, dataset, open_store
from faultline.sinks.store import StoreBusy, StoreError, StoreOwner, StoreTimeout
from faultline.streams.web import aload_incidents, load_incidents


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    store = open_store(path=str(tmp_path_factory.mktemp("owner") / "store"))
    ds = dataset.build(seed=5, n_jobs=40, withdrawn=2)
    dataset.write(store, ds)
    calls: list[int] = []
    sess = store._s   # record the calling thread of every real chDB call
    real = sess.query

    def recording(*a, **kw):
        calls.append(threading.get_ident())
        return real(*a, **kw)

    sess.query = recording
    yield store, ds, calls
    sess.query = real
    store.close()


def live_ids(ds) -> set[str]:
    """Ids of the incidents whose latest revision is not withdrawn."""
    withdrawn = {i.id for i in ds.withdrawn}
    return {i.id for i in ds.incidents} - withdrawn


def test_the_page_lists_no_withdrawn_incident(loaded):
    store, ds, _ = loaded
    withdrawn = {i.id for i in ds.withdrawn}
    assert len(withdrawn) == 2
    listed = {i["id"] for i in load_incidents(store)}
    assert listed == live_ids(ds) and not listed & withdrawn
    one = load_incidents(store, next(iter(withdrawn)))   # still shown when asked for by id
    assert one and one[0]["state"] == dataset.WITHDRAWN_STATE


def test_page_readers_during_flushes_do_not_deadlock(loaded):
    """The pattern that froze the worker 3 of 3 times: a busy main thread, a SinkWriter.flush
    thread and page threads (six blocking readers, one asyncio reader) all at once."""
    store, ds, calls = loaded
    calls.clear()
    run_s, done = 6.0, threading.Event()
    counts = {"flushes": 0, "pages": 0, "apages": 0}
    errors: list[BaseException] = []
    lock = threading.Lock()

    def bump(k: str) -> None:
        with lock:
            counts[k] += 1

    def flusher() -> None:
        w = SinkWriter(store, max_rows=1_000_000)
        k = 0
        try:
            while not done.is_set():
                w.add_raws(ds.events[k % 4 * 500:(k % 4 + 1) * 500])   # re-delivered rows collapse
                for i in ds.incidents[:5]:
                    w.add_incident(i)
                w.flush()
                bump("flushes")
                k += 1
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    def reader(n: int) -> None:
        try:
            while not done.is_set():
                got = load_incidents(store) if n % 2 else load_incidents(store, ds.incidents[n].job)
                assert got and "id" in got[0]
                bump("pages")
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    def async_reader() -> None:
        async def main() -> None:
            while not done.is_set():
                got = await aload_incidents(store)
                assert len(got) == len(live_ids(ds))
                bump("apages")

        try:
            asyncio.run(main())
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=flusher, daemon=True)]
    threads += [threading.Thread(target=reader, args=(n,), daemon=True) for n in range(6)]
    threads.append(threading.Thread(target=async_reader, daemon=True))
    for t in threads:
        t.start()
    t_end, x = time.monotonic() + run_s, 0
    while time.monotonic() < t_end:   # the busy main thread (holds the GIL most of the time)
        x = (x * 31 + 7) % 1_000_003
    done.set()
    for t in threads:
        t.join(30)
    assert not [t for t in threads if t.is_alive()], f"threads still blocked after {run_s + 30} s: {counts}"
    assert not errors, errors[:3]
    assert counts["flushes"] >= 2 and counts["pages"] >= 6 and counts["apages"] >= 1, counts
    owners = store._owner.owner_idents
    assert calls and set(calls) <= owners, f"{len(set(calls) - owners)} other threads called chDB"


def test_read_timeout_names_the_query_and_the_next_answer_is_its_own(loaded):
    store, _, calls = loaded
    t0 = time.monotonic()
    with pytest.raises(StoreTimeout) as e:
        store.query("SELECT sleepEachRow(0.5) AS slow_one FROM incidents LIMIT 4", timeout_s=0.3)
    assert time.monotonic() - t0 < 1.5
    assert "0.3 s" in str(e.value) and "slow_one" in str(e.value)
    # the abandoned answer is dropped: the next caller gets its own columns
    assert store.query_table("SELECT 1 AS mine") == (["mine"], [[1]])
    # a query that fails mid-way (server-side time limit) leaves chDB's stale column names
    # behind; they must not reach the next query (they did: "SELECT 1 AS a" came back as "s")
    with pytest.raises(StoreError, match="TIMEOUT_EXCEEDED"):
        store.query("SELECT sum(number) AS s FROM numbers(1e12) SETTINGS max_execution_time = 1")
    assert store.query_table("SELECT 2 AS a") == (["a"], [[2]])
    assert set(calls) <= store._owner.owner_idents


def test_aquery_does_not_block_the_event_loop(loaded):
    store, _, _ = loaded

    async def main() -> tuple[int, list]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        t = asyncio.ensure_future(ticker())
        rows = await store.aquery("SELECT sleepEachRow(0.25) AS z FROM incidents LIMIT 4")
        t.cancel()
        return ticks, rows

    ticks, rows = asyncio.run(main())
    assert len(rows) == 4 and ticks >= 40   # ~1 s of sleeping in chDB, the loop ticked on


def test_writes_first_reads_never_starved_and_a_full_queue_is_busy():
    owner = StoreOwner("t", max_queued_reads=2)
    gate, order = threading.Event(), []
    try:
        started = threading.Event()
        blocker = owner.submit(lambda: (started.set(), gate.wait()), write=True)
        assert started.wait(5)
        r1 = owner.submit(lambda: order.append("read1"), write=False)
        r2 = owner.submit(lambda: order.append("read2"), write=False)
        with pytest.raises(StoreBusy) as e:
            owner.submit(lambda: order.append("read3"), write=False)
        assert e.value.retry_after_s >= 1 and "2 reads" in str(e.value)
        w1 = owner.submit(lambda: order.append("write1"), write=True)
        w2 = owner.submit(lambda: order.append("write2"), write=True)
        w3 = owner.submit(lambda: order.append("write3"), write=True)
        gate.set()
        for f in (blocker, r1, r2, w1, w2, w3):
            f.result(5)
        # writes go first, but after each write one waiting read: a backlog of writes
        # delays a read by about one write, never by the whole backlog
        assert order == ["read1", "write1", "read2", "write2", "write3"]
        # a read given up while queued never runs
        gate.clear()
        running = threading.Event()
        owner.submit(lambda: (running.set(), gate.wait()), write=True)
        assert running.wait(5)
        with pytest.raises(StoreTimeout):
            owner.call(lambda: order.append("abandoned"), write=False, what="SELECT x", timeout_s=0.1)
        gate.set()
        owner.call(lambda: None, write=True, what="sync")
        assert "abandoned" not in order
    finally:
        gate.set()
        owner.close()


def test_migrate_runs_on_the_owner_and_a_second_handle_shares_it(loaded):
    store, _, calls = loaded
    calls.clear()
    assert store.migrate() == []   # one write on the owner; nothing left to apply
    other = open_store(path=store.location)   # same directory: same session, same owner
    try:
        assert other._owner is store._owner
        assert other.query("SELECT count() AS n FROM schema_migrations")[0]["n"] >= 5
    finally:
        other.close()
    assert store.query("SELECT 1 AS still_open") == [{"still_open": 1}]
    assert calls and set(calls) <= store._owner.owner_idents
    closed = StoreOwner("closed")
    closed.close()
    with pytest.raises(StoreError, match="closed"):
        closed.submit(lambda: None, write=False)
