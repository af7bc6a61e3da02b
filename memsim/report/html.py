"""One self-contained HTML page of a run (``memsim report DIR``, ``memsim run --html``): the summary,
where the weights and KV cache were placed, the stall breakdown, an interactive timeline per chip
and resource, the roofline with its ceilings and the energy. The figures are plotly's (the ``report``
extra), with plotly.js inlined once, so the page opens offline and from a file. It is read back from
the run's folder, as ``memsim plot run`` reads it, so any finished run can be reported.
"""
from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pandas as pd

from memsim.core.errors import ConfigError
from memsim.core.files import load_json
from memsim.core.units import human_bytes
from memsim.hardware.loader import load_chip
from memsim.report.ceilings import ceilings, run_dtype
from memsim.report.output import DATA
from memsim.report.readback import read_table
from memsim.report.run_plots import TIMELINE_READ, colours, label_of, read_energy, timeline_labels, weight_dtype
from memsim.report.summary_fields import FIELDS, scope_tag

MAX_BARS = 20_000  # beyond this the timeline merges intervals per operator, as the Gantt chart does
STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;padding:0 1.5em;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border-bottom:1px solid #ddd;padding:.2em .8em;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}h2{margin-top:1.6em}.note{color:#666}"""


def script_json(value: Any) -> str:
    """``value`` as JSON that is safe inside an HTML ``<script>``: no ``<``, ``>`` or ``&`` can end
    the element or open another."""
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def plotly():
    try:
        import plotly.graph_objects as go
        import plotly.io as pio
        from plotly.offline import get_plotlyjs
    except ImportError:
        raise ConfigError("the HTML report needs plotly (pip install '.[report]')", field="report") from None
    return go, pio, get_plotlyjs


def table(rows: list[tuple[Any, ...]], head: tuple[str, ...], links: int | None = None) -> str:
    """An HTML table of ``rows`` under ``head``, every cell escaped; the cells of column ``links`` (a path
    relative to the page, made by memsim) are links, those of a path that is not one are plain text."""
    def cell(v: Any, i: int) -> str:
        if i == links and isinstance(v, str) and v and _relative_path(v):
            return f'<td><a href="{html.escape(v)}">{html.escape(v)}</a></td>'
        return f'<td class="n">{v:.6g}</td>' if isinstance(v, float) else f"<td>{html.escape(str(v))}</td>"
    body = "".join("<tr>" + "".join(cell(v, i) for i, v in enumerate(row)) + "</tr>" for row in rows)
    return "<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>" + body + "</table>"


def _relative_path(text: str) -> bool:
    """Whether ``text`` is a plain relative path (no scheme, no absolute root): a link that stays on disk."""
    return ":" not in text and not text.startswith(("/", "\\")) and all(c.isprintable() for c in text)


def page(title: str, body: list[str], figures: list[tuple[str, str, Any]], plotly_src: str | None = None) -> str:
    """A page: ``body`` (HTML already escaped), then each figure under its heading; plotly.js inlined, or
    loaded from ``plotly_src`` (a path relative to the page, memsim's own: ``report.folders.PLOTLY``)."""
    _, pio, plotlyjs = plotly()
    script = f"<script>{plotlyjs()}</script>" if plotly_src is None else \
        f"<script src='{html.escape(plotly_src)}'></script>"
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{STYLE}</style>{script}</head><body>", f"<h1>{html.escape(title)}</h1>", *body]
    for div, heading, fig in figures:
        parts += [f"<h2>{html.escape(heading)}</h2>",
                  pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=div,
                              config={"displaylogo": False, "responsive": True})]
    parts.append(f"<script>document.body.dataset.figures = {script_json([d for d, _, _ in figures])}.length;</script>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _summary_rows(s: dict[str, Any]) -> list[tuple[str, str]]:
    """The summary as the console writes it (``memsim run``): each figure with its unit, in words."""
    w = s.get("workload", {})
    derived = f", {s['derived_from']}" if s.get("derived_from") else ""
    shape = " ".join(f"{k}={w[k]}" for k in ("batch", "tokens", "context") if w.get(k) is not None)
    formats = ", ".join(f"{k.split('_')[0]} {w[k]}" for k in ("weight_dtype", "kv_dtype") if w.get(k))
    grid = f"; tp {w['tp']}" if w.get("tp", 1) > 1 else ""
    util = f", utilisation {s['compute_utilization']:.1%}" if isinstance(s.get("compute_utilization"), float) else ""
    rows = [("hardware", f"{s['hardware']} ({s.get('family', '')}{derived})"),
            ("workload", f"{w.get('model') or w.get('source', 'trace')}  {w.get('phase', '')}  {shape}"
                         f"{'; ' + formats if formats else ''}{grid}"),
            ("step time", f"{s['step_time_s'] * 1e3:.4f} ms"),
            ("roofline", f"{s['roofline_s'] * 1e3:.4f} ms (bound: {s.get('roofline_bound', '')}, "
                         f"x{s['step_time_s'] / s['roofline_s']:.2f})" if s.get("roofline_s") else "none"),
            ("FLOPs", f"{float(s['flops_total']):.4e}{util}"),
            ("compute busy", f"{s['compute_busy_s'] * 1e3:.4f} ms")]
    rows += [(lvl, f"read {human_bytes(b.get('read', 0))}, written {human_bytes(b.get('written', 0))}")
             for lvl, b in s.get("bytes_per_level", {}).items() if b.get("total")]
    stalls = sorted(s.get("stall_s", {}).items(), key=lambda kv: -kv[1])
    if stalls:
        rows.append(("stalls", ", ".join(f"{k} {v * 1e3:.4f} ms" for k, v in stalls)))
    e = s.get("energy_j", {})
    parts = ", ".join(f"{k} {e[k]:.4f} J" for k in ("compute", "dynamic", "static") if isinstance(e.get(k), float))
    rows.append(("energy", f"{e['total']:.4f} J ({parts})") if e.get("total") else
                ("energy", "not modelled: the chip gives no energy"))
    keys = {"FLOPs": "flops_total", "compute busy": "compute_busy_s", "energy": "energy_j", "stalls": "stall_s",
            **{lvl: "bytes_per_level" for lvl in s.get("bytes_per_level", {})}}
    chips, stages = int(s.get("chips", 1) or 1), int((s.get("grid") or {}).get("pp", 1) or 1)
    tagged = []  # with several chips, whose figure each is, as the console tags it
    for name, text in rows:
        tag = scope_tag(FIELDS[keys[name]].metadata["scope"], chips, stages) if name in keys else ""
        tagged.append((name, f"{text}  [{tag}]" if tag else text))
    return tagged


def _timeline_figure(go, tl: pd.DataFrame, chip: str, palette: dict[str, str]):
    part = tl[tl.chip == chip]
    if len(part) > MAX_BARS:
        part = part.groupby(["resource", "op", "kind", "cause"], dropna=False, sort=False).agg(
            start_s=("start_s", "min"), end_s=("end_s", "max")).reset_index()
    fig = go.Figure()
    width = (part.end_s - part.start_s) * 1e3
    # each interval as wide as it lasted, never widened: a colour's area is its time (zoom in to see the short ones)
    part = part.assign(_label=[label_of(k, c) for k, c in zip(part.kind, part.cause)], _ms=width)
    for name, rows in part.groupby("_label", sort=False):
        fig.add_trace(go.Bar(base=rows.start_s * 1e3, x=rows._ms, y=rows.resource, orientation="h", name=str(name),
                             marker_color=palette[str(name)], marker_line_width=0,
                             customdata=list(zip(rows.op.fillna(""), rows._ms)),
                             hovertemplate="%{customdata[0]}<br>%{base:.4f} ms, %{customdata[1]:.4f} ms long"
                                           f"<extra>{html.escape(str(name))}</extra>"))
    fig.update_layout(barmode="overlay", title=f"{chip}: compute, stalls by cause, transfers", xaxis_title="time (ms)",
                      height=260 + 28 * part.resource.nunique(), legend={"orientation": "h", "y": -0.25})
    return fig


def _roofline_figure(go, ops: pd.DataFrame, chip, dtype: str | None = None) -> Any:
    c = ceilings(chip)
    o = ops[(ops.flops > 0) & (ops.duration_s > 0) & (ops.arithmetic_intensity < float("inf"))]
    fig = go.Figure()
    for kind, part in o.groupby("op_kind"):
        fig.add_trace(go.Scatter(x=part.arithmetic_intensity, y=part.flops / part.duration_s / 1e12, mode="markers",
                                 name=str(kind), text=part.op, hovertemplate="%{text}: %{y:.3g} TFLOP/s"))
    ridge, top = c.ridge(dtype), dict(c.compute)[dtype] if dtype else c.compute[0][1]
    lo = max(1e-2, min(o.arithmetic_intensity.min(), ridge) / 4) if len(o) else 1e-2
    hi = max(o.arithmetic_intensity.max() if len(o) else 1, ridge) * 4
    xs = [lo * (hi / lo) ** (i / 60) for i in range(61)]
    main_bw = dict(c.memory)[c.main]
    for label, flops in c.distinct():  # one line and one label per distinct ceiling
        fig.add_trace(go.Scatter(x=xs, y=[min(flops, x * main_bw) / 1e12 for x in xs], mode="lines",
                                 name=f"{label} {flops / 1e12:.4g} TFLOP/s", line={"width": 2 if flops == top else 1}))
    fig.add_trace(go.Scatter(x=[ridge], y=[top / 1e12], mode="markers+text", name="ridge point",
                             text=[f"ridge {ridge:.3g} FLOP/B ({dtype or c.compute[0][0]}, {c.main})"],
                             textposition="bottom left", marker={"symbol": "x", "size": 10, "color": "black"}))
    fig.update_layout(title=f"roofline: {chip.name} ({c.main} {main_bw / 1e12:.3g} TB/s)", xaxis_type="log",
                      yaxis_type="log", xaxis_title="arithmetic intensity (FLOP per byte moved off chip)",
                      yaxis_title="TFLOP/s", height=480)
    return fig


def _bar_figure(go, values: dict[str, float], title: str, unit: str, palette: dict[str, str]):
    names = list(values)
    return go.Figure(go.Bar(x=[values[n] for n in names], y=names, orientation="h",
                            marker_color=[palette.get(n, "#888") for n in names])).update_layout(
        title=title, xaxis_title=unit, height=140 + 30 * len(names), yaxis={"autorange": "reversed"})


def render(folder: Path, plotly_src: str | None = None) -> str:
    """The page of the run in ``folder`` (``plotly_src``: where it loads plotly.js from; None: inlined)."""
    go, _, _ = plotly()
    folder = Path(folder)
    for name in DATA:
        if not (folder / name).is_file():
            raise ConfigError(f"missing {name}: not a memsim run folder", file=str(folder))
    s = load_json(folder / "summary.json")
    if not isinstance(s, dict) or "step_time_s" not in s:
        raise ConfigError("not a memsim summary (no step_time_s)", file=str(folder / "summary.json"))
    tl = read_table(folder / "timeline.csv", "timeline", TIMELINE_READ, ("start_s", "end_s", "layer"))
    ops = read_table(folder / "ops.csv", "ops table", ("op", "op_kind", "flops", "duration_s", "arithmetic_intensity"),
                     ("flops", "duration_s", "arithmetic_intensity"))
    chip, _ = load_chip(folder / "hardware.yaml")
    spent = read_energy(folder / "summary.json")
    palette = colours([*timeline_labels(tl), *(spent["parts"] if spent else ())])
    figures: list[tuple[str, str, Any]] = []
    stalls = dict(sorted(s.get("stall_s", {}).items(), key=lambda kv: -kv[1]))
    if stalls:
        figures.append(("stalls", "Stall breakdown", _bar_figure(go, {k: v * 1e3 for k, v in stalls.items()},
                                                                 "compute idle, by cause", "ms", palette)))
    for i, chip_id in enumerate(dict.fromkeys(tl.chip)):  # ids made here: nothing read from the folder names an element
        figures.append((f"timeline-{i}", f"Timeline of {chip_id}",
                        _timeline_figure(go, tl, chip_id, palette)))
    dtype = run_dtype(chip, weight_dtype(folder / "summary.json"))
    figures.append(("roofline", "Roofline", _roofline_figure(go, ops, chip, dtype)))
    if spent is not None:
        figures.append(("energy", "Energy", _bar_figure(go, dict(spent["parts"]), "energy by part", "J", palette)))
    placed = [(klass, lvl, human_bytes(b)) for klass, levels in s.get("placement", {}).items() for lvl, b in levels.items()]
    w = s.get("workload", {})
    title = f"memsim: {s['hardware']}, {w.get('model') or w.get('source', 'trace')} {w.get('phase', '')}"
    body = ["<h2>Summary</h2>", table(_summary_rows(s), ("", "")),
            "<h2>Placement</h2>", table(placed, ("tensors", "level", "bytes")) if placed else "<p>none</p>"]
    used = s.get("estimates", {}).get("used", []) if isinstance(s.get("estimates"), dict) else []
    if used:
        body.append(f"<p class='note'>The result rests on {len(used)} estimated preset values: "
                    f"{html.escape(', '.join(map(str, used)))} (summary.json, estimates).</p>")
    return page(title, body, figures, plotly_src)
