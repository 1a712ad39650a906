"""Outside-check round 4 as a gate: the attempts faultline got right on first contact stay right.

Generates the 22 scenarios (tests/outside4/gen.py) into a temporary directory, runs
``faultline diagnose FILE --json`` on each in-process (``faultline.cli.main``, the command's own
code path) and compares with expectations.json (committed before the first run). The
first-contact misses still open are non-strict xfails naming the miss (none since branch d fixed all four).
About 10 s, no broker.
"""
from __future__ import annotations

import copy

import pytest

from tests.outside4 import score

SPEC = score.expectations()

# first-contact misses (README.md "First contact") still open; key: (scenario, job, attempt). All four
# were fixed on branch d (README.md "After fixes"): o04, o10, o13, o18 are plain checks now
KNOWN_MISSES: dict[tuple[str, str, int], str] = {}

ATTEMPTS = [(name, a["job"], a["attempt"]) for name, attempts in SPEC.items() for a in attempts]
INTERRUPTED = [(name, a["job"], a["attempt"]) for name, attempts in SPEC.items() for a in attempts
               if a["expect"] == "incident"]
DIAGNOSIS_ENV = ("FAULTLINE_LATENESS_MS", "FAULTLINE_SETTLE_MS", "FAULTLINE_STALL_FLOOR_MS", "FAULTLINE_NODE_NAMES")


def _param(key):
    marks = [pytest.mark.xfail(strict=False, reason=KNOWN_MISSES[key])] if key in KNOWN_MISSES else []
    return pytest.param(*key, id=f"{key[0]}:{key[1]}#{key[2]}", marks=marks)


def test_known_misses_are_listed_attempts():
    assert set(KNOWN_MISSES) <= set(ATTEMPTS)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("outside4")
    with pytest.MonkeyPatch.context() as mp:  # the product defaults, whatever the caller's environment says
        for k in DIAGNOSIS_ENV:
            mp.delenv(k, raising=False)
        verdicts = score.run_all(out)
    return out, {(v.scenario, v.job, v.attempt, v.expect): v for v in verdicts}


def _verdict(results, name, job, attempt):
    _, by = results
    return next(v for (s, j, a, e), v in by.items() if (s, j, a) == (name, job, attempt) and e != "unlisted")


@pytest.mark.parametrize("name,job,attempt", [_param(k) for k in ATTEMPTS])
def test_attempt_verdict(results, name, job, attempt):
    """category + component as expected for an interruption; no incident for a healthy attempt."""
    v = _verdict(results, name, job, attempt)
    assert v.ok, v.line()


@pytest.mark.parametrize("name", list(SPEC))
def test_no_incident_for_unlisted_attempts(results, name):
    _, by = results
    extra = [v.line() for (s, _, _, e), v in by.items() if s == name and e == "unlisted"]
    assert not extra, extra


@pytest.mark.parametrize("name,job,attempt", [pytest.param(*k, id=f"{k[0]}:{k[1]}#{k[2]}") for k in INTERRUPTED])
def test_incident_contract_fields(results, name, job, attempt):
    """Component forms of root cause, hypotheses and affected.gpus; failure_ts, last_checkpoint and
    lost_gpu_hours against the contract's definitions, computed from the scenario file."""
    v = _verdict(results, name, job, attempt)
    if v.got_category is None:
        pytest.skip(f"no incident for {name} {job}#{attempt} (test_attempt_verdict reports the miss)")
    assert not v.contract_problems, v.contract_problems


def test_contract_checks_can_fail(results):
    """The checkers catch a wrong lost_gpu_hours, a wrong checkpoint and a PCI address as a GPU index."""
    out, _ = results
    path = out / "o06_lustre_ost_down.jsonl"
    incidents, rc, _ = score.diagnose(path)
    assert rc == 0 and incidents
    inc = incidents[0]
    assert score.accounting_problems(path, inc) == [] and score.form_problems(inc) == []
    bad = copy.deepcopy(inc)
    bad["lost_gpu_hours"] = inc["lost_gpu_hours"] * 1.5
    bad["last_checkpoint"] = dict(inc["last_checkpoint"], step=inc["last_checkpoint"]["step"] - 1)
    probs = score.accounting_problems(path, bad)
    assert any("lost_gpu_hours" in p for p in probs) and any("last_checkpoint" in p for p in probs), probs
    bad["root_cause"] = dict(inc["root_cause"], category="gpu_hardware", component="gpu:hgx-b14/00000000:3B:00.0")
    assert any("root_cause" in p for p in score.form_problems(bad))
