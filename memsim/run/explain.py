"""What would fix a run (``memsim explain``): every hardware and runtime quantity it depends on, scaled down and
up, ranked by what it gains.

For a run, ``run.quantities`` lists what can change its step time, hardware and runtime alike, so
that what a faster runtime would give ranks beside what faster hardware would.
``explain`` reruns the step with each quantity scaled by each factor (by default x0.5 and x2;
the others as they were) through the ordinary pipeline, on the runner the sweeps use (``pools.run_each``: a local pool or
a Dask cluster), and returns one row per quantity and factor (``COLUMNS``), the quantities
ranked by the best speed-up any of their factors gives. Orchestration only: every rerun is a
plain run with one ``--set`` more, as ``memsim run`` would make it.
"""
from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable
from typing import Any

import pandas as pd

from memsim.core import limits, pools, progress, units
from memsim.core.errors import MemsimError, MemsimWarning
from memsim.core.pages import lead, meanings
from memsim.report.summary_fields import Summary
from memsim.report.summary_records import ABSENT
from memsim.run import api, sensitivity
from memsim.run import table as console_table
from memsim.run.quantities import Quantity, changed, dtypes_of, quantities, runtime_quantities
from memsim.run.runspec import RunSpec

FACTORS = (0.5, 2.0)
# The columns of explain.csv, in order, and what each holds (docs/explain.md is written from them).
COLUMNS = {
    "rank": "the quantity's place, by the best speed-up any of its factors gives (1: the most); empty for an "
            "estimate",
    "quantity": "the hardware or runtime quantity changed, as the hardware YAML names it (`levels[hbm].bandwidth`, "
                "`compute.peak.bf16`, `execution.power_cap`, `tp` for the grid's tensor-parallel ranks) or, after "
                "`stack.`, the stack's (`stack.step.fixed`, `stack.collectives[nccl-ring-ll].call`)",
    "kind": "what it is: `bandwidth`, `latency`, `capacity`, `peak`, `overhead`, `power`, `chips` or `runtime` (the "
            "software's: a launch's host cost, the host's step work, a collective library's call); `estimate` for"
            " an estimated preset value the step time can depend on, at an end of its range (its rows come last)",
    "set": "the change as `memsim run` takes it: `--set PATH=VALUE`, or `--tp N`",
    "value": "the quantity in the run, as its YAML writes it",
    "factor": "what it was scaled by (an estimate: the end of its range over its value)",
    "new_value": "the scaled value (whole units: a count or a time rounds to the nearest)",
    "step_time_s": "the step time with the change (empty where the run failed: `error` says why)",
    "energy_j": "the energy with the change",
    "speedup": "the run's step time over the changed step time (above 1: faster)",
    "elasticity": "d log(step time) / d log(quantity) between the run and the change: -1 means the step time "
                  "falls in proportion as the quantity grows; 0 means no change",
    "relieves": "the stall that falls most with the change, and by how many milliseconds (empty: none falls)",
    "creates": "the stall that grows most with the change, and by how many milliseconds (empty: none grows)",
    "moves": "for a capacity: the tensors whose home level changes (`3 weight hbm>ddr`; empty: none)",
    "error": "why the changed run failed (a capacity too small to hold the model, say); else empty",
}


def outcome(spec: RunSpec, keep: str | None = None) -> dict[str, Any]:
    """What a rerun gives: its step time, energy, stalls and homes, or the error that stopped it.
    (A pool's job: the summary's few fields travel back, not the run.) ``keep``: a folder to write
    the rerun's own outputs to."""
    try:
        with warnings.catch_warnings():  # a rerun that spills says so in its row's stalls, not on the console
            warnings.simplefilter("ignore", MemsimWarning)
            result = api.run(spec)
        if keep is not None:
            result.write(keep)
    except MemsimError as exc:
        return {"error": _why(exc)}
    s = result.summary
    classes = {name: t.klass for name, t in result.graph.tensors.items()}
    return {"step_time_s": s.step_time_s, "energy_j": s.energy_j.total, "stall_s": s.stall_s,
            "homes": dict(result.plan.homes), "classes": classes}


NOTICE = 1e-3  # a stall that moves by less than this share of the step is not named as relieved or created


def _row(base: dict[str, Any], got: dict[str, Any], capacity: bool, ratio: float, **row: Any) -> dict[str, Any]:
    """A row of explain.csv: the change (``row``), and what the rerun gave (``got``: its outcome or
    its error) against the run (``base``); ``ratio``: the new value over the old, for the elasticity."""
    if "error" in got:
        return {**row, "error": got["error"]}
    t, t0 = got["step_time_s"], base["step_time_s"]
    relieves, creates = _stall_shift(base["stall_s"], got["stall_s"], t0)
    elastic = math.log(t / t0) / math.log(ratio) if t and t0 and ratio > 0 and ratio == ratio else math.nan
    return {**row, "step_time_s": t, "energy_j": got["energy_j"], "speedup": t0 / t if t else math.inf,
            "elasticity": elastic, "relieves": relieves, "creates": creates,
            "moves": _moves(base, got) if capacity else "", "error": ""}


def _why(exc: MemsimError) -> str:
    """Why a changed run failed: its field and message (the hardware file it names is the run's own)."""
    return f"{exc.field}: {exc.message}" if exc.field else exc.message


# The stalls that are not a level or link, as a sentence says what bounds a run.
BOUND_BY = {"bubble": "pipeline bubbles (a stage waiting for the one before)", "overhead": "launch overheads",
            "dependency": "waits for another stream's operators", "tile_buffer": "waits for a free tile buffer",
            "dequant": "dequantising weights", "power": "the power cap's lowered clock"}


def _stall_shift(base: dict[str, float], new: dict[str, float], step_s: float) -> tuple[str, str]:
    delta = {k: d for k in {*base, *new} if abs(d := new.get(k, 0.0) - base.get(k, 0.0)) >= NOTICE * step_s}
    fell = min(delta, key=lambda k: (delta[k], k), default=None)
    grew = max(delta, key=lambda k: (delta[k], k), default=None)
    say = lambda k: f"{k} {delta[k] * 1e3:+.4g} ms"  # in the table's one unit, as its step times
    return (say(fell) if fell is not None and delta[fell] < 0 else "",
            say(grew) if grew is not None and delta[grew] > 0 else "")


def _moves(base: dict[str, Any], new: dict[str, Any]) -> str:
    """Tensors whose home changed, counted by class and move: ``3 weight hbm>ddr``."""
    counts: dict[tuple[str, str, str], int] = {}
    for name, home in new["homes"].items():
        was = base["homes"].get(name)
        if was is not None and was != home:
            key = (new["classes"].get(name, "?"), was, home)
            counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{n} {klass} {a}>{b}" for (klass, a, b), n in sorted(counts.items()))


Reruns = Callable[[list[RunSpec]], list[dict[str, Any]]]  # the reruns' outcomes, in order


def explain_spec(spec: RunSpec, factors: tuple[float, ...] = FACTORS, workers: int | None = None,
                 scheduler: Any = None, reruns: Reruns | None = None) -> pd.DataFrame:
    """The rows of explain.csv (``COLUMNS``) for a resolved ``spec``, ranked; the frame's
    ``attrs`` hold the run's own step time and energy (``step_time_s``, ``energy_j``) and what
    bounds it (``bound``, a sentence). ``reruns`` runs the changed runs (default: on the runner,
    ``workers`` or ``scheduler``; ``memsim.sweep.explaining`` passes its folder's, which resumes)."""
    check_factors(factors, "factors")
    factors = tuple(dict.fromkeys(factors))
    if reruns is None:
        client = pools.connect(scheduler) if scheduler is not None else None  # refused before the run
        reruns = lambda specs: _run_all(specs, workers, client)
    spec = dataclasses.replace(spec, sensitivity=0)  # the estimates' reruns are not explain's
    result = api.run(spec)
    if result.summary.grid_search is not ABSENT:  # the changes keep the grid the search chose
        grid = result.summary.grid
        spec = dataclasses.replace(spec, tp=grid.tp, pp=grid.pp, chips=None)
    base = {"step_time_s": result.summary.step_time_s, "energy_j": result.summary.energy_j.total,
            "stall_s": result.summary.stall_s, "homes": dict(result.plan.homes)}
    found = quantities(result.chip, spec, result.summary, result.moved, dtypes_of(result.chip, result.graph))
    found += runtime_quantities(result.plan.stack, result.summary)
    jobs: dict[RunSpec, None] = {}
    planned: list[tuple[Quantity, float, int, RunSpec | dict[str, Any]]] = []
    for q in found:
        for f in factors:
            value = q.scaled(f)
            if value is None:
                continue
            try:
                todo = changed(spec, q, value)
            except MemsimError as exc:  # a change the run cannot take (more chips than memsim's limit)
                planned.append((q, f, value, {"error": _why(exc)}))
                continue
            jobs.setdefault(todo)
            planned.append((q, f, value, todo))
    # The estimated preset values the step time can depend on, each at both ends of its range.
    ends = []
    for e in api.estimates(spec.hw, spec.set, spec.system, spec.stack):
        if sensitivity.affects_time(e, result.summary, result.moved):
            for end, text in ((e.low, e.written[1]), (e.high, e.written[2])):
                if end != e.value:
                    todo = dataclasses.replace(spec, set=(*spec.set, (e.set_path, text)))
                    jobs.setdefault(todo)
                    ends.append((e, end, text, todo))
    outcomes = dict(zip(jobs, reruns(list(jobs))))
    t0 = base["step_time_s"]
    rows = [_row(base, job if isinstance(job, dict) else outcomes[job], q.kind == "capacity", value / q.value,
                 quantity=q.name, kind=q.kind, value=q.written(q.value), factor=f, new_value=q.written(value),
                 set=f"--tp {value}" if q.kind == "chips" else f"--set {q.path}={q.written(value)}")
            for q, f, value, job in planned]
    ranked = len(rows)
    rows += [_row(base, outcomes[todo], False, end / e.value if e.value else math.nan, quantity=e.path,
                  kind="estimate", value=e.written[0], factor=end / e.value if e.value else math.nan, new_value=text,
                  set=f"--set {e.set_path}={text}")
             for e, end, text, todo in ends]
    frame = pd.DataFrame(rows, columns=[c for c in COLUMNS if c != "rank"])
    said = ["relieves", "creates", "moves", "error"]
    frame[said] = frame[said].fillna("")
    changes = frame.iloc[:ranked]
    best = changes.groupby("quantity", sort=False)["speedup"].max().fillna(0.0)
    order = best.sort_values(ascending=False, kind="stable")
    frame.insert(0, "rank", [order.index.get_loc(q) + 1 if i < ranked else pd.NA
                             for i, q in enumerate(frame["quantity"])])
    frame["rank"] = frame["rank"].astype("Int64")
    frame = frame.sort_values(["rank", "quantity", "factor"], kind="stable", na_position="last").reset_index(drop=True)
    estimated = [t for t in frame.loc[frame["kind"] == "estimate", "step_time_s"] if t == t]
    band = (min([t0, *estimated]), max([t0, *estimated]))
    frame.attrs.update(step_time_s=t0, energy_j=base["energy_j"], bound=bound_sentence(result.summary), band_s=band,
                       estimates=len({e.path for e, *_ in ends}),
                       header=console_table.table(result.summary).splitlines()[0],
                       label="time of the generation" if spec.phase == "generate" else "step time")
    return frame


def check_factors(factors: tuple[float, ...], field: str) -> None:
    """Refuse factors explain cannot scale by (``field`` names them in the error)."""
    if not factors:
        raise MemsimError("explain needs a factor (e.g. 0.5 or 2)", field=field)
    limits.check(len(factors), limits.MAX_FACTORS, "factors", field)
    for f in factors:
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not math.isfinite(f) or f <= 0 or f == 1:
            raise MemsimError(f"{units.shown(f)}: a factor is a finite number above 0 other than 1 (e.g. 0.5 or 2)",
                              field=field)


def _run_all(specs: list[RunSpec], workers: int | None, client: Any = None) -> list[dict[str, Any]]:
    """Each spec's ``outcome``, in order, on the experiments' one runner (``pools.run_each``): the Dask
    ``client``'s cluster, or a local pool of ``workers`` when there are several points, else here."""
    got: dict[int, dict[str, Any]] = {}
    with progress.bar(len(specs), "run", "explain's reruns") as shown:
        def done(finished: tuple[int, dict[str, Any]]) -> None:
            got.update([finished])
            shown.update()

        pools.run_each(numbered_outcome, iter(enumerate(specs)), done, workers=pools.pool_size(workers, len(specs)),
                       client=client)
    return [got[i] for i in range(len(specs))]


def numbered_outcome(i: int, spec: RunSpec, keep: str | None = None) -> tuple[int, dict[str, Any]]:
    """A rerun's ``outcome`` with its place, as the runner hands results back in any order."""
    return i, outcome(spec, keep)


def bound_sentence(summary: Summary) -> str:
    """What bounds the run, in a sentence: compute, or what compute waits for most (over every chip
    simulated, its share of their compute and stall time) and, for a level, whether its traffic is
    mostly the weight stream, re-fetches or the rest."""
    stalls, busy = summary.stall_s, summary.compute_busy_s
    whole = busy + summary.stall_total_s
    if not stalls or busy >= whole / 2:
        return "compute bound: the compute units are busy most of the step"
    cause, waited = max(stalls.items(), key=lambda kv: kv[1])
    share = f"compute waits for it {waited / whole:.0%} of the time" if whole else ""
    level = summary.bytes_per_level.get(cause)
    if level and level.total:
        if summary.weight_bytes >= level.total / 2:
            return f"bound by the weight stream from {cause}: {share}"
        if level.capacity >= level.total / 2:
            return f"bound by re-fetches from {cause} that a larger SRAM would save: {share}"
        return f"bound by {cause}'s traffic: {share}"
    return f"bound by {BOUND_BY.get(cause, cause)}: {share}"


def table(frame: pd.DataFrame) -> str:
    """The console's table: a line per quantity, the factors side by side."""
    t0 = frame.attrs.get("step_time_s", 0.0)
    lines = [frame.attrs.get("header", ""),
             f"  {frame.attrs.get('label', 'step time')} {t0 * 1e3:.4f} ms; {frame.attrs.get('bound', '')}",
             f"  {'rank':>4}  {'quantity':<32} {'value':>14}  change"]
    changes = frame[frame["kind"] != "estimate"]
    for (rank, name), rows in changes.groupby(["rank", "quantity"], sort=True):
        parts = []
        for _, r in rows.iterrows():
            if r["error"]:
                parts.append(f"x{r['factor']:g}: fails ({r['error'][:80]})")
            elif abs(r["speedup"] - 1) < 5e-4:
                parts.append(f"x{r['factor']:g}: no change")
            else:
                extra = f"; {r['relieves'] or r['creates']}" if (r["relieves"] or r["creates"]) else ""
                moved = f"; moves {r['moves']}" if r["moves"] else ""
                parts.append(f"x{r['factor']:g}: {r['step_time_s'] * 1e3:.4g} ms ({r['speedup']:.2f}x{extra}{moved})")
        lines.append(f"  {rank:>4}  {name:<32} {rows['value'].iloc[0]:>14}  " + "   ".join(parts))
    count, (low, high) = frame.attrs.get("estimates", 0), frame.attrs.get("band_s", (t0, t0))
    if count:
        lines.append(f"  estimates: the step time rests on {count} estimated preset values; each alone at the ends "
                     f"of its range puts it between {low * 1e3:.4g} and {high * 1e3:.4g} ms "
                     f"({(high - low) / t0:.0%} of the step)" if t0 else "")
        for name, rows in frame[frame["kind"] == "estimate"].groupby("quantity", sort=False):
            ends = ", ".join(f"{r['new_value']}: {r['step_time_s'] * 1e3:.4g} ms" if not r["error"]
                             else f"{r['new_value']}: fails" for _, r in rows.iterrows())
            lines.append(f"        {name:<32} {rows['value'].iloc[0]:>14}  {ends}")
    return "\n".join(lines)


def reference() -> str:
    """docs/explain.md: what ``memsim explain`` does and every column of explain.csv, from ``COLUMNS``."""
    head = lead(__doc__)
    rows = meanings(COLUMNS)
    return (f"# `memsim explain` and explain.csv\n\n<!-- generated by scripts/reference.py from memsim/run/explain.py: "
            f"do not edit -->\n\n{head}\n\n`memsim explain` takes `memsim run`'s options (but `--sensitivity`), "
            f"`--factor F` (repeatable; default {' and '.join(f'{f:g}' for f in FACTORS)}), `--workers N` (or "
            f"`--scheduler tcp://host:8786`: the reruns on a Dask cluster, on the runner sweeps use) and "
            f"`-o FILE` to write the table as CSV; `memsim plot explain FILE` draws it as a tornado plot. With "
            f"`--out DIR` it is an experiment folder, as a sweep's (`memsim.sweep.explaining`): `explain.csv`, "
            f"`explain.json` (the experiment: the run's every field, its files' contents, the factors, the memsim "
            f"version) and `points.jsonl` (each rerun's outcome as it finishes, fsynced), so a run killed part way "
            f"resumes where it stopped; `--keep` also writes each rerun's outputs under `DIR/points/`. A folder "
            f"holding another experiment (another run, other factors, a sweep) or anyone else's files is refused. "
            f"In Python, `memsim.explain(hw, model, **options)` (with `out=`, `keep=`) returns the table as a "
            f"DataFrame.\n\n"
            f"{rows}\n")
