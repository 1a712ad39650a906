"""The worker's per-batch hot path, kept exact when made cheaper (issue 19): every event
class's ``kind`` is its union tag, and ``WorkerCounts.add_events`` counts a batch, mixed or
not, exactly as one count per (topic, kind) would."""

from __future__ import annotations

from collections import Counter

import msgspec
import orjson

from faultline.metrics.counters import WorkerCounts
from faultline.schemas.events import KIND_MODELS, Event


class Msg:
    def __init__(self, topic: str) -> None:
        self.topic = topic


def test_every_kind_attribute_is_its_tag_and_the_tag_is_encoded():
    for tag, cls in KIND_MODELS.items():
        assert cls.kind == tag == cls.__struct_config__.tag
    raw = {"v": 1, "id": "a", "ts": 1, "kind": "storage.sample", "source": "t", "node": "n1",
           "data": {"path": "/ckpt"}}
    ev = msgspec.json.decode(orjson.dumps(raw), type=Event)
    assert ev.kind == "storage.sample" and "kind" not in type(ev).__struct_fields__
    assert orjson.loads(msgspec.json.encode(ev))["kind"] == "storage.sample"


DATA = {"gpu.sample": {"gpu": 0, "uuid": "GPU-0"}, "gpu.xid": {"xid": 79, "message": "fell off the bus"},
        "storage.sample": {"path": "/ckpt"}}


def _ev(kind: str):
    raw = {"v": 1, "id": kind, "ts": 1, "kind": kind, "source": "t", "node": "n1", "data": DATA[kind]}
    return msgspec.json.decode(orjson.dumps(raw), type=Event)


def test_add_events_counts_single_and_mixed_batches_per_topic_and_kind():
    batches = [
        [(_ev("gpu.sample"), Msg("fl.gpu"))] * 5,                                   # one topic, one kind
        [(_ev("gpu.sample"), Msg("fl.gpu")), (_ev("gpu.xid"), Msg("fl.gpu"))] * 3,  # one topic, two kinds
        [(_ev("gpu.sample"), Msg("fl.gpu")), (_ev("storage.sample"), Msg("fl.storage")),
         (_ev("gpu.xid"), Msg("fl.gpu"))],                                          # two topics
        [],
    ]
    c = WorkerCounts()
    want: Counter = Counter()
    for b in batches:
        c.add_events(b)
        want.update((m.topic, ev.kind) for ev, m in b)
    assert dict(c.events.items()) == dict(want)
    assert dict(want) == {("fl.gpu", "gpu.sample"): 9, ("fl.gpu", "gpu.xid"): 4, ("fl.storage", "storage.sample"): 1}
