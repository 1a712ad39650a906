"""``faultline explain ID|JOB``: why a job stopped, from the store: the root cause in one
sentence, the evidence as swimlanes per layer, ruled-out layers, last checkpoint, lost
GPU-hours, the retry, and the commands to dig further."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import msgspec

from ..humantime import show
from ..schemas.outputs import LAYERS, Incident
from ..sinks.cli_support import add_store_arg, reader
from ..sinks.trends import WITHDRAWN_STATE

SQL = """
SELECT record, job, attempt
FROM incidents FINAL
WHERE id = {key:String} OR job = {key:String}
ORDER BY id = {key:String} DESC, state = {withdrawn:String}, failure_ts DESC, attempt DESC
LIMIT 20
"""

LANE_W = 64
_COLORS = {"gpu": "green", "hw": "red", "net": "blue", "storage": "magenta", "sched": "yellow",
           "runtime": "cyan", "inventory": "white"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("explain", help="explain an incident (by incident id or job id)", description=__doc__)
    p.add_argument("key", metavar="ID|JOB", help="incident id, or a job id (its latest incident)")
    p.add_argument("--attempt", type=int, default=None, help="with a job id: this attempt's incident")
    p.add_argument("--json", action="store_true", help="print the incident record as JSON instead")
    add_store_arg(p)
    p.set_defaults(func=run)


_t = show


def _dur(ms: float) -> str:
    s = abs(ms) / 1000
    if s < 120:
        return f"{s:.0f}s"
    if s < 7200:
        return f"{s / 60:.0f}m"
    return f"{s / 3600:.1f}h"


def sentence(i: Incident) -> str:
    rc = i.root_cause
    return (f"Job {i.job} attempt {i.attempt} {i.state or 'stopped'} at {_t(i.failure_ts)} "
            f"({i.symptom}) because of {rc.category.replace('_', ' ')} at {rc.component}: {rc.summary} "
            f"(confidence {rc.confidence:.0%}).")


def lanes(i: Incident) -> tuple[int, int, dict[str, list[tuple[int, str]]]]:
    """Time range and per-lane marks (position, glyph) for the swimlane view."""
    pts = [e.ts for e in i.evidence] + [i.failure_ts]
    if i.start_ts:
        pts.append(i.start_ts)
    if i.last_checkpoint:
        pts.append(i.last_checkpoint.ts)
    lo, hi = min(pts), max(pts)
    if hi == lo:
        hi = lo + 1
    span = hi - lo

    def pos(ts: int) -> int:
        return min(LANE_W - 1, max(0, round((ts - lo) * (LANE_W - 1) / span)))

    marks: dict[str, list[tuple[int, str]]] = {}
    for e in i.evidence:
        marks.setdefault(e.layer, []).append((pos(e.ts), "●"))
    job = marks.setdefault("job", [])
    if i.start_ts and lo <= i.start_ts <= hi:
        job.append((pos(i.start_ts), "▶"))
    if i.last_checkpoint:
        job.append((pos(i.last_checkpoint.ts), "◆"))
    job.append((pos(i.failure_ts), "✖"))
    return lo, hi, marks


def render(i: Incident, others: list[tuple[str, int]], out: Any = None) -> None:
    from rich.console import Console
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    con = Console(file=out or sys.stdout, highlight=False)
    rc = i.root_cause
    con.print(Panel(Text(sentence(i)), title=f"[bold]incident {i.id}[/] (revision {i.revision})", expand=True))

    lo, hi, marks = lanes(i)
    t = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
    t.add_column("layer")
    t.add_column(f"{_t(lo)}  →  {_t(hi)}  ({_dur(hi - lo)})", no_wrap=True)
    t.add_column("n", justify="right")
    order = [x for x in LAYERS if x in marks] + [x for x in marks if x not in LAYERS and x != "job"] + ["job"]
    for layer in order:
        lane = ["·"] * LANE_W
        for p, g in marks.get(layer, []):
            lane[p] = g
        colour = _COLORS.get(layer, "bold")
        n = sum(1 for e in i.evidence if e.layer == layer) if layer != "job" else ""
        t.add_row(Text(layer, style=colour), Text("".join(lane), style=colour), str(n))
    con.print(t)
    con.print("  [dim]● evidence   ▶ attempt start   ◆ last checkpoint   ✖ failure[/]")

    ev = Table(box=None, pad_edge=False, header_style="bold")
    for c in ("time (UTC)", "Δ to failure", "layer", "node", "evidence"):
        ev.add_column(c, overflow="fold")
    for e in i.evidence[:30]:
        ev.add_row(_t(e.ts), "-" + _dur(i.failure_ts - e.ts) if e.ts <= i.failure_ts else "+" + _dur(e.ts - i.failure_ts),
                   Text(e.layer, style=_COLORS.get(e.layer, "")), e.node or "-", e.summary)
    if len(i.evidence) > 30:
        ev.add_row("", "", "", "", f"... {len(i.evidence) - 30} more (--json)")
    con.print(ev)

    con.print(f"[bold]root cause[/]   {rc.category} @ {rc.component} ({rc.confidence:.0%})")
    for h in i.hypotheses[:4]:
        if (h.category, h.component) != (rc.category, rc.component):
            con.print(f"[bold]alternative[/]  {h.category} @ {h.component} ({h.confidence:.0%}): {h.summary}")
    clean = [x for x in i.ruled_out]
    con.print(f"[bold]ruled out[/]    {', '.join(clean) if clean else 'nothing (no layer was proven clean)'}")
    ck = i.last_checkpoint
    con.print("[bold]checkpoint[/]   " + (f"step {ck.step} at {_t(ck.ts)} ({ck.path}), {_dur(i.failure_ts - ck.ts)} before the failure"
                                         if ck else "none succeeded in this attempt"))
    con.print(f"[bold]lost[/]         {i.lost_gpu_hours:.2f} GPU-hours ({i.gpus or '?'} GPUs since "
              f"{'the checkpoint' if ck else 'the attempt started'})")
    if i.retry:
        r = i.retry
        same = "the SAME nodes" if r.same_nodes else "other nodes"
        con.print(f"[bold]retry[/]        attempt {r.attempt} {r.state} at {_t(r.ts)} on {same} ({', '.join(r.nodes)})")
        if r.same_nodes and rc.category in ("gpu_hardware", "gpu_nvlink", "node_hardware", "network_link"):
            con.print(f"               [yellow]retried on the nodes that hold the culprit ({rc.component}): drain it first[/]")
    else:
        con.print("[bold]retry[/]        not seen (yet)")
    if others:
        con.print("[bold]other incidents of this job[/]  " + ", ".join(f"{iid} (attempt {a})" for iid, a in others))

    con.print("\n[bold]next[/]")
    for cmd in next_commands(i):
        con.print(f"  {cmd}")


def next_commands(i: Incident) -> list[str]:
    rc = i.root_cause
    lo = i.failure_ts - 3_600_000
    hi = i.failure_ts + 600_000
    win = f"ts BETWEEN fromUnixTimestamp64Milli({lo}) AND fromUnixTimestamp64Milli({hi})"
    cmds = [f"faultline incidents --job {i.job}"]
    comp = rc.component
    kind, _, name = comp.partition(":")
    if kind in ("gpu", "node"):
        node = name.split("/", 1)[0]
        cmds.append(f"faultline query \"SELECT ts, kind, gpu, xid, data FROM events_gpu WHERE node = '{node}' AND {win} AND kind = 'gpu.xid' ORDER BY ts\"")
        cmds.append(f"faultline query \"SELECT ts, sensor, status, message FROM events_hw WHERE node = '{node}' AND {win} AND status != 'ok' ORDER BY ts\"")
    elif kind == "port":
        dev, _, port = name.partition("/")
        cmds.append(f"faultline query \"SELECT ts, kind, state, data FROM events_net WHERE device = '{dev}' AND port = '{port}' AND {win} ORDER BY ts\"")
    elif kind == "path":
        cmds.append(f"faultline query \"SELECT ts, node, kind, state, data FROM events_storage WHERE path = '{name}' AND {win} ORDER BY ts\"")
    elif kind == "segment":
        cmds.append(f"faultline query \"SELECT node, switch, port FROM topology_links FINAL WHERE segment = '{name}'\"")
    cmds.append(f"faultline query \"SELECT ts, kind, phase, message FROM events_runtime WHERE job = '{i.job}' AND {win} ORDER BY ts\"")
    cmds.append("faultline trends repeat-offenders --since 7d")
    cmds.append(f"faultline trends checkpoints --param since_ms={(i.start_ts or lo)}")
    return cmds


def run(args: argparse.Namespace) -> int:
    from ..cli import CliError
    from ..sinks.store import StoreError

    r = reader(args)  # refuses a store that does not exist (commands/_store.py)
    try:
        rows = r.query(SQL, {"key": args.key, "withdrawn": WITHDRAWN_STATE})
    except StoreError as e:
        raise CliError(f"lookup failed: {e}") from None
    finally:
        r.close()
    if args.attempt is not None:
        rows = [x for x in rows if x["attempt"] == args.attempt]
    if not rows:
        raise CliError(f"no incident with id or job {args.key!r} in the store; list them with `faultline incidents`")
    inc = msgspec.json.decode(rows[0]["record"], type=Incident)
    if args.json:
        sys.stdout.write(rows[0]["record"] + "\n")
        return 0
    others = []
    for x in rows[1:]:
        o = msgspec.json.decode(x["record"], type=Incident)
        if o.job == inc.job:
            others.append((o.id, o.attempt))
    render(inc, others)
    if inc.state == WITHDRAWN_STATE:
        print(f"withdrawn: the worker took this incident back (revision {inc.revision}: the attempt "
              "progressed again); it counts in no listing or trend")
    return 0
