"""Every column a run writes is declared in memsim/report/columns.py, and docs/columns.md is generated from it."""
from __future__ import annotations

from pathlib import Path

from memsim import simulate
from memsim.report.columns import OPS, TIMELINE, declared, reference

PAGE = Path(__file__).resolve().parents[2] / "docs" / "columns.md"


def test_the_page_is_current():
    assert PAGE.read_text() == reference(), "python scripts/reference.py --write"


def test_every_column_a_run_writes_is_declared(tiny_chip_path, tiny_model_path):
    r = simulate(str(tiny_chip_path), str(tiny_model_path), context=8)
    assert list(r.timeline.columns) == list(TIMELINE)
    for col in r.ops.columns:
        assert declared(col, OPS), col
    assert any(c.endswith("_compulsory_bytes") for c in r.ops.columns)
    assert not declared("hbm_reads", OPS) and declared("link:pcie_read_bytes", OPS)
