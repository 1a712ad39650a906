"""A finding appears on ``fl.findings`` while the stream runs: events go through the real
broker into `faultline worker` (detectors, correlation, findings agents), in chunks of event
time; the lemon node's repeat-offender finding (and its alert) must be published before the
last chunk is sent."""

from __future__ import annotations

import asyncio
import uuid

import orjson
import pytest

from faultline import config
from faultline.schemas.codec import decode

pytestmark = pytest.mark.kafka

H = 3_600_000


@pytest.fixture
def fsettings(kafka_bootstrap):
    """Unique topic prefix per test (tests never share topics); 2 partitions keep startup short.
    The broker is the session's (``kafka_bootstrap``: the dev broker when
    FAULTLINE_KAFKA_BOOTSTRAP is set, else one started for the test session, as in CI)."""
    return config.load(env={}, kafka_bootstrap=kafka_bootstrap,
                       topic_prefix=f"t-findings-{uuid.uuid4().hex[:8]}-", topic_partitions=2)


async def _publish(settings, events):
    from faultline.producers.publish import Publisher

    async with Publisher(settings, compression=None) as pub:  # lz4 is not installed here
        await pub.send_many([decode(orjson.dumps(e)) for e in events])
        await pub.flush()


def test_finding_appears_while_stream_runs(fsettings, tmp_path):
    from faultline.streams.faust_harness import WorkerProcess, read_topic
    from faultline.streams.faust_topics import ensure_topics
    from test_findings_engine import T0, engine_fleet

    evs = engine_fleet(1, hours=48)
    asyncio.run(ensure_topics(fsettings))
    chunks = 8
    span = 48 * H // chunks
    with WorkerProcess(fsettings, tmp_path / "w") as w:
        seen_at = None
        findings = []
        for k in range(chunks):
            part = [e for e in evs if T0 - H <= e["ts"] + (H if k == 0 else 0) and
                    (k * span <= e["ts"] - T0 < (k + 1) * span or (k == 0 and e["ts"] < T0))]
            asyncio.run(_publish(fsettings, part))
            recs = asyncio.run(read_topic(fsettings, "fl.findings", until=lambda r: any(b"node:n07" in x.value for x in r),
                                          timeout_s=25.0 if k < chunks - 1 else 90.0))
            findings = [orjson.loads(r.value) for r in recs]
            if any(f["subject"] == "node:n07" for f in findings):
                seen_at = k
                break
        assert w.alive(), w.log()
        assert seen_at is not None, f"no finding on fl.findings; worker log:\n{w.log()}"
        print(f"\nlemon node finding published after chunk {seen_at + 1}/{chunks} "
              f"(event time {((seen_at + 1) * span) / H:.0f} h of 48 h)")
        assert seen_at < chunks - 1, "finding only at the end of the input, not while the stream runs"
        f = next(f for f in findings if f["subject"] == "node:n07")
        assert f["kind"] == "repeat_offender" and f["dimension"] == "node" and f["count"] >= 3
        assert "drain node n07" in f["action"]
        alerts = asyncio.run(read_topic(fsettings, "fl.alerts",
                                        until=lambda r: any(b'"repeat_offender"' in x.value for x in r), timeout_s=30.0))
        ro = [orjson.loads(a.value) for a in alerts if b'"repeat_offender"' in a.value]
        assert ro and any(a["subject"] == "node:n07" for a in ro)
        healthy = {f["subject"] for f in findings if f["kind"] == "repeat_offender"} - {"node:n07"} \
            - {f"gpu:n07/{g}" for g in range(8)}
        assert not healthy, healthy
