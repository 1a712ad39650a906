"""Ranking and calibration (docs/diagnosis.md): the hypotheses are ordered by weight, the root
cause is the first, and the confidences shown are calibrated probabilities that keep that order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:  # the candidate type lives with the stages that build candidates
    from ..correlate import _Cand

# ---- ranking: ONE rule orders the hypotheses, picks the root cause and gives its confidence
#: the confidence a hypothesis shows is its weight clamped to this range and rounded to
#: CONFIDENCE_DIGITS (a weight is never certainty, nor nothing once it is a candidate)
CONFIDENCE_MIN, CONFIDENCE_MAX = 0.01, 0.99
#: two-decimal confidences: finer digits are noise of the weighting, not information
CONFIDENCE_DIGITS = 2
#: hypotheses kept in an incident (the root cause and five alternatives)
MAX_HYPOTHESES = 6

def confidence(score: float) -> float:
    """The confidence shown for a candidate of weight ``score`` (incident JSON, CLI, page)."""
    return round(max(CONFIDENCE_MIN, min(CONFIDENCE_MAX, score)), CONFIDENCE_DIGITS)


def rank_key(c: "_Cand") -> tuple:
    """The ranking rule: highest shown confidence first; equal confidences go to the earlier
    fault (a later one on the same path is more often its consequence), then by name so the
    order never depends on the input's order."""
    return (-confidence(c.score), c.ts, c.category, c.component)


def rank(cands: Iterable["_Cand"]) -> list["_Cand"]:
    """Candidates best first: the root cause is ``rank(...)[0]``, its confidence the one shown."""
    return sorted(cands, key=rank_key)


# ---- calibration (bench/calibration.py, docs/diagnosis.md): a shown confidence is the probability
# that the hypothesis is the cause. The weights above order the hypotheses; these constants turn
# the order into probabilities, fitted once on the simulator, external and judge suites together.
#: probability that the root cause is right when its weight is ~0 (the weakest verdict that still
#: names a cause): the outside round's first contact got 84-88 of 92 verdicts right (0.91-0.96),
#: and those suites are the only data where the engine was not always right
CAL_FLOOR = 0.9
#: ... rising linearly with the root's weight to this at weight 1: the three suites (273 labelled
#: verdicts at weights 0.26-0.99) are all right, so a strong verdict is shown near certainty
CAL_CEIL = CONFIDENCE_MAX
#: the 'unknown' verdict (nothing of weight on the job's resources): right in every suite case
#: (10 of 10), shown like the weakest verdict that names a cause
UNKNOWN_CONFIDENCE = CAL_FLOOR


def root_confidence(score: float) -> float:
    """The calibrated probability shown for a root cause of weight ``score``."""
    w = max(0.0, min(1.0, score))
    return round(CAL_FLOOR + (CAL_CEIL - CAL_FLOOR) * w, CONFIDENCE_DIGITS)


def shown_confidences(ranked: list["_Cand"]) -> list[float]:
    """The confidence each ranked hypothesis shows: the root's calibrated probability, and the
    rest (1 - it) shared by the alternatives in proportion to their weights. The numbers add up
    to 1 (before rounding), never rise down the list, and the root's is the highest."""
    if not ranked:
        return []
    top = root_confidence(ranked[0].score)
    alts = [max(0.0, c.score) for c in ranked[1:]]
    total = sum(alts)
    rest = [round(max(CONFIDENCE_MIN, (1.0 - top) * w / total if total else CONFIDENCE_MIN), CONFIDENCE_DIGITS)
            for w in alts]
    out = [top]
    for r in rest:  # rounding never lets a later alternative show more than an earlier one
        out.append(min(r, out[-1]))
    return out
