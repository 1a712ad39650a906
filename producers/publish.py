"""Publishing contract events to Kafka: one producer per process.

``Publisher`` routes each event to its topic with its key (``schemas.registry``),
batches and compresses. Collectors, the simulator and replay all publish through it.
Spooling to disk while the broker is away lives in ``producers.spool`` and wraps this.

``new_producer(settings, **kw)`` is the one place a producer is made (this Publisher, the
spool, the notifier's dead letters; the worker's Faust producer adds the same
``PRODUCER_GUARANTEES``, ``streams/faust_producer.py``): acks=all with idempotence, never
overridable, so a write survives a broker failure and a retried batch is written once.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Iterable

from aiokafka import AIOKafkaProducer
from aiokafka.conn import create_conn
from aiokafka.errors import KafkaConnectionError, SaslAuthenticationFailed, UnsupportedSaslMechanismError

from ..config import Settings
from ..schemas import Envelope, encode, key_for, now_ms, topic_for

log = logging.getLogger("faultline.publish")

#: what every Kafka producer faultline makes is held to (docs/reliability.md): a write is
#: acknowledged once every in-sync replica has it (with ``min.insync.replicas`` 2 on a
#: 3-broker cluster it survives one broker's loss), and the broker de-duplicates a batch the
#: producer retries after a failure by producer id and sequence number (no duplicate record)
PRODUCER_GUARANTEES = {"acks": "all", "enable_idempotence": True}


def new_producer(settings: Settings, **kw) -> AIOKafkaProducer:
    """An ``AIOKafkaProducer`` on ``settings``' brokers (security included) with
    ``PRODUCER_GUARANTEES``; ``kw`` tunes everything else (batching, compression, timeouts)
    and may not weaken them. Needs a running event loop (aiokafka's rule)."""
    clash = sorted(k for k in PRODUCER_GUARANTEES if k in kw)
    if clash:
        raise ValueError(f"producer settings {clash} are fixed: {PRODUCER_GUARANTEES}")
    return AIOKafkaProducer(**settings.kafka_kwargs(), **kw, **PRODUCER_GUARANTEES)


class BrokerUnreachable(ConnectionError):
    """The Kafka broker did not answer; the message says where we looked and what to do."""


class BrokerRefused(BrokerUnreachable):
    """The broker answered but the connection's security failed: wrong SASL credentials, an
    untrusted certificate, another security protocol. The message names which; never a secret."""


def unreachable_message(bootstrap: str) -> str:
    return (f"Kafka broker not reachable at {bootstrap}: run `make kafka-up` or set "
            "FAULTLINE_KAFKA_BOOTSTRAP")


def _first_host(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port or 9092)


async def connect_failure(settings: Settings, timeout_s: float = 10.0) -> BrokerUnreachable:
    """Why a client of ``settings`` cannot bootstrap, as the exception to raise.

    aiokafka only says "Unable to bootstrap" (the cause is in a log line), so this opens one
    connection to the first bootstrap server with the same settings and names what failed: a
    refused SASL login, an untrusted broker certificate, a TLS or protocol mismatch (a
    ``BrokerRefused``), or nothing answering (``BrokerUnreachable``, the `make kafka-up` hint).
    The messages carry the user name and file paths, never the password."""
    boot = settings.kafka_bootstrap
    proto = settings.kafka_security_protocol
    try:
        host, port = _first_host(boot)
        kw = settings.kafka_kwargs()
        conn = await asyncio.wait_for(create_conn(
            host, port, request_timeout_ms=int(timeout_s * 1000), ssl_context=kw.get("ssl_context"),
            security_protocol=proto, sasl_mechanism=kw.get("sasl_mechanism"),
            sasl_plain_username=kw.get("sasl_plain_username"),
            sasl_plain_password=kw.get("sasl_plain_password")), timeout_s)
    except SaslAuthenticationFailed:
        return BrokerRefused(
            f"Kafka at {boot} refused the SASL login of user {settings.kafka_sasl_username!r} "
            f"({settings.kafka_sasl_mechanism}): wrong user name or password; check "
            "FAULTLINE_KAFKA_SASL_USERNAME and FAULTLINE_KAFKA_SASL_PASSWORD (or _FILE)")
    except UnsupportedSaslMechanismError:
        return BrokerRefused(
            f"Kafka at {boot} does not offer SASL mechanism {settings.kafka_sasl_mechanism}: "
            "set FAULTLINE_KAFKA_SASL_MECHANISM to one the listener enables")
    except ssl.SSLCertVerificationError as e:
        return BrokerRefused(
            f"TLS to Kafka at {boot} failed: the broker's certificate is not trusted "
            f"({e.verify_message}); set FAULTLINE_KAFKA_SSL_CAFILE to the CA that signed it "
            f"(now {settings.kafka_ssl_cafile or 'the system CAs'})")
    except ssl.SSLError as e:
        return BrokerRefused(
            f"TLS handshake with Kafka at {boot} failed ({e.reason or e}): does that listener "
            f"speak {proto}? check FAULTLINE_KAFKA_SECURITY_PROTOCOL")
    except (OSError, asyncio.TimeoutError, KafkaConnectionError, ValueError) as e:
        if isinstance(e, KafkaConnectionError) or "closed" in str(e).lower():
            return BrokerRefused(
                f"Kafka at {boot} accepted the TCP connection but closed it during the "
                f"{proto} handshake: does that listener speak {proto}? check "
                "FAULTLINE_KAFKA_SECURITY_PROTOCOL (PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL)")
        return BrokerUnreachable(unreachable_message(boot))
    conn.close()
    # one connection works: the failure was elsewhere (another bootstrap server, metadata)
    return BrokerUnreachable(unreachable_message(boot))


def record_ts(ts: int | None, now: int | None = None) -> int | None:
    """The Kafka record timestamp of an event stamped ``ts``: the event time, but never ahead
    of the wall clock, and none for a missing or negative one.

    Kafka 4 brokers refuse a record stamped more than ``log.message.timestamp.after.max.ms``
    (default 1 h) ahead, and with it every record of its produce batch
    (``InvalidTimestampError``), while the contract accepts an event up to 24 h ahead (a
    skewed clock); a negative timestamp is refused too, and one beyond 64 bits cannot even be
    framed. The event keeps its own ``ts``; only the record timestamp (what replay's
    offsets-for-times reads) is held to the wall clock."""
    if type(ts) is not int or ts < 0:
        return None
    n = now_ms() if now is None else now
    return ts if ts <= n else n


class Publisher:
    """Async producer of contract events (``await pub.start()`` ... ``await pub.stop()``)."""

    def __init__(self, settings: Settings, *, linger_ms: int = 20, compression: str | None = "lz4",
                 max_batch_bytes: int = 1 << 20) -> None:
        self.settings = settings
        try:
            import lz4  # noqa: F401
        except ImportError:
            compression = "gzip" if compression == "lz4" else compression
        self._producer = new_producer(settings, linger_ms=linger_ms, compression_type=compression,
                                      max_batch_size=max_batch_bytes)
        self.sent = 0

    async def start(self) -> "Publisher":
        try:
            await self._producer.start()
        except KafkaConnectionError:
            await self._producer.stop()
            raise await connect_failure(self.settings) from None
        return self

    async def stop(self) -> None:
        await self._producer.stop()

    async def __aenter__(self) -> "Publisher":
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    async def send_raw(self, topic: str, key: bytes | None, value: bytes,
                       timestamp_ms: int | None = None) -> asyncio.Future:
        """Queue one message (topic name without prefix); returns the delivery future."""
        fut = await self._producer.send(self.settings.topic(topic), value=value, key=key,
                                        timestamp_ms=record_ts(timestamp_ms))
        self.sent += 1
        return fut

    async def send(self, ev: Envelope) -> asyncio.Future:
        return await self.send_raw(topic_for(ev), key_for(ev), encode(ev), ev.ts)

    async def send_many(self, events: Iterable[Envelope]) -> int:
        n = 0
        for ev in events:
            await self.send(ev)
            n += 1
        return n

    async def flush(self) -> None:
        await self._producer.flush()
