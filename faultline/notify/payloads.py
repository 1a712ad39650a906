"""Request bodies (pure): Alertmanager's v2 ``POST /api/v2/alerts`` array, and the webhook
message in its two formats.

- ``json`` (generic): the shape of Alertmanager's own webhook payload (``version`` "4"),
  one alert per message, so a receiver written for Alertmanager reads it unchanged:
  ``{"version", "receiver", "status", "alerts": [{status, labels, annotations, startsAt,
  endsAt, generatorURL, fingerprint}], "groupLabels", "commonLabels", "commonAnnotations",
  "externalURL", "source": "faultline", "kind": "alert"|"incident"}``.
- ``slack``: a Slack incoming-webhook message (``text`` for notifications and clients
  without blocks, plus a ``blocks`` section with the labels); Mattermost and Rocket.Chat
  accept the same ``text`` field.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from .mapping import AmAlert, Notice, iso

RECEIVER = "faultline"
#: alerts per Alertmanager POST (the API takes an array; keep each request small)
AM_CHUNK = 500
_SLACK_EMOJI = {"critical": ":red_circle:", "warning": ":large_orange_circle:", "info": ":large_blue_circle:"}
SLACK_TEXT_CHARS = 3000


def dedupe(alerts: list[AmAlert]) -> list[AmAlert]:
    """One entry per label set, the last one (Alertmanager applies a POST in order and the
    latest update wins, so this sends the same end state in fewer bytes)."""
    last: dict[tuple, AmAlert] = {}
    for a in alerts:
        fp = a.fingerprint()
        last.pop(fp, None)
        last[fp] = a
    return list(last.values())


def am_bodies(alerts: list[AmAlert]) -> list[tuple[int, bytes]]:
    """``(alert count, body)`` of each ``POST /api/v2/alerts`` for ``alerts`` (deduplicated,
    in chunks of ``AM_CHUNK``)."""
    uniq = dedupe(alerts)
    return [(len(uniq[i:i + AM_CHUNK]), orjson.dumps([a.to_json() for a in uniq[i:i + AM_CHUNK]]))
            for i in range(0, len(uniq), AM_CHUNK)]


def fingerprint(a: AmAlert) -> str:
    raw = "\x00".join(f"{k}\x01{v}" for k, v in a.fingerprint())
    return hashlib.blake2b(raw.encode(), digest_size=8).hexdigest()


def webhook_json(n: Notice, external_url: str | None = None) -> dict[str, Any]:
    a = n.alert
    item = {"status": n.status, "labels": a.labels, "annotations": a.annotations,
            "startsAt": iso(a.starts_ms), "endsAt": iso(a.ends_ms) if n.status == "resolved" else "0001-01-01T00:00:00Z",
            "generatorURL": a.generator_url or "", "fingerprint": fingerprint(a)}
    return {"version": "4", "receiver": RECEIVER, "status": n.status, "alerts": [item],
            "groupLabels": {"alertname": a.labels.get("alertname", "")}, "commonLabels": a.labels,
            "commonAnnotations": a.annotations, "externalURL": external_url or "",
            "source": "faultline", "kind": n.kind}


def slack_text(n: Notice) -> str:
    a = n.alert
    sev = a.labels.get("severity", "")
    head = "RESOLVED" if n.status == "resolved" else sev.upper() or "FIRING"
    emoji = ":white_check_mark:" if n.status == "resolved" else _SLACK_EMOJI.get(sev, ":bell:")
    text = f"{emoji} [{head}] {a.labels.get('alertname', '')}: {a.annotations.get('summary', '')}"
    url = a.annotations.get("incident_url")
    if url:
        text += f" <{url}|incident {a.annotations.get('incident_id', '')}>"
    return text[:SLACK_TEXT_CHARS]


def webhook_slack(n: Notice) -> dict[str, Any]:
    a = n.alert
    fields = " · ".join(f"*{k}*: {v}" for k, v in a.labels.items() if k != "alertname")
    text = slack_text(n)
    return {"text": text, "blocks": [
        {"type": "section", "text": {"type": "mrkdwn", "text": text}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": fields[:SLACK_TEXT_CHARS] or "-"}]},
    ]}


def webhook_body(n: Notice, fmt: str, external_url: str | None = None) -> bytes:
    return orjson.dumps(webhook_slack(n) if fmt == "slack" else webhook_json(n, external_url))
