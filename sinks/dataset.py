"""A small simulated fleet with known answers, for the trend-query tests, the notebook and
the sink benchmark: contract events (as JSON bytes) plus the ``Incident`` records the
correlator would emit for them, and the ground truth the trend queries must reproduce.

Injected patterns: GPU ``<offender>/3`` keeps failing (gpu_hardware); switch port
``<flaky_port>`` flaps (network_link); a driver upgrade on the first half of the nodes raises
their interruption rate (change_regression); everything else fails rarely and at random.

``withdrawn=N`` adds N incidents the worker raised and then withdrew (a stall that resolved
itself: revision 1 ``stalled``, revision 2 ``recovered``, as ``streams.engine`` emits them)
on completed attempts, blaming the offender GPU with a large loss: ``write`` stores both
revisions, and every query must count them nowhere (the truth leaves them out).
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..schemas.outputs import Affected, Alert, Cause, Checkpoint, EvidenceItem, Incident, Retry
from .trends import WITHDRAWN_STATE  # noqa: F401 - re-exported for tests

HOUR = 3_600_000
MIN = 60_000


@dataclass
class Dataset:
    events: list[bytes]
    incidents: list[Incident]
    alerts: list[Alert]
    t0: int
    nodes: list[str]
    offender_node: str
    offender_gpu: str
    flaky_port: str
    change_nodes: list[str]
    truth: dict[str, Any] = field(default_factory=dict)
    #: every revision of the withdrawn incidents, in emission order (``withdrawn=N``)
    withdrawn: list[Incident] = field(default_factory=list)




def build(*, n_nodes: int = 16, n_jobs: int = 120, seed: int = 7, t0: int | None = None,
          samples_per_attempt: int = 4, withdrawn: int = 0) -> Dataset:
    """Build a deterministic dataset (``t0`` defaults to 6 days ago, hour-aligned)."""
    import time

    rnd = random.Random(seed)
    if t0 is None:
        t0 = (int(time.time() * 1000) - 6 * 24 * HOUR) // HOUR * HOUR
    nodes = [f"n{i:02d}" for i in range(n_nodes)]
    offender = nodes[7 % n_nodes]
    flaky_idx = 10 % n_nodes
    seg_of = {n: f"leaf-{i // 4:02d}" for i, n in enumerate(nodes)}
    port_of = {n: f"{seg_of[n]}/Eth1/{i % 4 + 1}" for i, n in enumerate(nodes)}
    flaky_port = port_of[nodes[flaky_idx]]
    change_nodes = nodes[: n_nodes // 2]
    change_ts = t0 + 3 * 24 * HOUR
    events: list[bytes] = []
    seq = [0]

    def ev(kind: str, ts: int, data: dict[str, Any], node: str | None = None, job: str | None = None) -> str:
        seq[0] += 1
        eid = f"ev-{seed}-{seq[0]:07d}"
        events.append(orjson.dumps({"v": 1, "id": eid, "ts": ts, "kind": kind, "source": "sim",
                                    "node": node, "job": job, "tenant": "t1", "data": data}))
        return eid

    for i, n in enumerate(nodes):
        ev("inventory.topology", t0, {
            "links": [{"nic": "mlx5_0", "switch": seg_of[n], "port": port_of[n].split("/", 1)[1], "segment": seg_of[n]}],
            "storage": [{"path": "/ckpt", "backend": "nfs", "server": "nas1"}]
            + ([{"path": "/scratch", "backend": "lustre", "server": "mds1"}] if i % 2 == 0 else []),
        }, node=n)
        ev("inventory.versions", t0, {"driver": "550.54.15", "cuda": "12.4", "image": "repo/train:v1"}, node=n)
    for n in change_nodes:
        ev("inventory.change", change_ts + nodes.index(n) * MIN,
           {"component": "driver", "from": "550.54.15", "to": "570.86.10", "actor": "ops", "ticket": "CHG-1"}, node=n)
        ev("inventory.versions", change_ts + nodes.index(n) * MIN,
           {"driver": "570.86.10", "cuda": "12.8", "image": "repo/train:v1"}, node=n)

    incidents: list[Incident] = []
    alerts: list[Alert] = []
    attempts_meta: list[dict[str, Any]] = []
    span = 6 * 24 * HOUR - 12 * HOUR
    for j in range(n_jobs):
        job = str(48000 + j)
        start = t0 + HOUR + rnd.randrange(0, span) // MIN * MIN
        k = 2
        ns = rnd.sample(nodes, k)
        if j % 6 == 0 and offender not in ns:  # the offender runs a fair share of jobs
            ns[0] = offender
        if j % 9 == 0 and nodes[flaky_idx] not in ns:
            ns[-1] = nodes[flaky_idx]
        image = "repo/train:v2" if j % 5 == 0 else "repo/train:v1"
        gpus = 8 * k
        attempt = 0
        while attempt < 3:
            dur = rnd.randrange(2 * HOUR, 10 * HOUR) // MIN * MIN
            # decide the fate of this attempt
            cause: tuple[str, str] | None = None
            if offender in ns and rnd.random() < 0.75:
                cause = ("gpu_hardware", f"gpu:{offender}/3")
            elif nodes[flaky_idx] in ns and rnd.random() < 0.6:
                cause = ("network_link", f"port:{flaky_port}")
            elif any(n in change_nodes for n in ns) and start >= change_ts and rnd.random() < 0.4:
                cause = ("change_regression", "version:driver=570.86.10")
            elif rnd.random() < 0.08:
                cat = rnd.choice(["storage_slow", "application", "host_oom", "network_congestion"])
                comp = {"storage_slow": "path:/ckpt", "application": f"job:{job}", "host_oom": f"node:{ns[0]}",
                        "network_congestion": f"segment:{seg_of[ns[0]]}"}[cat]
                cause = (cat, comp)
            fail_at = start + (rnd.randrange(HOUR, dur) // 1000 * 1000 if cause else dur)
            end = fail_at + (2 * MIN if cause else 0)
            state = "failed" if cause else "completed"
            base = {"attempt": attempt, "nodes": ns, "gpus": gpus, "image": image, "name": f"train-{j}",
                    "user": "alice", "ranks": {}}
            ev("sched.job", start - 5 * MIN, {**base, "state": "pending"}, job=job)
            ev("sched.job", start, {**base, "state": "running", "start_ts": start}, job=job)
            # checkpoints every 30 min; one in 8 fails
            last_ok = None
            t = start + 30 * MIN
            while t < fail_at:
                ev("runtime.checkpoint", t, {"phase": "started", "step": (t - start) // MIN, "path": "/ckpt/" + job}, node=ns[0], job=job)
                ok = rnd.random() >= 0.125
                ev("runtime.checkpoint", t + MIN // 2, {"phase": "succeeded" if ok else "failed",
                   "step": (t - start) // MIN, "path": "/ckpt/" + job, "duration_s": 30.0,
                   "error": None if ok else "EIO"}, node=ns[0], job=job)
                if ok and t + MIN // 2 <= fail_at:
                    last_ok = (t + MIN // 2, (t - start) // MIN)
                t += 30 * MIN
            for s in range(samples_per_attempt):
                ts = start + (fail_at - start) * s // max(samples_per_attempt, 1)
                ev("runtime.progress", ts, {"rank": 0, "step": (ts - start) // MIN, "step_time_s": 1.5}, node=ns[0], job=job)
                for n in ns:
                    ev("gpu.sample", ts, {"gpu": 3, "uuid": f"GPU-{n}-3", "util_pct": 95.0, "temp_c": 70.0 + s,
                                          "power_w": 650.0, "ecc_dbe": 0}, node=n)
            ev("sched.job", end, {**base, "state": state, "start_ts": start, "end_ts": end,
                                  "exit_code": 1 if cause else 0}, job=job)
            attempts_meta.append({"job": job, "attempt": attempt, "start": start, "end": end, "nodes": ns,
                                  "cause": cause})
            if cause:
                cat, comp = cause
                evid = []
                if cat == "gpu_hardware":
                    eid = ev("gpu.xid", fail_at - 5000, {"gpu": 3, "xid": 79, "message": "GPU has fallen off the bus"}, node=offender)
                    evid.append(EvidenceItem(id=eid, ts=fail_at - 5000, layer="gpu", node=offender, summary="XID 79 on gpu 3"))
                elif cat == "network_link":
                    dev, port = flaky_port.split("/", 1)
                    eid = ev("net.link", fail_at - 8000, {"device": dev, "port": port, "state": "down"}, node=nodes[flaky_idx])
                    evid.append(EvidenceItem(id=eid, ts=fail_at - 8000, layer="net", node=nodes[flaky_idx], summary=f"{flaky_port} down"))
                eid = ev("runtime.log", fail_at, {"rank": 0, "stream": "stderr", "message": "NCCL watchdog timeout"}, node=ns[0], job=job)
                evid.append(EvidenceItem(id=eid, ts=fail_at, layer="runtime", node=ns[0], summary="nccl timeout"))
                ck_ts = max(last_ok[0], start) if last_ok else start
                lost = gpus * (fail_at - ck_ts) / HOUR
                affected = Affected(nodes=list(ns),
                                    gpus=[comp[4:]] if comp.startswith("gpu:") else [],
                                    ports=[flaky_port] if cat == "network_link" else [],
                                    paths=["/ckpt"] if cat == "storage_slow" else [])
                inc = Incident(
                    id=f"inc-{job}-{attempt}", revision=1, job=job, attempt=attempt, tenant="t1",
                    failure_ts=fail_at, symptom="nccl_timeout on rank 0",
                    root_cause=Cause(category=cat, component=comp, summary=f"{cat} at {comp}", confidence=0.9),
                    ruled_out=[x for x in ("hw", "storage") if x not in cat],
                    evidence=sorted(evid, key=lambda e: e.ts),
                    last_checkpoint=Checkpoint(ts=last_ok[0], step=last_ok[1], path="/ckpt/" + job) if last_ok else None,
                    lost_gpu_hours=lost, affected=affected, state="failed", start_ts=start, gpus=gpus, image=image,
                )
                incidents.append(inc)
                alerts.append(Alert(id=f"al-{job}-{attempt}", ts=fail_at - 4000, severity="critical",
                                    detector=cat, summary=inc.root_cause.summary, node=ns[0], job=job,
                                    evidence=[e.id for e in evid], subject=comp))
                # requeue on other nodes, or give up after the third attempt
                attempt += 1
                ns = rnd.sample([n for n in nodes if n not in ns], k) if attempt < 3 else ns
                start = end + 10 * MIN
            else:
                break
    # retries are known: revision 2 of each incident carries the next attempt (latest wins)
    by_job: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for a in attempts_meta:
        by_job[a["job"]][a["attempt"]] = a
    final: list[Incident] = []
    for inc in incidents:
        nxt = by_job[inc.job].get(inc.attempt + 1)
        if nxt:
            import msgspec

            inc = msgspec.structs.replace(inc, revision=2, retry=Retry(
                attempt=nxt["attempt"], state="completed" if not nxt["cause"] else "failed", ts=nxt["start"],
                nodes=nxt["nodes"], same_nodes=set(nxt["nodes"]) == set(inc.affected.nodes)))
        final.append(inc)

    lost_by_cat: dict[str, float] = defaultdict(float)
    for inc in final:
        lost_by_cat[inc.root_cause.category] += inc.lost_gpu_hours
    ds = Dataset(events=events, incidents=final, alerts=alerts, t0=t0, nodes=nodes, offender_node=offender,
                 offender_gpu=f"{offender}/3", flaky_port=flaky_port, change_nodes=change_nodes)
    ds.truth = {
        "incidents": len(final),
        "attempts": len(attempts_meta),
        "lost_by_category": dict(lost_by_cat),
        "first_revisions": [i for i in incidents if any(f.id == i.id and f.revision > i.revision for f in final)],
        "attempts_meta": attempts_meta,
    }
    ds.withdrawn = _withdrawn(attempts_meta, offender, withdrawn)
    return ds


def _withdrawn(attempts_meta: list[dict[str, Any]], offender: str, n: int) -> list[Incident]:
    """Both revisions of ``n`` withdrawn incidents on completed attempts (see module doc)."""
    import msgspec

    out: list[Incident] = []
    done = [a for a in attempts_meta if not a["cause"]][:n]
    for a in done:
        mid = (a["start"] + a["end"]) // 2 // 1000 * 1000
        stalled = Incident(
            id=f"inc-{a['job']}-{a['attempt']}-stall", revision=1, job=a["job"], attempt=a["attempt"],
            tenant="t1", failure_ts=mid, symptom="no progress for 10 min",
            root_cause=Cause(category="gpu_hardware", component=f"gpu:{offender}/3", summary="stall", confidence=0.5),
            ruled_out=[], evidence=[], last_checkpoint=None, lost_gpu_hours=100.0,
            affected=Affected(nodes=[*a["nodes"], offender], gpus=[f"{offender}/3"], ports=[], paths=[]),
            state="stalled", start_ts=a["start"], gpus=16, image="repo/train:v1")
        out += [stalled, msgspec.structs.replace(stalled, revision=2, state=WITHDRAWN_STATE)]
    return out


def write(store: Any, ds: Dataset, *, twice: bool = False) -> None:
    """Insert the dataset (events, alerts, incidents; every revision in order). ``twice``
    re-delivers everything and re-sends the older revisions last, as a crash would."""
    from .writer import SinkWriter

    w = SinkWriter(store, max_rows=1_000_000)
    rounds = 2 if twice else 1
    for r in range(rounds):
        w.add_raws(ds.events)
        for a in ds.alerts:
            w.add_alert(a)
        for i in ds.truth["first_revisions"] if r == 0 else []:
            w.add_incident(i)
        for i in ds.incidents:
            w.add_incident(i)
        for i in ds.withdrawn:   # raised, then withdrawn: the later revision wins
            w.add_incident(i)
        if r == 1:
            for i in ds.truth["first_revisions"]:  # stale revisions arriving late
                w.add_incident(i)
            for i in ds.withdrawn[::2]:            # a withdrawn incident's raising revision, late
                w.add_incident(i)
        w.flush()
