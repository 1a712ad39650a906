"""Clock skew (issue 14, Must show "Clock skew"; item 7 of what was measured).

Among a fleet's traffic, one ``gpu.sample`` from one node (the one the fewest incidents
name) is stamped 23 h ahead (inside the contract's 24 h bound). On d8b4309 it moved event time
forward and produced false stall incidents, in the worker and in `diagnose`. Here:

- in `diagnose` (the in-process Engine): the incidents with the skewed event equal those
  without it, every revision;
- through the worker (one sink, one analysis worker, input flowing): the incidents equal
  diagnose's without the skewed event, on every revision ever emitted; the skewed event
  itself is still processed (stored exactly once like every other event). The skewed record
  goes out with the producer's clock as its Kafka timestamp, so this test is about event
  time inside the worker, not about the broker (next point);
- the broker takes such an event from faultline's own publisher together with the normal
  events batched with it. Kafka 4's default ``log.message.timestamp.after.max.ms`` is 1 h:
  a record stamped 23 h ahead is refused with InvalidTimestampError, and with it every
  record of its produce batch for that partition (3,790 valid events lost in one run of the
  worker test, 201 of 201 here, until the publishers held record timestamps to the wall
  clock in 9297cfd) - while the contract accepts 24 h.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import orjson
import pytest

from faultline.config import Settings
from faultline.streams.faust_topics import ensure_topics
from harness import (Expectation, Feeder, Fleet, IncidentLog, Timeline, Traffic, check_incidents,
                     fleet_traffic, key_view, pipeline_settings, report, settle_and_check)

SEED = 301
SKEW_MS = 23 * 3600 * 1000
#: where in the input the skewed event goes (share of the events before it)
AT = 0.3
RATE = 2500


def skewed_traffic(traffic: Traffic, exp: Expectation) -> tuple[Traffic, dict]:
    """``traffic`` with one gpu.sample stamped SKEW_MS ahead, from the node the fewest
    incidents name (none in a big enough fleet)."""
    named = Counter(n for d in exp.latest.values() for n in (d.get("affected") or {}).get("nodes", []))
    nodes = {orjson.loads(x).get("node") for x in traffic.lines[:2000]} - {None}
    node = min(sorted(nodes), key=lambda n: named.get(n, 0))
    at = int(len(traffic.lines) * AT)
    for line in traffic.lines[at:]:
        d = orjson.loads(line)
        if d["kind"] == "gpu.sample" and d.get("node") == node:
            break
    else:
        raise AssertionError(f"no gpu.sample of {node} after {AT:.0%} of the input")
    ev = dict(d, id=d["id"] + "-skew", ts=d["ts"] + SKEW_MS)
    lines = traffic.lines[:at] + [orjson.dumps(ev)] + traffic.lines[at:]
    ids = {k: set(v) for k, v in traffic.ids.items()}
    ids["gpu"].add(ev["id"])
    return Traffic(traffic.seed, lines, ids, traffic.labels), ev


def test_one_skewed_event_changes_no_incident_in_diagnose():
    s = Settings()
    traffic = fleet_traffic(SEED)
    exp = Expectation.of(traffic.lines, s)
    assert len(exp.live) >= 3, exp.live
    skewed, ev = skewed_traffic(traffic, exp)
    got = Expectation.of(skewed.lines, s)
    # every revision diagnose emits with the skewed event, checked like a worker's stream
    problems = check_incidents(exp, [(0.0, d) for revs in got.revisions.values() for d in revs])
    assert not problems, (f"seed={SEED} skewed event {ev['id']} node={ev['node']} ts+23h:\n" + "\n".join(problems)
                          + "\n" + "\n".join(f"{i}: {key_view(d)}" for i, d in got.latest.items()))


@pytest.mark.kafka
@pytest.mark.slow
def test_one_skewed_event_changes_no_incident_in_the_worker(settings, tmp_path):
    s = pipeline_settings(settings)
    tl = Timeline(SEED)
    traffic = fleet_traffic(SEED)
    exp = Expectation.of(traffic.lines, s)
    skewed, ev = skewed_traffic(traffic, exp)
    tl.mark(f"{skewed.n} events, {len(exp.latest)} incidents expected; skewed event {ev['id']} from "
            f"{ev['node']} at {AT:.0%} of the input")
    asyncio.run(ensure_topics(s))
    inc = IncidentLog(s).start()
    problems: list[str] = []
    with Fleet(s, tmp_path, tl) as fleet:
        try:
            fleet.start_sink()
            w = fleet.sink_worker if fleet.sink_worker is not None else fleet.add_worker()
            fleet.wait_joined(w)
            at = skewed.lines.index(orjson.dumps(ev))
            feeder = Feeder(s, skewed.lines, RATE, producer_time=[at]).start()
            tl.mark("input starts")
            feeder.join()
            tl.mark(f"input done ({feeder.seconds:.1f} s)")
            problems = settle_and_check(s, fleet, inc, exp, skewed, tl)
        finally:
            inc.stop()
        assert not problems, report(tl, problems, fleet)


@pytest.mark.kafka
def test_broker_accepts_an_event_stamped_23h_ahead(settings):
    """faultline's publisher (collectors, simulator, replay) on the contract topics: one
    gpu.sample 23 h ahead among 200 normal ones of the same node (one produce batch)."""
    from faultline.producers.publish import Publisher
    from faultline.schemas.codec import decode, now_ms

    asyncio.run(ensure_topics(settings))
    now = now_ms()
    base = {"v": 1, "kind": "gpu.sample", "source": "test", "node": "gpu-001",
            "data": {"gpu": 0, "uuid": "GPU-test-0", "util_pct": 50.0, "temp_c": 60.0}}
    evs = [dict(base, id=f"skew-test-{i}", ts=now - 60_000 + i) for i in range(200)]
    evs.insert(100, dict(base, id="skew-test-ahead", ts=now + SKEW_MS))

    async def send() -> list:
        async with Publisher(settings, compression=None) as pub:
            futs = [await pub.send(decode(orjson.dumps(e), now=now)) for e in evs]
            await pub.flush()
            return await asyncio.gather(*futs, return_exceptions=True)

    res = asyncio.run(send())
    refused = [(e["id"], f"{type(r).__name__}") for e, r in zip(evs, res) if isinstance(r, BaseException)]
    assert not refused, (f"the broker refused {len(refused)} of {len(evs)} records because one is stamped "
                         f"23 h ahead (contract: up to 24 h): {refused[:3]}...")
