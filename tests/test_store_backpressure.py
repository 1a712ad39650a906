"""Backpressure from the store (issue 18): the store unavailable, the sink keeps going.

- the chDB directory locked by another process (not a sink) when `faultline sink` starts:
  the sink starts anyway, retries opening the store with backoff, commits nothing (the
  group's lag is everything produced), its ``/metrics`` show the failures and the lag;
  once the other process lets go it stores every record exactly once and the lag drains;
- a ClickHouse URL that refuses connections: the sink starts, retries with backoff, commits
  nothing and reports it on its metrics; stopped, it has dropped nothing (the records stay
  unread for its group). Where ``FAULTLINE_CLICKHOUSE_URL`` is set the same run then gets a
  proxy to that server on the refusing port and must store everything (``_server_rows``).

``FAULTLINE_STORE_OUTAGE_S`` (default 5) is how long at least the store stays unavailable (and
until the sink was seen failing): `make test` keeps it short; docs/sinks.md gives the figures of a 60 s run.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from dataclasses import replace

import orjson
import pytest

from faultline.metrics.sources import SinkSource
from faultline.producers.simulate import simulate
from faultline.schemas.codec import now_ms
from faultline.sinks.store import DeferredStore, open_store
from faultline.streams.faust_harness import SinkProcess, group_lag, produce, sink_group_id, wait_caught_up
from faultline.streams.faust_sink import RETRY_CAP_S, RETRY_FIRST_S, SinkConsumer, open_sink
from faultline.streams.faust_topics import ensure_topics
from tests.conftest import free_port
from tests.test_sink_group import layer_counts

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

APP = "backpressure"
#: the store is unavailable at least this long, and until the sink was seen failing
OUTAGE_S = float(os.environ.get("FAULTLINE_STORE_OUTAGE_S", "5"))
#: a process that owns the chDB directory (a CLI query, a notebook...) until told to let go
HOLDER = """
import sys
from faultline.sinks.store import open_store
st = open_store(path=sys.argv[1])
print("held", flush=True)
sys.stdin.readline()
st.close()
"""


def most_attempts(outage_s: float) -> int:
    """Failed flushes a sink with exponential backoff makes in ``outage_s`` (+2 of slack:
    the first attempt, and one that starts just before the store is back); retrying every
    ``RETRY_FIRST_S`` instead would make ``outage_s / RETRY_FIRST_S``."""
    n, t, d = 0, 0.0, RETRY_FIRST_S
    while t <= outage_s:
        n, t, d = n + 1, t + d, min(d * 2, RETRY_CAP_S)
    return n + 2


def sim(seed: int) -> list[bytes]:
    return simulate("gpu-xid79", seed=seed, nodes=4, hours=1.0,
                    start_ms=(now_ms() - 90 * 60_000) // 60_000 * 60_000)[0]


def scrape(port: int) -> dict[str, float]:
    """``/metrics`` of the sink: sample name -> value, summed over labels."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = re.match(r"^([a-z_]+)(?:\{[^}]*\})? ([0-9.e+-]+)$", line)
        if m:
            out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(2))
    return out


def wait_for(pred, timeout_s: float, what: str, log=lambda: ""):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            got = pred()
        except OSError:   # the web server not up yet
            got = None
        if got:
            return got
        time.sleep(0.3)
    pytest.fail(f"{what} within {timeout_s:.0f} s\n{log()}")


def test_store_locked_by_another_process_then_released(settings, tmp_path):
    s = replace(settings, topic_partitions=3)
    asyncio.run(ensure_topics(s))
    group = sink_group_id(s, APP)
    lines = sim(1)
    asyncio.run(produce(s, lines))
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, s.store_path],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        t_locked = time.monotonic()
        port = free_port()
        with SinkProcess(s, tmp_path / "sink", app_id=APP, web_port=port, loglevel="info",
                         env={"FAULTLINE_CLICKHOUSE_URL": ""}) as sink:
            # the outage, on the sink's /metrics: failed flushes, every record still lagging
            m = wait_for(lambda: (lambda m: m if m.get("faultline_sink_store_failures_total", 0) >= 2
                                  and m.get("faultline_consumer_lag", 0) >= len(lines) else None)(scrape(port)),
                         OUTAGE_S + 60, "the sink's /metrics showed no store failures and lag", sink.log)
            assert holder.poll() is None, holder.returncode
            assert m["faultline_sink_records_total"] == 0
            assert asyncio.run(group_lag(s, group)) == len(lines)    # nothing committed
            time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - t_locked)))
            holder.stdin.write("release\n")
            holder.stdin.flush()
            holder.wait(30)
            released = time.monotonic()
            asyncio.run(wait_caught_up(s, group, timeout_s=RETRY_CAP_S + 60))
            caught_up_s = time.monotonic() - released
            m = scrape(port)
            assert sink.alive(), sink.log()
        log = sink.log(10_000_000)
    finally:
        holder.kill()
    assert m["faultline_sink_records_total"] == len(lines), m
    assert m["faultline_consumer_lag"] == 0, m
    fails = int(m["faultline_sink_store_failures_total"])
    assert 2 <= fails <= most_attempts(time.monotonic() - t_locked), (fails, log[-3000:])   # backoff
    assert f"process {holder.pid} (not a sink)" in log, log[-3000:]
    delays = [float(x) for x in re.findall(r"retrying in ([0-9.]+) s", log)]
    assert delays and delays == sorted(delays), delays
    assert "store back after" in log
    st = open_store(s)
    try:
        assert layer_counts(st) == (len(lines), len(lines))   # everything, once
    finally:
        st.close()
    print(f"\noutage {released - t_locked:.1f} s: {fails} failed flushes (backoff delays logged {delays}), "
          f"caught up {caught_up_s:.1f} s after the store came back")


class Proxy:
    """TCP forwarder 127.0.0.1:``port`` -> ``target`` (host, port), started on demand."""

    def __init__(self, port: int, target: tuple[str, int]) -> None:
        self.port, self.target = port, target
        self.sock = socket.create_server(("127.0.0.1", port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            u = socket.create_connection(self.target)
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for x in (a, b):
                try:
                    x.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


def test_clickhouse_url_refusing_connections(settings):
    from urllib.parse import urlsplit, urlunsplit

    real = os.environ.get("FAULTLINE_CLICKHOUSE_URL")
    port = free_port()
    if real:   # the server's URL with the refusing port in place of its own
        p = urlsplit(real)
        netloc = (p.netloc.rsplit("@", 1)[0] + "@" if "@" in p.netloc else "") + f"127.0.0.1:{port}"
        url = urlunsplit((p.scheme, netloc, p.path, p.query, p.fragment))
    else:
        url = f"http://default:not-a-secret-{uuid.uuid4().hex[:6]}@127.0.0.1:{port}/default"
    s = replace(settings, topic_partitions=3, clickhouse_url=url)
    asyncio.run(ensure_topics(s))
    group = sink_group_id(s, APP)
    seed = int(uuid.uuid4().int % 100_000) + 10   # fresh event ids: a shared server may hold old runs
    lines = sim(seed)
    prefix = orjson.loads(lines[0])["id"].rsplit("-", 1)[0] + "-"
    asyncio.run(produce(s, lines))
    store, writer = open_sink(s)     # the server refuses: a deferred store, the sink starts anyway
    assert isinstance(store, DeferredStore) and not store.opened
    assert "not-a-secret" not in store.location and "not-a-secret" not in str(store._error)

    async def scenario() -> dict[str, float]:
        sink = SinkConsumer(s, writer, group_id=group, max_rows=5_000, within_s=0.3)
        source = SinkSource(sink)
        task = asyncio.create_task(sink.run())
        t0 = time.monotonic()
        try:
            while time.monotonic() - t0 < OUTAGE_S or sink.failed_attempts < 2:
                assert not task.done(), task
                assert time.monotonic() - t0 < OUTAGE_S + 60, f"no failed flush in {OUTAGE_S + 60:.0f} s"
                await asyncio.sleep(0.3)
            assert sink.stored == 0
            assert await group_lag(s, group) == len(lines)      # nothing committed, nothing dropped
            await source.refresh()
            m = {f.name: sum(x.value for x in f.samples) for f in source.collect()}
            assert m["faultline_sink_store_failures"] == sink.failed_attempts   # counter family name
            assert m["faultline_consumer_lag"] == len(lines), m
            assert sink.failed_attempts <= most_attempts(time.monotonic() - t0)
            if real:
                proxy = Proxy(port, (urlsplit(real).hostname, urlsplit(real).port or 8123))
                try:
                    await wait_caught_up(s, group, timeout_s=RETRY_CAP_S + 60)
                finally:
                    proxy.close()
                assert sink.stored == len(lines)
            return m
        finally:
            await sink.close(15)
            await asyncio.wait_for(task, 15)
            await source.close()

    try:
        asyncio.run(scenario())
        if real:
            assert _server_rows(store, prefix) == len(lines)
        else:
            assert asyncio.run(group_lag(s, group)) == len(lines)   # stopped: still all there to store
    finally:
        store.close()


def _server_rows(store, prefix: str) -> int:
    """Distinct event ids of the layer tables on the server (under FINAL)."""
    n = 0
    for layer in ("gpu", "hw", "net", "storage", "sched", "runtime", "inventory"):
        n += int(store.query(f"SELECT uniqExact(id) AS u FROM events_{layer} FINAL WHERE startsWith(id, {{p:String}})",
                             {"p": prefix})[0]["u"])
    return n
