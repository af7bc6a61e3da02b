"""Sweeps of serving runs (``memsim sweep --serve``): the cartesian product of swept serving keywords
(``rate``, ``max_tokens``, ``scheduler``, ``replicas`` ...: ``ServeSpec``'s fields) and hardware fields
(``hbm.capacity``, ``sram.capacity``, ``hbm.bandwidth`` ...), each point one ``memsim.serve`` run on a
local process pool, into ``results.csv``: the swept values (quantities also in base units) and the
point's ``serve.json`` flattened, or its error. ``capacity`` reads a "requests a second at an SLO" table
off the results: for each setting of the other swept fields, the highest swept rate whose p90 time to
first token (or another percentile's column) meets the SLO.
"""
from __future__ import annotations

import math
import os
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd

from memsim import __version__, limits, sweep_store
from memsim.atomic import atomic_write_text
from memsim.errors import ConfigError, MemsimError, run_field
from memsim.inputs import serving_files
from memsim.pools import pool_size, worker_start
from memsim.runspec import check, defaults
from memsim.runspec import parse_value as runspec_parse
from memsim.servespec import sweepable
from memsim.serving import simulate_serving
from memsim.sweep import flatten, points, size
from memsim.sweep_values import with_numbers

SERVE_FIELDS = ("hw", "model", "weight_dtype", "kv_dtype", "tp", "pp")  # the sweep command's own options a serve run takes


def keywords() -> dict[str, Any]:
    """The serving fields a point may sweep or fix (``ServeSpec``'s, by name)."""
    return sweepable()


def parse_value(name: str, f: Any, value: str) -> Any:
    """A swept value given as text, as its field's type and checked against its declaration."""
    return check(f, runspec_parse(f, value))


def split(point: dict[str, str]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """A point's serving keywords (typed) and its hardware overrides."""
    known = keywords()
    options, sets = {}, []
    for name, value in point.items():
        if name in known:
            options[name] = parse_value(name, known[name], value)
        elif "." in name:
            sets.append((name, value))
        else:
            raise ConfigError(f"{name}: neither a serving keyword ({', '.join(sorted(known))}) nor a hardware field",
                              field=run_field("set"))
    return options, sets


def run_point(base: dict[str, Any], point: dict[str, str]) -> dict[str, Any]:
    """One serving run; never raises: a failure is the row's ``error``."""

    row: dict[str, Any] = with_numbers(point)
    try:
        options, sets = split(point)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = simulate_serving(**{**base, **options, "set": [*base.get("set", ()), *sets]})
        return {**row, "error": "", **flatten(result.summary)}
    except MemsimError as exc:
        return {**row, "error": exc.one_line()}
    except Exception as exc:  # a sweep records every failure and goes on
        return {**row, "error": f"{type(exc).__name__}: {exc}"}


def run(base: dict[str, Any], sweeps: dict[str, list[str]], out: Path, workers: int | None = None) -> pd.DataFrame:
    """Every point, on ``workers`` processes; writes ``out/results.csv`` (in the points' order) and returns it."""


    limits.check(size(sweeps), limits.MAX_POINTS, "points", run_field("set"))
    todo = list(points(sweeps))
    for point in todo[:1]:
        split(point)  # a misnamed field: one line before any point runs
    known = keywords()
    for name, values in sweeps.items():
        for value in values if name in known else ():
            parse_value(name, known[name], value)
    sweep_store.check_folder(out, files_read(base, sweeps))
    n = pool_size(workers, size(sweeps))
    out.mkdir(parents=True, exist_ok=True)
    with sweep_store.Lock(out):
        sweep_store.claim(out, experiment(base, sweeps))
        if n == 1:
            rows = [run_point(base, p) for p in todo]
        else:
            with ProcessPoolExecutor(n, initializer=worker_start, initargs=(os.getpid(),)) as pool:
                rows = list(pool.map(run_point, [base] * len(todo), todo))
        frame = pd.DataFrame(rows)
        atomic_write_text(out / "results.csv", frame.to_csv(index=False))
    return frame


def experiment(base: dict[str, Any], sweeps: dict[str, list[str]]) -> dict[str, Any]:
    """What the folder of a serving sweep records (``sweep_store.claim``): a folder holds one
    experiment, so a plain sweep's folder, or another serving sweep's, is refused."""
    return {"serve": True, "base": {k: v for k, v in sorted(base.items()) if k != "set"},
            "set": sorted(map(list, base.get("set", ()))), "swept": sorted(sweeps), "memsim": __version__}


def files_read(base: dict[str, Any], sweeps: dict[str, list[str]]) -> list[Path]:
    """The files the points read: every chip, model and stack file the base or a swept value names."""
    found: list[Path] = []
    for hw in sweeps.get("hw", [base.get("hw", "h100-sxm")]):
        for model in sweeps.get("model", [base.get("model", "llama-3.1-8b")]):
            for stack in sweeps.get("stack", [base.get("stack", "auto")]):
                found += serving_files(hw, model, stack)
    return found


def capacity(results: pd.DataFrame, column: str = "ttft_s_p90") -> pd.DataFrame:
    """For each setting of the fields swept besides ``rate``, the highest swept rate whose ``column`` meets the
    point's own SLO (``slo.ttft_s``: ``--set slo_ttft=...``), with its throughput (NaN: no rate met it)."""
    if "rate" not in results or column not in results:
        return pd.DataFrame()
    slo = results["slo.tpot_s" if column.startswith("tpot") else "slo.ttft_s"]
    ok = results[(results["error"].fillna("") == "") & (results[column] <= slo)]
    others = [c for c in _swept(results) if c != "rate" and not c.endswith(("_bytes", "_bytes_per_s", "_s"))]
    groups = results.groupby(others, sort=False) if others else [((), results)]
    rows = []
    for key, group in groups:
        met = ok.loc[ok.index.intersection(group.index)]
        best = met.loc[met.rate.astype(float).idxmax()] if len(met) else None
        rows.append({**dict(zip(others, key if isinstance(key, tuple) else (key,))),
                     "rate_at_slo": float(best.rate) if best is not None else math.nan,
                     "output_tokens_per_s": float(best.output_tokens_per_s) if best is not None else math.nan})
    return pd.DataFrame(rows)


def command(base: dict[str, Any], sweeps: dict[str, list[str]], out: Path, workers: int | None) -> list[str]:
    """``memsim sweep --serve``: run the points; the console's lines."""
    lines = [f"sweeping serving runs over {', '.join(f'{k} ({len(v)})' for k, v in sweeps.items())}: "
             f"{size(sweeps)} points -> {out}"]
    frame = run(base, sweeps, out, workers)
    shown = [c for c in (*_swept(frame), "requests_per_s", "output_tokens_per_s", "ttft_s_p90", "tpot_s_p90",
                         "goodput_requests_per_s", "error") if c in frame]
    lines.append(frame[shown].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    table = capacity(frame)
    if len(table):
        lines.append("requests a second at the p90 TTFT SLO:")
        lines.append(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    failed = int((frame["error"].fillna("") != "").sum())
    lines.append(f"wrote {out / 'results.csv'}: {len(frame)} points, {failed} failed")
    if failed == len(frame):
        raise MemsimError(f"every point failed; the first: {frame['error'].iloc[0]}", file=str(out / "results.csv"))
    return lines


def _swept(results: pd.DataFrame) -> list[str]:
    """The swept fields: the columns before ``error``."""
    cols = list(results.columns)
    return cols[:cols.index("error")] if "error" in cols else []


def refuse(given: dict[str, Any]) -> None:
    """The sweep command's options a serving sweep does not take yet (option -> value given): refused,
    never ignored."""
    unused = next((option for option, value in given.items() if value), None)
    if unused:
        raise MemsimError("a serving sweep does not take it yet", field=unused)


def base_of(spec_values: dict[str, Any]) -> dict[str, Any]:
    """The sweep command's options a serving run takes; any other run option given is refused."""
    given = {k: v for k, v in spec_values.items() if v is not None and v != defaults().get(k) and v != ()}
    extra = sorted(set(given) - set(SERVE_FIELDS))
    if extra:
        raise ConfigError(f"not an option of a serving run: sweep serving keywords with {run_field('set')}",
                          field=run_field(extra[0]))
    return {k: spec_values[k] for k in SERVE_FIELDS if spec_values.get(k) is not None}
