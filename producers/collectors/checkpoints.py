"""``faultline collect checkpoints``: checkpoint saves seen on disk -> ``runtime.checkpoint``.

Polls the ``--dir`` directories (no inotify: works on NFS/Lustre) and recognises, one level
down:

| layout | entry | complete when |
|---|---|---|
| PyTorch Distributed Checkpoint | directory with ``*.distcp`` | ``.metadata`` exists (DCP writes it last) |
| Hugging Face ``Trainer`` | ``checkpoint-N/`` | ``trainer_state.json`` exists (saved last) |
| Megatron-LM / NeMo (Megatron) | ``iter_0000100/`` | ``latest_checkpointed_iteration.txt`` in the parent names that iteration |
| ``torch.save`` single file | ``*.pt``, ``*.pth``, ``*.ckpt``, ``*.bin``, ``*.safetensors`` | size and mtime unchanged for ``--settle`` seconds |
| anything, with ``--done-marker NAME`` | a directory | the file ``NAME`` exists in it |

A new entry emits ``started``; completion emits ``succeeded`` with ``bytes`` and
``duration_s``, stamped with the time the checkpoint was **complete** - the mtime of what
completes it (the file itself, ``.metadata``, ``trainer_state.json``, the marker, the
Megatron tracker), kept between the round before the entry was first seen and now - not the
time a round noticed it: a save that finished just before its job was killed is reported
after the settle time and the poll interval, i.e. after the job's end, and stamped by the
round it would not count as the job's last checkpoint (``started`` is stamped the same way
with the entry's mtime at first sight, so it never comes after ``succeeded``). An entry that
is not complete ``--timeout`` seconds after it appeared (abandoned: the writer died), or that
vanishes before completing, emits ``failed`` with the reason. Entries complete at start-up
are history and emit nothing. The step is the number in the name (``checkpoint-1200`` ->
1200, ``iter_0001200`` -> 1200, ``step_1200.pt`` -> 1200), else 0.

Job: ``--job``, ``SLURM_JOB_ID``, else the Slurm jobs on this node (see ``kernel``). Without a
job nothing is published (``stats['no_job']``). A job that has left the node (it ended) still
gets the changes stamped no later than the round that found it gone: the save it completed
just before it was killed is reported after its end (remembered ``RECENT_JOBS_S``).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import time
from dataclasses import dataclass

from ...config import Settings
from ...schemas import Envelope, now_ms
from ...schemas.events import RuntimeCheckpoint, RuntimeCheckpointData
from .base import Collector, hostname, new_id
from .kernel import JobResolver

NAME = "checkpoints"
HELP = "watch checkpoint directories (DCP, HF, Megatron, torch.save, done marker) -> runtime.checkpoint"
INTERVAL_S = 5.0
#: how long a job that left the node is remembered for changes stamped while it was there
RECENT_JOBS_S = 3600.0
MAX_RECENT_JOBS = 256

log = logging.getLogger("faultline.collect.checkpoints")

FILE_EXTS = (".pt", ".pth", ".ckpt", ".bin", ".safetensors")
_HF = re.compile(r"^checkpoint-(\d+)$")
_MEGATRON = re.compile(r"^iter_(\d{7})$")
_NUM = re.compile(r"(\d+)")
_TMP = re.compile(r"\.(tmp|partial|part|incomplete)$|^\.|~$")


def step_of(name: str) -> int:
    m = _HF.match(name) or _MEGATRON.match(name)
    if m:
        return int(m.group(1))
    nums = _NUM.findall(name.rsplit(".", 1)[0] if "." in name else name)
    return int(nums[-1]) if nums else 0


def tree_bytes(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    stack = [path]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for e in it:
                    try:
                        if e.is_dir(follow_symlinks=False):
                            stack.append(e.path)
                        elif e.is_file(follow_symlinks=False):
                            total += e.stat(follow_symlinks=False).st_size
                    except OSError:
                        continue
        except OSError:
            continue
    return total


@dataclass(slots=True)
class _Entry:
    path: str
    layout: str
    step: int
    started_ts: int
    started_mono: float
    seen_after: int = 0          # the round before the one that first saw it: it appeared after this
    size: int = -1
    mtime: float = 0.0
    stable_since: float = 0.0


class CheckpointCollector(Collector):
    name = NAME
    interval_s = INTERVAL_S

    def __init__(self, dirs: list[str], node: str | None = None, *, job: str | None = None,
                 done_marker: str | None = None, timeout_s: float = 1800.0, settle_s: float = 10.0,
                 jobs: JobResolver | None = None) -> None:
        self.dirs = [os.path.abspath(d) for d in dirs]
        self.node = node or hostname()
        self.source = f"checkpoints@{self.node}"
        self.done_marker = done_marker
        self.timeout_s = timeout_s
        self.settle_s = settle_s
        self.jobs = jobs or JobResolver(self.node, job)
        self._pending: dict[str, _Entry] = {}
        self._known: set[str] = set()  # complete or failed: never reported again
        self._left: dict[str, int] = {}  # job that left the node -> the round's ts that found it gone
        self._listed: set[str] = set()   # jobs on the node at the last round
        self._last_round_ts = now_ms()
        self.stats = {"started": 0, "succeeded": 0, "failed": 0, "no_job": 0}
        for d in self.dirs:  # history: what is complete now was saved before we started
            for path, layout in self._scan(d):
                if self._complete(path, layout, time.monotonic(), initial=True):
                    self._known.add(path)

    # ------------------------------------------------------------------ recognition
    def _layout(self, d: str, e: os.DirEntry) -> str | None:
        name = e.name
        if _TMP.search(name):
            return None
        if e.is_dir():
            if self.done_marker:
                return "marker"
            if _HF.match(name):
                return "hf"
            if _MEGATRON.match(name):
                return "megatron"
            try:
                with os.scandir(e.path) as it:
                    for f in it:
                        if f.name.endswith(".distcp") or f.name == ".metadata":
                            return "dcp"
            except OSError:
                return None
            return None
        if name.endswith(FILE_EXTS):
            return "file"
        return None

    def _scan(self, d: str) -> list[tuple[str, str]]:
        out = []
        try:
            with os.scandir(d) as it:
                for e in it:
                    layout = self._layout(d, e)
                    if layout:
                        out.append((e.path, layout))
        except OSError:
            pass
        return out

    def _complete(self, path: str, layout: str, mono: float, *, initial: bool = False,
                  entry: _Entry | None = None) -> bool:
        if layout == "marker":
            return os.path.exists(os.path.join(path, self.done_marker or ""))
        if layout == "dcp":
            return os.path.exists(os.path.join(path, ".metadata"))
        if layout == "hf":
            return os.path.exists(os.path.join(path, "trainer_state.json"))
        if layout == "megatron":
            try:
                with open(os.path.join(os.path.dirname(path), "latest_checkpointed_iteration.txt")) as fh:
                    latest = fh.read().strip()
            except OSError:
                return False
            return latest.isdigit() and int(latest) >= step_of(os.path.basename(path))
        # single file: settled
        try:
            st = os.stat(path)
        except OSError:
            return False
        if initial:
            return time.time() - st.st_mtime > self.settle_s
        assert entry is not None
        if st.st_size != entry.size or st.st_mtime != entry.mtime:
            entry.size, entry.mtime, entry.stable_since = st.st_size, st.st_mtime, mono
            return False
        return mono - entry.stable_since >= self.settle_s and time.time() - st.st_mtime >= self.settle_s

    def _evidence(self, path: str, layout: str) -> str:
        """The file whose write completes a checkpoint of ``layout``."""
        if layout == "marker":
            return os.path.join(path, self.done_marker or "")
        if layout == "dcp":
            return os.path.join(path, ".metadata")
        if layout == "hf":
            return os.path.join(path, "trainer_state.json")
        if layout == "megatron":
            return os.path.join(os.path.dirname(path), "latest_checkpointed_iteration.txt")
        return path

    @staticmethod
    def _mtime_ts(path: str, lo: int, hi: int) -> int:
        """``path``'s mtime in epoch ms, kept within [lo, hi] (a copied file keeps an old
        mtime, a remote filesystem's clock may run ahead); ``hi`` when it cannot be read."""
        try:
            t = int(os.stat(path).st_mtime * 1000)
        except OSError:
            return hi
        return min(max(t, lo), hi)

    # ------------------------------------------------------------------ round
    def _ev(self, ts: int, job: str, e: _Entry, phase: str, **kw) -> RuntimeCheckpoint:
        return RuntimeCheckpoint(v=1, id=new_id(), ts=ts, source=self.source, node=self.node, job=job,
                                 data=RuntimeCheckpointData(phase=phase, step=e.step, path=e.path, **kw))

    def collect_sync(self) -> list[Envelope]:
        ts = now_ms()
        mono = time.monotonic()
        found: dict[str, str] = {}
        for d in self.dirs:
            for path, layout in self._scan(d):
                found[path] = layout
        changes: list[tuple[str, _Entry, dict]] = []
        for path, layout in found.items():
            if path in self._known:
                continue
            e = self._pending.get(path)
            if e is None:
                seen = self._mtime_ts(path, self._last_round_ts, ts)
                e = _Entry(path, layout, step_of(os.path.basename(path)), seen, mono,
                           seen_after=self._last_round_ts, stable_since=mono)
                self._pending[path] = e
                changes.append(("started", e, {}))
            if self._complete(path, layout, mono, entry=e):
                done = self._mtime_ts(self._evidence(path, layout), max(e.seen_after, e.started_ts), ts)
                changes.append(("succeeded", e, {"bytes": tree_bytes(path), "ts": done,
                                                 "duration_s": round((done - e.started_ts) / 1000, 3)}))
            elif mono - e.started_mono > self.timeout_s:
                changes.append(("failed", e, {"duration_s": round((ts - e.started_ts) / 1000, 3),
                                              "bytes": tree_bytes(path),
                                              "error": f"abandoned: not complete {self.timeout_s:g}s after it appeared"}))
        for path, e in list(self._pending.items()):
            if path not in found:
                changes.append(("failed", e, {"error": "removed before it was complete",
                                              "duration_s": round((ts - e.started_ts) / 1000, 3)}))
        for phase, e, _ in changes:
            if phase != "started":
                self._pending.pop(e.path, None)
                self._known.add(e.path)
        if len(self._known) > 100_000:
            self._known = set(found) & self._known
        self._last_round_ts = ts
        jobs = self.jobs.jobs()   # every round (squeue is cached): when a job leaves the node is known
        self._note_jobs(jobs, ts)
        if not changes:
            return []
        out: list[Envelope] = []
        for phase, e, kw in changes:
            ev_ts = kw.pop("ts", None) or (e.started_ts if phase == "started" else ts)
            targets = jobs + [j for j, gone in self._left.items() if ev_ts <= gone]
            if not targets:
                self.stats["no_job"] += 1
                log.debug("checkpoint %s %s with no job known on %s: not published", phase, e.path, self.node)
                continue
            self.stats[phase] += 1
            for j in targets:
                out.append(self._ev(ev_ts, j, e, phase, **kw))
        return out

    def _note_jobs(self, jobs: list[str], ts: int) -> None:
        """A job listed before and not now has left the node by ``ts``: remembered (bounded)."""
        now = set(jobs)
        for j in self._listed - now:
            self._left[j] = ts
        self._listed = now
        for j in now:
            self._left.pop(j, None)
        if len(self._left) > MAX_RECENT_JOBS or (self._left and min(self._left.values()) < ts - RECENT_JOBS_S * 1000):
            old = ts - RECENT_JOBS_S * 1000
            newest = sorted(self._left.items(), key=lambda kv: -kv[1])[:MAX_RECENT_JOBS]
            self._left = {j: t for j, t in newest if t >= old}

    async def collect(self) -> list[Envelope]:
        import asyncio

        return await asyncio.to_thread(self.collect_sync)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dir", action="append", dest="dirs", required=True, metavar="PATH",
                   help="directory checkpoints are saved into (repeatable)")
    p.add_argument("--node", help="node name (default: this host)")
    p.add_argument("--job", help="job id (default: SLURM_JOB_ID, else squeue on this node)")
    p.add_argument("--done-marker", metavar="NAME", help="a checkpoint directory is complete when NAME exists in it")
    p.add_argument("--timeout", type=float, default=1800.0, metavar="SECONDS",
                   help="not complete this long after it appeared -> failed (default 1800)")
    p.add_argument("--settle", type=float, default=10.0, metavar="SECONDS",
                   help="a single-file checkpoint is complete when unchanged this long (default 10)")


def build(args: argparse.Namespace, settings: Settings) -> CheckpointCollector:
    return CheckpointCollector(args.dirs, args.node, job=args.job or settings.extra.get("job"),
                               done_marker=args.done_marker, timeout_s=args.timeout, settle_s=args.settle)
