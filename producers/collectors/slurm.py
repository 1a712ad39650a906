"""``faultline collect slurm``: job lifecycle (``sched.job``) and node states (``sched.node``).

Reads slurmctld through its own clients, each round:

* jobs: ``squeue --json`` when the installed Slurm has it (21.08+; every job slurmctld
  still holds, finished ones included until ``MinJobAge``), else ``scontrol show job -o``
  (one ``key=value`` line per job, every version);
* nodes: ``scontrol show node -o``;
* jobs that left slurmctld before we saw them end (collector was down longer than
  ``MinJobAge``): ``sacct -X -P`` when accounting is enabled (text: ``sacct --json`` of
  22.05 reports non-signal exit codes as 0).

Only changes are emitted: a job's ``(state, attempt)`` or a node's ``(state, reason)``.
What was last emitted is kept in a state file (``--state-file``) so a restart neither
repeats nor loses transitions. A requeue (``restart_cnt`` / ``Restarts`` grows) closes the
previous attempt with ``requeued`` and opens the next one with ``attempt`` + 1.

Exit codes: ``exit_code`` is the process exit status, ``signal`` the signal that ended it
(Slurm's ``ExitCode=3:0`` -> 3/null, ``0:9`` -> null/9; squeue's raw wait status is decoded).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import logging
import os
import re
import time
from pathlib import Path
from typing import Any, Iterable

import orjson

from ...config import Settings
from ...schemas import now_ms
from ...schemas.events import SchedJob, SchedJobData, SchedNode, SchedNodeData
from .base import Collector, hostname
from .hostlist import HostlistError, expand

NAME = "slurm"
HELP = "Slurm job lifecycle (sched.job) and node states (sched.node) from squeue/scontrol/sacct"
INTERVAL_S = 5.0

log = logging.getLogger("faultline.collect.slurm")

#: Slurm job state (base, without flags) -> contract state; None = not a lifecycle step we emit
JOB_STATES: dict[str, str | None] = {
    "PENDING": "pending", "CONFIGURING": "pending", "REQUEUE_HOLD": "pending",
    "RUNNING": "running", "SUSPENDED": None, "COMPLETING": None, "RESIZING": None,
    "SIGNALING": None, "STAGE_OUT": None, "STOPPED": None,
    "COMPLETED": "completed", "FAILED": "failed", "TIMEOUT": "timeout", "DEADLINE": "timeout",
    "CANCELLED": "cancelled", "NODE_FAIL": "node_fail", "BOOT_FAIL": "node_fail",
    "OUT_OF_MEMORY": "out_of_memory", "PREEMPTED": "preempted",
    "REQUEUED": "requeued", "REQUEUE_FED": "requeued", "REVOKED": "cancelled",
    "SPECIAL_EXIT": "failed",
}
TERMINAL = {"completed", "failed", "timeout", "cancelled", "node_fail", "out_of_memory", "preempted", "requeued"}


class SlurmError(RuntimeError):
    """A Slurm client failed; the message names the command and what to check."""


# ------------------------------------------------------------------ parsing helpers
_KV = re.compile(r"(?:^|\s)([A-Za-z][\w:/]*)=")


def parse_kv_line(line: str) -> dict[str, str]:
    """``scontrol show ... -o`` line -> dict (values may contain spaces, e.g. ``Reason=bad psu [root@...]``)."""
    marks = [(m.group(1), m.start(1), m.end()) for m in _KV.finditer(line)]
    out: dict[str, str] = {}
    for i, (key, _s, vstart) in enumerate(marks):
        vend = marks[i + 1][1] if i + 1 < len(marks) else len(line)
        out[key] = line[vstart:vend].strip()
    return out


def _num(v: Any) -> int | None:
    """Slurm JSON numbers: plain int (<=22.05) or ``{"set": bool, "infinite": bool, "number": n}`` (23.02+)."""
    if isinstance(v, dict):
        if not v.get("set", True) or v.get("infinite"):
            return None
        v = v.get("number")
    if v is None or isinstance(v, bool):
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _base_state(v: Any) -> str:
    """``"RUNNING"``, ``["RUNNING"]`` (23.02+), ``"CANCELLED by 0"`` or ``"IDLE+DRAIN"`` -> base state word."""
    if isinstance(v, list):
        v = v[0] if v else ""
    return str(v or "").split()[0].split("+")[0].upper() if v else ""


#: Slurm's times are whole seconds: a job whose EndTime is T ended within [T, T + 1 s), and what
#: it did within that second - a checkpoint renamed into place 0.4 s past T, its last log
#: lines - came before its end. The end is reported at the second's last millisecond (never
#: later than the round that saw it), so those count as before the failure.
SLURM_TIME_RESOLUTION_MS = 999


def parse_time(s: str | None) -> int | None:
    """Slurm local time ``2026-11-29T14:55:31`` -> epoch ms (``Unknown``/``None``/``N/A`` -> None).

    Slurm prints the controller's local time; set ``TZ`` for the collector like slurmctld's.
    """
    if not s or s in ("Unknown", "None", "N/A", "(null)"):
        return None
    try:
        tm = time.strptime(s, "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return None
    return int(time.mktime(tm)) * 1000


def decode_wait_status(status: int | None) -> tuple[int | None, int | None]:
    """squeue --json ``exit_code`` (raw wait(2) status) -> (exit_code, signal)."""
    if status is None:
        return None, None
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status), None
    return status, None


def split_exit(s: str | None) -> tuple[int | None, int | None]:
    """``ExitCode=3:0`` -> (3, None); ``0:15`` -> (None, 15)."""
    if not s or ":" not in s:
        return None, None
    code, _, sig = s.partition(":")
    try:
        c, g = int(code), int(sig)
    except ValueError:
        return None, None
    return (None, g) if g else (c, None)


_GPU_TRES = re.compile(r"gres/gpu(?::[\w.-]+)?=(\d+)")
_GPU_GRES = re.compile(r"gpu(?::[\w.-]+)?:(\d+)")


def gpus_from(*, tres_alloc: str | None = None, gres_detail: Iterable[str] | None = None,
              tres_per_node: str | None = None, tres_per_job: str | None = None,
              node_count: int = 1) -> int:
    """Total GPUs of a job: allocated TRES (``gres/gpu=8``) first, then per-node gres
    (``gpu:2(IDX:0-1)`` summed over nodes), then the request (``gres:gpu:2`` x nodes)."""
    if tres_alloc:
        found = [int(n) for n in _GPU_TRES.findall(tres_alloc)]
        # "gres/gpu=8,gres/gpu:a100=8" lists the same GPUs twice: take the untyped total
        m = re.search(r"gres/gpu=(\d+)", tres_alloc)
        if m:
            return int(m.group(1))
        if found:
            return sum(found)
    if gres_detail:
        total = 0
        for d in gres_detail:
            m = _GPU_GRES.search(d or "")
            if m:
                total += int(m.group(1))
        if total:
            return total
    if tres_per_node:
        m = _GPU_GRES.search(tres_per_node)
        if m:
            return int(m.group(1)) * max(1, node_count)
    if tres_per_job:
        m = _GPU_GRES.search(tres_per_job)
        if m:
            return int(m.group(1))
    return 0


def _user(s: str | None) -> str:
    return (s or "").split("(")[0]


def _hosts(expr: str | None) -> list[str]:
    try:
        return expand(expr)
    except HostlistError as e:
        log.warning("unparseable node list: %s", e, extra={"collector": NAME})
        return []


def jobs_from_squeue_json(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """``squeue --json`` document -> normalized job records (22.05 and 23.02+ shapes)."""
    out = []
    for j in doc.get("jobs", []):
        state = _base_state(j.get("job_state"))
        ec = j.get("exit_code")
        if isinstance(ec, dict):  # 23.02+: {"status": [...], "return_code": {...}, "signal": {"id": {...}}}
            rc = _num(ec.get("return_code"))
            sig = _num((ec.get("signal") or {}).get("id")) if isinstance(ec.get("signal"), dict) else None
            exit_code, signal = (None, sig) if sig else (rc, None)
        else:
            exit_code, signal = decode_wait_status(_num(ec))
        nodes_expr = j.get("nodes") or (j.get("job_resources") or {}).get("nodes")
        nodes = _hosts(nodes_expr)
        start, end = _num(j.get("start_time")), _num(j.get("end_time"))
        out.append({
            "job": str(j.get("job_id")),
            "array": _array_id(j),
            "slurm_state": state,
            "attempt": _num(j.get("restart_cnt")) or 0,
            "nodes": nodes,
            "gpus": gpus_from(tres_alloc=j.get("tres_alloc_str"), gres_detail=j.get("gres_detail"),
                              tres_per_node=j.get("tres_per_node"), tres_per_job=j.get("tres_per_job"),
                              node_count=_num(j.get("node_count")) or len(nodes) or 1),
            "exit_code": exit_code, "signal": signal,
            "name": j.get("name") or "", "user": j.get("user_name") or str(j.get("user_id", "")),
            "tenant": j.get("account") or None,
            "submit_ts": (_num(j.get("submit_time")) or 0) * 1000 or None,
            "start_ts": start * 1000 if start else None,
            "end_ts": end * 1000 if end else None,
            "reason": _reason(j.get("state_reason")),
            "image": j.get("container") or None,
        })
    return out


def _array_id(j: dict[str, Any]) -> str | None:
    task = _num(j.get("array_task_id"))
    arr = _num(j.get("array_job_id"))
    return f"{arr}_{task}" if arr and task is not None else None


def _reason(r: Any) -> str | None:
    r = (r or "").strip() if isinstance(r, str) else None
    return None if not r or r == "None" else r


def jobs_from_scontrol(text: str) -> list[dict[str, Any]]:
    """``scontrol show job -o`` (optionally ``-d``) output -> normalized job records."""
    out = []
    for line in text.splitlines():
        if not line.startswith("JobId="):
            continue
        kv = parse_kv_line(line)
        exit_code, signal = split_exit(kv.get("ExitCode"))
        nodes = _hosts(kv.get("NodeList"))
        state = _base_state(kv.get("JobState"))
        gres_detail = [v for k, v in kv.items() if k == "GRES"]
        out.append({
            "job": kv["JobId"],
            "array": (f"{kv['ArrayJobId']}_{kv['ArrayTaskId']}" if kv.get("ArrayJobId") and kv.get("ArrayTaskId")
                      else None),
            "slurm_state": state,
            "attempt": int(kv.get("Restarts", "0") or 0),
            "nodes": nodes,
            "gpus": gpus_from(tres_alloc=kv.get("AllocTRES") or kv.get("TRES"), gres_detail=gres_detail,
                              tres_per_node=kv.get("TresPerNode"), tres_per_job=kv.get("TresPerJob"),
                              node_count=int(kv.get("NumNodes", "1").split("-")[0] or 1)),
            "exit_code": exit_code, "signal": signal,
            "name": kv.get("JobName", ""), "user": _user(kv.get("UserId")),
            "tenant": None if kv.get("Account") in (None, "", "(null)") else kv["Account"],
            "submit_ts": parse_time(kv.get("SubmitTime")),
            "start_ts": parse_time(kv.get("StartTime")),
            "end_ts": parse_time(kv.get("EndTime")),
            "reason": _reason(kv.get("Reason")),
            "image": None if kv.get("Container") in (None, "", "(null)") else kv.get("Container"),
        })
    return out


SACCT_FIELDS = "JobID,JobName,User,Account,State,ExitCode,NodeList,Submit,Start,End,AllocTRES,Reason"


def jobs_from_sacct(text: str) -> list[dict[str, Any]]:
    """``sacct -X -n -P -o SACCT_FIELDS`` output -> normalized job records (no requeue count: attempt 0)."""
    out = []
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < 12 or not parts[0] or "." in parts[0]:
            continue
        jid, name, user, account, state, ec, nodelist, submit, start, end, tres, reason = parts[:12]
        exit_code, signal = split_exit(ec)
        nodes = _hosts(nodelist)
        out.append({
            "job": jid, "array": None, "slurm_state": _base_state(state), "attempt": 0, "nodes": nodes,
            "gpus": gpus_from(tres_alloc=tres), "exit_code": exit_code, "signal": signal,
            "name": name, "user": user, "tenant": account or None,
            "submit_ts": parse_time(submit), "start_ts": parse_time(start), "end_ts": parse_time(end),
            "reason": _reason(reason), "image": None,
        })
    return out


NODE_STATES = {
    "IDLE": "idle", "ALLOCATED": "allocated", "MIXED": "allocated", "COMPLETING": "allocated",
    "DOWN": "down", "FAIL": "fail", "FAILING": "fail", "FUTURE": "down", "UNKNOWN": "down",
    "INVAL": "drain", "DRAIN": "drain", "DRAINED": "drain", "DRAINING": "drain",
}


def node_state(raw: str) -> str:
    """``IDLE+DRAIN``, ``MIXED+DRAIN``, ``DOWN*+NOT_RESPONDING``, ``ALLOCATED`` -> contract node state."""
    words = {w.rstrip("*~#!%$@^-") for w in raw.upper().split("+")}
    for hard in ("DOWN", "FAIL", "FAILING"):
        if hard in words:
            return NODE_STATES[hard]
    if words & {"DRAIN", "DRAINED", "DRAINING", "INVAL"}:
        return "drain"
    base = raw.upper().split("+")[0].rstrip("*~#!%$@^-")
    return NODE_STATES.get(base, "down" if "NOT_RESPONDING" in words else "idle")


def nodes_from_scontrol(text: str) -> list[tuple[str, str, str | None]]:
    """``scontrol show node -o`` -> [(node, state, reason)]; the ``[user@time]`` suffix of Reason is cut."""
    out = []
    for line in text.splitlines():
        if not line.startswith("NodeName="):
            continue
        kv = parse_kv_line(line)
        reason = kv.get("Reason") or None
        if reason:
            reason = re.sub(r"\s*\[[^\]]*@[^\]]*\]\s*$", "", reason) or None
        out.append((kv["NodeName"], node_state(kv.get("State", "")), reason))
    return out


# ------------------------------------------------------------------ collector
def stable_id(*parts: object) -> str:
    """Event id derived from what the event says: a restart or a second collector re-emitting
    the same transition produces the same id, which downstream dedup drops."""
    return hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=16).hexdigest()


class SlurmCollector(Collector):
    name = NAME
    interval_s = INTERVAL_S

    def __init__(self, *, state_file: str | os.PathLike[str] | None = None, mode: str = "auto",
                 cluster: str | None = None, use_sacct: bool = True, nodes: bool = True,
                 timeout_s: float = 20.0, env: dict[str, str] | None = None,
                 keep_terminal_s: float = 86_400.0, max_jobs: int = 200_000) -> None:
        self.cluster = cluster or hostname()
        self.source = f"slurm@{self.cluster}"
        self.mode = mode  # auto | json | text
        self.use_sacct = use_sacct
        self.with_nodes = nodes
        self.timeout_s = timeout_s
        self.env = env
        self.keep_terminal_ms = int(keep_terminal_s * 1000)
        self.max_jobs = max_jobs
        self.state_path = Path(state_file) if state_file else None
        #: job -> {"s": last emitted state, "a": attempt, "t": last seen ms}
        self.jobs: dict[str, dict[str, Any]] = {}
        #: node -> [state, reason]
        self.nodes: dict[str, list[Any]] = {}
        self._json_ok: bool | None = None if mode == "auto" else mode == "json"
        self._load()

    # --------------------------------------------------------------- state file
    def _load(self) -> None:
        if not self.state_path or not self.state_path.is_file():
            return
        try:
            doc = orjson.loads(self.state_path.read_bytes())
            self.jobs = doc.get("jobs", {})
            self.nodes = doc.get("nodes", {})
        except (OSError, orjson.JSONDecodeError) as e:
            log.warning("slurm state file %s unreadable (%s): starting fresh; transitions may repeat",
                        self.state_path, e, extra={"collector": NAME})

    def _save(self) -> None:
        if not self.state_path:
            return
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(self.state_path.suffix + ".tmp")
        tmp.write_bytes(orjson.dumps({"v": 1, "jobs": self.jobs, "nodes": self.nodes}))
        os.replace(tmp, self.state_path)

    # --------------------------------------------------------------- commands
    async def _run(self, *argv: str, check: bool = True) -> str:
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                env=self.env)
        except FileNotFoundError:
            raise SlurmError(f"`{argv[0]}` not found: install the Slurm client or put it on PATH") from None
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self.timeout_s)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            raise SlurmError(f"`{' '.join(argv)}` took more than {self.timeout_s:g} s: is slurmctld up "
                             "(SLURM_CONF)?") from None
        if check and proc.returncode != 0:
            raise SlurmError(f"`{' '.join(argv)}` exited {proc.returncode}: "
                             f"{err.decode(errors='replace').strip()[:300]}")
        return out.decode(errors="replace")

    async def read_jobs(self) -> list[dict[str, Any]]:
        if self._json_ok is not False:
            try:
                out = await self._run("squeue", "--json")
                doc = orjson.loads(out)
                self._json_ok = True
                return jobs_from_squeue_json(doc)
            except (SlurmError, orjson.JSONDecodeError) as e:
                if self._json_ok:  # JSON worked before: a real failure, not a missing feature
                    raise
                log.info("squeue --json unavailable (%s); using scontrol show job -o", e,
                         extra={"collector": NAME})
                self._json_ok = False
        out = await self._run("scontrol", "show", "job", "-o", "-d")
        return jobs_from_scontrol(out)

    async def read_nodes(self) -> list[tuple[str, str, str | None]]:
        return nodes_from_scontrol(await self._run("scontrol", "show", "node", "-o"))

    async def read_sacct(self, job_ids: list[str]) -> list[dict[str, Any]]:
        out = await self._run("sacct", "-X", "-n", "-P", "-o", SACCT_FIELDS, "-j", ",".join(job_ids),
                              check=False)
        if "accounting storage is disabled" in out.lower():
            self.use_sacct = False
            return []
        return jobs_from_sacct(out)

    # --------------------------------------------------------------- one round
    async def collect(self) -> list[SchedJob | SchedNode]:
        now = now_ms()
        events: list[SchedJob | SchedNode] = []
        jobs_t = asyncio.ensure_future(self.read_jobs())
        nodes_t = asyncio.ensure_future(self.read_nodes()) if self.with_nodes else None
        try:
            records = await jobs_t
        finally:
            node_rows = await nodes_t if nodes_t else []
        seen: set[str] = set()
        for rec in records:
            seen.add(rec["job"])
            events.extend(self._job_changes(rec, now))
        # jobs we followed that slurmctld forgot before we saw them end
        lost = [j for j, st in self.jobs.items() if j not in seen and st["s"] not in TERMINAL]
        if lost and self.use_sacct:
            for rec in await self.read_sacct(lost[:500]):
                events.extend(self._job_changes(rec, now))
        for j in lost:
            st = self.jobs.get(j)
            if st is not None and st["s"] not in TERMINAL and not st.get("warned") and not self.use_sacct:
                st["warned"] = True
                log.warning("job %s left slurmctld before its end was seen and sacct is unavailable: "
                            "its final state is unknown (raise MinJobAge or enable accounting)", j,
                            extra={"collector": NAME, "job": j})
        for node, state, reason in node_rows:
            prev = self.nodes.get(node)
            if prev is None or prev[0] != state or prev[1] != reason:
                self.nodes[node] = [state, reason]
                events.append(SchedNode(
                    v=1, id=stable_id(self.source, "node", node, state, reason, now // 1000), ts=now,
                    source=self.source, node=node, data=SchedNodeData(state=state, reason=reason)))
        self._prune(now, seen)
        self._save()
        return events

    def _job_changes(self, rec: dict[str, Any], now: int) -> list[SchedJob]:
        state = JOB_STATES.get(rec["slurm_state"])
        if state is None:
            return []
        job, attempt = rec["job"], rec["attempt"]
        prev = self.jobs.get(job)
        out: list[SchedJob] = []
        if prev is not None and attempt > prev["a"] and prev["s"] not in TERMINAL:
            # requeued between two polls: close the previous attempt first
            out.append(self._event(rec, "requeued", prev["a"], now, end_ts=now, exit_code=None, signal=None))
        if prev is None or prev["s"] != state or prev["a"] != attempt:
            if not (prev is not None and attempt < prev["a"]):  # never go back to an older attempt
                out.append(self._event(rec, state, attempt, now))
                self.jobs[job] = {"s": state, "a": attempt, "t": now}
        if job in self.jobs:
            self.jobs[job]["t"] = now
        return out

    def _event(self, rec: dict[str, Any], state: str, attempt: int, now: int, **over: Any) -> SchedJob:
        terminal = state in TERMINAL
        end_ts = over.get("end_ts", rec["end_ts"] if terminal else None)
        if end_ts is not None and "end_ts" not in over:
            end_ts = min(end_ts + SLURM_TIME_RESOLUTION_MS, now)
        start_ts = rec["start_ts"] if state != "pending" else None
        if start_ts and start_ts > now:  # squeue shows the expected start of pending jobs
            start_ts = None
        ts = (end_ts if terminal else start_ts if state == "running" else None) or now
        ts = min(ts, now)
        data = SchedJobData(
            state=state, attempt=attempt, nodes=rec["nodes"] if state != "pending" else [],
            gpus=rec["gpus"], name=rec["name"], user=rec["user"],
            exit_code=over.get("exit_code", rec["exit_code"]) if terminal else None,
            signal=over.get("signal", rec["signal"]) if terminal else None,
            image=rec["image"], start_ts=start_ts, end_ts=end_ts if terminal else None,
            reason=rec["reason"],
        )
        return SchedJob(v=1, id=stable_id(self.source, rec["job"], attempt, state), ts=ts, source=self.source,
                        job=rec["job"], tenant=rec["tenant"], node=None, data=data)

    def _prune(self, now: int, seen: set[str]) -> None:
        horizon = now - self.keep_terminal_ms
        drop = [j for j, st in self.jobs.items()
                if j not in seen and (st["s"] in TERMINAL or st["t"] < horizon) and st["t"] < horizon]
        for j in drop:
            del self.jobs[j]
        if len(self.jobs) > self.max_jobs:  # bounded: forget the oldest terminal jobs first
            for j, _ in sorted(self.jobs.items(), key=lambda kv: (kv[1]["s"] not in TERMINAL, kv[1]["t"]))[
                    : len(self.jobs) - self.max_jobs]:
                del self.jobs[j]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state-file", default=os.environ.get("FAULTLINE_SLURM_STATE", "var/slurm-collector.json"),
                   help="where the last emitted job/node states are kept across restarts "
                        "(default var/slurm-collector.json)")
    p.add_argument("--mode", choices=("auto", "json", "text"), default="auto",
                   help="squeue --json (json), scontrol show job -o (text), or detect (auto)")
    p.add_argument("--cluster", help="cluster name for the event source (default: this host)")
    p.add_argument("--no-sacct", action="store_true", help="never ask sacct about jobs slurmctld forgot")
    p.add_argument("--no-nodes", action="store_true", help="do not emit sched.node")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds per Slurm command (default 20)")


def build(args: argparse.Namespace, settings: Settings) -> SlurmCollector:
    return SlurmCollector(state_file=args.state_file, mode=args.mode, cluster=args.cluster,
                          use_sacct=not args.no_sacct, nodes=not args.no_nodes, timeout_s=args.timeout)
