"""rdma collector on a sysfs-shaped fixture tree (the layout of /sys/class/infiniband)."""

import os
import subprocess
import sys

from faultline.producers.collectors.rdma import RdmaCollector, parse_rate_mbps
from faultline.schemas import decode, encode

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_port(root, dev, port, *, state="4: ACTIVE", phys="5: LinkUp", rate="200 Gb/sec (4X HDR)",
              counters=None, hw=None):
    p = root / dev / "ports" / str(port)
    (p / "counters").mkdir(parents=True, exist_ok=True)
    (p / "hw_counters").mkdir(exist_ok=True)
    (p / "state").write_text(state + "\n")
    (p / "phys_state").write_text(phys + "\n")
    (p / "rate").write_text(rate + "\n")
    for d, vals in (("counters", counters or {}), ("hw_counters", hw or {})):
        for k, v in vals.items():
            (p / d / k).write_text(f"{v}\n")
    return p


async def test_counters_change_between_rounds_and_state_flip(tmp_path):
    root = tmp_path / "infiniband"
    make_port(root, "mlx5_0", 1, counters={"symbol_error": 0, "link_downed": 0, "port_rcv_errors": 1,
                                           "port_xmit_discards": 0, "port_rcv_data": 1000, "port_xmit_data": 10},
              hw={"out_of_sequence": 5, "local_ack_timeout_err": 0, "np_cnp_sent": 7, "lifespan": 10})
    make_port(root, "mlx5_1", 1, rate="100 Gb/sec (2X HDR)", counters={"link_downed": 2})
    (root / "mlx5_1" / "ports" / "1" / "hw_counters" / "broken").write_text("n/a\n")  # unreadable value: skipped
    col = RdmaCollector(root, node="gpu01")
    r1 = await col.collect()
    rd = {(e.data.device, e.data.port): e for e in r1 if e.kind == "net.rdma"}
    assert set(rd) == {("mlx5_0", 1), ("mlx5_1", 1)}
    c = rd[("mlx5_0", 1)].data.counters
    assert c["out_of_sequence"] == 5 and c["np_cnp_sent"] == 7 and c["port_rcv_errors"] == 1 and "lifespan" not in c
    assert rd[("mlx5_1", 1)].data.counters == {"link_downed": 2}
    ports = {(e.data.device, e.data.port): e.data for e in r1 if e.kind == "net.port"}
    assert ports[("mlx5_0", "1")].oper_status == "up" and ports[("mlx5_0", "1")].speed_mbps == 200_000
    assert ports[("mlx5_0", "1")].in_octets == 4000 and ports[("mlx5_0", "1")].in_errors == 1
    assert all(e.node == "gpu01" and e.source == "rdma@gpu01" for e in r1)
    assert not [e for e in r1 if e.kind == "net.link"]

    # round 2: the link drops (state DOWN, phys Polling), link_downed and timeouts grow
    make_port(root, "mlx5_0", 1, state="1: DOWN", phys="2: Polling",
              counters={"link_downed": 1, "symbol_error": 40}, hw={"local_ack_timeout_err": 12})
    r2 = await col.collect()
    c2 = next(e for e in r2 if e.kind == "net.rdma" and e.data.device == "mlx5_0").data.counters
    assert (c2["link_downed"], c2["symbol_error"], c2["local_ack_timeout_err"]) == (1, 40, 12)
    assert [(e.data.device, e.data.port, e.data.state) for e in r2 if e.kind == "net.link"] == [("mlx5_0", "1", "down")]
    assert next(e for e in r2 if e.kind == "net.port" and e.data.device == "mlx5_0").data.oper_status == "down"
    for e in r1 + r2:
        assert decode(encode(e)).kind == e.kind


async def test_missing_root_is_empty_not_an_error(tmp_path):
    assert await RdmaCollector(tmp_path / "nope", node="n").collect() == []


def test_rate_parsing():
    assert parse_rate_mbps("400 Gb/sec (4X NDR)") == 400_000
    assert parse_rate_mbps("2.5 Gb/sec (1X SDR)") == 2500
    assert parse_rate_mbps("garbage") is None and parse_rate_mbps(None) is None


def test_cli_once(tmp_path):
    make_port(tmp_path, "mlx5_0", 1, counters={"link_downed": 3})
    p = subprocess.run([sys.executable, "-m", "faultline.cli", "collect", "rdma", "--root", str(tmp_path),
                        "--node", "gpu09", "--once", "--output", "-"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    evs = [decode(line.encode()) for line in p.stdout.splitlines()]
    assert [e.data.counters for e in evs if e.kind == "net.rdma"] == [{"link_downed": 3}]
