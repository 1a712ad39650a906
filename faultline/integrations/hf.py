"""Hugging Face ``transformers.Trainer`` callback: progress every step, checkpoints on save.

    from faultline.integrations.hf import FaultlineCallback
    trainer = Trainer(..., callbacks=[FaultlineCallback()])

``on_step_end`` reports ``runtime.progress`` (``state.global_step``) and, when the Trainer
decided to save at this step (``control.should_save``, set by its flow callback which runs
first), ``checkpoint started``; ``on_save`` (called after ``checkpoint-N/`` is written)
reports ``succeeded`` with the directory size. Only the main process
(``state.is_world_process_zero``) reports checkpoints; every rank reports progress.
"""

from __future__ import annotations

from .. import sdk
from ._hooks import HFHooks

try:
    from transformers import TrainerCallback as _Base
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("faultline.integrations.hf needs transformers: pip install transformers") from e


class FaultlineCallback(HFHooks, _Base):  # type: ignore[misc,valid-type]
    """``TrainerCallback`` reporting to faultline (see module docstring)."""

    def __init__(self, reporter: sdk.Reporter | None = None) -> None:
        HFHooks.__init__(self, reporter)
