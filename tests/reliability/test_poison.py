"""Poison records among a fleet's traffic (issue 14, Must show "Poison"), from the outside.

A simulated fleet (``mixed``, labelled interruptions) goes through the real broker into one
`faultline worker` child process with its sink (chDB store). Mixed into that traffic:
integers beyond 64 bits in int fields (2^64, 2^70, a ts of -2^63-1), non-finite numbers (``NaN``,
``Infinity``, ``1e400``), the largest value the broker accepts (a 10 MB value is refused at
produce time: by the client, and by the broker when the client lets it through; both
checked here), and a record that makes a detector raise. The fault is injected from the test
side only: a ``sitecustomize.py`` on the child's PYTHONPATH wraps the public
``faultline.streams.detectors.node.feed_node`` to raise on one marker event id (no product
hook). Each poison record must come out on ``fl.deadletter`` (and in the store's
``deadletters`` table) under its own topic/partition/offset with a reason; the worker keeps
its pid; every incident equals `faultline diagnose` on the valid traffic. Four records that
look hostile but are valid per docs/contract-bounds.md (a 2^64/2^70 integer or 1e400 in an
unknown field, a 2^64 literal in a float field) travel with the valid traffic: none of them
may be dead-lettered.

Written from the contract and the public commands alone (no decision logic read).
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fuzzgen as F  # noqa: E402

from faultline.producers.simulate import simulate  # noqa: E402
from faultline.schemas.codec import now_ms  # noqa: E402
from faultline.streams.faust_harness import latest_incidents, read_topic  # noqa: E402
from harness import Fleet  # noqa: E402

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

DETECTOR_FAULT_ID = "f2-detector-raise-0001"
DETECTOR_FAULT_TEXT = "f2 injected detector fault"
TEN_MB = 10 * 1024 * 1024

SITECUSTOMIZE = '''
"""Test-side fault (tests/reliability/test_poison.py): the public detector entry point
feed_node raises on one marker event id. No product code knows about it."""
import os


def _install():
    from faultline.streams.detectors import node

    orig = node.feed_node
    marker = os.environ["F2_FAULT_ID"]
    log = os.environ["F2_FAULT_LOG"]

    def feed_node(st, ev, *args, **kwargs):
        ev_id = ev.get("id") if isinstance(ev, dict) else getattr(ev, "id", None)
        if ev_id == marker:
            with open(log, "a") as fh:
                fh.write(f"{os.getpid()}\\n")
            raise RuntimeError("%s")
        return orig(st, ev, *args, **kwargs)

    node.feed_node = feed_node


_install()
''' % DETECTOR_FAULT_TEXT


def _event(kind: str, node: str | None, job: str | None, ts: int, data: dict, n: int) -> dict:
    return {"v": 1, "id": f"f2-poison-{n:04d}", "ts": ts, "kind": kind, "source": "f2-poison", "node": node,
            "job": job, "tenant": None, "data": data}


def _raw(ev: dict, path: tuple[str, ...], literal: bytes) -> bytes:
    """``ev`` serialised with the value at ``path`` replaced by a raw JSON literal."""
    ev = orjson.loads(orjson.dumps(ev))
    target = ev
    for p in path[:-1]:
        target = target[p]
    target[path[-1]] = "\x00HOLE\x00"
    return orjson.dumps(ev).replace(b'"\\u0000HOLE\\u0000"', literal, 1)


def poison_records(fleet: list[bytes], largest_value: int) -> list[F.Msg]:
    """The poison, about the fleet's own nodes and jobs (a wedged node or job would show in
    the incidents), timestamped inside the fleet's hour."""
    evs = [orjson.loads(x) for x in fleet]
    mid = evs[len(evs) // 2]["ts"]
    node = next(e["node"] for e in evs if e["kind"] == "gpu.sample")
    job = next(e["job"] for e in evs if e["kind"] == "runtime.progress")
    sample = next(e for e in evs if e["kind"] == "gpu.sample")
    gpu = dict(sample, id="x", ts=mid)
    prog = _event("runtime.progress", node, job, mid, {"rank": 0, "step": 1, "step_time_s": 1.0,
                                                       "samples_per_s": 1.0}, 0)
    sensor = _event("hw.sensor", node, None, mid, {"sensor": "Inlet Temp", "type": "temperature",
                                                   "value": 24.0, "unit": "C", "status": "ok"}, 0)
    out: list[F.Msg] = []

    def add(topic: str, key: str, value: bytes, category: str) -> None:
        out.append(F.Msg(topic, key.encode(), value, category))

    add("fl.gpu", node, _raw(dict(gpu, id="f2-poison-0001"), ("data", "ecc_sbe"), b"1180591620717411303424"),
        "int_2^70_counter")
    add("fl.gpu", node, _raw(dict(gpu, id="f2-poison-0002"), ("data", "nvlink_errors"), b"18446744073709551616"),
        "int_2^64_counter")
    add("fl.runtime", job, _raw(dict(prog, id="f2-poison-0003"), ("ts",), b"-9223372036854775809"),
        "ts_below_int64")
    add("fl.gpu", node, _raw(dict(gpu, id="f2-poison-0005"), ("data", "temp_c"), b"NaN"), "nan_literal")
    add("fl.gpu", node, _raw(dict(gpu, id="f2-poison-0006"), ("data", "power_w"), b"1e400"), "1e400")
    add("fl.hw", node, _raw(dict(sensor, id="f2-poison-0007"), ("data", "value"), b"-1e400"), "-1e400")
    add("fl.runtime", job, _raw(dict(prog, id="f2-poison-0008"), ("data", "step_time_s"), b"Infinity"),
        "infinity_literal")
    big = dict(gpu, id="f2-poison-0009", data=dict(gpu["data"], pad=""))
    pad = largest_value - len(orjson.dumps(big))
    add("fl.gpu", node, orjson.dumps(dict(big, data=dict(big["data"], pad="p" * pad))), "largest_accepted_value")
    assert len(out[-1].value) == largest_value
    add("fl.hw", node, orjson.dumps(dict(sensor, id=DETECTOR_FAULT_ID)), "detector_raises")
    return out


def hostile_valid_records(fleet: list[bytes], node: str) -> list[bytes]:
    """Valid per docs/contract-bounds.md (unknown fields are skipped unread; a big integer
    literal in a float field is a finite double): they must NOT be dead-lettered, and must not
    wedge anything. They travel with the fleet and diagnose reads them too."""
    mid = orjson.loads(fleet[len(fleet) // 2])["ts"]
    sensor = _event("hw.sensor", node, None, mid, {"sensor": "Inlet Temp", "type": "temperature",
                                                   "value": 24.0, "unit": "C", "status": "ok"}, 0)
    return [_raw(dict(sensor, id="f2-valid-0001"), ("data", "extra_counter"), b"18446744073709551616"),
            _raw(dict(sensor, id="f2-valid-0002"), ("big_extra",), b"1180591620717411303424"),
            _raw(dict(sensor, id="f2-valid-0003"), ("data", "value"), b"18446744073709551616"),
            _raw(dict(sensor, id="f2-valid-0004"), ("data", "x"), b"1e400")]


def _broker_limit(settings) -> int:
    """The effective max.message.bytes of the test's fl.gpu topic (broker default unless set)."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    async def run() -> int:
        admin = AIOKafkaAdminClient(**settings.kafka_kwargs())
        await admin.start()
        try:
            # a topic created a moment ago may not be known to the broker's config manager yet
            # (UNKNOWN_TOPIC_OR_PARTITION, error code 3): ask again for up to 20 s
            deadline = time.monotonic() + 20
            while True:
                res = await admin.describe_configs(
                    [ConfigResource(ConfigResourceType.TOPIC, settings.topic("fl.gpu"), {"max.message.bytes": None})])
                for code, _, _, _, entries in res[0].resources:
                    for name, value, *_ in entries:
                        if name == "max.message.bytes":
                            return int(value)
                    if code == 3 and time.monotonic() < deadline:
                        break
                else:
                    raise AssertionError(f"max.message.bytes not reported: {res}")
                await asyncio.sleep(0.5)
        finally:
            await admin.close()

    return asyncio.run(run())


def _try_send(settings, key: bytes, size: int, max_request_size: int) -> str:
    """Produce one ``size``-byte value to fl.gpu: 'ok', 'client' (refused before sending) or
    'broker' (the broker answered with an error)."""
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError

    async def run() -> str:
        prod = AIOKafkaProducer(**settings.kafka_kwargs(), max_request_size=max_request_size, acks="all")
        await prod.start()
        try:
            try:
                fut = await prod.send(settings.topic("fl.gpu"), b"x" * size, key=key)
            except KafkaError as e:
                return f"client:{type(e).__name__}"
            try:
                await fut
            except KafkaError as e:
                return f"broker:{type(e).__name__}"
            return "ok"
        finally:
            await prod.stop()

    return asyncio.run(run())


def test_ten_mb_value_is_refused_at_produce_time(settings, contract_topics):
    """A 10 MB value never reaches a topic: the client refuses it (default request size), and
    the broker refuses it when the client lets it through. This is why the poison test below
    uses the largest value the broker accepts instead."""
    asyncio.run(contract_topics(partitions=1))
    limit = _broker_limit(settings)
    assert limit < TEN_MB, f"broker accepts {limit} bytes: send the 10 MB value through the pipeline instead"
    client = _try_send(settings, b"gpu-001", TEN_MB, max_request_size=1_048_576)
    broker = _try_send(settings, b"gpu-001", TEN_MB, max_request_size=4 * TEN_MB)
    assert client.startswith("client:MessageSizeTooLarge"), client
    assert broker.startswith("broker:"), broker
    # and what the largest accepted value is: nothing over it is accepted, nothing under refused
    top = _largest_value(limit, b"gpu-001")
    assert _try_send(settings, b"gpu-001", top + 1, max_request_size=4 * limit).startswith("broker:")
    assert _try_send(settings, b"gpu-001", top, max_request_size=4 * limit) == "ok"


def _largest_value(limit: int, key: bytes) -> int:
    # one record in a v2 batch: 61 bytes of batch header, then length, attributes, timestamp
    # and offset deltas, key length + key, value length (3-byte varint near 1 MB), headers count
    return limit - 61 - (3 + 1 + 1 + 1 + 1 + len(key) + 3 + 1)


def _dead_letters(settings, expect: int, timeout_s: float, w) -> list[dict]:
    settled = F.Settled(settings, w)
    recs = asyncio.run(read_topic(settings, "fl.deadletter", until=lambda r: len(r) >= expect or settled(),
                                  timeout_s=timeout_s, idle_s=3.0))
    return [orjson.loads(r.value) for r in recs]


def test_poison_among_fleet_traffic(settings, contract_topics, tmp_path):
    s = replace(settings, topic_partitions=3)
    asyncio.run(contract_topics(partitions=3))
    start = (now_ms() - 90 * 60_000) // 60_000 * 60_000
    fleet, labels = simulate("mixed", seed=1, nodes=4, hours=1.0, start_ms=start)
    assert labels["interruptions"], "the fleet must have labelled interruptions"
    limit = _broker_limit(s)
    evs_node = orjson.loads(next(x for x in fleet if b'"gpu.sample"' in x))["node"]
    poison = poison_records(fleet, _largest_value(limit, evs_node.encode()))
    node = orjson.loads(next(x for x in fleet if b'"hw.sensor"' in x))["node"]
    hostile = [F.Msg("fl.hw", node.encode(), x, "valid") for x in hostile_valid_records(fleet, node)]
    valid = F.interleave([F.route(x) for x in fleet], hostile, seed=15)
    expected = F.diagnose(s, [m.value for m in valid], tmp_path)
    assert len(expected) >= len(labels["interruptions"]) >= 3

    msgs = F.interleave(valid, poison, seed=14)
    metas = F.produce(s, msgs, max_request_size=2 * limit)
    where = {id(m): md for m, md in zip(msgs, metas)}
    sent = {where[id(m)]: m for m in poison}   # (topic, partition, offset) -> poison record

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    fault_log = tmp_path / "fault.log"
    env = {"PYTHONPATH": os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])]),
           "F2_FAULT_ID": DETECTOR_FAULT_ID, "F2_FAULT_LOG": str(fault_log)}
    fleet = Fleet(s, tmp_path)
    fleet.WORKER_ENV = {**Fleet.WORKER_ENV, **env}   # the sitecustomize for the analysis worker only
    t0 = time.monotonic()
    with fleet:
        w = F.start_pipeline(fleet)
        pid = w.proc.pid
        settled = F.Settled(s, w, grace_s=10.0)
        recs = asyncio.run(read_topic(s, "fl.incidents", timeout_s=150, idle_s=3.0,
                                      until=lambda r: F.live(latest_incidents(r)) == expected or settled()))
        got = F.live(latest_incidents(recs))
        dead = _dead_letters(s, len(poison), timeout_s=max(10.0, min(45.0, 150 - (time.monotonic() - t0))), w=w)
        alive, same_pid = w.alive(), w.proc.pid == pid
        log = w.log(10_000_000)
        unsettled = F.settle_and_stop_sink(s, fleet, timeout_s=30 if w.alive() else 1)
        stored = F.store_rows(s, "SELECT topic, partition, offset, reason FROM deadletters FINAL")
        stored_ids = {r["id"] for r in F.store_rows(s, "SELECT id FROM incidents FINAL WHERE state != 'recovered'")}
    report = _report(sent, dead, stored, got, expected, log) + f"\nsettling: {unsettled or 'ok'}"
    print(report)
    failures = _failures(sent, dead, stored, got, expected, stored_ids, alive and same_pid, log)
    if any("detector_raises" in f for f in failures) and not fault_log.exists():
        failures.append("the injected detector fault never fired (the worker never reached the marker "
                        "event, or feed_node is not called through its module name)")
    assert not failures, "\n".join(failures) + "\n" + report


def _failures(sent, dead, stored, got, expected, stored_ids, same_process, log) -> list[str]:
    """Every Must-show condition that does not hold, one line each (first-contact scores)."""
    out = []
    if not same_process:
        out.append("the worker died or was restarted")
    if log.count("Traceback") > len(sent):
        out.append(f"traceback crash-loop: {log.count('Traceback')} tracebacks for {len(sent)} poison records")
    by_where = {(d["topic"], d["partition"], d["offset"]): d for d in dead}
    missing = [sent[k].category for k in sent if k not in by_where]
    if missing:
        out.append(f"{len(missing)} of {len(sent)} poison records missing from fl.deadletter: {missing}")
    if any(not by_where[k]["reason"] for k in sent if k in by_where):
        out.append("a dead letter without a reason")
    if len(dead) != len(sent):
        out.append(f"{len(dead)} dead letters on fl.deadletter for {len(sent)} poison records")
    out += _detector_and_oversize(sent, by_where)
    st = {(r["topic"], r["partition"], r["offset"]): r for r in stored}
    missing = [sent[k].category for k in sent if k not in st]
    if missing:
        out.append(f"{len(missing)} of {len(sent)} poison records missing from the store's deadletters: {missing}")
    if len(st) != len(sent) or any(not st[k]["reason"] for k in sent if k in st):
        out.append(f"{len(st)} rows in deadletters for {len(sent)} poison records (or one without a reason)")
    if got != expected:
        out.append(f"worker incidents differ from diagnose's: {len(set(got) & set(expected))} of {len(expected)} "
                   f"ids, {sum(got.get(i) == v for i, v in expected.items())} equal, "
                   f"{len(set(got) - set(expected))} extra")
    if stored_ids != set(expected):
        out.append(f"store incidents: {len(stored_ids & set(expected))} of {len(expected)}, "
                   f"{len(stored_ids - set(expected))} extra")
    return out


def _detector_and_oversize(sent: dict, by_where: dict) -> list[str]:
    out = []
    for k, m in sent.items():
        d = by_where.get(k)
        if d is None:
            continue
        names_error = DETECTOR_FAULT_TEXT in d["reason"] or "RuntimeError" in d["reason"]
        if m.category == "detector_raises" and not names_error:
            out.append(f"the detector fault's dead letter does not name the error: {d['reason']!r}")
        if m.category == "largest_accepted_value":
            kept = base64.b64decode(d["raw_b64"])
            if not (kept and m.value.startswith(kept)):
                out.append("the oversized record's dead letter does not keep a prefix of its raw bytes")
    return out


def _report(sent: dict, dead: list[dict], stored: list[dict], got: dict, expected: dict, log: str) -> str:
    by_where = {(d["topic"], d["partition"], d["offset"]): d for d in dead}
    st = {(r["topic"], r["partition"], r["offset"]) for r in stored}
    lines = ["poison record -> fl.deadletter reason | in store"]
    for k, m in sent.items():
        d = by_where.get(k)
        lines.append(f"  {m.category:24s} -> {(d['reason'][:90] if d else 'MISSING')!r} | {k in st}")
    lines.append(f"dead letters {len(dead)} (poison {len(sent)}), stored {len(stored)}")
    lines.append(f"incidents: worker {len(got)}, diagnose {len(expected)}, equal {got == expected}; "
                 f"only worker {sorted(set(got) - set(expected))}, only diagnose {sorted(set(expected) - set(got))}")
    if got != expected:
        lines.append(F.diff(got, expected))
    lines.append(f"tracebacks in worker log: {log.count('Traceback')}")
    lines.append("--- worker log tail ---\n" + log[-3000:])
    return "\n".join(lines)
