"""Serving: requests arriving at a deployment, batched step by step by a scheduler, each step timed by
memsim's own engine (``memsim serve``, ``memsim.serve``).

A serving run is declared by a ``ServeSpec``, which the run reads as it is. The run builds the
deployment's step model once (``serving.model.StepModel``: the chip, stack and model loaded once,
each step shape simulated through the pipeline), its KV room from a probe step's placement
(``serving.model.kv_capacity``), and its instances; ``engine.serving`` runs the requests on SimPy,
asking ``serving.steps.StepTimes`` for each step's time.
"""
from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from memsim.core import collector
from memsim.core.errors import ConfigError, MemsimWarning, run_field
from memsim.core.units import PS_PER_S
from memsim.engine.schedulers import SCHEDULERS
from memsim.engine.sequence import Seq
from memsim.engine.serving import Instance, serve_instances
from memsim.engine.serving_state import HostWork, Limits
from memsim.hardware.loader import one_reading
from memsim.run.chipfile import chip_path
from memsim.run.inputs import files
from memsim.serving import report as serving_report
from memsim.serving.model import KVCache, StepModel, kv_capacity, probe
from memsim.serving.spec import ServeSpec, signature
from memsim.serving.steps import StepTimes
from memsim.serving.summary import Handoff, HostAdded, KvUse, Limit, Served, ServeSummary, Slo
from memsim.stack.spec import StackSpec
from memsim.workload.requests import Request, read_requests, synthetic


def host_work(stack: StackSpec, tp: int) -> HostWork:
    """A serving stack's host work per step, in seconds (``engine.serving_state.HostWork``)."""
    step, policies = stack.step, stack.serving
    return HostWork(fixed_s=(step.fixed_ps + stack.dispatch.graph_ps) / PS_PER_S, per_sequence_s=step.per_sequence_ps / PS_PER_S,
                    per_token_s=step.per_token_ps / PS_PER_S, per_rank_s=step.per_rank_ps / PS_PER_S, ranks=tp,
                    output_fixed_s=step.output_fixed_ps / PS_PER_S, output_s=step.output_ps / PS_PER_S,
                    overlap=step.overlap, multi_step=policies.multi_step, frontend_s=policies.frontend_ps / PS_PER_S)


def instances(spec: ServeSpec, stack: StackSpec, kv: KVCache, times: StepTimes) -> list[Instance]:
    """The deployment's instances (``spec`` resolved: ``ServeSpec.resolved``). An instance of ``pp`` stages runs as
    ``pp`` virtual engines (vLLM's), each with its share of the KV cache and a step as long as the whole
    pipeline's, one batch in each stage at a time."""
    if spec.preemption == "swap" and kv.host_blocks < 1:
        raise ConfigError(f"{spec.hw} has no host level with room for a KV block to swap to", field=run_field("preemption"))
    assert spec.scheduler is not None and spec.max_seqs is not None and spec.max_tokens is not None
    blocks = kv.blocks // spec.pp
    limits = Limits(kv_blocks=blocks, block_tokens=spec.block_tokens, max_seqs=spec.max_seqs,
                    max_tokens=spec.max_tokens, prefix_caching=spec.prefix_caching, preemption=spec.preemption,
                    swap_blocks=kv.host_blocks // spec.pp if spec.preemption == "swap" else 0,
                    watermark_blocks=math.ceil(stack.serving.watermark * blocks))
    if limits.kv_blocks < 1:
        raise ConfigError(f"{kv.blocks} KV blocks do not split over {spec.pp} pipeline stages' engines", field=run_field("pp"))
    host = host_work(stack, spec.tp)
    if not spec.prefill_instances:
        return [Instance(scheduler=spec.scheduler, limits=limits, step_time=times, host=host)] * (spec.replicas * spec.pp)
    return ([Instance(scheduler=spec.scheduler, limits=limits, step_time=times, role="prefill", host=host)] *
            (spec.prefill_instances * spec.pp) + [Instance(scheduler="decode_only", limits=limits, step_time=times,
                                                         role="decode", host=host)] * (spec.decode_instances * spec.pp))


def serve(spec: ServeSpec, requests: tuple[Request, ...], steps_cache: dict | None = None,
          model: StepModel | None = None) -> ServeResult:
    """Simulate the requests on the deployment ``spec`` declares, under its policy (``users`` > 0: a closed loop
    of that many clients; ``check`` steps' interpolated times checked in full); returns its ``requests`` and
    ``steps`` (DataFrames) and its typed ``summary``. ``steps_cache``: the simulated steps of earlier runs of the
    same deployment and block size, shared (each grid step is the same simulation); ``model``: the deployment's
    step model, where an earlier run of it built one (its chip, stack and model, and the steps it simulated)."""
    model = model if model is not None else StepModel.of(spec)  # the chip, stack and model loaded once
    kv = kv_capacity(spec, *probe(model, spec.block_tokens), spec.block_tokens)
    stack = model.stack
    spec = spec.resolved(stack)  # what it leaves to the stack (scheduler, max_seqs, max_tokens) filled in
    assert spec.scheduler is not None
    times = StepTimes(model=model, tile=kv.unit_tile, chunked=SCHEDULERS[spec.scheduler].chunked,
                      kv_tokens=kv.blocks // spec.pp * spec.block_tokens, swap_s_per_block=kv.swap_s_per_block,
                      cache=steps_cache if steps_cache is not None else {})

    def handoff(seq: Seq) -> float:
        return kv.handoff_latency_s + seq.context * kv.bytes_per_token / kv.handoff_bytes_per_s

    think, starts = clients(spec, len(requests))
    seqs, steps, area = serve_instances(requests, instances(spec, stack, kv, times),
                                        handoff if spec.prefill_instances else None, users=spec.users, think_s=think,
                                        starts_s=starts)
    if (line := model.over_cap()) is not None:
        warnings.warn(MemsimWarning(line), stacklevel=2)
    every = pd.DataFrame([s.row() for s in seqs])
    measured = (every.arrival_s >= every.arrival_s.min() + spec.warmup).to_numpy()
    if not measured.any():
        raise ConfigError(f"no request arrives after the {spec.warmup:g} s warm-up (the last arrives at "
                          f"{every.arrival_s.max():.4g} s)", field=run_field("warmup"))
    reqs = every[measured].reset_index(drop=True)
    gaps = np.concatenate([np.asarray(s.gaps, dtype=np.int64) for s, m in zip(seqs, measured) if m]) / PS_PER_S
    rows = pd.DataFrame(steps)
    if len(rows):  # the simulated shape each step was timed as, its energy and its KV blocks in each level
        rows.insert(3, "shape", [" ".join(map(str, times.calls[i])) for i in rows.call])
        rows["energy_j"] = [times.times[i][1] for i in rows.call]
        rows = rows.sort_values(["start_s", "instance"], kind="stable").drop(columns="call").reset_index(drop=True)
        below = 0
        for name, held in kv.fill.items():  # an engine's share of each level
            rows[f"kv_blocks_{name}"] = (rows.kv_blocks_used - below).clip(0, held // spec.pp)
            below += held // spec.pp
    handed_j = float((reqs.prompt_tokens + 1).sum() * kv.bytes_per_token * spec.tp * kv.handoff_j_per_byte) \
        if spec.prefill_instances else 0.0
    first = float(reqs.arrival_s.min())
    base = serving_report.summarize(reqs, rows[rows.start_s >= first] if spec.warmup and len(rows) else rows,
                                    blocks=kv.blocks // spec.pp, other_energy_j=handed_j, gaps=gaps,
                                    slo=Slo(ttft_s=spec.slo_ttft, tpot_s=spec.slo_tpot))
    last = float(reqs.arrival_s.max())
    served = serving_report.served_rate(every.arrival_s + every.e2e_s, first, last) if last > first else \
        base["requests_per_s"]
    in_system = area if not spec.warmup else float(reqs.e2e_s.sum())  # the measured requests' time in the system
    use = base.pop("kv")
    summary = ServeSummary(  # serve.json, built by keyword in one place (memsim.serving.summary declares it)
        **base, kv=KvUse(**use, block_tokens=spec.block_tokens, bytes_per_token=kv.bytes_per_token,
                         levels=kv.levels, fill=kv.fill, host=kv.host, host_blocks=kv.host_blocks),
        handoff=Handoff(mean_s=float(reqs.handoff_s.mean()) if spec.prefill_instances else 0.0, energy_j=handed_j,
                        total_s=float(reqs.handoff_s.sum())),
        mean_in_system=in_system / base["span_s"] if base["span_s"] else 0.0,
        warmup_s=spec.warmup, warmup_requests=int((~measured).sum()), served_requests_per_s=served,
        surrogate=times.check(spec.check), limit=limit(spec, rows, times, kv),
        deployment=Served(hw=spec.hw, model=spec.model, tp=spec.tp, pp=spec.pp,
                          replicas=spec.replicas if not spec.prefill_instances else 0, prefill=spec.prefill_instances,
                          decode=spec.decode_instances, layout=spec.layout, stack=stack.name),
        host=host_summary(host_work(stack, spec.tp), rows), scheduler=spec.scheduler,
        prefix_caching=spec.prefix_caching, preemption=spec.preemption, users=spec.users)
    if (line := preempting(summary, spec)) is not None:
        warnings.warn(MemsimWarning(line), stacklevel=2)
    return ServeResult(reqs, rows, summary)


# Past this share of its steps preempting a sequence, a run spends much of its time recomputing (or
# swapping) what it had: a warning, not a limit on what memsim simulates.
PREEMPTING = 0.05


def preempting(s: ServeSummary, spec: ServeSpec) -> str | None:
    """A line when preemptions pass ``PREEMPTING`` of the steps, with what would avoid them."""
    if not s.steps or s.preemptions <= PREEMPTING * s.steps:
        return None
    fewer = f"a --max-seqs below {spec.max_seqs}" if spec.max_seqs else "a lower --max-seqs"
    swap = ", --preemption swap (to the host level)" if spec.preemption == "recompute" else ""
    return (f"{s.preemptions:,} preemptions in {s.steps:,} steps ({s.preemptions / s.steps:.0%}): more sequences are "
            f"admitted than {s.kv.blocks:,} KV blocks hold as they grow, and each preempted one is "
            f"{'recomputed' if spec.preemption == 'recompute' else 'swapped'}; {fewer}, --kv-dtype fp8, more KV "
            f"memory (--tp, a chip with more){swap} would avoid them")


def clients(spec: ServeSpec, n: int) -> tuple[float | tuple[float, ...], tuple[float, ...]]:
    """A closed loop's think time before each of the ``n`` requests (one number where fixed) and each client's
    first send: uniform over the ramp-up, drawn from the run's seed apart from its requests'."""
    if not spec.users or (spec.think_dist == "fixed" and not spec.ramp):
        return spec.think, ()
    rng = np.random.default_rng([spec.seed, 1])
    starts = tuple(float(t) for t in rng.uniform(0.0, spec.ramp, spec.users)) if spec.ramp else ()
    if spec.think_dist == "fixed":
        return spec.think, starts
    return tuple(float(t) for t in rng.exponential(spec.think, n)), starts


def host_summary(host: HostWork, steps: pd.DataFrame) -> HostAdded:
    """What the stack's host added to the steps (the time each step took beyond its device's), its share of
    the busy time, and the policies that set it."""
    added = float(steps.host_s.sum()) if len(steps) else 0.0
    busy = float((steps.end_s - steps.start_s).sum()) if len(steps) else 0.0
    return HostAdded(busy_s=added, busy_fraction=added / busy if busy else 0.0, frontend_s=host.frontend_s,
                     overlap=host.overlap, multi_step=host.multi_step)


FULL = 0.95  # a KV cache this full turns sequences away
HOST_BOUND = 0.5  # a run whose steps are this much its host's work is limited by the stack, not the chip


def limit(spec: ServeSpec, steps: pd.DataFrame, times: StepTimes, kv: KVCache) -> Limit | None:
    """What limits the run: the KV cache's capacity where it was full for a tenth of the busy time or more, else
    the stack's host where it made half the busy time or more, else the resource that bounds its most frequent
    step (``roofline_bound``: a memory level, a link or compute)."""
    if not len(steps):
        return None
    busy = steps.end_s - steps.start_s
    full = float(busy[steps.kv_blocks_used >= FULL * (kv.blocks // spec.pp)].sum() / busy.sum()) if busy.sum() else 0.0
    key = pd.Series([" ".join(map(str, k)) for k in times.calls]).mode().iloc[0].split()
    shape = (key[0], *map(int, key[1:]))
    bound = times.cost(shape).bound
    host = float(steps.host_s.sum() / busy.sum()) if busy.sum() else 0.0
    by = (f"KV cache capacity ({', '.join(n for n, b in kv.fill.items() if b)})" if full >= 0.1 else
          f"the stack's host work ({host:.0%} of the busy time)" if host >= HOST_BOUND else
          "compute" if bound == "compute" else f"{bound} bandwidth")
    return Limit(by=by, kv_full_fraction=full, step=" ".join(key), step_bound=bound)


@dataclass(frozen=True)
class ServeResult:
    """A finished serving run: per-request and per-step tables and the summary (``serve.json``, an object
    until it is written)."""
    requests: pd.DataFrame
    steps: pd.DataFrame
    summary: ServeSummary
    inputs: tuple[Path, ...] = ()  # the files the run read (trace, chip, model, stack): ``write`` never writes over them

    def __repr__(self) -> str:
        s = self.summary
        return (f"ServeResult({s.requests} requests, {s.requests_per_s:.3g} req/s, "
                f"TTFT p90 {s.ttft_s_p90 * 1e3:.4g} ms, TPOT p90 {s.tpot_s_p90 * 1e3:.4g} ms)")

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
    with one_reading(), collector.deferred():  # every step it simulates sees one version of the chip and stack files
        result = serve(spec, reqs)
    return dataclasses.replace(result, inputs=files(spec))
