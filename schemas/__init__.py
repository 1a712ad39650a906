"""The faultline event contract v1 as code: typed models, codec, topic registry."""

from .codec import (
    MAX_EVENT_BYTES, ContractError, dead_letter, decode, decode_many, encode, now_ms, to_dict,
)
from .events import (
    CONTRACT_VERSION, INTERRUPTION_STATES, KIND_MODELS, KINDS, TERMINAL_JOB_STATES, Envelope, Event,
)
from .outputs import CATEGORIES, LAYERS, Affected, Alert, Cause, Checkpoint, EvidenceItem, Finding, Incident, Retry
from .registry import (
    ALERTS, ALL_TOPICS, DEADLETTER, FINDINGS, INCIDENTS, INPUT_TOPICS, KIND_TOPICS, LAYER_TOPICS,
    OUTPUT_TOPICS, TOPIC_KEYS, key_for, topic_for,
)

__all__ = [
    "CATEGORIES", "LAYERS", "Affected", "Alert", "Cause", "Checkpoint", "EvidenceItem", "Finding", "Incident", "Retry",
    "ALERTS", "ALL_TOPICS", "CONTRACT_VERSION", "ContractError", "DEADLETTER", "Envelope", "Event",
    "FINDINGS", "INCIDENTS", "INPUT_TOPICS", "INTERRUPTION_STATES", "KINDS", "KIND_MODELS",
    "KIND_TOPICS", "LAYER_TOPICS", "MAX_EVENT_BYTES", "OUTPUT_TOPICS", "TERMINAL_JOB_STATES",
    "TOPIC_KEYS", "dead_letter", "decode", "decode_many", "encode", "key_for", "now_ms",
    "to_dict", "topic_for",
]
