"""`faultline demo --short` end to end through the real broker, the worker and the store:
the incidents it prints are the faults the simulator injected."""

from __future__ import annotations

import subprocess
import sys

import orjson


def test_demo_short_finds_the_injected_faults(faultline_env, tmp_path):
    workdir = tmp_path / "demo"
    p = subprocess.run([sys.executable, "-m", "faultline.cli", "demo", "--short", "--json",
                        "--workdir", str(workdir)], env=faultline_env, capture_output=True, timeout=900)
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    incidents = {(i["job"], i["attempt"]): i for i in map(orjson.loads, p.stdout.splitlines())}
    labels = orjson.loads((workdir / "labels.json").read_bytes())
    injected = {(lab["job"], lab["attempt"]): lab for lab in labels["interruptions"]}
    assert injected, "the short demo must inject faults"
    for key, lab in injected.items():
        assert key in incidents, f"no incident for injected {lab['category']} on job {key}"
        rc = incidents[key]["root_cause"]
        assert (rc["category"], rc["component"]) == (lab["category"], lab["component"]), (key, rc, lab)
    healthy = {(h["job"], h["attempt"]) for h in labels["healthy"]}
    assert not healthy & set(incidents), "incident raised for a healthy attempt"
    # the worker's sink landed them in the store, where `faultline incidents` finds them
    q = subprocess.run([sys.executable, "-m", "faultline.cli", "incidents", "--json"], env=faultline_env,
                       capture_output=True, timeout=120)
    assert q.returncode == 0, q.stderr.decode()[-2000:]
    stored = {(i["job"], i["attempt"]) for i in map(orjson.loads, q.stdout.splitlines())}
    assert set(injected) <= stored
