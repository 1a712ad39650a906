"""`faultline collect node`: every node collector in one process, one publisher, against
the real broker; and the CLI's --once --output - path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
from aiokafka import AIOKafkaConsumer

from faultline.producers.collectors.node import build_collectors, run_node
from faultline.schemas import decode

FAKE = str(Path(__file__).parent / "fakes" / "pynvml.py")
ROOT = Path(__file__).resolve().parents[1]
FL = str(Path(sys.executable).parent / "faultline")
XID = "[ 9184.1] NVRM: Xid (PCI:0000:48:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."


def node_toml(tmp_path: Path) -> Path:
    (tmp_path / "kern.log").write_text(XID + "\n[ 9200.5] Out of memory: Killed process 4242 (python)\n")
    (tmp_path / "logs" / "48213").mkdir(parents=True)
    (tmp_path / "logs" / "48213" / "rank0.log").write_text(
        "step 1\n[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    (tmp_path / "ckpt" / "checkpoint-100").mkdir(parents=True)
    p = tmp_path / "node.toml"
    p.write_text(f"""
[node]
name = "gpu-017"
job = "48213"
[collectors.nvml]
module = "{FAKE}"
[collectors.kernel]
file = "{tmp_path / 'kern.log'}"
from_start = true
[collectors.storage]
paths = ["/"]
[collectors.inventory]
state = "{tmp_path / 'inv.json'}"
[collectors.logs]
globs = ["{tmp_path / 'logs'}/*/rank*.log"]
path_patterns = ["{{job}}/rank{{rank}}.log"]
from_start = true
[collectors.checkpoints]
dirs = ["{tmp_path / 'ckpt'}"]
""")
    return p


EXPECTED = {"gpu.sample", "gpu.xid", "runtime.log", "storage.mount", "storage.sample", "inventory.versions",
            "runtime.checkpoint"}


def test_cli_once_output(tmp_path):
    cfg = node_toml(tmp_path)
    r = subprocess.run([FL, "collect", "node", "--config", str(cfg), "--once", "--output", "-"],
                       capture_output=True, cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    evs = [decode(ln) for ln in r.stdout.splitlines()]
    assert {e.kind for e in evs} == EXPECTED
    xid = [e for e in evs if e.kind == "gpu.xid"][0]
    assert xid.data.gpu == 3  # PCI 0000:48:00 -> GPU 3 through the (fake) NVML of the same agent
    assert sum(e.kind == "gpu.sample" for e in evs) == 8
    assert {e.job for e in evs if e.kind.startswith("runtime.")} == {"48213"}


def test_cli_nvml_named_but_missing_is_an_error(tmp_path):
    p = tmp_path / "node.toml"
    p.write_text("[collectors.nvml]\n[collectors.storage]\n")
    r = subprocess.run([FL, "collect", "node", "--config", str(p), "--once", "--output", "-"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=60)
    try:
        import pynvml
        pynvml.nvmlInit()
        return  # a GPU machine: nvml starts
    except Exception:
        pass
    assert r.returncode == 2 and "NVML not available" in r.stderr


async def test_one_process_one_publisher_to_kafka(settings, tmp_path):
    import tomllib

    doc = tomllib.loads(node_toml(tmp_path).read_text())
    collectors = build_collectors(doc, settings)
    n = await run_node(collectors, settings, once=True)
    assert n > 0
    got: dict[str, int] = {}
    c = AIOKafkaConsumer(*[settings.topic(t) for t in ("fl.gpu", "fl.storage", "fl.runtime", "fl.inventory")],
                         bootstrap_servers=settings.kafka_bootstrap, auto_offset_reset="earliest")
    await c.start()
    try:
        total = 0
        for _ in range(40):
            for _tp, msgs in (await c.getmany(timeout_ms=500)).items():
                for m in msgs:
                    k = orjson.loads(m.value)["kind"]
                    got[k] = got.get(k, 0) + 1
                    total += 1
            if total >= n:
                break
    finally:
        await c.stop()
    assert total == n
    assert set(got) == EXPECTED


def test_default_collectors_without_collectors_table(tmp_path):
    """No [collectors] table: nvml (skipped with a warning when the node has no NVML),
    kernel, storage, inventory."""
    p = tmp_path / "node.toml"
    p.write_text(f'[node]\nname = "n9"\n[faultline]\nspool_dir = "{tmp_path / "spool"}"\n')
    r = subprocess.run([FL, "collect", "node", "--config", str(p), "--once", "--output", "-"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    kinds = {decode(ln).kind for ln in r.stdout.splitlines()}
    assert {"storage.mount", "storage.sample", "inventory.versions"} <= kinds
    assert all(decode(ln).node == "n9" for ln in r.stdout.splitlines())
