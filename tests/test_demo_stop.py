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


def test_a_lag_reading_that_never_returns_does_not_stop_the_demo(monkeypatch, tmp_path):
    """The settle loop reads both groups' lag; a reading that never returns (an admin round trip
    stuck on a broker) must not outlive the demo's own deadline: the run ends with its clear
    "did not settle" error, naming the lag as unknown. Before, the unbounded read hung the run
    (a CI run waited its full 600 s with no output). Only the demo's Kafka edges are replaced
    here (topics, worker, sink, the output readers); the simulator is a real process that ends."""
    import asyncio

    from faultline import demo as demo_mod
    from faultline.config import Settings

    async def idle(_settings, _st, stop):
        await stop.wait()

    async def never(_self):
        await asyncio.Event().wait()

    async def no_topics(_self):
        return None

    def finished_simulator(self):
        self.sim = subprocess.Popen([sys.executable, "-c", "pass"])

    monkeypatch.setattr(demo_mod, "_consume_outputs", idle)
    monkeypatch.setattr(demo_mod, "_watch_offsets", idle)
    monkeypatch.setattr(demo_mod, "LAG_TIMEOUT_S", 0.3)
    monkeypatch.setattr(demo_mod.Demo, "_reset_topics", no_topics)
    monkeypatch.setattr(demo_mod.Demo, "_start_worker", lambda self: None)
    monkeypatch.setattr(demo_mod.Demo, "_start_simulator", finished_simulator)
    monkeypatch.setattr(demo_mod.Demo, "_lag", never)
    opts = demo_mod.DemoOptions(settle_s=0.0, timeout_s=3.0, web_port=None, live=False,
                                workdir=str(tmp_path / "demo"))
    d = demo_mod.Demo(Settings(), opts)

    async def run():
        return await asyncio.wait_for(d.run(), 30)

    t0 = time.monotonic()
    with pytest.raises(RuntimeError) as e:
        asyncio.run(run())
    took = time.monotonic() - t0
    assert "did not settle within 3 s" in str(e.value), e.value
    assert "lag unknown (TimeoutError)" in str(e.value), e.value
    assert took < 15, f"the run ended {took:.1f} s after it started; its deadline was 3 s after the worker's 3 s"
