"""Contract decode+validate throughput on one core: msgspec (``schemas.decode``) vs bare
``orjson.loads`` vs a pydantic v2 model of the same shape.

A mixed corpus of every kind (~200k events, built from ``schemas.examples`` with varied
values, weighted like a real feed: samples dominate) is decoded three ways; best of
``--repeat`` runs is reported as events per CPU-second of this process (so other load on a
shared machine does not count; wall time is printed beside it) and MB/s, with ratios against ``orjson.loads``
(parse only, no validation) and against pydantic (what validation would cost otherwise).

    .venv/bin/python bench/contract.py [--events 200000] [--repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
import typing
from typing import Annotated, Any, Literal, Union

import msgspec
import orjson

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench.results import record  # noqa: E402
from faultline.schemas import KIND_MODELS, KINDS, ContractError, decode, encode, now_ms
from faultline.schemas.examples import EXAMPLE_TS, example  # noqa: E402

TARGET = 300_000  # events/s validated, issue 2

#: share of each kind in the corpus (samples and counters dominate a real feed)
WEIGHTS = {
    "gpu.sample": 30, "net.port": 15, "net.rdma": 10, "storage.sample": 10, "hw.sensor": 10,
    "runtime.progress": 8, "runtime.log": 4, "sched.job": 2, "gpu.xid": 1, "hw.sel": 1,
    "net.link": 1, "storage.mount": 1, "sched.node": 1, "runtime.checkpoint": 1,
    "runtime.container": 1, "inventory.versions": 1, "inventory.change": 1, "inventory.topology": 1,
}


def build_corpus(n: int, seed: int = 7) -> list[bytes]:
    rnd = random.Random(seed)
    kinds = rnd.choices(list(WEIGHTS), weights=list(WEIGHTS.values()), k=n)
    out = []
    for i, kind in enumerate(kinds):
        node = f"gpu-{rnd.randrange(512):03d}"
        env = {"id": f"{i:026d}", "ts": EXAMPLE_TS + i * 7, "node": node}
        if KIND_MODELS[kind].needs_job:
            env["job"] = str(48000 + rnd.randrange(200))
        data: dict[str, Any] = {}
        if kind == "gpu.sample":
            data = {"gpu": rnd.randrange(8), "util_pct": rnd.uniform(0, 100), "temp_c": rnd.uniform(30, 90),
                    "power_w": rnd.uniform(80, 700), "ecc_sbe": rnd.randrange(10), "nvlink_errors": rnd.randrange(5),
                    "throttle": rnd.sample(["hw_slowdown", "sw_thermal", "sw_power_cap"], rnd.randrange(3))}
        elif kind == "net.port":
            data = {"port": f"Ethernet1/{rnd.randrange(64)}", "in_errors": rnd.randrange(1000),
                    "in_octets": rnd.randrange(10**13), "oper_status": rnd.choice(["up", "up", "down"])}
        elif kind == "net.rdma":
            data = {"port": rnd.randrange(1, 3)}
        elif kind == "storage.sample":
            data = {"read_lat_ms": rnd.uniform(0.1, 50), "write_mbps": rnd.uniform(0, 5000),
                    "used_pct": rnd.uniform(0, 100)}
        elif kind == "hw.sensor":
            data = {"sensor": f"Temp{rnd.randrange(20)}", "value": rnd.uniform(20, 90)}
        elif kind == "runtime.progress":
            data = {"step": i, "step_time_s": rnd.uniform(1, 3), "rank": rnd.randrange(64)}
        elif kind == "runtime.log":
            data = {"rank": rnd.randrange(64), "message": "x" * rnd.randrange(40, 400)}
        out.append(orjson.dumps(example(kind, data=data, **env)))
    return out


# ---------------------------------------------------------------- pydantic twin of the models

def pydantic_adapter():
    """A pydantic v2 TypeAdapter of the same shape as ``schemas.Event`` (strict, like msgspec)."""
    import pydantic
    from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model, model_validator

    cfg = ConfigDict(strict=True, extra="ignore", populate_by_name=True)
    cache: dict[type, type] = {}

    def conv(tp):
        origin = typing.get_origin(tp)
        if origin is Annotated:
            base, *meta = typing.get_args(tp)
            kw = {}
            for m in meta:
                if isinstance(m, msgspec.Meta):
                    for k in ("ge", "le", "gt", "lt", "min_length", "max_length"):
                        if getattr(m, k) is not None:
                            kw[k] = getattr(m, k)
            return Annotated[conv(base), Field(**kw)]
        if origin is Union:
            return Union[tuple(conv(a) for a in typing.get_args(tp))]
        if origin is list or origin is tuple:  # tuple[X, ...] fields (throttle): a JSON array either way
            return list[conv(typing.get_args(tp)[0])]
        if origin is dict:
            k, v = typing.get_args(tp)
            return dict[conv(k), conv(v)]
        if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
            return model_of(tp)
        return tp

    def model_of(struct: type, kind: str | None = None):
        if struct in cache:
            return cache[struct]
        hints = typing.get_type_hints(struct, include_extras=True)
        fields = {}
        for f in msgspec.structs.fields(struct):
            tp = conv(hints[f.name])
            default = ... if f.required else (f.default if f.default is not msgspec.NODEFAULT else None)
            if f.default_factory is not msgspec.NODEFAULT:
                fields[f.name] = (tp, Field(default_factory=f.default_factory, alias=f.encode_name))
            else:
                fields[f.name] = (tp, Field(default, alias=f.encode_name))
        validators = {}
        if kind is not None:
            fields["kind"] = (Literal[kind], ...)  # type: ignore[valid-type]
            needs_node, needs_job = struct.needs_node, struct.needs_job

            def check(self):
                if needs_node and not self.node:
                    raise ValueError("`node` is required")
                if needs_job and not self.job:
                    raise ValueError("`job` is required")
                return self

            validators["scope_check"] = model_validator(mode="after")(check)
        m = create_model(f"P{struct.__name__}", __config__=cfg, __validators__=validators, **fields)
        cache[struct] = m
        return m

    models = [model_of(KIND_MODELS[k], k) for k in KINDS]
    union = Annotated[Union[tuple(models)], Field(discriminator="kind")]
    return TypeAdapter(union), pydantic.VERSION


# ---------------------------------------------------------------- timing

def best_of(fn, corpus, repeat: int) -> tuple[float, float]:
    """Best CPU seconds (this process only, so other load on a shared machine does not
    count) and best wall seconds over ``repeat`` runs."""
    cpu = wall = float("inf")
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        fn(corpus)
        cpu = min(cpu, time.process_time() - c0)
        wall = min(wall, time.perf_counter() - w0)
    return cpu, wall


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = ap.parse_args(argv)
    try:
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    except (AttributeError, OSError):
        pass

    t0 = time.perf_counter()
    corpus = build_corpus(args.events)
    mb = sum(map(len, corpus)) / 1e6
    build_s = time.perf_counter() - t0
    now = now_ms()
    # sanity: every event of the corpus is valid, every kind is present
    kinds = {decode(r, now=now).kind for r in corpus}
    assert kinds == set(KINDS), set(KINDS) - kinds

    loads = orjson.loads

    def run_orjson(c):
        for r in c:
            loads(r)

    def run_msgspec(c):
        for r in c:
            decode(r, now=now)

    adapter, pyd_version = pydantic_adapter()
    validate_json = adapter.validate_json
    for r in corpus[:2000]:  # the twin accepts the same corpus
        validate_json(r)

    def run_pydantic(c):
        for r in c:
            validate_json(r)

    def run_orjson_pydantic(c):
        vp = adapter.validate_python
        for r in c:
            vp(loads(r))

    events = [decode(r, now=now) for r in corpus]

    def run_encode(c):
        for ev in events:
            encode(ev)

    bad = [r[: len(r) // 2] for r in corpus[:50_000]]

    def run_reject(c):
        for r in c:
            try:
                decode(r, now=now)
            except ContractError:
                pass

    res = {}
    for name, fn, data in (
        ("orjson.loads (parse only)", run_orjson, corpus),
        ("schemas.decode (msgspec, validated)", run_msgspec, corpus),
        ("pydantic v2 validate_json (validated)", run_pydantic, corpus),
        ("orjson.loads + pydantic validate_python", run_orjson_pydantic, corpus),
        ("schemas.encode (msgspec)", run_encode, corpus),
        ("schemas.decode of truncated input (rejects)", run_reject, bad),
    ):
        cpu, wall = best_of(fn, data, args.repeat)
        res[name] = {"events_per_s": len(data) / cpu, "cpu_seconds": cpu, "wall_seconds": wall,
                     "events": len(data)}

    ms = res["schemas.decode (msgspec, validated)"]["events_per_s"]
    oj = res["orjson.loads (parse only)"]["events_per_s"]
    pd = res["pydantic v2 validate_json (validated)"]["events_per_s"]
    summary = {
        "events": len(corpus), "mb": round(mb, 1), "avg_bytes": round(mb * 1e6 / len(corpus)),
        "python": sys.version.split()[0], "msgspec": msgspec.__version__, "orjson": orjson.__version__,
        "pydantic": pyd_version, "results": res,
        "msgspec_vs_orjson": ms / oj, "msgspec_vs_pydantic": ms / pd,
        "validated_mb_per_s": ms * mb * 1e6 / len(corpus) / 1e6, "target": TARGET, "meets_target": ms >= TARGET,
    }
    record("contract_events_per_s", ms, "events per CPU-second (one core)",
           baseline="orjson.loads of the same corpus (parse only, no validation)", baseline_value=oj,
           note=f"schemas.decode (msgspec, validated), {len(corpus):,} mixed events, best of {args.repeat}; "
                f"pydantic v2 validate_json {pd:,.0f} ev/s")
    if args.json:
        print(orjson.dumps(summary).decode())
        return 0 if ms >= TARGET else 1
    print(f"corpus: {len(corpus):,} events of {len(KINDS)} kinds, {mb:.1f} MB "
          f"(avg {summary['avg_bytes']} B/event), built in {build_s:.1f} s; one core, events per CPU-second, best of {args.repeat}")
    print(f"python {summary['python']}, msgspec {msgspec.__version__}, orjson {orjson.__version__}, "
          f"pydantic {pyd_version}")
    for name, r in res.items():
        print(f"  {name:46} {r['events_per_s']:>12,.0f} events/s  {r['cpu_seconds'] * 1e3:8.1f} ms CPU "
              f"{r['wall_seconds'] * 1e3:8.1f} ms wall")
    print(f"ratio schemas.decode / orjson.loads      = {ms / oj:.2f}  (validation on top of parsing costs "
          f"{max(0.0, 1 / ms - 1 / oj) * 1e9:.0f} ns/event)")
    print(f"ratio schemas.decode / pydantic v2       = {ms / pd:.2f}")
    print(f"validated throughput: {ms:,.0f} events/s = {summary['validated_mb_per_s']:.0f} MB/s; "
          f"target {TARGET:,} events/s: {'MET' if ms >= TARGET else 'MISSED'}")
    return 0 if ms >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
