"""The findings agent's fleet-wide tracker state is saved in bounded parts
(``streams.agents_findings.state_records`` / ``load_state``): at 256 nodes the whole state
was 1.16 MB, one changelog record over Kafka's 1 MB request size, and the worker's producer
crashed (bench/memory.py, session 6)."""

from __future__ import annotations

import os

from faultline.streams.agents_findings import STATE_KEY, STATE_PART_BYTES, load_state, state_records


def test_a_large_state_is_saved_in_bounded_parts_and_read_back():
    blob = os.urandom(900_000) + b"tracker" * 200_000          # 2.3 MB, partly incompressible
    recs = state_records(blob, generation=7)
    assert len(recs) >= 3 and all(len(v) <= STATE_PART_BYTES for _, v in recs)
    assert recs[-1][0] == STATE_KEY                             # the header last
    table = dict(recs)
    assert load_state(table.get) == (blob, 7)


def test_a_state_saved_whole_before_is_read_as_it_is_and_missing_parts_start_empty():
    assert load_state({STATE_KEY: b"\x81old"}.get) == (b"\x81old", 0)
    assert load_state({}.get) == (None, 0)
    recs = dict(state_records(b"x" * 10, generation=2))
    del recs[STATE_KEY + b"/2/0"]
    assert load_state(recs.get) == (None, 2)
