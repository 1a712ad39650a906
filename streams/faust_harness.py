"""Running `faultline worker` and `faultline sink` as child processes, the sink group's lag,
and reading output topics: used by the Faust integration tests, the reliability tests, the
demo and ``bench/streams_latency.py``.

    with SinkProcess(settings, tmp / "sink", app_id=APP) as sink, \
         WorkerProcess(settings, tmp / "w1", app_id=APP), WorkerProcess(settings, tmp / "w2", app_id=APP):
        ...produce...
        await wait_caught_up(settings, sink_group_id(settings, APP))   # everything is stored
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any, Callable, Iterable

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
        "FAULTLINE_WORKER_SESSION_TIMEOUT_MS": str(settings.worker_session_timeout_ms),
        "FAULTLINE_SPOOL_DIR": settings.spool_dir,
        "PYTHONUNBUFFERED": "1",
    })
    env.update(extra)
    return env


def stop_process(proc: subprocess.Popen[Any], timeout: float = 10.0, *, log: IO[Any] | None = None,
                 kill_timeout: float = 10.0) -> str:
    """Stop ``proc`` and return what it wrote: SIGTERM, up to ``timeout`` s for it to exit,
    then SIGKILL (and up to ``kill_timeout`` s more). The output is what its stdout/stderr
    pipes still held, then the text of ``log`` (the file its output went to; closed here).
    A process that already exited is only reaped; the caller reads ``proc.returncode``."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate(timeout=kill_timeout)
    text = "".join(x.decode(errors="replace") if isinstance(x, bytes) else x for x in (out, err) if x)
    if log is not None:
        log.close()
        text += Path(log.name).read_text(errors="replace")
    return text


class _Child:
    """One `faultline <command>` child process; stdout/stderr go to ``workdir/<name>.log``
    (read it with ``log()`` when a test fails). ``kill()`` sends SIGKILL (crash), ``stop()``
    SIGTERM and waits; ``pid`` is the child's pid (None before ``start()``)."""

    command = "?"

    def __init__(self, settings: Settings, workdir: str | Path, *, app_id: str | None = None,
                 loglevel: str = "warning", web_port: int | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.settings = settings
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.app_id = app_id
        self.loglevel = loglevel
        self.web_port = web_port
        self.env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.workdir / f"{self.command}.log"

    def args(self) -> list[str]:
        return []

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> Any:
        cmd = [sys.executable, "-m", "faultline.cli", self.command, "--workdir", str(self.workdir),
               "--loglevel", self.loglevel, *self.args()]
        if self.app_id:
            cmd += ["--app-id", self.app_id]
        if self.web_port is not None:
            cmd += ["--web-port", str(self.web_port)]
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
        if self.alive():
            assert self.proc is not None
            stop_process(self.proc, timeout)

    def log(self, tail: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except OSError:
            return ""

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class WorkerProcess(_Child):
    """``with WorkerProcess(settings, workdir) as w:`` runs one `faultline worker` (analysis
    only; ``sink=True``: `faultline worker --sink`, the sink in the same process under the
    sink's own group). Log in ``workdir/worker.log``."""

    command = "worker"

    def __init__(self, settings: Settings, workdir: str | Path, *, sink: bool = False, **kw: Any) -> None:
        super().__init__(settings, workdir, **kw)
        self.sink = sink

    def args(self) -> list[str]:
        return ["--sink"] if self.sink else []


class SinkProcess(_Child):
    """``with SinkProcess(settings, workdir, app_id=APP) as s:`` runs one `faultline sink`
    (group ``sink_group_id(settings, APP)``; the SQL API and page on ``web_port``, none
    without one, so parallel tests never fight over a port; ``batch_rows``: records per
    stored batch, default 20,000). Log in ``workdir/sink.log``."""

    command = "sink"

    def __init__(self, settings: Settings, workdir: str | Path, *, batch_rows: int | None = None, **kw: Any) -> None:
        super().__init__(settings, workdir, **kw)
        self.batch_rows = batch_rows

    def args(self) -> list[str]:
        out = [] if self.web_port is not None else ["--no-web"]
        return out + (["--batch-rows", str(self.batch_rows)] if self.batch_rows else [])


def sink_group_id(settings: Settings, app_id: str | None = None) -> str:
    """The sink's consumer group for the analysis app id ``app_id`` (``<app id>-sink``)."""
    from .faust_sink import sink_group_id as gid

    return gid(settings, app_id)


async def group_lag(settings: Settings, group_id: str, topics: Any = None) -> int:
    """Records of ``topics`` (base names; default every topic the sink reads) that group
    ``group_id`` has not committed: end offsets minus committed offsets (a partition with no
    commit counts from 0)."""
    from aiokafka.admin import AIOKafkaAdminClient

    from .faust_sink import SINK_TOPICS

    names = [settings.topic(t) for t in (topics or SINK_TOPICS)]
    admin = AIOKafkaAdminClient(**settings.kafka_kwargs(), request_timeout_ms=10_000)
    consumer = AIOKafkaConsumer(**settings.kafka_kwargs(), group_id=None)
    await admin.start()
    await consumer.start()
    try:
        committed = await _committed(admin, group_id)
        parts = {t["topic"]: [p["partition"] for p in t["partitions"]]
                 for t in await admin.describe_topics(names) if not t.get("error_code")}
        tps = []
        for n in names:
            if not parts.get(n):
                raise LookupError(f"topic {n} does not exist (or has no partitions yet)")
            tps += [TopicPartition(n, p) for p in sorted(parts[n])]
        ends = await consumer.end_offsets(tps)
        lag = 0
        for tp in tps:
            meta = committed.get(tp)
            done = meta.offset if meta is not None and meta.offset >= 0 else 0
            lag += max(0, ends[tp] - done)
        return lag
    finally:
        await consumer.stop()
        await admin.close()


async def _committed(admin: Any, group_id: str, timeout_s: float = 30.0) -> Any:
    """The group's committed offsets; retries while the broker's group coordinator is not
    ready yet (a fresh broker answers GroupCoordinatorNotAvailable for a few seconds)."""
    from aiokafka.errors import CoordinatorLoadInProgressError, GroupCoordinatorNotAvailableError

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return await admin.list_consumer_group_offsets(group_id)
        except (GroupCoordinatorNotAvailableError, CoordinatorLoadInProgressError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def wait_caught_up(settings: Settings, group_id: str, topics: Any = None, *,
                         timeout_s: float = 120.0, poll_s: float = 0.5) -> None:
    """Wait until ``group_lag`` is 0 (for the sink: every record so far is stored);
    ``TimeoutError`` names the lag left."""
    deadline = time.monotonic() + timeout_s
    while True:
        lag = await group_lag(settings, group_id, topics)
        if lag == 0:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"group {group_id} still {lag} records behind after {timeout_s:.0f} s")
        await asyncio.sleep(poll_s)


async def produce(settings: Settings, lines: list[bytes], raw: Iterable[tuple[str, bytes, bytes]] = ()) -> None:
    """Publish contract lines (decoded, to their layer's topic) and raw records ``(topic, key,
    value)`` as they are, through the producers' ``Publisher``; flushed before it returns."""
    from ..producers.publish import Publisher
    from ..schemas.codec import decode

    async with Publisher(settings, compression=None) as pub:
        for line in lines:
            await pub.send(decode(line))
        for topic, key, value in raw:
            await pub.send_raw(topic, key, value)
        await pub.flush()


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
