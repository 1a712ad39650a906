"""``faultline collect slurm-hook``: one job's start or end, from a Slurm Prolog / Epilog.

``infra/deploy/slurm/faultline-slurm-hook`` (slurm.conf ``Prolog=`` and ``Epilog=``) calls

    faultline collect slurm-hook --phase start|end --job $SLURM_JOB_ID --cluster $SLURM_CLUSTER_NAME

and the job's ``sched.job`` goes out within a second of its start and end instead of at the
``collect slurm`` poll. The record is read the way ``collect slurm`` reads it (``scontrol show
job -o -d``, the same parser) and the event has the same stable id, ``(source, job, attempt,
state)``, so when both report a transition downstream keeps one. Both must name the same
source: run ``collect slurm --cluster <ClusterName>`` (the hook's ``--cluster`` default is
``$SLURM_CLUSTER_NAME``).

- ``start`` (Prolog): ``running``, ``start_ts`` Slurm's StartTime.
- ``end`` (Epilog): the Epilog runs while the job is ``COMPLETING`` (``scontrol`` has no final
  state yet: measured on Slurm 22.05, the cancelled job read ``JobState=COMPLETING
  Reason=None ExitCode=0:15``), so the hook waits (``--wait``, default 30 s; the wrapper
  runs it in the background, the Epilog itself returns at once) until the job leaves
  ``COMPLETING`` and reports the final state. If it does not within ``--wait``, the state is
  derived from the reason and exit code (``derive_end_state``) and says so in the log.
- Order: the end waits (at most ``START_WAIT_S``) until the start of the same job is spooled
  or sent (a marker in ``<spool_dir>/started/``), so ``running`` never follows the end.
- Multi-node jobs: Prolog and Epilog run on every node; only the job's first node reports
  (``SLURMD_NODENAME`` against the job's node list), the others exit 0 without a word.

Exits 2 with the reason when ``scontrol`` fails or the broker does not acknowledge within
``--flush-timeout`` (the event stays in the spool and goes out with the next run); the shell
wrapper logs that and still exits 0, so a faultline problem never fails or holds a job.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import time
from typing import Any

from ...config import Settings
from ...schemas import Envelope, now_ms
from .base import Collector, run_collector
from .slurm import JOB_STATES, SlurmCollector, SlurmError, jobs_from_scontrol

NAME = "slurm-hook"
HELP = "one job's start/end from a Slurm Prolog/Epilog (infra/deploy/slurm/faultline-slurm-hook)"
CUSTOM_RUN = True

log = logging.getLogger("faultline.collect.slurm_hook")

#: seconds the end phase waits for the job to leave COMPLETING
END_WAIT_S = 30.0
#: seconds between two ``scontrol`` reads while waiting
POLL_S = 0.5
#: Slurm's Reason while COMPLETING -> contract state (when the final state never showed)
REASON_STATES = {"TimeLimit": "timeout", "Deadline": "timeout", "OutOfMemory": "out_of_memory",
                 "NodeFail": "node_fail", "NodeDown": "node_fail", "Preempted": "preempted"}


def derive_end_state(rec: dict[str, Any]) -> str:
    """A completing job's end state from its Reason and ExitCode (the fallback when
    slurmctld did not show the final state within the wait): a known reason first, then
    exit 0 -> completed, SIGTERM/SIGKILL without a reason -> cancelled, else failed."""
    reason = rec.get("reason") or ""
    for key, state in REASON_STATES.items():
        if reason.startswith(key):
            return state
    if rec.get("exit_code") == 0 and not rec.get("signal"):
        return "completed"
    if rec.get("signal") in (9, 15) and not reason:
        return "cancelled"
    return "failed"


class SlurmHook(Collector):
    """Reads the job (``prepare``, waiting for an end state), then one round returns its
    start or end ``sched.job``."""

    name = NAME

    def __init__(self, job: str, phase: str, *, cluster: str | None = None, node: str | None = None,
                 wait_s: float = END_WAIT_S, env: dict[str, str] | None = None, timeout_s: float = 20.0) -> None:
        if phase not in ("start", "end"):
            raise ValueError(f"phase must be start or end, got {phase!r}")
        self.job, self.phase, self.node, self.wait_s = str(job), phase, node, wait_s
        self.slurm = SlurmCollector(cluster=cluster, use_sacct=False, nodes=False, env=env, timeout_s=timeout_s)
        self.derived = False
        self.events: list[Envelope] | None = None

    async def read(self) -> dict[str, Any]:
        out = await self.slurm._run("scontrol", "show", "job", "-o", "-d", self.job)
        recs = [r for r in jobs_from_scontrol(out) if r["job"] == self.job]
        if not recs:
            raise SlurmError(f"`scontrol show job {self.job}` does not know the job (already past MinJobAge?)")
        return recs[0]

    async def prepare(self) -> list[Envelope]:
        """The event to report (``[]`` on a node that is not the job's first), before any
        publisher is opened: the end phase's wait holds no spool."""
        rec = await self.read()
        if self.node and rec["nodes"] and self.node != rec["nodes"][0]:
            log.debug("job %s: %s is not its first node (%s); that one reports", self.job, self.node, rec["nodes"][0])
            self.events = []
            return self.events
        if self.phase == "start":
            state = "running"
        else:
            deadline = time.monotonic() + self.wait_s
            while JOB_STATES.get(rec["slurm_state"]) not in _ENDS and time.monotonic() < deadline:
                await asyncio.sleep(POLL_S)
                rec = await self.read()
            state = JOB_STATES.get(rec["slurm_state"]) or ""
            if state not in _ENDS:
                state, self.derived = derive_end_state(rec), True
                log.warning("job %s still %s after %g s: end state %s derived from reason %r and exit code %s:%s",
                            self.job, rec["slurm_state"], self.wait_s, state, rec.get("reason"),
                            rec.get("exit_code"), rec.get("signal"), extra={"job": self.job})
        self.events = [self.slurm._event(rec, state, rec["attempt"], now_ms())]
        return self.events

    async def collect(self) -> list[Envelope]:
        return self.events if self.events is not None else await self.prepare()


_ENDS = frozenset({"completed", "failed", "timeout", "cancelled", "node_fail", "out_of_memory", "preempted",
                   "requeued"})


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--phase", choices=("start", "end"), help="start (Prolog) or end (Epilog); default from "
                   "$SLURM_SCRIPT_CONTEXT (prolog_* / epilog_*)")
    p.add_argument("--job", default=os.environ.get("SLURM_JOB_ID"), help="job id (default $SLURM_JOB_ID)")
    p.add_argument("--cluster", default=os.environ.get("SLURM_CLUSTER_NAME"),
                   help="cluster name of the event source, as `collect slurm --cluster` (default $SLURM_CLUSTER_NAME)")
    p.add_argument("--node", default=os.environ.get("SLURMD_NODENAME"),
                   help="this node (default $SLURMD_NODENAME): only the job's first node reports")
    p.add_argument("--wait", type=float, default=END_WAIT_S, metavar="SECONDS",
                   help=f"end: seconds to wait for the final state (default {END_WAIT_S:g})")
    p.add_argument("--output", metavar="-", help="'-' prints the event instead of publishing it")
    p.add_argument("--flush-timeout", type=float, default=5.0, metavar="SECONDS",
                   help="seconds to wait for the broker's acknowledgement (default 5; the event stays spooled)")


def build(args: argparse.Namespace, settings: Settings) -> SlurmHook:
    from ...cli import CliError

    phase = args.phase
    if phase is None:
        ctx = os.environ.get("SLURM_SCRIPT_CONTEXT", "")
        phase = "start" if ctx.startswith("prolog") else "end" if ctx.startswith("epilog") else None
    if phase is None:
        raise CliError("no --phase and $SLURM_SCRIPT_CONTEXT is not prolog_*/epilog_*: pass --phase start|end")
    if not args.job:
        raise CliError("no --job and $SLURM_JOB_ID is not set: pass --job ID")
    return SlurmHook(args.job, phase, cluster=args.cluster, node=args.node, wait_s=args.wait)


#: seconds a hook waits for another hook of this node to finish with the spool directory
LOCK_WAIT_S = 120.0


def _lock_spool(settings: Settings, wait_s: float = LOCK_WAIT_S) -> Any:
    """Hooks of one node take turns on one spool directory (blocking flock on
    ``<spool_dir>/.hook.lock``), so an event a broker outage left there is resumed by the
    next hook instead of being stranded in a per-process subdirectory."""
    import fcntl
    from pathlib import Path

    from ...cli import CliError

    d = Path(settings.spool_dir)
    d.mkdir(parents=True, exist_ok=True)
    fh = open(d / ".hook.lock", "a+")
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fh
        except OSError:
            if time.monotonic() >= deadline:
                fh.close()
                raise CliError(f"another hook held {d / '.hook.lock'} for {wait_s:g} s: not reported") from None
            time.sleep(0.1)


#: the end phase waits at most this long for the start phase of the same job to be done, so a
#: job's ``running`` is never published after its end (the two hooks run concurrently)
START_WAIT_S = 15.0
#: start markers older than this are removed (jobs whose Epilog never ran)
MARKER_TTL_S = 7 * 86400


def _marker(settings: Settings, job: str) -> Any:
    from pathlib import Path

    d = Path(settings.spool_dir) / "started"
    d.mkdir(parents=True, exist_ok=True)
    return d / f"{job}"


def _mark_started(settings: Settings, job: str) -> None:
    m = _marker(settings, job)
    m.touch()
    now = time.time()
    for old in m.parent.iterdir():  # bounded: forget jobs whose end never came
        try:
            if now - old.stat().st_mtime > MARKER_TTL_S:
                old.unlink()
        except OSError:
            pass


def _wait_started(settings: Settings, job: str, wait_s: float = START_WAIT_S) -> None:
    m = _marker(settings, job)
    deadline = time.monotonic() + wait_s
    while not m.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    if not m.exists():
        log.info("job %s: no start report within %g s (no Prolog hook?); reporting its end", job, wait_s,
                 extra={"job": job})


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Read the job first (the end phase waits for its final state), then publish with
    ``--once`` semantics: a failed ``scontrol`` or an unacknowledged event is
    ``CollectorFailed`` (exit 2, the reason on stderr)."""
    hook = build(args, settings)
    try:
        events = asyncio.run(hook.prepare())
    except SlurmError as e:
        from ...cli import CliError

        raise CliError(f"job {hook.job}: " + " | ".join(str(e).splitlines())) from None  # one line for the hook log
    if not events:
        return 0
    if args.output == "-":
        asyncio.run(run_collector(hook, settings, once=True, output="-"))
        return 0
    if hook.phase == "end":
        _wait_started(settings, hook.job)
    lock = _lock_spool(settings)
    try:
        asyncio.run(run_collector(hook, settings, once=True, flush_timeout_s=args.flush_timeout))
    finally:
        lock.close()
        if hook.phase == "start":  # spooled or sent: either way it goes out before the end
            _mark_started(settings, hook.job)
        else:
            _marker(settings, hook.job).unlink(missing_ok=True)
    return 0
