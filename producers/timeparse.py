"""Parse the times people type (epoch ms, ISO 8601, ``-2h``) into UTC epoch milliseconds."""

from __future__ import annotations

import re
from datetime import datetime, timezone

from ..schemas import now_ms

_REL = re.compile(r"^\s*-?\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def parse_time(text: str | int, *, now: int | None = None) -> int:
    """``1764412800000`` | ``2026-11-29T12:00:00Z`` | ``-2h`` / ``30m`` (ago) | ``now`` -> epoch ms.

    A naive ISO time is taken as UTC. Raises ``ValueError`` naming the accepted forms.
    """
    if isinstance(text, int):
        return text
    s = text.strip()
    ref = now_ms() if now is None else now
    if s == "now":
        return ref
    if s.isdigit():
        v = int(s)
        return v * 1000 if v < 10_000_000_000 else v  # seconds are accepted too
    m = _REL.match(s)
    if m:
        return ref - int(float(m.group(1)) * _UNIT_MS[m.group(2)])
    try:
        dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"cannot read time {text!r}: use epoch ms (1764412800000), ISO 8601 "
            "(2026-11-29T12:00:00Z) or a relative age (-2h, 30m, 7d)") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)
