"""The real-jobs harness: a private Slurm cluster, the real collectors publishing to the real
broker, `faultline worker` + `faultline sink`, real 2-rank PyTorch jobs (``train.py`` under
``job.sh``) with real faults, and the incidents read back from the store.

Every case of ``cases()`` runs in one session, the jobs at once, so the suite fits in
``make test``'s budget - except that the two mount cases start only once the hang case's
rank is stuck (``start_after``): every case shares the one node, and a mount that failed
before the hang began would be a candidate cause of it (see ``START_AFTER_S``). The two
time-limit cases end by Slurm's own time-limit scan (slurmctld runs it every 30 s): each
is submitted with ``-t 1`` and, once it is where its case needs it, its limit is brought
forward with ``scontrol update EndTime=`` (``action="time_limit"``) so it ends at the next
scan instead of one to two minutes later. ``run_all`` returns a ``Run`` the tests assert on.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import orjson
from ports import free_port  # ports below the ephemeral range: a client socket cannot hold them

from faultline.config import Settings

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
FIXTURES = HERE / "fixtures"
VENV_SITE = next(iter(sorted((Path(sys.prefix) / "lib").glob("python3*/site-packages"))), None)
SYSTEM_PY = "/usr/bin/python3"
#: GPUs each job asks for (``--gres=gpu:2``: the Slurm peer declares fake GPU devices)
GPUS_PER_JOB = 2
NGPU = 20      # Gres=gpu:20 on the one node: every 2-GPU case job at once
NCPU = 40      # CPUs=40 (config_overrides): all ranks at once on 2 real cores (they mostly sleep)
NODE = socket.gethostname().split(".")[0]
#: stall threshold floor for the worker and `diagnose` (FAULTLINE_STALL_FLOOR_MS; default 10 min):
#: the hang case stalls 20 s after its last step, before its time limit ends it
STALL_FLOOR_MS = 20_000
#: evidence window after a job's end for the worker and `diagnose` (FAULTLINE_SETTLE_MS; default
#: 60 s): every signal of these jobs is on the broker within seconds of its end, and the
#: suite's last incidents wait this much event time after the last job ends
SETTLE_MS = 20_000
#: what the worker and `diagnose` run with (the same engine configuration on both sides)
ENGINE_ENV = {"FAULTLINE_STALL_FLOOR_MS": str(STALL_FLOOR_MS), "FAULTLINE_SETTLE_MS": str(SETTLE_MS)}
#: the worker's stats line period in this run (FAULTLINE_WORKER_STATS_S; default 30 s)
WORKER_STATS_S = 5
#: what a faulty rank logs when its fault begins (``train.py inject``): the harness watches
#: for it to time the actions that depend on it
FAULT_LINES = {"hang": "waiting on a lock that never comes"}
#: a case with ``start_after`` is submitted this long after that case's fault line: the
#: hang's stall then began (its last progress) on a node whose mounts were all healthy, and a
#: mount fault of the later case comes after the hang's failure by more than correlate's
#: post-failure grace (5 s: a signal after it is a consequence), the mount case's own job
#: start taking several seconds more
START_AFTER_S = 3.0
#: child processes the bundle exports are shared among
EXPORT_PROCESSES = 3
#: the time-limit action sets the job's EndTime this far ahead (slurmctld refuses a past one)
END_TIME_AHEAD_S = 2


@dataclass
class Case:
    name: str
    fault: str = "none"                     # train.py FL_FAULT
    time_limit: str = "3"                   # sbatch -t (minutes)
    env: dict[str, str] = field(default_factory=dict)
    mount: str | None = None                # "tmpfs:SIZE" -> the checkpoint dir is its own mount
    #: "scancel" | "requeue" | "remount_ro" | "time_limit" (driven by the harness)
    action: str | None = None
    action_after_ckpt: int = 2              # ... once this many checkpoints are on disk
    action_after_alert: str | None = None   # ... or once fl.alerts has this detector's alert for the job
    start_after: str | None = None          # submitted START_AFTER_S after that case's fault line
    cgroup_mb: int | None = None            # the faulty rank runs in a memory cgroup of this size
    # filled in by the run
    job: str = ""
    ckpt_dir: Path = Path()
    acted_at: float | None = None
    fault_seen_at: float | None = None      # when the harness saw the faulty rank's FAULT_LINES line
    alert_seen_at: float | None = None      # when the harness saw the action_after_alert alert
    failed_seen_at: float | None = None
    on_disk: list[int] = field(default_factory=list)   # step_N.pt files at the end of the run
    first_attempt_on_disk: list[int] = field(default_factory=list)  # ... when attempt 0 ended (requeue)
    submitted_at: float = 0.0


def cases() -> list[Case]:
    return [
        Case("exception", "exception", env={"FL_STEPS": "40", "FL_FAULT_STEP": "8"}),
        Case("healthy", "none", env={"FL_STEPS": "12"}),
        # a checkpoint every 5 s, not 1.5 s: see test_last_checkpoint_is_the_highest_step_not_the_latest_report;
        # its limit brought forward once 2 checkpoints are on disk
        Case("timeout", "forever", time_limit="1", action="time_limit", env={"FL_CKPT_EVERY": "10"}),
        # ... this one's once the worker's stall alert for it is on fl.alerts (the threshold is the
        # 20 s floor or 10 x the job's p90 progress interval, whichever is longer); submitted with
        # 3 minutes, a backstop only: with 1, a loaded run (a fresh-clone CI, 17:29 UTC 2 Dec, the
        # 3-broker test beside it) ended the job 55 s after it hung, before the stall alert
        Case("hang", "hang", time_limit="3", action="time_limit", action_after_alert="stall",
             env={"FL_FAULT_STEP": "8"}),
        Case("scancel", "forever", action="scancel"),
        Case("requeue", "exception_first", action="requeue", env={"FL_STEPS": "10", "FL_FAULT_STEP": "8"}),
        Case("enospc", "ckpt", mount="tmpfs:1m", start_after="hang",
             env={"FL_STEPS": "40", "FL_CKPT_BYTES": str(300 * 1024)}),
        Case("erofs", "ckpt", mount="tmpfs:64m", action="remount_ro", start_after="hang", env={"FL_STEPS": "40"}),
        Case("oom", "oom", cgroup_mb=500, env={"FL_STEPS": "40", "FL_FAULT_STEP": "8"}),
    ]


# ----------------------------------------------------------------------------- slurm
class Slurm:
    """A private Slurm cluster (own state dir, munge socket, ports) of ``infra/peers``."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.conf = str(base / "slurm" / "slurm.conf")
        self.env = {**os.environ, "SLURM_CONF": self.conf}
        self.node = socket.gethostname().split(".")[0]

    def _script(self, name: str, env: dict[str, str], timeout: float) -> None:
        p = subprocess.run(["bash", str(ROOT / "infra" / "peers" / name)], env={**os.environ, **env},
                           capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError(f"infra/peers/{name} failed ({p.returncode}): {p.stdout[-2000:]}{p.stderr[-2000:]}")

    def up(self) -> "Slurm":
        self._script("slurm_up.sh", {"BASE": str(self.base), "FRESH": "1", "NCPU": str(NCPU), "NGPU": str(NGPU),
                                     "SLURMCTLD_PORT": str(free_port()), "SLURMD_PORT": str(free_port())}, 180)
        return self

    def down(self) -> None:
        self._script("slurm_down.sh", {"BASE": str(self.base)}, 90)

    def run(self, *argv: str, check: bool = True, timeout: float = 30) -> str:
        p = subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({p.returncode}): {p.stderr}")
        return p.stdout

    def job(self, job: str) -> dict[str, str]:
        from faultline.producers.collectors.slurm import parse_kv_line

        out = self.run("scontrol", "show", "job", "-o", job, check=False)
        return parse_kv_line(out.strip()) if out.strip() else {}


# ----------------------------------------------------------------------------- collectors
class Collectors:
    """The real collectors, each in ``run_collector`` (real publisher, real broker), on one
    event loop in a background thread; ``add`` starts one more while the run goes on."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="collectors", daemon=True)
        self.thread.start()
        self.tasks: list[asyncio.Future] = []
        self.collectors: list[Any] = []

    def add(self, collector: Any, interval_s: float) -> None:
        from faultline.producers.collectors.base import run_collector

        # one spool directory per publisher: the spool takes one directory per process (flock)
        # and gives up after three, which would stop the fourth collector of one process
        settings = replace(self.settings, spool_dir=str(Path(self.settings.spool_dir) / f"c{len(self.collectors)}"))

        async def start() -> None:
            self.tasks.append(asyncio.ensure_future(run_collector(collector, settings, interval_s=interval_s)))

        self.collectors.append(collector)
        asyncio.run_coroutine_threadsafe(start(), self.loop).result(10)

    def check(self) -> None:
        """Raise when a collector stopped (its publisher could not start, a bug)."""
        for c, t in zip(self.collectors, self.tasks):
            if t.done() and not t.cancelled() and t.exception() is not None:
                raise RuntimeError(f"collector {c.name} stopped: {t.exception()!r}")

    def stop(self) -> None:
        """Cancel every collector and wait until each has flushed its publisher."""
        async def cancel_all() -> None:
            for t in self.tasks:
                t.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(cancel_all(), self.loop).result(60)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)


# ----------------------------------------------------------------------------- the run
@dataclass
class Run:
    cases: dict[str, Case]
    incidents: list[dict]              # latest revision of each, from the store (FINAL)
    alerts: list[dict]
    slurm_jobs: dict[str, dict]        # case -> scontrol fields at the end
    logs: dict[str, dict[str, str]]    # case -> file name -> text
    bundles: dict[str, Path]           # case -> exported bundle (incident cases)
    run_bundle: Path                   # every input event of the run
    seconds: float
    workdir: Path
    phases: dict[str, float] = field(default_factory=dict)   # seconds from the start to the end of each phase
    worker_stats: list[str] = field(default_factory=list)    # the worker's log lines with "worker stats", WARNING or ERROR
    _events: list[dict] | None = field(default=None, repr=False)

    def incidents_of(self, case: str) -> list[dict]:
        job = self.cases[case].job
        return sorted((i for i in self.incidents if i["job"] == job), key=lambda i: i["attempt"])

    def ckpt_steps_on_disk(self, case: str) -> list[int]:
        return self.cases[case].on_disk

    def events(self) -> list[dict]:
        """Every input event of the run (the exported ``run_bundle``), in event-time order."""
        if self._events is None:
            import zstandard

            with open(self.run_bundle, "rb") as fh:
                text = zstandard.ZstdDecompressor().stream_reader(fh).read()
            self._events = [orjson.loads(line) for line in text.splitlines() if line.strip()]
        return self._events


def _mount(case: Case, path: Path) -> None:
    kind, size = case.mount.split(":")
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", kind, "-o", f"size={size},mode=755", f"fl-{case.name}", str(path)],
                   check=True, capture_output=True)


MEMCG_ROOT = Path("/sys/fs/cgroup/memory")  # cgroup v1 memory controller (this machine kind)


def _memcg(c: Case, made: list[Path]) -> Path:
    """A memory cgroup of ``c.cgroup_mb`` MB the case's faulty rank moves itself into."""
    cg = MEMCG_ROOT / f"fl-rj-{os.getpid()}-{c.name}"
    cg.mkdir(exist_ok=True)
    (cg / "memory.limit_in_bytes").write_text(str(c.cgroup_mb * 1024 * 1024))
    made.append(cg)
    return cg


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


def can_run() -> str | None:
    """None when this machine can run the suite, else the reason it cannot."""
    if os.geteuid() != 0:
        return "needs root (slurmctld/slurmd/munge, tmpfs mounts, remount read-only)"
    if not shutil.which("slurmctld"):
        return "Slurm not installed: run infra/peers/install.sh"
    if not Path(SYSTEM_PY).exists() or subprocess.run(
            [SYSTEM_PY, "-c", "import torch.distributed as d; assert d.is_gloo_available()"],
            capture_output=True).returncode != 0:
        return "python3-torch (with gloo) not importable by /usr/bin/python3: run infra/peers/install.sh"
    if not (MEMCG_ROOT / "memory.limit_in_bytes").exists():
        return f"no cgroup v1 memory controller at {MEMCG_ROOT} (the OOM case needs one)"
    if not os.access("/dev/kmsg", os.R_OK):
        return "/dev/kmsg not readable (the kernel collector needs it for the OOM case)"
    if VENV_SITE is None:
        return f"no site-packages under {sys.prefix}/lib for the SDK inside the jobs"
    return None


#: every job must have ended within this long of the first submission: 200 s was too short in a
#: loaded fresh-clone run (session 12, 12:03 UTC: the healthy 12-step job still RUNNING at 200 s with
#: the findings stream test beside it on the 2 cores)
def run_all(kafka_bootstrap: str, workdir: Path, *, deadline_s: float = 320.0) -> Run:
    from faultline.streams.faust_harness import SinkProcess, WorkerProcess, sink_group_id, wait_caught_up
    from faultline.streams.faust_topics import ensure_topics

    t_start = time.monotonic()
    phases: dict[str, float] = {}
    prefix = f"rj{uuid.uuid4().hex[:8]}."
    settings = replace(Settings(), kafka_bootstrap=kafka_bootstrap, topic_prefix=prefix, topic_partitions=2,
                       store_path=str(workdir / "store"), spool_dir=str(workdir / "spool"))
    asyncio.run(ensure_topics(settings))
    app_id = f"{prefix}faultline"
    all_cases = {c.name: c for c in cases()}
    logdir = workdir / "logs"
    logdir.mkdir()
    mounted: list[Path] = []
    # at info, with its stats line every WORKER_STATS_S: a failed test shows the worker's view (Run.worker_stats)
    worker = WorkerProcess(settings, workdir / "worker", app_id=app_id, loglevel="info",
                           env={**ENGINE_ENV, "FAULTLINE_WORKER_STATS_S": str(WORKER_STATS_S)}).start()
    sink = SinkProcess(settings, workdir / "sink", app_id=app_id).start()
    # munged refuses a log dir under pytest's 0700 temp dirs: the peer lives where tests/peers.py puts peers
    slurm = Slurm(Path(os.environ.get("FAULTLINE_PEERS_DIR", "/tmp/faultline-peers")) / f"realjobs-{os.getpid()}")
    bdir = workdir / "bundles"
    bdir.mkdir()
    run_bundle = bdir / "run.jsonl.zst"
    exports: list[_Background] = []
    bundles: dict[str, Path] = {}      # case -> its incident's bundle
    exported: dict[str, str] = {}      # incident id -> job, of the bundles exported
    try:
        slurm.up()
        phases["slurm_up"] = time.monotonic() - t_start
        out = _run_jobs(settings, slurm, all_cases, logdir, mounted, workdir, worker, sink, phases,
                        deadline=t_start + deadline_s, t_start=t_start)
        # every input is on the broker (the collectors stopped) and every incident out: export the
        # run's inputs and each incident's bundle (`bundle export` reads the topics) while the rest stops
        exported = {i["id"]: i["job"] for i in out}
        exports = [_Background(lambda: asyncio.run(_export_inputs(settings, run_bundle))),
                   _Background(lambda: _export_bundles(settings, all_cases, exported, bdir, bundles))]
        asyncio.run(wait_caught_up(settings, sink_group_id(settings, app_id), timeout_s=60))
        phases["sink_caught_up"] = time.monotonic() - t_start
        slurm_jobs = {n: slurm.job(c.job) for n, c in all_cases.items() if c.job}
    finally:
        stoppers = [_Background(p.stop) for p in (worker, sink)]
        for c in all_cases.values():
            if c.job:
                slurm.run("scancel", c.job, check=False)
        slurm.down()
        shutil.rmtree(slurm.base, ignore_errors=True)
        for c in all_cases.values():  # before a tmpfs goes away with its files
            c.on_disk = sorted(int(p.name[5:-3]) for p in c.ckpt_dir.glob("step_*.pt"))
        for p in mounted:
            _umount(p)
        for t in stoppers:
            t.join()
        phases["stopped"] = time.monotonic() - t_start
    incidents, alerts = _read_store(settings)
    logs = {n: {f.name: f.read_text(errors="replace") for f in [logdir / f"slurm-{c.job}.out",
                                                                 *sorted((logdir / c.job).glob("*.log"))]
                if f.exists()} for n, c in all_cases.items()}
    for t in exports:
        t.join()
    late = {i["id"]: i["job"] for i in incidents if i["id"] not in exported}
    if late:  # an incident the store holds that fl.incidents had not shown when the exports began
        _export_bundles(settings, all_cases, late, bdir, bundles)
    phases["exported"] = time.monotonic() - t_start
    return Run(all_cases, incidents, alerts, slurm_jobs, logs, bundles, run_bundle,
               time.monotonic() - t_start, workdir, phases, _worker_stats(worker.log(tail=2_000_000)))


def _worker_stats(text: str) -> list[str]:
    """The lines of the worker's log a failed test shows: its stats lines, warnings and errors."""
    return [ln for ln in text.splitlines() if "worker stats" in ln or "[WARNING]" in ln or "[ERROR]" in ln]


def _export_bundles(settings: Settings, cs: dict[str, Case], incidents: dict[str, str], bdir: Path,
                    bundles: dict[str, Path]) -> None:
    """`faultline bundle export` of each incident (id -> job) into ``bdir/<case>.jsonl.zst``."""
    exports = []
    for n, c in cs.items():
        for iid in (i for i, job in incidents.items() if job == c.job):
            exports.append(["bundle", "export", iid, f"--out={bdir / f'{n}.jsonl.zst'}", "--search-since=-1h"])
    # in EXPORT_PROCESSES child processes at once: an export mostly waits on the broker
    groups = [exports[i::EXPORT_PROCESSES] for i in range(EXPORT_PROCESSES) if exports[i::EXPORT_PROCESSES]]
    for b in [_Background(lambda g=g: _cli(settings, *g)) for g in groups]:
        b.join()
    for n, c in cs.items():
        if c.job in incidents.values():
            bundles[n] = bdir / f"{n}.jsonl.zst"


class _Background:
    """``target()`` in a thread; ``join()`` waits and raises what it raised."""

    def __init__(self, target: Callable[[], Any]) -> None:
        self.error: BaseException | None = None

        def run() -> None:
            try:
                target()
            except BaseException as e:  # noqa: BLE001 - handed to join()
                self.error = e

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self) -> None:
        self.thread.join()
        if self.error is not None:
            raise self.error


def _run_jobs(settings: Settings, slurm: Slurm, all_cases: dict[str, Case], logdir: Path, mounted: list[Path],
              workdir: Path, worker: Any, sink: Any, phases: dict[str, float], *, deadline: float,
              t_start: float) -> list[dict]:
    """Run every case's job to its end and wait for the incidents; returns them (latest
    revision each, as fl.incidents holds them)."""
    from faultline.producers.collectors.checkpoints import CheckpointCollector
    from faultline.producers.collectors.kernel import KernelCollector
    from faultline.producers.collectors.logs import LogsCollector
    from faultline.producers.collectors.slurm import SlurmCollector
    from faultline.producers.collectors.storage import StorageCollector

    for c in all_cases.values():
        c.ckpt_dir = workdir / "ckpt" / c.name
        if c.mount:
            _mount(c, c.ckpt_dir)
            mounted.append(c.ckpt_dir)
        else:
            c.ckpt_dir.mkdir(parents=True, exist_ok=True)
    col = Collectors(settings)
    cgroups: list[Path] = []
    try:
        col.add(SlurmCollector(state_file=workdir / "slurm.state.json", env=slurm.env, use_sacct=False), 1.0)
        col.add(LogsCollector([str(logdir / "*" / "rank*.log"), str(logdir / "slurm-*.out")],
                              path_patterns=["{job}/rank{rank}.log", "slurm-{job}.out"], from_start=True,
                              rescan_s=0.5, state_path=str(workdir / "logs.state.json")), 0.5)
        col.add(StorageCollector(paths=[str(p) for p in mounted], probe_timeout_s=2.0), 1.0)
        base_env = {"FL_LOG_DIR": str(logdir), "FL_TRAIN": str(HERE / "train.py"), "FL_VENV_SITE": str(VENV_SITE),
                    "FAULTLINE_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
                    "FAULTLINE_TOPIC_PREFIX": settings.topic_prefix, "PYTHONPATH": ""}

        def submit(c: Case) -> None:
            env = {**base_env, "FL_FAULT": c.fault, "FL_CKPT_DIR": str(c.ckpt_dir), "FL_MASTER_PORT": str(free_port()),
                   **c.env}
            if c.cgroup_mb:
                env["FL_CGROUP"] = str(_memcg(c, cgroups))
            c.job = slurm.run("sbatch", "--parsable", "-J", f"rj-{c.name}", "-n", "2",
                              f"--gres=gpu:{GPUS_PER_JOB}", "-t", c.time_limit,
                              "-o", str(logdir / "slurm-%j.out"), "--open-mode=append",
                              "--export=ALL," + ",".join(f"{k}={v}" for k, v in env.items()),
                              str(HERE / "job.sh")).strip().split(";")[0]
            c.submitted_at = time.monotonic()
            # settle 0.3 s, rounds of 0.5 s: the collector reports a save well before the next one
            # (2 s later), see test_last_checkpoint_is_the_highest_step_not_the_latest_report
            col.add(CheckpointCollector([str(c.ckpt_dir)], job=c.job, settle_s=0.3), 0.5)
            if c.action_after_alert:
                _Background(lambda: _watch_alert(settings, c, timeout_s=deadline - time.monotonic()))
            if c.cgroup_mb:
                # every case shares the one Slurm node: the kernel collector is pinned to the OOM
                # case's job (unpinned, it gives a kernel line to every job running on the node)
                col.add(KernelCollector(job=c.job, state_path=str(workdir / "kmsg.state")), 1.0)

        for c in all_cases.values():
            if c.start_after is None:
                submit(c)
        phases["submitted"] = time.monotonic() - t_start
        _drive(slurm, all_cases, worker, sink, col, submit, logdir, deadline=deadline)
        phases["jobs_ended"] = time.monotonic() - t_start
        # evidence is accepted until a job's end + SETTLE_MS of event time (+ the lateness
        # bound); the storage samples keep event time moving meanwhile
        out = _wait_incidents(settings, all_cases, deadline=deadline + SETTLE_MS / 1000 + 30)
        phases["incidents_out"] = time.monotonic() - t_start
        return out
    finally:
        col.stop()
        for cg in cgroups:
            try:
                cg.rmdir()
            except OSError:
                pass


def _drive(slurm: Slurm, cs: dict[str, Case], worker: Any, sink: Any, col: Collectors,
           submit: Callable[[Case], None], logdir: Path, *, deadline: float) -> None:
    """Submit the held cases and inject the harness-side faults when each job is ready,
    until every job has ended."""
    while time.monotonic() < deadline:
        col.check()
        assert worker.alive(), f"worker died:\n{worker.log()}"
        assert sink.alive(), f"sink died:\n{sink.log()}"
        pending = 0
        for c in cs.values():
            if not c.job:
                seen = cs[c.start_after].fault_seen_at
                if seen is None or time.monotonic() - seen < START_AFTER_S:
                    pending += 1
                    continue
                submit(c)
            _watch_fault(c, logdir)
            info = slurm.job(c.job)
            state = info.get("JobState", "")
            if c.action and c.acted_at is None and _ready(c, info):
                _act(slurm, c)
            if c.action == "requeue" and c.acted_at is not None and state == "PENDING" \
                    and info.get("Restarts") == "1":
                # a requeued batch job waits before it may run again (BeginTime): release it
                # now so its second attempt runs inside the test budget
                slurm.run("scontrol", "update", f"jobid={c.job}", "StartTime=now", check=False)
            if c.action == "requeue" and c.acted_at is None:
                pending += 1
            if state in ("", "PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED"):
                pending += 1
        if not pending:
            return
        time.sleep(1.0)
    raise TimeoutError("jobs still running at the deadline: "
                       + ", ".join(f"{n}={slurm.job(c.job).get('JobState') if c.job else 'not submitted'}"
                                   for n, c in cs.items()))


def _watch_alert(settings: Settings, c: Case, *, timeout_s: float) -> None:
    """Note when the worker's ``c.action_after_alert`` alert for the case's job is on fl.alerts."""
    from faultline.streams.faust_harness import read_topic

    def seen(recs: list[Any]) -> bool:
        return any((d := orjson.loads(r.value)).get("detector") == c.action_after_alert and d.get("job") == c.job
                   for r in recs)

    if seen(asyncio.run(read_topic(settings, "fl.alerts", until=seen, timeout_s=max(1.0, timeout_s)))):
        c.alert_seen_at = time.monotonic()


def _watch_fault(c: Case, logdir: Path) -> None:
    """Note when the case's faulty rank logs that its fault began (``FAULT_LINES``)."""
    line = FAULT_LINES.get(c.fault)
    if line is None or c.fault_seen_at is not None:
        return
    log = logdir / c.job / f"rank{c.env.get('FL_FAULT_RANK', '1')}.log"
    if log.exists() and line in log.read_text(errors="replace"):
        c.fault_seen_at = time.monotonic()


#: a requeue waits this long after the failure: the slurm collector (1 s rounds) must see the
#: attempt end FAILED first; requeued before it looked, the attempt's end is "requeued" (no incident)
REQUEUE_AFTER_S = 4.0


def _ready(c: Case, info: dict[str, str]) -> bool:
    """Is the job where its case acts on it (a requeue: a few seconds after attempt 0 failed)?"""
    if c.action == "requeue":
        if info.get("JobState") != "FAILED" or info.get("Restarts") != "0":
            return False
        c.failed_seen_at = c.failed_seen_at or time.monotonic()
        return time.monotonic() - c.failed_seen_at >= REQUEUE_AFTER_S
    if info.get("JobState") != "RUNNING":
        return False
    if c.action_after_alert is not None:
        return c.alert_seen_at is not None
    return len(list(c.ckpt_dir.glob("step_*.pt"))) >= c.action_after_ckpt


def _act(slurm: Slurm, c: Case) -> None:
    c.acted_at = time.monotonic()
    c.first_attempt_on_disk = sorted(int(p.name[5:-3]) for p in c.ckpt_dir.glob("step_*.pt"))
    if c.action == "scancel":
        slurm.run("scancel", c.job)
    elif c.action == "requeue":
        slurm.run("scontrol", "requeue", c.job)
    elif c.action == "remount_ro":
        subprocess.run(["mount", "-o", "remount,ro", str(c.ckpt_dir)], check=True, capture_output=True)
    elif c.action == "time_limit":
        # the job's limit brought forward: slurmctld's next time-limit scan (every 30 s) ends it
        # TIMEOUT ("DUE TO TIME LIMIT"), as the submitted 1-minute limit would, one scan or two later
        # (EndTime in slurmctld's local time: the same machine)
        end = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() + END_TIME_AHEAD_S))
        slurm.run("scontrol", "update", f"JobId={c.job}", f"EndTime={end}")


def _wait_incidents(settings: Settings, cs: dict[str, Case], *, deadline: float) -> list[dict]:
    """Wait until each failed job has an incident (the retry too, for the requeued one) and
    event time has passed every job's end by the settle window."""
    from faultline.streams.faust_harness import latest_incidents, read_topic

    want = {c.job for n, c in cs.items() if n not in ("healthy", "scancel")}

    def done(recs: list[Any]) -> bool:
        got = latest_incidents(recs).values()
        jobs = {i["job"] for i in got}
        rq = [i for i in got if i["job"] == cs["requeue"].job and i["attempt"] == 0]
        # a stall incident is revised when its job ends (state "stalled" -> how it ended)
        ended = all(i["state"] != "stalled" for i in got if i["job"] in want)
        return want <= jobs and ended and bool(rq) and rq[0].get("retry") is not None

    recs = asyncio.run(read_topic(settings, "fl.incidents", until=done,
                                  timeout_s=max(5.0, deadline - time.monotonic()), idle_s=3.0))
    return list(latest_incidents(recs).values())


def _read_store(settings: Settings) -> tuple[list[dict], list[dict]]:
    from faultline.sinks import open_store

    store = open_store(settings)
    try:
        inc = store.query("SELECT * FROM incidents FINAL ORDER BY job, attempt")
        alerts = store.query("SELECT * FROM alerts FINAL ORDER BY ts")
    finally:
        store.close()
    return inc, alerts


def _cli(settings: Settings, *commands: list[str]) -> None:
    """Run ``faultline`` commands through the CLI's entry point, all in one child process (a
    process per command costs ~1.5 s of imports each on this machine)."""
    from faultline.streams.faust_harness import worker_env

    code = ("import sys, json\nfrom faultline.cli import main\n"
            "for argv in json.loads(sys.argv[1]):\n"
            "    rc = main(argv)\n"
            "    if rc: sys.exit(f'faultline {\" \".join(argv)} exited {rc}')\n")
    p = subprocess.run([sys.executable, "-c", code, orjson.dumps(list(commands)).decode()], env=worker_env(settings),
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f"faultline commands failed ({p.returncode}): {p.stdout[-3000:]}{p.stderr[-3000:]}")


async def _export_inputs(settings: Settings, out: Path) -> None:
    """Every input event of the run in event-time order, as one JSON-lines file
    (``faultline diagnose`` reads it like a bundle)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from faultline.producers.bundle import open_writer
    from faultline.schemas import INPUT_TOPICS

    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(**settings.kafka_kwargs())
    await admin.start()
    try:
        meta = await admin.describe_topics([settings.topic(t) for t in INPUT_TOPICS])
    finally:
        await admin.close()
    tps = [TopicPartition(m["topic"], p["partition"]) for m in meta for p in m["partitions"]]
    consumer = AIOKafkaConsumer(**settings.kafka_kwargs(), enable_auto_commit=False, group_id=None)
    await consumer.start()
    recs = []
    try:
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
            for batch in (await consumer.getmany(timeout_ms=500)).values():
                recs.extend(batch)
    finally:
        await consumer.stop()
    recs.sort(key=lambda r: r.timestamp)
    fh = open_writer(str(out))
    try:
        for r in recs:
            fh.write(r.value + b"\n")
    finally:
        fh.close()


def diagnose(path: Path) -> list[dict]:
    """What ``FAULTLINE_STALL_FLOOR_MS=20000 FAULTLINE_SETTLE_MS=20000 faultline diagnose --json``
    prints for a bundle (its own reading and engine functions, in this process): the incidents
    it reproduces offline."""
    import msgspec

    import io

    import zstandard

    from faultline.commands.diagnose import diagnose_stream

    fh = io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(open(path, "rb"), closefd=True))
    before = {k: os.environ.get(k) for k in ENGINE_ENV}
    os.environ.update(ENGINE_ENV)  # what the run's worker used
    try:
        eng = diagnose_stream(fh)
    finally:
        fh.close()
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return [msgspec.to_builtins(i) for i in eng.incidents()]


