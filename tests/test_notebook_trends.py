"""notebooks/trends.ipynb runs top to bottom (notebooks/run.py: nbclient, a real kernel) on a
simulated fleet ingested with `faultline ingest`; any cell error fails the test, and the
figures it prints (top offender, lost GPU-hours and their bucket, MTBF over every node) are
checked against the store."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FAULTLINE = os.path.join(os.path.dirname(sys.executable), "faultline")


def simulated_store(tmp: Path) -> tuple[str, str]:
    """A store filled by `faultline ingest` from the simulator's lemon-node scenario (the
    engine diagnoses it); falls back to sinks.dataset when the simulator is absent."""
    events = tmp / "sim.jsonl"
    try:
        from faultline.producers.simulate import Intervals, simulate

        lines, labels = simulate("lemon-node", seed=1, hours=4,
                                 intervals=Intervals(gpu=120, hw=300, net_port=120, net_rdma=120, storage=120, mount=600))
        lemon = labels["fleet"]["lemon_nodes"][0]
    except ImportError:
        from faultline.sinks import dataset

        ds = dataset.build(seed=2, n_jobs=40)
        lines, lemon = ds.events, ds.offender_node
    events.write_bytes(b"\n".join(lines) + b"\n")
    store = str(tmp / "store")
    r = subprocess.run([FAULTLINE, "ingest", str(events), "--store", store, "--quiet"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return store, lemon


def _texts(nb) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def _png_sizes(nb) -> list[tuple[int, int]]:
    import base64
    import struct

    out = []
    for c in nb.cells:
        for o in c.get("outputs", []) if c.cell_type == "code" else ():
            if "image/png" in o.get("data", {}):
                out.append(struct.unpack(">II", base64.b64decode(o["data"]["image/png"])[16:24]))
    return out


BUCKETS_S = [900, 3600, 6 * 3600, 86400, 7 * 86400, 30 * 86400]


@pytest.mark.slow
def test_trends_notebook_executes(tmp_path):
    """notebooks/run.py (what `make notebook` runs) executes the notebook against the store;
    its printed figures are checked against the store itself."""
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    sys.path.insert(0, str(ROOT / "notebooks"))
    try:
        import run as runner
    finally:
        sys.path.pop(0)
    store, lemon = simulated_store(tmp_path)
    nb, err = runner.execute(ROOT / "notebooks" / "trends.ipynb", store, tmp_path / "out", timeout_s=300)
    assert err is None, err
    assert (tmp_path / "out" / "trends.ipynb").is_file()
    text = _texts(nb)
    assert "store: chdb" in text
    sizes = _png_sizes(nb)
    assert len(sizes) == 4, f"expected the 4 figures, got {sizes}"
    w, h = sizes[0]  # the offenders: one chart, not a strip of one panel per dimension
    assert w <= 1000 and h >= 250 and w / h < 3, sizes[0]

    # one ranked table across dimensions, led by the injected lemon node
    table = [ln for ln in text.splitlines() if re.match(r"^\s*\d+ (node|gpu|port|segment|path|driver|image) ", ln)]
    assert len({ln.split()[1] for ln in table}) >= 3, table
    assert re.search(rf"^top offender: node {re.escape(lemon)} \(", text, re.M), text

    from faultline import config
    from faultline.sinks.client import open_reader
    from faultline.sinks.trends import get_query

    reader = open_reader(config.load(env={}), store)
    try:
        inc = reader.query("SELECT toUnixTimestamp64Milli(min(failure_ts)) AS lo, toUnixTimestamp64Milli(max(failure_ts)) AS hi,"
                           " sum(lost_gpu_hours) AS h FROM incidents FINAL WHERE state != 'recovered'")[0]
        nodes = reader.query("SELECT uniqExact(n) AS n FROM attempts ARRAY JOIN nodes AS n")[0]["n"]
        q = get_query("mtbf")
        mt = [r for r in reader.query(q.sql, q.bind({})) if r["scope"] == "node"]
    finally:
        reader.close()
    m = re.search(r"^lost compute: ([\d.]+) GPU-hours in (\d+) bucket\(s\) of (.+?) over", text, re.M)
    assert m, text
    assert abs(float(m.group(1)) - inc["h"]) < 0.01
    n_buckets, label = int(m.group(2)), m.group(3)
    span_s = (inc["hi"] - inc["lo"]) / 1000
    fitted = next(b for b in BUCKETS_S if span_s / b <= 36)  # the smallest bucket with <= 36 bars
    assert label == {900: "15 min", 3600: "1 h", 21600: "6 h", 86400: "1 day"}.get(fitted), (label, span_s)
    assert 1 <= n_buckets <= 37
    assert re.search(rf"^by component: .*'gpu:{re.escape(lemon)}/", text, re.M), text

    m = re.search(r"^fleet MTBF: ([\d.]+) h over (\d+) node\(s\), (\d+) without a failure", text, re.M)
    assert m, text
    assert int(m.group(2)) == nodes and int(m.group(3)) > 0  # the failure-free nodes are in
    hours, fails = sum(r["hours"] for r in mt), sum(r["failures"] or 0 for r in mt)
    assert abs(float(m.group(1)) - hours / fails) < 0.01
    assert "evidence item(s)" in text
