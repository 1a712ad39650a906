"""``faultline diagnose``: JSON lines per incident, readable report, invalid lines on stderr,
zstd and stdin input."""

from __future__ import annotations

import io
import subprocess
import sys

import orjson
import zstandard

from faultline.cli import main

from streams_fixtures import WATCHDOG, Sim  # noqa: F401
from test_streams_hardcases import gpu_fault_on_n2


def corpus(tmp_path):
    sim = gpu_fault_on_n2()
    raw = b"\n".join(orjson.dumps(e) for e in sim.events) + b"\n{broken\n\n" + b'{"v":1,"id":"x"}\n'
    p = tmp_path / "ev.jsonl"
    p.write_bytes(raw)
    return p, raw


def test_json_output_and_invalid_lines(tmp_path, capsysbinary):
    p, raw = corpus(tmp_path)
    assert main(["diagnose", str(p), "--json"]) == 0
    out, err = capsysbinary.readouterr()
    incs = [orjson.loads(l) for l in out.splitlines()]
    assert len(incs) == 1
    assert incs[0]["root_cause"]["component"] == "gpu:n2/1" and incs[0]["revision"] >= 1
    assert b"2 invalid line(s)" in err
    n_lines = raw.count(b"\n")
    assert f"line {n_lines - 2}:".encode() in err and f"line {n_lines}:".encode() in err


def test_zstd_and_readable_report(tmp_path, capsys):
    p, raw = corpus(tmp_path)
    z = tmp_path / "ev.jsonl.zst"
    z.write_bytes(zstandard.ZstdCompressor().compress(raw))
    assert main(["diagnose", str(z)]) == 0
    out = capsys.readouterr().out
    assert "1 incident(s)" in out and "gpu_hardware" in out and "gpu:n2/1" in out


def test_stdin(tmp_path):
    p, raw = corpus(tmp_path)
    r = subprocess.run([sys.executable, "-m", "faultline.cli", "diagnose", "-", "--json"], input=raw,
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 1


def test_missing_file_is_a_clear_error(capsys):
    assert main(["diagnose", "/nonexistent/x.jsonl"]) == 2
    assert "cannot open" in capsys.readouterr().err
