"""Spool and publisher rules that need no broker: record timestamps, spool directories."""

from __future__ import annotations

from dataclasses import replace

import pytest

from faultline.config import Settings
from faultline.producers.publish import record_ts
from faultline.producers.spool import MAX_PUBLISHERS_PER_DIR, SpoolingPublisher, SpoolUnavailable

HOUR = 3_600_000


def test_record_ts_never_ahead_of_the_wall_clock():
    assert record_ts(5, now=10) == 5
    assert record_ts(10 + 23 * HOUR, now=10) == 10
    assert record_ts(2**70, now=10) == 10
    assert record_ts(-5, now=10) is None and record_ts(None) is None and record_ts(1.5) is None


def test_many_publishers_in_one_process_get_their_own_spool_dirs(tmp_path):
    """Collectors started in one process with one spool_dir each claim a directory of their
    own (flock per open file); past MAX_PUBLISHERS_PER_DIR the error names the directory and
    what to do instead of an anonymous failure."""
    s = replace(Settings(), kafka_bootstrap="127.0.0.1:1", spool_dir=str(tmp_path))
    pubs = []
    try:
        for _ in range(MAX_PUBLISHERS_PER_DIR + 2):  # base, per command, per process, then -2 .. -64
            p = SpoolingPublisher(s)
            p.dir = p._claim_dir(p.dir)
            pubs.append(p)
        assert len({p.dir for p in pubs}) == len(pubs)
        assert pubs[0].dir == tmp_path and all(p.dir.parent == tmp_path for p in pubs[1:])
        with pytest.raises(SpoolUnavailable, match=f"no usable spool directory under {tmp_path}.*own spool directory"):
            SpoolingPublisher(s)._claim_dir(tmp_path)
        pubs.pop()._lockfh.close()   # one publisher stops: its directory is free again
        p = SpoolingPublisher(s)
        p.dir = p._claim_dir(p.dir)
        pubs.append(p)
    finally:
        for p in pubs:
            p._lockfh.close()
