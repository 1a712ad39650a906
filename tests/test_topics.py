"""`faultline topics`: plan, idempotent create against the real broker, list, delete, errors."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest

from conftest import free_port
from faultline import topics as T
from faultline.config import Settings
from faultline.schemas import ALL_TOPICS, DEADLETTER, INPUT_TOPICS


def test_plan_defaults_and_overrides():
    s = replace(Settings(), topic_prefix="x.", topic_partitions=4, topic_retention_hours=48)
    specs = {sp.base: sp for sp in T.plan(s, retention_hours={"fl.gpu": 2})}
    assert set(specs) == set(ALL_TOPICS)
    assert specs["fl.gpu"].name == "x.fl.gpu"
    assert specs["fl.gpu"].retention_ms == 2 * 3_600_000
    assert all(specs[t].partitions == 4 for t in INPUT_TOPICS)
    assert specs["fl.sched"].retention_hours == 48
    assert specs[DEADLETTER].retention_hours > s.topic_retention_hours
    assert specs["fl.sched"].key == "job"
    assert {sp.partitions for sp in T.plan(s, partitions=2)} == {2}


@pytest.mark.parametrize("bad", ["fl.gpu", "nope=3", "fl.gpu=abc", "fl.gpu=0", "fl.gpu=-5"])
def test_parse_retention_rejects(bad):
    with pytest.raises(T.TopicsError, match="--retention"):
        T.parse_retention([bad])


def test_parse_retention_ok():
    assert T.parse_retention(["fl.gpu=24", "fl.deadletter=-1"]) == {"fl.gpu": 24.0, "fl.deadletter": -1.0}


async def test_create_is_idempotent_and_list_shows_config(settings):
    specs = T.plan(settings, partitions=2, retention_hours={"fl.gpu": 5})
    first = await T.create_topics(settings, specs)
    assert set(first.values()) == {"created"}
    assert set(first) == {settings.topic(t) for t in ALL_TOPICS}
    second = await T.create_topics(settings, specs)
    assert set(second.values()) == {"exists (2 partitions)"}
    rows = {r["topic"]: r for r in await T.list_topics(settings)}
    assert all(r["exists"] and r["partitions"] == 2 for r in rows.values())
    assert rows[settings.topic("fl.gpu")]["retention_hours"] == 5
    assert rows[settings.topic("fl.sched")]["retention_hours"] == settings.topic_retention_hours
    deleted = await T.delete_topics(settings)
    assert sorted(deleted) == sorted(settings.topic(t) for t in ALL_TOPICS)


def test_cli_create_list_delete(faultline_env, settings):
    run = lambda *a: subprocess.run([sys.executable, "-m", "faultline.cli", "topics", *a],
                                    env=faultline_env, capture_output=True, text=True, timeout=120)
    p = run("create", "--partitions", "1", "--retention", "fl.deadletter=-1")
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("created") == len(ALL_TOPICS)
    p = run("list", "--json")
    assert p.returncode == 0, p.stderr
    assert p.stdout.count('"exists":true') == len(ALL_TOPICS)
    assert f'"topic":"{settings.topic(DEADLETTER)}","exists":true,"partitions":1,"retention_hours":-1' in p.stdout
    p = run("delete")
    assert p.returncode == 2 and "--yes" in p.stderr
    p = run("delete", "--yes")
    assert p.returncode == 0 and f"deleted {len(ALL_TOPICS)} topics" in p.stdout


def test_cli_broker_down_says_what_to_do():
    port = free_port()
    env = {"FAULTLINE_KAFKA_BOOTSTRAP": f"127.0.0.1:{port}", "PATH": "/usr/bin:/bin"}
    p = subprocess.run([sys.executable, "-m", "faultline.cli", "topics", "create"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert f"Kafka broker not reachable at 127.0.0.1:{port}: run `make kafka-up`" in p.stderr
    assert "Traceback" not in p.stderr
