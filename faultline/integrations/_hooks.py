"""Callback logic for the framework integrations, free of framework imports (so it is
testable without transformers or Lightning installed)."""

from __future__ import annotations

import functools
import os
from typing import Any

from .. import sdk


class HFHooks:
    """Hugging Face ``TrainerCallback`` hooks (see ``faultline.integrations.hf``)."""

    def __init__(self, reporter: sdk.Reporter | None = None) -> None:
        self._reporter = reporter
        self._pending: tuple[int, str] | None = None

    @property
    def reporter(self) -> sdk.Reporter:
        return self._reporter or sdk.reporter()

    @staticmethod
    def _ckpt_path(args: Any, state: Any) -> str:
        return os.path.join(str(getattr(args, "output_dir", ".")), f"checkpoint-{state.global_step}")

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self.reporter.progress(int(state.global_step))
        if getattr(control, "should_save", False) and getattr(state, "is_world_process_zero", True):
            self._pending = (int(state.global_step), self._ckpt_path(args, state))
            self.reporter.checkpoint_started(*self._pending)

    def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if not getattr(state, "is_world_process_zero", True):
            return
        step, path = self._pending or (int(state.global_step), self._ckpt_path(args, state))
        self._pending = None
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
        self.reporter.checkpoint_succeeded(step, path, bytes=size or None)

    def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self._pending is not None:  # a save that never completed
            self.reporter.checkpoint_failed(*self._pending, error="training ended before the checkpoint was saved")
            self._pending = None
        self.reporter.flush(2.0)


class LightningHooks:
    """PyTorch Lightning ``Callback`` hooks (see ``faultline.integrations.lightning``)."""

    def __init__(self, reporter: sdk.Reporter | None = None) -> None:
        self._reporter = reporter
        self._wrapped: set[int] = set()

    @property
    def reporter(self) -> sdk.Reporter:
        return self._reporter or sdk.reporter()

    def setup(self, trainer: Any, pl_module: Any = None, stage: str | None = None) -> None:
        """Wrap ``trainer.save_checkpoint``: started before the write, succeeded/failed after."""
        if id(trainer) in self._wrapped:
            return
        self._wrapped.add(id(trainer))
        original = trainer.save_checkpoint
        hooks = self

        @functools.wraps(original)
        def save_checkpoint(filepath: Any, *a: Any, **kw: Any) -> Any:
            step = int(getattr(trainer, "global_step", 0))
            path = str(filepath)
            zero = getattr(trainer, "is_global_zero", True)
            if zero:
                hooks.reporter.checkpoint_started(step, path)
            try:
                out = original(filepath, *a, **kw)
            except BaseException as e:
                if zero:
                    hooks.reporter.checkpoint_failed(step, path, f"{type(e).__name__}: {e}")
                raise
            if zero:
                size = os.path.getsize(path) if os.path.isfile(path) else None
                hooks.reporter.checkpoint_succeeded(step, path, bytes=size)
            return out

        trainer.save_checkpoint = save_checkpoint

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        self.reporter.progress(int(trainer.global_step))

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self.reporter.flush(2.0)
