"""`faultline schema export DIR`: the JSON Schemas accept the examples and reject what decode rejects."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import msgspec
import orjson
import pytest

from faultline.schemas import KINDS, Alert, Event, Cause, Finding, Incident, dead_letter, encode
from faultline.schemas.examples import EXAMPLES, REQUIRED_DATA, example


@pytest.fixture(scope="module")
def schemas(tmp_path_factory):
    d = tmp_path_factory.mktemp("schemas")
    p = subprocess.run([sys.executable, "-m", "faultline.cli", "schema", "export", str(d)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    out = {f.name.removesuffix(".schema.json"): json.loads(f.read_text()) for f in d.glob("*.schema.json")}
    for s in out.values():
        jsonschema.Draft202012Validator.check_schema(s)
    return out


def valid(schema, doc) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(doc)


def test_one_file_per_kind_and_output(schemas):
    assert set(schemas) == set(KINDS) | {"event", "alert", "incident", "finding", "deadletter"}


@pytest.mark.parametrize("kind", KINDS)
def test_example_valid_against_its_schema_and_the_union(schemas, kind):
    assert valid(schemas[kind], EXAMPLES[kind])
    assert valid(schemas["event"], EXAMPLES[kind])
    # wire form after our own encoder too
    wire = orjson.loads(encode(msgspec.convert(EXAMPLES[kind], type=Event)))
    assert valid(schemas[kind], wire)


@pytest.mark.parametrize("kind", KINDS)
def test_schema_rejects_what_decode_rejects(schemas, kind):
    other = "gpu.xid" if kind != "gpu.xid" else "hw.sel"
    assert not valid(schemas[kind], EXAMPLES[other])
    for field in ("v", "id", "ts", "kind", "source", "data"):
        d = example(kind)
        del d[field]
        assert not valid(schemas[kind], d), field
        assert not valid(schemas["event"], d), field
    for field in REQUIRED_DATA[kind]:
        d = example(kind)
        del d["data"][field]
        assert not valid(schemas[kind], d), field
    assert not valid(schemas[kind], example(kind, v=2))
    assert not valid(schemas[kind], example(kind, id="x" * 65))
    assert not valid(schemas[kind], example(kind, ts="now"))
    assert not valid(schemas["event"], example(kind, kind="nope"))


@pytest.mark.parametrize("kind", ["gpu.xid", "hw.sensor", "storage.mount", "sched.node"])
def test_node_required_for_node_scoped(schemas, kind):
    assert not valid(schemas[kind], example(kind, node=None))
    assert not valid(schemas["event"], example(kind, node=""))


@pytest.mark.parametrize("kind", ["sched.job", "runtime.log"])
def test_job_required_for_job_scoped(schemas, kind):
    assert not valid(schemas[kind], example(kind, job=None))


def test_output_records_valid(schemas):
    cause = Cause(category="gpu_hardware", component="gpu:gpu-017/3", summary="XID 79", confidence=0.9)
    inc = Incident(id="inc-1", revision=1, job="48213", attempt=0, tenant=None, failure_ts=1,
                   symptom="nccl_timeout on rank 12", root_cause=cause)
    assert valid(schemas["incident"], orjson.loads(encode(inc)))
    bad = orjson.loads(encode(inc))
    del bad["root_cause"]
    assert not valid(schemas["incident"], bad)
    alert = Alert(id="a1", ts=1, severity="critical", detector="xid", summary="XID 79 on gpu-017/3")
    assert valid(schemas["alert"], orjson.loads(encode(alert)))
    assert not valid(schemas["alert"], {**orjson.loads(encode(alert)), "severity": "fatal"})
    f = Finding(id="f1", ts=1, kind="repeat_offender", dimension="node", subject="node:gpu-017",
                window_start=0, window_end=1, count=3, exposure=10.0, exposure_unit="gpu_hours",
                fleet_rate=0.1, score=0.01, summary="s", action="drain")
    assert valid(schemas["finding"], orjson.loads(encode(f)))
    assert valid(schemas["deadletter"], orjson.loads(dead_letter(b"\x00", "bad", "fl.gpu", 0, 1)))
    assert not valid(schemas["deadletter"], {"reason": "x"})
