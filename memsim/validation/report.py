"""The validation tables: calibration rows in and out of sample, and microbenchmarks as single
operators, as data and as the Markdown docs/validation.md shows (``scripts/validate.py`` prints
them, ``scripts/figures.py`` writes them into that page, ``tests/test_figures.py`` keeps them current).

The rows of the sources the presets are fitted on (``calibration.FITTED_ON``, all four) are
fitted (in sample) and predicted leaving their source out (out of sample). A row of a source
outside that list would be predicted with the parameters the fitted sources give, out of sample
by construction.
"""
from __future__ import annotations

import functools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from memsim.validation import calibration, fit, llmcompass, microbench
from memsim.validation.calibration import Case

MICROBENCH = Path(__file__).resolve().parent / "data" / "microbench.csv"
MEASURED = Path(__file__).resolve().parent / "data" / "measured.csv"  # scripts/gpu_measure.py on an H200


@dataclass(frozen=True)
class Calibration:
    full: tuple[float, ...]  # the parameters fitted on every row of the fitted sources
    outcomes: tuple[fit.Outcome, ...]  # the fitted sources' rows, in and out of sample
    predicted: tuple[tuple[Case, float], ...]  # the other sources' rows and their step times (ms) at ``full``
    skipped: tuple[Case, ...]  # rows memsim cannot simulate, with the reason


def calibrate(path: Path = calibration.DATA) -> Calibration:
    """The fit over a calibration file's rows, in and out of sample. It simulates every row on a
    grid of the parameters (minutes), so it is kept per file as read (its size and modification
    time): ``scripts/figures.py`` and the tests ask for the same fit more than once."""
    stat = path.stat()
    return _calibrate(path, stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _calibrate(path: Path, size: int, mtime_ns: int) -> Calibration:
    every = calibration.load(path)
    cases = calibration.fitted(every)
    full, outcomes = fit.validate(fit.table(cases))
    settings = fit.overrides(fit.PARAMS, full)
    others = [c for c in every if c not in cases]
    predicted = tuple((c, calibration.simulate_ms(c, settings)) for c in others if c.kwargs is not None)
    return Calibration(full, tuple(outcomes), predicted, tuple(c for c in every if c.kwargs is None))


def spread(errors: Sequence[float]) -> tuple[float, float]:
    """Median and largest |error|."""
    size = [abs(e) for e in errors]
    return statistics.median(size), max(size)


def by_source(pairs: Sequence[tuple[Case, float]]) -> dict[str, tuple[int, float, float]]:
    """Per source: (rows, median |error|, max |error|) of (case, error) pairs."""
    out: dict[str, list[float]] = {}
    for case, error in pairs:
        out.setdefault(calibration.repository(case.source), []).append(error)
    return {s: (len(e), *spread(e)) for s, e in out.items()}


def held_out(r: Calibration) -> list[tuple[Case, float]]:
    """Every row predicted without its source: the fitted sources' out of sample, the others' at the fit."""
    return [(o.case, o.error("out")) for o in r.outcomes] + \
        [(c, ms / c.measured_ms - 1) for c, ms in r.predicted]


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


def _settings(c: Case) -> str:
    """The stack profile a row runs on and the hardware fields beyond its preset (power cap, system)."""
    fields = ", ".join([f"stack `{c.stack}`", *(f"`{k}={v}`" for k, v in c.settings)])
    return f"{fields}; {c.why}" if c.why == calibration.BY_DECODE else fields


def calibration_markdown(r: Calibration) -> str:
    params = ", ".join(f"`{p.path}` = {p.text(v)}" for p, v in zip(fit.PARAMS, r.full))
    lines = [f"Fitted on the {len(r.outcomes)} rows of {', '.join(calibration.FITTED_ON)}: {params}.", "",
             "| row | workload (A100-80GB) | runs with | measured | in sample | error | out of sample | error | "
             "held-out fit |", "|---|---|---|---|---|---|---|---|---|"]
    for o in r.outcomes:
        held = ", ".join(f"{v:.3g}" for v in o.held_out_fit)
        lines.append(f"| {o.case.id} | {o.case.label} | {_settings(o.case)} | {o.case.measured_ms:.2f} ms | "
                     f"{o.in_sample_ms:.2f} ms | {_pct(o.error('in'))} | {o.out_of_sample_ms:.2f} ms | "
                     f"{_pct(o.error('out'))} | {held} |")
    inside = spread([o.error("in") for o in r.outcomes])
    outside = spread([o.error("out") for o in r.outcomes])
    lines += ["", f"In sample (a fit): median |error| {inside[0] * 100:.1f}%, max {inside[1] * 100:.1f}%. "
              f"Out of sample (leave one source out): median |error| {outside[0] * 100:.1f}%, "
              f"max {outside[1] * 100:.1f}%."]
    if r.predicted:
        lines += ["", "Rows of the sources never fitted on, predicted with the fit above:", "",
                  "| row | workload (A100-80GB) | runs with | measured | memsim | error |", "|---|---|---|---|---|---|"]
    for c, ms in r.predicted:
        lines.append(f"| {c.id} | {c.label} | {_settings(c)} | {c.measured_ms:.2f} ms | {ms:.2f} ms | "
                     f"{_pct(ms / c.measured_ms - 1)} |")
    lines += ["", "By source: every row predicted without its source (out of sample), and, for the sources "
              "fitted on, the fit (in sample):", "",
              "| source | rows | out of sample: median \\|error\\| | max | in sample: median \\|error\\| | max |",
              "|---|---|---|---|---|---|"]
    pairs = held_out(r)
    in_sample = by_source([(o.case, o.error("in")) for o in r.outcomes])
    for source, (n, median, worst) in by_source(pairs).items():
        fitted = in_sample.get(source)
        fit_cells = f"{fitted[1] * 100:.1f}% | {fitted[2] * 100:.1f}%" if fitted else "never fitted on |"
        lines.append(f"| {source} | {n} | {median * 100:.1f}% | {worst * 100:.1f}% | {fit_cells} |")
    every = spread([e for _, e in pairs])
    lines.append(f"| all | {len(pairs)} | {every[0] * 100:.1f}% | {every[1] * 100:.1f}% | | |")
    return "\n".join(lines)


def microbenchmarks(path: Path = MICROBENCH) -> list[tuple[microbench.Bench, float | None]]:
    """Every row, with memsim's figure in the row's unit (None: skipped, ``Bench.why`` says why)."""
    return [(b, microbench.simulate(b) if b.hw is not None else None) for b in microbench.load(path)]


def microbench_markdown(rows: list[tuple[microbench.Bench, float | None]]) -> str:
    lines = ["| row | chip | row | measured | memsim | error |", "|---|---|---|---|---|---|"]
    errors = []
    for b, sim in rows:
        if sim is None:
            continue
        errors.append(sim / b.measured - 1)
        lines.append(f"| {b.id} | `{b.hw}` | {b.label} | {b.measured:g} {b.unit} | {sim:.1f} {b.unit} | "
                     f"{_pct(sim / b.measured - 1)} |")
    median, worst = spread(errors)
    within = sum(abs(e) <= 0.10 for e in errors)
    lines += ["", f"{len(errors)} rows simulated, {within} within 10%, median |error| {median * 100:.1f}%, "
              f"max {worst * 100:.1f}%."]
    return "\n".join(lines)


def llmcompass_markdown(rows: list[llmcompass.Row]) -> str:
    """LLMCompass's GPT-3 layer case (``memsim.validation.llmcompass``): per operator and per layer."""
    lines = ["| phase | operator | measured | memsim | error |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.phase} | {r.operator} | {r.measured_s * 1e3:.4g} ms | {r.memsim_s * 1e3:.4g} ms | "
                     f"{_pct(r.error)} |")
    for phase, t in llmcompass.totals(rows).items():
        lines.append(f"| {phase} | **the layer** | {t.measured_s * 1e3:.4g} ms | {t.memsim_s * 1e3:.4g} ms | "
                     f"{_pct(t.error)} (LLMCompass: {_pct(llmcompass.LLMCOMPASS_ERROR[phase])}) |")
    return "\n".join(lines)
