#!/usr/bin/env python3
"""FlashAttention's IO complexity, reproduced: sweep SRAM and fit HBM traffic of attention.

    python scripts/flash_attention_io.py [--prompt 16384] [--out runs/flash_attention_io]

Runs `memsim sweep` over `sram.capacity` for a long-sequence Llama-2-7B prefill with fused
and with unfused attention (`stack.kernels.attention`), sums the attention operators' HBM bytes from each point's
ops.csv, and fits log(bytes) against log(SRAM). Fused attention's traffic falls as
Theta(N^2 d^2 / M) (slope near -1); unfused attention's does not depend on SRAM (slope 0).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from memsim.core import units
from memsim.sweep import runner as sweeping

SIZES = "64KiB..1MiB:x2"


def attention_hbm(out: Path) -> pd.DataFrame:
    rows = []
    results = pd.read_csv(out / "results.csv")
    for _, row in results.iterrows():
        ops = pd.read_csv(out / row["outputs"] / "ops.csv")  # each point's kept outputs, named in its row
        attn = ops[ops.op_kind == "attention"]
        rows.append({"sram_bytes": units.parse_bytes(row["sram.capacity"]), "attention": row["stack.kernels.attention"],
                     "hbm_bytes": int(attn["hbm_read_bytes"].sum() + attn["hbm_written_bytes"].sum())})
    return pd.DataFrame(rows)


def slope(part: pd.DataFrame) -> float:
    return float(np.polyfit(np.log(part["sram_bytes"]), np.log(part["hbm_bytes"]), 1)[0])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompt", type=int, default=16384)
    ap.add_argument("--out", type=Path, default=Path("runs/flash_attention_io"))
    ap.add_argument("--workers", type=int)
    args = ap.parse_args()
    base = dict(hw="h100-sxm", model="llama-2-7b", phase="prefill", prompt=args.prompt, context=0, batch=1)
    sweeps = sweeping.parse_sweeps([f"sram.capacity={SIZES}", "stack.kernels.attention=fused,unfused"])
    sweeping.run_sweep(base, sweeps, args.out, workers=args.workers, keep=True)
    df = attention_hbm(args.out)
    print(df.pivot(index="sram_bytes", columns="attention", values="hbm_bytes").to_string())
    for kind in ("fused", "unfused"):
        print(f"{kind:8s} attention: HBM bytes ~ SRAM^{slope(df[df.attention == kind]):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
