"""Poison input and bounded outputs (issue 14 build 5), without a broker.

- every poison case is rejected at decode with its reason and path, by ``decode``, by the
  engine's inlined fast path and by ``faultline validate`` alike;
- whatever decode accepts re-encodes (msgspec JSON, msgpack, orjson) and survives the
  worker's state dumps (``NodeSide``/``JobSide``), for boundary integers and floats;
- dead letters are bounded and keep a prefix, the size and a sha256;
- the output caps cut with a count of what was left out, and leave normal records alone.
"""

from __future__ import annotations

import base64
import hashlib
import io

import msgspec
import orjson
import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from faultline.commands.validate import validate_lines
from faultline.schemas import (
    DEADLETTER, Affected, Alert, Cause, ContractError, EvidenceItem, Finding, Incident, Retry,
    decode, encode, key_for, to_dict,
)
from faultline.schemas import bounds
from faultline.schemas.codec import DEADLETTER_RAW_BYTES, MAX_DEADLETTER_BYTES, dead_letter, decode_fast
from faultline.schemas.events import INT64_MAX, INT64_MIN, MAX_EPOCH_MS
from faultline.schemas.examples import EXAMPLE_TS, example
from faultline.streams.engine import Engine, EngineConfig
from faultline.streams.faust_engine import INV_KINDS, NODE_KINDS, JobSide, NodeSide, Shared
from faultline.streams.signals import Signal

TS = EXAMPLE_TS


def raw_with(kind: str, path: str, literal: bytes, **env) -> bytes:
    """The example of ``kind`` with the field at ``path`` (``ts``, ``data.ecc_sbe``) set to
    the JSON ``literal`` as written (orjson cannot write 2^70 or NaN itself)."""
    d = example(kind, **env)
    obj = d
    *parents, leaf = path.split(".")
    for p in parents:
        obj = obj[p]
    obj[leaf] = "@@X@@"
    return orjson.dumps(d).replace(b'"@@X@@"', literal)


def with_extra(kind: str, literal: bytes) -> bytes:
    """The example of ``kind`` with an unknown field ``x`` inside ``data`` set to ``literal``."""
    return raw_with(kind, "data.x", literal)


def reason_of(raw: bytes) -> ContractError:
    with pytest.raises(ContractError) as ei:
        decode(raw)
    return ei.value


def engine_reasons(raws: list[bytes]) -> list[str]:
    eng = Engine(EngineConfig())
    eng.process(raws)
    assert eng.stats.invalid == len(raws)
    return [r for _, r in eng.errors]


# ---------------------------------------------------------------- poison cases

BIG = str(2**70).encode()
POISON = [
    # (case, raw, words of the reason, path)
    ("ts below -2^63", raw_with("gpu.sample", "ts", str(-(2**63) - 1).encode()), ">= 0", "$.ts"),
    ("ts negative", raw_with("gpu.sample", "ts", b"-1"), ">= 0", "$.ts"),
    ("ts 2^64", raw_with("gpu.sample", "ts", str(2**64).encode()), "2^53-1", "$.ts"),
    ("counter 2^70", raw_with("gpu.sample", "data.ecc_sbe", BIG), "2^63-1, the signed 64-bit limit", "$.data.ecc_sbe"),
    ("counter 2^64-1", raw_with("net.port", "data.in_octets", str(2**64 - 1).encode()), "signed 64-bit", "$.data.in_octets"),
    ("counter 2^63", raw_with("net.port", "data.in_errors", str(2**63).encode()), "signed 64-bit", "$.data.in_errors"),
    ("rdma counter 2^64", raw_with("net.rdma", "data.counters", b'{"rx_retry":%d}' % 2**64), "signed 64-bit",
     "$.data.counters[...]"),
    ("pid below -2^63", raw_with("gpu.xid", "data.pid", str(-(2**63) - 1).encode()), "-2^63, the signed 64-bit limit",
     "$.data.pid"),
    ("exit code 2^64", raw_with("sched.job", "data.exit_code", str(2**64).encode()), "signed 64-bit", "$.data.exit_code"),
    ("start_ts 2^63", raw_with("sched.job", "data.start_ts", str(2**63).encode()), "2^53-1", "$.data.start_ts"),
    ("step 2^70", raw_with("runtime.progress", "data.step", BIG), "signed 64-bit", "$.data.step"),
    ("pid of 5,000 digits", raw_with("gpu.xid", "data.pid", b"9" * 5_000), "out of range (integers must fit a signed 64-bit",
     "$.data.pid"),
    ("rank 2^70", raw_with("runtime.log", "data.rank", BIG), "signed 64-bit", "$.data.rank"),
    ("gpu index 2^70", raw_with("gpu.sample", "data.gpu", BIG), "signed 64-bit", "$.data.gpu"),
    ("rdma counter 1e400", raw_with("net.rdma", "data.counters", b'{"rx_retry":1e400}'), "Number out of range",
     "$.data.counters[...]"),
    ("rank map value 2^70", raw_with("sched.job", "data.ranks", b'{"0":%s}' % BIG), "Expected `str | null`",
     "$.data.ranks[...]"),
    ("versions map value 2^70", raw_with("inventory.versions", "data", b'{"driver":%s}' % BIG), "Expected `str`",
     "$.data[...]"),
    ("float 1e400", raw_with("gpu.sample", "data.temp_c", b"1e400"), "Number out of range", "$.data.temp_c"),
    ("float -1e400", raw_with("hw.sensor", "data.value", b"-1e400"), "Number out of range", "$.data.value"),
    ("float as a 400-digit int", raw_with("storage.sample", "data.read_lat_ms", b"1" + b"0" * 400),
     "Number out of range", "$.data.read_lat_ms"),
    ("float 1e99999999999", raw_with("gpu.sample", "data.power_w", b"1e99999999999"), "Number out of range",
     "$.data.power_w"),
    ("NaN", raw_with("gpu.sample", "data.temp_c", b"NaN"), "not valid JSON", None),
    ("Infinity", raw_with("gpu.sample", "data.temp_c", b"Infinity"), "not valid JSON", None),
    ("-Infinity", raw_with("hw.sensor", "data.value", b"-Infinity"), "not valid JSON", None),
    ("NaN in an unknown field", with_extra("gpu.sample", b"NaN"), "not valid JSON", None),
    ("non-UTF-8 byte in a known string", raw_with("runtime.log", "data.message", b'"a\xffb"'), "UTF-8", None),
    ("non-UTF-8 byte in an unknown field", with_extra("runtime.log", b'"a\xffb"'), "not valid UTF-8", None),
    ("UTF-8-encoded surrogate in an unknown field", with_extra("gpu.xid", b'"\xed\xa0\x80"'), "not valid UTF-8", None),
    ("overlong UTF-8 in an unknown field", with_extra("gpu.xid", b'"\xc0\x80"'), "not valid UTF-8", None),
    ("truncated UTF-8 in an unknown key", orjson.dumps(example("hw.sel"))[:-1] + b',"\xe2\x82":1}', "not valid UTF-8",
     None),
    ("escaped lone surrogate", raw_with("runtime.log", "data.message", b'"a\\ud800b"'), "surrogate", None),
    ("escaped lone surrogate in an unknown field", with_extra("runtime.log", b'"\\udc00"'), "not valid JSON", None),
    ("deep nesting in an unknown field", with_extra("gpu.xid", b"[" * 100_000 + b"]" * 100_000), "nesting too deep",
     None),
    ("BOM", b"\xef\xbb\xbf" + orjson.dumps(example("gpu.xid")), "not valid JSON", None),
    ("two objects", orjson.dumps(example("gpu.xid")) * 2, "trailing characters", None),
    ("empty value", b"", "not valid JSON", None),
    ("10 MB value", b'{"v":1,"x":"' + b"a" * 10_000_000 + b'"}', "larger than the 262144-byte limit", None),
]


@pytest.mark.parametrize("case,raw,words,path", POISON, ids=[c[0] for c in POISON])
def test_poison_is_rejected_with_its_reason(case, raw, words, path):
    e = reason_of(raw)
    assert words in e.reason, e.reason
    assert e.path == path
    if len(raw) <= 256 * 1024:
        with pytest.raises(Exception):  # the engine's inlined fast path rejects it too
            decode_fast(raw)


def test_engine_and_validate_give_decodes_reasons():
    raws = [raw for _, raw, _, _ in POISON if raw]
    want = [reason_of(r).reason for r in raws]
    assert engine_reasons(raws) == want
    out = io.BytesIO()
    good, bad = validate_lines(io.BytesIO(b"\n".join(raws) + b"\n"), out)
    assert (good, bad) == (0, len(raws))
    assert [orjson.loads(ln)["reason"] for ln in out.getvalue().splitlines()] == want


def test_worker_decode_gives_exactly_one_dead_letter_per_invalid_record():
    """The worker's batch decode (agents.decode_events): every invalid record of a mixed batch
    (each poison case, a null value, random bytes) gives one bounded dead letter with decode's
    reason and its own offset; the valid records pass in order."""
    from types import SimpleNamespace

    from faultline.streams.agents import decode_events

    valid = [orjson.dumps(example("gpu.xid", id=f"ok{i}", ts=TS + i)) for i in range(3)]
    invalid = [raw for _, raw, _, _ in POISON] + [None, b"\x00\x01\x02", b"null", b"[]", b"{}"]
    values = invalid[:5] + valid[:1] + invalid[5:20] + valid[1:] + invalid[20:]
    batch = [SimpleNamespace(value=v, topic="fl.gpu", partition=1, offset=n) for n, v in enumerate(values)]
    ok, dead = decode_events(batch, {"fl.gpu": "gpu"})
    assert [ev.id for ev, _ in ok] == ["ok0", "ok1", "ok2"]
    assert len(dead) == len(invalid)
    recs = [orjson.loads(d) for d in dead]
    assert all(len(d) <= MAX_DEADLETTER_BYTES for d in dead)
    assert sorted(r["offset"] for r in recs) == [n for n, v in enumerate(values) if v not in valid]
    for r in recs:
        v = values[r["offset"]]
        assert r["reason"] == ("empty message (null value)" if v is None else reason_of(v).reason)
        assert r["size"] == len(v or b"") and r["topic"] == "fl.gpu" and r["partition"] == 1


@pytest.mark.parametrize("literal,want", [
    (b"-0", 0), (str(INT64_MAX).encode(), INT64_MAX), (b"0", 0),
])
def test_counter_edges_accepted(literal, want):
    ev = decode(raw_with("net.port", "data.in_octets", literal))
    assert ev.data.in_octets == want
    msgspec.msgpack.encode(ev)


def test_signed_edges_accepted():
    for v in (INT64_MIN, INT64_MAX):
        ev = decode(raw_with("gpu.xid", "data.pid", str(v).encode()))
        assert ev.data.pid == v
    ev = decode(raw_with("sched.job", "data.start_ts", str(MAX_EPOCH_MS).encode()))
    assert ev.data.start_ts == MAX_EPOCH_MS


@pytest.mark.parametrize("literal,want", [
    (b"-0.0", 0.0), (b"1e308", 1e308), (b"-1.7976931348623157e308", -1.7976931348623157e308),
    (b"5e-324", 5e-324), (b"1e-400", 0.0), (BIG, float(2**70)), (b"0e99999999999", 0.0),
])
def test_finite_float_edges_accepted_and_reencoded(literal, want):
    ev = decode(raw_with("gpu.sample", "data.temp_c", literal))
    assert ev.data.temp_c == want
    assert decode(encode(ev)) == ev
    orjson.dumps(to_dict(ev))


@pytest.mark.parametrize("literal", [BIG, b"1e400", b'"\\u0000"', b"[" * 200 + b"]" * 200, str(-(2**80)).encode()])
def test_unknown_fields_are_skipped_unread(literal):
    """msgspec skips unknown fields without converting them: a 2^70 or 1e400 there cannot fail
    a later encode (the typed event does not hold it). Non-UTF-8 and NaN there are rejected
    (cases above); deep nesting only past a depth the worker's stack always allows."""
    ev = decode(with_extra("gpu.sample", literal))
    msgspec.msgpack.encode(ev)
    assert decode(encode(ev)) == ev


def test_duplicate_keys_last_one_wins_everywhere():
    """JSON allows duplicate keys; decode, orjson and the engine all take the last one."""
    raw = orjson.dumps(example("gpu.xid", ts=TS))[:-1] + b',"ts":%d}' % (TS + 5)
    assert decode(raw).ts == TS + 5 == orjson.loads(raw)["ts"]


# ---------------------------------------------------------------- accepted => re-encodes everywhere

INT_EDGES = [0, 1, -1, INT64_MIN, INT64_MIN - 1, INT64_MAX, INT64_MAX + 1, 2**64 - 1, 2**64, 2**70, -(2**70),
             MAX_EPOCH_MS, MAX_EPOCH_MS + 1]
ints = st.one_of(st.sampled_from(INT_EDGES), st.integers(-(2**66), 2**66))
floats = st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([1e308, -1e308, 5e-324, -0.0]))
INT_FIELDS = {
    "gpu.sample": ["data.gpu", "data.ecc_sbe", "data.ecc_dbe", "data.nvlink_errors", "data.pcie_replay",
                   "data.retired_pages", "data.remapped_rows_pending"],
    "gpu.xid": ["data.xid", "data.gpu", "data.pid"],
    "net.port": ["data.speed_mbps", "data.in_errors", "data.out_errors", "data.in_discards", "data.out_discards",
                 "data.in_octets", "data.out_octets"],
    "net.rdma": ["data.port"],
    "sched.job": ["data.attempt", "data.gpus", "data.exit_code", "data.signal", "data.start_ts", "data.end_ts"],
    "runtime.log": ["data.rank"],
    "runtime.progress": ["data.step", "data.rank"],
    "runtime.checkpoint": ["data.step", "data.bytes"],
    "runtime.container": ["data.exit_code"],
}
FLOAT_FIELDS = {
    "gpu.sample": ["data.mem_used_mib", "data.mem_total_mib", "data.temp_c", "data.power_w", "data.sm_clock_mhz"],
    "hw.sensor": ["data.value"],
    "storage.sample": ["data.read_iops", "data.write_iops", "data.read_mbps", "data.write_mbps",
                       "data.read_lat_ms", "data.write_lat_ms", "data.queue_depth"],
    "runtime.progress": ["data.step_time_s", "data.samples_per_s"],
    "runtime.checkpoint": ["data.duration_s"],
}


@st.composite
def mutated(draw):
    """One example event with one int field (or the envelope ts) or float field set to an edge."""
    if draw(st.booleans()):
        kind = draw(st.sampled_from(sorted(INT_FIELDS)))
        path = draw(st.sampled_from(INT_FIELDS[kind] + ["ts"]))
        lit = str(draw(ints)).encode()
    else:
        kind = draw(st.sampled_from(sorted(FLOAT_FIELDS)))
        path = draw(st.sampled_from(FLOAT_FIELDS[kind]))
        lit = orjson.dumps(draw(floats))
    if kind == "net.rdma" and draw(st.booleans()):
        path, lit = "data.counters", b'{"rx":%d,"tx":%d}' % (draw(ints), draw(ints))
    return kind, raw_with(kind, path, lit, ts=TS)


def _shared() -> Shared:
    data: dict = {}
    return Shared(data, lambda k, v: data.__setitem__(k, v) if v is not None else data.pop(k, None))


def _through_the_worker_state(evs) -> None:
    """Feed the events to the worker's two sides and dump every state they touched."""
    shared = _shared()
    ns, js = NodeSide(shared, EngineConfig()), JobSide(shared, EngineConfig())
    job_events = []
    for ev in evs:
        if ev.kind in NODE_KINDS or ev.kind in INV_KINDS:
            key = key_for(ev).decode()
            if key not in ns.nodes:
                ns.load(key, None)
            ns.feed(key, ev)
        else:
            job_events.append(ev)
    ns.flush_shared()
    for k in list(ns.dirty):
        msgspec.msgpack.encode(ns.dump(k))
    js.ingest(job_events, TS + 10 * 3_600_000)
    js.close_windows()
    js.flush_shared()
    for j in list(js.dirty):
        if j in js.jobs or j in js.fences:
            js.dump(j)
    sigs, outs = js.take()
    for rec in sigs + outs:
        encode(rec)
        msgspec.msgpack.encode(rec)


@hsettings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mutated(), min_size=1, max_size=3))
def test_whatever_decode_accepts_reencodes_and_dumps(cases):
    accepted = []
    for i, (kind, raw) in enumerate(cases):
        try:
            ev = decode(raw)
        except ContractError as e:
            assert e.reason
            if "in the future" not in e.reason:  # the one rule decode_fast leaves to its caller
                with pytest.raises(Exception):
                    decode_fast(raw)
            continue
        assert decode_fast(raw) == ev
        wire = encode(ev)
        assert decode(wire) == ev
        msgspec.msgpack.decode(msgspec.msgpack.encode(ev))
        orjson.dumps(to_dict(ev))
        # successive samples of one subject: counter deltas and resets between edge values
        accepted.append(msgspec.structs.replace(ev, id=f"{ev.id}-{i}", ts=ev.ts + i * 1000))
    _through_the_worker_state(accepted)


def test_counter_swings_between_the_edges_dump():
    """A counter from 0 to 2^63-1 and back (a reset) on a port and a GPU: deltas and sums
    stay inside msgpack's range in the node state."""
    evs = []
    for i, v in enumerate([0, INT64_MAX, 0, INT64_MAX, INT64_MAX]):
        for kind, fields in (("net.port", ("in_errors", "out_errors", "in_discards", "out_discards")),
                             ("gpu.sample", ("ecc_sbe", "ecc_dbe", "nvlink_errors", "pcie_replay", "retired_pages"))):
            d = example(kind, ts=TS + i * 30_000, id=f"{kind}-{i}")
            d["data"].update({f: v for f in fields})
            evs.append(decode(orjson.dumps(d)))
    _through_the_worker_state(evs)


# ---------------------------------------------------------------- dead letters

@pytest.mark.parametrize("raw", [b"", None, b"x" * 10, b"\xff" * (DEADLETTER_RAW_BYTES + 1), b"a" * 10_000_000,
                                 "text with a lone surrogate \udcff", bytearray(b"ba"), memoryview(b"mv")])
def test_dead_letter_is_bounded_and_describes_the_raw(raw):
    reason = "\x01" * 2_000_000  # worst case: orjson writes a control character as 6 bytes
    blob = dead_letter(raw, reason, "t" * 100_000, 3, 2**62, ts=1)
    assert len(blob) <= MAX_DEADLETTER_BYTES
    rec = orjson.loads(blob)
    b = b"" if raw is None else raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else bytes(raw)
    assert rec["size"] == len(b)
    assert rec["sha256"] == hashlib.sha256(b).hexdigest()
    assert base64.b64decode(rec["raw_b64"]) == b[:DEADLETTER_RAW_BYTES]
    assert rec["raw_truncated"] == (len(b) > DEADLETTER_RAW_BYTES)
    assert len(rec["reason"]) <= bounds.MAX_REASON_CHARS and rec["reason"].startswith("\x01")
    assert (rec["partition"], rec["offset"], rec["ts"]) == (3, 2**62, 1)


@hsettings(max_examples=200, deadline=None)
@given(st.binary(max_size=20_000), st.text(max_size=3_000))
def test_any_dead_letter_is_bounded(raw, reason):
    blob = dead_letter(raw, reason, "fl.gpu", 0, 0)
    assert len(blob) <= MAX_DEADLETTER_BYTES
    assert orjson.loads(blob)["size"] == len(raw)


# ---------------------------------------------------------------- output caps

def _incident(n_ev=10, n_hyp=3, n_nodes=4, text="x", ids=5) -> Incident:
    ev = [EvidenceItem(id=f"e{i:05d}", ts=TS + i, layer="gpu", node=f"n{i}", summary=text) for i in range(n_ev)]
    cause = Cause(category="gpu_hardware", component="gpu:n1/3", summary=text, confidence=0.9,
                  evidence=[f"e{i}" for i in range(ids)])
    nodes = [f"node-{i:05d}" for i in range(n_nodes)]
    return Incident(id="inc-1", revision=1, job="j1", attempt=0, tenant=None, failure_ts=TS, symptom=text,
                    root_cause=cause, hypotheses=[cause] * n_hyp, ruled_out=["hw"], evidence=ev,
                    affected=Affected(nodes=nodes, gpus=nodes, ports=nodes, paths=nodes),
                    retry=Retry(attempt=1, state="running", ts=TS, nodes=nodes, same_nodes=True))


def test_normal_records_come_back_unchanged():
    i = _incident()
    assert bounds.cap_incident(i) is i
    a = Alert(id="a", ts=TS, severity="warning", detector="d", summary="s", evidence=["e"] * 10)
    assert bounds.cap_alert(a) is a
    f = Finding(id="f", ts=TS, kind="repeat_offender", dimension="node", subject="n1", window_start=0,
                window_end=1, count=3, exposure=1.0, exposure_unit="gpu_hours", fleet_rate=0.1, score=0.01,
                summary="s", action="drain", incidents=["i"] * 10)
    assert bounds.cap_finding(f) is f
    s = Signal(id="s", ts=TS, layer="gpu", kind="xid", subject="gpu:n1/0", node="n1", severity="critical",
               summary="s", evidence=["e"], data={"xid": 79, "reasons": ["a", "b"], "path": "/x"})
    assert bounds.cap_signal(s) is s
    assert bounds.encode_output(a, "fl.alerts") == ("fl.alerts", encode(a))


def test_incident_caps_count_what_they_leave_out():
    i = _incident(n_ev=5_000, n_hyp=100, n_nodes=3_000, text="y" * 50_000, ids=400)
    c = bounds.cap_incident(i)
    assert len(encode(c)) <= bounds.MAX_OUTPUT_BYTES
    assert c.omitted["evidence"] == 5_000 - len(c.evidence) > 0
    assert c.omitted["hypotheses"] == 100 - len(c.hypotheses) > 0
    assert c.omitted["affected.nodes"] == 3_000 - len(c.affected.nodes) > 0
    assert c.omitted["retry.nodes"] == 3_000 - len(c.retry.nodes) > 0
    assert c.omitted["symptom"] == 50_000 - len(c.symptom) + 1
    assert c.evidence == [msgspec.structs.replace(e, summary=e.summary[: len(c.evidence[0].summary) - 1] + "\u2026")
                          for e in i.evidence[: len(c.evidence)]]   # the head is kept, in order
    assert c.affected.nodes == i.affected.nodes[: len(c.affected.nodes)]
    assert (c.root_cause.category, c.root_cause.component) == (i.root_cause.category, i.root_cause.component)
    assert msgspec.json.decode(encode(c), type=Incident) == c  # the field is part of the record


def test_incident_of_huge_names_shrinks_until_it_fits():
    name = "n" * 100_000
    i = _incident(n_ev=200, n_nodes=1_000, text="z" * 900)
    i = msgspec.structs.replace(i, affected=Affected(nodes=[name + str(k) for k in range(1_000)]))
    c = bounds.cap_incident(i)
    assert len(encode(c)) <= bounds.MAX_OUTPUT_BYTES
    assert c.omitted["affected.nodes"] > 0


def test_alert_finding_signal_caps():
    a = bounds.cap_alert(Alert(id="a", ts=TS, severity="info", detector="d", summary="s" * 5_000,
                               node="n" * 10_000, evidence=[f"e{i}" for i in range(1_000)]))
    assert len(a.evidence) == bounds.MAX_ALERT_EVIDENCE and a.omitted["evidence"] == 1_000 - bounds.MAX_ALERT_EVIDENCE
    assert len(a.summary) == bounds.MAX_TEXT_CHARS and a.omitted["summary"] == 5_000 - bounds.MAX_TEXT_CHARS + 1
    assert len(a.node) == bounds.MAX_NAME_CHARS
    f = bounds.cap_finding(Finding(id="f", ts=TS, kind="repeat_offender", dimension="node", subject="n1",
                                   window_start=0, window_end=1, count=3, exposure=1.0, exposure_unit="gpu_hours",
                                   fleet_rate=0.1, score=0.01, summary="s", action="drain",
                                   incidents=[f"i{k}" for k in range(2_000)]))
    assert f.omitted == {"incidents": 2_000 - bounds.MAX_FINDING_INCIDENTS}
    s = bounds.cap_signal(Signal(id="s", ts=TS, layer="runtime", kind="log:x", subject="job:1", node=None,
                                 severity="warning", summary="m" * 3_000, evidence=[f"e{k}" for k in range(500)],
                                 data={"error": "E" * 10_000, "ranks": list(range(1_000)), "xid": 79}))
    assert s.data["omitted"] == {"evidence": 400, "summary": 3_000 - bounds.MAX_TEXT_CHARS + 1,
                                 "data.error": 10_000 - bounds.MAX_ITEM_TEXT_CHARS + 1, "data.ranks": 900}
    assert s.data["xid"] == 79 and s.data["ranks"] == list(range(100))


def test_guard_dead_letters_an_oversized_output():
    big = b'{"id":"x","summary":"' + b"s" * (bounds.MAX_OUTPUT_BYTES + 1) + b'"}'
    topic, value = bounds.guard_output("fl.incidents", big)
    assert topic == DEADLETTER
    rec = orjson.loads(value)
    assert rec["topic"] == "fl.incidents" and rec["size"] == len(big) and "output bound" in rec["reason"]
    assert len(value) <= MAX_DEADLETTER_BYTES


def test_correlate_caps_a_job_on_thousands_of_nodes():
    """The incident the engine builds for a job on 3,000 nodes lists 1,024 and counts the rest;
    its diagnosis is the one of the uncapped job."""
    nodes = [f"gpu-{k:05d}" for k in range(3_000)]
    lines = [orjson.dumps(example("sched.job", id="s0", ts=TS, job="77",
                                  data={"state": "running", "attempt": 0, "nodes": nodes, "gpus": 8 * len(nodes),
                                        "start_ts": TS})),
             orjson.dumps(example("sched.job", id="s1", ts=TS + 600_000, job="77",
                                  data={"state": "failed", "attempt": 0, "nodes": nodes, "gpus": 8 * len(nodes),
                                        "start_ts": TS, "end_ts": TS + 600_000, "exit_code": 1}))]
    eng = Engine(EngineConfig())
    eng.process(lines)
    eng.finish()
    incs = eng.incidents()
    assert incs
    inc = incs[-1]
    assert len(inc.affected.nodes) == bounds.MAX_AFFECTED
    assert inc.omitted["affected.nodes"] == 3_000 - bounds.MAX_AFFECTED
    assert inc.lost_gpu_hours == pytest.approx(8 * 3_000 * 600_000 / 3_600_000)
    assert len(encode(inc)) <= bounds.MAX_OUTPUT_BYTES


@pytest.mark.parametrize("field", ["attempt", "failure_ts", "revision", "start_ts"])
def test_output_decoders_reject_a_foreign_64_bit_overflow(field):
    """A record on an output topic with a 2^70 is refused by its decoder (the sink and the
    findings agent decode fl.incidents with the Incident model), as an input event would be."""
    wire = encode(_incident()).replace(b'"%s":' % field.encode(), b'"%s":%s,"_":' % (field.encode(), BIG), 1)
    with pytest.raises(msgspec.ValidationError, match="<= 9223372036854775807"):
        msgspec.json.decode(wire, type=Incident)
    msgspec.json.decode(encode(_incident()), type=Incident)


@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n_ev=st.integers(0, 3_000), n_hyp=st.integers(0, 60), n_nodes=st.integers(0, 4_000),
       text=st.integers(0, 20_000), ids=st.integers(0, 300), name=st.integers(1, 3_000))
def test_any_incident_caps_to_the_bound_and_counts_exactly(n_ev, n_hyp, n_nodes, text, ids, name):
    i = _incident(n_ev=n_ev, n_hyp=n_hyp, n_nodes=n_nodes, text="\u00e9" * text, ids=ids)
    i = msgspec.structs.replace(i, affected=msgspec.structs.replace(
        i.affected, paths=["/" + "p" * name + str(k) for k in range(n_nodes)]))
    c = bounds.cap_incident(i)
    assert len(encode(c)) <= bounds.MAX_OUTPUT_BYTES
    for field, before, after in (("evidence", i.evidence, c.evidence), ("hypotheses", i.hypotheses, c.hypotheses),
                                 ("affected.nodes", i.affected.nodes, c.affected.nodes),
                                 ("affected.paths", i.affected.paths, c.affected.paths),
                                 ("retry.nodes", i.retry.nodes, c.retry.nodes)):
        assert len(after) + c.omitted.get(field, 0) == len(before), field
    assert bounds.cap_incident(c) == c  # idempotent: a recovered incident is not cut again
    assert (c.id, c.revision, c.root_cause.category, c.root_cause.component, c.lost_gpu_hours) == \
        (i.id, i.revision, i.root_cause.category, i.root_cause.component, i.lost_gpu_hours)


def test_poison_among_valid_traffic_changes_no_incident():
    """The diagnose path (Engine, the composition the worker runs): every poison case spliced
    into a scenario's events is counted invalid once, with decode's reason, and the incidents
    are those of the clean events."""
    from faultline.producers.simulate import simulate

    lines, _ = simulate("gpu-xid79", seed=1, nodes=4, start_ms=1_790_000_000_000)

    def diagnose(raws):
        eng = Engine(EngineConfig())
        eng.process(raws)
        eng.finish()
        return eng, {i.id: (i.root_cause.category, i.root_cause.component, i.lost_gpu_hours, i.omitted)
                     for i in eng.incidents()}

    _, want = diagnose(lines)
    assert want
    poison = [raw for _, raw, _, _ in POISON]
    step = max(1, len(lines) // len(poison))
    mixed = list(lines)
    for k, raw in enumerate(poison):
        mixed.insert(k * (step + 1), raw)
    eng, got = diagnose(mixed)
    assert got == want
    assert eng.stats.invalid == len(poison)
    assert sorted(r for _, r in eng.errors) == sorted(reason_of(r).reason for r in poison)
