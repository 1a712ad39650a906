"""A tiny real distributed training job for the real-jobs suite (one rank per process).

Run by ``job.sh`` under ``srun`` with the system interpreter (Debian's ``python3-torch``):
``RANK``/``WORLD_SIZE`` from ``SLURM_PROCID``/``SLURM_NTASKS``, gloo on CPU, a 3-layer MLP,
the gradients all-reduced by hand each step (what DDP does, minus the bucketing), progress
and checkpoints reported through ``faultline.sdk``, ``torch.save`` checkpoints written by
rank 0 as ``step_N.pt`` (via a ``.tmp`` file and a rename, as real trainers do).

The fault a case injects comes from the environment (``FL_FAULT``):
  none | exception (rank FL_FAULT_RANK raises KeyError at step FL_FAULT_STEP) |
  hang (that rank sleeps inside the step) | ckpt (nothing special: the checkpoint
  directory itself fails: ENOSPC or EROFS) | oom (that rank allocates memory until the
  kernel kills it) | forever (steps never end: time limit, scancel); NAME_first: the
  fault on attempt 0 only (a requeued attempt trains FL_STEPS steps and completes).
"""

from __future__ import annotations

import datetime
import os
import site
import sys
import time

import numpy  # noqa: F401  - the system's numpy (torch 1.13 is built against it), before the venv is added

VENV_SITE = os.environ.get("FL_VENV_SITE")
if VENV_SITE:  # the project's SDK and its deps (aiokafka, msgspec) live in the venv
    before = list(sys.path)
    site.addsitedir(VENV_SITE)
    added = [p for p in sys.path if p not in before]
    sys.path[:] = before[:1] + added + before[1:]

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from faultline import sdk  # noqa: E402


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def log(msg: str) -> None:
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%dT%H:%M:%S} [rank{RANK}] {msg}", flush=True)


RANK = env_int("SLURM_PROCID", env_int("RANK", 0))
WORLD = env_int("SLURM_NTASKS", env_int("WORLD_SIZE", 1))
FAULT = os.environ.get("FL_FAULT", "none")
if FAULT.endswith("_first"):  # the fault on attempt 0 only: a requeued attempt trains FL_STEPS and completes
    FAULT = FAULT.removesuffix("_first") if env_int("SLURM_RESTART_COUNT", 0) == 0 else "none"
FAULT_RANK = env_int("FL_FAULT_RANK", 1)
FAULT_STEP = env_int("FL_FAULT_STEP", 6)
STEPS = env_int("FL_STEPS", 12)
STEP_S = float(os.environ.get("FL_STEP_S", "0.5"))
CKPT_EVERY = env_int("FL_CKPT_EVERY", 4)
CKPT_DIR = os.environ["FL_CKPT_DIR"]
CKPT_BYTES = env_int("FL_CKPT_BYTES", 0)  # extra payload per checkpoint (fills a small mount)


def save_checkpoint(model: torch.nn.Module, opt: torch.optim.Optimizer, step: int) -> None:
    path = os.path.join(CKPT_DIR, f"step_{step}.pt")
    sdk.checkpoint_started(step, path)
    try:
        state = {"step": step, "model": model.state_dict(), "optim": opt.state_dict()}
        if CKPT_BYTES:
            state["payload"] = torch.zeros(CKPT_BYTES // 4)
        torch.save(state, path + ".tmp")
        os.replace(path + ".tmp", path)
    except Exception as e:  # torch 1.13 reports a failed write as RuntimeError (no errno)
        sdk.checkpoint_failed(step, path, f"{type(e).__name__}: {e}")
        sdk.reporter().flush(3.0)
        raise
    sdk.checkpoint_succeeded(step, path, bytes=os.path.getsize(path))
    log(f"saved checkpoint {path}")


def main() -> None:
    dist.init_process_group("gloo", rank=RANK, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=env_int("FL_GLOO_TIMEOUT_S", 15)))
    sdk.init(rank=RANK, progress_every_s=1.0)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32),
                                torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(RANK)
    log(f"training: world {WORLD}, fault {FAULT}, {STEPS} steps")
    step = 0
    while FAULT == "forever" or step < STEPS:
        step += 1
        t0 = time.monotonic()
        x = torch.randn(8, 16, generator=g)
        loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        if RANK == FAULT_RANK and step == FAULT_STEP:
            inject()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= WORLD
        opt.step()
        time.sleep(max(0.0, STEP_S - (time.monotonic() - t0)))
        sdk.progress(step, step_time_s=round(time.monotonic() - t0, 4))
        if RANK == 0 and step % CKPT_EVERY == 0:
            save_checkpoint(model, opt, step)
    log(f"done: {step} steps, loss {loss.item():.4f}")
    sdk.reporter().close(5.0)
    dist.destroy_process_group()


def inject() -> None:
    if FAULT == "exception":
        log("looking up the batch's label table")
        labels: dict[str, int] = {}
        labels["validation"]  # a real bug: KeyError
    elif FAULT == "hang":
        log("waiting on a lock that never comes")
        time.sleep(3600)
    elif FAULT == "oom":
        log("building a cache that grows without bound")
        hog = []
        while True:
            hog.append(torch.ones(64 * 1024 * 1024 // 4))  # 64 MB a time, touched


if __name__ == "__main__":
    main()
