"""Golden runs: small, fully specified simulations whose results must not change by accident.

Regenerate after an intended change with ``MEMSIM_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py``
and explain the change in the commit message.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from memsim import simulate

GOLDEN = Path(__file__).resolve().parent / "golden"
CASES = {
    "tiny-decode": dict(phase="decode", batch=2, context=32),
    "tiny-prefill-unfused": dict(phase="prefill", prompt=64, set={"execution.attention": "unfused"}),
    "tiny-decode-int4-depth1": dict(phase="decode", context=128, weight_dtype="int4",
                                    set={"execution.prefetch_depth": "1"}),
}
KEYS = ["step_time_s", "roofline_s", "roofline_bound", "flops_total", "bytes_per_level", "stall_s",
        "compute_busy_s", "weight_bytes", "kv_cache_bytes"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name, tiny_chip_path, tiny_model_path):
    summary = simulate(str(tiny_chip_path), str(tiny_model_path), **CASES[name]).summary
    got = {k: summary[k] for k in KEYS}
    path = GOLDEN / f"{name}.json"
    if os.environ.get("MEMSIM_UPDATE_GOLDEN"):
        path.write_text(json.dumps(got, indent=2, sort_keys=True) + "\n")
    assert got == json.loads(path.read_text())
