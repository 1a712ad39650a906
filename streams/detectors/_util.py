"""Counter arithmetic shared by detectors."""

from __future__ import annotations


def delta(prev: int | None, cur: int | None) -> int:
    """Growth of a cumulative counter between two reads; a lower value is a reset (the
    device restarted counting), so the growth since the reset is ``cur``."""
    if cur is None or prev is None:
        return 0
    if cur < prev:
        return cur
    return cur - prev
