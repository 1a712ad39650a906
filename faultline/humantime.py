"""Times for people. Inside faultline every time is UTC epoch milliseconds; only what a
person reads is rendered, in the reader's local time zone (``TZ``), with the zone named so
a pasted line is never ambiguous. ``FAULTLINE_DISPLAY_TZ=UTC`` forces UTC."""

from __future__ import annotations

import datetime as _dt
import os

__all__ = ["show", "show_ms", "clock"]


def _zone() -> _dt.tzinfo | None:
    if os.environ.get("FAULTLINE_DISPLAY_TZ", "").upper() == "UTC":
        return _dt.timezone.utc
    return None  # astimezone(None): the local zone


def _local(ms: int) -> _dt.datetime:
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.timezone.utc).astimezone(_zone())


def show(ms: int | None, *, seconds: bool = True) -> str:
    """``2026-11-02 07:53:36 UTC`` (``-`` for None)."""
    if ms is None:
        return "-"
    d = _local(int(ms))
    return d.strftime("%Y-%m-%d %H:%M:%S %Z" if seconds else "%Y-%m-%d %H:%M %Z")


def show_ms(ms: int | None) -> str:
    """``2026-11-02 07:53:36.293 UTC``: for timelines where milliseconds order events."""
    if ms is None:
        return "-"
    d = _local(int(ms))
    return f"{d:%Y-%m-%d %H:%M:%S}.{int(ms) % 1000:03d} {d:%Z}"


def clock(ms: int | None) -> str:
    """``07:53:36`` local time, for live views where the date is today."""
    if not ms:
        return "-"
    return _local(int(ms)).strftime("%H:%M:%S")
