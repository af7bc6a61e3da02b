"""Serving: requests arriving at a deployment, batched step by step by a scheduler, each step timed by
memsim's own engine (``memsim serve``, ``memsim.serve``).

The deployment is a chip (``hw`` with its overrides), a model and its dtypes, ``tp`` ranks. What the
KV cache can hold comes from the memory hierarchy: a probe step places the weights
(``mapping.placement``), and every device level that is a home for the KV cache gives what the
weights leave of it, in blocks of ``block_tokens`` tokens at the model's KV bytes per token (one
rank's share). ``engine.serving`` runs the requests on SimPy under the chosen scheduler.

A step's time is that of a simulated step of its shape: a prefill step of its sequences at their
mean prompt (the same tokens in its GEMMs), a decode step of its batch at the mean context (the same
KV bytes read by its attention). Shapes are interpolated between simulated steps on a grid of
batches and lengths (``StepTimes``), each simulated once; ``serve.json`` gives how many it simulated
and the interpolation's error against full simulation on sampled steps.
"""
from __future__ import annotations

import dataclasses
import json
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from memsim import api
from memsim.atomic import atomic_write_text
from memsim.engine.serving import SCHEDULERS, Batch, Limits
from memsim.engine.serving import serve as run_requests
from memsim.errors import ConfigError, MemsimWarning
from memsim.workload.requests import Request

PERCENTILES = (50, 90, 99)
MAX_BLOCK_TOKENS = 4096  # tokens in one KV block (serving stacks use 8 to 256)


@dataclass(frozen=True, kw_only=True)
class Deployment:
    hw: str = "h100-sxm"
    model: str = "llama-3.1-8b"
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    tp: int = 1
    set: tuple = ()

    def run(self, phase: str, batch: int, length: int) -> dict:
        """The summary of one step of ``batch`` sequences: a prefill of ``length`` prompt tokens, or a decode at
        ``length`` tokens of context."""
        key = "prompt" if phase == "prefill" else "context"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MemsimWarning)  # the probe step says it once (kv_capacity)
            return api.simulate(self.hw, self.model, phase=phase, batch=batch, weight_dtype=self.weight_dtype,
                                kv_dtype=self.kv_dtype, tp=self.tp, set=self.set, sensitivity=0,
                                **{key: length}).summary


@dataclass(frozen=True, kw_only=True)
class Policy:
    scheduler: str = "prefill_first"
    block_tokens: int = 16
    max_seqs: int = 256
    max_tokens: int = 8192
    prefix_caching: bool = False
    slo_ttft_s: float = 1.0  # goodput counts the requests that meet both
    slo_tpot_s: float = 0.1

    def __post_init__(self) -> None:
        if self.scheduler not in SCHEDULERS:
            raise ConfigError(f"unknown scheduler {self.scheduler!r} ({', '.join(SCHEDULERS)})", field="scheduler")
        for name, most in (("block_tokens", MAX_BLOCK_TOKENS), ("max_seqs", 1 << 20), ("max_tokens", 1 << 24)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= most:
                raise ConfigError(f"must be a whole number from 1 to {most:,}", field=name)
        for name in ("slo_ttft_s", "slo_tpot_s"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) > 0):
                raise ConfigError("must be a positive time in seconds", field=name)


@dataclass(frozen=True, kw_only=True)
class KVCache:
    bytes_per_token: int  # one rank's share of one sequence's KV cache, per token
    blocks: int
    unit_tile: int  # the chip's (``execution.unit_tile``), for the step times
    levels: dict[str, int]  # the bytes each level that holds it gives it, after the weights


def grid(n: int, per_octave: int) -> tuple[int, int]:
    """The grid points around ``n`` (1 to 8 exactly, then ``per_octave`` a doubling): the lengths and batches a
    run simulates, each once; between them a step's time is interpolated."""
    if n <= 8:
        return n, n
    octave = 2 ** int(math.log2(n))
    step = max(1, octave // per_octave)
    low = n // step * step
    return low, low if low == n else low + step


def kv_capacity(dep: Deployment, block_tokens: int) -> KVCache:
    """What the KV cache can hold: each device level that is a home for it, less the weights placed there."""
    probe = api.simulate(dep.hw, dep.model, phase="decode", batch=1, context=block_tokens,
                         weight_dtype=dep.weight_dtype, kv_dtype=dep.kv_dtype, tp=dep.tp, set=dep.set,
                         sensitivity=0)
    longer = api.load_workload(api.resolve(dep.hw, dep.model, phase="decode", batch=1, context=2 * block_tokens,
                                           weight_dtype=dep.weight_dtype, kv_dtype=dep.kv_dtype, tp=dep.tp, set=dep.set))
    per_token = (longer.bytes_of("kv") - probe.graph.bytes_of("kv")) // block_tokens
    chip = probe.plan.chip
    weights = probe.summary["placement"].get("weight", {})
    levels = {lvl.name: max(0, chip.chip_capacity(lvl) - weights.get(lvl.name, 0))
              for lvl in chip.levels if lvl.home_for("kv") and not lvl.via}
    blocks = sum(levels.values()) // max(1, per_token * block_tokens)
    if blocks < 1:
        raise ConfigError(f"the weights leave no room for a KV block of {block_tokens} tokens "
                          f"({', '.join(f'{k} {v:,} B' for k, v in levels.items()) or 'no level holds the KV cache'})",
                          field="hw")
    return KVCache(bytes_per_token=per_token, blocks=blocks, levels=levels, unit_tile=chip.execution.unit_tile)


@dataclass(kw_only=True)
class StepTimes:
    """Each batch's time and energy. A decode step of ``b`` sequences at mean context ``n`` is interpolated,
    bilinearly, between simulated steps at the grid points around ``b`` and ``n`` (``grid``); a prefill step
    is simulated at its own shape (its GEMMs' time steps with their row tiles, which no interpolation
    follows). Each step shape is simulated once. ``check`` compares the interpolation with full simulations
    of sampled steps."""
    dep: Deployment
    tile: int = 0  # the chip's unit tile (rows): a prefill's time steps with it
    cache: dict[tuple, tuple[float, float]] = field(default_factory=dict)
    calls: list[tuple[str, int, int]] = field(default_factory=list)  # each step's shape, in order
    times: list[tuple[float, float]] = field(default_factory=list)  # each step's time and energy, in order

    def shape(self, batch: Batch) -> tuple[str, int, int]:
        if batch.prefills and batch.decodes:
            raise ConfigError("a step that mixes prefills and decodes needs a scheduler that builds mixed steps",
                              field="scheduler")
        if batch.prefills:
            return "prefill", len(batch.prefills), max(1, round(np.mean([t for _, t, _ in batch.prefills])))
        return "decode", len(batch.decodes), max(1, round(np.mean([c for _, c in batch.decodes])))

    def simulated(self, phase: str, b: int, n: int) -> tuple[float, float]:
        key = (phase, b, n)
        if key not in self.cache:
            s = self.dep.run(phase, b, n)
            self.cache[key] = (s["step_time_s"], s["energy_j"]["total"])
        return self.cache[key]

    def estimate(self, phase: str, b: int, n: int) -> tuple[float, float]:
        if phase == "prefill":
            return self._prefill(b, n)
        (b0, b1), (n0, n1) = grid(b, 4), grid(n, 2)
        wb = (b - b0) / (b1 - b0) if b1 > b0 else 0.0
        wn = (n - n0) / (n1 - n0) if n1 > n0 else 0.0
        corners = {(i, j): self.simulated(phase, bb, nn) for i, bb in enumerate((b0, b1)) for j, nn in enumerate((n0, n1))}
        return tuple(sum(corners[i, j][k] * (wb if i else 1 - wb) * (wn if j else 1 - wn) for i in (0, 1) for j in (0, 1))
                     for k in (0, 1))  # type: ignore[return-value]

    def _prefill(self, b: int, n: int) -> tuple[float, float]:
        """A prefill's GEMMs take a time that steps with their row tiles (``execution.unit_tile`` rows of the
        batch's ``b x n`` tokens): interpolated in ``n`` only between the two ends of its tile, where the tile
        count, and so the waves, are the same; simulated at its own shape where the tile is under ``b`` rows."""
        rows = b * n
        top = -(-rows // self.tile) * self.tile if self.tile else 0
        lo, hi = -(-(top - self.tile + 1) // b) if self.tile else n, top // b if self.tile else n
        if not self.tile or not lo <= n <= hi or hi - lo < 1:
            return self.simulated("prefill", b, n)
        w = (n - lo) / (hi - lo)
        a, z = self.simulated("prefill", b, lo), self.simulated("prefill", b, hi)
        return a[0] + w * (z[0] - a[0]), a[1] + w * (z[1] - a[1])

    def __call__(self, batch: Batch) -> float:
        key = self.shape(batch)
        self.calls.append(key)
        self.times.append(self.estimate(*key))
        return self.times[-1][0]

    def check(self, samples: int, seed: int = 0) -> dict[str, float]:
        """The interpolation's relative error in step time against full simulation, on ``samples`` of the run's
        step shapes drawn at random (off the grid points, where it is exact by construction)."""
        shapes = sorted({k for k in self.calls if self.estimate(*k) != self.cache.get(k)})
        if not shapes:
            return {"sampled": 0, "max_error": 0.0, "mean_error": 0.0}
        rng = np.random.default_rng(seed)
        picked = [shapes[i] for i in rng.choice(len(shapes), min(samples, len(shapes)), replace=False)]
        errors = []
        for phase, b, n in picked:
            exact = self.dep.run(phase, b, n)["step_time_s"]
            errors.append(abs(self.estimate(phase, b, n)[0] / exact - 1))
        return {"sampled": len(picked), "max_error": float(max(errors)), "mean_error": float(np.mean(errors))}


def serve(dep: Deployment, requests: tuple[Request, ...], policy: Policy = Policy(), check: int = 8) -> dict[str, Any]:
    """Simulate the requests on the deployment; returns ``requests`` and ``steps`` (DataFrames) and ``summary``."""
    kv = kv_capacity(dep, policy.block_tokens)
    limits = Limits(kv_blocks=kv.blocks, block_tokens=policy.block_tokens, max_seqs=policy.max_seqs,
                    max_tokens=policy.max_tokens, prefix_caching=policy.prefix_caching)
    times = StepTimes(dep=dep, tile=kv.unit_tile)
    seqs, steps, area = run_requests(requests, policy.scheduler, limits, times)
    reqs = pd.DataFrame([s.row() for s in seqs])
    step_rows = pd.DataFrame(steps)
    if len(step_rows):  # the simulated shape each step was timed as, and its energy
        step_rows.insert(2, "shape", [f"{phase} batch={b} length={n}" for phase, b, n in times.calls])
        step_rows["energy_j"] = [energy for _, energy in times.times]
    summary = _summary(reqs, step_rows, kv, policy, times)
    summary["mean_in_system"] = area / summary["span_s"] if summary["span_s"] else 0.0
    summary["surrogate"] = {"grid_steps": len(times.cache), **times.check(check)}
    return {"requests": reqs, "steps": step_rows, "summary": summary}


def _summary(reqs: pd.DataFrame, steps: pd.DataFrame, kv: KVCache, policy: Policy, times: StepTimes) -> dict:
    span = float(reqs.e2e_s.add(reqs.arrival_s).max() - reqs.arrival_s.min())
    busy = float((steps.end_s - steps.start_s).sum()) if len(steps) else 0.0
    tokens = int(reqs.output_tokens.sum())
    good = reqs[(reqs.ttft_s <= policy.slo_ttft_s) & (reqs.tpot_s <= policy.slo_tpot_s)]
    area = float(((steps.end_s - steps.start_s) * steps.kv_blocks_used).sum()) if len(steps) else 0.0
    pct = {f"{col}_p{p}": float(np.percentile(reqs[col], p)) for col in ("ttft_s", "tpot_s", "e2e_s", "queue_s")
           for p in PERCENTILES}
    energy = float(steps["energy_j"].sum()) if "energy_j" in steps else 0.0
    return {"requests": len(reqs), "span_s": span, "requests_per_s": len(reqs) / span if span else 0.0,
            "output_tokens_per_s": tokens / span if span else 0.0, **pct,
            "ttft_s_mean": float(reqs.ttft_s.mean()), "tpot_s_mean": float(reqs.tpot_s.mean()),
            "e2e_s_mean": float(reqs.e2e_s.mean()),
            "goodput_requests_per_s": len(good) / span if span else 0.0,
            "slo": {"ttft_s": policy.slo_ttft_s, "tpot_s": policy.slo_tpot_s},
            "busy_fraction": busy / span if span else 0.0, "preemptions": int(reqs.preemptions.sum()),
            "kv": {"blocks": kv.blocks, "block_tokens": policy.block_tokens, "bytes_per_token": kv.bytes_per_token,
                   "levels": kv.levels, "mean_utilization": area / busy / kv.blocks if busy else 0.0,
                   "peak_blocks": int(steps.kv_blocks_used.max()) if len(steps) else 0},
            "energy_j": energy, "energy_per_token_j": energy / tokens if tokens else 0.0,
            "avg_power_w": energy / span if span else 0.0, "steps": len(steps),
            "scheduler": policy.scheduler,
            "prefix_caching": policy.prefix_caching}


FILES = ("requests.csv", "steps.csv", "serve.json")


def check_out(out: Path) -> None:
    """Refuse an ``--out`` that holds anything a serving run does not write (nothing is created)."""
    from memsim.atomic import check_writable_parent, folder_entries
    from memsim.errors import run_field

    foreign = [name for name in folder_entries(Path(out), run_field("out")) if name not in FILES]
    if foreign:
        raise ConfigError(f"holds {foreign[0]!r}, which no serving run writes: give a new or empty folder",
                          file=str(out), field=run_field("out"))
    check_writable_parent(Path(out).absolute(), run_field("out"))


def write(result: dict, out: Path) -> list[Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / name for name in FILES]
    atomic_write_text(paths[0], result["requests"].to_csv(index=False))
    atomic_write_text(paths[1], result["steps"].to_csv(index=False))
    atomic_write_text(paths[2], json.dumps(result["summary"], indent=2) + "\n")
    return paths


@dataclass(frozen=True)
class ServeResult:
    """A finished serving run: per-request and per-step tables and the summary (``serve.json``)."""
    requests: pd.DataFrame
    steps: pd.DataFrame
    summary: dict

    def __repr__(self) -> str:
        s = self.summary
        return (f"ServeResult({s['requests']} requests, {s['requests_per_s']:.3g} req/s, "
                f"TTFT p90 {s['ttft_s_p90'] * 1e3:.4g} ms, TPOT p90 {s['tpot_s_p90'] * 1e3:.4g} ms)")

    def write(self, out: str | Path) -> list[Path]:
        return write({"requests": self.requests, "steps": self.steps, "summary": self.summary}, Path(out))


def simulate_serving(hw: str = "h100-sxm", model: str = "llama-3.1-8b", *, requests: str | Path | None = None,
                     rate: float = 1.0, count: int = 100, arrival: str = "poisson", burstiness: float = 1.0,
                     prompt: int = 512, output: int = 128, lengths: str = "fixed", spread: float = 0.5,
                     prefix: int = 0, seed: int = 0, weight_dtype: str = "bf16", kv_dtype: str = "bf16",
                     tp: int = 1, set: Any = (), check: int = 8, **policy: Any) -> ServeResult:
    """``memsim serve`` from Python: a request trace (``requests``, a CSV) or ``count`` synthetic requests at
    ``rate`` a second, on a deployment, under a scheduler (``Policy``'s fields as keywords)."""
    from memsim import runspec
    from memsim.workload.requests import read_requests, synthetic

    reqs = read_requests(Path(requests)) if requests is not None else synthetic(
        count, rate, arrival=arrival, burstiness=burstiness, prompt=prompt, output=output, lengths=lengths,
        spread=spread, seed=seed, prefix=prefix)
    unknown = sorted(policy.keys() - {f.name for f in dataclasses.fields(Policy)})
    if unknown:
        raise ConfigError(f"unknown keyword {unknown[0]!r}", field=unknown[0])
    dep = Deployment(hw=hw, model=model, weight_dtype=weight_dtype, kv_dtype=kv_dtype, tp=tp,
                     set=runspec.overrides(set))
    result = serve(dep, reqs, Policy(**policy), check=check)
    return ServeResult(result["requests"], result["steps"], result["summary"])


def summary_table(s: dict) -> str:
    """The console lines of a serving run."""
    kv = s["kv"]
    lines = [f"served {s['requests']} requests in {s['span_s']:.4g} s: {s['requests_per_s']:.4g} req/s, "
             f"{s['output_tokens_per_s']:.4g} output tokens/s ({s['scheduler']})"]
    for name, key in (("TTFT", "ttft_s"), ("TPOT", "tpot_s"), ("E2E", "e2e_s"), ("queue", "queue_s")):
        lines.append(f"  {name:<6} ms   p50 {s[key + '_p50'] * 1e3:10.4g}   p90 {s[key + '_p90'] * 1e3:10.4g}   "
                     f"p99 {s[key + '_p99'] * 1e3:10.4g}")
    lines.append(f"  goodput          {s['goodput_requests_per_s']:.4g} req/s within TTFT {s['slo']['ttft_s']:g} s "
                 f"and TPOT {s['slo']['tpot_s']:g} s")
    lines.append(f"  KV cache         {kv['blocks']:,} blocks of {kv['block_tokens']} tokens in "
                 f"{', '.join(kv['levels'])}; mean use {kv['mean_utilization']:.1%}, peak {kv['peak_blocks']:,}; "
                 f"{s['preemptions']} preemptions")
    lines.append(f"  energy           {s['energy_per_token_j']:.4g} J/token, {s['avg_power_w']:.4g} W while serving")
    sur = s["surrogate"]
    lines.append(f"  step times       {sur['grid_steps']} steps simulated; interpolation error on {sur['sampled']} "
                 f"sampled steps: max {sur['max_error']:.2%}")
    return "\n".join(lines)
