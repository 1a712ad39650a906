"""The offline pipeline through the CLI, as a user runs it (real chDB store in a tmp dir):

- ``faultline findings --from F`` gives the same findings, field for field, as
  ``faultline ingest F`` + ``faultline findings``, and the same again when another process
  holds the store and ``findings`` goes through its SQL API (``sinks/api.py``, the views the
  worker serves), as ``faultline query`` does;
- ``faultline diagnose`` / ``ingest`` on a file with no contract event exit non-zero naming
  the file and what was wrong; a file with some invalid lines still diagnoses and says how many.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import orjson
import pytest

from test_findings_engine import engine_fleet
from ports import free_port

GARBAGE = b"this is not json\n\x00\x01\x02\n{\"v\": 1, \"kind\": \"nope\"}\n"
FAULTLINE = os.path.join(os.path.dirname(sys.executable), "faultline")

HOLDER = textwrap.dedent("""
    import asyncio, sys
    import faust
    from faultline import config
    from faultline.sinks import open_store
    from faultline.streams.services import Services
    from faultline.sinks.api import register_views, web_options

    path, port = sys.argv[1], int(sys.argv[2])
    settings = config.load(store_path=path)
    store = open_store(settings)          # holds the chDB directory, as a worker or sink does
    app = faust.App("fl-findings-cli-test", broker="kafka://127.0.0.1:1", web_enabled=True, web_port=port,
                    autodiscover=False, **web_options(settings))
    services = Services(settings, store=store)
    register_views(app, services)

    async def main():
        await app.web.start()
        print("up", flush=True)
        await asyncio.sleep(600)

    asyncio.run(main())
""")


def env_of(tmp_path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    env.update(extra)
    return env


def fl(tmp_path, *args: str, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([FAULTLINE, *args], capture_output=True, timeout=300, cwd=str(tmp_path),
                          env=env_of(tmp_path, **extra))


def rows_of(p: subprocess.CompletedProcess) -> list[dict]:
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    return sorted((orjson.loads(ln) for ln in p.stdout.splitlines() if ln.strip()), key=lambda r: r["id"])


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    """``faultline ARGS`` in this process (no chDB here: diagnose and findings --from only)."""
    from faultline.cli import main

    rc = main(list(args))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture(scope="module")
def fleet_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("findings-cli")
    src = d / "events.jsonl"
    src.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in engine_fleet(1)))
    return d, src


def test_findings_from_file_equal_ingest_then_findings_and_through_the_api(fleet_file, capsys, monkeypatch):
    d, src = fleet_file
    monkeypatch.chdir(d)
    rc, out, err = run_cli(capsys, "findings", "--from", str(src), "--json", "--limit", "1000")
    assert rc == 0, err
    offline = sorted((orjson.loads(ln) for ln in out.splitlines() if ln.strip()), key=lambda r: r["id"])
    store = d / "store"
    ing = fl(d, "ingest", str(src), "--store", str(store), "--quiet")
    assert ing.returncode == 0, ing.stderr.decode()[-3000:]
    stored = rows_of(fl(d, "findings", "--store", str(store), "--json", "--limit", "1000"))
    assert offline, "no finding on the lemon-node fleet"
    assert stored == offline   # every field of every finding, latest revision each
    # the counts are interrupted attempts, and one subject and window is one finding
    ro = [r for r in offline if r["kind"] == "repeat_offender"]
    assert any(r["subject"] == "node:n07" for r in ro), [r["subject"] for r in ro]
    series = [(r["kind"], r["subject"], r["window_end"] - r["window_start"]) for r in ro]
    assert len(series) == len(set(series)), series
    for r in ro:
        assert "interrupted attempt" in r["summary"] and r["count"] == len(r["incidents"]), r
    # a file with no contract event stores nothing and says so (the store is untouched)
    bad = d / "garbage.jsonl"
    bad.write_bytes(GARBAGE)
    p = fl(d, "ingest", str(bad), "--store", str(store), "--quiet")
    assert p.returncode == 2 and str(bad).encode() in p.stderr and b"is a contract event" in p.stderr, p.stderr
    # a process holds the store (chDB: one process per directory): findings go through its API
    port = free_port()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(store), str(port)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=env_of(d), cwd=str(d))
    try:
        if holder.stdout.readline().strip() != b"up":
            pytest.fail("store holder did not start: " + holder.stderr.read().decode()[-3000:])
        via_api = rows_of(fl(d, "findings", "--store", str(store), "--json", "--limit", "1000",
                             FAULTLINE_WEB_PORT=str(port)))
        assert via_api == offline
    finally:
        holder.kill()
        holder.wait()


def test_garbage_file_exits_non_zero_naming_the_file_and_the_problem(fleet_file, tmp_path, capsys, monkeypatch):
    d, src = fleet_file
    monkeypatch.chdir(tmp_path)
    bad = tmp_path / "garbage.jsonl"
    bad.write_bytes(GARBAGE)
    for args in (("diagnose", str(bad)), ("findings", "--from", str(bad))):
        rc, _, err = run_cli(capsys, *args)
        assert rc == 2, (args, rc, err)
        assert str(bad) in err and "none of its 3 non-blank line(s) is a contract event" in err, (args, err)
        assert "not valid JSON" in err, err
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"\n\n")
    rc, _, err = run_cli(capsys, "diagnose", str(empty))
    assert rc == 2 and "no contract event" in err and str(empty) in err, err
    # some invalid lines among valid ones: diagnosed, the invalid ones counted
    lines = src.read_bytes().splitlines(keepends=True)
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_bytes(b"".join(lines[:300]) + b"garbage\n{\"half\": \n" + b"".join(lines[300:600]))
    rc, out, err = run_cli(capsys, "diagnose", str(mixed), "--json")
    assert rc == 0, err
    assert "2 invalid line(s) skipped" in err and "line 301" in err, err
    assert [orjson.loads(x) for x in out.splitlines()], "no incident from the valid lines"
