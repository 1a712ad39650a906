"""Adapter between the Faust agents and the pure core (detectors, job records, correlation).

The agents only see this module's small surface:

- ``NodeState``: per Kafka key of the node topics; ``feed(ev) -> (signals, alerts)``,
  ``dump()``/``load()`` for the changelog table, ``accept(topic, partition, offset)``
  fences replays after a crash (offsets are stored with the state, atomically).
- ``JobState``: per job; ``feed(ev) -> alerts``, ``add_signal(sig)``,
  ``evaluate(signal_lookup, view_lookup, watermark) -> (incidents to emit, alerts)``.
- signal encoding, the resource key a signal is filed under, and the fan-out of a signal to
  the jobs whose resources it touches.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import msgspec

from ..schemas.events import Envelope

_enc = msgspec.json.Encoder()


class _Fence(msgspec.Struct):
    """Last applied offset per ``topic/partition`` for one key."""

    offsets: dict[str, int] = {}

    def accept(self, topic: str, partition: int, offset: int) -> bool:
        k = f"{topic}/{partition}"
        last = self.offsets.get(k, -1)
        if offset <= last:
            return False
        self.offsets[k] = offset
        return True


class NodeState:
    """Detector state of one node-topic key (node, or switch for fl.net)."""

    def __init__(self, key: bytes) -> None:
        self.key = key
        self.fence = _Fence()

    @classmethod
    def load(cls, key: bytes, blob: bytes | None) -> "NodeState":
        st = cls(key)
        if blob:
            st.fence = msgspec.json.decode(blob, type=_Fence)
        return st

    def dump(self) -> bytes:
        return _enc.encode(self.fence)

    def accept(self, topic: str, partition: int, offset: int) -> bool:
        return self.fence.accept(topic, partition, offset)

    def feed(self, ev: Envelope) -> tuple[list[Any], list[Any]]:
        return [], []


class JobState:
    """Record of one job (all its attempts) plus what was last emitted for it."""

    def __init__(self, key: bytes) -> None:
        self.key = key
        self.fence = _Fence()

    @classmethod
    def load(cls, key: bytes, blob: bytes | None) -> "JobState":
        st = cls(key)
        if blob:
            st.fence = msgspec.json.decode(blob, type=_Fence)
        return st

    def dump(self) -> bytes:
        return _enc.encode(self.fence)

    def accept(self, topic: str, partition: int, offset: int) -> bool:
        return self.fence.accept(topic, partition, offset)

    def feed(self, ev: Envelope) -> list[Any]:
        return []

    def add_signal(self, sig: Any) -> bool:
        return False

    def active(self) -> bool:
        return False

    def attempts_view(self) -> list[tuple[bytes, bytes]]:
        return []

    def evaluate(self, signal_lookup: Callable[[bytes], bytes | None],
                 view_lookup: Callable[[str, str], bytes | None],
                 watermark: int) -> tuple[list[Any], list[Any]]:
        return [], []


def view_update(ev: Envelope) -> tuple[bytes, bytes] | None:
    """The views-table entry an event sets (topology, versions), or None."""
    kind = ev.kind if hasattr(ev, "kind") else type(ev).__struct_config__.tag
    if kind == "inventory.topology":
        return f"topo:{ev.node}".encode(), _enc.encode(ev.data)
    if kind == "inventory.versions":
        return f"ver:{ev.node}".encode(), _enc.encode(ev.data)
    return None


def encode_signal(sig: Any) -> bytes:
    return _enc.encode(sig)


def decode_signal(raw: bytes) -> Any:
    return msgspec.json.decode(raw)


def signal_resource(sig: Any) -> str:
    return str(getattr(sig, "subject", ""))


def merge_signals(current: bytes | None, new: list[Any], watermark: int) -> bytes:
    return _enc.encode(new)


def jobs_for_resource(resource: str, sigs: list[Any],
                      views: Iterable[tuple[bytes, bytes]]) -> list[tuple[str, list[str]]]:
    return []
