"""Execute notebooks/trends.ipynb headless against a store (``make notebook``).

    python notebooks/run.py [--store DIR] [--out DIR] [--notebook FILE]

The kernel is this interpreter (a kernelspec written to a temporary JUPYTER_PATH), so the
notebook sees the faultline it is run with, whatever ``python`` is on PATH. Writes
``<out>/trends.ipynb`` (executed, with its figures) and, when nbconvert is installed,
``<out>/trends.html``; prints both paths. Exit 2 with the reason when the store is missing
or a cell fails (the executed notebook is still written, the failing cell's output in it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
KERNEL = "faultline-notebook"


def kernelspec(root: Path) -> str:
    """A kernelspec under ``root`` that runs this interpreter; returns its name."""
    kdir = root / "kernels" / KERNEL
    kdir.mkdir(parents=True, exist_ok=True)
    (kdir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "faultline", "language": "python"}))
    return KERNEL


def execute(notebook: Path, store: str | None, out: Path, *, timeout_s: int = 600,
            env: dict[str, str] | None = None):
    """Run ``notebook`` top to bottom; returns ``(executed notebook, error or None)`` and
    writes it to ``out``. ``store`` becomes FAULTLINE_STORE for the kernel."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(notebook, as_version=4)
    out.mkdir(parents=True, exist_ok=True)
    saved = dict(os.environ)
    err = None
    with tempfile.TemporaryDirectory(prefix="faultline-jupyter-") as jp:
        try:
            os.environ.update(env or {})
            os.environ["JUPYTER_PATH"] = jp
            os.environ.setdefault("MPLBACKEND", "Agg")
            if store:  # absolute: the kernel runs in ``out``, a relative path would miss the store
                os.environ["FAULTLINE_STORE"] = str(Path(store).resolve())
            client = NotebookClient(nb, kernel_name=kernelspec(Path(jp)), timeout=timeout_s, allow_errors=False,
                                    resources={"metadata": {"path": str(out)}})
            try:
                client.execute()
            except CellExecutionError as e:
                err = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        finally:
            os.environ.clear()
            os.environ.update(saved)
    nbformat.write(nb, out / notebook.name)
    return nb, err


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--store", default=os.environ.get("FAULTLINE_STORE"),
                   help="chDB store directory (default $FAULTLINE_STORE, else the settings' store)")
    p.add_argument("--out", default="var/notebook", help="where the executed notebook goes (default var/notebook)")
    p.add_argument("--notebook", default=str(HERE / "trends.ipynb"))
    p.add_argument("--timeout", type=int, default=600, help="seconds per cell (default 600)")
    a = p.parse_args(argv)
    if a.store and not Path(a.store).is_dir():
        print(f"notebook: store {a.store} does not exist: fill one with `faultline ingest FILE.jsonl --store "
              f"{a.store}` or `make demo`", file=sys.stderr)
        return 2
    out = Path(a.out)
    store = str(Path(a.store).resolve()) if a.store else None
    nb, err = execute(Path(a.notebook), store, out, timeout_s=a.timeout)
    written = [out / Path(a.notebook).name]
    try:
        from nbconvert import HTMLExporter

        html, _ = HTMLExporter().from_notebook_node(nb)
        written.append(out / (Path(a.notebook).stem + ".html"))
        written[-1].write_text(html)
    except ImportError:
        pass
    for w in written:
        print(w)
    if err:
        print(f"notebook: a cell failed: {err} (see {written[0]})", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
