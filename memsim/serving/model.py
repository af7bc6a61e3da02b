"""A deployment's step model and its KV room, the seam between the serving loop and the pipeline.

``StepModel`` is built once a serving run, from the chip, the runtime stack and the model it loads: a
step's shape in (a plain prefill or decode, or a mixed step's segments), its seconds, joules and bound
out (``StepCost``), each from the workload builder, the mapping, the engine and the report directly,
under the chip's power cap. ``kv_capacity`` is a pure function of where a probe step's plan places the
weights (``mapping.placement``): every device level that is a home for the KV cache gives what the
weights leave of it, in blocks of ``block_tokens`` tokens at the model's KV bytes per token (one rank's
share). With ``preemption: swap`` a preempted sequence's blocks go to the host level (one reached over a
link), as far as what the weights leave of it allows, timed over that link.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

from memsim import engine, hardware, mapping, report, workload
from memsim.core.errors import ConfigError, MemsimWarning, run_field
from memsim.report import spill
from memsim.report.summary_records import ABSENT
from memsim.run import powercap
from memsim.run.machine import blamed, load_chip, load_stack
from memsim.run.runspec import RunSpec
from memsim.run.steps import step_graphs
from memsim.serving.spec import ServeSpec
from memsim.serving.steps import Segments, StepCost
from memsim.stack.spec import StackSpec


@dataclass(frozen=True, kw_only=True)
class StepModel:
    """The cost of a deployment's steps, each shape simulated once (``costs``)."""
    spec: ServeSpec
    chip: hardware.ChipSpec
    hw_file: str
    stack: StackSpec
    config: workload.ModelConfig
    costs: dict[tuple, StepCost] = field(default_factory=dict, compare=False)

    @classmethod
    def of(cls, spec: ServeSpec) -> StepModel:
        """The step model of ``spec``'s deployment: its chip, stack and model loaded once."""
        chip, hw_file = load_chip(spec.hw, spec.set)
        return cls(spec=spec, chip=chip, hw_file=hw_file, stack=load_stack(spec.stack, chip, spec.set)[0],
                   config=workload.model_config(spec.model))

    def run_spec(self, phase: str, batch: int, length: int) -> RunSpec:
        """The run of one plain step: a prefill of ``length`` prompt tokens or a decode at ``length`` of context."""
        d = self.spec
        length_of = {"prompt": length} if phase == "prefill" else {"context": length}
        return RunSpec.make({"hw": d.hw, "model": d.model, "phase": phase, "batch": batch, "weight_dtype": d.weight_dtype,
                             "kv_dtype": d.kv_dtype, "tp": d.tp, "pp": d.pp, "set": d.set, "stack": d.stack,
                             "precision": d.precision, "sensitivity": 0, **length_of}).resolved(self.config.max_positions)

    def plain(self, phase: str, batch: int, length: int) -> StepCost:
        """A plain step: as a mixed step of one group (the same graph), but a prefill on a chip that pipelines
        its layers, which streams the prompt through them in chunks (``run.steps.step_graphs``)."""
        if phase == "decode" or self.chip.execution.pipeline != "layers":
            return self.mixed(((batch, 1, length),) if phase == "decode" else ((batch, length, 0),))
        key = (phase, batch, length)
        if key not in self.costs:
            spec = self.run_spec(phase, batch, length)
            with blamed(self.hw_file):
                graph, micro = step_graphs(spec, self.chip, self.config, phase, spec.tokens(phase))
            self.costs[key] = self._cost(graph, micro)
        return self.costs[key]

    def mixed(self, segments: Segments) -> StepCost:
        """A mixed step (``workload.StepSpec.mixed``): decodes and prefill chunks, each at its own context."""
        key = ("segments", *segments)
        if key not in self.costs:
            d = self.spec
            step = workload.StepSpec.mixed(segments, weight_dtype=d.weight_dtype, kv_dtype=d.kv_dtype, tp=d.tp,
                                           quantize_embeddings=self.chip.execution.embedding_dtype == "weight",
                                           precision=d.precision)
            with blamed(self.hw_file):
                graph = workload.build_step(self.config, step)
            self.costs[key] = self._cost(graph, ())
        return self.costs[key]

    def _cost(self, graph: workload.OpGraph, micro: tuple[workload.OpGraph, ...]) -> StepCost:
        """One step simulated at the highest clock the power cap allows; the host's work before and after it
        is the serving loop's, not the step's."""
        pp, stack = self.spec.pp, self.stack
        with blamed(self.hw_file), warnings.catch_warnings():
            warnings.simplefilter("ignore", MemsimWarning)  # the probe step says it once (kv_capacity)
            plan, result = powercap.run(
                self.chip, lambda at: mapping.make_plan(graph, at, mapping.Grid.of(graph, pp), micro, stack, False),
                lambda p: engine.run(p, fast_forward=True, memoize=True))
            s = report.summarize(graph, plan, result, micro)
        over = 0.0 if s.power_cap_unmet_w is ABSENT else s.power_cap_unmet_w
        return StepCost(seconds=s.step_time_s, joules=s.energy_j.total, bound=s.roofline_bound, over_cap_w=over)

    def over_cap(self) -> str | None:
        """One line where a step it timed could not be held under the power cap at any clock, else None."""
        over = max((c.over_cap_w for c in self.costs.values()), default=0.0)
        if not over:
            return None
        return (f"the power cap of {self.chip.power_cap_mw / 1000:g} W a chip is not held: at the lowest clock the "
                f"limiter sets, steps stay up to {over:.1f} W above it (memory, links and static power alone exceed "
                "it; memsim run on the commonest step says by how much)")


@dataclass(frozen=True, kw_only=True)
class KVCache:
    bytes_per_token: int  # one rank's share of one sequence's KV cache, per token
    blocks: int
    unit_tile: int  # the chip's (``execution.unit_tile``), for the step times
    levels: dict[str, int]  # the bytes each level that holds it gives it, after the weights
    host: str = ""  # the host level a preempted sequence may be swapped to, and its room in blocks
    host_blocks: int = 0
    swap_s_per_block: float = 0.0  # one block over the host level's link
    handoff_bytes_per_s: float = 0.0  # a KV cache sent to another instance: bandwidth, latency, energy per byte
    handoff_latency_s: float = 0.0
    handoff_j_per_byte: float = 0.0
    fill: dict[str, int] = field(default_factory=dict)  # blocks each level holds, filled in order


def probe(model: StepModel, block_tokens: int) -> tuple[workload.OpGraph, mapping.Plan]:
    """A decode of one sequence at ``block_tokens`` of context, planned (not simulated): where the deployment
    places its weights. Says once what spills to host memory or leaves a faster level idle."""
    spec = model.run_spec("decode", 1, block_tokens)
    with blamed(model.hw_file):
        graph, micro = step_graphs(spec, model.chip, model.config, "decode", block_tokens)
        plan = mapping.make_plan(graph, model.chip, mapping.Grid.of(graph, model.spec.pp), micro, model.stack)
    for line in (spill.spill_warning(graph, plan), spill.idle_warning(graph, plan)):
        if line is not None:
            warnings.warn(MemsimWarning(line), stacklevel=3)
    return graph, plan


def kv_capacity(spec: ServeSpec, graph: workload.OpGraph, plan: mapping.Plan, block_tokens: int) -> KVCache:
    """What the KV cache can hold, from the probe step's placement (``probe``): each device level that is a
    home for it, less the weights placed there."""
    cached = graph.bytes_of("kv") - sum(t.bytes for t in graph.tensors.values()  # less the new token's
                                        if t.klass == "kv" and t.name.endswith(("k_new", "v_new")))
    per_token = cached // block_tokens
    block = max(1, per_token * block_tokens)
    chip = plan.chip
    weights = spill.bytes_by_level(graph, plan).get("weight", {})
    share = plan.stack.serving  # the memory the stack gives the weights and KV cache: of all, or of what is free
    levels = {lvl.name: kv_room(spec.pp * chip.chip_capacity(lvl), weights.get(lvl.name, 0), share.kv_fraction,
                                share.kv_of)  # the stages' chips
              for lvl in chip.levels if lvl.home_for("kv") and not lvl.via}
    blocks = sum(levels.values()) // block
    if blocks < 1:
        raise ConfigError(f"the weights leave no room for a KV block of {block_tokens} tokens "
                          f"({', '.join(f'{k} {v:,} B' for k, v in levels.items()) or 'no level holds the KV cache'})",
                          field=run_field("hw"))
    host = next((lvl for lvl in chip.levels if lvl.via), None)
    swap: dict[str, Any] = {}
    if host is not None:
        bus = chip.link(host.via)
        swap = {"host": host.name, "swap_s_per_block": block / (spec.pp * bus.achievable(bus.count)),
                "host_blocks": max(0, spec.pp * chip.chip_capacity(host) - weights.get(host.name, 0)) // block}
    if spec.handoff_link and spec.handoff_link not in {lk.name for lk in chip.links}:
        raise ConfigError(f"{spec.hw} has no link {spec.handoff_link!r} ({', '.join(lk.name for lk in chip.links)})",
                          field=run_field("handoff_link"))
    link = chip.link(spec.handoff_link) if spec.handoff_link else chip.interconnect
    if spec.prefill_instances and link is None:
        raise ConfigError(f"{spec.hw} has no link to send a KV cache between instances over", field=run_field("handoff_link"))
    handoff: dict[str, Any] = {} if link is None else {"handoff_bytes_per_s": spec.pp * link.achievable(link.count),
                                       "handoff_latency_s": link.latency_ps * 1e-12,
                                       "handoff_j_per_byte": link.energy_fj_per_bit * 8e-15}
    fill, left = {}, blocks
    for name, room in levels.items():
        fill[name] = min(left, room // block)
        left -= fill[name]
    return KVCache(bytes_per_token=per_token, blocks=blocks, levels=levels, unit_tile=chip.execution.unit_tile,
                   fill=fill, **swap, **handoff)


def kv_room(capacity: int, weights: int, fraction: float, of: str) -> int:
    """What a level gives the KV cache: the stack's share of the level, less the weights (``of`` total, as
    vLLM's gpu_memory_utilization), or its share of what the weights leave (``of`` free, as TensorRT-LLM's
    kv_cache_free_gpu_mem_fraction)."""
    if of == "free":
        return int(max(0, capacity - weights) * fraction)
    return max(0, int(capacity * fraction) - weights)
