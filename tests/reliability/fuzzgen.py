"""Deterministic hostile input for the reliability tests (poison, fuzz, log storm).

Written from the contract (``/work/shared/spec/events.md``) alone, as an outsider would: no
decision logic was read. ``invalid(seed, n)`` gives ``n`` messages that the contract says must
be refused (each one goes to ``fl.deadletter`` with a reason), spread over every input topic
and over the categories in ``CATEGORIES``; the same seed gives byte-identical messages.
``template(kind, ...)`` builds a *valid* event of each kind, the base the invalid ones are
broken from (``tests/reliability/test_fuzz.py`` checks the templates with `faultline validate`).

Traffic helpers shared by the three F2 tests live here too: ``route`` (topic and key of a
valid line, per the contract) and ``interleave`` (invalid messages mixed into valid traffic
without changing the valid traffic's order).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Callable, Iterable

import orjson

# contract: "Input topics per layer", key node (node-scoped layers) or job (sched, runtime)
INPUT_TOPICS = ("fl.gpu", "fl.hw", "fl.net", "fl.storage", "fl.sched", "fl.runtime", "fl.inventory")
JOB_KEYED = ("fl.sched", "fl.runtime")
MAX_EVENT_BYTES = 256 * 1024            # contract: larger than 256 KiB -> dead letter
MAX_FUTURE_MS = 24 * 3600 * 1000        # contract: ts more than 24 h in the future -> dead letter
FUZZ_NODE = "fz-node"                   # node names of invalid events: never a fleet node
FUZZ_JOB = "fz-job"


@dataclass(frozen=True)
class Msg:
    """One message to produce: topic without prefix, key, value (None = a null record)."""
    topic: str
    key: bytes | None
    value: bytes | None
    category: str = "valid"


def _data(kind: str, rng: random.Random) -> dict:
    """The kind's data fields, from the contract's field list (valid values)."""
    g = rng.randrange(8)
    return {
        "gpu.sample": {"gpu": g, "uuid": f"GPU-{rng.getrandbits(64):016x}", "util_pct": rng.randrange(101),
                       "mem_used_mib": 1024, "mem_total_mib": 81559, "temp_c": 40, "power_w": 80.5,
                       "sm_clock_mhz": 1410, "throttle": [], "ecc_sbe": 0, "ecc_dbe": 0,
                       "nvlink_errors": 0, "pcie_replay": 0},
        "gpu.xid": {"gpu": g, "pci": "0000:3b:00", "xid": 13, "pid": 4242,
                    "message": "NVRM: Xid (PCI:0000:3b:00): 13, pid=4242, name=python3, Graphics "
                               "SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address"},
        "hw.sensor": {"sensor": "Inlet Temp", "type": "temperature", "value": 24.0, "unit": "C",
                      "status": "ok"},
        "hw.sel": {"entry_id": str(rng.randrange(10_000)), "severity": "ok", "sensor_type": "System Event",
                   "message_id": None, "message": "OEM System boot event"},
        "net.port": {"device": "fz-leaf", "port": "Eth1/1", "oper_status": "up", "speed_mbps": 400000,
                     "in_errors": 0, "out_errors": 0, "in_discards": 0, "out_discards": 0,
                     "in_octets": 1000, "out_octets": 1000},
        "net.link": {"device": "fz-leaf", "port": "Eth1/1", "state": "up"},
        "net.rdma": {"device": "mlx5_0", "port": 1, "counters": {"symbol_error": 0, "link_downed": 0}},
        "storage.sample": {"path": "/fz", "fs_type": "nfs", "read_iops": 10, "write_iops": 10,
                           "read_mbps": 1.0, "write_mbps": 1.0, "read_lat_ms": 1.0, "write_lat_ms": 1.0,
                           "queue_depth": 1, "used_pct": 10.0},
        "storage.mount": {"path": "/fz", "state": "ok", "error": None},
        "sched.job": {"state": "pending", "attempt": 0, "nodes": [], "gpus": 8, "ranks": {},
                      "exit_code": None, "signal": None, "image": None, "name": "fz", "user": "fz",
                      "start_ts": None, "end_ts": None, "reason": None},
        "sched.node": {"state": "idle", "reason": None},
        "runtime.log": {"rank": 0, "stream": "stdout", "message": "step 10 loss 2.1"},
        "runtime.progress": {"rank": 0, "step": 10, "step_time_s": 1.0, "samples_per_s": 100.0},
        "runtime.checkpoint": {"phase": "started", "step": 10, "path": "/fz/ckpt", "bytes": None,
                               "duration_s": None, "error": None},
        "runtime.container": {"container": "fz", "event": "exited", "exit_code": 0},
        "inventory.versions": {"driver": "550.90.07", "cuda": "12.4"},
        "inventory.change": {"component": "driver", "from": "550.54.15", "to": "550.90.07",
                             "actor": None, "ticket": None},
        "inventory.topology": {"links": [{"nic": "mlx5_0", "switch": "fz-leaf", "port": "Eth1/1",
                                          "segment": "fz"}],
                               "storage": [{"path": "/fz", "backend": "nfs", "server": "fz-nas"}]},
    }[kind]


KINDS = ("gpu.sample", "gpu.xid", "hw.sensor", "hw.sel", "net.port", "net.link", "net.rdma",
         "storage.sample", "storage.mount", "sched.job", "sched.node", "runtime.log",
         "runtime.progress", "runtime.checkpoint", "runtime.container", "inventory.versions",
         "inventory.change", "inventory.topology")
TOPIC_KINDS = {t: tuple(k for k in KINDS if f"fl.{k.split('.')[0]}" == t) for t in INPUT_TOPICS}


def template(kind: str, rng: random.Random, ts: int, n: int) -> dict:
    """A valid event of ``kind`` about the fuzz node/job (never a fleet subject)."""
    topic = f"fl.{kind.split('.')[0]}"
    ev = {"v": 1, "id": f"fz-{n:08d}", "ts": ts, "kind": kind, "source": "fuzzgen",
          "node": None if kind == "sched.job" else FUZZ_NODE,
          "job": FUZZ_JOB if topic in JOB_KEYED else None, "tenant": None, "data": _data(kind, rng)}
    return ev


def dumps(ev: object) -> bytes:
    return orjson.dumps(ev)


# --- the ways to be invalid (each: (event, rng) -> raw bytes or None) -----------------------

def _deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def _with_raw(ev: dict, field: str, raw: bytes, where: str = "envelope") -> bytes:
    """Serialise ``ev`` with ``field`` (in the envelope or in data) replaced by raw JSON text
    (for literals orjson will not write: NaN, 1e400, integers beyond 64 bits)."""
    ev = dict(ev, data=dict(ev["data"]))
    target = ev if where == "envelope" else ev["data"]
    target[field] = "\x00PLACEHOLDER\x00"
    return dumps(ev).replace(b'"\\u0000PLACEHOLDER\\u0000"', raw, 1)


_WRONG_TYPES = [("v", "1"), ("id", 12345), ("ts", "1790000000000"), ("ts", 1.79e12), ("kind", 7),
                ("source", None), ("data", []), ("data", "x"), ("data", None), ("node", 42),
                ("job", 48213), ("ts", True), ("id", ""), ("id", "x" * 65), ("v", 2)]
# required data fields per kind whose contract type is unambiguous, and a wrong value for each
_WRONG_DATA = {"gpu.sample": ("gpu", "zero"), "gpu.xid": ("xid", "79"), "hw.sensor": ("status", 3),
               "hw.sel": ("severity", ["critical"]), "net.port": ("oper_status", True),
               "net.link": ("state", "sideways"), "net.rdma": ("counters", [1, 2]),
               "storage.sample": ("read_lat_ms", "slow"), "storage.mount": ("state", "gone"),
               "sched.job": ("attempt", "0"), "sched.node": ("state", 5),
               "runtime.log": ("message", 12), "runtime.progress": ("step", "10"),
               "runtime.checkpoint": ("phase", "maybe"), "runtime.container": ("event", 0),
               "inventory.versions": ("driver", 550), "inventory.change": ("to", 1),
               "inventory.topology": ("links", "mlx5_0")}
_HUGE_INTS = [b"18446744073709551616", b"1180591620717411303424", b"-9223372036854775809",
              b"99999999999999999999999999999999999999"]
_NON_FINITE = [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e400", b"nan", b"inf"]
_NOT_JSON_NUMBERS = [b"NaN", b"Infinity", b"-Infinity", b"nan", b"inf"]   # invalid JSON anywhere
_OVERFLOWING = [b"1e400", b"-1e400", b"2.5e308"]                         # JSON, but beyond a double
# data fields the contract types as int (indexes, ids, cumulative counters, steps) and as float
_INT_FIELDS = {"gpu.sample": ("gpu", "ecc_sbe", "ecc_dbe", "nvlink_errors", "pcie_replay"), "gpu.xid": ("xid", "pid"),
               "net.port": ("in_errors", "in_octets", "speed_mbps"), "net.rdma": ("port",),
               "sched.job": ("attempt", "gpus", "exit_code"), "runtime.progress": ("step",),
               "runtime.checkpoint": ("step", "bytes"), "runtime.container": ("exit_code",)}
_FLOAT_FIELDS = {"hw.sensor": ("value",), "runtime.progress": ("step_time_s", "samples_per_s"),
                 "runtime.checkpoint": ("duration_s",)}


def _random_bytes(ev: dict, rng: random.Random) -> bytes:
    b = bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 200)))
    return b"\xff" + b   # 0xff never starts (or appears in) valid UTF-8


def _truncated(ev: dict, rng: random.Random) -> bytes:
    raw = dumps(ev)
    return raw[:rng.randrange(1, len(raw) - 1)]


def _wrong_type(ev: dict, rng: random.Random) -> bytes:
    field, value = _WRONG_TYPES[rng.randrange(len(_WRONG_TYPES))]
    return dumps(dict(ev, **{field: value}))


def _wrong_data_type(ev: dict, rng: random.Random) -> bytes:
    field, value = _WRONG_DATA[ev["kind"]]
    return dumps(dict(ev, data=dict(ev["data"], **{field: value})))


def _missing_field(ev: dict, rng: random.Random) -> bytes:
    field = rng.choice(("v", "id", "ts", "kind", "source", "data"))
    return dumps({k: v for k, v in ev.items() if k != field})


def _unknown_kind(ev: dict, rng: random.Random) -> bytes:
    layer = ev["kind"].split(".")[0]
    kind = rng.choice((f"{layer}.nope", f"{layer}.", layer, "", ev["kind"].upper(), f"{ev['kind']}.x",
                       "gpu_sample", "x" * 300))
    return dumps(dict(ev, kind=kind))


def _non_utf8(ev: dict, rng: random.Random) -> bytes:
    raw = dumps(dict(ev, source="fuzz\x00marker"))
    bad = rng.choice((b"\xc3\x28", b"\xa0\xa1", b"\xe2\x28\xa1", b"\xf0\x28\x8c\xbc", b"\xed\xa0\x80", b"\xc0\xaf"))
    return raw.replace(b"fuzz\\u0000marker", b"fuzz" + bad + b"marker", 1)


def _empty(ev: dict, rng: random.Random) -> bytes:
    return rng.choice((b"", b" ", b"\n", b"{}", b"null", b"[]", b'""', b"0", b"true"))


def _null(ev: dict, rng: random.Random) -> None:
    return None


def _deep_nesting(ev: dict, rng: random.Random) -> bytes:
    depth = rng.choice((1100, 5000, 20_000))   # all under 256 KiB
    choice = rng.randrange(3)
    if choice == 0:
        return _deep(depth)                                   # not an object at all
    if choice == 1:
        return _with_raw(ev, "ts", _deep(depth))              # ts must be an int
    return _with_raw(ev, "data", b'{"a":' * depth + b"1" + b"}" * depth)   # beyond any sane parser depth


def _huge_int(ev: dict, rng: random.Random) -> bytes:
    """An integer beyond 64 bits where the contract wants an int (ts or an int data field)."""
    lit = rng.choice(_HUGE_INTS)
    fields = _INT_FIELDS.get(ev["kind"])
    if fields and rng.random() < 0.6:
        return _with_raw(ev, rng.choice(fields), lit, where="data")
    return _with_raw(ev, "ts", lit)


def _in_number_field(ev: dict, rng: random.Random, literals: list[bytes]) -> bytes:
    """One of ``literals`` in a float field of the kind (an int field when it has none; ts
    when it has neither)."""
    fields = _FLOAT_FIELDS.get(ev["kind"]) or _INT_FIELDS.get(ev["kind"])
    if not fields:
        return _with_raw(ev, "ts", rng.choice(literals))
    return _with_raw(ev, rng.choice(fields), rng.choice(literals), where="data")


def _non_finite(ev: dict, rng: random.Random) -> bytes:
    """NaN/Infinity literals (not JSON) or 1e400 (JSON, but not a finite double) in a number field."""
    return _in_number_field(ev, rng, _NON_FINITE)


def _not_json_number_extra_field(ev: dict, rng: random.Random) -> bytes:
    """NaN/Infinity literals in an unknown extra field: not JSON, so refused wherever they are."""
    return _with_raw(ev, "extra_float", rng.choice(_NOT_JSON_NUMBERS), where=_extra_spot(ev, rng))


def _oversized(ev: dict, rng: random.Random) -> bytes:
    size = rng.choice((MAX_EVENT_BYTES + 1, 300_000, 600_000, 1_000_000))
    raw = dumps(dict(ev, data=dict(ev["data"], pad="")))
    pad = size - len(raw)
    return dumps(dict(ev, data=dict(ev["data"], pad="p" * pad)))


def _future(ev: dict, rng: random.Random) -> bytes:
    # ``ev["_end"]`` is the end of the traffic window (at or before now): 24 h past it plus at
    # least 2 h, so the record is still in the future by more than 24 h when it is consumed
    ev = dict(ev)
    end = ev.pop("_end")
    return dumps(dict(ev, ts=end + MAX_FUTURE_MS + rng.randrange(2 * 3_600_000, 10 * MAX_FUTURE_MS)))


def _duplicated_key(ev: dict, rng: random.Random) -> bytes:
    raw = dumps(ev)
    field, lit = rng.choice(((b'"kind":', b'"kind":"hw.nope",'), (b'"ts":', b'"ts":"soon",'),
                             (b'"id":', b'"id":12,'), (b'"v":', b'"v":"one",')))
    # the wrong value first and the right one after it: a parser that keeps the last one
    # silently accepts an ambiguous record, which the contract's "one JSON object" forbids
    return raw.replace(field, lit + field, 1)


def _wrong_topic(ev: dict, rng: random.Random) -> bytes:
    return dumps(ev)   # a valid event: ``invalid`` sends it to a topic its kind does not travel on


CATEGORIES: dict[str, tuple[float, Callable[[dict, random.Random], bytes | None]]] = {
    "random_bytes": (10, _random_bytes), "truncated_json": (10, _truncated), "wrong_type": (8, _wrong_type),
    "wrong_data_type": (8, _wrong_data_type), "missing_field": (8, _missing_field),
    "unknown_kind": (8, _unknown_kind), "non_utf8": (8, _non_utf8), "empty": (6, _empty), "null": (3, _null),
    "deep_nesting": (2, _deep_nesting), "huge_int": (5, _huge_int), "non_finite": (5, _non_finite),
    "not_json_number_extra_field": (2, _not_json_number_extra_field),
    "oversized": (0.06, _oversized), "future_ts": (4, _future), "duplicated_key": (4, _duplicated_key),
    "wrong_topic": (6, _wrong_topic),
}


def invalid(seed: int, n: int, *, ts: int, span_ms: int = 3_600_000,
            categories: Iterable[str] | None = None) -> list[Msg]:
    """``n`` messages the contract refuses, round-robin over the input topics, categories
    drawn by weight; event times inside ``[ts, ts + span_ms)``. Deterministic in ``seed``."""
    rng = random.Random(seed)
    names = list(categories or CATEGORIES)
    weights = [CATEGORIES[c][0] for c in names]
    out: list[Msg] = []
    for i in range(n):
        topic = INPUT_TOPICS[i % len(INPUT_TOPICS)]
        cat = rng.choices(names, weights)[0]
        kinds = TOPIC_KINDS[topic]
        if cat == "wrong_topic":   # a valid event of another layer's kind on this topic
            kinds = tuple(k for k in KINDS if k not in TOPIC_KINDS[topic])
        ev = template(kinds[rng.randrange(len(kinds))], rng, ts + rng.randrange(span_ms), n=i)
        value = CATEGORIES[cat][1](dict(ev, _end=ts + span_ms) if cat == "future_ts" else ev, rng)
        key = rng.choice((FUZZ_NODE.encode(), FUZZ_JOB.encode(), None, b"\xff\xfe", b""))
        if value is None and key is None:
            key = FUZZ_NODE.encode()   # Kafka needs a key or a value: a null record with a key
        out.append(Msg(topic, key, value, cat))
    return out


# --- hostile but valid (docs/contract-bounds.md: "Unknown fields are exempt", "An integer
# literal in a float field"): decode skips unknown fields unread and a big integer literal in
# a float field is a finite double, so these must be ACCEPTED (no dead letter, no wedge)

def _extra_spot(ev: dict, rng: random.Random) -> str:
    """Where an unknown field can go: data or the envelope (inventory.versions' data is a
    component -> version-string map, so every data key there is a version: envelope only)."""
    return "envelope" if ev["kind"] == "inventory.versions" else rng.choice(("data", "envelope"))


def _huge_int_extra_field(ev: dict, rng: random.Random) -> bytes:
    """An integer beyond 64 bits in an unknown extra field, in data or at the envelope."""
    return _with_raw(ev, "counter_extra", rng.choice(_HUGE_INTS), where=_extra_spot(ev, rng))


def _huge_int_float_field(ev: dict, rng: random.Random) -> bytes:
    """An integer literal beyond 64 bits in a float field (e.g. hw.sensor value)."""
    fields = _FLOAT_FIELDS.get(ev["kind"])
    if not fields:
        return _huge_int_extra_field(ev, rng)
    return _with_raw(ev, rng.choice(fields), rng.choice(_HUGE_INTS), where="data")


def _overflowing_extra_field(ev: dict, rng: random.Random) -> bytes:
    """1e400 and the like (JSON numbers beyond a double) in an unknown extra field."""
    return _with_raw(ev, "extra_float", rng.choice(_OVERFLOWING), where=_extra_spot(ev, rng))


HOSTILE_VALID: dict[str, Callable[[dict, random.Random], bytes]] = {
    "huge_int_extra_field": _huge_int_extra_field, "huge_int_float_field": _huge_int_float_field,
    "overflowing_extra_field": _overflowing_extra_field,
}


def hostile_valid(seed: int, n: int, *, ts: int, span_ms: int = 3_600_000) -> list[Msg]:
    """``n`` valid events about the fuzz node/job that carry numbers a careless decoder would
    keep and fail to re-encode, on their kind's topic under the contract's key."""
    rng = random.Random(seed)
    names = list(HOSTILE_VALID)
    out: list[Msg] = []
    for i in range(n):
        kind = KINDS[rng.randrange(len(KINDS))]
        cat = names[i % len(names)]
        ev = template(kind, rng, ts + rng.randrange(span_ms), n=10_000_000 + i)
        value = HOSTILE_VALID[cat](ev, rng)
        topic = f"fl.{kind.split('.')[0]}"
        key = FUZZ_JOB if topic in JOB_KEYED else FUZZ_NODE
        out.append(Msg(topic, key.encode(), value, cat))
    return out


def route(line: bytes) -> Msg:
    """Topic and key of one valid contract line (contract: key = job for sched/runtime, node
    for node-scoped layers, node or the switch name for net)."""
    ev = orjson.loads(line)
    layer = ev["kind"].split(".")[0]
    topic = f"fl.{layer}"
    if topic in JOB_KEYED:
        key = ev.get("job") or ev.get("node") or ""
    else:
        key = ev.get("node") or (ev.get("data") or {}).get("device") or ""
    return Msg(topic, key.encode(), line)


def interleave(valid: list[Msg], extra: list[Msg], seed: int) -> list[Msg]:
    """``extra`` scattered at random among ``valid``; each list keeps its own order."""
    rng = random.Random(seed)
    slots = sorted(rng.randrange(len(valid) + 1) for _ in extra)
    out: list[Msg] = []
    j = 0
    for i, m in enumerate(valid):
        while j < len(slots) and slots[j] <= i:
            out.append(extra[j])
            j += 1
        out.append(m)
    out.extend(extra[j:])
    return out


# --- pipeline helpers (the public commands and the broker only; F1's harness.py may replace them)

def produce(settings, msgs: list[Msg], *, max_request_size: int = 1_048_576) -> list[tuple[str, int, int]]:
    """Produce ``msgs`` in order (no compression) and return each one's (topic, partition,
    offset) as the broker acknowledged it: the exact identity of a dead letter to expect."""
    import asyncio

    from aiokafka import AIOKafkaProducer

    async def run() -> list[tuple[str, int, int]]:
        prod = AIOKafkaProducer(**settings.kafka_kwargs(), linger_ms=20, max_batch_size=1 << 20,
                                max_request_size=max_request_size, acks="all")
        await prod.start()
        try:
            futs = [await prod.send(settings.topic(m.topic), m.value, key=m.key) for m in msgs]
            metas = await asyncio.gather(*futs)
            return [(md.topic, md.partition, md.offset) for md in metas]
        finally:
            await prod.stop()

    return asyncio.run(run())


def cli_env(settings, **extra: str) -> dict[str, str]:
    """Environment for a `faultline` subprocess on ``settings``' broker, prefix and store."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    env.update(FAULTLINE_KAFKA_BOOTSTRAP=settings.kafka_bootstrap, FAULTLINE_TOPIC_PREFIX=settings.topic_prefix,
               FAULTLINE_TOPIC_PARTITIONS=str(settings.topic_partitions),
               FAULTLINE_STORE_PATH=settings.store_path, FAULTLINE_SPOOL_DIR=settings.spool_dir,
               FAULTLINE_LATENESS_MS=str(settings.lateness_ms), PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def faultline(settings, *args: str, stdin: bytes | None = None, timeout: float = 120, **env: str):
    """Run the `faultline` CLI; returns the CompletedProcess (bytes)."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "faultline.cli", *args], input=stdin, capture_output=True,
                          env=cli_env(settings, **env), timeout=timeout)


def store_rows(settings, sql: str, **env: str) -> list[dict]:
    """`faultline query --format json SQL` (the store, or the API of whoever owns it)."""
    p = faultline(settings, "query", "--format", "json", sql, **env)
    if p.returncode != 0:
        raise AssertionError(f"faultline query failed ({p.returncode}): {p.stderr.decode(errors='replace')[-2000:]}")
    return [orjson.loads(x) for x in p.stdout.splitlines() if x.strip()]


def diagnose(settings, lines: list[bytes], workdir) -> dict[str, dict]:
    """`faultline diagnose FILE --json` over ``lines`` in event-time order: incident id ->
    incident without ``revision``.

    The order matters: ``diagnose`` takes its input in the order given, within the lateness
    bound (its documented contract), while the worker orders by event time across
    partitions (a partition's events cannot move the fleet's watermark past the others').
    Interleaved as sent, the hostile events of the fuzz node (spread over the hour) ran
    diagnose's event time far ahead of the fleet, the fleet's job events then came late,
    and a stall was declared for a job whose end had not been applied yet: the one
    "worker != diagnose" incident of the fuzz runs (the worker was right)."""
    from pathlib import Path

    path = Path(workdir) / "valid.jsonl"
    from faultline.schemas.codec import decode   # the contract's decoder: hostile numbers (1e400) are valid

    ordered = sorted(lines, key=lambda b: decode(b).ts)   # stable: equal ts keep their order
    path.write_bytes(b"\n".join(ordered) + b"\n")
    p = faultline(settings, "diagnose", str(path), "--json")
    assert p.returncode == 0, p.stderr.decode(errors="replace")[-2000:]
    out = {}
    for x in p.stdout.splitlines():
        if x.strip():
            d = orjson.loads(x)
            d.pop("revision", None)
            out[d["id"]] = d
    return out


def live(incidents: dict[str, dict]) -> dict[str, dict]:
    """Incidents still standing (a withdrawn one has state "recovered"; diagnose --json lists
    the standing ones)."""
    return {i: d for i, d in incidents.items() if d.get("state") != "recovered"}


def start_pipeline(fleet):
    """Sink + one analysis worker through F1's ``harness.Fleet`` (``faultline sink`` when it
    exists, else one ``worker`` with its in-process sink that also analyses). Returns the
    analysis worker (the process whose pid must not change)."""
    import harness

    if harness.sink_process_available():
        fleet.start_sink()
        return fleet.add_worker()
    return fleet.start_sink()


def settle_and_stop_sink(settings, fleet, timeout_s: float = 60.0) -> list[str]:
    """Wait until every group of the test has consumed the input topics and the sink its
    topics, then stop the sink (it flushes) so the store can be read directly. Returns what
    did not settle (empty when all did)."""
    import asyncio

    import harness
    from faultline.streams import faust_harness as fh

    problems = []
    deadline = time.monotonic() + timeout_s
    done, lags = drained(settings)
    while not done and time.monotonic() < deadline:
        time.sleep(1.0)
        done, lags = drained(settings)
    if not done:
        problems.append(f"input lag not 0 after {timeout_s:.0f} s: {lags}")
    if harness.sink_process_available() and hasattr(fh, "sink_group_id"):
        deadline = time.monotonic() + timeout_s
        lag = None
        while time.monotonic() < deadline:
            try:
                lag = asyncio.run(fh.group_lag(settings, fh.sink_group_id(settings)))
            except Exception as e:  # noqa: BLE001 - a transient broker answer: look again
                lag = f"lookup failed: {type(e).__name__}"
            if lag == 0:
                break
            time.sleep(1.0)
        if lag != 0:
            problems.append(f"sink lag {lag} not 0 after {timeout_s:.0f} s")
    else:
        time.sleep(5.0)   # the in-process sink's flush interval
    fleet.stop_sink()
    return problems


def rss_kib(pid: int) -> tuple[int, int]:
    """(current RSS, peak RSS) of a process in KiB, from /proc."""
    vals = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                vals[k] = int(v.split()[0])
    return vals.get("VmRSS", 0), vals.get("VmHWM", 0)


def diff(got: dict[str, dict], exp: dict[str, dict], limit: int = 20) -> str:
    """Which incidents differ between the worker and diagnose, field by field."""
    out = [f"ids only in worker: {sorted(set(got) - set(exp))}", f"ids only in diagnose: {sorted(set(exp) - set(got))}"]
    for i in sorted(set(got) & set(exp)):
        for k in sorted(set(got[i]) | set(exp[i])):
            if got[i].get(k) != exp[i].get(k):
                out.append(f"{i}.{k}: worker={str(got[i].get(k))[:300]} diagnose={str(exp[i].get(k))[:300]}")
    return "\n".join(out[:limit + 2])


def drained(settings) -> tuple[bool, object]:
    """One look at ``harness.wait_drained``: (every group of the test at lag 0 on the input
    topics, the lags). A transient broker answer (GroupLoadInProgress, a timeout on a loaded
    machine) counts as not drained yet."""
    import harness
    from aiokafka.errors import KafkaError

    try:
        return harness.wait_drained(settings, 0)
    except (KafkaError, OSError, TimeoutError) as e:
        return False, f"lag lookup failed: {type(e).__name__}"


def _in_thread(fn):
    """``fn()`` in a thread of its own (it may run its own event loop: reads call ``until``
    from inside theirs)."""
    import threading

    box = {}
    t = threading.Thread(target=lambda: box.setdefault("v", fn()))
    t.start()
    t.join()
    return box.get("v")


class Settled:
    """``until`` helper for reads: true once the worker is gone, or every consumer group of
    the test has had lag 0 on the input topics for ``grace_s`` (looked up every ``every_s``)."""

    def __init__(self, settings, worker, grace_s: float = 5.0, every_s: float = 2.0) -> None:
        self.settings, self.worker, self.grace_s, self.every_s = settings, worker, grace_s, every_s
        self._next = 0.0
        self._since: float | None = None

    def __call__(self) -> bool:
        if not self.worker.alive():
            return True
        now = time.monotonic()
        if now >= self._next:
            self._next = now + self.every_s
            done = _in_thread(lambda: drained(self.settings)[0])
            self._since = (self._since or now) if done else None
        return self._since is not None and now - self._since >= self.grace_s
