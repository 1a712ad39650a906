"""Stress (issue 14, Must show): page and SQL API requests while the sink ingests.

A real broker and a real `faultline sink` (the store owner, with the SQL API and the incident
page, token on): 330,000 `gpu.sample` events are published at 5,500 events/s (60 s; at least 5,000 asserted) while
six clients (four page readers, two API clients, in a child process) send requests as fast as they are
answered, at least 5 a second in all. On d8b4309 the same pattern (page reads during sink
flushes) froze the worker for good.

Asserted: at least 5 answered requests per second over the ingest, every request answered
(200, or 503/504 with Retry-After when the store is busy) within the API's request timeout
plus 1 s, the sink's lag returns to 0 within 120 s of the end of the input, and every event
is in the store exactly once (FINAL). Printed: requests/s, request latency p50/p99/max, the
sink's peak lag during the run and the drain time (the figures of docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import http.client
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from faultline.sinks.api import REQUEST_TIMEOUT_S
from faultline.streams.faust_harness import SinkProcess, group_lag, sink_group_id, wait_caught_up

from harness import Feeder
from ports import free_port

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

RATE = 6_000            # events/s asked of the feeder (it must reach MIN_RATE: margin for a loaded CI box)
MIN_RATE = 5_000
SECONDS = 60
N_EVENTS = RATE * SECONDS
PAGE_CLIENTS = 4
API_CLIENTS = 2
MIN_REQ_PER_S = 5
TOKEN = "stress-token"
APP = "fl-stress"

GPU = (b'{"v":1,"id":"st-%d","ts":%d,"kind":"gpu.sample","source":"nvml@%s","node":"%s","data":{"gpu":%d,'
       b'"uuid":"GPU-%s-%d","util_pct":%d.5,"mem_used_mib":%d,"mem_total_mib":81920,"temp_c":%d,"power_w":%d.0,'
       b'"sm_clock_mhz":1980,"throttle":[],"ecc_sbe":0,"ecc_dbe":0,"nvlink_errors":0,"pcie_replay":0}}')


def gpu_samples(n: int) -> list[bytes]:
    """``n`` valid gpu.sample events of 32 nodes x 8 GPUs, one every 10 ms of the last hour."""
    t0 = int(time.time() * 1000) - 3_600_000
    out = []
    for i in range(n):
        node = b"sn%02d" % (i % 32)
        g = i // 32 % 8
        out.append(GPU % (i, t0 + i * 10 // 1, node, node, g, node, g, i % 100, 1000 + i % 5000, 40 + i % 40,
                          200 + i % 300))
    return out


def get(port: int, path: str, body: dict | None = None) -> tuple[int, bytes, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT_S + 30)
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    try:
        conn.request("POST" if body else "GET", path, orjson.dumps(body) if body else None, headers)
        r = conn.getresponse()
        return r.status, r.read(), dict(r.getheaders())
    finally:
        conn.close()


def wait_web(port: int, sink: SinkProcess, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert sink.alive(), "sink died at start:\n" + sink.log()
        try:
            if get(port, "/faultline/api/health")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError("sink web not up:\n" + sink.log())


CLIENTS = """
import http.client, json, sys, threading, time
port, token, pages, apis, limit = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
done = threading.Event()
results, errors, lock = [], [], threading.Lock()

def get(path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=limit + 30)
    headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
    try:
        conn.request("POST" if body else "GET", path, json.dumps(body) if body else None, headers)
        r = conn.getresponse()
        return r.status, r.read(), dict(r.getheaders())
    finally:
        conn.close()

def one(kind, path, body, check):
    t0 = time.monotonic()
    try:
        status, out, headers = get(path, body)
    except OSError as e:
        with lock:
            errors.append(f"{kind}: {e!r} after {time.monotonic() - t0:.1f} s")
        return
    took = time.monotonic() - t0
    problem = check(out) if status == 200 else None
    with lock:
        if problem:
            errors.append(f"{kind}: {problem}")
        results.append((kind, status, took, "Retry-After" in headers))

def page():
    while not done.is_set():
        one("page", "/incidents", None, lambda b: None if b"<h1>Incidents</h1>" in b else repr(b[:200]))

def api(i):
    k = 0
    while not done.is_set():
        k += 1
        col = f"n_{i}_{k}"
        def check(b, col=col, k=k):
            out = json.loads(b)
            return None if out["columns"] == [col, "tag"] and out["rows"][0][1] == k else f"wrong answer {out}"
        one("api", "/faultline/api/sql",
            {"sql": f"SELECT count() AS {col}, {{k:UInt32}} AS tag FROM events_gpu", "params": {"k": k}}, check)

threads = [threading.Thread(target=page, daemon=True) for _ in range(pages)]
threads += [threading.Thread(target=api, args=(i,), daemon=True) for i in range(apis)]
for t in threads:
    t.start()
print("started", flush=True)
sys.stdin.readline()          # the test closes stdin when the input is published
done.set()
for t in threads:
    t.join(limit + 40)
print(json.dumps({"results": results, "errors": errors}), flush=True)
"""


class Clients:
    """Page and API clients in a child process (so they do not take the feeder's GIL) until
    ``stop()``, which returns every request's (kind, status, seconds, retry-after) and the
    wrong answers seen."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Clients":
        self.proc = subprocess.Popen([sys.executable, "-c", CLIENTS, str(self.port), TOKEN, str(PAGE_CLIENTS),
                                      str(API_CLIENTS), str(REQUEST_TIMEOUT_S)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "started"
        return self

    def stop(self) -> tuple[list, list]:
        assert self.proc is not None
        out, _ = self.proc.communicate("stop\n", timeout=REQUEST_TIMEOUT_S + 60)
        got = json.loads(out.strip().splitlines()[-1])
        return [tuple(r) for r in got["results"]], got["errors"]


async def test_requests_during_ingest(settings, contract_topics, tmp_path: Path, capsys):
    await contract_topics(partitions=3)
    lines = await asyncio.to_thread(gpu_samples, N_EVENTS)
    port = free_port()
    sink = SinkProcess(settings, tmp_path / "sink", app_id=APP, web_port=port,
                       env={"FAULTLINE_API_TOKEN": TOKEN})
    group = sink_group_id(settings, APP)
    with sink:
        await asyncio.to_thread(wait_web, port, sink)
        clients = Clients(port).start()
        feeder = Feeder(settings, lines, RATE, chunk=250).start()
        lags: list[int] = []
        t_feed = time.monotonic()
        while feeder._thread.is_alive():
            await asyncio.sleep(2.0)
            try:
                lags.append(await group_lag(settings, group))
            except LookupError:
                pass
            assert sink.alive(), "sink died under load:\n" + sink.log()
        await asyncio.to_thread(feeder.join)
        feed_s = time.monotonic() - t_feed
        res, client_errors = await asyncio.to_thread(clients.stop)
        t_end = time.monotonic()
        await wait_caught_up(settings, group, timeout_s=120)
        drain_s = time.monotonic() - t_end
        status, body, _ = await asyncio.to_thread(get, port, "/faultline/api/sql",
                                                  {"sql": "SELECT count() AS n, uniqExact(id) AS u FROM events_gpu FINAL"})
        assert sink.alive(), sink.log()
    assert status == 200, body[:300]
    n, uniq = orjson.loads(body)["rows"][0]

    answered = [r for r in res if r[1] == 200]
    lat = sorted(r[2] for r in res)
    rps = len(answered) / feed_s
    with capsys.disabled():
        print(f"\nstress: {N_EVENTS:,} events in {feed_s:.1f} s ({N_EVENTS / feed_s:,.0f} ev/s); "
              f"{len(res)} requests ({len(answered)} answered 200, "
              f"{sum(1 for r in res if r[1] in (503, 504))} busy/timeout): {rps:.1f} answered/s "
              f"(page {sum(1 for r in answered if r[0] == 'page')}, api {sum(1 for r in answered if r[0] == 'api')}); "
              f"latency p50 {statistics.median(lat):.2f} s, p99 {lat[int(len(lat) * 0.99) - 1]:.2f} s, "
              f"max {lat[-1]:.2f} s; sink lag peak {max(lags, default=0):,} records, drained "
              f"{drain_s:.1f} s after the input ended; stored {n:,} (unique {uniq:,})")
    assert not client_errors, client_errors[:5]
    assert N_EVENTS / feed_s >= MIN_RATE and feed_s >= SECONDS, \
        f"ingest of {N_EVENTS / feed_s:,.0f} ev/s for {feed_s:.0f} s: not the {MIN_RATE:,} ev/s for {SECONDS} s asked"
    assert rps >= MIN_REQ_PER_S, f"{rps:.1f} answered requests/s during ingest"
    assert lat[-1] < REQUEST_TIMEOUT_S + 1, f"a request took {lat[-1]:.1f} s (timeout {REQUEST_TIMEOUT_S} s)"
    assert all(r[1] == 200 or (r[1] in (503, 504) and r[3]) for r in res), {r[1] for r in res}
    assert n == uniq == N_EVENTS, f"stored {n} rows, {uniq} unique, of {N_EVENTS} events"
