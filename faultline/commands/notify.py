"""``faultline notify``: deliver alerts and incidents to Prometheus Alertmanager and/or a
webhook (generic JSON or Slack-compatible).

A consumer group of its own (``<app id>-notify``) on fl.alerts and fl.incidents, separate
from the worker: a receiver that is down never slows the analysis. A batch's offsets are
committed only after it was delivered, or after the bounded retry gave up and the
undelivered request went to fl.deadletter with the reason. Configure with
FAULTLINE_NOTIFY_* variables or a [faultline.notify] table (docs/alerts.md), e.g.

    FAULTLINE_NOTIFY_ALERTMANAGER_URL=http://127.0.0.1:9094 faultline notify
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from .. import config
from ..cli import CliError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("notify", help="push alerts and incidents to Alertmanager / a webhook",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--alertmanager", metavar="URL", default=None,
                   help="Alertmanager base URL(s), comma separated (default FAULTLINE_NOTIFY_ALERTMANAGER_URL)")
    p.add_argument("--webhook", metavar="URL", default=None,
                   help="webhook URL (default FAULTLINE_NOTIFY_WEBHOOK_URL; a Slack URL is a secret: "
                        "prefer FAULTLINE_NOTIFY_WEBHOOK_URL_FILE)")
    p.add_argument("--format", dest="webhook_format", choices=["json", "slack"], default=None,
                   help="webhook payload (default json)")
    p.add_argument("--app-id", default=None,
                   help="the analysis workers' app id; the group is <app id>-notify (default from the topic prefix)")
    p.add_argument("--loglevel", default=None, choices=["debug", "info", "warning", "error"])
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..notify.config import NotifySettings
    from ..notify.service import Notifier, notify_group_id

    from .worker import prepare

    try:
        ns = NotifySettings.from_settings(config.load(args.config), alertmanager_url=args.alertmanager,
                                          webhook_url=args.webhook, webhook_format=args.webhook_format)
        settings = prepare(args)   # creates missing contract topics, as the worker does (never auto-created)
    except config.ConfigError as e:
        raise CliError(str(e)) from None
    level = (args.loglevel or settings.log_level or "info").upper()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("faultline").setLevel(level)
    group = notify_group_id(settings, args.app_id)
    return asyncio.run(_serve(Notifier(settings, ns, group_id=group), settings))


async def _serve(n, settings) -> int:
    from aiokafka.errors import KafkaConnectionError

    from ..topics import unreachable

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, n.stop)
    try:
        await n.run()
    except KafkaConnectionError:
        raise CliError(unreachable(settings.kafka_bootstrap)) from None
    return 0
