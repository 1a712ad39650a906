"""Simulator: a GPU cluster with jobs, background telemetry of every layer, injected faults
and the ground truth of every interruption.

    from faultline.producers.simulate import simulate, iter_events, Simulation, scenario_names
    lines, labels = simulate("gpu-xid79", seed=1)            # list[bytes], dict
    dicts, labels = simulate("gpu-xid79", seed=1, as_dicts=True)
    for line in iter_events("mixed", seed=3, nodes=64):       # streaming bytes
        ...
    sim = Simulation("healthy", seed=0, hours=1); lines = list(sim.lines()); sim.labels()

See docs/simulator.md for the scenarios, the label format and the scale figures.
"""

from __future__ import annotations

from typing import Any, Iterator

from .engine import DEFAULT_START_MS, Delivery, Options, Simulation
from .scenarios import SCENARIOS, Scenario, names as scenario_names
from .telemetry import Intervals

__all__ = ["DEFAULT_START_MS", "Delivery", "Intervals", "Options", "SCENARIOS", "Scenario", "Simulation",
           "iter_events", "scenario_names", "simulate"]


def simulate(scenario: str, seed: int = 0, *, as_dicts: bool = False, **kw: Any) -> tuple[list, dict]:
    """Run one scenario to completion: ``(events, labels)``.

    ``events`` are encoded JSON lines (bytes, no newline) or dicts with ``as_dicts``
    (dicts skip delivery faults). Keyword options: ``nodes``, ``gpus_per_node``, ``hours``,
    ``start_ms``, ``day_start_ms``, ``intervals`` (``Intervals``), ``delivery`` (``Delivery``), ``job_base``.
    """
    sim = Simulation(scenario, seed, **kw)
    events = list(sim.records()) if as_dicts else list(sim.lines())
    return events, sim.labels()


def iter_events(scenario: str, seed: int = 0, **kw: Any) -> Iterator[bytes]:
    """Stream one scenario's encoded events (use ``Simulation`` to read labels afterwards)."""
    return Simulation(scenario, seed, **kw).lines()
