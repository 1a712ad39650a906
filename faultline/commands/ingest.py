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


def ingest_stream(fh: Any, store: Any, *, diagnose: bool = True, lateness_ms: int | None = None,
                  batch: int = 50_000, progress: Any = None, source: str = "-",
                  settings: Any = None) -> dict[str, Any]:
    """Decode, diagnose and store every line of a byte stream; returns counts. The diagnosis
    is the offline pipeline (``streams.offline``, the same as ``faultline findings --from``
    and ``diagnose``): the events it stores are the ones the engine saw, and the findings are
    the latest revision of each, so ``findings`` on the store lists what ``--from`` computes."""
    from ..schemas.codec import ContractError, dead_letter, decode, now_ms
    from ..sinks.writer import SinkWriter
    from ..streams.offline import BUNDLE_HEADER, OfflinePipeline, line_batches

    pipe = OfflinePipeline.from_settings(settings, lateness_ms=lateness_ms) if diagnose else None
    w = SinkWriter(store, max_rows=batch, max_delay_s=3600)
    n_ok = n_bad = n_line = 0
    errors: list[tuple[int, str]] = []
    now = now_ms()
    for lines in line_batches(fh):
        good = []
        for ln in lines:
            n_line += 1
            if not ln.strip() or ln.startswith(BUNDLE_HEADER):
                if pipe is not None:
                    if good:
                        _outputs(w, pipe.process(good))
                        good = []
                    pipe.engine.skip()
                continue
            try:
                ev = decode(ln, now=now)
            except ContractError as e:
                n_bad += 1
                if len(errors) < 20:
                    errors.append((n_line, e.reason))
                # kept, with its reason, where SQL sees it (the line number as the offset)
                w.add_deadletter(dead_letter(ln, e.reason, topic=f"file:{source}", partition=0, offset=n_line))
                if pipe is not None:
                    if good:
                        _outputs(w, pipe.process(good))
                        good = []
                    pipe.invalid(e.reason)
                continue
            n_ok += 1
            good.append(ev)
            w.add_event(ev)   # data from the validated struct: what the engine saw
        if pipe is not None and good:
            _outputs(w, pipe.process(good))
        if len(w) >= batch:
            w.flush()
        if progress is not None:
            progress(sum(len(x) + 1 for x in lines))
    if pipe is not None:
        pipe.lines = n_line
        _outputs(w, pipe.finish())
        for inc in pipe.incidents():  # latest revisions (idempotent if already written)
            w.add_output(inc)
        for f in pipe.findings():     # latest revision of each (the store keeps the latest ts)
            w.add_output(f)
    w.flush()
    t = w.totals
    return {"lines": n_line, "events": n_ok, "invalid": n_bad, "errors": errors,
            "alerts": t.alerts, "incidents": len(pipe.incidents()) if pipe is not None else 0,
            "incident_rows": t.incidents, "findings": len(pipe.findings()) if pipe is not None else 0,
            "finding_rows": t.findings, "seconds": t.seconds, "diagnosed": pipe is not None,
            "deadletters": t.deadletters}


def _outputs(w: Any, outs: list[Any]) -> None:
    """Alerts and incident revisions as they come; findings at the end (latest revision)."""
    from ..schemas.outputs import Finding

    for o in outs:
        if not isinstance(o, Finding):
            w.add_output(o)


def run(args: argparse.Namespace) -> int:
    from ..cli import CliError
    from ..sinks.store import StoreError, open_store
    from .diagnose import _open

    settings = settings_of(args)
    lateness = args.lateness_ms
    try:
        store = open_store(settings, path=args.store)
    except StoreError as e:
        raise CliError(f"{e}") from None
    fh = _open(args.file)
    size = os.path.getsize(args.file) if args.file != "-" and not args.file.endswith(".zst") else None
    try:
        if args.quiet or not sys.stderr.isatty() and size is None:
            res = ingest_stream(fh, store, diagnose=not args.no_diagnose, lateness_ms=lateness, batch=args.batch,
                                source=args.file, settings=settings)
        else:
            from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn,
                                       TimeElapsedColumn, TransferSpeedColumn)

            with Progress(TextColumn("[bold]ingest[/] {task.description}"), BarColumn(), DownloadColumn(),
                          TransferSpeedColumn(), TimeElapsedColumn(), transient=False) as prog:
                task = prog.add_task(os.path.basename(args.file), total=size)
                res = ingest_stream(fh, store, diagnose=not args.no_diagnose, lateness_ms=lateness,
                                    batch=args.batch, progress=lambda n: prog.advance(task, n), source=args.file,
                                    settings=settings)
    except StoreError as e:
        raise CliError(f"writing to {store.location} failed: {e}") from None
    finally:
        if fh is not sys.stdin.buffer:
            fh.close()
        store.close()
    if not res["events"]:
        what = (f"none of its {res['invalid']} non-blank line(s) is a contract event"
                + (f" (line {res['errors'][0][0]}: {res['errors'][0][1]})" if res["errors"] else "")
                if res["invalid"] else f"no contract event in it ({res['lines']} line(s), all blank)")
        raise CliError(f"{args.file}: {what}; nothing stored but the dead letters: give JSON lines of "
                       f"contract events (`faultline validate {args.file}` names each line's problem)")
    where = f"{store.backend}:{store.location}"
    diag = (f"{res['incidents']} incident(s), {res['alerts']} alert(s), {res['findings']} finding(s)"
            if res["diagnosed"] else "not diagnosed (events only)")
    print(f"stored {res['events']} events into {where}; {diag}; {res['invalid']} invalid line(s)"
          + (" (kept with their reasons in table deadletters)" if res["invalid"] else ""), file=sys.stderr)
    for pos, reason in res["errors"]:
        print(f"  line {pos}: {reason}", file=sys.stderr)
    return 0
