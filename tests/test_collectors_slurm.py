"""slurm collector: parsers on Slurm 22.05's real output, and the lifecycle against a real
slurmctld + slurmd + munge (one node on loopback, started by the ``slurm_cluster`` fixture)."""

import asyncio
import time

import orjson
import pytest

from faultline.producers.collectors.slurm import (
    SLURM_TIME_RESOLUTION_MS,
    SlurmCollector, decode_wait_status, gpus_from, jobs_from_sacct, jobs_from_scontrol,
    jobs_from_squeue_json, node_state, nodes_from_scontrol, parse_kv_line, split_exit,
)
from faultline.schemas import decode, encode
from peers import slurm_acct_cluster  # noqa: F401  (slurm_cluster: one session instance, tests/conftest.py)

# captured from `scontrol show job -o` / `scontrol show node -o` of Slurm 22.05.8 on this machine
SCONTROL_JOB = (
    "JobId=1 JobName=gjob UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901759 Nice=0 Account=(null) "
    "QOS=(null) JobState=FAILED Reason=NonZeroExitCode Dependency=(null) Requeue=1 Restarts=2 BatchFlag=1 Reboot=0 "
    "ExitCode=3:0 RunTime=00:00:02 TimeLimit=UNLIMITED TimeMin=N/A SubmitTime=2026-11-29T14:55:30 "
    "EligibleTime=2026-11-29T14:55:30 AccrueTime=2026-11-29T14:55:30 StartTime=2026-11-29T14:55:31 "
    "EndTime=2026-11-29T14:55:33 Deadline=N/A SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-11-29T14:55:31 "
    "Scheduler=Main Partition=debug AllocNode:Sid=localhost:3308 ReqNodeList=(null) ExcNodeList=(null) "
    "NodeList=gpu[01-02] BatchHost=gpu01 NumNodes=2 NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* "
    "TRES=cpu=1,node=1,billing=1 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* MinCPUsNode=1 WorkDir=/tmp "
    "StdErr=/tmp/slurm-1.out StdIn=/dev/null StdOut=/tmp/slurm-1.out Power= TresPerNode=gres:gpu:2 ")
SCONTROL_NODE = (
    "NodeName=vm Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=8 CPUTot=8 CPULoad=0.64 Gres=gpu:4 "
    "NodeAddr=127.0.0.1 NodeHostName=vm Version=22.05.8 OS=Linux 6.18.44-fc-v657 #1 SMP PREEMPT_DYNAMIC @0  "
    "RealMemory=1000 State=IDLE+DRAIN ThreadsPerCore=1 CfgTRES=cpu=8,mem=1000M,billing=8 AllocTRES= "
    "CapWatts=n/a ExtSensorsTemp=n/s Reason=bad psu [root@2026-11-29T14:56:17]")


def test_scontrol_job_line():
    (j,) = jobs_from_scontrol(SCONTROL_JOB)
    assert (j["job"], j["slurm_state"], j["exit_code"], j["signal"], j["attempt"]) == ("1", "FAILED", 3, None, 2)
    assert j["nodes"] == ["gpu01", "gpu02"] and j["gpus"] == 4 and j["user"] == "root" and j["name"] == "gjob"
    assert j["tenant"] is None and j["start_ts"] < j["end_ts"]


def test_scontrol_node_line_and_states():
    assert nodes_from_scontrol(SCONTROL_NODE) == [("vm", "drain", "bad psu")]
    assert parse_kv_line(SCONTROL_NODE)["OS"].startswith("Linux 6.18")
    assert [node_state(s) for s in ("IDLE", "MIXED", "ALLOCATED+DRAIN", "DOWN*+NOT_RESPONDING", "IDLE+FAIL", "DRAINED")] == \
        ["idle", "allocated", "drain", "down", "fail", "drain"]


def test_exit_codes():
    # squeue --json (22.05) carries the raw wait status: exit 3 -> 768, SIGTERM -> 15, exit 137 -> 35072
    assert decode_wait_status(768) == (3, None)
    assert decode_wait_status(15) == (None, 15)
    assert decode_wait_status(35072) == (137, None)
    assert decode_wait_status(0) == (0, None)
    assert split_exit("3:0") == (3, None) and split_exit("0:15") == (None, 15) and split_exit("") == (None, None)


def test_gpus_from_tres_gres_and_request():
    assert gpus_from(tres_alloc="cpu=64,mem=1T,node=2,billing=64,gres/gpu=16,gres/gpu:h100=16") == 16
    assert gpus_from(gres_detail=["gpu:h100:8(IDX:0-7)", "gpu:h100:8(IDX:0-7)"]) == 16
    assert gpus_from(tres_per_node="gres:gpu:2", node_count=3) == 6
    assert gpus_from(tres_per_job="gres:gpu:4") == 4
    assert gpus_from(tres_alloc="cpu=1,node=1") == 0


def test_squeue_json_2302_shape():
    doc = {"jobs": [{"job_id": 7, "job_state": ["FAILED"], "restart_cnt": 1, "nodes": "n[1-2]", "node_count": {"set": True, "number": 2},
                     "exit_code": {"status": ["SIGNALED"], "return_code": {"set": True, "number": 0},
                                   "signal": {"id": {"set": True, "number": 9}, "name": "KILL"}},
                     "start_time": {"set": True, "number": 100}, "end_time": {"set": True, "number": 200},
                     "tres_alloc_str": "cpu=2,gres/gpu=8", "name": "train", "user_name": "ana", "account": "vision",
                     "state_reason": "None"}]}
    (j,) = jobs_from_squeue_json(doc)
    assert (j["slurm_state"], j["attempt"], j["signal"], j["exit_code"], j["gpus"], j["nodes"], j["tenant"]) == \
        ("FAILED", 1, 9, None, 8, ["n1", "n2"], "vision")
    assert (j["start_ts"], j["end_ts"], j["reason"]) == (100_000, 200_000, None)


def test_sacct_parsable_line():
    text = "5|train|ana|vision|FAILED|3:0|gpu[01-02]|2026-11-29T13:00:00|2026-11-29T13:00:01|2026-11-29T13:00:09|billing=2,cpu=2,gres/gpu=4,node=2|NonZeroExitCode\n5.batch|batch||||0:0||||||\n"
    (j,) = jobs_from_sacct(text)
    assert (j["job"], j["slurm_state"], j["exit_code"], j["gpus"], j["nodes"]) == ("5", "FAILED", 3, 4, ["gpu01", "gpu02"])


class FakeReads(SlurmCollector):
    """Feeds recorded job records through the real change logic (no Slurm needed)."""

    def __init__(self, rounds, **kw):
        super().__init__(nodes=False, use_sacct=False, **kw)
        self.rounds = list(rounds)

    async def read_jobs(self):
        return self.rounds.pop(0)


def _rec(state, attempt=0, **kw):
    base = {"job": "42", "array": None, "slurm_state": state, "attempt": attempt, "nodes": ["n1"], "gpus": 8,
            "exit_code": None, "signal": None, "name": "train", "user": "ana", "tenant": None, "submit_ts": 1000,
            "start_ts": 2000, "end_ts": 3000, "reason": None, "image": None}
    return {**base, **kw}


async def test_only_changes_requeue_and_restart_from_state_file(tmp_path):
    sf = tmp_path / "slurm.json"
    rounds = [[_rec("PENDING")], [_rec("RUNNING")], [_rec("RUNNING")], [_rec("PENDING", attempt=1)],
              [_rec("RUNNING", attempt=1)]]
    c = FakeReads(rounds, state_file=sf)
    got = []
    for _ in range(5):
        got += await c.collect()
    assert [(e.data.state, e.data.attempt) for e in got] == [
        ("pending", 0), ("running", 0), ("requeued", 0), ("pending", 1), ("running", 1)]
    # a new process on the same state file does not repeat what was emitted, only what changed
    c2 = FakeReads([[_rec("RUNNING", attempt=1)], [_rec("FAILED", attempt=1, exit_code=1)]], state_file=sf)
    assert await c2.collect() == []
    (end,) = await c2.collect()
    # EndTime 3000 is a whole second: the end is its last ms (see SLURM_TIME_RESOLUTION_MS)
    assert (end.data.state, end.data.attempt, end.data.exit_code, end.ts) == ("failed", 1, 1, 3999)
    assert end.id == FakeReads([], state_file=tmp_path / "x.json")._event(
        _rec("FAILED", attempt=1), "failed", 1, 5000).id, "ids are derived from (job, attempt, state)"


async def test_a_checkpoint_within_the_end_second_is_the_last_one():
    """realjobs run of 2026-12-02 02:47: the time limit's SIGTERM came while rank 0 renamed
    step_70.pt into place, 0.x s past 02:51:02; Slurm's EndTime says 02:51:02 (whole seconds).
    Taken as 02:51:02.000, the end came before the file and the incident said step 60."""
    from faultline.schemas.events import RuntimeCheckpoint, RuntimeCheckpointData
    from faultline.streams.engine import Engine, EngineConfig

    end_s = int(time.time()) - 5
    start = (end_s - 40) * 1000
    c = FakeReads([[_rec("RUNNING", start_ts=start, end_ts=None)],
                   [_rec("TIMEOUT", start_ts=start, end_ts=end_s * 1000, signal=15)]])
    sched = await c.collect() + await c.collect()
    assert sched[-1].data.end_ts == end_s * 1000 + SLURM_TIME_RESOLUTION_MS

    def ck(ts, step):
        return RuntimeCheckpoint(v=1, id=f"ck-{step}", ts=ts, source="sdk@n1", node="n1", job="42",
                                 data=RuntimeCheckpointData(phase="succeeded", step=step, path=f"/ck/step_{step}.pt"))

    eng = Engine(EngineConfig())
    eng.process([encode(e) for e in [sched[0], ck(end_s * 1000 - 4600, 60), ck(end_s * 1000 + 400, 70), sched[1]]])
    eng.finish()
    (inc,) = eng.incidents()
    assert (inc.root_cause.category, inc.last_checkpoint.step) == ("scheduler", 70)


@pytest.mark.slow
async def test_real_slurm_job_endings(slurm_cluster, tmp_path):
    """ok / exit 3 / killed by SIGKILL / time limit / requeue, plus a drained node. The time
    limit is whole minutes (``--time=1``); once the job runs it is brought forward with
    ``scontrol update EndTime=``, so slurmctld's next time-limit scan (every 30 s) ends it
    TIMEOUT instead of one or two scans later."""
    cl = slurm_cluster
    jobs = {
        "ok": cl.sbatch("-J", "fl-ok", "--gres=gpu:2", "--wrap", "sleep 1"),
        "exit3": cl.sbatch("-J", "fl-exit3", "--wrap", "sleep 1; exit 3"),
        "killed": cl.sbatch("-J", "fl-killed", "--wrap", "sleep 1; kill -9 $$"),
        "timeout": cl.sbatch("-J", "fl-timeout", "--time=1", "--wrap", "sleep 300"),
        "requeue": cl.sbatch("-J", "fl-requeue", "--requeue", "--wrap", "sleep 300"),
    }
    col = SlurmCollector(state_file=tmp_path / "slurm.json", env={**__import__("os").environ, **cl.env}, use_sacct=False)
    events = []
    requeued = drained = False
    limit_s = None  # the timeout job's EndTime, epoch s
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < 170:
            events += await col.collect()
            by = {(e.job, e.data.state, e.data.attempt) for e in events if e.kind == "sched.job"}
            if limit_s is None and (jobs["timeout"], "running", 0) in by:
                limit_s = int(time.time()) + 2  # slurmctld refuses an EndTime in the past
                cl.run("scontrol", "update", f"JobId={jobs['timeout']}",
                       "EndTime=" + time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(limit_s)))
            if not requeued and (jobs["requeue"], "running", 0) in by:
                cl.run("scontrol", "requeue", jobs["requeue"])
                requeued = True
            # a requeued batch job waits (BeginTime) before it may run again: its new attempt's
            # pending state is enough; cancel it then
            if requeued and (jobs["requeue"], "pending", 1) in by and not drained:
                cl.run("scancel", jobs["requeue"])
                cl.run("scontrol", "update", f"nodename={cl.node}", "state=drain", "reason=fl test psu")
                drained = True
            done = {j for j, s, _ in by if s in ("completed", "failed", "timeout", "cancelled")}
            if set(jobs.values()) <= done and drained:
                events += await col.collect()
                break
            await asyncio.sleep(1.0)
    finally:
        cl.run("scontrol", "update", f"nodename={cl.node}", "state=resume", check=False)
        for j in jobs.values():
            cl.run("scancel", j, check=False)
    for e in events:
        assert decode(encode(e)).kind == e.kind

    def final(name):
        evs = [e for e in events if e.kind == "sched.job" and e.job == jobs[name]]
        assert evs, f"no sched.job events for {name}"
        return evs

    ok = final("ok")
    assert [e.data.state for e in ok][-1] == "completed" and ok[-1].data.exit_code == 0
    assert ok[-1].data.gpus == 2 and ok[-1].data.nodes == [cl.node] and ok[-1].data.name == "fl-ok"
    assert "running" in [e.data.state for e in ok]
    e3 = final("exit3")[-1]
    assert (e3.data.state, e3.data.exit_code, e3.data.signal) == ("failed", 3, None)
    k = final("killed")[-1]
    assert (k.data.state, k.data.exit_code, k.data.signal) == ("failed", None, 9)
    to = final("timeout")[-1]
    # ended by the limit, not before it: Slurm's EndTime is the scan that found it reached
    # the signal: SIGTERM when Slurm's record carries it at the scan that sees TIMEOUT; under
    # load that record can still say 0:0 then (04:34 fresh-clone run), and the collector
    # reports one event per state change, so an unknown signal is allowed, a wrong one is not
    assert to.data.state == "timeout" and to.data.signal in (15, None) and to.data.end_ts >= limit_s * 1000, \
        (to, limit_s)
    rq = [(e.data.state, e.data.attempt) for e in final("requeue")]
    assert rq[:2] == [("pending", 0), ("running", 0)] or rq[0] == ("running", 0)
    assert rq[-3:] == [("requeued", 0), ("pending", 1), ("cancelled", 1)]
    for name in jobs:  # only changes: one event per (state, attempt)
        states = [(e.data.state, e.data.attempt) for e in final(name)]
        assert len(states) == len(set(states)), f"{name} repeated a state: {states}"
    nodes = [(e.node, e.data.state, e.data.reason) for e in events if e.kind == "sched.node"]
    assert (cl.node, "drain", "fl test psu") in nodes
    # a restarted collector on the same state file has nothing new to say about these jobs
    again = await SlurmCollector(state_file=tmp_path / "slurm.json", env=col.env, use_sacct=False, nodes=False).collect()
    assert [e for e in again if e.job in jobs.values()] == []


@pytest.mark.slow
async def test_job_that_ended_while_the_collector_was_down_comes_from_sacct(slurm_acct_cluster, tmp_path):
    """Cursor across restarts: the collector saw the job running, was down while it failed and
    slurmctld forgot it (MinJobAge=2); the restarted collector gets its end from sacct."""
    import os

    cl = slurm_acct_cluster
    env = {**os.environ, **cl.env}
    sf = tmp_path / "slurm.json"
    job = cl.sbatch("-J", "fl-lost", "--wrap", "sleep 4; exit 3")
    first = SlurmCollector(state_file=sf, env=env, nodes=False)
    seen = []
    for _ in range(60):
        seen += [e for e in await first.collect() if e.job == job]
        if any(e.data.state == "running" for e in seen):
            break
        await asyncio.sleep(0.5)
    assert [e.data.state for e in seen][-1] == "running"
    await first.close()  # the collector goes away ...
    for _ in range(90):   # ... until the job has ended and left slurmctld
        held = {str(j["job_id"]) for j in orjson.loads(cl.run("squeue", "--json"))["jobs"]}
        if job not in held:
            break
        await asyncio.sleep(0.5)
    else:
        pytest.fail(f"job {job} still held by slurmctld after 45 s")
    for _ in range(20):  # sacct lags slurmctld by a few seconds
        restarted = SlurmCollector(state_file=sf, env=env, nodes=False)
        ends = [e for e in await restarted.collect() if e.job == job]
        if ends:
            break
        await asyncio.sleep(1.0)
    assert [(e.data.state, e.data.exit_code, e.data.signal, e.data.attempt, e.data.nodes) for e in ends] == [
        ("failed", 3, None, 0, [cl.node])]
    assert ends[0].data.end_ts and ends[0].ts == ends[0].data.end_ts
    assert [e for e in await restarted.collect() if e.job == job] == []
