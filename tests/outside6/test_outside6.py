"""Outside-check round 6 as a gate: what faultline got right on first contact stays right, and the
first-contact misses stay visible until they are fixed.

Generates the 15 scenarios (tests/outside6/gen.py) into a temporary directory, runs
``faultline diagnose FILE --json`` on each in-process (``faultline.cli.main``, the command's own code
path) and compares with expectations.json (committed in e34d284, before the first run). The first-contact
misses are ``xfail(strict=True)`` naming what was expected and what came out (README.md "First contact"):
a fix turns them into XPASS, which fails the gate until the entry is removed here. About 7 s, no broker.
"""
from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

import pytest

if str(Path(__file__).resolve().parents[2]) not in sys.path:  # `.venv/bin/pytest tests/outside6` as well as `python -m pytest`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.outside6 import gen, score  # noqa: E402

SPEC = score.expectations()

# first-contact misses (README.md "First contact"); key: (scenario, job, attempt)
KNOWN_MISSES: dict[tuple[str, str, int], str] = {
    # first contact (faultline 96f49c5): q11 unknown job:8831111 (storage_slow path:/lustre/data expected);
    # right since the round-6 fixes (tests/test_correlate_outside6.py), so a plain assert now
}
# attempts scored right on first contact only through an alt declared in advance: the expectation itself
# is not what came out (strict xfail: a fix that names the expectation must remove the entry)
ALT_ONLY: dict[tuple[str, str, int], str] = {
    # first contact: q10 application job:8831010 (the declared alt); storage_full path:/dev/shm since the fixes
}

ATTEMPTS = [(name, a["job"], a["attempt"]) for name, attempts in SPEC.items() for a in attempts]
INTERRUPTED = [(name, a["job"], a["attempt"]) for name, attempts in SPEC.items() for a in attempts
               if a["expect"] == "incident"]
DIAGNOSIS_ENV = ("FAULTLINE_LATENESS_MS", "FAULTLINE_SETTLE_MS", "FAULTLINE_STALL_FLOOR_MS", "FAULTLINE_NODE_NAMES")


def _param(key, known):
    marks = [pytest.mark.xfail(strict=True, reason=known[key])] if key in known else []
    return pytest.param(*key, id=f"{key[0]}:{key[1]}#{key[2]}", marks=marks)


def test_known_misses_are_listed_attempts():
    assert set(KNOWN_MISSES) <= set(ATTEMPTS)
    assert set(ALT_ONLY) <= set(INTERRUPTED)


def test_scenarios_and_expectations_match():
    assert [f.__name__ for f in gen.SCENARIOS] == list(SPEC)


def test_every_alt_says_why():
    for name, attempts in SPEC.items():
        for a in attempts:
            if a.get("alt"):
                assert a.get("why_alt"), (name, a["job"], a["attempt"])


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("outside6")
    with pytest.MonkeyPatch.context() as mp:  # the product defaults, whatever the caller's environment says
        for k in DIAGNOSIS_ENV:
            mp.delenv(k, raising=False)
        verdicts = score.run_all(out)
    return out, {(v.scenario, v.job, v.attempt, v.expect): v for v in verdicts}


def _verdict(results, name, job, attempt):
    _, by = results
    return next(v for (s, j, a, e), v in by.items() if (s, j, a) == (name, job, attempt) and e != "unlisted")


def test_generator_is_deterministic_and_valid(results, tmp_path):
    """byte-identical on a second build; `faultline validate` accepts every line of every file."""
    out, _ = results
    gen.build(tmp_path)
    from faultline.cli import main

    for f in gen.SCENARIOS:
        a, b = (out / f"{f.__name__}.jsonl").read_bytes(), (tmp_path / f"{f.__name__}.jsonl").read_bytes()
        assert a == b, f.__name__
        o = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
        with contextlib.redirect_stdout(o), contextlib.redirect_stderr(io.StringIO()):
            try:
                main(["validate", str(out / f"{f.__name__}.jsonl")])
            except SystemExit:
                pass
        o.flush()
        text = o.buffer.getvalue().decode("utf-8") if o.buffer.getvalue() else ""
        rows = [json.loads(x) for x in text.splitlines() if x.strip()]
        assert len(rows) == a.count(b"\n"), f.__name__
        bad = [r for r in rows if not r["ok"]]
        assert not bad, (f.__name__, bad[:3])


@pytest.mark.parametrize("name,job,attempt", [_param(k, KNOWN_MISSES) for k in ATTEMPTS])
def test_attempt_verdict(results, name, job, attempt):
    """category + component as expected (or a declared alt) for an interruption; no incident for a healthy attempt."""
    v = _verdict(results, name, job, attempt)
    assert v.ok, v.line()


@pytest.mark.parametrize("name,job,attempt", [_param(k, {**KNOWN_MISSES, **ALT_ONLY}) for k in INTERRUPTED])
def test_attempt_matches_the_expectation_itself(results, name, job, attempt):
    """stricter than the score: the expectation's own category + component, not an alt."""
    v = _verdict(results, name, job, attempt)
    assert (v.got_category, v.got_component) == (v.category, v.component), v.line()


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
