"""Checkpoint collector on directories laid out as DCP, HF Trainer, Megatron, torch.save and a
done marker, written by the tests. Optional group ``real_torch``: real
``torch.distributed.checkpoint`` and ``torch.save`` write them from a subprocess of an
interpreter that has torch (the venv's, else Debian's ``python3-torch``); skipped with the
reason when there is none: ``pytest tests/test_collectors_node_checkpoints.py -k real_torch``."""

from __future__ import annotations

import os
import time

import pytest

from faultline.producers.collectors.checkpoints import CheckpointCollector, step_of
from faultline.producers.collectors.kernel import JobResolver
from faultline.schemas import decode, encode


def coll(d, **kw):
    kw.setdefault("settle_s", 0.0)
    return CheckpointCollector([str(d)], "gpu-017", jobs=JobResolver("gpu-017", "48213"), **kw)


def phases(evs):
    return [(e.data.phase, os.path.basename(e.data.path), e.data.step) for e in evs]


def test_step_of():
    assert step_of("checkpoint-1200") == 1200
    assert step_of("iter_0001200") == 1200
    assert step_of("step_300.pt") == 300
    assert step_of("global_step42") == 42
    assert step_of("latest.pt") == 0


def test_dcp_metadata_written_last(tmp_path):
    c = coll(tmp_path)
    d = tmp_path / "step_500"
    d.mkdir()
    (d / "__0_0.distcp").write_bytes(b"x" * 1000)
    evs = c.collect_sync()
    assert phases(evs) == [("started", "step_500", 500)]
    (d / "__1_0.distcp").write_bytes(b"y" * 1000)
    assert c.collect_sync() == []
    (d / ".metadata").write_bytes(b"m" * 24)
    evs = c.collect_sync()
    assert phases(evs) == [("succeeded", "step_500", 500)]
    assert evs[0].data.bytes == 2024 and evs[0].data.duration_s >= 0 and evs[0].job == "48213"
    assert c.collect_sync() == []  # reported once
    for e in evs:
        assert decode(encode(e)).data.phase == "succeeded"


def test_hf_and_megatron_layouts(tmp_path):
    c = coll(tmp_path)
    hf = tmp_path / "checkpoint-1200"
    hf.mkdir()
    (hf / "model.safetensors").write_bytes(b"w" * 10)
    mg = tmp_path / "iter_0001200"
    mg.mkdir()
    (mg / "mp_rank_00").mkdir()
    (mg / "mp_rank_00" / "model_optim_rng.pt").write_bytes(b"w" * 10)
    assert sorted(phases(c.collect_sync())) == [("started", "checkpoint-1200", 1200), ("started", "iter_0001200", 1200)]
    (hf / "trainer_state.json").write_text("{}")
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("1100")  # an older iteration
    assert phases(c.collect_sync()) == [("succeeded", "checkpoint-1200", 1200)]
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("1200")
    assert phases(c.collect_sync()) == [("succeeded", "iter_0001200", 1200)]


def test_single_file_settles_and_temp_files_are_ignored(tmp_path):
    c = coll(tmp_path, settle_s=0.3)
    (tmp_path / "step_77.pt.tmp").write_bytes(b"partial")
    assert c.collect_sync() == []
    f = tmp_path / "step_77.pt"
    f.write_bytes(b"a" * 100)
    assert phases(c.collect_sync()) == [("started", "step_77.pt", 77)]
    with open(f, "ab") as fh:
        fh.write(b"b" * 100)
    assert c.collect_sync() == []  # still growing
    time.sleep(0.1)
    assert c.collect_sync() == []  # unchanged, but not for --settle seconds yet
    time.sleep(0.35)
    evs = c.collect_sync()
    assert phases(evs) == [("succeeded", "step_77.pt", 77)] and evs[0].data.bytes == 200


def test_done_marker_timeout_and_removal(tmp_path):
    c = coll(tmp_path, done_marker="COMPLETE", timeout_s=0.3)
    a, b, z = tmp_path / "save-10", tmp_path / "save-20", tmp_path / "save-30"
    for d in (a, b, z):
        d.mkdir()
        (d / "shard0").write_bytes(b"s")
    assert len(c.collect_sync()) == 3
    (a / "COMPLETE").touch()
    z.joinpath("shard0").unlink()
    z.rmdir()
    evs = c.collect_sync()
    assert sorted((e.data.phase, e.data.step, e.data.error) for e in evs) == [
        ("failed", 30, "removed before it was complete"), ("succeeded", 10, None)]
    time.sleep(0.35)
    evs = c.collect_sync()
    assert phases(evs) == [("failed", "save-20", 20)] and evs[0].data.error.startswith("abandoned")


def test_existing_complete_checkpoints_are_history(tmp_path):
    d = tmp_path / "checkpoint-5"
    d.mkdir()
    (d / "trainer_state.json").write_text("{}")
    c = coll(tmp_path)
    assert c.collect_sync() == []


def torch_python(*modules: str) -> str:
    """An interpreter that can import torch (and ``modules``): the venv's, else Debian's
    ``python3-torch`` (/usr/bin/python3). Skips the optional group when there is none."""
    import shutil
    import subprocess
    import sys

    code = "import torch; " + "".join(f"import {m}; " for m in modules)
    for py in dict.fromkeys([sys.executable, shutil.which("python3") or "", "/usr/bin/python3"]):
        if py and subprocess.run([py, "-c", code], capture_output=True, timeout=120).returncode == 0:
            return py
    pytest.skip(f"optional group real_torch: no interpreter here imports torch {' '.join(modules)} "
                "(pip install torch, or apt-get install python3-torch)")


def run_py(py: str, code: str) -> None:
    import subprocess

    r = subprocess.run([py, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]


@pytest.mark.slow  # imports torch in a subprocess
def test_dcp_real_torch(tmp_path):
    py = torch_python("torch.distributed.checkpoint")
    c = coll(tmp_path)
    run_py(py, "import torch, torch.distributed.checkpoint as dcp\n"
               "w = dcp.FileSystemWriter(%r)\n"
               "save = getattr(dcp, 'save', None) or dcp.save_state_dict\n"
               "save({'w': torch.ones(64)}, storage_writer=w)\n" % str(tmp_path / "step_9"))
    assert (tmp_path / "step_9" / ".metadata").exists()
    evs = c.collect_sync()
    assert [(e.data.phase, e.data.step) for e in evs] == [("started", 9), ("succeeded", 9)]
    assert evs[1].data.bytes > 256


@pytest.mark.slow  # imports torch in a subprocess
def test_torch_save_real_torch(tmp_path):
    py = torch_python()
    c = coll(tmp_path, settle_s=0.2)
    run_py(py, "import torch; torch.save({'w': torch.ones(1024)}, %r)" % str(tmp_path / "step_3.pt"))
    evs = c.collect_sync()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(evs) < 2:
        time.sleep(0.1)
        evs += c.collect_sync()
    assert [(e.data.phase, e.data.step) for e in evs] == [("started", 3), ("succeeded", 3)]
    assert evs[1].data.bytes > 4096
