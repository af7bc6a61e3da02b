"""What would raise a deployment's capacity at its SLOs (``memsim explain --serve``): every hardware and
runtime quantity its steps depend on, scaled down and up, ranked by the capacity each change gives.

The quantities are ``memsim explain``'s (``run.quantities``), read off two steps of the deployment's
workload, a prefill of its prompt and a decode at its mean context, so that what a prefill waits for
ranks beside what a decode does; the capacity of the level that holds the KV cache is among them (the
room for sequences in flight). The deployment's own capacity is searched first (``serving.capacity``); each
change is a search of its own from that rate, on the runner the sweeps use (``pools.run_each``: a local
pool or a Dask cluster), and gives one row (``COLUMNS``). The number of chips is left alone: more chips
serve more requests, and the question is what each chip would need. A quantity is ranked by the best
gain any of its factors gives; a censored capacity is said as such (``bound``).
"""
from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import fields
from pathlib import Path
from typing import Any

import pandas as pd

from memsim.core import pools, progress
from memsim.core.atomic import check_output_file
from memsim.core.errors import ConfigError, MemsimError, MemsimWarning, run_field
from memsim.core.pages import lead, meanings
from memsim.run import api
from memsim.run.chipfile import chip_path
from memsim.run.explain import FACTORS, check_factors
from memsim.run.inputs import files
from memsim.run.quantities import Quantity, changed, dtypes_of, quantities, runtime_quantities
from memsim.run.runspec import RunSpec, overrides
from memsim.serving.capacity import CapacitySpec, find
from memsim.serving.spec import ServeSpec
from memsim.sweep.serve import base_of, parse_value, split

COLUMNS = {
    "rank": "the quantity's place, by the best capacity any of its factors gives (1: the most)",
    "quantity": "the hardware or runtime quantity changed, as `memsim explain` names it",
    "kind": "`bandwidth`, `latency`, `capacity`, `peak`, `overhead`, `power` or `runtime`",
    "set": "the change as `memsim capacity` takes it: `--set PATH=VALUE`",
    "value": "the quantity in the deployment, as its YAML writes it",
    "factor": "what it was scaled by",
    "new_value": "the scaled value",
    "capacity_per_s": "the capacity with the change: requests a second within the SLOs (0: none tried met them)",
    "bound": "`found` (bracketed), `at least` (every rate tried met the SLOs) or `below` (none did)",
    "gain": "the capacity over the deployment's own (above 1: more requests a second)",
    "limited_by": "what limits the changed deployment at its capacity",
    "error": "why the changed deployment could not be searched (a KV cache too small for a request, say)",
}


def steps_of(spec: ServeSpec) -> list[RunSpec]:
    """The two steps whose quantities a deployment's capacity can depend on: a prefill of one prompt and a
    decode at the mean context, on the deployment's chips."""
    shared: dict[str, Any] = dict(weight_dtype=spec.weight_dtype, kv_dtype=spec.kv_dtype, precision=spec.precision,
                                  tp=spec.tp, pp=spec.pp, set=spec.set, stack=spec.stack, sensitivity=0)
    return [api.resolve(spec.hw, spec.model, phase="prefill", batch=1, prompt=spec.prompt, **shared),
            api.resolve(spec.hw, spec.model, phase="decode", batch=1, context=spec.prompt + spec.output_tokens // 2,
                        **shared)]


def found_quantities(spec: ServeSpec) -> list[Quantity]:
    """The quantities of ``steps_of``, each once: among them the capacity of every level a step reads, the
    KV cache's home among them (the room for sequences in flight)."""
    out: dict[str, Quantity] = {}
    for run in steps_of(spec):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MemsimWarning)
            result = api.run(run)
        for q in quantities(result.chip, run, result.summary, result.moved, dtypes_of(result.chip, result.graph)):
            if q.kind != "chips":
                out.setdefault(q.name, q)
        for q in runtime_quantities(result.plan.stack, result.summary):
            out.setdefault(q.name, q)
    return list(out.values())


def searched(i: int, spec: ServeSpec, cap: CapacitySpec) -> tuple[int, dict[str, Any]]:
    """A changed deployment's search, with its place (a pool's job: a few fields travel back)."""
    try:
        result = find(spec, cap)
    except MemsimError as exc:
        return i, {"error": f"{exc.field}: {exc.message}" if exc.field else exc.message}
    at = result.at
    return i, {"capacity_per_s": result.capacity.rate, "bound": result.capacity.bound,
               "limited_by": at.limit.by if at is not None and at.limit is not None else "", "error": ""}


def explain_capacity(spec: ServeSpec, cap: CapacitySpec, factors: tuple[float, ...] = FACTORS,
                     workers: int | None = None, scheduler: Any = None) -> pd.DataFrame:
    """The rows (``COLUMNS``) for ``spec``'s deployment, ranked; ``attrs`` hold its own capacity (``capacity``,
    ``bound``, ``text``) and what limits it there (``limited_by``)."""
    check_factors(factors, "factors")
    factors = tuple(dict.fromkeys(factors))
    base = find(spec, cap)
    start = min(max(base.capacity.rate, cap.least), cap.most)
    jobs: list[tuple[Quantity, float, int, ServeSpec]] = []
    for q in found_quantities(spec):
        for f in factors:
            value = q.scaled(f)
            if value is not None:
                jobs.append((q, f, value, changed(spec, q, value)))
    client = pools.connect(scheduler) if scheduler is not None else None
    got: dict[int, dict[str, Any]] = {}
    from_base = dataclasses.replace(cap, start=start)
    with progress.bar(len(jobs), "search", "capacity with each change") as shown:
        def done(finished: tuple[int, dict[str, Any]]) -> None:
            got.update([finished])
            shown.update()

        pools.run_each(searched, iter((i, job[3], from_base) for i, job in enumerate(jobs)), done,
                       workers=pools.pool_size(workers, len(jobs)), client=client)
    c0 = base.capacity.rate
    rows = [{"quantity": q.name, "kind": q.kind, "set": f"--set {q.path}={q.written(value)}",
             "value": q.written(q.value), "factor": f, "new_value": q.written(value), **got[i],
             "gain": got[i]["capacity_per_s"] / c0 if "capacity_per_s" in got[i] and c0 else math.nan}
            for i, (q, f, value, _) in enumerate(jobs)]
    frame = pd.DataFrame(rows, columns=[c for c in COLUMNS if c != "rank"])
    frame[["bound", "limited_by", "error"]] = frame[["bound", "limited_by", "error"]].fillna("")
    best = frame.groupby("quantity", sort=False)["capacity_per_s"].max().fillna(-1.0)
    order = list(best.sort_values(ascending=False, kind="stable").index)
    frame.insert(0, "rank", [order.index(q) + 1 for q in frame["quantity"]])
    frame = frame.sort_values(["rank", "factor"], kind="stable").reset_index(drop=True)
    at = base.at
    frame.attrs.update(capacity=c0, bound=base.capacity.bound, text=base.capacity.text(),
                       limited_by=at.limit.by if at is not None and at.limit is not None else "",
                       header=f"{spec.hw}  {spec.model}  {spec.layout}; prompt {spec.prompt}, output "
                              f"{spec.output_tokens} tokens; p{cap.percentile} TTFT <= {spec.slo_ttft:g} s and TPOT <= "
                              f"{spec.slo_tpot * 1e3:g} ms")
    return frame


def table(frame: pd.DataFrame) -> str:
    """The console's table: a line per quantity, its factors side by side, in requests a second."""
    lines = [frame.attrs.get("header", ""),
             f"  capacity {frame.attrs.get('text', '')}; limited by {frame.attrs.get('limited_by', '') or 'nothing'}",
             f"  {'rank':>4}  {'quantity':<32} {'value':>14}  capacity with the change (req/s)"]
    for (rank, name), rows in frame.groupby(["rank", "quantity"], sort=True):
        parts = []
        for _, r in rows.iterrows():
            if r["error"]:
                parts.append(f"x{r['factor']:g}: fails ({r['error'][:60]})")
            else:
                said = {"at least": ">= ", "below": "< "}.get(r["bound"], "")
                parts.append(f"x{r['factor']:g}: {said}{r['capacity_per_s']:.4g} ({r['gain']:.2f}x)")
        lines.append(f"  {rank:>4}  {name:<32} {rows['value'].iloc[0]:>14}  " + "   ".join(parts))
    return "\n".join(lines)



def command(values: dict[str, Any], factors: tuple[float, ...], workers: int | None, scheduler: Any,
            out: Any = None, keep: bool = False, output: Any = None) -> pd.DataFrame:
    """``memsim explain --serve``: explain's options a serving run shares (``--hw``, ``--model``, ``--tp`` ...),
    and its serving (``ServeSpec``) and search (``CapacitySpec``) keywords as ``--set NAME=VALUE`` beside the
    hardware's ``--set PATH=VALUE``, as ``memsim sweep --serve`` takes them; the ranked rows."""
    if out is not None or keep:
        raise ConfigError(f"keeps no experiment folder when ranking by capacity: write the table with "
                          f"{run_field('output')}",
                          field=run_field("out" if out is not None else "keep"))
    own = {f.name: f for f in fields(CapacitySpec)}  # the search's own (its duration and warm-up, not a run's)
    given = overrides(values.get("set") or ())
    search = {name: parse_value(name, own[name], value) for name, value in given if name in own}
    serving, hardware = split({name: value for name, value in given if name not in own})
    base = base_of({**values, "set": ()})
    spec = ServeSpec.make({**base, **serving, "hw": chip_path(base["hw"]), "set": hardware})
    if output is not None:  # the table's file, checked before anything runs
        check_output_file(Path(output), "--output", files(spec))
    return explain_capacity(spec, CapacitySpec(**search), factors, workers, scheduler)


def reference() -> str:
    """The section of docs/explain.md on ``memsim explain --serve``, from ``COLUMNS``."""
    head = lead(__doc__)
    rows = meanings(COLUMNS)
    return (f"\n## `memsim explain --serve`: what would raise capacity at an SLO\n\n{head}\n\nIt takes explain's "
            f"options that a serving run shares (`--hw`, `--model`, `--weight-dtype`, `--kv-dtype`, `--tp`, `--pp`, "
            f"`--stack`, `--set PATH=VALUE` for the chip), `--factor`, `--workers`, `--scheduler` and `-o FILE`; "
            f"`memsim capacity`'s serving and search keywords are given as `--set NAME=VALUE` (`--set prompt=1024 "
            f"--set slo_ttft=0.5 --set duration=30`), as `memsim sweep --serve` takes them. The table's columns:\n\n"
            f"{rows}\n")
