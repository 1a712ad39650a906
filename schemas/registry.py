"""Topic registry: which topic each kind travels on and which field is its Kafka key."""

from __future__ import annotations

from .events import Envelope, KIND_MODELS

#: layer -> input topic
LAYER_TOPICS: dict[str, str] = {
    "gpu": "fl.gpu",
    "hw": "fl.hw",
    "net": "fl.net",
    "storage": "fl.storage",
    "sched": "fl.sched",
    "runtime": "fl.runtime",
    "inventory": "fl.inventory",
}
INPUT_TOPICS: tuple[str, ...] = tuple(LAYER_TOPICS.values())

ALERTS = "fl.alerts"
INCIDENTS = "fl.incidents"
FINDINGS = "fl.findings"
DEADLETTER = "fl.deadletter"
OUTPUT_TOPICS: tuple[str, ...] = (ALERTS, INCIDENTS, FINDINGS, DEADLETTER)
ALL_TOPICS: tuple[str, ...] = INPUT_TOPICS + OUTPUT_TOPICS

#: kind -> topic
KIND_TOPICS: dict[str, str] = {k: LAYER_TOPICS[m.layer] for k, m in KIND_MODELS.items()}

#: topic -> what the key is, as the contract states it (documentation and `topics list`)
TOPIC_KEYS: dict[str, str] = {
    "fl.gpu": "node", "fl.hw": "node", "fl.storage": "node", "fl.inventory": "node",
    "fl.net": "node, else data.device", "fl.sched": "job", "fl.runtime": "job",
    ALERTS: "node or job", INCIDENTS: "job", FINDINGS: "dimension value", DEADLETTER: "none",
}


def topic_for(ev: Envelope) -> str:
    return LAYER_TOPICS[ev.layer]


def key_for(ev: Envelope) -> bytes:
    """The Kafka key of an event: node for node-scoped layers, job for sched.job and
    runtime, node or the switch name for net."""
    layer = ev.layer
    if layer == "sched":
        k = ev.job if ev.job else ev.node
    elif layer == "runtime":
        k = ev.job
    elif layer == "net":
        k = ev.node or ev.data.device  # type: ignore[union-attr]
    else:
        k = ev.node
    return (k or "").encode()
