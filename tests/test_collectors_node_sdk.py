"""faultline.sdk: progress and checkpoints from the training process to real Kafka, never
blocking the training loop; HF / Lightning hooks (real framework tests: tests/realjobs/test_integrations_real.py)."""

from __future__ import annotations

import time
from dataclasses import replace
from types import SimpleNamespace

import orjson
import pytest
from aiokafka import AIOKafkaConsumer

from faultline import sdk
from faultline.integrations._hooks import HFHooks, LightningHooks

from conftest import free_port


async def consume(settings, n, timeout_s=20):
    c = AIOKafkaConsumer(settings.topic("fl.runtime"), bootstrap_servers=settings.kafka_bootstrap,
                         auto_offset_reset="earliest")
    await c.start()
    out = []
    try:
        deadline = time.monotonic() + timeout_s
        while len(out) < n and time.monotonic() < deadline:
            for _tp, msgs in (await c.getmany(timeout_ms=500)).items():
                out += [orjson.loads(m.value) for m in msgs]
    finally:
        await c.stop()
    return out


async def test_progress_and_checkpoints_reach_kafka(settings):
    r = sdk.Reporter("48213", 3, node="gpu-017", settings=settings, progress_every_s=0.0)
    for step in range(1, 6):
        r.progress(step, samples_per_s=400.0)
    r.checkpoint_started(5, "/ckpt/step_5")
    r.checkpoint_succeeded(5, "/ckpt/step_5", bytes=1234)
    r.checkpoint_started(6, "/ckpt/step_6")
    r.checkpoint_failed(6, "/ckpt/step_6", "OSError: [Errno 28] No space left on device")
    assert r.flush(20)
    r.close()
    got = await consume(settings, 9)
    prog = [e for e in got if e["kind"] == "runtime.progress"]
    ck = [e for e in got if e["kind"] == "runtime.checkpoint"]
    assert [e["data"]["step"] for e in prog] == [1, 2, 3, 4, 5]
    assert all(e["job"] == "48213" and e["node"] == "gpu-017" and e["data"]["rank"] == 3 for e in prog)
    assert prog[1]["data"]["step_time_s"] is not None
    assert [(e["data"]["phase"], e["data"]["step"]) for e in ck] == [
        ("started", 5), ("succeeded", 5), ("started", 6), ("failed", 6)]
    assert ck[1]["data"]["bytes"] == 1234 and ck[1]["data"]["duration_s"] >= 0
    assert "No space left" in ck[3]["data"]["error"]
    assert r.stats()["sent"] == 9 and r.stats()["dropped"] == 0


def test_never_blocks_when_the_broker_is_away(settings):
    away = replace(settings, kafka_bootstrap=f"127.0.0.1:{free_port()}")
    r = sdk.Reporter("1", 0, settings=away, max_queue=100, progress_every_s=0.0)
    t = time.perf_counter()
    for step in range(20_000):
        r.progress(step)
    elapsed = time.perf_counter() - t
    st = r.stats()
    assert st["dropped"] >= 20_000 - 100 - 1000  # bounded queue: the rest were dropped, counted
    assert st["queued"] + st["dropped"] >= 20_000 - 1
    assert elapsed < 5.0  # (generous; it is ~µs per call) the loop did not wait on Kafka
    r.close(0.5)


def test_progress_is_thinned_latest_step_wins(settings):
    r = sdk.Reporter("1", 0, settings=settings, progress_every_s=3600, start=False)
    for step in range(100):
        r.progress(step)
    assert r.stats()["queued"] == 1  # the first one; the rest held back
    r.flush(0.1)  # flush sends the held latest step
    assert r.stats()["queued"] == 2 and r._q.queue[-1][2] == 99


class Rec:
    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        return lambda *a, **kw: self.calls.append((name, a, kw))


def test_hf_hooks(tmp_path):
    rec = Rec()
    h = HFHooks(rec)
    args = SimpleNamespace(output_dir=str(tmp_path))
    state = SimpleNamespace(global_step=10, is_world_process_zero=True)
    h.on_step_end(args, state, SimpleNamespace(should_save=False))
    h.on_step_end(args, state, SimpleNamespace(should_save=True))
    (tmp_path / "checkpoint-10").mkdir()
    (tmp_path / "checkpoint-10" / "model.safetensors").write_bytes(b"x" * 100)
    h.on_save(args, state, SimpleNamespace())
    names = [(c[0], c[1][:2]) for c in rec.calls if c[0] != "flush"]
    assert names == [("progress", (10,)), ("progress", (10,)),
                     ("checkpoint_started", (10, str(tmp_path / "checkpoint-10"))),
                     ("checkpoint_succeeded", (10, str(tmp_path / "checkpoint-10")))]
    assert rec.calls[-1][2]["bytes"] == 100


def test_lightning_hooks_wrap_save_checkpoint(tmp_path):
    rec = Rec()
    h = LightningHooks(rec)

    class Trainer:
        global_step = 7
        is_global_zero = True

        def save_checkpoint(self, filepath, weights_only=False):
            if "bad" in str(filepath):
                raise OSError(28, "No space left on device")
            open(filepath, "wb").write(b"z" * 10)

    t = Trainer()
    h.setup(t)
    h.on_train_batch_end(t, None, None, None, 0)
    t.save_checkpoint(tmp_path / "ok.ckpt")
    with pytest.raises(OSError):
        t.save_checkpoint(tmp_path / "bad.ckpt")
    names = [c[0] for c in rec.calls]
    assert names == ["progress", "checkpoint_started", "checkpoint_succeeded", "checkpoint_started",
                     "checkpoint_failed"]
    assert "No space left" in rec.calls[-1][1][2]


# The callbacks against the real libraries (a real HF Trainer.train() and a real Lightning
# Trainer.fit() reporting to a real broker) run under /usr/bin/python3 with Debian's torch:
# tests/realjobs/test_integrations_real.py (the venv has no torch).
