"""Bytes <-> events: the one validating decoder, the encoder, and dead-letter records."""

from __future__ import annotations

import base64
import hashlib
import time
from typing import Any, Iterable, Iterator

import msgspec
import orjson

from .events import INT64_MAX, INT64_MIN, MAX_EPOCH_MS, Envelope, Event
from .names import canonical_event

MAX_EVENT_BYTES = 256 * 1024
MAX_FUTURE_MS = 24 * 3600 * 1000


class ContractError(ValueError):
    """An input that is not a valid contract v1 event.

    ``reason`` says what was wrong and ``path`` where (``$.data.gpu``), so a producer
    author can fix the field; both travel into the dead-letter record.
    """

    def __init__(self, reason: str, path: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path = path


_decoder = msgspec.json.Decoder(Event)
_decode = _decoder.decode


def decode_fast(raw: bytes) -> Event:
    """The bare fast path behind ``decode``, for hot loops that inline it: msgspec's decode
    plus the UTF-8 check of bytes msgspec skips (unknown fields). It raises msgspec errors
    (or ``UnicodeDecodeError``) and skips the size and future-ts checks, so a caller must check
    ``len(raw) <= MAX_EVENT_BYTES`` and ``ev.ts <= now + MAX_FUTURE_MS`` and call ``decode``
    on any failure for the ``ContractError`` and its reason. Accepts exactly what ``decode``
    accepts within those two checks."""
    ev = _decode(raw)
    if not raw.isascii():
        raw.decode()
    return canonical_event(ev)


def check_utf8(raw: bytes | bytearray) -> None:
    """Raise ``ContractError`` unless ``raw`` is valid UTF-8 (surrogates and overlong forms
    included). msgspec validates the strings it decodes but skips unknown fields unread, so
    ``{"x": "\xff"}`` inside ``data`` passes its decode; the store keeps ``data`` verbatim
    and every orjson reader would fail on it later. Near-free for ASCII (``isascii``)."""
    if raw.isascii():
        return
    try:
        raw.decode()
    except UnicodeDecodeError as e:
        raise ContractError(f"not valid JSON: not valid UTF-8 ({e.reason} at byte {e.start})") from None


_encoder = msgspec.json.Encoder()


def _path_of(msg: str) -> str | None:
    i = msg.rfind(" - at `")
    at = msg[i + 7 : -1] if i >= 0 else None
    if msg.startswith("Object missing required field `"):
        # the path of the missing field itself, not of the object that lacks it
        name = msg[31 : msg.index("`", 31)]
        return f"{at or '$'}.{name}"
    return at


_RANGE_PREFIXES = ("Expected `int` >=", "Expected `int` <=", "Expected `float` >=", "Expected `float` <=")
_BOUND_NAMES = {str(INT64_MAX): "2^63-1, the signed 64-bit limit", str(INT64_MIN): "-2^63, the signed 64-bit limit",
                str(MAX_EPOCH_MS): "2^53-1, the epoch-ms limit"}


def _range_reason(msg: str) -> str:
    """msgspec's range message with the bound named: ``Expected `int` <= 9223372036854775807
    (2^63-1, the signed 64-bit limit) - at `$.data.ecc_sbe```."""
    head, sep, at = msg.partition(" - at ")
    bound = head.rsplit(" ", 1)[-1]
    name = _BOUND_NAMES.get(bound)
    return f"{head} ({name}){sep}{at}" if name else msg


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def decode(raw: bytes | bytearray | memoryview | str, *, now: int | None = None) -> Event:
    """Validate one JSON message and return its typed event, or raise ``ContractError``.

    ``now`` (epoch ms) is the clock the "no more than 24 h in the future" rule uses;
    pass it once per batch on hot paths.
    """
    if isinstance(raw, str):
        try:
            raw = raw.encode()
        except UnicodeEncodeError as e:
            raise ContractError(f"not valid JSON: not encodable as UTF-8 ({e.reason} at character {e.start})") from None
    elif type(raw) is memoryview:
        raw = bytes(raw)
    if len(raw) > MAX_EVENT_BYTES:
        raise ContractError(f"event is {len(raw)} bytes, larger than the {MAX_EVENT_BYTES}-byte limit")
    try:
        ev = _decode(raw)
    except msgspec.ValidationError as e:
        msg = str(e)
        if msg.startswith("Invalid value") and "`$.kind`" in msg:
            msg = "unknown kind " + msg[len("Invalid value "):]
        elif msg.startswith(_RANGE_PREFIXES):
            msg = _range_reason(msg)
        elif msg.startswith("Integer value out of range"):  # a literal too long for msgspec to parse
            msg = msg.replace("Integer value out of range", "Integer value out of range (integers must fit "
                              "a signed 64-bit int)", 1)
        raise ContractError(msg, _path_of(msg)) from None
    except msgspec.DecodeError as e:
        raise ContractError(f"not valid JSON: {e}") from None
    except RecursionError:
        raise ContractError("not valid JSON: nesting too deep") from None
    check_utf8(raw)
    limit = (now_ms() if now is None else now) + MAX_FUTURE_MS
    if ev.ts > limit:
        raise ContractError(f"ts {ev.ts} is more than 24 h in the future - at `$.ts`", "$.ts")
    return canonical_event(ev)


def decode_many(raws: Iterable[bytes]) -> Iterator[Event | ContractError]:
    """Decode a batch, yielding the event or the ``ContractError`` for each input in order."""
    now = now_ms()
    for raw in raws:
        try:
            yield decode(raw, now=now)
        except ContractError as e:
            yield e


def encode(ev: Envelope) -> bytes:
    """Serialise an event (or any output record Struct) to its wire bytes."""
    return _encoder.encode(ev)


def to_dict(ev: Envelope) -> dict[str, Any]:
    """The event as plain JSON-ready builtins (``kind`` included; arrays as lists)."""
    return orjson.loads(_encoder.encode(ev))


#: a dead letter keeps this many leading bytes of the rejected input (base64 in ``raw_b64``),
#: with the input's full ``size`` and ``sha256``: enough to see what a producer sent
DEADLETTER_RAW_BYTES = 4096
#: a dead letter's reason (and topic) are cut to this many characters
MAX_REASON_CHARS = 1000
MAX_TOPIC_CHARS = 255
#: no dead-letter record is larger than this (encoded): base64 of 4 KiB is 5,464 bytes, a
#: reason of 1,000 characters at most 6,000 (orjson escapes a control character in 6)
MAX_DEADLETTER_BYTES = 16 * 1024


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters (the last one an ellipsis when cut), and made
    encodable: a lone surrogate (from a ``surrogateescape`` decode) becomes U+FFFD."""
    if len(text) > limit:
        text = text[: limit - 1] + "\u2026"
    if not text.isascii():
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def dead_letter(raw: bytes | bytearray | memoryview | str | None, reason: str, topic: str | None = None,
                partition: int | None = None, offset: int | None = None, ts: int | None = None) -> bytes:
    """A ``fl.deadletter`` record for input that was rejected: the reason, where it came from,
    the first ``DEADLETTER_RAW_BYTES`` of the raw bytes (base64), the raw size and sha256.

    Bounded whatever the input (at most ``MAX_DEADLETTER_BYTES``), so a 1 MB value or a
    record that failed to send can always be dead-lettered (a copy of the whole input in
    base64 was larger than the producer's 1 MB request limit)."""
    if raw is None:
        b = b""
    elif isinstance(raw, str):
        b = raw.encode("utf-8", "surrogatepass")
    else:
        b = bytes(raw)
    n = len(b)
    return orjson.dumps({
        "ts": now_ms() if ts is None else ts,
        "reason": clip(str(reason), MAX_REASON_CHARS),
        "topic": None if topic is None else clip(str(topic), MAX_TOPIC_CHARS),
        "partition": partition,
        "offset": offset,
        "raw_b64": base64.b64encode(b[:DEADLETTER_RAW_BYTES]).decode("ascii"),
        "size": n,
        "sha256": hashlib.sha256(b).hexdigest(),
        "raw_truncated": n > DEADLETTER_RAW_BYTES,
    })
