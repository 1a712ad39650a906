"""``faultline diagnose FILE.jsonl [--json]``: explain every interrupted job attempt in a
file of contract events, in-process (same detectors and correlation as the worker)."""

from __future__ import annotations

import argparse
import io
import sys
from typing import IO

from ..humantime import show_ms
from ..schemas.codec import encode
from ..streams.offline import BUNDLE_HEADER, line_batches  # noqa: F401 - BUNDLE_HEADER: re-exported


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "diagnose", help="explain the interrupted jobs in a file of events (offline)",
        description=__doc__ + " Events may come in any order within the lateness bound; duplicates "
        "count once. Invalid lines are counted and reported on stderr, never fatal.")
    p.add_argument("file", help="JSON-lines file of contract events (.jsonl, .jsonl.zst, .jsonl.gz), or - for stdin")
    p.add_argument("--json", action="store_true", help="one incident per line as JSON (latest revision)")
    p.add_argument("--alerts", action="store_true", help="also print the alerts (JSON lines with --json)")
    p.add_argument("--lateness-ms", type=int, default=None, help="reorder bound (default: settings lateness_ms)")
    p.set_defaults(func=run)


def _open(path: str) -> IO[bytes]:
    from ..cli import CliError

    if path == "-":
        raw: IO[bytes] = sys.stdin.buffer
    else:
        try:
            raw = open(path, "rb")
        except OSError as e:
            raise CliError(f"cannot open {path}: {e.strerror}; check the path") from None
    head = raw.peek(4)[:4] if hasattr(raw, "peek") else b""
    if path.endswith(".zst") or head == b"\x28\xb5\x2f\xfd":
        import zstandard

        return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)  # type: ignore[return-value]
    if path.endswith(".gz") or head[:2] == b"\x1f\x8b":
        import gzip

        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


_lines = line_batches   # the name bench/streams.py and older callers import


def diagnose_stream(fh: IO[bytes], lateness_ms: int | None = None, *, findings: bool = False):
    """Run the offline pipeline (``streams.offline``: the worker's Engine and config) over a
    byte stream of JSON lines; returns it, finished (``incidents()``, ``alerts()``,
    ``stats``, ``errors``, ``cfg`` like the Engine's)."""
    from ..streams.offline import OfflinePipeline

    return OfflinePipeline.from_settings(lateness_ms=lateness_ms, findings=findings).feed_file(fh)


def _report(eng, out) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console(file=out, highlight=False, soft_wrap=False, width=120)
    incs = eng.incidents()
    st = eng.stats
    con.print(f"[bold]{len(incs)} incident(s)[/] from {st.events} events "
              f"({st.signals} signals, {st.alerts} alerts, {st.invalid} invalid, {st.duplicates} duplicates)")
    if incs:
        t = Table(show_lines=False, box=None, pad_edge=False)
        for c in ("job", "att", "state", "symptom", "root cause", "component", "conf", "lost GPU-h"):
            t.add_column(c)
        for i in incs:
            t.add_row(i.job, str(i.attempt), i.state or "", i.symptom[:40], i.root_cause.category,
                      i.root_cause.component, f"{i.root_cause.confidence:.2f}", f"{i.lost_gpu_hours:.2f}")
        con.print(t)
    for i in incs:
        con.rule(f"job {i.job} attempt {i.attempt} - {i.state}")
        con.print(f"[bold]stopped[/]     {show_ms(i.failure_ts)}  ({i.gpus} GPUs on {len(i.affected.nodes)} node(s))")
        con.print(f"[bold]symptom[/]     {i.symptom}")
        rc = i.root_cause
        con.print(f"[bold]root cause[/]  {rc.category} @ {rc.component} ({rc.confidence:.0%}): {rc.summary}")
        for h in i.hypotheses[1:4]:
            con.print(f"  alt         {h.category} @ {h.component} ({h.confidence:.0%}): {h.summary}")
        if i.ruled_out:
            con.print(f"[bold]ruled out[/]   {', '.join(i.ruled_out)}")
        ck = i.last_checkpoint
        con.print(f"[bold]checkpoint[/]  " + (f"step {ck.step} at {ck.path}" if ck else "none")
                  + f"; lost {i.lost_gpu_hours:.2f} GPU-hours")
        if i.retry:
            r = i.retry
            con.print(f"[bold]retry[/]       attempt {r.attempt} {r.state} on {', '.join(r.nodes)}"
                      + (" (same nodes)" if r.same_nodes else ""))
        # the timeline: repeats of one line (the same message from several ranks) folded
        groups: list[list] = []
        for e in i.evidence:
            if groups and (e.layer, e.node, e.summary) == groups[-1][1]:
                groups[-1][2] += 1
            else:
                groups.append([e, (e.layer, e.node, e.summary), 1])
        for e, _, n in groups[:12]:
            con.print(f"  {show_ms(e.ts)}  {e.layer:<8} {e.node or '-':<12} " + (f"(x{n}) " if n > 1 else "")
                      + e.summary, no_wrap=True, overflow="ellipsis")
        if len(groups) > 12:
            con.print(f"  ... {len(i.evidence)} evidence items in all (--json gives every one)")


def run(args: argparse.Namespace) -> int:
    from ..cli import CliError

    fh = _open(args.file)
    try:
        eng = diagnose_stream(fh, args.lateness_ms)
    except (OSError, EOFError, ValueError) as e:   # a truncated or corrupt .gz / .zst
        raise CliError(f"{args.file}: cannot read it: {e}") from None
    finally:
        if fh is not sys.stdin.buffer:
            fh.close()
    why = eng.no_events("stdin" if args.file == "-" else args.file)
    if why:
        raise CliError(why)
    out = sys.stdout.buffer
    if args.json:
        buf = io.BytesIO()
        for inc in eng.incidents():
            buf.write(encode(inc) + b"\n")
        if args.alerts:
            for a in eng.alerts():
                buf.write(encode(a) + b"\n")
        out.write(buf.getvalue())
        out.flush()
    else:
        _report(eng, sys.stdout)
        if args.alerts:
            for a in eng.alerts():
                print(f"ALERT {show_ms(a.ts)} {a.severity:<8} {a.detector:<16} {a.subject or ''}: {a.summary}")
    st = eng.stats
    if st.late:
        print(f"faultline diagnose: {st.late} event(s) came after event time had passed them (more "
              f"than the lateness bound of {eng.cfg.lateness_ms} ms out of order): applied late, so "
              "stall and window decisions around them may differ from the worker's, which orders "
              "by event time across partitions; give the events in time order, or a larger "
              "--lateness-ms", file=sys.stderr)
    if st.invalid:
        print(f"faultline diagnose: {st.invalid} invalid line(s) skipped:", file=sys.stderr)
        for pos, reason in eng.errors[:20]:
            print(f"  line {pos}: {reason}", file=sys.stderr)
        if st.invalid > 20:
            print(f"  ... by reason: {st.reasons}", file=sys.stderr)
    return 0
