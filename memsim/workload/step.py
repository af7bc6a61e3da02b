"""One step's shape (``StepSpec``): a decode, a prefill, or a mixed step of decodes and prefill chunks
(a serving scheduler's), with its dtypes and tensor-parallel ranks; and how a step splits into
micro-batches (``split``). The builder (``builder.py``) turns a ``StepSpec`` into the operator DAG.
"""
from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

from memsim.core.errors import ConfigError, run_field
from memsim.workload.dtypes import KV_DTYPES, WEIGHT_DTYPES, recipe
from memsim.workload.models import MAX_SHAPE


@dataclass(frozen=True, slots=True)
class StepSpec:
    phase: str  # decode | prefill
    batch: int
    tokens: int  # new tokens per sequence in this step
    context: int  # tokens already in the KV cache
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    act_dtype: str = "bf16"
    group_size: int = 128  # int4 weights: one scale and zero point per this many weights
    tp: int = 1  # tensor-parallel ranks: the DAG describes one rank's shard
    expert_parallel: bool = False  # MoE experts are spread over the tp ranks instead of split
    logits: bool = True  # False for a prefill chunk that is not the last: no LM head yet
    quantize_embeddings: bool = False  # the embedding table is stored in ``weight_dtype`` (else ``act_dtype``)
    embedding_shards: int = 1  # vocabulary shards of the embedding table, looked up one after another
    segments: tuple[tuple[int, int, int], ...] = ()  # a mixed step's (sequences, tokens, context) groups
    precision: tuple[tuple[str, str], ...] = ()  # a weight format per tensor class (``dtypes.recipe``); else weight_dtype

    def weight_format(self, role: str) -> str:
        """The format the weights of ``role`` (attention, mlp, lm_head, embedding) are stored in."""
        return dict(self.precision).get(role, self.weight_dtype)

    @classmethod
    def mixed(cls, segments: tuple[tuple[int, int, int], ...], weight_dtype: str = "bf16", kv_dtype: str = "bf16",
              tp: int = 1, group_size: int = 128, quantize_embeddings: bool = False,
              precision: str | None = None) -> StepSpec:
        """A step of several groups of sequences, each ``(sequences, tokens, context)``: decodes are
        ``(n, 1, context)``, a prefill chunk ``(1, chunk, tokens before it)``. Logits are computed at
        each sequence's last position. ``batch`` is the sequences, ``tokens`` and ``context`` the
        largest of any segment (the graph's ``meta``)."""
        base = cls.make("decode", weight_dtype=weight_dtype, kv_dtype=kv_dtype, tp=tp, group_size=group_size,
                        precision=precision,
                        quantize_embeddings=quantize_embeddings)
        segments = tuple((int(n), int(t), int(c)) for n, t, c in segments)
        if not segments or any(n < 1 or t < 1 or c < 0 for n, t, c in segments):
            raise ConfigError("a mixed step needs segments of at least 1 sequence and 1 token", field="segments")
        if sum(n * t for n, t, _ in segments) > MAX_SHAPE:
            raise ConfigError(f"must hold at most {MAX_SHAPE} tokens", field="segments")
        return dataclasses.replace(base, phase="mixed", batch=sum(n for n, _, _ in segments),
                                   tokens=max(t for _, t, _ in segments), context=max(c for _, _, c in segments),
                                   segments=segments)

    @classmethod
    def make(cls, phase: str, batch: int = 1, context: int = 0, prompt: int = 0,
             weight_dtype: str = "bf16", kv_dtype: str = "bf16", group_size: int = 128, tp: int = 1,
             expert_parallel: bool = False, tokens: int = 1, quantize_embeddings: bool = False,
             embedding_shards: int = 1, precision: str | None = None) -> StepSpec:
        """``tokens``: a decode step's new tokens per sequence (K+1 for a speculative verify step);
        ``precision``: a recipe of weight formats by tensor class (``mlp=bfp4,attention=bfp8``)."""
        try:
            recipe_ = recipe(precision)
        except ValueError as exc:
            raise ConfigError(str(exc), field=run_field("precision")) from None
        if phase not in ("decode", "prefill"):
            raise ConfigError(f"unknown phase {phase!r} for one step (decode, prefill)", field=run_field("phase"))
        if weight_dtype not in WEIGHT_DTYPES:
            raise ConfigError(f"{weight_dtype!r} is not one of {', '.join(WEIGHT_DTYPES)}", field=run_field("weight_dtype"))
        if kv_dtype not in KV_DTYPES:
            raise ConfigError(f"{kv_dtype!r} is not one of {', '.join(KV_DTYPES)}", field=run_field("kv_dtype"))
        for value, option in ((batch, run_field("batch")), (context, run_field("context")), (prompt, run_field("prompt")),
                              (group_size, run_field("group_size")), (tp, run_field("tp")), (tokens, run_field("draft_k"))):
            if value > MAX_SHAPE:
                raise ConfigError(f"must be at most {MAX_SHAPE}", field=option)
        if batch < 1:
            raise ConfigError("must be at least 1", field=run_field("batch"))
        if group_size < 1:
            raise ConfigError("must be at least 1", field=run_field("group_size"))
        if tp < 1:
            raise ConfigError("must be at least 1", field=run_field("tp"))
        if phase == "decode":
            if context < 0:
                raise ConfigError("must not be negative", field=run_field("context"))
            if tokens < 1:
                raise ConfigError("a decode step takes at least 1 token", field=run_field("draft_k"))
            return cls(phase, batch, tokens, context, weight_dtype, kv_dtype, group_size=group_size, tp=tp,
                       expert_parallel=expert_parallel, quantize_embeddings=quantize_embeddings,
                       embedding_shards=embedding_shards, precision=recipe_)
        if prompt < 1:
            raise ConfigError(f"prefill needs {run_field('prompt')} of at least 1 token", field=run_field("prompt"))
        return cls(phase, batch, prompt, 0, weight_dtype, kv_dtype, group_size=group_size, tp=tp,
                   expert_parallel=expert_parallel, quantize_embeddings=quantize_embeddings,
                   embedding_shards=embedding_shards, precision=recipe_)



def split(step: StepSpec, parts: int, prompt_chunks: bool = False) -> tuple[StepSpec, ...]:
    """The micro-batches a step runs as, one after another through a pipeline: the batch split
    evenly, or else a prefill's prompt split into chunks that each attend to the ones before
    (only the last computes logits). With ``prompt_chunks`` (a layer-pipelined chip streaming a
    prefill through its regions) the prompt is split whatever the batch: were the batch split
    whenever it divides, one sequence more could switch a prefill to prompt chunks and make it
    faster (batch parts each compute their sequences' logits, streaming the LM head once each)."""
    if parts < 1:
        raise ConfigError("must be at least 1", field=run_field("microbatches"))
    if parts == 1:
        return (step,)
    chunked = step.phase == "prefill" and step.tokens >= parts
    if step.batch % parts == 0 and not (prompt_chunks and chunked):
        return (dataclasses.replace(step, batch=step.batch // parts),) * parts
    if chunked:
        bounds = [step.tokens * k // parts for k in range(parts + 1)]
        return tuple(dataclasses.replace(step, tokens=b - a, context=step.context + a, logits=k == parts - 1)
                     for k, (a, b) in enumerate(itertools.pairwise(bounds)))
    raise ConfigError(f"{parts} micro-batches split neither the batch of {step.batch} nor the "
                      f"{step.tokens} tokens of a prefill", field=run_field("microbatches"))
