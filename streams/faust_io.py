"""Batch decoding with dead-lettering, and bounded de-duplication, for the Faust agents."""

from __future__ import annotations

from collections import OrderedDict
from typing import Iterable

from ..schemas.codec import ContractError, dead_letter, decode, now_ms
from ..schemas.events import Envelope


def decode_batch(records: Iterable[tuple[bytes | None, str, int, int]]
                 ) -> tuple[list[Envelope], list[bytes]]:
    """Decode ``(raw, topic, partition, offset)`` records.

    Returns the valid events in input order and one ``fl.deadletter`` record (bytes) per
    rejected input, carrying the reason, where it came from and the raw bytes.
    """
    now = now_ms()
    events: list[Envelope] = []
    dead: list[bytes] = []
    for raw, topic, partition, offset in records:
        if raw is None:
            dead.append(dead_letter(b"", "empty message (null value)", topic, partition, offset, now))
            continue
        try:
            events.append(decode(raw, now=now))
        except ContractError as e:
            dead.append(dead_letter(raw, e.reason, topic, partition, offset, now))
        except Exception as e:  # noqa: BLE001 - never crash an agent on one message
            dead.append(dead_letter(raw, f"undecodable: {type(e).__name__}: {e}", topic,
                                    partition, offset, now))
    return events, dead


class Dedup:
    """Bounded "seen" set of event ids (LRU): ``fresh(id)`` is True the first time only.

    Bounded by ``size`` ids; duplicates further apart than that are processed again,
    which every consumer tolerates (signal and incident ids are stable).
    """

    __slots__ = ("_seen", "size", "dropped")

    def __init__(self, size: int = 200_000) -> None:
        self._seen: OrderedDict[str, None] = OrderedDict()
        self.size = size
        self.dropped = 0

    def fresh(self, event_id: str) -> bool:
        seen = self._seen
        if event_id in seen:
            seen.move_to_end(event_id)
            self.dropped += 1
            return False
        seen[event_id] = None
        if len(seen) > self.size:
            seen.popitem(last=False)
        return True

    def __len__(self) -> int:
        return len(self._seen)
