#!/usr/bin/env python3
"""The SRAM cliff on a wafer-scale engine: step time against on-wafer SRAM capacity.

    python scripts/sram_cliff.py [--model llama-3.1-8b] [--out runs/sram_cliff]

Sweeps `sram.capacity` of `wse-3` for a decode step. While the weights do not fit, the part
that does not streams from MemoryX over the wafer's I/O every step; once they fit, nothing
leaves the wafer and the step time drops by orders of magnitude. Writes results.csv and,
with matplotlib, results.png (`memsim plot sweep`).
"""
from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import pandas as pd

from memsim.sweep import runner as sweeping


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--hw", default="wse-3")
    ap.add_argument("--sizes", default="2GB..64GB:x2")
    ap.add_argument("--out", type=Path, default=Path("runs/sram_cliff"))
    ap.add_argument("--workers", type=int)
    args = ap.parse_args()
    base = dict(hw=args.hw, model=args.model, phase="decode", context=2048, batch=1)
    sweeping.run_sweep(base, sweeping.parse_sweeps([f"sram.capacity={args.sizes}"]), args.out,
                       workers=args.workers)
    df = pd.read_csv(args.out / "results.csv")
    table = df[["sram.capacity", "step_time_s", "bytes_per_level.memoryx.read", "dominant_stall"]].copy()
    table["step_time_ms"] = table.pop("step_time_s") * 1e3
    print(table.to_string(index=False))
    times = table["step_time_ms"].tolist()
    drop = max(a / b for a, b in itertools.pairwise(times))
    at = table["sram.capacity"].iloc[[a / b for a, b in itertools.pairwise(times)].index(drop) + 1]
    print(f"cliff: step time falls {drop:.0f}x when SRAM reaches {at}")
    try:
        from memsim.report.plots import plot_sweep

        print(f"wrote {plot_sweep(args.out / 'results.csv')}")
    except Exception as exc:  # the figure is optional (plot extra)
        print(f"figure skipped: {exc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
