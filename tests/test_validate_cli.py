"""`faultline validate FILE|-`: one verdict per input line, never a crash on garbage."""

from __future__ import annotations

import io
import subprocess
import sys

import orjson
import pytest

from faultline.commands.validate import validate_lines
from faultline.schemas import KINDS, MAX_EVENT_BYTES
from faultline.schemas.examples import EXAMPLES, example

GOOD = [orjson.dumps(EXAMPLES[k]) for k in KINDS]


def run_cli(*args, stdin: bytes | None = None, cwd=None):
    return subprocess.run([sys.executable, "-m", "faultline.cli", "validate", *args], input=stdin,
                          capture_output=True, timeout=120, cwd=cwd)


def verdicts(stdout: bytes) -> list[dict]:
    return [orjson.loads(line) for line in stdout.splitlines()]


def test_all_valid_exit_zero(tmp_path):
    f = tmp_path / "ok.jsonl"
    f.write_bytes(b"\n".join(GOOD) + b"\n")
    p = run_cli(str(f))
    assert p.returncode == 0, p.stderr
    v = verdicts(p.stdout)
    assert v == [{"line": i, "ok": True, "reason": None} for i in range(1, len(KINDS) + 1)]
    assert f"{len(KINDS)} valid, 0 invalid".encode() in p.stderr


def test_garbage_mix_from_stdin():
    bad_kind = orjson.dumps(example("gpu.xid", kind="gpu.nope"))
    lines = [
        GOOD[0],
        b"",                                  # empty
        b"   \t",                             # blank
        b"\x00\x01\x02\xff\xfe binary",       # binary
        b"{not json",                         # malformed
        bad_kind,                             # unknown kind
        b"[" * 50_000 + b"]" * 50_000,        # deep nesting
        b'{"x":"' + b"a" * (MAX_EVENT_BYTES + 10) + b'"}',  # huge line
        b"\xef\xbb\xbf" + GOOD[1],            # BOM
        GOOD[2] + b"\r",                      # CRLF line ending is fine
        b"null",
    ]
    p = run_cli("-", stdin=b"\n".join(lines))  # no trailing newline on the last line
    assert p.returncode == 1
    assert b"Traceback" not in p.stderr
    v = verdicts(p.stdout)
    assert [x["line"] for x in v] == list(range(1, len(lines) + 1))
    assert [x["ok"] for x in v] == [True, False, False, False, False, False, False, False, False, True, False]
    assert v[1]["reason"] == v[2]["reason"] == "empty line"
    assert "JSON" in v[3]["reason"] and "JSON" in v[4]["reason"]
    assert v[5]["reason"].startswith("unknown kind")
    assert "larger than" in v[7]["reason"]
    assert b"2 valid, 9 invalid" in p.stderr


def test_only_newlines_and_empty_input():
    p = run_cli("-", stdin=b"")
    assert p.returncode == 0 and p.stdout == b""
    p = run_cli("-", stdin=b"\n\n\n")
    assert [x["reason"] for x in verdicts(p.stdout)] == ["empty line"] * 3


def test_missing_file_is_a_clear_error(tmp_path):
    p = run_cli(str(tmp_path / "nope.jsonl"))
    assert p.returncode == 2
    assert b"cannot open" in p.stderr and b"nope.jsonl" in p.stderr and b"Traceback" not in p.stderr


@pytest.mark.parametrize("seed", range(3))
def test_random_binary_in_process(seed):
    import random

    rnd = random.Random(seed)
    blob = bytes(rnd.getrandbits(8) for _ in range(200_000))
    out = io.BytesIO()
    good, bad = validate_lines(io.BytesIO(blob), out)
    v = verdicts(out.getvalue())
    assert good == 0 and bad == len(v) == blob.count(b"\n") + (0 if blob.endswith(b"\n") else 1)
    assert all(x["ok"] is False and x["reason"] for x in v)


def test_many_lines_in_process():
    data = b"\n".join(GOOD * 500) + b"\n"
    out = io.BytesIO()
    assert validate_lines(io.BytesIO(data), out) == (len(GOOD) * 500, 0)
