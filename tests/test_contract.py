"""The contract v1 as code: every kind valid and invalid, codec round trips, garbage never escapes."""

from __future__ import annotations

import base64
import hashlib

import msgspec
import orjson
import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from faultline.schemas import (
    KIND_MODELS, KIND_TOPICS, KINDS, MAX_EVENT_BYTES, ContractError, Event, dead_letter, decode,
    decode_many, encode, key_for, now_ms, to_dict, topic_for,
)
from faultline.schemas.codec import MAX_FUTURE_MS
from faultline.schemas.examples import EXAMPLE_TS, EXAMPLES, REQUIRED_DATA, REQUIRED_ENVELOPE, example

NODE_SCOPED = [k for k, m in KIND_MODELS.items() if m.needs_node]
JOB_SCOPED = [k for k, m in KIND_MODELS.items() if m.needs_job]


def reject(obj, *, raw: bytes | None = None) -> ContractError:
    with pytest.raises(ContractError) as ei:
        decode(orjson.dumps(obj) if raw is None else raw)
    assert ei.value.reason
    return ei.value


# ---------------------------------------------------------------- valid examples

def test_examples_cover_every_kind():
    assert set(EXAMPLES) == set(KINDS) and len(KINDS) == 18


@pytest.mark.parametrize("kind", KINDS)
def test_valid_example_decodes(kind):
    ev = decode(orjson.dumps(EXAMPLES[kind]))
    assert ev.kind == kind
    assert isinstance(ev, KIND_MODELS[kind])
    assert ev.ts == EXAMPLE_TS and ev.id == EXAMPLES[kind]["id"]
    assert topic_for(ev) == KIND_TOPICS[kind]
    # every field of the example survives into the model and back out
    out = to_dict(ev)
    for k, v in EXAMPLES[kind].items():
        assert out[k] == v, k
    assert decode(encode(ev)) == ev


@pytest.mark.parametrize("kind", KINDS)
def test_unknown_extra_fields_are_ignored(kind):
    # inventory.versions data is an open component -> version map: extra keys are data
    extra = {} if kind == "inventory.versions" else {"future_field": "x"}
    d = example(kind, extra_field={"nested": [1, 2]}, data=extra)
    assert decode(orjson.dumps(d)) == decode(orjson.dumps(EXAMPLES[kind]))


def test_nullable_measurements_may_be_null():
    d = example("gpu.sample", data={k: None for k in ("util_pct", "temp_c", "power_w", "ecc_dbe")})
    ev = decode(orjson.dumps(d))
    assert ev.data.util_pct is None and ev.data.ecc_dbe is None


def test_keys_follow_the_contract():
    ev = {k: decode(orjson.dumps(EXAMPLES[k])) for k in KINDS}
    assert key_for(ev["gpu.xid"]) == b"gpu-017"
    assert key_for(ev["sched.job"]) == b"48213"
    assert key_for(ev["runtime.log"]) == b"48213"
    assert key_for(ev["net.port"]) == b"gpu-017"
    assert key_for(ev["net.link"]) == b"leaf-03"  # no node: the switch name
    assert key_for(ev["inventory.topology"]) == b"gpu-017"


# ---------------------------------------------------------------- invalid: required fields

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("field", REQUIRED_ENVELOPE)
def test_missing_envelope_field(kind, field):
    d = example(kind)
    del d[field]
    err = reject(d)
    assert field in err.reason
    assert err.path == f"$.{field}"


@pytest.mark.parametrize("kind,field", [(k, f) for k in KINDS for f in REQUIRED_DATA[k]])
def test_missing_data_field(kind, field):
    d = example(kind)
    del d["data"][field]
    err = reject(d)
    assert f"`{field}`" in err.reason
    assert err.path == f"$.data.{field}"


@pytest.mark.parametrize("kind", NODE_SCOPED)
@pytest.mark.parametrize("value", [None, ""])
def test_node_scoped_kind_needs_node(kind, value):
    err = reject(example(kind, node=value))
    assert err.path == "$.node" and err.reason.startswith("Expected `str`")
    d = example(kind)
    del d["node"]
    assert reject(d).reason == "Object missing required field `node`"


@pytest.mark.parametrize("kind", JOB_SCOPED)
def test_job_scoped_kind_needs_job(kind):
    err = reject(example(kind, job=None))
    assert err.path == "$.job" and err.reason == "Expected `str`, got `null` - at `$.job`"
    assert reject(example(kind, job="")).path == "$.job"


# ---------------------------------------------------------------- invalid: types and values

ENVELOPE_WRONG = [
    ("v", 2), ("v", "1"), ("v", True),
    ("id", ""), ("id", "x" * 65), ("id", 17),
    ("ts", "1764000000000"), ("ts", 1.7e12), ("ts", True), ("ts", None),
    ("source", None), ("source", 5),
    ("node", 5), ("job", 48213), ("tenant", ["a"]),
    ("data", []), ("data", "x"), ("data", None),
]


@pytest.mark.parametrize("kind", ["gpu.xid", "sched.job", "net.link"])
@pytest.mark.parametrize("field,value", ENVELOPE_WRONG)
def test_wrong_envelope_type(kind, field, value):
    d = example(kind)
    d[field] = value
    err = reject(d)
    assert err.path == f"$.{field}", err.reason


DATA_WRONG = [
    ("gpu.sample", "gpu", -1), ("gpu.sample", "gpu", "3"), ("gpu.sample", "util_pct", 101),
    ("gpu.sample", "throttle", ["overheat"]), ("gpu.sample", "throttle", "sw_thermal"),
    ("gpu.sample", "ecc_dbe", -2), ("gpu.sample", "temp_c", "hot"),
    ("gpu.xid", "xid", "79"), ("gpu.xid", "gpu", 1.5), ("gpu.xid", "message", None),
    ("hw.sensor", "type", "humidity"), ("hw.sensor", "status", "bad"), ("hw.sensor", "value", "48"),
    ("hw.sel", "severity", "fatal"),
    ("net.port", "oper_status", "testing"), ("net.port", "in_errors", -1), ("net.port", "speed_mbps", 1.5),
    ("net.link", "state", 1),
    ("net.rdma", "port", "1"), ("net.rdma", "counters", {"link_downed": -1}), ("net.rdma", "counters", [1]),
    ("storage.sample", "used_pct", 150.0), ("storage.sample", "path", 7),
    ("storage.mount", "state", "broken"),
    ("sched.job", "state", "exploded"), ("sched.job", "attempt", -1), ("sched.job", "nodes", "gpu-017"),
    ("sched.job", "gpus", None), ("sched.job", "ranks", {"0": 5}),
    ("sched.node", "state", "up"),
    ("runtime.log", "stream", "syslog"), ("runtime.log", "rank", "12"),
    ("runtime.progress", "step", -5), ("runtime.progress", "step_time_s", "fast"),
    ("runtime.checkpoint", "phase", "done"), ("runtime.checkpoint", "bytes", -1),
    ("runtime.container", "event", "paused"),
    ("inventory.change", "to", None),
    ("inventory.topology", "links", [{"nic": "mlx5_0"}]), ("inventory.topology", "storage", "x"),
]


@pytest.mark.parametrize("kind,field,value", DATA_WRONG)
def test_wrong_data_value(kind, field, value):
    err = reject(example(kind, data={field: value}))
    assert err.path and err.path.startswith(f"$.data.{field}"), (err.reason, err.path)


def test_inventory_versions_values_are_strings():
    err = reject(example("inventory.versions", data={"driver": 570}))
    assert err.path.startswith("$.data")


@pytest.mark.parametrize("kind", ["nope", "gpu", "GPU.XID", "gpu.xid ", "", None, 5])
def test_unknown_kind(kind):
    err = reject(example("gpu.xid", kind=kind))
    assert err.path == "$.kind"
    if isinstance(kind, str):
        assert err.reason.startswith("unknown kind")


def test_future_ts_limit():
    now = now_ms()
    ok = example("gpu.xid", ts=now + MAX_FUTURE_MS - 1000)
    assert decode(orjson.dumps(ok), now=now).ts == ok["ts"]
    bad = example("gpu.xid", ts=now + MAX_FUTURE_MS + 1000)
    with pytest.raises(ContractError) as ei:
        decode(orjson.dumps(bad), now=now)
    assert ei.value.path == "$.ts" and "future" in ei.value.reason
    # default clock is the wall clock
    with pytest.raises(ContractError):
        decode(orjson.dumps(example("gpu.xid", ts=now_ms() + 2 * MAX_FUTURE_MS)))


def test_oversize_rejected_before_parsing():
    base = orjson.dumps(example("runtime.log", data={"message": ""}))
    pad = MAX_EVENT_BYTES - len(base)
    ok = orjson.dumps(example("runtime.log", data={"message": "m" * (pad - 20)}))
    assert len(ok) <= MAX_EVENT_BYTES and decode(ok)
    big = orjson.dumps(example("runtime.log", data={"message": "m" * (pad + 10)}))
    err = reject(None, raw=big)
    assert "larger than" in err.reason and str(MAX_EVENT_BYTES) in err.reason
    # oversize garbage is rejected for its size, not parsed
    assert "larger than" in reject(None, raw=b"[" * (MAX_EVENT_BYTES + 1)).reason


@pytest.mark.parametrize("raw,word", [
    (b"", "JSON"), (b"   ", "JSON"), (b"{", "JSON"), (b"\xff\xfe\x00", "JSON"), (b"nul", "JSON"),
    (b"[]", "object"), (b"1", "object"), (b"null", "object"), (b'"s"', "object"),
    ('{"id": "\ud800"}', "UTF-8"),
])
def test_not_json_or_not_object(raw, word):
    assert word in reject(None, raw=raw).reason


def test_accepts_str_bytearray_memoryview():
    raw = orjson.dumps(EXAMPLES["gpu.xid"])
    ref = decode(raw)
    assert decode(raw.decode()) == ref == decode(bytearray(raw)) == decode(memoryview(raw))


def test_decode_many_keeps_order_and_errors():
    good = orjson.dumps(EXAMPLES["gpu.xid"])
    out = list(decode_many([good, b"junk", good]))
    assert [type(x).__name__ for x in out] == ["GpuXid", "ContractError", "GpuXid"]


def test_dead_letter_record_keeps_raw_bytes():
    raw = b"\x00\xffnot json"
    rec = orjson.loads(dead_letter(raw, "not valid JSON", topic="fl.gpu", partition=2, offset=99, ts=5))
    assert rec == {"ts": 5, "reason": "not valid JSON", "topic": "fl.gpu", "partition": 2,
                   "offset": 99, "raw_b64": base64.b64encode(raw).decode(),
                   "size": len(raw), "sha256": hashlib.sha256(raw).hexdigest(), "raw_truncated": False}


# ---------------------------------------------------------------- properties (hypothesis)

_text = st.text(min_size=1, max_size=20)
_opt_num = st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False, width=32))
_cnt = st.one_of(st.none(), st.integers(0, 2**53))


def _vary(kind: str, draw) -> dict:
    """A valid event of ``kind``: the example with drawn envelope values and data values."""
    d = example(kind, id=draw(st.text(min_size=1, max_size=64)),
                ts=draw(st.integers(0, EXAMPLE_TS)), source=draw(_text),
                tenant=draw(st.one_of(st.none(), _text)))
    if not KIND_MODELS[kind].needs_node:
        d["node"] = draw(st.one_of(st.none(), _text))
    data = d["data"]
    if kind == "gpu.sample":
        data.update(gpu=draw(st.integers(0, 15)), util_pct=draw(st.one_of(st.none(), st.floats(0, 100))),
                    temp_c=draw(_opt_num), ecc_dbe=draw(_cnt),
                    throttle=draw(st.lists(st.sampled_from(["hw_slowdown", "sw_thermal", "hw_thermal",
                                                             "power_brake", "sw_power_cap"]), max_size=3)))
    elif kind == "gpu.xid":
        data.update(xid=draw(st.integers(0, 200)), message=draw(st.text(max_size=200)),
                    gpu=draw(st.one_of(st.none(), st.integers(0, 15))), pid=draw(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1))))
    elif kind == "hw.sensor":
        data.update(value=draw(_opt_num), type=draw(st.sampled_from(["temperature", "fan", "voltage", "power", "current", "other"])))
    elif kind == "net.port":
        data.update(port=draw(_text), in_errors=draw(_cnt), oper_status=draw(st.sampled_from(["up", "down"])))
    elif kind == "net.rdma":
        data.update(counters=draw(st.dictionaries(_text, st.integers(0, 2**63 - 1), max_size=5)))
    elif kind == "sched.job":
        data.update(state=draw(st.sampled_from(["pending", "running", "completed", "failed", "node_fail", "timeout",
                                                 "out_of_memory", "cancelled", "preempted", "requeued"])),
                    attempt=draw(st.integers(0, 50)), nodes=draw(st.lists(_text, max_size=8)),
                    ranks=draw(st.dictionaries(st.integers(0, 512).map(str), st.one_of(st.none(), _text), max_size=8)))
    elif kind == "runtime.log":
        data.update(message=draw(st.text(max_size=500)), rank=draw(st.one_of(st.none(), st.integers(-1, 4096))))
    elif kind == "runtime.progress":
        data.update(step=draw(st.integers(0, 10**9)), step_time_s=draw(_opt_num))
    elif kind == "inventory.versions":
        d["data"] = draw(st.dictionaries(_text, st.text(max_size=30), max_size=12))
    elif kind == "inventory.change":
        data.update({"from": draw(st.one_of(st.none(), _text)), "to": draw(_text)})
    return d


@st.composite
def valid_events(draw):
    return _vary(draw(st.sampled_from(KINDS)), draw)


@hsettings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_events())
def test_roundtrip_generated_valid_events(d):
    ev = decode(orjson.dumps(d))
    assert ev.kind == d["kind"]
    wire = encode(ev)
    assert decode(wire) == ev
    assert msgspec.convert(orjson.loads(wire), Event) == ev
    # floats survive the wire exactly
    if ev.kind == "gpu.sample" and d["data"]["temp_c"] is not None:
        assert ev.data.temp_c == d["data"]["temp_c"]


def _must_not_escape(raw) -> None:
    try:
        decode(raw)
    except ContractError as e:
        assert isinstance(e.reason, str) and e.reason
    # anything else raised fails the test


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda kids: st.lists(kids, max_size=5) | st.dictionaries(st.text(max_size=8), kids, max_size=5),
    max_leaves=20,
)


@hsettings(max_examples=500, deadline=None)
@given(st.binary(max_size=2000))
def test_random_bytes_never_escape(raw):
    _must_not_escape(raw)


@hsettings(max_examples=300, deadline=None)
@given(json_values)
def test_random_json_never_escapes(value):
    _must_not_escape(orjson.dumps(value))


@hsettings(max_examples=200, deadline=None)
@given(st.sampled_from(KINDS), st.sampled_from(["v", "id", "ts", "kind", "source", "node", "job", "data"]), json_values)
def test_mutated_events_never_escape(kind, field, value):
    d = example(kind)
    d[field] = value
    _must_not_escape(orjson.dumps(d))


@hsettings(max_examples=200, deadline=None)
@given(st.sampled_from(KINDS), st.data())
def test_mutated_data_fields_never_escape(kind, data):
    d = example(kind)
    if isinstance(d["data"], dict) and d["data"]:
        key = data.draw(st.sampled_from(sorted(d["data"])))
        d["data"][key] = data.draw(json_values)
    _must_not_escape(orjson.dumps(d))


@hsettings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_random_text_never_escapes(text):
    _must_not_escape(text)
    _must_not_escape(text.encode("utf-8", "surrogatepass"))


@pytest.mark.parametrize("raw", [
    b'{"v":1,"ts":1e400}', b'{"ts":99999999999999999999999999999}', b'{"ts":-1e400}',
    b'{"v":NaN}', b'{"v":Infinity}', b'{"v":1}' * 1000, b'\xef\xbb\xbf{}', b'{"a":"\\ud800"}',
    b'{"id":"\\u0000"}', b"\x00" * 100,
])
def test_odd_json_never_escapes(raw):
    _must_not_escape(raw)


@pytest.mark.parametrize("depth", [10, 1000, 100_000])
@pytest.mark.parametrize("opener,closer", [(b"[", b"]"), (b'{"a":', b"}")])
def test_deep_nesting_never_escapes(depth, opener, closer):
    body = opener * depth + b"1" + closer * depth
    _must_not_escape(body)
    ev = b'{"x":' + body + b"," + orjson.dumps(EXAMPLES["gpu.xid"])[1:]
    _must_not_escape(ev)
    _must_not_escape(opener * depth)  # unterminated


@pytest.mark.parametrize("size", [MAX_EVENT_BYTES - 1, MAX_EVENT_BYTES + 1, 10 * MAX_EVENT_BYTES])
def test_huge_lines_never_escape(size):
    _must_not_escape(b"a" * size)
    _must_not_escape(b'"' + b"a" * (size - 2) + b'"')
    _must_not_escape(b"[" + b"1," * (size // 2 - 1) + b"1]")
