"""Log lines in the formats the real software prints.

Formats were checked against public logs (GitHub issues of pytorch/pytorch, NVIDIA/nccl,
NVIDIA/open-gpu-kernel-modules, leptonai/gpud, NVIDIA/NVSentinel, Megatron-LM, LlamaFactory)
and the sources they come from:

- NVIDIA kernel driver: ``NVRM: Xid (PCI:0000:3b:00): 79, pid=..., name=..., GPU has fallen
  off the bus.`` (XID meanings: shared/reference/xid_catalog.csv, NVIDIA Xid catalog).
- PyTorch ``ProcessGroupNCCL.cpp`` watchdog (glog prefix ``[rankN]:[E1206 18:44:12.715298746
  ProcessGroupNCCL.cpp:607]``), ``torch.OutOfMemoryError``, torch.distributed.elastic
  ``ChildFailedError`` report blocks.
- NCCL ``host:pid:tid [dev] transport/net_ib.cc:NNN NCCL WARN NET/IB : Got completion from peer
  ... with status=12 opcode=0 len=0 vendor err 129 (Recv)``.
- Linux kernel: oom-killer, memory cgroup OOM, NFS ``server ... not responding, still trying``,
  mlx5_core link state.
- Slurm slurmstepd / srun messages.
"""

from __future__ import annotations

import datetime as _dt
import random


def _dt_utc(ts_ms: int) -> _dt.datetime:
    return _dt.datetime.fromtimestamp(ts_ms / 1000, tz=_dt.timezone.utc)


def glog_prefix(level: str, ts_ms: int, rng: random.Random) -> str:
    """glog-style ``E1206 18:44:12.715298746`` (month, day, time with ns)."""
    d = _dt_utc(ts_ms)
    return f"{level}{d.month:02d}{d.day:02d} {d:%H:%M:%S}.{(ts_ms % 1000) * 1_000_000 + rng.randrange(1_000_000):09d}"


def iso(ts_ms: int) -> str:
    return _dt_utc(ts_ms).strftime("%Y-%m-%dT%H:%M:%S")


def elastic_time(ts_ms: int) -> str:
    return _dt_utc(ts_ms).strftime("%Y-%m-%d_%H:%M:%S")


# ------------------------------------------------------------------ NVIDIA driver (XID)
def xid(pci: str, code: int, pid: int | None, detail: str, name: str | None = "python3") -> str:
    if pid is None:
        return f"NVRM: Xid (PCI:{pci}): {code}, pid='<unknown>', name=<unknown>, {detail}"
    return f"NVRM: Xid (PCI:{pci}): {code}, pid={pid}, name={name}, {detail}"


def xid_detail(code: int, rng: random.Random) -> str:
    """The text after ``pid=..., name=...,`` for the XIDs the simulator uses."""
    if code == 79:
        return "GPU has fallen off the bus."
    if code == 48:
        part = rng.randrange(0, 12)
        return (f"Ch 0000000{rng.randrange(1, 9)}, An uncorrectable double bit error (DBE) has been detected "
                f"on GPU in the framebuffer at partition {part}, subpartition {rng.randrange(2)}.")
    if code == 63:
        return f"Row Remapper: New row (0x{rng.randrange(1 << 24):08x}) Marked for Remapping, reset gpu to activate."
    if code == 64:
        return f"Row Remapper Error: Failed to remap row (0x{rng.randrange(1 << 24):08x}), remapping resources exhausted."
    if code == 74:
        link = rng.randrange(18)
        return f"NVLink: fatal error detected on link {link}(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)"
    if code == 92:
        return "High single-bit ECC error rate detected"
    if code == 94:
        return "Contained: SM (0x1). RST: No, D-RST: No"
    if code == 95:
        return "Uncontained: FBHUB. RST: Yes, D-RST: No"
    if code == 13:
        return (f"Graphics SM Warp Exception on (GPC {rng.randrange(8)}, TPC {rng.randrange(9)}, "
                f"SM {rng.randrange(2)}): Out Of Range Address")
    if code == 31:
        return (f"Ch 0000000{rng.randrange(1, 9)}, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_"
                f"{rng.randrange(4)} faulted @ 0x7f{rng.randrange(1 << 24):06x}_{rng.randrange(1 << 20):05x}000. "
                f"Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ")
    if code == 43:
        return f"Ch 000000{rng.randrange(8, 32):02x}"
    if code == 45:
        return f"Ch 0000000{rng.randrange(1, 9)}"
    if code == 119:
        return (f"Timeout after 6s of waiting for RPC response from GPU{rng.randrange(8)} GSP! Expected function "
                f"76 (GSP_RM_CONTROL) (0x20800a4c 0x4).")
    if code == 120:
        return "GSP task exception: TASK_RM, PC 0x9d2c3e, RA 0x9d1b80"
    return "Unknown error"


# ------------------------------------------------------------------ PyTorch / NCCL
OPS = ("ALLREDUCE", "_ALLGATHER_BASE", "_REDUCE_SCATTER_BASE", "ALLREDUCE", "BROADCAST")


def nccl_watchdog_block(rank: int, ts_ms: int, seq: int, op: str, numel: int, timeout_ms: int,
                        ran_ms: int, rng: random.Random) -> str:
    """What one rank prints when the ProcessGroupNCCL watchdog fires (PyTorch 2.4)."""
    p = lambda lvl: f"[rank{rank}]:[{glog_prefix(lvl, ts_ms, rng)} ProcessGroupNCCL.cpp"  # noqa: E731
    return "\n".join([
        f"{p('E')}:616] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, "
        f"OpType={op}, NumelIn={numel}, NumelOut={numel}, Timeout(ms)={timeout_ms}) ran for {ran_ms} "
        f"milliseconds before timing out.",
        f"{p('E')}:1785] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Exception (either an error or timeout) "
        f"detected by watchdog at work: {seq}, last enqueued NCCL work: {seq + rng.randrange(0, 3)}, "
        f"last completed NCCL work: {seq - 1}.",
        f"{p('E')}:630] [Rank {rank}] Timeout at NCCL work: {seq}, last enqueued NCCL work: {seq}, "
        f"last completed NCCL work: {seq - 1}.",
        f"{p('E')}:636] [Rank {rank}] Some NCCL operations have failed or timed out. Due to the asynchronous "
        f"nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
        f"{p('E')}:642] [Rank {rank}] To avoid data inconsistency, we are taking the entire process down.",
        f"{p('E')}:1595] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Process group watchdog thread terminated "
        f"with exception: [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, "
        f"OpType={op}, NumelIn={numel}, NumelOut={numel}, Timeout(ms)={timeout_ms}) ran for {ran_ms} "
        f"milliseconds before timing out.",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
    ])


def nccl_ib_completion_error(host: str, pid: int, tid: int, dev: int, peer_ip: str, local_ip: str,
                             remote_ip: str, rng: random.Random, status: int = 12, vendor_err: int = 129,
                             direction: str = "Recv") -> str:
    """NCCL's IB transport reporting a failed work completion (status=12 = retry exceeded)."""
    return (f"{host}:{pid}:{tid} [{dev}] transport/net_ib.cc:1699 NCCL WARN NET/IB : Got completion from peer "
            f"{peer_ip}<{rng.randrange(32768, 61000)}> with status={status} opcode=0 len=0 vendor err "
            f"{vendor_err} ({direction}) localGid ::ffff:{local_ip} remoteGids::ffff:{remote_ip}\n"
            f"{host}:{pid}:{tid} [{dev}] NCCL INFO transport/net.cc:1302 -> 6\n"
            f"{host}:{pid}:{tid} [{dev}] NCCL INFO proxy.cc:698 -> 6\n"
            f"{host}:{pid}:{tid} [{dev}] NCCL INFO proxy.cc:878 -> 6 [Progress Thread]")


def nccl_remote_error(rank: int, ts_ms: int, rng: random.Random, nccl_version: str = "2.21.5") -> str:
    return (f"[rank{rank}]:[{glog_prefix('E', ts_ms, rng)} ProcessGroupNCCL.cpp:1671] [PG ID 0 PG GUID 0(default_pg) "
            f"Rank {rank}] Process group watchdog thread terminated with exception: NCCL error: remote process "
            f"exited or there was a network error, NCCL version {nccl_version}\n"
            "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
            "prematurely.\nLast error:\nNET/IB : Got completion from peer with error 12, opcode 0, len 0, vendor err 129")


def _site(py: str = "3.10") -> str:
    return f"/usr/local/lib/python{py}/dist-packages"


def traceback(frames: list[tuple[str, int, str, str]], exc: str) -> str:
    """A Python traceback: frames are (file, line, function, source line)."""
    out = ["Traceback (most recent call last):"]
    for f, ln, fn, src in frames:
        out.append(f'  File "{f}", line {ln}, in {fn}')
        out.append(f"    {src}")
    out.append(exc)
    return "\n".join(out)


def train_frames(rng: random.Random) -> list[tuple[str, int, str, str]]:
    return [
        ("/workspace/train.py", 612, "<module>", "main()"),
        ("/workspace/train.py", 598, "main", "trainer.fit()"),
        ("/workspace/trainer.py", rng.randrange(300, 420), "fit", "loss = self.training_step(batch)"),
    ]


def cuda_oom(gpu: int, rng: random.Random) -> str:
    tried = rng.choice([1.0, 2.0, 2.5, 3.5, 4.0, 7.8, 12.0])
    free = round(rng.uniform(0.2, 1.8), 2)
    inuse = round(79.11 - free, 2)
    alloc = round(inuse - rng.uniform(1.0, 4.0), 2)
    reserved = round(inuse - alloc - rng.uniform(0.1, 0.6), 2)
    frames = train_frames(rng) + [
        ("/workspace/trainer.py", rng.randrange(120, 200), "training_step", "logits = self.model(**batch)"),
        (f"{_site()}/torch/nn/modules/module.py", 1553, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"),
        ("/workspace/model/attention.py", rng.randrange(80, 240), "forward",
         "attn = torch.matmul(q, k.transpose(-2, -1)) * self.scale"),
    ]
    exc = (f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {tried:.2f} GiB. GPU {gpu} has a total "
           f"capacity of 79.11 GiB of which {free:.2f} GiB is free. Process {rng.randrange(1000, 99999)} has "
           f"{inuse:.2f} GiB memory in use. Of the allocated memory {alloc:.2f} GiB is allocated by PyTorch, and "
           f"{reserved:.2f} GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large "
           "try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation "
           "for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")
    return traceback(frames, exc)


def cuda_error_block(err: str) -> str:
    """A CUDA error as PyTorch raises it (``RuntimeError: CUDA error: ...``)."""
    return (f"RuntimeError: CUDA error: {err}\nCUDA kernel errors might be asynchronously reported at some other API "
            "call, so the stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
            "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")


def application_error(rng: random.Random) -> tuple[str, bool]:
    """A user-code failure; returns (block, is_cuda_illegal_access)."""
    kind = rng.randrange(6)
    fr = train_frames(rng)
    if kind == 0:
        return traceback(fr + [("/workspace/data/collate.py", rng.randrange(30, 90), "__call__",
                                "mask = torch.stack([s['attention_mask'] for s in samples])")],
                         "KeyError: 'attention_mask'"), False
    if kind == 1:
        n = rng.choice([4096, 8192])
        return traceback(fr + [("/workspace/model/layers.py", rng.randrange(50, 300), "forward",
                                "x = x.view(bsz, seqlen, self.n_heads, self.head_dim)")],
                         f"RuntimeError: shape '[8, {n}, 32, 128]' is invalid for input of size {8 * n * 4000}"), False
    if kind == 2:
        return traceback(fr + [("/workspace/trainer.py", rng.randrange(420, 480), "training_step",
                                "assert torch.isfinite(loss), f\"loss is {loss.item()} at step {self.step}\"")],
                         f"AssertionError: loss is nan at step {rng.randrange(1000, 90000)}"), False
    if kind == 3:
        return traceback(fr + [("/workspace/trainer.py", rng.randrange(120, 200), "training_step",
                                "loss.backward()")],
                         cuda_error_block("an illegal memory access was encountered")), True
    if kind == 4:
        return traceback(fr + [("/workspace/data/dataset.py", rng.randrange(40, 120), "__getitem__",
                                "tokens = self.tokenizer(text)['input_ids'][: self.seq_len]")],
                         "TypeError: expected string or bytes-like object, got 'NoneType'"), False
    return traceback(fr + [("/workspace/model/moe.py", rng.randrange(60, 200), "forward",
                            "expert_out = self.experts[idx](tokens)")],
                     f"IndexError: index {rng.randrange(8, 64)} is out of range"), False


def elastic_child_failed(script: str, ts_ms: int, host: str, rank: int, local_rank: int, exitcode: int,
                         pid: int, others: list[tuple[int, int, int, int]] | None = None) -> str:
    """torchrun's report when a worker fails; ``others`` are (rank, local_rank, exitcode, pid)."""

    def sig_text(code: int, p: int) -> str:
        names = {6: "SIGABRT", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM", 7: "SIGBUS"}
        if code < 0:
            return f"Signal {-code} ({names.get(-code, 'SIG?')}) received by PID {p}"
        return "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"

    lines = ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
             "=" * 60, f"{script} FAILED", "-" * 60, "Failures:"]
    if others:
        for i, (r, lr, ec, p) in enumerate(others, 1):
            lines += [f"[{i}]:", f"  time      : {elastic_time(ts_ms)}", f"  host      : {host}",
                      f"  rank      : {r} (local_rank: {lr})", f"  exitcode  : {ec} (pid: {p})",
                      "  error_file: <N/A>", f"  traceback : {sig_text(ec, p)}"]
    else:
        lines.append("  <NO_OTHER_FAILURES>")
    lines += ["-" * 60, "Root Cause (first observed failure):", "[0]:",
              f"  time      : {elastic_time(ts_ms)}", f"  host      : {host}",
              f"  rank      : {rank} (local_rank: {local_rank})", f"  exitcode  : {exitcode} (pid: {pid})",
              "  error_file: <N/A>", f"  traceback : {sig_text(exitcode, pid)}", "=" * 60]
    return "\n".join(lines)


def elastic_failed_line(ts_ms: int, exitcode: int, local_rank: int, pid: int) -> str:
    d = _dt_utc(ts_ms)
    return (f"[{d:%Y-%m-%d %H:%M:%S},{ts_ms % 1000:03d}] torch.distributed.elastic.multiprocessing.api: [ERROR] "
            f"failed (exitcode: {exitcode}) local_rank: {local_rank} (pid: {pid}) of binary: /usr/bin/python")


def elastic_sigterm_line(ts_ms: int, pid: int) -> str:
    d = _dt_utc(ts_ms)
    return (f"[{d:%Y-%m-%d %H:%M:%S},{ts_ms % 1000:03d}] torch.distributed.elastic.multiprocessing.api: [WARNING] "
            f"Sending process {pid} closing signal SIGTERM")


def driver_too_old(found: int) -> str:
    return traceback([("/workspace/train.py", 612, "<module>", "main()"),
                      ("/workspace/train.py", 571, "main", "torch.cuda.set_device(local_rank)"),
                      (f"{_site()}/torch/cuda/__init__.py", 399, "set_device", "torch._C._cuda_setDevice(device)"),
                      (f"{_site()}/torch/cuda/__init__.py", 314, "_lazy_init", "torch._C._cuda_init()")],
                     f"RuntimeError: The NVIDIA driver on your system is too old (found version {found}). Please "
                     "update your GPU driver by downloading and installing a new version from the URL: "
                     "http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to install "
                     "a PyTorch version that has been compiled with your version of the CUDA driver.")


def nccl_init_error(version: str, what: str = "unhandled cuda error") -> str:
    return traceback([("/workspace/train.py", 612, "<module>", "main()"),
                      ("/workspace/train.py", 583, "main", "model = DDP(model, device_ids=[local_rank])"),
                      (f"{_site()}/torch/nn/parallel/distributed.py", 822, "__init__",
                       "_verify_param_shape_across_processes(self.process_group, parameters)"),
                      (f"{_site()}/torch/distributed/utils.py", 288, "_verify_param_shape_across_processes",
                       "return dist._verify_params_across_processes(process_group, tensors, logger)")],
                     f"torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
                     f"ProcessGroupNCCL.cpp:1970, {what} (run with NCCL_DEBUG=INFO for details), NCCL version "
                     f"{version}\nncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\n"
                     "Cuda failure 'invalid device function'")


def import_error(lib: str) -> str:
    return traceback([("/workspace/train.py", 14, "<module>", "from model import build_model"),
                      ("/workspace/model/__init__.py", 3, "<module>", "import transformer_engine.pytorch as te"),
                      (f"{_site()}/transformer_engine/__init__.py", 10, "<module>",
                       "import transformer_engine.common")],
                     f"ImportError: {_site()}/transformer_engine/{lib}: undefined symbol: "
                     "_ZN3c104cuda9SetDeviceEi")


def ckpt_oserror(errno: int, path: str) -> str:
    msgs = {28: "No space left on device", 30: "Read-only file system", 116: "Stale file handle",
            5: "Input/output error", 110: "Connection timed out"}
    frames = [("/workspace/trainer.py", 701, "save_checkpoint", "torch.save(state, tmp_path)"),
              (f"{_site()}/torch/serialization.py", 651, "save",
               "with _open_zipfile_writer(f) as opened_zipfile:"),
              (f"{_site()}/torch/serialization.py", 525, "__exit__", "self.file_like.write_end_of_file()")]
    if errno == 28:
        return traceback(frames, f"RuntimeError: [enforce fail at inline_container.cc:603] . unexpected pos "
                                 f"{9_663_676_416 + 64 * 7} vs {9_663_676_416}\n\nDuring handling of the above "
                                 f"exception, another exception occurred:\n\nOSError: [Errno 28] {msgs[28]}: '{path}'")
    return traceback(frames, f"OSError: [Errno {errno}] {msgs[errno]}: '{path}'")


def dataloader_stale(path: str, rng: random.Random) -> str:
    return traceback([("/workspace/train.py", 612, "<module>", "main()"),
                      ("/workspace/trainer.py", 288, "fit", "for batch in self.train_loader:"),
                      (f"{_site()}/torch/utils/data/dataloader.py", 1344, "_next_data", "return self._process_data(data)"),
                      (f"{_site()}/torch/utils/data/dataloader.py", 1370, "_process_data", "data.reraise()"),
                      (f"{_site()}/torch/_utils.py", 706, "reraise", "raise exception")],
                     f"OSError: Caught OSError in DataLoader worker process {rng.randrange(8)}.\nOriginal Traceback "
                     f"(most recent call last):\n  File \"/workspace/data/dataset.py\", line 88, in __getitem__\n"
                     f"    with open(self.shards[idx], 'rb') as f:\nOSError: [Errno 116] Stale file handle: "
                     f"'{path}/pretrain/shard-{rng.randrange(100000):06d}.bin'")


# ------------------------------------------------------------------ Linux kernel
def oom_kill_block(pid: int, comm: str, anon_kb: int, cgroup: bool, job: str, rng: random.Random) -> str:
    total = anon_kb + rng.randrange(10_000_000, 40_000_000)
    head = f"{comm} invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0"
    cg = (f"oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0-1,"
          f"oom_memcg=/slurm/uid_1000/job_{job},task_memcg=/slurm/uid_1000/job_{job}/step_0/task_0,"
          f"task={comm},pid={pid},uid=1000")
    kill = (f"{'Memory cgroup out of memory' if cgroup else 'Out of memory'}: Killed process {pid} ({comm}) "
            f"total-vm:{total}kB, anon-rss:{anon_kb}kB, file-rss:{rng.randrange(50_000, 900_000)}kB, "
            f"shmem-rss:{rng.randrange(0, 4_000_000)}kB, UID:1000 pgtables:{anon_kb // 480}kB oom_score_adj:0")
    return "\n".join([head, cg, kill] if cgroup else [head, kill])


def nfs_not_responding(server: str) -> str:
    return f"nfs: server {server} not responding, still trying"


def nfs_ok(server: str) -> str:
    return f"nfs: server {server} OK"


def nfs_timed_out(server: str) -> str:
    return f"nfs: server {server} not responding, timed out"


def hung_task(comm: str, pid: int, secs: int = 122) -> str:
    return (f"INFO: task {comm}:{pid} blocked for more than {secs} seconds.\n"
            "      Tainted: P           OE     5.15.0-119-generic #129-Ubuntu\n"
            "\"echo 0 > /proc/sys/kernel/hung_task_timeout_secs\" disables this message.")


def mlx5_link(pci: str, netdev: str, up: bool) -> str:
    return f"mlx5_core {pci} {netdev}: Link {'up' if up else 'down'}"


def lustre_evicted(target: str, server_nid: str) -> str:
    return (f"LustreError: 167-0: {target}-OST0003-osc-ffff8f2c3a9e1000: This client was evicted by "
            f"{target}-OST0003; in progress operations using this service will fail.")


# ------------------------------------------------------------------ Slurm
def slurm_cancelled(job: str, node: str, ts_ms: int, why: str) -> str:
    tail = f" {why}" if why else ""
    return f"slurmstepd: error: *** JOB {job} ON {node} CANCELLED AT {iso(ts_ms)}{tail} ***"


def srun_exit(node: str, task: int, code: int) -> str:
    return f"srun: error: {node}: task {task}: Exited with exit code {code}"


def srun_node_fail(node: str) -> str:
    return f"srun: error: Node failure on {node}"
