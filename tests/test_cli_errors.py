"""Error paths of the CLI exit non-zero with a message that names what failed, before any slow
work, and leave nothing behind (issue 17). No broker: the Kafka address is a closed port, so
a command that reached Kafka would fail with the broker's message instead of the one asserted."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest

from faultline.config import Settings
from faultline.printed import command, env_prefix, executable, quote

FAULTLINE = [sys.executable, "-m", "faultline.cli"]


def run(args: list[str], tmp_path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    env["FAULTLINE_KAFKA_BOOTSTRAP"] = "127.0.0.1:1"
    return subprocess.run(FAULTLINE + args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("cmd", ["incidents", "explain"])
def test_reading_a_missing_store_fails_and_creates_nothing(tmp_path, cmd):
    typo = tmp_path / "typo"
    p = run([cmd, *(["some-id"] if cmd == "explain" else []), "--store", str(typo)], tmp_path)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert f"store {typo} does not exist" in p.stderr
    assert "Traceback" not in p.stderr
    assert not typo.exists(), "a read created a store"


def test_reading_a_directory_that_is_no_store_fails(tmp_path):
    (tmp_path / "notes").mkdir()
    p = run(["incidents", "--store", str(tmp_path / "notes")], tmp_path)
    assert p.returncode == 2
    assert "is not a faultline store" in p.stderr
    assert os.listdir(tmp_path / "notes") == []


def test_the_default_store_missing_is_an_error_too(tmp_path):
    p = run(["incidents"], tmp_path)
    assert p.returncode == 2
    assert "store var/store does not exist" in p.stderr
    assert not (tmp_path / "var").exists()


@pytest.mark.parametrize("out,says", [("missing/dir/x.jsonl.zst", "does not exist: create it"),
                                      (".", "is a directory")])
def test_bundle_export_checks_its_output_before_kafka(tmp_path, out, says):
    p = run(["bundle", "export", "some-id", "--out", out], tmp_path)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert says in p.stderr
    assert "not reachable" not in p.stderr, "it went to Kafka before checking --out"
    assert "Traceback" not in p.stderr


def test_bundle_export_with_a_good_path_goes_on_to_kafka(tmp_path):
    """The check refuses only bad paths: the same command with a writable one reaches the broker."""
    p = run(["bundle", "export", "some-id", "--out", "x.jsonl.zst"], tmp_path)
    assert p.returncode == 2
    assert "Kafka broker not reachable at 127.0.0.1:1" in p.stderr


# ------------------------------------------------------------------- printed commands

@pytest.mark.parametrize("word", ["plain", "--since=-7d", "var/demo/a.jsonl.zst",
                                  "SELECT x FROM t WHERE state != 'recovered'", 'say "hi" $HOME', "it's", "a!b", ""])
def test_quote_is_one_shell_word_that_reads_back_the_same(word):
    assert shlex.split(quote(word)) == [word]
    out = subprocess.run(["bash", "-c", f"printf %s {quote(word)}"], capture_output=True, text=True)
    assert out.stdout == word


def test_command_carries_the_settings_a_plain_shell_lacks():
    s = Settings(kafka_bootstrap="127.0.0.1:29092", topic_prefix="demo.1.", store_path="var/store")
    line = command(s, "incidents")
    assert line.startswith("FAULTLINE_KAFKA_BOOTSTRAP=127.0.0.1:29092 FAULTLINE_TOPIC_PREFIX=demo.1. ")
    assert "FAULTLINE_STORE_PATH" not in line  # the default is not repeated
    assert env_prefix(Settings()) == ""
    assert line.endswith(f"{executable()} incidents")


def test_executable_is_the_venv_script_when_not_on_path(tmp_path, monkeypatch):
    script = os.path.join(os.path.dirname(sys.executable), "faultline")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert executable(cwd=tmp_path) == script  # not below cwd: absolute
    assert executable(cwd=os.path.dirname(os.path.dirname(script))) == os.path.join("bin", "faultline")
    monkeypatch.setenv("PATH", os.path.dirname(script) + ":/usr/bin:/bin")
    assert executable(cwd=tmp_path) == "faultline"


@pytest.mark.parametrize("args,says", [
    (["demo", "--nodes", "0"], "argument --nodes: 0 is not positive"),
    (["demo", "--speed", "nan"], "argument --speed: nan is not a positive number"),
    (["simulate", "--scenario", "healthy", "--out", "x.jsonl", "--hours", "-1"], "argument --hours: -1 is not a positive"),
    (["simulate", "--scenario", "healthy", "--out", "/proc/x.jsonl", "--hours", "0.1", "--nodes", "2"],
     "cannot write /proc/x.jsonl"),
    (["simulate", "--scenario", "healthy", "--out", "x.jsonl", "--labels", "/proc/l.json", "--hours", "0.1",
      "--nodes", "2"], "cannot write the labels to /proc/l.json"),
])
def test_sizes_and_outputs_are_checked(tmp_path, args, says):
    p = run(args, tmp_path)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert says in p.stderr
    assert "Traceback" not in p.stderr
