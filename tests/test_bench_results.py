"""bench/results.py: the one result writer `make bench` assembles bench/results.json from
(schema of issue 19), and the README block it rewrites. No bench runs here."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import results  # noqa: E402


def test_figures_to_results_json_schema_and_readme_block(tmp_path, monkeypatch):
    scratch = tmp_path / "figures.jsonl"
    assert results.record("x_per_s", 50.0, "events/s")["ratio"] is None   # no env: nothing written
    assert not scratch.exists()
    monkeypatch.setenv(results.ENV, str(scratch))
    results.record("worker_events_per_cpu_s", 60_000, "events per CPU-second", baseline="bare drain",
                   baseline_value=240_000, command="python bench/worker.py")
    results.record("trend_query_ms_100m", None, "ms", note="not measured")
    results.record("worker_events_per_cpu_s", 61_000, "events per CPU-second", baseline="bare drain",
                   baseline_value=244_000, command="python bench/worker.py")   # a re-run replaces it
    m = results.machine()
    doc = results.assemble(m, results.read_figures(scratch), tmp_path / "results.json")
    on_disk = orjson.loads((tmp_path / "results.json").read_bytes())
    assert on_disk == doc
    assert set(on_disk) == {"machine", "figures"}
    mach = on_disk["machine"]
    assert mach["cores"] >= 1 and mach["memory_mib"] > 0
    assert "commit" in mach and "uncommitted" in mach   # the code a run measured (None outside git)
    assert len(mach["load_before"]) == 3 and len(mach["load_after"]) == 3
    figs = {f["name"]: f for f in on_disk["figures"]}
    assert list(figs) == ["worker_events_per_cpu_s", "trend_query_ms_100m"]
    for f in figs.values():
        assert set(f) >= {"name", "value", "unit", "baseline", "baseline_value", "ratio", "command"}
    w = figs["worker_events_per_cpu_s"]
    assert (w["value"], w["baseline_value"], w["ratio"]) == (61_000, 244_000, 0.25)
    assert figs["trend_query_ms_100m"]["value"] is None and figs["trend_query_ms_100m"]["ratio"] is None

    table = results.readme_table(doc)
    assert "| worker_events_per_cpu_s | 61,000 | events per CPU-second | bare drain | 244,000 | 0.25 |" in table
    readme = f"# x\n\n{results.START}\nold table\n{results.END}\n\nafter\n"
    new = results.rewrite_block(readme, table)
    assert new is not None and "old table" not in new and table in new and new.endswith("after\n")
    assert results.rewrite_block("# no markers\n", table) is None


def test_missing_lists_every_required_figure_absent_or_unmeasured():
    figs = [{"name": n, "value": 1.0} for n in results.REQUIRED]
    assert results.missing(figs) == []
    figs[0]["value"] = None                       # recorded as not measured
    del figs[-1]                                  # not recorded at all
    assert results.missing(figs) == [results.REQUIRED[0], results.REQUIRED[-1]]
    for name in ("worker_events_per_cpu_s", "trend_query_ms_100m", "collector_cpu_pct_8gpu", "workers_same_incidents"):
        assert name in results.REQUIRED
