"""Figures of one run (matplotlib, the ``plot`` extra), read back from its output folder:
a Gantt chart per resource with stalls coloured by cause, a roofline chart of every operator,
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

import pandas as pd

from memsim.core.dtypes import DTYPES
from memsim.core.errors import ConfigError
from memsim.core.files import load_json
from memsim.hardware.kinds import KINDS
from memsim.hardware.loader import load_chip
from memsim.report.ceilings import ceilings, run_dtype
from memsim.report.output import DATA, FIGURES, read_table

# tab10 and tab20b shades: compute green, transfers blue, every stall cause its own hue; a level's
# stalls in its kind's colour (``memsim.hardware.kinds``: levels are named after their kinds in the presets)
FIXED_COLORS = {"compute": "#2ca02c", "transfer": "#1f77b4", **{k.name: k.color for k in KINDS.values() if k.color},
                "tile_buffer": "#d62728", "dequant": "#bcbd22", "overhead": "#7f7f7f",
                "dependency": "#17becf", "bubble": "#c7c7c7", "power": "#393b79", "static": "#252525"}
EXTRA_COLORS = ("#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5",
                "#637939", "#8c6d31", "#843c39", "#7b4173", "#e7ba52", "#6b6ecf", "#b5cf6b", "#de9ed6")
MIN_DISTANCE = 0.2  # in RGB space (0-1 per channel): colours closer than this are hard to tell apart
MAX_BARS = 60_000  # beyond this the Gantt chart merges intervals per operator
MIN_WIDTH = 0.0015  # of the span: a narrower interval is drawn this wide, so it shows at all (never wider)
TIMELINE_READ = ("start_s", "end_s", "chip", "resource", "kind", "op", "cause", "layer")  # the columns drawn


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
    plt = pyplot()
    tl = timeline
    if len(tl) > MAX_BARS:  # merge per (track, op, kind, cause)
        keys = ["chip", "resource", "op", "kind", "cause"]
        tl = tl.groupby(keys, dropna=False, sort=False).agg(start_s=("start_s", "min"), end_s=("end_s", "max"))
        tl = tl.reset_index()
    palette = palette or colours(timeline_labels(tl))
    tl = tl.assign(_label=[label_of(k, c) for k, c in zip(tl["kind"], tl["cause"])])
    tracks = list(dict.fromkeys(zip(tl.chip, tl.resource)))
    fig, ax = plt.subplots(figsize=(13, 0.5 * len(tracks) + 1.5))
    least = (tl.end_s.max() - tl.start_s.min()) * 1e3 * MIN_WIDTH if len(tl) else 0.0
    for y, (chip, res) in enumerate(tracks):
        rows = tl[(tl.chip == chip) & (tl.resource == res)]
        for key, part in rows.groupby("_label", sort=False):
            bars = list(zip(part.start_s * 1e3, ((part.end_s - part.start_s) * 1e3).clip(lower=least)))
            ax.broken_barh(bars, (y - 0.4, 0.8), color=palette[key], label=key, linewidth=0)  # edges widen thin bars
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    ax.legend(unique.values(), unique.keys(), fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.set_yticks(range(len(tracks)), [f"{c} {r}" for c, r in tracks], fontsize=8)
    ax.set_xlabel("time (ms)")
    ax.set_title("timeline: compute, stalls by cause, transfers")
    fig.tight_layout()
    return save_figure(fig, path)


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
    timeline = read_table(folder / "timeline.csv", "timeline", TIMELINE_READ, ("start_s", "end_s", "layer"))
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
