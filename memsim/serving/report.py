"""What a serving run reports: ``serve.json``'s summary (latency percentiles, goodput under the SLOs, KV
use, preemptions and swaps, energy), the console lines, and the three files it writes."""
from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from memsim.core.atomic import atomic_write_text, check_apart, check_writable_parent, folder_entries
from memsim.core.errors import ConfigError, run_field
from memsim.report.output import REPORT
from memsim.report.serve_plots import FIGURES
from memsim.serving.summary import ServeSummary, Slo

PERCENTILES = (50, 90, 99)
FILES = ("requests.csv", "steps.csv", "serve.json")


def summarize(reqs: pd.DataFrame, steps: pd.DataFrame, *, blocks: int, slo: Slo, gaps: np.ndarray | None = None,
              other_energy_j: float = 0.0) -> dict[str, Any]:
    """The run's figures from its measured requests and the steps from their first arrival on, as
    ``ServeSummary``'s keywords (``kv``: those of ``KvUse`` the tables give; ``blocks``: one instance's KV
    cache; ``gaps``: the seconds between consecutive output tokens of the measured requests;
    ``other_energy_j``: energy spent outside the steps, as KV caches
    handed between instances, in every energy figure)."""
    first = float(reqs.arrival_s.min())
    span = float(reqs.e2e_s.add(reqs.arrival_s).max() - first)
    busy = float((steps.end_s - steps.start_s).sum()) if len(steps) else 0.0
    tokens = int(reqs.output_tokens.sum())
    good = reqs[(reqs.ttft_s <= slo.ttft_s) & (reqs.tpot_s <= slo.tpot_s)]
    area = float(((steps.end_s - steps.start_s) * steps.kv_blocks_used).sum()) if len(steps) else 0.0
    gaps = np.zeros(1) if gaps is None or not len(gaps) else gaps
    pct = {f"{col}_p{p}": float(np.percentile(values, p))
           for col, values in (("ttft_s", reqs.ttft_s), ("tpot_s", reqs.tpot_s), ("itl_s", gaps),
                               ("e2e_s", reqs.e2e_s), ("queue_s", reqs.queue_s)) for p in PERCENTILES}
    energy = (float(steps["energy_j"].sum()) if "energy_j" in steps else 0.0) + other_energy_j
    window = float(reqs.arrival_s.max()) - first

    def per_s(n: float) -> float:
        return n / span if span else 0.0

    return {"requests": len(reqs), "span_s": span, "requests_per_s": per_s(len(reqs)),
            "offered_requests_per_s": (len(reqs) - 1) / window if window else 0.0,
            "output_tokens_per_s": per_s(tokens), **pct,
            "ttft_s_mean": float(reqs.ttft_s.mean()), "tpot_s_mean": float(reqs.tpot_s.mean()),
            "e2e_s_mean": float(reqs.e2e_s.mean()), "itl_s_mean": float(gaps.mean()),
            "goodput_requests_per_s": per_s(len(good)),
            "slo": slo, "busy_fraction": busy / span if span else 0.0,
            "preemptions": int(reqs.preemptions.sum()),
            "swapped_blocks": int(steps.swapped_blocks.sum()) if len(steps) else 0,
            "kv": {"blocks": blocks, "mean_utilization": area / busy / blocks if busy else 0.0,
                   "peak_blocks": int(steps.kv_blocks_used.max()) if len(steps) else 0},
            "energy_j": energy, "energy_per_token_j": energy / tokens if tokens else 0.0,
            "avg_power_w": per_s(energy), "steps": len(steps)}


def served_rate(ends: pd.Series, start: float, stop: float) -> float:
    """Requests finished a second from ``start`` to ``stop`` (``ends``: every request's finish, warm-up's
    included: the deployment's pace while requests arrive); 0 for an empty window."""
    return float(((ends >= start) & (ends <= stop)).sum() / (stop - start)) if stop > start else 0.0


def check_out(out: Path, inputs: Iterable[Path] = (), own: tuple[str, ...] = (*FILES, *FIGURES, REPORT),
              noun: str = "serving run") -> None:
    """Refuse an ``--out`` that holds anything a ``noun`` does not write (``own``: what it does), or one of
    the run's ``inputs`` (its request trace, chip, model or stack file); nothing is created."""
    foreign = [name for name in folder_entries(Path(out), run_field("out")) if name not in own]
    if foreign:
        raise ConfigError(f"holds {foreign[0]!r}, which no {noun} writes: give a new or empty folder",
                          file=str(out), field=run_field("out"))
    check_apart(Path(out), run_field("out"), inputs, "folder")
    check_writable_parent(Path(out).absolute(), run_field("out"))


def write(requests: pd.DataFrame, steps: pd.DataFrame, summary: ServeSummary, out: Path,
          inputs: Iterable[Path] = ()) -> list[Path]:
    """The three files into ``out``, never over one of the run's ``inputs``."""
    out = Path(out)
    check_out(out, inputs)
    out.mkdir(parents=True, exist_ok=True)
    for name in (*FIGURES, REPORT):  # an earlier run's figures and page: stale beside the new tables
        if (out / name).is_file() and not (out / name).is_symlink():
            (out / name).unlink()
    paths = [out / name for name in FILES]
    atomic_write_text(paths[0], requests.to_csv(index=False))
    atomic_write_text(paths[1], steps.to_csv(index=False))
    atomic_write_text(paths[2], json.dumps(summary.as_dict(), indent=2) + "\n")
    return paths


# Finishing below this share of the offered rate while requests arrive, a deployment is falling behind.
BEHIND = 0.9


def _behind(s: ServeSummary) -> str:
    if s.served_requests_per_s < BEHIND * s.offered_requests_per_s:
        return " (falling behind: its queue grows)"
    return ""


def _rounds(steps: int) -> str:
    return f"{steps} decode steps a scheduling round" if steps > 1 else "scheduled every step"


def step_words(shape: str) -> str:
    """A step's shape (``steps.csv``'s ``shape``: ``decode 2 524``) in words."""
    kind, *n = shape.split()
    size = [int(x) for x in n if x.lstrip("-").isdigit()]
    if kind == "decode" and len(size) == 2:
        return f"a decode of {size[0]} sequence{'s' * (size[0] != 1)} at context {size[1]:,}"
    if kind == "prefill" and len(size) == 2:
        return f"a prefill of {size[0]} sequence{'s' * (size[0] != 1)} of {size[1]:,} tokens"
    if kind == "mixed" and len(size) == 5:
        tokens, decodes, _, _, chunks = size
        return (f"a mixed step of {decodes} decode{'s' * (decodes != 1)} and {chunks} prefill chunk"
                f"{'s' * (chunks != 1)} ({tokens:,} tokens)")
    return shape


def header(spec: Any, s: ServeSummary) -> list[str]:
    """What was served, on what, against which SLOs: the console's first lines, as ``memsim run``'s
    header names its chip, model and workload (``spec``: the run's ``ServeSpec``)."""
    d = s.deployment
    first = (f"{d.hw}  {d.model}  serve  {d.layout}; weights {spec.weight_dtype}, KV cache {spec.kv_dtype}; "
             f"scheduler {s.scheduler}, stack {d.stack}")
    if spec.requests is not None:
        asked = f"{s.requests} from {spec.requests}"
    else:
        process = f"poisson at {spec.rate:g}/s" if spec.arrival == "poisson" else \
            f"gamma at {spec.rate:g}/s (burstiness {spec.burstiness:g})"
        if spec.users:
            process = f"{spec.users} clients in a closed loop (think {spec.think:g} s)"
        shape = "fixed" if spec.lengths == "fixed" else f"{spec.lengths}, spread {spec.spread:g}"
        shared = f", a {spec.prefix}-token shared prefix" if spec.prefix else ""
        if spec.users and (spec.ramp or spec.think_dist != "fixed"):
            process = (f"{spec.users} clients in a closed loop (think {spec.think_dist} {spec.think:g} s, starts over "
                       f"{spec.ramp:g} s)")
        drawn = f"{s.requests + s.warmup_requests} drawn" + (f" in {spec.duration:g} s" if spec.duration else "")
        asked = (f"{drawn}: {process}; prompt {spec.prompt} and output {spec.output_tokens} tokens "
                 f"({shape}){shared}; seed {spec.seed}")
    if s.warmup_requests:
        asked += f"; the first {s.warmup_s:g} s a warm-up ({s.warmup_requests} requests, not measured)"
    return [first, f"  requests         {asked}",
            f"  SLOs             TTFT {s.slo.ttft_s:g} s, TPOT {s.slo.tpot_s:g} s (goodput counts the requests "
            "within both)"]


def summary_table(s: ServeSummary, spec: Any = None) -> str:
    """The console lines of a serving run (with its ``spec``, the header first)."""
    kv = s.kv
    lines = [*(header(spec, s) if spec is not None else []),
             f"served {s.requests} requests in {s.span_s:.4g} s: {s.requests_per_s:.4g} req/s, "
             f"{s.output_tokens_per_s:.4g} output tokens/s ({s.scheduler}; {s.deployment.layout})",
             f"  rate             offered {s.offered_requests_per_s:.4g} req/s; finished {s.served_requests_per_s:.4g} "
             f"req/s while requests arrived{_behind(s)}"]
    for name, key in (("TTFT", "ttft_s"), ("TPOT", "tpot_s"), ("ITL", "itl_s"), ("E2E", "e2e_s"), ("queue", "queue_s")):
        p50, p90, p99 = (getattr(s, f"{key}_p{p}") * 1e3 for p in PERCENTILES)
        lines.append(f"  {name:<6} ms   p50 {p50:10.4g}   p90 {p90:10.4g}   p99 {p99:10.4g}")
    lines.append(f"  goodput          {s.goodput_requests_per_s:.4g} req/s within TTFT {s.slo.ttft_s:g} s "
                 f"and TPOT {s.slo.tpot_s:g} s")
    swaps = f", {s.swapped_blocks:,} blocks swapped" if s.swapped_blocks else ""
    lines.append(f"  KV cache         {kv.blocks:,} blocks of {kv.block_tokens} tokens in "
                 f"{', '.join(kv.levels)} (an instance); mean use {kv.mean_utilization:.1%}, peak "
                 f"{kv.peak_blocks:,}; {s.preemptions} preemptions{swaps}")
    lines.append(f"  energy           {s.energy_per_token_j:.4g} J/token, {s.avg_power_w:.4g} W while serving")
    host = s.host
    lines.append(f"  stack            {s.deployment.stack}: its host added {host.busy_s:.4g} s of "
                 f"{s.busy_fraction * s.span_s:.4g} s busy ({host.busy_fraction:.1%}; overlap "
                 f"{host.overlap}, {_rounds(host.multi_step)}, front end {host.frontend_s * 1e3:.3g} ms a request)")
    if s.limit is not None:
        lim = s.limit
        lines.append(f"  limited by       {lim.by} (KV cache full {lim.kv_full_fraction:.0%} of the busy time; "
                     f"the commonest step, {step_words(lim.step)}, bound by {lim.step_bound})")
    sur = s.surrogate
    lines.append(f"  step times       {sur.grid_steps} steps simulated; interpolation error on {sur.sampled} "
                 f"sampled steps: max {sur.max_error:.2%}")
    return "\n".join(lines)
