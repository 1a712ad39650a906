"""Replay and bundles against the real broker: simulate -> Kafka -> worker (live incidents),
then replay by time range and by job and export a bundle, and compare with the live result."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import orjson
import pytest

from faultline.producers.publish import Publisher
from faultline.producers.simulate import Intervals, simulate
from faultline.producers.timeparse import parse_time
from faultline.schemas import decode, now_ms
from faultline.streams.faust_harness import without_revision

HOUR = 3_600_000


def _cli(env: dict, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-m", "faultline.cli", *args], env=env,
                       capture_output=True, timeout=timeout)
    assert p.returncode == 0, f"faultline {' '.join(args)} failed: {p.stderr.decode()[-2000:]}"
    return p


def _incidents(stdout: bytes) -> dict[str, dict]:
    out = {}
    for line in stdout.splitlines():
        if line.strip():
            inc = orjson.loads(line)
            out[inc["id"]] = inc
    return out


async def _publish(settings, lines: list[bytes]) -> None:
    async with Publisher(settings) as pub:
        for raw in lines:
            await pub.send(decode(raw, now=now_ms()))
        await pub.flush()


@pytest.fixture(scope="module")
def scenario():
    """A small fleet, recent event time (so topic retention keeps it), one GPU failure."""
    start = now_ms() - 3 * HOUR
    lines, labels = simulate("gpu-xid79", seed=3, nodes=8, hours=1.5, start_ms=start,
                             intervals=Intervals(gpu=30, hw=120, net_port=60, net_rdma=60, storage=60))
    assert labels["interruptions"], "the scenario must contain an interruption to replay"
    return lines, labels, start


def test_time_forms():
    ref = 1_800_000_000_000
    assert parse_time("-2h", now=ref) == ref - 2 * HOUR
    assert parse_time("30m", now=ref) == ref - 30 * 60_000
    assert parse_time("1800000000000") == 1_800_000_000_000
    assert parse_time("2027-01-15T08:00:00Z") == 1_800_000_000_000
    assert parse_time("2027-01-15T09:00:00+01:00") == 1_800_000_000_000
    assert parse_time("2026-11-29T00:00:00") == 1_795_910_400_000  # naive = UTC
    assert parse_time("1800000000") == 1_800_000_000_000  # epoch seconds are accepted
    with pytest.raises(ValueError, match="epoch ms"):
        parse_time("yesterday-ish")


def test_replay_matches_live_and_bundle_round_trip(settings, contract_topics, faultline_env, scenario, tmp_path):
    from faultline.streams.faust_harness import WorkerProcess, read_topic

    lines, labels, start = scenario
    asyncio.run(contract_topics(partitions=3))
    asyncio.run(_publish(settings, lines))
    job = labels["interruptions"][0]["job"]

    # live: the Faust worker diagnoses the topics
    with WorkerProcess(settings, tmp_path / "worker", app_id=f"replay-{settings.topic_prefix}") as w:
        recs = asyncio.run(read_topic(settings, "fl.incidents", timeout_s=180, idle_s=8,
                                      until=lambda rs: any(orjson.loads(r.value)["job"] == job for r in rs)))
        assert recs, "worker produced no incident:\n" + w.log()
    live: dict[str, dict] = {}
    for r in recs:
        inc = orjson.loads(r.value)
        if inc["id"] not in live or inc["revision"] > live[inc["id"]]["revision"]:
            live[inc["id"]] = inc
    assert any(i["job"] == job for i in live.values())

    since, until = str(start - HOUR), str(now_ms())
    # replay the whole range in-process: same incidents as live
    full = _incidents(_cli(faultline_env, "replay", "--since", since, "--until", until,
                           "--diagnose", "--json").stdout)
    assert {k: without_revision(v) for k, v in full.items()} == {k: without_revision(v) for k, v in live.items()}
    # deterministic: a second replay gives byte-identical incidents
    again = _cli(faultline_env, "replay", "--since", since, "--until", until, "--diagnose", "--json").stdout
    assert _incidents(again) == full

    # replay one job: only what its diagnosis needs, same incident for that job
    p = _cli(faultline_env, "replay", "--since", since, "--until", until, "--job", job, "--diagnose", "--json")
    scoped = {k: v for k, v in _incidents(p.stdout).items() if v["job"] == job}
    live_job = {k: without_revision(v) for k, v in live.items() if v["job"] == job}
    assert {k: without_revision(v) for k, v in scoped.items()} == live_job
    kept = int(p.stderr.decode().split(" in range")[0].rsplit(" ", 1)[-1].replace(",", ""))
    assert 0 < kept <= len(lines)

    # re-publish to a side prefix: the range arrives there, live output topics untouched
    side = settings.topic_prefix + "r1."
    _cli(faultline_env, "replay", "--since", since, "--until", until, "--to-prefix", side)
    side_settings = settings.__class__(**{**settings.__dict__, "topic_prefix": side})
    got = asyncio.run(read_topic(side_settings, "fl.sched", timeout_s=30, idle_s=2, until=lambda rs: len(rs) > 0))
    n_sched = sum(1 for raw in lines if b'"kind":"sched.job"' in raw or b'"kind":"sched.node"' in raw)
    assert len(got) == n_sched

    # bundle: export one incident, diagnose it offline with no broker
    iid = next(k for k, v in live.items() if v["job"] == job)
    bundle = tmp_path / "incident.jsonl.zst"
    _cli(faultline_env, "bundle", "export", iid, "--out", str(bundle), "--search-since", since)
    offline_env = {k: v for k, v in faultline_env.items() if k != "FAULTLINE_KAFKA_BOOTSTRAP"}
    offline_env["FAULTLINE_KAFKA_BOOTSTRAP"] = "127.0.0.1:1"  # no broker needed
    out = _incidents(_cli(offline_env, "diagnose", str(bundle), "--json").stdout)
    assert iid in out
    assert without_revision(out[iid]) == without_revision(live[iid])


def test_replay_reports_unreachable_broker(faultline_env):
    env = dict(faultline_env, FAULTLINE_KAFKA_BOOTSTRAP="127.0.0.1:1")
    p = subprocess.run([sys.executable, "-m", "faultline.cli", "replay", "--since=-1h", "--diagnose"],
                       env=env, capture_output=True, timeout=60)
    assert p.returncode == 2
    assert b"make kafka-up" in p.stderr


def test_job_scope_keeps_every_port_of_the_jobs_switches():
    """A leaf's uplink down is a network_link alternative of a job behind that leaf (the live
    worker weighs it), so a one-job replay keeps every port event of the switches the job's
    nodes link to, and no other switch's."""
    from faultline.producers.replay import JobScope

    scope = JobScope("j1")
    scope.learn({"kind": "sched.job", "job": "j1", "ts": 1, "data": {"nodes": ["n1"]}})
    scope.learn_topology({"kind": "inventory.topology", "node": "n1",
                          "data": {"links": [{"switch": "leaf1", "port": "Eth1/2"}]}})
    uplink = {"kind": "net.port", "node": None, "data": {"device": "leaf1", "port": "Eth1/33"}}
    other = {"kind": "net.port", "node": None, "data": {"device": "leaf9", "port": "Eth1/33"}}
    assert scope.keeps(uplink) and not scope.keeps(other)
