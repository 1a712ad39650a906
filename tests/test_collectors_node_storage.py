"""Storage collector against this machine's real /proc/diskstats, mountinfo and statvfs."""

from __future__ import annotations

import os
import threading
import time

import pytest

from faultline.producers.collectors.storage import (
    StorageCollector, read_diskstats, read_mountinfo, read_mountstats,
)
from faultline.schemas import decode, encode


def _root_backed_by_block_device() -> bool:
    m = read_mountinfo().get("/")
    return m is not None and m.dev in read_diskstats()


def test_mountinfo_and_diskstats_are_real_and_joined():
    mounts = read_mountinfo()
    assert "/" in mounts and mounts["/"].fs_type
    disk = read_diskstats()
    assert disk, "no block devices in /proc/diskstats"
    assert all(len(v) == 9 for v in disk.values())


def test_rates_from_two_rounds_see_direct_writes(tmp_path):
    if not _root_backed_by_block_device():
        pytest.skip("/ is not on a block device listed in /proc/diskstats on this machine")
    c = StorageCollector("n1", paths=["/"])
    first = c.collect_sync()
    assert [e.kind for e in first] == ["storage.mount", "storage.sample"]
    assert first[0].data.state == "ok"
    assert first[1].data.write_iops is None  # no rate before a second round
    assert 0 < first[1].data.used_pct < 100
    # 8 MiB with O_DIRECT so the page cache cannot absorb it before the next round
    path = os.path.join(str(tmp_path), "blob")
    buf = bytearray(1 << 20)
    import mmap

    m = mmap.mmap(-1, 1 << 20)
    m.write(bytes(buf))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_DIRECT)
    try:
        for _ in range(8):
            os.write(fd, m)
    finally:
        os.close(fd)
    time.sleep(0.2)
    second = c.collect_sync()
    s = second[1].data
    assert s.path == "/" and s.fs_type == read_mountinfo()["/"].fs_type
    assert s.write_iops > 0 and s.write_mbps > 0 and s.write_lat_ms is not None and s.queue_depth >= 0
    for e in second:
        assert decode(encode(e)).kind == e.kind


def test_default_watches_real_file_systems_only():
    evs = StorageCollector("n1").collect_sync()
    paths = {e.data.path for e in evs}
    assert "/" in paths and "/proc" not in paths and "/sys/fs/cgroup" not in paths


def test_missing_and_not_mounted_paths(tmp_path):
    evs = StorageCollector("n1", paths=[str(tmp_path / "nope"), str(tmp_path)]).collect_sync()
    states = {e.data.path: (e.data.state, e.data.error) for e in evs if e.kind == "storage.mount"}
    assert states[str(tmp_path / "nope")][0] == "missing" and "does not exist" in states[str(tmp_path / "nope")][1]
    assert states[str(tmp_path)] == ("missing", f"{tmp_path} is not mounted")


def test_hung_mount_probe_reports_stale_without_hanging():
    release = threading.Event()
    started = []

    def hung_probe(path):  # stands in for stat() on a dead NFS server: blocks in the kernel
        started.append(path)
        release.wait(30)
        return "ok", None, 10.0

    c = StorageCollector("n1", paths=["/"], probe_timeout_s=0.3, probe=hung_probe)
    try:
        t = time.monotonic()
        evs = c.collect_sync()
        assert time.monotonic() - t < 2
        assert evs[0].data.state == "stale" and "did not return within 0.3s" in evs[0].data.error
        assert [e.kind for e in evs] == ["storage.mount"]  # no sample from a stale mount
        evs = c.collect_sync()
        assert evs[0].data.state == "stale" and "still blocked" in evs[0].data.error
        assert len(started) == 1  # the stuck probe was not duplicated
    finally:
        release.set()
    time.sleep(0.1)
    evs = c.collect_sync()
    assert evs[0].data.state == "ok"


def test_full_and_readonly(tmp_path):
    c = StorageCollector("n1", paths=["/"], full_pct=0.001)
    assert c.collect_sync()[0].data.state == "full"
    ro = StorageCollector("n1", paths=["/"], probe=lambda p: ("readonly", "mounted read-only", 50.0))
    assert ro.collect_sync()[0].data.state == "readonly"


NFS_MOUNTSTATS = """device /dev/vda mounted on / with fstype ext4
device nfs-1:/export/ckpt mounted on /ckpt with fstype nfs4 statvers=1.1
\topts:\trw,vers=4.2,rsize=1048576,wsize=1048576
\tper-op statistics
\t        NULL: 0 0 0 0 0 0 0 0 0
\t        READ: 100 100 0 16000 104857600 50 900 1000 0
\t       WRITE: 40 40 0 41943040 8000 10 300 400 0
"""


def test_nfs_mountstats_parser(tmp_path):
    p = tmp_path / "mountstats"
    p.write_text(NFS_MOUNTSTATS)
    st = read_mountstats(str(p))
    assert st == {"/ckpt": (100, 104857600, 1000, 40, 41943040, 400)}


def test_nfs_mount_rates_from_mountstats(tmp_path):
    """An NFS mount (mountinfo + mountstats of a proc tree written by the test; the probe
    stats the real directory): rates from two rounds of per-op READ/WRITE statistics."""
    mnt = tmp_path / "ckpt"
    mnt.mkdir()
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "mountinfo").write_text(
        f"27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
        f"99 27 0:52 / {mnt} rw,relatime - nfs4 nfs-1:/export/ckpt rw,vers=4.2\n")
    (proc / "diskstats").write_text(" 254       0 vda 1 0 8 1 1 0 8 1 0 1 2 0 0 0 0 0 0\n")

    def stats(r_ops, r_bytes, r_ms, w_ops, w_bytes, w_ms):
        (proc / "self" / "mountstats").write_text(
            f"device nfs-1:/export/ckpt mounted on {mnt} with fstype nfs4 statvers=1.1\n"
            "\tper-op statistics\n"
            f"\t        READ: {r_ops} {r_ops} 0 0 {r_bytes} 0 0 {r_ms} 0\n"
            f"\t       WRITE: {w_ops} {w_ops} 0 {w_bytes} 0 0 0 {w_ms} 0\n")

    stats(100, 10_000_000, 500, 10, 1_000_000, 100)
    c = StorageCollector("n1", paths=[str(mnt)], proc=str(proc))
    first = c.collect_sync()
    assert [(e.kind, getattr(e.data, "state", None)) for e in first] == [("storage.mount", "ok"), ("storage.sample", None)]
    assert first[1].data.fs_type == "nfs4" and first[1].data.read_iops is None
    stats(300, 210_000_000, 2500, 60, 51_000_000, 1100)
    time.sleep(0.5)
    d = c.collect_sync()[1].data
    assert d.read_lat_ms == 10.0 and d.write_lat_ms == 20.0  # 2000 ms / 200 ops, 1000 ms / 50 ops
    assert 200 / 1.0 < d.read_iops < 200 / 0.45 and d.read_mbps > 200 and d.write_mbps > 50
    assert d.queue_depth > 0
