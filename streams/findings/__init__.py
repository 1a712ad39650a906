"""Proactive findings: repeat offenders, change regressions and version drift.

PURE (events + incidents in, findings out, no I/O) so the offline pipeline
(``streams.offline``: diagnose, ingest, ``findings --from``, replay, benches) and the Faust
agent (``streams.agents_findings``) run the same code. One small unit per concern:

- ``stats``: exact Poisson/binomial tails, the conditional rate test, BH/Bonferroni.
- ``exposure``: the fleet's inventory and every attempt's GPU-hours per subject and bucket.
- ``offenders``: interruptions (interrupted attempts; alerts kept apart) and the
  leave-one-out rate test per dimension and window.
- ``changes``: rollouts and the changed-vs-unchanged (or before/after) rate test.
- ``drift``: mixed versions across a job's nodes at its start.
- ``revisions``: one finding per subject and window, later windows updating it.
- ``tracker``: ``FindingsTracker``, the units composed; ``runner``: ``FindingsRunner``
  (engine + tracker, deterministic event-time evaluation) and ``StreamClock``.
"""

from ...schemas.events import INTERRUPTION_STATES
from .common import (ACTIONS, BLAME_DIMS, CHANGE_COMPONENTS, CONTEXT_DIMS, DAY_MS, DIMENSIONS, DRIFT_COMPONENTS,
                     HOUR_MS, FindingsConfig, dimension_of, finding_id, to_alert)
from .runner import FindingsRunner, StreamClock
from .stats import adjust, binom_sf, poisson_sf, rate_test
from .tracker import FindingsTracker

__all__ = [
    "FindingsConfig", "FindingsTracker", "FindingsRunner", "StreamClock", "poisson_sf", "binom_sf", "rate_test",
    "adjust", "finding_id", "to_alert", "dimension_of", "DIMENSIONS", "ACTIONS", "INTERRUPTION_STATES",
    "BLAME_DIMS", "CONTEXT_DIMS", "CHANGE_COMPONENTS", "DRIFT_COMPONENTS", "HOUR_MS", "DAY_MS",
]
