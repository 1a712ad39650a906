"""A tiny real Hugging Face ``Trainer`` run with faultline's FaultlineCallback (tests/realjobs).

Runs under /usr/bin/python3 (Debian's torch 1.13) with transformers 4.36.2 + accelerate 0.25.0
(the newest pair that supports torch 1.13) from a private ``--target`` dir ``FL_HF_SITE`` first
on the path, the venv's site-packages (the SDK's aiokafka/msgspec, the editable faultline) last.
No hub download: the model is a 2-layer torch module returning ``{"loss": ...}``, which the
Trainer accepts. ``save_steps=FL_CKPT_EVERY`` writes real ``checkpoint-N/`` directories.
"""

from __future__ import annotations

import os
import site
import sys

sys.path.insert(0, os.environ["FL_HF_SITE"])
import numpy  # noqa: E402,F401 - the system's numpy before anything else

if os.environ.get("FL_VENV_SITE"):
    site.addsitedir(os.environ["FL_VENV_SITE"])  # appended: system packages win

import torch  # noqa: E402
from transformers import Trainer, TrainingArguments  # noqa: E402

from faultline import sdk  # noqa: E402
from faultline.integrations.hf import FaultlineCallback  # noqa: E402


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

    def forward(self, x, y):
        return {"loss": torch.nn.functional.mse_loss(self.net(x), y)}


def main() -> None:
    torch.manual_seed(0)
    xs = torch.randn(64, 8)
    data = [{"x": x, "y": x.sum(0, keepdim=True)} for x in xs]
    rep = sdk.init(job=os.environ["FL_JOB"], rank=0, progress_every_s=0.0)
    args = TrainingArguments(output_dir=os.environ["FL_CKPT_DIR"], max_steps=int(os.environ.get("FL_STEPS", "12")),
                             save_steps=int(os.environ.get("FL_CKPT_EVERY", "4")), per_device_train_batch_size=8,
                             report_to=[], use_cpu=True, logging_steps=1000, disable_tqdm=True,
                             save_safetensors=False)
    trainer = Trainer(model=Tiny(), args=args, train_dataset=data, callbacks=[FaultlineCallback(rep)])
    trainer.train()
    rep.close(5.0)
    print("hf done", trainer.state.global_step, flush=True)


if __name__ == "__main__":
    main()
