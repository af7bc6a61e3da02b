"""Figures of one serving run (matplotlib, the ``plot`` extra), read back from its output folder
(requests.csv, steps.csv, serve.json): the latency CDFs (time to first token, time per output
token, end to end) with their SLOs and percentiles, the KV cache's occupancy over time with the
waiting queue, and the batch each step computed.

The drawing functions take the tables and the summary as ``memsim.serve`` returns them
(``ServeResult.requests``, ``.steps``, ``.summary``), so a notebook can draw without a folder.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from memsim.core.errors import ConfigError
from memsim.core.files import check_file, load_json
from memsim.report.readback import as_numbers, read_table
from memsim.report.run_plots import pyplot, save_figure
from memsim.report.thin import BINS, binned_mean, held_slices, m4

FIGURES = ("serve-latency.png", "serve-kv.png", "serve-batch.png")  # what ``memsim plot serve`` writes
FILES = ("requests.csv", "steps.csv", "serve.json")  # what it reads
LATENCIES = (("ttft_s", "time to first token", "TTFT"), ("tpot_s", "time per output token", "TPOT"),
             ("e2e_s", "end to end", "E2E"))
REQUESTS_READ = tuple(col for col, _, _ in LATENCIES)
STEPS_READ = ("start_s", "end_s", "kv_blocks_used", "running", "waiting")
SPLIT = ("prefills", "decodes")  # the batch is drawn split where steps.csv has both
PERCENTILES = (50, 90, 99)
SPLIT_COLORS = {"prefills": "#ff7f0e", "decodes": "#1f77b4"}


def cdf(values: Iterable[float]) -> tuple[np.ndarray, np.ndarray]:
    """The empirical CDF of ``values`` (missing ones left out): the values sorted, and the fraction
    of them at or below each, rising to 1."""
    x = np.sort(pd.to_numeric(pd.Series(list(values), dtype=object), errors="coerce").dropna().to_numpy(float))
    return x, np.arange(1, len(x) + 1) / max(len(x), 1)


def step_series(start: Iterable[float], end: Iterable[float], values: Iterable[float],
                idle: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Points that draw each step's value flat from its start to its end. Between steps where the
    engine was idle, the value is held (``idle`` None: a state such as the blocks in use) or is
    ``idle`` (work done in the step, such as its batch)."""
    s, e, v = (np.asarray(list(a), dtype=float) for a in (start, end, values))
    after = np.append(s[1:], e[-1:]) if len(s) else s  # where the next step starts
    gap = v if idle is None else np.where(after > e, idle, v)
    x = np.column_stack([s, e, e, after]).ravel()
    return x, np.column_stack([v, v, gap, gap]).ravel()


def occupancy(steps: pd.DataFrame, blocks: int) -> pd.Series:
    """The fraction of the KV cache's ``blocks`` each step left in use."""
    return steps["kv_blocks_used"] / blocks


def _get(summary: dict[str, Any], group: str, key: str) -> Any:
    """``summary[group][key]``, or None where either is missing."""
    inner = summary.get(group)
    return inner.get(key) if isinstance(inner, dict) else None


def check_summary(summary: Any, file: str) -> dict[str, Any]:
    """serve.json, checked for what the figures read: ``kv.blocks`` (a whole number above 0), and
    ``kv.block_tokens``, ``slo.ttft_s`` and ``slo.tpot_s`` where given (numbers above 0)."""
    if not isinstance(summary, dict):
        raise ConfigError("not a memsim serving summary: not a JSON object", file=file)
    blocks = _get(summary, "kv", "blocks")
    if blocks is None:
        raise ConfigError("missing: not a memsim serving summary", file=file, field="kv.blocks")
    checks = [("kv.blocks", blocks, True), ("kv.block_tokens", _get(summary, "kv", "block_tokens"), True),
              ("slo.ttft_s", _get(summary, "slo", "ttft_s"), False), ("slo.tpot_s", _get(summary, "slo", "tpot_s"), False)]
    for field, value, whole in checks:
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0 \
                or (whole and value != int(value)):
            kind = "a whole number" if whole else "a number"
            raise ConfigError(f"{str(value)[:40]!r} is not {kind} above 0", file=file, field=field)
    return summary


def _unit(values: np.ndarray) -> tuple[float, str]:
    """A scale and unit that put the median of ``values`` (seconds) between 1 and 1000."""
    mid = float(np.median(values)) if len(values) else 1.0
    return (1e6, "µs") if mid < 1e-3 else (1e3, "ms") if mid < 1 else (1.0, "s")


def _human(seconds: float) -> str:
    scale, unit = _unit(np.array([seconds]))
    return f"{seconds * scale:.3g} {unit}"


def _panel(ax: Any, values: pd.Series, title: str, short: str, slo: float | None) -> None:
    x, y = cdf(values)
    scale, unit = _unit(x)
    shown = [*x[:1], *x[-1:], *([slo] if slo else [])]
    log = len(x) > 1 and min(shown) > 0 and max(shown) / min(shown) >= 10
    if len(x):
        drawn = np.unique(np.linspace(0, len(x) - 1, 4 * BINS).astype(np.int64))  # thinned by fraction: every step of 1/(4 BINS)
        ax.step(np.r_[x[:1], x[drawn]] * scale, np.r_[0.0, y[drawn]], where="post", color="#1f77b4", lw=1.5, label="CDF")
        marks = np.percentile(x, PERCENTILES)
        ax.plot(marks * scale, np.array(PERCENTILES) / 100, "o", color="k", ms=4, label="p50, p90, p99")
        for p, value in zip(PERCENTILES, marks):
            ax.annotate(f"p{p} {value * scale:.3g} {unit}", (value * scale, p / 100), xytext=(-4, 2),
                        textcoords="offset points", ha="right", va="bottom", fontsize=7)
    if slo:
        met = float(np.mean(x <= slo)) if len(x) else 0.0
        ax.axvline(slo * scale, color="#d62728", ls="--", lw=1.2, label="SLO")
        ax.annotate(f"SLO {_human(slo)}: {met:.1%} meet it", (slo * scale, 0.02), xytext=(-3, 0),
                    textcoords="offset points", rotation=90, ha="right", va="bottom", fontsize=7, color="#d62728")
    if log:  # plain numbers at 1, 2 and 5 of each decade: a reader should not decode 10^2
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(0, 1.06)
    ax.set_xlabel(f"{short} ({unit}{', log scale' if log else ''})")
    ax.set_title(f"{title} ({len(x)} requests)", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)


def latency_cdfs(requests: pd.DataFrame, summary: dict[str, Any], path: Path) -> Path:
    """Three panels: the empirical CDF of each request's TTFT, TPOT and end-to-end latency, with
    p50, p90 and p99 marked and the TTFT and TPOT SLOs as dashed lines."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(14, 4), sharey=True)
    for ax, (col, title, short) in zip(axes, LATENCIES):
        _panel(ax, requests[col], title, short, _get(summary, "slo", col) if col != "e2e_s" else None)
    axes[0].set_ylabel("fraction of requests")
    handles, labels = [], []
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    axes[-1].legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1))
    scheduler = summary.get("scheduler")
    fig.suptitle("request latency" + (f" ({scheduler} scheduler)" if scheduler else ""), fontsize=11)
    fig.tight_layout()
    return save_figure(fig, path)


def instances(steps: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The steps of each instance (label, rows) where steps.csv has an ``instance`` column with more
    than one, since their steps overlap in time; else the steps whole, unlabelled."""
    if "instance" not in steps.columns or steps["instance"].nunique() < 2:
        return [("", steps)]
    return [(f"instance {key}", part) for key, part in steps.groupby("instance", sort=True)]


def kv_occupancy(steps: pd.DataFrame, summary: dict[str, Any], path: Path) -> Path:
    """The share of the KV cache's blocks (``kv.blocks``: one instance's) in use over time, each step's
    value from its start to its end, held while the engine idles, and below it the requests waiting
    to be admitted; one line per instance where steps.csv has several."""
    plt = pyplot()
    blocks = int(summary["kv"]["blocks"])
    fraction = occupancy(steps, blocks)
    fig, (ax_kv, ax_q) = plt.subplots(2, 1, figsize=(11, 5), sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    groups = instances(steps)
    for i, (label, part) in enumerate(groups):
        color = "#9467bd" if len(groups) == 1 else f"C{i}"
        x, y = _held(ax_kv, part, occupancy(part, blocks) * 100, color, f"KV blocks in use {label}".strip())
        if len(groups) == 1:
            ax_kv.fill_between(x, 0, y, color=color, alpha=0.35, lw=0)
        _held(ax_q, part, part["waiting"], "#d62728" if len(groups) == 1 else f"C{i}", f"waiting {label}".strip())
    peak = float(fraction.max())
    ax_kv.axhline(peak * 100, color="0.4", ls=":", lw=1, label=f"peak {peak:.1%}")
    if peak > 0.5:
        ax_kv.axhline(100, color="k", ls="--", lw=1, label="capacity")
    ax_kv.set_ylim(0, 105 if peak > 0.5 else max(peak * 120, 1e-3))
    ax_kv.set_ylabel("KV cache used (%)")
    ax_q.set_ylim(0, max(float(steps["waiting"].max()) * 1.15, 1))
    ax_q.set_ylabel("requests waiting")
    ax_q.set_xlabel("time (s)")
    for ax in (ax_kv, ax_q):
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
        ax.grid(True, alpha=0.3)
    span = steps["end_s"] - steps["start_s"]
    mean = float((span * fraction).sum() / span.sum()) if span.sum() > 0 else float(fraction.mean())
    block_tokens = _get(summary, "kv", "block_tokens")
    size = f"{blocks:,} blocks" + (f" of {int(block_tokens)} tokens" if block_tokens else "")
    ax_kv.set_title(f"KV cache: {size}; {mean:.1%} used on average while busy, peak {peak:.1%}", fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path)


def _held(ax: Any, steps: pd.DataFrame, values: pd.Series, color: str, label: str) -> tuple[np.ndarray, np.ndarray]:
    """A state each step leaves until the next, drawn step by step where there are few steps; where there are
    more than ``BINS``, as each slice's mean over time with the range the steps in it took shaded, so that a
    value that flickers between two levels shows its mean, not a solid band between them."""
    if len(steps) <= BINS:
        x, y = step_series(steps["start_s"], steps["end_s"], values)
        ax.plot(x, y, color=color, lw=1, label=label)
        return x, y
    x, mean, low, high = held_slices(steps["start_s"].to_numpy(), values.to_numpy(), float(steps["end_s"].max()))
    ax.fill_between(x, low, high, color=color, alpha=0.15, lw=0, label=f"{label}: range within a slice")
    ax.plot(x, mean, color=color, lw=1, label=f"{label}: mean of each of {BINS:,} slices")
    return x, mean


def batch_sizes(steps: pd.DataFrame, path: Path) -> Path:
    """The sequences each step computed (prefills and decodes stacked, where steps.csv has both;
    one line per instance where it has several), and the sequences admitted (holding KV blocks)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(11, 4))
    split = all(col in steps.columns for col in SPLIT)
    groups = instances(steps)
    for i, (label, part) in enumerate(groups):
        start, end = part["start_s"], part["end_s"]
        if split and len(groups) == 1:
            many = len(part) > BINS  # thinned: each slice's mean over time, on shared slices
            edges = np.linspace(float(start.min()), float(end.max()), BINS + 1)
            low = np.zeros(BINS if many else 4 * len(part))
            for col in SPLIT:
                x, y = (((edges[:-1] + edges[1:]) / 2,
                         binned_mean(start.to_numpy(), end.to_numpy(), part[col].to_numpy(), edges)) if many
                        else step_series(start, end, part[col], idle=0.0))
                ax.fill_between(x, low, low + y, color=SPLIT_COLORS[col], alpha=0.6, lw=0,
                                label=f"{col} in the step" + (f" (mean over {BINS:,} slices)" if many else ""))
                low = low + y
        elif split:
            x, y = m4(*step_series(start, end, part["prefills"] + part["decodes"], idle=0.0))
            ax.plot(x, y, color=f"C{i}", lw=0.8, alpha=0.7, label=f"in the step, {label}")
        x, y = m4(*step_series(start, end, part["running"]))
        ax.plot(x, y, color="k" if len(groups) == 1 else f"C{i}", lw=1, label=f"admitted {label}".strip())
    computed = steps["prefills"] + steps["decodes"] if split else steps["running"]
    what = "sequences per step" if split else "sequences admitted"
    ax.set_ylim(0, max(float(steps["running"].max()), float(computed.max()), 1) * 1.1)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("sequences")
    ax.set_title(f"batch: mean {computed.mean():.1f}, max {int(computed.max())} {what} ({len(steps):,} steps); "
                 "admitted: holding KV blocks", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, path)


def read_serve(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """A serving run's requests, steps and summary, read back from its folder and checked: a missing
    file, a missing column or a bad value is an error naming the file and the field."""
    folder = Path(folder)
    for name in FILES:
        if not (folder / name).exists():
            raise ConfigError("file not found: not a memsim serving folder", file=str(folder / name))
        check_file(folder / name)
    requests = read_table(folder / "requests.csv", "serving requests table", REQUESTS_READ, REQUESTS_READ, ())
    steps = read_table(folder / "steps.csv", "serving steps table", STEPS_READ, STEPS_READ, (*SPLIT, "instance"))
    steps = as_numbers(steps, [col for col in SPLIT if col in steps.columns], str(folder / "steps.csv"))
    summary = check_summary(load_json(folder / "serve.json"), str(folder / "serve.json"))
    return requests, steps, summary


def plot_serve(folder: Path, output: Path | None = None) -> list[Path]:
    """The figures of a serving run's folder (``FIGURES``), written to ``output`` (default: the
    folder); its files are checked before anything is drawn."""
    requests, steps, summary = read_serve(Path(folder))
    where = Path(output) if output is not None else Path(folder)
    where.mkdir(parents=True, exist_ok=True)
    latency_png, kv_png, batch_png = (where / name for name in FIGURES)
    return [latency_cdfs(requests, summary, latency_png), kv_occupancy(steps, summary, kv_png),
            batch_sizes(steps, batch_png)]
