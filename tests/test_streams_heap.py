"""`streams.heap.HeapTrim`: freed heap goes back to the OS once a drain is over, not while
the worker still holds what it grew for, and not twice for nothing (issue 18)."""

from __future__ import annotations

import subprocess
import sys

from faultline.streams.heap import HeapTrim, libc_malloc_trim

MIB = 2 ** 20


class FakeProcess:
    """An RSS that a trim brings down to ``live``."""

    def __init__(self, rss: int) -> None:
        self.rss = rss
        self.live = rss
        self.calls = 0

    def trim(self, pad: int) -> int:
        self.calls += 1
        self.rss = self.live
        return 1


def test_a_drained_worker_is_trimmed_once_and_a_draining_one_is_not():
    p = FakeProcess(70 * MIB)
    h = HeapTrim(every_s=60, growth_bytes=32 * MIB, trim=p.trim, rss=lambda: p.rss)
    # the drain: RSS grows with what it holds; holding that much, nothing is given back
    p.rss = p.live = 320 * MIB
    assert not h.check(held=80_000, now=0.0)
    assert not h.check(held=70_000, now=100.0)
    assert p.calls == 0
    # the drain is over: the records are gone, the heap is not
    p.live = 150 * MIB
    assert h.check(held=2_000, now=200.0)
    assert p.calls == 1 and h.trims == 1
    assert h.stats()["trimmed_mib"] == 170.0
    # steady afterwards: no growth, no trim
    assert not h.check(held=2_000, now=400.0)
    assert not h.check(held=0, now=600.0)
    assert p.calls == 1


def test_trims_are_spaced_by_the_period():
    p = FakeProcess(50 * MIB)
    h = HeapTrim(every_s=60, growth_bytes=32 * MIB, trim=p.trim, rss=lambda: p.rss)
    p.rss, p.live = 200 * MIB, 60 * MIB
    assert h.check(held=0, now=1000.0)
    p.rss = 200 * MIB
    assert not h.check(held=0, now=1030.0)      # 30 s later: not yet
    assert h.check(held=0, now=1061.0)
    assert p.calls == 2


def test_off_or_without_malloc_trim_it_does_nothing():
    p = FakeProcess(500 * MIB)
    assert not HeapTrim(every_s=0, trim=p.trim, rss=lambda: p.rss).check(held=0, now=1e6)
    assert not HeapTrim(every_s=60, trim=None, rss=lambda: p.rss).check(held=0, now=1e6)
    assert p.calls == 0


def test_glibc_malloc_trim_gives_a_fragmented_heap_back():
    """The real call, in a child process: a heap of ~300 MiB of which 2% stays live."""
    if libc_malloc_trim() is None:
        import pytest
        pytest.skip("this C library has no malloc_trim (not glibc)")
    code = (
        "from faultline.streams.heap import HeapTrim, rss_bytes\n"
        "h = HeapTrim(every_s=1e-9, growth_bytes=0)\n"
        "x = [bytes(1000 + i % 3000) for i in range(120_000)]\n"
        "keep = x[::50]\n"
        "del x\n"
        "before = rss_bytes()\n"
        "assert h.check(held=0)\n"
        "print(before, rss_bytes())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    before, after = map(int, out.stdout.split())
    assert before > 200 * MIB, before
    assert after < before / 2, (before, after)
