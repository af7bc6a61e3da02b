#!/usr/bin/env python3
"""The energy wall: energy per token against SRAM capacity, for a prefill and a decode.

    python scripts/energy_wall.py [--hw h100-sxm] [--sizes 256KiB..64MiB:x4] [--out runs/energy_wall]

Sweeps `sram.capacity` (the tile budget) for a prefill (Llama-3.1-8B, 4096 tokens) and a
large-batch decode (Llama-3.2-1B, batch 512). A small SRAM forces small tiles, so the GEMMs
re-read their operands from HBM; every re-read byte costs HBM's energy per bit. As SRAM grows
the re-reads go and energy per token falls, towards what the FLOPs, the compulsory bytes and
the static power cost. Prints energy per token and the shares of dynamic energy spent moving
data and computing, and writes `energy_wall.csv` (and each sweep's `results.csv`).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from memsim.sweep import runner as sweeping

CASES = {
    "prefill": dict(model="llama-3.1-8b", phase="prefill", batch=1, prompt=4096),
    "decode": dict(model="llama-3.2-1b", phase="decode", batch=512, context=512),
}


def energy_wall(hw: str, sizes: str, out: Path, cases: dict[str, dict] = CASES, workers: int | None = None) -> pd.DataFrame:
    """One row per (phase, SRAM size): energy per token and where the energy went."""
    rows = []
    for name, case in cases.items():
        folder = out / name
        sweeping.run_sweep({"hw": hw, **case}, sweeping.parse_sweeps([f"sram.capacity={sizes}"]), folder,
                           workers=workers)
        df = pd.read_csv(folder / "results.csv")
        dynamic = df["energy_j.dynamic"]
        rows.append(pd.DataFrame({
            "phase": name,
            "sram.capacity": df["sram.capacity"],
            "energy_per_token_mj": df["energy_per_token_j"] * 1e3,
            "hbm_gb": df["bytes_per_level.hbm.total"] / 1e9,
            "data_movement_share": (dynamic - df["energy_j.compute"]) / dynamic,
            "compute_share": df["energy_j.compute"] / dynamic,
            "static_share": df["energy_j.static"] / df["energy_j.total"],
            "step_time_ms": df["step_time_s"] * 1e3,
        }))
    return pd.concat(rows, ignore_index=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hw", default="h100-sxm")
    ap.add_argument("--sizes", default="256KiB..64MiB:x4")
    ap.add_argument("--out", type=Path, default=Path("runs/energy_wall"))
    ap.add_argument("--workers", type=int)
    args = ap.parse_args()
    table = energy_wall(args.hw, args.sizes, args.out, workers=args.workers)
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "energy_wall.csv", index=False)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    for phase, group in table.groupby("phase", sort=False):
        first, last = group.iloc[0], group.iloc[-1]
        print(f"{phase}: energy per token {first['energy_per_token_mj']:.3f} -> {last['energy_per_token_mj']:.3f} mJ "
              f"({1 - last['energy_per_token_mj'] / first['energy_per_token_mj']:.1%} less) as SRAM grows "
              f"{first['sram.capacity']} -> {last['sram.capacity']}; HBM traffic {first['hbm_gb']:.2f} -> "
              f"{last['hbm_gb']:.2f} GB; data movement {first['data_movement_share']:.0%} -> "
              f"{last['data_movement_share']:.0%} of dynamic energy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
