"""The worker's event-time watermark (``streams.faust_watermark.Watermarks``): a partition
is idle only when it is caught up (consumed up to its high-water mark) and quiet; one that
lags behind (slow, or paused by flow control) holds the watermark however long it stalls."""

from __future__ import annotations

import time

from faultline.streams.faust_watermark import Watermarks

IDLE_S = 0.05


class Offsets:
    """High-water marks and fetch positions per partition, as the Kafka consumer reports them."""

    def __init__(self) -> None:
        self.hw: dict[tuple[str, int], int] = {}
        self.pos: dict[tuple[str, int], int] = {}

    def __call__(self, topic: str, partition: int):
        return self.hw.get((topic, partition)), self.pos.get((topic, partition))


def test_lagging_partition_holds_the_watermark_after_idle_time():
    off = Offsets()
    w = Watermarks(idle_s=IDLE_S, offsets=off)
    off.hw[("fl.gpu", 0)] = 1000          # 1000 records published, 10 consumed, then paused
    off.hw[("fl.sched", 0)] = 3
    for i in range(10):
        w.observe("fl.gpu", 0, 1_000 + i, i)
    for i, ts in enumerate((1_000, 50_000, 90_000)):
        w.observe("fl.sched", 0, ts, i)
    time.sleep(IDLE_S * 3)                 # fl.gpu has not moved for longer than idle_s
    wm, idle = w.local()
    assert (wm, idle) == (1_009, False), "a lagging partition is not idle: it holds time"
    assert w.lagging() == [("fl.gpu", 0)]
    for i in range(10, 1000):               # consumption resumes and catches up
        w.observe("fl.gpu", 0, 1_000 + i * 100, i)
    assert w.local() == (100_900, False)    # sched is quiet + caught up: only gpu counts ...
    time.sleep(IDLE_S * 3)
    assert w.local() == (100_900, True)     # ... and once both are caught up and quiet: idle


def test_unconsumed_assigned_partition_with_records_holds_time():
    off = Offsets()
    w = Watermarks(idle_s=IDLE_S, offsets=off)
    w.expect([("fl.gpu", 1), ("fl.sched", 0)])
    off.hw[("fl.sched", 0)] = 2
    w.observe("fl.sched", 0, 5_000, 0)
    w.observe("fl.sched", 0, 9_000, 1)
    off.hw[("fl.gpu", 1)], off.pos[("fl.gpu", 1)] = 500, 0      # records there, none read yet
    assert w.local() == (-(1 << 62), False)
    off.pos[("fl.gpu", 1)] = 500                                  # empty after all (all fetched)
    off.hw[("fl.gpu", 1)] = 500
    w.forget_partitions()
    w.expect([("fl.gpu", 1), ("fl.sched", 0)])
    w.observe("fl.sched", 0, 9_000, 1)
    assert w.local() == (9_000, False)


def test_without_offsets_the_wall_time_rule_decides():
    w = Watermarks(idle_s=IDLE_S)
    w.observe("fl.gpu", 0, 1_000)
    w.observe("fl.sched", 0, 9_000)
    assert w.local() == (1_000, False)
    time.sleep(IDLE_S * 3)
    assert w.local() == (9_000, True)
    w.heard("other", 5_000, True)
    assert w.value("me") == (5_000, True)


def test_dead_letters_count_as_consumed_and_gaps_do_not_hold_forever():
    off = Offsets()
    w = Watermarks(idle_s=IDLE_S, offsets=off, stuck_s=IDLE_S * 4)
    off.hw[("fl.gpu", 0)] = 3
    off.hw[("fl.sched", 0)] = 5
    off.pos[("fl.sched", 0)] = 5
    w.observe("fl.gpu", 0, 1_000, 0)
    w.observe("fl.gpu", 0, 2_000, 1)
    w.read("fl.gpu", 0, 2)                      # the last record was invalid (dead letter)
    w.observe("fl.sched", 0, 7_000, 3)          # offset 4 is a gap (e.g. a transaction marker)
    time.sleep(IDLE_S * 2)
    assert w.lagging() == [("fl.sched", 0)]
    assert w.local() == (7_000, False)          # sched waits for offset 4 ...
    time.sleep(IDLE_S * 4)
    assert w.lagging() == []                    # ... not forever: all fetched, nothing came
    assert w.local() == (7_000, True)


def test_the_hold_is_bounded_in_wall_time():
    off = Offsets()
    w = Watermarks(idle_s=IDLE_S, offsets=off, max_hold_s=IDLE_S * 4)
    off.hw[("fl.gpu", 0)] = 100
    w.observe("fl.gpu", 0, 1_000, 0)       # stuck far behind
    time.sleep(IDLE_S * 2)
    w.observe("fl.sched", 0, 50_000, 0)
    assert w.local() == (1_000, False)
    time.sleep(IDLE_S * 2)
    w.observe("fl.sched", 0, 60_000, 1)
    assert w.local() == (1_000, False)      # held ...
    time.sleep(IDLE_S * 4)
    w.observe("fl.sched", 0, 70_000, 2)
    assert w.local() == (70_000, False)     # ... but not for longer than max_hold_s


# ---------------------------------------------------------------- the recovery gate
from faultline.streams.faust_watermark import ALWAYS, NEVER, RecoveryGate  # noqa: E402

S, R, J = "fl.sched", "fl.runtime", "fl.internal.jobs"


def _gate() -> RecoveryGate:
    g = RecoveryGate(ts_topics=(S, R), stuck_s=0.05)
    g.assign([(S, 0), (R, 0), (J, 0)])
    return g


def test_gate_holds_everything_until_targets_are_known():
    g = _gate()
    assert not g.open() and g.cap() == NEVER
    g.read(S, 0, 10, ts=5_000)
    assert g.cap() == NEVER                 # targets unknown: nothing may be evaluated
    assert g.needs_targets() == [(J, 0), (R, 0), (S, 0)]


def test_gate_caps_at_what_the_reread_partitions_reached_and_opens_when_caught_up():
    g = _gate()
    g.set_targets({(S, 0): 100, (R, 0): 50, (J, 0): 20}, {(S, 0): 40, (R, 0): 50, (J, 0): 10})
    assert g.gated() == [(J, 0), (S, 0)]     # fl.runtime starts at its end: caught up at once
    g.read(S, 0, 60, ts=7_000)
    assert g.cap() == NEVER                 # the internal topic (pushed signals) is not re-read yet
    g.read(J, 0, 19)
    assert g.gated() == [(S, 0)]
    assert g.cap() == 7_000                 # event time up to what fl.sched/0 was read to
    g.read(S, 0, 80, ts=6_000)
    assert g.cap() == 7_000                 # highest read, not the last one
    g.read(S, 0, 99, ts=9_000)
    assert g.open() and g.cap() == ALWAYS and g.opened == 1


def test_gate_new_assignment_regates_only_new_partitions_and_forgets_revoked():
    g = _gate()
    g.set_targets({(S, 0): 1, (R, 0): 1, (J, 0): 1}, {(S, 0): 1, (R, 0): 1, (J, 0): 1})
    assert g.open()
    g.assign([(S, 1)])
    assert not g.open()
    g.retain([(S, 0)])                      # partition 1 went to another worker
    assert g.open()


def test_gate_offset_gap_counts_as_caught_up_once_fetched_past_target():
    g = RecoveryGate(ts_topics=(S,), stuck_s=0.05)
    g.assign([(S, 0)])
    g.set_targets({(S, 0): 10}, {(S, 0): 0})
    g.read(S, 0, 7, ts=1)                   # offsets 8, 9: transaction markers / compacted
    g.check_positions({(S, 0): 10})
    assert not g.open()                     # not stuck long enough yet
    time.sleep(0.06)
    g.check_positions({(S, 0): 9})
    assert not g.open()                     # not fetched past the target
    g.check_positions({(S, 0): 10})
    assert g.open()


def test_time_stops_while_an_input_partition_is_covered_by_no_live_worker():
    u = [("fl.gpu", 0), ("fl.gpu", 1)]
    w = Watermarks(idle_s=IDLE_S, worker_ttl_s=0.2, universe=u, offsets=lambda t, p: (None, None))
    w.observe("fl.gpu", 0, 1_000)
    w.read("fl.gpu", 0, 5)
    assert w.value("me") == (-(1 << 62), False)        # fl.gpu/1: nobody covers it
    w.heard("other", 900, False, covers=[("fl.gpu", 1)])
    assert w.value("me")[0] == 900
    w.observe("fl.gpu", 0, 2_000)
    w.heard("other", 1_800, False, covers=[("fl.gpu", 1)])
    assert w.value("me")[0] == 1_800
    time.sleep(0.25)                                    # the other worker died (SIGKILL): ticks expire
    w.observe("fl.gpu", 0, 3_000)
    assert w.value("me")[0] == 1_800                    # held where it was, not at 3_000
    assert w.uncovered >= 1


def test_after_a_rebalance_the_local_watermark_restarts_at_the_global_one():
    hw = {("fl.gpu", 0): 10, ("fl.gpu", 1): 10}
    w = Watermarks(idle_s=IDLE_S, universe=list(hw), offsets=lambda t, p: (hw[(t, p)], 0))
    w.expect([("fl.gpu", 0)])
    w.observe("fl.gpu", 0, 1_000)
    w.read("fl.gpu", 0, 9)
    w.heard("other", 500, False, covers=[("fl.gpu", 1)])
    assert w.value("me")[0] == 500
    w.observe("fl.gpu", 0, 5_000)
    assert w.local()[0] == 5_000
    w.forget_partitions()                               # now we own fl.gpu/1 too, unread
    w.expect(hw)
    w.observe("fl.gpu", 0, 6_000)
    w.read("fl.gpu", 0, 9)
    assert w.local()[0] == 500                          # fl.gpu/1 holds time at the global value


def test_one_source_stamped_hours_ahead_does_not_move_the_partition_time():
    w = Watermarks(idle_s=IDLE_S)
    base = 1_790_000_000_000
    evs = [("fl.gpu", 0, base + i * 1_000, f"n{i % 3}") for i in range(10)]
    w.observe_events(evs, source=str)
    skewed = [("fl.gpu", 1, base + 23 * 3_600_000, "n9")]        # another node, 23 h ahead
    w.observe_events(skewed + [("fl.gpu", 1, base + 9_500, "n1")], source=str)
    assert w.local()[0] == base + 9_000                          # min over partitions, not 23 h on
    assert w._parts[("fl.gpu", 1)][0] == base + 9_500
    assert w.skewed == 1 and w.clock.skewed_events() == 1


def test_a_worker_with_nothing_left_to_read_after_a_rebalance_is_idle_where_time_stands():
    """All its input read before a rebalance, a worker observes no record afterwards. It
    used to send no tick (no watermark of its own), so nobody covered its partitions and
    event time stopped for every worker: the incidents of the end of the input never came.
    Now, once every assigned partition is known to be caught up, it is idle at the global
    watermark; with a partition still to read it says nothing, as before."""
    hw = {("fl.gpu", 0): 10, ("fl.gpu", 1): 10}
    pos = {("fl.gpu", 0): 10, ("fl.gpu", 1): 4}
    w = Watermarks(idle_s=IDLE_S, universe=list(hw), offsets=lambda t, p: (hw[(t, p)], pos[(t, p)]))
    w.expect(hw)
    w.observe("fl.gpu", 0, 1_000)
    w.read("fl.gpu", 0, 9)
    w.observe("fl.gpu", 1, 1_200)
    w.read("fl.gpu", 1, 9)
    assert w.value("me")[0] == 1_000
    w.forget_partitions()                               # a rebalance, nothing new to read
    w.expect(hw)
    assert w.local() is None                            # fl.gpu/1 not fetched to its end yet
    pos[("fl.gpu", 1)] = 10
    assert w.local() == (1_000, True)                   # caught up everywhere: idle, time as it was
    assert w.covered() == frozenset(hw)


def test_a_restarted_worker_does_not_take_time_from_ticks_it_has_not_read_for_itself():
    """A worker restarted after SIGKILL re-reads its predecessor's last ticks from the internal
    jobs topic; heard within the TTL they look live and claim every partition at the dead
    worker's watermark. A worker with assigned input it has not read (no word of its own)
    holds event time instead of taking theirs: the crash test saw a job evaluated at the dead
    worker's time before the new node side re-read the GPU's OOM (a transient wrong revision)."""
    u = [("fl.gpu", 0), ("fl.sched", 0)]
    off = Offsets()
    w = Watermarks(idle_s=IDLE_S, universe=u, offsets=off)
    w.expect(u)
    off.hw[("fl.gpu", 0)], off.pos[("fl.gpu", 0)] = 500, 0      # the node partition: 500 to re-read
    w.heard("dead-predecessor", 90_000, False, covers=u)
    assert w.value("me") == (NEVER, False) and w.unread == 1
    w.observe("fl.gpu", 0, 10_000, 0)                           # re-reading: its own word now
    off.hw[("fl.sched", 0)], off.pos[("fl.sched", 0)] = 3, 3
    w.observe("fl.sched", 0, 12_000, 2)
    assert w.value("me")[0] == 10_000                            # the minimum, not the dead one's time
    w2 = Watermarks(idle_s=IDLE_S, universe=u, offsets=off)     # no partition assigned here at all:
    w2.heard("other", 90_000, False, covers=u)                   # it follows the others
    assert w2.value("me")[0] == 90_000


def test_gate_history_marks_records_written_before_the_takeover():
    g = _gate()
    assert g.history(J, 0, 5)                # target unknown: everything is history
    assert not g.history(J, 1, 5)            # not gated: live
    g.set_targets({(S, 0): 100, (R, 0): 50, (J, 0): 20}, {(S, 0): 40, (R, 0): 50, (J, 0): 10})
    assert g.history(J, 0, 19) and not g.history(J, 0, 20)
    g.read(J, 0, 19)
    assert not g.history(J, 0, 19)          # caught up: the partition is not gated any more


def test_events_read_ahead_of_the_fleet_count_once_its_time_catches_up():
    """A worker that joins mid-input reads its partitions from their commits, which lie at
    different event times: its first fl.sched record can be minutes ahead of its node
    partitions. That record is not credible then (nothing backs it) and does not move its
    partition's time; once the node events catch up with it, it must count. Before, it never
    did: at the end of the input the worker held the fleet's time 16 s short of the last
    job events (both workers idle, 208 events buffered, no incident within 180 s)."""
    base = 1_790_000_000_000
    w = Watermarks(idle_s=IDLE_S)
    w.observe_events([("fl.gpu", 0, base, "n1"), ("fl.gpu", 0, base + 1_000, "n2")], source=str)
    w.observe_events([("fl.sched", 0, base + 200_000, "slurm")], source=str)   # 199 s ahead: a claim
    assert w.skewed == 1 and ("fl.sched", 0) not in w._parts
    w.observe_events([("fl.gpu", 0, base + 50_000 + i * 10_000, f"n{1 + i % 2}") for i in range(3)],
                     source=str)                                             # time: base + 70 s
    assert ("fl.sched", 0) not in w._parts                                   # 130 s ahead: still a claim
    w.observe_events([("fl.gpu", 0, base + 90_000, "n1")], source=str)      # within 120 s of it now
    assert w._parts[("fl.sched", 0)][0] == base + 200_000 and w.skew_released == 1
    # a source far ahead for good stays out, in bounded memory
    far = [("fl.net", 1, base + 23 * 3_600_000 + i, "sw9") for i in range(1_000)]
    w.observe_events(far, source=str)
    assert ("fl.net", 1) not in w._parts and len(w._claims[("fl.net", 1)]) <= 2 * 64


def test_an_idle_worker_that_never_saw_an_event_does_not_hold_the_others_time():
    """A worker that joins once its partitions have all been read sees no event: idle, with
    no time of its own (NEVER). Its ticks held every worker's event time at NEVER (both
    idle, 208 events buffered in the jobs it took over, no incident within 180 s)."""
    u = [("fl.gpu", 0), ("fl.gpu", 1)]
    hw = {("fl.gpu", 0): 10, ("fl.gpu", 1): 10}
    w = Watermarks(idle_s=IDLE_S, universe=u, offsets=lambda t, p: (hw[(t, p)], 10))
    w.expect([("fl.gpu", 1)])                                 # caught up, nothing to read
    w.heard("a", 5_000, True, covers=[("fl.gpu", 0)])
    assert w.local() == (NEVER, True)
    assert w.value("b") == (5_000, True)
    a = Watermarks(idle_s=IDLE_S, universe=u, offsets=lambda t, p: (hw[(t, p)], 10))
    a.expect([("fl.gpu", 0)])
    a.observe("fl.gpu", 0, 5_000, 9)
    a.heard("b", NEVER, True, covers=[("fl.gpu", 1)])          # the joined worker's tick
    assert a.value("a")[0] == 5_000


def test_when_every_worker_is_idle_windows_close_at_the_latest_time_any_worker_read():
    """After a join at the end of the input, the worker that read the last job events lost
    their partitions' maxima in the rebalance and the one that took them over read nothing:
    idle everywhere, the watermark below the events still buffered (262 + 208, no incident).
    ``idle_until`` is the latest credible time any live worker read, what ``finish`` would use."""
    base = 1_790_000_000_000
    a = Watermarks(idle_s=IDLE_S, worker_ttl_s=0.3)
    a.observe_events([("fl.sched", 0, base + i * 1_000, f"n{i % 2}") for i in range(60)], source=str)
    a.forget_partitions()                                   # the rebalance: maxima gone
    assert a.clock.now == base + 59_000                     # the clock still knows
    a.heard("b", NEVER, True, now=NEVER)
    assert a.idle_until("a") == base + 59_000
    b = Watermarks(idle_s=IDLE_S, worker_ttl_s=0.3)        # the joined worker: read nothing
    b.heard("a", base + 20_000, True, now=base + 59_000)
    assert b.idle_until("b") == base + 59_000
    time.sleep(0.35)                                        # a's ticks expired: not a live word
    assert b.idle_until("b") == NEVER


def test_a_job_partition_hole_holds_event_time_with_the_recovery_gate_open_or_closed():
    """While a job partition has a hole (records never delivered below applied ones), the job
    side's event time stays at the last one it used, whether the recovery gate is open or
    capping it (session 13: the gate's cap moved past a moved partition's undelivered first
    records, and a job was evaluated without its container OOM records)."""
    import asyncio
    from types import SimpleNamespace

    from faultline.streams.agents import JobAgent, Stats
    from faultline.streams.engine import EngineConfig

    wm = {"v": 0}
    wms = SimpleNamespace(universe=(), value=lambda worker: (wm["v"], False))
    agent = JobAgent(None, SimpleNamespace(errors=None), None, wms, Stats(), {}, EngineConfig(),
                     jobs_in="t.jobs", job_topics=["t.sched"], worker_id="w")
    gate = {"cap": ALWAYS}
    agent.gate = SimpleNamespace(cap=lambda: gate["cap"])
    hole = {"v": False}
    agent.holes = lambda: hole["v"]
    used: list[int] = []
    agent._ingest = lambda js, fresh, w: used.append(w)

    async def _write(js):
        return None

    agent._write = _write
    ns = SimpleNamespace(dirty=())

    def step(v: int, cap: int = ALWAYS, holes: bool = False) -> int:
        wm["v"], gate["cap"], hole["v"] = v, cap, holes
        asyncio.run(agent.advance(ns, None, [], False, {}))
        return used[-1]

    assert step(100) == 100
    assert step(200, holes=True) == 100              # gate open, a hole: held
    assert step(300, cap=250, holes=True) == 100     # gate closed below the wm, a hole: held
    assert step(300, cap=250) == 250                 # the hole fetched again: the gate's cap
    assert step(400, cap=350, holes=True) == 250     # and held from there
    assert step(500) == 500
    assert agent.stats.hole_holds == 3


# ---------------------------------------------------------------- event-time alignment (issue 18)
MIN = 60_000


def test_alignment_holds_a_job_partition_read_far_ahead_until_the_watermark_nears_it():
    from faultline.streams.faust_watermark import Alignment

    a = Alignment(ahead_ms=30 * MIN, resume_ms=15 * MIN)
    sched, runtime = ("fl.sched", 0), ("fl.runtime", 1)
    wm = 1_000 * MIN
    # runtime read 31 min ahead of event time, sched 10 min: only runtime is held
    assert a.decide({sched: wm + 10 * MIN, runtime: wm + 31 * MIN}, wm) == ({runtime}, set())
    # held again at every tick (Faust's own buffer flow control may have resumed it)
    assert a.decide({sched: wm + 10 * MIN, runtime: wm + 31 * MIN}, wm + 5 * MIN) == ({runtime}, set())
    # hysteresis: 20 min ahead is under the hold limit but over the resume limit: still held
    assert a.decide({runtime: wm + 31 * MIN}, wm + 11 * MIN) == ({runtime}, set())
    # the watermark is within 15 min of what was read: fetched again
    assert a.decide({runtime: wm + 31 * MIN}, wm + 16 * MIN) == (set(), {runtime})
    assert a.held == set() and a.holds == 1


def test_alignment_holds_nothing_before_event_time_is_known_and_forgets_on_rebalance():
    from faultline.streams.faust_watermark import NEVER, Alignment

    a = Alignment(ahead_ms=30 * MIN, resume_ms=15 * MIN)
    tp = ("fl.sched", 2)
    assert a.decide({tp: 10**12}, NEVER) == (set(), set())   # no watermark yet: nothing held
    assert a.decide({tp: 10**12}, 10**12 - 31 * MIN) == ({tp}, set())
    a.forget()                                                 # the rebalance set the fetched partitions anew
    assert a.held == set()
    # a held partition that is no longer read here (not in the maxima) is resumed, not kept
    a.decide({tp: 10**12}, 10**12 - 31 * MIN)
    assert a.decide({}, 10**12 - 31 * MIN) == (set(), {tp})
    try:
        Alignment(ahead_ms=10, resume_ms=10)
    except ValueError as err:
        assert "resume_ms" in str(err)
    else:
        raise AssertionError("resume_ms >= ahead_ms accepted")


def test_a_held_partition_never_holds_the_watermark():
    """The partition alignment holds is behind its high-water mark (lagging), but its maximum
    is ahead of the others: the watermark still follows the node partitions; once they are
    caught up and quiet, the held partition alone sets it, and the watermark reaches it."""
    from faultline.streams.faust_watermark import Alignment

    off = Offsets()
    w = Watermarks(idle_s=IDLE_S, offsets=off)
    gpu, sched = ("fl.gpu", 0), ("fl.sched", 0)
    off.hw[gpu], off.hw[sched] = 1000, 1000
    w.observe(*gpu, 100 * MIN, offset=10)
    w.observe(*sched, 200 * MIN, offset=500)        # read 100 min ahead, then held
    a = Alignment(ahead_ms=30 * MIN, resume_ms=15 * MIN)
    wm = w.value("me")[0]
    assert wm == 100 * MIN and w.global_watermark == wm
    assert w.maxima({"fl.sched"}) == {sched: 200 * MIN}
    assert a.decide(w.maxima({"fl.sched"}), wm) == ({sched}, set())
    w.observe(*gpu, 150 * MIN, offset=500)          # the node partition moves on
    assert w.value("me")[0] == 150 * MIN
    w.observe(*gpu, 170 * MIN, offset=999)          # ... and is caught up, then quiet
    time.sleep(IDLE_S * 3)
    wm = w.value("me")[0]
    assert wm == 200 * MIN                           # the held partition alone sets it
    assert a.decide(w.maxima({"fl.sched"}), wm) == (set(), {sched})
