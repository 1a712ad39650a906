"""faultline's framework integrations against the real libraries (issue 15).

- Hugging Face ``Trainer``: transformers 4.36.2 + accelerate 0.25.0 (the newest pair that
  still supports torch 1.13), installed with the venv's pip into ``var/realjobs-site/hf``
  (pure-Python and abi3/cp311 wheels, cached), run under ``/usr/bin/python3`` with Debian's
  torch 1.13: a real ``Trainer.train()`` with ``FaultlineCallback`` reports progress and each
  ``checkpoint-N/`` to the real broker, and the directories are on disk.
- PyTorch Lightning: pytorch-lightning 2.2.5 (+ torchmetrics 1.3.2, lightning-utilities
  0.11.2) into ``var/realjobs-site/pl22`` (both by ``realjobs_sites.py``): a real ``Trainer.fit`` with
  ``ModelCheckpoint`` and ``FaultlineCallback`` reports progress and each ``step_N.ckpt``.
  1.9.5 cannot import here (it imports torch.distributed.fsdp, which torch 1.13 cannot import
  on Python 3.11: ``torch.distributed._shard.sharded_tensor``: ``ValueError: mutable default
  <class 'TensorProperties'> for field tensor_properties is not allowed``); 2.2.5 imports, and
  the test's LightningModule skips the ShardedTensor state-dict hooks every module registers
  on torch < 2.1 (the same import; see pl_train.py).
- torch DCP cannot run on this torch (measured, see docs/realjobs.md): Debian's 1.13 has no
  ``torch.distributed.checkpoint`` and its prototype ``torch.distributed._shard.checkpoint``
  fails with the same ValueError. That test checks that the reason still holds, so it fails
  (and must become a real run) once it does not.
"""

from __future__ import annotations

import asyncio
import functools
import os
import subprocess
import uuid
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

import realjobs_harness as harness
import realjobs_sites as sites
from faultline.config import Settings


def _site(name: str) -> Path:
    """``var/realjobs-site/<name>`` for /usr/bin/python3 (``make test`` installs it first)."""
    d, err = sites.install(name)
    if err:
        pytest.skip(f"cannot install {sites.PINS[name][0]} for /usr/bin/python3 (no package index?): {err}")
    return d


@functools.lru_cache(maxsize=1)
def _has_torch() -> bool:
    """/usr/bin/python3 has a torch package (found, not imported: an import costs 3-17 s here;
    a torch that is there but broken fails the run itself with its own error)."""
    code = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"
    return Path(harness.SYSTEM_PY).exists() and subprocess.run([harness.SYSTEM_PY, "-c", code],
                                                                capture_output=True).returncode == 0


def _torch_or_skip() -> None:
    if not _has_torch():
        pytest.skip("python3-torch not installed for /usr/bin/python3: run infra/peers/install.sh")


def _reports(kafka_bootstrap, tmp_path, script: str, site_env: dict[str, str], job: str) -> list[dict]:
    """Run ``script`` (a real trainer, 12 steps, a checkpoint every 4 into ``tmp_path/out``)
    under /usr/bin/python3 with faultline's callback on a fresh topic prefix; return the
    runtime events the callback sent (progress checked here: in order, to step 12)."""
    from faultline.streams.faust_harness import read_topic
    from faultline.streams.faust_topics import ensure_topics

    prefix = f"rj{uuid.uuid4().hex[:6]}."
    settings = replace(Settings(), kafka_bootstrap=kafka_bootstrap, topic_prefix=prefix, topic_partitions=1)
    asyncio.run(ensure_topics(settings))
    ck = tmp_path / "out"
    env = {**os.environ, **site_env, "FL_VENV_SITE": str(harness.VENV_SITE), "FL_JOB": job,
           "FL_CKPT_DIR": str(ck), "FL_STEPS": "12", "FL_CKPT_EVERY": "4", "PYTHONPATH": "",
           "FAULTLINE_KAFKA_BOOTSTRAP": kafka_bootstrap, "FAULTLINE_TOPIC_PREFIX": prefix}
    p = subprocess.run([harness.SYSTEM_PY, str(harness.HERE / script)], env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert " done 12" in p.stdout, p.stdout[-2000:]

    def enough(recs):
        return sum(1 for r in recs if b'"succeeded"' in r.value) >= 3

    recs = asyncio.run(read_topic(settings, "fl.runtime", until=enough, timeout_s=30))
    evs = [orjson.loads(r.value) for r in recs]
    assert all(e["job"] == job for e in evs)
    steps = [e["data"]["step"] for e in evs if e["kind"] == "runtime.progress"]
    assert steps == sorted(steps) and steps[-1] == 12, steps
    return evs


def _checkpoints(evs) -> list[tuple[str, int, str]]:
    return [(e["data"]["phase"], e["data"]["step"], Path(e["data"]["path"]).name) for e in evs
            if e["kind"] == "runtime.checkpoint"]


@pytest.mark.slow
def test_hf_trainer_reports_progress_and_checkpoints(kafka_bootstrap, tmp_path):
    _torch_or_skip()
    evs = _reports(kafka_bootstrap, tmp_path, "hf_train.py", {"FL_HF_SITE": str(_site("hf"))}, "hf-1")
    ck = tmp_path / "out"
    on_disk = sorted(int(d.name.split("-")[1]) for d in ck.glob("checkpoint-*") if (d / "trainer_state.json").exists())
    assert on_disk == [4, 8, 12]
    ckpts = _checkpoints(evs)
    for n in on_disk:
        assert ("started", n, f"checkpoint-{n}") in ckpts and ("succeeded", n, f"checkpoint-{n}") in ckpts, ckpts
    sizes = [e["data"]["bytes"] for e in evs if e["kind"] == "runtime.checkpoint" and e["data"]["phase"] == "succeeded"]
    assert all(b and b > 0 for b in sizes)


@pytest.mark.slow
def test_lightning_trainer_reports_progress_and_checkpoints(kafka_bootstrap, tmp_path):
    """A real ``pl.Trainer.fit`` with ``ModelCheckpoint(every_n_train_steps=4)``: the callback's
    wrapped ``trainer.save_checkpoint`` reports each ``step_N.ckpt`` started and succeeded
    (with its size on disk), progress every batch to step 12."""
    _torch_or_skip()
    evs = _reports(kafka_bootstrap, tmp_path, "pl_train.py", {"FL_PL_SITE": str(_site("pl22"))}, "pl-1")
    files = {f.name: f.stat().st_size for f in (tmp_path / "out").glob("step_*.ckpt")}
    assert sorted(files) == ["step_12.ckpt", "step_4.ckpt", "step_8.ckpt"], files
    ckpts = _checkpoints(evs)
    for name in files:
        n = int(name[5:-5])
        assert ("started", n, name) in ckpts and ("succeeded", n, name) in ckpts, ckpts
    sizes = {Path(e["data"]["path"]).name: e["data"]["bytes"] for e in evs
             if e["kind"] == "runtime.checkpoint" and e["data"]["phase"] == "succeeded"}
    assert sizes == files


_PROBE = """
import json
import numpy
out = {}
for mod in ("torch.distributed.checkpoint", "torch.distributed._shard.checkpoint"):
    try:
        __import__(mod)
        out[mod] = ""
    except Exception as e:
        out[mod] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""


@pytest.mark.slow
def test_torch_dcp_absent_from_debian_torch():
    """The torch DCP hook needs torch.distributed.checkpoint (torch >= 2.0), which Debian's 1.13
    does not ship; 1.13's prototype of it, torch.distributed._shard.checkpoint, fails at import
    on Python 3.11 inside torch (the sharded_tensor dataclass)."""
    _torch_or_skip()
    p = subprocess.run([harness.SYSTEM_PY, "-c", _PROBE], capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr[-2000:]
    err = orjson.loads(p.stdout.strip().splitlines()[-1])
    assert "No module named 'torch.distributed.checkpoint'" in err["torch.distributed.checkpoint"], \
        err or "DCP imports now: test the hook for real"
    proto = err["torch.distributed._shard.checkpoint"]
    assert "mutable default" in proto and "TensorProperties" in proto, proto or "the 1.13 prototype imports now"
