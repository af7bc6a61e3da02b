"""Figures of one run (matplotlib, the ``plot`` extra), read back from its output folder:
a Gantt chart per resource with stalls coloured by cause, a roofline chart of every operator,
and the stall breakdown per layer."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from memsim import units
from memsim.errors import ConfigError
from memsim.hardware.loader import load_chip
from memsim.report.output import read_table

CAUSE_COLORS = {"compute": "#2b8a3e", "overhead": "#868e96", "sram_capacity": "#e8590c", "dependency": "#7048e8",
                "dequant": "#f08c00"}
MAX_BARS = 60_000  # beyond this the Gantt chart merges intervals per operator
TIMELINE_READ = ("start_s", "end_s", "chip", "resource", "kind", "op", "cause", "layer")  # the columns drawn


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError("plots need matplotlib (pip install '.[plot]')", field="plot") from None
    return plt


def _color(cause: str, palette: dict[str, str]) -> str:
    if cause in CAUSE_COLORS:
        return CAUSE_COLORS[cause]
    return palette.setdefault(cause, f"C{len(palette) % 10}")


def _save(fig, path: Path) -> Path:
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=110)
    tmp.replace(path)
    return path


def gantt(timeline: pd.DataFrame, path: Path) -> Path:
    plt = _pyplot()
    tl = timeline
    if len(tl) > MAX_BARS:  # merge per (track, op, kind, cause)
        keys = ["chip", "resource", "op", "kind", "cause"]
        tl = tl.groupby(keys, dropna=False, sort=False).agg(start_s=("start_s", "min"), end_s=("end_s", "max"))
        tl = tl.reset_index()
    tracks = list(dict.fromkeys(zip(tl.chip, tl.resource)))
    fig, ax = plt.subplots(figsize=(13, 0.5 * len(tracks) + 1.5))
    palette: dict[str, str] = {}
    for y, (chip, res) in enumerate(tracks):
        rows = tl[(tl.chip == chip) & (tl.resource == res)]
        for key, part in rows.groupby(rows["kind"].where(rows["kind"] != "stall", rows["cause"].fillna(""))):
            color = _color("compute" if key == "compute" else key if key != "transfer" else "transfer", palette)
            bars = list(zip(part.start_s * 1e3, (part.end_s - part.start_s) * 1e3))
            ax.broken_barh(bars, (y - 0.4, 0.8), color=color, label=key)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    ax.legend(unique.values(), unique.keys(), fontsize=8, ncols=4, loc="upper right")
    ax.set_yticks(range(len(tracks)), [f"{c} {r}" for c, r in tracks], fontsize=8)
    ax.set_xlabel("time (ms)")
    ax.set_title("timeline: compute, stalls by cause, transfers")
    fig.tight_layout()
    return _save(fig, path)


def roofline(ops: pd.DataFrame, hardware: dict, path: Path) -> Path:
    plt = _pyplot()
    peak = max(units.parse_flops(v) for v in hardware["compute"]["peak"].values())
    memories = [lvl for lvl in hardware["levels"] if lvl["kind"] in ("hbm", "gddr", "lpddr", "ddr")]
    memories = memories or [lvl for lvl in hardware["levels"] if lvl["name"] == "sram"]  # SRAM-only chips
    bw = units.parse_bandwidth(memories[0]["bandwidth"]) if memories else None
    o = ops[(ops.flops > 0) & (ops.duration_s > 0) & (ops.arithmetic_intensity < float("inf"))].copy()
    o["achieved"] = o.flops / o.duration_s
    fig, ax = plt.subplots(figsize=(7, 5))
    for kind, part in o.groupby("op_kind"):
        ax.scatter(part.arithmetic_intensity, part.achieved, s=14, label=kind)
    lo, hi = max(1e-3, o.arithmetic_intensity.min() / 2), o.arithmetic_intensity.max() * 2
    xs = [lo * (hi / lo) ** (i / 100) for i in range(101)]
    ax.plot(xs, [min(peak, x * bw) if bw else peak for x in xs], color="k", lw=1,
            label=f"roofline ({memories[0]['name']})" if memories else "peak")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte moved off chip)")
    ax.set_ylabel("achieved FLOP/s")
    ax.set_title(f"roofline: {hardware['name']}")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return _save(fig, path)


def stalls_per_layer(timeline: pd.DataFrame, path: Path) -> Path:
    plt = _pyplot()
    st = timeline[(timeline.resource == "compute") & (timeline.kind == "stall")].copy()
    st["seconds"] = st.end_s - st.start_s
    table = st.pivot_table(index="layer", columns="cause", values="seconds", aggfunc="sum", fill_value=0.0)
    fig, ax = plt.subplots(figsize=(11, 4))
    bottom = None
    palette: dict[str, str] = {}
    for cause in table.columns:
        values = table[cause] * 1e3
        ax.bar(table.index, values, bottom=bottom, color=_color(cause, palette), label=cause)
        bottom = values if bottom is None else bottom + values
    ax.set_xlabel("layer (-1: outside the layers)")
    ax.set_ylabel("stall (ms)")
    ax.set_title("stall breakdown per layer")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def plot_run(folder: Path) -> list[Path]:
    """The three figures of a run's output folder; its files are checked before anything is drawn."""
    folder = Path(folder)
    for name in ("timeline.csv", "ops.csv", "hardware.yaml"):
        if not (folder / name).is_file():
            raise ConfigError(f"missing {name}: not a memsim run folder", file=str(folder))
    timeline = read_table(folder / "timeline.csv", "timeline", TIMELINE_READ, ("start_s", "end_s", "layer"))
    ops = read_table(folder / "ops.csv", "ops table", ("op_kind", "flops", "duration_s", "arithmetic_intensity"),
                     ("flops", "duration_s", "arithmetic_intensity"))
    _, hardware = load_chip(folder / "hardware.yaml")
    return [gantt(timeline, folder / "gantt.png"), roofline(ops, hardware, folder / "roofline.png"),
            stalls_per_layer(timeline, folder / "stalls.png")]
