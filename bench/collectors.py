"""Collector benchmarks (node part; the fabric/SNMP part lives in ``bench/collectors_snmp.py``).

1. ``node_publish``: events/s ONE producer process publishes to the real broker
   (encode + send + broker ack of pre-built ``gpu.sample`` events), through
   ``SpoolingPublisher`` (write-ahead spool on disk, what collectors use) against the
   baseline ``Publisher`` (aiokafka straight, no spool) measured in the same run.
2. ``node_cpu``: CPU of one ``faultline collect node`` agent at DEFAULT intervals on an
   8-GPU node (fake NVML, tests/fakes/pynvml.py) with kernel, storage, inventory, logs and
   checkpoints collectors, publishing to the broker, over ``--seconds`` (default 30),
   measured from /proc/<pid>/stat after start-up; beside the baseline of an idle Python
   process that imported the same code. Target: < 2 % of one core.

Broker: ``FAULTLINE_KAFKA_BOOTSTRAP`` (default 127.0.0.1:9092, ``make kafka-up``). Topics go
under a unique ``bench<hex>.`` prefix and are deleted afterwards.

    .venv/bin/python bench/collectors.py [--events 100000] [--seconds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.results import record  # noqa: E402
from faultline import config  # noqa: E402
from faultline.producers.publish import Publisher  # noqa: E402
from faultline.producers.spool import SpoolingPublisher  # noqa: E402
from faultline.schemas.events import GpuSample, GpuSampleData  # noqa: E402

FAKE = str(ROOT / "tests" / "fakes" / "pynvml.py")
TICKS = os.sysconf("SC_CLK_TCK")


def make_events(n: int, start: int = 0) -> list[GpuSample]:
    ts = int(time.time() * 1000)
    return [GpuSample(v=1, id=uuid.uuid4().hex, ts=ts, source="bench", node=f"gpu-{(i // 8) % 64:03d}",
                      data=GpuSampleData(gpu=i % 8, uuid=f"GPU-{i % 8}", util_pct=97.0, mem_used_mib=70000.0,
                                         mem_total_mib=81920.0, temp_c=61.0, power_w=612.0, sm_clock_mhz=1980.0,
                                         ecc_sbe=0, ecc_dbe=0, nvlink_errors=0, pcie_replay=0))
            for i in range(start, start + n)]


async def _publish(make, evs: list[GpuSample], batch: int = 1000) -> float:
    """events/s of send + broker ack (events are built beforehand, see the ceiling line)."""
    pub = make()
    await pub.start()
    t0 = time.perf_counter()
    for i in range(0, len(evs), batch):
        await pub.send_many(evs[i:i + batch])
    ok = await pub.flush(120) if isinstance(pub, SpoolingPublisher) else await pub.flush()
    dt = time.perf_counter() - t0
    await pub.stop()
    if ok is False:
        raise RuntimeError("spool did not drain within 120 s")
    return len(evs) / dt


async def _delete_topics(settings) -> None:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    try:
        await admin.start()
        names = [t for t in await admin.list_topics() if t.startswith(settings.topic_prefix)]
        if names:
            await admin.delete_topics(names)
    except Exception:
        pass
    finally:
        await admin.close()


def node_publish(events: int) -> None:
    base = config.load()
    spool = tempfile.mkdtemp(prefix="flbench-spool-")
    s = replace(base, topic_prefix=f"bench{uuid.uuid4().hex[:6]}.", spool_dir=spool)
    try:
        warm = make_events(2000)
        asyncio.run(_publish(lambda: Publisher(s), warm))  # warm up: topic creation, connections
        asyncio.run(_publish(lambda: SpoolingPublisher(s), warm))
        t0 = time.perf_counter()
        evs = make_events(events)
        build = events / (time.perf_counter() - t0)
        plain = asyncio.run(_publish(lambda: Publisher(s), evs))
        spooled = asyncio.run(_publish(lambda: SpoolingPublisher(s), evs))
    finally:
        asyncio.run(_delete_topics(s))
        shutil.rmtree(spool, ignore_errors=True)
    print(f"== node_publish: {events} gpu.sample events, one process, broker {s.kafka_bootstrap}")
    print(f"  building the events (not timed below) {build:>8,.0f} ev/s")
    print(f"  baseline Publisher (no spool)       {plain:>10,.0f} ev/s")
    print(f"  SpoolingPublisher (disk write-ahead) {spooled:>9,.0f} ev/s   ratio vs baseline {spooled / plain:.2f}")
    record("collector_publish_events_per_s", spooled, "events/s (one process, broker acked)",
           baseline="Publisher without the disk spool, same events, same run", baseline_value=plain)


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        f = fh.read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICKS  # utime + stime


def _measure(cmd: list[str], seconds: float, warmup: float, env: dict[str, str]) -> tuple[float, int]:
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    try:
        time.sleep(warmup)
        if p.poll() is not None:
            raise RuntimeError(f"{cmd[:4]} exited {p.returncode}: {p.stderr.read().decode()[-500:]}")
        c0, t0 = _cpu_s(p.pid), time.monotonic()
        time.sleep(seconds)
        c1, t1 = _cpu_s(p.pid), time.monotonic()
        return 100.0 * (c1 - c0) / (t1 - t0), p.pid
    finally:
        p.terminate()
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()


def node_cpu(seconds: float) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="flbench-node-"))
    base = config.load()
    prefix = f"bench{uuid.uuid4().hex[:6]}."
    try:
        (tmp / "kern.log").write_text("[    0.0] boot\n")
        (tmp / "logs" / "1").mkdir(parents=True)
        (tmp / "logs" / "1" / "rank0.log").write_text("step 1\n")
        (tmp / "ckpt").mkdir()
        cfg = tmp / "node.toml"
        cfg.write_text(f"""
[faultline]
kafka_bootstrap = "{base.kafka_bootstrap}"
topic_prefix = "{prefix}"
spool_dir = "{tmp / 'spool'}"
[node]
name = "bench-node"
job = "1"
[collectors.nvml]
[collectors.kernel]
file = "{tmp / 'kern.log'}"
[collectors.storage]
[collectors.inventory]
state = "{tmp / 'inv.json'}"
[collectors.logs]
globs = ["{tmp}/logs/*/rank*.log"]
[collectors.checkpoints]
dirs = ["{tmp / 'ckpt'}"]
""")
        env = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
        env["FAKE_NVML_GPUS"] = "8"
        fl = str(Path(sys.executable).parent / "faultline")
        agent, _ = _measure([fl, "collect", "node", "--config", str(cfg), "--nvml-module", FAKE],
                            seconds, 4.0, env)
        idle_code = ("import asyncio, faultline.producers.collectors.node, faultline.producers.spool\n"
                     "async def m():\n    while True: await asyncio.sleep(1)\nasyncio.run(m())")
        idle, _ = _measure([sys.executable, "-c", idle_code], seconds, 2.0, env)
    finally:
        asyncio.run(_delete_topics(replace(base, topic_prefix=prefix)))
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"== node_cpu: `collect node` on an 8-GPU node (fake NVML), default intervals "
          f"(nvml 10 s, kernel/logs 1 s, checkpoints 5 s, storage 10 s, inventory 300 s), {seconds:g} s")
    print(f"  baseline idle python (same imports) {idle:>6.2f} % of one core")
    print(f"  node agent                          {agent:>6.2f} % of one core   "
          f"(+{agent - idle:.2f} over baseline; target < 2 %: {'met' if agent < 2 else 'NOT met'}, "
          f"ratio to target {agent / 2:.2f})")
    record("collector_cpu_pct_8gpu", agent, "% of one core",
           baseline="idle python that imported the same code, same run", baseline_value=idle,
           note=f"`collect node`, 8 fake-NVML GPUs, default intervals, {seconds:g} s; target < 2 %")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--only", choices=("node_publish", "node_cpu"))
    a = ap.parse_args()
    if a.only in (None, "node_publish"):
        node_publish(a.events)
    if a.only in (None, "node_cpu"):
        node_cpu(a.seconds)


if __name__ == "__main__":
    main()
