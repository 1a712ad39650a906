"""Shared fixtures: a real Kafka broker, per-test settings and topics, private brokers.

- ``kafka_bootstrap`` (session): ``$FAULTLINE_KAFKA_BOOTSTRAP`` when set (the shared dev
  broker, `make kafka-up`), otherwise a broker of ``infra/kafka/kafka.sh`` started once for
  the session on a free port with its own data dir under ``var/``, stopped at the end.
- ``settings``: ``Settings`` pointing at that broker with a unique ``topic_prefix``
  (``t<uuid8>.``) and per-test store/spool dirs, so tests never share topics or files.
  The prefix's topics are deleted after the test.
- ``contract_topics``: async factory, ``await contract_topics()`` creates every contract
  topic under the test's prefix (``partitions=`` to override) and returns the specs.
- ``private_broker``: factory of extra brokers a test may stop and restart
  (``b = private_broker()``; ``b.bootstrap``, ``b.stop()``, ``b.start()``, and
  ``await b.astop()`` / ``await b.astart()`` which do not block the event loop).
- ``faultline_env``: environment for running the ``faultline`` CLI in a subprocess with the
  same broker, prefix and dirs.

Every test that uses ``kafka_bootstrap`` (directly or through ``settings``) is marked
``kafka`` automatically, so ``pytest -m "not kafka"`` runs without a broker.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from faultline.config import Settings

ROOT = Path(__file__).resolve().parent.parent
KAFKA_SH = ROOT / "infra" / "kafka" / "kafka.sh"
VAR = ROOT / "var"


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "kafka_bootstrap" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.kafka)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


class Broker:
    """A broker of ``infra/kafka/kafka.sh`` on its own ports and data dir."""

    def __init__(self, var: Path, port: int | None = None, controller_port: int | None = None) -> None:
        self.var = Path(var)
        self.port = port or free_port()
        self.controller_port = controller_port or free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.startup_s: float | None = None

    def _sh(self, action: str, timeout: float = 240) -> str:
        env = dict(os.environ, KAFKA_PORT=str(self.port), KAFKA_CONTROLLER_PORT=str(self.controller_port),
                   KAFKA_VAR=str(self.var), KAFKA_WATCH_PID=str(os.getpid()))
        p = subprocess.run([str(KAFKA_SH), action], env=env, capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError(f"kafka.sh {action} failed ({p.returncode}): {p.stdout}{p.stderr}"
                               f" (logs in {self.var}/logs)")
        return p.stdout

    def start(self) -> "Broker":
        t0 = time.monotonic()
        self._sh("up")
        self.startup_s = time.monotonic() - t0
        return self

    def stop(self) -> None:
        self._sh("down")

    async def astart(self) -> "Broker":
        return await asyncio.to_thread(self.start)

    async def astop(self) -> None:
        await asyncio.to_thread(self.stop)

    @property
    def running(self) -> bool:
        return port_open(self.port)


def _run_async(coro):
    """Run a coroutine to completion from sync code, even inside a running event loop."""
    box: dict = {}

    def target():
        try:
            box["v"] = asyncio.run(coro)
        except BaseException as e:  # noqa: BLE001 - re-raised below
            box["e"] = e

    t = threading.Thread(target=target)
    t.start()
    t.join()
    if "e" in box:
        raise box["e"]
    return box.get("v")


@pytest.fixture(scope="session")
def kafka_bootstrap():
    """Bootstrap servers of a running broker (shared dev broker or one for this session)."""
    env = os.environ.get("FAULTLINE_KAFKA_BOOTSTRAP")
    if env:
        host, _, port = env.split(",")[0].rpartition(":")
        if not port_open(int(port), host or "127.0.0.1"):
            pytest.fail(f"FAULTLINE_KAFKA_BOOTSTRAP={env} is not reachable: run `make kafka-up` "
                        "or unset it so the tests start their own broker")
        yield env
        return
    broker = Broker(VAR / f"pytest-kafka-{os.getpid()}")
    broker.start()
    print(f"\n[conftest] started Kafka on {broker.bootstrap} in {broker.startup_s:.1f} s")
    try:
        yield broker.bootstrap
    finally:
        broker.stop()
        shutil.rmtree(broker.var, ignore_errors=True)


async def _delete_prefixed(bootstrap: str, prefix: str) -> None:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        await admin.start()
        names = [n for n in await admin.list_topics() if n.startswith(prefix)]
        if names:
            await admin.delete_topics(names)
    finally:
        await admin.close()


@pytest.fixture
def settings(kafka_bootstrap, tmp_path) -> Settings:
    """Settings for one test: the session broker, a unique topic prefix, private dirs."""
    prefix = f"t{uuid.uuid4().hex[:8]}."
    s = replace(Settings(), kafka_bootstrap=kafka_bootstrap, topic_prefix=prefix,
                store_path=str(tmp_path / "store"), spool_dir=str(tmp_path / "spool"))
    yield s
    try:
        _run_async(_delete_prefixed(kafka_bootstrap, prefix))
    except Exception:  # best effort: the broker may be gone in a test that stopped it
        pass


@pytest.fixture
def contract_topics(settings):
    """``await contract_topics(partitions=None)``: create every contract topic under the prefix."""
    from faultline import topics as T

    async def make(partitions: int | None = None, **kw):
        specs = T.plan(settings, partitions=partitions, **kw)
        await T.create_topics(settings, specs)
        return specs

    return make


@pytest.fixture
def faultline_env(settings) -> dict[str, str]:
    """Environment for a ``faultline`` subprocess using this test's broker, prefix and dirs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    env.update(FAULTLINE_KAFKA_BOOTSTRAP=settings.kafka_bootstrap,
               FAULTLINE_TOPIC_PREFIX=settings.topic_prefix,
               FAULTLINE_STORE_PATH=settings.store_path, FAULTLINE_SPOOL_DIR=settings.spool_dir)
    return env


@pytest.fixture
def private_broker(tmp_path_factory):
    """Factory of private brokers a test may stop/restart; all are stopped after the test.

    ``b = private_broker()`` starts one (blocking, ~10-30 s) and returns a ``Broker`` with
    ``.bootstrap``, ``.stop()``, ``.start()`` (same port and data on restart), ``.running``,
    and ``await .astop()`` / ``await .astart()`` for use inside a running event loop.
    """
    brokers: list[Broker] = []

    def make(start: bool = True) -> Broker:
        b = Broker(tmp_path_factory.mktemp("broker"))
        brokers.append(b)
        return b.start() if start else b

    yield make
    for b in brokers:
        try:
            b.stop()
        except Exception:
            pass
        shutil.rmtree(b.var, ignore_errors=True)
