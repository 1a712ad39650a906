"""The contract checker agrees with decode on the integer bounds: `faultline schema export`
states every integer field's range, and a value one past it is rejected by decode, the
exported JSON Schema and `faultline validate` alike; the bound itself is accepted by all."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest

from faultline.commands.schema import DEADLETTER_SCHEMA, kind_schema
from faultline.schemas import KINDS, ContractError, decode, dead_letter
from faultline.schemas.codec import MAX_DEADLETTER_BYTES
from faultline.schemas.events import INT64_MAX, INT64_MIN, MAX_EPOCH_MS
from faultline.schemas.examples import EXAMPLE_TS, example


def _int_fields(kind: str) -> list[tuple[str, int, int]]:
    """(path, minimum, maximum) of every integer field of the kind's envelope and data, and of
    integer map values (``counters``), from the exported schema."""
    sch = kind_schema(kind)
    defs = sch["$defs"]
    top = defs[sch["$ref"].rsplit("/", 1)[1]]
    out = []

    def ints(prop):
        for alt in prop.get("anyOf", [prop]):
            if alt.get("type") == "integer":
                return alt
            add = alt.get("additionalProperties")
            if isinstance(add, dict) and add.get("type") == "integer":
                return {**add, "map": True}
        return None

    for name, prop in top["properties"].items():
        if (i := ints(prop)) is not None:
            out.append((name, i["minimum"], i["maximum"]))
    data = top["properties"]["data"]
    if "$ref" in data:
        for name, prop in defs[data["$ref"].rsplit("/", 1)[1]]["properties"].items():
            if (i := ints(prop)) is not None:
                out.append((f"data.{name}" + ("[]" if i.get("map") else ""), i["minimum"], i["maximum"]))
    return out


CASES = [(k, p, lo, hi) for k in KINDS for p, lo, hi in _int_fields(k)]


def test_every_integer_field_has_a_64_bit_range():
    assert len(CASES) >= 40
    for kind, path, lo, hi in CASES:
        assert INT64_MIN <= lo and hi <= INT64_MAX, (kind, path)
        if path in ("ts", "data.start_ts", "data.end_ts"):
            assert (lo, hi) == (0, MAX_EPOCH_MS), (kind, path)


def _doc(kind: str, path: str, value: int) -> dict:
    d = example(kind, ts=EXAMPLE_TS)
    if path == "ts":
        d["ts"] = value
    elif path.endswith("[]"):
        d["data"][path[5:-2]] = {"c": value}
    else:
        d["data"][path[5:]] = value
    return d


@pytest.mark.parametrize("kind,path,lo,hi", CASES, ids=[f"{k}:{p}" for k, p, _, _ in CASES])
def test_decode_and_schema_agree_on_the_range(kind, path, lo, hi):
    validator = jsonschema.Draft202012Validator(kind_schema(kind))
    for v in (lo - 1, hi + 1, 2**64, -(2**63) - 1, 2**70):
        if lo <= v <= hi:
            continue
        raw = json.dumps(_doc(kind, path, v)).encode()
        with pytest.raises(ContractError) as ei:
            decode(raw)
        where = f"$.{path[:-2]}[...]" if path.endswith("[]") else f"$.{path}"
        assert ei.value.path == where and where in ei.value.reason
        assert not validator.is_valid(_doc(kind, path, v)), (path, v)
    for v in (lo, hi) if path != "ts" else (lo, EXAMPLE_TS):   # the ts bound is held to now + 24 h as well
        decode(json.dumps(_doc(kind, path, v)).encode())
        assert validator.is_valid(_doc(kind, path, v)), (path, v)


def test_schema_export_states_the_bounds(tmp_path):
    p = subprocess.run([sys.executable, "-m", "faultline.cli", "schema", "export", str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    ev = json.loads((tmp_path / "event.schema.json").read_text())
    assert "signed 64-bit" in ev["description"] and "UTF-8" in ev["description"] and "NaN" in ev["description"]
    dl = json.loads((tmp_path / "deadletter.schema.json").read_text())
    assert str(MAX_DEADLETTER_BYTES) in dl["description"]
    rec = json.loads(dead_letter(b"\xff" * 100_000, "r" * 5_000, "fl.gpu", 0, 1))
    assert jsonschema.Draft202012Validator(DEADLETTER_SCHEMA).is_valid(rec)


def test_validate_cli_rejects_what_decode_rejects(tmp_path):
    lines = [json.dumps(_doc("gpu.sample", "data.ecc_sbe", 2**70)), json.dumps(_doc("gpu.sample", "ts", -1)),
             json.dumps(_doc("gpu.sample", "data.ecc_sbe", INT64_MAX))]
    f = tmp_path / "ev.jsonl"
    bad_utf8 = json.dumps(example("gpu.xid")).encode()[:-1] + b', "x": "\xff"}'
    f.write_bytes(("\n".join(lines) + "\n").encode() + bad_utf8 + b"\n")
    p = subprocess.run([sys.executable, "-m", "faultline.cli", "validate", str(f)], capture_output=True, timeout=60)
    assert p.returncode == 1
    out = [json.loads(ln) for ln in p.stdout.splitlines()]
    assert [o["ok"] for o in out] == [False, False, True, False]
    assert "signed 64-bit" in out[0]["reason"] and "$.ts" in out[1]["reason"]
    assert "not valid UTF-8" in out[3]["reason"]
