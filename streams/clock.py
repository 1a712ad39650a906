"""``EventClock``: the event time a fleet agrees on, which one bad clock cannot move.

Every event carries its producer's clock (``ts``). Taking the highest ``ts`` seen as "now"
lets one node stamped 23 h ahead (inside the contract's 24 h future bound) fire every stall
timer of the fleet at once. The clock instead moves in steps the fleet backs:

- an event at most ``tolerance_ms`` ahead of the current time is *credible*: time moves to
  it (a source that keeps reporting carries time forward on its own, in small steps, so a
  single live node or switch still advances time while the others have gone quiet: a dead
  node never holds time back);
- an event further ahead is a *claim* of its source (node, switch or producer,
  ``source_of``): it does not move time, and it is *flagged* (``flags``: source, count, how
  far ahead) until a claim of **another** source comes within ``tolerance_ms`` of it (the
  fleet jumped together: a gap in the input, a replay of a later range); then time moves
  to the lower of the two and both sources' flags are cleared;
- while only one source has ever been seen, its events are credible (nobody disagrees:
  ``diagnose`` of one node's file), and when a second source then appears more than
  ``tolerance_ms`` *behind*, time goes back to it before anything depends on it (the first
  source is the one ahead: a clock behind the fleet only makes its own events late).

Callers keep their own released watermark monotonic (the Engine, the worker's
``Watermarks``): ``now`` only moves back in that one start-up case.

Pure and bounded: one integer per claiming source (at most ``max_claims``), one flag per
flagged source (at most ``max_flags``; the others are counted in ``flagged_other``).
"""

from __future__ import annotations

from typing import Any

from msgspec import Struct

#: how far an event may lead the fleet's time and still move it on its own (ms). Below the
#: stall floor (10 min), so a skew too small to be flagged cannot declare a stall by itself.
TOLERANCE_MS = 120_000
MAX_CLAIMS = 4_096
MAX_FLAGS = 256
_NEVER = -(1 << 62)


class SkewFlag(Struct, kw_only=True):
    """Events of one source that arrived ahead of the fleet's time and stayed ahead."""

    source: str
    events: int = 0
    first_ts: int = 0           # lowest ts of its flagged events
    last_ts: int = 0            # highest
    ahead_ms: int = 0           # most it was ahead of the fleet's time when flagged


def source_of(ev: Any) -> str:
    """Whose clock stamped ``ev``: its node, else the switch it is about (fl.net without a
    node), else its producer (``source``: ``slurm@ctl-1``, ``sim``)."""
    node = ev.node
    if node:
        return node
    dev = getattr(ev.data, "device", None)
    if isinstance(dev, str) and dev:
        return dev
    return ev.source or "?"


class EventClock:
    """Event time from what the fleet agrees on (module doc)."""

    __slots__ = ("tolerance_ms", "max_claims", "max_flags", "now", "claims", "flags", "flagged_other",
                 "_solo")

    def __init__(self, tolerance_ms: int = TOLERANCE_MS, *, max_claims: int = MAX_CLAIMS,
                 max_flags: int = MAX_FLAGS) -> None:
        self.tolerance_ms = tolerance_ms
        self.max_claims = max_claims
        self.max_flags = max_flags
        #: the agreed event time (epoch ms); ``-(1 << 62)`` before the first event
        self.now = _NEVER
        #: source -> lowest ts of its outstanding claims (events ahead of ``now``)
        self.claims: dict[str, int] = {}
        self.flags: dict[str, SkewFlag] = {}
        self.flagged_other = 0          # flagged events of sources beyond ``max_flags``
        self._solo: str | None = None   # the only source seen so far (None: none, or several)

    # ------------------------------------------------------------------ input
    @property
    def steady(self) -> bool:
        """Past the start (two sources seen): from here an event at most ``tolerance_ms``
        ahead of ``now`` is credible whatever its source, so a caller may move ``now`` to
        it without ``observe`` (the fast path) and call ``observe`` for the others only."""
        return self._solo is None and self.now != _NEVER

    def fast_limit(self, now: int) -> int:
        """The highest ts a caller's fast path may take as credible without ``observe``,
        given its local copy ``now`` of the agreed time: ``now + tolerance_ms`` once
        ``steady``, else nothing (every event goes through ``observe``)."""
        return now + self.tolerance_ms if self.steady else _NEVER

    def observe(self, source: str, ts: int) -> bool:
        """One event of ``source`` at ``ts``. True when it is credible (time may have moved
        to it); False when it is ahead of the fleet and flagged."""
        if self.now == _NEVER or self._solo is not None:
            if self._start(source, ts):
                return True
        if ts <= self.now + self.tolerance_ms:
            if ts > self.now:
                self.now = ts
            return True
        return self._claim(source, ts)

    def _start(self, source: str, ts: int) -> bool:
        """Single-source phase: True when the event was handled here."""
        if self.now == _NEVER:
            self._solo, self.now = source, ts
            return True
        if source == self._solo:
            if ts > self.now:      # nobody disagrees yet
                self.now = ts
            return True
        # a second source: from here on sources have to agree
        solo, self._solo = self._solo, None
        if ts < self.now - self.tolerance_ms:
            # the first source is ahead of this one: its lead is a claim, not time
            lead = self.now
            self.now = ts
            self.claims[solo] = lead
            self._flag(solo, lead, lead - ts)
        return False

    def _claim(self, source: str, ts: int) -> bool:
        tol = self.tolerance_ms
        now = self.now
        claims = self.claims
        for other, c in list(claims.items()):
            if c <= now + tol:          # the fleet has caught up with it since
                del claims[other]
                continue
            if other != source and abs(c - ts) <= tol:
                # two clocks agree: the input jumped ahead (a gap, a later range)
                self.now = min(c, ts)
                del claims[other]
                claims.pop(source, None)
                self._settle()
                return True
        cur = claims.get(source)
        if cur is None:
            if len(claims) >= self.max_claims:
                del claims[next(iter(claims))]
            claims[source] = ts
        elif ts < cur:
            claims[source] = ts
        self._flag(source, ts, ts - now)
        return False

    def _flag(self, source: str, ts: int, ahead: int) -> None:
        f = self.flags.get(source)
        if f is None:
            if len(self.flags) >= self.max_flags:
                self.flagged_other += 1
                return
            f = self.flags[source] = SkewFlag(source=source, first_ts=ts, last_ts=ts)
        f.events += 1
        if ts < f.first_ts:
            f.first_ts = ts
        if ts > f.last_ts:
            f.last_ts = ts
        if ahead > f.ahead_ms:
            f.ahead_ms = ahead

    def _settle(self) -> None:
        """Drop the flags and claims time has caught up with."""
        lim = self.now + self.tolerance_ms
        for s in [s for s, f in self.flags.items() if f.last_ts <= lim]:
            del self.flags[s]
        for s in [s for s, c in self.claims.items() if c <= lim]:
            del self.claims[s]

    # ------------------------------------------------------------------ output
    def skewed(self) -> list[SkewFlag]:
        """Sources whose events are still ahead of the fleet's time, most events first."""
        self._settle()
        return sorted(self.flags.values(), key=lambda f: (-f.events, f.source))

    def skewed_events(self) -> int:
        """Events flagged ahead of the fleet that it never caught up with."""
        return sum(f.events for f in self.skewed()) + self.flagged_other

    def cap(self, ts: int) -> int:
        """``ts`` bounded by the agreed time (a per-partition maximum for a watermark)."""
        return ts if ts <= self.now else self.now
