#!/usr/bin/env python3
"""memsim against published measurements: calibration rows in and out of sample, and microbenchmarks.

    python scripts/validate.py [--calibration CSV] [--microbench CSV] [--check]

1. Every row of calibration.csv is simulated on a small grid of the calibrated parameters
   (memsim.validation.fit.PARAMS). The parameters are fitted on all rows (in sample: a fit,
   not an accuracy), then once per source without that source's rows, which are then
   predicted (out of sample: leave one source out).
2. Every GEMM and memory-bandwidth row of microbench.csv is simulated as one operator.

`--check` exits 1 unless out of sample the median |error| <= 6% and the worst <= 15%, and
every simulated microbenchmark row is within 10%.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from memsim.validation import calibration, fit, microbench

ROOT = Path(__file__).resolve().parents[1]
BOUNDS = {"median": 0.06, "max": 0.15, "microbench": 0.10}


def calibration_report(path: Path) -> dict[str, float]:
    every = calibration.load(path)
    cases = calibration.fitted(every)
    print(f"fitted on the {len(cases)} rows of {', '.join(calibration.FITTED_ON)}; "
          f"{len(every) - len(cases)} rows of other sources are not yet calibrated on")
    table = fit.table(cases)
    full, outcomes = fit.validate(table)
    print("fitted on every row: " + ", ".join(f"{p.path} = {p.text(v)}" for p, v in zip(fit.PARAMS, full)))
    print(f"\n{'id':>3}  {'workload':34} {'measured':>9} {'in sample':>16} {'out of sample':>16}  held-out fit")
    for o in outcomes:
        held = ", ".join(f"{v:.3g}" for v in o.held_out_fit)
        print(f"{o.case.id:>3}  {o.case.label[:34]:34} {o.case.measured_ms:7.2f}ms {o.in_sample_ms:7.2f}ms "
              f"{o.error('in') * 100:+6.1f}% {o.out_of_sample_ms:7.2f}ms {o.error('out') * 100:+6.1f}%  ({held})")
    for c in cases:
        if c.kwargs is None:
            print(f"{c.id:>3}  skipped: {c.why}")
    summary = {}
    for which, name in (("in", "in sample (a fit)"), ("out", "out of sample (leave one source out)")):
        errs = [abs(o.error(which)) for o in outcomes]
        summary[which] = (statistics.median(errs), max(errs))
        print(f"{name}: {len(errs)} rows, median |error| {summary[which][0] * 100:.1f}%, "
              f"max {summary[which][1] * 100:.1f}%")
    return {"median": summary["out"][0], "max": summary["out"][1]}


def microbench_report(path: Path) -> float:
    print(f"\n{'id':>3}  {'chip':14} {'row':44} {'measured':>10} {'memsim':>10} {'error':>7}")
    errors = []
    for b in microbench.load(path):
        if b.hw is None:
            print(f"{b.id:>3}  {b.chip:14} skipped: {b.why}")
            continue
        sim = microbench.simulate(b)
        errors.append(abs(sim / b.measured - 1))
        print(f"{b.id:>3}  {b.hw:14} {b.label[:44]:44} {b.measured:8.1f} {b.unit:<5} {sim:8.1f} "
              f"{(sim / b.measured - 1) * 100:+6.1f}%")
    within = sum(e <= BOUNDS["microbench"] for e in errors)
    print(f"microbenchmarks: {len(errors)} rows simulated, {within} within 10%, "
          f"median |error| {statistics.median(errors) * 100:.1f}%, max {max(errors) * 100:.1f}%")
    return max(errors)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calibration", type=Path, default=calibration.DATA)
    ap.add_argument("--microbench", type=Path, default=ROOT / "memsim" / "validation" / "data" / "microbench.csv")
    ap.add_argument("--check", action="store_true", help="exit 1 unless the bounds in the docstring hold")
    args = ap.parse_args()
    out = calibration_report(args.calibration)
    worst_bench = microbench_report(args.microbench)
    ok = out["median"] <= BOUNDS["median"] and out["max"] <= BOUNDS["max"] and worst_bench <= BOUNDS["microbench"]
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
