"""The node agent's own /metrics (`faultline collect node --metrics-port P`): each collector's
counters, a failed round counted as ``round_errors``, and the spool's depth while the broker
is away. No broker: the agent's bootstrap points at a closed port, so everything spools."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from faultline.config import Settings
from faultline.producers.collectors.base import Collector, run_collector

from conftest import free_port
from test_metrics_unit import samples  # exposition text -> {(name, labels): value}

FL = str(Path(sys.executable).parent / "faultline")


class Flaky(Collector):
    """Fails its first two rounds, then returns nothing."""

    name = "flaky"
    interval_s = 0.0

    def __init__(self) -> None:
        self.n = 0

    async def collect(self):
        self.n += 1
        if self.n <= 2:
            raise OSError("source went away")
        return []


async def test_failed_rounds_are_counted(tmp_path):
    c = Flaky()

    async def sink(evs):
        return None

    await run_collector(c, Settings(), rounds=4, sink=sink)
    assert c.n == 4
    assert c.stats == {"round_errors": 2}  # created for a collector that keeps no stats


def test_agent_serves_collector_and_spool_metrics(tmp_path):
    dead, port = free_port(), free_port()
    cfg = tmp_path / "node.toml"
    cfg.write_text(f"""
[faultline]
kafka_bootstrap = "127.0.0.1:{dead}"
spool_dir = "{tmp_path / 'spool'}"
[node]
name = "gpu-017"
[collectors.storage]
paths = ["/"]
interval = 0.5
[collectors.prometheus]
targets = ["http://127.0.0.1:{dead}/metrics"]
interval = 0.5
timeout = 0.5
""")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    proc = subprocess.Popen([FL, "collect", "node", "--config", str(cfg), "--metrics-port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        deadline = time.monotonic() + 30
        got: dict = {}
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    assert r.headers["Content-Type"].startswith("text/plain")
                    got = samples(r.read().decode())
            except OSError:
                time.sleep(0.2)
                continue
            errs = got.get(("faultline_collector_stats_total",
                            (("collector", "prometheus"), ("stat", "scrape_errors"))), 0)
            backlog = got.get(("faultline_spool_backlog_bytes", (("spool", "node"),)), 0)
            if errs >= 2 and backlog > 0:
                break
            time.sleep(0.3)
        errs = got.get(("faultline_collector_stats_total", (("collector", "prometheus"), ("stat", "scrape_errors"))))
        assert errs is not None and errs >= 2, sorted(got)
        assert got[("faultline_spool_backlog_bytes", (("spool", "node"),))] > 0  # storage events wait on disk
        assert got[("faultline_spool_spooled_total", (("spool", "node"),))] > 0
        assert got[("faultline_spool_sent_total", (("spool", "node"),))] == 0
        assert got[("faultline_spool_connected", (("spool", "node"),))] == 0
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, proc.stderr.read().decode()[-2000:]


async def test_non_loopback_metrics_bind_needs_a_token(tmp_path):
    from faultline.config import ConfigError
    from faultline.producers.collectors.node import run_node

    async def sink(evs):
        return None

    try:
        await run_node([Flaky()], Settings(web_bind="0.0.0.0"), sink=sink, metrics_port=free_port())
    except ConfigError as e:
        assert "FAULTLINE_API_TOKEN" in str(e)
    else:
        raise AssertionError("a non-loopback /metrics bind without a token must be refused")
