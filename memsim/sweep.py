"""Parameter sweeps: the cartesian product of swept fields, run on a local process pool or a
Dask cluster, with every finished point kept.

Orchestration only: each point is an ordinary ``memsim.simulate`` call. Finished points are
appended to ``points.jsonl`` (the durable log a re-run resumes from) and ``results.csv`` is
rewritten atomically after each one, so a killed sweep loses nothing that finished. A point
that fails records its error in its row and the sweep goes on.
"""
from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import pandas as pd

from memsim import units
from memsim.atomic import atomic_write_text
from memsim.errors import ConfigError, MemsimError
from memsim.files import load_yaml

# Sweepable fields that are arguments of the run rather than hardware fields.
RUN_FIELDS = {"hw": str, "model": str, "phase": str, "batch": int, "context": int, "prompt": int,
              "generate": int, "weight_dtype": str, "kv_dtype": str, "group_size": int, "tp": int, "pp": int,
              "microbatches": int}
ALIASES = {"weight-dtype": "weight_dtype", "kv-dtype": "kv_dtype", "group-size": "group_size"}


def expand(spec: str) -> list[str]:
    """Comma-separated values, each a value or a range ``A..B:xF`` (geometric) or ``A..B:+S``
    (arithmetic), with units: ``256KiB..4MiB:x2,16MiB``."""
    values = [v for part in spec.split(",") if part.strip() for v in _expand_one(part.strip())]
    if not values:
        raise ConfigError(f"no values in {spec!r}", field="--set")
    return values


def _expand_one(spec: str) -> list[str]:
    if ".." not in spec:
        return [spec]
    lo, _, rest = spec.partition("..")
    hi, sep, step = rest.partition(":")
    if not sep or not step or step[0] not in "x+":
        raise ConfigError(f"range {spec!r} needs a step: A..B:x2 or A..B:+S", field="--set")
    kind, parse = _quantity(lo)
    try:
        a, b = parse(lo), parse(hi)
        factor = float(step[1:]) if step[0] == "x" else parse(step[1:])
    except (ValueError, units.UnitError) as exc:
        raise ConfigError(f"range {spec!r}: {exc}", field="--set") from None
    if (step[0] == "x" and factor <= 1) or (step[0] == "+" and factor <= 0) or b < a:
        raise ConfigError(f"range {spec!r} does not advance from {lo} to {hi}", field="--set")
    out, v = [], a
    while v <= b * (1 + 1e-12):
        out.append(_format(kind, v))
        v = v * factor if step[0] == "x" else v + factor
        if len(out) > 100_000:
            raise ConfigError(f"range {spec!r} has too many points", field="--set")
    return out


def _quantity(text: str) -> tuple[str, Callable]:
    for kind in ("bytes", "bandwidth", "time", "flops"):
        try:
            units.PARSERS[kind](text)
            return kind, units.PARSERS[kind]
        except units.UnitError:
            continue
    try:
        int(text)
        return "count", int
    except ValueError:
        pass
    try:
        float(text)
        return "number", float
    except ValueError:
        raise ConfigError(f"cannot make a range from {text!r}", field="--set") from None


def _format(kind: str, value: float) -> str:
    if kind in units.FORMATTERS and kind not in ("count", "ratio"):
        return units.FORMATTERS[kind](int(round(value)))
    return str(int(value)) if kind == "count" else f"{value:g}"


def read_sweep_file(path: Path) -> tuple[dict[str, Any], list[str]]:
    """A sweep YAML: run arguments at the top level and ``set: {PATH: [values] or "A..B:x2"}``."""
    if not path.is_file():
        raise ConfigError("file not found", file=str(path))
    raw = load_yaml(path) or {}
    if not isinstance(raw, dict):
        raise ConfigError("expected a mapping", file=str(path))
    sets = raw.pop("set", {}) or {}
    if not isinstance(sets, dict):
        raise ConfigError("expected a mapping of PATH to values", file=str(path), field="set")
    known = {*RUN_FIELDS, "trace", "samples", "system", "ep"}
    for key in raw:
        if ALIASES.get(key, key) not in known:
            raise ConfigError(f"unknown field (known: set, {', '.join(sorted(known))})", file=str(path), field=key)
    items = [f"{k}={','.join(map(str, v)) if isinstance(v, list) else v}" for k, v in sets.items()]
    return {ALIASES.get(k, k): v for k, v in raw.items()}, items


def parse_sweeps(items: Iterable[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for item in items:
        key, sep, spec = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"expected PATH=V1,V2 or PATH=A..B:xF, got {item!r}", field="--set")
        out[ALIASES.get(key.strip(), key.strip())] = expand(spec.strip())
    return out


def points(sweeps: dict[str, list[str]]) -> Iterator[dict[str, str]]:
    keys = list(sweeps)
    for combo in itertools.product(*(sweeps[k] for k in keys)):
        yield dict(zip(keys, combo))


def key_of(point: dict[str, str]) -> str:
    return json.dumps(point, sort_keys=True)


def flatten(summary: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    row: dict[str, Any] = {}
    for k, v in summary.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            row.update(flatten(v, f"{name}."))
        elif isinstance(v, (int, float, str, bool)) or v is None:
            row[name] = v
    return row


def run_point(base: dict[str, Any], point: dict[str, str], keep: str | None = None) -> dict[str, Any]:
    """Simulate one point; never raises: a failure becomes the row's ``error``."""
    from memsim.api import simulate

    kwargs = dict(base)
    sets = list(kwargs.pop("set", ()))
    for field, value in point.items():
        if field in RUN_FIELDS:
            try:
                kwargs[field] = RUN_FIELDS[field](value)
            except ValueError:
                return {**point, "error": f"--set {field}: expected {RUN_FIELDS[field].__name__}, got {value!r}"}
        else:
            sets.append(f"{field}={value}")
    try:
        result = simulate(set=sets, **kwargs)
        if keep:
            result.write(Path(keep))
        return {**point, "error": "", **flatten(result.summary)}
    except MemsimError as exc:
        return {**point, "error": exc.one_line()}
    except Exception as exc:  # a sweep records every failure and goes on
        return {**point, "error": f"{type(exc).__name__}: {exc}"}


class Results:
    """points.jsonl (append-only, fsynced) and results.csv (rewritten atomically) in ``out``."""

    def __init__(self, out: Path, fields: list[str], order: dict[str, int] | None = None) -> None:
        self.order = order or {}  # point key -> position in the sweep, for the CSV's row order
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.log = self.out / "points.jsonl"
        self.fields = fields
        self.rows: list[dict[str, Any]] = []
        self.skipped = 0  # points already done when this run started
        if self.log.exists():
            for line in self.log.read_text().splitlines():
                if line.strip():
                    try:
                        self.rows.append(json.loads(line))
                    except json.JSONDecodeError:
                        continue  # a line cut short by a kill: that point is simply run again

    def key(self, row: dict[str, Any]) -> str:
        return key_of({f: str(row.get(f)) for f in self.fields})

    def done(self) -> set[str]:
        return {self.key(r) for r in self.rows}

    def add(self, row: dict[str, Any]) -> None:
        torn = False  # a kill can leave a last line without its newline
        if self.log.exists() and self.log.stat().st_size:
            with self.log.open("rb") as fh:
                fh.seek(-1, os.SEEK_END)
                torn = fh.read(1) != b"\n"
        with self.log.open("a") as fh:
            fh.write(("\n" if torn else "") + json.dumps(row) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.rows.append(row)
        self.write_csv()

    def write_csv(self) -> None:
        rows = sorted(self.rows, key=lambda r: self.order.get(self.key(r), len(self.order)))
        df = pd.DataFrame(rows)
        if df.empty:
            df = pd.DataFrame(columns=[*self.fields, "error"])
        lead = [*self.fields, "error"]
        df = df[lead + [c for c in df.columns if c not in lead]]
        atomic_write_text(self.out / "results.csv", df.to_csv(index=False))


def run_sweep(base: dict[str, Any], sweeps: dict[str, list[str]], out: Path, workers: int | None = None,
              scheduler: str | None = None, keep: bool = False, progress: bool = True) -> Results:
    """Run every point not already in ``out``; returns the results, finished ones included."""
    fields = list(sweeps)
    every = list(points(sweeps))
    results = Results(out, fields, {key_of(p): i for i, p in enumerate(every)})
    done = results.done()
    todo = [(i, p) for i, p in enumerate(every) if key_of(p) not in done]
    results.skipped = len(every) - len(todo)
    bar = _bar(len(todo) + len(done), len(done), progress)
    keep_dir = lambda i: str(Path(out) / "points" / f"{i:05d}") if keep else None  # noqa: E731
    try:
        if scheduler:
            _run_dask(scheduler, base, todo, keep_dir, results, bar)
        else:
            _run_pool(workers, base, todo, keep_dir, results, bar)
    finally:
        bar.close()
        results.write_csv()
    return results


def _bar(total: int, initial: int, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit="point", disable=not enabled, dynamic_ncols=True)


def _run_pool(workers, base, todo, keep_dir, results: Results, bar) -> None:
    from concurrent.futures import ProcessPoolExecutor, as_completed

    if workers == 1:
        for i, p in todo:
            results.add(run_point(base, p, keep_dir(i)))
            bar.update()
        return
    pool = ProcessPoolExecutor(max_workers=workers or os.cpu_count())
    try:
        futures = [pool.submit(run_point, base, p, keep_dir(i)) for i, p in todo]
        for fut in as_completed(futures):
            results.add(fut.result())
            bar.update()
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()


def _run_dask(address, base, todo, keep_dir, results: Results, bar) -> None:
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise ConfigError("Dask is not installed (pip install '.[dask]')", field="--scheduler") from None
    client = address if hasattr(address, "submit") else Client(address)
    futures = [client.submit(run_point, base, p, keep_dir(i), pure=False) for i, p in todo]
    try:
        for fut in as_completed(futures):
            results.add(fut.result())
            bar.update()
    except BaseException:
        client.cancel(futures)
        raise


__all__ = ["expand", "parse_sweeps", "points", "run_point", "run_sweep", "Results"]
