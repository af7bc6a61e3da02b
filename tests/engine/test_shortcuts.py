"""The plain engine pays nothing for the shortcuts: they are installed only when one is on."""
from __future__ import annotations

import pytest

from memsim.engine import scheduler, watch
from memsim.engine.pipeline import StepRun
from memsim.engine.scheduler import Simulation


def _runs(monkeypatch: pytest.MonkeyPatch) -> list[StepRun]:
    """The steps a simulation runs, as their rows are made."""
    runs: list[StepRun] = []
    rows = scheduler.step_rows

    def recorded(run: StepRun):
        runs.append(run)
        return rows(run)

    monkeypatch.setattr(scheduler, "step_rows", recorded)
    return runs


def _servers(sim: Simulation) -> list:
    links = list(sim.links.ports.values()) if sim.links is not None else []
    return [s for res in sim.chips.values() for s in res.servers()] + links


def test_a_plain_run_installs_no_shortcut_bookkeeping(tiny_plan, monkeypatch):
    def refused(*args, **kwargs):
        raise AssertionError("a plain run made a shortcut's object")

    monkeypatch.setattr(scheduler, "Shortcuts", refused)
    monkeypatch.setattr(watch.Touches, "__init__", refused)
    runs = _runs(monkeypatch)
    sim = Simulation(tiny_plan, fast_forward=False, memoize=False)
    result = sim.run()
    assert sim.shortcuts is None and result.replayed_tasks == 0
    assert all(s.watch is None for s in _servers(sim))
    assert runs and all(r.observer is None and r.chunk_stalls is r.stalls for r in runs)


@pytest.mark.parametrize("fast_forward, memoize", [(True, False), (False, True), (True, True)])
def test_a_shortcut_watches_every_server(tiny_plan, monkeypatch, fast_forward, memoize):
    runs = _runs(monkeypatch)
    sim = Simulation(tiny_plan, fast_forward=fast_forward, memoize=memoize)
    sim.run()
    assert sim.shortcuts is not None
    assert all(isinstance(s.watch, watch.Touches) for s in _servers(sim))
    assert all((r.observer is not None) == fast_forward for r in runs)
