"""``faultline worker``: run the Faust stream worker (detectors, per-job correlation, alerts,
incidents). Several workers with the same app id share the partitions; a restarted worker
rebuilds its tables from their changelog topics."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
from pathlib import Path

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
    p.add_argument("--no-sink", action="store_true",
                   help="do not write events and outputs to the ClickHouse/chDB store (another "
                        "process sinks them, or several workers share an embedded chDB store)")
    p.add_argument("--loglevel", default=None, choices=["debug", "info", "warning", "error"],
                   help="log level (default: settings.log_level)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings = config.load(args.config)
    from dataclasses import replace

    from ..streams.faust_topics import BrokerUnreachable, TopicLayoutError, ensure_topics

    try:
        parts = asyncio.run(ensure_topics(settings))
    except (BrokerUnreachable, TopicLayoutError) as e:
        raise CliError(str(e)) from None
    if parts != settings.topic_partitions:
        settings = replace(settings, topic_partitions=parts)

    import faust  # heavy import: only once the broker is known to answer

    from ..streams.app import create_app

    workdir = Path(args.workdir or "var/worker").resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    web_port = args.web_port
    if web_port is None and os.environ.get("FAULTLINE_WEB_PORT"):
        web_port = settings.web_port
    sink = None
    if not args.no_sink:
        from ..streams.faust_sink import open_sink

        try:
            sink = open_sink(settings)
        except Exception as e:  # StoreLocked, StoreError: say what and what to do
            raise CliError(f"cannot open the store at {settings.store_path}: {e}; run one worker per "
                           "embedded chDB store (others with --no-sink) or set FAULTLINE_CLICKHOUSE_URL") from None
    app = create_app(settings, app_id=args.app_id, web_enabled=web_port is not None,
                     web_port=web_port, datadir=workdir / "faust", install=False)
    from ..streams.app import install_all

    if sink is not None:
        from ..streams import faust_sink

        faust_sink.install(app, settings, *sink)
    install_all(app, settings)
    loglevel = (args.loglevel or settings.log_level or "info").lower()
    worker = faust.Worker(app, loglevel=loglevel, workdir=str(workdir), quiet=True,
                          redirect_stdouts=False)
    # below WARN Faust's terminal spinner is off; at WARN and above it sets the root logger
    # to DEBUG, so every debug() call of Faust and aiokafka builds a record per message
    worker.spinner = None
    logging.getLogger("faultline").setLevel(loglevel.upper())
    try:
        worker.execute_from_commandline()
    except SystemExit as e:
        return int(e.code or 0)
    finally:
        if sink is not None:
            store, writer = sink
            try:
                writer.close()      # final flush of anything buffered
            finally:
                store.close()
    return 0
