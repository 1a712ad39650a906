"""NVML collector logic against tests/fakes/pynvml.py, which raises the REAL NVMLError types.

On a GPU machine the same collector runs against the real driver:
``faultline collect nvml --once --output -``.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pynvml
import pytest

from faultline.producers.collectors.nvml import NvmlCollector, NvmlUnavailable, load_nvml, norm_pci
from faultline.schemas import decode, encode

FAKE = str(Path(__file__).parent / "fakes" / "pynvml.py")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def nv():
    mod = load_nvml(FAKE)  # a fresh module object: state is not shared between tests
    mod.reset(8)
    return mod


def kinds(evs):
    return [e.kind for e in evs]


def test_fake_raises_the_real_error_types(nv):
    assert nv.NVMLError is pynvml.NVMLError
    assert nv.NVMLError_GpuIsLost is pynvml.NVMLError_GpuIsLost
    assert nv.NVMLError_NotSupported is pynvml.NVMLError_NotSupported


def test_sample_every_gpu_with_contract_fields(nv):
    g = nv.GPUS[2]
    g.reasons = pynvml.nvmlClocksThrottleReasonHwSlowdown | pynvml.nvmlClocksThrottleReasonSwPowerCap
    g.ecc = {0: 12, 1: 1}
    g.nvlink_errors = {(0, pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT): 5, (3, pynvml.NVML_NVLINK_ERROR_DL_REPLAY): 2,
                       (17, pynvml.NVML_NVLINK_ERROR_DL_RECOVERY): 1}
    g.pcie_replay = 7
    g.remapped = (0, 1, 1, 0)
    c = NvmlCollector("gpu-017", nv, xid_events=False)
    evs = c.collect_sync()
    assert kinds(evs) == ["gpu.sample"] * 8
    d = evs[2].data
    assert (d.gpu, d.util_pct, d.temp_c, d.power_w, d.sm_clock_mhz) == (2, 97.0, 61.0, 612.0, 1980.0)
    assert d.mem_total_mib == 81920.0 and d.mem_used_mib == 71680.0
    assert d.throttle == ["hw_slowdown", "sw_power_cap"]
    assert (d.ecc_sbe, d.ecc_dbe, d.pcie_replay, d.nvlink_errors) == (12, 1, 7, 8)
    assert d.remapped_rows_pending == 1 and d.retired_pages is None
    assert evs[0].data.throttle == [] and evs[0].data.nvlink_errors == 0
    for e in evs:  # what goes on the wire decodes under the contract
        assert decode(encode(e)).data.gpu == e.data.gpu
    assert c.pci_to_index()["0000:38:00"] == 2


def test_unsupported_fields_are_null_and_not_asked_again(nv):
    g = nv.GPUS[1]
    g.unsupported |= {"nvmlDeviceGetPowerUsage", "nvmlDeviceGetRemappedRows", "nvmlDeviceGetPcieReplayCounter"}
    g.retired = {0: [0x1000, 0x2000], 1: [0x3000]}  # pre-Ampere: page retirement instead of remapping
    g.raises["nvmlDeviceGetTemperature"] = pynvml.NVMLError_Unknown()  # transient: null, asked again
    c = NvmlCollector("n", nv, xid_events=False)
    d = c.collect_sync()[1].data
    assert d.power_w is None and d.pcie_replay is None and d.remapped_rows_pending is None
    assert d.temp_c is None and d.util_pct == 97.0
    assert d.retired_pages == 3
    g.raises["nvmlDeviceGetCurrentClocksEventReasons"] = pynvml.NVMLError_FunctionNotFound()  # older driver
    g.reasons = pynvml.nvmlClocksThrottleReasonHwThermalSlowdown
    assert c.collect_sync()[1].data.throttle == ["hw_thermal"]  # through the legacy call
    calls = g.calls
    del g.raises["nvmlDeviceGetTemperature"]
    d2 = c.collect_sync()[1].data
    assert d2.temp_c == 61.0 and d2.power_w is None
    # unsupported ones were remembered: fewer calls in the second round
    assert g.calls - calls < calls


def test_gpu_lost_reports_xid79_once_and_others_keep_going(nv):
    c = NvmlCollector("gpu-017", nv, xid_events=False)
    assert len(c.collect_sync()) == 8
    nv.GPUS[3].lost = True
    evs = c.collect_sync()
    xids = [e for e in evs if e.kind == "gpu.xid"]
    assert len(xids) == 1 and xids[0].data.xid == 79 and xids[0].data.gpu == 3
    assert xids[0].data.pci == "0000:48:00" and "GpuIsLost" in xids[0].data.message
    assert sorted(e.data.gpu for e in evs if e.kind == "gpu.sample") == [0, 1, 2, 4, 5, 6, 7]
    evs = c.collect_sync()  # still lost: no second xid, the rest still sampled
    assert kinds(evs) == ["gpu.sample"] * 7
    nv.GPUS[3].lost = False  # back after a reset
    assert len(c.collect_sync()) == 8


def test_xid_events_through_the_event_api(nv):
    c = NvmlCollector("gpu-017", nv)
    try:
        nv.inject_xid(5, 48)
        nv.inject_xid(0, 13)
        deadline = time.monotonic() + 5
        got = []
        while time.monotonic() < deadline and len(got) < 2:
            got += [e for e in c.collect_sync() if e.kind == "gpu.xid"]
            time.sleep(0.05)
        assert [(e.data.gpu, e.data.xid) for e in got] == [(5, 48), (0, 13)]
        assert got[0].data.pci == "0000:68:00" and got[0].node == "gpu-017"
    finally:
        asyncio.run(c.close())


def test_no_nvml_is_a_clear_error(nv):
    nv.INIT_ERROR = pynvml.NVMLError_LibraryNotFound
    with pytest.raises(NvmlUnavailable, match="NVML not available.*nvidia-smi"):
        NvmlCollector("n", nv)
    nv.INIT_ERROR = pynvml.NVMLError_DriverNotLoaded
    with pytest.raises(NvmlUnavailable, match="DriverNotLoaded"):
        NvmlCollector("n", nv)


def test_cli_without_nvml_exits_nonzero_and_with_fake_prints_contract_json():
    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        pytest.skip("this machine has a real NVML: the no-NVML path cannot be shown here")
    except pynvml.NVMLError:
        pass
    fl = [str(Path(sys.executable).parent / "faultline")]
    r = subprocess.run(fl + ["collect", "nvml", "--once", "--output", "-"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "NVML not available" in r.stderr and r.stdout == ""
    r = subprocess.run(fl + ["collect", "nvml", "--nvml-module", FAKE, "--once", "--output", "-"],
                       capture_output=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 8 and all(decode(ln).kind == "gpu.sample" for ln in lines)


def test_norm_pci():
    assert norm_pci("00000000:3B:00.0") == "0000:3b:00"
    assert norm_pci(b"0000:3b:00.0") == "0000:3b:00"
    assert norm_pci("PCI:0000:18:00") == "0000:18:00"
