"""`collect prometheus`: the exposition is read by prometheus_client's parser (escapes,
timestamps, special values as Prometheus reads them; a malformed line costs only itself), and
`--once` exits non-zero with a clear message when the exporter or the broker is not there."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from faultline.producers.collectors.prometheus import PrometheusCollector, parse_text
from faultline.schemas import decode

from conftest import free_port

FL = str(Path(sys.executable).parent / "faultline")

PAGE = """# HELP node_network_up Value is 1 if operstate is 'up', 0 otherwise.
# TYPE node_network_up gauge
node_network_up{device="eth0"} 1
node_network_up{device="ib0"} 0 1700000000000
# HELP node_network_receive_bytes_total Network device statistic receive_bytes.
# TYPE node_network_receive_bytes_total counter
node_network_receive_bytes_total{device="eth0"} 1.5e+09
node_network_receive_bytes_total{device="ib0"} 42
node_network_speed_bytes{device="eth0"} 1.25e+09
node_network_speed_bytes{device="ib0"} NaN
# HELP go_gc_duration_seconds not ours: never parsed
go_gc_duration_seconds{quantile="0.5"} 3.2e-05
node_filesystem_readonly{device="/dev/sda1",fstype="ext4",mountpoint="/data \\"x\\"\\\\y\\nz"} 1
node_filesystem_readonly{device="/dev/sdb1",fstype="ntfs",mountpoint="C:\\\\new"} 0
"""


def test_parser_reads_escapes_timestamps_and_special_values():
    s = parse_text(PAGE)
    assert sorted(s) == ["node_filesystem_readonly", "node_network_receive_bytes_total",
                         "node_network_speed_bytes", "node_network_up"]
    assert s["node_network_up"] == [({"device": "eth0"}, 1.0), ({"device": "ib0"}, 0.0)]
    assert s["node_network_receive_bytes_total"][0] == ({"device": "eth0"}, 1.5e9)
    nan = s["node_network_speed_bytes"][1][1]
    assert nan != nan
    assert s["node_filesystem_readonly"][0][0]["mountpoint"] == '/data "x"\\y\nz'
    assert s["node_filesystem_readonly"][1][0]["mountpoint"] == "C:\\new"  # an escaped backslash, then n


def test_one_malformed_line_costs_only_itself():
    stats: dict[str, int] = {}
    bad = PAGE.replace('node_network_up{device="ib0"} 0 1700000000000', 'node_network_up{device="ib0" 0')
    s = parse_text(bad, stats=stats)
    assert stats == {"bad_lines": 1}
    assert s["node_network_up"] == [({"device": "eth0"}, 1.0)]
    assert len(s["node_network_receive_bytes_total"]) == 2  # the lines around it are kept
    c = PrometheusCollector([], "n1")
    ports = {e.data.port: e.data for e in c.map_samples(s, 1_000)}
    assert ports["eth0"].oper_status == "up" and ports["eth0"].speed_mbps == 10_000
    assert ports["eth0"].in_octets == 1_500_000_000


@pytest.fixture
def exporter():
    """A local HTTP exporter serving PAGE (what node_exporter would serve)."""
    body = PAGE.encode()

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), H)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/metrics"
    srv.shutdown()
    srv.server_close()


def _env(tmp_path, **kw) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    env.update({"FAULTLINE_SPOOL_DIR": str(tmp_path / "spool"), **kw})
    return env


def test_once_exporter_up_prints_events_exit_0(tmp_path, exporter):
    r = subprocess.run([FL, "collect", "prometheus", "--once", "--output", "-", "--target", exporter, "--node", "n1"],
                       capture_output=True, cwd=tmp_path, env=_env(tmp_path), timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    kinds = sorted(decode(ln).kind for ln in r.stdout.splitlines())
    assert kinds == ["net.port", "net.port"]


def test_once_exporter_unreachable_exits_2(tmp_path, exporter):
    dead = f"http://127.0.0.1:{free_port()}/metrics"
    r = subprocess.run([FL, "collect", "prometheus", "--once", "--output", "-", "--target", exporter,
                        "--target", dead, "--node", "n1"],
                       capture_output=True, text=True, cwd=tmp_path, env=_env(tmp_path), timeout=60)
    assert r.returncode == 2, r.stderr
    assert len(r.stdout.splitlines()) == 2  # the reachable target's events still went out
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("faultline collect: collector prometheus: scrape of " + dead + " failed")
    assert "is the exporter running there?" in last and "Traceback" not in r.stderr


def test_once_broker_down_exits_2_and_keeps_the_events(tmp_path, exporter):
    broker = f"127.0.0.1:{free_port()}"
    r = subprocess.run([FL, "collect", "prometheus", "--once", "--flush-timeout", "2", "--target", exporter,
                        "--node", "n1"], capture_output=True, text=True, cwd=tmp_path,
                       env=_env(tmp_path, FAULTLINE_KAFKA_BOOTSTRAP=broker), timeout=60)
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert f"the broker at {broker} did not acknowledge the events within 2 s" in last, r.stderr
    assert "stay spooled in" in last and "Traceback" not in r.stderr
    spooled = sum(p.stat().st_size for p in (tmp_path / "spool").rglob("*") if p.is_file())
    assert spooled > 0
