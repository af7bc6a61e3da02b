#!/usr/bin/env python3
"""Predicted versus measured for every row of the calibration set, through the CLI.

    python scripts/validate.py [--csv ../shared/validation/calibration.csv] [--check]

Each row becomes a `memsim run`: decode rows one step, prefill rows (time to first token with
one output token) the prefill of the prompt, which produces the first token. Rows that need a feature memsim
does not model are listed as skipped with the reason. Tensor-parallel rows run with --tp. `--check` exits 1
when the median absolute error exceeds 10% or any row exceeds 20%.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

from memsim import cli

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CSV = ROOT.parent / "shared" / "validation" / "calibration.csv"
MODELS = {"Llama-2-7B": "llama-2-7b", "Llama-3.1-8B": "llama-3.1-8b", "GPT-J-6B": "gpt-j-6b"}
CHIPS = {"A100": "a100-80gb-sxm", "H100": "h100-sxm"}


def weight_format(text: str) -> tuple[str, int]:
    """'int4 weight-only g32' -> ('int4', 32); 'bf16' -> ('bf16', 128)."""
    dtype = text.split()[0]
    group = re.search(r"\bg(\d+)\b", text)
    return dtype, int(group.group(1)) if group else 128


def chip_of(text: str) -> str | None:
    return next((preset for key, preset in CHIPS.items() if key in text), None)


def step_ms(args: list[str]) -> float:
    """One `memsim run ... --out DIR` through the CLI (in this process), read back from summary.json."""
    with tempfile.TemporaryDirectory() as out, contextlib.redirect_stdout(io.StringIO()):
        cli.main.main(args=["run", *args, "--out", out], standalone_mode=False)
        return json.loads((Path(out) / "summary.json").read_text())["step_time_s"] * 1e3


def predict(row: dict) -> tuple[float | None, str]:
    tp = re.fullmatch(r"TP(\d+)", row["parallelism"].strip())
    if tp is None or int(tp.group(1)) != int(row["n_accelerators"]):
        return None, f"parallelism {row['parallelism']} on {row['n_accelerators']} chips is not modelled"
    model, chip = MODELS.get(row["model"]), chip_of(row["accelerator"])
    if model is None or chip is None:
        return None, f"no preset for {row['model']} on {row['accelerator']}"
    dtype, group = weight_format(row["weight_precision"])
    common = ["--hw", chip, "--model", model, "--batch", row["batch_size"], "--weight-dtype", dtype,
              "--group-size", str(group), "--kv-dtype", row["kv_precision"], "--tp", tp.group(1)]
    prompt = int(row["prompt_len"])
    if row["phase"] == "decode":
        # gpt-fast attends over its whole static cache: prompt plus the generated tokens.
        new = int(re.search(r"\d+", row["output_len_or_kv_ctx"]).group())
        return step_ms([*common, "--phase", "decode", "--context", str(prompt + new)]), "decode step"
    # With one output token the context (prefill) phase produces the first token itself.
    return step_ms([*common, "--phase", "prefill", "--prompt", str(prompt)]), "prefill"


def measured_ms(row: dict) -> float:
    if row["derived_ms_per_decode_step"]:
        return float(row["derived_ms_per_decode_step"])
    assert row["unit"] == "ms", row["unit"]
    return float(row["value"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    ap.add_argument("--check", action="store_true", help="exit 1 unless median |error| <= 10%% and max <= 20%%")
    args = ap.parse_args()
    rows = list(csv.DictReader(args.csv.open()))
    errors = []
    print(f"{'id':>3}  {'phase':7} {'model':13} {'weights':26} {'chip':14} {'measured':>10} {'memsim':>10} {'error':>8}")
    for row in rows:
        pred, what = predict(row)
        head = (f"{row['id']:>3}  {row['phase']:7} {row['model']:13} {row['weight_precision'][:26]:26} "
                f"{(chip_of(row['accelerator']) or '?'):14}")
        meas = measured_ms(row)
        if pred is None:
            print(f"{head} {meas:8.3f}ms {'':>10} skipped: {what}")
            continue
        err = (pred - meas) / meas
        errors.append(err)
        print(f"{head} {meas:8.3f}ms {pred:8.3f}ms {err * 100:+7.1f}%")
    if not errors:
        print("no rows predicted")
        return 1
    med = statistics.median(abs(e) for e in errors)
    worst = max(abs(e) for e in errors)
    print(f"\n{len(errors)} rows predicted, {len(rows) - len(errors)} skipped; "
          f"median |error| {med * 100:.1f}%, max |error| {worst * 100:.1f}%")
    return 1 if args.check and (med > 0.10 or worst > 0.20) else 0


if __name__ == "__main__":
    sys.exit(main())
