"""Prometheus collector against a REAL prometheus-node-exporter (Debian package) started on
loopback by the test, and dcgm-exporter text (its exposition format) mapped to gpu kinds."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import urllib.request

import pytest

from faultline.producers.collectors.prometheus import PrometheusCollector, parse_text
from faultline.schemas import decode, encode

from conftest import free_port

BIN = shutil.which("prometheus-node-exporter")


@pytest.fixture
def node_exporter(tmp_path):
    if BIN is None:
        pytest.skip("prometheus-node-exporter not installed: `make peers` (infra/peers/install.sh) installs it")
    port = free_port()
    log = open(tmp_path / "ne.log", "wb")
    # --no-collector.systemd: no systemd/D-Bus on this machine (shared/peers/node_exporter.md)
    p = subprocess.Popen([BIN, f"--web.listen-address=127.0.0.1:{port}", "--no-collector.systemd"],
                         stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(url, timeout=1).read(1)
                break
            except OSError:
                time.sleep(0.05)
        else:
            pytest.fail(f"node_exporter did not answer on {url}: see {tmp_path / 'ne.log'}")
        yield url
    finally:
        os.kill(p.pid, signal.SIGTERM)  # by PID, ours only
        p.wait(timeout=10)
        log.close()


async def test_real_node_exporter_maps_disks_filesystems_and_nics(node_exporter, tmp_path):
    c = PrometheusCollector([node_exporter], "gpu-017", nic_exclude=r"^lo$")
    try:
        first = await c.collect()
        kinds = {e.kind for e in first}
        assert {"storage.sample", "storage.mount", "net.port"} <= kinds
        root = [e for e in first if e.kind == "storage.sample" and e.data.path == "/"]
        assert root and 0 < root[0].data.used_pct < 100 and root[0].data.write_iops is None
        ports = [e for e in first if e.kind == "net.port"]
        assert all(e.data.device == "gpu-017" and e.data.port != "lo" for e in ports)
        assert any(e.data.oper_status == "up" and e.data.in_octets > 0 for e in ports)
        with open(tmp_path / "blob", "wb") as fh:  # some real disk traffic between scrapes
            fh.write(os.urandom(4 << 20))
            fh.flush()
            os.fsync(fh.fileno())
        time.sleep(1.1)
        second = await c.collect()
        root = [e for e in second if e.kind == "storage.sample" and e.data.path == "/"][0]
        assert root.data.write_iops is not None and root.data.write_iops > 0 and root.data.write_mbps > 0
        assert root.data.queue_depth is not None
        for e in second:
            assert decode(encode(e)).kind == e.kind
        assert c.stats == {"scrapes": 2, "scrape_errors": 0}
    finally:
        await c.close()


async def test_unreachable_exporter_is_counted_not_fatal():
    c = PrometheusCollector([f"http://127.0.0.1:{free_port()}/metrics"], "n1", timeout_s=1)
    try:
        assert await c.collect() == []
        assert c.stats["scrape_errors"] == 1
    finally:
        await c.close()


# dcgm-exporter 3.x exposition (default counters), two GPUs of one host
DCGM = """# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-aaaa",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-017"} 1980
DCGM_FI_DEV_SM_CLOCK{gpu="1",UUID="GPU-bbbb",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-017"} 1410
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-aaaa",pci_bus_id="00000000:18:00.0",device="nvidia0",Hostname="gpu-017"} 61
DCGM_FI_DEV_GPU_TEMP{gpu="1",UUID="GPU-bbbb",pci_bus_id="00000000:2A:00.0",device="nvidia1",Hostname="gpu-017"} 88
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-aaaa",pci_bus_id="00000000:18:00.0",device="nvidia0",Hostname="gpu-017"} 612.5
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-aaaa",pci_bus_id="00000000:18:00.0",device="nvidia0",Hostname="gpu-017"} 97
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-aaaa",pci_bus_id="00000000:18:00.0",device="nvidia0",Hostname="gpu-017"} 70000
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-aaaa",pci_bus_id="00000000:18:00.0",device="nvidia0",Hostname="gpu-017"} 11000
DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu="0",UUID="GPU-aaaa",pci_bus_id="00000000:18:00.0",device="nvidia0",Hostname="gpu-017"} 0
DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu="1",UUID="GPU-bbbb",pci_bus_id="00000000:2A:00.0",device="nvidia1",Hostname="gpu-017"} 2
DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{gpu="1",UUID="GPU-bbbb",pci_bus_id="00000000:2A:00.0",device="nvidia1",Hostname="gpu-017"} 10
DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL{gpu="1",UUID="GPU-bbbb",pci_bus_id="00000000:2A:00.0",device="nvidia1",Hostname="gpu-017"} 3
DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{gpu="1",UUID="GPU-bbbb",pci_bus_id="00000000:2A:00.0",device="nvidia1",Hostname="gpu-017"} 96
DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-aaaa",pci_bus_id="00000000:18:00.0",device="nvidia0",Hostname="gpu-017",err_code="0",err_msg="No Error"} 0
DCGM_FI_DEV_XID_ERRORS{gpu="1",UUID="GPU-bbbb",pci_bus_id="00000000:2A:00.0",device="nvidia1",Hostname="gpu-017"} 0
"""


def test_dcgm_exporter_text_maps_to_gpu_sample_and_xid():
    c = PrometheusCollector([], "ignored")
    evs = c.map_samples(parse_text(DCGM), 1_000, "t")
    assert [e.kind for e in evs] == ["gpu.sample", "gpu.sample"]
    g0, g1 = evs[0].data, evs[1].data
    assert evs[0].node == "gpu-017" and g0.uuid == "GPU-aaaa"
    assert (g0.util_pct, g0.temp_c, g0.power_w, g0.mem_used_mib, g0.mem_total_mib) == (97, 61, 612.5, 70000, 81000)
    assert g1.ecc_dbe == 2 and g1.nvlink_errors == 13 and g1.throttle == ["sw_thermal", "hw_thermal"]
    assert g1.util_pct is None  # not exported for that GPU: null, not zero
    evs = c.map_samples(parse_text(DCGM.replace('Hostname="gpu-017"} 0\n', 'Hostname="gpu-017"} 79\n')), 2_000, "t")
    xids = [e for e in evs if e.kind == "gpu.xid"]
    assert [(e.data.gpu, e.data.xid, e.data.pci) for e in xids] == [(1, 79, "0000:2a:00")]
    for e in evs:
        assert decode(encode(e)).kind == e.kind
