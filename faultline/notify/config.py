"""``NotifySettings``: the notifier's own settings, next to (not inside) ``faultline.config``.

Precedence as for every faultline setting: environment > TOML file > defaults. Each field
``x`` is ``FAULTLINE_NOTIFY_X`` in the environment (``FAULTLINE_NOTIFY_X_FILE`` reads it from
a file: use that for a Slack webhook URL or a token, which are secrets) and ``x`` in the
TOML table ``[faultline.notify]`` (or ``[notify]`` in a file without a ``[faultline]`` table).
Secrets (``webhook_url``, ``webhook_token``) are masked by ``masked()`` and never logged.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..config import MASK, ConfigError, Settings, env_values

ENV_PREFIX = "FAULTLINE_NOTIFY_"
SECRET_FIELDS = frozenset({"webhook_url", "webhook_token"})
WEBHOOK_FORMATS = ("json", "slack")


@dataclass(frozen=True)
class NotifySettings:
    #: Alertmanager base URL(s), comma separated (``http://127.0.0.1:9094``); empty: off
    alertmanager_url: str = ""
    #: generic webhook URL (POST, one JSON message per firing / resolved alert); empty: off
    webhook_url: str = ""
    #: ``json`` (Alertmanager-webhook-style payload) or ``slack`` (incoming-webhook ``text`` + ``blocks``)
    webhook_format: str = "json"
    #: sent as ``Authorization: Bearer <token>`` to the webhook when set
    webhook_token: str = ""
    #: a detector alert fires this long after its last occurrence, then resolves, s
    alert_ttl_s: int = 900
    #: an incident fires this long after its latest revision unless it closes first, s
    incident_ttl_s: int = 6 * 3600
    #: every firing alert is re-posted to Alertmanager this often (it keeps alerts in memory only), s
    resend_s: int = 60
    #: a webhook notice waits this long (an incident arriving meanwhile inhibits its symptoms), s
    group_wait_s: int = 10
    #: first retry delay, doubled per attempt up to ``retry_cap_s``, s (floats allowed)
    retry_first_s: float = 0.5
    retry_cap_s: float = 30.0
    #: a delivery that has failed for this long gives up: dead letter + log line, then commit, s
    retry_give_up_s: float = 300.0
    #: one HTTP request's timeout, s
    timeout_s: float = 10.0
    #: live alerts and incidents held in memory (each); the oldest go first
    max_active: int = 10_000
    #: records per consumed batch (offsets are committed per batch, after delivery)
    batch: int = 500
    #: base URL of the incident page for the ``incident_url`` annotation (default
    #: ``http://127.0.0.1:<web_port>``); ``-`` for none
    page_url: str = ""

    @classmethod
    def from_settings(cls, settings: Settings, env: dict[str, str] | None = None,
                      **overrides: Any) -> "NotifySettings":
        env = dict(os.environ if env is None else env)
        table = settings.extra.get("notify") or {}
        if not isinstance(table, dict):
            raise ConfigError("[faultline.notify] in the config file must be a table")
        defaults = cls()
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(table) - known)
        if unknown:
            raise ConfigError(f"unknown notify setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        values: dict[str, Any] = dict(table)
        values.update(env_values(known, ENV_PREFIX, env))
        values.update({k: v for k, v in overrides.items() if v is not None})
        typed = {k: _coerce(k, v, getattr(defaults, k)) for k, v in values.items()}
        out = replace(defaults, **typed)
        if not out.page_url:
            out = replace(out, page_url=f"http://127.0.0.1:{settings.web_port}")
        out.check()
        return out

    def check(self) -> None:
        if self.webhook_format not in WEBHOOK_FORMATS:
            raise ConfigError(f"notify webhook_format must be one of {', '.join(WEBHOOK_FORMATS)}, "
                              f"got {self.webhook_format!r}")
        for name in ("alert_ttl_s", "incident_ttl_s", "resend_s", "max_active", "batch"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"notify {name} must be > 0, got {getattr(self, name)}")
        if not (0 < self.retry_first_s <= self.retry_cap_s) or self.retry_give_up_s < 0 or self.timeout_s <= 0:
            raise ConfigError("notify retries: need 0 < retry_first_s <= retry_cap_s, retry_give_up_s >= 0, "
                              "timeout_s > 0")
        for url in (*self.alertmanager_urls(), *([self.webhook_url] if self.webhook_url else [])):
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise ConfigError(f"notify URL {where(url)} must be http(s)://host[:port][/path]")
        if not self.alertmanager_urls() and not self.webhook_url:
            raise ConfigError("nothing to notify: set FAULTLINE_NOTIFY_ALERTMANAGER_URL and/or "
                              "FAULTLINE_NOTIFY_WEBHOOK_URL (or [faultline.notify] in faultline.toml)")

    def alertmanager_urls(self) -> list[str]:
        return [u.strip().rstrip("/") for u in self.alertmanager_url.split(",") if u.strip()]

    def page(self) -> str | None:
        return None if self.page_url in ("", "-") else self.page_url

    def masked(self) -> dict[str, Any]:
        return {f.name: (MASK if f.name in SECRET_FIELDS and getattr(self, f.name) else getattr(self, f.name))
                for f in fields(self)}


def where(url: str) -> str:
    """A URL as it may be logged: scheme://host:port only (a webhook path can be its secret)."""
    try:
        p = urlsplit(url)
        host = p.hostname or "?"
        return f"{p.scheme}://{host}{':' + str(p.port) if p.port else ''}"
    except ValueError:
        return "<invalid url>"


def _coerce(name: str, raw: Any, default: Any) -> Any:
    try:
        if isinstance(default, bool):
            return str(raw).lower() in ("1", "true", "yes", "on")
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"notify setting {name} ({ENV_PREFIX}{name.upper()}) must be a number, "
                          f"got {raw!r}") from None
    return "" if raw is None else str(raw)
