"""Parameter sweeps: the cartesian product of swept fields, run on a local process pool or a
Dask cluster, with every finished point kept.

Orchestration only: each point is an ordinary ``memsim.simulate`` call. Every point's run is
checked before any runs, so a bad value stops the sweep with one line. Finished points are
kept by ``sweep_store`` (keyed by everything their result depends on), so a killed sweep loses
nothing that finished and a re-run resumes. A point that fails in simulation (a tile that fits
no SRAM at one swept size) records its error in its row and the sweep goes on.
"""
from __future__ import annotations

import itertools
import math
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from memsim import runspec, sweep_store, units
from memsim.errors import ConfigError, MemsimError
from memsim.files import load_yaml
from memsim.runspec import RunSpec
from memsim.sweep_store import Lock, Results

# Sweepable fields that are arguments of the run (RunSpec's) rather than hardware fields.
RUN_FIELDS = runspec.sweepable()
ALIASES = {name.replace("_", "-"): name for name in RUN_FIELDS if "_" in name}


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
    if not all(math.isfinite(v) for v in (a, b, factor)):
        raise ConfigError(f"range {spec!r} is not finite", field="--set")
    if (step[0] == "x" and (factor <= 1 or a <= 0)) or (step[0] == "+" and factor <= 0) or b < a:
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
    raw = load_yaml(path) or {}
    if not isinstance(raw, dict):
        raise ConfigError("expected a mapping", file=str(path))
    sets = raw.pop("set", {}) or {}
    if not isinstance(sets, dict):
        raise ConfigError("expected a mapping of PATH to values", file=str(path), field="set")
    for key in raw:
        if ALIASES.get(key, key) not in RUN_FIELDS:
            raise ConfigError(f"unknown field (known: set, {', '.join(sorted(RUN_FIELDS))})", file=str(path),
                              field=str(key))
    items = []
    for k, v in sets.items():
        if isinstance(v, list):
            if not v or any(isinstance(x, (dict, list)) or x is None for x in v):
                raise ConfigError("expected a list of values", file=str(path), field=f"set.{k}")
            v = ",".join(map(str, v))
        elif isinstance(v, dict) or v is None:
            raise ConfigError("expected values: a list or \"A..B:x2\"", file=str(path), field=f"set.{k}")
        items.append(f"{k}={v}")
    fixed = {ALIASES.get(k, k): v for k, v in raw.items()}
    for name, value in fixed.items():
        try:
            runspec.check(RUN_FIELDS[name], value)
        except ConfigError as exc:
            raise ConfigError(exc.message, file=str(path), field=name) from None
    return fixed, items


def parse_sweeps(items: Iterable[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for item in items:
        key, sep, spec = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"expected PATH=V1,V2 or PATH=A..B:xF, got {item!r}", field="--set")
        name = ALIASES.get(key.strip(), key.strip())
        if name in out:
            raise ConfigError(f"{name} is swept twice", field="--set")
        if name in ("set", "fast_forward"):
            raise ConfigError(f"{name} cannot be swept", field="--set")
        try:
            item.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(f"{name}: a value that is not valid text (an undecodable byte)", field="--set") from None
        out[name] = expand(spec.strip())
    return out


def points(sweeps: dict[str, list[str]]) -> Iterator[dict[str, str]]:
    keys = list(sweeps)
    for combo in itertools.product(*(sweeps[k] for k in keys)):
        yield dict(zip(keys, combo))


def point_spec(base: dict[str, Any], point: dict[str, str], positions: dict[str, int] | None = None) -> RunSpec:
    """The resolved run of one point: swept run fields replace the base's, swept hardware fields
    join its overrides (``positions``: see ``api.fill_defaults``)."""
    from memsim.api import fill_defaults

    kwargs = dict(base)
    sets = list(runspec.overrides(kwargs.pop("set", ())))
    for name, value in point.items():
        if name in RUN_FIELDS:
            kwargs[name] = runspec.parse_value(RUN_FIELDS[name], value)
        else:
            sets.append((name, value))
    return fill_defaults(RunSpec.make({**kwargs, "set": tuple(sets)}), positions)


def flatten(summary: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    row: dict[str, Any] = {}
    for k, v in summary.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            row.update(flatten(v, f"{name}."))
        elif isinstance(v, (int, float, str, bool)) or v is None:
            row[name] = v
    return row


def run_point(spec: RunSpec, point: dict[str, str], key: str, keep: str | None = None) -> dict[str, Any]:
    """Simulate one point; never raises: a failure becomes the row's ``error``."""
    from memsim.api import run

    try:
        result = run(spec)
        if keep:
            result.write(Path(keep))
        return {**point, "run_key": key, "error": "", **flatten(result.summary)}
    except MemsimError as exc:
        return {**point, "run_key": key, "error": exc.one_line()}
    except Exception as exc:  # a sweep records every failure and goes on
        return {**point, "run_key": key, "error": f"{type(exc).__name__}: {exc}"}


def run_sweep(base: dict[str, Any], sweeps: dict[str, list[str]], out: Path, workers: int | None = None,
              scheduler: str | None = None, keep: bool = False, progress: bool = True) -> Results:
    """Run every point not already in ``out``; returns the results, finished ones included."""
    if workers is not None and workers < 1:
        raise ConfigError("must be at least 1", field="--workers")
    fields = list(sweeps)
    every = list(points(sweeps))
    # Every point's run, each model read once: a bad value or model file stops here, before anything is written.
    positions: dict[str, int] = {}
    specs = [point_spec(base, p, positions) for p in every]
    _check_chips(specs, fields)
    digests: dict = {}
    keys = [sweep_store.run_key(s, digests) for s in specs]
    experiment = _experiment(specs[0], fields, digests)
    Path(out).mkdir(parents=True, exist_ok=True)
    with Lock(Path(out)):
        sweep_store.claim(Path(out), experiment)
        results = Results(out, fields, {k: i for i, k in enumerate(keys)})
        done = results.done()
        todo = [(i, every[i], specs[i], keys[i]) for i in range(len(every)) if keys[i] not in done]
        results.skipped = len(every) - len(todo)
        bar = _bar(len(every), len(every) - len(todo), progress)
        keep_dir = lambda i: str(Path(out) / "points" / f"{i:05d}") if keep else None  # noqa: E731
        try:
            if scheduler:
                _run_dask(scheduler, todo, keep_dir, results, bar)
            else:
                _run_pool(workers, todo, keep_dir, results, bar)
        finally:
            bar.close()
            results.write_csv()
    return results


def _experiment(spec: RunSpec, swept: list[str], digests: dict) -> dict[str, Any]:
    """What every point shares: the unswept run fields, their files' contents, the swept names."""
    fixed = tuple(f for f in runspec.defaults() if f not in swept and f != "set")
    ident = sweep_store.identity(spec, fixed, digests)
    ident["set"] = sorted([k, v] for k, v in spec.set if k not in swept)
    ident["swept"] = sorted(swept)
    return ident


def _check_chips(specs: list[RunSpec], swept: list[str]) -> None:
    """Load every distinct chip (without swept hardware fields) once: a file that every point would
    fail on is one error, not a column of them."""
    from memsim.api import _load_chip

    hardware_swept = [f for f in swept if f not in RUN_FIELDS]
    seen = set()
    for spec in specs:
        chip = (spec.hw, tuple(kv for kv in spec.set if kv[0] not in hardware_swept), spec.system)
        if chip not in seen:
            seen.add(chip)
            _load_chip(*chip)


def _bar(total: int, initial: int, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit="point", disable=not enabled, dynamic_ncols=True)


def _run_pool(workers, todo, keep_dir, results: Results, bar) -> None:
    from concurrent.futures import ProcessPoolExecutor, as_completed

    if workers == 1:
        for i, p, spec, key in todo:
            results.add(run_point(spec, p, key, keep_dir(i)))
            bar.update()
        return
    pool = ProcessPoolExecutor(max_workers=workers or os.cpu_count(), initializer=die_with_parent,
                               initargs=(os.getpid(),))
    try:
        futures = [pool.submit(run_point, spec, p, key, keep_dir(i)) for i, p, spec, key in todo]
        for fut in as_completed(futures):
            results.add(fut.result())
            bar.update()
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()


def die_with_parent(parent: int) -> None:
    """Pool worker start-up: end this worker when the sweep's process dies, even by SIGKILL."""
    import signal
    import threading
    import time

    try:  # Linux: the kernel signals the worker when its parent exits
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass

    def watch() -> None:  # elsewhere (and as a second guard): the parent's pid goes away
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _run_dask(address, todo, keep_dir, results: Results, bar) -> None:
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise ConfigError("Dask is not installed (pip install '.[dask]')", field="--scheduler") from None
    client = address if hasattr(address, "submit") else Client(address)
    futures = [client.submit(run_point, spec, p, key, keep_dir(i), pure=False) for i, p, spec, key in todo]
    try:
        for fut in as_completed(futures):
            results.add(fut.result())
            bar.update()
    except BaseException:
        client.cancel(futures)
        raise


__all__ = ["expand", "parse_sweeps", "points", "point_spec", "run_point", "run_sweep", "Results"]
