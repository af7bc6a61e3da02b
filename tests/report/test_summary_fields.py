"""The declared summary: every key summary.json holds is a field of Summary, the console table
and the generation read it, and docs/summary.md is generated from it."""
from __future__ import annotations

from pathlib import Path

import pytest

from memsim import simulate
from memsim.report.summary_fields import ABSENT, COMBINE, FIELDS, ONCE, RECOMPUTED, SUMMED, checked, reference
from memsim.run import table as console_table

ROOT = Path(__file__).resolve().parents[2]


def test_docs_summary_page_is_generated_from_the_declaration():
    assert (ROOT / "docs" / "summary.md").read_text() == reference(), "python scripts/reference.py --write"


def test_every_field_declares_unit_help_and_rule():
    for name, f in FIELDS.items():
        assert f.metadata["unit"] and len(f.metadata["help"]) > 10, name
        assert f.metadata["combine"] in (SUMMED, ONCE, RECOMPUTED), name
    assert COMBINE == {name: f.metadata["combine"] for name, f in FIELDS.items()}


def test_a_run_writes_its_keys_in_the_declared_order(tiny_chip_path, tiny_model_path):
    s = simulate(str(tiny_chip_path), str(tiny_model_path), context=16).summary
    declared = [name for name in FIELDS if name in s]
    assert list(s) == declared
    required = [name for name, f in FIELDS.items() if f.default is not ABSENT]
    assert set(required) <= set(s)
    assert "ttft_s" not in s and "estimates" in s  # a generation's key is absent from a step; api.run adds estimates


def test_an_undeclared_or_missing_key_is_a_bug_caught_where_the_summary_is_built(tiny_chip_path, tiny_model_path):
    s = simulate(str(tiny_chip_path), str(tiny_model_path), context=16).summary
    with pytest.raises(TypeError, match="new_key"):
        checked({**s, "new_key": 1})
    with pytest.raises(TypeError, match="step_time_s"):
        checked({k: v for k, v in s.items() if k != "step_time_s"})


def test_the_console_table_renders_declared_keys_in_their_order(tiny_chip_path, tiny_model_path):
    assert set(console_table.RENDER) <= set(FIELDS)
    s = simulate(str(tiny_chip_path), str(tiny_model_path), phase="generate", prompt=16, generate=3).summary
    text = console_table.table(s)
    marks = ["step time", "roofline", "FLOPs", "compute busy", "generation", "stall", "energy", "power"]
    at = [text.index(m) for m in marks]
    assert at == sorted(at)
    assert text.splitlines()[0].startswith(s["hardware"])
