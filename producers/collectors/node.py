"""``faultline collect node --config node.toml``: every node-side collector in one process.

One asyncio loop, one Kafka producer (``SpoolingPublisher``: a broker outage spools to disk),
one task per collector at its own interval. Example ``node.toml`` (the ``[faultline]`` table
holds the usual settings; every other table is optional):

    [faultline]
    kafka_bootstrap = "kafka-1:9092"
    spool_dir = "/var/lib/faultline/spool"

    [node]
    name = "gpu-017"          # default: short host name
    job = "48213"             # default: SLURM_JOB_ID, else squeue on this node

    [collectors.nvml]         # interval = seconds between rounds, for any collector
    interval = 10
    ecc = "volatile"
    [collectors.kernel]
    file = "/var/log/kern.log"   # default: /dev/kmsg, else journalctl -k
    [collectors.storage]
    paths = ["/", "/scratch", "/ckpt"]
    [collectors.inventory]
    [collectors.logs]
    globs = ["/logs/*/rank*.log"]
    path_patterns = ["{job}/rank{rank}.log"]
    [collectors.checkpoints]
    dirs = ["/ckpt"]
    [collectors.prometheus]
    targets = ["http://127.0.0.1:9400/metrics"]

``--metrics-port P`` serves the agent's own ``GET /metrics`` on ``web_bind:P`` (each
collector's counters with its failed rounds as ``round_errors``, the spool's depth and
counters; ``infra/deploy/systemd/faultline-node.service`` uses 9464). ``--once`` exits 2
naming what failed: a collector's round, a source that did not answer, or the broker.
Every key of the file: ``infra/deploy/node.toml``.

Without a ``[collectors]`` table the defaults run: nvml (skipped with a warning when the node
has no NVML), kernel, storage and inventory. A collector named in the file that cannot start
(e.g. nvml without a driver) is an error: exit 2 with the reason.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import tomllib
from typing import Any, Awaitable, Callable

from ...config import Settings
from ...schemas import Envelope, encode
from .base import ONCE_FLUSH_TIMEOUT_S, Collector, CollectorFailed, hostname, run_collector, unacknowledged

NAME = "node"
HELP = "run the node-side collectors (nvml, kernel, storage, inventory, logs, checkpoints, prometheus) in one process"
CUSTOM_RUN = True

log = logging.getLogger("faultline.collect.node")

DEFAULTS = ("nvml", "kernel", "storage", "inventory")


class NodeConfigError(ValueError):
    pass


def load_node_config(path: str | None) -> dict[str, Any]:
    if not path:
        return {}
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise NodeConfigError(f"node config {path} not found") from None
    except tomllib.TOMLDecodeError as e:
        raise NodeConfigError(f"node config {path} is not valid TOML: {e}") from None


def build_collectors(doc: dict[str, Any], settings: Settings, *, nvml_module: str | None = None) -> list[Collector]:
    """The collectors a node config asks for, built in dependency order (nvml first, so the
    kernel collector can map XID PCI addresses to GPU indexes)."""
    from .nvml import NvmlCollector, NvmlUnavailable, load_nvml

    node_cfg = doc.get("node", {})
    node = node_cfg.get("name") or hostname()
    job = node_cfg.get("job") or settings.extra.get("job")
    wanted: dict[str, dict[str, Any]] = doc.get("collectors") or {n: {} for n in DEFAULTS}
    explicit = "collectors" in doc
    unknown = set(wanted) - {"nvml", "kernel", "storage", "inventory", "logs", "checkpoints", "prometheus"}
    if unknown:
        raise NodeConfigError(f"unknown collector(s) in [collectors]: {', '.join(sorted(unknown))}")
    out: list[Collector] = []
    nv_coll: NvmlCollector | None = None
    mod_name = nvml_module or doc.get("nvml_module") or wanted.get("nvml", {}).get("module") or "pynvml"

    def interval(c: Collector, cfg: dict[str, Any]) -> Collector:
        if "interval" in cfg:
            c.interval_s = float(cfg["interval"])
        return c

    if "nvml" in wanted:
        cfg = wanted["nvml"]
        try:
            nv_coll = NvmlCollector(node, load_nvml(mod_name), ecc=cfg.get("ecc", "volatile"),
                                    xid_events=cfg.get("xid_events", True), nvlink=cfg.get("nvlink", True))
            out.append(interval(nv_coll, cfg))
        except NvmlUnavailable as e:
            if explicit:
                raise NodeConfigError(str(e)) from None
            log.warning("nvml collector skipped: %s", e)
    if "kernel" in wanted:
        from .kernel import KernelCollector

        cfg = wanted["kernel"]
        pci = nv_coll.pci_to_index() if nv_coll is not None else None
        try:
            from .kernel import default_state_path as kstate

            out.append(interval(KernelCollector(node, file=cfg.get("file"), from_start=cfg.get("from_start", False),
                                                job=cfg.get("job", job), pci_map=pci,
                                                state_path=cfg.get("state") or kstate(settings)), cfg))
        except RuntimeError as e:
            if explicit:
                raise NodeConfigError(str(e)) from None
            log.warning("kernel collector skipped: %s", e)
    if "storage" in wanted:
        from .storage import StorageCollector

        cfg = wanted["storage"]
        out.append(interval(StorageCollector(node, paths=cfg.get("paths"), probe_timeout_s=cfg.get("probe_timeout", 2.0),
                                             full_pct=cfg.get("full_pct", 98.0)), cfg))
    if "inventory" in wanted:
        from .inventory import InventoryCollector, default_state_path

        cfg = wanted["inventory"]
        out.append(interval(InventoryCollector(node, state_path=cfg.get("state") or default_state_path(settings),
                                               nvml=nv_coll.nv if nv_coll is not None else None), cfg))
    if "logs" in wanted:
        from .logs import LogsCollector

        cfg = wanted["logs"]
        if not cfg.get("globs"):
            raise NodeConfigError("[collectors.logs] needs globs = [\"/path/*.log\", ...]")
        from .logs import default_state_path as lstate

        out.append(interval(LogsCollector(cfg["globs"], node, path_patterns=cfg.get("path_patterns", []),
                                          job=cfg.get("job", job), rank=cfg.get("rank"),
                                          from_start=cfg.get("from_start", False), burst=cfg.get("burst", 5),
                                          every_s=cfg.get("every", 10.0),
                                          state_path=cfg.get("state") or lstate(settings)), cfg))
    if "checkpoints" in wanted:
        from .checkpoints import CheckpointCollector

        cfg = wanted["checkpoints"]
        if not cfg.get("dirs"):
            raise NodeConfigError("[collectors.checkpoints] needs dirs = [\"/ckpt\", ...]")
        out.append(interval(CheckpointCollector(cfg["dirs"], node, job=cfg.get("job", job),
                                                done_marker=cfg.get("done_marker"),
                                                timeout_s=cfg.get("timeout", 1800.0),
                                                settle_s=cfg.get("settle", 10.0)), cfg))
    if "prometheus" in wanted:
        from .prometheus import PrometheusCollector

        cfg = wanted["prometheus"]
        if not cfg.get("targets"):
            raise NodeConfigError("[collectors.prometheus] needs targets = [\"http://127.0.0.1:9100/metrics\"]")
        out.append(interval(PrometheusCollector(cfg["targets"], node, timeout_s=cfg.get("timeout", 5.0)), cfg))
    return out


async def run_node(collectors: list[Collector], settings: Settings, *, once: bool = False,
                   output: str | None = None, rounds: int | None = None,
                   sink: Callable[[list[Envelope]], Awaitable[Any]] | None = None,
                   publisher: Any = None, metrics_every_s: float = 60.0,
                   metrics_port: int | None = None) -> int:
    """Run ``collectors`` concurrently with one shared publisher; returns events emitted.

    ``metrics_port``: serve ``GET /metrics`` (each collector's ``stats``, round errors included,
    and the spool's counters and depth) on ``settings.web_bind:metrics_port`` while running
    (not with ``once``); ``0`` picks a free port."""
    import sys

    pub = None
    if output == "-":
        out = sys.stdout.buffer

        async def emit(evs: list[Envelope]) -> None:
            out.write(b"".join(encode(ev) + b"\n" for ev in evs))
            out.flush()
    elif sink is not None:
        emit = sink
    else:
        if publisher is None:
            from ..spool import SpoolingPublisher

            publisher = SpoolingPublisher(settings)
        pub = await publisher.start()

        async def emit(evs: list[Envelope]) -> None:
            await pub.send_many(evs)

    server = None
    if metrics_port is not None and not once:
        try:
            server = await _metrics_server(collectors, settings, pub, metrics_port)
        except BaseException:  # e.g. the port is taken, or a non-loopback bind without a token
            if pub is not None:
                await pub.stop()
            raise
    tasks = [asyncio.create_task(run_collector(c, settings, once=once, rounds=rounds, sink=emit),
                                 name=f"collector:{c.name}") for c in collectors]
    reporter = None
    if pub is not None and not once and hasattr(pub, "metrics"):
        async def report() -> None:  # the spool's counters (dropped, backlog) as a log line
            while True:
                await asyncio.sleep(metrics_every_s)
                m = pub.metrics()
                stats = {c.name: getattr(c, "stats", None) for c in collectors if getattr(c, "stats", None)}
                log.info("node agent metrics: %s", m, extra={"spool": m, "collectors": stats})

        reporter = asyncio.create_task(report(), name="node-metrics")
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    waiter = asyncio.create_task(stop.wait())
    total = 0
    failed: list[str] = []
    try:
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending | {waiter}, return_when=asyncio.FIRST_COMPLETED)
            if waiter in done:
                break
            pending.discard(waiter)
        for t in tasks:
            if not t.done():
                t.cancel()
        for t in tasks:
            try:
                total += await t
            except asyncio.CancelledError:
                pass
            except CollectorFailed as e:  # --once: a round failed or a source did not answer
                failed.append(str(e))
            except Exception as e:
                log.error("collector task %s failed: %s", t.get_name(), e)
    finally:
        waiter.cancel()
        if reporter is not None:
            reporter.cancel()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
        if server is not None:
            await server.close()
        if pub is not None:
            if once and await pub.flush(timeout_s=ONCE_FLUSH_TIMEOUT_S) is False:
                failed.append(unacknowledged(settings, ONCE_FLUSH_TIMEOUT_S, getattr(pub, "dir", None)))
                await pub.stop(flush_timeout_s=0.0)
            else:
                await pub.stop()
    if failed:  # only with once: the other collectors' events went out all the same
        raise CollectorFailed("; ".join(failed))
    return total


async def _metrics_server(collectors: list[Collector], settings: Settings, pub: Any, port: int) -> Any:
    from ...metrics import CollectorsSource, Metrics, SpoolSource, start_metrics_server

    m = Metrics()
    m.add(CollectorsSource(collectors))
    if pub is not None and hasattr(pub, "metrics"):
        m.add(SpoolSource(pub))
    server = await start_metrics_server(settings.web_bind, port, metrics=m, token=settings.api_token)
    log.info("node agent metrics on %s", server.url, extra={"url": server.url})
    return server


def add_arguments(p: argparse.ArgumentParser) -> None:
    # same dest as the global --config: `collect node --config node.toml` also loads settings from it
    p.add_argument("--config", dest="config", default=argparse.SUPPRESS, metavar="FILE",
                   help="node TOML file ([faultline] settings, [node], [collectors.*])")
    p.add_argument("--once", action="store_true", help="one round of every collector, then exit")
    p.add_argument("--output", metavar="-", help="'-' prints contract JSON lines instead of publishing")
    p.add_argument("--metrics-port", type=int, default=None, metavar="P",
                   help="serve the agent's /metrics (spool depth, collector counters and round errors) on "
                        "FAULTLINE_WEB_BIND:P (127.0.0.1; a token for anything else)")
    p.add_argument("--nvml-module", help="NVML binding module or .py path (tests/fakes/pynvml.py without GPUs)")


def build(args: argparse.Namespace, settings: Settings) -> Collector:  # discovery needs it; node uses run()
    raise NodeConfigError("collect node runs several collectors: use run()")


def run(args: argparse.Namespace, settings: Settings) -> int:
    from ...cli import CliError

    try:
        doc = load_node_config(getattr(args, "config", None))
        collectors = build_collectors(doc, settings, nvml_module=args.nvml_module)
    except NodeConfigError as e:
        raise CliError(str(e)) from None
    if not collectors:
        raise CliError("no collector could start: check the [collectors] table of the node config")
    log.info("node agent: %s", ", ".join(c.name for c in collectors))
    asyncio.run(run_node(collectors, settings, once=args.once, output=args.output,
                         metrics_port=args.metrics_port))
    return 0
