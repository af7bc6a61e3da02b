"""scripts/memory_wall.py reproduces the findings of "AI and Memory Wall" on xeon-gold-6242."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("memory_wall", ROOT / "scripts" / "memory_wall.py")
memory_wall = importlib.util.module_from_spec(spec)
spec.loader.exec_module(memory_wall)


@pytest.fixture(scope="module")
def study() -> pd.DataFrame:
    return memory_wall.case_study([128, 256])


def test_paper_orderings(study):
    for _n, part in study.groupby("tokens"):
        row = part.set_index("model")
        gpt2, base, large = row.loc["gpt2"], row.loc["bert-base"], row.loc["bert-large"]
        # GPT-2's FLOPs are similar to BERT-Base's and lower than BERT-Large's ...
        assert 0.5 * base.flops < gpt2.flops < 2 * base.flops
        assert gpt2.flops < large.flops
        # ... yet it moves orders of magnitude more bytes, at orders of magnitude lower intensity,
        assert gpt2.mops > 10 * large.mops > 10 * base.mops
        assert gpt2.arithmetic_intensity < base.arithmetic_intensity / 50
        assert gpt2.arithmetic_intensity < large.arithmetic_intensity / 50
        # ... and it takes the longest.
        assert gpt2.latency_s > large.latency_s > base.latency_s


def test_flops_grow_with_tokens(study):
    for model, part in study.groupby("model"):
        part = part.sort_values("tokens")
        assert (part["flops"].diff().dropna() > 0).all(), model
        assert (part["latency_s"].diff().dropna() > 0).all(), model


@pytest.mark.slow  # test_paper_orderings runs the study by default
def test_script_writes_csv_and_figure(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib", reason="the figure needs the plot extra")
    monkeypatch.setattr(sys, "argv", ["memory_wall.py", "--lengths", "128", "--out", str(tmp_path)])
    assert memory_wall.main() == 0
    df = pd.read_csv(tmp_path / "memory_wall.csv")
    assert set(df["model"]) == {"gpt2", "bert-base", "bert-large"}
    assert list(df.columns) == ["model", "task", "tokens", "flops", "mops", "latency_s", "arithmetic_intensity"]
    png = (tmp_path / "memory_wall.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
