"""``faultline collect logs``: interesting lines from training log files -> ``runtime.log``.

Follows every file the ``--glob`` patterns match (new files are picked up within
``rescan_s``, 5 s; rotation and
truncation are handled as ``tail -F`` does), keeps a Python traceback (and chained
``During handling ...`` sections) together as one multi-line block, and forwards only lines
and blocks that the signature catalog shared with the stream detectors
(``faultline.streams.signatures.classify``) recognises, with ``signature`` set to the
catalog's name. Each (job, rank, signature) is rate-limited by a token bucket
(``--burst`` events, then one per ``--every`` seconds); suppressed lines are counted.

Job and rank, first that gives one: ``--path-pattern`` placeholders matched against the
file path (``{job}/rank{rank}.log``, ``slurm-{job}.out``), ``--job``/``--rank``, the
environment (``SLURM_JOB_ID``; ``RANK`` or ``SLURM_PROCID``), the rank the line itself
names (``[rank3]:``, ``[Rank 3]``). Lines with no job are not published (the contract
requires a job on ``runtime.*``) and are counted in ``stats['no_job']``.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import time
from typing import Callable

from ...config import Settings
from ...schemas import Envelope, now_ms
from ...schemas.events import RuntimeLog, RuntimeLogData
from ._tail import GlobTail
from .base import Collector, hostname, new_id

NAME = "logs"
HELP = "tail training logs; forward lines matching the shared signature catalog as runtime.log"
INTERVAL_S = 1.0

log = logging.getLogger("faultline.collect.logs")

#: torchrun ``--tee``/``--redirects`` and ``--log-line-prefix-template`` style prefixes
_PREFIX = re.compile(r"^(?:\[(?:rank|default)?(\d+)\]:\s?|\d+:\s)")
_EXC_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failure)\b")
_CHAIN = ("During handling of the above exception", "The above exception was the direct cause")
MAX_BLOCK_LINES = 400
MAX_BLOCK_BYTES = 128 * 1024


def compile_path_pattern(pattern: str) -> re.Pattern[str]:
    """``{job}/rank{rank}.log`` -> a regex matching the end of a path with named groups."""
    out = []
    for part in re.split(r"(\{job\}|\{rank\}|\*)", pattern):
        if part == "{job}":
            out.append(r"(?P<job>[A-Za-z0-9_.\-]+?)")
        elif part == "{rank}":
            out.append(r"(?P<rank>\d+)")
        elif part == "*":
            out.append(r"[^/]*")
        else:
            out.append(re.escape(part))
    return re.compile(r"(?:^|/)" + "".join(out) + r"$")


class TokenBucket:
    __slots__ = ("tokens", "last")

    def __init__(self, burst: float) -> None:
        self.tokens = burst
        self.last = time.monotonic()


class _Block:
    __slots__ = ("lines", "size", "started", "rank", "ended")

    def __init__(self, first: str, rank: int | None) -> None:
        self.lines = [first]
        self.size = len(first)
        self.started = time.monotonic()
        self.rank = rank
        self.ended = False

    def add(self, line: str) -> None:
        self.lines.append(line)
        self.size += len(line) + 1


class LogsCollector(Collector):
    name = NAME
    interval_s = INTERVAL_S

    def __init__(self, globs: list[str], node: str | None = None, *, path_patterns: list[str] = (),
                 job: str | None = None, rank: int | None = None, from_start: bool = False,
                 burst: float = 5, every_s: float = 10.0, block_timeout_s: float = 2.0,
                 rescan_s: float = 5.0, state_path: str | None = None,
                 classify: Callable[[str], object] | None = None) -> None:
        if classify is None:
            from ...streams.signatures import classify
        self.classify = classify
        self.node = node or hostname()
        self.source = f"logs@{self.node}"
        self.tail = GlobTail(globs, from_start=from_start, rescan_s=rescan_s, state_path=state_path)
        self.patterns = [compile_path_pattern(p) for p in path_patterns]
        self.job = job or os.environ.get("SLURM_JOB_ID")
        env_rank = os.environ.get("RANK") or os.environ.get("SLURM_PROCID")
        self.rank = rank if rank is not None else (int(env_rank) if env_rank and env_rank.isdigit() else None)
        self.burst = burst
        self.every_s = every_s
        self.block_timeout_s = block_timeout_s
        self._buckets: dict[tuple, TokenBucket] = {}
        self._blocks: dict[str, _Block] = {}
        self._ident: dict[str, tuple[str | None, int | None, str]] = {}
        self.stats = {"lines": 0, "forwarded": 0, "rate_limited": 0, "no_job": 0, "blocks": 0}

    # ------------------------------------------------------------------ identity
    def identity(self, path: str) -> tuple[str | None, int | None, str]:
        """(job, rank, stream) of a log file."""
        got = self._ident.get(path)
        if got is not None:
            return got
        job, rank = None, None
        for rx in self.patterns:
            m = rx.search(path)
            if m:
                gd = m.groupdict()
                job = gd.get("job")
                rank = int(gd["rank"]) if gd.get("rank") else None
                break
        job = job or self.job
        rank = rank if rank is not None else self.rank
        base = os.path.basename(path).lower()
        stream = "stderr" if ("err" in base or base.endswith(".e")) else "stdout"
        got = (job, rank, stream)
        if len(self._ident) < 100_000:
            self._ident[path] = got
        return got

    # ------------------------------------------------------------------ blocks
    def _feed(self, path: str, line: str, out: list[tuple[str, str, int | None]]) -> None:
        """Assemble tracebacks; append finished (path, message, line_rank) to ``out``."""
        m = _PREFIX.match(line)
        body = line[m.end():] if m else line
        lrank = int(m.group(1)) if m and m.group(1) else None
        blk = self._blocks.get(path)
        if blk is not None:
            room = len(blk.lines) < MAX_BLOCK_LINES and blk.size < MAX_BLOCK_BYTES
            if blk.ended:  # after the exception line: only a chained traceback continues
                if room and (not body.strip() or body.startswith(_CHAIN)):
                    blk.add(line)
                    blk.ended = not body.startswith(_CHAIN)
                    return
            else:
                if room and ((not body) or body[0] in " \t" or body.startswith("Traceback (")):
                    blk.add(line)
                    return
                if room and _EXC_LINE.match(body):
                    blk.add(line)
                    blk.ended = True
                    return
            self._close_block(path, out)
        if body.startswith("Traceback (most recent call last)"):
            self._blocks[path] = _Block(line, lrank)
            return
        out.append((path, line, lrank))

    def _close_block(self, path: str, out: list[tuple[str, str, int | None]]) -> None:
        blk = self._blocks.pop(path)
        while len(blk.lines) > 1 and not blk.lines[-1].strip():
            blk.lines.pop()
        self.stats["blocks"] += 1
        out.append((path, "\n".join(blk.lines), blk.rank))

    # ------------------------------------------------------------------ rate limit
    def _allow(self, key: tuple) -> bool:
        b = self._buckets.get(key)
        t = time.monotonic()
        if b is None:
            if len(self._buckets) > 50_000:  # bounded state
                self._buckets.clear()
            b = self._buckets[key] = TokenBucket(self.burst)
        else:
            b.tokens = min(self.burst, b.tokens + (t - b.last) / self.every_s)
            b.last = t
        if b.tokens >= 1:
            b.tokens -= 1
            return True
        return False

    # ------------------------------------------------------------------ round
    def collect_sync(self, *, final: bool = False) -> list[Envelope]:
        ts = now_ms()
        done: list[tuple[str, str, int | None]] = []
        for path, lines in self.tail.poll():
            self.stats["lines"] += len(lines)
            for line in lines:
                self._feed(path, line, done)
        t = time.monotonic()
        for path in [p for p, b in self._blocks.items() if final or b.ended or t - b.started > self.block_timeout_s]:
            self._close_block(path, done)
        self.tail.save()
        out: list[Envelope] = []
        for path, msg, lrank in done:
            sig = self.classify(msg)
            if sig is None:
                continue
            name = getattr(sig, "name", None) or str(sig)
            job, rank, stream = self.identity(path)
            if rank is None:
                rank = lrank if lrank is not None else (getattr(sig, "fields", {}) or {}).get("rank")
            if not job:
                self.stats["no_job"] += 1
                continue
            if not self._allow((job, rank, name)):
                self.stats["rate_limited"] += 1
                continue
            self.stats["forwarded"] += 1
            out.append(RuntimeLog(v=1, id=new_id(), ts=ts, source=self.source, node=self.node, job=job,
                                  data=RuntimeLogData(stream=stream, message=msg[:MAX_BLOCK_BYTES],
                                                      rank=rank, signature=name)))
        return out

    async def collect(self) -> list[Envelope]:
        return self.collect_sync()

    async def close(self) -> None:
        self.tail.close()


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--glob", action="append", dest="globs", required=True, metavar="PATTERN",
                   help="log files to follow (repeatable; ** allowed), e.g. '/logs/*/rank*.log'")
    p.add_argument("--path-pattern", action="append", default=[], metavar="TEMPLATE",
                   help="job/rank from the path, e.g. '{job}/rank{rank}.log' (repeatable)")
    p.add_argument("--node", help="node name (default: this host)")
    p.add_argument("--job", help="job id (default: from the path, else SLURM_JOB_ID)")
    p.add_argument("--rank", type=int, help="rank (default: from the path, else RANK/SLURM_PROCID)")
    p.add_argument("--from-start", action="store_true", help="read existing files from their start")
    p.add_argument("--state", help="file keeping each log file's read position, so a restarted agent "
                                   "goes on where it stopped (default: next to the spool dir)")
    p.add_argument("--burst", type=float, default=5, help="events per (job, rank, signature) before limiting")
    p.add_argument("--every", type=float, default=10.0, metavar="SECONDS",
                   help="after the burst, at most one event per SECONDS per (job, rank, signature)")


def build(args: argparse.Namespace, settings: Settings) -> LogsCollector:
    return LogsCollector(args.globs, args.node, path_patterns=args.path_pattern, job=args.job,
                         rank=args.rank, from_start=args.from_start, burst=args.burst, every_s=args.every,
                         state_path=args.state or default_state_path(settings))


def default_state_path(settings: Settings) -> str:
    return str(settings.extra.get("logs_state") or
               os.path.join(os.path.dirname(os.path.normpath(settings.spool_dir)) or ".", "logs.state.json"))
