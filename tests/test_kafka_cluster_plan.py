"""How `topics create` sizes replication and min.insync.replicas (faultline/topics.py), and the
refusal of a replication the cluster cannot hold (on the session's single broker)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from faultline import topics as T
from faultline.config import Settings


@pytest.mark.parametrize("setting,brokers,want", [(1, 1, 1), (1, 2, 2), (1, 3, 3), (1, 5, 3), (4, 5, 4)])
def test_auto_replication_follows_the_cluster(setting, brokers, want):
    assert T.auto_replication(setting, brokers) == want


@pytest.mark.parametrize("repl,want", [(1, 1), (2, 1), (3, 2), (5, 2)])
def test_min_insync_lets_one_replica_be_down(repl, want):
    assert T.min_insync(repl) == want


def test_plan_marks_auto_and_explicit_replication():
    s = Settings()
    assert all(sp.replication_auto and sp.replication == 1 for sp in T.plan(s))
    explicit = T.plan(s, replication=2)
    assert all(not sp.replication_auto and sp.replication == 2 for sp in explicit)
    cfg = explicit[0].new_topic().topic_configs
    assert cfg["min.insync.replicas"] == "1"
    assert T.plan(s, replication=3)[0].new_topic().topic_configs["min.insync.replicas"] == "2"


def test_replication_above_the_broker_count_is_refused(settings):
    specs = T.plan(settings, replication=3)
    with pytest.raises(T.TopicsError, match=r"replication 3 needs 3 brokers, .* has 1: pass --replication 1"):
        asyncio.run(T.create_topics(settings, specs))
    # nothing was created; automatic replication on one broker stays 1 and works
    res = asyncio.run(T.create_topics(replace(settings), T.plan(settings)))
    assert set(res.values()) == {"created"}
