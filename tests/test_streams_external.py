"""Attribution on hand-written failure stories that do not come from the simulator
(tests/external/): other names, sizes, timings, sampling intervals, rank layouts and
missing layers. Each checks root cause category + component, the symptom vs. the culprit,
layers ruled out, the last good checkpoint, lost GPU-hours and the retry."""

from __future__ import annotations

import pytest

from external.check import diagnose, problems
from external.scenarios import SCENARIOS


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_external_scenario(name):
    events, expects = SCENARIOS[name]()
    incidents = diagnose(events)
    wrong = {f"{e.job}/{e.attempt}": p for e in expects if (p := problems(e, incidents))}
    assert not wrong, f"{name}: {wrong}; incidents: " + "; ".join(
        f"{i.job}/{i.attempt} {i.root_cause.category} {i.root_cause.component} ({i.symptom})" for i in incidents)
    for i in incidents:
        # the ranking rule (docs/diagnosis.md): hypotheses by the confidence shown, the root cause
        # is the first, with that hypothesis's confidence
        confs = [h.confidence for h in i.hypotheses]
        assert confs == sorted(confs, reverse=True), f"{name}: {i.job}/{i.attempt}: hypotheses not sorted: {confs}"
        if i.hypotheses:
            top = i.hypotheses[0]
            assert (top.category, top.component, top.confidence) == \
                (i.root_cause.category, i.root_cause.component, i.root_cause.confidence), (
                f"{name}: {i.job}/{i.attempt}: root cause {i.root_cause} is not the top hypothesis {top}")


def test_external_events_are_valid_contract():
    """The fixtures speak the contract: every event decodes."""
    from faultline.schemas.codec import decode
    import orjson

    for name, fn in SCENARIOS.items():
        events, _ = fn()
        for e in events:
            decode(orjson.dumps(e))
