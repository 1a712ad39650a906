"""Rule modules of ``streams.correlate`` (issue 16: correlation as named stages and rule units).

- ``ranking``: the one ranking rule and the calibration of the confidences shown;
- ``storage``: file systems - locality, a file or a kernel line to its mount, which mount alarms
  the job felt.

Each is pure (no I/O) and unit-tested alone (tests/test_ranking.py, tests/test_correlate_locality.py,
tests/test_correlate_components.py); ``streams.correlate`` re-exports the names it uses.
"""
