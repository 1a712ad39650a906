"""``faultline simulate``: a GPU cluster with jobs and injected faults, with ground truth.

    faultline simulate --list
    faultline simulate --scenario gpu-xid79 --seed 1 --out run.jsonl --labels run.labels.json
    faultline simulate --scenario all --seed 1 --out runs/sim.jsonl --labels runs/sim.labels.json
    faultline simulate --scenario mixed --seed 2 --kafka --speed 360     # 1 simulated hour in 10 s
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import orjson

from ._args import positive_float, positive_int


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="generate a simulated GPU cluster with faults (file or Kafka) and its ground truth",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--list", action="store_true", help="list the scenarios, one per line, and exit")
    p.add_argument("--scenario", metavar="NAME", help="scenario name, or 'all' for every scenario")
    p.add_argument("--seed", type=int, default=0, help="random seed; same seed -> byte-identical output (default 0)")
    p.add_argument("--nodes", type=positive_int, help="fleet size (default: the scenario's, usually 16)")
    p.add_argument("--gpus-per-node", type=positive_int, help="GPUs per node (default 8)")
    p.add_argument("--hours", type=positive_float, help="simulated hours (default: the scenario's, 2-12)")
    p.add_argument("--start", type=int, metavar="EPOCH_MS", help="simulated start time, UTC epoch ms "
                   "(default 2026-11-02T06:00:00Z for files; with --kafka the run ends at the current hour, "
                   "because broker retention and the 24 h future bound use event time)")
    p.add_argument("--out", metavar="FILE.jsonl", help="write events as JSON lines ('-' = stdout)")
    p.add_argument("--labels", metavar="FILE.json", help="write the ground-truth labels")
    p.add_argument("--kafka", action="store_true", help="publish to Kafka (topics per layer, topic_prefix honoured)")
    pace = p.add_mutually_exclusive_group()
    pace.add_argument("--speed", type=positive_float, metavar="X", help="pace by event time, X simulated seconds per wall second")
    pace.add_argument("--as-fast-as-possible", action="store_true", help="no pacing (default)")
    g = p.add_argument_group("sample intervals (seconds)")
    g.add_argument("--gpu-interval", type=int, default=10)
    g.add_argument("--hw-interval", type=int, default=60)
    g.add_argument("--net-interval", type=int, default=30)
    g.add_argument("--storage-interval", type=int, default=30)
    d = p.add_argument_group("delivery faults")
    d.add_argument("--out-of-order", type=float, default=0.0, metavar="FRAC", help="fraction of events delayed by up to --max-delay")
    d.add_argument("--max-delay", type=float, default=4.0, metavar="S")
    d.add_argument("--duplicates", type=float, default=0.0, metavar="FRAC", help="fraction of events delivered twice (same id)")
    d.add_argument("--clock-skew", type=int, default=0, metavar="NODES", help="number of nodes whose clock is off by up to --max-skew")
    d.add_argument("--max-skew", type=float, default=30.0, metavar="S")
    d.add_argument("--malformed", type=float, default=0.0, metavar="FRAC", help="fraction of extra malformed lines (counted in labels)")
    p.set_defaults(func=run)


def _options(args: argparse.Namespace):
    from ..producers.simulate import DEFAULT_START_MS, Delivery, Intervals, Options

    # day_start_ms: the story (job arrivals follow the time of day) is the one of --start, or
    # of the default start, wherever --kafka places the run in time: `simulate --out` and
    # `simulate --kafka` of one seed give the same events, only their timestamps differ
    return Options(nodes=args.nodes, gpus_per_node=args.gpus_per_node, hours=args.hours,
                   start_ms=args.start or DEFAULT_START_MS, day_start_ms=args.start or DEFAULT_START_MS,
                   intervals=Intervals(gpu=args.gpu_interval, hw=args.hw_interval, net_port=args.net_interval,
                                       net_rdma=args.net_interval, storage=args.storage_interval),
                   delivery=Delivery(out_of_order=args.out_of_order, max_delay_s=args.max_delay,
                                     duplicates=args.duplicates, skew_nodes=args.clock_skew,
                                     max_skew_s=args.max_skew, malformed=args.malformed))


def _suffixed(path: str, name: str, many: bool) -> str:
    if not many or path == "-":
        return path
    p = Path(path)
    return str(p.with_name(f"{p.stem}.{name}{''.join(p.suffixes[-1:]) or ''}")) if p.suffix else str(p / name)


def run(args: argparse.Namespace) -> int:
    from ..cli import CliError
    from ..producers.simulate import SCENARIOS, Simulation

    if args.list:
        width = max(len(n) for n in SCENARIOS)
        for name, sc in SCENARIOS.items():
            print(f"{name:<{width}}  {sc.summary}")
        return 0
    if not args.scenario:
        raise CliError("no scenario given; pass --scenario NAME (see `faultline simulate --list`) or --scenario all")
    if args.scenario != "all" and args.scenario not in SCENARIOS:
        raise CliError(f"unknown scenario {args.scenario!r}; `faultline simulate --list` names the scenarios")
    if not args.kafka and not args.out:
        raise CliError("nowhere to write: pass --out FILE.jsonl [--labels FILE.json] or --kafka")
    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    many = len(names) > 1
    opts = _options(args)
    if args.kafka and not args.start:
        # Kafka retention and the 24 h future bound work on event time: end the run at about now
        from ..producers.simulate import SCENARIOS as S
        from ..schemas import now_ms

        total_h = sum((args.hours or S[n].hours) + (1 if many else 0) for n in names)
        opts.start_ms = (now_ms() // 3_600_000) * 3_600_000 - int(total_h * 3_600_000)
    hours_each = []
    for i, name in enumerate(names):
        o = _options(args)
        o.start_ms = opts.start_ms
        sc = SCENARIOS[name]
        if many and args.kafka:  # one after the other in event time, so node names do not collide
            o.start_ms = opts.start_ms + int(sum(hours_each) * 3_600_000)
        hours_each.append((o.hours or sc.hours) + 1)
        sim = Simulation(name, args.seed, o)
        t = time.perf_counter()
        if args.kafka:
            n = asyncio.run(_publish(sim, args.speed, args.config))
        else:
            n = _write(sim, _suffixed(args.out, name, many))
        dt = time.perf_counter() - t
        labels = sim.labels()
        if args.labels:
            lp = _suffixed(args.labels, name, many)
            try:
                Path(lp).parent.mkdir(parents=True, exist_ok=True)
                Path(lp).write_bytes(orjson.dumps(labels, option=orjson.OPT_INDENT_2))
            except OSError as e:
                raise CliError(f"cannot write the labels to {lp}: {e.strerror}") from None
        print(f"{name}: {n} lines, {len(labels['interruptions'])} interruptions, {len(labels['healthy'])} healthy "
              f"attempts, {dt:.1f}s ({n / max(dt, 1e-9):,.0f} lines/s)", file=sys.stderr)
    return 0


def _write(sim, path: str) -> int:
    n = 0
    if path == "-":
        out = sys.stdout.buffer
        close = False
    else:
        from ..cli import CliError

        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            out = open(path, "wb", buffering=1 << 20)
        except OSError as e:
            raise CliError(f"cannot write {path}: {e.strerror}") from None
        close = True
    try:
        buf = []
        for line in sim.lines():
            buf.append(line)
            if len(buf) >= 4096:
                out.write(b"\n".join(buf) + b"\n")
                n += len(buf)
                buf.clear()
        if buf:
            out.write(b"\n".join(buf) + b"\n")
            n += len(buf)
    finally:
        if close:
            out.close()
    return n


async def _publish(sim, speed: float | None, config_path: str | None) -> int:
    from .. import config
    from ..cli import CliError
    from ..producers.publish import BrokerUnreachable, Publisher
    from ..producers.simulate.kafka import publish

    settings = config.load(config_path)
    try:
        pub = await Publisher(settings).start()
    except BrokerUnreachable as e:
        raise CliError(str(e)) from None
    try:
        return await publish(sim, settings, speed=speed, publisher=pub)
    finally:
        await pub.stop()
