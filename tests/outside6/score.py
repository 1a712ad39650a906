"""Score the sixth outside-check round through the CLI, as a user would.

``python -m tests.outside6.score [--dir DIR] [--no-gen] [--only q01_...,...] [--subprocess] [-v]``

1. writes the 15 scenarios with tests/outside6/gen.py into DIR (default var/outside6);
2. runs ``faultline diagnose FILE --json`` on each (in-process through ``faultline.cli.main``,
   the command's own code path; ``--subprocess`` runs the installed ``faultline`` binary);
3. compares every incident (highest revision per id) with expectations.json (committed before
   the first run): category right/wrong, component right/wrong (an ``alt`` category+component
   pair declared in advance counts as right), missed incidents, false incidents (an incident for
   a healthy attempt or for an attempt not listed).

Also checks each incident against the contract's own definitions computed from the scenario file
(component forms, failure_ts, last_checkpoint, lost_gpu_hours); reported beside the score, not part
of it. Exit status 0 (a score, not a gate: the gate is tests/outside6/test_outside6.py).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# the harness mechanics are rounds 3 and 4's, imported, not copied: reading diagnose's output and the
# component forms (round 3), the verdict per attempt, the accounting check (the job's last checkpoint,
# whichever attempt wrote it) and the totals line (round 4). The scenarios and expectations are this round's.
from tests.outside3.score import diagnose, form_problems
from tests.outside4.score import Verdict, accounting_problems, score_scenario, totals
from tests.outside6 import gen

HERE = Path(__file__).resolve().parent
EXPECT = HERE / "expectations.json"

__all__ = ["Verdict", "accounting_problems", "diagnose", "expectations", "form_problems", "run_all", "totals"]


def expectations() -> dict[str, list[dict]]:
    return json.loads(EXPECT.read_text())["scenarios"]


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
