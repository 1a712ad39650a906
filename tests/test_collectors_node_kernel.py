"""Kernel collector on real kernel-format log files (dmesg and syslog lines), with rotation
and truncation; XID PCI -> GPU index through the fake NVML."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from faultline.producers.collectors.kernel import JobResolver, KernelCollector, strip_prefix
from faultline.producers.collectors.nvml import NvmlCollector, load_nvml
from faultline.schemas import decode, encode

FAKE = str(Path(__file__).parent / "fakes" / "pynvml.py")

XID79 = "[ 9184.123456] NVRM: Xid (PCI:0000:48:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
XID31 = ("Nov 29 14:02:11 gpu-017 kernel: [ 9190.000001] NVRM: Xid (PCI:0000:18:00): 31, pid=4242, name=python, "
         "Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f1c_00000000.")
OOM = "[ 9200.5] Out of memory: Killed process 4242 (python) total-vm:12345678kB, anon-rss:9876543kB, file-rss:0kB"
HUNG = "[ 9300.1] INFO: task pt_main_thread:5151 blocked for more than 122 seconds."
LINK = "[ 9400.2] mlx5_core 0000:17:00.0 ens1f0np0: Link down"
EXT4 = "[ 9500.3] EXT4-fs error (device nvme0n1p1): ext4_journal_check_start:83: Detected aborted journal"
NOISE = "[ 9600.4] usb 1-1: new high-speed USB device number 2 using xhci_hcd"


def write(p: Path, *lines: str, mode: str = "a") -> None:
    with open(p, mode) as fh:
        fh.write("".join(ln + "\n" for ln in lines))


@pytest.fixture
def pci_map():
    nv = load_nvml(FAKE)
    nv.reset(8)
    return NvmlCollector("gpu-017", nv, xid_events=False).pci_to_index()


def test_xid_and_job_lines_follow_rotation_and_truncation(tmp_path, pci_map):
    log = tmp_path / "kern.log"
    write(log, "[    0.000000] Linux version 6.1.0", mode="w")  # history: not re-read
    c = KernelCollector("gpu-017", file=str(log), pci_map=pci_map, jobs=JobResolver("gpu-017", "48213"))
    assert c.collect_sync() == []
    write(log, XID79, XID31, NOISE)
    evs = c.collect_sync()
    assert [(e.kind, e.data.xid, e.data.gpu, e.data.pci, e.data.pid) for e in evs] == [
        ("gpu.xid", 79, 3, "0000:48:00", None), ("gpu.xid", 31, 0, "0000:18:00", 4242)]
    assert evs[1].data.message.startswith("NVRM: Xid (PCI:0000:18:00): 31")  # prefixes stripped
    # logrotate: rename + new file; the tail of the old file is still read
    write(log, OOM)
    os.rename(log, tmp_path / "kern.log.1")
    write(log, HUNG, mode="w")
    evs = c.collect_sync()
    assert [(e.kind, e.job, e.data.stream, e.data.signature) for e in evs] == [
        ("runtime.log", "48213", "kernel", "oom_killer"), ("runtime.log", "48213", "kernel", "hung_task")]
    # copytruncate: same file cut to zero and written again
    write(log, "", mode="w")
    write(log, LINK, EXT4)
    evs = c.collect_sync()
    assert [e.data.message for e in evs] == [strip_prefix(LINK), strip_prefix(EXT4)]
    assert evs[0].data.signature == "nic_link_down"
    for e in evs:
        assert decode(encode(e)).job == "48213"


def test_without_a_job_kernel_lines_are_counted_not_published(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    log = tmp_path / "kern.log"
    write(log, XID79, OOM, mode="w")
    c = KernelCollector("n1", file=str(log), from_start=True, pci_map={},
                        jobs=JobResolver("n1", None, squeue=""))
    evs = c.collect_sync()
    assert [e.kind for e in evs] == ["gpu.xid"]  # node-scoped: always published
    assert evs[0].data.gpu is None  # no NVML mapping known
    assert c.stats["no_job"] == 1


def test_job_from_slurm_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "777")
    log = tmp_path / "kern.log"
    write(log, OOM, mode="w")
    c = KernelCollector("n1", file=str(log), from_start=True, pci_map={})
    assert [e.job for e in c.collect_sync()] == ["777"]


def test_real_dev_kmsg(monkeypatch):
    """The real kernel ring buffer: lines written to /dev/kmsg (root) come back through the
    collector's /dev/kmsg reader with kernel timestamps."""
    import time
    import uuid

    from faultline.producers.collectors.kernel import KmsgSource

    try:
        src = KmsgSource()
        fd = os.open("/dev/kmsg", os.O_WRONLY)
    except OSError as e:
        pytest.skip(f"/dev/kmsg not readable/writable here ({e.strerror}): needs root")
    tag = f"faultline-test-{uuid.uuid4().hex[:8]}"
    try:
        os.write(fd, f"{tag}: INFO: task python:4243 blocked for more than 120 seconds.\n".encode())
        os.write(fd, f"{tag}: NVRM: Xid (PCI:0000:48:00): 79, pid=1, GPU has fallen off the bus.\n".encode())
    finally:
        os.close(fd)
    c = KernelCollector("n1", source=src, pci_map={"0000:48:00": 3}, jobs=JobResolver("n1", "42"))
    now = int(time.time() * 1000)
    evs = [e for e in c.collect_sync() if tag in e.data.message]
    assert [e.kind for e in evs] == ["runtime.log", "gpu.xid"]
    assert evs[0].job == "42" and evs[0].data.signature == "hung_task"
    assert evs[1].data.gpu == 3 and evs[1].data.xid == 79
    assert all(abs(e.ts - now) < 60_000 for e in evs)  # kernel monotonic time -> epoch ms
    asyncio.run(c.close())


def test_kmsg_restart_reads_what_was_logged_while_down(tmp_path):
    """Agent restart within one boot: lines logged to the real /dev/kmsg while it was down
    are read after the restart, none twice (last sequence number kept in a state file)."""
    import uuid

    from faultline.producers.collectors.kernel import KmsgSource

    try:
        fd = os.open("/dev/kmsg", os.O_WRONLY)
        first = KmsgSource(state_path=str(tmp_path / "kmsg.state"))
    except OSError as e:
        pytest.skip(f"/dev/kmsg not readable/writable here ({e.strerror}): needs root")
    tag = f"faultline-test-{uuid.uuid4().hex[:8]}"
    try:
        os.write(fd, f"{tag}: before\n".encode())
        assert [m for _, m in first.poll() if tag in m] == [f"{tag}: before"]
        first.close()  # agent down
        os.write(fd, f"{tag}: while down\n".encode())
        second = KmsgSource(state_path=str(tmp_path / "kmsg.state"))
        os.write(fd, f"{tag}: after\n".encode())
        assert [m for _, m in second.poll() if tag in m] == [f"{tag}: while down", f"{tag}: after"]
        second.close()
    finally:
        os.close(fd)
