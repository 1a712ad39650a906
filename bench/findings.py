"""Cost of the proactive findings in the offline pipeline (``streams.offline``, the one
``diagnose``, ``ingest`` and ``findings --from`` run): the same raw lines through the
pipeline without findings (baseline: the Engine alone) and with them (Engine + findings
runner, hourly tests). Prints events/s of both and the ratio.

    .venv/bin/python bench/findings.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # bench.results

from bench.results import record  # noqa: E402
from faultline.producers.simulate import Intervals, Options, Simulation  # noqa: E402
from faultline.streams.offline import OfflinePipeline, engine_config  # noqa: E402


def main() -> None:
    sim = Simulation("lemon-node", 1, Options(intervals=Intervals(gpu=120, hw=300, net_port=60, net_rdma=60, storage=60)))
    lines = [ln.rstrip(b"\n") for ln in sim.lines()]
    batches = [lines[i:i + 5000] for i in range(0, len(lines), 5000)]
    cfg = engine_config()

    def run(findings: bool) -> tuple[float, float, OfflinePipeline]:
        """(total, time spent inside Engine.process/finish, pipeline)."""
        pipe = OfflinePipeline(cfg, findings=findings)
        eng = pipe.engine
        spent = [0.0]
        for name in ("process", "finish"):
            orig = getattr(eng, name)

            def timed(*a, _orig=orig):
                t0 = time.perf_counter()
                try:
                    return _orig(*a)
                finally:
                    spent[0] += time.perf_counter() - t0
            setattr(eng, name, timed)
        t = time.perf_counter()
        for b in batches:
            pipe.feed_lines(b)
        pipe.finish()
        return time.perf_counter() - t, spent[0], pipe

    # alternate the two and keep the best of 3 each: the machine is shared, so the
    # findings' own cost is also measured directly as (pipeline total - time inside the engine)
    base, with_f, own = float("inf"), float("inf"), float("inf")
    for _ in range(3):
        base = min(base, run(False)[0])
        dt, inside, pipe = run(True)
        with_f = min(with_f, dt)
        own = min(own, dt - inside)
    n = pipe.stats.events
    tr = pipe.runner.tracker
    print(f"events: {n}, findings: {len(pipe.findings())}, tracker state: {tr.stats()}, dump {len(tr.dump())} bytes")
    print(f"engine alone:      {base:.2f} s  {n / base:,.0f} events/s")
    print(f"engine + findings: {with_f:.2f} s  {n / with_f:,.0f} events/s")
    print(f"findings' own time (pipeline total - time inside the engine): {own:.2f} s")
    print(f"ratio (with findings / engine alone): {with_f / base:.3f}; "
          f"findings' own time / engine alone: {own / base:.3f}")
    record("findings_own_time", own, "s", baseline="engine alone (offline pipeline without findings)",
           baseline_value=base, note=f"{n} events of the lemon-node scenario; best of 3")
    record("offline_pipeline_with_findings", n / with_f, "events/s", baseline="engine alone",
           baseline_value=n / base)


if __name__ == "__main__":
    main()
