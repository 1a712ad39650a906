"""Settings: defaults < TOML < environment < overrides, *_FILE secrets, masking, errors."""

from __future__ import annotations

from dataclasses import replace
import subprocess
import sys

import orjson
import pytest

from faultline import config
from faultline.config import ConfigError, Settings


def test_defaults_without_file_or_env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no ./faultline.toml here
    s = config.load(env={})
    assert s == Settings()
    assert s.kafka_bootstrap == "127.0.0.1:9092" and s.topic_prefix == "" and s.clickhouse_url is None


def test_toml_then_env_then_overrides(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "fl.toml"
    cfg.write_text('[faultline]\nkafka_bootstrap = "k1:9092"\ntopic_partitions = 3\n'
                   'store_path = "/data/store"\nlateness_ms = 2000\nunknown_knob = "kept"\n')
    s = config.load(cfg, env={})
    assert (s.kafka_bootstrap, s.topic_partitions, s.store_path, s.lateness_ms) == ("k1:9092", 3, "/data/store", 2000)
    assert s.extra == {"unknown_knob": "kept"}
    env = {"FAULTLINE_KAFKA_BOOTSTRAP": "k2:9092", "FAULTLINE_TOPIC_PARTITIONS": "12"}
    s = config.load(cfg, env=env)
    assert (s.kafka_bootstrap, s.topic_partitions, s.store_path) == ("k2:9092", 12, "/data/store")
    s = config.load(cfg, env=env, kafka_bootstrap="k3:9092", topic_prefix=None)
    assert s.kafka_bootstrap == "k3:9092" and s.topic_prefix == ""


def test_config_file_from_env_and_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "faultline.toml").write_text('topic_prefix = "cwd."\n')  # top-level table works too
    assert config.load(env={}).topic_prefix == "cwd."
    other = tmp_path / "other.toml"
    other.write_text('[faultline]\ntopic_prefix = "env."\n')
    assert config.load(env={"FAULTLINE_CONFIG": str(other)}).topic_prefix == "env."


def test_secret_from_file_and_env_wins(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pw = tmp_path / "pw"
    pw.write_text("s3cr3t\n")
    s = config.load(env={"FAULTLINE_KAFKA_SASL_PASSWORD_FILE": str(pw)})
    assert s.kafka_sasl_password == "s3cr3t"
    s = config.load(env={"FAULTLINE_KAFKA_SASL_PASSWORD_FILE": str(pw), "FAULTLINE_KAFKA_SASL_PASSWORD": "direct"})
    assert s.kafka_sasl_password == "direct"
    with pytest.raises(ConfigError, match="FAULTLINE_API_TOKEN_FILE: cannot read"):
        config.load(env={"FAULTLINE_API_TOKEN_FILE": str(tmp_path / "missing")})


def test_masking_hides_every_secret(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = config.load(env={"FAULTLINE_KAFKA_SASL_PASSWORD": "pw-123", "FAULTLINE_API_TOKEN": "tok-456",
                         "FAULTLINE_CLICKHOUSE_URL": "http://bob:ch-789@ch.local:8123/fl",
                         "FAULTLINE_KAFKA_SASL_USERNAME": "bob"})
    m = s.masked()
    text = orjson.dumps(m).decode()
    for secret in ("pw-123", "tok-456", "ch-789"):
        assert secret not in text
    assert m["kafka_sasl_password"] == "***" and m["api_token"] == "***"
    assert m["clickhouse_url"] == "http://bob:***@ch.local:8123/fl"
    assert m["kafka_sasl_username"] == "bob"
    # a URL without credentials is not a secret worth hiding
    assert config.load(env={"FAULTLINE_CLICKHOUSE_URL": "http://ch:8123"}).masked()["clickhouse_url"] == "http://ch:8123"


def test_kafka_kwargs_plain_and_sasl(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    kw = config.load(env={}).kafka_kwargs()
    assert kw == {"bootstrap_servers": "127.0.0.1:9092", "security_protocol": "PLAINTEXT"}
    kw = config.load(env={"FAULTLINE_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
                          "FAULTLINE_KAFKA_SASL_MECHANISM": "SCRAM-SHA-256",
                          "FAULTLINE_KAFKA_SASL_USERNAME": "u", "FAULTLINE_KAFKA_SASL_PASSWORD": "p"}).kafka_kwargs()
    assert kw["sasl_mechanism"] == "SCRAM-SHA-256" and kw["sasl_plain_password"] == "p"


def test_topic_prefix_applies():
    assert Settings(topic_prefix="replay1.").topic("fl.gpu") == "replay1.fl.gpu"


@pytest.mark.parametrize("toml,match", [
    ("topic_partitions = 'many'\n", "topic_partitions must be an integer"),
    ("[faultline\n", "not valid TOML"),
])
def test_bad_config_names_the_problem(tmp_path, monkeypatch, toml, match):
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "bad.toml"
    cfg.write_text(toml)
    with pytest.raises(ConfigError, match=match):
        config.load(cfg, env={})
    with pytest.raises(ConfigError, match="not found"):
        config.load(tmp_path / "missing.toml", env={})
    with pytest.raises(ConfigError, match="lateness_ms must be an integer"):
        config.load(env={"FAULTLINE_LATENESS_MS": "10s"})


def test_cli_prints_masked_settings(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "FAULTLINE_API_TOKEN": "tok-secret-1",
           "FAULTLINE_KAFKA_BOOTSTRAP": "kafka.example:9092"}
    p = subprocess.run([sys.executable, "-m", "faultline.cli", "config"], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    out = orjson.loads(p.stdout)
    assert out["kafka_bootstrap"] == "kafka.example:9092" and out["api_token"] == "***"
    assert "tok-secret-1" not in p.stdout + p.stderr
    p = subprocess.run([sys.executable, "-m", "faultline.cli", "config"], env=dict(env, FAULTLINE_WEB_PORT="x"),
                       cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "web_port must be an integer" in p.stderr


def test_stall_floor_is_an_optional_integer_setting_the_engine_reads():
    """FAULTLINE_STALL_FLOOR_MS reaches the stall detector of the one engine composition the
    worker and `diagnose` build (EngineConfig.from_settings); unset keeps the detector default."""
    from faultline.streams.detectors.config import DetectorConfig
    from faultline.streams.engine import EngineConfig

    s = config.load(env={"FAULTLINE_STALL_FLOOR_MS": "20000"})
    assert s.stall_floor_ms == 20000
    assert EngineConfig.from_settings(s).detectors.stall_floor_ms == 20000
    unset = config.load(env={})
    assert unset.stall_floor_ms is None
    assert EngineConfig.from_settings(unset).detectors.stall_floor_ms == DetectorConfig().stall_floor_ms
    with pytest.raises(config.ConfigError, match="stall_floor_ms must be an integer"):
        config.load(env={"FAULTLINE_STALL_FLOOR_MS": "ten minutes"})


def test_settle_is_an_optional_integer_setting_the_engine_reads():
    """FAULTLINE_SETTLE_MS (how long after a failure evidence still counts) reaches the
    correlator of the one engine composition; unset keeps its default; the TOML's unknown
    key works too (``extra``), as for the stall floor."""
    from faultline.streams.correlate import CorrelateConfig
    from faultline.streams.engine import EngineConfig

    s = config.load(env={"FAULTLINE_SETTLE_MS": "20000"})
    assert s.settle_ms == 20000 and EngineConfig.from_settings(s).correlate.settle_ms == 20000
    unset = config.load(env={})
    assert EngineConfig.from_settings(unset).correlate.settle_ms == CorrelateConfig().settle_ms != 20000
    assert EngineConfig.from_settings(replace(unset, extra={"settle_ms": 15000})).correlate.settle_ms == 15000
    with pytest.raises(config.ConfigError, match="settle_ms must be an integer"):
        config.load(env={"FAULTLINE_SETTLE_MS": "soon"})


SECRETS = {"kafka_sasl_password": "SASL-f1le", "api_token": "TOK-f1le",
           "clickhouse_url": "http://fl:CH-f1le@ch.local:8123/fl"}
NOTIFY_SECRETS = {"webhook_url": "https://hooks.slack.com/services/T0/B0/HOOK-f1le", "webhook_token": "WHTOK-f1le"}


def _secret_toml(tmp_path) -> "Path":
    lines = ["[faultline]", 'kafka_sasl_username = "fl"']
    for name, value in SECRETS.items():
        (tmp_path / name).write_text(value + "\n")
        lines.append(f'{name}_file = "{tmp_path / name}"')
    lines.append("[faultline.notify]")
    for name, value in NOTIFY_SECRETS.items():
        (tmp_path / name).write_text(value)
        lines.append(f'{name}_file = "{tmp_path / name}"')
    cfg = tmp_path / "faultline.toml"
    cfg.write_text("\n".join(lines) + "\n")
    return cfg


def test_every_secret_can_come_from_a_file_named_in_the_toml(tmp_path, monkeypatch):
    """``<name>_file`` in the TOML file (top level and [faultline.notify]) reads the value from
    that file; it is a Secret: never in repr() nor masked(); the environment still wins, and
    then the TOML's file is not even read."""
    from faultline.notify.config import NotifySettings

    monkeypatch.chdir(tmp_path)
    cfg = _secret_toml(tmp_path)
    s = config.load(cfg, env={})
    assert {k: getattr(s, k) for k in SECRETS} == SECRETS and s.extra == {"notify": NOTIFY_SECRETS}
    n = NotifySettings.from_settings(s, env={})
    assert (n.webhook_url, n.webhook_token) == tuple(NOTIFY_SECRETS.values())
    shown = repr(s) + orjson.dumps(s.masked()).decode() + str(n.masked())
    for secret in ("f1le", *SECRETS.values(), *NOTIFY_SECRETS.values()):
        assert secret not in shown, secret
    assert s.masked()["kafka_sasl_password"] == s.masked()["extra"]["notify"]["webhook_url"] == "***"
    (tmp_path / "api_token").unlink()   # the environment wins: the TOML's file is not read
    assert config.load(cfg, env={"FAULTLINE_API_TOKEN": "from-env"}).api_token == "from-env"
    with pytest.raises(ConfigError, match=r"api_token_file: cannot read .*api_token"):
        config.load(cfg, env={})
    (tmp_path / "api_token").write_text(" \n")
    with pytest.raises(ConfigError, match="api_token_file: .* is empty"):
        config.load(cfg, env={})
    cfg.write_text(f'api_token = "inline"\napi_token_file = "{tmp_path / "api_token"}"\n')
    with pytest.raises(ConfigError, match="both api_token and api_token_file are set"):
        config.load(cfg, env={})


def test_cli_shows_a_secret_from_a_toml_file_as_set_and_never_its_value(tmp_path):
    cfg = _secret_toml(tmp_path)
    p = subprocess.run([sys.executable, "-m", "faultline.cli", "--config", str(cfg), "config"],
                       env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "f1le" not in p.stdout + p.stderr
    out = orjson.loads(p.stdout)
    assert [out[k] for k in SECRETS] == ["***"] * 3 and out["kafka_sasl_username"] == "fl"
    assert out["extra"]["notify"] == {"webhook_url": "***", "webhook_token": "***"}
