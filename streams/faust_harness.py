"""Running `faultline worker` as a child process and reading output topics: used by the
Faust integration tests and ``bench/streams_latency.py``."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from aiokafka import AIOKafkaConsumer, TopicPartition

from ..config import Settings


def worker_env(settings: Settings, **extra: str) -> dict[str, str]:
    """Environment that makes a child `faultline` process use ``settings``' broker and topics."""
    env = dict(os.environ)
    env.update({
        "FAULTLINE_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "FAULTLINE_TOPIC_PREFIX": settings.topic_prefix,
        "FAULTLINE_TOPIC_PARTITIONS": str(settings.topic_partitions),
        "FAULTLINE_TOPIC_REPLICATION": str(settings.topic_replication),
        "FAULTLINE_LATENESS_MS": str(settings.lateness_ms),
        "FAULTLINE_STORE_PATH": settings.store_path,
        "FAULTLINE_SPOOL_DIR": settings.spool_dir,
        "PYTHONUNBUFFERED": "1",
    })
    env.update(extra)
    return env


class WorkerProcess:
    """``with WorkerProcess(settings, workdir) as w:`` runs one `faultline worker`.

    stdout/stderr go to ``workdir/worker.log`` (read it with ``log()`` when a test fails).
    ``kill()`` sends SIGKILL (crash), ``stop()`` SIGTERM and waits.
    """

    def __init__(self, settings: Settings, workdir: str | Path, *, app_id: str | None = None,
                 loglevel: str = "warning", web_port: int | None = None, sink: bool = False,
                 env: dict[str, str] | None = None) -> None:
        self.settings = settings
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.app_id = app_id
        self.loglevel = loglevel
        self.web_port = web_port
        self.sink = sink
        self.env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.workdir / "worker.log"

    def start(self) -> "WorkerProcess":
        cmd = [sys.executable, "-m", "faultline.cli", "worker", "--workdir", str(self.workdir),
               "--loglevel", self.loglevel]
        if self.app_id:
            cmd += ["--app-id", self.app_id]
        if self.web_port is not None:
            cmd += ["--web-port", str(self.web_port)]
        if not self.sink:
            cmd.append("--no-sink")
        fh = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd, env=worker_env(self.settings, **self.env), stdout=fh, stderr=fh,
                                     start_new_session=True)
        fh.close()
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout: float = 20.0) -> None:
        if not self.alive():
            return
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def log(self, tail: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except OSError:
            return ""

    def __enter__(self) -> "WorkerProcess":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


async def read_topic(settings: Settings, topic: str, *, until: Callable[[list[Any]], bool],
                     timeout_s: float = 60.0, idle_s: float | None = None) -> list[Any]:
    """Read every record of ``topic`` (prefixed by ``settings``) from the beginning until
    ``until(records)`` is true, ``timeout_s`` passes, or (``idle_s``) nothing new arrives
    for that long after ``until`` first held. Records are aiokafka ConsumerRecords."""
    name = settings.topic(topic)
    consumer = AIOKafkaConsumer(**settings.kafka_kwargs(), enable_auto_commit=False,
                                auto_offset_reset="earliest", group_id=None)
    await consumer.start()
    out: list[Any] = []
    try:
        parts = consumer.partitions_for_topic(name)
        deadline = time.monotonic() + timeout_s
        while not parts and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            await consumer._client.force_metadata_update()
            parts = consumer.partitions_for_topic(name)
        tps = [TopicPartition(name, p) for p in sorted(parts or ())]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        done_at: float | None = None
        while time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=200)
            got = False
            for recs in batch.values():
                out.extend(recs)
                got = got or bool(recs)
            if until(out):
                if idle_s is None:
                    break
                now = time.monotonic()
                if done_at is None or got:
                    done_at = now
                elif now - done_at >= idle_s:
                    break
        return out
    finally:
        await consumer.stop()


def without_revision(incident: dict) -> dict:
    """An incident dict without ``revision``, to compare live and offline results."""
    d = dict(incident)
    d.pop("revision", None)
    return d


def latest_incidents(records: Any) -> dict[str, dict]:
    """id -> the highest revision of each incident among fl.incidents records, without ``revision``."""
    import orjson

    best: dict[str, dict] = {}
    for r in records:
        d = orjson.loads(r.value)
        if d["id"] not in best or best[d["id"]]["revision"] < d["revision"]:
            best[d["id"]] = d
    return {k: without_revision(v) for k, v in best.items()}
