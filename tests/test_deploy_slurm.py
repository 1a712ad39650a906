"""infra/deploy/slurm/faultline-slurm-hook as the Prolog and Epilog of a real Slurm cluster
(tests/peers.py ``slurm_cluster``: slurmctld + slurmd + munge on loopback): two real jobs,
their start and end ``sched.job`` reach the broker through the hook alone (no collector runs),
with the ids ``faultline collect slurm`` gives the same transitions."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from faultline.producers.collectors.slurm import SlurmCollector, stable_id
from faultline.schemas import decode
from faultline.streams.faust_harness import read_topic

ROOT = Path(__file__).resolve().parents[1]
HOOK = ROOT / "infra" / "deploy" / "slurm" / "faultline-slurm-hook"
FL = str(Path(sys.executable).parent / "faultline")


#: slurmd logs this each time it reads slurm.conf (start and every reconfigure), Slurm 22.05
CONF_READ = "CPU frequency setting not configured for this node"


def reconfigure(cl, timeout_s: float = 15.0) -> None:
    """``scontrol reconfigure`` and wait until slurmd re-read slurm.conf: the reconfigure
    reaches slurmd asynchronously, and a job started before then runs without the new
    Prolog (seen: job 1 reported its end only)."""
    log = Path(cl.base, "slurm", "log", "slurmd.log")
    before = log.read_text(errors="replace").count(CONF_READ)
    cl.run("scontrol", "reconfigure")
    deadline = time.monotonic() + timeout_s
    while log.read_text(errors="replace").count(CONF_READ) <= before:
        assert time.monotonic() < deadline, f"slurmd did not re-read slurm.conf within {timeout_s:g} s ({log})"
        time.sleep(0.1)


@pytest.fixture
def hooked(slurm_cluster, settings, tmp_path):
    """The session cluster with Prolog/Epilog = the hook (through a wrapper naming this test's
    env file); the original slurm.conf is put back afterwards."""
    if not shutil.which("setsid"):
        pytest.skip("the hook needs setsid (util-linux)")
    env_file = tmp_path / "slurm-hook.env"
    env_file.write_text(f"FAULTLINE_BIN={FL}\nFAULTLINE_KAFKA_BOOTSTRAP={settings.kafka_bootstrap}\n"
                        f"FAULTLINE_TOPIC_PREFIX={settings.topic_prefix}\n"
                        f"FAULTLINE_SPOOL_DIR={tmp_path / 'spool'}\nFAULTLINE_HOOK_LOG={tmp_path / 'hook.log'}\n"
                        "FAULTLINE_HOOK_WAIT=20\n")
    wrapper = tmp_path / "hook.sh"
    wrapper.write_text(f"#!/bin/bash\nFAULTLINE_HOOK_ENV={env_file} exec {HOOK}\n")
    wrapper.chmod(0o755)
    conf = Path(slurm_cluster.conf)
    original = conf.read_text()
    conf.write_text(original + f"Prolog={wrapper}\nEpilog={wrapper}\n")
    try:
        reconfigure(slurm_cluster)
        yield slurm_cluster, tmp_path / "hook.log"
    finally:
        conf.write_text(original)
        reconfigure(slurm_cluster)


@pytest.mark.slow
async def test_prolog_and_epilog_report_start_and_end(hooked, settings, contract_topics, tmp_path):
    cl, hook_log = hooked
    await contract_topics()
    jobs = {"ok": cl.sbatch("-J", "fl-hook-ok", "--chdir", str(tmp_path), "--wrap", "sleep 1"),
            "exit3": cl.sbatch("-J", "fl-hook-exit3", "--chdir", str(tmp_path), "--wrap", "sleep 1; exit 3")}
    t0 = time.time()

    def ended(recs):
        evs = [decode(r.value) for r in recs]
        return {(e.job, e.data.state) for e in evs} >= {(jobs["ok"], "running"), (jobs["ok"], "completed"),
                                                        (jobs["exit3"], "running"), (jobs["exit3"], "failed")}

    try:
        recs = await read_topic(settings, "fl.sched", until=ended, timeout_s=60, idle_s=1.0)
    finally:
        for j in jobs.values():
            cl.run("scancel", j, check=False)
    log = hook_log.read_text() if hook_log.exists() else "(no hook log)"
    evs = [decode(r.value) for r in recs]
    assert ended(recs), f"hook events {[(e.job, e.data.state) for e in evs]}; hook log:\n{log[-3000:]}"
    print(f"\nboth jobs' end events on the broker {time.time() - t0:.1f} s after sbatch")
    source = "slurm@peers"  # ClusterName=peers in infra/peers/slurm_up.sh, $SLURM_CLUSTER_NAME to the hook
    for name, end_state, code in (("ok", "completed", 0), ("exit3", "failed", 3)):
        mine = [e for e in evs if e.job == jobs[name]]
        # in this order on the job's partition: the end waits for the start
        assert [e.data.state for e in mine] == ["running", end_state], (name, mine, log)
        run, end = mine
        assert run.source == end.source == source and run.kind == "sched.job"
        assert run.data.nodes == [cl.node] and run.data.start_ts and run.data.end_ts is None
        assert (end.data.exit_code, end.data.signal, end.data.attempt) == (code, None, 0)
        assert end.data.end_ts >= run.data.start_ts and end.data.name == f"fl-hook-{name}"
        assert [run.id, end.id] == [stable_id(source, jobs[name], 0, s) for s in ("running", end_state)]
    assert log.count("reported") == 4, log
    # the collector reading the same cluster names the same transitions with the same ids
    col = SlurmCollector(cluster="peers", env={**os.environ, **cl.env}, use_sacct=False, nodes=False)
    seen = {(e.job, e.data.state): e.id for e in await col.collect() if e.job in jobs.values()}
    for e in evs:
        if e.data.state in ("completed", "failed"):
            assert seen[(e.job, e.data.state)] == e.id


def test_hook_outside_slurm_exits_0_and_says_why(tmp_path):
    """Run by hand (no SLURM_SCRIPT_CONTEXT): nothing is reported, the job would not fail."""
    import subprocess

    env_file = tmp_path / "env"
    env_file.write_text(f"FAULTLINE_BIN={FL}\nFAULTLINE_HOOK_LOG={tmp_path / 'hook.log'}\n"
                        f"FAULTLINE_SPOOL_DIR={tmp_path / 'spool'}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "FAULTLINE_"))}
    r = subprocess.run(["bash", str(HOOK)], env={**env, "FAULTLINE_HOOK_ENV": str(env_file)},
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout == ""
    assert "not run as a Prolog/Epilog" in (tmp_path / "hook.log").read_text()
