"""The benches' one result writer: every figure beside its baseline from the same run.

A bench calls ``record(name, value, unit, baseline=..., baseline_value=...)`` for each
figure it measures. When ``FAULTLINE_BENCH_RESULTS`` names a file (``bench/run.py`` sets
it), the figure is appended there as one JSON line; otherwise ``record`` only returns it,
so a bench run by hand prints what it always printed and writes nothing.

``bench/run.py`` then calls ``assemble`` to write ``bench/results.json``::

    {"machine": {"cores", "memory_mib", "load_before", "load_after", ...},
     "figures": [{"name", "value", "unit", "baseline", "baseline_value", "ratio", "command", "note"}]}

and ``readme_table`` / ``rewrite_block`` to put the table between ``<!-- bench:start -->``
and ``<!-- bench:end -->`` in README.md.
"""

from __future__ import annotations

import os
import platform
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

ENV = "FAULTLINE_BENCH_RESULTS"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"
FIELDS = ("name", "value", "unit", "baseline", "baseline_value", "ratio", "command", "note")
#: the figures issue 19 asks of one `make bench` run (a full run without one of them, or with
#: it unmeasured, fails and lists it in ``machine.missing``)
REQUIRED = ("contract_events_per_s", "diagnose_events_per_s", "worker_events_per_cpu_s", "workers_2_events_per_s",
            "workers_2_events_per_cpu_s", "workers_4_events_per_cpu_s", "workers_same_incidents",
            "alert_latency_p99_ms", "incident_latency_p99_ms", "sink_rows_per_s", "trend_query_ms_100m",
            "worker_rss_mib_256_nodes", "worker_rss_mib_2k_nodes", "worker_rss_mib_16k_nodes", "worker_bytes_per_node",
            "worker_bytes_per_open_job", "collector_cpu_pct_8gpu")


def command_line() -> str:
    """How this bench was invoked, as a user would type it from the repo root."""
    argv = [os.path.relpath(sys.argv[0]) if sys.argv and sys.argv[0].endswith(".py") else (sys.argv[0] if sys.argv else "")]
    return shlex.join([".venv/bin/python", *argv, *sys.argv[1:]])


def record(name: str, value: float | None, unit: str, *, baseline: str | None = None,
           baseline_value: float | None = None, command: str | None = None, note: str | None = None) -> dict[str, Any]:
    """One figure; ``ratio`` = value / baseline_value when both are known (null otherwise).
    ``value`` None = not measured in this run (``note`` says why); never a made-up number."""
    ratio = None
    if value is not None and baseline_value:
        ratio = round(value / baseline_value, 4)
    fig = {"name": name, "value": _round(value), "unit": unit, "baseline": baseline,
           "baseline_value": _round(baseline_value), "ratio": ratio,
           "command": command or command_line(), "note": note}
    path = os.environ.get(ENV)
    if path:
        with open(path, "ab") as fh:
            fh.write(orjson.dumps(fig) + b"\n")
    return fig


def _round(x: float | None) -> float | None:
    if x is None:
        return None
    return round(float(x), 3) if abs(x) < 1000 else round(float(x))


def machine(load_before: tuple[float, ...] | None = None) -> dict[str, Any]:
    """Cores, memory and the load average now (the run's 'before' unless given)."""
    mem_kib = 0
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    mem_kib = int(line.split()[1])
    except OSError:
        pass
    return {"cores": os.cpu_count(), "memory_mib": mem_kib // 1024, "python": platform.python_version(),
            "load_before": [round(x, 2) for x in (load_before or os.getloadavg())], "load_after": None,
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **code_state()}


def code_state() -> dict[str, Any]:
    """The commit the run started from and the tracked files changed in the working tree
    then (a bench measures the tree, not the commit); None outside a git checkout."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "diff", "--name-only", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "uncommitted": None}
    if head.returncode != 0:
        return {"commit": None, "uncommitted": None}
    return {"commit": head.stdout.strip(), "uncommitted": dirty.stdout.split() if dirty.returncode == 0 else None}


def read_figures(path: str | Path) -> list[dict[str, Any]]:
    """The figures appended to ``path`` (last one of a name wins: a re-run replaces it)."""
    out: dict[str, dict[str, Any]] = {}
    p = Path(path)
    if p.exists():
        for line in p.read_bytes().splitlines():
            if line.strip():
                fig = orjson.loads(line)
                out[fig["name"]] = {k: fig.get(k) for k in FIELDS}
    return list(out.values())


def missing(figures: list[dict[str, Any]]) -> list[str]:
    """The ``REQUIRED`` figures absent from ``figures`` or recorded as not measured."""
    have = {f["name"] for f in figures if f.get("value") is not None}
    return [n for n in REQUIRED if n not in have]


def assemble(machine_info: dict[str, Any], figures: list[dict[str, Any]], out: str | Path) -> dict[str, Any]:
    """Write results.json (load after = now) and return it."""
    doc = {"machine": {**machine_info, "load_after": [round(x, 2) for x in os.getloadavg()],
                       "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
           "figures": figures}
    Path(out).write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    return doc


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def readme_table(doc: dict[str, Any]) -> str:
    """The Markdown table of results.json (what goes between the README markers)."""
    m = doc["machine"]
    lines = [f"Measured by `make bench` on {m['cores']} cores / {m['memory_mib']:,} MiB, "
             f"load average {' '.join(map(str, m['load_before']))} before and "
             f"{' '.join(map(str, m['load_after'] or []))} after ({m.get('started_utc', '?')}); "
             "each figure beside its baseline measured in the same run (bench/results.json, docs/bench.md)."
             + "".join(f" Re-run and merged: {', '.join(r.get('benches', []))} at {r.get('started_utc')} "
                       f"(load {' '.join(map(str, r.get('load_before') or []))} before)." for r in m.get("merged", [])),
             "",
             "| figure | value | unit | baseline (same run) | baseline value | ratio |",
             "|---|---:|---|---|---:|---:|"]
    for f in doc["figures"]:
        name = f["name"] + (" *" if f.get("note") else "")
        lines.append(f"| {name} | {_fmt(f['value'])} | {f['unit']} | {f['baseline'] or '-'} | "
                     f"{_fmt(f['baseline_value'])} | {_fmt(f['ratio'])} |")
    notes = [f"{f['name']}: {f['note']}" for f in doc["figures"] if f.get("note")]
    if notes:
        lines += ["", *[f"\\* {n}" for n in notes]]
    return "\n".join(lines)


def rewrite_block(text: str, table: str) -> str | None:
    """``text`` with the block between the markers replaced by ``table``; None without markers."""
    pat = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    if not pat.search(text):
        return None
    return pat.sub(lambda _: f"{START}\n{table}\n{END}", text, count=1)
