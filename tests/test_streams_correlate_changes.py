"""What counts as a version change for change_regression (``View.version_changes``)."""

from __future__ import annotations

import orjson

from faultline.schemas.codec import decode
from faultline.streams.join import View

T = 1_772_000_000_000
_n = 0


def _ev(kind, ts, node, data):
    global _n
    _n += 1
    return decode(orjson.dumps({"v": 1, "id": f"c-{_n}", "ts": T + ts, "kind": kind, "source": "t", "node": node,
                                "data": data}))


def _view(*events):
    v = View()
    for e in events:
        v.update(e)
    return v


def test_registration_and_noop_are_not_changes():
    v = _view(_ev("inventory.change", 0, "a", {"component": "driver", "from": None, "to": "550.90.07"}),
              _ev("inventory.change", 10, "a", {"component": "nccl", "from": "2.21.5", "to": "2.21.5"}))
    assert v.changes_on(["a"], T - 1, T + 10**6)  # recorded ...
    assert v.version_changes(["a"], T - 1, T + 10**6) == []  # ... but not changes


def test_announced_change_counts_once_with_its_report():
    v = _view(_ev("inventory.versions", 0, "a", {"driver": "535.183.01"}),
              _ev("inventory.change", 1000, "a", {"component": "driver", "from": "535.183.01", "to": "550.90.07"}),
              _ev("inventory.versions", 2000, "a", {"driver": "550.90.07"}))
    got = v.version_changes(["a"], T, T + 10_000)
    assert [(c.component, c.from_, c.to, ann) for c, ann in got] == [("driver", "535.183.01", "550.90.07", True)]


def test_change_seen_only_in_inventory_reports():
    v = _view(_ev("inventory.versions", 0, "a", {"driver": "550.54.15", "nccl": "2.20.5"}),
              _ev("inventory.versions", 60_000, "a", {"driver": "550.54.15", "nccl": "2.21.5"}),
              _ev("inventory.versions", 0, "b", {"driver": "550.54.15", "nccl": "2.20.5"}))
    got = v.version_changes(["a", "b"], T, T + 120_000)
    assert [(c.node, c.component, c.from_, c.to, c.ts - T, ann) for c, ann in got] == [
        ("a", "nccl", "2.20.5", "2.21.5", 60_000, False)]
    assert v.version_changes(["b"], T, T + 120_000) == []
    assert v.version_changes(["a"], T + 61_000, T + 120_000) == []   # outside the window


def test_rollback_returns_to_a_known_version():
    v = _view(_ev("inventory.versions", 0, "a", {"driver": "535.183.01"}),
              _ev("inventory.change", 3_600_000, "a", {"component": "driver", "from": "535.183.01", "to": "550.90.07"}),
              _ev("inventory.change", 7_200_000, "a", {"component": "driver", "from": "550.90.07", "to": "535.183.01"}))
    assert v.ran_before("a", "driver", "535.183.01", T + 7_200_000)
    assert not v.ran_before("a", "driver", "550.90.07", T + 3_600_000)
