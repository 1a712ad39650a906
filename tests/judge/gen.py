"""The judge's own event generator (helper J).

Written from the public contract (../shared/spec/events.md) and from how real
clusters behave, WITHOUT reading the project's simulator, detectors or
correlation code: it builds event files the way a different vendor's pipeline
would (other node / switch / mount / job naming, other sampling intervals,
missing telemetry layers, extra unknown fields, out-of-order and duplicated
delivery, log lines in the formats the real software prints).

Each scenario returns a ``Scenario``: the events and the labelled expectations
(one per interrupted job attempt; jobs that must have NO incident).

    python tests/judge/gen.py --out /tmp/helperJ        # write every scenario's .jsonl
"""
from __future__ import annotations

import argparse
import json
import random
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

SEC = 1000
MIN = 60 * SEC
HOUR = 60 * MIN
T0 = 1773475200000  # 2026-03-14T08:00:00Z

# PCI bus ids of the 8 GPUs of an HGX/DGX A100/H100 board as nvidia-smi prints them
PCI = ["00000000:07:00.0", "00000000:0F:00.0", "00000000:47:00.0", "00000000:4E:00.0",
       "00000000:87:00.0", "00000000:90:00.0", "00000000:B7:00.0", "00000000:BD:00.0"]


def kbus(gpu: int) -> str:
    """The bus id as the NVRM kernel line prints it: 0000:4e:00."""
    return PCI[gpu][4:14].lower()


def xid_line(gpu: int, xid: int, pid, text: str, name: str = "python3") -> str:
    if pid is None:
        return f"NVRM: Xid (PCI:{kbus(gpu)}): {xid}, pid='<unknown>', name=<unknown>, {text}"
    return f"NVRM: Xid (PCI:{kbus(gpu)}): {xid}, pid={pid}, name={name}, {text}"


def torch_ts(ts: int) -> str:
    """glog-style stamp PyTorch's c10 logging prints: E0314 09:17:43.512345678."""
    import datetime as _dt
    d = _dt.datetime.fromtimestamp(ts / 1000, _dt.timezone.utc)
    return f"{d.month:02d}{d.day:02d} {d:%H:%M:%S}.{(ts % 1000) * 1000000:09d}"


def iso(ts: int) -> str:
    import datetime as _dt
    return _dt.datetime.fromtimestamp(ts / 1000, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def watchdog_lines(rank: int, ts: int, seq: int, op: str = "ALLREDUCE", numel: int = 262144000,
                   timeout_ms: int = 600000) -> str:
    st = torch_ts(ts)
    return (
        f"[rank{rank}]:[E{st} ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective "
        f"operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel}, "
        f"Timeout(ms)={timeout_ms}) ran for {timeout_ms + 37} milliseconds before timing out.\n"
        f"[rank{rank}]:[E{st} ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] "
        f"Exception (either an error or timeout) detected by watchdog at work: {seq}, last enqueued "
        f"NCCL work: {seq + 1}, last completed NCCL work: {seq - 1}."
    )


def child_failed(script: str, ts: int, host: str, rank: int, local: int, exitcode: int, pid: int,
                 sig: str | None = None) -> str:
    tb = f"Signal {-exitcode} ({sig}) received by PID {pid}" if sig else \
        "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
    return (
        "Traceback (most recent call last):\n"
        '  File "/usr/local/bin/torchrun", line 8, in <module>\n'
        "    sys.exit(main())\n"
        '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/run.py", line 892, in main\n'
        "    run(args)\n"
        '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/launcher/api.py", line 263, in launch_agent\n'
        "    raise ChildFailedError(\n"
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        "============================================================\n"
        f"{script} FAILED\n"
        "------------------------------------------------------------\n"
        "Failures:\n  <NO_OTHER_FAILURES>\n"
        "------------------------------------------------------------\n"
        "Root Cause (first observed failure):\n[0]:\n"
        f"  time      : {iso(ts).replace('T', '_')}\n"
        f"  host      : {host}\n"
        f"  rank      : {rank} (local_rank: {local})\n"
        f"  exitcode  : {exitcode} (pid: {pid})\n"
        "  error_file: <N/A>\n"
        f"  traceback : {tb}\n"
        "============================================================"
    )


# --------------------------------------------------------------------------- model

@dataclass
class Job:
    id: str
    attempt: int
    nodes: list[str]
    gpn: int
    start: int
    end: int | None
    state: str
    image: str | None
    ckpts: list = field(default_factory=list)      # (ts, phase, step, path)
    progress: list = field(default_factory=list)   # (ts, step)

    @property
    def gpus(self) -> int:
        return len(self.nodes) * self.gpn

    def rank(self, node: str, local: int) -> int:
        return self.nodes.index(node) * self.gpn + local

    def ranks(self) -> dict:
        return {str(i * self.gpn + g): n for i, n in enumerate(self.nodes) for g in range(self.gpn)}

    def last_ok(self, before: int | None = None):
        ok = [c for c in self.ckpts if c[1] == "succeeded" and (before is None or c[0] <= before)]
        return max(ok, key=lambda c: c[0]) if ok else None

    def last_progress(self) -> int | None:
        return self.progress[-1][0] if self.progress else None


@dataclass
class Expect:
    job: str
    attempt: int
    category: str | set
    component: str | set | None      # None: do not check
    job_obj: Job | None = None
    ckpt_step: int | None | str = "auto"   # "auto": from job_obj.last_ok(); None: expect null
    failure_ts: set | None = None      # acceptable failure_ts values (ms), checked +-2 s
    retry_attempt: int | None = None
    retry_same_nodes: bool | None = None
    note: str = ""


@dataclass
class Scenario:
    name: str
    story: str
    events: list
    expect: list[Expect]
    healthy: list[tuple[str, int]]       # (job, attempt) that must have NO incident
    gen: "Gen"

    def write(self, path: Path, seed: int | None = None) -> Path:
        self.gen.write(path, self.events, seed)
        return path


class Gen:
    """Collects events; one instance per scenario (deterministic from the seed)."""

    def __init__(self, seed: int, *, dup_rate=0.02, jitter_ms=3000, extra_rate=0.05):
        self.rng = random.Random(seed)
        self.events: list[dict] = []
        self.dup_rate = dup_rate
        self.jitter_ms = jitter_ms
        self.extra_rate = extra_rate
        self.counters: dict = {}
        self.delay: dict[str, int] = {}      # event id -> extra delivery delay (ms), beyond the jitter

    def late(self, e: dict, ms: int):
        """Deliver ``e`` ``ms`` after its ts (e.g. a BMC SEL polled minutes later)."""
        self.delay[e["id"]] = ms
        return e

    # ---------------------------------------------------------------- envelope
    def _id(self) -> str:
        h = f"{self.rng.getrandbits(128):032x}"
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"

    def ev(self, kind, ts, data, *, node=None, job=None, source="agent", tenant=None):
        e = {"v": 1, "id": self._id(), "ts": int(ts), "kind": kind, "source": source,
             "node": node, "job": job, "tenant": tenant, "data": data}
        self.events.append(e)
        return e

    # ---------------------------------------------------------------- inventory
    def inventory(self, node, ts, versions: dict, links: list, storage: list):
        self.ev("inventory.versions", ts, dict(versions), node=node, source=f"inv-agent@{node}")
        self.ev("inventory.topology", ts + 200, {"links": links, "storage": storage}, node=node,
                source=f"inv-agent@{node}")

    def change(self, node, ts, component, frm, to, actor="ansible-awx", ticket=None):
        self.ev("inventory.change", ts, {"component": component, "from": frm, "to": to,
                                         "actor": actor, "ticket": ticket}, node=node,
                source=f"cmdb@{actor}")

    # ---------------------------------------------------------------- GPU telemetry
    def gpus(self, nodes, t_from, t_to, interval, *, ngpu=8, busy=None, mods: list[Callable] = (),
             mem_total=81920, src="dcgm-exporter"):
        """gpu.sample of every GPU of ``nodes`` every ``interval`` ms.
        busy: {node: [(start, end), ...]} when the GPUs run a job (else idle).
        mods: f(node, gpu, ts, data, state) -> False to drop the sample."""
        rng = self.rng
        for node in nodes:
            phase = rng.randrange(interval)
            for g in range(ngpu):
                st = self.counters.setdefault(("gpu", node, g), {
                    "sbe": rng.choice([0, 0, 0, 2, 17, 140]), "dbe": 0, "nvl": 0, "pcie": rng.choice([0, 0, 3])})
                uuid = f"GPU-{zlib.crc32(f'{node}/{g}'.encode()):08x}-5b1c-{g:04x}-9a3e-{zlib.crc32(node.encode()):012d}"
                t = t_from + phase
                while t < t_to:
                    run = busy and any(a <= t < b for a, b in busy.get(node, ()))
                    if rng.random() < 0.0005:
                        st["sbe"] += 1
                    d = {"gpu": g, "uuid": uuid,
                         "util_pct": rng.randint(93, 100) if run else 0,
                         "mem_used_mib": (rng.randint(61000, 70500) if mem_total == 81920 else
                                          rng.randint(int(mem_total * 0.74), int(mem_total * 0.86))) if run else 4,
                         "mem_total_mib": mem_total,
                         "temp_c": rng.randint(58, 71) if run else rng.randint(31, 36),
                         "power_w": round(rng.uniform(290, 395) if run else rng.uniform(55, 62), 1),
                         "sm_clock_mhz": 1410 if run else 210,
                         "throttle": (["sw_power_cap"] if run and rng.random() < 0.15 else []),
                         "ecc_sbe": st["sbe"], "ecc_dbe": st["dbe"], "nvlink_errors": st["nvl"],
                         "pcie_replay": st["pcie"]}
                    keep = True
                    for m in mods:
                        if m(node, g, t, d, st) is False:
                            keep = False
                    if keep:
                        d["ecc_sbe"], d["ecc_dbe"], d["nvlink_errors"], d["pcie_replay"] = \
                            st["sbe"], st["dbe"], st["nvl"], st["pcie"]
                        self.ev("gpu.sample", t, d, node=node, source=f"{src}@{node}")
                    t += interval + rng.randint(-150, 150)

    def xid(self, node, ts, gpu, xid, text, *, pid=None, name="python3", kernel_log_job=None,
            gpu_field=True, rank=None):
        msg = xid_line(gpu, xid, pid, text, name)
        self.ev("gpu.xid", ts, {"gpu": gpu if gpu_field else None, "pci": PCI[gpu], "xid": xid,
                                "pid": pid, "message": msg}, node=node, source=f"kmsg-watch@{node}")
        if kernel_log_job:
            self.ev("runtime.log", ts + 40, {"rank": None, "stream": "kernel", "message": msg},
                    node=node, job=kernel_log_job, source=f"fluent-bit@{node}")

    # ---------------------------------------------------------------- BMC
    def bmc(self, nodes, t_from, t_to, interval, *, mods: list[Callable] = ()):
        rng = self.rng
        sensors = [("Inlet Temp", "temperature", "degrees C", 23.0, 1.0),
                   ("CPU1 Temp", "temperature", "degrees C", 52.0, 4.0),
                   ("PSU1 Input Power", "power", "Watts", 2950.0, 80.0),
                   ("Fan1A", "fan", "RPM", 9800.0, 300.0),
                   ("VCORE CPU0", "voltage", "Volts", 1.79, 0.01)]
        for node in nodes:
            t = t_from + rng.randrange(interval)
            while t < t_to:
                for name, typ, unit, mu, sd in sensors:
                    d = {"sensor": name, "type": typ, "value": round(rng.gauss(mu, sd), 2),
                         "unit": unit, "status": "ok"}
                    keep = True
                    for m in mods:
                        if m(node, t, d) is False:
                            keep = False
                    if keep:
                        self.ev("hw.sensor", t, d, node=node, source=f"redfish@{node}-bmc")
                t += interval

    def sel(self, node, ts, severity, sensor_type, message, message_id=None):
        return self.ev("hw.sel", ts, {"entry_id": str(self.rng.randint(100, 9999)), "severity": severity,
                               "sensor_type": sensor_type, "message_id": message_id,
                               "message": message}, node=node, source=f"redfish@{node}-bmc")

    # ---------------------------------------------------------------- network
    def ports(self, links, t_from, t_to, interval, *, mods: list[Callable] = (), speed=400000,
              src="gnmi"):
        """links: [(device, port, node_or_None)]; net.port counters."""
        rng = self.rng
        for device, port, node in links:
            st = self.counters.setdefault(("port", device, port), {
                "in_errors": rng.choice([0, 0, 4]), "out_errors": 0, "in_discards": rng.randint(0, 40),
                "out_discards": rng.randint(0, 40), "in_octets": rng.randint(10**12, 10**13),
                "out_octets": rng.randint(10**12, 10**13)})
            t = t_from + rng.randrange(interval)
            while t < t_to:
                st["in_octets"] += int(rng.uniform(1e9, 3e9) * interval / 1000)
                st["out_octets"] += int(rng.uniform(1e9, 3e9) * interval / 1000)
                if rng.random() < 0.01:
                    st["in_discards"] += rng.randint(1, 3)
                d = {"device": device, "port": port, "oper_status": "up", "speed_mbps": speed}
                keep = True
                for m in mods:
                    if m(device, port, t, d, st) is False:
                        keep = False
                if keep:
                    d.update({k: st[k] for k in ("in_errors", "out_errors", "in_discards",
                                                  "out_discards", "in_octets", "out_octets")})
                    self.ev("net.port", t, d, node=node, source=f"{src}@{device}")
                t += interval

    def link(self, device, port, node, ts, state, src="snmptrapd"):
        self.ev("net.link", ts, {"device": device, "port": port, "state": state}, node=node,
                source=f"{src}@{device}")

    def rdma(self, nodes, t_from, t_to, interval, *, hcas=("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"),
             mods: list[Callable] = (), roce=True):
        rng = self.rng
        for node in nodes:
            for hca in hcas:
                st = self.counters.setdefault(("rdma", node, hca), {
                    "link_downed": 0, "symbol_error": 0, "port_rcv_errors": 0,
                    "local_ack_timeout_err": rng.randint(0, 3), "out_of_sequence": rng.randint(0, 50),
                    "packet_seq_err": rng.randint(0, 10), "np_cnp_sent": rng.randint(0, 10**5),
                    "rp_cnp_handled": rng.randint(0, 10**5), "np_ecn_marked_roce_packets": rng.randint(0, 10**5),
                    "port_xmit_data": rng.randint(10**12, 10**13), "port_rcv_data": rng.randint(10**12, 10**13),
                    "port_xmit_wait": rng.randint(10**6, 10**7)})
                if not roce:        # InfiniBand: no CNP/ECN counters, PMA xmit discards instead
                    for k in ("np_cnp_sent", "rp_cnp_handled", "np_ecn_marked_roce_packets"):
                        st.pop(k, None)
                    st.setdefault("port_xmit_discards", rng.randint(0, 20))
                t = t_from + rng.randrange(interval)
                while t < t_to:
                    s = interval / 1000
                    if roce:
                        st["np_cnp_sent"] += int(rng.uniform(0, 40) * s)        # normal RoCE background
                        st["rp_cnp_handled"] += int(rng.uniform(0, 40) * s)
                        st["np_ecn_marked_roce_packets"] += int(rng.uniform(0, 50) * s)
                    st["port_xmit_data"] += int(rng.uniform(5e8, 1.2e9) * s)
                    st["port_rcv_data"] += int(rng.uniform(5e8, 1.2e9) * s)
                    st["port_xmit_wait"] += int(rng.uniform(1e3, 1e4) * s)
                    if rng.random() < 0.02:
                        st["out_of_sequence"] += 1
                    keep = True
                    for m in mods:
                        if m(node, hca, t, st) is False:
                            keep = False
                    if keep:
                        self.ev("net.rdma", t, {"device": hca, "port": 1, "counters": dict(st)}, node=node,
                                source=f"rdma-exporter@{node}")
                    t += interval

    # ---------------------------------------------------------------- storage
    def storage(self, nodes, path, fs_type, t_from, t_to, interval, *, used=61.0,
                mods: list[Callable] = ()):
        rng = self.rng
        for node in nodes:
            t = t_from + rng.randrange(interval)
            while t < t_to:
                d = {"path": path, "fs_type": fs_type, "read_iops": rng.randint(300, 2500),
                     "write_iops": rng.randint(50, 400), "read_mbps": round(rng.uniform(200, 900), 1),
                     "write_mbps": round(rng.uniform(20, 300), 1),
                     "read_lat_ms": round(rng.uniform(0.4, 2.5), 2), "write_lat_ms": round(rng.uniform(0.8, 4.0), 2),
                     "queue_depth": rng.randint(0, 6), "used_pct": round(used + rng.uniform(-0.05, 0.05), 2)}
                keep = True
                for m in mods:
                    if m(node, t, d) is False:
                        keep = False
                if keep:
                    self.ev("storage.sample", t, d, node=node, source=f"node-exporter@{node}")
                t += interval

    def mount(self, node, ts, path, state, error=None):
        self.ev("storage.mount", ts, {"path": path, "state": state, "error": error}, node=node,
                source=f"mount-watch@{node}")

    # ---------------------------------------------------------------- scheduler + runtime
    def job(self, jid, nodes, *, gpn=8, start, end, state, attempt=0, submit=None, image=None,
            name="train", user="alice", tenant=None, exit_code=None, signal=None, reason=None,
            step_time=1.4, progress_every=60 * SEC, first_step=0, ckpt_every=30 * MIN,
            ckpt_dir="/lustre/scratch/ckpt", ckpt_dur=45 * SEC, ckpt_fmt="global_step{step}",
            stop_at=None, ckpt_fail: dict | None = None, init=150 * SEC, progress_rank=0,
            src="slurmctld@head01", emit_end=True, step_time_fn=None) -> Job:
        j = Job(jid, attempt, list(nodes), gpn, start, end, state, image)
        base = {"attempt": attempt, "nodes": list(nodes), "gpus": len(nodes) * gpn, "ranks": j.ranks(),
                "image": image, "name": name, "user": user}
        sub = submit if submit is not None else start - 95 * SEC
        self.ev("sched.job", sub, dict(base, state="pending", exit_code=None, signal=None, start_ts=None,
                                       end_ts=None, reason="Priority"), job=jid, source=src, tenant=tenant)
        self.ev("sched.job", start, dict(base, state="running", exit_code=None, signal=None, start_ts=start,
                                         end_ts=None, reason=None), job=jid, source=src, tenant=tenant)
        if end is not None and emit_end:
            self.ev("sched.job", end, dict(base, state=state, exit_code=exit_code, signal=signal,
                                           start_ts=start, end_ts=end, reason=reason),
                    job=jid, source=src, tenant=tenant)
        # progress + checkpoints
        halt = min(x for x in (stop_at, end) if x is not None) if (stop_at or end) else start + 6 * HOUR
        t = start + init
        step = first_step
        next_ck = t + ckpt_every
        rng = self.rng
        while t < halt:
            st = step_time_fn(t) if step_time_fn else step_time
            st = st * rng.uniform(0.97, 1.03)
            self.ev("runtime.progress", t, {"rank": progress_rank, "step": step, "step_time_s": round(st, 3),
                                            "samples_per_s": round(1024 / st, 1)}, job=jid,
                    source=f"trainer@{nodes[0]}", tenant=tenant)
            j.progress.append((t, step))
            nt = t + progress_every
            if next_ck <= nt and next_ck < halt:
                ck_step = step + int((next_ck - t) / 1000 / st)
                path = f"{ckpt_dir}/{ckpt_fmt.format(step=ck_step)}"
                self.ev("runtime.checkpoint", next_ck, {"phase": "started", "step": ck_step, "path": path,
                                                        "bytes": None, "duration_s": None, "error": None},
                        job=jid, source=f"trainer@{nodes[0]}", tenant=tenant)
                j.ckpts.append((next_ck, "started", ck_step, path))
                done = next_ck + ckpt_dur
                if ckpt_fail and ck_step in ckpt_fail:
                    err = ckpt_fail[ck_step]
                    self.ev("runtime.checkpoint", done, {"phase": "failed", "step": ck_step, "path": path,
                                                         "bytes": None, "duration_s": ckpt_dur / 1000,
                                                         "error": err}, job=jid,
                            source=f"trainer@{nodes[0]}", tenant=tenant)
                    j.ckpts.append((done, "failed", ck_step, path))
                elif done < halt:
                    self.ev("runtime.checkpoint", done, {"phase": "succeeded", "step": ck_step, "path": path,
                                                         "bytes": 14_837_202_944, "duration_s": ckpt_dur / 1000,
                                                         "error": None}, job=jid,
                            source=f"trainer@{nodes[0]}", tenant=tenant)
                    j.ckpts.append((done, "succeeded", ck_step, path))
                next_ck += ckpt_every
                nt = max(nt, done + 5 * SEC) if done < halt else nt
            step += int((nt - t) / 1000 / st)
            t = nt
        return j

    def log(self, job: Job | str, ts, message, *, rank=None, stream="stderr", node=None, tenant=None):
        jid = job.id if isinstance(job, Job) else job
        if node is None and isinstance(job, Job) and rank is not None:
            node = job.nodes[rank // job.gpn]
        self.ev("runtime.log", ts, {"rank": rank, "stream": stream, "message": message}, node=node,
                job=jid, source=f"fluent-bit@{node or 'ctl'}", tenant=tenant)

    def sched_node(self, node, ts, state, reason=None, src="slurmctld@head01"):
        self.ev("sched.node", ts, {"state": state, "reason": reason}, node=node, source=src)

    # ---------------------------------------------------------------- delivery
    def write(self, path: Path, events: list | None = None, seed: int | None = None) -> Path:
        """Deliver like a real bus: slightly out of order (< jitter), some duplicates,
        some unknown extra fields (envelope and data). ``seed`` picks another delivery order."""
        rng = random.Random(len(self.events) if seed is None else seed)
        evs = events if events is not None else self.events
        keyed = []
        for e in evs:
            if rng.random() < self.extra_rate:
                e = dict(e)
                e["x_cluster"] = "eu-west-ams2"
                if e["kind"] != "inventory.versions":     # that one is a str -> str map
                    e["data"] = dict(e["data"], vendor_ext={"collector_version": "3.4.1", "seq": rng.randint(1, 10**6)})
            k = e["ts"] + rng.uniform(0, self.jitter_ms) + self.delay.get(e["id"], 0)
            keyed.append((k, e))
            if rng.random() < self.dup_rate:
                keyed.append((k + rng.uniform(0, 2000), e))
        keyed.sort(key=lambda x: x[0])
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w") as f:
            for _, e in keyed:
                f.write(json.dumps(e, separators=(",", ":")) + "\n")
        return path


# =========================================================================== helpers

def dgx(i: int) -> str:
    return f"dgx-a100-{i:03d}"


def roce_links(nodes, leaf_of, port_of, seg_of, hcas=("mlx5_0",)):
    return {n: [{"nic": h, "switch": leaf_of(n), "port": port_of(n, h), "segment": seg_of(n)} for h in hcas]
            for n in nodes}


def std_inventory(g: Gen, nodes, ts, *, links: dict, storage: list, versions: dict | None = None,
                  per_node: dict | None = None):
    base = versions or {"driver": "550.90.07", "cuda": "12.4", "nccl": "2.21.5", "gpu_firmware": "96.00.89.00.01",
                        "bmc_firmware": "24.04.10", "bios": "1.8.2", "kernel": "5.15.0-119-generic",
                        "os": "Ubuntu 22.04.4 LTS", "ofed": "MLNX_OFED_LINUX-24.04-0.7.0.0",
                        "container_runtime": "containerd 1.7.18"}
    for n in nodes:
        v = dict(base, **((per_node or {}).get(n, {})))
        g.inventory(n, ts, v, links.get(n, []), storage)


def stop_after(node_sel, t_stop, gpu_sel=None):
    """gpu mod: no samples from the selected GPU(s) after t_stop (fallen off the bus / node down)."""
    def m(node, gpu, ts, d, st):
        if node == node_sel and ts >= t_stop and (gpu_sel is None or gpu == gpu_sel):
            return False
    return m


def idle_after(job: Job, t_end):
    def m(node, gpu, ts, d, st):
        if node in job.nodes and ts >= t_end:
            d.update(util_pct=0, mem_used_mib=4, power_w=round(58 + gpu * 0.3, 1), sm_clock_mhz=210,
                     temp_c=35, throttle=[])
    return m


def nccl_timeouts(g: Gen, job: Job, ts, ranks, seq=48213, op="ALLREDUCE"):
    for i, r in enumerate(ranks):
        g.log(job, ts + i * 37, watchdog_lines(r, ts + i * 37, seq, op), rank=r)


# =========================================================================== scenarios

SCENARIOS: dict[str, Callable[[], Scenario]] = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def _dgx_fabric(nodes, leaf_size=8, leaf_fmt="sw-leaf-{}", seg_fmt="leaf-{}", first_leaf=1):
    idx = {n: i for i, n in enumerate(nodes)}
    leaf = lambda n: leaf_fmt.format(first_leaf + idx[n] // leaf_size)
    port = lambda n, h: f"Ethernet{4 * (idx[n] % leaf_size)}"
    seg = lambda n: seg_fmt.format(first_leaf + idx[n] // leaf_size)
    return leaf, port, seg


@scenario
def gpu_xid79_16n():
    """XID 79 on dgx-a100-009 GPU 3 of a 16-node k8s PyTorchJob; every OTHER rank logs the NCCL
    watchdog 10 min later; a checkpoint had started 20 s before the fault and never finished."""
    g = Gen(79)
    nodes = [dgx(i) for i in range(1, 21)]
    jn = nodes[:16]
    leaf, port, seg = _dgx_fabric(nodes)
    links = {n: [{"nic": "mlx5_0", "switch": leaf(n), "port": f"Ethernet{4 * (i % 8)}", "segment": seg(n)}]
             for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre",
                                                       "server": "mds01-ib"}])
    start = T0 + 5 * MIN
    fault = start + 150 * SEC + 80 * MIN + 20 * SEC
    end = fault + 10 * MIN + 25 * SEC
    j = g.job("pytorchjob-llama-7b-xk2p", jn, start=start, end=end, state="failed", exit_code=1,
              image="nvcr.io/nvidia/pytorch:24.05-py3", user="mlops-bot", tenant="team-nlp",
              reason="BackoffLimitExceeded", src="training-operator@kube-ctl", ckpt_every=20 * MIN,
              stop_at=fault, ckpt_dir="/lustre/scratch/llama7b/ckpt")
    bad = dgx(9)
    g.gpus(nodes, T0, end + 20 * MIN, 15 * SEC, busy={n: [(start, end)] for n in jn},
           mods=[stop_after(bad, fault, 3), idle_after(j, end)])
    g.bmc(nodes, T0, end + 20 * MIN, 60 * SEC)
    g.ports([(leaf(n), f"Ethernet{4 * (i % 8)}", n) for i, n in enumerate(nodes)], T0, end + 20 * MIN, 30 * SEC)
    g.xid(bad, fault, 3, 79, "GPU has fallen off the bus.", pid=48213, kernel_log_job=j.id)
    g.log(j, fault + 900, f"NVRM: GPU {PCI[3][4:]}: GPU has fallen off the bus.", stream="kernel", node=bad)
    others = [r for r in range(j.gpus) if j.nodes[r // 8] != bad][::5]
    nccl_timeouts(g, j, fault + 600 * SEC, others, seq=71243)
    g.log(j, end - 3 * SEC, child_failed("pretrain_llama.py", end - 3 * SEC, dgx(2), 9, 1, -6, 51177, "SIGABRT"),
          rank=None, stream="stderr", node=dgx(1))
    return Scenario("gpu_xid79_16n", gpu_xid79_16n.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_hardware", f"gpu:{bad}/3", j,
                            failure_ts={end, j.last_progress()})], [], g)


@scenario
def gpu_xid48_slurm_array():
    """Slurm array task 123456_7 on 2 nodes: XID 48 (DBE) on node0042 GPU 5, ecc_dbe 0->1,
    rank 13 dies with 'uncorrectable ECC error encountered'. No BMC collector at this site."""
    g = Gen(48)
    nodes = [f"node{i:04d}.cluster.local" for i in range(40, 46)]
    jn = nodes[1:3]
    links = {n: [{"nic": "ib0", "switch": "ib-leaf-1", "port": str(10 + i), "segment": "ib-leaf-1"}]
             for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/gpfs/work", "backend": "gpfs", "server": "ess01"}])
    start = T0 + 3 * MIN
    fault = start + 62 * MIN
    end = fault + 40 * SEC
    j = g.job("123456_7", jn, start=start, end=end, state="failed", exit_code=1, reason="NonZeroExitCode",
              user="bsmith", tenant="physics-ml", ckpt_every=25 * MIN, stop_at=fault,
              ckpt_dir="/gpfs/work/bsmith/run17", ckpt_fmt="iter_{step:07d}")
    bad = nodes[2]

    def dbe(node, gpu, ts, d, st):
        if node == bad and gpu == 5 and ts >= fault and st["dbe"] == 0:
            st["dbe"] = 1
    g.gpus(nodes, T0, end + 15 * MIN, 30 * SEC, busy={n: [(start, end)] for n in jn},
           mods=[dbe, idle_after(j, end)])
    g.rdma(nodes, T0, end + 15 * MIN, 30 * SEC, hcas=("mlx5_0",))
    g.xid(bad, fault, 5, 48, "An uncorrectable double bit error (DBE) has been detected on GPU in the "
          "framebuffer at partition 6, subpartition 0.", pid=220931)
    r = j.rank(bad, 5)
    g.log(j, fault + 1200, "Traceback (most recent call last):\n"
          '  File "/gpfs/work/bsmith/src/train.py", line 311, in <module>\n    loss.backward()\n'
          "RuntimeError: CUDA error: uncorrectable ECC error encountered\n"
          "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
          "below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1.", rank=r)
    g.log(j, end - 2 * SEC, f"srun: error: {bad}: task {r}: Exited with exit code 1", stream="stderr", node=nodes[1])
    return Scenario("gpu_xid48_slurm_array", gpu_xid48_slurm_array.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_hardware", f"gpu:{bad}/5", j, failure_ts={end, j.last_progress()})],
                    [], g)


@scenario
def gpu_xid95_uncontained_1n():
    """Single-node 8-GPU Ray job on hgx-h100-a07: XID 95 uncontained memory error on GPU 6."""
    g = Gen(95)
    nodes = ["hgx-h100-a07", "hgx-h100-a08"]
    links = {n: [{"nic": f"mlx5_{k}", "switch": "ib-leaf-7", "port": str(k + 1 + 8 * i), "segment": "su-2"}
                 for k in range(8)] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}],
                  versions={"driver": "560.35.03", "cuda": "12.6", "nccl": "2.23.4", "kernel": "6.8.0-45-generic"})
    start = T0 + 2 * MIN
    fault = start + 47 * MIN
    end = fault + 15 * SEC
    j = g.job("rayjob-sft-mistral-7f3c", nodes[:1], start=start, end=end, state="failed", exit_code=1,
              src="kuberay@kube-ctl", tenant="applied-ai", user="svc-ray", ckpt_every=15 * MIN,
              ckpt_dir="/mnt/weka/sft/mistral/checkpoints", ckpt_fmt="checkpoint-{step}", stop_at=fault,
              image="registry.corp/ml/sft:1.9.2", progress_every=10 * SEC)
    g.gpus(nodes, T0, end + 10 * MIN, 5 * SEC, busy={nodes[0]: [(start, end)]}, mods=[idle_after(j, end)])
    g.bmc(nodes, T0, end + 10 * MIN, 30 * SEC)
    g.xid(nodes[0], fault, 6, 95, "Uncontained: FBHUB. RST: Yes, D-RST: No", pid=9313)
    g.log(j, fault + 700, "RuntimeError: CUDA error: uncorrectable ECC error encountered\n"
          "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.", rank=6)
    g.log(j, end - 1500, "ray.exceptions.RayTaskError(RuntimeError): ray::RayTrainWorker._RayTrainWorker__execute() "
          "(pid=9313, ip=10.40.7.7)", rank=None, node=nodes[0])
    return Scenario("gpu_xid95_uncontained_1n", gpu_xid95_uncontained_1n.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_hardware", "gpu:hgx-h100-a07/6", j, failure_ts={end, j.last_progress()})],
                    [], g)


@scenario
def gpu_xid94_contained_2n():
    """2-node job, 10 s sampling: XID 94 contained ECC error on GPU 2 of the second node."""
    g = Gen(94)
    nodes = ["gpu-b-101", "gpu-b-102", "gpu-b-103"]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-12", "port": f"Ethernet{8 * i}", "segment": "pod-b"}]
             for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds02"}])
    start = T0 + 4 * MIN
    fault = start + 38 * MIN
    end = fault + 25 * SEC
    j = g.job("88123", nodes[:2], start=start, end=end, state="failed", exit_code=1, ckpt_every=10 * MIN,
              stop_at=fault, ckpt_dir="/lustre/scratch/vit/ckpt", user="dkim")
    g.gpus(nodes, T0, end + 10 * MIN, 10 * SEC, busy={n: [(start, end)] for n in nodes[:2]}, mods=[idle_after(j, end)])
    g.xid(nodes[1], fault, 2, 94, "Contained: SM (0x1). RST: No, D-RST: No", pid=77120, kernel_log_job=j.id)
    g.log(j, fault + 500, "RuntimeError: CUDA error: uncorrectable ECC error encountered", rank=j.rank(nodes[1], 2))
    return Scenario("gpu_xid94_contained_2n", gpu_xid94_contained_2n.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_hardware", f"gpu:{nodes[1]}/2", j, failure_ts={end, j.last_progress()})],
                    [], g)


@scenario
def gpu_row_remap_failure():
    """XID 63 (row remap recorded) 20 min earlier, then XID 64 row-remap FAILURE on GPU 1 and the job dies."""
    g = Gen(64)
    nodes = [dgx(i) for i in range(30, 34)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-4", "port": f"Ethernet{4 * i}", "segment": "leaf-4"}]
             for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}])
    start = T0 + 2 * MIN
    fault = start + 70 * MIN
    end = fault + 12 * SEC
    j = g.job("pytorchjob-bert-large-q8w2z", nodes, start=start, end=end, state="failed", exit_code=1,
              src="training-operator@kube-ctl", ckpt_every=30 * MIN, stop_at=fault, tenant="search")
    bad = nodes[2]

    def rr(node, gpu, ts, d, st):
        if node == bad and gpu == 1:
            if ts >= fault - 20 * MIN:
                d["remapped_rows_pending"] = 0
                st["sbe"] = max(st["sbe"], 310)
            if ts >= fault:
                d["remapped_rows_pending"] = 1
                st["dbe"] = 2
    g.gpus(nodes, T0, end + 10 * MIN, 20 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[rr, idle_after(j, end)])
    g.bmc(nodes, T0, end + 10 * MIN, 60 * SEC)
    g.xid(bad, fault - 20 * MIN, 1, 63, "Row Remapper: New row (0x0000000000a1b2c0) was marked for remapping, reset gpu to activate.", pid=None)
    g.xid(bad, fault, 1, 64, "Row Remapper: Failed to remap row 0x0000000000a1b2c8, no spare rows available in bank.", pid=31021)
    g.log(j, fault + 300, "RuntimeError: CUDA error: uncorrectable ECC error encountered", rank=j.rank(bad, 1))
    return Scenario("gpu_row_remap_failure", gpu_row_remap_failure.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_hardware", f"gpu:{bad}/1", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def gpu_ecc_dbe_no_xid():
    """No kernel/XID collector at this site: only NVML samples show ecc_dbe growing 0->3 on GPU 4
    (and retired pages), and the rank on that GPU dies with an ECC CUDA error."""
    g = Gen(4848)
    nodes = [f"cn-a{i:02d}" for i in range(1, 5)]
    links = {n: [{"nic": "ibp12s0", "switch": "ib-leaf-3", "port": str(i + 1), "segment": "ib-leaf-3"}]
             for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/gpfs/projects", "backend": "gpfs", "server": "ess02"}])
    start = T0 + 2 * MIN
    fault = start + 55 * MIN
    end = fault + 8 * SEC
    j = g.job("5531207", nodes[:2], start=start, end=end, state="failed", exit_code=1, ckpt_every=20 * MIN,
              stop_at=fault, ckpt_dir="/gpfs/projects/llm/ckpts", user="rnguyen")
    bad = nodes[1]

    def dbe(node, gpu, ts, d, st):
        if node == bad and gpu == 4 and ts >= fault - 40 * SEC:
            st["dbe"] = min(3, st["dbe"] + 1)
            d["retired_pages"] = st["dbe"]
    g.gpus(nodes, T0, end + 10 * MIN, 20 * SEC, busy={n: [(start, end)] for n in nodes[:2]}, mods=[dbe, idle_after(j, end)])
    g.log(j, fault, "RuntimeError: CUDA error: uncorrectable ECC error encountered\n"
          "CUDA kernel errors might be asynchronously reported at some other API call.", rank=j.rank(bad, 4))
    return Scenario("gpu_ecc_dbe_no_xid", gpu_ecc_dbe_no_xid.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_hardware", f"gpu:{bad}/4", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def gpu_nvlink_xid74():
    """XID 74 NVLink fatal error on GPU 2 of the third node of a 4-node job; nvlink_errors jump."""
    g = Gen(74)
    nodes = [dgx(i) for i in range(41, 46)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-6", "port": f"Ethernet{4 * i}", "segment": "leaf-6"}]
             for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}])
    start = T0 + 2 * MIN
    fault = start + 44 * MIN
    end = fault + 30 * SEC
    jn = nodes[:4]
    j = g.job("pytorchjob-gpt-neox-20b-m2k9", jn, start=start, end=end, state="failed", exit_code=1,
              src="training-operator@kube-ctl", ckpt_every=15 * MIN, stop_at=fault, tenant="team-nlp")
    bad = jn[2]

    def nvl(node, gpu, ts, d, st):
        if node == bad and gpu == 2 and ts >= fault - 10 * SEC:
            st["nvl"] += 5000
    g.gpus(nodes, T0, end + 10 * MIN, 10 * SEC, busy={n: [(start, end)] for n in jn}, mods=[nvl, idle_after(j, end)])
    g.xid(bad, fault, 2, 74, "NVLink: fatal error detected on link 5(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)", pid=66012,
          kernel_log_job=j.id)
    g.log(j, fault + 2 * SEC, "RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution\n"
          "CUDA kernel errors might be asynchronously reported at some other API call.", rank=j.rank(bad, 2))
    return Scenario("gpu_nvlink_xid74", gpu_nvlink_xid74.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_nvlink", f"gpu:{bad}/2", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def gpu_nvlink_growth_no_xid():
    """No XID: NVLink CRC/replay counter of GPU 6 on one node climbs by thousands per minute for
    15 min; NCCL collectives stall and every rank hits the watchdog."""
    g = Gen(7474)
    nodes = [f"hgx-h100-b{i:02d}" for i in range(1, 5)]
    links = {n: [{"nic": f"mlx5_{k}", "switch": f"ib-leaf-{k + 1}", "port": str(i + 1), "segment": f"rail-{k}"}
                 for k in range(8)] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}])
    start = T0 + 2 * MIN
    onset = start + 40 * MIN
    stall = onset + 15 * MIN
    end = stall + 10 * MIN + 20 * SEC
    j = g.job("pytorchjob-vit-22b-p0q1", nodes, start=start, end=end, state="failed", exit_code=1,
              src="training-operator@kube-ctl", ckpt_every=20 * MIN, stop_at=stall, ckpt_dir="/mnt/weka/vit22b",
              step_time_fn=lambda t: 1.4 if t < onset else 2.1)
    bad = nodes[1]

    def nvl(node, gpu, ts, d, st):
        if node == bad and gpu == 6 and ts >= onset:
            st["nvl"] += 1800 + int((ts - onset) / 1000)
    g.gpus(nodes, T0, end + 10 * MIN, 15 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[nvl, idle_after(j, end)])
    g.bmc(nodes, T0, end + 10 * MIN, 60 * SEC)
    nccl_timeouts(g, j, stall + 600 * SEC, list(range(0, 32, 3)), seq=90211)
    return Scenario("gpu_nvlink_growth_no_xid", gpu_nvlink_growth_no_xid.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_nvlink", f"gpu:{bad}/6", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def node_psu_fail_requeue():
    """Slurm 16-node job: PSU failure + AC lost on gpu-c-017 (BMC SEL critical), node stops
    reporting, job NODE_FAIL, requeued as attempt 1 on a replacement node and completes."""
    g = Gen(2001)
    nodes = [f"gpu-c-{i:03d}" for i in range(1, 25)]
    jn = nodes[:16]
    bad = nodes[16 - 1]
    links = {n: [{"nic": "mlx5_0", "switch": f"sw-leaf-{20 + i // 8}", "port": f"Ethernet{4 * (i % 8)}",
                  "segment": f"leaf-{20 + i // 8}"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}])
    start = T0 + 3 * MIN
    fault = start + 66 * MIN
    end = fault + 4 * MIN
    j = g.job("884213", jn, start=start, end=end, state="node_fail", reason="NodeFail", ckpt_every=30 * MIN,
              stop_at=fault, user="jlee", tenant="llm-pretrain", ckpt_dir="/lustre/scratch/jlee/run3")
    g.sel(bad, fault - 2 * SEC, "critical", "Power Supply", "Power Supply 2: Failure detected (PSU2 Status: Failure)",
          "PSU0003")
    g.sel(bad, fault - 1 * SEC, "critical", "Power Supply", "Power Supply 1: Power Supply input lost (AC lost)",
          "PSU0034")
    g.sched_node(bad, fault + 3 * MIN, "down", "Not responding")
    # attempt 1 on the 15 good nodes + a spare
    jn2 = [n for n in jn if n != bad] + [nodes[20]]
    s2 = end + 2 * MIN
    e2 = s2 + 70 * MIN
    last = j.last_ok()
    j2 = g.job("884213", jn2, attempt=1, start=s2, end=e2, state="completed", exit_code=0, ckpt_every=30 * MIN,
               user="jlee", tenant="llm-pretrain", first_step=last[2], submit=end + 5 * SEC,
               ckpt_dir="/lustre/scratch/jlee/run3")
    busy = {n: [(start, end)] for n in jn}
    for n in jn2:
        busy.setdefault(n, []).append((s2, e2))
    g.gpus(nodes, T0, e2 + 5 * MIN, 30 * SEC, busy=busy, mods=[stop_after(bad, fault)])
    g.bmc([n for n in nodes if n != bad], T0, e2 + 5 * MIN, 60 * SEC)
    g.bmc([bad], T0, fault - 5 * SEC, 60 * SEC)
    return Scenario("node_psu_fail_requeue", node_psu_fail_requeue.__doc__, g.events,
                    [Expect(j.id, 0, "node_hardware", f"node:{bad}", j, failure_ts={end, j.last_progress()},
                            retry_attempt=1, retry_same_nodes=False)], [(j2.id, 1)], g)


@scenario
def node_memory_ue_bus_error():
    """Memory uncorrectable error on the host (BMC SEL critical 'Memory', EDAC UE in the kernel log);
    the rank process gets SIGBUS: 'Bus error (core dumped)'."""
    g = Gen(2002)
    nodes = ["node0042.cluster.local", "node0043.cluster.local"]
    links = {n: [{"nic": "ib0", "switch": "ib-leaf-1", "port": str(20 + i), "segment": "ib-leaf-1"}]
             for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/gpfs/work", "backend": "gpfs", "server": "ess01"}])
    start = T0 + 2 * MIN
    fault = start + 52 * MIN
    end = fault + 20 * SEC
    j = g.job("4410982", nodes, start=start, end=end, state="failed", exit_code=135, signal=7, ckpt_every=20 * MIN,
              stop_at=fault, user="mgarcia", ckpt_dir="/gpfs/work/mgarcia/ckpt")
    bad = nodes[0]
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)])
    g.bmc(nodes, T0, end + 10 * MIN, 60 * SEC)
    g.sel(bad, fault - 3 * SEC, "critical", "Memory",
          "Multi-bit memory errors detected on a memory device at location(s) DIMM B3.", "MEM0001")
    g.log(j, fault - 2 * SEC, "EDAC MC1: 1 UE memory read error on CPU_SrcID#1_Ha#0_Chan#1_DIMM#0 "
          "(channel:1 slot:0 page:0x1f8a2b offset:0x0 grain:32 - err_code:0x0000:0x0090)", stream="kernel", node=bad)
    g.log(j, fault - 1 * SEC, "mce: [Hardware Error]: Machine check events logged", stream="kernel", node=bad)
    g.log(j, fault, "Bus error (core dumped)", rank=3, stream="stderr")
    g.log(j, end - 2 * SEC, f"srun: error: {bad}: task 3: Bus error (core dumped)", node=nodes[1])
    return Scenario("node_memory_ue_bus_error", node_memory_ue_bus_error.__doc__, g.events,
                    [Expect(j.id, 0, "node_hardware", f"node:{bad}", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def thermal_straggler_16n():
    """GPU 2 of dgx-a100-005 overheats (hw_thermal + hw_slowdown, 90+ C, clocks down): the whole
    16-node job slows (step time 1.2 s -> 5 s), then the straggler's collective times out."""
    g = Gen(3001)
    nodes = [dgx(i) for i in range(1, 17)]
    leaf, port, seg = _dgx_fabric(nodes)
    links = {n: [{"nic": "mlx5_0", "switch": leaf(n), "port": f"Ethernet{4 * (i % 8)}", "segment": seg(n)}]
             for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}])
    start = T0 + 2 * MIN
    onset = start + 40 * MIN
    stop = onset + 35 * MIN
    end = stop + 10 * MIN + 30 * SEC
    st_fn = lambda t: 1.2 if t < onset else 1.2 + 3.8 * min(1.0, (t - onset) / (30 * MIN))
    j = g.job("pytorchjob-llama-13b-t7hc", nodes, start=start, end=end, state="failed", exit_code=1,
              src="training-operator@kube-ctl", ckpt_every=25 * MIN, stop_at=stop, step_time_fn=st_fn, tenant="team-nlp")
    bad = dgx(5)

    def hot(node, gpu, ts, d, st):
        if node == bad and gpu == 2 and ts >= onset and ts < end:
            f = min(1.0, (ts - onset) / (20 * MIN))
            d["temp_c"] = int(84 + 9 * f)
            d["sm_clock_mhz"] = int(1410 - 900 * f)
            d["throttle"] = ["sw_thermal", "hw_thermal"] + (["hw_slowdown"] if f > 0.4 else [])
            d["power_w"] = round(250 - 100 * f, 1)

    def slow(node, gpu, ts, d, st):   # everyone else waits at the collective: lower util
        if ts >= onset and ts < end and not (node == bad and gpu == 2):
            d["util_pct"] = max(20, d["util_pct"] - int(60 * min(1.0, (ts - onset) / (30 * MIN))))
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[hot, slow, idle_after(j, end)])

    def inlet(node, ts, d):
        if node == bad and d["sensor"] == "Inlet Temp" and ts >= onset - 5 * MIN:
            d["value"], d["status"] = 33.5, "warning"
    g.bmc(nodes, T0, end + 10 * MIN, 60 * SEC, mods=[inlet])
    others = [r for r in range(128) if r != j.rank(bad, 2)][::9]
    nccl_timeouts(g, j, stop + 600 * SEC, others, seq=33120)
    return Scenario("thermal_straggler_16n", thermal_straggler_16n.__doc__, g.events,
                    [Expect(j.id, 0, "thermal_throttle", f"gpu:{bad}/2", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def net_flap_other_node():
    """RoCE fabric: leaf port sw-leaf-4/Ethernet48 facing dgx-a100-012 flaps 4 times with
    error growth; the ranks that log NCCL errors and the watchdog are on dgx-a100-003 (the peer)."""
    g = Gen(5001)
    nodes = [dgx(i) for i in range(1, 19)]
    jn = nodes[:16]
    def lf(n): return f"sw-leaf-{3 + (int(n[-3:]) - 1) // 9}"
    def pt(n): return f"Ethernet{4 * ((int(n[-3:]) - 1) % 9) + 16}"
    links = {n: [{"nic": "mlx5_0", "switch": lf(n), "port": pt(n), "segment": lf(n).replace("sw-", "")}] for n in nodes}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}])
    flap_node = dgx(12)
    flap_dev, flap_port = lf(flap_node), pt(flap_node)
    start = T0 + 3 * MIN
    onset = start + 58 * MIN
    end = onset + 12 * MIN
    j = g.job("pytorchjob-llama-70b-ft-9zd4", jn, start=start, end=end, state="failed", exit_code=1,
              src="training-operator@kube-ctl", ckpt_every=20 * MIN, stop_at=onset + 40 * SEC,
              tenant="team-nlp", image="nvcr.io/nvidia/pytorch:24.05-py3")
    flaps = [onset + k * 95 * SEC for k in range(4)]

    def pmod(dev, port, ts, d, st):
        if (dev, port) == (flap_dev, flap_port) and ts >= onset - 6 * MIN:
            st["in_errors"] += 900 if ts < onset else 4000
            st["out_errors"] += 15
            if any(f <= ts < f + 25 * SEC for f in flaps):
                d["oper_status"] = "down"
    g.ports([(lf(n), pt(n), n) for n in nodes], T0, end + 15 * MIN, 30 * SEC, mods=[pmod])
    for f in flaps:
        g.link(flap_dev, flap_port, flap_node, f, "down")
        g.link(flap_dev, flap_port, flap_node, f + 20 * SEC, "up")
    g.log(j, onset + 2 * SEC, "mlx5_core 0000:0c:00.0 enp12s0np0: Link down", stream="kernel", node=flap_node)
    g.gpus(nodes, T0, end + 15 * MIN, 60 * SEC, busy={n: [(start, end)] for n in jn}, mods=[idle_after(j, end)])
    g.bmc(nodes, T0, end + 15 * MIN, 60 * SEC)
    peer = dgx(3)
    for k, r in enumerate(range(16, 24, 2)):
        ts = onset + 30 * SEC + k * 211
        g.log(j, ts, f"{peer}:48213:49120 [{r % 8}] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from "
              f"peer 10.42.3.12<44310> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid "
              f"::ffff:10.42.3.3 remoteGids::ffff:10.42.3.12", rank=r)
        g.log(j, ts + 5, f"{peer}:48213:49120 [{r % 8}] NCCL INFO transport/net.cc:1302 -> 6", rank=r)
    g.log(j, onset + 31 * SEC, "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
          "ProcessGroupNCCL.cpp:1970, remote process exited or there was a network error, NCCL version 2.21.5\n"
          "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.\n"
          "Last error:\nNET/IB : Got completion from peer 10.42.3.12<44310> with status=12 opcode=0 len=0 "
          "vendor err 129 (Recv)", rank=17)
    nccl_timeouts(g, j, onset + 600 * SEC, [16, 18, 20, 22], seq=102931)
    return Scenario("net_flap_other_node", net_flap_other_node.__doc__, g.events,
                    [Expect(j.id, 0, "network_link", f"port:{flap_dev}/{flap_port}", j,
                            failure_ts={end, j.last_progress()})], [], g)


@scenario
def net_ib_error_storm():
    """InfiniBand switch port ib-leaf-2/18 facing cn-b12: symbol/receive error storm, no link drop.
    The NCCL error (transport retry exceeded) is logged on cn-b11. No RDMA collector on the hosts."""
    g = Gen(5002)
    nodes = [f"cn-b{i:02d}" for i in range(9, 15)]
    jn = ["cn-b11", "cn-b12"]
    links = {n: [{"nic": "mlx5_0", "switch": "ib-leaf-2", "port": str(7 + i), "segment": "ib-leaf-2"}]
             for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/gpfs/work", "backend": "gpfs", "server": "ess01"}])
    start = T0 + 2 * MIN
    onset = start + 33 * MIN
    end = onset + 11 * MIN
    j = g.job("123456_12", jn, start=start, end=end, state="failed", exit_code=1, ckpt_every=10 * MIN,
              stop_at=onset + 50 * SEC, user="hpark", ckpt_dir="/gpfs/work/hpark/ckpt", reason="NonZeroExitCode")
    bad_port = str(7 + nodes.index("cn-b12"))

    def storm(dev, port, ts, d, st):
        if port == bad_port and ts >= onset:
            st["in_errors"] += 25000
    g.ports([("ib-leaf-2", str(7 + i), n) for i, n in enumerate(nodes)], T0, end + 10 * MIN, 20 * SEC, mods=[storm],
            speed=200000, src="ufm")
    g.gpus(nodes, T0, end + 10 * MIN, 20 * SEC, busy={n: [(start, end)] for n in jn}, mods=[idle_after(j, end)])
    g.log(j, onset + 60 * SEC, "cn-b11:3321:3987 [2] NCCL INFO NET/IB : Got completion from peer 10.12.0.12<56103> "
          "with status=12 opcode=1 len=0 vendor err 129 (Send)\ncn-b11:3321:3987 [2] transport/net_ib.cc:1295 NCCL WARN "
          "NET/IB : Got completion from peer 10.12.0.12<56103> with status=12 opcode=1 len=0 vendor err 129 (Send) "
          "localGid fe80::ba3f:d203:c4:1b2 remoteGids fe80::ba3f:d203:c4:1f8", rank=2)
    g.log(j, onset + 61 * SEC, "RuntimeError: NCCL communicator was aborted on rank 2. Original reason for failure was: "
          "NCCL error: remote process exited or there was a network error, NCCL version 2.21.5\n"
          "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
          rank=2)
    nccl_timeouts(g, j, onset + 600 * SEC, [0, 5, 9], seq=4411)
    return Scenario("net_ib_error_storm", net_ib_error_storm.__doc__, g.events,
                    [Expect(j.id, 0, "network_link", f"port:ib-leaf-2/{bad_port}", j,
                            failure_ts={end, j.last_progress()})], [], g)


@scenario
def net_congestion_shared_segment():
    """Two jobs share segment podB-leaf05: a big all-to-all neighbour starts and the segment
    shows CNP/ECN storms, RDMA ack timeouts and out-of-sequence, switch out_discards, NO link
    errors. Our 8-node job dies with NCCL timeouts; the neighbour completes (no incident)."""
    g = Gen(6001)
    seg_nodes = [f"gpu-pb-{i:02d}" for i in range(1, 17)]
    ja_nodes = seg_nodes[:8]
    jb_nodes = seg_nodes[8:16]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-podb-leaf05", "port": f"Ethernet{4 * i}", "segment": "podB-leaf05"}]
             for i, n in enumerate(seg_nodes)}
    std_inventory(g, seg_nodes, T0, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}])
    start = T0 + 2 * MIN
    onset = start + 45 * MIN
    stop = onset + 8 * MIN
    end = stop + 10 * MIN + 10 * SEC
    ja = g.job("pytorchjob-mixtral-ft-r4n8", ja_nodes, start=start, end=end, state="failed", exit_code=1,
               src="training-operator@kube-ctl", ckpt_every=20 * MIN, stop_at=stop, tenant="applied-ai",
               step_time_fn=lambda t: 1.3 if t < onset else 3.5)
    jb = g.job("pytorchjob-moe-a2a-bench-77xq", jb_nodes, start=onset - 2 * MIN, end=end + 20 * MIN,
               state="completed", exit_code=0, src="training-operator@kube-ctl", ckpt_every=60 * MIN, tenant="infra-perf",
               user="perf-bot")

    def cong(node, hca, ts, st):
        if onset <= ts < end + 20 * MIN:
            s = 15
            st["np_cnp_sent"] += 40000 * s
            st["rp_cnp_handled"] += 38000 * s
            st["np_ecn_marked_roce_packets"] += 90000 * s
            st["out_of_sequence"] += 900 * s
            st["packet_seq_err"] += 120 * s
            st["local_ack_timeout_err"] += 6 * s
            st["port_xmit_wait"] += 10**7 * s
    g.rdma(seg_nodes, T0, end + 25 * MIN, 15 * SEC, hcas=("mlx5_0",), mods=[cong])

    def disc(dev, port, ts, d, st):
        if onset <= ts < end + 20 * MIN:
            st["out_discards"] += 50000
            st["in_discards"] += 8000
    g.ports([("sw-podb-leaf05", f"Ethernet{4 * i}", n) for i, n in enumerate(seg_nodes)], T0, end + 25 * MIN, 30 * SEC,
            mods=[disc])
    busy = {n: [(start, end)] for n in ja_nodes}
    busy.update({n: [(onset - 2 * MIN, end + 20 * MIN)] for n in jb_nodes})
    g.gpus(seg_nodes, T0, end + 25 * MIN, 30 * SEC, busy=busy, mods=[idle_after(ja, end)])
    g.log(ja, stop + 2 * MIN, "gpu-pb-03:7712:8120 [0] NCCL INFO NET/IB : Got completion from peer 10.50.5.6<39201> with "
          "status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.50.5.3 remoteGids::ffff:10.50.5.6", rank=16)
    nccl_timeouts(g, ja, stop + 600 * SEC, [0, 9, 16, 33, 50], seq=6613, op="_ALLGATHER_BASE")
    return Scenario("net_congestion_shared_segment", net_congestion_shared_segment.__doc__, g.events,
                    [Expect(ja.id, 0, "network_congestion", "segment:podB-leaf05", ja,
                            failure_ts={end, ja.last_progress()})], [(jb.id, 0)], g)


@scenario
def storage_slow_stall_cancel():
    """WekaFS backend slows (write latency 3 ms -> 2-4 s, throughput collapses, queue depth 200+):
    torch.save hangs inside a checkpoint, progress stops, the kernel reports a hung task, the mount
    stays 'ok'; the user cancels 80 min later. One incident (stall), storage_slow."""
    g = Gen(7001)
    nodes = [f"hgx-h100-c{i:02d}" for i in range(1, 7)]
    jn = nodes[:4]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-31", "port": f"Ethernet{4 * i}", "segment": "leaf-31"}]
             for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-cluster-2"}])
    start = T0 + 2 * MIN
    onset = start + 150 * SEC + 60 * MIN - 4 * MIN
    cancel = onset + 95 * MIN
    ck_at = start + 150 * SEC + 60 * MIN   # the 2nd checkpoint of a 30-min cadence starts during the slowdown
    j = g.job("pytorchjob-sd3-finetune-h2v5", jn, start=start, end=cancel, state="cancelled", exit_code=None,
              signal=15, reason="Cancelled by user", src="training-operator@kube-ctl", ckpt_every=30 * MIN,
              ckpt_dir="/mnt/weka/sd3/ckpt", stop_at=ck_at + 1, ckpt_dur=40 * SEC, tenant="gen-media",
              progress_every=30 * SEC)
    assert any(c[1] == "started" and c[0] == ck_at for c in j.ckpts), j.ckpts

    def slow(node, ts, d):
        if ts >= onset and ts < cancel + 30 * MIN:
            d.update(write_lat_ms=round(2000 + 2000 * ((ts // 1000) % 7) / 7, 1), read_lat_ms=round(600 + (ts % 900), 1),
                     write_mbps=round(2 + (ts % 5), 1), read_mbps=round(5 + (ts % 7), 1), queue_depth=210 + (ts % 50),
                     write_iops=3, read_iops=11)
    g.storage(nodes, "/mnt/weka", "wekafs", T0, cancel + 20 * MIN, 20 * SEC, mods=[slow])
    g.gpus(nodes, T0, cancel + 20 * MIN, 20 * SEC, busy={n: [(start, cancel)] for n in jn},
           mods=[idle_after(j, cancel),
                 lambda n, gi, ts, d, st: d.update(util_pct=0, power_w=92.0) if (n in jn and ck_at < ts < cancel) else None])
    g.mount(jn[0], ck_at + 10 * MIN, "/mnt/weka", "ok")
    g.log(j, ck_at + 125 * SEC, "INFO: task python3:51204 blocked for more than 120 seconds.\n"
          "      Tainted: P           OE     6.8.0-45-generic #45-Ubuntu\n"
          "\"echo 0 > /proc/sys/kernel/hung_task_timeout_secs\" disables this message.", stream="kernel", node=jn[0])
    return Scenario("storage_slow_stall_cancel", storage_slow_stall_cancel.__doc__, g.events,
                    [Expect(j.id, 0, "storage_slow", "path:/mnt/weka", j, failure_ts={j.last_progress()})], [], g)


@scenario
def storage_stale_lustre():
    """/lustre/scratch goes stale on one node of a 2-node job (storage.mount stale, ESTALE in the
    DataLoader worker traceback, LustreError in the kernel log)."""
    g = Gen(7002)
    nodes = ["node0101.cluster.local", "node0102.cluster.local", "node0103.cluster.local"]
    jn = nodes[:2]
    links = {n: [{"nic": "ib0", "switch": "ib-leaf-5", "port": str(i + 1), "segment": "ib-leaf-5"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "10.0.0.5@o2ib"},
                                                       {"path": "/home", "backend": "nfs", "server": "nas01"}])
    start = T0 + 2 * MIN
    fault = start + 41 * MIN
    end = fault + 50 * SEC
    j = g.job("7719020", jn, start=start, end=end, state="failed", exit_code=1, ckpt_every=15 * MIN, stop_at=fault,
              ckpt_dir="/lustre/scratch/ewu/ckpt", user="ewu", reason="NonZeroExitCode")
    bad = jn[1]
    g.storage(nodes, "/lustre/scratch", "lustre", T0, end + 10 * MIN, 60 * SEC,
              mods=[lambda n, ts, d: False if (n == bad and ts >= fault) else None])
    g.mount(bad, fault + 5 * SEC, "/lustre/scratch", "stale", "Stale file handle")
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in jn}, mods=[idle_after(j, end)])
    g.log(j, fault - 1 * SEC, "LustreError: 11-0: scratch-OST0004-osc-ffff9a53c8e3d000: operation ost_read to node "
          "10.0.0.5@o2ib failed: rc = -107", stream="kernel", node=bad)
    g.log(j, fault + 2 * SEC, "Traceback (most recent call last):\n"
          '  File "/usr/local/lib/python3.10/dist-packages/torch/utils/data/_utils/worker.py", line 308, in _worker_loop\n'
          "    data = fetcher.fetch(index)\n"
          '  File "/opt/app/data/shards.py", line 77, in __getitem__\n    with open(self.files[i], "rb") as f:\n'
          "OSError: [Errno 116] Stale file handle: '/lustre/scratch/ewu/data/shard-00042.arrow'", rank=9)
    return Scenario("storage_stale_lustre", storage_stale_lustre.__doc__, g.events,
                    [Expect(j.id, 0, "storage_unavailable", "path:/lustre/scratch", j, failure_ts={end, j.last_progress()})],
                    [], g)


@scenario
def storage_readonly_raid():
    """Local NVMe scratch /raid remounted read-only after an ext4 error; the checkpoint save fails
    with EROFS and the job exits."""
    g = Gen(7003)
    nodes = [dgx(i) for i in range(50, 52)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-7", "port": f"Ethernet{4 * i}", "segment": "leaf-7"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/raid", "backend": "local-nvme", "server": None},
                                                       {"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}])
    start = T0 + 2 * MIN
    probe = Gen(1)
    pj = probe.job("x", nodes[:1], start=start, end=None, state="running", emit_end=False, ckpt_every=20 * MIN,
                   ckpt_dir="/raid/ckpt/whisper")
    fail_ck = [c for c in pj.ckpts if c[1] == "started"][2]
    fail_ts = fail_ck[0]
    end = fail_ts + 70 * SEC
    err = f"OSError: [Errno 30] Read-only file system: '{fail_ck[3]}/model.safetensors'"
    j = g.job("pytorchjob-whisper-l-ft-4m1t", nodes[:1], start=start, end=end, state="failed", exit_code=1,
              ckpt_every=20 * MIN, ckpt_dir="/raid/ckpt/whisper", src="training-operator@kube-ctl",
              ckpt_fail={fail_ck[2]: err}, stop_at=fail_ts + 1)
    g.mount(nodes[0], fail_ts - 30 * SEC, "/raid", "readonly", "EXT4-fs (md0): Remounting filesystem read-only")
    g.log(j, fail_ts - 31 * SEC, "EXT4-fs error (device md0): ext4_journal_check_start:83: comm python3: Detected aborted journal\n"
          "EXT4-fs (md0): Remounting filesystem read-only", stream="kernel", node=nodes[0])
    g.log(j, fail_ts + 45 * SEC, "Traceback (most recent call last):\n"
          '  File "/usr/local/lib/python3.10/dist-packages/transformers/trainer.py", line 3120, in _save_checkpoint\n'
          "    self.save_model(output_dir, _internal_call=True)\n" + err, rank=0)
    g.storage(nodes, "/raid", "ext4", T0, end + 10 * MIN, 60 * SEC, used=23.0)
    g.gpus(nodes, T0, end + 10 * MIN, 60 * SEC, busy={nodes[0]: [(start, end)]}, mods=[idle_after(j, end)])
    return Scenario("storage_readonly_raid", storage_readonly_raid.__doc__, g.events,
                    [Expect(j.id, 0, "storage_unavailable", "path:/raid", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def storage_full_enospc():
    """8-node job checkpoints to /lustre/scratch, which fills to 100 %: the save fails with
    ENOSPC (torch's PytorchStreamWriter error + OSError 28) and the job exits."""
    g = Gen(7004)
    nodes = [dgx(i) for i in range(60, 70)]
    jn = nodes[:8]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-9", "port": f"Ethernet{4 * i}", "segment": "leaf-9"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}])
    start = T0 + 2 * MIN
    ck_every = 20 * MIN
    first_prog = start + 150 * SEC
    fail_ts = first_prog + 3 * ck_every
    end = fail_ts + 3 * MIN
    # find the step of the 3rd checkpoint: build once to learn, then rebuild
    probe = Gen(7004)
    pj = probe.job("x", jn, start=start, end=end, state="failed", ckpt_every=ck_every, stop_at=fail_ts + 1)
    fstep = [c for c in pj.ckpts if c[1] == "started"][2][2]
    err = "OSError: [Errno 28] No space left on device"
    j = g.job("pytorchjob-llama-7b-cpt-8s1w", jn, start=start, end=end, state="failed", exit_code=1,
              ckpt_every=ck_every, ckpt_dir="/lustre/scratch/cpt/llama7b", src="training-operator@kube-ctl",
              ckpt_fail={fstep: err}, stop_at=fail_ts + 1, tenant="team-nlp")

    def fill(node, ts, d):
        d["used_pct"] = round(min(100.0, 96.0 + 4.0 * max(0, ts - (fail_ts - 30 * MIN)) / (30 * MIN)), 2)
    g.storage(nodes, "/lustre/scratch", "lustre", T0, end + 10 * MIN, 60 * SEC, mods=[fill])
    g.gpus(nodes, T0, end + 10 * MIN, 60 * SEC, busy={n: [(start, end)] for n in jn}, mods=[idle_after(j, end)])
    g.log(j, fail_ts + 44 * SEC, "Traceback (most recent call last):\n"
          '  File "/usr/local/lib/python3.10/dist-packages/torch/serialization.py", line 652, in save\n'
          "    _save(obj, opened_zipfile, pickle_module, pickle_protocol, _disable_byteorder_record)\n"
          "RuntimeError: [enforce fail at inline_container.cc:603] . unexpected pos 1534566848 vs 1534566736\n\n"
          "During handling of the above exception, another exception occurred:\n\n" + err, rank=0)
    return Scenario("storage_full_enospc", storage_full_enospc.__doc__, g.events,
                    [Expect(j.id, 0, "storage_full", "path:/lustre/scratch", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def storage_full_no_storage_layer():
    """Same ENOSPC story on /mnt/weka, but this site has NO storage collector: only the topology
    names the mounts, the checkpoint event fails with ENOSPC and the rank logs it."""
    g = Gen(7005)
    nodes = ["hgx-h100-d01", "hgx-h100-d02"]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-40", "port": f"Ethernet{4 * i}", "segment": "leaf-40"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"},
                                                       {"path": "/home", "backend": "nfs", "server": "nas02"}])
    start = T0 + 2 * MIN
    ck_every = 15 * MIN
    fail_ts = start + 150 * SEC + 2 * ck_every
    end = fail_ts + 2 * MIN
    probe = Gen(1)
    pj = probe.job("x", nodes, start=start, end=end, state="failed", ckpt_every=ck_every, stop_at=fail_ts + 1)
    fstep = [c for c in pj.ckpts if c[1] == "started"][1][2]
    err = f"OSError: [Errno 28] No space left on device: '/mnt/weka/exp42/ckpt/iter_{fstep:07d}/mp_rank_00_model_states.pt'"
    j = g.job("9902113", nodes, start=start, end=end, state="failed", exit_code=1, ckpt_every=ck_every,
              ckpt_dir="/mnt/weka/exp42/ckpt", ckpt_fmt="iter_{step:07d}", ckpt_fail={fstep: err}, stop_at=fail_ts + 1,
              user="tchen")
    g.log(j, fail_ts + 50 * SEC, err, rank=0)
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)])
    return Scenario("storage_full_no_storage_layer", storage_full_no_storage_layer.__doc__, g.events,
                    [Expect(j.id, 0, "storage_full", "path:/mnt/weka", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def gpu_oom_deepspeed():
    """DeepSpeed ZeRO-3 job on 2 nodes: rank 11 (second node, local GPU 3) raises
    torch.OutOfMemoryError; its GPU memory is at the limit; the other ranks then log
    'NCCL communicator was aborted' (symptoms)."""
    g = Gen(8001)
    nodes = ["gpu-a-031", "gpu-a-032", "gpu-a-033"]
    jn = nodes[:2]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-2", "port": f"Ethernet{4 * i}", "segment": "leaf-2"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}])
    start = T0 + 2 * MIN
    fault = start + 33 * MIN
    end = fault + 40 * SEC
    j = g.job("5520391", jn, start=start, end=end, state="failed", exit_code=1, ckpt_every=10 * MIN, stop_at=fault,
              user="akumar", ckpt_dir="/lustre/scratch/akumar/ds", reason="NonZeroExitCode")
    bad = jn[1]

    def full(node, gpu, ts, d, st):
        if node == bad and gpu == 3 and fault - 2 * MIN <= ts < end:
            d["mem_used_mib"] = 81043
    g.gpus(nodes, T0, end + 10 * MIN, 15 * SEC, busy={n: [(start, end)] for n in jn}, mods=[full, idle_after(j, end)])
    g.log(j, fault, "Traceback (most recent call last):\n"
          '  File "/opt/app/train.py", line 201, in <module>\n    model_engine.backward(loss)\n'
          '  File "/usr/local/lib/python3.10/dist-packages/deepspeed/runtime/engine.py", line 2020, in backward\n'
          "    self.optimizer.backward(loss, retain_graph=retain_graph)\n"
          '  File "/usr/local/lib/python3.10/dist-packages/deepspeed/runtime/zero/stage3.py", line 2250, in backward\n'
          "    self.loss_scaler.backward(loss.float(), retain_graph=retain_graph)\n"
          "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.82 GiB. GPU 3 has a total capacity of 79.15 GiB "
          "of which 1.21 GiB is free. Including non-PyTorch memory, this process has 77.92 GiB memory in use. Of the "
          "allocated memory 71.30 GiB is allocated by PyTorch, and 4.97 GiB is reserved by PyTorch but unallocated. If "
          "reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
          "fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
          rank=11)
    for r in (0, 4, 13):
        g.log(j, fault + 3 * SEC + r, f"RuntimeError: NCCL communicator was aborted on rank {r}. Original reason for "
              "failure was: NCCL error: remote process exited or there was a network error", rank=r)
    return Scenario("gpu_oom_deepspeed", gpu_oom_deepspeed.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_oom", f"gpu:{bad}/3", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def gpu_oom_jax():
    """Single-node JAX job (one process, 8 GPUs): XlaRuntimeError RESOURCE_EXHAUSTED; NVML shows
    GPU 4 at its memory limit. (The component needs the telemetry: the message names no GPU.)"""
    g = Gen(8002)
    nodes = ["tpu-free-gpu-h07", "tpu-free-gpu-h08"]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-50", "port": f"Ethernet{4 * i}", "segment": "leaf-50"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/gcs-fuse", "backend": "gcsfuse", "server": None}])
    start = T0 + 2 * MIN
    fault = start + 26 * MIN
    end = fault + 6 * SEC
    j = g.job("jaxjob-gemma-2b-pt-0c3d", nodes[:1], start=start, end=end, state="failed", exit_code=1,
              src="jobset-controller@kube-ctl", ckpt_every=10 * MIN, stop_at=fault, ckpt_dir="/mnt/gcs-fuse/gemma/orbax",
              ckpt_fmt="{step}", progress_rank=None)

    def full(node, gpu, ts, d, st):
        if node == nodes[0] and gpu == 4 and fault - 60 * SEC <= ts < end:
            d["mem_used_mib"] = 81559
    g.gpus(nodes, T0, end + 10 * MIN, 10 * SEC, busy={nodes[0]: [(start, end)]}, mods=[full, idle_after(j, end)])
    g.log(j, fault, "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
          "7406166528 bytes.\nBufferAssignment OOM Debugging.\nBufferAssignment stats:\n"
          "             parameter allocation:    9.64GiB\n              constant allocation:    48.5KiB\n"
          "        maybe_live_out allocation:    9.64GiB\n     preallocated temp allocation:    6.90GiB\n"
          "                 total allocation:   26.18GiB", rank=None, node=nodes[0])
    return Scenario("gpu_oom_jax", gpu_oom_jax.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_oom", f"gpu:{nodes[0]}/4", j, failure_ts={end, j.last_progress()},
                            note="debatable component: the message names no GPU, only NVML shows which one is full")],
                    [], g)


@scenario
def host_oom_slurm():
    """Slurm job: the kernel OOM killer kills a rank's process (host RAM: dataloader workers);
    slurmstepd reports the oom_kill event; the launcher reports exitcode -9; state OUT_OF_MEMORY."""
    g = Gen(9001)
    nodes = ["node0210.cluster.local", "node0211.cluster.local", "node0212.cluster.local"]
    jn = nodes[:2]
    links = {n: [{"nic": "ib0", "switch": "ib-leaf-9", "port": str(i + 1), "segment": "ib-leaf-9"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/gpfs/work", "backend": "gpfs", "server": "ess01"}])
    start = T0 + 2 * MIN
    fault = start + 48 * MIN
    end = fault + 35 * SEC
    j = g.job("3308817", jn, start=start, end=end, state="out_of_memory", exit_code=0, signal=9, ckpt_every=20 * MIN,
              stop_at=fault, user="lpetrov", ckpt_dir="/gpfs/work/lpetrov/ckpt", reason="OutOfMemory")
    bad = jn[1]
    g.log(j, fault, "Out of memory: Killed process 48213 (python3) total-vm:412331244kB, anon-rss:201552112kB, "
          "file-rss:123456kB, shmem-rss:8392kB, UID:40112 pgtables:402188kB oom_score_adj:0", stream="kernel", node=bad)
    g.log(j, fault + 1 * SEC, "slurmstepd: error: Detected 1 oom_kill event in StepId=3308817.0. Some of the step tasks "
          "have been OOM Killed.", stream="stderr", node=bad)
    g.log(j, end - 5 * SEC, child_failed("train.py", end - 5 * SEC, bad, 10, 2, -9, 48213, "SIGKILL"), node=bad)
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in jn}, mods=[idle_after(j, end)])
    g.bmc(nodes, T0, end + 10 * MIN, 60 * SEC)
    return Scenario("host_oom_slurm", host_oom_slurm.__doc__, g.events,
                    [Expect(j.id, 0, "host_oom", f"node:{bad}", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def host_oom_k8s():
    """Kubernetes: the worker-1 pod's container is OOMKilled (cgroup limit), exit code 137;
    the log shows only 'Killed'."""
    g = Gen(9002)
    nodes = ["gke-a3-pool-7c1e-0001", "gke-a3-pool-7c1e-0002"]
    links = {n: [{"nic": f"eth{k + 1}", "switch": f"gvnic-rail-{k}", "port": str(i), "segment": f"rail-{k}"}
                 for k in range(4)] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/filestore", "backend": "nfs", "server": "filestore-1"}])
    start = T0 + 2 * MIN
    fault = start + 29 * MIN
    end = fault + 20 * SEC
    j = g.job("pytorchjob-clip-vitl-h3k2", nodes, start=start, end=end, state="failed", exit_code=137,
              reason="OOMKilled", src="training-operator@kube-ctl", ckpt_every=10 * MIN, stop_at=fault,
              ckpt_dir="/mnt/filestore/clip/ckpt")
    bad = nodes[1]
    g.ev("runtime.container", fault, {"container": "pytorch", "event": "oom_killed", "exit_code": 137}, node=bad,
         job=j.id, source=f"kubelet@{bad}")
    g.log(j, fault - 200, "Killed", rank=8, stream="stdout")
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)])
    return Scenario("host_oom_k8s", host_oom_k8s.__doc__, g.events,
                    [Expect(j.id, 0, "host_oom", f"node:{bad}", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def driver_gsp_xid119():
    """XID 119 GSP RPC timeout on GPU 1 (no ECC, no BMC sign, no recent change); the rank hangs and
    the others hit the watchdog."""
    g = Gen(1119)
    nodes = [f"hgx-h100-e{i:02d}" for i in range(1, 4)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-60", "port": f"Ethernet{4 * i}", "segment": "leaf-60"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}],
                  versions={"driver": "550.90.07", "cuda": "12.4", "nccl": "2.21.5", "gpu_firmware": "96.00.89.00.01",
                            "kernel": "6.5.0-1024-nvidia"})
    start = T0 + 2 * MIN
    fault = start + 57 * MIN
    end = fault + 10 * MIN + 40 * SEC
    jn = nodes[:2]
    j = g.job("pytorchjob-sdxl-distill-w9e1", jn, start=start, end=end, state="failed", exit_code=1,
              src="training-operator@kube-ctl", ckpt_every=20 * MIN, stop_at=fault, ckpt_dir="/mnt/weka/sdxl")
    bad = jn[0]
    g.gpus(nodes, T0, end + 10 * MIN, 15 * SEC, busy={n: [(start, end)] for n in jn}, mods=[idle_after(j, end)])
    g.bmc(nodes, T0, end + 10 * MIN, 60 * SEC)
    g.xid(bad, fault, 1, 119, "Timeout after 6s of waiting for RPC response from GPU1 GSP! Expected function 76 "
          "(GSP_RM_CONTROL) (0x20801348 0x4).", pid=12044, kernel_log_job=j.id)
    g.xid(bad, fault + 7 * SEC, 1, 119, "Timeout after 6s of waiting for RPC response from GPU1 GSP! Expected function 10 "
          "(FREE) (0xa55a0050 0x0).", pid=12044)
    nccl_timeouts(g, j, fault + 600 * SEC, [0, 8, 12, 15], seq=55120)
    return Scenario("driver_gsp_xid119", driver_gsp_xid119.__doc__, g.events,
                    [Expect(j.id, 0, "driver_software", f"gpu:{bad}/1", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def driver_xid31_before_crash():
    """XID 31 MMU fault on GPU 5 BEFORE the rank's 'illegal memory access' CUDA error; no ECC/BMC
    sign, no change. The contract lists XID 31 with no hardware sign as driver_software."""
    g = Gen(1031)
    nodes = [dgx(i) for i in range(70, 72)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-10", "port": f"Ethernet{4 * i}", "segment": "leaf-10"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}])
    start = T0 + 2 * MIN
    fault = start + 36 * MIN
    end = fault + 25 * SEC
    j = g.job("6610233", nodes[:1], start=start, end=end, state="failed", exit_code=1, ckpt_every=15 * MIN,
              stop_at=fault, user="oyilmaz")
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={nodes[0]: [(start, end)]}, mods=[idle_after(j, end)])
    g.bmc(nodes, T0, end + 10 * MIN, 60 * SEC)
    g.xid(nodes[0], fault, 5, 31, "Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_3 faulted @ "
          "0x7f1c_4a000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ", pid=30018)
    g.log(j, fault + 600, "RuntimeError: CUDA error: an illegal memory access was encountered\n"
          "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
          rank=5)
    return Scenario("driver_xid31_before_crash", driver_xid31_before_crash.__doc__, g.events,
                    [Expect(j.id, 0, {"driver_software", "application"}, {f"gpu:{nodes[0]}/5", f"job:{j.id}"}, j,
                            failure_ts={end, j.last_progress()},
                            note="debatable: the contract lists XID 31 without hardware sign under driver_software; but an "
                                 "MMU fault logged just before 'illegal memory access' is the usual signature of a user "
                                 "kernel bug (NVIDIA lists user-application first for 31). Either verdict accepted.")], [], g)


@scenario
def driver_xid31_launch_failure():
    """XID 31 MMU fault on GPU 2 and the rank dies with 'unspecified launch failure' (no illegal
    address, no user traceback, no ECC/BMC sign, no change): driver_software on the GPU."""
    g = Gen(1032)
    nodes = [dgx(i) for i in range(75, 77)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-10", "port": f"Ethernet{4 * i + 8}", "segment": "leaf-10"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}])
    start = T0 + 2 * MIN
    fault = start + 29 * MIN
    end = fault + 20 * SEC
    j = g.job("6610299", nodes[:1], start=start, end=end, state="failed", exit_code=1, ckpt_every=10 * MIN,
              stop_at=fault, user="oyilmaz")
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={nodes[0]: [(start, end)]}, mods=[idle_after(j, end)])
    g.bmc(nodes, T0, end + 10 * MIN, 60 * SEC)
    g.xid(nodes[0], fault, 2, 31, "Ch 00000010, intr 10000000. MMU Fault: ENGINE HOST0 HUBCLIENT_ESC faulted @ 0x0_00000000. "
          "Fault is of type FAULT_INFO_TYPE_UNSUPPORTED_KIND ACCESS_TYPE_PHYS_READ", pid=30041)
    g.log(j, fault + 800, "RuntimeError: CUDA error: unspecified launch failure\nCUDA kernel errors might be asynchronously "
          "reported at some other API call, so the stacktrace below might be incorrect.", rank=2)
    return Scenario("driver_xid31_launch_failure", driver_xid31_launch_failure.__doc__, g.events,
                    [Expect(j.id, 0, "driver_software", f"gpu:{nodes[0]}/2", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def driver_version_mismatch():
    """4-node job where node gpu-d-203 still runs driver 535.161.08 (others 550.90.07); the rank on
    it fails at NCCL init with 'CUDA driver version is insufficient'; no progress was made."""
    g = Gen(1200)
    nodes = [f"gpu-d-{200 + i}" for i in range(1, 6)]
    jn = nodes[:4]
    odd = nodes[2]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-70", "port": f"Ethernet{4 * i}", "segment": "leaf-70"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0 - 3 * HOUR, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}],
                  per_node={odd: {"driver": "535.161.08", "cuda": "12.2"}})
    start = T0 + 2 * MIN
    end = start + 95 * SEC
    j = g.job("7104452", jn, start=start, end=end, state="failed", exit_code=1, user="sali", reason="NonZeroExitCode")
    r = j.rank(odd, 0)
    g.log(j, end - 20 * SEC, f"{odd}:4410:4410 [0] misc/cudawrap.cc:36 NCCL WARN Cuda failure 'CUDA driver version is "
          "insufficient for CUDA runtime version'", rank=r)
    g.log(j, end - 19 * SEC, "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
          "ProcessGroupNCCL.cpp:1970, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n"
          "ncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\nCuda failure 'CUDA driver version is "
          "insufficient for CUDA runtime version'", rank=r)
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in jn}, mods=[idle_after(j, end)])
    return Scenario("driver_version_mismatch", driver_version_mismatch.__doc__, g.events,
                    [Expect(j.id, 0, "driver_software", f"node:{odd}", j, ckpt_step=None, failure_ts={end})], [], g)


@scenario
def change_driver_rollout():
    """Rolling driver upgrade 550.54.15 -> 550.90.07 on gpu-e-001..008 (ticket CHG-20931); three
    jobs later placed on upgraded nodes fail with GSP/Xid 119 + NCCL errors within 40 min; two jobs
    on not-yet-upgraded nodes run clean and complete."""
    g = Gen(1300)
    nodes = [f"gpu-e-{i:03d}" for i in range(1, 13)]
    up = nodes[:8]
    links = {n: [{"nic": "mlx5_0", "switch": f"sw-leaf-{80 + i // 6}", "port": f"Ethernet{4 * (i % 6)}",
                  "segment": f"leaf-{80 + i // 6}"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0 - 2 * HOUR, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}],
                  versions={"driver": "550.54.15", "cuda": "12.4", "nccl": "2.21.5", "kernel": "5.15.0-119-generic"})
    for k, n in enumerate(up):
        ts = T0 + k * 90 * SEC
        g.change(n, ts, "driver", "550.54.15", "550.90.07", actor="ansible-awx", ticket="CHG-20931")
        g.ev("inventory.versions", ts + 5 * MIN, {"driver": "550.90.07", "cuda": "12.4", "nccl": "2.21.5",
                                                 "kernel": "5.15.0-119-generic"}, node=n, source=f"inv-agent@{n}")
    exp, healthy, busy = [], [], {}
    specs = [("31001", up[0:2], 40 * MIN, 14 * MIN), ("31002", up[2:4], 45 * MIN, 27 * MIN),
             ("31003", up[4:8], 50 * MIN, 38 * MIN), ("31004", nodes[8:10], 40 * MIN, None), ("31005", nodes[10:12], 45 * MIN, None)]
    for jid, jn, s_off, f_off in specs:
        start = T0 + s_off
        if f_off is None:
            end = start + 80 * MIN
            j = g.job(jid, jn, start=start, end=end, state="completed", exit_code=0, ckpt_every=20 * MIN, user="team-a")
            healthy.append((jid, 0))
        else:
            fault = start + f_off
            end = fault + 10 * MIN + 30 * SEC
            j = g.job(jid, jn, start=start, end=end, state="failed", exit_code=1, ckpt_every=10 * MIN, stop_at=fault,
                      user=f"user{jid[-1]}", reason="NonZeroExitCode")
            g.xid(jn[0], fault, 0, 119, "Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected function 76 "
                  "(GSP_RM_CONTROL) (0x2080a0d1 0x4).", pid=7000 + int(jid[-1]))
            nccl_timeouts(g, j, fault + 600 * SEC, [1, 9], seq=1200 + int(jid[-1]))
            exp.append(Expect(jid, 0, "change_regression", "version:driver=550.90.07", j, failure_ts={end, j.last_progress()}))
        for n in jn:
            busy[n] = [(start, end)]
    g.gpus(nodes, T0, T0 + 3 * HOUR, 60 * SEC, busy=busy)
    return Scenario("change_driver_rollout", change_driver_rollout.__doc__, g.events, exp, healthy, g)


@scenario
def change_image_regression():
    """A new training image registry.corp/ml/train:2024.06.0 is rolled out (inventory.change image on
    the pool's nodes); three jobs of different users on the new image die minutes after start with
    the same undefined-symbol ImportError from transformer_engine; jobs on :2024.05.1 complete."""
    g = Gen(1400)
    nodes = [f"a3-node-{i:02d}" for i in range(1, 11)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-90", "port": f"Ethernet{4 * i}", "segment": "leaf-90"}] for i, n in enumerate(nodes)}
    old, new = "registry.corp/ml/train:2024.05.1", "registry.corp/ml/train:2024.06.0"
    std_inventory(g, nodes, T0 - HOUR, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}],
                  versions={"driver": "550.90.07", "cuda": "12.4", "nccl": "2.21.5", "image": old, "framework": "torch 2.3.0"})
    for k, n in enumerate(nodes):
        g.change(n, T0 + k * 20 * SEC, "image", old, new, actor="argocd", ticket="REL-1187")
    exp, healthy, busy = [], [], {}
    specs = [("pytorchjob-a-llm-4x2p", nodes[0:2], new, 20 * MIN), ("pytorchjob-b-vlm-9w1q", nodes[2:4], new, 35 * MIN),
             ("pytorchjob-c-asr-0p7m", nodes[4:6], new, 52 * MIN), ("pytorchjob-d-old-k2k2", nodes[6:8], old, 25 * MIN),
             ("pytorchjob-e-old-z8x1", nodes[8:10], old, 30 * MIN)]
    for jid, jn, img, s_off in specs:
        start = T0 + s_off
        if img == new:
            end = start + 3 * MIN
            j = g.job(jid, jn, start=start, end=end, state="failed", exit_code=1, image=img, init=60 * SEC,
                      src="training-operator@kube-ctl", user=jid.split("-")[1], reason="BackoffLimitExceeded")
            g.log(j, end - 40 * SEC, "Traceback (most recent call last):\n"
                  '  File "/workspace/train.py", line 12, in <module>\n    import transformer_engine.pytorch as te\n'
                  '  File "/usr/local/lib/python3.10/dist-packages/transformer_engine/__init__.py", line 10, in <module>\n'
                  "    from . import pytorch\nImportError: /usr/local/lib/python3.10/dist-packages/transformer_engine_torch.cpython-310-"
                  "x86_64-linux-gnu.so: undefined symbol: _ZN3c106detail14torchCheckFailEPKcS2_jRKSs", rank=0)
            exp.append(Expect(jid, 0, "change_regression", f"version:image={new}", j, ckpt_step=None,
                              failure_ts={end, j.last_progress()} - {None}))
        else:
            end = start + 70 * MIN
            j = g.job(jid, jn, start=start, end=end, state="completed", exit_code=0, image=img,
                      src="training-operator@kube-ctl", ckpt_every=30 * MIN)
            healthy.append((jid, 0))
        for n in jn:
            busy[n] = [(start, end)]
    g.gpus(nodes, T0, T0 + 2 * HOUR, 60 * SEC, busy=busy)
    return Scenario("change_image_regression", change_image_regression.__doc__, g.events, exp, healthy, g)


@scenario
def application_keyerror_benign_xid():
    """Megatron-style 16-node job: rank 0 raises KeyError in the data pipeline; every layer is clean;
    2 s AFTER the crash the driver logs XID 13 and XID 43 on the rank's GPU (process teardown);
    other ranks log 'NCCL communicator was aborted'; torchrun reports ChildFailedError."""
    g = Gen(1500)
    nodes = [f"node{i:04d}.cluster.local" for i in range(300, 318)]
    jn = nodes[:16]
    links = {n: [{"nic": "ib0", "switch": f"ib-leaf-{30 + i // 9}", "port": str(1 + i % 9), "segment": f"ib-leaf-{30 + i // 9}"}]
             for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds03"}])
    start = T0 + 2 * MIN
    fault = start + 77 * MIN
    end = fault + 45 * SEC
    j = g.job("9014471", jn, start=start, end=end, state="failed", exit_code=1, ckpt_every=30 * MIN, stop_at=fault,
              user="kowalski", ckpt_dir="/lustre/scratch/kowalski/megatron", ckpt_fmt="iter_{step:07d}",
              reason="NonZeroExitCode")
    g.log(j, fault, "Traceback (most recent call last):\n"
          '  File "/workspace/Megatron-LM/pretrain_gpt.py", line 227, in <module>\n    pretrain(train_valid_test_datasets_provider,\n'
          '  File "/workspace/Megatron-LM/megatron/training/training.py", line 1165, in train\n'
          "    train_step(forward_step_func,\n"
          '  File "/workspace/Megatron-LM/pretrain_gpt.py", line 139, in get_batch\n    tokens = data["text"].long()\n'
          "KeyError: 'text'", rank=0)
    g.xid(jn[0], fault + 2 * SEC, 0, 13, "Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address",
          pid=88012)
    g.xid(jn[0], fault + 2300, 0, 43, "Ch 00000010", pid=88012)
    for r in (9, 40, 77, 121):
        g.log(j, fault + 4 * SEC + r, f"[rank{r}]:[E{torch_ts(fault + 4000)} ProcessGroupNCCL.cpp:1395] RuntimeError: NCCL "
              f"communicator was aborted on rank {r}.", rank=r)
    g.log(j, end - 3 * SEC, child_failed("pretrain_gpt.py", fault, jn[0], 0, 0, 1, 88012), node=jn[0])
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in jn}, mods=[idle_after(j, end)])
    g.bmc(nodes, T0, end + 10 * MIN, 60 * SEC)
    g.ports([(f"ib-leaf-{30 + i // 9}", str(1 + i % 9), n) for i, n in enumerate(nodes)], T0, end + 10 * MIN, 30 * SEC,
            speed=200000, src="ufm")
    g.storage(nodes, "/lustre/scratch", "lustre", T0, end + 10 * MIN, 60 * SEC)
    return Scenario("application_keyerror_benign_xid", application_keyerror_benign_xid.__doc__, g.events,
                    [Expect(j.id, 0, "application", f"job:{j.id}", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def application_with_decoys():
    """A ValueError in user code on a 2-node job while, on nodes NOT in the job: XID 79, BMC PSU
    critical, a flapping leaf port and a stale mount; and on a job node an XID 48 three hours
    before the job started and a port flap after it ended (outside the window)."""
    g = Gen(1600)
    nodes = [dgx(i) for i in range(100, 106)]
    jn = nodes[:2]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-11", "port": f"Ethernet{4 * i}", "segment": "leaf-11"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0 - 4 * HOUR, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}])
    start = T0 + 2 * MIN
    fault = start + 44 * MIN
    end = fault + 30 * SEC
    j = g.job("pytorchjob-rm-train-5tq9", jn, start=start, end=end, state="failed", exit_code=1, ckpt_every=15 * MIN,
              stop_at=fault, src="training-operator@kube-ctl", tenant="alignment")
    g.log(j, fault, "Traceback (most recent call last):\n"
          '  File "/app/rm/train.py", line 88, in compute_loss\n    raise ValueError(f"chosen and rejected lengths differ: {a} != {b}")\n'
          "ValueError: chosen and rejected lengths differ: 512 != 511", rank=3)
    # decoys outside the job
    g.xid(nodes[4], fault - 4 * MIN, 2, 79, "GPU has fallen off the bus.", pid=1201)
    g.sel(nodes[5], fault - 6 * MIN, "critical", "Power Supply", "Power Supply 1: Failure detected", "PSU0003")
    for k in range(3):
        g.link("sw-leaf-11", "Ethernet12", nodes[3], fault - 8 * MIN + k * 60 * SEC, "down")
        g.link("sw-leaf-11", "Ethernet12", nodes[3], fault - 8 * MIN + k * 60 * SEC + 10 * SEC, "up")
    g.mount(nodes[3], fault - 3 * MIN, "/lustre/scratch", "stale", "Stale file handle")
    # outside the window, on a job node
    g.xid(jn[1], T0 - 3 * HOUR, 6, 48, "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer.",
          pid=4410)
    for k in range(2):
        g.link("sw-leaf-11", "Ethernet4", jn[1], end + 40 * MIN + k * 30 * SEC, "down")
        g.link("sw-leaf-11", "Ethernet4", jn[1], end + 40 * MIN + k * 30 * SEC + 8 * SEC, "up")
    g.gpus(nodes, T0, end + 50 * MIN, 30 * SEC, busy={n: [(start, end)] for n in jn}, mods=[idle_after(j, end)])
    g.bmc(nodes, T0, end + 50 * MIN, 60 * SEC)
    return Scenario("application_with_decoys", application_with_decoys.__doc__, g.events,
                    [Expect(j.id, 0, "application", f"job:{j.id}", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def scheduler_preempted():
    """Slurm preemption: the job is preempted by a higher-priority QOS while making progress
    (slurmstepd 'CANCELLED ... DUE TO PREEMPTION'); all layers clean."""
    g = Gen(1700)
    nodes = ["node0500.cluster.local", "node0501.cluster.local"]
    links = {n: [{"nic": "ib0", "switch": "ib-leaf-50", "port": str(i + 1), "segment": "ib-leaf-50"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/gpfs/work", "backend": "gpfs", "server": "ess01"}])
    start = T0 + 2 * MIN
    end = start + 63 * MIN
    j = g.job("2200417", nodes, start=start, end=end, state="preempted", exit_code=0, signal=15, ckpt_every=20 * MIN,
              reason="Preempted by job 2200530 (QOS high)", user="bwayne")
    g.log(j, end - 1 * SEC, f"slurmstepd: error: *** JOB 2200417 ON {nodes[0]} CANCELLED AT {iso(end - 1000)} DUE TO PREEMPTION ***",
          node=nodes[0])
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)])
    return Scenario("scheduler_preempted", scheduler_preempted.__doc__, g.events,
                    [Expect(j.id, 0, "scheduler", f"job:{j.id}", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def scheduler_time_limit():
    """Slurm TIMEOUT: the job reaches its 1 h time limit while making progress."""
    g = Gen(1800)
    nodes = ["cn-c01", "cn-c02", "cn-c03", "cn-c04"]
    links = {n: [{"nic": "ib0", "switch": "ib-leaf-60", "port": str(i + 1), "segment": "ib-leaf-60"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/gpfs/work", "backend": "gpfs", "server": "ess01"}])
    start = T0 + 2 * MIN
    end = start + 60 * MIN + 1 * SEC
    j = g.job("223344", nodes, start=start, end=end, state="timeout", exit_code=0, signal=15, ckpt_every=25 * MIN,
              reason="TimeLimit", user="cdiaz")
    g.log(j, end - 500, f"slurmstepd: error: *** JOB 223344 ON cn-c01 CANCELLED AT {iso(end - 500)} DUE TO TIME LIMIT ***",
          node="cn-c01")
    g.gpus(nodes, T0, end + 10 * MIN, 60 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)])
    return Scenario("scheduler_time_limit", scheduler_time_limit.__doc__, g.events,
                    [Expect(j.id, 0, "scheduler", f"job:{j.id}", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def silent_stall_64n():
    """64-node (512 GPU) job stops making progress with no error anywhere (all layers clean, GPUs
    go idle); the user cancels it 90 min later. One incident; failure_ts = the last progress."""
    g = Gen(1900)
    nodes = [f"node{i:04d}.cluster.local" for i in range(1, 65)]
    links = {n: [{"nic": "mlx5_0", "switch": f"sw-leaf-{1 + i // 16}", "port": f"Ethernet{4 * (i % 16)}",
                  "segment": f"leaf-{1 + i // 16}"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}])
    start = T0 + 3 * MIN
    stall = start + 52 * MIN
    end = stall + 90 * MIN
    j = g.job("123460_3", nodes, start=start, end=end, state="cancelled", signal=15, reason="Cancelled by user",
              ckpt_every=20 * MIN, stop_at=stall, user="fmartin", ckpt_dir="/lustre/scratch/fmartin/big",
              progress_every=2 * MIN)
    g.gpus(nodes, T0, end + 5 * MIN, 60 * SEC, busy={n: [(start, end)] for n in nodes},
           mods=[idle_after(j, end), lambda n, gi, ts, d, st: d.update(util_pct=100, power_w=105.0) if stall < ts < end else None])
    return Scenario("silent_stall_64n", silent_stall_64n.__doc__, g.events,
                    [Expect(j.id, 0, "unknown", f"job:{j.id}", j, failure_ts={j.last_progress()},
                            note="debatable: 'scheduler' (cancelled) would be the cancel, not the cause")], [], g)


@scenario
def healthy_noisy_fleet():
    """Healthy jobs with noisy-but-normal telemetry: slowly growing SBE counts, a couple of NVLink
    replays, sw_power_cap throttling, steady background CNPs, a switch counter reset, a BMC fan
    warning that clears, progress logged only every 5 min, a 4-min checkpoint, a benign XID 43 at
    job teardown after success, and a user cancel while progressing. NO incident at all."""
    g = Gen(2100)
    nodes = [f"gpu-h-{i:03d}" for i in range(1, 19)]
    links = {n: [{"nic": "mlx5_0", "switch": f"sw-leaf-{100 + i // 9}", "port": f"Ethernet{4 * (i % 9)}",
                  "segment": f"leaf-{100 + i // 9}"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}])
    start = T0 + 2 * MIN
    j1 = g.job("pytorchjob-ok-16n-aa11", nodes[:16], start=start, end=start + 150 * MIN, state="completed", exit_code=0,
               src="training-operator@kube-ctl", ckpt_every=30 * MIN, ckpt_dur=4 * MIN, progress_every=5 * MIN,
               ckpt_dir="/mnt/weka/ok/ckpt")
    j2 = g.job("pytorchjob-ok-1n-bb22", nodes[16:17], start=start + 10 * MIN, end=start + 100 * MIN, state="completed",
               exit_code=0, src="training-operator@kube-ctl", ckpt_every=20 * MIN)
    j3 = g.job("pytorchjob-user-cancel-cc33", nodes[17:18], start=start + 5 * MIN, end=start + 75 * MIN, state="cancelled",
               signal=15, reason="Cancelled by user", src="training-operator@kube-ctl", ckpt_every=20 * MIN)
    g.xid(nodes[16], start + 100 * MIN + 3 * SEC, 0, 43, "Ch 00000008", pid=7712)
    busy = {n: [(start, start + 150 * MIN)] for n in nodes[:16]}
    busy[nodes[16]] = [(start + 10 * MIN, start + 100 * MIN)]
    busy[nodes[17]] = [(start + 5 * MIN, start + 75 * MIN)]

    def noise(node, gpu, ts, d, st):
        if node == nodes[3] and gpu == 1 and ts in range(start + 60 * MIN, start + 60 * MIN + 15 * SEC):
            st["nvl"] += 2
        if node == nodes[7] and gpu == 5 and g.rng.random() < 0.05:
            st["sbe"] += 1
    g.gpus(nodes, T0, start + 160 * MIN, 15 * SEC, busy=busy, mods=[noise])

    def fan(node, ts, d):
        if node == nodes[2] and d["sensor"] == "Fan1A" and start + 30 * MIN <= ts < start + 33 * MIN:
            d["value"], d["status"] = 2100.0, "warning"
    g.bmc(nodes, T0, start + 160 * MIN, 60 * SEC, mods=[fan])

    def reset(dev, port, ts, d, st):
        if dev == "sw-leaf-100" and ts >= start + 80 * MIN and not st.get("_reset"):
            for k in ("in_errors", "out_errors", "in_discards", "out_discards", "in_octets", "out_octets"):
                st[k] = 0
            st["_reset"] = True
    g.ports([(f"sw-leaf-{100 + i // 9}", f"Ethernet{4 * (i % 9)}", n) for i, n in enumerate(nodes)], T0, start + 160 * MIN,
            30 * SEC, mods=[reset])
    for st in g.counters.values():
        st.pop("_reset", None)
    g.rdma(nodes, T0, start + 160 * MIN, 30 * SEC, hcas=("mlx5_0",))
    return Scenario("healthy_noisy_fleet", healthy_noisy_fleet.__doc__, g.events, [],
                    [(j1.id, 0), (j2.id, 0), (j3.id, 0)], g)



# =========================================================================== harder variants (round 2)

@scenario
def gpu_xid79_kernel_log_only():
    """No XID/NVML-event collector: the XID 79 exists only as a kernel line forwarded as runtime.log
    (stream kernel) naming the PCI bus id; NVML samples of that GPU (index 3, bus 4e) stop. Heavier
    delivery noise: 10 % duplicates, 8 s reordering."""
    g = Gen(7900, dup_rate=0.10, jitter_ms=8000)
    nodes = ["gpu-x-001", "gpu-x-002", "gpu-x-003", "gpu-x-004", "gpu-x-005"]
    jn = nodes[:4]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-200", "port": f"Ethernet{4 * i}", "segment": "leaf-200"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}])
    start = T0 + 2 * MIN
    fault = start + 39 * MIN
    end = fault + 10 * MIN + 15 * SEC
    j = g.job("pytorchjob-qwen-ft-7n2m", jn, start=start, end=end, state="failed", exit_code=1,
              src="training-operator@kube-ctl", ckpt_every=15 * MIN, stop_at=fault, progress_every=20 * SEC)
    bad = jn[1]
    g.gpus(nodes, T0, end + 10 * MIN, 5 * SEC, busy={n: [(start, end)] for n in jn},
           mods=[stop_after(bad, fault, 3), idle_after(j, end)])
    g.log(j, fault, xid_line(3, 79, 40112, "GPU has fallen off the bus."), stream="kernel", node=bad)
    g.log(j, fault + 300, "NVRM: GPU 0000:4e:00.0: GPU has fallen off the bus.", stream="kernel", node=bad)
    nccl_timeouts(g, j, fault + 600 * SEC, [0, 3, 17, 30], seq=20931)
    return Scenario("gpu_xid79_kernel_log_only", gpu_xid79_kernel_log_only.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_hardware", f"gpu:{bad}/3", j, failure_ts={end, j.last_progress()},
                            note="component needs the bus id -> index (from the kernel line + which GPU went silent)")], [], g)


@scenario
def gpu_xid79_gpu_null_pci_only():
    """gpu.xid with gpu=null and only the pci bus id (allowed by the contract); NVML samples of GPU 6
    (bus b7) stop at the fault; the ranks on other nodes hit the watchdog."""
    g = Gen(7901)
    nodes = [dgx(i) for i in range(120, 124)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-15", "port": f"Ethernet{4 * i}", "segment": "leaf-15"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}])
    start = T0 + 2 * MIN
    fault = start + 51 * MIN
    end = fault + 10 * MIN + 30 * SEC
    j = g.job("5599001", nodes, start=start, end=end, state="failed", exit_code=1, ckpt_every=20 * MIN, stop_at=fault,
              user="vpopov")
    bad = nodes[3]
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes},
           mods=[stop_after(bad, fault, 6), idle_after(j, end)])
    g.xid(bad, fault, 6, 79, "GPU has fallen off the bus.", pid=5512, gpu_field=False)
    nccl_timeouts(g, j, fault + 600 * SEC, [0, 8, 16], seq=8812)
    return Scenario("gpu_xid79_gpu_null_pci_only", gpu_xid79_gpu_null_pci_only.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_hardware", f"gpu:{bad}/6", j, failure_ts={end, j.last_progress()},
                            note="component needs pci -> index; the silent GPU in NVML gives it")], [], g)


@scenario
def net_host_nic_down_no_switch_telemetry():
    """No SNMP/switch collector: on gpu-y-003 the HCA mlx5_2 port 1 goes down (kernel carrier
    event as net.link, RDMA link_downed +1, symbol errors climbing before); NCCL on another node
    reports the remote error. Component: the NIC port (or the switch port the topology maps it to)."""
    g = Gen(5100)
    nodes = [f"gpu-y-{i:03d}" for i in range(1, 6)]
    jn = nodes[:4]
    links = {n: [{"nic": f"mlx5_{k}", "switch": f"sw-rail-{k}", "port": f"Ethernet{4 * i}", "segment": f"rail-{k}"}
                 for k in range(4)] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}])
    start = T0 + 2 * MIN
    onset = start + 46 * MIN
    end = onset + 10 * MIN + 40 * SEC
    j = g.job("pytorchjob-t5-xxl-b8c1", jn, start=start, end=end, state="failed", exit_code=1,
              src="training-operator@kube-ctl", ckpt_every=15 * MIN, stop_at=onset + 20 * SEC)
    bad = jn[2]

    def nic(node, hca, ts, st):
        if node == bad and hca == "mlx5_2":
            if ts >= onset - 8 * MIN:
                st["symbol_error"] += 1500
                st["port_rcv_errors"] += 300
            if ts >= onset and st["link_downed"] == 0:
                st["link_downed"] = 1
    g.rdma(nodes, T0, end + 10 * MIN, 20 * SEC, mods=[nic])
    g.link("mlx5_2", "1", bad, onset, "down", src="kernel")
    g.log(j, onset + 100, "mlx5_core 0000:4b:00.0 enp75s0np0: Link down", stream="kernel", node=bad)
    g.gpus(nodes, T0, end + 10 * MIN, 20 * SEC, busy={n: [(start, end)] for n in jn}, mods=[idle_after(j, end)])
    g.log(j, onset + 25 * SEC, "gpu-y-001:912:1301 [2] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
          "10.61.2.3<51122> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.61.2.1 remoteGids::ffff:10.61.2.3",
          rank=2)
    nccl_timeouts(g, j, onset + 600 * SEC, [2, 10], seq=7781)
    sw_port = links[bad][2]
    return Scenario("net_host_nic_down_no_switch_telemetry", net_host_nic_down_no_switch_telemetry.__doc__, g.events,
                    [Expect(j.id, 0, "network_link", {"port:mlx5_2/1", f"port:{sw_port['switch']}/{sw_port['port']}"}, j,
                            failure_ts={end, j.last_progress()})], [], g)


@scenario
def host_oom_kernel_log_only():
    """Slurm reports plain FAILED (exit 137, no OUT_OF_MEMORY state, no container event); the
    evidence is the kernel OOM-killer line on cn-d07 and 'Killed' on the rank's stdout."""
    g = Gen(9003)
    nodes = ["cn-d06", "cn-d07", "cn-d08"]
    jn = nodes[:2]
    links = {n: [{"nic": "ib0", "switch": "ib-leaf-70", "port": str(i + 1), "segment": "ib-leaf-70"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/gpfs/work", "backend": "gpfs", "server": "ess01"}])
    start = T0 + 2 * MIN
    fault = start + 34 * MIN
    end = fault + 12 * SEC
    j = g.job("7788123", jn, start=start, end=end, state="failed", exit_code=137, signal=9, ckpt_every=15 * MIN,
              stop_at=fault, user="nsato", reason="NonZeroExitCode")
    bad = jn[1]
    g.log(j, fault - 400, "python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0",
          stream="kernel", node=bad)
    g.log(j, fault, "Out of memory: Killed process 99120 (pt_data_worker) total-vm:98123412kB, anon-rss:61234120kB, "
          "file-rss:0kB, shmem-rss:20480kB, UID:51002 pgtables:120332kB oom_score_adj:0", stream="kernel", node=bad)
    g.log(j, fault + 900, "Killed", rank=12, stream="stdout")
    g.log(j, fault + 2 * SEC, "RuntimeError: DataLoader worker (pid 99120) is killed by signal: Killed. ", rank=12)
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in jn}, mods=[idle_after(j, end)])
    return Scenario("host_oom_kernel_log_only", host_oom_kernel_log_only.__doc__, g.events,
                    [Expect(j.id, 0, "host_oom", f"node:{bad}", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def gpu_oom_old_torch_lightning():
    """Older PyTorch wording inside a Lightning trainer: 'RuntimeError: CUDA out of memory. Tried to
    allocate ... (GPU 3; 79.35 GiB total capacity; ...)', rank 3 of a 1-node 8-GPU job."""
    g = Gen(8003)
    nodes = ["ws-gpu-17", "ws-gpu-18"]
    links = {n: [{"nic": "eth0", "switch": "tor-17", "port": f"xe-0/0/{i}", "segment": "row-c"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/data", "backend": "nfs", "server": "nas-c"}])
    start = T0 + 2 * MIN
    fault = start + 19 * MIN
    end = fault + 9 * SEC
    j = g.job("3301", nodes[:1], start=start, end=end, state="failed", exit_code=1, ckpt_every=6 * MIN, stop_at=fault,
              ckpt_dir="/data/lightning_logs/version_3/checkpoints", ckpt_fmt="epoch=0-step={step}.ckpt", user="intern2")

    def full(node, gpu, ts, d, st):
        if node == nodes[0] and gpu == 3 and fault - 45 * SEC <= ts < end:
            d["mem_used_mib"] = 81200
    g.gpus(nodes, T0, end + 10 * MIN, 15 * SEC, busy={nodes[0]: [(start, end)]}, mods=[full, idle_after(j, end)])
    g.log(j, fault, "Traceback (most recent call last):\n"
          '  File "/home/intern2/venv/lib/python3.10/site-packages/pytorch_lightning/trainer/call.py", line 44, in _call_and_handle_interrupt\n'
          "    return trainer_fn(*args, **kwargs)\n"
          "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 3; 79.35 GiB total capacity; 75.12 GiB already "
          "allocated; 1.19 GiB free; 77.40 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try "
          "setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF",
          rank=3)
    return Scenario("gpu_oom_old_torch_lightning", gpu_oom_old_torch_lightning.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_oom", f"gpu:{nodes[0]}/3", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def application_filenotfound_on_storage_path():
    """User error that NAMES a storage path: FileNotFoundError for a file under /lustre/scratch
    (typo in the config) while the mount is healthy on every node; plus a benign XID 63 row-remap
    record on a job GPU 30 min earlier. Must be application, not storage, not GPU."""
    g = Gen(1601)
    nodes = [dgx(i) for i in range(130, 133)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-17", "port": f"Ethernet{4 * i}", "segment": "leaf-17"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}])
    start = T0 + 2 * MIN
    fault = start + 47 * MIN
    end = fault + 20 * SEC
    j = g.job("8100231", nodes[:2], start=start, end=end, state="failed", exit_code=1, ckpt_every=20 * MIN, stop_at=fault,
              user="gmorales", reason="NonZeroExitCode")
    g.xid(nodes[1], fault - 30 * MIN, 5, 63, "Row Remapper: New row (0x00000000001f2e40) was marked for remapping, reset gpu to activate.",
          pid=None)
    g.log(j, fault, "Traceback (most recent call last):\n"
          '  File "/home/gmorales/proj/eval.py", line 54, in run_eval\n    with open(cfg.eval_file) as f:\n'
          "FileNotFoundError: [Errno 2] No such file or directory: '/lustre/scratch/gmorales/eval/mmlu_dev.jsonl'", rank=0)
    g.storage(nodes, "/lustre/scratch", "lustre", T0, end + 10 * MIN, 30 * SEC)
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes[:2]}, mods=[idle_after(j, end)])
    g.bmc(nodes, T0, end + 10 * MIN, 60 * SEC)
    return Scenario("application_filenotfound_on_storage_path", application_filenotfound_on_storage_path.__doc__, g.events,
                    [Expect(j.id, 0, "application", f"job:{j.id}", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def application_nan_megatron():
    """Megatron aborts on a NaN gradient norm (numerics, user side); every layer clean."""
    g = Gen(1602)
    nodes = [f"node{i:04d}.cluster.local" for i in range(400, 408)]
    links = {n: [{"nic": "ib0", "switch": "ib-leaf-40", "port": str(i + 1), "segment": "ib-leaf-40"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds03"}])
    start = T0 + 2 * MIN
    fault = start + 58 * MIN
    end = fault + 25 * SEC
    j = g.job("9020001", nodes, start=start, end=end, state="failed", exit_code=1, ckpt_every=20 * MIN, stop_at=fault,
              ckpt_fmt="iter_{step:07d}", user="kowalski")
    for r in (0, 8, 40):
        g.log(j, fault + r * 10, "Traceback (most recent call last):\n"
              '  File "/workspace/Megatron-LM/megatron/training/training.py", line 727, in train_step\n'
              "    update_successful, grad_norm, num_zeros_in_grad = optimizer.step()\n"
              '  File "/workspace/Megatron-LM/megatron/core/optimizer/distrib_optimizer.py", line 1561, in step\n'
              "    assert not found_nan\n"
              "AssertionError: found NaN in local grad norm in backward pass before data-parallel communication collective. "
              f"Device: {r % 8}, node: {nodes[r // 8]}", rank=r)
    g.gpus(nodes, T0, end + 10 * MIN, 60 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)])
    g.rdma(nodes, T0, end + 10 * MIN, 60 * SEC, hcas=("mlx5_0",))
    return Scenario("application_nan_megatron", application_nan_megatron.__doc__, g.events,
                    [Expect(j.id, 0, "application", f"job:{j.id}", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def node_memory_ue_late_sel():
    """The decisive BMC SEL (memory UE, critical) is polled late: delivered 3 min after the job's
    FAILED event. The latest incident revision must still name the node."""
    g = Gen(2003)
    nodes = ["gpu-f-011", "gpu-f-012", "gpu-f-013"]
    jn = nodes[:2]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-300", "port": f"Ethernet{4 * i}", "segment": "leaf-300"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}])
    start = T0 + 2 * MIN
    fault = start + 38 * MIN
    end = fault + 15 * SEC
    j = g.job("6677100", jn, start=start, end=end, state="failed", exit_code=135, signal=7, ckpt_every=15 * MIN,
              stop_at=fault, user="abaker")
    bad = jn[0]
    g.late(g.sel(bad, fault - 2 * SEC, "critical", "Memory", "Uncorrectable ECC error detected on DIMM P1-DIMMC1 (Memory #0x85)",
                 "MEM0001"), 200 * SEC)
    g.log(j, fault, "Bus error (core dumped)", rank=2)
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in jn}, mods=[idle_after(j, end)])
    g.bmc(nodes, T0, end + 10 * MIN, 120 * SEC)
    return Scenario("node_memory_ue_late_sel", node_memory_ue_late_sel.__doc__, g.events,
                    [Expect(j.id, 0, "node_hardware", f"node:{bad}", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def storage_missing_fleetwide():
    """/mnt/weka disappears on every node (client lost the cluster): three jobs on different nodes
    fail with ENOTCONN on the mount; each incident is storage_unavailable on the mount."""
    g = Gen(7006)
    nodes = [f"hgx-h100-g{i:02d}" for i in range(1, 7)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-400", "port": f"Ethernet{4 * i}", "segment": "leaf-400"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-cluster-1"}])
    fault = T0 + 70 * MIN
    exp, busy = [], {}
    for k, jid in enumerate(["pytorchjob-a-1x1x", "pytorchjob-b-2y2y", "pytorchjob-c-3z3z"]):
        jn = nodes[2 * k:2 * k + 2]
        start = T0 + (5 + 7 * k) * MIN
        end = fault + (40 + 20 * k) * SEC
        j = g.job(jid, jn, start=start, end=end, state="failed", exit_code=1, src="training-operator@kube-ctl",
                  ckpt_every=20 * MIN, stop_at=fault + k * SEC, ckpt_dir=f"/mnt/weka/{jid}/ckpt")
        g.log(j, end - 10 * SEC, f"OSError: [Errno 107] Transport endpoint is not connected: '/mnt/weka/{jid}/data/part-00017.parquet'",
              rank=1)
        exp.append(Expect(jid, 0, "storage_unavailable", "path:/mnt/weka", j, failure_ts={end, j.last_progress()}))
        for n in jn:
            busy[n] = [(start, end)]
    for n in nodes:
        g.mount(n, fault + 3 * SEC, "/mnt/weka", "missing", "Transport endpoint is not connected")
    g.storage(nodes, "/mnt/weka", "wekafs", T0, fault, 30 * SEC)
    g.gpus(nodes, T0, T0 + 2 * HOUR, 30 * SEC, busy=busy)
    return Scenario("storage_missing_fleetwide", storage_missing_fleetwide.__doc__, g.events, exp, [], g)


@scenario
def requeue_same_nodes_then_xid48():
    """Attempt 0 is preempted (scheduler) and requeued on the SAME nodes; attempt 1 resumes from
    attempt 0's last checkpoint and dies 14 min later of an XID 48 before writing a checkpoint of
    its own. Two incidents: scheduler (retry: attempt 1, same_nodes) and gpu_hardware whose last
    succeeded checkpoint is attempt 0's (lost GPU-h counted from attempt 1's start)."""
    g = Gen(4801)
    nodes = ["node0601.cluster.local", "node0602.cluster.local"]
    links = {n: [{"nic": "ib0", "switch": "ib-leaf-61", "port": str(i + 1), "segment": "ib-leaf-61"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/gpfs/work", "backend": "gpfs", "server": "ess01"}])
    s0 = T0 + 2 * MIN
    e0 = s0 + 52 * MIN
    j0 = g.job("4455667", nodes, start=s0, end=e0, state="preempted", signal=15, reason="Preempted by job 4455700 (QOS high)",
               ckpt_every=20 * MIN, user="rkhan", ckpt_dir="/gpfs/work/rkhan/ckpt")
    last0 = j0.last_ok()
    s1 = e0 + 4 * MIN
    fault = s1 + 14 * MIN
    e1 = fault + 30 * SEC
    j1 = g.job("4455667", nodes, attempt=1, start=s1, end=e1, state="failed", exit_code=1, ckpt_every=20 * MIN,
               first_step=last0[2], stop_at=fault, user="rkhan", submit=e0 + 2 * SEC, ckpt_dir="/gpfs/work/rkhan/ckpt",
               reason="NonZeroExitCode")
    assert not j1.last_ok()
    j1.ckpts = list(j0.ckpts) + j1.ckpts          # the job's checkpoint history spans attempts
    g.xid(nodes[0], fault, 2, 48, "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 2.",
          pid=5120)
    g.log(j1, fault + 800, "RuntimeError: CUDA error: uncorrectable ECC error encountered", rank=2)

    def dbe(node, gpu, ts, d, st):
        if node == nodes[0] and gpu == 2 and ts >= fault:
            st["dbe"] = 1
    g.gpus(nodes, T0, e1 + 10 * MIN, 30 * SEC, busy={n: [(s0, e0), (s1, e1)] for n in nodes}, mods=[dbe])
    return Scenario("requeue_same_nodes_then_xid48", requeue_same_nodes_then_xid48.__doc__, g.events,
                    [Expect(j0.id, 0, "scheduler", f"job:{j0.id}", j0, failure_ts={e0, j0.last_progress()}, retry_attempt=1,
                            retry_same_nodes=True),
                     Expect(j1.id, 1, "gpu_hardware", f"gpu:{nodes[0]}/2", j1, failure_ts={e1, j1.last_progress()},
                            note="checkpoint from the previous attempt: the contract's 'later of ckpt ts and start_ts' implies it")],
                    [], g)



# =========================================================================== round 3: timing traps and missing layers

@scenario
def gpu_xid79_long_timeout_stall_first():
    """NCCL timeout set to 30 min (Timeout(ms)=1800000): after XID 79 the job makes no progress for
    30 min (a stall by any threshold) before the watchdog kills it. One incident, gpu_hardware."""
    g = Gen(7902)
    nodes = [f"hgx-h100-k{i:02d}" for i in range(1, 5)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-500", "port": f"Ethernet{4 * i}", "segment": "leaf-500"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}])
    start = T0 + 2 * MIN
    fault = start + 44 * MIN
    end = fault + 30 * MIN + 40 * SEC
    j = g.job("pytorchjob-dit-xl-30m-t0", nodes, start=start, end=end, state="failed", exit_code=1,
              src="training-operator@kube-ctl", ckpt_every=15 * MIN, stop_at=fault)
    bad = nodes[2]
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes},
           mods=[stop_after(bad, fault, 5), idle_after(j, end)])
    g.xid(bad, fault, 5, 79, "GPU has fallen off the bus.", pid=3011)
    for r in (0, 7, 30):
        g.log(j, fault + 1800 * SEC + r, watchdog_lines(r, fault + 1800 * SEC + r, 3301, timeout_ms=1800000), rank=r)
    return Scenario("gpu_xid79_long_timeout_stall_first", gpu_xid79_long_timeout_stall_first.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_hardware", f"gpu:{bad}/5", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def gpu_xid79_hang_until_time_limit():
    """No watchdog (TORCH_NCCL_ASYNC_ERROR_HANDLING=0): after XID 79 the job hangs silently until
    Slurm kills it at its time limit 2 h later (state TIMEOUT). The cause is the GPU, not the
    scheduler; failure_ts is the last progress."""
    g = Gen(7903)
    nodes = ["node0701.cluster.local", "node0702.cluster.local"]
    links = {n: [{"nic": "ib0", "switch": "ib-leaf-71", "port": str(i + 1), "segment": "ib-leaf-71"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/gpfs/work", "backend": "gpfs", "server": "ess01"}])
    start = T0 + 2 * MIN
    fault = start + 61 * MIN
    end = start + 180 * MIN
    j = g.job("9911223", nodes, start=start, end=end, state="timeout", signal=15, reason="TimeLimit", ckpt_every=20 * MIN,
              stop_at=fault, user="ptran")
    bad = nodes[1]
    g.gpus(nodes, T0, end + 5 * MIN, 60 * SEC, busy={n: [(start, end)] for n in nodes},
           mods=[stop_after(bad, fault, 0), idle_after(j, end)])
    g.xid(bad, fault, 0, 79, "GPU has fallen off the bus.", pid=81220, kernel_log_job=j.id)
    g.log(j, end - 500, f"slurmstepd: error: *** JOB 9911223 ON {nodes[0]} CANCELLED AT {iso(end - 500)} DUE TO TIME LIMIT ***",
          node=nodes[0])
    return Scenario("gpu_xid79_hang_until_time_limit", gpu_xid79_hang_until_time_limit.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_hardware", f"gpu:{bad}/0", j, failure_ts={j.last_progress()})], [], g)


@scenario
def healthy_sparse_progress_cancel():
    """Progress logged only every 12 min (log interval 100 steps x 7 s); checkpoints every hour taking
    6 min; the user cancels 5 min after a progress line. And a second job still running when the
    file ends, 9 min after its last progress line (same cadence). NO incident."""
    g = Gen(2200)
    nodes = [f"gpu-s-{i:03d}" for i in range(1, 9)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-600", "port": f"Ethernet{4 * i}", "segment": "leaf-600"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}])
    start = T0 + 2 * MIN
    j = g.job("pytorchjob-405b-probe-s1", nodes[:4], start=start, end=None, state="running", emit_end=False,
              step_time=7.0, progress_every=12 * MIN, ckpt_every=60 * MIN, ckpt_dur=6 * MIN, init=8 * MIN,
              src="training-operator@kube-ctl")
    cancel = j.last_progress() if False else None
    # cut the job 5 min after a progress line at ~3 h and cancel it
    cut = [t for t, _ in j.progress if t > start + 3 * HOUR][0] + 5 * MIN
    g.events = [e for e in g.events if not (e["job"] == j.id and e["ts"] > cut)]
    j.progress = [p for p in j.progress if p[0] <= cut]
    j.ckpts = [c for c in j.ckpts if c[0] <= cut]
    g.ev("sched.job", cut, {"state": "cancelled", "attempt": 0, "nodes": nodes[:4], "gpus": 32, "ranks": j.ranks(),
                            "exit_code": None, "signal": 15, "image": None, "name": "train", "user": "alice",
                            "start_ts": start, "end_ts": cut, "reason": "Cancelled by user"},
         job=j.id, source="training-operator@kube-ctl")
    file_end = cut + 20 * MIN
    j2 = g.job("pytorchjob-405b-probe-s2", nodes[4:], start=start + 30 * MIN, end=None, state="running", emit_end=False,
               step_time=7.0, progress_every=12 * MIN, ckpt_every=60 * MIN, ckpt_dur=6 * MIN, init=8 * MIN,
               src="training-operator@kube-ctl")
    last2 = max(t for t, _ in j2.progress if t <= file_end - 9 * MIN)
    g.events = [e for e in g.events if not (e["job"] == j2.id and e["ts"] > last2)]
    g.gpus(nodes, T0, file_end, 60 * SEC, busy={**{n: [(start, cut)] for n in nodes[:4]},
                                               **{n: [(start + 30 * MIN, file_end)] for n in nodes[4:]}})
    return Scenario("healthy_sparse_progress_cancel", healthy_sparse_progress_cancel.__doc__, g.events, [],
                    [(j.id, 0), (j2.id, 0)], g)


@scenario
def node_thermal_shutdown_sensor_only():
    """No SEL: only BMC sensors. CPU2 temperature climbs to critical (fan failure: Fan3A 0 RPM
    critical) and the node powers off; the job ends NODE_FAIL."""
    g = Gen(2004)
    nodes = ["gpu-t-101", "gpu-t-102", "gpu-t-103"]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-700", "port": f"Ethernet{4 * i}", "segment": "leaf-700"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}])
    start = T0 + 2 * MIN
    onset = start + 40 * MIN
    fault = onset + 9 * MIN
    end = fault + 5 * MIN
    j = g.job("5512345", nodes[:2], start=start, end=end, state="node_fail", reason="NodeFail", ckpt_every=20 * MIN,
              stop_at=fault, user="hmueller")
    bad = nodes[1]

    def heat(node, ts, d):
        if node != bad or ts < onset:
            return None
        if ts >= fault:
            return False
        f = (ts - onset) / (fault - onset)
        if d["sensor"] == "Fan1A":
            d["sensor"] = "Fan3A"
            d["value"], d["status"] = 0.0, "critical"
        if d["sensor"] == "CPU1 Temp":
            d["sensor"] = "CPU2 Temp"
            d["value"] = round(70 + 35 * f, 1)
            d["status"] = "critical" if d["value"] >= 95 else "warning"
    g.bmc(nodes, T0, end + 10 * MIN, 30 * SEC, mods=[heat])
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes[:2]},
           mods=[stop_after(bad, fault), idle_after(j, end)])
    g.sched_node(bad, fault + 2 * MIN, "down", "Not responding")
    return Scenario("node_thermal_shutdown_sensor_only", node_thermal_shutdown_sensor_only.__doc__, g.events,
                    [Expect(j.id, 0, "node_hardware", f"node:{bad}", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def storage_slow_one_rank_blocks_nccl():
    """/lustre/scratch read latency on ONE node goes to seconds (OST overloaded); that node's
    dataloader starves, its ranks stop entering the collective and the other ranks hit the NCCL
    watchdog. The mount stays 'ok'. Cause: storage_slow, not network."""
    g = Gen(7007)
    nodes = [dgx(i) for i in range(140, 148)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-18", "port": f"Ethernet{4 * i}", "segment": "leaf-18"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}])
    start = T0 + 2 * MIN
    onset = start + 50 * MIN
    stop = onset + 3 * MIN
    end = stop + 10 * MIN + 20 * SEC
    j = g.job("pytorchjob-video-ldm-h6r2", nodes, start=start, end=end, state="failed", exit_code=1,
              src="training-operator@kube-ctl", ckpt_every=20 * MIN, stop_at=stop, tenant="gen-media",
              step_time_fn=lambda t: 1.6 if t < onset else 9.0)
    bad = nodes[5]

    def slow(node, ts, d):
        if node == bad and ts >= onset:
            d.update(read_lat_ms=round(2500 + (ts % 1500), 1), read_mbps=round(1 + (ts % 3), 1), read_iops=4,
                     queue_depth=180 + ts % 40)
    g.storage(nodes, "/lustre/scratch", "lustre", T0, end + 10 * MIN, 15 * SEC, mods=[slow])
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)])
    g.ports([("sw-leaf-18", f"Ethernet{4 * i}", n) for i, n in enumerate(nodes)], T0, end + 10 * MIN, 30 * SEC)
    g.log(j, onset + 5 * MIN, "Lustre: scratch-OST0011-osc-ffff8f2a1c4e9800: Connection to scratch-OST0011 (at 10.0.0.21@o2ib) "
          "was lost; in progress operations using this service will wait for recovery to complete", stream="kernel", node=bad)
    nccl_timeouts(g, j, stop + 600 * SEC, [0, 9, 18, 27, 60], seq=12345)
    return Scenario("storage_slow_one_rank_blocks_nccl", storage_slow_one_rank_blocks_nccl.__doc__, g.events,
                    [Expect(j.id, 0, "storage_slow", "path:/lustre/scratch", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def net_congestion_no_rdma_layer():
    """No RDMA collector: congestion shows only as switch discards (in/out_discards climbing on
    many ports of segment rack-12, zero errors, no flaps) while a neighbour's all-to-all runs; the
    job dies with NCCL timeouts."""
    g = Gen(6002)
    nodes = [f"r12-gpu-{i:02d}" for i in range(1, 13)]
    ja, jb = nodes[:4], nodes[4:12]
    links = {n: [{"nic": "mlx5_0", "switch": "r12-tor-a", "port": f"swp{i + 1}", "segment": "rack-12"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/vast", "backend": "vast", "server": "vast-vip"}])
    start = T0 + 2 * MIN
    onset = start + 35 * MIN
    stop = onset + 6 * MIN
    end = stop + 10 * MIN + 15 * SEC
    j = g.job("pytorchjob-mamba-2p8b-c3", ja, start=start, end=end, state="failed", exit_code=1,
              src="training-operator@kube-ctl", ckpt_every=15 * MIN, stop_at=stop, step_time_fn=lambda t: 1.1 if t < onset else 4.0)
    jb_ = g.job("pytorchjob-a2a-neighbour-c4", jb, start=onset - MIN, end=end + 30 * MIN, state="completed", exit_code=0,
                src="training-operator@kube-ctl", ckpt_every=60 * MIN, user="bob")

    def disc(dev, port, ts, d, st):
        if onset <= ts < end + 30 * MIN:
            st["out_discards"] += 120000
            st["in_discards"] += 20000
    g.ports([("r12-tor-a", f"swp{i + 1}", n) for i, n in enumerate(nodes)], T0, end + 35 * MIN, 20 * SEC, mods=[disc],
            src="cumulus-snmp")
    g.gpus(nodes, T0, end + 35 * MIN, 30 * SEC, busy={**{n: [(start, end)] for n in ja}, **{n: [(onset - MIN, end + 30 * MIN)] for n in jb}},
           mods=[idle_after(j, end)])
    nccl_timeouts(g, j, stop + 600 * SEC, [0, 9, 17, 30], seq=4321, op="REDUCE_SCATTER")
    return Scenario("net_congestion_no_rdma_layer", net_congestion_no_rdma_layer.__doc__, g.events,
                    [Expect(j.id, 0, "network_congestion", "segment:rack-12", j, failure_ts={end, j.last_progress()})],
                    [(jb_.id, 0)], g)


@scenario
def net_ib_spine_port_storm():
    """A spine port (switch-to-switch, key = the switch name, node null) ib-spine-2/17 has an error
    storm and flaps twice; a 16-node job spanning two leaves dies with NCCL retry-exceeded errors.
    Topology names only the leaves: the spine is on the path between them."""
    g = Gen(5003)
    nodes = [f"cn-e{i:02d}" for i in range(1, 17)]
    links = {n: [{"nic": "mlx5_0", "switch": f"ib-leaf-{1 + i // 8}", "port": str(1 + i % 8), "segment": f"ib-leaf-{1 + i // 8}"}]
             for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/gpfs/work", "backend": "gpfs", "server": "ess01"}])
    start = T0 + 2 * MIN
    onset = start + 53 * MIN
    end = onset + 11 * MIN
    j = g.job("7001234", nodes, start=start, end=end, state="failed", exit_code=1, ckpt_every=20 * MIN, stop_at=onset + 30 * SEC,
              user="zli", reason="NonZeroExitCode")

    def storm(dev, port, ts, d, st):
        if dev == "ib-spine-2" and port == "17" and ts >= onset - 3 * MIN:
            st["in_errors"] += 40000
            if onset <= ts < onset + 40 * SEC:
                d["oper_status"] = "down"
    uplinks = [(f"ib-spine-{s}", str(p), None) for s in (1, 2) for p in range(15, 20)]
    g.ports(uplinks + [(f"ib-leaf-{1 + i // 8}", str(1 + i % 8), n) for i, n in enumerate(nodes)], T0, end + 10 * MIN, 30 * SEC,
            mods=[storm], speed=400000, src="ufm")
    g.link("ib-spine-2", "17", None, onset, "down", src="ufm")
    g.link("ib-spine-2", "17", None, onset + 30 * SEC, "up", src="ufm")
    g.gpus(nodes, T0, end + 10 * MIN, 60 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)])
    for r in (3, 70, 101):
        g.log(j, onset + 40 * SEC + r, f"{nodes[r // 8]}:2201:2290 [{r % 8}] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion "
              f"from peer 10.70.1.{(r // 8 + 8) % 16 + 1}<51515> with status=12 opcode=1 len=0 vendor err 129 (Send) ", rank=r)
    nccl_timeouts(g, j, onset + 600 * SEC, [0, 64], seq=999)
    return Scenario("net_ib_spine_port_storm", net_ib_spine_port_storm.__doc__, g.events,
                    [Expect(j.id, 0, "network_link", "port:ib-spine-2/17", j, failure_ts={end, j.last_progress()},
                            note="debatable: the topology lists only leaf ports; the spine is inferred to be on the path")], [], g)


@scenario
def change_then_unrelated_user_bug():
    """A driver upgrade lands on both nodes an hour before the job starts; the job runs fine for
    40 min, then dies of a plain user TypeError (infrastructure clean). Application, not the change."""
    g = Gen(1401)
    nodes = ["gpu-u-001", "gpu-u-002"]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-800", "port": f"Ethernet{4 * i}", "segment": "leaf-800"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0 - 5 * HOUR, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}],
                  versions={"driver": "550.54.15", "cuda": "12.4", "nccl": "2.21.5"})
    for n in nodes:
        g.change(n, T0 - 60 * MIN, "driver", "550.54.15", "550.90.07", ticket="CHG-21000")
        g.ev("inventory.versions", T0 - 55 * MIN, {"driver": "550.90.07", "cuda": "12.4", "nccl": "2.21.5"}, node=n,
             source=f"inv-agent@{n}")
    start = T0 + 2 * MIN
    fault = start + 41 * MIN
    end = fault + 20 * SEC
    j = g.job("6020304", nodes, start=start, end=end, state="failed", exit_code=1, ckpt_every=15 * MIN, stop_at=fault,
              user="sjones", reason="NonZeroExitCode")
    g.log(j, fault, "Traceback (most recent call last):\n"
          '  File "/home/sjones/rl/ppo.py", line 412, in compute_advantages\n    adv = (rewards - values.mean()) / values.std() + cfg.eps\n'
          "TypeError: unsupported operand type(s) for +: 'Tensor' and 'NoneType'", rank=0)
    g.gpus(nodes, T0 - 70 * MIN, end + 10 * MIN, 60 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)])
    return Scenario("change_then_unrelated_user_bug", change_then_unrelated_user_bug.__doc__, g.events,
                    [Expect(j.id, 0, "application", f"job:{j.id}", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def gpu_oom_ranks_unmapped():
    """k8s job whose scheduler record has ranks -> null (the operator does not know placement):
    the OOM line comes from a runtime.log event that carries the node; 'GPU 5' in the message."""
    g = Gen(8004)
    nodes = ["aks-ndv5-31415926-vmss000004", "aks-ndv5-31415926-vmss000007"]
    links = {n: [{"nic": f"mlx5_ib{k}", "switch": f"ib-leaf-r{k}", "port": str(i + 1), "segment": f"rail-{k}"} for k in range(8)]
             for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/blobfuse", "backend": "blobfuse2", "server": None}])
    start = T0 + 2 * MIN
    fault = start + 22 * MIN
    end = fault + 15 * SEC
    j = g.job("pytorchjob-phi3-sft-aks-7", nodes, start=start, end=end, state="failed", exit_code=1,
              src="training-operator@kube-ctl", ckpt_every=10 * MIN, stop_at=fault, ckpt_dir="/mnt/blobfuse/phi3/ckpt")
    for e in g.events:
        if e["kind"] == "sched.job" and e["job"] == j.id:
            e["data"]["ranks"] = {r: None for r in e["data"]["ranks"]}
    bad = nodes[1]

    def full(node, gpu, ts, d, st):
        if node == bad and gpu == 5 and fault - 60 * SEC <= ts < end:
            d["mem_used_mib"] = 81300
    g.gpus(nodes, T0, end + 10 * MIN, 15 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[full, idle_after(j, end)])
    g.log(j, fault, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 5 has a total capacity of "
          "79.19 GiB of which 412.00 MiB is free. Process 40412 has 78.77 GiB memory in use.", rank=13, node=bad)
    return Scenario("gpu_oom_ranks_unmapped", gpu_oom_ranks_unmapped.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_oom", f"gpu:{bad}/5", j, failure_ts={end, j.last_progress()})], [], g)



# =========================================================================== round 4

@scenario
def gpu_xid79_with_sympathetic_xids():
    """XID 79 on GPU 2, then the driver tears down every other GPU's channels: XID 45 'Preemptive
    cleanup' on GPUs 0-7 and XID 154 'Node Reboot Required'. The culprit is GPU 2, not the
    sympathetic ones."""
    g = Gen(7904)
    nodes = [dgx(i) for i in range(150, 154)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-19", "port": f"Ethernet{4 * i}", "segment": "leaf-19"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}])
    start = T0 + 2 * MIN
    fault = start + 49 * MIN
    end = fault + 10 * MIN + 20 * SEC
    j = g.job("pytorchjob-llava-ov-d1s2", nodes, start=start, end=end, state="failed", exit_code=1,
              src="training-operator@kube-ctl", ckpt_every=20 * MIN, stop_at=fault)
    bad = nodes[1]
    g.gpus(nodes, T0, end + 10 * MIN, 20 * SEC, busy={n: [(start, end)] for n in nodes},
           mods=[stop_after(bad, fault, 2), idle_after(j, end)])
    g.xid(bad, fault, 2, 79, "GPU has fallen off the bus.", pid=6120)
    for k in range(8):
        if k != 2:
            g.xid(bad, fault + 1500 + 40 * k, k, 45, f"Ch {k + 8:08x}", pid=6118 + k)
    g.xid(bad, fault + 2 * SEC, 2, 154, "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)", pid=None)
    nccl_timeouts(g, j, fault + 600 * SEC, [0, 16, 24], seq=5050)
    return Scenario("gpu_xid79_with_sympathetic_xids", gpu_xid79_with_sympathetic_xids.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_hardware", f"gpu:{bad}/2", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def gpu_xid92_sbe_storm():
    """XID 92 (excessive single-bit ECC interrupts) and SBE counters racing on GPU 7, then the rank
    dies with 'unspecified launch failure'. gpu_hardware per the contract's XID list."""
    g = Gen(9292)
    nodes = ["node0801.cluster.local", "node0802.cluster.local"]
    links = {n: [{"nic": "ib0", "switch": "ib-leaf-80", "port": str(i + 1), "segment": "ib-leaf-80"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/gpfs/work", "backend": "gpfs", "server": "ess01"}])
    start = T0 + 2 * MIN
    onset = start + 30 * MIN
    fault = onset + 12 * MIN
    end = fault + 20 * SEC
    j = g.job("8800123", nodes, start=start, end=end, state="failed", exit_code=1, ckpt_every=15 * MIN, stop_at=fault,
              user="qzhao", reason="NonZeroExitCode")
    bad = nodes[0]

    def sbe(node, gpu, ts, d, st):
        if node == bad and gpu == 7 and ts >= onset:
            st["sbe"] += 4000
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[sbe, idle_after(j, end)])
    for k in range(3):
        g.xid(bad, onset + k * 4 * MIN, 7, 92, "High single-bit ECC error rate", pid=None)
    g.log(j, fault, "RuntimeError: CUDA error: unspecified launch failure\nCUDA kernel errors might be asynchronously reported "
          "at some other API call, so the stacktrace below might be incorrect.", rank=7)
    return Scenario("gpu_xid92_sbe_storm", gpu_xid92_sbe_storm.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_hardware", f"gpu:{bad}/7", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def driver_gsp_xid120():
    """XID 120 GSP error on GPU 4 (no ECC/BMC sign, no change); the rank dies."""
    g = Gen(1120)
    nodes = ["gb200-nvl72-r3-t07", "gb200-nvl72-r3-t08"]
    links = {n: [{"nic": "mlx5_0", "switch": "ib-leaf-r3", "port": str(i + 7), "segment": "nvl72-r3"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}],
                  versions={"driver": "570.124.06", "cuda": "12.8", "nccl": "2.25.1", "gpu_firmware": "97.00.9E.00.02"})
    start = T0 + 2 * MIN
    fault = start + 33 * MIN
    end = fault + 40 * SEC
    j = g.job("12345678", nodes, gpn=4, start=start, end=end, state="failed", exit_code=1, ckpt_every=10 * MIN, stop_at=fault,
              user="ytan", reason="NonZeroExitCode")
    bad = nodes[1]
    g.gpus(nodes, T0, end + 10 * MIN, 10 * SEC, ngpu=4, busy={n: [(start, end)] for n in nodes}, mem_total=189471,
           mods=[idle_after(j, end)])
    g.bmc(nodes, T0, end + 10 * MIN, 60 * SEC)
    g.xid(bad, fault, 3, 120, "GSP task timeout @ pc:0x1b4c2a8, task: 1", pid=7001)
    g.log(j, fault + 3 * SEC, "RuntimeError: CUDA error: unspecified launch failure", rank=j.rank(bad, 3))
    return Scenario("driver_gsp_xid120", driver_gsp_xid120.__doc__, g.events,
                    [Expect(j.id, 0, "driver_software", f"gpu:{bad}/3", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def application_while_gpu_runs_hot():
    """A GPU of the job runs hot all along (sw_thermal throttling, 86 C, no slowdown of the job) and
    the job dies of a user IndexError. Application: the throttling did not make a straggler."""
    g = Gen(1603)
    nodes = [dgx(i) for i in range(160, 164)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-20", "port": f"Ethernet{4 * i}", "segment": "leaf-20"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}])
    start = T0 + 2 * MIN
    fault = start + 63 * MIN
    end = fault + 25 * SEC
    j = g.job("pytorchjob-detr-coco-h0t", nodes, start=start, end=end, state="failed", exit_code=1,
              src="training-operator@kube-ctl", ckpt_every=20 * MIN, stop_at=fault)

    def warm(node, gpu, ts, d, st):
        if node == nodes[2] and gpu == 6 and start < ts < end:
            d["temp_c"], d["throttle"] = 86, ["sw_thermal"]
            d["sm_clock_mhz"] = 1350
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[warm, idle_after(j, end)])
    g.log(j, fault, "Traceback (most recent call last):\n"
          '  File "/app/detr/datasets/coco.py", line 131, in __getitem__\n    target = self.targets[idx]\n'
          "IndexError: list index out of range", rank=21)
    return Scenario("application_while_gpu_runs_hot", application_while_gpu_runs_hot.__doc__, g.events,
                    [Expect(j.id, 0, "application", f"job:{j.id}", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def gpu_oom_visible_devices_per_task():
    """Slurm with --gpus-per-task=1: every task sees its GPU as device 0, so the OOM message says
    'GPU 0' while the physical GPU is local rank 5's (NVML shows GPU 5 full)."""
    g = Gen(8005)
    nodes = ["node0901.cluster.local", "node0902.cluster.local"]
    links = {n: [{"nic": "ib0", "switch": "ib-leaf-90", "port": str(i + 1), "segment": "ib-leaf-90"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/gpfs/work", "backend": "gpfs", "server": "ess01"}])
    start = T0 + 2 * MIN
    fault = start + 27 * MIN
    end = fault + 10 * SEC
    j = g.job("9400117", nodes, start=start, end=end, state="failed", exit_code=1, ckpt_every=10 * MIN, stop_at=fault,
              user="mrossi", reason="NonZeroExitCode")
    bad = nodes[1]

    def full(node, gpu, ts, d, st):
        if node == bad and gpu == 5 and fault - 40 * SEC <= ts < end:
            d["mem_used_mib"] = 81400
    g.gpus(nodes, T0, end + 10 * MIN, 10 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[full, idle_after(j, end)])
    g.log(j, fault, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of "
          "79.15 GiB of which 2.06 GiB is free. Including non-PyTorch memory, this process has 77.08 GiB memory in use.",
          rank=j.rank(bad, 5))
    return Scenario("gpu_oom_visible_devices_per_task", gpu_oom_visible_devices_per_task.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_oom", f"gpu:{bad}/5", j, failure_ts={end, j.last_progress()},
                            note="debatable: the message's 'GPU 0' is the task's view; rank 13 = local 5 and NVML agree on 5")],
                    [], g)


@scenario
def storage_quota_edquot():
    """Lustre user quota: the checkpoint fails with EDQUOT ('Disk quota exceeded') while the file
    system itself is 58 % used. Capacity problem on the mount: storage_full."""
    g = Gen(7008)
    nodes = ["node1001.cluster.local", "node1002.cluster.local"]
    links = {n: [{"nic": "ib0", "switch": "ib-leaf-100", "port": str(i + 1), "segment": "ib-leaf-100"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/project", "backend": "lustre", "server": "mds05"}])
    start = T0 + 2 * MIN
    ck_every = 15 * MIN
    fail_ts = start + 150 * SEC + 3 * ck_every
    end = fail_ts + 90 * SEC
    probe = Gen(1)
    pj = probe.job("x", nodes, start=start, end=end, state="failed", ckpt_every=ck_every, stop_at=fail_ts + 1)
    fstep = [c for c in pj.ckpts if c[1] == "started"][2][2]
    err = f"OSError: [Errno 122] Disk quota exceeded: '/lustre/project/p1234/ckpt/step_{fstep}/optim_states.pt'"
    j = g.job("3030303", nodes, start=start, end=end, state="failed", exit_code=1, ckpt_every=ck_every,
              ckpt_dir="/lustre/project/p1234/ckpt", ckpt_fmt="step_{step}", ckpt_fail={fstep: err}, stop_at=fail_ts + 1,
              user="p1234u1", reason="NonZeroExitCode")
    g.log(j, fail_ts + 60 * SEC, err, rank=0)
    g.storage(nodes, "/lustre/project", "lustre", T0, end + 10 * MIN, 60 * SEC, used=58.0)
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)])
    return Scenario("storage_quota_edquot", storage_quota_edquot.__doc__, g.events,
                    [Expect(j.id, 0, "storage_full", "path:/lustre/project", j, failure_ts={end, j.last_progress()},
                            note="debatable: a quota is per user, but it is the capacity class the contract names (ENOSPC-like)")],
                    [], g)


@scenario
def stall_still_running_at_file_end():
    """Progress stops with no error; the job is still RUNNING when the file ends 75 min later (no
    cancel yet). The contract makes that an incident (stall) already."""
    g = Gen(1901)
    nodes = [f"gpu-v-{i:03d}" for i in range(1, 5)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-900", "port": f"Ethernet{4 * i}", "segment": "leaf-900"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}])
    start = T0 + 2 * MIN
    stall = start + 47 * MIN
    file_end = stall + 75 * MIN
    j = g.job("pytorchjob-hang-at-end-x1", nodes, start=start, end=None, state="running", emit_end=False,
              src="training-operator@kube-ctl", ckpt_every=20 * MIN, stop_at=stall)
    g.gpus(nodes, T0, file_end, 30 * SEC, busy={n: [(start, file_end)] for n in nodes},
           mods=[lambda n, gi, ts, d, st: d.update(util_pct=0, power_w=88.0) if ts > stall else None])
    return Scenario("stall_still_running_at_file_end", stall_still_running_at_file_end.__doc__, g.events,
                    [Expect(j.id, 0, "unknown", f"job:{j.id}", j, failure_ts={j.last_progress()})], [], g)


@scenario
def application_single_gpu_job():
    """A 1-GPU Slurm job (gpus=1) dies of a user ZeroDivisionError; lost GPU-h uses 1 GPU."""
    g = Gen(1604)
    nodes = ["node1101.cluster.local"]
    links = {n: [{"nic": "ib0", "switch": "ib-leaf-110", "port": "1", "segment": "ib-leaf-110"}] for n in nodes}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/gpfs/work", "backend": "gpfs", "server": "ess01"}])
    start = T0 + 2 * MIN
    fault = start + 83 * MIN
    end = fault + 5 * SEC
    j = g.job("555000_1", nodes, gpn=1, start=start, end=end, state="failed", exit_code=1, ckpt_every=30 * MIN, stop_at=fault,
              user="student7", reason="NonZeroExitCode")
    g.log(j, fault, 'Traceback (most recent call last):\n  File "/home/student7/hw3/train.py", line 77, in <module>\n'
          "    acc = correct / total\nZeroDivisionError: division by zero", rank=0)
    g.gpus(nodes, T0, end + 10 * MIN, 60 * SEC, busy={nodes[0]: [(start, end)]}, mods=[idle_after(j, end)])
    return Scenario("application_single_gpu_job", application_single_gpu_job.__doc__, g.events,
                    [Expect(j.id, 0, "application", f"job:{j.id}", j, failure_ts={end, j.last_progress()})], [], g)



# =========================================================================== round 5: other collectors' conventions

@scenario
def vendor_signatures_oom_and_app():
    """This vendor's collector classifies log lines itself (the contract's optional `signature`) in
    its OWN vocabulary ('GPU_MEM_EXHAUSTED', 'PY_EXCEPTION', 'COLLECTIVE_TIMEOUT'). Job A: GPU OOM
    on rank 6. Job B: a user AttributeError, with an ECC counter reset (driver reload) on one of its
    GPUs an hour earlier. The engine must not be thrown by unknown signature names."""
    g = Gen(3100)
    nodes = ["gpu-w-001", "gpu-w-002", "gpu-w-003"]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-1000", "port": f"Ethernet{4 * i}", "segment": "leaf-1000"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}])
    start = T0 + 2 * MIN
    fa = start + 31 * MIN
    ea = fa + 12 * SEC
    ja = g.job("pytorchjob-sig-a-1q", nodes[:1], start=start, end=ea, state="failed", exit_code=1,
               src="training-operator@kube-ctl", ckpt_every=10 * MIN, stop_at=fa)
    fb = start + 95 * MIN
    eb = fb + 20 * SEC
    jb = g.job("pytorchjob-sig-b-2w", nodes[1:3], start=start, end=eb, state="failed", exit_code=1,
               src="training-operator@kube-ctl", ckpt_every=20 * MIN, stop_at=fb)

    def mods(node, gpu, ts, d, st):
        if node == nodes[0] and gpu == 6 and fa - 30 * SEC <= ts < ea:
            d["mem_used_mib"] = 81500
        if node == nodes[2] and gpu == 1:
            if ts < start + 30 * MIN:
                st["sbe"] = max(st["sbe"], 5400)
            elif not st.get("_r"):
                st["sbe"], st["_r"] = 0, True          # volatile ECC counters reset by a driver reload
    g.gpus(nodes, T0, eb + 10 * MIN, 20 * SEC, busy={nodes[0]: [(start, ea)], nodes[1]: [(start, eb)], nodes[2]: [(start, eb)]},
           mods=[mods])
    e = g.ev("runtime.log", fa, {"rank": 6, "stream": "stderr", "signature": "GPU_MEM_EXHAUSTED",
                                 "message": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.25 GiB. GPU 6 has a "
                                            "total capacity of 79.15 GiB of which 310.00 MiB is free."},
             node=nodes[0], job=ja.id, source="vector@gpu-w-001")
    g.ev("runtime.log", fb, {"rank": 3, "stream": "stderr", "signature": "PY_EXCEPTION",
                             "message": "Traceback (most recent call last):\n  File \"/app/train.py\", line 99, in <module>\n"
                                        "    model.generate_eval()\nAttributeError: 'LlamaForCausalLM' object has no attribute "
                                        "'generate_eval'"}, node=nodes[1], job=jb.id, source="vector@gpu-w-002")
    g.ev("runtime.log", fb + 5 * SEC, {"rank": 12, "stream": "stderr", "signature": "COLLECTIVE_TIMEOUT",
                                       "message": "RuntimeError: NCCL communicator was aborted on rank 12."},
         node=nodes[2], job=jb.id, source="vector@gpu-w-003")
    return Scenario("vendor_signatures_oom_and_app", vendor_signatures_oom_and_app.__doc__, g.events,
                    [Expect(ja.id, 0, "gpu_oom", f"gpu:{nodes[0]}/6", ja, failure_ts={ea, ja.last_progress()}),
                     Expect(jb.id, 0, "application", f"job:{jb.id}", jb, failure_ts={eb, jb.last_progress()})], [], g)


@scenario
def polling_scheduler_collector():
    """The scheduler collector polls every 60 s: each sched.job event's ts is the poll time (up to a
    minute after the real start_ts / end_ts in data), so the job's first progress and its failure
    logs arrive BEFORE the scheduler says it is running / failed. XID 48 story."""
    g = Gen(3200)
    nodes = ["node1201.cluster.local", "node1202.cluster.local"]
    links = {n: [{"nic": "ib0", "switch": "ib-leaf-120", "port": str(i + 1), "segment": "ib-leaf-120"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/gpfs/work", "backend": "gpfs", "server": "ess01"}])
    start = T0 + 2 * MIN
    fault = start + 44 * MIN
    end = fault + 20 * SEC
    j = g.job("7300001", nodes, start=start, end=end, state="failed", exit_code=1, ckpt_every=15 * MIN, stop_at=fault,
              init=20 * SEC, user="opoll", reason="NonZeroExitCode")
    for e in g.events:
        if e["kind"] == "sched.job":
            e["ts"] += {"pending": 40, "running": 55, "failed": 58}[e["data"]["state"]] * SEC
    bad = nodes[1]

    def dbe(node, gpu, ts, d, st):
        if node == bad and gpu == 4 and ts >= fault:
            st["dbe"] = 1
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[dbe, idle_after(j, end)])
    g.xid(bad, fault, 4, 48, "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 3.",
          pid=3201)
    g.log(j, fault + 700, "RuntimeError: CUDA error: uncorrectable ECC error encountered", rank=j.rank(bad, 4))
    return Scenario("polling_scheduler_collector", polling_scheduler_collector.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_hardware", f"gpu:{bad}/4", j, failure_ts={end, end + 58 * SEC, j.last_progress()})], [], g)


@scenario
def scheduler_final_state_only():
    """The collector reads accounting (sacct) after the fact: only ONE sched.job event per attempt,
    the final FAILED state with start_ts/end_ts. Host OOM story (kernel OOM line + slurmstepd)."""
    g = Gen(3300)
    nodes = ["node1301.cluster.local", "node1302.cluster.local"]
    links = {n: [{"nic": "ib0", "switch": "ib-leaf-130", "port": str(i + 1), "segment": "ib-leaf-130"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/gpfs/work", "backend": "gpfs", "server": "ess01"}])
    start = T0 + 2 * MIN
    fault = start + 52 * MIN
    end = fault + 30 * SEC
    j = g.job("7400002", nodes, start=start, end=end, state="out_of_memory", signal=9, ckpt_every=20 * MIN, stop_at=fault,
              user="sacct", reason="OutOfMemory")
    g.events = [e for e in g.events if not (e["kind"] == "sched.job" and e["data"]["state"] != "out_of_memory")]
    for e in g.events:
        if e["kind"] == "sched.job":
            e["ts"] = end + 4 * MIN                  # read from accounting minutes later
    bad = nodes[0]
    g.log(j, fault, "Out of memory: Killed process 51002 (python) total-vm:301234112kB, anon-rss:240123004kB, file-rss:0kB, "
          "shmem-rss:0kB, UID:6001 pgtables:512004kB oom_score_adj:0", stream="kernel", node=bad)
    g.log(j, fault + SEC, "slurmstepd: error: Detected 1 oom_kill event in StepId=7400002.0. Some of the step tasks have been OOM Killed.",
          node=bad)
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)])
    return Scenario("scheduler_final_state_only", scheduler_final_state_only.__doc__, g.events,
                    [Expect(j.id, 0, "host_oom", f"node:{bad}", j, failure_ts={end, end + 4 * MIN, j.last_progress()})], [], g)


@scenario
def change_image_seen_only_in_jobs():
    """No inventory.change: the pipeline's job records show image :v41 for two earlier runs that
    completed, then the same team's next three jobs use :v42 and each dies at import within minutes,
    on different nodes. The version change is visible only in sched.job image."""
    g = Gen(1402)
    nodes = [f"gpu-z-{i:03d}" for i in range(1, 11)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-1100", "port": f"Ethernet{4 * i}", "segment": "leaf-1100"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0 - HOUR, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}])
    old, new = "ghcr.io/acme/trainer:v41", "ghcr.io/acme/trainer:v42"
    exp, healthy, busy = [], [], {}
    specs = [("pytorchjob-nightly-0301", nodes[0:2], old, 0, "ok"), ("pytorchjob-nightly-0302", nodes[2:4], old, 10 * MIN, "ok"),
             ("pytorchjob-nightly-0303", nodes[4:6], new, 95 * MIN, "bad"), ("pytorchjob-nightly-0304", nodes[6:8], new, 110 * MIN, "bad"),
             ("pytorchjob-nightly-0305", nodes[8:10], new, 125 * MIN, "bad")]
    for jid, jn, img, off, kind in specs:
        start = T0 + off
        if kind == "ok":
            end = start + 70 * MIN
            g.job(jid, jn, start=start, end=end, state="completed", exit_code=0, image=img, src="training-operator@kube-ctl",
                  ckpt_every=30 * MIN, user="nightly-bot")
            healthy.append((jid, 0))
        else:
            end = start + 2 * MIN
            j = g.job(jid, jn, start=start, end=end, state="failed", exit_code=1, image=img, init=50 * SEC,
                      src="training-operator@kube-ctl", user="nightly-bot", reason="BackoffLimitExceeded")
            g.log(j, end - 30 * SEC, "Traceback (most recent call last):\n  File \"/workspace/train.py\", line 3, in <module>\n"
                  "    import flash_attn\n  File \"/usr/local/lib/python3.11/site-packages/flash_attn/__init__.py\", line 3, in <module>\n"
                  "    from flash_attn.flash_attn_interface import (\nImportError: /usr/local/lib/python3.11/site-packages/"
                  "flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi", rank=0)
            exp.append(Expect(jid, 0, "change_regression", f"version:image={new}", j, ckpt_step=None,
                              failure_ts={end, j.last_progress()} - {None},
                              note="debatable: the change is visible only in the jobs' image field (the contract's own example component)"))
        for n in jn:
            busy[n] = [(start, end)]
    g.gpus(nodes, T0, T0 + 150 * MIN, 60 * SEC, busy=busy)
    return Scenario("change_image_seen_only_in_jobs", change_image_seen_only_in_jobs.__doc__, g.events, exp, healthy, g)



# =========================================================================== round 6

@scenario
def gpu_nvlink_both_ends():
    """XID 74 reported by BOTH GPUs at the ends of a failing NVLink (GPU 1 and GPU 5, 80 ms apart),
    nvlink_errors climbing on both; either end is an acceptable component."""
    g = Gen(7475)
    nodes = [dgx(i) for i in range(170, 172)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-21", "port": f"Ethernet{4 * i}", "segment": "leaf-21"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}])
    start = T0 + 2 * MIN
    fault = start + 36 * MIN
    end = fault + 20 * SEC
    j = g.job("8123001", nodes[:1], start=start, end=end, state="failed", exit_code=1, ckpt_every=10 * MIN, stop_at=fault,
              user="nvl", reason="NonZeroExitCode")

    def nvl(node, gpu, ts, d, st):
        if node == nodes[0] and gpu in (1, 5) and ts >= fault - 60 * SEC:
            st["nvl"] += 700
    g.gpus(nodes, T0, end + 10 * MIN, 15 * SEC, busy={nodes[0]: [(start, end)]}, mods=[nvl, idle_after(j, end)])
    g.xid(nodes[0], fault, 1, 74, "NVLink: fatal error detected on link 9(0x0, 0x0, 0x0, 0x10000, 0x0, 0x0, 0x0)", pid=1101)
    g.xid(nodes[0], fault + 80, 5, 74, "NVLink: fatal error detected on link 2(0x0, 0x0, 0x0, 0x10000, 0x0, 0x0, 0x0)", pid=1105)
    g.log(j, fault + 2 * SEC, "RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution", rank=5)
    return Scenario("gpu_nvlink_both_ends", gpu_nvlink_both_ends.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_nvlink", {f"gpu:{nodes[0]}/1", f"gpu:{nodes[0]}/5"}, j,
                            failure_ts={end, j.last_progress()})], [], g)


@scenario
def gpu_xid_delivered_late():
    """The XID 79 (ts = the fault) reaches the bus 3 min late (log shipper backlog), after the job's
    FAILED record. The latest incident revision must name the GPU."""
    g = Gen(7905)
    nodes = ["gpu-late-01", "gpu-late-02"]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-1200", "port": f"Ethernet{4 * i}", "segment": "leaf-1200"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}])
    start = T0 + 2 * MIN
    fault = start + 41 * MIN
    end = fault + 25 * SEC
    j = g.job("pytorchjob-late-xid-1a", nodes, start=start, end=end, state="failed", exit_code=1,
              src="training-operator@kube-ctl", ckpt_every=15 * MIN, stop_at=fault)
    bad = nodes[0]
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes},
           mods=[stop_after(bad, fault, 7), idle_after(j, end)])
    g.xid(bad, fault, 7, 79, "GPU has fallen off the bus.", pid=4100)
    g.late(g.events[-1], 200 * SEC)
    g.log(j, fault + 15 * SEC, "RuntimeError: CUDA error: unspecified launch failure", rank=7)
    return Scenario("gpu_xid_delivered_late", gpu_xid_delivered_late.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_hardware", f"gpu:{bad}/7", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def junk_lines_do_not_change_answers():
    """The file also carries junk a real bus sees: a non-JSON line, an unknown kind, an event 3 days
    in the future, a missing required field, an oversized message. Dead-lettered; the storage-full
    story of the job must come out the same."""
    g = Gen(7009)
    nodes = ["node1401.cluster.local", "node1402.cluster.local"]
    links = {n: [{"nic": "ib0", "switch": "ib-leaf-140", "port": str(i + 1), "segment": "ib-leaf-140"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/gpfs/scratch", "backend": "gpfs", "server": "ess03"}])
    start = T0 + 2 * MIN
    ck_every = 15 * MIN
    fail_ts = start + 150 * SEC + 2 * ck_every
    end = fail_ts + 80 * SEC
    probe = Gen(1)
    pj = probe.job("x", nodes, start=start, end=end, state="failed", ckpt_every=ck_every, stop_at=fail_ts + 1)
    fstep = [c for c in pj.ckpts if c[1] == "started"][1][2]
    err = "OSError: [Errno 28] No space left on device"
    j = g.job("7500123", nodes, start=start, end=end, state="failed", exit_code=1, ckpt_every=ck_every,
              ckpt_dir="/gpfs/scratch/u/ckpt", ckpt_fail={fstep: err}, stop_at=fail_ts + 1, user="junk")
    g.storage(nodes, "/gpfs/scratch", "gpfs", T0, end + 10 * MIN, 60 * SEC,
              mods=[lambda n, ts, d: d.update(used_pct=100.0) if ts > fail_ts - 5 * MIN else None])
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)])
    g.log(j, fail_ts + 50 * SEC, err, rank=0)
    sc = Scenario("junk_lines_do_not_change_answers", junk_lines_do_not_change_answers.__doc__, g.events,
                  [Expect(j.id, 0, "storage_full", "path:/gpfs/scratch", j, failure_ts={end, j.last_progress()})], [], g)
    orig_write = sc.write

    def write(path, seed=None):
        p = Path(orig_write(path, seed))
        lines = p.read_text().splitlines()
        junk = ['{"v":1,"id":"junk-1","ts":' + str(start + MIN),                      # truncated JSON
                json.dumps({"v": 1, "id": "junk-2", "ts": start + 2 * MIN, "kind": "gpu.power_event", "source": "x",
                            "node": nodes[0], "job": None, "tenant": None, "data": {"w": 1}}),
                json.dumps({"v": 1, "id": "junk-3", "ts": start + 3 * 24 * HOUR, "kind": "gpu.xid", "source": "x",
                            "node": nodes[0], "job": None, "tenant": None,
                            "data": {"gpu": 0, "pci": None, "xid": 79, "pid": None, "message": "future"}}),
                json.dumps({"v": 1, "id": "junk-4", "kind": "hw.sel", "source": "x", "node": nodes[1], "job": None,
                            "tenant": None, "data": {}}),
                json.dumps({"v": 1, "id": "junk-5", "ts": start + 4 * MIN, "kind": "runtime.log", "source": "x",
                            "node": nodes[0], "job": j.id, "tenant": None,
                            "data": {"rank": 0, "stream": "stdout", "message": "x" * 300_000}})]
        for k, jl in enumerate(junk):
            lines.insert(len(lines) * (k + 1) // 7, jl)
        p.write_text("\n".join(lines) + "\n")
        return p
    sc.write = write
    return sc


@scenario
def net_flap_64n_host_port():
    """A 64-node job (512 GPUs, GPU samples every 20 s): the leaf port sw-leaf-7/Ethernet36 facing
    node0058 flaps three times with CRC growth; NCCL errors on node0057's ranks."""
    g = Gen(5004)
    nodes = [f"node{i:04d}" for i in range(1, 67)]
    jn = nodes[:64]
    lf = lambda i: f"sw-leaf-{1 + i // 9}"
    pt = lambda i: f"Ethernet{4 * (i % 9)}"
    links = {n: [{"nic": "mlx5_0", "switch": lf(i), "port": pt(i), "segment": lf(i)[3:]}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}])
    bi = nodes.index("node0058")
    fdev, fport = lf(bi), pt(bi)
    start = T0 + 3 * MIN
    onset = start + 61 * MIN
    end = onset + 11 * MIN
    j = g.job("991001", jn, start=start, end=end, state="failed", exit_code=1, ckpt_every=20 * MIN, stop_at=onset + 20 * SEC,
              user="bigjob", progress_every=90 * SEC, reason="NonZeroExitCode")

    def pm(dev, port, ts, d, st):
        if (dev, port) == (fdev, fport) and ts >= onset - 4 * MIN:
            st["in_errors"] += 2500
            if any(onset + k * 70 * SEC <= ts < onset + k * 70 * SEC + 20 * SEC for k in range(3)):
                d["oper_status"] = "down"
    g.ports([(lf(i), pt(i), n) for i, n in enumerate(nodes)], T0, end + 10 * MIN, 30 * SEC, mods=[pm])
    for k in range(3):
        g.link(fdev, fport, "node0058", onset + k * 70 * SEC, "down")
        g.link(fdev, fport, "node0058", onset + k * 70 * SEC + 15 * SEC, "up")
    g.gpus(nodes, T0, end + 10 * MIN, 20 * SEC, busy={n: [(start, end)] for n in jn}, mods=[idle_after(j, end)])
    peer = jn.index("node0057")
    for r in range(peer * 8, peer * 8 + 8, 3):
        g.log(j, onset + 25 * SEC + r, f"node0057:7001:7344 [{r % 8}] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion "
              "from peer 10.9.0.58<40112> with status=12 opcode=0 len=0 vendor err 129 (Recv)", rank=r)
    nccl_timeouts(g, j, onset + 600 * SEC, [0, 100, 456], seq=123456)
    return Scenario("net_flap_64n_host_port", net_flap_64n_host_port.__doc__, g.events,
                    [Expect(j.id, 0, "network_link", f"port:{fdev}/{fport}", j, failure_ts={end, j.last_progress()})], [], g)



# =========================================================================== round 7

@scenario
def node_fail_then_requeued_state():
    """Slurm --requeue: attempt 0 goes RUNNING -> NODE_FAIL -> REQUEUED (two more state records of
    the same attempt), then attempt 1 PENDING -> RUNNING -> COMPLETED elsewhere. PSU failure SEL on
    the dead node. The incident stays node_hardware for attempt 0 with the retry."""
    g = Gen(2005)
    nodes = ["node1501.cluster.local", "node1502.cluster.local", "node1503.cluster.local"]
    links = {n: [{"nic": "ib0", "switch": "ib-leaf-150", "port": str(i + 1), "segment": "ib-leaf-150"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/gpfs/work", "backend": "gpfs", "server": "ess01"}])
    start = T0 + 2 * MIN
    fault = start + 45 * MIN
    end = fault + 3 * MIN
    j = g.job("8800777", nodes[:2], start=start, end=end, state="node_fail", reason="NodeFail", ckpt_every=20 * MIN, stop_at=fault,
              user="requeue")
    bad = nodes[1]
    g.ev("sched.job", end + 2 * SEC, {"state": "requeued", "attempt": 0, "nodes": nodes[:2], "gpus": 16, "ranks": j.ranks(),
                                      "exit_code": None, "signal": None, "image": None, "name": "train", "user": "requeue",
                                      "start_ts": start, "end_ts": end, "reason": "NodeFail"}, job=j.id, source="slurmctld@head01")
    g.sel(bad, fault - SEC, "critical", "Power Supply", "Power Supply 1: Power Supply input lost (AC lost)", "PSU0034")
    j2 = g.job("8800777", [nodes[0], nodes[2]], attempt=1, start=end + 3 * MIN, end=end + 60 * MIN, state="completed", exit_code=0,
               ckpt_every=20 * MIN, first_step=j.last_ok()[2], submit=end + 5 * SEC, user="requeue")
    g.gpus(nodes, T0, end + 70 * MIN, 30 * SEC,
           busy={nodes[0]: [(start, end), (end + 3 * MIN, end + 60 * MIN)], nodes[1]: [(start, end)], nodes[2]: [(end + 3 * MIN, end + 60 * MIN)]},
           mods=[stop_after(bad, fault)])
    return Scenario("node_fail_then_requeued_state", node_fail_then_requeued_state.__doc__, g.events,
                    [Expect(j.id, 0, "node_hardware", f"node:{bad}", j, failure_ts={end, j.last_progress()}, retry_attempt=1,
                            retry_same_nodes=False)], [(j2.id, 1)], g)


@scenario
def half_node_jobs_gpus_field():
    """Two jobs share two 8-GPU nodes, 4 GPUs each per node (gpus=8 per job, ranks 0-7). One dies
    of a user RecursionError: lost GPU-h must use the job's 8 GPUs, not 2 nodes x 8."""
    g = Gen(1605)
    nodes = ["gpu-half-01", "gpu-half-02"]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-1300", "port": f"Ethernet{4 * i}", "segment": "leaf-1300"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}])
    start = T0 + 2 * MIN
    fault = start + 71 * MIN
    end = fault + 10 * SEC
    j = g.job("pytorchjob-half-a-9q", nodes, gpn=4, start=start, end=end, state="failed", exit_code=1,
              src="training-operator@kube-ctl", ckpt_every=25 * MIN, stop_at=fault)
    j2 = g.job("pytorchjob-half-b-8r", nodes, gpn=4, start=start + 5 * MIN, end=start + 100 * MIN, state="completed", exit_code=0,
               src="training-operator@kube-ctl", ckpt_every=25 * MIN)
    g.log(j, fault, "Traceback (most recent call last):\n  File \"/app/tree.py\", line 12, in walk\n    return walk(node.child)\n"
          "  [Previous line repeated 996 more times]\nRecursionError: maximum recursion depth exceeded", rank=5)
    g.gpus(nodes, T0, start + 110 * MIN, 30 * SEC, busy={n: [(start, start + 100 * MIN)] for n in nodes})
    return Scenario("half_node_jobs_gpus_field", half_node_jobs_gpus_field.__doc__, g.events,
                    [Expect(j.id, 0, "application", f"job:{j.id}", j, failure_ts={end, j.last_progress()})], [(j2.id, 0)], g)


@scenario
def storage_nfs_ckpt_hang_watchdog():
    """No storage collector. Rank 0 writes the checkpoint to an NFS mount whose server stops
    responding ('nfs: server nas-ckpt-01 not responding, still trying', hung task); the other ranks
    wait in the next collective and hit the 10-min NCCL watchdog; the checkpoint never succeeds."""
    g = Gen(7010)
    nodes = [f"gpu-n-{i:03d}" for i in range(1, 5)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-1400", "port": f"Ethernet{4 * i}", "segment": "leaf-1400"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/nfs-ckpt", "backend": "nfs", "server": "nas-ckpt-01"},
                                                       {"path": "/home", "backend": "nfs", "server": "nas-home"}])
    start = T0 + 2 * MIN
    ck_every = 20 * MIN
    ck_at = start + 150 * SEC + 3 * ck_every
    end = ck_at + 10 * MIN + 30 * SEC
    j = g.job("pytorchjob-nfs-ckpt-hang-2", nodes, start=start, end=end, state="failed", exit_code=1,
              src="training-operator@kube-ctl", ckpt_every=ck_every, ckpt_dir="/mnt/nfs-ckpt/run9", stop_at=ck_at + 1,
              ckpt_dur=50 * SEC)
    assert [c for c in j.ckpts if c[0] == ck_at and c[1] == "started"]
    g.log(j, ck_at + 30 * SEC, "nfs: server nas-ckpt-01 not responding, still trying", stream="kernel", node=nodes[0])
    g.log(j, ck_at + 125 * SEC, "INFO: task python3:7712 blocked for more than 120 seconds.\n      Not tainted 5.15.0-119-generic "
          "#129-Ubuntu\n\"echo 0 > /proc/sys/kernel/hung_task_timeout_secs\" disables this message.", stream="kernel", node=nodes[0])
    nccl_timeouts(g, j, ck_at + 600 * SEC, [1, 8, 17, 30], seq=77001, op="ALLREDUCE")
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)])
    return Scenario("storage_nfs_ckpt_hang_watchdog", storage_nfs_ckpt_hang_watchdog.__doc__, g.events,
                    [Expect(j.id, 0, {"storage_slow", "storage_unavailable"}, "path:/mnt/nfs-ckpt", j,
                            failure_ts={end, j.last_progress()},
                            note="slow vs unavailable both defensible for a hard-mounted NFS server that stops answering")], [], g)



# =========================================================================== round 8: neighbouring categories

@scenario
def net_flap_causes_congestion():
    """A leaf port facing gpu-m-006 flaps (link down/up, CRC errors); ECMP rehash then congests the
    segment (CNP/ECN surge, discards) for a few minutes. Root cause is the link, not congestion."""
    g = Gen(5005)
    nodes = [f"gpu-m-{i:03d}" for i in range(1, 9)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-1500", "port": f"Ethernet{4 * i}", "segment": "leaf-1500"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}])
    start = T0 + 2 * MIN
    onset = start + 50 * MIN
    end = onset + 11 * MIN
    j = g.job("pytorchjob-flap-cong-7", nodes, start=start, end=end, state="failed", exit_code=1, src="training-operator@kube-ctl",
              ckpt_every=20 * MIN, stop_at=onset + 30 * SEC)
    bad = nodes[5]
    bp = f"Ethernet{4 * 5}"

    def pm(dev, port, ts, d, st):
        if port == bp and ts >= onset - 2 * MIN:
            st["in_errors"] += 3000
            if onset <= ts < onset + 30 * SEC or onset + 150 * SEC <= ts < onset + 170 * SEC:
                d["oper_status"] = "down"
        if onset <= ts < onset + 8 * MIN:
            st["out_discards"] += 30000
    g.ports([("sw-leaf-1500", f"Ethernet{4 * i}", n) for i, n in enumerate(nodes)], T0, end + 10 * MIN, 30 * SEC, mods=[pm])
    for t in (onset, onset + 150 * SEC):
        g.link("sw-leaf-1500", bp, bad, t, "down")
        g.link("sw-leaf-1500", bp, bad, t + 18 * SEC, "up")

    def cong(node, hca, ts, st):
        if onset <= ts < onset + 8 * MIN:
            st["np_cnp_sent"] += 500000
            st["rp_cnp_handled"] += 480000
            st["np_ecn_marked_roce_packets"] += 900000
            st["out_of_sequence"] += 9000
            st["local_ack_timeout_err"] += 40
    g.rdma(nodes, T0, end + 10 * MIN, 15 * SEC, hcas=("mlx5_0",), mods=[cong])
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)])
    g.log(j, onset + 35 * SEC, "gpu-m-002:4410:4891 [3] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
          "10.15.0.6<39012> with status=12 opcode=0 len=0 vendor err 129 (Recv)", rank=11)
    nccl_timeouts(g, j, onset + 600 * SEC, [0, 11, 40], seq=31337)
    return Scenario("net_flap_causes_congestion", net_flap_causes_congestion.__doc__, g.events,
                    [Expect(j.id, 0, "network_link", f"port:sw-leaf-1500/{bp}", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def gsp_timeout_with_dbe_is_hardware():
    """XID 119 GSP timeout on GPU 3, but the same GPU's ecc_dbe went 0 -> 2 minutes earlier and an
    XID 48 was logged: there IS a hardware sign, so gpu_hardware, not driver_software."""
    g = Gen(1121)
    nodes = ["hgx-h100-p01", "hgx-h100-p02"]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-1600", "port": f"Ethernet{4 * i}", "segment": "leaf-1600"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}])
    start = T0 + 2 * MIN
    fault = start + 39 * MIN
    end = fault + 10 * MIN + 30 * SEC
    j = g.job("pytorchjob-gsp-dbe-4", nodes, start=start, end=end, state="failed", exit_code=1, src="training-operator@kube-ctl",
              ckpt_every=15 * MIN, stop_at=fault)
    bad = nodes[0]

    def dbe(node, gpu, ts, d, st):
        if node == bad and gpu == 3 and ts >= fault - 3 * MIN:
            st["dbe"] = 2
    g.gpus(nodes, T0, end + 10 * MIN, 20 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[dbe, idle_after(j, end)])
    g.xid(bad, fault - 3 * MIN, 3, 48, "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer.", pid=None)
    g.xid(bad, fault, 3, 119, "Timeout after 6s of waiting for RPC response from GPU3 GSP! Expected function 76 (GSP_RM_CONTROL) "
          "(0x20802a02 0x8).", pid=9191)
    nccl_timeouts(g, j, fault + 600 * SEC, [0, 9], seq=1919)
    return Scenario("gsp_timeout_with_dbe_is_hardware", gsp_timeout_with_dbe_is_hardware.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_hardware", f"gpu:{bad}/3", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def shm_bus_error_not_hardware():
    """Container /dev/shm too small: 'DataLoader worker (pid N) is killed by signal: Bus error ... out
    of shared memory'. A Bus error with every hardware layer clean (BMC quiet) is a configuration /
    user-side problem, not node_hardware."""
    g = Gen(1606)
    nodes = ["gke-a3-pool-shm-0001", "gke-a3-pool-shm-0002"]
    links = {n: [{"nic": "eth1", "switch": "gvnic-rail-0", "port": str(i), "segment": "rail-0"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/filestore", "backend": "nfs", "server": "filestore-1"}])
    start = T0 + 2 * MIN
    fault = start + 4 * MIN
    end = fault + 15 * SEC
    j = g.job("pytorchjob-shm-small-5k", nodes, start=start, end=end, state="failed", exit_code=1, src="training-operator@kube-ctl",
              ckpt_every=30 * MIN, stop_at=fault, init=90 * SEC)
    g.log(j, fault, "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).\n"
          "Traceback (most recent call last):\n"
          '  File "/usr/local/lib/python3.10/dist-packages/torch/utils/data/dataloader.py", line 1133, in _try_get_data\n'
          "    data = self._data_queue.get(timeout=timeout)\n"
          "RuntimeError: DataLoader worker (pid 2231) is killed by signal: Bus error. It is possible that dataloader's workers "
          "are out of shared memory. Please try to raise your shared memory limit.", rank=4)
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)])
    g.bmc(nodes, T0, end + 10 * MIN, 60 * SEC)
    return Scenario("shm_bus_error_not_hardware", shm_bus_error_not_hardware.__doc__, g.events,
                    [Expect(j.id, 0, {"application", "storage_full", "host_oom"}, None, j, failure_ts={end, j.last_progress()},
                            note="debatable between application (container config) and a capacity class; never node_hardware")],
                    [], g)



# =========================================================================== round 9: negatives (over-attribution)

def _app_job(g, jid, nodes, start, fault, msg, rank=0, **kw):
    end = fault + 20 * SEC
    j = g.job(jid, nodes, start=start, end=end, state="failed", exit_code=1, stop_at=fault, **kw)
    g.log(j, fault, msg, rank=rank)
    return j, end


@scenario
def image_bump_one_user_bug():
    """Image :v42 replaces :v41 (announced). On :v42 two jobs complete normally and one dies of a
    plain KeyError in its own config code after 50 min. Application, not a change regression."""
    g = Gen(1403)
    nodes = [f"gpu-q-{i:03d}" for i in range(1, 7)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-1700", "port": f"Ethernet{4 * i}", "segment": "leaf-1700"}] for i, n in enumerate(nodes)}
    old, new = "ghcr.io/acme/trainer:v41", "ghcr.io/acme/trainer:v42"
    std_inventory(g, nodes, T0 - HOUR, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}],
                  versions={"driver": "550.90.07", "image": old})
    for n in nodes:
        g.change(n, T0 - 20 * MIN, "image", old, new, actor="argocd", ticket="REL-2001")
    ok1 = g.job("pytorchjob-v42-ok-1", nodes[0:2], start=T0, end=T0 + 90 * MIN, state="completed", exit_code=0, image=new,
                src="training-operator@kube-ctl", ckpt_every=30 * MIN)
    ok2 = g.job("pytorchjob-v42-ok-2", nodes[2:4], start=T0 + 10 * MIN, end=T0 + 100 * MIN, state="completed", exit_code=0,
                image=new, src="training-operator@kube-ctl", ckpt_every=30 * MIN)
    j, end = _app_job(g, "pytorchjob-v42-bug-3", nodes[4:6], T0 + 5 * MIN, T0 + 55 * MIN,
                      "Traceback (most recent call last):\n  File \"/workspace/cfg.py\", line 40, in load\n"
                      "    lr = cfg[\"optim\"][\"learning_rate\"]\nKeyError: 'learning_rate'",
                      image=new, src="training-operator@kube-ctl", ckpt_every=20 * MIN)
    g.gpus(nodes, T0, T0 + 110 * MIN, 60 * SEC, busy={**{n: [(T0, T0 + 90 * MIN)] for n in nodes[0:2]},
                                                      **{n: [(T0 + 10 * MIN, T0 + 100 * MIN)] for n in nodes[2:4]},
                                                      **{n: [(T0 + 5 * MIN, end)] for n in nodes[4:6]}})
    return Scenario("image_bump_one_user_bug", image_bump_one_user_bug.__doc__, g.events,
                    [Expect(j.id, 0, "application", f"job:{j.id}", j, failure_ts={end, j.last_progress()})],
                    [(ok1.id, 0), (ok2.id, 0)], g)


@scenario
def nccl_timeout_no_evidence():
    """Every rank logs the NCCL watchdog and the job fails; GPU, BMC, switch ports, RDMA and storage
    are all present and clean, no change, no user traceback. Nothing explains it: unknown."""
    g = Gen(1902)
    nodes = [f"gpu-k-{i:03d}" for i in range(1, 5)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-1800", "port": f"Ethernet{4 * i}", "segment": "leaf-1800"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}])
    start = T0 + 2 * MIN
    stop = start + 48 * MIN
    end = stop + 10 * MIN + 20 * SEC
    j = g.job("7600001", nodes, start=start, end=end, state="failed", exit_code=1, ckpt_every=20 * MIN, stop_at=stop,
              user="mystery", reason="NonZeroExitCode")
    nccl_timeouts(g, j, stop + 600 * SEC, list(range(0, 32, 4)), seq=4242)
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)])
    g.bmc(nodes, T0, end + 10 * MIN, 60 * SEC)
    g.ports([("sw-leaf-1800", f"Ethernet{4 * i}", n) for i, n in enumerate(nodes)], T0, end + 10 * MIN, 30 * SEC)
    g.rdma(nodes, T0, end + 10 * MIN, 30 * SEC, hcas=("mlx5_0",))
    g.storage(nodes, "/lustre/scratch", "lustre", T0, end + 10 * MIN, 30 * SEC)
    return Scenario("nccl_timeout_no_evidence", nccl_timeout_no_evidence.__doc__, g.events,
                    [Expect(j.id, 0, "unknown", f"job:{j.id}", j, failure_ts={end, j.last_progress()},
                            note="debatable vs application; the contract keeps application for a USER code error")], [], g)


@scenario
def ckpt_latency_spikes_then_user_bug():
    """Storage write latency jumps to 40-90 ms during every checkpoint (normal burst load on the
    mount, throughput fine) and returns to ~2 ms; later the job dies of a user ValueError."""
    g = Gen(1607)
    nodes = [f"gpu-l-{i:03d}" for i in range(1, 5)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-1900", "port": f"Ethernet{4 * i}", "segment": "leaf-1900"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}])
    start = T0 + 2 * MIN
    fault = start + 67 * MIN
    j, end = _app_job(g, "pytorchjob-ckpt-burst-ok", nodes, start, fault,
                      "ValueError: Expected input batch_size (32) to match target batch_size (31).", rank=9,
                      src="training-operator@kube-ctl", ckpt_every=15 * MIN, ckpt_dur=60 * SEC)
    ck = [c[0] for c in j.ckpts if c[1] == "started"]

    def burst(node, ts, d):
        if any(c <= ts < c + 60 * SEC for c in ck):
            d.update(write_lat_ms=round(40 + (ts % 50), 1), write_mbps=round(1800 + (ts % 300), 1), queue_depth=24)
    g.storage(nodes, "/mnt/weka", "wekafs", T0, end + 10 * MIN, 10 * SEC, mods=[burst])
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)])
    return Scenario("ckpt_latency_spikes_then_user_bug", ckpt_latency_spikes_then_user_bug.__doc__, g.events,
                    [Expect(j.id, 0, "application", f"job:{j.id}", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def sel_warning_correctable_then_user_bug():
    """BMC SEL warnings (correctable memory ECC logging limit reached, a PSU redundancy warning
    that clears) on a job node during the run; the job dies of a user AssertionError."""
    g = Gen(1608)
    nodes = ["node1601.cluster.local", "node1602.cluster.local"]
    links = {n: [{"nic": "ib0", "switch": "ib-leaf-160", "port": str(i + 1), "segment": "ib-leaf-160"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/gpfs/work", "backend": "gpfs", "server": "ess01"}])
    start = T0 + 2 * MIN
    fault = start + 58 * MIN
    j, end = _app_job(g, "7700001", nodes, start, fault,
                      "Traceback (most recent call last):\n  File \"/home/u/train.py\", line 210, in <module>\n"
                      "    assert tokens.shape[1] <= cfg.seq_len, tokens.shape\nAssertionError: torch.Size([8, 4097])",
                      rank=3, ckpt_every=20 * MIN, user="u")
    g.sel(nodes[1], start + 20 * MIN, "warning", "Memory", "Correctable memory error logging limit reached (DIMM A2)", "MEM0802")
    g.sel(nodes[1], start + 33 * MIN, "warning", "Power Supply", "Power supply redundancy is lost", "PSU0302")
    g.sel(nodes[1], start + 36 * MIN, "ok", "Power Supply", "Power supply redundancy is regained", "PSU0300")
    g.bmc(nodes, T0, end + 10 * MIN, 60 * SEC)
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)])
    return Scenario("sel_warning_correctable_then_user_bug", sel_warning_correctable_then_user_bug.__doc__, g.events,
                    [Expect(j.id, 0, "application", f"job:{j.id}", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def recovered_flap_then_user_bug():
    """The leaf port of a job node flapped once 25 min before the end (down 8 s, up, no error growth
    after; NCCL retried and training went on at full speed); the job then dies of a user KeyError."""
    g = Gen(1609)
    nodes = [f"gpu-o-{i:03d}" for i in range(1, 5)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-2000", "port": f"Ethernet{4 * i}", "segment": "leaf-2000"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}])
    start = T0 + 2 * MIN
    fault = start + 70 * MIN
    j, end = _app_job(g, "pytorchjob-flap-recovered-3", nodes, start, fault,
                      "Traceback (most recent call last):\n  File \"/app/eval.py\", line 31, in score\n    m = metrics[name]\n"
                      "KeyError: 'rougeLsum'", rank=0, src="training-operator@kube-ctl", ckpt_every=20 * MIN)
    flap = fault - 25 * MIN
    g.link("sw-leaf-2000", "Ethernet8", nodes[2], flap, "down")
    g.link("sw-leaf-2000", "Ethernet8", nodes[2], flap + 8 * SEC, "up")

    def pm(dev, port, ts, d, st):
        if port == "Ethernet8" and flap <= ts < flap + 30 * SEC:
            st["in_errors"] += 12
    g.ports([("sw-leaf-2000", f"Ethernet{4 * i}", n) for i, n in enumerate(nodes)], T0, end + 10 * MIN, 30 * SEC, mods=[pm])
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)])
    return Scenario("recovered_flap_then_user_bug", recovered_flap_then_user_bug.__doc__, g.events,
                    [Expect(j.id, 0, "application", f"job:{j.id}", j, failure_ts={end, j.last_progress()})], [], g)



# =========================================================================== round 10

@scenario
def node_cpu_ierr():
    """BMC SEL critical 'Processor' CPU IERR / machine check; the node resets; the job ends NODE_FAIL.
    The node agent was down on that node all along (no GPU samples, no logs from it)."""
    g = Gen(2006)
    nodes = ["gpu-ierr-01", "gpu-ierr-02", "gpu-ierr-03"]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-2100", "port": f"Ethernet{4 * i}", "segment": "leaf-2100"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}])
    start = T0 + 2 * MIN
    fault = start + 42 * MIN
    end = fault + 4 * MIN
    j = g.job("6900001", nodes[:3], start=start, end=end, state="node_fail", reason="NodeFail", ckpt_every=20 * MIN, stop_at=fault,
              user="ierr")
    bad = nodes[2]
    g.sel(bad, fault - SEC, "critical", "Processor", "CPU 2 has an internal error (IERR).", "CPU0000")
    g.sel(bad, fault, "critical", "Processor", "A machine check error occurred on CPU 2.", "CPU0704")
    g.bmc(nodes, T0, end + 10 * MIN, 60 * SEC)
    g.gpus(nodes[:2], T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes[:2]}, mods=[idle_after(j, end)])
    g.sched_node(bad, fault + 2 * MIN, "down", "Not responding")
    return Scenario("node_cpu_ierr", node_cpu_ierr.__doc__, g.events,
                    [Expect(j.id, 0, "node_hardware", f"node:{bad}", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def bad_gpu_three_attempts_same_nodes():
    """The same failing GPU (dgx-a100-181/4, rising DBE, XID 48 each time) kills three consecutive
    attempts that the scheduler requeues on the same two nodes; each attempt resumes from the last
    checkpoint. Three incidents, each gpu_hardware, retries chained with same_nodes true."""
    g = Gen(4802)
    nodes = [dgx(180), dgx(181)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-22", "port": f"Ethernet{4 * i}", "segment": "leaf-22"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}])
    bad = nodes[1]
    exp, busy, faults = [], [], []
    t = T0 + 2 * MIN
    first = 0
    hist = []
    for att, dur in enumerate([50 * MIN, 35 * MIN, 22 * MIN]):
        start = t
        fault = start + dur
        end = fault + 30 * SEC
        j = g.job("8123456", nodes, attempt=att, start=start, end=end, state="failed", exit_code=1, ckpt_every=15 * MIN,
                  stop_at=fault, first_step=first, user="unlucky", reason="NonZeroExitCode",
                  submit=(start - 95 * SEC) if att == 0 else (t - 60 * SEC))
        g.xid(bad, fault, 4, 48, "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer.", pid=1000 + att)
        g.log(j, fault + 600, "RuntimeError: CUDA error: uncorrectable ECC error encountered", rank=12)
        hist += j.ckpts
        j.ckpts = list(hist)
        first = (j.last_ok() or (0, 0, first))[2]
        faults.append(fault)
        exp.append(Expect(j.id, att, "gpu_hardware", f"gpu:{bad}/4", j, failure_ts={end, j.last_progress()},
                          retry_attempt=(att + 1) if att < 2 else None, retry_same_nodes=True if att < 2 else None))
        busy.append((start, end))
        t = end + 3 * MIN

    def dbe(node, gpu, ts, d, st):
        if node == bad and gpu == 4:
            st["dbe"] = sum(1 for f in faults if ts >= f)
    g.gpus(nodes, T0, t + 10 * MIN, 30 * SEC, busy={n: busy for n in nodes}, mods=[dbe])
    return Scenario("bad_gpu_three_attempts_same_nodes", bad_gpu_three_attempts_same_nodes.__doc__, g.events, exp, [], g)



@scenario
def spine_storm_decoy():
    """The spine port ib-spine-2/17 storms and flaps while (a) a SINGLE-node job dies of NCCL timeouts
    caused by NVLink errors on its GPU 3 (its traffic never leaves the node) and (b) a 2-node job whose
    nodes sit on the same leaf (no spine on its path) dies of a user error. Neither is the spine's."""
    g = Gen(5006)
    nodes = [f"cn-f{i:02d}" for i in range(1, 5)]
    links = {n: [{"nic": "mlx5_0", "switch": "ib-leaf-1", "port": str(i + 1), "segment": "ib-leaf-1"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/gpfs/work", "backend": "gpfs", "server": "ess01"}])
    start = T0 + 2 * MIN
    onset = start + 40 * MIN
    stop_a = onset + 20 * SEC
    end_a = stop_a + 10 * MIN + 10 * SEC
    ja = g.job("7800001", nodes[:1], start=start, end=end_a, state="failed", exit_code=1, ckpt_every=15 * MIN, stop_at=stop_a,
               user="single", reason="NonZeroExitCode")
    fault_b = onset + 90 * SEC
    jb, end_b = _app_job(g, "7800002", nodes[2:4], start, fault_b,
                         "Traceback (most recent call last):\n  File \"/home/u/loop.py\", line 88, in step\n"
                         "    out = model(**batch)\nTypeError: forward() got an unexpected keyword argument 'labels_mask'",
                         rank=0, ckpt_every=15 * MIN, user="pair", reason="NonZeroExitCode")

    def nvl(node, gpu, ts, d, st):
        if node == nodes[0] and gpu == 3 and ts >= onset - 2 * MIN:
            st["nvl"] += 2500

    def storm(dev, port, ts, d, st):
        if dev == "ib-spine-2" and port == "17" and ts >= onset - 3 * MIN:
            st["in_errors"] += 40000
            if onset <= ts < onset + 40 * SEC:
                d["oper_status"] = "down"
    g.ports([(f"ib-spine-{s}", str(p), None) for s in (1, 2) for p in range(15, 20)] +
            [("ib-leaf-1", str(i + 1), n) for i, n in enumerate(nodes)], T0, end_a + 10 * MIN, 30 * SEC, mods=[storm], src="ufm")
    g.link("ib-spine-2", "17", None, onset, "down", src="ufm")
    g.link("ib-spine-2", "17", None, onset + 30 * SEC, "up", src="ufm")
    g.gpus(nodes, T0, end_a + 10 * MIN, 20 * SEC, busy={nodes[0]: [(start, end_a)], nodes[2]: [(start, end_b)], nodes[3]: [(start, end_b)]},
           mods=[nvl])
    nccl_timeouts(g, ja, stop_a + 600 * SEC, [0, 2, 5], seq=3131)
    return Scenario("spine_storm_decoy", spine_storm_decoy.__doc__, g.events,
                    [Expect(ja.id, 0, "gpu_nvlink", f"gpu:{nodes[0]}/3", ja, failure_ts={end_a, ja.last_progress()}),
                     Expect(jb.id, 0, "application", f"job:{jb.id}", jb, failure_ts={end_b, jb.last_progress()})], [], g)



def _thermal_job(g, jid, nodes, bad, gpu, start, onset, end, state, interval, **kw):
    st_fn = lambda t: 1.2 if t < onset else 1.2 + 2.4 * min(1.0, (t - onset) / (20 * MIN))
    stop = kw.pop("stop_at", None)
    j = g.job(jid, nodes, start=start, end=end, state=state, step_time_fn=st_fn, stop_at=stop, **kw)

    def hot(node, gi, ts, d, s):
        if node == bad and gi == gpu and onset <= ts < end:
            f = min(1.0, (ts - onset) / (15 * MIN))
            d.update(temp_c=int(85 + 8 * f), sm_clock_mhz=int(1410 - 800 * f), power_w=round(240 - 90 * f, 1),
                     throttle=["sw_thermal", "hw_thermal"] + (["hw_slowdown"] if f > 0.5 else []))
    g.gpus(nodes, T0, end + 10 * MIN, interval, busy={n: [(start, end)] for n in nodes}, mods=[hot, idle_after(j, end)])
    return j


@scenario
def thermal_straggler_user_cancel():
    """A thermal straggler slows the job 3x and the user cancels it while it is STILL making
    progress (slowly). The contract: a job its user cancels while it makes progress has no incident."""
    g = Gen(3002)
    nodes = [f"gpu-th-{i:02d}" for i in range(1, 5)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-2200", "port": f"Ethernet{4 * i}", "segment": "leaf-2200"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}])
    start = T0 + 2 * MIN
    onset = start + 30 * MIN
    end = onset + 40 * MIN
    j = _thermal_job(g, "pytorchjob-slow-cancel-1", nodes, nodes[1], 4, start, onset, end, "cancelled", 30 * SEC,
                     signal=15, reason="Cancelled by user", src="training-operator@kube-ctl", ckpt_every=20 * MIN)
    return Scenario("thermal_straggler_user_cancel", thermal_straggler_user_cancel.__doc__, g.events, [], [(j.id, 0)], g)


@scenario
def thermal_straggler_2n_no_bmc():
    """2-node Slurm job, GPU samples every 60 s, no BMC collector: GPU 7 of the second node runs
    into hw_thermal/hw_slowdown, steps slow down, then the collective times out."""
    g = Gen(3003)
    nodes = ["node1701.cluster.local", "node1702.cluster.local"]
    links = {n: [{"nic": "ib0", "switch": "ib-leaf-170", "port": str(i + 1), "segment": "ib-leaf-170"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/gpfs/work", "backend": "gpfs", "server": "ess01"}])
    start = T0 + 2 * MIN
    onset = start + 35 * MIN
    stop = onset + 25 * MIN
    end = stop + 10 * MIN + 20 * SEC
    j = _thermal_job(g, "7900001", nodes, nodes[1], 7, start, onset, end, "failed", 60 * SEC, exit_code=1,
                     stop_at=stop, ckpt_every=20 * MIN, user="warm", reason="NonZeroExitCode")
    nccl_timeouts(g, j, stop + 600 * SEC, [0, 3, 9], seq=2727)
    return Scenario("thermal_straggler_2n_no_bmc", thermal_straggler_2n_no_bmc.__doc__, g.events,
                    [Expect(j.id, 0, "thermal_throttle", f"gpu:{nodes[1]}/7", j, failure_ts={end, j.last_progress()})], [], g)



@scenario
def nccl_version_drift_one_node():
    """Bare-metal Slurm, host-installed NCCL: gpu-r-03 still has NCCL 2.18.3 while the others run
    2.21.5. The job hangs in its first collective and every rank hits the watchdog; no progress."""
    g = Gen(1201)
    nodes = [f"gpu-r-{i:02d}" for i in range(1, 5)]
    odd = nodes[2]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-2300", "port": f"Ethernet{4 * i}", "segment": "leaf-2300"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0 - 2 * HOUR, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}],
                  per_node={odd: {"nccl": "2.18.3"}})
    start = T0 + 2 * MIN
    end = start + 12 * MIN
    j = g.job("8000001", nodes, start=start, end=end, state="failed", exit_code=1, user="drift", reason="NonZeroExitCode",
              stop_at=start + 1)
    nccl_timeouts(g, j, start + 11 * MIN, [0, 8, 16, 24], seq=1, op="BROADCAST")
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)])
    return Scenario("nccl_version_drift_one_node", nccl_version_drift_one_node.__doc__, g.events,
                    [Expect(j.id, 0, "driver_software", f"node:{odd}", j, ckpt_step=None, failure_ts={end})], [], g)


@scenario
def irrelevant_drift_then_user_bug():
    """One node of the job differs only in BIOS and BMC firmware (irrelevant to the job's stack); the
    job dies of a user NameError. Application, not a version mismatch."""
    g = Gen(1202)
    nodes = [f"gpu-r-{i:02d}" for i in range(11, 15)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-2301", "port": f"Ethernet{4 * i}", "segment": "leaf-2301"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0 - 2 * HOUR, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}],
                  per_node={nodes[1]: {"bios": "1.9.0", "bmc_firmware": "24.07.02"}})
    start = T0 + 2 * MIN
    j, end = _app_job(g, "8000002", nodes, start, start + 46 * MIN,
                      "Traceback (most recent call last):\n  File \"/home/v/train.py\", line 301, in <module>\n    log_metrics(step, los)\n"
                      "NameError: name 'los' is not defined. Did you mean: 'loss'?", rank=0, ckpt_every=15 * MIN, user="v",
                      reason="NonZeroExitCode")
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)])
    return Scenario("irrelevant_drift_then_user_bug", irrelevant_drift_then_user_bug.__doc__, g.events,
                    [Expect(j.id, 0, "application", f"job:{j.id}", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def filenotfound_mount_missing():
    """The mirror of application_filenotfound_on_storage_path: here /data/shared really is MISSING on
    the node whose rank raises FileNotFoundError (automount failed after a reboot): storage_unavailable."""
    g = Gen(7011)
    nodes = ["node1801.cluster.local", "node1802.cluster.local"]
    links = {n: [{"nic": "ib0", "switch": "ib-leaf-180", "port": str(i + 1), "segment": "ib-leaf-180"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/data/shared", "backend": "nfs", "server": "nas-data"}])
    start = T0 + 2 * MIN
    fault = start + 2 * MIN + 30 * SEC
    end = fault + 15 * SEC
    j = g.job("8100999", nodes, start=start, end=end, state="failed", exit_code=1, stop_at=fault, init=100 * SEC, user="w",
              reason="NonZeroExitCode")
    g.mount(nodes[1], start - 10 * MIN, "/data/shared", "missing", "autofs: mount of nas-data:/export/shared failed")
    g.mount(nodes[0], start - 10 * MIN, "/data/shared", "ok")
    g.log(j, fault, "Traceback (most recent call last):\n  File \"/opt/job/data.py\", line 19, in <module>\n"
          "    ds = load_from_disk('/data/shared/corpora/web-2024')\n"
          "FileNotFoundError: [Errno 2] No such file or directory: '/data/shared/corpora/web-2024/dataset_info.json'", rank=8)
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)])
    return Scenario("filenotfound_mount_missing", filenotfound_mount_missing.__doc__, g.events,
                    [Expect(j.id, 0, "storage_unavailable", "path:/data/shared", j, ckpt_step=None, failure_ts={end, j.last_progress()} - {None})],
                    [], g)



@scenario
def no_runtime_layer_xid79():
    """A site with no runtime collection at all (no progress, no logs, no checkpoints): only the
    scheduler, NVML/XID and the BMC. XID 79 on GPU 1 of the second node, job FAILED 11 min later.
    last_checkpoint null; lost GPU-h from the start."""
    g = Gen(7906)
    nodes = ["gpu-nr-01", "gpu-nr-02", "gpu-nr-03"]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-2400", "port": f"Ethernet{4 * i}", "segment": "leaf-2400"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}])
    start = T0 + 2 * MIN
    fault = start + 53 * MIN
    end = fault + 11 * MIN
    j = g.job("8200001", nodes[:2], start=start, end=end, state="failed", exit_code=1, user="bare", reason="NonZeroExitCode",
              stop_at=start + 1)
    g.events = [e for e in g.events if not e["kind"].startswith("runtime.")]
    j.progress, j.ckpts = [], []
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes[:2]},
           mods=[stop_after(nodes[1], fault, 1), idle_after(j, end)])
    g.bmc(nodes, T0, end + 10 * MIN, 60 * SEC)
    g.xid(nodes[1], fault, 1, 79, "GPU has fallen off the bus.", pid=5150)
    return Scenario("no_runtime_layer_xid79", no_runtime_layer_xid79.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_hardware", f"gpu:{nodes[1]}/1", j, ckpt_step=None, failure_ts={end})], [], g)



@scenario
def ib_congestion_xmit_wait():
    """InfiniBand (no RoCE CNPs): a neighbour's all-to-all saturates leaf ib-leaf-9; the HCAs show
    port_xmit_wait (credit starvation) climbing 100x and port_xmit_discards, switch ports out_discards;
    no symbol/receive errors, no link drop. Our job's collectives time out."""
    g = Gen(6003)
    nodes = [f"cn-g{i:02d}" for i in range(1, 11)]
    ja, jb = nodes[:4], nodes[4:10]
    links = {n: [{"nic": "mlx5_0", "switch": "ib-leaf-9", "port": str(i + 1), "segment": "ib-leaf-9"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/gpfs/work", "backend": "gpfs", "server": "ess01"}])
    start = T0 + 2 * MIN
    onset = start + 38 * MIN
    stop = onset + 7 * MIN
    end = stop + 10 * MIN + 30 * SEC
    j = g.job("8300001", ja, start=start, end=end, state="failed", exit_code=1, ckpt_every=15 * MIN, stop_at=stop, user="ibc",
              reason="NonZeroExitCode", step_time_fn=lambda t: 1.2 if t < onset else 5.0)
    jn = g.job("8300002", jb, start=onset - MIN, end=end + 25 * MIN, state="completed", exit_code=0, ckpt_every=60 * MIN, user="a2a")

    def cong(node, hca, ts, st):
        if onset <= ts < end + 25 * MIN:
            st["port_xmit_wait"] += 3 * 10**9
            st["port_xmit_discards"] += 2500
    g.rdma(nodes, T0, end + 30 * MIN, 20 * SEC, hcas=("mlx5_0",), mods=[cong], roce=False)

    def disc(dev, port, ts, d, st):
        if onset <= ts < end + 25 * MIN:
            st["out_discards"] += 60000
    g.ports([("ib-leaf-9", str(i + 1), n) for i, n in enumerate(nodes)], T0, end + 30 * MIN, 30 * SEC, mods=[disc], src="ufm",
            speed=400000)
    g.gpus(nodes, T0, end + 30 * MIN, 30 * SEC, busy={**{n: [(start, end)] for n in ja}, **{n: [(onset - MIN, end + 25 * MIN)] for n in jb}},
           mods=[idle_after(j, end)])
    nccl_timeouts(g, j, stop + 600 * SEC, [0, 9, 17, 26], seq=5858)
    return Scenario("ib_congestion_xmit_wait", ib_congestion_xmit_wait.__doc__, g.events,
                    [Expect(j.id, 0, "network_congestion", "segment:ib-leaf-9", j, failure_ts={end, j.last_progress()})],
                    [(jn.id, 0)], g)



@scenario
def mixed_fleet_day():
    """A 4-hour fleet of 24 nodes with 7 jobs. A: XID 79 on gpu-mx-05/2 (gpu_hardware). B: later on
    the SAME nodes after the GPU was reset (samples back), dies of a user error (application: A's XID
    is outside B's window). C: leaf port facing gpu-mx-14 flaps (network_link) while D, on another
    leaf, completes. E: preempted (scheduler). F: host OOM on gpu-mx-21. G: healthy, completes."""
    g = Gen(4242)
    nodes = [f"gpu-mx-{i:02d}" for i in range(1, 25)]
    lf = lambda i: f"sw-leaf-m{1 + i // 8}"
    pt = lambda i: f"Ethernet{4 * (i % 8)}"
    links = {n: [{"nic": "mlx5_0", "switch": lf(i), "port": pt(i), "segment": lf(i)[3:]}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"}])
    N = lambda *ix: [nodes[i - 1] for i in ix]
    busy: dict = {}

    def use(jn, a, b):
        for n in jn:
            busy.setdefault(n, []).append((a, b))
    exp, healthy = [], []
    # A
    a_n = N(5, 6, 7, 8)
    a_s, a_f = T0 + 5 * MIN, T0 + 55 * MIN
    a_e = a_f + 10 * MIN + 20 * SEC
    ja = g.job("9000001", a_n, start=a_s, end=a_e, state="failed", exit_code=1, ckpt_every=20 * MIN, stop_at=a_f, user="ua")
    g.xid(N(5)[0], a_f, 2, 79, "GPU has fallen off the bus.", pid=101)
    nccl_timeouts(g, ja, a_f + 600 * SEC, [8, 16, 24], seq=11)
    use(a_n, a_s, a_e)
    exp.append(Expect(ja.id, 0, "gpu_hardware", f"gpu:{N(5)[0]}/2", ja, failure_ts={a_e, ja.last_progress()}))
    # B on the same nodes after a reset at a_e + 20 min
    b_s = a_e + 30 * MIN
    jb, b_e = _app_job(g, "9000002", a_n, b_s, b_s + 50 * MIN,
                       "Traceback (most recent call last):\n  File \"/app/run.py\", line 5, in <module>\n    main()\n"
                       "RuntimeError: Error(s) in loading state_dict for GPT: Missing key(s) in state_dict: \"lm_head.weight\".",
                       rank=0, ckpt_every=20 * MIN, user="ub")
    use(a_n, b_s, b_e)
    exp.append(Expect(jb.id, 0, "application", f"job:{jb.id}", jb, failure_ts={b_e, jb.last_progress()}))
    # C flap on the port facing gpu-mx-14
    c_n = N(13, 14, 15, 16)
    c_s, c_on = T0 + 20 * MIN, T0 + 100 * MIN
    c_e = c_on + 11 * MIN
    jc = g.job("9000003", c_n, start=c_s, end=c_e, state="failed", exit_code=1, ckpt_every=20 * MIN, stop_at=c_on + 20 * SEC, user="uc")
    fi = nodes.index("gpu-mx-14")
    for k in range(3):
        g.link(lf(fi), pt(fi), "gpu-mx-14", c_on + k * 80 * SEC, "down")
        g.link(lf(fi), pt(fi), "gpu-mx-14", c_on + k * 80 * SEC + 15 * SEC, "up")
    g.log(jc, c_on + 30 * SEC, "gpu-mx-13:5001:5400 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
          "10.8.1.14<43001> with status=12 opcode=0 len=0 vendor err 129 (Recv)", rank=1)
    nccl_timeouts(g, jc, c_on + 600 * SEC, [0, 9], seq=33)
    use(c_n, c_s, c_e)
    exp.append(Expect(jc.id, 0, "network_link", f"port:{lf(fi)}/{pt(fi)}", jc, failure_ts={c_e, jc.last_progress()}))
    # D healthy on leaf 1
    d_n = N(1, 2, 3, 4)
    jd = g.job("9000004", d_n, start=T0 + 10 * MIN, end=T0 + 200 * MIN, state="completed", exit_code=0, ckpt_every=30 * MIN, user="ud")
    use(d_n, T0 + 10 * MIN, T0 + 200 * MIN)
    healthy.append((jd.id, 0))
    # E preempted
    e_n = N(17, 18)
    je = g.job("9000005", e_n, start=T0 + 30 * MIN, end=T0 + 130 * MIN, state="preempted", signal=15,
               reason="Preempted by job 9000099 (QOS high)", ckpt_every=30 * MIN, user="ue")
    use(e_n, T0 + 30 * MIN, T0 + 130 * MIN)
    exp.append(Expect(je.id, 0, "scheduler", f"job:{je.id}", je, failure_ts={T0 + 130 * MIN, je.last_progress()}))
    # F host OOM on gpu-mx-21
    f_n = N(21, 22)
    f_s, f_f = T0 + 40 * MIN, T0 + 150 * MIN
    f_e = f_f + 20 * SEC
    jf = g.job("9000006", f_n, start=f_s, end=f_e, state="out_of_memory", signal=9, ckpt_every=30 * MIN, stop_at=f_f, user="uf",
               reason="OutOfMemory")
    g.log(jf, f_f, "Out of memory: Killed process 7001 (python) total-vm:500123456kB, anon-rss:480123456kB, file-rss:0kB, "
          "shmem-rss:0kB, UID:9001 pgtables:900000kB oom_score_adj:0", stream="kernel", node="gpu-mx-21")
    use(f_n, f_s, f_e)
    exp.append(Expect(jf.id, 0, "host_oom", "node:gpu-mx-21", jf, failure_ts={f_e, jf.last_progress()}))
    # G healthy
    g_n = N(23, 24)
    jg = g.job("9000007", g_n, start=T0 + 60 * MIN, end=T0 + 220 * MIN, state="completed", exit_code=0, ckpt_every=30 * MIN, user="ug")
    use(g_n, T0 + 60 * MIN, T0 + 220 * MIN)
    healthy.append((jg.id, 0))
    # telemetry: GPU 2 of gpu-mx-05 silent from A's fault until a reset 20 min after A ended
    reset = a_e + 20 * MIN

    def gone(node, gpu, ts, d, st):
        if node == "gpu-mx-05" and gpu == 2 and a_f <= ts < reset:
            return False
    g.gpus(nodes, T0, T0 + 240 * MIN, 30 * SEC, busy=busy, mods=[gone])
    g.bmc(nodes, T0, T0 + 240 * MIN, 120 * SEC)

    def pm(dev, port, ts, d, st):
        if (dev, port) == (lf(fi), pt(fi)) and ts >= c_on - 3 * MIN:
            st["in_errors"] += 1500
            if any(c_on + k * 80 * SEC <= ts < c_on + k * 80 * SEC + 15 * SEC for k in range(3)):
                d["oper_status"] = "down"
    g.ports([(lf(i), pt(i), n) for i, n in enumerate(nodes)], T0, T0 + 240 * MIN, 60 * SEC, mods=[pm])
    g.storage(nodes, "/lustre/scratch", "lustre", T0, T0 + 240 * MIN, 60 * SEC)
    return Scenario("mixed_fleet_day", mixed_fleet_day.__doc__, g.events, exp, healthy, g)



@scenario
def collective_desync_user_bug():
    """User code calls an extra all_reduce under `if rank == 0`: ranks hang in DIFFERENT collectives
    (rank 0 in ALLREDUCE SeqNum 9121, the others in BROADCAST 9120) and all hit the watchdog; with
    TORCH_DISTRIBUTED_DEBUG=DETAIL the mismatch is printed. Every layer clean. Not infrastructure."""
    g = Gen(1610)
    nodes = [f"gpu-ds-{i:02d}" for i in range(1, 3)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-2500", "port": f"Ethernet{4 * i}", "segment": "leaf-2500"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}])
    start = T0 + 2 * MIN
    stop = start + 33 * MIN
    end = stop + 10 * MIN + 15 * SEC
    j = g.job("pytorchjob-desync-77", nodes, start=start, end=end, state="failed", exit_code=1, src="training-operator@kube-ctl",
              ckpt_every=15 * MIN, stop_at=stop)
    t = stop + 600 * SEC
    g.log(j, t, watchdog_lines(0, t, 9121, op="ALLREDUCE", numel=1), rank=0)
    for r in (3, 8, 12):
        g.log(j, t + 40 + r, watchdog_lines(r, t + 40 + r, 9120, op="BROADCAST", numel=4096), rank=r)
    g.log(j, t + 200, "RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running collective: "
          "CollectiveFingerPrint(SequenceNumber=9121, OpType=ALLREDUCE, TensorShape=[1], TensorDtypes=Float), but Rank 1 is "
          "running collective: CollectiveFingerPrint(SequenceNumber=9120, OpType=BROADCAST, TensorShape=[4096]).", rank=0)
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)])
    g.bmc(nodes, T0, end + 10 * MIN, 60 * SEC)
    g.ports([("sw-leaf-2500", f"Ethernet{4 * i}", n) for i, n in enumerate(nodes)], T0, end + 10 * MIN, 30 * SEC)
    g.rdma(nodes, T0, end + 10 * MIN, 30 * SEC, hcas=("mlx5_0",))
    g.storage(nodes, "/mnt/weka", "wekafs", T0, end + 10 * MIN, 30 * SEC)
    return Scenario("collective_desync_user_bug", collective_desync_user_bug.__doc__, g.events,
                    [Expect(j.id, 0, {"application", "unknown"}, None, j, failure_ts={end, j.last_progress()},
                            note="application (the mismatch message) best; unknown tolerable; never an infrastructure layer")], [], g)


@scenario
def ckpt_unpicklable_user_bug():
    """The checkpoint write fails because the user put a lock in the state dict: torch.save raises
    'TypeError: cannot pickle '_thread.lock' object' (checkpoint phase failed with that error). The
    storage is healthy (latency normal, 40 % used). Application, not storage."""
    g = Gen(1611)
    nodes = ["node1901.cluster.local", "node1902.cluster.local"]
    links = {n: [{"nic": "ib0", "switch": "ib-leaf-190", "port": str(i + 1), "segment": "ib-leaf-190"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/gpfs/work", "backend": "gpfs", "server": "ess01"}])
    start = T0 + 2 * MIN
    ck_every = 20 * MIN
    fail_ts = start + 150 * SEC + 2 * ck_every
    end = fail_ts + 30 * SEC
    probe = Gen(1)
    pj = probe.job("x", nodes, start=start, end=end, state="failed", ckpt_every=ck_every, stop_at=fail_ts + 1, ckpt_dur=10 * SEC)
    fstep = [c for c in pj.ckpts if c[1] == "started"][1][2]
    err = "TypeError: cannot pickle '_thread.lock' object"
    j = g.job("8400001", nodes, start=start, end=end, state="failed", exit_code=1, ckpt_every=ck_every, ckpt_dur=10 * SEC,
              ckpt_dir="/gpfs/work/x/ckpt", ckpt_fail={fstep: err}, stop_at=fail_ts + 1, user="pickle", reason="NonZeroExitCode")
    g.log(j, fail_ts + 9 * SEC, "Traceback (most recent call last):\n  File \"/home/x/train.py\", line 250, in save\n"
          "    torch.save({'model': model.state_dict(), 'sampler': self.sampler}, path)\n"
          '  File "/usr/local/lib/python3.10/dist-packages/torch/serialization.py", line 652, in save\n'
          "    _save(obj, opened_zipfile, pickle_module, pickle_protocol, _disable_byteorder_record)\n" + err, rank=0)
    g.storage(nodes, "/gpfs/work", "gpfs", T0, end + 10 * MIN, 30 * SEC, used=40.0)
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)])
    return Scenario("ckpt_unpicklable_user_bug", ckpt_unpicklable_user_bug.__doc__, g.events,
                    [Expect(j.id, 0, "application", f"job:{j.id}", j, failure_ts={end, j.last_progress()})], [], g)



@scenario
def xid79_after_user_crash():
    """The job dies of a user IndexError at T; 90 s later (while the node is being cleaned up) GPU 4
    of a job node falls off the bus. Whatever happened to the GPU afterwards did not stop this job."""
    g = Gen(1612)
    nodes = ["gpu-after-01", "gpu-after-02"]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-2600", "port": f"Ethernet{4 * i}", "segment": "leaf-2600"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}])
    start = T0 + 2 * MIN
    fault = start + 52 * MIN
    j, end = _app_job(g, "pytorchjob-after-crash-3", nodes, start, fault,
                      "Traceback (most recent call last):\n  File \"/app/collate.py\", line 44, in collate\n    lens[i] = len(b[3])\n"
                      "IndexError: tuple index out of range", rank=12, src="training-operator@kube-ctl", ckpt_every=20 * MIN)
    g.xid(nodes[1], fault + 90 * SEC, 4, 79, "GPU has fallen off the bus.", pid=None)
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes},
           mods=[idle_after(j, end), stop_after(nodes[1], fault + 90 * SEC, 4)])
    return Scenario("xid79_after_user_crash", xid79_after_user_crash.__doc__, g.events,
                    [Expect(j.id, 0, "application", f"job:{j.id}", j, failure_ts={end, j.last_progress()})], [], g)



@scenario
def importerror_same_image_no_change():
    """Image :v41 ran two jobs to completion; a third job on the SAME :v41 dies at start with
    'ModuleNotFoundError: No module named 'proj.utils'' (the user's own package path). No version
    change happened: application."""
    g = Gen(1404)
    nodes = [f"gpu-im-{i:02d}" for i in range(1, 7)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-2700", "port": f"Ethernet{4 * i}", "segment": "leaf-2700"}] for i, n in enumerate(nodes)}
    img = "ghcr.io/acme/trainer:v41"
    std_inventory(g, nodes, T0 - HOUR, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}],
                  versions={"driver": "550.90.07", "image": img})
    ok1 = g.job("pytorchjob-im-ok-1", nodes[0:2], start=T0, end=T0 + 60 * MIN, state="completed", exit_code=0, image=img,
                src="training-operator@kube-ctl", ckpt_every=30 * MIN)
    ok2 = g.job("pytorchjob-im-ok-2", nodes[2:4], start=T0 + 10 * MIN, end=T0 + 70 * MIN, state="completed", exit_code=0,
                image=img, src="training-operator@kube-ctl", ckpt_every=30 * MIN)
    s3 = T0 + 80 * MIN
    e3 = s3 + 90 * SEC
    j = g.job("pytorchjob-im-bad-3", nodes[4:6], start=s3, end=e3, state="failed", exit_code=1, image=img, init=60 * SEC,
              src="training-operator@kube-ctl", user="newbie", reason="BackoffLimitExceeded")
    g.log(j, e3 - 20 * SEC, "Traceback (most recent call last):\n  File \"/workspace/proj/train.py\", line 4, in <module>\n"
          "    from proj.utils import set_seed\nModuleNotFoundError: No module named 'proj.utils'", rank=0)
    g.gpus(nodes, T0, T0 + 100 * MIN, 60 * SEC, busy={**{n: [(T0, T0 + 60 * MIN)] for n in nodes[0:2]},
                                                      **{n: [(T0 + 10 * MIN, T0 + 70 * MIN)] for n in nodes[2:4]},
                                                      **{n: [(s3, e3)] for n in nodes[4:6]}})
    return Scenario("importerror_same_image_no_change", importerror_same_image_no_change.__doc__, g.events,
                    [Expect(j.id, 0, "application", f"job:{j.id}", j, ckpt_step=None, failure_ts={e3, j.last_progress()} - {None})],
                    [(ok1.id, 0), (ok2.id, 0)], g)



@scenario
def xid79_kernel_line_whole_node_silent():
    """XID 79 known only from the kernel line (bus 4e = GPU 3 on this board), and at the same moment
    the node agent dies: ALL 8 GPUs' samples stop. Which index fell off cannot be read from the
    telemetry; the bus id (or GPU 3) is fine, any other index is wrong."""
    g = Gen(7907)
    nodes = ["gpu-sil-01", "gpu-sil-02"]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-2800", "port": f"Ethernet{4 * i}", "segment": "leaf-2800"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}])
    start = T0 + 2 * MIN
    fault = start + 37 * MIN
    end = fault + 10 * MIN + 30 * SEC
    j = g.job("pytorchjob-silent-node-1", nodes, start=start, end=end, state="failed", exit_code=1, src="training-operator@kube-ctl",
              ckpt_every=15 * MIN, stop_at=fault)
    bad = nodes[1]
    g.gpus(nodes, T0, end + 10 * MIN, 15 * SEC, busy={n: [(start, end)] for n in nodes},
           mods=[stop_after(bad, fault), idle_after(j, end)])
    g.log(j, fault, xid_line(3, 79, 6060, "GPU has fallen off the bus."), stream="kernel", node=bad)
    nccl_timeouts(g, j, fault + 600 * SEC, [0, 3], seq=6060)
    return Scenario("xid79_kernel_line_whole_node_silent", xid79_kernel_line_whole_node_silent.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_hardware", {f"gpu:{bad}/3", f"gpu:{bad}/0000:4e:00", f"gpu:{bad}/00000000:4E:00.0"}, j,
                            failure_ts={end, j.last_progress()})], [], g)


@scenario
def mount_missing_then_fixed_typo():
    """/data/shared was reported missing 40 min before the job, then ok again 25 min before it (the
    automount was fixed). The job dies of a FileNotFoundError from a typo in the user's path under it.
    The later 'ok' state wins: application."""
    g = Gen(7012)
    nodes = ["node2001.cluster.local", "node2002.cluster.local"]
    links = {n: [{"nic": "ib0", "switch": "ib-leaf-200", "port": str(i + 1), "segment": "ib-leaf-200"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0 - HOUR, links=links, storage=[{"path": "/data/shared", "backend": "nfs", "server": "nas-data"}])
    start = T0 + 2 * MIN
    g.mount(nodes[1], start - 40 * MIN, "/data/shared", "missing", "autofs: mount of nas-data:/export/shared failed")
    g.mount(nodes[1], start - 25 * MIN, "/data/shared", "ok")
    j, end = _app_job(g, "8500001", nodes, start, start + 31 * MIN,
                      "Traceback (most recent call last):\n  File \"/opt/job/eval.py\", line 12, in <module>\n"
                      "    open('/data/shared/evals/hellaswag_vall.jsonl')\n"
                      "FileNotFoundError: [Errno 2] No such file or directory: '/data/shared/evals/hellaswag_vall.jsonl'",
                      rank=8, ckpt_every=15 * MIN, user="typo", reason="NonZeroExitCode")
    g.storage(nodes, "/data/shared", "nfs4", start - 24 * MIN, end + 10 * MIN, 60 * SEC)
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)])
    return Scenario("mount_missing_then_fixed_typo", mount_missing_then_fixed_typo.__doc__, g.events,
                    [Expect(j.id, 0, "application", f"job:{j.id}", j, failure_ts={end, j.last_progress()})], [], g)



@scenario
def stall_recovers_then_completes():
    """A blocking evaluation pauses progress for 25 min in the middle of the run (GPUs busy), then
    training resumes and the job COMPLETES. The contract: a job that completes has no incident."""
    g = Gen(1903)
    nodes = [f"gpu-ev-{i:02d}" for i in range(1, 3)]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-2900", "port": f"Ethernet{4 * i}", "segment": "leaf-2900"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}])
    start = T0 + 2 * MIN
    end = start + 120 * MIN
    j = g.job("pytorchjob-eval-pause-1", nodes, start=start, end=end, state="completed", exit_code=0, src="training-operator@kube-ctl",
              ckpt_every=30 * MIN)
    gap0, gap1 = start + 50 * MIN, start + 75 * MIN
    g.events = [e for e in g.events if not (e["kind"] == "runtime.progress" and gap0 < e["ts"] < gap1)]
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes})
    return Scenario("stall_recovers_then_completes", stall_recovers_then_completes.__doc__, g.events, [], [(j.id, 0)], g)



@scenario
def gpu_oom_rank0_gpu_always_full():
    """Rank 3 (local GPU 3) raises torch.OutOfMemoryError naming GPU 3. NVML (60 s samples) missed
    GPU 3's spike, while GPU 0 sits at 99 % memory all run long (rank 0 keeps extra buffers, normal).
    Message and rank agree on GPU 3; the always-full GPU 0 is not the culprit."""
    g = Gen(8006)
    nodes = ["gpu-oz-01", "gpu-oz-02"]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-3000", "port": f"Ethernet{4 * i}", "segment": "leaf-3000"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}])
    start = T0 + 2 * MIN
    fault = start + 47 * MIN + 20 * SEC
    end = fault + 10 * SEC
    j = g.job("pytorchjob-oom-rank3-x", nodes[:1], start=start, end=end, state="failed", exit_code=1, src="training-operator@kube-ctl",
              ckpt_every=15 * MIN, stop_at=fault)

    def full0(node, gpu, ts, d, st):
        if node == nodes[0] and gpu == 0 and start + 3 * MIN <= ts < end:
            d["mem_used_mib"] = 81100 + (ts // 1000) % 300
    g.gpus(nodes, T0, end + 10 * MIN, 60 * SEC, busy={nodes[0]: [(start, end)]}, mods=[full0, idle_after(j, end)])
    g.log(j, fault, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB. GPU 3 has a total capacity of 79.15 GiB "
          "of which 3.11 GiB is free. Including non-PyTorch memory, this process has 76.03 GiB memory in use.", rank=3)
    return Scenario("gpu_oom_rank0_gpu_always_full", gpu_oom_rank0_gpu_always_full.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_oom", f"gpu:{nodes[0]}/3", j, failure_ts={end, j.last_progress()})], [], g)



@scenario
def old_formats_xid_and_watchdog():
    """Older stack, raw lines with their syslog prefix: the XID exists only as a journald kernel line
    'Mar 14 09:10:12 node kernel: [ 1843.308145] NVRM: Xid (PCI:0000:87:00): 48, pid=..., ...' (bus 87 =
    GPU 4, whose samples show the DBE), and the other ranks log the old watchdog wording
    '[E ProcessGroupNCCL.cpp:737] [Rank N] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=..,
    OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802212 milliseconds before timing out.'"""
    g = Gen(4803)
    nodes = ["ml-v100-07", "ml-v100-08"]
    links = {n: [{"nic": "ib0", "switch": "ib-edge-3", "port": str(i + 11), "segment": "ib-edge-3"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/nfs/scratch", "backend": "nfs", "server": "nas-old"}],
                  versions={"driver": "470.223.02", "cuda": "11.4", "nccl": "2.11.4", "kernel": "4.18.0-513.el8.x86_64"})
    start = T0 + 2 * MIN
    fault = start + 44 * MIN
    end = fault + 30 * MIN + 50 * SEC
    j = g.job("1234567", nodes, start=start, end=end, state="failed", exit_code=1, ckpt_every=20 * MIN, stop_at=fault, user="legacy",
              reason="NonZeroExitCode")
    bad = nodes[0]

    def dbe(node, gpu, ts, d, st):
        if node == bad and gpu == 4 and ts >= fault:
            st["dbe"] = 1
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[dbe, idle_after(j, end)],
           mem_total=32768)
    g.log(j, fault, f"Mar 14 08:48:00 {bad} kernel: [ 1843.308145] NVRM: Xid (PCI:0000:87:00): 48, pid=20311, name=python, "
          "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 1, subpartition 0.",
          stream="kernel", node=bad)
    for r in (1, 9, 12):
        g.log(j, fault + 1800 * SEC + r * 30, f"[E ProcessGroupNCCL.cpp:737] [Rank {r}] Watchdog caught collective operation timeout: "
              "WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802212 milliseconds before timing out.", rank=r)
    return Scenario("old_formats_xid_and_watchdog", old_formats_xid_and_watchdog.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_hardware", {f"gpu:{bad}/4", f"gpu:{bad}/0000:87:00"}, j, failure_ts={end, j.last_progress()},
                            note="index 4 from the DBE in NVML; the bus id accepted too")], [], g)


@scenario
def old_formats_host_oom():
    """Older kernel and Slurm wording: 'Out of memory: Kill process 48213 (python) score 912 or sacrifice child'
    then 'Killed process 48213 (python) total-vm:...'; slurmstepd 'Detected 1 oom-kill event(s) in step
    7788.0 cgroup.'; job FAILED (exit 0:125 style, not OUT_OF_MEMORY)."""
    g = Gen(9004)
    nodes = ["ml-v100-21", "ml-v100-22"]
    links = {n: [{"nic": "ib0", "switch": "ib-edge-4", "port": str(i + 1), "segment": "ib-edge-4"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/nfs/scratch", "backend": "nfs", "server": "nas-old"}])
    start = T0 + 2 * MIN
    fault = start + 39 * MIN
    end = fault + 25 * SEC
    j = g.job("7788", nodes, start=start, end=end, state="failed", exit_code=125, ckpt_every=15 * MIN, stop_at=fault, user="legacy2",
              reason="NonZeroExitCode")
    bad = nodes[1]
    g.log(j, fault - 300, "Out of memory: Kill process 48213 (python) score 912 or sacrifice child", stream="kernel", node=bad)
    g.log(j, fault, "Killed process 48213 (python) total-vm:188123412kB, anon-rss:120234212kB, file-rss:0kB, shmem-rss:0kB",
          stream="kernel", node=bad)
    g.log(j, fault + 2 * SEC, "slurmstepd: error: Detected 1 oom-kill event(s) in step 7788.0 cgroup. Some of your processes may "
          "have been killed by the cgroup out-of-memory handler.", node=bad)
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)], mem_total=32768)
    return Scenario("old_formats_host_oom", old_formats_host_oom.__doc__, g.events,
                    [Expect(j.id, 0, "host_oom", f"node:{bad}", j, failure_ts={end, j.last_progress()})], [], g)



@scenario
def fallen_off_bus_without_xid():
    """Newer drivers can print the fall-off without an Xid number: 'NVRM: The NVIDIA GPU 0000:b7:00.0
    (PCI ID: 10de:2330) installed in this system has fallen off the bus and is not responding to
    commands.' (kernel stream only). GPU 6 (bus b7) stops reporting at that moment."""
    g = Gen(7908)
    nodes = ["hgx-h100-q01", "hgx-h100-q02"]
    links = {n: [{"nic": "mlx5_0", "switch": "sw-leaf-3100", "port": f"Ethernet{4 * i}", "segment": "leaf-3100"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0, links=links, storage=[{"path": "/mnt/weka", "backend": "weka", "server": "weka-fe"}],
                  versions={"driver": "570.158.01", "cuda": "12.8", "nccl": "2.26.2"})
    start = T0 + 2 * MIN
    fault = start + 42 * MIN
    end = fault + 10 * MIN + 25 * SEC
    j = g.job("pytorchjob-nofallxid-2", nodes, start=start, end=end, state="failed", exit_code=1, src="training-operator@kube-ctl",
              ckpt_every=15 * MIN, stop_at=fault)
    bad = nodes[1]
    g.gpus(nodes, T0, end + 10 * MIN, 15 * SEC, busy={n: [(start, end)] for n in nodes},
           mods=[stop_after(bad, fault, 6), idle_after(j, end)])
    g.log(j, fault, "NVRM: The NVIDIA GPU 0000:b7:00.0\n               NVRM: (PCI ID: 10de:2330) installed in this system has\n"
          "               NVRM: fallen off the bus and is not responding to commands.", stream="kernel", node=bad)
    nccl_timeouts(g, j, fault + 600 * SEC, [0, 5, 11], seq=7171)
    return Scenario("fallen_off_bus_without_xid", fallen_off_bus_without_xid.__doc__, g.events,
                    [Expect(j.id, 0, "gpu_hardware", {f"gpu:{bad}/6", f"gpu:{bad}/0000:b7:00"}, j, failure_ts={end, j.last_progress()})],
                    [], g)



@scenario
def stale_home_unrelated_user_bug():
    """/home (NFS) went stale on a job node 30 min before the job and stays stale; the job reads and
    writes only /lustre/scratch, and dies of a user KeyError that names no path. Application: a stale
    mount the job never touches did not stop it."""
    g = Gen(7013)
    nodes = ["node2101.cluster.local", "node2102.cluster.local"]
    links = {n: [{"nic": "ib0", "switch": "ib-leaf-210", "port": str(i + 1), "segment": "ib-leaf-210"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0 - HOUR, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"},
                                                              {"path": "/home", "backend": "nfs", "server": "nas-home"}])
    start = T0 + 2 * MIN
    g.mount(nodes[1], start - 30 * MIN, "/home", "stale", "Stale file handle")
    j, end = _app_job(g, "8600001", nodes, start, start + 44 * MIN,
                      "Traceback (most recent call last):\n  File \"/lustre/scratch/u/code/train.py\", line 140, in step\n"
                      "    w = self.loss_weights[task]\nKeyError: 'summarization'", rank=9, ckpt_every=15 * MIN,
                      ckpt_dir="/lustre/scratch/u/ckpt", user="u", reason="NonZeroExitCode")
    g.storage(nodes, "/lustre/scratch", "lustre", T0, end + 10 * MIN, 60 * SEC)
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)])
    return Scenario("stale_home_unrelated_user_bug", stale_home_unrelated_user_bug.__doc__, g.events,
                    [Expect(j.id, 0, "application", f"job:{j.id}", j, failure_ts={end, j.last_progress()})], [], g)


@scenario
def full_home_enoent_typo():
    """/home is FULL on the job's nodes (storage.mount full, 100 % used) but nothing is written
    there; the job dies of a FileNotFoundError (ENOENT) for a mistyped file under /home. A full disk
    does not make a file not exist: application, not storage_full."""
    g = Gen(7014)
    nodes = ["node2201.cluster.local", "node2202.cluster.local"]
    links = {n: [{"nic": "ib0", "switch": "ib-leaf-220", "port": str(i + 1), "segment": "ib-leaf-220"}] for i, n in enumerate(nodes)}
    std_inventory(g, nodes, T0 - HOUR, links=links, storage=[{"path": "/lustre/scratch", "backend": "lustre", "server": "mds01"},
                                                              {"path": "/home", "backend": "nfs", "server": "nas-home"}])
    start = T0 + 2 * MIN
    for n in nodes:
        g.mount(n, start - 20 * MIN, "/home", "full", "No space left on device")
    j, end = _app_job(g, "8700001", nodes, start, start + 36 * MIN,
                      "Traceback (most recent call last):\n  File \"/lustre/scratch/u/code/train.py\", line 30, in <module>\n"
                      "    tok = Tokenizer.from_file('/home/u/tokenizers/llama3_tokenzier.json')\n"
                      "FileNotFoundError: [Errno 2] No such file or directory: '/home/u/tokenizers/llama3_tokenzier.json'",
                      rank=0, ckpt_every=15 * MIN, ckpt_dir="/lustre/scratch/u/ckpt", user="u", reason="NonZeroExitCode")
    g.storage(nodes, "/home", "nfs4", T0, end + 10 * MIN, 60 * SEC, used=100.0)
    g.storage(nodes, "/lustre/scratch", "lustre", T0, end + 10 * MIN, 60 * SEC)
    g.gpus(nodes, T0, end + 10 * MIN, 30 * SEC, busy={n: [(start, end)] for n in nodes}, mods=[idle_after(j, end)])
    return Scenario("full_home_enoent_typo", full_home_enoent_typo.__doc__, g.events,
                    [Expect(j.id, 0, "application", f"job:{j.id}", j, failure_ts={end, j.last_progress()})], [], g)


SCENARIOS["fallen_off_bus_without_xid_no_nvml"] = lambda: _no_nvml(fallen_off_bus_without_xid)()

def build(name: str) -> Scenario:
    return SCENARIOS[name]()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="/tmp/helperJ")
    ap.add_argument("names", nargs="*")
    a = ap.parse_args(argv)
    for name in a.names or list(SCENARIOS):
        sc = build(name)
        p = sc.write(Path(a.out) / f"{name}.jsonl")
        print(f"{p}  {len(sc.events)} events")


if __name__ == "__main__":
    main()


def _no_nvml(fn):
    """Variant of a scenario without any gpu.sample (a site whose NVML exporter is not deployed)."""
    def build():
        sc = fn()
        sc.events = [e for e in sc.events if e["kind"] != "gpu.sample"]
        sc.name = fn.__name__ + "_no_nvml"
        sc.story = "(no NVML samples) " + sc.story
        return sc
    build.__name__ = fn.__name__ + "_no_nvml"
    return build
