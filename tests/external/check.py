"""Run a scenario through the pure ``Engine`` and compare each attempt with its expectation.

``python -m external.check`` (from ``tests/``) prints one line per expectation and totals.
"""

from __future__ import annotations

import sys

from faultline.streams.engine import Engine, EngineConfig

from .scenarios import SCENARIOS, Expect


def diagnose(events: list[dict]):
    eng = Engine(EngineConfig())
    eng.process(events)
    eng.finish()
    return eng.incidents()


def problems(exp: Expect, incidents) -> list[str]:
    """What is wrong with the incident of ``exp`` (empty when right)."""
    inc = next((i for i in incidents if i.job == exp.job and i.attempt == exp.attempt), None)
    if not exp.incident:
        return [] if inc is None else [f"unexpected incident: {inc.root_cause.category} {inc.root_cause.component}"]
    if inc is None:
        return ["no incident"]
    out = []
    rc = inc.root_cause
    if exp.category is not None and (rc.category, rc.component) != (exp.category, exp.component):
        out.append(f"root cause {rc.category} {rc.component}, expected {exp.category} {exp.component}")
    if exp.categories and rc.category not in exp.categories:
        out.append(f"root cause {rc.category}, expected one of {exp.categories}")
    if exp.symptom_starts is not None and not inc.symptom.startswith(exp.symptom_starts):
        out.append(f"symptom {inc.symptom!r}, expected {exp.symptom_starts!r}...")
    if exp.symptom_not_on is not None and exp.symptom_not_on in inc.symptom:
        out.append(f"symptom {inc.symptom!r} names the culprit node")
    if not exp.ruled_out <= set(inc.ruled_out):
        out.append(f"ruled_out {inc.ruled_out} lacks {sorted(exp.ruled_out - set(inc.ruled_out))}")
    if exp.not_ruled_out & set(inc.ruled_out):
        out.append(f"ruled_out {inc.ruled_out} wrongly has {sorted(exp.not_ruled_out & set(inc.ruled_out))}")
    if exp.ckpt_step != -1:
        got = inc.last_checkpoint.step if inc.last_checkpoint is not None else None
        if got != exp.ckpt_step:
            out.append(f"last checkpoint step {got}, expected {exp.ckpt_step}")
    if exp.lost_gpu_hours is not None and abs(inc.lost_gpu_hours - exp.lost_gpu_hours) > 0.02 * exp.lost_gpu_hours + 1e-6:
        out.append(f"lost GPU-h {inc.lost_gpu_hours:.3f}, expected {exp.lost_gpu_hours:.3f}")
    if exp.retry_same_nodes is not None and (inc.retry is None or inc.retry.same_nodes != exp.retry_same_nodes):
        out.append(f"retry {inc.retry}, expected same_nodes={exp.retry_same_nodes}")
    return out


def main(argv: list[str]) -> int:
    names = argv or list(SCENARIOS)
    ok = n = 0
    for name in names:
        events, exps = SCENARIOS[name]()
        incs = diagnose(events)
        for e in exps:
            n += 1
            p = problems(e, incs)
            ok += not p
            print(f"{'ok  ' if not p else 'FAIL'} {name} [{e.job}/{e.attempt}]" + ("" if not p else ": " + "; ".join(p)))
    print(f"{ok}/{n} expectations right")
    return 0 if ok == n else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
