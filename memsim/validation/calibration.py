"""A row of ``calibration.csv`` (a published end-to-end measurement) as a memsim run.

Decode rows become one decode step, prefill rows (time to first token with one output
token) the prefill of the prompt, which produces the first token. Tensor-parallel rows run
with ``tp``, and a row measured under a power cap ("330W cap") runs with ``execution.power_cap``
set to it. Rows that need something memsim does not model are skipped with the reason.
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from memsim import api

MODELS = {"Llama-2-7B": "llama-2-7b", "Llama-3.1-8B": "llama-3.1-8b", "GPT-J-6B": "gpt-j-6b"}
CHIPS = {"A100": "a100-80gb-sxm", "H100": "h100-sxm"}


@dataclass(frozen=True)
class Case:
    """One row, ready to simulate: ``kwargs`` for ``memsim.api.simulate`` less ``set``."""

    id: str
    source: str
    label: str
    measured_ms: float
    kwargs: dict | None  # None: skipped
    why: str  # what is simulated, or why the row is skipped
    settings: tuple[tuple[str, str], ...] = ()  # hardware fields the row was measured with (a power cap)


def weight_format(text: str) -> tuple[str, int]:
    """'int4 weight-only g32' -> ('int4', 32); 'bf16' -> ('bf16', 128)."""
    dtype = text.split()[0]
    group = re.search(r"\bg(\d+)\b", text)
    return dtype, int(group.group(1)) if group else 128


def chip_of(text: str) -> str | None:
    return next((preset for key, preset in CHIPS.items() if key in text), None)


def power_cap(text: str) -> tuple[tuple[str, str], ...]:
    """'NVIDIA A100-80GB SXM (330W cap)' -> (("execution.power_cap", "330 W"),); no cap named: ()."""
    cap = re.search(r"(\d+(?:\.\d+)?)\s*W cap", text)
    return (("execution.power_cap", f"{cap.group(1)} W"),) if cap else ()


def measured_ms(row: dict) -> float:
    if row["derived_ms_per_decode_step"]:
        return float(row["derived_ms_per_decode_step"])
    if row["unit"] != "ms":
        raise ValueError(f"row {row['id']}: unit {row['unit']!r} is not a time")
    return float(row["value"])


def source_of(row: dict) -> str:
    """The publication a row comes from (its URL without the part after the first space)."""
    return row["source"].split()[0]


def case(row: dict) -> Case:
    model, chip = MODELS.get(row["model"]), chip_of(row["accelerator"])
    dtype, group = weight_format(row["weight_precision"])
    label = f"{row['model']} {row['phase']} {row['weight_precision'].split()[0]}"
    base = Case(row["id"], source_of(row), label, measured_ms(row), None, "", power_cap(row["accelerator"]))
    tp = re.fullmatch(r"TP(\d+)", row["parallelism"].strip())
    if tp is None or int(tp.group(1)) != int(row["n_accelerators"]):
        return _skip(base, f"parallelism {row['parallelism']} on {row['n_accelerators']} chips is not modelled")
    if model is None or chip is None:
        return _skip(base, f"no preset for {row['model']} on {row['accelerator']}")
    kwargs = dict(hw=chip, model=model, batch=int(row["batch_size"]), weight_dtype=dtype, group_size=group,
                  kv_dtype=row["kv_precision"], tp=int(tp.group(1)))
    prompt = int(row["prompt_len"])
    if tp.group(1) != "1":
        label += f", TP {tp.group(1)}"
    if row["phase"] == "decode":
        # gpt-fast attends over its whole static cache: prompt plus the generated tokens.
        new = int(re.search(r"\d+", row["output_len_or_kv_ctx"]).group())
        return Case(base.id, base.source, label, base.measured_ms,
                    {**kwargs, "phase": "decode", "context": prompt + new}, "decode step", base.settings)
    return Case(base.id, base.source, f"{label} {prompt}", base.measured_ms,
                {**kwargs, "phase": "prefill", "prompt": prompt}, "prefill", base.settings)


def _skip(base: Case, why: str) -> Case:
    return Case(base.id, base.source, base.label, base.measured_ms, None, why, base.settings)


def load(path: Path) -> list[Case]:
    with path.open(newline="") as fh:
        return [case(row) for row in csv.DictReader(fh)]


def simulate_ms(c: Case, overrides: dict[str, str] | None = None) -> float:
    """The row's step time in ms, with hardware fields overridden (``{"compute.kernel_efficiency": "0.8"}``)
    on top of those the row was measured with (its power cap)."""
    result = api.simulate(**c.kwargs, set={**dict(c.settings), **(overrides or {})})
    return result.summary["step_time_s"] * 1e3
