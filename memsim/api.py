"""The pipeline in one call: config -> workload -> mapping -> engine -> report."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from memsim import engine, hardware, mapping, report, workload
from memsim.errors import CapacityError, ConfigError
from memsim.hardware.loader import dump_chip, load_chip


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

    def write(self, out: str | Path) -> list[Path]:
        return report.write_outputs(Path(out), self.summary, self.ops, self.timeline, dump_chip(self.chip))


def parse_sets(items: Iterable[str]) -> list[tuple[str, str]]:
    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise ConfigError(f"expected PATH=VALUE, got {item!r}", field="--set")
        pairs.append((key.strip(), value.strip()))
    return pairs


def load_workload(model: str | None, trace: str | None, phase: str, batch: int, context: int, prompt: int,
                  weight_dtype: str, kv_dtype: str, group_size: int = 128) -> workload.OpGraph:
    if (model is None) == (trace is None):
        raise ConfigError("give exactly one of --model and --trace", field="--model/--trace")
    if trace is not None:
        return workload.read_trace(Path(trace))
    step = workload.StepSpec.make(phase, batch=batch, context=context, prompt=prompt,
                                  weight_dtype=weight_dtype, kv_dtype=kv_dtype, group_size=group_size)
    return workload.build_step(workload.model_config(model), step)


def simulate(hw: str = "h100-sxm", model: str | None = None, *, trace: str | None = None, phase: str = "decode",
             batch: int = 1, context: int = 0, prompt: int = 0, weight_dtype: str = "bf16", kv_dtype: str = "bf16",
             group_size: int = 128, set: Iterable[str] | dict[str, str] = (), fast_forward: bool = True,
             memoize: bool = True) -> Result:
    """Simulate one step. ``set`` overrides hardware fields: ``{"sram.capacity": "64MiB"}``."""
    overrides = list(set.items()) if isinstance(set, dict) else parse_sets(set)
    hw_path = hardware.resolve(hw, "hardware", hardware.HW_SUFFIXES)
    chip, _ = load_chip(hw_path, overrides)
    graph = load_workload(model, trace, phase, batch, context, prompt, weight_dtype, kv_dtype, group_size)
    try:
        plan = mapping.make_plan(graph, chip)
    except CapacityError as exc:
        exc.file = exc.file or str(hw_path)
        raise
    result = engine.run(plan, fast_forward=fast_forward, memoize=memoize)
    return Result(report.summarize(graph, plan, result), report.timeline(result), report.ops(graph, plan, result),
                  chip, graph, plan, result)
