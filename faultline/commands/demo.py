"""``faultline demo [--short]``: the whole product on one machine — a simulated GPU fleet with
injected faults through real Kafka, the Faust worker and the ClickHouse store, watched live.

Needs the local broker (`make demo` starts it; or set FAULTLINE_KAFKA_BOOTSTRAP). Stops
everything it started at the end and on Ctrl-C; leaves the store in var/store.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import signal
from typing import Any, Callable

from .. import config
from ..cli import CliError
from ._args import positive_float, positive_int


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the whole pipeline on a simulated fleet, live",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--short", action="store_true", help="a small, fast run (16 nodes, 1 h at 600x) for tests")
    p.add_argument("--scenario", default=None, help="simulator scenario (default mixed; `faultline simulate --list`)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--nodes", type=positive_int, default=None)
    p.add_argument("--gpus-per-node", type=positive_int, default=None)
    p.add_argument("--hours", type=positive_float, default=None, help="simulated hours")
    p.add_argument("--start", type=int, default=None, metavar="EPOCH_MS",
                   help="simulated start, UTC epoch ms (default: the window ends at the current hour; "
                        "the simulated fleet follows the time of day, so a fixed start replays the same run)")
    p.add_argument("--speed", type=positive_float, default=None, help="simulated seconds per wall second")
    p.add_argument("--web-port", type=int, default=None, help="worker web page port (default 6066)")
    p.add_argument("--workdir", default=None, help="where the worker, simulator log and labels go (default var/demo)")
    p.add_argument("--no-live", action="store_true", help="no live view (logs and the summary only)")
    p.add_argument("--json", action="store_true", help="print the final incidents as JSON lines")
    p.set_defaults(func=run)


def _as_ctrl_c(demo: Any) -> Callable[[int, object], None]:
    """SIGTERM/SIGHUP as Ctrl-C: asyncio cancels the run (SIGINT), and the demo's run loop
    also ends at its next turn (``interrupt``), should that cancellation be lost."""
    def handler(signum: int, frame: object) -> None:
        demo.interrupt()
        signal.raise_signal(signal.SIGINT)
    return handler


def run(args: argparse.Namespace) -> int:
    import orjson

    from ..demo import Demo, DemoOptions
    from ..producers.publish import BrokerUnreachable

    settings = config.load(args.config)
    opts = DemoOptions.short() if args.short else DemoOptions()
    over = {"scenario": args.scenario, "seed": args.seed, "nodes": args.nodes,
            "gpus_per_node": args.gpus_per_node, "hours": args.hours, "speed": args.speed,
            "web_port": args.web_port, "workdir": args.workdir, "start_ms": args.start}
    opts = dataclasses.replace(opts, **{k: v for k, v in over.items() if v is not None})
    if args.no_live or args.json:
        opts = dataclasses.replace(opts, live=False)
    demo = Demo(settings, opts)
    # a closed terminal (SIGHUP) or `kill`/`timeout` (SIGTERM) stops it as Ctrl-C does: the worker,
    # sink and simulator run in their own sessions and would be left running
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _as_ctrl_c(demo))
    try:
        incidents = asyncio.run(demo.run())
        if demo.interrupted:
            raise KeyboardInterrupt
    except BrokerUnreachable as e:
        raise CliError(str(e)) from None
    except RuntimeError as e:
        raise CliError(str(e)) from None
    except KeyboardInterrupt:
        demo.stop()
        print("demo stopped; everything it started is stopped")
        return 130
    if args.json:
        for inc in sorted(incidents, key=lambda i: (i["job"], i["attempt"])):
            print(orjson.dumps(inc).decode())
    else:
        demo.summary(incidents)
    return 0
