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


def add_common_args(p: argparse.ArgumentParser, interval_s: float) -> None:
    p.add_argument("--once", action="store_true", help="collect one round, then exit")
    p.add_argument("--output", metavar="-", help="'-' prints contract JSON lines to stdout instead of publishing")
    p.add_argument("--interval", type=float, default=interval_s, metavar="SECONDS",
                   help=f"seconds between rounds (default {interval_s:g})")


async def run_collector(collector: Collector, settings: Settings, *, once: bool = False,
                        output: str | None = None, interval_s: float | None = None,
                        rounds: int | None = None,
                        sink: Callable[[list[Envelope]], Awaitable[Any]] | None = None) -> int:
    """Run ``collector`` until cancelled (or one round with ``once``); returns events emitted.

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
    try:
        while True:
            started = now_ms()
            try:
                evs = await collector.collect()
            except Exception as e:  # one bad round must not kill a node agent
                log.error("collector %s round failed: %s", collector.name, e,
                          extra={"collector": collector.name})
                evs = []
            if evs:
                await emit(evs)
                total += len(evs)
            n += 1
            if once or (rounds is not None and n >= rounds):
                break
            await asyncio.sleep(max(0.0, interval - (now_ms() - started) / 1000))
    finally:
        if pub is not None:
            await pub.flush()
            await pub.stop()
        await collector.close()
    return total
