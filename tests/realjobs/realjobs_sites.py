"""The framework libraries the integration tests run under /usr/bin/python3 (Debian's torch 1.13).

Each goes into a private ``--target`` directory ``var/realjobs-site/<name>`` (the venv's pip,
``--no-deps``, pinned: pure-Python and abi3/cp311 wheels), installed once and then reused
(``.complete`` marker). ``make test`` runs this first (``python tests/realjobs/realjobs_sites.py``);
a test whose directory is missing installs it the same way.

- ``hf``: transformers 4.36.2 + accelerate 0.25.0, the newest pair that supports torch 1.13.
- ``pl22``: pytorch-lightning 2.2.5, the newest line that supports torch 1.13 and does not
  import torch.distributed.fsdp at import time (1.9.5 does, and torch 1.13's fsdp cannot be
  imported on Python 3.11).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "var" / "realjobs-site"

PINS: dict[str, list[str]] = {
    "hf": ["transformers==4.36.2", "accelerate==0.25.0", "tokenizers>=0.14,<0.19", "safetensors>=0.3.1",
           "huggingface-hub>=0.19.3,<1.0", "regex", "requests", "filelock", "tqdm", "PyYAML", "packaging",
           "psutil", "typing-extensions>=4.5", "fsspec", "urllib3", "idna", "certifi", "charset-normalizer"],
    "pl22": ["pytorch-lightning==2.2.5", "torchmetrics==1.3.2", "lightning-utilities==0.11.2", "tqdm", "fsspec",
             "typing-extensions>=4.5", "PyYAML", "packaging"],
}


def install(name: str) -> tuple[Path, str]:
    """``(directory, error)``: error is pip's stderr tail when the install failed, else ''."""
    d = SITE / name
    marker = d / ".complete"
    if marker.exists() and marker.read_text() == " ".join(PINS[name]):
        return d, ""
    p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--upgrade", "--target", str(d),
                        *PINS[name]], capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        return d, p.stderr[-800:]
    marker.write_text(" ".join(PINS[name]))
    return d, ""


def main() -> int:
    bad = 0
    for name in PINS:
        d, err = install(name)
        if err:
            print(f"realjobs sites: {name} not installed into {d}: {err}", file=sys.stderr)
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
