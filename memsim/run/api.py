"""The pipeline in one call: config -> workload -> mapping -> engine -> report."""
from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from memsim import engine, hardware, mapping, report, workload
from memsim.core import limits, units
from memsim.core.errors import CapacityError, ConfigError, MemsimWarning, is_run, run_field
from memsim.hardware.estimates import set_path as estimates_set_path
from memsim.hardware.loader import dump_chip, estimates_of, one_reading
from memsim.hardware.resource import Ref
from memsim.report import spill
from memsim.run import generation, grid, inputs, powercap, runspec, sensitivity, speculative
from memsim.run.chipfile import chip_path
from memsim.run.machine import (  # noqa: F401  (the loaders, as callers know them here)
    estimates,
    family_defaults,
    load_stack,
    stack_estimates,
    system_overrides,
)
from memsim.run.machine import load_chip as _load_chip
from memsim.run.machine import (
    load_chip_raw as _load_chip_raw,
)
from memsim.run.runspec import RunSpec
from memsim.stack import loader as stack_mod
from memsim.stack.spec import IDEAL, StackSpec

DEFAULT_SAMPLES = RunSpec.samples  # decode steps simulated for a generation; the rest are interpolated


@dataclass(frozen=True)
class Result:
    """A finished run. ``summary`` is a dict; ``timeline`` and ``ops`` are DataFrames."""

    summary: dict[str, Any]
    timeline: pd.DataFrame
    ops: pd.DataFrame
    chip: hardware.ChipSpec
    graph: workload.OpGraph
    plan: mapping.Plan
    engine: engine.EngineResult
    # The levels and links the run moved bytes through: every step's, for a generation or a
    # speculative step (the estimates of the others cannot matter, ``memsim.run.sensitivity``).
    moved: frozenset[Ref] = frozenset()
    inputs: tuple[Path, ...] = ()  # the files the run read: ``write`` never writes over them

    def __repr__(self) -> str:  # a notebook shows this, not the tables
        w = self.summary.get("workload", {})
        return (f"Result({self.summary.get('hardware')}, {w.get('model') or w.get('source', 'trace')} "
                f"{w.get('phase', '')}, batch {w.get('batch', 1)}, step {self.summary['step_time_s'] * 1e3:.4g} ms)")

    @property
    def stalls(self) -> pd.Series:
        """Seconds compute waited, by cause, largest first (``summary['stall_s']``)."""
        return pd.Series(self.summary.get("stall_s", {}), name="stall_s", dtype=float).sort_values(ascending=False)

    def summary_frame(self) -> pd.DataFrame:
        """The summary as a one-row DataFrame, nested keys flattened with dots (as a sweep's results.csv)."""
        return pd.DataFrame([report.flatten(self.summary)])

    def write(self, out: str | Path, perfetto: bool = False) -> list[Path]:
        extra = {}
        if perfetto:
            meta = {"hardware": self.chip.name, "workload": self.summary.get("workload", {})}
            extra["trace.perfetto.json"] = report.perfetto_json(self.plan, self.engine, meta)
        return report.write_outputs(Path(out), self.summary, self.ops, self.timeline, dump_chip(self.chip), extra,
                                    self.inputs)


def step_of(spec: RunSpec, phase: str, tokens: int, quantize_embeddings: bool = False,
            embedding_shards: int = 1) -> workload.StepSpec:
    """The step ``spec`` describes, in ``phase`` with ``tokens`` of context (decode) or prompt
    (prefill); with a ``draft``, a decode step is the target's verify step of ``draft_k + 1``
    tokens. ``quantize_embeddings``: the chip's vendor stores the embedding table as the weights;
    ``embedding_shards``: the table split over that many pipeline stages."""
    speculation = spec.speculation()
    verified = speculation.k + 1 if speculation is not None and phase == "decode" else 1
    return workload.StepSpec.make(phase, batch=spec.batch,
                                  context=tokens if phase == "decode" else spec.tokens("decode"),
                                  prompt=tokens if phase == "prefill" else spec.tokens("prefill"),
                                  weight_dtype=spec.weight_dtype, kv_dtype=spec.kv_dtype,
                                  group_size=spec.group_size, tp=spec.tp, expert_parallel=spec.ep, tokens=verified,
                                  quantize_embeddings=quantize_embeddings, embedding_shards=embedding_shards,
                                  precision=spec.precision)


def load_workload(spec: RunSpec, phase: str | None = None, tokens: int | None = None,
                  config: workload.ModelConfig | None = None, quantize_embeddings: bool = False,
                  embedding_shards: int = 1) -> workload.OpGraph:
    """The operator DAG of one step: the trace, or the model's step (``phase`` and ``tokens``
    default to the spec's own; ``config``, the model's, when it is already loaded)."""
    if spec.trace is not None:
        return workload.read_trace(Path(spec.trace))
    phase = phase or spec.phase
    tokens = tokens if tokens is not None else spec.tokens(phase)
    return workload.build_step(config or workload.model_config(spec.required_model()),
                               step_of(spec, phase, tokens, quantize_embeddings, embedding_shards))


def micro_graphs(spec: RunSpec, config: workload.ModelConfig, phase: str, tokens: int, parts: int,
                 prompt_chunks: bool = False, quantize_embeddings: bool = False,
                 embedding_shards: int = 1) -> tuple[workload.OpGraph, ...]:
    """The graphs of a step split into ``parts`` micro-batches (equal parts share one graph;
    ``prompt_chunks``: see ``workload.split``)."""
    built: dict[workload.StepSpec, workload.OpGraph] = {}
    steps = workload.split(step_of(spec, phase, tokens, quantize_embeddings, embedding_shards), parts, prompt_chunks)
    for s in steps:
        if s not in built:  # each distinct part built once
            built[s] = workload.build_step(config, s)
    return tuple(built[s] for s in steps)


def step_graphs(spec: RunSpec, chip: hardware.ChipSpec, config: workload.ModelConfig, phase: str,
                tokens: int) -> tuple[workload.OpGraph, tuple[workload.OpGraph, ...]]:
    """The graph a step of the model places on ``chip`` and the micro-batches it runs as (none:
    the graph once). A layer-pipelined chip streams a prefill through its regions in prompt chunks."""
    parts = spec.microbatches
    layered = parts is None and chip.execution.pipeline == "layers" and phase == "prefill"
    if parts is None:
        parts = min(chip.execution.pipeline_chunks, tokens) if layered else 1
    quantized = chip.execution.embedding_dtype == "weight"
    graph = load_workload(spec, phase, tokens, config, quantized)
    limits.check(len(graph.ops) * parts, limits.MAX_TASKS, f"tasks ({len(graph.ops)} ops x {parts} micro-batches)",
                 run_field("microbatches") if spec.microbatches is not None else "execution.pipeline_chunks")
    shards = mapping.lookup_shards(graph, chip, spec.pp)  # an embedding table too big for a stage of its own
    if parts == 1:
        return (graph if shards == 1 else load_workload(spec, phase, tokens, config, quantized, shards)), ()
    micro = micro_graphs(spec, config, phase, tokens, parts, layered, quantized, shards)
    return micro[-1], micro


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


@contextlib.contextmanager
def _blamed(hw_file: str, trace: str | None = None):
    """An error about the chip names the hardware file; one about the batch, a trace's ops."""
    try:
        yield
    except (CapacityError, ConfigError) as exc:
        field = exc.raw_field or ""
        if not is_run(field):  # about the chip (e.g. system.collective), not a run field
            exc.raw_file = exc.raw_file or hw_file
        elif trace is not None and field.startswith(run_field("batch")):  # a trace fixes its batch and context
            exc.file, exc.field = trace, "ops"
        raise


def _plan(chip: hardware.ChipSpec, hw_file: str, graph: workload.OpGraph, pp: int = 1,
          micro: tuple[workload.OpGraph, ...] = (), trace: str | None = None, stack: StackSpec = IDEAL) -> mapping.Plan:
    with _blamed(hw_file, trace):
        return mapping.make_plan(graph, chip, mapping.Grid.of(graph, pp), micro, stack)


def _run(chip: hardware.ChipSpec, hw_file: str, graph: workload.OpGraph, fast_forward: bool, memoize: bool,
         pp: int = 1, micro: tuple[workload.OpGraph, ...] = (), trace: str | None = None,
         stack: StackSpec = IDEAL) -> Result:
    with _blamed(hw_file, trace):  # at the highest clock the power cap allows
        plan, result = powercap.run(
            chip, lambda at: mapping.make_plan(graph, at, mapping.Grid.of(graph, pp), micro, stack),
            lambda p: engine.run(p, fast_forward=fast_forward, memoize=memoize))
    return Result(report.summarize(graph, plan, result, micro), report.timeline(result),
                  report.ops(graph, plan, result), chip, graph, plan, result,
                  frozenset(u.resource.ref for u in result.usage if u.read or u.written))


def simulate_graph(hw: str, graph: workload.OpGraph, *, set: Iterable[str] | dict[str, str] = (),
                   fast_forward: bool = True, memoize: bool = True, stack: str | None = None) -> Result:
    """Simulate an operator DAG built in Python (or by an importer) on a chip, run by ``stack``
    (default: the chip family's)."""
    if not isinstance(graph, workload.OpGraph):
        raise ConfigError(f"expected an OpGraph (memsim.workload), got {units.shown(graph)}", field="graph")
    chip, hw_path, raw = _load_chip_raw(hw, set)
    runtime, stack_raw, stack_file = load_stack(stack, chip, set)
    graph.validate()
    result = _run(chip, hw_path, graph, fast_forward, memoize, stack=runtime)
    found = estimates_of(raw, hw_path) + stack_estimates(stack_raw, stack_file)
    used = sensitivity.report(result.summary, found, result.moved)
    return dataclasses.replace(result, summary=report.checked({**result.summary, "estimates": used}))


def load_chip_spec(hw: str, sets: Iterable[tuple[str, str]] = ()) -> tuple[hardware.ChipSpec, str]:
    """A chip with its overrides, and its file: for ``simulate_step``."""
    return _load_chip(hw, sets)


def step_summary(chip: hardware.ChipSpec, hw_file: str, graph: workload.OpGraph, pp: int = 1,
                 stack: StackSpec = IDEAL, step_work: bool = True,
                 micro: tuple[workload.OpGraph, ...] = ()) -> dict:
    """One step's summary on a loaded chip (``load_chip_spec``; ``pp`` pipeline stages of them; ``micro``
    its micro-batches, ``step_graphs``), without its tables or the estimates' report: a serving run's
    steps, many on one chip (``step_work`` False: the host's work before and after the step is the
    serving loop's, not the step's)."""
    with _blamed(hw_file):
        plan, result = powercap.run(
            chip, lambda at: mapping.make_plan(graph, at, mapping.Grid.of(graph, pp), micro, stack, step_work),
            lambda p: engine.run(p, fast_forward=True, memoize=True))
    return report.summarize(graph, plan, result, micro)


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
    with one_reading():  # the run, its estimates and its reruns read each file once: one version of it
        return _run_reading_once(spec)


def _run_reading_once(spec: RunSpec) -> Result:
    if spec.context is None or spec.prompt is None:
        spec = spec.resolved(None)
    result = _simulate(spec)
    for line in (spill.spill_warning(result.graph, result.plan), spill.idle_warning(result.graph, result.plan)):
        if line is not None:
            warnings.warn(MemsimWarning(line), stacklevel=3)
    if "grid_search" in result.summary:  # the reruns keep the grid the search chose
        chosen = result.summary["grid"]
        spec = dataclasses.replace(spec, tp=chosen["tp"], pp=chosen["pp"], chips=None)
    found = estimates(spec.hw, spec.set, spec.system, spec.stack)

    def rerun(path: str, value: str) -> dict:
        return _simulate(dataclasses.replace(spec, set=(*spec.set, (path, value)))).summary

    top = spec.sensitivity if spec.sensitivity is not None else sensitivity.auto(result.summary)
    shown = sensitivity.report(result.summary, found, result.moved, top, rerun)
    overridden = {k for k, _ in runspec.overrides(spec.set)}
    defaults = [p for p in family_defaults(spec.hw)  # a level's field may be set by its short path (hbm.efficiency)
                if not {estimates_set_path(p), estimates_set_path(p).removeprefix("levels.")} & overridden]
    if defaults:
        shown["defaults"] = defaults
    if spec.sensitivity is None and not top:
        shown["not_rerun"] = sensitivity.work(result.summary)
    chosen = {**result.summary["stack"], "default": spec.stack in (None, stack_mod.AUTO)}
    return dataclasses.replace(result, summary=report.checked({**result.summary, "estimates": shown, "stack": chosen}),
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
    shift = prefill.summary["step_time_s"]
    timeline = pd.concat([prefill.timeline, first.timeline.assign(start_s=first.timeline.start_s + shift,
                                                                  end_s=first.timeline.end_s + shift)])
    ops = pd.concat([prefill.ops, first.ops.assign(start_s=first.ops.start_s + shift,
                                                   end_s=first.ops.end_s + shift)])
    return Result(summary, timeline.reset_index(drop=True), ops.reset_index(drop=True), chip, prefill.graph,
                  prefill.plan, prefill.engine, prefill.moved.union(*(r.moved for r in decodes.values())))


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
