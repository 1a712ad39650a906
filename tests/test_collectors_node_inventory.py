"""Inventory collector: real readable components on this machine, NVML ones through the fake,
versions at start and on change, inventory.change with the difference, state across restarts."""

from __future__ import annotations

import platform
from pathlib import Path

from faultline.producers.collectors.inventory import InventoryCollector, gather
from faultline.producers.collectors.nvml import load_nvml
from faultline.schemas import decode, encode

FAKE = str(Path(__file__).parent / "fakes" / "pynvml.py")


def test_gather_reads_this_machine_and_nvml():
    nv = load_nvml(FAKE)
    nv.reset(2)
    nv.nvmlInit()
    v = gather(nv)
    assert v["kernel"] == platform.release()
    assert v["os"]
    assert (v["driver"], v["cuda"], v["gpu_firmware"]) == ("570.86.10", "12.8", "96.00.89.00.01")
    assert set(v) <= {"driver", "cuda", "nccl", "gpu_firmware", "bmc_firmware", "bios", "kernel", "os", "image",
                      "framework", "container_runtime", "ofed"}


def test_versions_at_start_and_on_change_with_state(tmp_path, monkeypatch):
    state = str(tmp_path / "inv.json")
    stack = {"driver": "550.54.15", "kernel": "6.1.0", "nccl": "2.20.5"}
    c = InventoryCollector("gpu-017", state_path=state, gather_fn=lambda: dict(stack))
    evs = c.collect_sync()
    assert [e.kind for e in evs] == ["inventory.versions"] and evs[0].data == stack
    assert c.collect_sync() == []  # unchanged: nothing
    stack["nccl"] = "2.21.5"
    evs = c.collect_sync()
    assert [e.kind for e in evs] == ["inventory.versions", "inventory.change"]
    ch = evs[1].data
    assert (ch.component, ch.from_, ch.to) == ("nccl", "2.20.5", "2.21.5")
    wire = decode(encode(evs[1]))
    assert wire.data.from_ == "2.20.5"
    assert b'"from":"2.20.5"' in encode(evs[1])
    # agent restarts after a driver upgrade at reboot: the change is reported from the state file
    stack["driver"] = "570.86.10"
    del stack["kernel"]
    c2 = InventoryCollector("gpu-017", state_path=state, gather_fn=lambda: dict(stack))
    evs = c2.collect_sync()
    assert [e.kind for e in evs] == ["inventory.versions", "inventory.change", "inventory.change"]
    assert sorted((e.data.component, e.data.from_, e.data.to) for e in evs[1:]) == [
        ("driver", "550.54.15", "570.86.10"), ("kernel", "6.1.0", "(absent)")]
    c3 = InventoryCollector("gpu-017", state_path=state, gather_fn=lambda: dict(stack))
    assert [e.kind for e in c3.collect_sync()] == ["inventory.versions"]  # start: versions only


def test_nccl_from_a_running_process_that_loaded_it(tmp_path):
    """A process maps site-packages/nvidia/nccl/lib/libnccl.so.2 (any real ELF library under
    that name, loaded with ctypes): the version comes from the wheel's dist-info beside it."""
    import ctypes.util
    import shutil
    import subprocess
    import sys

    from faultline.producers.collectors.inventory import nccl_loaded

    src = ctypes.util.find_library("z") or ctypes.util.find_library("m")
    assert src, "no small shared library to stand in for libnccl"
    import glob as _g
    real = next((p for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64",
                             "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu")
                 for p in _g.glob(f"{d}/{src}*")), None)
    if real is None:
        import pytest
        pytest.skip(f"cannot locate {src} on disk")
    sp = tmp_path / "site-packages"
    lib = sp / "nvidia" / "nccl" / "lib"
    lib.mkdir(parents=True)
    shutil.copy(real, lib / "libnccl.so.2")
    (sp / "nvidia_nccl_cu12-2.21.5.dist-info").mkdir()
    p = subprocess.Popen([sys.executable, "-c",
                          f"import ctypes,time; ctypes.CDLL({str(lib / 'libnccl.so.2')!r}); print('ok', flush=True); "
                          "time.sleep(30)"], stdout=subprocess.PIPE)
    try:
        assert p.stdout.readline().strip() == b"ok"
        assert nccl_loaded() == "2.21.5"
    finally:
        p.kill()
        p.wait()
