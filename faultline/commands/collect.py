"""``faultline collect NAME``: run one collector (or ``node``: all node-side ones from a config file).

Collectors are discovered: every module in ``faultline.producers.collectors`` that defines
``NAME``, ``HELP``, ``add_arguments(parser)`` and ``build(args, settings) -> Collector``
becomes ``faultline collect NAME``. Common flags (``--once``, ``--output -``,
``--interval``) are added here for all of them.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import pkgutil

from .. import config
from ..producers import collectors as _pkg
from ..producers.collectors.base import add_common_args, run_collector


def collector_modules() -> dict[str, object]:
    mods = {}
    for m in pkgutil.iter_modules(_pkg.__path__):
        if m.name.startswith("_") or m.name == "base":
            continue
        mod = importlib.import_module(f"{_pkg.__name__}.{m.name}")
        if hasattr(mod, "NAME") and hasattr(mod, "build"):
            mods[mod.NAME] = mod
    return mods


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("collect", help="run a collector (GPU, kernel, logs, SNMP, Slurm, BMC, ...)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    csub = p.add_subparsers(dest="collector", metavar="NAME", required=True)
    for name, mod in sorted(collector_modules().items()):
        cp = csub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(cp)
        if not getattr(mod, "CUSTOM_RUN", False):
            add_common_args(cp, getattr(mod, "INTERVAL_S", 10.0))
        cp.set_defaults(func=run, _collector_mod=mod)


def run(args: argparse.Namespace) -> int:
    settings = config.load(args.config)
    mod = args._collector_mod
    if getattr(mod, "CUSTOM_RUN", False):  # e.g. `collect node` drives several collectors
        return mod.run(args, settings)
    collector = mod.build(args, settings)
    asyncio.run(run_collector(collector, settings, once=args.once, output=args.output,
                              interval_s=args.interval, flush_timeout_s=args.flush_timeout))
    return 0
