"""``faultline sink``: write every event and output record to the store, and serve the SQL
API and the incident page (``--web-port``, default settings.web_port).

The sink is its own consumer group (``<app id>-sink``): it reads every partition of the input
topics and of fl.alerts, fl.incidents, fl.findings and fl.deadletter, whatever the analysis
workers (``faultline worker``) do, and commits a batch's offsets only once the batch is
stored. With the embedded chDB store exactly one sink owns it (a second one refuses and
names the owner); with FAULTLINE_CLICKHOUSE_URL any number of sinks share the partitions.
When the store fails, the sink retries the same batch (backoff up to 30 s) and catches up
afterwards."""

from __future__ import annotations

import argparse
from pathlib import Path

from .worker import build_app, open_sink_or_fail, prepare, serve


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sink", help="store events and outputs; serve the SQL API and incident page",
                       description=__doc__)
    p.add_argument("--workdir", metavar="DIR", default=None,
                   help="working directory of the sink (default var/sink)")
    p.add_argument("--web-port", type=int, default=None, metavar="P",
                   help="port of the SQL API and incident page (default: settings.web_port, 6066)")
    p.add_argument("--no-web", action="store_true", help="store only: no SQL API, no incident page")
    p.add_argument("--app-id", default=None,
                   help="the analysis workers' app id; the sink's group is <app id>-sink "
                        "(default derived from the topic prefix)")
    p.add_argument("--batch-rows", type=int, default=20_000, metavar="N",
                   help="records per stored batch (offsets are committed per batch; default 20000)")
    p.add_argument("--loglevel", default=None, choices=["debug", "info", "warning", "error"],
                   help="log level (default: settings.log_level)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings = prepare(args)

    from ..streams import faust_sink
    from ..streams.app import register_views
    from ..streams.services import Services

    workdir = Path(args.workdir or "var/sink").resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    group = faust_sink.sink_group_id(settings, args.app_id)
    web_port = args.web_port if args.web_port is not None else settings.web_port
    # a Faust app with no agents hosts the web views and runs the sink as a task; its own
    # app id keeps Faust's (agent-less) consumer out of the sink's group
    services = Services(settings)
    app = build_app(settings, app_id=f"{group}-web", web_enabled=not args.no_web,
                    web_port=web_port, datadir=workdir / "faust", services=services)
    store, writer = open_sink_or_fail(settings)
    faust_sink.install(app, services, store, writer, group_id=group, max_rows=max(1, args.batch_rows))
    if not args.no_web:
        register_views(app, services)
    return serve(app, workdir, args.loglevel, settings, store)
