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
    "tiny-prefill-unfused": dict(phase="prefill", prompt=64, set={"stack.kernels.attention": "unfused"}),
    "tiny-decode-int4-depth1": dict(phase="decode", context=128, weight_dtype="int4",
                                    set={"execution.prefetch_depth": "1"}),
}
KEYS = ["step_time_s", "roofline_s", "roofline_bound", "flops_total", "bytes_per_level", "stall_s",
        "compute_busy_s", "weight_bytes", "kv_cache_bytes"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name, tiny_chip_path, tiny_model_path):
    summary = simulate(str(tiny_chip_path), str(tiny_model_path), **CASES[name]).summary
    got = {k: v for k, v in summary.as_dict().items() if k in KEYS}
    path = GOLDEN / f"{name}.json"
    if os.environ.get("MEMSIM_UPDATE_GOLDEN"):
        path.write_text(json.dumps(got, indent=2, sort_keys=True) + "\n")
    assert got == json.loads(path.read_text())


def test_tiny_decode_golden_matches_a_hand_calculation(tiny_chip_path, tiny_model_path):
    """The golden's FLOPs, bytes and overheads, derived by hand from the tiny model (hidden 64,
    MLP 128, 4 heads of 16, 2 KV heads, 2 layers, vocab 256) rather than from memsim."""
    r = simulate(str(tiny_chip_path), str(tiny_model_path), **CASES["tiny-decode"])
    batch, context, layers, hidden, kv, mlp, vocab = 2, 32, 2, 64, 2 * 16, 128, 256
    linear = layers * (hidden * (hidden + 2 * kv) + hidden * hidden + hidden * 2 * mlp + mlp * hidden)
    linear += hidden * vocab  # the untied LM head
    ops = r.ops.groupby("op_kind")["flops"].sum()
    assert ops["matmul"] == 2 * batch * linear == 360_448
    # QK^T and PV over the cached tokens and the new one, per head, sequence and layer.
    assert ops["attention"] == 2 * 2 * 4 * 16 * (context + 1) * batch * layers == 33_792
    norms = layers * 2 * hidden + hidden
    assert r.summary.weight_bytes == 2 * (linear + norms + batch * hidden) == 181_120  # embedding: gathered rows
    assert r.summary.kv_cache_bytes == 2 * 2 * kv * context * batch * layers == 16_384
    ops_per_layer = 11  # 2 norms, qkv, rope, attention, o_proj, 2 adds, gate_up, act, down
    assert r.summary.stall_s["overhead"] == pytest.approx((layers * ops_per_layer + 3) * 1e-6)  # op_overhead 1 us
    assert r.summary.ops == layers * ops_per_layer + 3
