"""Generation: a prefill, then N decode steps with the KV cache growing one token a step.

Decode steps differ only in their context length, and a step's metrics change smoothly
with it (KV traffic and attention work grow linearly). So a few steps spread evenly over
the context range are simulated and every additive metric (times, bytes, FLOPs, stalls) is
interpolated linearly in between and summed over all N steps. With ``samples >= N`` every
step is simulated. How each summary key combines (summed, taken once, recomputed) is declared
in ``memsim.report.summary_fields``. The prefill produces the first token and each decode
step one more, so a generation of N steps yields N + 1 tokens per sequence. A speculative
decode step (``memsim.run.speculative``) yields E tokens on average and so advances the context by
E: the N tokens then cost 1/E of the step at their contexts each. Orchestration only: each step
goes through the ordinary pipeline.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from memsim.core import progress
from memsim.report.summary import utilization
from memsim.report.summary_fields import COMBINE, ONCE, SUMMED, Summary
from memsim.report.summary_records import ABSENT, RECORDS, DecodeSample, EngineCounts, Speculated, present


def sample_contexts(prompt: int, steps: int, samples: int) -> list[int]:
    """Contexts of the decode steps to simulate: all of them, or ``samples`` spread evenly."""
    last = prompt + steps - 1
    if steps <= samples:
        return list(range(prompt, last + 1))
    return sorted({round(c) for c in np.linspace(prompt, last, max(2, samples))})


def _sum_interpolated(samples: dict[int, Any], contexts: np.ndarray, key_path: tuple = ()) -> Any:
    # The samples may differ in keys (a later step spills its KV cache to a level an earlier one
    # never touched): a key a sample lacks is 0 there, and its kind comes from one that has it.
    found = {c: _find(s, key_path) for c, s in samples.items()}
    node = next(n for n in found.values() if n is not None)
    if isinstance(node, RECORDS):  # a record (``Traffic``, ``Energy``): field by field, into the same record
        return dataclasses.replace(node, **{name: _sum_interpolated(samples, contexts, (*key_path, name))
                                            for name in present(node)})
    if isinstance(node, dict):
        keys = set().union(*(n for n in found.values() if isinstance(n, dict)))
        return {k: _sum_interpolated(samples, contexts, (*key_path, k)) for k in sorted(keys)}
    xs = np.array(sorted(samples), dtype=float)
    ys = np.array([found[c] or 0 for c in sorted(samples)], dtype=float)
    total = float(np.interp(contexts, xs, ys).sum())
    return round(total) if isinstance(node, int) else total


def _find(summary: Any, key_path: tuple) -> Any:
    """The value at ``key_path`` of a summary (its records' fields, its mappings' keys), or None where the summary lacks it."""
    for k in key_path:
        if isinstance(summary, (Summary, *RECORDS)):
            summary = getattr(summary, k, ABSENT)
            if summary is ABSENT:
                return None
        elif isinstance(summary, dict) and k in summary:
            summary = summary[k]
        else:
            return None
    return summary


def add(a: Any, b: Any) -> Any:
    """Two additive summary values (numbers, records or mappings of them; a missing mapping is 0) added."""
    if isinstance(a, RECORDS) or isinstance(b, RECORDS):  # one of them may be a mapping's missing entry (0)
        if not isinstance(a, RECORDS) or not isinstance(b, RECORDS):
            return a if isinstance(a, RECORDS) else b
        return dataclasses.replace(a, **{k: add(v, getattr(b, k)) for k, v in present(a).items()})
    if isinstance(a, dict) or isinstance(b, dict):
        a, b = a or {}, b or {}
        return {k: add(a.get(k, 0), b.get(k, 0)) for k in sorted(set(a) | set(b))}
    return a + b


def interpolated_sums(samples: dict[int, Summary], contexts: np.ndarray) -> dict[str, Any]:
    """The SUMMED fields (``COMBINE``) of steps at every one of ``contexts``, each interpolated linearly
    between the ``samples`` simulated (keyed by context) and added up."""
    keys = dict.fromkeys(k for s in samples.values() for k in present(s))  # every sample's, in declared order
    return {k: _sum_interpolated(samples, contexts, (k,)) for k in keys if COMBINE[k] == SUMMED}


def per_token(step: Summary) -> Summary:
    """A decode step's summary per token it yields: an ordinary step yields one token per sequence,
    a speculative one ``speculative.tokens_per_step`` on average, so each of them costs that share
    of its SUMMED fields (``memsim.run.speculative``)."""
    tokens = 1 if step.speculative is ABSENT else step.speculative.tokens_per_step
    return step if tokens == 1 else dataclasses.replace(
        step, **{k: scaled(v, 1 / tokens) for k, v in present(step).items() if COMBINE[k] == SUMMED})


def scaled(value: Any, factor: float) -> Any:
    """An additive summary value (a number, a record or a mapping of them) times ``factor``; counts stay whole."""
    if isinstance(value, RECORDS):
        return dataclasses.replace(value, **{k: scaled(v, factor) for k, v in present(value).items()})
    if isinstance(value, dict):
        return {k: scaled(v, factor) for k, v in value.items()}
    return round(value * factor) if isinstance(value, int) else value * factor


def recomputed(out: dict[str, Any], runs: list[Summary], tokens: float) -> dict[str, Any]:
    """The RECOMPUTED fields from ``out``, the combined fields of steps run one after another
    (``runs``: the summaries of the steps simulated), that yield ``tokens`` tokens in all."""
    total = out["step_time_s"]
    peak = next((r.flops_total / (r.compute_utilization * r.step_time_s) for r in runs if r.compute_utilization), 0.0)
    stalls = out["stall_s"]
    top = max(stalls, key=stalls.__getitem__) if stalls else "compute"
    joules = out["energy_j"].total
    return {
        "step_over_roofline": total / out["roofline_s"] if out["roofline_s"] else None,
        "compute_utilization": out["flops_total"] / (total * peak) if peak and total else 0.0,
        "utilization": utilization(out["per_chip"], total),
        "dominant_stall": top if out["compute_busy_s"] < total / 2 else "compute",
        "engine": EngineCounts(**{k: sum(getattr(r.engine, k) for r in runs) for k in present(runs[0].engine)}),
        "avg_power_w": joules / total if total else 0.0,
        "peak_power_w": max(r.peak_power_w for r in runs),
        "chip_power_w": max(r.chip_power_w for r in runs),
        "clock": min(r.clock for r in runs),
        "clock_mhz": None if runs[0].clock_mhz is None else min(r.clock_mhz or 0.0 for r in runs),
        "power_limited": any(r.power_limited for r in runs),
        **_unmet(runs),
        "power_window_s": max(r.power_window_s for r in runs),
        "energy_per_token_j": joules / tokens if tokens else None,
    }


def _unmet(runs: list[Summary]) -> dict[str, float]:
    """``power_cap_unmet_w`` where any step's cap was not held: the most of any step's."""
    over = [r.power_cap_unmet_w for r in runs if r.power_cap_unmet_w is not ABSENT]
    return {"power_cap_unmet_w": max(over)} if over else {}


def combine(prefill: Summary, decodes: dict[int, Summary], prompt: int, steps: int) -> Summary:
    """The generation summary: prefill plus every decode step (interpolated between samples),
    each field combined by its rule in ``COMBINE``. A speculative decode step yields several
    tokens: the ``steps`` tokens then cost its share per token at their contexts."""
    contexts = np.arange(prompt, prompt + steps, dtype=float)
    decoded = interpolated_sums({c: per_token(d) for c, d in decodes.items()}, contexts)
    out: dict[str, Any] = {}
    for key, value in present(prefill).items():  # the recomputed fields are filled in below
        if key in decoded:
            out[key] = add(value, decoded[key])
        elif COMBINE[key] == ONCE:
            out[key] = value
    decode_s, total = decoded["step_time_s"], out["step_time_s"]
    out["workload"] = dataclasses.replace(prefill.workload, phase="generate", prompt=prompt, generate=steps)
    widest = max(decodes.values(), key=lambda d: d.roofline_s)
    out["roofline_bound"] = prefill.roofline_bound if prefill.roofline_s >= decoded["roofline_s"] \
        else widest.roofline_bound
    batch = prefill.workload.batch or 0
    # every generated token, the prefill's first included
    out.update(recomputed(out, [prefill, *decodes.values()], batch * (steps + 1)))
    out.update({
        "ttft_s": prefill.step_time_s,
        "tpot_s": decode_s / steps,
        "total_s": total,
        "tokens_per_s": batch * (steps + 1) / total,
        "decode_samples": [DecodeSample(context=c, step_time_s=d.step_time_s) for c, d in sorted(decodes.items())],
    })
    first = decodes[min(decodes)]
    if first.speculative is not ABSENT:
        out["speculative"] = _speculative(decodes, contexts, out["tpot_s"])
    return Summary(**out)


def _speculative(decodes: dict[int, Summary], contexts: np.ndarray, tpot_s: float) -> Speculated:
    """A speculative generation's step times, averaged over its tokens' contexts, and its time per token."""
    xs = sorted(decodes)
    mean = lambda key: float(np.interp(contexts, xs, [getattr(decodes[c].speculative, key) for c in xs]).mean())
    return dataclasses.replace(decodes[xs[0]].speculative, draft_step_s=mean("draft_step_s"),
                               verify_step_s=mean("verify_step_s"), step_s=mean("step_s"), time_per_token_s=tpot_s,
                               tokens_per_s_per_sequence=1 / tpot_s if tpot_s else 0.0,
                               tokens_per_s=(decodes[xs[0]].workload.batch or 0) / tpot_s if tpot_s else 0.0)


def generate(run_step: Callable[[str, int], Any], prompt: int, steps: int,
             samples: int) -> tuple[Any, Summary, dict[int, Any]]:
    """Run the prefill and the sampled decode steps; returns (prefill result, summary, decode results by context)."""
    contexts = sample_contexts(prompt, steps, samples)
    with progress.bar(1 + len(contexts), "step", "generation's steps") as shown:
        prefill = run_step("prefill", prompt)
        shown.update()
        decodes = {}
        for c in contexts:
            decodes[c] = run_step("decode", c)
            shown.update()
    summary = combine(prefill.summary, {c: r.summary for c, r in decodes.items()}, prompt, steps)
    return prefill, summary, decodes
