"""What every collector is: a small class with ``collect()`` returning contract events,
and one runner that gives each the same ``--once``, ``--output -`` and ``--interval``.

    class DiskCollector(Collector):
        name = "storage"
        async def collect(self) -> list[Envelope]: ...
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import sys
import uuid
from pathlib import Path
from typing import Any, Awaitable, Callable

from ...cli import CliError
from ...config import Settings
from ...schemas import Envelope, encode, now_ms

log = logging.getLogger("faultline.collect")


def new_id() -> str:
    """A globally unique event id."""
    return uuid.uuid4().hex


def resolve_secret(cfg: dict[str, Any], key: str, where: str,
                   error: type[Exception] = ValueError) -> str | None:
    """A credential from a collector's config: ``key`` inline, ``key_env`` (variable name) or
    ``key_file`` (path), in that order; ``error`` (naming ``where``) when it cannot be read."""
    if cfg.get(key) is not None:
        return str(cfg[key])
    if cfg.get(key + "_env"):
        var = cfg[key + "_env"]
        if var not in os.environ:
            raise error(f"{where}: {key}_env names ${var}, which is not set")
        return os.environ[var]
    if cfg.get(key + "_file"):
        try:
            return Path(cfg[key + "_file"]).read_text().strip()
        except OSError as e:
            raise error(f"{where}: cannot read {key}_file {cfg[key + '_file']}: {e.strerror}") from None
    return None


def hostname() -> str:
    return socket.gethostname().split(".")[0]


class Collector:
    """One source. Subclasses set ``name`` and implement ``collect`` (one round)."""

    name = "collector"
    #: default seconds between rounds
    interval_s: float = 10.0

    async def collect(self) -> list[Envelope]:
        raise NotImplementedError

    async def close(self) -> None:
        """Release sources (files, sessions) when the runner stops."""

    def round_problems(self) -> list[str]:
        """What went wrong in the last round without failing it (a scrape that did not answer):
        ``--once`` exits non-zero with these; a long-running agent only counts them."""
        return []


class CollectorFailed(CliError):
    """``--once`` could not do its job: a round failed, a source did not answer, or the broker
    did not take the events. The message says which and what to do (the CLI exits 2)."""


#: ``--once``: seconds to wait for the broker to acknowledge the round's events
ONCE_FLUSH_TIMEOUT_S = 10.0


def unacknowledged(settings: Settings, timeout_s: float, spool_dir: Any = None) -> str:
    """What ``--once`` says when the broker did not take the events in time."""
    return (f"the broker at {settings.kafka_bootstrap} did not acknowledge the events within {timeout_s:g} s"
            + (f"; they stay spooled in {spool_dir} and go out with the next run" if spool_dir else "")
            + ": is Kafka running there (FAULTLINE_KAFKA_BOOTSTRAP)?")


def count_round_error(collector: Collector) -> None:
    """One failed round in ``collector.stats["round_errors"]`` (created for a collector that keeps
    no stats), which the node agent's /metrics serves as ``faultline_collector_stats_total``."""
    stats = getattr(collector, "stats", None)
    if not isinstance(stats, dict):
        stats = collector.stats = {}  # type: ignore[attr-defined]
    stats["round_errors"] = stats.get("round_errors", 0) + 1


def add_common_args(p: argparse.ArgumentParser, interval_s: float) -> None:
    p.add_argument("--once", action="store_true", help="collect one round, then exit")
    p.add_argument("--output", metavar="-", help="'-' prints contract JSON lines to stdout instead of publishing")
    p.add_argument("--interval", type=float, default=interval_s, metavar="SECONDS",
                   help=f"seconds between rounds (default {interval_s:g})")
    p.add_argument("--flush-timeout", type=float, default=ONCE_FLUSH_TIMEOUT_S, metavar="SECONDS",
                   help="with --once: seconds to wait for the broker to acknowledge the events before "
                        f"exiting non-zero (they stay spooled; default {ONCE_FLUSH_TIMEOUT_S:g})")


async def run_collector(collector: Collector, settings: Settings, *, once: bool = False,
                        output: str | None = None, interval_s: float | None = None,
                        rounds: int | None = None,
                        sink: Callable[[list[Envelope]], Awaitable[Any]] | None = None,
                        flush_timeout_s: float = ONCE_FLUSH_TIMEOUT_S) -> int:
    """Run ``collector`` until cancelled (or one round with ``once``); returns events emitted.

    With ``once``, ``CollectorFailed`` when the round failed, the collector reports
    ``round_problems()`` or the broker did not acknowledge the events within
    ``flush_timeout_s`` (the events that were collected are still emitted first).

    Events go to stdout with ``output='-'``, to ``sink`` when given, else to Kafka
    through ``producers.spool.SpoolingPublisher`` when available, else ``Publisher``.
    """
    interval = collector.interval_s if interval_s is None else interval_s
    pub = None
    if output == "-":
        out = sys.stdout.buffer

        async def emit(evs: list[Envelope]) -> None:
            for ev in evs:
                out.write(encode(ev) + b"\n")
            out.flush()
    elif sink is not None:
        emit = sink
    else:
        try:
            from ..spool import SpoolingPublisher as _Pub  # type: ignore[attr-defined]
        except ImportError:
            from ..publish import Publisher as _Pub
        pub = await _Pub(settings).start()

        async def emit(evs: list[Envelope]) -> None:
            await pub.send_many(evs)

    total = 0
    n = 0
    problems: list[str] = []
    delivered: bool | None = None
    try:
        while True:
            started = now_ms()
            problems = []
            try:
                evs = await collector.collect()
            except Exception as e:  # one bad round must not kill a node agent
                log.error("collector %s round failed: %s", collector.name, e,
                          extra={"collector": collector.name})
                count_round_error(collector)
                problems.append(f"round failed: {e or type(e).__name__}")
                evs = []
            problems += getattr(collector, "round_problems", list)()
            if evs:
                await emit(evs)
                total += len(evs)
            n += 1
            if once or (rounds is not None and n >= rounds):
                break
            await asyncio.sleep(max(0.0, interval - (now_ms() - started) / 1000))
    finally:
        if pub is not None:
            delivered = await pub.flush(**({"timeout_s": flush_timeout_s} if once else {}))
            await pub.stop(**({"flush_timeout_s": 0.0} if once and delivered is False else {}))
        await collector.close()
    if once:
        if delivered is False:
            problems.append(unacknowledged(settings, flush_timeout_s, getattr(pub, "dir", None)))
        if problems:
            raise CollectorFailed(f"collector {collector.name}: " + "; ".join(problems))
    return total
