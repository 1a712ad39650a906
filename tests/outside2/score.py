"""Score the second outside-check round (issue 16) through the CLI, as a user would.

``python -m tests.outside2.score [--dir DIR] [--no-gen] [--json]``

1. writes the scenarios with tests/outside2/gen.py into DIR (default var/outside2);
2. runs ``faultline diagnose FILE --json --alerts`` on each;
3. compares every incident with expectations.json (written before the first run):
   category right/wrong (an `alt_category` declared in advance counts, marked "(alt)"),
   component right/wrong, missed incidents, false incidents (an incident for a healthy
   attempt or for an attempt not listed at all);
4. checks on every incident that the root cause is the most confident hypothesis, that the
   hypotheses are sorted by confidence and that the root cause shows the same confidence as
   its hypothesis row (issue 16 point 5);
5. precursors (point 6): an alert strictly before the failure, at least `min_lead_s` ahead,
   whose subject or summary names the expected subject;
6. findings (point 7): ``faultline findings --from FILE --json`` names the repeat offender once,
   with the right count of interrupted attempts, names no healthy or once-failed node, and
   equals ``faultline ingest FILE --store TMP`` + ``faultline findings --store TMP --json``.

Prints one verdict line per attempt and the totals; exit status 0 (it is a score, not a gate).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.outside2 import gen

HERE = Path(__file__).resolve().parent
EXPECT = HERE / "expectations.json"


TREE: Path | None = None  # --tree: run the CLI of another checkout (e.g. a clean `git archive HEAD`)
ENTRY = "import sys; from faultline.cli import main; sys.argv[0] = 'faultline'; sys.exit(main())"


def faultline_cmd() -> list[str]:
    if TREE is None:
        exe = Path(sys.executable).with_name("faultline")
        if exe.exists():
            return [str(exe)]
        found = shutil.which("faultline")
        if found:
            return [found]
    return [sys.executable, "-c", ENTRY]


def run(args: list[str], timeout: int = 900) -> subprocess.CompletedProcess:
    env = None
    if TREE is not None:
        env = dict(os.environ, PYTHONPATH=str(TREE))
    return subprocess.run(faultline_cmd() + args, capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=str(TREE) if TREE is not None else None)


def json_lines(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def diagnose(path: Path) -> tuple[list[dict], list[dict], str]:
    p = run(["diagnose", str(path), "--json", "--alerts"])
    recs = json_lines(p.stdout)
    incidents = [r for r in recs if "root_cause" in r]
    alerts = [r for r in recs if "detector" in r and "root_cause" not in r]
    # keep the highest revision per incident id
    best: dict[str, dict] = {}
    for inc in incidents:
        k = inc.get("id") or f"{inc.get('job')}/{inc.get('attempt')}"
        if k not in best or inc.get("revision", 0) >= best[k].get("revision", 0):
            best[k] = inc
    err = "" if p.returncode == 0 else f"exit {p.returncode}: {p.stderr.strip()[-400:]}"
    return list(best.values()), alerts, err


def end_times(path: Path) -> dict[tuple[str, int], int]:
    """Ground truth from the scenario file itself: the ts of each attempt's final sched.job state."""
    ends: dict[tuple[str, int], int] = {}
    final = {"completed", "failed", "node_fail", "timeout", "out_of_memory", "cancelled", "preempted"}
    with path.open() as fh:
        for line in fh:
            if '"sched.job"' not in line:
                continue
            e = json.loads(line)
            if e["data"]["state"] in final:
                ends[(e["job"], e["data"]["attempt"])] = e["ts"]
    return ends


def ranking_problems(inc: dict) -> list[str]:
    rc = inc.get("root_cause") or {}
    hyps = inc.get("hypotheses") or []
    probs = []
    confs = [h.get("confidence", 0) for h in hyps]
    if confs and confs != sorted(confs, reverse=True):
        probs.append("hypotheses not sorted by confidence")
    if confs and rc.get("confidence", 0) < max(confs) - 1e-9:
        probs.append(f"root cause {rc.get('confidence')} < best hypothesis {max(confs)}")
    if hyps and (hyps[0].get("category"), hyps[0].get("component")) != (rc.get("category"), rc.get("component")):
        same = [h for h in hyps if (h.get("category"), h.get("component")) == (rc.get("category"), rc.get("component"))]
        if not same or abs(same[0].get("confidence", 0) - max(confs)) > 1e-9:
            probs.append("root cause is not the first hypothesis")
    for h in hyps:
        if (h.get("category"), h.get("component")) == (rc.get("category"), rc.get("component")):
            if abs(h.get("confidence", 0) - rc.get("confidence", 0)) > 1e-9:
                probs.append(f"root cause shows {rc.get('confidence')}, its hypothesis row {h.get('confidence')}")
            break
    return probs


def check_findings(path: Path, spec: dict) -> list[tuple[str, bool, str]]:
    res = []
    p = run(["findings", "--from", str(path), "--json"])
    offline = json_lines(p.stdout)
    ro = spec["repeat_offender"]
    subj = ro["subject_contains"]
    offenders = [f for f in offline if f.get("kind") == "repeat_offender"]
    mine = [f for f in offenders if subj in str(f.get("subject", ""))]
    res.append((f"repeat offender {subj} found", bool(mine),
                "; ".join(f"{f.get('dimension')}={f.get('subject')} count={f.get('count')}" for f in mine) or
                f"none among {len(offenders)} repeat_offender findings"))
    if mine:
        counts = sorted({f.get("count") for f in mine} | {len(f.get("incidents") or []) for f in mine})
        ok = all(f.get("count") == ro["interrupted_attempts"] for f in mine) and all(
            len(f.get("incidents") or []) in (0, ro["interrupted_attempts"]) for f in mine)
        res.append((f"{subj}: {ro['interrupted_attempts']} interrupted attempts", ok, f"count/incidents seen {counts}"))
        per = {}
        for f in mine:
            per[(f.get("dimension"), f.get("subject"))] = per.get((f.get("dimension"), f.get("subject")), 0) + 1
        worst = max(per.values())
        res.append((f"{subj}: at most {ro['max_findings_per_subject']} finding per subject", worst <= ro["max_findings_per_subject"],
                    f"{per}"))
    for nd in spec.get("not_offender", []):
        bad = [f for f in offenders if nd in str(f.get("subject", ""))]
        res.append((f"{nd} not a repeat offender", not bad,
                    "; ".join(f"{f.get('subject')} count={f.get('count')}" for f in bad)))
    if spec.get("from_equals_ingest"):
        with tempfile.TemporaryDirectory(prefix="o2store-") as tmp:
            store = str(Path(tmp) / "store")
            pi = run(["ingest", str(path), "--store", store, "--quiet"])
            ps = run(["findings", "--store", store, "--json"])
            stored = json_lines(ps.stdout)
        def key(f):
            return (f.get("kind"), f.get("dimension"), f.get("subject"), f.get("count"))
        a, b = sorted(map(key, offline)), sorted(map(key, stored))
        detail = "same" if a == b else f"--from {len(a)} vs ingest+findings {len(b)}; only --from: " \
            f"{sorted(set(a) - set(b))[:4]}; only store: {sorted(set(b) - set(a))[:4]}"
        if pi.returncode or ps.returncode:
            detail += f" (ingest exit {pi.returncode}, findings exit {ps.returncode}: {(pi.stderr + ps.stderr).strip()[-300:]})"
        res.append(("findings --from == ingest + findings", a == b and not (pi.returncode or ps.returncode), detail))
    return res


def score_scenario(name: str, sc: dict, path: Path, tot: dict) -> tuple[list[dict], list[str]]:
    """Score one scenario file against its expectations, adding to ``tot``; prints a verdict per
    attempt and returns (rows for score.json, the lines of every check that failed)."""
    problems: list[str] = []

    def say(line: str, bad: bool = False) -> None:
        print(line)
        if bad:
            problems.append(line.strip())

    incidents, alerts, err = diagnose(path)
    ends = end_times(path)
    say(f"\n== {name}: {sc['site']}")
    if err:
        say(f"   diagnose failed: {err}", bad=True)
    by = {(str(i.get("job")), int(i.get("attempt", 0))): i for i in incidents}
    listed = set()
    rows = []
    for a in sc["attempts"]:
        k = (a["job"], a["attempt"])
        listed.add(k)
        inc = by.get(k)
        if a["expect"] == "none":
            tot["healthy"] += 1
            if inc is None:
                v = "ok: no incident"
            else:
                tot["false"] += 1
                rc = inc["root_cause"]
                v = f"FALSE INCIDENT: {rc.get('category')} {rc.get('component')}"
            say(f"   [p{a['point']}] {a['job']}#{a['attempt']} healthy  -> {v}", bad=inc is not None)
            rows.append(dict(job=a["job"], attempt=a["attempt"], expect="none", verdict=v))
            continue
        tot["inter"] += 1
        if inc is None:
            tot["missed"] += 1
            say(f"   [p{a['point']}] {a['job']}#{a['attempt']} MISSED (expected {a['category']} {a['component']})", bad=True)
            rows.append(dict(job=a["job"], attempt=a["attempt"], verdict="missed"))
            continue
        rc = inc.get("root_cause") or {}
        cat, comp = rc.get("category"), rc.get("component")
        cat_ok = cat == a["category"] or cat in a.get("alt_category", [])
        comp_ok = comp == a["component"]
        tot["cat"] += cat_ok
        tot["comp"] += comp_ok
        alt = " (alt)" if cat_ok and cat != a["category"] else ""
        say(f"   [p{a['point']}] {a['job']}#{a['attempt']} category {'right' if cat_ok else 'WRONG'}{alt}, "
            f"component {'right' if comp_ok else 'WRONG'}: got {cat} {comp} "
            f"(conf {rc.get('confidence')}); expected {a['category']} {a['component']}", bad=not (cat_ok and comp_ok))
        rows.append(dict(job=a["job"], attempt=a["attempt"], got=[cat, comp], expected=[a["category"], a["component"]],
                         category_ok=cat_ok, component_ok=comp_ok))
    for k, inc in sorted(by.items()):
        if k not in listed:
            tot["false"] += 1
            rc = inc["root_cause"]
            say(f"   {k[0]}#{k[1]} FALSE INCIDENT (attempt not listed): {rc.get('category')} {rc.get('component')}", bad=True)
    for inc in incidents:
        tot["incidents"] += 1
        probs = ranking_problems(inc)
        if probs:
            tot["rank_bad"] += 1
            say(f"   ranking {inc.get('job')}#{inc.get('attempt')}: " + "; ".join(probs), bad=True)
    for pre in sc.get("precursors", []):
        tot["pre"] += 1
        fail = ends.get((pre["job"], pre["attempt"]))
        hits = [al for al in alerts if fail is not None and al.get("ts", 0) <= fail - pre["min_lead_s"] * 1000
                and (pre["subject"] in str(al.get("subject", "")) or pre["subject"] in str(al.get("summary", "")))]
        ok = bool(hits)
        tot["pre_ok"] += ok
        if ok:
            first = min(hits, key=lambda al: al["ts"])
            d = f"first {first.get('detector')} subject={first.get('subject')} {(fail - first['ts']) / 60000:.1f} min ahead"
        else:
            before = [al for al in alerts if fail is not None and al.get("ts", 0) < fail]
            d = f"no alert naming it >= {pre['min_lead_s']} s ahead ({len(before)} alerts before the failure: " + \
                ", ".join(sorted({f"{al.get('detector')}:{al.get('subject')}" for al in before})[:6]) + ")"
        say(f"   precursor {pre['component']} before {pre['job']}: {'ok' if ok else 'MISSING'} - {d}", bad=not ok)
    if "findings" in sc:
        for label, ok, d in check_findings(path, sc["findings"]):
            tot["fnd"] += 1
            tot["fnd_ok"] += ok
            say(f"   findings: {label}: {'ok' if ok else 'WRONG'} - {d}", bad=not ok)
    return rows, problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=gen.DEFAULT_OUT)
    ap.add_argument("--no-gen", action="store_true", help="score the files already in --dir")
    ap.add_argument("--only", help="comma-separated scenario names")
    ap.add_argument("--json", action="store_true", help="also write DIR/score.json")
    ap.add_argument("--tree", type=Path, help="score the faultline of this checkout (PYTHONPATH=TREE), "
                    "e.g. `git archive HEAD | tar -x -C /tmp/clean`, instead of the installed one")
    args = ap.parse_args(argv)
    global TREE
    TREE = args.tree.resolve() if args.tree else None
    args.dir = args.dir.resolve()
    if not args.no_gen:
        gen.main([str(args.dir)])
    spec = json.loads(EXPECT.read_text())["scenarios"]
    only = set(args.only.split(",")) if args.only else None
    tot = dict(inter=0, cat=0, comp=0, missed=0, false=0, healthy=0, rank_bad=0, incidents=0,
               pre=0, pre_ok=0, fnd=0, fnd_ok=0)
    report = {}
    for name, sc in spec.items():
        if only and name not in only:
            continue
        path = args.dir / f"{name}.jsonl"
        rows, _ = score_scenario(name, sc, path, tot)
        report[name] = rows
    n = tot["inter"]
    print(f"\nTOTAL: {tot['cat']}/{n} category, {tot['comp']}/{n} component, {tot['missed']} missed, "
          f"{tot['false']} false incidents ({tot['healthy']} healthy attempts), "
          f"ranking problems in {tot['rank_bad']}/{tot['incidents']} incidents, "
          f"precursors {tot['pre_ok']}/{tot['pre']}, findings checks {tot['fnd_ok']}/{tot['fnd']}")
    if args.json:
        (args.dir / "score.json").write_text(json.dumps(dict(total=tot, scenarios=report), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
