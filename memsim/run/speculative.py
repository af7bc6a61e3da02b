"""Speculative decoding: a draft proposes K tokens, the target checks them in one step of K+1.

A speculative step runs the draft K times, one token each at contexts c, c+1, ..., c+K-1,
then one verify step of the target: a decode step of K+1 new tokens on its cache of c tokens,
with logits at every position (``workload.builder``). The target keeps the drafted tokens up to
the first it rejects and adds one of its own, so with a per-token acceptance rate a a step
yields E = (1 - a^(K+1)) / (1 - a) tokens per sequence on average (Leviathan, Kalman and
Matias, "Fast Inference from Transformers via Speculative Decoding", ICML 2023, eq. 1), and
the time per output token is (K t_draft + t_verify) / E.

The draft is a model (``--draft MODEL``) that runs on the target's chips with the target's
tp and pp, one step after another with the target's (the two never overlap), its steps
simulated like a generation's (``--samples`` of them, the others interpolated); or it is
the target's own (``--draft self``: draft heads such as Medusa or EAGLE, n-gram lookup) with
a given cost: each drafted token costs ``--draft-cost`` times the target's one-token decode
step at context c, in time, bytes, FLOPs and energy alike.

Orchestration only: every step goes through the ordinary pipeline. How a speculative step
combines over a generation (it advances the context by E) is ``generation.per_token``'s.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from memsim import workload
from memsim.core.errors import CapacityError, ConfigError, MemsimError, run_field
from memsim.report.rows import joined
from memsim.report.summary_fields import COMBINE, ONCE, SUMMED, Summary
from memsim.report.summary_records import Speculated, present
from memsim.run import generation
from memsim.run.lazytables import Tables
from memsim.run.runspec import SELF_DRAFT as SELF
from memsim.run.runspec import RunSpec, Speculation


def expected_tokens(accept: float, k: int) -> float:
    """Tokens a speculative step yields per sequence on average: its accepted drafts and the
    target's own next token, (1 - a^(K+1)) / (1 - a) (Leviathan et al. 2023, eq. 1); written
    with ``expm1`` so that it stays exact as a approaches 1 (where it tends to K+1)."""
    if not 0 <= accept < 1 or k < 1:
        raise ValueError(f"acceptance {accept} must be in [0, 1) and K {k} at least 1")
    if accept == 0:
        return 1.0
    return math.expm1((k + 1) * math.log(accept)) / math.expm1(math.log(accept))


def plain(spec: RunSpec, context: int, draft: workload.ModelConfig | None = None) -> RunSpec:
    """One ordinary decode step at ``context`` on ``spec``'s chips: the target's, or the ``draft``
    model's (``--ep`` spreads a mixture of experts; a dense draft has none to spread)."""
    model, ep = (spec.model, spec.ep) if draft is None else (spec.draft, spec.ep and draft.experts > 1)
    return dataclasses.replace(spec, model=model, ep=ep, phase="decode", context=context, draft=None, draft_k=None,
                               accept=None, draft_cost=None)


def check_models(target: workload.ModelConfig, draft: workload.ModelConfig | None) -> None:
    """A draft whose tokens the target can check: a decoder with the target's vocabulary."""
    if target.is_encoder:
        raise ConfigError(f"{target.name} is an encoder: it generates nothing to draft", field=run_field("draft"))
    if draft is None:
        return
    if draft.is_encoder:
        raise ConfigError(f"the draft {draft.name} is an encoder: it cannot draft tokens", field=run_field("draft"))
    if draft.vocab != target.vocab:
        raise ConfigError(f"the draft {draft.name} has a vocabulary of {draft.vocab} tokens, the target "
                          f"{target.name} {target.vocab}: the target cannot check its tokens", field=run_field("draft"))


Step = Callable[[str, int], Any]  # a step's result at a phase and a context (decode) or prompt (prefill)


def stepper(spec: RunSpec, run_step: Step, run: Callable[[RunSpec], Any]) -> Step:
    """``run_step`` (the target's step at a phase and a context, which for a decode step verifies
    ``spec.draft_k + 1`` tokens) with every decode step made a speculative step; ``run`` simulates
    an ordinary ``RunSpec``."""
    options = spec.speculation()
    if options is None:
        raise ConfigError("speculative decoding needs a draft", field=run_field("draft"))
    try:
        draft = None if options.draft == SELF else workload.model_config(options.draft)
    except ConfigError as exc:
        exc.field = exc.field or run_field("draft")
        raise
    check_models(workload.model_config(spec.required_model()), draft)

    def step(phase: str, context: int) -> Any:
        if phase != "decode":
            return run_step(phase, context)
        return speculative_step(spec, options, run_step("decode", context), run, context, draft)
    return step


def speculative_step(spec: RunSpec, options: Speculation, verify: Any, run: Callable[[RunSpec], Any], context: int,
                     draft: workload.ModelConfig | None) -> Any:
    """The result of one speculative step at ``context``: the ``draft`` model's K steps (or the
    target's own drafting, ``--draft self``: ``draft`` is None), then ``verify``."""
    k = options.k
    if draft is None:
        cost = options.cost
        if cost is None:  # ``RunSpec`` requires --draft-cost with --draft self
            raise ConfigError(f"{run_field('draft')} self needs {run_field('draft_cost')}, and only it takes one",
                              field=run_field("draft_cost"))
        one = run(plain(spec, context))
        drafted = {key: generation.scaled(v, k * cost) for key, v in present(one.summary).items()
                   if COMBINE[key] == SUMMED}
        runs, widest, stored, shown = ([one.summary] if cost else []), one.summary, 0, {}
    else:
        contexts = generation.sample_contexts(context, k, spec.samples)
        shown = {c: _draft(run, spec, c, draft) for c in contexts}
        samples = {c: r.summary for c, r in shown.items()}
        drafted = generation.interpolated_sums(samples, np.arange(context, context + k, dtype=float))
        _check_room(spec, verify, shown[max(shown)])
        runs = list(samples.values())
        widest = max(runs, key=lambda d: d.roofline_s)
        stored = runs[0].weight_bytes_stored
    summary = _combine(options, verify.summary, drafted, runs, widest, stored)
    times = _draft_times(shown, context, k)
    parts = [(shown[c], start, f"draft{c - context + 1}/") for c, start in times]
    parts.append((verify, drafted["step_time_s"], ""))
    tables = Tables(lambda: joined([(r.tables.rows("timeline"), s, p) for r, s, p in parts]),
                    lambda: joined([(r.tables.rows("ops"), s, p) for r, s, p in parts]))
    return dataclasses.replace(verify, summary=summary, tables=tables,
                               moved=verify.moved.union(*(r.moved for r in shown.values())))


def _draft(run: Callable[[RunSpec], Any], spec: RunSpec, context: int, draft: workload.ModelConfig) -> Any:
    """The draft model's decode step at ``context``; an error in it says it is the draft's."""
    try:
        return run(plain(spec, context, draft))
    except MemsimError as exc:
        exc.message = f"the draft {spec.draft}: {exc.message}"
        exc.args = (exc.message,)
        raise


def _held(result: Any) -> dict[int, int]:
    """Bytes of weights and KV cache each chip of a step holds (a KV cache per micro-batch)."""
    graph, copies = result.graph, result.summary.workload.microbatches or 1
    used: dict[int, set[str]] = {}
    for task in result.plan.tasks:
        op = graph.ops.get(task.graph_op)
        if op is not None:
            used.setdefault(task.chip, set()).update([r.tensor for r in op.inputs], op.outputs)
    return {chip: sum(graph.tensors[n].bytes * (copies if graph.tensors[n].klass == "kv" else 1)
                      for n in names if graph.tensors[n].klass in ("weight", "kv"))
            for chip, names in used.items()}


def _check_room(spec: RunSpec, verify: Any, draft: Any) -> None:
    """Both models' weights and KV caches must fit on each chip together. (Each step is placed
    as if it were alone: the draft's tensors may take fast memory the target's hold.)"""
    chip = verify.chip
    room = sum(chip.chip_capacity(lvl) for lvl in chip.levels if lvl.home_for("weight") or lvl.home_for("kv"))
    target, drafted = _held(verify), _held(draft)
    need = max(target.get(c, 0) + drafted.get(c, 0) for c in set(target) | set(drafted))
    if need > room:
        raise CapacityError(f"the target's and the draft {spec.draft}'s weights and KV caches need {need / 1e9:.2f} GB "
                            f"on a chip together; its memory levels hold {room / 1e9:.2f} GB", field=run_field("draft"))


def _combine(options: Speculation, verify: Summary, drafted: dict[str, Any], runs: list[Summary], widest: Summary,
             stored: int) -> Summary:
    """The speculative step's summary: the draft's steps (``drafted``: their SUMMED fields, added up)
    and the verify step one after the other (``runs``: the draft steps simulated)."""
    out: dict[str, Any] = {}
    for key, value in present(verify).items():
        rule = COMBINE[key]
        if rule == SUMMED:
            out[key] = generation.add(value, drafted[key])
        elif rule == ONCE:
            out[key] = value
    out["workload"] = verify.workload
    out["weight_bytes_stored"] = verify.weight_bytes_stored + stored  # both models are held
    out["roofline_bound"] = verify.roofline_bound if verify.roofline_s >= drafted["roofline_s"] \
        else widest.roofline_bound
    k, batch = options.k, verify.workload.batch or 0
    tokens = expected_tokens(options.accept, k)
    out.update(generation.recomputed(out, [verify, *runs], batch * tokens))
    step_s = out["step_time_s"]
    out["speculative"] = Speculated(
        draft=options.draft, draft_k=k, accept=options.accept, draft_cost=options.cost,
        tokens_per_step=tokens,
        draft_step_s=drafted["step_time_s"] / k,
        verify_step_s=verify.step_time_s,
        step_s=step_s,
        time_per_token_s=step_s / tokens,
        tokens_per_s_per_sequence=tokens / step_s if step_s else 0.0,
        tokens_per_s=batch * tokens / step_s if step_s else 0.0,
    )
    return Summary(**out)


def _draft_times(shown: dict[int, Any], context: int, k: int) -> list[tuple[int, float]]:
    """When each simulated draft step starts: after the draft steps before it (interpolated
    between the simulated ones), so that the last ends where the verify step starts."""
    if not shown:
        return []
    xs = sorted(shown)
    each = np.interp(np.arange(context, context + k, dtype=float), xs, [shown[c].summary.step_time_s for c in xs])
    starts = np.concatenate(([0.0], np.cumsum(each)[:-1]))
    return [(c, float(starts[c - context])) for c in xs]
