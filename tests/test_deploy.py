"""infra/deploy/: the systemd units pass `systemd-analyze verify` and carry the hardening
options, their commands parse with faultline's own CLI, and the example faultline.toml and
node.toml load through faultline's config loaders with every key documented."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from faultline import config
from faultline.cli import build_parser
from faultline.notify.config import NotifySettings
from faultline.producers.collectors import node as node_mod

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "infra" / "deploy"
UNITS = sorted((DEPLOY / "systemd").glob("*.service"))
FL = str(Path(sys.executable).parent / "faultline")
FAKE_NVML = str(ROOT / "tests" / "fakes" / "pynvml.py")
INSTALLED = "/opt/faultline/bin/faultline"
#: every unit has these (the node agent relaxes a few with a reason, checked below)
HARDENING = {"NoNewPrivileges": "yes", "ProtectSystem": "strict", "PrivateTmp": "yes",
             "RestrictAddressFamilies": None, "CapabilityBoundingSet": None,
             "ProtectHome": None, "User": "faultline", "SystemCallFilter": "@system-service"}


def unit_keys(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith(("#", "[")) and "=" in line:
            k, _, v = line.partition("=")
            out.setdefault(k.strip(), []).append(v.strip())
    return out


def test_units_exist():
    names = {u.name for u in UNITS}
    assert names == {"faultline-worker.service", "faultline-sink.service", "faultline-notify.service",
                     "faultline-node.service", "faultline-collect@.service"}


@pytest.mark.parametrize("unit", UNITS, ids=lambda p: p.name)
def test_unit_hardening(unit):
    keys = unit_keys(unit)
    for k, want in HARDENING.items():
        assert k in keys, f"{unit.name}: no {k}="
        if want is not None:
            assert keys[k][-1] == want, f"{unit.name}: {k}={keys[k][-1]}, expected {want}"
    assert keys["ProtectHome"][-1] in ("yes", "read-only")
    caps = keys["CapabilityBoundingSet"][-1]
    assert caps == "" or (unit.name == "faultline-node.service" and caps == "CAP_SYSLOG"), caps
    assert set(keys["RestrictAddressFamilies"][-1].split()) <= {"AF_INET", "AF_INET6", "AF_UNIX", "AF_NETLINK"}
    # writable paths are the unit's own state directories (store, spool) only; notify keeps none
    state = {f"/var/lib/{d}" for v in keys.get("StateDirectory", []) for d in v.split()}
    assert (unit.name == "faultline-notify.service") == (not state)
    assert set(" ".join(keys.get("ReadWritePaths", [])).split()) == state, (unit.name, state)
    # secrets only as files: no token / password / URL value in the unit itself
    for k, vals in keys.items():
        for v in vals:
            if k == "Environment":
                name, _, val = v.partition("=")
                assert not re.search(r"(TOKEN|PASSWORD|SECRET)$", name) or not val, f"{unit.name}: secret in {v}"
            if k == "LoadCredential":
                cred, _, src = v.partition(":")
                assert src.startswith("/etc/faultline/credentials/"), v


@pytest.mark.parametrize("unit", UNITS, ids=lambda p: p.name)
def test_unit_command_parses_with_the_cli(unit):
    (cmd,) = unit_keys(unit)["ExecStart"]
    argv = shlex.split(cmd.replace("%i", "slurm"))
    assert argv[0] == INSTALLED
    if "$FAULTLINE_COLLECT_ARGS" in argv:  # the template: its example env file fills it
        env = (DEPLOY / "collect-slurm.env").read_text()
        (args,) = re.findall(r"^FAULTLINE_COLLECT_ARGS=(.*)$", env, re.M)
        i = argv.index("$FAULTLINE_COLLECT_ARGS")
        argv[i:i + 1] = shlex.split(args)
    ns = build_parser().parse_args(argv[1:])
    assert callable(ns.func)


@pytest.mark.parametrize("name", ["slurm", "snmp", "bmc"])
def test_collector_env_examples_parse(name):
    env = (DEPLOY / f"collect-{name}.env").read_text()
    (args,) = re.findall(r"^FAULTLINE_COLLECT_ARGS=(.*)$", env, re.M)
    ns = build_parser().parse_args(["collect", name, *shlex.split(args)])
    assert ns.collector == name


def test_systemd_analyze_verify(tmp_path):
    exe = shutil.which("systemd-analyze")
    if exe is None:
        pytest.skip("systemd-analyze not installed (package systemd)")
    names = []
    for u in UNITS:  # ExecStart must exist for verify: the venv's faultline stands in for /opt
        text = u.read_text().replace(INSTALLED, FL)
        name = u.name.replace("@.service", "@slurm.service")
        (tmp_path / name).write_text(text)
        names.append(name)
    r = subprocess.run([exe, "verify", "--man=no", *names], cwd=tmp_path, capture_output=True, text=True,
                       timeout=60)
    # an unknown or misspelt key is only a warning (exit 0): any output fails the test
    assert r.returncode == 0 and r.stderr.strip() == "" and r.stdout.strip() == "", r.stderr + r.stdout


def test_systemd_analyze_catches_a_typo(tmp_path):
    """The check above can fail: a misspelt key is reported."""
    exe = shutil.which("systemd-analyze")
    if exe is None:
        pytest.skip("systemd-analyze not installed (package systemd)")
    text = (DEPLOY / "systemd" / "faultline-worker.service").read_text().replace(INSTALLED, FL)
    (tmp_path / "faultline-worker.service").write_text(text.replace("NoNewPrivileges=", "NoNewPrivilege="))
    r = subprocess.run([exe, "verify", "--man=no", "faultline-worker.service"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert "Unknown key 'NoNewPrivilege'" in r.stderr


def _documented(text: str, key: str) -> bool:
    return re.search(rf"^#?\s*{re.escape(key)}\b\s*(=|#|$)", text, re.M) is not None


def test_faultline_toml_loads_every_setting_documented():
    path = DEPLOY / "faultline.toml"
    text = path.read_text()
    s = config.load(str(path), env={})
    assert set(s.extra) == {"notify"}, f"keys faultline does not know (typos?): {set(s.extra) - {'notify'}}"
    assert s.kafka_bootstrap.startswith("kafka-1.example.org:9092") and s.topic_replication == 3
    assert s.store_path == "/var/lib/faultline/store" and s.web_bind == "0.0.0.0"
    for f in fields(config.Settings):
        if f.name != "extra":
            assert _documented(text, f.name), f"faultline.toml does not document {f.name}"
    for secret in config.SECRET_FIELDS:  # only their *_FILE variable, never a value
        assert getattr(s, secret) is None, secret
        assert f"FAULTLINE_{secret.upper()}_FILE" in text
    n = NotifySettings.from_settings(s, env={})
    assert set(s.extra["notify"]) <= {f.name for f in fields(NotifySettings)}
    assert n.webhook_format == "slack" and n.alertmanager_urls()[0] == "http://alertmanager-1.example.org:9093"
    for f in fields(NotifySettings):
        assert _documented(text, f.name), f"faultline.toml does not document notify's {f.name}"


def test_node_toml_loads_and_builds_every_collector(tmp_path):
    path = DEPLOY / "node.toml"
    text = path.read_text()
    doc = node_mod.load_node_config(str(path))
    s = config.load(str(path), env={})
    assert s.extra == {}, f"[faultline] keys faultline does not know (typos?): {s.extra}"
    assert s.spool_dir == "/var/lib/faultline/node/spool" and s.spool_max_mb == 256
    cols = node_mod.build_collectors(doc, s, nvml_module=FAKE_NVML)
    assert [c.name for c in cols] == ["nvml", "kernel", "storage", "inventory", "logs", "checkpoints", "prometheus"]
    by = {c.name: c for c in cols}
    assert by["storage"].interval_s == 30 and by["prometheus"].targets[1].endswith(":9400/metrics")
    # every key node.py reads from a [collectors.*] or [node] table is documented in the example
    src = Path(node_mod.__file__).read_text()
    read = set(re.findall(r'cfg(?:\.get\(|\[)"([a-z_]+)"', src)) | {"module", "name", "job"}
    missing = sorted(k for k in read if not _documented(text, k))
    assert not missing, f"node.toml does not document {missing}"


def test_slurm_hook_env_example_names_the_hook_settings():
    env = (DEPLOY / "slurm" / "slurm-hook.env").read_text()
    hook = (DEPLOY / "slurm" / "faultline-slurm-hook").read_text()
    used = set(re.findall(r"\$\{?(FAULTLINE_[A-Z_]+)", hook)) - {"FAULTLINE_HOOK_ENV"}
    set_or_shown = set(re.findall(r"^#?\s*(FAULTLINE_[A-Z_]+)=", env, re.M))
    assert {"FAULTLINE_BIN", "FAULTLINE_KAFKA_BOOTSTRAP", "FAULTLINE_SPOOL_DIR", "FAULTLINE_HOOK_LOG",
            "FAULTLINE_HOOK_WAIT", "FAULTLINE_HOOK_FLUSH_TIMEOUT"} <= set_or_shown
    assert used - {"FAULTLINE_CONFIG", "FAULTLINE_TOPIC_PREFIX", "FAULTLINE_LOG_LEVEL"} <= set_or_shown | {
        "FAULTLINE_KAFKA_SSL_CERTFILE", "FAULTLINE_KAFKA_SSL_KEYFILE"}, used - set_or_shown


def test_slurm_hook_end_state_fallback():
    """While the Epilog runs the job is COMPLETING (Slurm 22.05, measured: a cancelled job read
    `JobState=COMPLETING Reason=None ExitCode=0:15`); when the final state never shows within
    the wait, the hook derives it from the reason and the exit code."""
    from faultline.producers.collectors.slurm_hook import derive_end_state

    def rec(reason, code, sig):
        return {"reason": reason, "exit_code": code, "signal": sig}

    assert derive_end_state(rec(None, 0, None)) == "completed"
    assert derive_end_state(rec("NonZeroExitCode", 3, None)) == "failed"
    assert derive_end_state(rec(None, None, 15)) == "cancelled"
    assert derive_end_state(rec("TimeLimit", None, 15)) == "timeout"
    assert derive_end_state(rec("OutOfMemory", None, 9)) == "out_of_memory"
    assert derive_end_state(rec("NonZeroExitCode", None, 9)) == "failed"


def test_slurm_hook_cli_without_slurm_exits_2(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "FAULTLINE_"))}
    env["SLURM_CONF"] = "/dev/null"  # scontrol fails at once (a missing file makes it try DNS SRV for 20 s)
    r = subprocess.run([FL, "collect", "slurm-hook", "--phase", "end", "--job", "7", "--output", "-"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("faultline collect: job 7: `scontrol show job -o -d 7` exited 1: scontrol: "), r.stderr
    r = subprocess.run([FL, "collect", "slurm-hook", "--job", "7"], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and "pass --phase start|end" in r.stderr
