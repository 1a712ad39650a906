"""``faultline worker``: run the Faust stream worker (detectors, per-job correlation, alerts,
incidents). Several workers with the same app id share the partitions; a restarted worker
rebuilds its tables from their changelog topics.

The worker does the analysis only; the store is written by the sink, its own consumer group
(``faultline sink``). ``--sink`` runs the sink inside this process too (the one-process
case); it still uses the sink's own group, so workers joining later never leave a partition
unstored."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
from pathlib import Path
from typing import Any

from .. import config
from ..cli import CliError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("worker", help="run the Faust stream worker (alerts, incidents)",
                       description=__doc__)
    p.add_argument("--workdir", metavar="DIR", default=None,
                   help="working directory of the worker (Faust data dir; default var/worker)")
    p.add_argument("--web-port", type=int, default=None, metavar="P",
                   help="serve the worker's web views on port P (default: web disabled "
                        "unless FAULTLINE_WEB_PORT is set)")
    p.add_argument("--app-id", default=None,
                   help="Faust app id = consumer group (default derived from the topic prefix)")
    p.add_argument("--sink", action="store_true",
                   help="also run the sink in this process (store writer, SQL API and incident page "
                        "on --web-port) under the sink's own consumer group <app id>-sink; one "
                        "sink per embedded chDB store (or set FAULTLINE_CLICKHOUSE_URL)")
    # the analysis-only worker is the default now; the old flag is accepted and does nothing
    p.add_argument("--no-sink", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--loglevel", default=None, choices=["debug", "info", "warning", "error"],
                   help="log level (default: settings.log_level)")
    p.set_defaults(func=run)


def prepare(args: argparse.Namespace) -> Any:
    """Settings with the broker's actual partition count (topics created if missing)."""
    settings = config.load(args.config)
    from dataclasses import replace

    from ..streams.faust_topics import BrokerUnreachable, TopicLayoutError, ensure_topics

    try:
        parts = asyncio.run(ensure_topics(settings))
    except (BrokerUnreachable, TopicLayoutError) as e:
        raise CliError(str(e)) from None
    if parts != settings.topic_partitions:
        settings = replace(settings, topic_partitions=parts)
    return settings


def open_sink_or_fail(settings: Any) -> tuple[Any, Any]:
    """``faust_sink.open_sink`` with its failure as a ``CliError`` naming what to do."""
    from ..streams.faust_sink import SinkStoreBusy, open_sink

    try:
        return open_sink(settings)
    except SinkStoreBusy as e:
        raise CliError(str(e)) from None
    except Exception as e:  # StoreError: say what and what to do
        where = settings.clickhouse_url and "the ClickHouse server" or settings.store_path
        raise CliError(f"cannot open the store at {where}: {e}") from None


def serve(app: Any, workdir: Path, loglevel: str | None, settings: Any, store: Any = None) -> int:
    """Run ``app`` under a Faust worker until it stops; close ``store`` afterwards."""
    import faust

    level = (loglevel or settings.log_level or "info").lower()
    worker = faust.Worker(app, loglevel=level, workdir=str(workdir), quiet=True,
                          redirect_stdouts=False)
    # below WARN Faust's terminal spinner is off; at WARN and above it sets the root logger
    # to DEBUG, so every debug() call of Faust and aiokafka builds a record per message
    worker.spinner = None
    logging.getLogger("faultline").setLevel(level.upper())
    try:
        worker.execute_from_commandline()
    except SystemExit as e:
        return int(e.code or 0)
    finally:
        if store is not None:
            store.close()   # uncommitted rows are re-read on restart: nothing to flush here
    return 0


def build_app(settings: Any, **kw: Any) -> Any:
    """``streams.app.create_app`` with a refused web configuration (a non-loopback bind
    without a token) as a ``CliError``."""
    from ..streams.app import create_app

    try:
        return create_app(settings, install=False, **kw)
    except config.ConfigError as e:
        raise CliError(str(e)) from None


def run(args: argparse.Namespace) -> int:
    settings = prepare(args)

    from ..streams.app import install_all
    from ..streams.services import Services

    workdir = Path(args.workdir or "var/worker").resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    web_port = args.web_port
    if web_port is None and os.environ.get("FAULTLINE_WEB_PORT"):
        web_port = settings.web_port
    services = Services(settings)
    app = build_app(settings, app_id=args.app_id, web_enabled=web_port is not None,
                    web_port=web_port, datadir=workdir / "faust", services=services)
    sink = open_sink_or_fail(settings) if args.sink else None
    if sink is not None:
        from ..streams import faust_sink

        faust_sink.install(app, services, *sink, group_id=faust_sink.sink_group_id(settings, args.app_id))
    install_all(app, services)
    return serve(app, workdir, args.loglevel, settings, sink[0] if sink else None)
