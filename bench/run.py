"""`make bench`: run every bench/*.py, write bench/results.json and the README table.

    .venv/bin/python bench/run.py [--only worker,sink] [--quick] [--out bench/results.json]

Each bench runs as its own process (``python bench/<name>.py <args below>``) with the repo
root on PYTHONPATH and ``FAULTLINE_BENCH_RESULTS`` naming a scratch file its
``bench.results.record`` calls append to; its output goes to the terminal and to
``var/bench/<name>.log``. The machine (cores, memory, load average before and after)
and every bench's exit status and duration go into results.json beside the figures. A bench
that fails is reported and the others still run (exit 1 at the end, as when a figure of
``results.REQUIRED`` is missing from a full run: listed in ``machine.missing``). ``--quick``: small
sizes, to try the run itself (its figures are not the ones to publish). ``--only a,b``
re-runs those benches and keeps the other figures of the results.json it updates (each
bench's load before/after is in ``machine.benches``).

README.md: the table between ``<!-- bench:start -->`` and ``<!-- bench:end -->`` is
rewritten from results.json (left alone, and the table printed, without the markers).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

from bench import results  # noqa: E402

#: arguments per bench for `make bench` (sizes that fit ~20 min on a 2-core box) and --quick
ARGS: dict[str, tuple[str, str]] = {
    "contract":        ("--events 100000 --repeat 3", "--events 20000 --repeat 1"),
    "worker":          ("--events 100000 --workers 1,2,4 --jobs 12 --profile",
                        "--events 10000 --workers 1,2 --jobs 3 --memory 64,256,1024"),
    "streams_latency": ("--rates 5000 --seconds 20 --faults 40", "--rates 1000 --seconds 5 --faults 6"),
    "sink":            ("--rows 1000000 --batch 100000", "--rows 100000 --batch 50000 --trend-rows 2000000"),
    "collectors":      ("--events 20000 --seconds 20", "--events 2000 --seconds 5"),
    "streams":         ("--nodes 32 --minutes 30 --repeat 2", "--nodes 8 --minutes 10 --repeat 1"),
    "replay":          ("--nodes 8 --hours 0.5", "--nodes 4 --hours 0.1"),
    "simulate":        ("--nodes 256 --minutes 5", "--nodes 32 --minutes 2"),
    "findings":        ("", ""),
    "precursors":      ("--seeds 1", "--seeds 1"),
    "calibration":     ("", ""),
    "collectors_snmp": ("", ""),
}
NOT_BENCHES = {"results", "run", "scale", "memory", "__init__"}   # memory: hour-long fleets (issue 18), run by hand
TIMEOUT_S = {"worker": 900, "sink": 1200}   # others: 420 s (sink: the 100M-row store is grown and queried)


def benches() -> list[str]:
    """Every bench/*.py but the writer and this runner, in ARGS order, new ones last."""
    found = sorted(p.stem for p in (ROOT / "bench").glob("*.py") if p.stem not in NOT_BENCHES)
    return [b for b in ARGS if b in found] + [b for b in found if b not in ARGS]


def run_one(name: str, args: str, scratch: str, log_dir: Path) -> dict:
    cmd = [sys.executable, f"bench/{name}.py", *shlex.split(args)]
    env = {**os.environ, results.ENV: scratch,
           "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    print(f"== bench/{name}.py {args}".rstrip(), flush=True)
    load0 = [round(x, 2) for x in os.getloadavg()]
    t0 = time.monotonic()
    with open(log_dir / f"{name}.log", "wb") as log:
        p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert p.stdout is not None
        timer = threading.Timer(TIMEOUT_S.get(name, 420), p.kill)   # a hung bench is killed, the others run
        timer.start()
        try:
            for line in p.stdout:
                sys.stdout.buffer.write(line)
                sys.stdout.flush()
                log.write(line)
            rc = p.wait()
        finally:
            timer.cancel()
    dt = time.monotonic() - t0
    print(f"-- bench/{name}.py: exit {rc} in {dt:.0f} s", flush=True)
    return {"bench": f"bench/{name}.py", "args": args, "rc": rc, "seconds": round(dt, 1), "load_before": load0,
            "load_after": [round(x, 2) for x in os.getloadavg()]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=None, help="comma-separated bench names (default: every bench/*.py)")
    ap.add_argument("--quick", action="store_true", help="small sizes (to try the run, not to publish)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results.json"))
    ap.add_argument("--merge", metavar="FILE", help="run nothing: merge the figures and benches of FILE (a results.json "
                    "of an --only re-run) into --out, and rewrite the README block")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=ARGS",
                    help="run bench NAME with ARGS instead of the table's (repeatable)")
    ap.add_argument("--until", metavar="HH:MM", help="start no bench after this UTC time (the rest are listed as skipped)")
    ap.add_argument("--readme", default=str(ROOT / "README.md"))
    a = ap.parse_args(argv)
    if a.merge:
        return merge(Path(a.out), Path(a.merge), Path(a.readme))
    names = benches()
    if a.only:
        want = a.only.split(",")
        unknown = set(want) - set(names)
        if unknown:
            ap.error(f"no bench {', '.join(sorted(unknown))} (have {', '.join(names)})")
        names = [n for n in names if n in want]
    machine = results.machine()
    machine["run"] = "quick" if a.quick else "full"
    print(f"bench: {len(names)} benches; {machine['cores']} cores, {machine['memory_mib']:,} MiB, "
          f"load average before {machine['load_before']}", flush=True)
    log_dir = ROOT / "var" / "bench"
    log_dir.mkdir(parents=True, exist_ok=True)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        scratch = str(Path(tmp) / "figures.jsonl")
        for name in names:
            args = dict(x.split("=", 1) for x in a.set).get(name) or ARGS.get(name, ("", ""))[1 if a.quick else 0]
            if a.until and time.strftime("%H:%M", time.gmtime()) >= a.until:
                print(f"== bench/{name}.py: skipped (past --until {a.until} UTC)", flush=True)
                runs.append({"bench": f"bench/{name}.py", "args": args, "rc": None, "skipped": f"past --until {a.until} UTC"})
                continue
            runs.append(run_one(name, args, scratch, log_dir))
        figures = results.read_figures(scratch)
    out = Path(a.out)
    if a.only and out.exists():   # the other benches' figures of the previous run stay (their loads in its benches)
        prev = orjson.loads(out.read_bytes())
        fresh = {f["name"] for f in figures}
        figures = [f for f in prev["figures"] if f["name"] not in fresh] + figures
        ran = {r["bench"] for r in runs}
        runs = [r for r in prev["machine"].get("benches", []) if r["bench"] not in ran] + runs
        machine["merged_with_run_of"] = prev["machine"].get("started_utc")
    machine["benches"] = runs
    lacking = results.missing(figures) if not (a.only or a.quick) else []
    if lacking:
        machine["missing"] = lacking
    doc = results.assemble(machine, figures, a.out)
    write_readme(doc, Path(a.readme), quick=a.quick)
    failed = [r["bench"] for r in runs if r["rc"] not in (0, None)]
    print(f"{a.out}: {len(figures)} figures; load average after {doc['machine']['load_after']}"
          + (f"; FAILED: {', '.join(failed)}" if failed else "")
          + (f"; MISSING (not measured): {', '.join(lacking)}" if lacking else ""))
    return 1 if failed or lacking else 0


def write_readme(doc: dict, readme: Path, quick: bool = False) -> None:
    table = results.readme_table(doc)
    new = results.rewrite_block(readme.read_text(), table) if readme.is_file() else None
    if new is not None and not quick:
        readme.write_text(new)
        print(f"{readme}: table rewritten between {results.START} and {results.END}")
    else:
        print(table)


def merge(out: Path, other: Path, readme: Path) -> int:
    """``other``'s figures replace ``out``'s of the same name, its benches' entries theirs;
    machine.merged lists each merged run (started, load before/after)."""
    doc, add = orjson.loads(out.read_bytes()), orjson.loads(other.read_bytes())
    names = {f["name"] for f in add["figures"]}
    doc["figures"] = [f for f in doc["figures"] if f["name"] not in names] + add["figures"]
    ran = {r["bench"] for r in add["machine"].get("benches", [])}
    m = doc["machine"]
    m["benches"] = [r for r in m.get("benches", []) if r["bench"] not in ran] + add["machine"].get("benches", [])
    m.setdefault("merged", []).append({k: add["machine"].get(k) for k in ("started_utc", "finished_utc", "load_before",
                                                                          "load_after")} | {"benches": sorted(ran)})
    out.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    print(f"{out}: merged {len(names)} figures of {other} ({', '.join(sorted(ran))})")
    write_readme(doc, readme)
    return 0


if __name__ == "__main__":
    sys.exit(main())
