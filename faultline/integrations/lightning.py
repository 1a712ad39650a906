"""PyTorch Lightning callback: progress every batch, checkpoint started/succeeded/failed.

    from faultline.integrations.lightning import FaultlineCallback
    trainer = L.Trainer(..., callbacks=[FaultlineCallback()])

Progress comes from ``on_train_batch_end`` (``trainer.global_step``). Checkpoints: at
``setup`` the callback wraps ``trainer.save_checkpoint`` (which ``ModelCheckpoint`` and user
code call), so ``started`` is reported before the write and ``succeeded`` or ``failed`` (with
the exception) after it. Works with ``lightning`` (``lightning.pytorch``) or ``pytorch_lightning``.
"""

from __future__ import annotations

from .. import sdk
from ._hooks import LightningHooks

try:
    from lightning.pytorch import Callback as _Base
except ImportError:
    try:
        from pytorch_lightning import Callback as _Base
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("faultline.integrations.lightning needs lightning: pip install lightning") from e


class FaultlineCallback(LightningHooks, _Base):  # type: ignore[misc,valid-type]
    """Lightning ``Callback`` reporting to faultline (see module docstring)."""

    def __init__(self, reporter: sdk.Reporter | None = None) -> None:
        LightningHooks.__init__(self, reporter)
