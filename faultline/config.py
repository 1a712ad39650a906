"""One settings object, from environment variables and an optional TOML file.

Precedence: environment > TOML file (``FAULTLINE_CONFIG`` or ``./faultline.toml``) > defaults.
Any setting may be read from a file instead: ``FAULTLINE_<NAME>_FILE`` in the environment, or
``<name>_file = "/run/secrets/x"`` in the TOML file (in any of its tables, ``[faultline.notify]``
too); the value is the file's text, stripped. Use that for secrets (SASL password, API token,
a ClickHouse URL with credentials, a webhook URL). A value read from a file is a
:class:`Secret`: ``***`` in ``repr`` and in ``masked()`` (what ``faultline config`` prints),
like every setting whose name says secret and the credentials inside any URL.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Iterable, Mapping
from urllib.parse import urlsplit, urlunsplit

SECRET_FIELDS = frozenset({"kafka_sasl_password", "api_token", "clickhouse_url"})


class ConfigError(ValueError):
    """A setting has a value faultline cannot use; the message names the setting."""


class Secret(str):
    """A value read from a secret file: a plain ``str`` to every API, ``'***'`` in ``repr``
    (so a logged settings object or traceback never shows it) and in ``masked()``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return repr(MASK)


def read_secret(path: Any, where: str) -> Secret:
    """The text of the file ``path`` (stripped) as a :class:`Secret`; ``ConfigError`` naming
    ``where`` (the variable or key that gave the path) when it cannot be read or is empty."""
    try:
        text = Path(str(path)).read_text().strip()
    except (OSError, UnicodeDecodeError) as e:
        why = getattr(e, "strerror", None) or "not UTF-8 text"
        raise ConfigError(f"{where}: cannot read {path}: {why}") from None
    if not text:
        raise ConfigError(f"{where}: {path} is empty (it should hold the value)")
    return Secret(text)


@dataclass(frozen=True)
class Settings:
    #: Kafka bootstrap servers, comma separated
    kafka_bootstrap: str = "127.0.0.1:9092"
    #: PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    kafka_security_protocol: str = "PLAINTEXT"
    kafka_sasl_mechanism: str | None = None  # PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
    kafka_sasl_username: str | None = None
    kafka_sasl_password: str | None = None
    kafka_ssl_cafile: str | None = None
    kafka_ssl_certfile: str | None = None
    kafka_ssl_keyfile: str | None = None
    #: prefix for every topic name (replay into a side pipeline, tests)
    topic_prefix: str = ""
    topic_partitions: int = 6
    topic_replication: int = 1
    #: input topic retention (replay horizon), hours
    topic_retention_hours: int = 168
    #: ClickHouse server URL (http://user:pass@host:8123/db); unset -> embedded chDB
    clickhouse_url: str | None = None
    #: embedded chDB data directory
    store_path: str = "var/store"
    #: worker web port (Faust web views: incident page, read-only SQL API)
    web_port: int = 6066
    #: address the page and SQL API listen on; a non-loopback one needs api_token
    web_bind: str = "127.0.0.1"
    #: bearer token for the worker's SQL API
    api_token: str | None = None
    #: lateness bound of event-time windows, ms
    lateness_ms: int = 10_000
    #: no progress for this long (at least) is a stall, ms; unset: the detector's default
    #: (10 min). Worker and ``diagnose`` read the same value (``EngineConfig.from_settings``)
    stall_floor_ms: int | None = None
    #: evidence is accepted this long after a job's failure before its incident is final, ms;
    #: unset: the correlator's default (60 s). Worker and ``diagnose`` read the same value
    settle_ms: int | None = None
    #: a worker that stops heart-beating (crashed, SIGKILLed, frozen) loses its partitions to
    #: the others after this long; the broker accepts 6,000 ms and up (group.min.session.timeout.ms)
    worker_session_timeout_ms: int = 15_000
    #: where collectors spool events while the broker is unreachable
    spool_dir: str = "var/spool"
    spool_max_mb: int = 256
    log_level: str = "INFO"
    extra: dict[str, Any] = field(default_factory=dict)

    def kafka_kwargs(self) -> dict[str, Any]:
        """Connection keyword arguments for aiokafka clients."""
        kw: dict[str, Any] = {
            "bootstrap_servers": self.kafka_bootstrap,
            "security_protocol": self.kafka_security_protocol,
        }
        if self.kafka_sasl_mechanism:
            kw["sasl_mechanism"] = self.kafka_sasl_mechanism
            kw["sasl_plain_username"] = self.kafka_sasl_username
            kw["sasl_plain_password"] = self.kafka_sasl_password
        if self.kafka_security_protocol in ("SSL", "SASL_SSL"):
            from aiokafka.helpers import create_ssl_context

            kw["ssl_context"] = create_ssl_context(
                cafile=self.kafka_ssl_cafile, certfile=self.kafka_ssl_certfile,
                keyfile=self.kafka_ssl_keyfile,
            )
        return kw

    def topic(self, name: str) -> str:
        return self.topic_prefix + name

    def __repr__(self) -> str:   # never a secret in a log line or a traceback
        return "Settings(" + ", ".join(f"{k}={v!r}" for k, v in self.masked().items()) + ")"

    def masked(self) -> dict[str, Any]:
        """Settings as a dict with every secret masked (for printing and logs): the known
        secret fields, every key (nested or unknown too) whose name says secret, and the
        credentials inside any URL."""
        out: dict[str, Any] = {}
        for f in fields(self):
            val = getattr(self, f.name)
            if f.name in SECRET_FIELDS and val and f.name != "clickhouse_url":
                val = MASK
            out[f.name] = mask_value(f.name, val)
        return out


MASK = "***"
#: a key whose name contains one of these (any case) holds a secret
SECRET_WORDS = ("password", "passwd", "token", "key", "secret", "community", "credential", "auth")
#: keys that hold a secret though their name does not say so (a Slack or PagerDuty webhook
#: URL's path is its credential: faultline.notify.config.SECRET_FIELDS)
SECRET_KEYS = frozenset({"webhook_url"})
_URL_SECRET_PARAMS = re.compile(r"(?i)([?&;](?:[a-z_]*(?:password|passwd|token|secret|key|auth)[a-z_]*)=)[^&;#\s]*")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"]+")


def is_secret_name(name: str) -> bool:
    low = str(name).lower()
    return (low in SECRET_KEYS or any(w in low for w in SECRET_WORDS)) and not low.endswith(("_file", "file"))


def mask_value(name: str, val: Any) -> Any:
    """``val`` with secrets masked: all of it when ``name`` says secret, nested keys by their
    own names, and credentials inside URLs in any string."""
    if isinstance(val, dict):
        return {k: mask_value(k, v) for k, v in val.items()}
    if isinstance(val, (list, tuple)):
        return [mask_value(name, v) for v in val]
    if isinstance(val, Secret):
        return MASK
    if val in (None, "") or isinstance(val, bool):
        return val
    if is_secret_name(name) and not name.endswith("_path"):
        return MASK
    if isinstance(val, str):
        return _URL.sub(lambda m: mask_url(m.group()), val)
    return val


def mask_url(url: str) -> str:
    """``url`` without credentials: ``user:***@host`` and ``?password=***`` (token, key...)."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            user, _, host = netloc.rpartition("@")
            name = user.split(":", 1)[0]
            netloc = f"{name}:{MASK}@{host}" if ":" in user else f"{MASK}@{host}"
        query = _URL_SECRET_PARAMS.sub(lambda m: m.group(1) + MASK, "?" + parts.query)[1:] if parts.query else ""
        return urlunsplit(parts._replace(netloc=netloc, query=query))
    except ValueError:
        return MASK




#: settings that are an integer when set and None (the component's own default) when not
_OPTIONAL_INTS = frozenset({"stall_floor_ms", "settle_ms"})


def _coerce(name: str, raw: Any, default: Any) -> Any:
    if name in _OPTIONAL_INTS and raw in (None, ""):
        return None
    if isinstance(default, bool):
        return str(raw).lower() in ("1", "true", "yes", "on")
    if isinstance(default, int) or name in _OPTIONAL_INTS:
        try:
            return int(raw)
        except (TypeError, ValueError):
            raise ConfigError(f"setting {name} must be an integer, got {raw!r}") from None
    if raw in (None, ""):
        return None
    return raw if isinstance(raw, str) else str(raw)   # a Secret stays one


def env_values(names: Iterable[str], prefix: str, env: Mapping[str, str]) -> dict[str, str]:
    """Each setting ``name`` set in ``env`` as ``<PREFIX><NAME>``, or read from the file
    ``<PREFIX><NAME>_FILE`` names (secrets from files: the value is the file's text, stripped)."""
    out: dict[str, str] = {}
    for name in names:
        var = prefix + name.upper()
        if var in env:
            out[name] = env[var]
        elif var + "_FILE" in env:
            out[name] = read_secret(env[var + "_FILE"], var + "_FILE")
    return out


FILE_SUFFIX = "_file"


def file_values(table: Mapping[str, Any], where: str, skip: Iterable[str] = (), *,
                _at: str = "") -> dict[str, Any]:
    """``table`` (a TOML table) with each ``<key>_file = PATH`` replaced by ``<key>``: the
    file's text as a :class:`Secret`; nested tables likewise. Keys in ``skip`` (set elsewhere
    with precedence, the environment) are dropped unread. ``<key>`` and ``<key>_file`` both
    given is an error (which one would win is a guess). ``where`` names the file in errors."""
    skip = set(skip)
    out: dict[str, Any] = {}
    for k, v in table.items():
        name = k[: -len(FILE_SUFFIX)] if k.endswith(FILE_SUFFIX) and len(k) > len(FILE_SUFFIX) else None
        if isinstance(v, dict):
            out[k] = file_values(v, where, _at=f"{_at}{k}.")
        elif name is None:
            out[k] = v
        elif name in table:
            raise ConfigError(f"{where}: both {_at}{name} and {_at}{k} are set: keep one ({k} for a secret)")
        elif name not in skip:
            if not isinstance(v, str):
                raise ConfigError(f"{where}: {_at}{k} must be a file path (a string), got {v!r}")
            out[name] = read_secret(v, f"{where}: {_at}{k}")
    return out


def load(path: str | os.PathLike[str] | None = None, env: dict[str, str] | None = None,
         **overrides: Any) -> Settings:
    """Build the effective settings: defaults < TOML file < environment < ``overrides``."""
    env = dict(os.environ if env is None else env)
    values: dict[str, Any] = {}
    cfg_path = path or env.get("FAULTLINE_CONFIG")
    if cfg_path is None and Path("faultline.toml").is_file():
        cfg_path = "faultline.toml"
    if cfg_path:
        try:
            with open(cfg_path, "rb") as fh:
                doc = tomllib.load(fh)
        except FileNotFoundError:
            raise ConfigError(f"config file {cfg_path} not found: fix FAULTLINE_CONFIG or create it") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"config file {cfg_path} is not valid TOML: {e}") from None
        values.update(doc.get("faultline", doc))
    defaults = Settings()
    known = {f.name for f in fields(Settings)} - {"extra"}
    from_env = env_values(known, "FAULTLINE_", env)
    values = file_values(values, f"config file {cfg_path}", skip=from_env)
    extra = {k: v for k, v in values.items() if k not in known}
    values = {k: v for k, v in values.items() if k in known}
    values.update(from_env)
    values.update({k: v for k, v in overrides.items() if v is not None})
    typed = {k: _coerce(k, v, getattr(defaults, k)) for k, v in values.items()}
    return replace(defaults, extra=extra, **typed)
