"""``memsim explain`` as an experiment: the table alone, or an experiment folder that resumes.

``run.explain`` works out what to rerun and ranks what the reruns give; it asks for the reruns
through a seam (``explain_spec``'s ``reruns``). Without a folder they run on the experiments' one
runner (``pools.run_each``: a local pool or a Dask cluster). With ``out`` they run on the same
runner into the sweeps' store (``sweep.store``, kind ``EXPLAIN``): the folder records its
experiment in ``explain.json`` (the run's every field, its files' contents, the factors and the
memsim version), each rerun's outcome is appended to ``points.jsonl`` as it finishes, and
``explain.csv`` is written whole at the end. Run again, the finished reruns are read back, not
rerun. A folder that holds another experiment (another run, other factors, a sweep's results) or
files of anyone else is refused in one line, and one writer at a time holds the folder's lock.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from memsim.core import pools, progress, units
from memsim.core.atomic import atomic_write_text
from memsim.core.errors import ConfigError, run_field
from memsim.run import api, inputs
from memsim.run import explain as whatif
from memsim.run.runspec import RunSpec
from memsim.sweep import store
from memsim.sweep.store import EXPLAIN

TABLE = "explain.csv"


def explain(hw: str = RunSpec.hw, model: str | None = None, *, factors: tuple[float, ...] = (0.5, 2.0),
            workers: int | None = None, scheduler: Any = None, out: str | Path | None = None, keep: bool = False,
            **options: Any) -> pd.DataFrame:
    """What would fix a run (``memsim.run.explain``): every hardware quantity it depends on scaled by
    each of ``factors``, one row each (explain.csv's columns), ranked by the best speed-up of each
    quantity. The run is described as for ``simulate``; ``workers``: local processes for the
    reruns (default: every core); ``scheduler``: a Dask scheduler's address (or a client) to run
    them on instead, as ``memsim sweep`` does; ``out``: an experiment folder to resume in (and with
    ``keep``, to hold each rerun's outputs)."""
    return explain_run(api.resolve(hw, model, **options), factors, workers, scheduler, out, keep)


def explain_run(spec: RunSpec, factors: tuple[float, ...] = (0.5, 2.0), workers: int | None = None,
                scheduler: Any = None, out: str | Path | None = None, keep: bool = False,
                announce: Callable[[], None] = lambda: None) -> pd.DataFrame:
    """``explain`` for a resolved ``RunSpec`` (see ``resolve``); ``announce`` is called once the
    factors, the folder and the scheduler passed their checks."""
    if not isinstance(spec, RunSpec):
        raise ConfigError(f"expected a RunSpec (memsim.resolve), got {units.shown(spec)}", field="spec")
    whatif.check_factors(tuple(factors), "factors")
    pools.check_workers(workers)
    if keep and out is None:
        raise ConfigError(f"keeps the reruns' outputs in an experiment folder: give {run_field('out')} too",
                          field=run_field("keep"))
    if out is None:
        announce()
        return whatif.explain_spec(spec, tuple(factors), workers, scheduler)
    folder = Path(out)
    store.check_folder(folder, inputs.files(spec), EXPLAIN)
    client = pools.connect(scheduler) if scheduler is not None else None  # refused before anything is written
    announce()
    digests: dict = {}  # each file's content hashed once, for the experiment and every rerun's key
    experiment = {"run": store.identity(spec, memo=digests), "factors": sorted(set(float(f) for f in factors))}
    folder.mkdir(parents=True, exist_ok=True)
    with store.Lock(folder):
        store.claim(folder, experiment, EXPLAIN)
        log = store.Log(folder / "points.jsonl")
        frame = whatif.explain_spec(spec, tuple(factors), reruns=lambda specs: _reruns(specs, log, folder, keep,
                                                                                        workers, client, digests))
        atomic_write_text(folder / TABLE, frame.to_csv(index=False))
    return frame


def _reruns(specs: list[RunSpec], log: store.Log, folder: Path, keep: bool, workers: int | None,
            client: Any, digests: dict) -> list[dict[str, Any]]:
    """Each spec's outcome, in order: read back from the folder's log where it finished before,
    else run on the runner and appended to the log as it finishes."""
    keys = [store.run_key(s, digests) for s in specs]
    done = {row["run_key"]: row["outcome"] for row in log.rows if isinstance(row.get("outcome"), dict)}
    todo = [(i, s, str(folder / "points" / k[:16]) if keep else None)
            for i, (s, k) in enumerate(zip(specs, keys)) if k not in done]

    def record(finished: tuple[int, dict[str, Any]]) -> None:
        i, outcome = finished
        row: dict[str, Any] = {"run_key": keys[i], "outcome": outcome}
        if keep and "error" not in outcome:
            row["outputs"] = str(Path("points") / keys[i][:16])
        log.append(row)
        done[keys[i]] = outcome

    with progress.bar(len(todo), "run", "explain's reruns") as shown:
        def recorded(finished: tuple[int, dict[str, Any]]) -> None:
            record(finished)
            shown.update()

        pools.run_each(whatif.numbered_outcome, iter(todo), recorded, workers=pools.pool_size(workers, len(todo)),
                       client=client, file=str(folder),
                       lost=f"; the finished reruns are kept: run again, with fewer {run_field('workers')}, to resume")
    return [done[k] for k in keys]
