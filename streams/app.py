"""The Faust application: ``create_app(settings)`` builds a configured ``faust.App`` with the
faultline agents, tables and timers installed (``streams.agents``) and the optional web views
of other modules registered (``register_views``). What they share (settings, ``/metrics``
registry, store) is one ``streams.services.Services``, passed to each explicitly.

Topics carry raw bytes (``value_serializer='raw'``); agents decode them in batches with
``schemas.decode`` so a bad message becomes a dead-letter record instead of a crash.
Tables use Faust's in-memory store, rebuilt from their changelog topics when a worker
(re)starts; RocksDB is not installed on this machine.
"""

from __future__ import annotations

import importlib
import logging
import re
import ssl
from pathlib import Path
from typing import Any

import faust

from ..config import Settings
from ..sinks.api import web_options
from .services import Services

log = logging.getLogger("faultline.streams.app")

#: modules that may define ``register_views(app, services)`` (Faust web views); missing ones are skipped
VIEW_MODULES: tuple[str, ...] = ("faultline.sinks.api", "faultline.streams.web", "faultline.metrics.web")


def default_app_id(settings: Settings) -> str:
    """The Faust app id (consumer group and changelog topic prefix).

    ``settings.extra['app_id']`` wins; otherwise ``<topic prefix>faultline``, so a side
    pipeline (or a test) with its own prefix never shares consumer groups or changelogs, and
    its changelog topics (``<app id>-<table>-changelog``) carry the prefix too.
    """
    explicit = settings.extra.get("app_id")
    if explicit:
        return str(explicit)
    prefix = re.sub(r"[^A-Za-z0-9_.-]", "_", settings.topic_prefix)
    return f"{prefix}faultline"


def broker_urls(bootstrap: str) -> list[str]:
    return [f"kafka://{h.strip()}" for h in bootstrap.split(",") if h.strip()]


def broker_credentials(settings: Settings) -> Any:
    """Faust credentials for the configured security protocol (None for PLAINTEXT)."""
    proto = settings.kafka_security_protocol.upper()
    ctx: ssl.SSLContext | None = None
    if proto in ("SSL", "SASL_SSL"):
        from aiokafka.helpers import create_ssl_context

        ctx = create_ssl_context(cafile=settings.kafka_ssl_cafile,
                                 certfile=settings.kafka_ssl_certfile,
                                 keyfile=settings.kafka_ssl_keyfile)
    if proto.startswith("SASL"):
        return faust.SASLCredentials(username=settings.kafka_sasl_username,
                                     password=settings.kafka_sasl_password,
                                     ssl_context=ctx,
                                     mechanism=settings.kafka_sasl_mechanism or "PLAIN")
    if proto == "SSL":
        return faust.SSLCredentials(ctx)
    return None


class FaultlineApp(faust.App):
    """``faust.App`` with a cheaper per-record path: the consumer delivers records without a
    per-message ``wait_first`` when the delivery cannot block (``faust_compat.fast_drain``), and
    topics carrying a ``RawFeed`` get their records as batches of messages, without Faust
    events and streams (``faust_compat.fast_conductor``). Its producer's ``flush`` waits for
    every table changelog write (``faust_compat.complete_flush``)."""

    def _new_consumer(self) -> Any:
        from .faust_compat import fast_drain

        t = self.transport
        t.Consumer = fast_drain(t.Consumer)
        return super()._new_consumer()

    def _new_producer(self) -> Any:
        from .faust_compat import complete_flush
        from .faust_producer import idempotent_producer

        t = self.transport
        # flush() waits for every changelog write, not at most 0.1 s (faust_compat.complete_flush):
        # Faust's commit flushes the producer and then commits the offsets that state covers
        t.Producer = complete_flush(idempotent_producer(t.Producer))
        return super()._new_producer()

    def _new_conductor(self) -> Any:
        from .faust_compat import fast_conductor

        t = self.transport
        t.Conductor = fast_conductor(t.Conductor)
        return super()._new_conductor()


def create_app(settings: Settings, *, app_id: str | None = None, web_enabled: bool = False,
               web_port: int | None = None, datadir: str | Path | None = None,
               install: bool = True, services: Services | None = None, **conf: Any) -> faust.App:
    """Build the faultline Faust app for ``settings``.

    ``services``: what the app's agents and views share (``Services(settings)`` when not
    given; a caller that installs more, e.g. the sink, passes its own). ``install=False``
    returns the bare configured app (no agents), for tools that only need the configuration.
    Extra keyword arguments override Faust settings.
    """
    from .faust_compat import BrokerAwayFilter, check_versions, patch_recovery

    check_versions()   # the fast path relies on Faust/aiokafka internals: refuse untested versions
    patch_recovery()   # a standby partition without a built offset seeks to the beginning
    BrokerAwayFilter(settings.kafka_bootstrap).install()
    app_id = app_id or default_app_id(settings)
    options: dict[str, Any] = dict(
        broker=broker_urls(settings.kafka_bootstrap),
        broker_credentials=broker_credentials(settings),
        store="memory://",
        key_serializer="raw",
        value_serializer="raw",
        topic_partitions=settings.topic_partitions,
        topic_replication_factor=settings.topic_replication,
        topic_allow_declare=True,
        consumer_auto_offset_reset="earliest",
        web_enabled=web_enabled,
        web_port=web_port if web_port is not None else settings.web_port,
        **web_options(settings, enabled=web_enabled),   # bind, token on every route, Faust views off (S, sinks/api.py)
        datadir=str(datadir or Path(settings.store_path).parent / "faust"),
        # one produce request per 20 ms at most (changelog, signals, alerts): at 10k+ events/s
        # a 5 ms linger made the produce requests' socket writes ~6 % of the worker's CPU
        producer_linger=0.02,
        # commit offsets once a second (not every 1,000 acks: at 10k+ events/s that is a
        # commit and a producer flush every 100 ms); a restarted worker re-reads at most
        # that second, and the per-key offset fences skip what it had applied
        broker_commit_every=100_000,
        broker_commit_interval=1.0,
        stream_wait_empty=False,
        stream_buffer_maxsize=50_000,
        # a crashed worker's partitions move to the others after 15 s (Faust's default: 60 s);
        # heartbeats at a fifth of it (Kafka wants at most a third)
        broker_session_timeout=settings.worker_session_timeout_ms / 1000,
        broker_heartbeat_interval=settings.worker_session_timeout_ms / 5000,
        table_cleanup_interval=60.0,
        autodiscover=False,
    )
    options.update(conf)
    app = FaultlineApp(app_id, **options)
    services = services or Services(settings)

    @app.on_before_shutdown.connect
    async def _close_metrics(sender: Any, **kw: Any) -> None:
        await services.metrics.close()   # the sources' clients (group offsets)

    if install:
        install_all(app, services)
    return app


def install_all(app: faust.App, services: Services) -> None:
    """Install the agents of every piece and register the optional web views."""
    from . import agents

    agents.install(app, services)
    from . import agents_findings  # proactive findings (H3c): fleet-wide tracker agent

    agents_findings.install(app, services.settings)
    register_views(app, services)


def register_views(app: faust.App, services: Services, modules: tuple[str, ...] = VIEW_MODULES) -> list[str]:
    """Call ``register_views(app, services)`` of every module in ``modules`` that exists.

    Other pieces (the SQL API of the sink, the incident web page) add their Faust web views
    this way without this file knowing them. Returns the modules that registered.
    """
    done = []
    for name in modules:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name and name.startswith(e.name):
                continue  # the optional module is not there (yet)
            raise
        fn = getattr(mod, "register_views", None)
        if fn is not None:
            fn(app, services)
            done.append(name)
    if done:
        log.info("web views registered", extra={"modules": done})
    return done
