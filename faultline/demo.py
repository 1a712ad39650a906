"""The main job in one command: a simulated GPU fleet through real Kafka, the Faust worker and
the ClickHouse store, watched live in the terminal.

The demo starts what it needs (topics under the ``demo.`` prefix, recreated each run so
``make demo`` twice works; one analysis worker and one sink, ``faultline worker`` and
``faultline sink``, as a deployment runs them; the simulator publishing at ``--speed``), shows
throughput, jobs, alerts and incidents as they happen, then a summary against the
simulator's ground truth, and stops everything it started (Ctrl-C too).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaConnectionError
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from .config import Settings
from .humantime import clock
from .producers.publish import connect_failure
from .schemas import ALERTS, INCIDENTS, INPUT_TOPICS

DEMO_PREFIX = "demo."
#: the demo worker's stats line period (FAULTLINE_WORKER_STATS_S), in its worker.log
WORKER_STATS_S = 10
#: without a terminal (no live view) a plain progress line this often: a run that does not
#: settle shows where it stands (events, incidents, the worker's and the sink's lag)
PROGRESS_S = 15.0
#: the most a progress line waits for the lag of the worker's and the sink's groups
LAG_TIMEOUT_S = 10.0


@dataclasses.dataclass
class DemoOptions:
    scenario: str = "mixed"
    seed: int = 7
    nodes: int = 64
    gpus_per_node: int = 8
    hours: float = 3.0
    speed: float = 60.0
    settle_s: float = 20.0
    timeout_s: float = 900.0
    web_port: int | None = 6066
    workdir: str = "var/demo"
    live: bool = True
    #: simulated start (UTC epoch ms); None: the window ends at the current hour. The
    #: simulator's telemetry follows the time of day, so a fixed start gives a fixed run
    start_ms: int | None = None

    @classmethod
    def short(cls) -> "DemoOptions":
        return cls(scenario="mixed", nodes=16, gpus_per_node=8, hours=1.0, speed=600.0,
                   settle_s=10.0, timeout_s=420.0, web_port=None)


@dataclasses.dataclass
class DemoState:
    started: float = dataclasses.field(default_factory=time.monotonic)
    offsets: dict[str, int] = dataclasses.field(default_factory=dict)
    rates: dict[str, float] = dataclasses.field(default_factory=dict)
    jobs: dict[str, str] = dataclasses.field(default_factory=dict)  # job -> state
    alerts: collections.deque = dataclasses.field(default_factory=lambda: collections.deque(maxlen=12))
    alert_count: int = 0
    incidents: dict[str, dict] = dataclasses.field(default_factory=dict)  # id -> latest revision
    last_change: float = dataclasses.field(default_factory=time.monotonic)
    sim_done: bool = False
    phase: str = "starting"

    def total_events(self) -> int:
        return sum(self.offsets.values())


async def _consume_outputs(settings: Settings, st: DemoState, stop: asyncio.Event) -> None:
    """Follow fl.alerts, fl.incidents and fl.sched (small topics) into the view state."""
    topics = [settings.topic(t) for t in (ALERTS, INCIDENTS, "fl.sched")]
    consumer = AIOKafkaConsumer(*topics, **settings.kafka_kwargs(), group_id=None,
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    try:
        while not stop.is_set():
            got = await consumer.getmany(timeout_ms=300, max_records=2000)
            for tp, msgs in got.items():
                base = tp.topic[len(settings.topic_prefix):]
                for m in msgs:
                    try:
                        rec = orjson.loads(m.value)
                    except orjson.JSONDecodeError:
                        continue
                    if base == ALERTS:
                        st.alert_count += 1
                        st.alerts.appendleft(rec)
                    elif base == INCIDENTS:
                        old = st.incidents.get(rec["id"])
                        if old is None or rec.get("revision", 0) >= old.get("revision", 0):
                            st.incidents[rec["id"]] = rec
                            st.last_change = time.monotonic()
                    elif rec.get("kind") == "sched.job" and rec.get("job"):
                        st.jobs[rec["job"]] = rec.get("data", {}).get("state", "?")
    finally:
        await consumer.stop()


async def _partitions(settings: Settings, topics: list[str]) -> list[TopicPartition]:
    """Every partition of ``topics`` (full names), from the broker's metadata."""
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(**settings.kafka_kwargs(), request_timeout_ms=15_000)
    await admin.start()
    try:
        described = await admin.describe_topics(topics)
    finally:
        await admin.close()
    return [TopicPartition(t["topic"], p["partition"]) for t in described if not t.get("error_code")
            for p in t["partitions"]]


async def _watch_offsets(settings: Settings, st: DemoState, stop: asyncio.Event) -> None:
    """Throughput per input topic from the end offsets of all its partitions (cheap: no
    records are read)."""
    tps = await _partitions(settings, [settings.topic(t) for t in INPUT_TOPICS])
    consumer = AIOKafkaConsumer(**settings.kafka_kwargs(), group_id=None)
    await consumer.start()
    try:
        last: dict[str, int] = {}
        last_t = time.monotonic()
        while not stop.is_set():
            ends = await consumer.end_offsets(tps)
            now = time.monotonic()
            per: dict[str, int] = collections.Counter()
            for tp, off in ends.items():
                per[tp.topic[len(settings.topic_prefix):]] += off
            for t, n in per.items():
                if t in last:
                    st.rates[t] = (n - last[t]) / max(1e-3, now - last_t)
                last[t] = n
            st.offsets = dict(per)
            last_t = now
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
    finally:
        await consumer.stop()


async def _wait_leaders(settings: Settings, timeout_s: float = 30.0) -> None:
    """Fresh topics answer offset requests only once their partitions have leaders."""
    consumer = AIOKafkaConsumer(**settings.kafka_kwargs(), group_id=None)
    await consumer.start()
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                await consumer._client.force_metadata_update()  # noqa: SLF001
                tps = [TopicPartition(settings.topic(t), p) for t in (*INPUT_TOPICS, ALERTS, INCIDENTS)
                       for p in consumer.partitions_for_topic(settings.topic(t)) or ()]
                if tps and len({tp.topic for tp in tps}) == len(INPUT_TOPICS) + 2:
                    await consumer.end_offsets(tps)
                    return
            except Exception:  # noqa: BLE001 - not ready yet
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the demo topics got no partition leaders in "
                                   f"{timeout_s:.0f} s: is the broker healthy? (make kafka-down kafka-up)")
            await asyncio.sleep(0.3)
    finally:
        await consumer.stop()


_ago = clock


def _behind(reading: tuple[int, int] | str) -> str:
    """A lag reading (``Demo._lag_bounded``) for people."""
    if isinstance(reading, str):
        return reading
    lag, unstored = reading
    return f"worker {lag:,} events behind, sink {unstored:,} records unstored"


def _has_make_target(makefile: Path, target: str) -> bool:
    try:
        return any(line.startswith(f"{target}:") for line in makefile.read_text("utf-8").splitlines())
    except OSError:
        return False


def render(st: DemoState, opts: DemoOptions, where: str = "") -> Group:
    head = Text.assemble(("faultline demo ", "bold"),
                         f"- {opts.nodes} nodes x {opts.gpus_per_node} GPUs, scenario {opts.scenario}, "
                         f"{opts.hours:g} h simulated at {opts.speed:g}x  |  {st.phase}  |  "
                         f"{time.monotonic() - st.started:.0f} s", ("\n" + where) if where else "")
    tput = Table(title="events per topic", box=None, pad_edge=False)
    tput.add_column("topic")
    tput.add_column("total", justify="right")
    tput.add_column("/s", justify="right")
    for t in INPUT_TOPICS:
        tput.add_row(t, f"{st.offsets.get(t, 0):,}", f"{st.rates.get(t, 0):,.0f}")
    tput.add_row("[bold]all", f"[bold]{st.total_events():,}", f"[bold]{sum(st.rates.values()):,.0f}")
    states = collections.Counter(st.jobs.values())
    jobs = Table(title="jobs", box=None, pad_edge=False)
    jobs.add_column("state")
    jobs.add_column("n", justify="right")
    for s, n in sorted(states.items()):
        jobs.add_row(s, str(n))
    alerts = Table(title=f"alerts ({st.alert_count})", box=None, pad_edge=False, expand=True)
    for c in ("time", "sev", "detector", "summary"):
        alerts.add_column(c, no_wrap=c != "summary", overflow="ellipsis")
    for a in list(st.alerts)[:8]:
        sev = a.get("severity", "")
        color = {"critical": "red", "warning": "yellow"}.get(sev, "")
        alerts.add_row(_ago(a.get("ts")), f"[{color}]{sev}" if color else sev, a.get("detector", ""),
                       (a.get("summary") or "")[:100])
    return Group(head, _grid(tput, jobs), alerts, incident_table(st.incidents.values()))


def _grid(*tables: Table) -> Table:
    g = Table.grid(padding=(0, 4))
    for _ in tables:
        g.add_column()
    g.add_row(*tables)
    return g


def incident_table(incidents, labels: dict[tuple[str, int], dict] | None = None) -> Table:
    t = Table(title="incidents", expand=True)
    for c in ("job", "att", "failed at", "symptom", "root cause", "component", "conf", "lost GPU-h", "retry"):
        t.add_column(c, overflow="fold")
    if labels is not None:
        t.add_column("injected", overflow="fold")
    for inc in sorted(incidents, key=lambda i: i.get("failure_ts", 0)):
        rc = inc.get("root_cause") or {}
        retry = inc.get("retry")
        row = [inc.get("job", ""), str(inc.get("attempt", "")), _ago(inc.get("failure_ts")),
               (inc.get("symptom") or "")[:48], rc.get("category", ""), rc.get("component", ""),
               f"{rc.get('confidence', 0):.2f}", f"{inc.get('lost_gpu_hours', 0):.1f}",
               f"{retry['state']} (#{retry['attempt']}{', same nodes' if retry.get('same_nodes') else ''})"
               if retry else "-"]
        if labels is not None:
            lab = labels.get((inc.get("job"), inc.get("attempt")))
            if lab is None:
                row.append("[red]none (false alarm)")
            else:
                ok = lab["category"] == rc.get("category") and lab["component"] == rc.get("component")
                row.append(("[green]" if ok else "[red]") + f"{lab['category']} {lab['component']}")
        t.add_row(*row)
    return t


class Demo:
    """Orchestrates one demo run; ``run()`` returns the final incidents (latest revisions)."""

    def __init__(self, settings: Settings, opts: DemoOptions, console: Console | None = None) -> None:
        self.opts = opts
        run = time.strftime("%Y%m%d%H%M%S", time.gmtime())
        self.settings = dataclasses.replace(settings, topic_prefix=f"{DEMO_PREFIX}{run}.")
        self.app_id = f"faultline-demo-{run}"
        self.console = console or Console(stderr=False)
        self.workdir = Path(opts.workdir).resolve()
        self.worker = None
        self.sink = None
        self.sim: subprocess.Popen | None = None
        self.state = DemoState()
        #: set by ``interrupt()`` (a signal handler): the run loop ends at its next turn even if
        #: the cancellation asyncio delivers for Ctrl-C was swallowed (Python 3.11's
        #: ``asyncio.wait_for`` can lose a cancellation that races its timeout)
        self.interrupted = False

    def interrupt(self) -> None:
        self.interrupted = True

    # ----------------------------------------------------------------- lifecycle
    async def _reset_topics(self) -> None:
        """Fresh topics for this run under ``demo.<run>.``; earlier demo runs' topics are deleted."""
        from aiokafka.admin import AIOKafkaAdminClient

        from .topics import create_topics  # the same code as `faultline topics create`

        admin = AIOKafkaAdminClient(**self.settings.kafka_kwargs(), request_timeout_ms=15_000)
        try:
            await admin.start()
            old = [t for t in await admin.list_topics() if t.startswith(DEMO_PREFIX)]
            if old:
                await admin.delete_topics(old)
        finally:
            await admin.close()
        await create_topics(self.settings)
        await _wait_leaders(self.settings)

    async def _progress_line(self) -> str:
        """One plain line: elapsed, phase, events, jobs, alerts, incidents and both groups' lag."""
        st = self.state
        behind = _behind(await self._lag_bounded())
        return (f"[{time.monotonic() - st.started:5.0f} s] {st.phase}: {st.total_events():,} events, "
                f"{len(st.jobs)} jobs, {st.alert_count} alerts, {len(st.incidents)} incidents; {behind}")

    async def _lag_bounded(self) -> tuple[int, int] | str:
        """``_lag()`` within LAG_TIMEOUT_S, or why it is unknown. Every reading in the run loop
        goes through here: an admin round trip that never returns must not outlive the demo's
        own deadline (an unbounded read in the settle loop hung a CI run for its full 600 s)."""
        try:
            return await asyncio.wait_for(self._lag(), LAG_TIMEOUT_S)
        except Exception as e:  # noqa: BLE001 - a lag reading never fails the run; the deadline does
            return f"lag unknown ({type(e).__name__})"

    async def _lag(self) -> tuple[int, int]:
        """(input records the worker has not committed, records the sink has not stored)."""
        from .streams.faust_harness import group_lag, sink_group_id

        worker = await group_lag(self.settings, self.app_id, INPUT_TOPICS)
        sink = await group_lag(self.settings, sink_group_id(self.settings, self.app_id))
        return worker, sink

    def _start_worker(self) -> None:
        """The analysis worker and the sink (which serves the incident page and SQL API)."""
        from .streams.faust_harness import SinkProcess, WorkerProcess

        for name in ("worker", "sink"):
            shutil.rmtree(self.workdir / name, ignore_errors=True)
        self.sink = SinkProcess(self.settings, self.workdir / "sink", app_id=self.app_id,
                                web_port=self.opts.web_port, loglevel="warning").start()
        # at info with its stats line every WORKER_STATS_S: a stuck run's worker.log says where
        self.worker = WorkerProcess(self.settings, self.workdir / "worker", app_id=self.app_id,
                                    loglevel="info",
                                    env={"FAULTLINE_WORKER_STATS_S": str(WORKER_STATS_S)}).start()

    def _check_alive(self) -> None:
        for what, proc in (("worker", self.worker), ("sink", self.sink)):
            if proc is not None and not proc.alive():
                raise RuntimeError(f"the {what} exited: see {proc.log_path}\n{proc.log(1500)}")

    def _start_simulator(self) -> None:
        o = self.opts
        cmd = [sys.executable, "-m", "faultline.cli", "simulate", "--scenario", o.scenario,
               "--seed", str(o.seed), "--nodes", str(o.nodes), "--gpus-per-node", str(o.gpus_per_node),
               "--hours", str(o.hours), "--kafka", "--speed", str(o.speed),
               "--labels", str(self.workdir / "labels.json")]
        if o.start_ms is not None:
            cmd += ["--start", str(o.start_ms)]
        from .streams.faust_harness import worker_env

        log = open(self.workdir / "simulate.log", "ab")
        self.sim = subprocess.Popen(cmd, env=worker_env(self.settings), stdout=log, stderr=log,
                                    start_new_session=True)
        log.close()

    def stop(self) -> None:
        if self.sim is not None and self.sim.poll() is None:
            os.killpg(self.sim.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.sim.wait(10)
        if self.worker is not None:
            self.worker.stop()
        if self.sink is not None:
            self.sink.stop()

    def labels(self) -> dict[tuple[str, int], dict]:
        try:
            doc = orjson.loads((self.workdir / "labels.json").read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return {}
        return {(lab["job"], lab["attempt"]): lab for lab in doc.get("interruptions", [])}

    async def run(self) -> list[dict]:
        self.workdir.mkdir(parents=True, exist_ok=True)
        st, o = self.state, self.opts
        try:
            await self._reset_topics()
        except KafkaConnectionError:   # the first contact: say why (down, password, CA, protocol)
            raise await connect_failure(self.settings) from None
        st.phase = "starting worker and sink"
        self._start_worker()
        stop = asyncio.Event()
        tasks = [asyncio.create_task(_consume_outputs(self.settings, st, stop)),
                 asyncio.create_task(_watch_offsets(self.settings, st, stop))]
        await asyncio.sleep(3.0)  # let the worker join its group before events flow
        st.phase = "simulating"
        self._start_simulator()
        deadline = time.monotonic() + o.timeout_s
        next_progress = time.monotonic() + PROGRESS_S
        where = self.where()
        self.console.print(where, soft_wrap=True, markup=False, highlight=False)
        live = Live(render(st, o, where), console=self.console, refresh_per_second=4, transient=False) \
            if o.live else contextlib.nullcontext()
        try:
            with live:
                while time.monotonic() < deadline:
                    if self.interrupted:
                        break
                    self._check_alive()
                    for t in tasks:   # the live view's readers: a dead one would hide every incident
                        if t.done() and t.exception() is not None:
                            raise RuntimeError(f"the demo's topic reader failed: {t.exception()!r}")
                    if not st.sim_done and self.sim.poll() is not None:
                        if self.sim.returncode != 0:
                            raise RuntimeError(f"the simulator failed (exit {self.sim.returncode}): see "
                                               f"{self.workdir / 'simulate.log'}")
                        st.sim_done = True
                        st.phase = "settling"
                        st.last_change = time.monotonic()
                    if st.sim_done and time.monotonic() - st.last_change > o.settle_s:
                        reading = await self._lag_bounded()
                        if reading == (0, 0):
                            break
                        st.phase = f"settling: {_behind(reading)}"
                        st.last_change = time.monotonic() - o.settle_s + 2
                    if o.live:
                        live.update(render(st, o, where))
                    if not self.console.is_terminal and time.monotonic() >= next_progress:
                        next_progress = time.monotonic() + PROGRESS_S
                        self.console.print(await self._progress_line(), soft_wrap=True, markup=False,
                                           highlight=False)
                    await asyncio.sleep(0.25)
                else:
                    behind = _behind(await self._lag_bounded())
                    raise RuntimeError(
                        f"the demo did not settle within {o.timeout_s:.0f} s ({behind}, "
                        f"{len(st.incidents)} incidents so far): the machine is too slow for this fleet size; "
                        "try --nodes/--hours smaller or --speed lower; the worker's stats lines are in "
                        f"{self.worker.log_path if self.worker else '?'}, the sink's log in "
                        f"{self.sink.log_path if self.sink else '?'}")
                st.phase = "done"
                if o.live:
                    live.update(render(st, o, where))
        finally:
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.stop()
        return list(st.incidents.values())

    def summary(self, incidents: list[dict]) -> None:
        labels = self.labels()
        c = self.console
        c.rule("[bold]summary")
        c.print(incident_table(incidents, labels))
        got = {(i["job"], i["attempt"]): i for i in incidents}
        right = sum(1 for k, lab in labels.items() if k in got
                    and got[k]["root_cause"]["category"] == lab["category"]
                    and got[k]["root_cause"]["component"] == lab["component"])
        lost = sum(i.get("lost_gpu_hours", 0) for i in incidents)
        c.print(f"{len(incidents)} incidents, {len(labels)} injected interruptions, "
                f"{right} root causes right; {lost:.1f} GPU-hours lost; "
                f"{self.state.alert_count} alerts; {self.state.total_events():,} events")
        for line in self.next_lines(incidents):
            # plain lines, never wrapped (a command folded at the terminal's width does not paste)
            c.print(line, soft_wrap=True, markup=False, highlight=False)

    def where(self) -> str:
        page = self.page_url()
        return (f"topics {self.settings.topic_prefix}fl.*  |  store {self.settings.store_path}"
                + (f"  |  page {page} (fleet: {self.fleet_url()})" if page else "  |  no page (--web-port P for one)"))

    def page_url(self) -> str | None:
        return None if self.opts.web_port is None else f"http://127.0.0.1:{self.opts.web_port}/incidents"

    def fleet_url(self) -> str | None:
        return None if self.opts.web_port is None else f"http://127.0.0.1:{self.opts.web_port}/fleet"

    def next_lines(self, incidents: list[dict]) -> list[str]:
        """The "next: dig further" block: where things are, then one command per ``  $ `` line,
        each spelled by ``faultline.printed`` so it runs as printed in a plain shell here."""
        from .printed import command, executable

        def cmd(*args: str) -> str:
            return "  $ " + command(self.settings, *args)

        exe = executable()
        lines = ["next: dig further (run from this directory)"]
        if exe != "faultline":
            lines.append(f"  {exe} is this checkout's faultline (its venv is not on PATH; "
                         "`source .venv/bin/activate` to type plain `faultline`)")
        lines.append(f"  topics: {self.settings.topic_prefix}fl.* (FAULTLINE_TOPIC_PREFIX below; "
                     "the next demo run deletes them)")
        lines.append(f"  store: {self.settings.store_path}")
        lines += [cmd("incidents")]
        first = max(incidents, key=lambda i: i.get("lost_gpu_hours", 0), default=None)
        if first is not None:
            bundle = str(Path(self.opts.workdir) / f"{first['id']}.jsonl.zst")
            lines += [cmd("explain", first["id"]),
                      cmd("replay", "--incident", first["id"], "--since=-7d", "--diagnose"),
                      cmd("bundle", "export", first["id"], "--out", bundle),
                      cmd("diagnose", bundle)]
        lines += [cmd("trends", "repeat-offenders"),
                  cmd("query", "SELECT category, round(sum(lost_gpu_hours),1) FROM incidents FINAL "
                               "WHERE state != 'recovered' GROUP BY category"),
                  cmd("findings")]
        if _has_make_target(Path.cwd() / "Makefile", "notebook"):
            lines.append("  $ make notebook")
        if self.opts.web_port is not None:
            lines.append(f"  page: {self.page_url()} (and {self.fleet_url()}) was served while the demo ran; "
                         "again (Ctrl-C stops it):")
            lines.append(cmd("sink", "--web-port", str(self.opts.web_port), "--app-id", self.app_id))
        return lines
