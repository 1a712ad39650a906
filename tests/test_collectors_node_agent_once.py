"""`faultline collect node --once`: a collector whose source does not answer makes the run exit 2
naming it, and the other collectors' events still go out."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from faultline.schemas import decode

from conftest import free_port

FL = str(Path(sys.executable).parent / "faultline")


def test_once_with_an_unreachable_exporter_exits_2(tmp_path):
    dead = f"http://127.0.0.1:{free_port()}/metrics"
    cfg = tmp_path / "node.toml"
    cfg.write_text(f'[node]\nname = "gpu-017"\n[collectors.storage]\npaths = ["/"]\n'
                   f'[collectors.prometheus]\ntargets = ["{dead}"]\ntimeout = 1\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    r = subprocess.run([FL, "collect", "node", "--config", str(cfg), "--once", "--output", "-"],
                       capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert r.returncode == 2, r.stderr
    assert {decode(ln).kind for ln in r.stdout.splitlines()} == {"storage.mount", "storage.sample"}
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"faultline collect: collector prometheus: scrape of {dead} failed"), r.stderr
