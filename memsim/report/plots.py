"""Figures (matplotlib, the ``plot`` extra): sweep results against a swept field."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from memsim.core import units
from memsim.core.errors import ConfigError, run_field
from memsim.report.readback import as_numbers, read_table
from memsim.report.run_plots import pyplot

# A swept quantity's parser and how its tick labels are written (sizes in KiB/MiB/GiB, not 2^20).
_SIZE_PARSERS = ((units.parse_bytes, units.format_bytes), (units.parse_bandwidth, units.format_bandwidth),
                 (units.parse_time_ps, units.format_time), (units.parse_flops, units.format_flops))


def axis_of(values: pd.Series):
    """Numbers for the x axis, whether a log axis suits them, and a tick formatter (None: plain numbers)."""
    texts = [str(v) for v in values]
    try:
        nums = [float(t) for t in texts]
        return nums, min(nums) > 0 and max(nums) / min(nums) >= 10, None
    except ValueError:
        pass
    for parse, shown in _SIZE_PARSERS:
        try:
            nums = [float(parse(t)) for t in texts]
        except units.UnitError:
            continue
        return nums, min(nums) > 0 and max(nums) / min(nums) >= 4, lambda v, _pos, shown=shown: shown(round(v))
    raise ConfigError(f"cannot plot non-numeric values such as {texts[0]!r}", field=run_field("x"))


def _spans_decades(values: pd.Series) -> bool:
    values = values[values > 0]
    return len(values) > 1 and values.max() / values.min() >= 10


def plot_sweep(results: Path, x_field: str | None = None, output: Path | None = None) -> Path:
    df = read_table(results, "sweep results.csv", ("error", "step_time_s"), ("step_time_s",))
    byte_cols = [c for c in df.columns if c.startswith("bytes_per_level.") and c.endswith(".total")]
    df = as_numbers(df, byte_cols, str(results))
    lead = list(df.columns[: list(df.columns).index("error")])
    swept = [c for c in lead if not any(c == f + suffix for f in lead for suffix, _ in units.BASE_COLUMNS.values())]
    if not swept:
        raise ConfigError("not a memsim sweep: no swept field before the error column", file=str(results))
    x_field = x_field or swept[0]
    if x_field not in swept:
        raise ConfigError(f"not a swept field (swept: {', '.join(swept)})", file=str(results), field=x_field)
    ok = df[df["error"].isna() | (df["error"] == "")].copy()
    ok["_x"], log, ticks = axis_of(ok[x_field]) if len(ok) else ([], False, None)
    others = [f for f in swept if f != x_field]
    byte_cols = [c for c in byte_cols if ok[c].any()]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter, NullFormatter
    except ImportError:
        raise ConfigError("plots need matplotlib (pip install '.[plot]')", field="plot") from None
    fig, (ax_t, ax_b) = plt.subplots(1, 2, figsize=(11, 4))
    groups = ok.groupby(others) if others else [((), ok)]
    drawn = 0  # each series its own marker and dash, so series that coincide stay visible
    for key, part in groups:
        part = part.sort_values("_x")
        label = ", ".join(f"{f}={v}" for f, v in zip(others, key if isinstance(key, tuple) else (key,)))
        ax_t.plot(part["_x"], part["step_time_s"] * 1e3, label=label or None, **_style(drawn))
        for col in byte_cols:
            ax_b.plot(part["_x"], part[col], label=f"{col.split('.')[1]} {label}".strip(), **_style(drawn))
            drawn += 1
        drawn += not byte_cols
    fig.suptitle(_what(ok), fontsize=10)
    for ax, title in ((ax_t, "step time (ms)"), (ax_b, "bytes moved per level")):
        ax.set_xlabel(x_field)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        if log:
            ax.set_xscale("log", base=2)
        if ticks is not None:
            ax.set_xticks(sorted(set(ok["_x"])))
            ax.xaxis.set_major_formatter(FuncFormatter(ticks))
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.tick_params(axis="x", labelrotation=30)
    if _spans_decades(ok["step_time_s"]):  # a cliff spans decades: a linear axis would flatten one side
        ax_t.set_yscale("log")
        ax_t.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    if any(_spans_decades(ok[c]) for c in byte_cols):  # log only where the bytes span decades
        ax_b.set_yscale("log")
        ax_b.yaxis.set_minor_formatter(NullFormatter())
    ax_b.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: units.human_bytes(v)))
    if ax_b.lines:
        ax_b.legend(fontsize=8)
    if others:
        ax_t.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, output or results.with_suffix(".png"))


# Markers and dashes a sweep's series take in turn: series that coincide (a swept field that
# changes nothing) are told apart instead of one hiding the others.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
DASHES = ("-", "--", ":", "-.")


def _style(i: int) -> dict:
    return {"marker": MARKERS[i % len(MARKERS)], "linestyle": DASHES[(i // len(MARKERS)) % len(DASHES)],
            "markerfacecolor": "none" if i % 2 else None, "alpha": 0.85}


def _what(rows) -> str:
    """What a sweep ran, for its figure's title: chip, model and workload, as its rows give them (a
    field that the sweep varies is left to the axes and legend)."""
    def one(col: str) -> str | None:
        values = rows[col].dropna().unique() if col in rows else []
        return str(values[0]) if len(values) == 1 else None

    parts = [one("hardware"), one("workload.model"), one("workload.phase")]
    shape = [f"{k}={v}" for k in ("batch", "context", "tokens") if (v := one(f"workload.{k}")) is not None]
    return "  ".join(p for p in [*parts, " ".join(shape)] if p)


def plot_explain(table: Path, output: Path | None = None, top: int = 12) -> Path:
    """A tornado plot of ``memsim explain``'s explain.csv (``tornado``), written beside it as a PNG."""
    df = read_table(table, "explain.csv", ("rank", "quantity", "factor", "step_time_s", "speedup"),
                    ("rank", "factor", "step_time_s", "speedup"))
    ok = df[df["step_time_s"].notna() & df["speedup"].notna() & (df["speedup"] > 0)]
    if ok.empty:
        raise ConfigError("no change in the explain.csv ran: nothing to plot", file=str(table))
    return save_figure(tornado(ok, top), output or table.with_suffix(".png"))


ESTIMATES_SHOWN = 6  # estimated values drawn below the ranked changes, the widest ranges first


def tornado(ok: pd.DataFrame, top: int = 12):
    """For each quantity (the ``top`` ranked first, the first at the top), a bar from the run's step time to
    the step time at each factor, speed-ups to the left of the run, slow-downs to the right, each factor its
    colour; below, apart and grey, the estimated preset values (``kind`` ``estimate``): each a bar spanning
    the step times at the two ends of its range, labelled with them, not a factor."""
    plt = pyplot()
    kind = ok["kind"].fillna("") if "kind" in ok else pd.Series("", index=ok.index)
    changes, estimates = ok[kind != "estimate"], ok[kind == "estimate"]
    base = float((ok["step_time_s"] * ok["speedup"]).median())  # each row's run step time, the same for all
    ranked = sorted(changes["quantity"].unique(), key=lambda q: changes.loc[changes["quantity"] == q, "rank"].min())[:top]
    spans = estimates.groupby("quantity", sort=False)["step_time_s"].agg(["min", "max"])
    spans = spans.assign(lo=spans["min"].clip(upper=base), hi=spans["max"].clip(lower=base))
    shown = list((spans.hi - spans.lo).sort_values(ascending=False).index[:ESTIMATES_SHOWN])
    rows = len(ranked) + (len(shown) + 1 if shown else 0)
    fig, ax = plt.subplots(figsize=(9, 0.45 * rows + 1.5))
    colours: dict[str, str] = {}
    for y, quantity in enumerate(reversed(ranked), start=len(shown) + 1 if shown else 0):
        for _, row in changes[changes["quantity"] == quantity].iterrows():
            label = f"x{row['factor']:g}"
            colour = colours.setdefault(label, f"C{len(colours)}")
            ax.barh(y, row["step_time_s"] * 1e3 - base * 1e3, left=base * 1e3, color=colour, alpha=0.8,
                    label=label if label not in ax.get_legend_handles_labels()[1] else None)
    for y, quantity in enumerate(reversed(shown)):
        lo, hi = spans.loc[quantity, "lo"] * 1e3, spans.loc[quantity, "hi"] * 1e3
        ends = estimates.loc[estimates["quantity"] == quantity, "new_value"].astype(str) \
            if "new_value" in estimates else pd.Series(dtype=str)
        ax.barh(y, hi - lo, left=lo, color="0.75", hatch="//", edgecolor="0.45", lw=0,
                label="an estimate, its range's ends" if y == len(shown) - 1 else None)
        ax.annotate(" to ".join(ends), (hi, y), xytext=(4, 0), textcoords="offset points", va="center", fontsize=7)
    if shown:
        ax.axhline(len(shown), color="0.6", lw=0.8, ls=":")
    names = [f"{q} (estimate)" for q in reversed(shown)] + ([""] if shown else []) + list(reversed(ranked))
    ax.set_yticks(range(rows), names, fontsize=8)
    ax.axvline(base * 1e3, color="black", linewidth=1)
    ax.set_xlabel("step time (ms); the vertical line is the run as given")
    ax.set_title("what would change the step time (memsim explain)" +
                 ("; below, the estimated values at their ranges' ends" if shown else ""), fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def save_figure(fig, output: Path) -> Path:
    """Write the figure to ``output`` whole: to a temporary file beside it, then renamed."""
    import matplotlib.pyplot as plt

    tmp = output.with_name(f".{output.name}.tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(output)
    return output
