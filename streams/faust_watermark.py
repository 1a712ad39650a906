"""Global event-time watermark across workers and partitions.

Each worker tracks, per input partition it consumes, the highest ``ts`` seen and the last
offset consumed. A partition is **idle** only when it is *caught up* (the last offset
consumed reaches the partition's high-water mark as the consumer last saw it) and its
maximum has not moved for ``idle_s`` of wall time. A partition that is behind (slow, or
paused by Faust's flow control while its stream buffer is full) is *lagging*, never idle:
it holds the watermark at its own maximum, so a job's cutoff waits for the evidence still
queued in it (an XID on fl.gpu behind fl.sched). An assigned partition not consumed yet
but with records to read holds the watermark where it is. Without a high-water mark (no
fetch yet) the wall-time rule alone decides, as before. The hold is bounded: once lagging
partitions have kept the watermark below the wall-time rule's value for ``max_hold_s``,
that value is used (incidents then may need the late evidence's re-evaluation).

The *local* watermark is the minimum over the partitions that are not idle. When every
partition is idle the worker is *idle*: its watermark is the highest ts it has seen, and
when every worker is idle the job side closes its pending windows (as ``Engine.finish``
does at the end of a file). Workers broadcast ``(watermark, idle)`` on every job partition
once a second; the *global* watermark is the minimum over the workers heard from recently,
and never goes back.

**Coverage.** Given the input partitions (``universe``), the global watermark moves only
while every one of them is *covered*: consumed by a live worker (one heard from within
``worker_ttl_s``) that has seen its high-water mark or read from it (each tick names the
partitions its worker covers). A worker killed with SIGKILL stops covering its partitions
once its ticks expire, and a partition just assigned is not covered before its first
fetch: until the new owner covers them, event time stops, so nobody evaluates a job while
evidence sits unread in a partition no one consumes. After a rebalance a worker's own
local watermark restarts at the global one (``forget_partitions``): partitions it took
over hold time from there, not from where its previous partitions had carried it.
"""

from __future__ import annotations

import time
from typing import Callable, Iterable, Optional

from .clock import TOLERANCE_MS, EventClock

#: ``(topic, partition) -> (high-water mark, fetch position)``, each None when unknown
Offsets = Callable[[str, int], tuple[Optional[int], Optional[int]]]


NEVER = -(1 << 62)
ALWAYS = 1 << 62

#: claims (events ahead of the fleet) kept per partition until time reaches them: the lowest
#: ones; a source far ahead for good (23 h) keeps at most this many in memory per partition
MAX_HELD_CLAIMS = 64


#: a job-topic partition whose events read reach further than this ahead of the fleet's
#: watermark stops being fetched (``Alignment``) until the watermark is within
#: ``ALIGN_RESUME_MS`` of them: while a backlog drains, partitions are read at different
#: speeds, and every job read ahead of the slowest waits in the job side's reorder buffer
#: (issue 18: a 64-node week's drain, live jobs max 658 with it, 905 without)
ALIGN_AHEAD_MS = 30 * 60_000
ALIGN_RESUME_MS = ALIGN_AHEAD_MS // 2


class Alignment:
    """Event-time flow control of the job topics (pure: maxima and a watermark in, the
    partitions to hold and to resume out). A partition read further than ``ahead_ms`` ahead
    of the watermark is held until the watermark is within ``resume_ms`` of it.

    It cannot stop event time: a held partition's maximum is above the watermark, so it is
    never the partition that holds the watermark (the minimum over partitions not idle), and
    it is covered (it has been read from). When everything else is caught up, the held
    partition alone sets the watermark, which then reaches it and it resumes."""

    def __init__(self, ahead_ms: int = ALIGN_AHEAD_MS, resume_ms: int = ALIGN_RESUME_MS) -> None:
        if not 0 <= resume_ms < ahead_ms:
            raise ValueError(f"alignment: resume_ms ({resume_ms}) must be in [0, ahead_ms={ahead_ms})")
        self.ahead_ms = ahead_ms
        self.resume_ms = resume_ms
        self.held: set[tuple[str, int]] = set()
        self.holds = 0      # partitions newly held (stats)

    def decide(self, maxima: dict[tuple[str, int], int],
               watermark: int) -> tuple[set[tuple[str, int]], set[tuple[str, int]]]:
        """``(hold, resume)``: every partition to hold now (again each time: Faust's own
        buffer flow control may have resumed one) and the held ones to fetch again."""
        hold: set[tuple[str, int]] = set()
        if watermark > NEVER:
            for tp, ts in maxima.items():
                if ts > watermark + (self.resume_ms if tp in self.held else self.ahead_ms):
                    hold.add(tp)
        resume = self.held - hold
        self.holds += len(hold - self.held)
        self.held = hold
        return hold, resume

    def forget(self) -> None:
        """After a rebalance: Faust sets the fetched partitions anew."""
        self.held = set()


def _no_offsets(topic: str, partition: int) -> tuple[Optional[int], Optional[int]]:
    return None, None


class Watermarks:
    def __init__(self, *, idle_s: float = 5.0, worker_ttl_s: float = 10.0,
                 offsets: Offsets | None = None, stuck_s: float = 60.0,
                 max_hold_s: float = 60.0, universe: Iterable[tuple[str, int]] | None = None,
                 skew_tolerance_ms: int = TOLERANCE_MS) -> None:
        self.idle_s = idle_s
        self.worker_ttl_s = worker_ttl_s
        self.offsets = offsets or _no_offsets
        self.stuck_s = stuck_s
        self.max_hold_s = max_hold_s
        self._held_since: float | None = None
        self._parts: dict[tuple[str, int], list[float]] = {}    # tp -> [max ts, wall time it moved]
        self._offs: dict[tuple[str, int], list[float]] = {}     # tp -> [last offset read, wall time]
        self._expected: set[tuple[str, int]] = set()            # assigned input partitions
        self._workers: dict[str, tuple[int, bool, float]] = {}  # worker -> (wm, idle, wall time heard)
        self._covers: dict[str, frozenset[tuple[str, int]]] = {}  # worker -> partitions it covers
        self._nows: dict[str, int] = {}                         # worker -> its EventClock.now
        self.universe = frozenset(universe) if universe is not None else None
        self.uncovered = 0      # value() calls that held time for an uncovered partition (stats)
        self.clock = EventClock(skew_tolerance_ms)
        self.skewed = 0         # events read whose ts did not move time (clock skew; stats)
        self.skew_released = 0  # of those, events the fleet's time caught up with later
        #: tp -> ts of events read ahead of the fleet's time and not credible yet (the
        #: lowest MAX_HELD_CLAIMS per partition): they count once the fleet's time reaches them
        self._claims: dict[tuple[str, int], list[int]] = {}
        self.unread = 0         # value() calls held because assigned partitions were not read yet
        self._global = -(1 << 62)
        self._local_last = -(1 << 62)

    def observe_events(self, events: Iterable[tuple[str, int, int, object]],
                       source: Callable[[object], str] = str) -> dict[tuple[str, int], int]:
        """Feed ``(topic, partition, ts, event)`` of processed events through the worker's
        ``EventClock`` and raise each partition's maximum to its *credible* events only: an
        event stamped further ahead of the fleet's time than the clock's tolerance (one bad
        clock, 23 h ahead) is read but does not move the partition's time (it is flagged in
        ``clock``). ``source(event)`` names whose clock stamped it (only asked for such an
        event). Returns the new per-partition maxima of this call."""
        clock = self.clock
        tol = clock.tolerance_ms
        now = clock.now
        lim = clock.fast_limit(now)
        hi: dict[tuple[str, int], int] = {}
        for topic, partition, ts, ev in events:
            if ts <= lim:
                if ts > now:
                    now = ts
                    lim = ts + tol
            else:
                clock.now = now
                ok = clock.observe(source(ev), ts)
                now = clock.now
                lim = clock.fast_limit(now)
                if not ok:
                    self.skewed += 1
                    self._hold_claim((topic, partition), ts)
                    continue
            k = (topic, partition)
            if ts > hi.get(k, -(1 << 62)):
                hi[k] = ts
        clock.now = now
        if self._claims:
            self._release_claims(hi)
        for (t, p), ts in hi.items():
            self.observe(t, p, ts)
        return hi

    def _hold_claim(self, tp: tuple[str, int], ts: int) -> None:
        held = self._claims.setdefault(tp, [])
        held.append(ts)
        if len(held) > 2 * MAX_HELD_CLAIMS:
            held.sort()
            del held[MAX_HELD_CLAIMS:]

    def _release_claims(self, hi: dict[tuple[str, int], int]) -> None:
        """Events read ahead of the fleet's time that it has caught up with since count now:
        their partitions' maxima rise to them. Without this a partition whose last events
        came early (a joining worker's first records set its clock behind them) kept its
        time below them for good, and at the end of the input the worker held the fleet's
        event time there: both workers idle, 208 events buffered, no incident (issue 14)."""
        lim = self.clock.now + self.clock.tolerance_ms
        for tp in list(self._claims):
            held = self._claims[tp]
            ok = [c for c in held if c <= lim]
            if not ok:
                continue
            self.skew_released += len(ok)
            top = max(ok)
            if top > hi.get(tp, -(1 << 62)):
                hi[tp] = top
            rest = [c for c in held if c > lim]
            if rest:
                self._claims[tp] = rest
            else:
                del self._claims[tp]

    def observe(self, topic: str, partition: int, ts: int, offset: int = -1) -> None:
        p = self._parts.get((topic, partition))
        if p is None:
            self._parts[(topic, partition)] = [ts, time.monotonic()]
        elif ts > p[0]:
            p[0] = ts
            p[1] = time.monotonic()
        if offset >= 0:
            self.read(topic, partition, offset)

    def read(self, topic: str, partition: int, offset: int) -> None:
        """Offset ``offset`` of the partition was consumed (every record, dead letters too)."""
        o = self._offs.get((topic, partition))
        if o is None:
            self._offs[(topic, partition)] = [offset, time.monotonic()]
        elif offset > o[0]:
            o[0] = offset
            o[1] = time.monotonic()

    def consumed(self, topic: str, partition: int) -> int | None:
        """The last offset of the partition consumed (None: none yet)."""
        o = self._offs.get((topic, partition))
        return None if o is None else int(o[0])

    def maxima(self, topics: Iterable[str]) -> dict[tuple[str, int], int]:
        """The highest credible ts read per partition of ``topics`` (``Alignment``)."""
        want = set(topics)
        return {tp: int(p[0]) for tp, p in self._parts.items() if tp[0] in want}

    @property
    def global_watermark(self) -> int:
        """The global watermark as ``value`` last computed it (no side effect)."""
        return self._global

    def expect(self, tps: Iterable[tuple[str, int]]) -> None:
        """The input partitions assigned to this worker (unconsumed ones with records hold time)."""
        self._expected = set(tps)

    def forget_partitions(self) -> None:
        """After a rebalance the partitions this worker reads change: their maxima go, and
        the local watermark restarts at the global one."""
        self._parts.clear()
        self._offs.clear()
        self._claims.clear()
        self._expected = set()
        self._local_last = self._global
        self._held_since = None

    def covered(self) -> frozenset[tuple[str, int]]:
        """The assigned partitions this worker covers: high-water mark seen, or read from."""
        out = set(self._offs)
        for tp in self._expected:
            if tp not in out:
                try:
                    hw, _ = self.offsets(*tp)
                except Exception:  # noqa: BLE001 - not assigned (any more)
                    continue
                if hw is not None:
                    out.add(tp)
        return frozenset(out)

    def behind(self, topic: str, partition: int) -> Optional[bool]:
        """Whether records of the partition wait to be consumed (None: unknown).

        A partition fully fetched whose consumed offset has not moved for ``stuck_s``
        counts as caught up (an offset gap: transaction markers, compaction)."""
        try:
            hw, pos = self.offsets(topic, partition)
        except Exception:  # noqa: BLE001 - partition not assigned (any more)
            return None
        if hw is None:
            return None
        o = self._offs.get((topic, partition))
        if o is not None:
            if o[0] + 1 >= hw:
                return False
            return not (pos is not None and pos >= hw and time.monotonic() - o[1] > self.stuck_s)
        if pos is None:
            return None
        return pos < hw

    def local(self) -> tuple[int, bool] | None:
        """This worker's ``(watermark, idle)``, or None before it has seen any input."""
        if not self._parts:
            # nothing read since the last rebalance: when every assigned partition is
            # known to be caught up, this worker is idle where event time stands (else it
            # sent no tick at all, covered none of its partitions, and event time stopped
            # for every worker: a worker whose input had all been read before a rebalance
            # held every incident back for good)
            exp = self._expected
            if exp and all(self.behind(*tp) is False for tp in exp):
                return self._local_last, True
            return None
        now = time.monotonic()
        active: list[float] = []
        moving: list[float] = []
        for (t, n), p in self._parts.items():
            if now - p[1] < self.idle_s:
                moving.append(p[0])
                active.append(p[0])
            elif self.behind(t, n):
                active.append(p[0])
        held = any(tp not in self._parts and self.behind(*tp) for tp in self._expected | set(self._offs))
        idle = not active and not held
        top = int(max(p[0] for p in self._parts.values()))
        if held:
            wm = self._local_last if not active else min(int(min(active)), self._local_last)
        else:
            wm = int(min(active)) if active else top
        # the wall-time rule alone (lagging partitions that stopped moving do not count):
        # when lagging partitions have held time back below it for max_hold_s, use it, so
        # one partition stuck far behind delays incidents by at most that much; its late
        # evidence then re-evaluates them (pushed signals)
        loose = int(min(moving)) if moving else top
        if loose > max(wm, self._local_last):
            if self._held_since is None:
                self._held_since = now
            elif now - self._held_since > self.max_hold_s:
                wm = loose
        else:
            self._held_since = None
        if wm > self._local_last:
            self._local_last = wm
        return self._local_last, idle

    def lagging(self) -> list[tuple[str, int]]:
        """Partitions with records waiting (for the stats log)."""
        return sorted(tp for tp in set(self._parts) | set(self._offs) | self._expected if self.behind(*tp))

    def heard(self, worker: str, wm: int, idle: bool,
              covers: Iterable[tuple[str, int]] | None = None, now: int | None = None) -> None:
        self._workers[worker] = (wm, idle, time.monotonic())
        if covers is not None:
            self._covers[worker] = frozenset(covers)
        if now is not None:
            self._nows[worker] = now

    def idle_until(self, me: str) -> int:
        """When every worker is idle (``value``): the latest credible event time any live
        worker has read (each one's ``EventClock.now``), the time ``Engine.finish`` would
        release to. The watermark itself forgets what a worker read before a rebalance, and
        the worker that took a fully read partition over knows no time for it: after a join
        at the end of the input both workers were idle with 262 + 208 events still buffered
        behind a watermark that could not reach them (issue 14)."""
        t = self.clock.now
        cut = time.monotonic() - self.worker_ttl_s
        for w, (_, _, at) in self._workers.items():
            if w != me and at >= cut:
                t = max(t, self._nows.get(w, NEVER))
        return t

    def value(self, me: str) -> tuple[int, bool]:
        """The global ``(watermark, every worker idle)``; the watermark never goes back."""
        now = time.monotonic()
        live = [w for w, (_, _, at) in self._workers.items() if w != me and now - at < self.worker_ttl_s]
        vals = [self._workers[w][:2] for w in live]
        mine = self.local()
        if mine is not None:
            vals.append(mine)
        elif self._expected:
            # input partitions are assigned here but this worker has no word of its own on
            # them yet (nothing read, not known to be caught up): the others' ticks say
            # nothing about them (a killed predecessor's may still look live): hold
            self.unread += 1
            return self._global, False
        if self.universe is not None:
            cov = set(self.covered())
            for w in live:
                cov |= self._covers.get(w, frozenset())
            if not self.universe <= cov:
                self.uncovered += 1
                return self._global, False
        # an idle worker that has never seen an event (a worker that joined when its
        # partitions had all been read) has nothing pending and no time of its own: it
        # covers its partitions and counts as idle but does not hold the others' time at
        # NEVER (it did: both workers idle, 208 events buffered, no incident; issue 14)
        times = [v[0] for v in vals if not (v[1] and v[0] <= NEVER)]
        if times:
            g = min(times)
            if g > self._global:
                self._global = g
        return self._global, bool(vals) and all(v[1] for v in vals)



class RecoveryGate:
    """Holds job-side evaluation after a rebalance until the job partitions this worker just
    took over have been re-read up to where their previous owner could have been.

    A newly assigned job partition (fl.sched, fl.runtime, the internal jobs topic; all
    co-partitioned, all keyed by job) starts from the group's committed offset, while its
    previous owner may have applied records far beyond it and the fleet's event time has
    moved on. Evaluating the partition's jobs (stall timers, cutoffs, closing windows,
    re-evaluations) before those records are applied again would judge an attempt on part
    of its history: the false, soon withdrawn stall incidents of issue 14 item 6.

    So, per gated partition, the worker records the partition's end offset once Faust's
    table recovery finished (``set_targets``: every record the previous owner could have
    read lies below it) and what it has processed since (``read``). Until a partition
    reaches its target:

    - the job side's watermark is capped (``cap``): at the highest event time read from a
      gated fl.sched / fl.runtime partition (records below it are read, as for any lagging
      partition), and held entirely while a gated internal-topic partition (pushed signals,
      ticks) or a target is still missing;
    - re-evaluations of incidents already evaluated (pushed signals, rechecks) wait
      (``open`` is False): the agent defers them and runs them once the gate opens.

    A partition whose start offset already reaches its target is caught up at once. One
    whose position reached the target but whose processed offset stopped short of it for
    ``stuck_s`` (an offset gap: compaction, transaction markers) counts as caught up too,
    unless some of its records below the target are still queued or unacked in this worker
    (a busy job agent is not a gap: the worker checks that before ``check_positions``).
    """

    def __init__(self, *, stuck_s: float = 10.0, ts_topics: Iterable[str] = ()) -> None:
        self.stuck_s = stuck_s
        self.ts_topics = set(ts_topics)      # topics whose records carry event time
        self._targets: dict[tuple[str, int], int | None] = {}   # gated tp -> end offset (None: unknown)
        self._next: dict[tuple[str, int], int] = {}             # gated tp -> next offset to process
        self._moved: dict[tuple[str, int], float] = {}          # gated tp -> wall time _next moved
        self._max_ts: dict[tuple[str, int], int] = {}           # gated ts tp -> highest event time read
        self.opened = 0                                         # times the gate opened (stats)
        self.held_since: float | None = None

    # ---------------------------------------------------------- assignment
    def assign(self, tps: Iterable[tuple[str, int]]) -> None:
        """Gate ``tps`` (newly assigned job partitions); their targets are unknown yet."""
        for tp in tps:
            self._targets[tp] = None
            self._next.pop(tp, None)
            self._max_ts.pop(tp, None)
            self._moved[tp] = time.monotonic()
        if self._targets and self.held_since is None:
            self.held_since = time.monotonic()

    def retain(self, assigned: Iterable[tuple[str, int]]) -> None:
        """Forget gated partitions that are not assigned any more."""
        keep = set(assigned)
        for tp in [tp for tp in self._targets if tp not in keep]:
            self._drop(tp)

    def needs_targets(self) -> list[tuple[str, int]]:
        return sorted(tp for tp, t in self._targets.items() if t is None)

    def set_targets(self, ends: dict[tuple[str, int], int],
                    starts: dict[tuple[str, int], int | None]) -> None:
        """End offsets of gated partitions and where this worker starts reading them."""
        for tp, end in ends.items():
            if tp not in self._targets:
                continue
            self._targets[tp] = end
            start = starts.get(tp)
            if start is not None and start > self._next.get(tp, -1):
                self._next[tp] = start
        self._release_caught_up()

    # ---------------------------------------------------------- progress
    def read(self, topic: str, partition: int, offset: int, ts: int | None = None) -> None:
        """A record of a job partition was processed (dead letters too)."""
        tp = (topic, partition)
        if tp not in self._targets:
            return
        if offset + 1 > self._next.get(tp, -1):
            self._next[tp] = offset + 1
            self._moved[tp] = time.monotonic()
        if ts is not None and ts > self._max_ts.get(tp, NEVER):
            self._max_ts[tp] = ts
        target = self._targets[tp]
        if target is not None and offset + 1 >= target:
            self._release_caught_up()

    def target(self, tp: tuple[str, int]) -> int | None:
        """The end offset a gated partition must be re-read to (None: unknown, or not gated)."""
        return self._targets.get(tp)

    def history(self, topic: str, partition: int, offset: int) -> bool:
        """Whether a record of a gated partition lies below its target (or the target is not
        known yet): it was written before this worker took the partition over. A tick read
        there is some worker's old word, possibly a dead one's, that would claim coverage and
        event time this worker has not re-read (issue 14: a crash-restarted worker evaluated a
        job at its killed predecessor's watermark, before its own node side re-read the OOM)."""
        tp = (topic, partition)
        if tp not in self._targets:
            return False
        target = self._targets[tp]
        return target is None or offset < target

    def check_positions(self, positions: dict[tuple[str, int], int | None]) -> None:
        """Fetch positions (aiokafka ``position()``): a partition fetched past its target
        whose processing has not moved for ``stuck_s`` is caught up (offset gap)."""
        now = time.monotonic()
        for tp, pos in positions.items():
            target = self._targets.get(tp)
            if target is None or pos is None or pos < target:
                continue
            if now - self._moved.get(tp, now) > self.stuck_s:
                self._next[tp] = max(self._next.get(tp, -1), target)
        self._release_caught_up()

    def _release_caught_up(self) -> None:
        for tp, target in list(self._targets.items()):
            if target is not None and self._next.get(tp, -1) >= target:
                self._drop(tp)
        if not self._targets and self.held_since is not None:
            self.held_since = None
            self.opened += 1

    def _drop(self, tp: tuple[str, int]) -> None:
        self._targets.pop(tp, None)
        self._next.pop(tp, None)
        self._moved.pop(tp, None)
        self._max_ts.pop(tp, None)

    # ---------------------------------------------------------- the hold
    def gated(self) -> list[tuple[str, int]]:
        return sorted(self._targets)

    def open(self) -> bool:
        """True when no job partition is waiting to be re-read."""
        self._release_caught_up()
        return not self._targets

    def cap(self) -> int:
        """The highest watermark the job side may use now (``ALWAYS`` when open)."""
        if self.open():
            return ALWAYS
        cap = ALWAYS
        for tp, target in self._targets.items():
            if target is None or tp[0] not in self.ts_topics:
                return NEVER
            cap = min(cap, self._max_ts.get(tp, NEVER))
        return cap

    def held_s(self) -> float:
        return 0.0 if self.held_since is None else time.monotonic() - self.held_since
