"""Log signature catalog and XID catalog: real message formats classify to the right names."""

import pytest

from faultline.streams.signatures import NAMES, classify, from_name
from faultline.streams.xid import catalog, lookup

CASES = [
    ("[rank12]:[E ProcessGroupNCCL.cpp:616] [Rank 12] Watchdog caught collective operation timeout: "
     "WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) "
     "ran for 600012 milliseconds before timing out.", "nccl_watchdog_timeout",
     {"rank": 12, "seq": 1234, "op": "ALLREDUCE", "timeout_ms": 600000}),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity "
     "of 79.15 GiB of which 1.2 GiB is free.", "cuda_oom", {"gpu": 3}),
    ("n1:1234:5678 [3] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<45213> with status=12 opcode=0",
     "nccl_remote_error", {"status": 12}),
    ("n1:1234:5678 [3] NCCL WARN Cuda failure 'unspecified launch failure'", "nccl_error", {}),
    ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n  rank      : 3 (local_rank: 3)\n"
     "  exitcode  : -6 (pid: 1234)", "elastic_child_failed", {"rank": 3, "exitcode": -6}),
    ("Traceback (most recent call last):\n  File \"train.py\", line 10, in <module>\nKeyError: 'labels'",
     "python_traceback", {"exception": "KeyError"}),
    ("python[4242]: segfault at 0 ip 00007f sp 00007ffd error 4 in libc.so.6", "segfault", {"pid": 4242}),
    ("OSError: [Errno 28] No space left on device: '/ckpt/step_100.pt'", "enospc", {}),
    ("OSError: [Errno 116] Stale file handle", "stale_file_handle", {}),
    ("ConnectionResetError: [Errno 104] Connection reset by peer", "connection_reset", {}),
    ("Out of memory: Killed process 4242 (python) total-vm:123kB", "oom_killer", {"pid": 4242, "process": "python"}),
    ("Memory cgroup out of memory: Killed process 4242 (python)", "cgroup_oom", {"pid": 4242}),
    ("INFO: task python:4242 blocked for more than 120 seconds.", "hung_task", {"seconds": 120}),
    ("nfs: server nfs01 not responding, still trying", "nfs_not_responding", {"server": "nfs01"}),
    ("mlx5_core 0000:3b:00.0 enp59s0f0: Link down", "nic_link_down", {"iface": "enp59s0f0"}),
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", "xid",
     {"xid": 79, "category": "gpu_hardware"}),
    ("mce: [Hardware Error]: Machine check events logged", "mce", {}),
    # newer drivers: no Xid number, three kernel lines
    ("NVRM: The NVIDIA GPU 0000:b7:00.0\n NVRM: (PCI ID: 10de:2330) installed in this system has\n"
     " NVRM: fallen off the bus and is not responding to commands.", "gpu_fallen_off_bus", {"pci": "0000:b7:00.0"}),
    ("NVRM: GPU at PCI:0000:3b:00: GPU has fallen off the bus.", "gpu_fallen_off_bus", {"pci": "0000:3b:00"}),
]


@pytest.mark.parametrize("msg,name,fields", CASES)
def test_classify_real_formats(msg, name, fields):
    sig = classify(msg)
    assert sig is not None and sig.name == name
    for k, v in fields.items():
        assert sig.fields.get(k) == v, (k, sig.fields)


def test_roles_and_categories():
    assert classify("torch.OutOfMemoryError: CUDA out of memory.").category == "gpu_oom"
    assert classify("torch.OutOfMemoryError: CUDA out of memory.").role == "cause"
    assert classify("[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1)").role == "symptom"
    assert classify("ValueError: bad shape").role == "weak"


def test_benign_lines_do_not_match():
    for m in ("epoch 3 step 100 loss 1.23", "saving checkpoint to /ckpt", "", "NCCL INFO Channel 00/02"):
        assert classify(m) is None


def test_from_name():
    s = from_name("cuda_oom", "x")
    assert s is not None and s.category == "gpu_oom"
    assert from_name("nope") is None
    assert set(NAMES) >= {"cuda_oom", "nccl_watchdog_timeout", "xid", "enospc", "oom_killer"}


def test_xid_catalog():
    cat = catalog()
    assert len(cat) >= 40
    assert lookup(79).category == "gpu_hardware" and lookup(79).fatal
    assert lookup(74).category == "gpu_nvlink"
    assert lookup(13).category == "driver_software" and lookup(13).app_induced
    assert lookup(43).fatal is False
    assert lookup(48).severity == "critical"
    unk = lookup(9999)
    assert unk.known is False and unk.category == "driver_software"
