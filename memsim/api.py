"""The pipeline in one call: config -> workload -> mapping -> engine -> report."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from memsim import engine, generation, hardware, mapping, report, workload
from memsim.errors import CapacityError, ConfigError
from memsim.hardware.loader import build, dump_chip, load_chip, read_yaml
from memsim.hardware.spec import SystemSpec


DEFAULT_SAMPLES = 8  # decode steps simulated for a generation; the rest are interpolated


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

    def write(self, out: str | Path, perfetto: bool = False) -> list[Path]:
        extra = {}
        if perfetto:
            meta = {"hardware": self.chip.name, "workload": self.summary.get("workload", {})}
            extra["trace.perfetto.json"] = report.perfetto_json(self.plan, self.engine, meta)
        return report.write_outputs(Path(out), self.summary, self.ops, self.timeline, dump_chip(self.chip), extra)


def parse_sets(items: Iterable[str]) -> list[tuple[str, str]]:
    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise ConfigError(f"expected PATH=VALUE, got {item!r}", field="--set")
        pairs.append((key.strip(), value.strip()))
    return pairs


def load_workload(model: str | None, trace: str | None, phase: str, batch: int, context: int, prompt: int,
                  weight_dtype: str, kv_dtype: str, group_size: int = 128, tp: int = 1,
                  expert_parallel: bool = False) -> workload.OpGraph:
    if (model is None) == (trace is None):
        raise ConfigError("give exactly one of --model and --trace", field="--model/--trace")
    if trace is not None:
        return workload.read_trace(Path(trace))
    step = workload.StepSpec.make(phase, batch=batch, context=context, prompt=prompt,
                                  weight_dtype=weight_dtype, kv_dtype=kv_dtype, group_size=group_size, tp=tp,
                                  expert_parallel=expert_parallel)
    return workload.build_step(workload.model_config(model), step)


def micro_graphs(model: str, _trace: None, phase: str, batch: int, context: int, prompt: int, weight_dtype: str,
                 kv_dtype: str, group_size: int, tp: int, expert_parallel: bool,
                 parts: int, prompt_chunks: bool = False) -> tuple[workload.OpGraph, ...]:
    """The graphs of a step split into ``parts`` micro-batches (equal parts share one graph;
    ``prompt_chunks``: see ``workload.split``)."""
    step = workload.StepSpec.make(phase, batch=batch, context=context, prompt=prompt, weight_dtype=weight_dtype,
                                  kv_dtype=kv_dtype, group_size=group_size, tp=tp, expert_parallel=expert_parallel)
    config = workload.model_config(model)
    built: dict[workload.StepSpec, workload.OpGraph] = {}
    return tuple(built.setdefault(s, workload.build_step(config, s))
                 for s in workload.split(step, parts, prompt_chunks))


def system_overrides(path: Path) -> list[tuple[str, str]]:
    """A system YAML (any ``system`` field: ``topology``, ``link``, ``collective``, ...) overrides
    the preset's ``system``. Its fields are checked here, so that an error names this file."""
    raw = read_yaml(path)
    try:
        build(SystemSpec, raw, str(path), "")
        mapping.collectives.check_algorithm(raw.get("collective", "auto"))
    except ConfigError as exc:
        exc.file, exc.field = str(path), (exc.field or "").removeprefix("system.") or None
        raise
    return [(f"system.{k}", str(v)) for k, v in raw.items()]


def _load_chip(hw: str, sets: Iterable[str] | dict[str, str],
               system: str | None = None) -> tuple[hardware.ChipSpec, str]:
    """The chip with a system YAML's and ``--set`` overrides applied, and the file it came from."""
    overrides = list(sets.items()) if isinstance(sets, dict) else parse_sets(sets)
    from_system = system_overrides(Path(system)) if system is not None else []
    hw_path = hardware.resolve(hw, "hardware", hardware.HW_SUFFIXES)
    try:
        chip, _ = load_chip(hw_path, from_system + overrides)
    except ConfigError as exc:  # a system field that names no link of this chip: the system file's fault
        if exc.field in {k for k, _ in from_system} - {k for k, _ in overrides}:
            exc.file, exc.field = system, exc.field.removeprefix("system.")
        raise
    return chip, str(hw_path)


def _run(chip: hardware.ChipSpec, hw_file: str, graph: workload.OpGraph, fast_forward: bool, memoize: bool,
         pp: int = 1, micro: tuple[workload.OpGraph, ...] = ()) -> Result:
    try:
        plan = mapping.make_plan(graph, chip, pp, micro)
    except (CapacityError, ConfigError) as exc:
        if not (exc.field or "").startswith("--"):  # about the chip (e.g. system.collective), not an option
            exc.file = exc.file or hw_file
        raise
    result = engine.run(plan, fast_forward=fast_forward, memoize=memoize)
    return Result(report.summarize(graph, plan, result, micro), report.timeline(result),
                  report.ops(graph, plan, result), chip, graph, plan, result)


def simulate_graph(hw: str, graph: workload.OpGraph, *, set: Iterable[str] | dict[str, str] = (),
                   fast_forward: bool = True, memoize: bool = True) -> Result:
    """Simulate an operator DAG built in Python (or by an importer) on a chip."""
    chip, hw_path = _load_chip(hw, set)
    graph.validate()
    return _run(chip, hw_path, graph, fast_forward, memoize)


def simulate(hw: str = "h100-sxm", model: str | None = None, *, trace: str | None = None, phase: str = "decode",
             batch: int = 1, context: int = 0, prompt: int = 0, weight_dtype: str = "bf16", kv_dtype: str = "bf16",
             group_size: int = 128, set: Iterable[str] | dict[str, str] = (), fast_forward: bool = True,
             memoize: bool = True, generate: int = 0, samples: int = DEFAULT_SAMPLES, tp: int = 1, pp: int = 1,
             chips: int | None = None, system: str | None = None, ep: bool = False,
             microbatches: int | None = None) -> Result:
    """Simulate one step, or with ``phase="generate"`` a prefill of ``prompt`` tokens and
    ``generate`` decode steps. ``set`` overrides hardware fields: ``{"sram.capacity": "64MiB"}``."""
    if chips is not None and chips != tp * pp:
        raise ConfigError(f"--chips {chips} must equal --tp x --pp ({tp * pp})", field="--chips")
    chip, hw_path = _load_chip(hw, set, system)

    def run_step(step_phase: str, tokens: int) -> Result:
        args = (model, trace, step_phase, batch, tokens if step_phase == "decode" else context,
                tokens if step_phase == "prefill" else prompt, weight_dtype, kv_dtype, group_size, tp, ep)
        parts = microbatches
        layered = microbatches is None and chip.execution.pipeline == "layers" and step_phase == "prefill" \
            and trace is None
        if parts is None:  # a layer-pipelined chip streams a prefill through its regions in prompt chunks
            parts = min(chip.execution.pipeline_chunks, tokens) if layered else 1
        if parts == 1:
            return _run(chip, hw_path, load_workload(*args), fast_forward, memoize, pp)
        if trace is not None:
            raise ConfigError("a trace holds one step: it cannot be split into micro-batches", field="--microbatches")
        micro = micro_graphs(*args, parts, layered)
        return _run(chip, hw_path, micro[-1], fast_forward, memoize, pp, micro)

    if phase != "generate":
        return run_step(phase, context if phase == "decode" else prompt)
    if trace is not None:
        raise ConfigError("a trace holds one step; --phase generate needs --model", field="--phase")
    if prompt < 1 or generate < 1:
        raise ConfigError("generate needs --prompt and --generate of at least 1 token", field="--generate")
    if samples < 2:
        raise ConfigError("must be at least 2", field="--samples")
    prefill, summary, first = generation.generate(run_step, prompt, generate, samples)
    shift = prefill.summary["step_time_s"]
    timeline = pd.concat([prefill.timeline, first.timeline.assign(start_s=first.timeline.start_s + shift,
                                                                  end_s=first.timeline.end_s + shift)])
    ops = pd.concat([prefill.ops, first.ops.assign(start_s=first.ops.start_s + shift,
                                                   end_s=first.ops.end_s + shift)])
    return Result(summary, timeline.reset_index(drop=True), ops.reset_index(drop=True), chip, prefill.graph,
                  prefill.plan, prefill.engine)
