"""A wrong Kafka setting is named by `replay` and the demo at their first contact
(producers.publish.connect_failure), not told as "broker not reachable": loopback only, no
broker. A port nobody listens on is "not reachable"; a listener that accepts and hangs up
(what a TLS or SASL listener does to a PLAINTEXT client) is a protocol mismatch."""

from __future__ import annotations

import asyncio
import socket
import threading
from dataclasses import replace

import pytest

from faultline.config import Settings
from faultline.demo import Demo, DemoOptions
from faultline.producers.publish import BrokerRefused, BrokerUnreachable
from faultline.producers.replay import read_range


@pytest.fixture(scope="module")
def hang_up_port():
    """A loopback port that accepts every connection and closes it at once."""
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.2)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                srv.accept()[0].close()
            except OSError:
                pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    done.set()
    t.join(5)
    srv.close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _replay(settings: Settings) -> None:
    async for _ in read_range(settings, 0, 1, topics=["fl.sched"]):
        pass


def _demo(settings: Settings, tmp_path) -> None:
    asyncio.run(Demo(settings, replace(DemoOptions.short(), workdir=str(tmp_path), live=False)).run())


@pytest.mark.parametrize("who", ["replay", "demo"])
def test_first_contact_names_why_kafka_failed(who, hang_up_port, tmp_path):
    def attempt(bootstrap: str) -> BrokerUnreachable:
        s = Settings(kafka_bootstrap=bootstrap)
        with pytest.raises(BrokerUnreachable) as e:
            _demo(s, tmp_path) if who == "demo" else asyncio.run(_replay(s))
        return e.value

    down = attempt(f"127.0.0.1:{closed_port()}")
    assert type(down) is BrokerUnreachable and "not reachable" in str(down), str(down)
    refused = attempt(f"127.0.0.1:{hang_up_port}")
    assert isinstance(refused, BrokerRefused), str(refused)
    assert "closed it during the PLAINTEXT handshake" in str(refused)
    assert "FAULTLINE_KAFKA_SECURITY_PROTOCOL" in str(refused)
