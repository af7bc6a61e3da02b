"""The published serving experiment's data and report (the runs themselves: scripts/validate.py --serving)."""
from __future__ import annotations

import re

import pytest

from memsim.validation import serving


def test_every_row_names_its_source_at_a_commit_and_a_chip_memsim_has():
    rows = serving.load()
    assert len(rows) == 20 and {r["hw"] for r in rows} == {"h100-sxm", "h200-sxm"}
    for r in rows:
        assert re.search(r"/blob/[0-9a-f]{40}/", r["url"]) and float(r["output_tokens_per_s"]) > 0
        assert int(r["requests"]) > 0 and int(r["input_tokens"]) > 0 and int(r["output_tokens"]) > 0


def test_the_report_gives_each_rows_error_and_the_median_and_worst():
    rows = [serving.Row(hw="h100-sxm", input_tokens=128, output_tokens=128, requests=10, measured=100.0,
                        predicted={"bf16": 90.0, "fp8": 110.0}),
            serving.Row(hw="h200-sxm", input_tokens=128, output_tokens=2048, requests=10, measured=200.0,
                        predicted={"bf16": 150.0, "fp8": 210.0})]
    text = serving.markdown(rows)
    assert "| -10.0% |" in text and "| +10.0% |" in text and "| -25.0% |" in text
    assert "KV bf16: median |error| 25.0%, max 25.0% over 2 rows." in text
    assert rows[1].error("fp8") == pytest.approx(0.05)


def test_a_small_offline_run_is_bounded_by_its_decode_steps():
    """A run of every request at once never beats decoding every sequence at the smallest step time."""
    from memsim import simulate

    got = serving.predict("h100-sxm", 128, 32, 64, "fp8")
    step = simulate("h100-sxm", "llama-3.1-8b", phase="decode", batch=64, context=128, weight_dtype="fp8",
                    kv_dtype="fp8", sensitivity=0).summary.step_time_s
    assert 0 < got <= 64 / step
