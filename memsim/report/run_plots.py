"""Figures of one run (matplotlib, the ``plot`` extra), read back from its output folder:
a Gantt chart per resource with stalls coloured by cause (each slice of the run stacked with each
cause's share of it, so a colour's area is its time, and memory and link rows as utilisation), a roofline chart of every operator,
the stall breakdown per layer, and the run's energy split into compute, levels, links and static.

Colours come from :func:`colours`, one fixed qualitative palette shared by every figure: compute,
transfers and each stall cause get their own colour, and labels it does not know (other levels,
links) get further colours chosen deterministically, each far from the ones already taken.
"""
from __future__ import annotations

import colorsys
import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from memsim.core.dtypes import DTYPES
from memsim.core.errors import ConfigError
from memsim.core.files import load_json
from memsim.hardware.kinds import KINDS
from memsim.hardware.loader import load_chip
from memsim.report.ceilings import ceilings, run_dtype
from memsim.report.output import DATA, FIGURES
from memsim.report.readback import as_numbers, read_table
from memsim.report.thin import coverage

# tab10 and tab20b shades: compute green, transfers blue, every stall cause its own hue; a level's
# stalls in its kind's colour (``memsim.hardware.kinds``: levels are named after their kinds in the presets)
FIXED_COLORS = {"compute": "#2ca02c", "transfer": "#1f77b4", **{k.name: k.color for k in KINDS.values() if k.color},
                "tile_buffer": "#d62728", "dequant": "#bcbd22", "overhead": "#7f7f7f",
                "dependency": "#17becf", "bubble": "#c7c7c7", "power": "#393b79", "static": "#252525"}
EXTRA_COLORS = ("#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5",
                "#637939", "#8c6d31", "#843c39", "#7b4173", "#e7ba52", "#6b6ecf", "#b5cf6b", "#de9ed6")
MIN_DISTANCE = 0.2  # in RGB space (0-1 per channel): colours closer than this are hard to tell apart
GANTT_BINS = 1000  # slices of the run across the Gantt chart: about its pixels across at the saved resolution
SHARE_LABEL = 0.15  # a share of a compute row at least this large is written on its bar
TIMELINE_READ = ("start_s", "end_s", "chip", "resource", "kind", "op", "cause", "layer")  # the columns drawn
TIMELINE_OPTIONAL = ("busy_s",)  # read where present: a transfer's busy time, for its row's utilisation


def _rgb(color: str) -> tuple[float, float, float]:
    red, green, blue = (int(color[i:i + 2], 16) / 255 for i in (1, 3, 5))
    return red, green, blue


def _candidates() -> list[str]:
    """Further colours for unknown labels: the spare palette, then hues around the wheel."""
    wheel = [colorsys.hsv_to_rgb((i * 0.618034) % 1, s, v) for s, v in ((0.9, 0.55), (0.5, 0.9)) for i in range(32)]
    return [*EXTRA_COLORS, *("#" + "".join(f"{round(c * 255):02x}" for c in rgb) for rgb in wheel)]


def colours(labels: Iterable[str]) -> dict[str, str]:
    """Label -> ``#rrggbb``: compute, transfers, stall causes and energy parts from the fixed palette;
    other labels, in sorted order, each the first spare colour at least ``MIN_DISTANCE`` from every
    colour taken (or the farthest one when none is), so the result depends only on the set of labels."""
    labels = list(dict.fromkeys(str(label) for label in labels))
    out = {label: FIXED_COLORS[label] for label in labels if label in FIXED_COLORS}
    taken = [_rgb(c) for c in FIXED_COLORS.values()]
    spare = _candidates()
    for label in sorted(set(labels) - set(out)):
        def gap(color: str) -> float:
            rgb = _rgb(color)
            return min(math.dist(rgb, t) for t in taken)
        pick = next((c for c in spare if gap(c) >= MIN_DISTANCE), None) or max(spare, key=gap)
        spare.remove(pick)
        taken.append(_rgb(pick))
        out[label] = pick
    return {label: out[label] for label in labels}


def label_of(kind: str, cause) -> str:
    """What a timeline row is drawn as: its kind, or its stall's cause (a wait on a busy compute
    unit is told apart from computing)."""
    if kind != "stall":
        return kind
    cause = "" if pd.isna(cause) else str(cause)
    if cause in ("", "stall"):
        return "stall"
    return f"stall:{cause}" if cause in ("compute", "transfer") else cause


def pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError("plots need matplotlib (pip install '.[plot]')", field="plot") from None
    return plt


def save_figure(fig, path: Path) -> Path:
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=110)
    tmp.replace(path)
    pyplot().close(fig)
    return path


def timeline_labels(timeline: pd.DataFrame) -> list[str]:
    """The labels a run's timeline is drawn with, in order of first appearance."""
    return list(dict.fromkeys(label_of(k, c) for k, c in zip(timeline["kind"], timeline["cause"])))


def gantt(timeline: pd.DataFrame, path: Path, palette: dict[str, str] | None = None) -> Path:
    return save_figure(gantt_figure(timeline, palette), path)


def track_shares(rows: pd.DataFrame, edges: np.ndarray, labels: list[str]) -> dict[str, np.ndarray]:
    """Each label's share of each slice between ``edges`` on one track: the time its intervals hold of the
    slice (a transfer weighted by the share of its interval the resource was busy, ``busy_s``), so that
    drawn as a height its area is its time, and a memory or link row shows its utilisation."""
    busy = rows["busy_s"] if "busy_s" in rows else pd.Series(float("nan"), index=rows.index)
    long = rows.end_s - rows.start_s
    weight = np.where((rows.kind == "transfer") & busy.notna() & (long > 0), busy / long.where(long > 0, 1), 1.0)
    widths = np.diff(edges)
    out = {}
    for label in labels:
        mine = (rows._label == label).to_numpy()
        if mine.any():
            held = coverage(rows.start_s.to_numpy()[mine], rows.end_s.to_numpy()[mine], edges, weight[mine])
            out[label] = np.clip(held / widths, 0.0, None)
    return out


def gantt_figure(timeline: pd.DataFrame, palette: dict[str, str] | None = None):
    """The Gantt chart: a row per chip and resource, each slice of ``GANTT_BINS`` across the run stacked with
    each label's share of it (compute, each stall cause, transfers: ``track_shares``), so a colour's area is
    the time it took, however short its intervals; beside it, each compute row's shares of the whole run."""
    plt = pyplot()
    tl = timeline.assign(_label=[label_of(k, c) for k, c in zip(timeline["kind"], timeline["cause"])])
    labels = list(dict.fromkeys(tl._label))
    palette = palette or colours(labels)
    tracks = list(dict.fromkeys(zip(tl.chip, tl.resource)))
    t0, t1 = float(tl.start_s.min()), float(tl.end_s.max())
    edges = np.linspace(t0, t1 if t1 > t0 else t0 + 1e-12, GANTT_BINS + 1)
    height = 0.45 * len(tracks) + 1.3
    fig, (ax, bar) = plt.subplots(1, 2, figsize=(14, height), sharey=True,
                                  gridspec_kw={"width_ratios": [12, 1.6], "wspace": 0.04})
    whole: dict[tuple[str, str], dict[str, float]] = {}
    for y, (chip, res) in enumerate(tracks):
        rows = tl[(tl.chip == chip) & (tl.resource == res)]
        low = np.full(GANTT_BINS, y - 0.4)
        for label, share in track_shares(rows, edges, labels).items():
            high = low + 0.8 * np.minimum(share, np.clip(y + 0.4 - low, 0.0, None) / 0.8)  # a row holds at most 1
            ax.stairs(high, edges * 1e3, baseline=low, fill=True, color=palette[label], label=label, lw=0)
            low = high
        if rows.kind.isin(["compute", "stall"]).any():
            spent = (rows.end_s - rows.start_s).groupby(rows._label, sort=False).sum()
            whole[(chip, res)] = (spent / spent.sum()).to_dict() if spent.sum() > 0 else {}
    for y, (chip, res) in enumerate(tracks):
        left = 0.0
        for label, fraction in sorted(whole.get((chip, res), {}).items(), key=lambda kv: -kv[1]):
            bar.barh(y, fraction * 100, left=left, height=0.8, color=palette[label], lw=0)
            if fraction >= SHARE_LABEL:
                bar.text(left + fraction * 50, y, f"{fraction:.0%}", ha="center", va="center", fontsize=7)
            left += fraction * 100
    handles, names = ax.get_legend_handles_labels()
    unique = dict(zip(names, handles))
    bar.legend(unique.values(), unique.keys(), fontsize=8, loc="upper left", bbox_to_anchor=(1.05, 1))
    ax.set_yticks(range(len(tracks)), [f"{c} {r}" for c, r in tracks], fontsize=8)
    ax.set_ylim(-0.6, len(tracks) - 0.4)
    ax.set_xlim(edges[0] * 1e3, edges[-1] * 1e3)
    ax.set_xlabel("time (ms)")
    ax.set_title(f"timeline: each row's share of each of {GANTT_BINS} slices (compute, stalls by cause, transfers "
                 "as utilisation)", fontsize=10)
    bar.set_xlim(0, 100)
    bar.set_xlabel("% of the run")
    bar.set_title("compute rows", fontsize=9)
    fig.subplots_adjust(left=0.12, right=0.86, bottom=0.55 / height, top=1 - 0.4 / height)
    return fig


def roofline(ops: pd.DataFrame, hardware: dict, path: Path, chip=None, dtype: str | None = None) -> Path:
    """Every operator's achieved TFLOP/s against its arithmetic intensity, under the chip's compute
    ceilings (each distinct matrix peak, labelled once, and the vector peak) and its main memory's
    slope, the ridge marked for the dtype the run computed in (``dtype``; default: the highest peak's)."""
    plt = pyplot()
    c = ceilings(chip)
    o = ops[(ops.flops > 0) & (ops.duration_s > 0) & (ops.arithmetic_intensity < float("inf"))].copy()
    o["achieved"] = o.flops / o.duration_s / 1e12
    fig, ax = plt.subplots(figsize=(8, 5))
    for kind, part in o.groupby("op_kind"):
        ax.scatter(part.arithmetic_intensity, part.achieved, s=14, label=kind, zorder=3)
    top = dict(c.compute)[dtype] if dtype else c.compute[0][1]
    ridge, bw = c.ridge(dtype), dict(c.memory)[c.main]
    lo = max(1e-2, min(o.arithmetic_intensity.min() if len(o) else ridge, ridge) / 4)
    hi = max(o.arithmetic_intensity.max() if len(o) else ridge, ridge) * 4
    xs = [lo * (hi / lo) ** (i / 100) for i in range(101)]
    for label, flops in c.distinct():
        run = flops == top  # the run's own ceiling, solid
        ax.plot(xs, [min(flops, x * bw) / 1e12 for x in xs], lw=1.2 if run else 0.8,
                ls="-" if run else "--", color="k" if run else "0.5")
        ax.annotate(f"{label} {flops / 1e12:.4g}", (hi, flops / 1e12), fontsize=7, ha="right", va="bottom")
    ax.plot([ridge], [top / 1e12], "kx", ms=8)
    ax.annotate(f"ridge {ridge:.3g} FLOP/B ({dtype or c.compute[0][0]})", (ridge, top / 1e12), fontsize=8,
                ha="right", va="top", xytext=(-4, -4), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved off chip)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title(f"roofline: {hardware['name']} ({c.main} {bw / 1e12:.3g} TB/s)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, path)


def stalls_per_layer(timeline: pd.DataFrame, path: Path, palette: dict[str, str] | None = None) -> Path:
    plt = pyplot()
    st = timeline[(timeline.resource == "compute") & (timeline.kind == "stall")].copy()
    st["seconds"] = st.end_s - st.start_s
    table = st.pivot_table(index="layer", columns="cause", values="seconds", aggfunc="sum", fill_value=0.0)
    fig, ax = plt.subplots(figsize=(11, 4))
    bottom = None
    labels = {cause: label_of("stall", cause) for cause in table.columns}
    palette = palette or colours(labels.values())
    for cause in table.columns:
        values = table[cause] * 1e3
        ax.bar(table.index, values, bottom=bottom, color=palette[labels[cause]], label=labels[cause])
        bottom = values if bottom is None else bottom + values
    ax.set_xlabel("layer (-1: outside the layers)")
    ax.set_ylabel("stall (ms)")
    ax.set_title("stall breakdown per layer")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)


def _optional(value, file: str, field: str) -> float | None:
    """``_number``, or None where ``value`` is missing or null."""
    return None if value is None else _number(value, file, field)


def _number(value, file: str, field: str) -> float:
    """``value`` as a finite number of at least 0."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{value!r} is not a number" if value is not None else "missing", file=file, field=field)
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"{value!r} is not a finite number of at least 0", file=file, field=field)
    return float(value)


def weight_dtype(path: Path) -> str | None:
    """The weight format a run's summary.json gives (None: none given, or no summary)."""
    if not path.is_file():
        return None
    summary = load_json(path)
    workload = summary.get("workload") if isinstance(summary, dict) else None
    got = workload.get("weight_dtype") if isinstance(workload, dict) else None
    return got if isinstance(got, str) and got in DTYPES else None


def read_energy(path: Path) -> dict | None:
    """A run's energy from its summary.json, checked: ``parts`` (label -> joules: compute, every level
    and link drawing energy, static) and the total, average and peak power, power cap and energy per
    token. None for a run that has no energy to draw (no summary.json, no ``energy_j``: an older run,
    or a chip without energy figures)."""
    if not path.is_file():
        return None
    file = str(path)
    summary = load_json(path)
    if not isinstance(summary, dict):
        raise ConfigError("not a memsim summary: not a JSON object", file=file)
    energy = summary.get("energy_j")
    if energy is None:
        return None
    if not isinstance(energy, dict):
        raise ConfigError(f"{str(energy)[:40]!r} is not an object of joules", file=file, field="energy_j")
    totals = {key: _number(energy.get(key), file, f"energy_j.{key}") for key in ("total", "dynamic", "static", "compute")}
    parts = {"compute": totals["compute"]}
    for group, prefix in (("levels", ""), ("links", "link:")):
        items = energy.get(group, {})
        if not isinstance(items, dict):
            raise ConfigError(f"{str(items)[:40]!r} is not an object of joules", file=file, field=f"energy_j.{group}")
        for name, joules in items.items():
            value = _number(joules, file, f"energy_j.{group}.{name}")
            if value > 0:
                parts[f"{prefix}{name}"] = value
    parts["static"] = totals["static"]
    power = {key: _optional(summary.get(key), file, key)
             for key in ("avg_power_w", "peak_power_w", "power_cap_w", "energy_per_token_j")}
    parts = {k: v for k, v in parts.items() if v > 0}
    if totals["total"] <= 0 or not parts:
        return None
    return {**totals, **power, "parts": parts}


def _si(value: float, unit: str) -> str:
    for scale, prefix in ((1, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n"), (1e-12, "p")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def energy(data: dict, path: Path, palette: dict[str, str] | None = None) -> Path:
    """One bar per part of the run's energy (compute, levels, links, static), each with its joules
    and share; the title gives the total, the average and peak power, and the energy per token."""
    plt = pyplot()
    parts = data["parts"]
    palette = {**colours(parts), **(palette or {})}
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(parts) + 1.8))
    labels = list(parts)[::-1]  # compute on top
    values = [parts[k] for k in labels]
    ax.barh(labels, values, color=[palette[k] for k in labels])
    for y, v in enumerate(values):
        ax.annotate(f" {_si(v, 'J')} ({100 * v / data['total']:.1f}%)", (v, y), va="center", fontsize=8)
    ax.set_xlim(0, max(values) * 1.3)
    ax.set_xlabel("energy (J)")
    facts = [f"total {_si(data['total'], 'J')}"]
    if data["avg_power_w"] is not None:
        facts.append(f"avg power {data['avg_power_w']:.1f} W")
    if data["peak_power_w"] is not None:
        facts.append(f"peak {data['peak_power_w']:.1f} W")
    if data["power_cap_w"] is not None:
        facts.append(f"cap {data['power_cap_w']:.0f} W")
    if data["energy_per_token_j"] is not None:
        facts.append(f"{_si(data['energy_per_token_j'], 'J')}/token")
    ax.set_title("energy: " + ", ".join(facts), fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path)


def plot_run(folder: Path, output: Path | None = None) -> list[Path]:
    """The figures of a run's output folder (the energy figure where the run has energy), written to
    ``output`` (default: the run's folder); its files are checked before anything is drawn."""
    folder = Path(folder)
    for name in DATA:
        if not (folder / name).is_file():
            raise ConfigError(f"missing {name}: not a memsim run folder", file=str(folder))
    timeline = read_table(folder / "timeline.csv", "timeline", TIMELINE_READ, ("start_s", "end_s", "layer"),
                          optional=TIMELINE_OPTIONAL)
    if "busy_s" in timeline:
        timeline = as_numbers(timeline, ("busy_s",), str(folder / "timeline.csv"))
    ops = read_table(folder / "ops.csv", "ops table", ("op_kind", "flops", "duration_s", "arithmetic_intensity"),
                     ("flops", "duration_s", "arithmetic_intensity"))
    chip, hardware = load_chip(folder / "hardware.yaml")
    spent = read_energy(folder / "summary.json")
    dtype = run_dtype(chip, weight_dtype(folder / "summary.json"))
    palette = colours([*timeline_labels(timeline), *(spent["parts"] if spent else ())])
    where = Path(output) if output is not None else folder
    where.mkdir(parents=True, exist_ok=True)
    gantt_png, roofline_png, stalls_png, energy_png = (where / name for name in FIGURES)
    paths = [gantt(timeline, gantt_png, palette), roofline(ops, hardware, roofline_png, chip, dtype),
             stalls_per_layer(timeline, stalls_png, palette)]
    if spent is not None:
        paths.append(energy(spent, energy_png, palette))
    elif energy_png.is_file() and not energy_png.is_symlink():
        energy_png.unlink()  # an earlier plot's, of a run that had energy: stale beside these
    return paths
