"""`faultline demo` stopped by SIGTERM (``kill``, ``timeout``) or SIGHUP (a closed terminal) stops
everything it started, as Ctrl-C does: the worker, sink and simulator run in their own
sessions, so a demo killed without handling left them running (found by `timeout 60
faultline demo`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


def processes_mentioning(text: str) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmd and (d / "stat").read_text().split()[2] != "Z":
                out.append(int(d.name))
    return out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signalled_demo_stops_what_it_started(faultline_env, tmp_path, sig):
    workdir = tmp_path / "demo"
    p = subprocess.Popen([sys.executable, "-m", "faultline.cli", "demo", "--short", "--no-live",
                          "--workdir", str(workdir)], env=faultline_env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        # started: the worker, the sink and the simulator (its log) are there
        while time.monotonic() < deadline and not (workdir / "simulate.log").exists():
            assert p.poll() is None, p.stdout.read()
            time.sleep(0.5)
        started = processes_mentioning(str(workdir))
        assert len(started) >= 3, f"worker, sink and simulator expected, got {started}"
        p.send_signal(sig)
        out, _ = p.communicate(timeout=90)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, out
    assert "everything it started is stopped" in out
    time.sleep(1)
    left = processes_mentioning(str(workdir))
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"left running: {left}"
