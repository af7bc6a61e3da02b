"""The pipeline in one call: config -> workload -> mapping -> engine -> report."""
from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsim import engine, hardware, mapping, report, workload
from memsim.core import collector, memo, units
from memsim.core.errors import ConfigError, MemsimWarning, run_field
from memsim.hardware.dumps import dump_chip, spec_estimates
from memsim.hardware.loader import one_reading
from memsim.hardware.resource import Ref
from memsim.report import energy, spill
from memsim.report import rows as table_rows
from memsim.report.summary_records import ABSENT, plain
from memsim.run import generation, grid, inputs, powercap, sensitivity, speculative
from memsim.run.chipfile import chip_path
from memsim.run.lazytables import Tables
from memsim.run.machine import (  # noqa: F401  (the loaders, as callers know them here)
    blamed,
    estimates,
    load_stack,
    stack_estimates,
    system_overrides,
)
from memsim.run.machine import load_chip as _load_chip
from memsim.run.runspec import RunSpec
from memsim.run.steps import load_workload, step_graphs
from memsim.stack import loader as stack_mod
from memsim.stack.spec import IDEAL, StackSpec

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_SAMPLES = RunSpec.samples  # decode steps simulated for a generation; the rest are interpolated


@dataclass(frozen=True)
class Result:
    """A finished run. ``summary`` is a ``memsim.report.Summary`` (``summary.as_dict()``: what
    summary.json holds); ``timeline`` and ``ops`` are DataFrames, built when first read."""

    summary: report.Summary
    tables: Tables
    chip: hardware.ChipSpec
    graph: workload.OpGraph
    plan: mapping.Plan
    engine: engine.EngineResult
    # The levels and links the run moved bytes through: every step's, for a generation or a
    # speculative step (the estimates of the others cannot matter, ``memsim.run.sensitivity``).
    moved: frozenset[Ref] = frozenset()
    inputs: tuple[Path, ...] = ()  # the files the run read: ``write`` never writes over them

    def __repr__(self) -> str:  # a notebook shows this, not the tables
        w = self.summary.workload
        return (f"Result({self.summary.hardware}, {w.model or w.source or 'trace'} "
                f"{w.phase or ''}, batch {1 if w.batch is None else w.batch}, step {self.summary.step_time_s * 1e3:.4g} ms)")

    @property
    def timeline(self) -> pd.DataFrame:
        """One row per interval (docs/columns.md): timeline.csv."""
        return self.tables.get("timeline")

    @property
    def ops(self) -> pd.DataFrame:
        """One row per operator (docs/columns.md): ops.csv."""
        return self.tables.get("ops")

    @property
    def stalls(self) -> pd.Series:
        """Seconds compute waited, by cause, largest first (``summary.stall_s``)."""
        import pandas as pd

        return pd.Series(self.summary.stall_s, name="stall_s", dtype=float).sort_values(ascending=False)

    def summary_frame(self) -> pd.DataFrame:
        """The summary as a one-row DataFrame, nested keys flattened with dots (as a sweep's results.csv)."""
        import pandas as pd

        return pd.DataFrame([report.flatten(self.summary.as_dict())])

    def write(self, out: str | Path, perfetto: bool = False) -> list[Path]:
        extra = {}
        if perfetto:
            meta = {"hardware": self.chip.name, "workload": plain(self.summary.workload)}
            extra["trace.perfetto.json"] = report.perfetto_json(self.plan, self.engine, meta)
        with collector.deferred():  # the tables are built here, as many objects as the run's records
            return report.write_outputs(Path(out), self.summary.as_dict(), self.tables.rows("ops"),
                                        self.tables.rows("timeline"), dump_chip(self.chip), extra, self.inputs)


def resolve(hw: str = RunSpec.hw, model: str | None = None, **options: Any) -> RunSpec:
    """The run ``simulate`` would do, with the defaults that depend on the model filled in."""
    return fill_defaults(RunSpec.make({"hw": hw, "model": model, **options}))


def fill_defaults(spec: RunSpec, positions: dict[str, int] | None = None) -> RunSpec:
    """``spec`` with the defaults that depend on its model filled in (``positions``: the models'
    positions already looked up, which this adds to)."""
    if spec.model is None:
        return spec.resolved(None)
    known = positions if positions is not None else {}
    if spec.model not in known:
        known[spec.model] = workload.model_config(spec.model).max_positions
    return spec.resolved(known[spec.model])


def _plan(chip: hardware.ChipSpec, hw_file: str, graph: workload.OpGraph, pp: int = 1,
          micro: tuple[workload.OpGraph, ...] = (), trace: str | None = None, stack: StackSpec = IDEAL) -> mapping.Plan:
    with blamed(hw_file, trace):
        return mapping.make_plan(graph, chip, mapping.Grid.of(graph, pp), micro, stack)


def _executed(chip: hardware.ChipSpec, hw_file: str, graph: workload.OpGraph, fast_forward: bool, memoize: bool,
              pp: int = 1, micro: tuple[workload.OpGraph, ...] = (), trace: str | None = None,
              stack: StackSpec = IDEAL) -> tuple[mapping.Plan, engine.EngineResult]:
    """The plan and the engine's result of one step, at the highest clock the power cap allows."""
    with blamed(hw_file, trace):
        return powercap.run(chip, lambda at: mapping.make_plan(graph, at, mapping.Grid.of(graph, pp), micro, stack),
                            lambda p: engine.run(p, fast_forward=fast_forward, memoize=memoize))


def _run(chip: hardware.ChipSpec, hw_file: str, graph: workload.OpGraph, fast_forward: bool, memoize: bool,
         pp: int = 1, micro: tuple[workload.OpGraph, ...] = (), trace: str | None = None,
         stack: StackSpec = IDEAL) -> Result:
    plan, result = _executed(chip, hw_file, graph, fast_forward, memoize, pp, micro, trace, stack)
    return Result(report.summarize(graph, plan, result, micro),
                  Tables(lambda: report.timeline(result), lambda: report.ops(graph, plan, result)), chip, graph, plan, result,
                  frozenset(u.resource.ref for u in result.usage if u.read or u.written))


def simulate_graph(hw: str, graph: workload.OpGraph, *, set: Iterable[str] | dict[str, str] = (),
                   fast_forward: bool = True, memoize: bool = True, stack: str | None = None) -> Result:
    """Simulate an operator DAG built in Python (or by an importer) on a chip, run by ``stack``
    (default: the chip family's)."""
    if not isinstance(graph, workload.OpGraph):
        raise ConfigError(f"expected an OpGraph (memsim.workload), got {units.shown(graph)}", field="graph")
    chip, hw_path = _load_chip(hw, set)
    runtime = load_stack(stack, chip, set)[0]
    graph.validate()
    with collector.deferred():
        result = _run(chip, hw_path, graph, fast_forward, memoize, stack=runtime)
    found = spec_estimates(chip) + stack_estimates(runtime)
    used = sensitivity.report(result.summary, found, result.moved,
                              known=sensitivity.known_of(result.plan, result.engine, result.moved))
    return dataclasses.replace(result, summary=dataclasses.replace(result.summary, estimates=used))


def simulate(hw: Any = RunSpec.hw, model: str | None = None, **options: Any) -> Result:
    """Simulate one step, or with ``phase="generate"`` a prefill of ``prompt`` tokens and
    ``generate`` decode steps. ``hw`` is a preset name, a path, a ``ChipSpec`` or a dict (a hardware
    YAML's mapping); the keyword arguments are ``RunSpec``'s fields (``memsim.RunSpec``); ``set``
    overrides hardware fields, quantities as text or numbers in base units: ``{"sram.capacity": "64MiB"}``."""
    return run(resolve(chip_path(hw), model, **options))


def run(spec: RunSpec) -> Result:
    """Simulate a resolved ``RunSpec`` (see ``resolve``); ``chips`` without a grid: the fastest
    grid that fits (``memsim.run.grid``). The summary's ``estimates`` names the estimated preset
    values the result rests on and, with ``spec.sensitivity``, how far the step moves across
    their ranges (``memsim.run.sensitivity``)."""
    if not isinstance(spec, RunSpec):
        raise ConfigError(f"expected a RunSpec (memsim.resolve), got {units.shown(spec)}", field="spec")
    # the run, its estimates and its reruns read each file once (one version of it) and share their graphs and plans
    with one_reading(), memo.shared(), collector.deferred():
        return _run_reading_once(spec)


def _run_reading_once(spec: RunSpec) -> Result:
    if spec.context is None or spec.prompt is None:
        spec = spec.resolved(None)
    result = _simulate(spec)
    for line in (spill.spill_warning(result.graph, result.plan), spill.idle_warning(result.graph, result.plan),
                 powercap.unmet(result.summary)):
        if line is not None:
            warnings.warn(MemsimWarning(line), stacklevel=3)
    if result.summary.grid_search is not ABSENT:  # the reruns keep the grid the search chose
        chosen = result.summary.grid
        spec = dataclasses.replace(spec, tp=chosen.tp, pp=chosen.pp, chips=None)
    found = estimates(spec.hw, spec.set, spec.system, spec.stack)

    one_step = spec.phase != "generate" and spec.draft is None  # the plan and records are the whole run's

    def rerun(path: str, value: str) -> tuple[float, float]:
        changed = dataclasses.replace(spec, set=(*spec.set, (path, value)))
        if one_step and spec.trace is None:
            return _time_and_energy(changed)
        summary = _simulate(changed).summary
        return summary.step_time_s, summary.energy_j.total

    top = spec.sensitivity if spec.sensitivity is not None else sensitivity.auto(result.summary)
    known = sensitivity.known_of(result.plan, result.engine, result.moved) if one_step else sensitivity.Known()
    shown = sensitivity.report(result.summary, found, result.moved, top, rerun, known)
    defaults = [e.path for e in found if e.by_family]  # the efficiencies its family filled in
    if defaults:
        shown = dataclasses.replace(shown, defaults=tuple(defaults))
    if spec.sensitivity is None and not top:
        shown = dataclasses.replace(shown, not_rerun=sensitivity.work(result.summary))
    stack_used = dataclasses.replace(result.summary.stack, default=spec.stack in (None, stack_mod.AUTO))
    return dataclasses.replace(result, summary=dataclasses.replace(result.summary, estimates=shown, stack=stack_used),
                               inputs=inputs.files(spec))


def _simulate(spec: RunSpec) -> Result:
    """``run`` without the estimates: the step or generation itself."""
    if spec.context is None or spec.prompt is None:
        spec = spec.resolved(None)
    if spec.chips is not None and spec.chips != spec.tp * spec.pp:
        return grid.fastest(spec, roofline_s, _simulate)
    chip, hw_path = _load_chip(spec.hw, spec.set, spec.system)
    runtime = load_stack(spec.stack, chip, spec.set)[0]
    shortcuts = spec.fast_forward
    if spec.trace is not None:
        if spec.microbatches not in (None, 1):
            raise ConfigError("a trace holds one step: it cannot be split into micro-batches", field=run_field("microbatches"))
        return _run(chip, hw_path, load_workload(spec), shortcuts, shortcuts, spec.pp, trace=spec.trace, stack=runtime)
    config = workload.model_config(spec.required_model())

    def plain_step(step_phase: str, tokens: int) -> Result:
        graph, micro = step_graphs(spec, chip, config, step_phase, tokens)
        return _run(chip, hw_path, graph, shortcuts, shortcuts, spec.pp, micro, stack=runtime)

    run_step: Callable[[str, int], Result] = plain_step
    if spec.draft is not None:  # each decode step drafts and verifies (memsim.run.speculative)
        run_step = speculative.stepper(spec, plain_step, _simulate)
    if spec.phase != "generate":
        return run_step(spec.phase, spec.tokens(spec.phase))
    prefill, summary, decodes = generation.generate(run_step, spec.tokens("prefill"), spec.generate, spec.samples)
    first = decodes[min(decodes)]
    shift = prefill.summary.step_time_s
    def joined(name: str) -> table_rows.Rows:  # the prefill's rows, then the first decode step's after it
        return table_rows.joined([(prefill.tables.rows(name), 0.0, ""), (first.tables.rows(name), shift, "")])

    return Result(summary, Tables(lambda: joined("timeline"), lambda: joined("ops")), chip, prefill.graph,
                  prefill.plan, prefill.engine, prefill.moved.union(*(r.moved for r in decodes.values())))


def _time_and_energy(spec: RunSpec) -> tuple[float, float]:
    """The time and energy of one step of a model (a spec whose grid is chosen): what an estimate's
    rerun gives, without the rest of a summary (``summary.step_time_s`` and ``energy_j.total``)."""
    chip, hw_path = _load_chip(spec.hw, spec.set, spec.system)
    runtime = load_stack(spec.stack, chip, spec.set)[0]
    graph, micro = step_graphs(spec, chip, workload.model_config(spec.required_model()), spec.phase,
                               spec.tokens(spec.phase))
    plan, result = _executed(chip, hw_path, graph, spec.fast_forward, spec.fast_forward, spec.pp, micro, stack=runtime)
    return result.end_ps / units.PS_PER_S, energy.breakdown(plan, result).total


def roofline_s(spec: RunSpec) -> float:
    """The least time ``spec``'s run can take, from its plans alone (no simulation): its step's
    roofline, or a generation's prefill plus ``generate`` decode steps at the shortest context.
    Raises as the run would where the workload does not fit."""
    chip, hw_path = _load_chip(spec.hw, spec.set, spec.system)
    config = workload.model_config(spec.required_model())

    def bound(phase: str, tokens: int) -> float:
        graph, micro = step_graphs(spec, chip, config, phase, tokens)
        return _plan(chip, hw_path, graph, spec.pp, micro).roofline_s

    if spec.phase != "generate":
        return bound(spec.phase, spec.tokens(spec.phase))
    return bound("prefill", spec.tokens("prefill")) + spec.generate * bound("decode", spec.tokens("prefill"))
