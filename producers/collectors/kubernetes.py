"""``faultline collect kubernetes``: training-job pods and nodes -> ``sched.job``,
``runtime.container``, ``sched.node``.

Each round lists pods (label selector ``--selector``, default: pods carrying the job label)
and nodes through the official ``kubernetes`` client. The raw JSON is read
(``_preload_content=False``) and parsed as plain dicts, with no model objects built per pod.

* A **job** is the value of ``--job-label`` (default ``job-name``, set by batch/v1 Jobs; use
  ``training.kubeflow.org/job-name`` for Kubeflow trainers). Its pods are folded into one
  state:
  - any pod OOMKilled -> ``out_of_memory``;
  - a pod evicted or preempted -> ``preempted``;
  - ``DeadlineExceeded`` -> ``timeout``;
  - any pod Failed -> ``failed`` (exit code / signal of the failing container; 128+N is not
    turned into a signal);
  - all Succeeded -> ``completed``;
  - any Running -> ``running``;
  - else ``pending``.
  ``attempt`` is the highest container restart count, ``nodes`` the pods' nodes, ``gpus``
  the sum of ``nvidia.com/gpu`` limits. Only changes of (state, attempt) are emitted.
* ``runtime.container``: a container that terminated with OOMKilled (``oom_killed``) or that
  restarted (``restarted``, once per new restart count).
* ``sched.node``:
  - cordoned (``spec.unschedulable``) -> ``drain`` (reason: the NoSchedule taint or
    "cordoned");
  - Ready False/Unknown -> ``down`` (reason: the condition's message);
  - otherwise ``allocated`` if a job pod runs there, else ``idle``.

Not tested against a live API server: none can run on the test machine (see
docs/collectors-fabric.md). The parsers are tested on pod and node JSON in the API's own shape.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import logging
from datetime import datetime
from typing import Any

import orjson

from ...config import Settings
from ...schemas import now_ms
from ...schemas.events import (
    RuntimeContainer, RuntimeContainerData, SchedJob, SchedJobData, SchedNode, SchedNodeData,
)
from .base import Collector

NAME = "kubernetes"
HELP = "Kubernetes training-job pods and nodes -> sched.job, runtime.container, sched.node"
INTERVAL_S = 10.0

log = logging.getLogger("faultline.collect.kubernetes")


def _ms(ts: str | None) -> int | None:
    if not ts:
        return None
    try:
        return int(datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def _sid(*parts: object) -> str:
    return hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=16).hexdigest()


def _gpus(pod: dict[str, Any]) -> int:
    n = 0
    for c in pod.get("spec", {}).get("containers", []) or []:
        lim = ((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu")
        try:
            n += int(lim) if lim is not None else 0
        except ValueError:
            pass
    return n


def _terminated(cs: dict[str, Any]) -> dict[str, Any] | None:
    st = (cs.get("state") or {}).get("terminated")
    return st or (cs.get("lastState") or {}).get("terminated")


def job_record(job: str, pods: list[dict[str, Any]]) -> dict[str, Any]:
    """Fold the pods of one job into (state, attempt, nodes, gpus, exit_code, reason, times)."""
    phases = [p.get("status", {}).get("phase", "Pending") for p in pods]
    statuses = [cs for p in pods for cs in (p.get("status", {}).get("containerStatuses") or [])]
    reasons = {p.get("status", {}).get("reason") for p in pods}
    attempt = max((cs.get("restartCount", 0) for cs in statuses), default=0)
    term = [t for t in (_terminated(cs) for cs in statuses) if t]
    failed_term = [t for t in term if t.get("exitCode", 0) != 0]
    exit_code = reason = None
    if any(t.get("reason") == "OOMKilled" for t in term) and "Running" not in phases:
        state, reason = "out_of_memory", "OOMKilled"
    elif reasons & {"Evicted", "Preempting", "Preempted"}:
        state, reason = "preempted", next(r for r in reasons if r in {"Evicted", "Preempting", "Preempted"})
    elif "DeadlineExceeded" in reasons:
        state, reason = "timeout", "DeadlineExceeded"
    elif "Failed" in phases:
        state = "failed"
        if failed_term:
            exit_code, reason = failed_term[0].get("exitCode"), failed_term[0].get("reason")
    elif phases and all(ph == "Succeeded" for ph in phases):
        state, exit_code = "completed", 0
    elif "Running" in phases:
        state = "running"
    else:
        state = "pending"
    starts = [s for s in (_ms(p.get("status", {}).get("startTime")) for p in pods) if s]
    ends = [s for s in (_ms(t.get("finishedAt")) for t in term) if s]
    first = pods[0].get("metadata", {}) if pods else {}
    return {
        "job": job, "state": state, "attempt": attempt,
        "nodes": sorted({p["spec"]["nodeName"] for p in pods if p.get("spec", {}).get("nodeName")}),
        "gpus": sum(_gpus(p) for p in pods), "exit_code": exit_code, "reason": reason,
        "name": (first.get("labels") or {}).get("app") or job, "tenant": first.get("namespace"),
        "start_ts": min(starts) if starts else None, "end_ts": max(ends) if ends else None,
        "image": next((c.get("image") for p in pods for c in p.get("spec", {}).get("containers", [])), None),
    }


def node_record(node: dict[str, Any], busy: set[str]) -> tuple[str, str, str | None]:
    name = node["metadata"]["name"]
    spec = node.get("spec") or {}
    if spec.get("unschedulable"):
        taints = [t for t in spec.get("taints") or [] if t.get("effect") == "NoSchedule"]
        return name, "drain", (taints[0].get("value") or taints[0].get("key")) if taints else "cordoned"
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready" and c.get("status") != "True":
            return name, "down", c.get("message") or c.get("reason")
    return name, "allocated" if name in busy else "idle", None


class KubernetesCollector(Collector):
    name = NAME
    interval_s = INTERVAL_S

    def __init__(self, *, job_label: str = "job-name", selector: str | None = None, namespace: str | None = None,
                 cluster: str = "k8s", kubeconfig: str | None = None, nodes: bool = True) -> None:
        self.job_label = job_label
        self.selector = selector or job_label
        self.namespace = namespace
        self.source = f"kubernetes@{cluster}"
        self.kubeconfig = kubeconfig
        self.with_nodes = nodes
        self._api = None
        self.jobs: dict[str, tuple[str, int]] = {}
        self.restarts: dict[tuple[str, str], int] = {}
        self.ooms: set[tuple[str, str, str]] = set()
        self.nodes: dict[str, tuple[str, str | None]] = {}

    def _core(self):
        if self._api is None:
            try:
                from kubernetes import client, config
            except ImportError:
                raise RuntimeError("the kubernetes client is not installed: pip install 'faultline[k8s]'") from None

            try:
                config.load_incluster_config()
            except config.ConfigException:
                config.load_kube_config(config_file=self.kubeconfig)
            self._api = client.CoreV1Api()
        return self._api

    def _list(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        api = self._core()
        if self.namespace:
            r = api.list_namespaced_pod(self.namespace, label_selector=self.selector, _preload_content=False)
        else:
            r = api.list_pod_for_all_namespaces(label_selector=self.selector, _preload_content=False)
        pods = orjson.loads(r.data).get("items", [])
        nodes = orjson.loads(api.list_node(_preload_content=False).data).get("items", []) if self.with_nodes else []
        return pods, nodes

    async def collect(self) -> list[SchedJob | SchedNode | RuntimeContainer]:
        pods, nodes = await asyncio.to_thread(self._list)
        return self.changes(pods, nodes, now_ms())

    def changes(self, pods: list[dict[str, Any]], nodes: list[dict[str, Any]], now: int
                ) -> list[SchedJob | SchedNode | RuntimeContainer]:
        out: list[SchedJob | SchedNode | RuntimeContainer] = []
        by_job: dict[str, list[dict[str, Any]]] = {}
        for p in pods:
            job = ((p.get("metadata") or {}).get("labels") or {}).get(self.job_label)
            if job:
                by_job.setdefault(job, []).append(p)
        busy: set[str] = set()
        for job, jp in by_job.items():
            rec = job_record(job, jp)
            if rec["state"] == "running":
                busy.update(rec["nodes"])
            key = (rec["state"], rec["attempt"])
            if self.jobs.get(job) != key:
                self.jobs[job] = key
                terminal = rec["state"] not in ("pending", "running")
                ts = (rec["end_ts"] if terminal else rec["start_ts"]) or now
                out.append(SchedJob(v=1, id=_sid(self.source, job, rec["attempt"], rec["state"]), ts=min(ts, now),
                                    source=self.source, job=job, tenant=rec["tenant"], data=SchedJobData(
                    state=rec["state"], attempt=rec["attempt"], nodes=rec["nodes"], gpus=rec["gpus"],
                    name=rec["name"], exit_code=rec["exit_code"] if terminal else None,
                    image=rec["image"], start_ts=rec["start_ts"], end_ts=rec["end_ts"] if terminal else None,
                    reason=rec["reason"])))
            for p in jp:
                pod = p["metadata"]["name"]
                for cs in p.get("status", {}).get("containerStatuses") or []:
                    cname = f"{pod}/{cs.get('name')}"
                    t = _terminated(cs)
                    if t and t.get("reason") == "OOMKilled" and (cname, str(t.get("finishedAt")), "oom") not in self.ooms:
                        self.ooms.add((cname, str(t.get("finishedAt")), "oom"))
                        out.append(RuntimeContainer(
                            v=1, id=_sid(self.source, cname, t.get("finishedAt"), "oom"),
                            ts=min(_ms(t.get("finishedAt")) or now, now), source=self.source, job=job,
                            node=p.get("spec", {}).get("nodeName"),
                            data=RuntimeContainerData(container=cname, event="oom_killed", exit_code=t.get("exitCode"))))
                    rc = cs.get("restartCount", 0)
                    if rc > self.restarts.get((job, cname), 0):
                        self.restarts[(job, cname)] = rc
                        out.append(RuntimeContainer(
                            v=1, id=_sid(self.source, cname, rc, "restart"), ts=now, source=self.source, job=job,
                            node=p.get("spec", {}).get("nodeName"),
                            data=RuntimeContainerData(container=cname, event="restarted",
                                                      exit_code=t.get("exitCode") if t else None)))
        for n in nodes:
            name, state, reason = node_record(n, busy)
            if self.nodes.get(name) != (state, reason):
                self.nodes[name] = (state, reason)
                out.append(SchedNode(v=1, id=_sid(self.source, name, state, reason, now // 1000), ts=now,
                                     source=self.source, node=name, data=SchedNodeData(state=state, reason=reason)))
        if len(self.ooms) > 100_000:
            self.ooms.clear()
        return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--job-label", default="job-name",
                   help="pod label naming the job (default job-name; Kubeflow: training.kubeflow.org/job-name)")
    p.add_argument("--selector", help="label selector of training pods (default: the job label exists)")
    p.add_argument("--namespace", help="only this namespace (default all)")
    p.add_argument("--cluster", default="k8s", help="cluster name for the event source")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, then ~/.kube/config)")
    p.add_argument("--no-nodes", action="store_true", help="do not emit sched.node")


def build(args: argparse.Namespace, settings: Settings) -> KubernetesCollector:
    return KubernetesCollector(job_label=args.job_label, selector=args.selector, namespace=args.namespace,
                               cluster=args.cluster, kubeconfig=args.kubeconfig, nodes=not args.no_nodes)
