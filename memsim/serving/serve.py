"""Serving: requests arriving at a deployment, batched step by step by a scheduler, each step timed by
memsim's own engine (``memsim serve``, ``memsim.serve``).

The deployment is a chip (``hw`` with its overrides), a model and its dtypes, ``tp`` ranks to an instance,
and its instances: ``replicas`` that each serve whole requests, or ``prefill`` and ``decode`` instances
(disaggregated serving), a prefilled sequence's KV cache sent between them over ``handoff_link``. What
the KV cache can hold comes from the memory hierarchy: a probe step places the weights
(``mapping.placement``), and every device level that is a home for the KV cache gives what the weights
leave of it, in blocks of ``block_tokens`` tokens at the model's KV bytes per token (one rank's share).
With ``preemption: swap`` a preempted sequence's blocks go to the host level (one reached over a link),
as far as what the weights leave of it allows, timed over that link. ``engine.serving`` runs the
requests on SimPy; ``serving_steps`` times each step.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from memsim import workload
from memsim.core.errors import ConfigError, MemsimWarning, run_field
from memsim.core.units import PS_PER_S
from memsim.engine.schedulers import SCHEDULERS, chosen
from memsim.engine.serving import Instance, serve_instances
from memsim.engine.serving_state import PREEMPTION, HostWork, Limits, Seq
from memsim.hardware.loader import one_reading
from memsim.run import api
from memsim.run.chipfile import chip_path
from memsim.run.inputs import files
from memsim.serving import report as serving_report
from memsim.serving.spec import MAX_BLOCK_TOKENS, MAX_INSTANCES, ServeSpec, signature
from memsim.serving.steps import Segments, StepTimes
from memsim.serving.summary import ServeSummary
from memsim.stack.spec import StackSpec
from memsim.workload.requests import Request, read_requests, synthetic


@dataclass(frozen=True, kw_only=True)
class Deployment:
    hw: str = "h100-sxm"
    model: str = "llama-3.1-8b"
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    tp: int = 1
    pp: int = 1  # pipeline stages to an instance, run as pp virtual engines (vLLM's), a batch in each stage
    set: tuple = ()
    replicas: int = 1  # instances serving whole requests
    prefill: int = 0  # disaggregated: prefill instances ...
    decode: int = 0  # ... and decode instances
    handoff_link: str = ""  # the chip link a KV cache is sent over between them (default: the chip's interconnect)
    stack: str = "auto"  # the runtime stack that serves it (memsim.stack): its kernels, collectives, host work, policies
    precision: str | None = None  # a weight format per tensor class (``mlp=bfp4,attention=bfp8``), over weight_dtype

    def __post_init__(self) -> None:
        for name in ("replicas", "prefill", "decode", "pp"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_INSTANCES:
                raise ConfigError(f"must be a whole number from 0 to {MAX_INSTANCES}", field=name)
        if self.pp < 1:
            raise ConfigError("must be at least 1", field="pp")
        if (self.prefill > 0) != (self.decode > 0):
            raise ConfigError("disaggregated serving needs both prefill and decode instances",
                              field=run_field("prefill_instances"))
        if not self.prefill and self.replicas < 1:
            raise ConfigError("must be at least 1", field="replicas")

    @property
    def layout(self) -> str:
        chips = self.tp * self.pp
        unit = f"{chips} chip{'s' * (chips > 1)}" + (f" (tp {self.tp} x pp {self.pp})" if self.pp > 1 else "")
        if self.prefill:
            return f"{self.prefill} prefill + {self.decode} decode instances of {unit}"
        return f"{self.replicas} instance{'s' * (self.replicas > 1)} of {unit}"

    def run(self, phase: str, batch: int, length: int) -> tuple[float, float]:
        """One step of ``batch`` sequences: a prefill of ``length`` prompt tokens, or a decode at ``length`` tokens
        of context; its time and energy."""
        s = self.summary(phase, batch, length)
        return s["step_time_s"], s["energy_j"]["total"]

    def mixed(self, segments: Segments) -> tuple[float, float]:
        """A mixed step (``workload.StepSpec.mixed``): its time and energy."""
        s = self.mixed_summary(segments)
        return s["step_time_s"], s["energy_j"]["total"]

    def summary(self, phase: str, batch: int, length: int) -> dict:
        """A plain step's summary: as a mixed step of one group (the same graph), but a prefill on a chip that
        pipelines its layers, which streams the prompt through them in chunks (``api.step_graphs``)."""
        chip, hw_path = _chip(self.hw, self.set)
        if phase == "decode" or chip.execution.pipeline != "layers":
            return self.mixed_summary(((batch, 1, length),) if phase == "decode" else ((batch, length, 0),))
        spec = api.resolve(self.hw, self.model, phase=phase, batch=batch, weight_dtype=self.weight_dtype,
                           kv_dtype=self.kv_dtype, tp=self.tp, pp=self.pp, set=self.set, prompt=length,
                           stack=self.stack, precision=self.precision)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MemsimWarning)  # the probe step says it once (kv_capacity)
            graph, micro = api.step_graphs(spec, chip, _model(self.model), phase, spec.tokens(phase))
            return api.step_summary(chip, hw_path, graph, self.pp, _stack(self.stack, self.hw, self.set),
                                    step_work=False, micro=micro)  # the host's step work is the loop's

    def mixed_summary(self, segments: Segments) -> dict:
        chip, hw_path = _chip(self.hw, self.set)
        step = workload.StepSpec.mixed(segments, weight_dtype=self.weight_dtype, kv_dtype=self.kv_dtype, tp=self.tp,
                                       quantize_embeddings=chip.execution.embedding_dtype == "weight",
                                       precision=self.precision)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MemsimWarning)
            return api.step_summary(chip, hw_path, workload.build_step(_model(self.model), step), self.pp,
                                    _stack(self.stack, self.hw, self.set), step_work=False)


@functools.lru_cache(maxsize=8)
def _chip(hw: str, sets: tuple) -> tuple[Any, str]:
    return api.load_chip_spec(hw, sets)


@functools.lru_cache(maxsize=8)
def _stack(name: str, hw: str, sets: tuple) -> StackSpec:
    """The deployment's runtime stack (a serving run's steps leave the host's step work to its loop)."""
    return api.load_stack(name, _chip(hw, sets)[0], sets)[0]


def stack_of(dep: Deployment) -> StackSpec:
    return _stack(dep.stack, dep.hw, dep.set)


@functools.lru_cache(maxsize=8)
def _model(name: str) -> workload.ModelConfig:
    return workload.model_config(name)


@dataclass(frozen=True, kw_only=True)
class Policy:
    scheduler: str | None = None  # None: the stack's (``stack.serving``), as max_seqs and max_tokens
    block_tokens: int = 16
    max_seqs: int | None = None
    max_tokens: int | None = None  # chunked: the token budget of a step
    prefix_caching: bool = False
    preemption: str = "recompute"
    slo_ttft_s: float = 1.0  # goodput counts the requests that meet both
    slo_tpot_s: float = 0.1

    def __post_init__(self) -> None:
        if self.scheduler is not None and self.scheduler not in chosen():
            raise ConfigError(f"unknown scheduler {self.scheduler!r} ({', '.join(chosen())})", field=run_field("scheduler"))
        if self.preemption not in PREEMPTION:
            raise ConfigError(f"unknown preemption {self.preemption!r} ({', '.join(PREEMPTION)})", field=run_field("preemption"))
        for name, most in (("block_tokens", MAX_BLOCK_TOKENS), ("max_seqs", 1 << 20), ("max_tokens", 1 << 24)):
            value = getattr(self, name)
            if value is None and name != "block_tokens":
                continue
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= most:
                raise ConfigError(f"must be a whole number from 1 to {most:,}", field=name)
        for name in ("slo_ttft_s", "slo_tpot_s"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) > 0):
                raise ConfigError("must be a positive time in seconds", field=name)

    def resolved(self, stack: StackSpec) -> Policy:
        """The policy with what it leaves to the stack (``None``) taken from the stack's serving policies."""
        own = stack.serving
        if own.scheduler not in chosen():
            raise ConfigError(f"unknown scheduler {own.scheduler!r} ({', '.join(chosen())})",
                              field="stack.serving.scheduler")
        return dataclasses.replace(self, scheduler=self.scheduler or own.scheduler,
                                   max_seqs=self.max_seqs or min(own.max_seqs, 1 << 20),
                                   max_tokens=self.max_tokens or min(own.max_tokens, 1 << 24))


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


def kv_capacity(dep: Deployment, block_tokens: int) -> KVCache:
    """What the KV cache can hold: each device level that is a home for it, less the weights placed there."""
    probe = api.simulate(dep.hw, dep.model, phase="decode", batch=1, context=block_tokens,
                         weight_dtype=dep.weight_dtype, kv_dtype=dep.kv_dtype, tp=dep.tp, pp=dep.pp, set=dep.set,
                         sensitivity=0, stack=dep.stack, precision=dep.precision)
    cached = probe.graph.bytes_of("kv") - sum(t.bytes for t in probe.graph.tensors.values()  # less the new token's
                                               if t.klass == "kv" and t.name.endswith(("k_new", "v_new")))
    per_token = cached // block_tokens
    block = max(1, per_token * block_tokens)
    chip = probe.plan.chip
    weights = probe.summary["placement"].get("weight", {})
    share = probe.plan.stack.serving  # the memory the stack gives the weights and KV cache: of all, or of what is free
    levels = {lvl.name: kv_room(dep.pp * chip.chip_capacity(lvl), weights.get(lvl.name, 0), share.kv_fraction,
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
        swap = {"host": host.name, "swap_s_per_block": block / (dep.pp * bus.achievable(bus.count)),
                "host_blocks": max(0, dep.pp * chip.chip_capacity(host) - weights.get(host.name, 0)) // block}
    if dep.handoff_link and dep.handoff_link not in {lk.name for lk in chip.links}:
        raise ConfigError(f"{dep.hw} has no link {dep.handoff_link!r} ({', '.join(lk.name for lk in chip.links)})",
                          field=run_field("handoff_link"))
    link = chip.link(dep.handoff_link) if dep.handoff_link else chip.interconnect
    if dep.prefill and link is None:
        raise ConfigError(f"{dep.hw} has no link to send a KV cache between instances over", field=run_field("handoff_link"))
    handoff: dict[str, Any] = {} if link is None else {"handoff_bytes_per_s": dep.pp * link.achievable(link.count),
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


def host_work(stack: StackSpec, tp: int) -> HostWork:
    """A serving stack's host work per step, in seconds (``engine.serving_state.HostWork``)."""
    step, policies = stack.step, stack.serving
    return HostWork(fixed_s=(step.fixed_ps + stack.dispatch.graph_ps) / PS_PER_S, per_sequence_s=step.per_sequence_ps / PS_PER_S,
                    per_token_s=step.per_token_ps / PS_PER_S, per_rank_s=step.per_rank_ps / PS_PER_S, ranks=tp,
                    output_fixed_s=step.output_fixed_ps / PS_PER_S, output_s=step.output_ps / PS_PER_S,
                    overlap=step.overlap, multi_step=policies.multi_step, frontend_s=policies.frontend_ps / PS_PER_S)


def instances(dep: Deployment, policy: Policy, kv: KVCache, times: StepTimes) -> list[Instance]:
    """The deployment's instances. An instance of ``pp`` stages runs as ``pp`` virtual engines (vLLM's), each with
    its share of the KV cache and a step as long as the whole pipeline's, one batch in each stage at a time."""
    if policy.preemption == "swap" and kv.host_blocks < 1:
        raise ConfigError(f"{dep.hw} has no host level with room for a KV block to swap to", field=run_field("preemption"))
    stack = stack_of(dep)
    policy = policy.resolved(stack)
    assert policy.scheduler is not None and policy.max_seqs is not None and policy.max_tokens is not None
    blocks = kv.blocks // dep.pp
    limits = Limits(kv_blocks=blocks, block_tokens=policy.block_tokens, max_seqs=policy.max_seqs,
                    max_tokens=policy.max_tokens, prefix_caching=policy.prefix_caching, preemption=policy.preemption,
                    swap_blocks=kv.host_blocks // dep.pp if policy.preemption == "swap" else 0,
                    watermark_blocks=math.ceil(stack.serving.watermark * blocks))
    if limits.kv_blocks < 1:
        raise ConfigError(f"{kv.blocks} KV blocks do not split over {dep.pp} pipeline stages' engines", field=run_field("pp"))
    host = host_work(stack, dep.tp)
    if not dep.prefill:
        return [Instance(scheduler=policy.scheduler, limits=limits, step_time=times, host=host)] * (dep.replicas * dep.pp)
    return ([Instance(scheduler=policy.scheduler, limits=limits, step_time=times, role="prefill", host=host)] *
            (dep.prefill * dep.pp) + [Instance(scheduler="decode_only", limits=limits, step_time=times, role="decode",
                                               host=host)] * (dep.decode * dep.pp))


def serve(dep: Deployment, requests: tuple[Request, ...], policy: Policy = Policy(), check: int = 8,
          users: int = 0, think_s: float = 0.0, steps_cache: dict | None = None) -> dict[str, Any]:
    """Simulate the requests on the deployment (``users`` > 0: a closed loop of that many clients); returns
    ``requests`` and ``steps`` (DataFrames) and ``summary``. ``steps_cache``: the simulated steps of earlier runs
    of the same deployment and block size, shared (each grid step is the same simulation)."""
    kv = kv_capacity(dep, policy.block_tokens)
    policy = policy.resolved(stack_of(dep))
    assert policy.scheduler is not None  # resolved: the stack's, where the deployment named none
    times = StepTimes(run=dep.run, mixed=dep.mixed, tile=kv.unit_tile, chunked=SCHEDULERS[policy.scheduler].chunked,
                      kv_tokens=kv.blocks // dep.pp * policy.block_tokens, swap_s_per_block=kv.swap_s_per_block,
                      cache=steps_cache if steps_cache is not None else {})

    def handoff(seq: Seq) -> float:
        return kv.handoff_latency_s + seq.context * kv.bytes_per_token / kv.handoff_bytes_per_s

    seqs, steps, area = serve_instances(requests, instances(dep, policy, kv, times),
                                        handoff if dep.prefill else None, users=users, think_s=think_s)
    reqs = pd.DataFrame([s.row() for s in seqs])
    rows = pd.DataFrame(steps)
    if len(rows):  # the simulated shape each step was timed as, its energy and its KV blocks in each level
        rows.insert(3, "shape", [" ".join(map(str, times.calls[i])) for i in rows.call])
        rows["energy_j"] = [times.times[i][1] for i in rows.call]
        rows = rows.sort_values(["start_s", "instance"], kind="stable").drop(columns="call").reset_index(drop=True)
        below = 0
        for name, held in kv.fill.items():  # an engine's share of each level
            rows[f"kv_blocks_{name}"] = (rows.kv_blocks_used - below).clip(0, held // dep.pp)
            below += held // dep.pp
    handed_j = float((reqs.prompt_tokens + 1).sum() * kv.bytes_per_token * dep.tp * kv.handoff_j_per_byte) \
        if dep.prefill else 0.0
    base = serving_report.summarize(reqs, rows, blocks=kv.blocks // dep.pp, other_energy_j=handed_j,
                                    slo={"ttft_s": policy.slo_ttft_s, "tpot_s": policy.slo_tpot_s})
    summary = ServeSummary(  # serve.json, built by keyword in one place (memsim.serving.summary declares it)
        **{**base, "kv": {**base["kv"], "block_tokens": policy.block_tokens, "bytes_per_token": kv.bytes_per_token,
                          "levels": kv.levels, "fill": kv.fill, "host": kv.host, "host_blocks": kv.host_blocks}},
        handoff={"mean_s": float(reqs.handoff_s.mean()) if dep.prefill else 0.0, "energy_j": handed_j,
                 "total_s": float(reqs.handoff_s.sum())},
        mean_in_system=area / base["span_s"] if base["span_s"] else 0.0,
        surrogate={"grid_steps": len(times.cache), **times.check(check)}, limit=limit(dep, rows, times, kv),
        deployment={"hw": dep.hw, "model": dep.model, "tp": dep.tp, "pp": dep.pp,
                    "replicas": dep.replicas if not dep.prefill else 0, "prefill": dep.prefill, "decode": dep.decode,
                    "layout": dep.layout, "stack": stack_of(dep).name},
        host=host_summary(host_work(stack_of(dep), dep.tp), rows), scheduler=policy.scheduler,
        prefix_caching=policy.prefix_caching, preemption=policy.preemption, users=users).as_dict()
    return {"requests": reqs, "steps": rows, "summary": summary}


def host_summary(host: HostWork, steps: pd.DataFrame) -> dict[str, Any]:
    """What the stack's host added to the steps (the time each step took beyond its device's), its share of
    the busy time, and the policies that set it."""
    added = float(steps.host_s.sum()) if len(steps) else 0.0
    busy = float((steps.end_s - steps.start_s).sum()) if len(steps) else 0.0
    return {"busy_s": added, "busy_fraction": added / busy if busy else 0.0, "frontend_s": host.frontend_s,
            "overlap": host.overlap, "multi_step": host.multi_step}


FULL = 0.95  # a KV cache this full turns sequences away


def limit(dep: Deployment, steps: pd.DataFrame, times: StepTimes, kv: KVCache) -> dict[str, Any]:
    """What limits the run: the KV cache's capacity where it was full for a tenth of the busy time or more, else
    the resource that bounds its most frequent step (``roofline_bound``: a memory level, a link or compute)."""
    if not len(steps):
        return {}
    busy = steps.end_s - steps.start_s
    full = float(busy[steps.kv_blocks_used >= FULL * (kv.blocks // dep.pp)].sum() / busy.sum()) if busy.sum() else 0.0
    key = pd.Series([" ".join(map(str, k)) for k in times.calls]).mode().iloc[0].split()
    shape = (key[0], *map(int, key[1:]))
    s = dep.mixed_summary(times.exact[tuple(shape)]) if shape[0] == "mixed" else dep.summary(*shape)
    bound = s["roofline_bound"]
    by = (f"KV cache capacity ({', '.join(n for n, b in kv.fill.items() if b)})" if full >= 0.1 else
          "compute" if bound == "compute" else f"{bound} bandwidth")
    return {"by": by, "kv_full_fraction": full, "step": " ".join(key), "step_bound": bound}


@dataclass(frozen=True)
class ServeResult:
    """A finished serving run: per-request and per-step tables and the summary (``serve.json``)."""
    requests: pd.DataFrame
    steps: pd.DataFrame
    summary: dict
    inputs: tuple[Path, ...] = ()  # the files the run read (trace, chip, model, stack): ``write`` never writes over them

    def __repr__(self) -> str:
        s = self.summary
        return (f"ServeResult({s['requests']} requests, {s['requests_per_s']:.3g} req/s, "
                f"TTFT p90 {s['ttft_s_p90'] * 1e3:.4g} ms, TPOT p90 {s['tpot_s_p90'] * 1e3:.4g} ms)")

    def write(self, out: str | Path) -> list[Path]:
        return serving_report.write(self.requests, self.steps, self.summary, Path(out), self.inputs)


def simulate_serving(hw: Any = ServeSpec.hw, model: str = ServeSpec.model, **options: Any) -> ServeResult:
    """``memsim serve`` from Python: the keyword arguments are ``ServeSpec``'s fields (``memsim.ServeSpec``),
    one name each as the command line's flags: a request trace (``requests``, a CSV) or ``count`` requests
    drawn at ``rate`` a second (or sent by ``users`` clients in a closed loop, each ``think`` seconds after
    its last finished), on a deployment under a scheduler. ``hw`` may also be a ``ChipSpec`` or a dict."""
    return serve_spec(ServeSpec.make({"hw": chip_path(hw), "model": model, **options}))


simulate_serving.__signature__ = signature()  # type: ignore[attr-defined]


def serve_spec(spec: ServeSpec) -> ServeResult:
    """Serve the requests ``spec`` names or draws on the deployment it declares."""
    trace = spec.trace_path()
    reqs = read_requests(trace) if trace is not None else synthetic(spec.count, spec.rate, **spec.drawn())
    dep = deployment_of(spec)
    with one_reading():  # every step it simulates sees one version of the chip and stack files
        result = serve(dep, reqs, policy_of(spec), check=spec.check, users=spec.users, think_s=spec.think)
    return ServeResult(result["requests"], result["steps"], result["summary"],
                       files(spec))


def deployment_of(spec: ServeSpec) -> Deployment:
    """The deployment the serving loop runs, as ``spec`` declares it."""
    return Deployment(hw=spec.hw, model=spec.model, weight_dtype=spec.weight_dtype, kv_dtype=spec.kv_dtype, tp=spec.tp,
                      pp=spec.pp, set=spec.set, replicas=spec.replicas, prefill=spec.prefill_instances,
                      decode=spec.decode_instances, handoff_link=spec.handoff_link or "", stack=spec.stack,
                      precision=spec.precision)


def policy_of(spec: ServeSpec) -> Policy:
    """The scheduling policy ``spec`` declares (what it leaves ``None`` is the stack's)."""
    return Policy(scheduler=spec.scheduler, block_tokens=spec.block_tokens, max_seqs=spec.max_seqs,
                  max_tokens=spec.max_tokens, prefix_caching=spec.prefix_caching, preemption=spec.preemption,
                  slo_ttft_s=spec.slo_ttft, slo_tpot_s=spec.slo_tpot)
