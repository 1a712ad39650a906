"""A tiny real PyTorch Lightning ``Trainer.fit`` with faultline's FaultlineCallback (tests/realjobs).

Runs under /usr/bin/python3 (Debian's torch 1.13) with pytorch-lightning 2.2.5 (the 2.2 line
supports torch 1.13, and unlike 1.9.5 it does not import torch.distributed.fsdp, which is
broken in torch 1.13 on Python 3.11) from a private ``--target`` dir ``FL_PL_SITE`` first on
the path, the venv's site-packages (the SDK's aiokafka/msgspec, the editable faultline) last.
``ModelCheckpoint(every_n_train_steps=FL_CKPT_EVERY, save_top_k=-1)`` writes real ``.ckpt``
files through ``trainer.save_checkpoint``, which the callback wraps.
"""

from __future__ import annotations

import os
import site
import sys

sys.path.insert(0, os.environ["FL_PL_SITE"])
import numpy  # noqa: E402,F401 - the system's numpy before anything else

if os.environ.get("FL_VENV_SITE"):
    site.addsitedir(os.environ["FL_VENV_SITE"])  # appended: system packages win

import pytorch_lightning as pl  # noqa: E402
import torch  # noqa: E402
from pytorch_lightning.callbacks import ModelCheckpoint  # noqa: E402

from faultline import sdk  # noqa: E402
from faultline.integrations.lightning import FaultlineCallback  # noqa: E402


class Tiny(pl.LightningModule):
    def _register_sharded_tensor_state_dict_hooks_if_available(self) -> None:
        """Not registered: on torch < 2.1 every LightningModule imports
        torch.distributed._shard.sharded_tensor for them, which torch 1.13 cannot import on
        Python 3.11 (``ValueError: mutable default ... TensorProperties``); this model holds no
        ShardedTensor, which is all the hooks are for."""

    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main() -> None:
    torch.manual_seed(0)
    xs = torch.randn(64, 8)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xs, xs.sum(1, keepdim=True)), batch_size=8)
    rep = sdk.init(job=os.environ["FL_JOB"], rank=0, progress_every_s=0.0)
    ck = ModelCheckpoint(dirpath=os.environ["FL_CKPT_DIR"], filename="step_{step}", auto_insert_metric_name=False,
                         every_n_train_steps=int(os.environ.get("FL_CKPT_EVERY", "4")), save_top_k=-1)
    trainer = pl.Trainer(max_steps=int(os.environ.get("FL_STEPS", "12")), accelerator="cpu", devices=1,
                         callbacks=[ck, FaultlineCallback(rep)], logger=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(Tiny(), data)
    rep.close(5.0)
    print("pl done", trainer.global_step, flush=True)


if __name__ == "__main__":
    main()
