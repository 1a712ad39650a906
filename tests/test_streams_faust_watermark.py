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
