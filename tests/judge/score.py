"""Score `faultline diagnose` on the judge's scenarios (tests/judge/gen.py): a table per expected
category of root cause right (category + component), last succeeded checkpoint right, lost GPU-h
within 2 % of the contract's formula, and incidents raised for healthy attempts.

    .venv/bin/python tests/judge/score.py [--out /tmp/helperJ] [SCENARIO ...]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import gen  # noqa: E402

FAULTLINE = str(Path(sys.executable).parent / "faultline")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="/tmp/helperJ")
    ap.add_argument("names", nargs="*")
    a = ap.parse_args(argv)
    rows = defaultdict(lambda: [0, 0, 0, 0])          # category -> [n, cause, ckpt, loss]
    healthy = false_inc = 0
    wrong = []
    for name in a.names or list(gen.SCENARIOS):
        sc = gen.build(name)
        path = sc.write(Path(a.out) / f"{name}.jsonl")
        out = subprocess.run([FAULTLINE, "diagnose", str(path), "--json"], capture_output=True, text=True, check=True)
        incs = {}
        for line in out.stdout.splitlines():
            if line.startswith("{"):
                i = json.loads(line)
                k = (i["job"], i["attempt"])
                if k not in incs or i["revision"] > incs[k]["revision"]:
                    incs[k] = i
        for e in sc.expect:
            cats = e.category if isinstance(e.category, set) else {e.category}
            comps = e.component if isinstance(e.component, set) else {e.component}
            r = rows["/".join(sorted(cats))]
            r[0] += 1
            inc = incs.get((e.job, e.attempt))
            if inc is None:
                wrong.append(f"{name}: {e.job}/{e.attempt}: no incident")
                continue
            rc = inc["root_cause"]
            if rc["category"] in cats and (e.component is None or rc["component"] in comps):
                r[1] += 1
            else:
                wrong.append(f"{name}: {e.job}/{e.attempt}: expected {e.category}/{e.component}, got {rc['category']}/{rc['component']}")
            j = e.job_obj
            want = j.last_ok(before=inc["failure_ts"]) if e.ckpt_step == "auto" else None
            lc = inc.get("last_checkpoint")
            if (want is None and lc is None) or (want and lc and lc["step"] == want[2]):
                r[2] += 1
            base = max(want[0], j.start) if want else j.start
            exp = j.gpus * (inc["failure_ts"] - base) / 3_600_000
            if abs(inc["lost_gpu_hours"] - exp) <= max(0.02, 0.02 * exp):
                r[3] += 1
        for k in sc.healthy:
            healthy += 1
            false_inc += k in incs
        expected = {(e.job, e.attempt) for e in sc.expect}
        false_inc += sum(1 for k in incs if k not in expected and k not in sc.healthy)
    print("| expected category | interruptions | category + component right | checkpoint step right | lost GPU-h within 2 % |")
    print("|---|---|---|---|---|")
    tot = [0, 0, 0, 0]
    for cat in sorted(rows):
        n, c, k, lo = rows[cat]
        tot = [x + y for x, y in zip(tot, rows[cat])]
        print(f"| {cat} | {n} | {c}/{n} | {k}/{n} | {lo}/{n} |")
    print(f"| **all** | {tot[0]} | {tot[1]}/{tot[0]} | {tot[2]}/{tot[0]} | {tot[3]}/{tot[0]} |")
    print(f"\nincidents for healthy or unlisted attempts: {false_inc} (healthy attempts listed: {healthy})")
    for w in wrong:
        print("WRONG", w)


if __name__ == "__main__":
    main()
