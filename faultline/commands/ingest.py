"""``faultline ingest FILE.jsonl [--store PATH]``: diagnose a file of contract events with the
in-process engine (as ``faultline diagnose``) and write the events, alerts, incidents and
findings into the store."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..sinks.cli_support import add_store_arg, settings_of


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ingest", help="diagnose a file of events and store events, alerts, incidents",
                       description=__doc__ + " Re-ingesting the same file changes no query answer "
                       "(everything is keyed by id). Invalid lines are counted and reported, never fatal.")
    p.add_argument("file", help="JSON-lines file of contract events (.jsonl or .jsonl.zst), or - for stdin")
    add_store_arg(p)
    p.add_argument("--batch", type=int, default=50_000, metavar="N", help="rows per insert (default 50000)")
    p.add_argument("--no-diagnose", action="store_true", help="store the events only (no engine run)")
    p.add_argument("--lateness-ms", type=int, default=None, help="reorder bound (default: settings lateness_ms)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def _engine(lateness_ms: int) -> Any:
    try:
        from ..streams.engine import Engine, EngineConfig
    except ImportError:  # the engine is optional: events are stored either way
        return None
    return Engine(EngineConfig(lateness_ms=lateness_ms))


def _findings() -> Any:
    try:
        from ..streams.findings import FindingsTracker
    except ImportError:
        return None
    return FindingsTracker()


def ingest_stream(fh: Any, store: Any, *, diagnose: bool = True, lateness_ms: int = 10_000,
                  batch: int = 50_000, progress: Any = None, source: str = "-") -> dict[str, Any]:
    """Decode, diagnose and store every line of a byte stream; returns counts."""
    from ..schemas.codec import ContractError, dead_letter, decode, now_ms
    from ..sinks.writer import SinkWriter
    from .diagnose import _lines

    eng = _engine(lateness_ms) if diagnose else None
    tracker = _findings() if eng is not None else None
    w = SinkWriter(store, max_rows=batch, max_delay_s=3600)
    n_ok = n_bad = n_line = 0
    errors: list[tuple[int, str]] = []
    max_ts = 0
    now = now_ms()
    for lines in _lines(fh):
        good = []
        for ln in lines:
            n_line += 1
            if not ln.strip():
                continue
            try:
                ev = decode(ln, now=now)
            except ContractError as e:
                n_bad += 1
                if len(errors) < 20:
                    errors.append((n_line, e.reason))
                # kept, with its reason, where SQL sees it (the line number as the offset)
                w.add_deadletter(dead_letter(ln, e.reason, topic=f"file:{source}", partition=0, offset=n_line))
                continue
            n_ok += 1
            good.append(ev)
            w.add_event(ev)   # data from the validated struct: what the engine saw
            if ev.ts > max_ts:
                max_ts = ev.ts
        if eng is not None:
            outs = eng.process(good)
            if tracker is not None:
                tracker.feed(good)
                tracker.feed(outs)
            for o in outs:
                w.add_output(o)
        if len(w) >= batch:
            w.flush()
        if progress is not None:
            progress(sum(len(x) + 1 for x in lines))
    if eng is not None:
        outs = eng.finish()
        if tracker is not None:
            tracker.feed(outs)
        for o in outs:
            w.add_output(o)
        for inc in eng.incidents():  # latest revisions (idempotent if already written)
            w.add_output(inc)
        if tracker is not None and max_ts:
            found = {f.id: f for f in tracker.evaluate(max_ts)}
            found.update({f.id: f for f in tracker.snapshot(max_ts)})
            for f in found.values():
                w.add_output(f)
    w.flush()
    t = w.totals
    return {"lines": n_line, "events": n_ok, "invalid": n_bad, "errors": errors,
            "alerts": t.alerts, "incidents": len(eng.incidents()) if eng is not None else 0,
            "incident_rows": t.incidents, "findings": t.findings, "seconds": t.seconds,
            "diagnosed": eng is not None, "deadletters": t.deadletters}


def run(args: argparse.Namespace) -> int:
    from ..cli import CliError
    from ..sinks.store import StoreError, open_store
    from .diagnose import _open

    settings = settings_of(args)
    lateness = args.lateness_ms if args.lateness_ms is not None else settings.lateness_ms
    try:
        store = open_store(settings, path=args.store)
    except StoreError as e:
        raise CliError(f"{e}") from None
    fh = _open(args.file)
    size = os.path.getsize(args.file) if args.file != "-" and not args.file.endswith(".zst") else None
    try:
        if args.quiet or not sys.stderr.isatty() and size is None:
            res = ingest_stream(fh, store, diagnose=not args.no_diagnose, lateness_ms=lateness, batch=args.batch,
                                source=args.file)
        else:
            from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn,
                                       TimeElapsedColumn, TransferSpeedColumn)

            with Progress(TextColumn("[bold]ingest[/] {task.description}"), BarColumn(), DownloadColumn(),
                          TransferSpeedColumn(), TimeElapsedColumn(), transient=False) as prog:
                task = prog.add_task(os.path.basename(args.file), total=size)
                res = ingest_stream(fh, store, diagnose=not args.no_diagnose, lateness_ms=lateness,
                                    batch=args.batch, progress=lambda n: prog.advance(task, n), source=args.file)
    except StoreError as e:
        raise CliError(f"writing to {store.location} failed: {e}") from None
    finally:
        if fh is not sys.stdin.buffer:
            fh.close()
        store.close()
    where = f"{store.backend}:{store.location}"
    diag = (f"{res['incidents']} incident(s), {res['alerts']} alert(s), {res['findings']} finding(s)"
            if res["diagnosed"] else "not diagnosed (events only)")
    print(f"stored {res['events']} events into {where}; {diag}; {res['invalid']} invalid line(s)"
          + (" (kept with their reasons in table deadletters)" if res["invalid"] else ""), file=sys.stderr)
    for pos, reason in res["errors"]:
        print(f"  line {pos}: {reason}", file=sys.stderr)
    return 0
