"""Shared harness of the reliability tests: a real pipeline driven from a test.

The pieces (each usable alone):

- ``fleet_traffic(seed)``: a small fleet's events from the simulator (several labelled
  interruptions, healthy jobs, decoys), stamped so they end ~30 min ago (inside retention).
- ``Expectation.of(lines, settings)``: what ``faultline diagnose`` (the in-process Engine)
  says over exactly those events: the latest state of every incident it ever emitted
  (withdrawn ones included, with ``state="recovered"``) and every revision.
- ``Feeder``: publishes the events from a thread at a fixed rate (events/s), so input is
  still flowing while the test kills or starts processes; ``wait_fraction(f)``.
- ``IncidentLog``: reads every revision of every incident from fl.incidents, from the
  beginning, in a background thread, with the wall time each one arrived.
- ``Fleet``: the sink and the analysis workers as child processes (``faust_harness``):
  ``add_worker()``, ``kill()``, ``stop()``, logs on failure.
- ``group_lag``/``wait_drained``: committed offsets vs end offsets of the input topics.
- ``store_event_counts``: after the sink stopped, how often every event id is in the store
  under FINAL (must be exactly once).
- ``check_incidents``: the comparisons every reliability test makes, as a list of problems.
- ``settle_and_check``: ``settle`` (wait for the incidents and the lag, compare, stop nothing:
  a test may check after each of several failures, ``test_broker_failures.py``), then stop
  the workers and the sink and ``check_store``; ``Traffic.head(n)``: the events produced so far.

Every test prints its seed and a timing line (``Timeline``) when it fails, so a failure
reproduces with the same seed.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable

import msgspec
import orjson

from faultline.config import Settings
from faultline.producers.publish import Publisher
from faultline.producers.simulate import simulate
from faultline.producers.simulate.kafka import topic_key
from faultline.schemas.codec import now_ms
from faultline.schemas.registry import INCIDENTS, INPUT_TOPICS, LAYER_TOPICS
from faultline.streams import faust_harness
from faultline.streams.engine import Engine, EngineConfig
from faultline.streams.faust_harness import WorkerProcess

#: a busy fleet in a short window: 6 labelled interruptions (gpu, network, oom x2,
#: application x2), healthy jobs and every decoy; ~48k events for 8 nodes and 1 h
SCENARIO = "mixed"
NODES = 8
HOURS = 1.0
#: partitions per topic: several (workers split them, the join crosses them), quick start
PARTITIONS = 3

#: the fields issue 14 names for "the incidents equal diagnose's"
KEY_FIELDS = ("job", "attempt", "category", "component", "last_checkpoint", "lost_gpu_hours", "retry", "state")
#: what every revision (not only the latest) must share with one of diagnose's revisions of
#: the same incident: which attempt failed, why, where, and whether it stalled or ended. The
#: other fields (lost GPU-h, retry, checkpoint) of an intermediate revision follow the
#: batching of the input and are compared on the latest revision only.
REVISION_FIELDS = ("job", "attempt", "category", "component", "state")


# ---------------------------------------------------------------------------- traffic
@dataclass
class Traffic:
    seed: int
    lines: list[bytes]
    ids: dict[str, set[str]]          # layer -> event ids produced
    labels: dict

    @property
    def n(self) -> int:
        return len(self.lines)

    def head(self, n: int) -> "Traffic":
        """The first ``n`` events (what has been produced so far), their ids per layer."""
        ids: dict[str, set[str]] = defaultdict(set)
        for line in self.lines[:n]:
            d = orjson.loads(line)
            ids[d["kind"].split(".", 1)[0]].add(d["id"])
        return Traffic(self.seed, self.lines[:n], dict(ids), self.labels)


def fleet_traffic(seed: int, *, scenario: str = SCENARIO, nodes: int = NODES, hours: float = HOURS,
                  end_ago_min: int = 30, day_start_ms: int | None = None) -> Traffic:
    """The simulator's events for ``scenario``; the window ends ``end_ago_min`` ago.
    ``day_start_ms``: the time of day the job arrivals follow (None: the window's own, so the
    story depends on the hour the test runs; pinned, it is one at any hour)."""
    start = (now_ms() - int((hours * 60 + end_ago_min) * 60_000)) // 60_000 * 60_000
    if os.environ.get("FAULTLINE_TRAFFIC_START_MS"):   # a failing run's traffic (the simulator's day)
        start = int(os.environ["FAULTLINE_TRAFFIC_START_MS"])
    lines, labels = simulate(scenario, seed=seed, nodes=nodes, hours=hours, start_ms=start,
                             day_start_ms=day_start_ms)
    ids: dict[str, set[str]] = defaultdict(set)
    for line in lines:
        d = orjson.loads(line)
        ids[d["kind"].split(".", 1)[0]].add(d["id"])
    return Traffic(seed, lines, dict(ids), labels)


#: a SIGKILLed worker's partitions move after this (the broker's minimum): the crash and
#: rebalance trials wait it out once per kill, and the 15 s default made that most of their time
SESSION_TIMEOUT_MS = 6_000


#: the trials replay an hour of fleet events in 30-60 s (60-110x real time), so the default
#: 10 s lateness bound is ~0.1-0.2 s of wall time here, less than one fetch round trip: a
#: record of a partition that had been caught up (a sparse fl.sched one) could be passed by
#: event time before its fetch returned, which real-time input never sees (10 s against
#: ~0.1 s of fetch latency). Scaled with the compression; diagnose gets the same setting.
LATENESS_MS = 120_000


def pipeline_settings(settings: Settings, partitions: int = PARTITIONS) -> Settings:
    """The per-test settings (conftest ``settings``) with the reliability tests' partitions,
    the shortest session timeout the broker accepts and a lateness bound scaled to the
    trials' compressed time (``LATENESS_MS``)."""
    return replace(settings, topic_partitions=partitions, worker_session_timeout_ms=SESSION_TIMEOUT_MS,
                   lateness_ms=LATENESS_MS)


# ---------------------------------------------------------------------------- expectation
def key_view(inc: dict) -> dict:
    """The compared fields of one incident record (a dict as on fl.incidents)."""
    rc = inc.get("root_cause") or {}
    return {"job": inc.get("job"), "attempt": inc.get("attempt"), "category": rc.get("category"),
            "component": rc.get("component"), "last_checkpoint": inc.get("last_checkpoint"),
            "lost_gpu_hours": inc.get("lost_gpu_hours"), "retry": inc.get("retry"),
            "state": inc.get("state")}


def revision_view(inc: dict) -> dict:
    kv = key_view(inc)
    return {k: kv[k] for k in REVISION_FIELDS}


@dataclass
class Expectation:
    latest: dict[str, dict]                       # id -> latest record (without revision)
    revisions: dict[str, list[dict]]              # id -> every revision, in order
    seconds: float = 0.0

    @classmethod
    def of(cls, lines: Iterable[bytes], settings: Settings) -> "Expectation":
        """``faultline diagnose`` over ``lines``: the Engine, every output kept."""
        t0 = time.monotonic()
        eng = Engine(EngineConfig.from_settings(settings))
        outs = list(eng.process(lines))
        outs += eng.finish()
        revs: dict[str, list[dict]] = defaultdict(list)
        for o in outs:
            if hasattr(o, "revision"):
                revs[o.id].append(msgspec.to_builtins(o))
        latest = {i: faust_harness.without_revision(max(r, key=lambda d: d["revision"])) for i, r in revs.items()}
        # the Engine's own latest (withdrawn incidents leave it): must agree with the stream
        live = {i.id for i in eng.incidents()}
        assert live == {i for i, d in latest.items() if d.get("state") != "recovered"}
        return cls(latest, dict(revs), time.monotonic() - t0)

    @property
    def live(self) -> dict[str, dict]:
        """Incidents still standing at the end (what `faultline incidents` must list)."""
        return {i: d for i, d in self.latest.items() if d.get("state") != "recovered"}


# ---------------------------------------------------------------------------- timeline
class Timeline:
    """Wall-clock marks of one trial (seconds since its start), printed when it fails."""

    def __init__(self, seed: int | None = None) -> None:
        self.t0 = time.monotonic()
        self.seed = seed
        self.marks: list[tuple[float, str]] = []

    def mark(self, what: str) -> float:
        t = time.monotonic() - self.t0
        self.marks.append((t, what))
        print(f"[{t:7.2f}s] {what}", flush=True)
        return t

    def at(self, what: str) -> float | None:
        for t, w in self.marks:
            if w == what:
                return t
        return None

    def __str__(self) -> str:
        head = f"seed={self.seed} " if self.seed is not None else ""
        return head + "timeline: " + "; ".join(f"{t:.1f}s {w}" for t, w in self.marks)


# ---------------------------------------------------------------------------- feeder
class Feeder:
    """Publishes ``lines`` at ``rate`` events/s from a thread (its own event loop), each to
    its topic with its key and its event ts as the record timestamp.

    ``wait_fraction(f)`` blocks until that share of the input is sent; ``join()`` until all
    of it is acknowledged by the broker.
    """

    def __init__(self, settings: Settings, lines: list[bytes], rate: float, *, chunk: int = 100,
                 producer_time: Iterable[int] = ()) -> None:
        self.settings = settings
        self.lines = lines
        self.rate = rate
        self.chunk = chunk
        #: indexes of lines sent without the event ts as record timestamp (the producer's clock)
        self.producer_time = set(producer_time)
        self.refused: list[tuple[int, str]] = []     # (line index, error) of every refused record
        self.sent = 0
        self.error: BaseException | None = None
        self.started_at: float | None = None
        self.finished_at: float | None = None
        self._thread = threading.Thread(target=self._run, name="feeder", daemon=True)
        self._sent_cv = threading.Condition()

    def start(self) -> "Feeder":
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            asyncio.run(self._feed())
        except BaseException as e:  # noqa: BLE001 - reported by join()
            self.error = e
        finally:
            with self._sent_cv:
                self._sent_cv.notify_all()

    async def _feed(self) -> None:
        async with Publisher(self.settings, compression=None) as pub:
            self.started_at = t0 = time.monotonic()
            futs: list[tuple[int, Any]] = []
            for i in range(0, len(self.lines), self.chunk):
                for j, line in enumerate(self.lines[i:i + self.chunk], i):
                    topic, key, ts = topic_key(line)
                    futs.append((j, await pub.send_raw(topic, key, line, None if j in self.producer_time else ts)))
                n = min(i + self.chunk, len(self.lines))
                with self._sent_cv:
                    self.sent = n
                    self._sent_cv.notify_all()
                delay = t0 + n / self.rate - time.monotonic()
                await asyncio.sleep(max(delay, 0))
            await pub.flush()
            results = await asyncio.gather(*(f for _, f in futs), return_exceptions=True)
            self.refused = [(j, f"{type(r).__name__}: {r}") for (j, _), r in zip(futs, results)
                            if isinstance(r, BaseException)]
            self.finished_at = time.monotonic()

    def wait_fraction(self, f: float, timeout_s: float = 300.0) -> None:
        want = int(len(self.lines) * f)
        deadline = time.monotonic() + timeout_s
        with self._sent_cv:
            while self.sent < want and self.error is None and self._thread.is_alive():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"feeder: {self.sent}/{len(self.lines)} sent after {timeout_s} s")
                self._sent_cv.wait(min(left, 0.5))
        if self.error is not None:
            raise self.error

    def join(self, timeout_s: float = 300.0) -> None:
        """Until every record is sent and acknowledged; fails naming the records the broker
        refused (a test that lost its own input must not go on)."""
        self._thread.join(timeout_s)
        if self.error is not None:
            raise self.error
        assert not self._thread.is_alive(), "feeder did not finish"
        if self.refused:
            errs = Counter(e for _, e in self.refused)
            raise AssertionError(f"the broker refused {len(self.refused)} of {len(self.lines)} records "
                                 f"(first line index {self.refused[0][0]}): {dict(errs)}")

    @property
    def seconds(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return self.finished_at - self.started_at


# ---------------------------------------------------------------------------- fl.incidents
class IncidentLog:
    """Every record of fl.incidents from the beginning, read in a background thread.

    ``records``: (wall time since ``start()``, incident dict) in arrival order;
    ``latest()``: id -> highest revision (without ``revision``).
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.records: list[tuple[float, dict]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="incident-log", daemon=True)
        self.t0 = time.monotonic()

    def start(self) -> "IncidentLog":
        self._thread.start()
        self._ready.wait(30)
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)

    def _run(self) -> None:
        try:
            asyncio.run(self._read())
        except BaseException as e:  # noqa: BLE001
            self.error = e
            self._ready.set()

    async def _read(self) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        name = self.settings.topic(INCIDENTS)
        c = AIOKafkaConsumer(**self.settings.kafka_kwargs(), enable_auto_commit=False,
                             auto_offset_reset="earliest", group_id=None)
        await c.start()
        try:
            parts = c.partitions_for_topic(name)
            while not parts and not self._stop.is_set():
                await asyncio.sleep(0.2)
                await c._client.force_metadata_update()
                parts = c.partitions_for_topic(name)
            tps = [TopicPartition(name, p) for p in sorted(parts or ())]
            c.assign(tps)
            await c.seek_to_beginning(*tps)
            self._ready.set()
            while not self._stop.is_set():
                batch = await c.getmany(timeout_ms=200)
                now = time.monotonic() - self.t0
                with self._lock:
                    for recs in batch.values():
                        for r in recs:
                            self.records.append((now, orjson.loads(r.value)))
        finally:
            await c.stop()

    def snapshot(self) -> list[tuple[float, dict]]:
        with self._lock:
            return list(self.records)

    def latest(self) -> dict[str, dict]:
        best: dict[str, dict] = {}
        for _, d in self.snapshot():
            if d["id"] not in best or best[d["id"]]["revision"] < d["revision"]:
                best[d["id"]] = d
        return {k: faust_harness.without_revision(v) for k, v in best.items()}

    def last_arrival(self) -> float:
        recs = self.snapshot()
        return recs[-1][0] if recs else 0.0

    def wait(self, exp: Expectation, *, timeout_s: float, quiet_s: float = 3.0,
             give_up_quiet_s: float = 45.0) -> bool:
        """Wait until the latest revisions equal ``exp`` and nothing new arrived for
        ``quiet_s`` (a later transient revision would show), or nothing at all arrived for
        ``give_up_quiet_s`` while they still differ (a failing trial ends early)."""
        deadline = time.monotonic() + timeout_s
        since = time.monotonic() - self.t0
        while time.monotonic() < deadline:
            now = time.monotonic() - self.t0
            quiet = now - max(self.last_arrival(), since)
            if self.latest() == exp.latest and quiet >= quiet_s:
                return True
            if quiet >= give_up_quiet_s:
                return False
            time.sleep(0.25)
        return False


# ---------------------------------------------------------------------------- comparisons
def check_incidents(exp: Expectation, records: list[tuple[float, dict]]) -> list[str]:
    """Every problem of the worker's incident stream against diagnose, as text lines.

    - every incident id ever emitted is one diagnose emits (no extra incident, not even a
      revision that is later withdrawn);
    - every revision's ``REVISION_FIELDS`` are those of one of diagnose's revisions of that
      incident (no transient revision built from partial history, e.g. a stall of an attempt
      diagnose sees fail with a cause);
    - the latest revision of every incident equals diagnose's latest (every field).
    """
    problems: list[str] = []
    by_id: dict[str, list[tuple[float, dict]]] = defaultdict(list)
    for t, d in records:
        by_id[d["id"]].append((t, d))
    for iid, recs in sorted(by_id.items()):
        if iid not in exp.latest:
            first = recs[0][1]
            problems.append(
                f"extra incident {iid}: {len(recs)} revision(s) at {', '.join(f'{t:.2f}s' for t, _ in recs)}; "
                f"first {key_view(first)}; last state {recs[-1][1].get('state')!r}")
            continue
        allowed = [revision_view(d) for d in exp.revisions[iid]]
        for t, d in recs:
            kv = revision_view(d)
            if kv not in allowed:
                problems.append(f"transient revision {iid} r{d['revision']} at {t:.2f}s not among diagnose's "
                                f"revisions: {kv}; diagnose: {allowed}")
    got = {}
    for iid, recs in by_id.items():
        got[iid] = faust_harness.without_revision(max((d for _, d in recs), key=lambda d: d["revision"]))
    for iid in sorted(set(exp.latest) - set(got)):
        problems.append(f"missing incident {iid}: diagnose {key_view(exp.latest[iid])}")
    for iid in sorted(set(exp.latest) & set(got)):
        e, g = exp.latest[iid], got[iid]
        for k in sorted(set(e) | set(g)):
            if e.get(k) != g.get(k):
                problems.append(f"{iid}.{k}: {_diff(g.get(k), e.get(k))}")
    return problems


def _diff(got: Any, exp: Any) -> str:
    """worker vs diagnose value of one field; for lists, the items only on either side."""
    if isinstance(got, list) and isinstance(exp, list):
        g = [orjson.dumps(x, option=orjson.OPT_SORT_KEYS) for x in got]
        e = [orjson.dumps(x, option=orjson.OPT_SORT_KEYS) for x in exp]
        only_g = [x.decode() for x in g if x not in e]
        only_e = [x.decode() for x in e if x not in g]
        return (f"{len(got)} items in the worker, {len(exp)} in diagnose; only in the worker: "
                f"{_short(only_g, 600)}; only in diagnose: {_short(only_e, 600)}")
    if isinstance(got, dict) and isinstance(exp, dict):
        keys = sorted(k for k in set(got) | set(exp) if got.get(k) != exp.get(k))
        return "; ".join(f"{k}: worker={_short(got.get(k))} diagnose={_short(exp.get(k))}" for k in keys)
    return f"worker={_short(got)} diagnose={_short(exp)}"


def _short(v: Any, n: int = 300) -> str:
    s = repr(v)
    return s if len(s) <= n else s[:n] + "..."


# ---------------------------------------------------------------------------- processes
def sink_process_available() -> bool:
    """Whether ``faust_harness`` has the ``faultline sink`` process (engineer K)."""
    return hasattr(faust_harness, "SinkProcess")


class Fleet:
    """The sink and the analysis workers of one test, as child processes.

    With ``faust_harness.SinkProcess`` (the ``faultline sink`` command) the sink is its own
    process and every worker runs without a sink; before it exists, the first worker runs the
    in-process sink (``sink_worker``) and the others run with ``--no-sink``.
    """

    #: stats every 2 s; the job trace (``streams.agents.TRACE_JOBS``) for ``report``
    WORKER_ENV = {"FAULTLINE_WORKER_STATS_S": "2", "FAULTLINE_TRACE_JOBS": "1"}

    def __init__(self, settings: Settings, workdir: Path, timeline: Timeline | None = None) -> None:
        self.settings = settings
        self.workdir = Path(workdir)
        self.timeline = timeline or Timeline()
        self.sink: Any = None
        self.sink_worker: WorkerProcess | None = None
        self.workers: list[WorkerProcess] = []
        self.names: dict[int, str] = {}
        self._n = 0

    # -- starting
    #: the sink's line once its own consumer has started (``faust_sink.SinkConsumer.run``)
    SINK_CONSUMING = "sink consuming"

    def start_sink(self, ready_timeout_s: float = 120.0) -> Any:
        """Start the sink and wait until its consumer runs: a failure the test brings on next
        (a broker outage) hits a running sink, not one still booting."""
        if not sink_process_available():
            self.sink = self.sink_worker = self.add_worker(sink=True)
            return self.sink
        self.sink = faust_harness.SinkProcess(self.settings, self.workdir / "sink", loglevel="info").start()
        deadline = time.monotonic() + ready_timeout_s
        while self.SINK_CONSUMING not in self.sink.log(50_000_000):
            if not self.sink.alive() or time.monotonic() > deadline:
                raise AssertionError(f"the sink is not consuming {time.monotonic() - deadline + ready_timeout_s:.0f} s "
                                     f"after its start (alive: {self.sink.alive()})\n{self.logs()}")
            time.sleep(0.2)
        self.timeline.mark("sink started (faultline sink), consuming")
        return self.sink

    def add_worker(self, *, sink: bool = False) -> WorkerProcess:
        self._n += 1
        name = f"w{self._n}" + ("+sink" if sink else "")
        w = WorkerProcess(self.settings, self.workdir / name, loglevel="info", sink=sink,
                          env=dict(self.WORKER_ENV)).start()
        self.workers.append(w)
        self.names[id(w)] = name
        self.timeline.mark(f"{name} started")
        return w

    def name(self, w: Any) -> str:
        return self.names.get(id(w), "sink")

    def analysis(self) -> list[WorkerProcess]:
        """Live analysis workers that do not carry the in-process sink (may be killed)."""
        return [w for w in self.workers if w is not self.sink_worker and w.alive()]

    # -- failures
    def kill(self, w: WorkerProcess) -> None:
        w.kill()
        self.timeline.mark(f"{self.name(w)} SIGKILL")

    # -- group
    @staticmethod
    def generations(w: Any) -> list[int]:
        return [int(x) for x in re.findall(r"Joined group '[^']*' \(generation (\d+)\)", w.log(50_000_000))]

    def wait_one_generation(self, members: list[Any], timeout_s: float = 120.0) -> int:
        """Until every one of ``members`` reports joining the same group generation (after
        the last one started), then 2 s for assignment and table recovery."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            gens = [self.generations(w) for w in members]
            if all(gens) and len({g[-1] for g in gens}) == 1:
                time.sleep(2.0)
                self.timeline.mark(f"group generation {gens[0][-1]} with "
                                   + ",".join(self.name(w) for w in members))
                return gens[0][-1]
            dead = [self.name(w) for w in members if not w.alive()]
            if dead:
                raise AssertionError(f"{dead} exited while joining\n{self.logs()}")
            time.sleep(0.5)
        raise AssertionError(f"members did not reach one group generation in {timeout_s:.0f} s\n{self.logs()}")

    def wait_joined(self, w: Any, timeout_s: float = 90.0) -> int:
        """Until ``w`` reports it joined the group (any generation)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            g = self.generations(w)
            if g:
                self.timeline.mark(f"{self.name(w)} joined generation {g[-1]}")
                return g[-1]
            if not w.alive():
                raise AssertionError(f"{self.name(w)} exited before joining\n{self.logs()}")
            time.sleep(0.25)
        raise AssertionError(f"{self.name(w)} did not join in {timeout_s:.0f} s\n{self.logs()}")

    # -- stopping
    def stop_workers(self) -> None:
        """SIGTERM every analysis worker at once, then wait for each (a clean shutdown each)."""
        live = [w for w in self.workers if w is not self.sink_worker and w.alive()]
        threads = [threading.Thread(target=w.stop) for w in live]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def stop_sink(self) -> None:
        if self.sink is not None:
            self.sink.stop(60.0) if self.sink is not self.sink_worker else self.sink_worker.stop(60.0)
            self.timeline.mark("sink stopped")

    def stop_all(self) -> None:
        for w in self.workers:
            try:
                w.stop()
            except Exception:  # noqa: BLE001 - best effort on teardown
                w.kill()
        if self.sink is not None and self.sink is not self.sink_worker:
            try:
                self.sink.stop()
            except Exception:  # noqa: BLE001
                pass

    def restarts(self) -> dict[str, int]:
        """Crash-looping shows as tracebacks: count ERROR/Traceback lines per process."""
        out = {}
        for w in self.workers + ([self.sink] if self.sink is not None and self.sink is not self.sink_worker else []):
            txt = w.log(50_000_000)
            out[self.name(w)] = txt.count("Traceback")
        return out

    def logs(self, tail: int = 3000) -> str:
        """Per process: its group generations, last stats line, traceback count, log tail."""
        parts = []
        procs = list(self.workers)
        if self.sink is not None and self.sink is not self.sink_worker:
            procs.append(self.sink)
        for w in procs:
            txt = w.log(50_000_000)
            stats = [ln for ln in txt.splitlines() if "worker stats" in ln]
            parts.append(f"--- {self.name(w)} ({'alive' if w.alive() else 'exited'}, rc={w.proc.returncode if w.proc else None}; "
                         f"log {w.log_path}) generations {self.generations(w)}, {txt.count('Traceback')} tracebacks\n"
                         + (f"last stats: {stats[-1][-1500:]}\n" if stats else "") + txt[-tail:])
        return "\n".join(parts)

    def job_trace(self, problems: Iterable[str], most: int = 300) -> str:
        """Every process's job-trace lines (``FAULTLINE_TRACE_JOBS``) of the jobs whose
        incidents the problems name: where each scheduler record of theirs went."""
        text = "\n".join(problems)
        iids = set(re.findall(r"inc-[0-9a-f]{8,}", text))
        named = set(re.findall(r"'job': '([^']+)'", text))      # a missing incident: diagnose's view
        if not iids and not named:
            return ""
        procs = list(self.workers) + ([self.sink] if self.sink is not None and self.sink is not self.sink_worker else [])
        traces = {self.name(w): [ln for ln in w.log(50_000_000).splitlines() if "job trace:" in ln] for w in procs}
        jobs = {m.group(1) for lines in traces.values() for ln in lines if any(i in ln for i in iids)
                for m in [re.search(r"incident \S+ job (\S+) ", ln)] if m} | named
        if not jobs:
            return f"job trace: no line names {sorted(iids)}"
        out = [f"job trace of jobs {sorted(jobs)} (incidents {sorted(iids)}):"]
        for name, lines in traces.items():
            mine = [ln for ln in lines if any(f" job {j} " in ln for j in jobs)]
            out.append(f"--- {name}: {len(mine)} lines" + ("" if len(mine) <= most else f", the last {most}"))
            out += mine[-most:]
        return "\n".join(out)

    def __enter__(self) -> "Fleet":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop_all()


# ---------------------------------------------------------------------------- lag
async def group_lags(settings: Settings, group: str, topics: Iterable[str] = INPUT_TOPICS) -> dict[str, int] | None:
    """Per partition (``"topic/partition"``, topic unprefixed) the records of ``topics`` not yet
    committed by consumer group ``group``; None when it has committed nothing on them yet."""
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient

    names = [settings.topic(t) for t in topics]
    admin = AIOKafkaAdminClient(**settings.kafka_kwargs())
    cons = AIOKafkaConsumer(**settings.kafka_kwargs(), group_id=None, enable_auto_commit=False)
    await admin.start()
    await cons.start()
    try:
        meta = await admin.describe_topics(names)
        tps = [TopicPartition(t["topic"], p["partition"]) for t in meta if not t["error_code"]
               for p in t["partitions"]]
        if not tps:
            return None
        committed = await admin.list_consumer_group_offsets(group, partitions=tps)
        ends = await cons.end_offsets(tps)
        have = {tp: om.offset for tp, om in committed.items() if tp.topic in names and om.offset >= 0}
        if not have:
            return None
        plen = len(settings.topic_prefix)
        return {f"{tp.topic[plen:]}/{tp.partition}": max(0, ends[tp] - have.get(tp, 0)) for tp in tps}
    finally:
        await cons.stop()
        await admin.close()


async def group_lag(settings: Settings, group: str, topics: Iterable[str] = INPUT_TOPICS) -> int | None:
    """Records of ``topics`` (unprefixed) not yet committed by consumer group ``group``
    (None when the group has committed nothing on them yet)."""
    lags = await group_lags(settings, group, topics)
    return None if lags is None else sum(lags.values())


async def consumer_groups(settings: Settings) -> list[str]:
    """The consumer groups of this test (their id starts with the topic prefix)."""
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(**settings.kafka_kwargs())
    await admin.start()
    try:
        groups = await admin.list_consumer_groups()
    finally:
        await admin.close()
    prefix = re.sub(r"[^A-Za-z0-9_.-]", "_", settings.topic_prefix)
    return sorted(g[0] for g in groups if g[0].startswith(prefix))


def wait_drained(settings: Settings, timeout_s: float = 120.0) -> tuple[bool, dict[str, Any]]:
    """Until every consumer group of the test that commits input offsets has committed all
    of the input topics (lag 0). Returns (drained, group -> total lag, or the lagging
    partitions when not drained); a group with no commit on the input (None) is ignored."""
    deadline = time.monotonic() + timeout_s
    while True:
        groups = asyncio.run(consumer_groups(settings))
        detail = {g: asyncio.run(group_lags(settings, g)) for g in groups}
        lags = {g: sum(d.values()) for g, d in detail.items() if d is not None}
        if lags and all(v == 0 for v in lags.values()):
            return True, lags
        if time.monotonic() >= deadline:
            return False, {g: {k: v for k, v in d.items() if v} for g, d in detail.items() if d is not None}
        time.sleep(1.0)


# ---------------------------------------------------------------------------- store
EVENT_TABLES = {layer: f"events_{layer}" for layer in LAYER_TOPICS}


@dataclass
class StoreCheck:
    missing: dict[str, int] = field(default_factory=dict)       # layer -> produced ids not stored
    unknown: dict[str, int] = field(default_factory=dict)       # layer -> stored ids never produced
    not_once: dict[str, int] = field(default_factory=dict)      # layer -> ids with count() != 1 under FINAL
    rows_raw: int = 0                                            # rows before merge (duplicates visible)
    rows_final: int = 0
    incident_ids: set[str] = field(default_factory=set)         # ids whose latest stored state is not recovered
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.unknown or self.not_once)

    def __str__(self) -> str:
        return (f"store: rows {self.rows_final} under FINAL ({self.rows_raw} before merge); missing {self.missing}; "
                f"never produced {self.unknown}; not exactly once {self.not_once}; e.g. {self.examples[:5]}")


def store_event_counts(settings: Settings, traffic: Traffic) -> StoreCheck:
    """Open the (stopped) sink's store and count every produced event id under FINAL."""
    from faultline.sinks.store import open_store

    store = open_store(settings)
    out = StoreCheck()
    try:
        for layer, table in EVENT_TABLES.items():
            rows = store.query(f"SELECT id, count() AS n FROM {table} FINAL GROUP BY id")
            out.rows_raw += int(store.query(f"SELECT count() AS n FROM {table}")[0]["n"])
            counts = {r["id"]: int(r["n"]) for r in rows}
            out.rows_final += sum(counts.values())
            want = traffic.ids.get(layer, set())
            miss = want - set(counts)
            extra = set(counts) - want
            bad = {i: n for i, n in counts.items() if n != 1}
            if miss:
                out.missing[layer] = len(miss)
                out.examples += sorted(miss)[:2]
            if extra:
                out.unknown[layer] = len(extra)
            if bad:
                out.not_once[layer] = len(bad)
                out.examples += [f"{i} x{n}" for i, n in sorted(bad.items())[:2]]
        rows = store.query("SELECT id, argMax(state, revision) AS st FROM incidents GROUP BY id")
        out.incident_ids = {r["id"] for r in rows if r["st"] != "recovered"}
    finally:
        store.close()
    return out


# ---------------------------------------------------------------------------- trials
def trial_moments(seed: int, n: int, lo: float, hi: float, *, gap: float = 0.0) -> list[float]:
    """``n`` sorted fractions of the input in [lo, hi] from ``seed``, at least ``gap`` apart."""
    r = random.Random(seed)
    for _ in range(1000):
        pts = sorted(round(r.uniform(lo, hi), 3) for _ in range(n))
        if all(b - a >= gap for a, b in zip(pts, pts[1:])):
            return pts
    raise ValueError("no moments fit the gap")


def report(timeline: Timeline, problems: list[str], fleet: Fleet | None = None, extra: str = "") -> str:
    """The failure message of a trial: seed, timings, problems, then the process logs."""
    head = f"{timeline}\n" + "\n".join(problems[:60])
    if len(problems) > 60:
        head += f"\n... {len(problems) - 60} more"
    if extra:
        head += "\n" + extra
    if fleet is not None:
        head += "\n" + fleet.job_trace(problems) + "\n" + fleet.logs()
    return head


def count_by_category(d: dict[str, dict]) -> Counter:
    return Counter((v.get("root_cause") or {}).get("category") for v in d.values())


def settle_and_check(s: Settings, fleet: Fleet, inc: IncidentLog, exp: Expectation, traffic: Traffic,
                     tl: Timeline, *, killed: Iterable[Any] = (), timeout_s: float = 180.0) -> list[str]:
    """After the input is sent: wait for the incidents and the lag, compare every revision
    with diagnose, stop the workers and then the sink, check the store. Returns the problems."""
    problems = settle(s, fleet, inc, exp, tl, killed=killed, timeout_s=timeout_s)
    fleet.stop_workers()
    fleet.stop_sink()
    return problems + check_store(s, exp, traffic, tl)


def settle(s: Settings, fleet: Fleet, inc: IncidentLog, exp: Expectation, tl: Timeline, *,
           killed: Iterable[Any] = (), timeout_s: float = 180.0) -> list[str]:
    """The input sent so far is what ``exp`` was computed over: wait until the incidents
    equal it and every group committed the input (and the sink stored it), compare every
    revision with diagnose, check no process exited on its own. Stops nothing."""
    problems: list[str] = []
    matched = inc.wait(exp, timeout_s=timeout_s)
    tl.mark("incidents equal diagnose's" if matched else "incidents still differ (gave up waiting)")
    drained, lags = wait_drained(s, timeout_s=25 if matched else 10)
    tl.mark(f"committed lag {lags}")
    if not drained:
        problems.append(f"input not fully committed by every group (stuck partitions?): {lags}")
    if fleet.sink_worker is None and fleet.sink is not None:
        try:   # the sink's own group: input and output topics stored and committed
            asyncio.run(faust_harness.wait_caught_up(s, faust_harness.sink_group_id(s), timeout_s=60))
            tl.mark("sink caught up")
        except TimeoutError as e:
            problems.append(f"sink not caught up: {e}")
    problems += check_incidents(exp, inc.snapshot())
    killed_ids = {id(w) for w in killed}
    crashed = [fleet.name(w) for w in fleet.workers if id(w) not in killed_ids and not w.alive()]
    if crashed:
        problems.append(f"processes that exited on their own: {crashed}")
    return problems


def check_store(s: Settings, exp: Expectation, traffic: Traffic, tl: Timeline) -> list[str]:
    """The stopped sink's store against ``traffic`` (every event once under FINAL, none
    other) and ``exp`` (the standing incidents). Returns the problems."""
    problems: list[str] = []
    store = store_event_counts(s, traffic)
    tl.mark(str(store).split("; e.g.")[0])
    if not store.ok:
        problems.append(str(store))
    if store.incident_ids != set(exp.live):
        problems.append(f"store's standing incidents differ from diagnose's: only in the store "
                        f"{sorted(store.incident_ids - set(exp.live))}, missing {sorted(set(exp.live) - store.incident_ids)}")
    return problems
