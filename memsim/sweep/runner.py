"""Parameter sweeps: the cartesian product of swept fields, run on a local process pool or a
Dask cluster, with every finished point kept.

Orchestration only: each point is an ordinary ``memsim.simulate`` call. Every swept value, chip,
hardware path and file is checked before any point runs. The product is walked lazily, a few
points in flight a worker. A sweep is one experiment: the contents of every file it reads are part
of it, and a file edited during the sweep stops it with one line. Two points that are the same run
are one point. Finished points are kept by ``sweep_store`` (keyed by everything their result
depends on), so a re-run resumes; ``--keep`` outputs are kept under the point's key. A point that
fails in simulation records its error in its row.
"""
from __future__ import annotations

import contextlib
import itertools
import math
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from memsim.core import limits, pools, progress, units
from memsim.core.errors import ConfigError, MemsimError, MemsimWarning, run_field
from memsim.core.pools import PER_WORKER, pool_size, worker_cap, worker_start  # noqa: F401  (as callers know them)
from memsim.hardware.loader import number_text
from memsim.report import flatten
from memsim.run import runspec
from memsim.run.api import fill_defaults, run
from memsim.run.chipfile import chip_path
from memsim.run.inputs import FILE_FIELDS
from memsim.run.machine import load_chip
from memsim.run.runspec import RunSpec
from memsim.serving.serve import serve_spec
from memsim.serving.spec import ServeSpec
from memsim.sweep import store as sweep_store
from memsim.sweep.store import Lock, Results
from memsim.sweep.values import ALIASES, RUN_FIELDS, expand, parse_sweeps, read_sweep_file, with_numbers
from memsim.workload import model_config


@dataclass(frozen=True)
class Task:
    """One point to run: its swept values, its run, its key, where ``--keep`` writes it, and the
    content hash of each file it reads."""

    point: dict[str, str]
    spec: Any  # a RunSpec, or a ServeSpec for a serving sweep
    key: str
    keep: str | None
    contents: tuple[tuple[str, str, str | None], ...]

    def call(self) -> tuple:
        return self.spec, self.point, self.key, self.keep, self.contents


@dataclass(frozen=True)
class Kind:
    """What a sweep's points are: runs (``RUNS``) or serving runs (``serve_sweep.SERVING``); one runner,
    one store, one pool or cluster for both."""

    spec: Callable[[dict[str, Any], dict[str, str], dict[str, int]], Any]  # base, point, positions -> a point's spec
    check: Callable[[dict[str, Any], dict[str, list[str]], dict, dict], Any]  # checks all; the first point's spec
    defaults: Callable[[], dict[str, Any]]  # the spec's fields and defaults
    marks: tuple[tuple[str, Any], ...] = ()  # what its folder's record says besides the experiment (its kind)


def points(sweeps: dict[str, list[str]]) -> Iterator[dict[str, str]]:
    keys = list(sweeps)
    for combo in itertools.product(*(sweeps[k] for k in keys)):
        yield dict(zip(keys, combo))


def size(sweeps: dict[str, list[str]]) -> int:
    return math.prod(len(v) for v in sweeps.values())


def point_spec(base: dict[str, Any], point: dict[str, str], positions: dict[str, int] | None = None) -> RunSpec:
    """The resolved run of one point: swept run fields replace the base's, swept hardware fields
    join its overrides (``positions``: see ``api.fill_defaults``)."""
    kwargs = dict(base)
    sets = list(runspec.overrides(kwargs.pop("set", ())))
    for name, value in point.items():
        if name in RUN_FIELDS:
            kwargs[name] = runspec.parse_value(RUN_FIELDS[name], value)
        else:
            sets.append((name, value))
    return fill_defaults(RunSpec.make({**kwargs, "set": tuple(sets)}), positions)


def run_point(spec: RunSpec, point: dict[str, str], key: str, keep: str | None = None,
              contents: tuple = ()) -> dict[str, Any]:
    """Simulate one point; never raises: a failure becomes the row's ``error``, a warning the run
    gives (a spill, a context past the model's positions) its ``warnings``, and a file that does not
    hold its recorded ``contents`` (field, value, hash) before or after the run, the row's ``changed``."""
    row = {**with_numbers(point), "run_key": key}
    changed = _changed(contents)
    if changed:
        return {**row, "changed": changed}
    try:
        with warnings.catch_warnings(record=True) as caught:  # a point's warnings are its row's, not the console's
            warnings.simplefilter("always", MemsimWarning)
            result = serve_spec(spec) if isinstance(spec, ServeSpec) else run(spec)
        said = [str(w.message) for w in caught if issubclass(w.category, MemsimWarning)]
        if keep:
            result.write(Path(keep))
        row = {**row, "error": "", **({"outputs": str(Path("points") / Path(keep).name)} if keep else {}),
               **({"warnings": " | ".join(said)} if said else {}), **flatten(result.summary.as_dict())}
    except MemsimError as exc:
        row = {**row, "error": exc.one_line()}
    except Exception as exc:  # a sweep records every failure and goes on
        row = {**row, "error": f"{type(exc).__name__}: {exc}"}
    changed = _changed(contents)
    return {**row, "changed": changed} if changed else row


def _changed(contents: tuple) -> str | None:
    """The first file of ``contents`` whose content is not its recorded hash (or cannot be read)."""
    for field, value, want in contents:
        try:
            got = sweep_store.file_digest(field, value)
        except MemsimError as exc:
            return exc.one_line()
        if got != want:
            return f"{value}: changed while the sweep ran"
    return None


def run_sweep(base: dict[str, Any], sweeps: dict[str, list[str]], out: Path, workers: int | None = None,
              scheduler: Any = None, keep: bool = False, progress: bool = True, read: Iterable[Path] = (),
              announce: Callable[[], None] = lambda: None, kind: Kind | None = None) -> Results:
    """Run every point of ``kind`` (default: runs) not already in ``out`` (which holds none of the files
    read: the points' and ``read``); ``announce`` is called once every value, chip, file and the folder
    passed their checks."""
    kind = kind or RUNS
    pools.check_workers(workers)
    out, fields, total = Path(out), list(sweeps), size(sweeps)
    limits.check(total, limits.MAX_POINTS, "points", run_field("set"))
    positions: dict[str, int] = {}
    digests: dict = {}
    first = kind.check(base, sweeps, positions, digests)
    sweep_store.check_folder(out, [*sweep_store.files_read(first, sweeps), *read])
    client = pools.connect(scheduler) if scheduler is not None else None
    announce()
    experiment = {**_experiment(first, fields, digests, kind), **dict(kind.marks)}
    experiment[sweep_store.SWEPT_FILES] = {f"{f}={v}": sweep_store.file_digest(f, v, digests)
                                           for f in fields if f in FILE_FIELDS for v in sweeps[f]}
    out.mkdir(parents=True, exist_ok=True)
    with Lock(out):
        sweep_store.claim(out, experiment)
        results = Results(out, fields, {})
        bar = _bar(total, progress)
        todo = _tasks(kind, base, sweeps, positions, digests, results, bar, out if keep else None)
        try:
            pools.run_each(run_point, (task.call() for task in todo), lambda row: _record(results, row, bar),
                           workers=pool_size(workers, total), client=client, file=str(out),
                           lost=f"; the finished points are kept: run again, with fewer {run_field('workers')}, to resume")
        finally:
            bar.close()
            results.write_csv()
    return results


def _check(base: dict[str, Any], sweeps: dict[str, list[str]], positions: dict, digests: dict) -> RunSpec:
    """Check every swept run value on its own, and load every chip and hash every file the sweep
    names; returns the first point's run."""
    for name, values in sweeps.items():
        if name in RUN_FIELDS:
            for value in values:
                runspec.check(RUN_FIELDS[name], runspec.parse_value(RUN_FIELDS[name], value))
    first = point_spec(base, next(points(sweeps)), positions)
    for field in FILE_FIELDS:
        for named in sweeps.get(field, [getattr(first, field, None)]):
            sweep_store.file_digest(field, named, digests)
            if field == "model" and named is not None and named not in positions:
                positions[named] = model_config(named).max_positions
    _check_chips(first, sweeps)
    return first


def _tasks(kind: Kind, base, sweeps, positions, digests, results: Results, bar, keep_root: Path | None) -> Iterator[Task]:
    """The points still to run, in the sweep's order, made one at a time: a point that is another
    point's run, or already done, is counted and passed over; one whose run cannot be made is
    recorded as an error row."""
    done = results.done()
    for i, point in enumerate(points(sweeps)):
        try:
            spec = kind.spec(base, point, positions)
        except MemsimError as exc:
            key = sweep_store.digest(repr(sorted(point.items())))
            if key not in results.order:
                results.order[key] = i
                if key not in done:
                    results.add({**point, "run_key": key, "error": exc.one_line()})
            bar.update()
            continue
        key = sweep_store.run_key(spec, digests)
        if key in results.order:
            results.repeats += 1
            bar.update()
            continue
        results.order[key] = i
        if key in done:
            results.skipped += 1
            bar.update()
            continue
        named = ((f, getattr(spec, f, None)) for f in FILE_FIELDS)  # a field the spec has and names a file by
        contents = tuple((f, value, digests[f, value]) for f, value in named if value is not None and (f, value) in digests)
        keep = str(keep_root / "points" / key[:16]) if keep_root is not None else None
        yield Task(point, spec, key, keep, contents)


def _record(results: Results, row: dict[str, Any], bar) -> None:
    """Keep a finished point; a file that changed under it stops the sweep."""
    if row.get("changed"):
        raise ConfigError(f"{row['changed']}: the sweep stops, keeping its finished points (a resume is refused "
                          "while the file differs from what the sweep began with)", field=run_field("out"))
    results.add(row)
    bar.update()


def _experiment(spec: Any, swept: list[str], digests: dict, kind: Kind) -> dict[str, Any]:
    """What every point shares: the unswept fields, their files' contents, the swept names."""
    fixed = tuple(f for f in kind.defaults() if f not in swept and f != "set")
    ident = sweep_store.identity(spec, fixed, digests)
    ident["set"] = sorted([k, v] for k, v in spec.set if k not in swept)
    ident["swept"] = sorted(swept)
    return ident


def _check_chips(first: RunSpec, sweeps: dict[str, list[str]]) -> None:
    """Load every distinct chip the sweep names once, and each swept hardware path with its values:
    a file, or a path no chip takes with any value (mistyped), is one error before any point runs."""

    fixed = tuple(kv for kv in first.set if kv[0] not in sweeps)
    chips = [(hw, system) for hw in sweeps.get("hw", [first.hw]) for system in sweeps.get("system", [first.system])]
    for hw, system in chips:  # raises on a file every point would fail on
        load_chip(hw, fixed, system)
    for path in (p for p in sweeps if p not in RUN_FIELDS):
        if not any(_loads(hw, (*fixed, (path, v)), system) for v in sweeps[path] for hw, system in chips):
            load_chip(chips[0][0], (*fixed, (path, sweeps[path][0])), chips[0][1])


def _loads(hw: str, sets: tuple, system: str | None) -> bool:  # a value some chip refuses: an error row
    with contextlib.suppress(MemsimError):
        load_chip(hw, sets, system)
        return True
    return False


def _bar(total: int, enabled: bool):
    """The sweep's bar (``core.progress``): where ``enabled`` and a terminal watches stderr."""
    with progress.shown(enabled):
        return progress.bar(total, "point", "sweep")


RUNS = Kind(spec=point_spec, check=_check, defaults=runspec.defaults)


def sweep_frame(hw: Any = RunSpec.hw, model: str | None = None, sweeps: dict[str, Iterable[Any]] | None = None, *,
                out: str | Path | None = None, workers: int | None = None, **options: Any) -> pd.DataFrame:
    """``memsim sweep`` from Python: the cartesian product of ``sweeps`` (a field, as ``--set`` names it or a
    run field such as ``batch``, to its values: text or numbers in base units), run on ``workers`` processes;
    returns results.csv as a DataFrame. ``out`` keeps the folder (and resumes it), else a temporary one."""
    if not isinstance(sweeps, dict) or not sweeps:
        raise ConfigError(f"expected a dict of each swept field to its values, got {units.shown(sweeps)}",
                          field="sweeps")
    listed = {k: [number_text(k, v) if isinstance(v, (int, float)) and not isinstance(v, bool) and
                  k not in runspec.defaults() else str(v) for v in values] for k, values in sweeps.items()}
    base = {"hw": chip_path(hw), "model": model, **options}
    with contextlib.ExitStack() as stack:
        folder = Path(out) if out is not None else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        run_sweep(base, parse_sweeps([], known=listed), folder, workers, progress=False)
        return pd.read_csv(folder / "results.csv")


__all__ = ["ALIASES", "Results", "expand", "parse_sweeps", "point_spec", "points", "read_sweep_file", "run_point",
           "run_sweep", "size", "sweep_frame"]
