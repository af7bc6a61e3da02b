"""Sweeps of serving runs (``memsim sweep --serve``): the cartesian product of swept serving keywords
(``rate``, ``max_tokens``, ``scheduler``, ``replicas`` ...: ``ServeSpec``'s fields) and hardware fields
(``hbm.capacity``, ``sram.capacity``, ``hbm.bandwidth`` ...), each point one ``memsim.serve`` run on a
local process pool, into ``results.csv``: the swept values (quantities also in base units) and the
point's ``serve.json`` flattened, or its error. ``capacity`` reads a "requests a second at an SLO" table
off the results: for each setting of the other swept fields, the highest swept rate whose p90 time to
first token and time per output token meet the SLOs, marked where no higher rate was swept.
"""
from __future__ import annotations

import math
from dataclasses import fields
from pathlib import Path
from typing import Any

import pandas as pd

from memsim.core.errors import ConfigError, MemsimError, run_field
from memsim.run.inputs import FILE_FIELDS
from memsim.run.machine import load_chip
from memsim.run.runspec import check, defaults
from memsim.run.runspec import parse_value as runspec_parse
from memsim.serving.capacity import AT_LEAST, BELOW, FOUND
from memsim.serving.report import BEHIND
from memsim.serving.spec import ServeSpec, sweepable
from memsim.sweep import store as sweep_store
from memsim.sweep.runner import Kind, points, run_sweep, size

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


def point_spec(base: dict[str, Any], point: dict[str, str], positions: dict[str, int] | None = None) -> ServeSpec:
    """A point's serving run: its swept keywords over the base's, its swept hardware fields joining the
    base's overrides (``positions``: unused; a serving run fills no model-dependent defaults)."""
    options, sets = split(point)
    return ServeSpec.make({**base, **options, "set": [*base.get("set", ()), *sets]})


def check_points(base: dict[str, Any], sweeps: dict[str, list[str]], positions: dict, digests: dict) -> ServeSpec:
    """Every swept value checked against its field, every file the points name hashed and every chip
    loaded with each swept hardware path, before any point runs; the first point's spec."""
    known = keywords()
    for name, values in sweeps.items():
        for value in values if name in known else ():
            parse_value(name, known[name], value)
    first = point_spec(base, next(points(sweeps)))
    for field in FILE_FIELDS:
        for named in sweeps.get(field, [getattr(first, field, None)]):
            sweep_store.file_digest(field, named, digests)
    fixed = tuple(kv for kv in first.set if kv[0] not in sweeps)
    for hw in sweeps.get("hw", [first.hw]):
        load_chip(hw, fixed, None)
        for path in (p for p in sweeps if "." in p):
            load_chip(hw, (*fixed, (path, sweeps[path][0])), None)
    return first


SERVING = Kind(spec=point_spec, check=check_points, defaults=lambda: {f.name: f.default for f in fields(ServeSpec)},
               marks=(("serve", True),))


def run(base: dict[str, Any], sweeps: dict[str, list[str]], out: Path, workers: int | None = None,
        scheduler: Any = None, keep: bool = False, progress: bool = False, read: list[Path] | None = None) -> pd.DataFrame:
    """Every point not already in ``out``, on ``workers`` processes or a Dask ``scheduler``, as a sweep of
    runs is (``sweep.run_sweep``: resumed, ``keep`` writing each point's files under ``out/points``);
    returns results.csv, in the points' order."""
    run_sweep(base, sweeps, out, workers, scheduler, keep, progress, read or [], kind=SERVING)
    return pd.read_csv(out / "results.csv", dtype={"error": str})  # an error column of no errors is text, not NaN


def capacity(results: pd.DataFrame, percentile: int = 90) -> pd.DataFrame:
    """For each setting of the fields swept besides ``rate``, the highest swept rate that meets the point's own
    SLOs (``slo.ttft_s``, ``slo.tpot_s``: ``--set slo_ttft=...``) at ``percentile`` and keeps up with its arrivals
    (``serving.capacity.judge``'s rule), with its throughput, and ``bound``: ``found`` where a higher swept rate
    failed, ``at least`` where the highest swept rate met them (the capacity may be higher), ``below`` where none
    did (NaN rate)."""
    ttft, tpot = f"ttft_s_p{percentile}", f"tpot_s_p{percentile}"
    if "rate" not in results or ttft not in results:
        return pd.DataFrame()
    keeps_up = results.served_requests_per_s >= BEHIND * results.offered_requests_per_s \
        if "served_requests_per_s" in results else True
    met = (results["error"].fillna("") == "") & (results[ttft] <= results["slo.ttft_s"]) & \
        (results[tpot] <= results["slo.tpot_s"]) & keeps_up
    others = [c for c in _swept(results) if c != "rate" and not c.endswith(("_bytes", "_bytes_per_s", "_s"))]
    groups = results.groupby(others, sort=False) if others else [((), results)]
    rows = []
    for key, group in groups:
        rates = group.rate.astype(float)
        ok = rates[met.loc[group.index]]
        best = group.loc[[ok.idxmax()]].iloc[0] if len(ok) else None
        bound = BELOW if best is None else FOUND if (rates[~met.loc[group.index]] > ok.max()).any() else AT_LEAST
        rows.append({**dict(zip(others, key if isinstance(key, tuple) else (key,))),
                     "rate_at_slo": float(best.rate) if best is not None else math.nan, "bound": bound,
                     "output_tokens_per_s": float(best.output_tokens_per_s) if best is not None else math.nan})
    return pd.DataFrame(rows)


def command(base: dict[str, Any], sweeps: dict[str, list[str]], out: Path, workers: int | None,
            scheduler: Any = None, keep: bool = False, progress: bool = False, read: list[Path] | None = None) -> list[str]:
    """``memsim sweep --serve``: run the points; the console's lines."""
    lines = [f"sweeping serving runs over {', '.join(f'{k} ({len(v)})' for k, v in sweeps.items())}: "
             f"{size(sweeps)} points -> {out}"]
    frame = run(base, sweeps, out, workers, scheduler, keep, progress, read)
    shown = [c for c in (*_swept(frame), "requests_per_s", "output_tokens_per_s", "ttft_s_p90", "tpot_s_p90",
                         "goodput_requests_per_s", "error") if c in frame]
    lines.append(frame[shown].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    table = capacity(frame)
    if len(table):
        lines.append("requests a second within the p90 TTFT and TPOT SLOs (at least: the highest rate swept met "
                     "them; memsim capacity searches past it):")
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


def base_of(spec_values: dict[str, Any]) -> dict[str, Any]:
    """The sweep command's options a serving run takes; any other run option given is refused."""
    given = {k: v for k, v in spec_values.items() if v is not None and v != defaults().get(k) and v != ()}
    extra = sorted(set(given) - set(SERVE_FIELDS))
    if extra:
        raise ConfigError(f"not an option of a serving run: sweep serving keywords with {run_field('set')}",
                          field=run_field(extra[0]))
    return {k: spec_values[k] for k in SERVE_FIELDS if spec_values.get(k) is not None}
