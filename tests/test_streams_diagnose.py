"""``faultline diagnose``: JSON lines per incident, readable report, invalid lines on stderr,
zstd and stdin input."""

from __future__ import annotations

import io
import subprocess
import sys

import orjson
import zstandard

from faultline.cli import main
from faultline.humantime import show, show_ms

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
    # times are for people: the failure time and the timeline in calendar form, not epoch ms
    inc = orjson.loads(_json_incident(p))
    assert show_ms(inc["failure_ts"]) in out and str(inc["failure_ts"]) not in out


def _json_incident(p) -> bytes:
    r = subprocess.run([sys.executable, "-m", "faultline.cli", "diagnose", str(p), "--json"], capture_output=True,
                       timeout=120)
    return r.stdout.splitlines()[0]


def test_human_times_name_the_zone(monkeypatch):
    import time

    ts = 1_793_606_016_293  # 2026-11-02 07:53:36.293 UTC
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert show_ms(ts) == "2026-11-02 02:53:36.293 EST"
        assert show(ts, seconds=False) == "2026-11-02 02:53 EST"
        monkeypatch.setenv("FAULTLINE_DISPLAY_TZ", "UTC")
        assert show(ts) == "2026-11-02 07:53:36 UTC"
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    assert show(None) == "-"


def test_stdin(tmp_path):
    p, raw = corpus(tmp_path)
    r = subprocess.run([sys.executable, "-m", "faultline.cli", "diagnose", "-", "--json"], input=raw,
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 1


def test_missing_file_is_a_clear_error(capsys):
    assert main(["diagnose", "/nonexistent/x.jsonl"]) == 2
    assert "cannot open" in capsys.readouterr().err


def test_gzip_and_byte_order_mark(tmp_path, capsysbinary):
    """A gzip file, and a file starting with a UTF-8 BOM, read like the plain one."""
    import gzip

    p, raw = corpus(tmp_path)
    assert main(["diagnose", str(p), "--json"]) == 0
    want = capsysbinary.readouterr().out
    g = tmp_path / "ev.jsonl.gz"
    g.write_bytes(gzip.compress(b"\xef\xbb\xbf" + raw))
    assert main(["diagnose", str(g), "--json"]) == 0
    out, err = capsysbinary.readouterr()
    assert out == want and b"2 invalid line(s)" in err   # the BOM did not cost the first line


def test_events_out_of_time_order_beyond_lateness_are_reported(tmp_path, capsysbinary):
    """A file whose events are further out of order than the lateness bound is diagnosed
    anyway, and stderr says how many came late and what to do (the worker orders by event
    time across partitions, so its incidents may differ around them)."""
    sim = gpu_fault_on_n2()
    evs = sorted(sim.events, key=lambda e: e["ts"])
    p = tmp_path / "ordered.jsonl"
    p.write_bytes(b"\n".join(orjson.dumps(e) for e in evs) + b"\n")
    assert main(["diagnose", str(p), "--json"]) == 0
    assert b"came after event time" not in capsysbinary.readouterr().err
    half = len(evs) // 2      # the first half after the second (a blank line ends a read batch,
    p.write_bytes(b"\n".join(orjson.dumps(e) for e in evs[half:]) + b"\n\n"   # as 1 MiB would)
                  + b"\n".join(orjson.dumps(e) for e in evs[:half]) + b"\n")
    assert main(["diagnose", str(p), "--json"]) == 0
    err = capsysbinary.readouterr().err.decode()
    n = int(err.split("faultline diagnose: ", 1)[1].split(" ", 1)[0])
    assert 0 < n <= len(evs) // 2 and "--lateness-ms" in err and "time order" in err
