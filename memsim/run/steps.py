"""The graphs of one step of a model: the step a run spec describes, its operator DAG, and the
micro-batches a chip runs it as (a layer-pipelined chip streams a prefill through its regions in
prompt chunks). Pure construction from the workload and the mapping's shard count; no simulation.

Inside ``memo.shared`` (a run with its estimates' reruns) each distinct step of a model is built once:
a graph is never changed once built, so the reruns, which change the chip and not the workload, share it."""
from __future__ import annotations

from pathlib import Path

from memsim import hardware, mapping, workload
from memsim.core import limits, memo
from memsim.core.errors import run_field
from memsim.run.runspec import RunSpec


def build(config: workload.ModelConfig, step: workload.StepSpec) -> workload.OpGraph:
    """``workload.build_step``, once a distinct step inside ``memo.shared`` (a run and its reruns)."""
    return memo.remembered(("graph", config, step), lambda: workload.build_step(config, step))


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
    return build(config or workload.model_config(spec.required_model()),
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
            built[s] = build(config, s)
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
