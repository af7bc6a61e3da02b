"""The figures of the README and the docs/ pages are this commit's: every number in each block that
``scripts/figures.py`` writes is within 1% of what it prints now, and the words are the same."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("figures", ROOT / "scripts" / "figures.py")
figures = importlib.util.module_from_spec(spec)
sys.modules["figures"] = figures  # its dataclasses look their module up
spec.loader.exec_module(figures)


def test_differences_compare_numbers_within_one_percent_and_words_exactly():
    assert figures.differences("| 10.0 ms | hbm |", "| 10.09 ms | hbm |") == []
    assert figures.differences("| 10.0 ms | hbm |", "| 10.2 ms | hbm |") == ["10.0 in the page, 10.2 now"]
    assert figures.differences("| 10.0 ms | hbm |", "| 10.0 ms | sram |") != []
    assert figures.differences("x1.2 a", "x1.2 a b") != []


# The blocks that simulate large models on many presets, or every validation row.
SLOW = {"shows", "deployments", "every-preset", "validate-calibration", "validate-microbench"}


# The blocks that rerun a published experiment whole (minutes): run with -m heavy before changing them.
HEAVY = {"validate-serving", "serve-capacity"}


# The calibration's fit (minutes) is kept per process: its tests share one (pytest-xdist's loadgroup).
CALIBRATION = (pytest.mark.slow, pytest.mark.long, pytest.mark.xdist_group("calibration"))


@pytest.mark.parametrize("name", [pytest.param(n, marks=CALIBRATION) if n == "validate-calibration"
                                  else pytest.param(n, marks=pytest.mark.slow) if n in SLOW else
                                  pytest.param(n, marks=pytest.mark.heavy) if n in HEAVY else n
                                  for n in sorted(figures.BLOCKS)])
def test_readme_block_is_what_the_script_prints(name):
    written = figures.block_in(figures.page_of(name).read_text(encoding="utf-8"), name)
    assert written.strip(), f"block {name} is empty: run python scripts/figures.py --write"
    assert figures.differences(written, figures.BLOCKS[name]()) == []
