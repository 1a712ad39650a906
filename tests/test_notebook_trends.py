"""notebooks/trends.ipynb runs top to bottom (nbclient, a real kernel) on a simulated fleet
ingested with `faultline ingest`; any cell error fails the test."""

from __future__ import annotations

import json
import os
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


@pytest.fixture
def kernel_name(tmp_path, monkeypatch):
    """A kernelspec that runs THIS interpreter (the venv), whatever `python` is on PATH."""
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    kdir = tmp_path / "jupyter" / "kernels" / "faultline-test"
    kdir.mkdir(parents=True)
    (kdir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "faultline test", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    return "faultline-test"


@pytest.mark.slow
def test_trends_notebook_executes(tmp_path, kernel_name, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    store, lemon = simulated_store(tmp_path)
    monkeypatch.setenv("FAULTLINE_STORE", store)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(ROOT / "notebooks" / "trends.ipynb", as_version=4)
    client = NotebookClient(nb, kernel_name=kernel_name, timeout=300, allow_errors=False,
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError on any cell error
    pngs = sum(1 for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
               if "image/png" in o.get("data", {}))
    assert pngs >= 4, f"expected the 4 figures, got {pngs}"
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "store: chdb" in text
    assert f"node     #1 {lemon}" in text, text  # the injected lemon node leads the repeat offenders
    assert "evidence item(s)" in text
