"""scripts/validate.py against the shared calibration set: the accuracy acceptance check."""
from __future__ import annotations

import importlib.util
import statistics
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("validate", ROOT / "scripts" / "validate.py")
validate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(validate)


def test_weight_formats_parse():
    assert validate.weight_format("int4 weight-only g32") == ("int4", 32)
    assert validate.weight_format("int8 weight-only (bf16 act)") == ("int8", 128)
    assert validate.weight_format("bf16") == ("bf16", 128)
    assert validate.chip_of("NVIDIA A100-80GB SXM (330W cap)") == "a100-80gb-sxm"


@pytest.mark.skipif(not validate.DEFAULT_CSV.is_file(), reason="shared calibration set not present")
def test_calibration_rows_within_bounds():
    import csv

    rows = list(csv.DictReader(validate.DEFAULT_CSV.open()))
    errors = {}
    for row in rows:
        pred, _ = validate.predict(row)
        if pred is not None:
            errors[row["id"]] = abs(pred - validate.measured_ms(row)) / validate.measured_ms(row)
    assert len(errors) >= 12
    assert all(errors[row] <= 0.15 for row in ('9', '10', '11')), errors  # tensor-parallel rows
    assert statistics.median(errors.values()) <= 0.10, errors
    assert max(errors.values()) <= 0.20, errors
