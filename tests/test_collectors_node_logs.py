"""Logs collector on PyTorch / NCCL-format training logs written by the test, with rotation,
truncation, multi-line tracebacks and per-signature rate limiting."""

from __future__ import annotations

import os
from pathlib import Path

from faultline.producers.collectors.logs import LogsCollector, compile_path_pattern
from faultline.schemas import decode, encode
from faultline.streams.signatures import classify

WATCHDOG = ("[rank3]:[E1129 14:00:00.123456 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=41, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, "
            "Timeout(ms)=600000) ran for 600032 milliseconds before timing out.")
NCCL_WARN = "gpu-017:4242:4300 [3] NCCL WARN NET/IB : Got completion from peer 10.0.0.7<52011> with error 12, opcode 0"
TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/app/train.py", line 88, in <module>',
    "    main()",
    '  File "/app/train.py", line 71, in main',
    "    loss = model(batch).sum()",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.15 GiB "
    "of which 1.02 GiB is free.",
]
CHAINED = [
    "Traceback (most recent call last):",
    '  File "/app/data.py", line 10, in load',
    "    open(path)",
    "FileNotFoundError: [Errno 2] No such file or directory: '/data/shard-7'",
    "",
    "During handling of the above exception, another exception occurred:",
    "",
    "Traceback (most recent call last):",
    '  File "/app/train.py", line 12, in <module>',
    "    save(ckpt)",
    "OSError: [Errno 28] No space left on device",
]

def sig(line: str) -> str:
    """The shared catalog's name for a line (the collector must agree with it)."""
    return classify(line).name


NOISE = ["step 1200 | loss 2.3411 | lr 3.0e-04 | 412.3 samples/s", "INFO: saving metrics"]


def write(p: Path, lines, mode="a"):
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, mode) as fh:
        fh.write("".join(ln + "\n" for ln in lines))


def test_path_pattern():
    rx = compile_path_pattern("{job}/rank{rank}.log")
    m = rx.search("/logs/48213/rank12.log")
    assert m and m["job"] == "48213" and m["rank"] == "12"
    assert compile_path_pattern("slurm-{job}.out").search("/home/u/slurm-99.out")["job"] == "99"


def test_signatures_blocks_job_and_rank(tmp_path):
    f = tmp_path / "48213" / "rank3.log"
    write(f, NOISE, mode="w")
    c = LogsCollector([str(tmp_path / "*" / "rank*.log")], "gpu-017", path_patterns=["{job}/rank{rank}.log"])
    assert c.collect_sync() == []  # existing content is history
    write(f, NOISE + [WATCHDOG, NCCL_WARN] + TRACEBACK + NOISE)
    evs = c.collect_sync()
    assert [e.data.signature for e in evs] == [sig(WATCHDOG), sig(NCCL_WARN), sig("\n".join(TRACEBACK))]
    assert sig("\n".join(TRACEBACK)) == "cuda_oom"
    assert all(e.job == "48213" and e.data.rank == 3 and e.node == "gpu-017" for e in evs)
    assert evs[2].data.message == "\n".join(TRACEBACK)  # one block, as printed
    for e in evs:
        assert decode(encode(e)).data.signature == e.data.signature


def test_chained_traceback_is_one_block_and_new_files_are_found(tmp_path):
    c = LogsCollector([str(tmp_path / "*.log")], "n1", job="5", rank=0, rescan_s=0)
    write(tmp_path / "worker.log", CHAINED + NOISE, mode="w")  # a file that appears after start
    evs = c.collect_sync()
    assert len(evs) == 1
    assert evs[0].data.message == "\n".join(CHAINED)
    assert evs[0].data.signature == sig("\n".join(CHAINED)) != "python_traceback"
    assert (evs[0].job, evs[0].data.rank) == ("5", 0)


def test_traceback_at_end_of_file_is_flushed(tmp_path):
    f = tmp_path / "r.log"
    write(f, [], mode="w")
    c = LogsCollector([str(f)], "n1", job="5")
    write(f, TRACEBACK)
    evs = c.collect_sync()
    assert len(evs) == 1 and evs[0].data.message.endswith("1.02 GiB is free.")


def test_rotation_and_truncation(tmp_path):
    f = tmp_path / "7" / "rank0.log"
    write(f, NOISE, mode="w")
    c = LogsCollector([str(tmp_path / "*" / "rank*.log")], "n1", path_patterns=["{job}/rank{rank}.log"])
    write(f, [WATCHDOG.replace("[Rank 3]", "[Rank 0]")])
    os.rename(f, str(f) + ".1")  # rotated away: its tail is still read once
    write(f, [NCCL_WARN], mode="w")
    evs = c.collect_sync()
    assert [e.data.signature for e in evs] == [sig(WATCHDOG), sig(NCCL_WARN)]
    with open(f, "w"):  # copytruncate
        pass
    write(f, TRACEBACK)
    evs = c.collect_sync()
    assert [e.data.signature for e in evs] == ["cuda_oom"] and evs[0].job == "7"
    assert c.tail.tails[str(f)].rotations == 1 and c.tail.tails[str(f)].truncations == 1


def test_rate_limit_per_signature(tmp_path):
    f = tmp_path / "r.log"
    write(f, [], mode="w")
    c = LogsCollector([str(f)], "n1", job="9", rank=1, burst=3, every_s=3600)
    write(f, [NCCL_WARN] * 50 + [WATCHDOG] * 2)
    evs = c.collect_sync()
    sigs = [e.data.signature for e in evs]
    assert sig(NCCL_WARN) != sig(WATCHDOG)
    assert sigs.count(sig(NCCL_WARN)) == 3 and sigs.count(sig(WATCHDOG)) == 2
    assert c.stats["rate_limited"] == 47


def test_lines_without_a_job_are_not_published(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    f = tmp_path / "r.log"
    write(f, [WATCHDOG], mode="w")
    c = LogsCollector([str(f)], "n1", from_start=True)
    assert c.collect_sync() == [] and c.stats["no_job"] == 1


def test_restart_goes_on_where_it_stopped(tmp_path):
    f = tmp_path / "3" / "rank0.log"
    write(f, NOISE, mode="w")
    state = str(tmp_path / "logs.state.json")
    kw = dict(path_patterns=["{job}/rank{rank}.log"], state_path=state)
    a = LogsCollector([str(tmp_path / "*" / "rank*.log")], "n1", **kw)
    write(f, [WATCHDOG])
    assert [e.data.signature for e in a.collect_sync()] == [sig(WATCHDOG)]
    write(f, ["step 7 | loss 2.1"])  # uninteresting line: the position still moves past it
    a.collect_sync()
    # agent down; the job keeps logging
    write(f, [NCCL_WARN])
    b = LogsCollector([str(tmp_path / "*" / "rank*.log")], "n1", **kw)
    evs = b.collect_sync()
    assert [e.data.signature for e in evs] == [sig(NCCL_WARN)]  # the line logged while down, not the old one
