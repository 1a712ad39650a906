"""``faultline schema export DIR``: one JSON Schema (draft 2020-12) per kind and output record.

The schemas are generated from the same msgspec models ``decode`` uses (integer ranges
included, as ``minimum``/``maximum``), plus the rules the models enforce in code
(``node``/``job`` required per kind). Three rules cannot be expressed in JSON Schema and
are stated in each description: ``ts`` at most 24 h in the future, 256 KiB per event, and
valid UTF-8 throughout.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import msgspec
import orjson

from ..schemas import KIND_MODELS, KIND_TOPICS, MAX_EVENT_BYTES, TOPIC_KEYS, Alert, Event, Finding, Incident
from ..schemas.codec import DEADLETTER_RAW_BYTES, MAX_DEADLETTER_BYTES, MAX_FUTURE_MS, MAX_REASON_CHARS

DRAFT = "https://json-schema.org/draft/2020-12/schema"
BASE_ID = "https://faultline.dev/schemas/v1/"

#: fl.deadletter records are built by ``schemas.dead_letter`` (plain dict, no model); bounded:
#: the raw input's first DEADLETTER_RAW_BYTES in base64, with its full size and sha256
DEADLETTER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": (f"A rejected input or an output record too large to send. At most {MAX_DEADLETTER_BYTES} "
                    f"bytes: `raw_b64` holds the first {DEADLETTER_RAW_BYTES} bytes of the raw value, `size` "
                    f"and `sha256` describe all of it, `reason` is at most {MAX_REASON_CHARS} characters."),
    "properties": {
        "ts": {"type": "integer"},
        "reason": {"type": "string", "maxLength": MAX_REASON_CHARS},
        "topic": {"type": ["string", "null"]},
        "partition": {"type": ["integer", "null"]},
        "offset": {"type": ["integer", "null"]},
        "raw_b64": {"type": "string", "contentEncoding": "base64", "maxLength": 4 * -(-DEADLETTER_RAW_BYTES // 3)},
        "size": {"type": "integer", "minimum": 0, "description": "bytes of the whole raw value"},
        "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$", "description": "of the whole raw value"},
        "raw_truncated": {"type": "boolean", "description": "raw_b64 holds only the first bytes"},
    },
    "required": ["ts", "reason", "topic", "partition", "offset", "raw_b64"],
}


def _rules() -> str:
    return (f"Also enforced by faultline's decoder: `ts` (UTC epoch ms) at most "
            f"{MAX_FUTURE_MS // 3_600_000} h in the future; at most {MAX_EVENT_BYTES} bytes per event; "
            f"valid UTF-8 throughout, unknown fields included. Integer ranges (minimum/maximum below): "
            f"every integer is a signed 64-bit int, counters, indices and steps are >= 0 and epoch-ms "
            f"times are 0..2^53-1; NaN, Infinity and numbers beyond a double's range are rejected.")


def _patch(top: dict[str, Any], kind: str) -> None:
    """Add what the model checks in code: ``node``/``job`` required for scoped kinds."""
    model = KIND_MODELS[kind]
    req = set(top.get("required", []))
    for scoped, needed in (("node", model.needs_node), ("job", model.needs_job)):
        if needed:
            top["properties"][scoped] = {"type": "string", "minLength": 1}
            req.add(scoped)
    top["required"] = sorted(req)
    top["description"] = (f"faultline contract v1, kind `{kind}` (topic `{KIND_TOPICS[kind]}`, key = "
                          f"{TOPIC_KEYS[KIND_TOPICS[kind]]}). {_rules()}")


def kind_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of one event kind (self-contained, ``$defs`` inlined)."""
    model = KIND_MODELS[kind]
    sch = msgspec.json.schema(model)
    _patch(sch["$defs"][sch["$ref"].rsplit("/", 1)[1]], kind)
    return {"$schema": DRAFT, "$id": f"{BASE_ID}{kind}.schema.json", "title": kind, **sch}


def event_schema() -> dict[str, Any]:
    """Any event of the contract: ``oneOf`` the kinds, discriminated by ``kind``."""
    sch = msgspec.json.schema(Event)
    names = {m.__name__: k for k, m in KIND_MODELS.items()}
    for name, top in sch["$defs"].items():
        if name in names:
            _patch(top, names[name])
    return {"$schema": DRAFT, "$id": f"{BASE_ID}event.schema.json", "title": "event",
            "description": f"Any faultline contract v1 event. {_rules()}", **sch}


def output_schemas() -> dict[str, dict[str, Any]]:
    out = {}
    for title, model in (("alert", Alert), ("incident", Incident), ("finding", Finding)):
        out[title] = {"$schema": DRAFT, "$id": f"{BASE_ID}{title}.schema.json", "title": title,
                      **msgspec.json.schema(model)}
    out["deadletter"] = {"$schema": DRAFT, "$id": f"{BASE_ID}deadletter.schema.json",
                         "title": "deadletter", **DEADLETTER_SCHEMA}
    return out


def export(directory: str | Path) -> list[Path]:
    """Write ``<kind>.schema.json`` per kind, ``event.schema.json`` and the output records."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    docs = {kind: kind_schema(kind) for kind in KIND_MODELS}
    docs["event"] = event_schema()
    docs.update(output_schemas())
    paths = []
    for name, doc in docs.items():
        p = d / f"{name}.schema.json"
        p.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
        paths.append(p)
    return paths


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("schema", help="export the contract as JSON Schema files", description=__doc__)
    ssub = p.add_subparsers(dest="schema_command", metavar="ACTION", required=True)
    e = ssub.add_parser("export", help="write one JSON Schema file per kind and output record into DIR")
    e.add_argument("dir", metavar="DIR")
    e.set_defaults(func=run_export)


def run_export(args: argparse.Namespace) -> int:
    from ..cli import CliError

    try:
        paths = export(args.dir)
    except OSError as e:
        raise CliError(f"cannot write schemas into {args.dir}: {e.strerror}") from None
    print(f"wrote {len(paths)} schemas into {args.dir}")
    return 0
