"""``memsim report`` of any folder memsim writes: a run's (``report.html``), a serving run's, a capacity
search's, a sweep's (of runs or of serving runs) and an ``explain`` experiment's. Each is a page of
its own kind, read back from the folder's files; a folder's kind is told by the files it holds
(``KINDS``). A sweep's page links the page of each point kept under ``points/`` and writes those pages
too; every page of one folder loads one copy of plotly.js, written beside the folder's page
(``PLOTLY``), not one inlined in each, so a sweep of a thousand points holds one 4.9 MB script. A single
run's or serving run's page inlines it, so the one file opens anywhere.
"""
from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from memsim.core.atomic import atomic_write_text
from memsim.core.errors import ConfigError
from memsim.core.files import load_json
from memsim.report import html as run_page
from memsim.report.html import page, table
from memsim.report.output import REPORT
from memsim.report.readback import read_table
from memsim.report.thin import BINS, held_slices

PLOTLY = "plotly.min.js"  # the one copy of plotly.js a folder's pages load
# What each kind of folder holds, in the order they are told apart (a run's marker file is its summary).
KINDS = {"run": ("summary.json", "timeline.csv", "ops.csv", "hardware.yaml"),
         "serve": ("serve.json", "requests.csv", "steps.csv"), "capacity": ("capacity.json", "points.csv"),
         "sweep": ("sweep.json", "results.csv"), "explain": ("explain.json", "explain.csv")}


def kind_of(folder: Path) -> str:
    """The kind of memsim folder ``folder`` is (``KINDS``), or a one-line error naming what it lacks."""
    held = {kind: [name for name in files if (folder / name).is_file()] for kind, files in KINDS.items()}
    for kind, files in KINDS.items():
        if len(held[kind]) == len(files):
            return kind
    closest = max(KINDS, key=lambda kind: len(held[kind]))
    if held[closest]:  # most of one kind's files: name the one it lacks
        missing = next(name for name in KINDS[closest] if name not in held[closest])
        raise ConfigError(f"missing {missing}: not a memsim {closest} folder", file=str(folder))
    raise ConfigError("not a folder memsim writes: a run's (summary.json, timeline.csv, ops.csv, hardware.yaml), a "
                      "serving run's (serve.json ...), a capacity search's, a sweep's or an explain run's",
                      file=str(folder))


def inputs(folder: Path) -> list[Path]:
    """The files a report of ``folder`` reads: its page never lands on one."""
    return [folder / name for name in KINDS[kind_of(folder)]]


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4g} ms"


def serve_page(folder: Path, plotly: str | None = None) -> str:
    """A serving run: what was served and how fast, its latency distributions, its KV cache and queue over
    time (each slice's mean where there are more steps than slices) and its batch."""
    go, _, _ = run_page.plotly()
    s = load_json(folder / "serve.json")
    if not isinstance(s, dict) or "requests" not in s:
        raise ConfigError("not a memsim serve.json (no requests)", file=str(folder / "serve.json"))
    reqs = read_table(folder / "requests.csv", "requests table", ("ttft_s", "tpot_s", "e2e_s"),
                      ("ttft_s", "tpot_s", "e2e_s"), optional=())
    steps = read_table(folder / "steps.csv", "steps table", ("start_s", "end_s", "kv_blocks_used", "waiting", "running"),
                       ("start_s", "end_s", "kv_blocks_used", "waiting", "running"), optional=())
    d, slo = s.get("deployment", {}), s.get("slo", {})
    rows = [("deployment", f"{d.get('hw', '')} {d.get('model', '')}: {d.get('layout', '')}; scheduler "
                           f"{s.get('scheduler', '')}, stack {d.get('stack', '')}"),
            ("served", f"{s['requests']} requests in {s.get('span_s', 0):.4g} s: {s.get('requests_per_s', 0):.4g} "
                       f"req/s, {s.get('output_tokens_per_s', 0):.4g} output tokens/s"),
            ("rate", f"offered {s.get('offered_requests_per_s', 0):.4g} req/s; finished "
                     f"{s.get('served_requests_per_s', 0):.4g} req/s while requests arrived")]
    for name, key in (("TTFT", "ttft_s"), ("TPOT", "tpot_s"), ("ITL", "itl_s"), ("E2E", "e2e_s")):
        if f"{key}_p50" in s:
            rows.append((name, ", ".join(f"p{p} {_ms(s[f'{key}_p{p}'])}" for p in (50, 90, 99))))
    rows.append(("goodput", f"{s.get('goodput_requests_per_s', 0):.4g} req/s within TTFT {slo.get('ttft_s', '')} s "
                            f"and TPOT {slo.get('tpot_s', '')} s"))
    if s.get("limit"):
        rows.append(("limited by", str(s["limit"].get("by", ""))))
    figures: list[tuple[str, str, Any]] = []
    cdf = go.Figure()
    for col, name in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2e_s", "E2E")):
        x = np.sort(reqs[col].dropna().to_numpy(float)) * 1e3
        cdf.add_trace(go.Scatter(x=x, y=np.arange(1, len(x) + 1) / max(len(x), 1), mode="lines", name=name))
    cdf.update_layout(title="latency: the share of requests within each time", xaxis_type="log",
                      xaxis_title="ms", yaxis_title="share of requests", height=420)
    figures.append(("latency", "Latency", cdf))
    blocks = int(s.get("kv", {}).get("blocks", 0)) or 1
    over = go.Figure()
    for col, name, scale in (("kv_blocks_used", "KV cache used (%)", 100 / blocks), ("waiting", "requests waiting", 1),
                             ("running", "sequences admitted", 1)):
        x, mean, _, _ = held_slices(steps.start_s.to_numpy(), steps[col].to_numpy() * scale, float(steps.end_s.max()),
                                    min(BINS, max(len(steps), 1)))
        over.add_trace(go.Scatter(x=x, y=mean, mode="lines", name=name))
    over.update_layout(title=f"over time: each of up to {BINS:,} slices' mean", xaxis_title="time (s)", height=420)
    figures.append(("over-time", "KV cache, queue and batch over time", over))
    title = f"memsim serve: {d.get('hw', '')}, {d.get('model', '')}"
    return page(title, ["<h2>Summary</h2>", table(rows, ("", ""))], figures, plotly)


def capacity_page(folder: Path, plotly: str | None = None) -> str:
    """A capacity search: its answer, and each rate tried with its percentiles against the SLOs."""
    go, _, _ = run_page.plotly()
    c = load_json(folder / "capacity.json")
    if not isinstance(c, dict) or "capacity" not in c:
        raise ConfigError("not a memsim capacity.json (no capacity)", file=str(folder / "capacity.json"))
    pts = read_table(folder / "points.csv", "capacity points", ("rate", "ttft_s", "tpot_s", "met"),
                     ("rate", "ttft_s", "tpot_s"))
    slo, cap = c.get("slo", {}), c["capacity"]
    p = slo.get("percentile", 90)
    fig = go.Figure()
    ordered = pts.sort_values("rate")
    for col, name, limit in (("ttft_s", f"TTFT p{p}", slo.get("ttft_s")), ("tpot_s", f"TPOT p{p}", slo.get("tpot_s"))):
        fig.add_trace(go.Scatter(x=ordered.rate, y=ordered[col] * 1e3, mode="lines+markers", name=name))
        if limit:
            fig.add_hline(y=float(limit) * 1e3, line_dash="dot", annotation_text=f"{name} SLO")
    fig.update_layout(title=f"capacity {cap.get('text', '')}", xaxis_title="requests a second", xaxis_type="log",
                      yaxis_title="ms", yaxis_type="log", height=460)
    rows = [tuple(r) for r in pts[["rate", "ttft_s", "tpot_s", "met"]].itertuples(index=False)]
    body = [f"<p>capacity {html.escape(str(cap.get('text', '')))}</p>", "<h2>Rates tried</h2>",
            table(rows, ("rate (req/s)", f"TTFT p{p} (s)", f"TPOT p{p} (s)", "met"))]
    return page("memsim capacity", body, [("capacity", "Percentiles against the rate", fig)], plotly)


def sweep_page(folder: Path, plotly: str | None = None, links: dict[str, str] | None = None) -> str:
    """A sweep: its results (the swept fields, the figures that matter, a link to each kept point's page) and
    its main figure against the first swept field, a line for each setting of the others."""
    go, _, _ = run_page.plotly()
    results = pd.read_csv(folder / "results.csv", dtype={"error": str})
    if "error" not in results:
        raise ConfigError("not a memsim results.csv (no error column)", file=str(folder / "results.csv"))
    swept = list(results.columns[:list(results.columns).index("error")])
    shown = [c for c in swept if not c.endswith(("_bytes", "_bytes_per_s"))] or swept
    metric = next((m for m in ("step_time_s", "requests_per_s", "total_s") if m in results), None)
    fig = go.Figure()
    if metric is not None and shown:
        x, others = shown[0], shown[1:]
        groups = results.groupby(others, sort=False) if others else [((), results)]
        for key, part in groups:
            label = ", ".join(f"{f}={v}" for f, v in zip(others, key if isinstance(key, tuple) else (key,)))
            fig.add_trace(go.Scatter(x=part[x].astype(str), y=part[metric], mode="lines+markers", name=label or metric))
        fig.update_layout(title=f"{metric} against {x}", xaxis_title=x, yaxis_title=metric, height=440)
    head = [*shown, *([metric] if metric else []), "error"]
    rows = []
    for _, r in results.iterrows():
        cells = [r[c] if not (isinstance(r[c], float) and np.isnan(r[c])) else "" for c in head]
        link = (links or {}).get(str(r.get("outputs", "")))
        rows.append((*cells, link or ""))
    body = ["<h2>Points</h2>", table(rows, (*head, "page"), links=len(head))]
    return page(f"memsim sweep: {len(results)} points", body, [("sweep", "Results", fig)] if metric else [], plotly)


def explain_page(folder: Path, plotly: str | None = None) -> str:
    """An explain experiment: its table, and each quantity's step time at each factor against the run's."""
    go, _, _ = run_page.plotly()
    frame = read_table(folder / "explain.csv", "explain.csv", ("rank", "quantity", "factor", "step_time_s", "speedup"),
                       ("factor", "step_time_s", "speedup"))
    fig = go.Figure()
    ok = frame[frame.step_time_s.notna()]
    for factor, part in ok.groupby("factor"):
        fig.add_trace(go.Bar(y=part.quantity, x=part.speedup, orientation="h", name=f"x{factor:g}"))
    fig.update_layout(title="speed-up of each change (1: none)", barmode="group", xaxis_title="speed-up",
                      yaxis={"autorange": "reversed"}, height=200 + 22 * ok.quantity.nunique())
    rows = [tuple("" if isinstance(v, float) and np.isnan(v) else v for v in r)
            for r in frame[["rank", "quantity", "factor", "step_time_s", "speedup"]].itertuples(index=False)]
    body = ["<h2>Changes</h2>", table(rows, ("rank", "quantity", "factor", "step time (s)", "speed-up"))]
    return page("memsim explain", body, [("explain", "Speed-ups", fig)], plotly)


def render(folder: Path, plotly: str | None = None) -> str:
    """The page of ``folder``, by its kind (a sweep's without its points' pages: ``write``)."""
    pages: dict[str, Callable[[Path, str | None], str]] = {
        "run": run_page.render, "serve": serve_page, "capacity": capacity_page, "sweep": sweep_page,
        "explain": explain_page}
    return pages[kind_of(Path(folder))](Path(folder), plotly)


def write(folder: Path, output: Path | None = None) -> list[Path]:
    """``memsim report FOLDER``: its page (``output``, default ``FOLDER/report.html``); for a sweep, also the
    page of each point it kept, and the one plotly.js all of them load, beside the sweep's page."""
    folder = Path(folder)
    path = Path(output) if output else folder / REPORT
    if kind_of(folder) != "sweep":
        atomic_write_text(path, render(folder))
        return [path]
    shared = path.parent / PLOTLY
    written, links = [], {}
    for named in _outputs(folder):
        point = folder / named
        if point.is_dir() and not point.is_symlink() and kind_of_point(point):
            mine = point / REPORT
            atomic_write_text(mine, render(point, _relative(shared, point)))
            links[named] = _relative(mine, path.parent)
            written.append(mine)
    _, _, plotlyjs = run_page.plotly()
    atomic_write_text(shared, plotlyjs())
    atomic_write_text(path, sweep_page(folder, PLOTLY, links))
    return [path, shared, *written]


def kind_of_point(point: Path) -> bool:
    """Whether a sweep's kept point is a run's or a serving run's folder (one with a page of its own)."""
    try:
        return kind_of(point) in ("run", "serve")
    except ConfigError:
        return False


def _outputs(folder: Path) -> list[str]:
    """The point folders a sweep's results.csv names (its ``outputs`` column), none where it kept none."""
    results = folder / "results.csv"
    if not results.is_file():
        return []
    frame = pd.read_csv(results, dtype=str)
    return [o for o in frame.get("outputs", pd.Series(dtype=str)).dropna()
            if o and not Path(o).is_absolute() and ".." not in Path(o).parts]


def _relative(target: Path, start: Path) -> str:
    """``target`` as a path from the folder ``start`` (both as given: the pages of one folder)."""
    import os

    return Path(os.path.relpath(target.absolute(), start.absolute())).as_posix()

