"""The one offline pipeline: ``faultline diagnose``, ``ingest``, ``findings --from``,
``replay --diagnose`` and the benches all run a file (or a replayed range) through this.

It is the worker's composition, in one process: the same ``Engine`` (``streams.engine``)
with the worker's ``EngineConfig.from_settings`` (lateness, stall floor, settle time), and
the same ``FindingsRunner`` + ``FindingsTracker`` the findings agent runs
(``streams.agents_findings``: hourly event-time evaluation, settled twice the correlator's
settle time). Only the watermark differs: the engine's own reorder buffer here, the global
watermark in the worker.

    pipe = OfflinePipeline.from_settings(settings)
    for batch in line_batches(fh):
        pipe.feed_lines(batch)
    pipe.finish()
    pipe.incidents(), pipe.alerts(), pipe.findings(), pipe.stats, pipe.errors
"""

from __future__ import annotations

from typing import IO, Any, Iterable, Iterator

import msgspec

from ..schemas.outputs import Finding
from .engine import Engine, EngineConfig
from .findings import FindingsRunner

#: the first line of a ``faultline bundle export`` file: the incident, not an event
BUNDLE_HEADER = b'{"faultline_bundle"'


def engine_config(settings: Any = None, lateness_ms: int | None = None) -> EngineConfig:
    """The worker's ``EngineConfig`` (``from_settings``) for ``settings`` (default: the loaded
    settings; a broken config file falls back to the defaults: an offline run must not
    stop on it), with ``lateness_ms`` when given."""
    if settings is None:
        from .. import config as _config

        try:
            settings = _config.load()
        except Exception:  # noqa: BLE001 - a broken config file must not stop an offline run
            settings = None
    cfg = EngineConfig.from_settings(settings) if settings is not None else EngineConfig()
    if lateness_ms is not None:
        cfg = msgspec.structs.replace(cfg, lateness_ms=lateness_ms)
    return cfg


def line_batches(fh: IO[bytes], chunk: int = 1 << 20) -> Iterator[list[bytes]]:
    """Batches of lines; works for plain, gzip and zstd stream readers alike (a UTF-8 byte
    order mark at the start, as some Windows editors write, is skipped)."""
    rest = b""
    first = True
    while True:
        buf = fh.read(chunk)
        if not buf:
            break
        if first:
            first = False
            if buf.startswith(b"\xef\xbb\xbf"):
                buf = buf[3:]
        buf = rest + buf
        parts = buf.split(b"\n")
        rest = parts.pop()
        yield parts
    if rest:
        yield [rest]


class OfflinePipeline:
    """Engine + findings over a finite input; ``outputs`` of ``process``/``finish`` are the
    engine's alerts and incidents (each revision) followed by the findings that became due."""

    def __init__(self, config: EngineConfig | None = None, *, findings: bool = True) -> None:
        self.engine = Engine(config or EngineConfig())
        self.runner: FindingsRunner | None = FindingsRunner(self.engine) if findings else None
        self.lines = 0   # input lines seen by ``feed_lines`` (blank and header lines included)

    @classmethod
    def from_settings(cls, settings: Any = None, *, lateness_ms: int | None = None,
                      findings: bool = True) -> "OfflinePipeline":
        return cls(engine_config(settings, lateness_ms), findings=findings)

    # ------------------------------------------------------------ input
    def process(self, items: Iterable[Any]) -> list[Any]:
        """Records (raw bytes, dicts or decoded events) in, outputs out."""
        if self.runner is not None:
            return self.runner.process(items)
        return self.engine.process(items)

    def feed_lines(self, lines: list[bytes]) -> list[Any]:
        """A batch of a file's lines: blank lines and a bundle's header are skipped but keep
        the line numbers of the errors right."""
        out: list[Any] = []
        good: list[bytes] = []
        for ln in lines:
            self.lines += 1
            if ln.strip() and not ln.startswith(BUNDLE_HEADER):
                good.append(ln)
                continue
            if good:
                out.extend(self.process(good))
                good = []
            self.engine.skip()
        if good:
            out.extend(self.process(good))
        return out

    def feed_file(self, fh: IO[bytes]) -> "OfflinePipeline":
        """Every line of a byte stream, then ``finish``."""
        for batch in line_batches(fh):
            self.feed_lines(batch)
        self.finish()
        return self

    def invalid(self, reason: str) -> None:
        """A record the caller decoded and rejected itself (``faultline ingest``)."""
        self.engine.invalid(reason)

    def finish(self) -> list[Any]:
        if self.runner is not None:
            return self.runner.finish()
        return self.engine.finish()

    # ------------------------------------------------------------ results
    @property
    def stats(self) -> Any:
        return self.engine.stats

    @property
    def errors(self) -> list[tuple[int, str]]:
        return self.engine.errors

    @property
    def cfg(self) -> EngineConfig:
        return self.engine.cfg

    def incidents(self) -> list[Any]:
        return self.engine.incidents()

    def alerts(self) -> list[Any]:
        return self.engine.alerts()

    def findings(self) -> list[Finding]:
        """The latest revision of every finding, most significant first."""
        if self.runner is None:
            return []
        return sorted(self.runner.findings.values(), key=lambda f: (f.score, -f.ts, f.id))

    def no_events(self, source: str) -> str | None:
        """Why the input held nothing to diagnose (the message for a non-zero exit), or None."""
        st = self.stats
        if st.events or st.duplicates:
            return None
        if not st.invalid:
            return f"{source}: no contract event in it ({self.lines} line(s), all blank)"
        top = sorted(st.reasons.items(), key=lambda kv: -kv[1])[:3]
        first = self.errors[0] if self.errors else None
        return (f"{source}: none of its {st.invalid} non-blank line(s) is a contract event ("
                + "; ".join(f"{n}x {r}" for r, n in top)
                + (f"; first at line {first[0]}" if first else "")
                + f"): give JSON lines of contract events (`faultline validate {source}` "
                  "names each line's problem)")


__all__ = ["OfflinePipeline", "engine_config", "line_batches", "BUNDLE_HEADER"]
