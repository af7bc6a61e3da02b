"""Generation: a prefill, then N decode steps with the KV cache growing one token a step.

Decode steps differ only in their context length, and a step's metrics change smoothly
with it (KV traffic and attention work grow linearly). So a few steps spread evenly over
the context range are simulated and every additive metric (times, bytes, FLOPs, stalls) is
interpolated linearly in between and summed over all N steps. With ``samples >= N`` every
step is simulated. How each summary key combines (summed, taken once, recomputed) is declared
in ``memsim.report.summary.COMBINE``. The prefill produces the first token and each decode
step one more, so a generation of N steps yields N + 1 tokens per sequence. Orchestration
only: each step goes through the ordinary pipeline.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from memsim.report.summary import COMBINE, ONCE, SUMMED


def sample_contexts(prompt: int, steps: int, samples: int) -> list[int]:
    """Contexts of the decode steps to simulate: all of them, or ``samples`` spread evenly."""
    last = prompt + steps - 1
    if steps <= samples:
        return list(range(prompt, last + 1))
    return sorted({int(round(c)) for c in np.linspace(prompt, last, max(2, samples))})


def _sum_interpolated(samples: dict[int, dict], contexts: np.ndarray, key_path: tuple = ()) -> Any:
    first = next(iter(samples.values()))
    node = first
    for k in key_path:
        node = node[k]
    if isinstance(node, dict):
        keys = set().union(*(_at(s, key_path).keys() for s in samples.values()))
        return {k: _sum_interpolated(samples, contexts, (*key_path, k)) for k in sorted(keys)}
    xs = np.array(sorted(samples), dtype=float)
    ys = np.array([_at(samples[c], key_path) or 0 for c in sorted(samples)], dtype=float)
    total = float(np.interp(contexts, xs, ys).sum())
    return int(round(total)) if isinstance(node, int) else total


def _at(summary: dict, key_path: tuple) -> Any:
    for k in key_path:
        summary = summary.get(k, 0) if isinstance(summary, dict) else 0
    return summary


def _add(a: Any, b: Any) -> Any:
    if isinstance(a, dict):
        return {k: _add(a.get(k, 0), b.get(k, 0)) for k in sorted(set(a) | set(b))}
    return a + b


def combine(prefill: dict, decodes: dict[int, dict], prompt: int, steps: int) -> dict[str, Any]:
    """The generation summary: prefill plus every decode step (interpolated between samples),
    each key combined by its rule in ``COMBINE``."""
    unknown = [k for k in prefill if k not in COMBINE]
    if unknown:
        raise KeyError(f"summary keys without a combine rule (report.summary.COMBINE): {unknown}")
    contexts = np.arange(prompt, prompt + steps, dtype=float)
    decoded = {k: _sum_interpolated(decodes, contexts, (k,)) for k in prefill if COMBINE[k] == SUMMED}
    out: dict[str, Any] = {}
    for key in prefill:  # the recomputed keys keep their place, filled in below
        if key in decoded:
            out[key] = _add(prefill[key], decoded[key])
        else:
            out[key] = prefill[key] if COMBINE[key] == ONCE else None
    decode_s, total = decoded["step_time_s"], out["step_time_s"]
    out["workload"] = {**prefill["workload"], "phase": "generate", "prompt": prompt, "generate": steps}
    decode_roofline = decoded["roofline_s"]
    widest = max(decodes.values(), key=lambda d: d["roofline_s"])
    out["roofline_bound"] = prefill["roofline_bound"] if prefill["roofline_s"] >= decode_roofline \
        else widest["roofline_bound"]
    out["step_over_roofline"] = total / out["roofline_s"] if out["roofline_s"] else None
    peak = prefill["flops_total"] / (prefill["compute_utilization"] * prefill["step_time_s"]) \
        if prefill["compute_utilization"] else 0.0
    out["compute_utilization"] = out["flops_total"] / (total * peak) if peak and total else 0.0
    stalls = out["stall_s"]
    top = max(stalls, key=stalls.__getitem__) if stalls else "compute"
    out["dominant_stall"] = top if out["compute_busy_s"] < total / 2 else "compute"
    engines = [prefill["engine"], *(d["engine"] for d in decodes.values())]
    out["engine"] = {k: sum(e[k] for e in engines) for k in engines[0]}
    batch = prefill["workload"]["batch"]
    out.update({
        "ttft_s": prefill["step_time_s"],
        "tpot_s": decode_s / steps,
        "total_s": total,
        "tokens_per_s": batch * (steps + 1) / total,  # every generated token, the prefill's first included
        "decode_samples": [{"context": c, "step_time_s": d["step_time_s"]} for c, d in sorted(decodes.items())],
    })
    joules = out["energy_j"]["total"]
    steps_run = [prefill, *decodes.values()]
    out.update({
        "avg_power_w": joules / total if total else 0.0,
        "peak_power_w": max(d["peak_power_w"] for d in steps_run),
        "chip_power_w": max(d["chip_power_w"] for d in steps_run),
        "clock": min(d["clock"] for d in steps_run),
        "clock_mhz": None if prefill["clock_mhz"] is None else min(d["clock_mhz"] for d in steps_run),
        "power_limited": any(d["power_limited"] for d in steps_run),
        "power_window_s": max(d["power_window_s"] for d in steps_run),
        "energy_per_token_j": joules / (batch * (steps + 1)),  # per generated token, as tokens_per_s counts them
    })
    return out


def generate(run_step: Callable[[str, int], Any], prompt: int, steps: int, samples: int) -> tuple[Any, dict, Any]:
    """Run the prefill and the sampled decode steps; returns (prefill result, summary, first decode result)."""
    prefill = run_step("prefill", prompt)
    decodes = {c: run_step("decode", c) for c in sample_contexts(prompt, steps, samples)}
    summary = combine(prefill.summary, {c: r.summary for c, r in decodes.items()}, prompt, steps)
    return prefill, summary, decodes[min(decodes)]
