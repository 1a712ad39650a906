"""Score the fourth outside-check round through the CLI, as a user would.

``python -m tests.outside4.score [--dir DIR] [--no-gen] [--only o01_...,...] [--subprocess] [-v]``

1. writes the 22 scenarios with tests/outside4/gen.py into DIR (default var/outside4);
2. runs ``faultline diagnose FILE --json`` on each (in-process through ``faultline.cli.main``,
   the command's own code path; ``--subprocess`` runs the installed ``faultline`` binary);
3. compares every incident (highest revision per id) with expectations.json (committed before
   the first run): category right/wrong, component right/wrong (an ``alt`` category+component
   pair declared in advance counts as right), missed incidents, false incidents (an incident for
   a healthy attempt or for an attempt not listed).

Also checks each incident against the contract's own definitions, computed from the scenario
file (component forms, failure_ts, last_checkpoint, lost_gpu_hours); reported beside the score,
not part of it. Prints one verdict line per attempt and the totals; exit status 0 (a score, not a
gate: the gate is tests/outside4/test_outside4.py).
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

# the same harness mechanics as round 3 (reading diagnose's output, the contract's component
# forms, an attempt's facts from its file); the scenarios, expectations and the accounting check
# (which takes the job's last checkpoint, whichever attempt wrote it) are this round's own
from tests.outside3.score import attempt_facts, diagnose, form_problems
from tests.outside4 import gen

HERE = Path(__file__).resolve().parent
EXPECT = HERE / "expectations.json"


def expectations() -> dict[str, list[dict]]:
    return json.loads(EXPECT.read_text())["scenarios"]


@dataclass
class Verdict:
    scenario: str
    job: str
    attempt: int
    expect: str  # "incident" | "none" | "unlisted"
    category: str | None = None
    component: str | None = None
    alt: list = field(default_factory=list)
    got_category: str | None = None
    got_component: str | None = None
    confidence: float | None = None
    symptom: str | None = None
    category_ok: bool = False
    component_ok: bool = False
    missed: bool = False
    false_incident: bool = False
    hypotheses: list = field(default_factory=list)
    contract_problems: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        if self.expect == "incident":
            return self.category_ok and self.component_ok
        return not self.false_incident

    def line(self) -> str:
        who = f"{self.scenario} {self.job}#{self.attempt}"
        if self.expect in ("none", "unlisted"):
            if not self.false_incident:
                return f"{who} healthy -> ok: no incident"
            return (f"{who} {'healthy' if self.expect == 'none' else '(not listed)'} -> FALSE INCIDENT: "
                    f"{self.got_category} {self.got_component} ({self.confidence})")
        if self.missed:
            return f"{who} MISSED (expected {self.category} {self.component})"
        return (f"{who} category {'right' if self.category_ok else 'WRONG'}, component "
                f"{'right' if self.component_ok else 'WRONG'}: got {self.got_category} {self.got_component} "
                f"({self.confidence}); expected {self.category} {self.component}")


def score_scenario(name: str, incidents: list[dict], spec: list[dict]) -> list[Verdict]:
    by = {(str(i.get("job")), int(i.get("attempt", 0))): i for i in incidents}
    out, listed = [], set()
    for a in spec:
        k = (a["job"], a["attempt"])
        listed.add(k)
        inc = by.get(k)
        alt = [(x["category"], x["component"]) for x in a.get("alt", [])]
        v = Verdict(name, a["job"], a["attempt"], a["expect"], a.get("category"), a.get("component"), alt)
        if inc is not None:
            rc = inc.get("root_cause") or {}
            v.got_category, v.got_component, v.confidence = rc.get("category"), rc.get("component"), rc.get("confidence")
            v.symptom = inc.get("symptom")
            v.hypotheses = [(h.get("category"), h.get("component"), h.get("confidence"))
                            for h in inc.get("hypotheses") or []][:4]
        if a["expect"] == "none":
            v.false_incident = inc is not None
        elif inc is None:
            v.missed = True
        else:
            pairs = [(a["category"], a["component"])] + alt
            v.category_ok = v.got_category in {c for c, _ in pairs}
            v.component_ok = (v.got_category, v.got_component) in pairs
        out.append(v)
    for k, inc in sorted(by.items()):
        if k not in listed:
            rc = inc.get("root_cause") or {}
            out.append(Verdict(name, k[0], k[1], "unlisted", got_category=rc.get("category"),
                               got_component=rc.get("component"), confidence=rc.get("confidence"),
                               symptom=inc.get("symptom"), false_incident=True))
    return out


# --- contract checks on every incident (not part of the score) ---------------------------------------
def accounting_problems(path: Path, inc: dict) -> list[str]:
    f = attempt_facts(path, str(inc["job"]), int(inc.get("attempt", 0)))
    probs = []
    fts = inc.get("failure_ts")
    if fts not in (f["end"], f["last_progress"]):
        probs.append(f"failure_ts {fts} is neither the end {f['end']} nor the last progress {f['last_progress']}")
        return probs
    if f["start"] is None:  # never ran: no checkpoint, and the contract's lost-hours formula has no start
        if inc.get("last_checkpoint"):
            probs.append(f"last_checkpoint {inc.get('last_checkpoint')} for an attempt that never started")
        return probs
    # the job's last succeeded checkpoint before failure_ts, whichever attempt wrote it: the contract's
    # lost-hours formula takes "the later of the last succeeded checkpoint's ts and the attempt's
    # start_ts", so a checkpoint before the start (an earlier attempt's) is meant to be reported
    good = [c for c in f["ckpts"] if c[0] <= fts]
    want = None if not good else dict(ts=good[-1][0], step=good[-1][1], path=good[-1][2])
    lc = inc.get("last_checkpoint")
    got = None if not lc else dict(ts=lc.get("ts"), step=lc.get("step"), path=lc.get("path"))
    if got != want:
        probs.append(f"last_checkpoint {got} != {want}")
    base = max(f["start"], want["ts"]) if want else f["start"]
    lost = f["gpus"] * (fts - base) / 3_600_000
    if abs((inc.get("lost_gpu_hours") or 0) - lost) > max(0.01, 0.01 * lost):
        probs.append(f"lost_gpu_hours {inc.get('lost_gpu_hours')} != {lost:.4f}")
    return probs


def run_all(out_dir: Path, only=None, regen=True, subprocess_cli=False) -> list[Verdict]:
    spec = expectations()
    names = [n for n in spec if not only or n in only]
    if regen:
        gen.build(out_dir, only=set(names))
    verdicts = []
    for name in names:
        path = out_dir / f"{name}.jsonl"
        incidents, rc, err = diagnose(path, subprocess_cli)
        if rc:
            raise RuntimeError(f"faultline diagnose {name}.jsonl exited {rc}: {err}")
        for v in score_scenario(name, incidents, spec[name]):
            inc = next((i for i in incidents if (str(i.get("job")), int(i.get("attempt", 0))) == (v.job, v.attempt)),
                       None)
            if inc is not None:
                v.contract_problems = form_problems(inc) + accounting_problems(path, inc)
            verdicts.append(v)
    return verdicts


def totals(verdicts: list[Verdict]) -> str:
    inter = [v for v in verdicts if v.expect == "incident"]
    healthy = [v for v in verdicts if v.expect == "none"]
    false = sum(v.false_incident for v in verdicts)
    got = [v for v in verdicts if v.got_category]
    return (f"{sum(v.category_ok for v in inter)}/{len(inter)} category, {sum(v.component_ok for v in inter)}/"
            f"{len(inter)} component, {sum(v.missed for v in inter)} missed, {false} false incidents "
            f"({len(healthy)} healthy attempts); contract checks (component forms, failure_ts, last_checkpoint, "
            f"lost_gpu_hours) clean on {sum(not v.contract_problems for v in got)}/{len(got)} incidents")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=gen.DEFAULT_OUT)
    ap.add_argument("--no-gen", action="store_true", help="score the files already in --dir")
    ap.add_argument("--only", help="comma-separated scenario names")
    ap.add_argument("--subprocess", action="store_true", help="run the installed faultline binary per file")
    ap.add_argument("--verbose", "-v", action="store_true", help="also print symptom and top hypotheses")
    args = ap.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    verdicts = run_all(args.dir.resolve(), only, regen=not args.no_gen, subprocess_cli=args.subprocess)
    for v in verdicts:
        print(v.line())
        if args.verbose and v.got_category:
            print(f"    symptom: {v.symptom}\n    hypotheses: {v.hypotheses}")
        for p in v.contract_problems:
            print(f"    CONTRACT: {p}")
    print("TOTAL: " + totals(verdicts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
