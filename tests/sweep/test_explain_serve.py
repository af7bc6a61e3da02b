"""memsim explain --serve: the changes that would raise a deployment's capacity at its SLOs, ranked."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from memsim.serving.capacity import CapacitySpec
from memsim.serving.spec import ServeSpec
from memsim.sweep.explain_serve import COLUMNS, explain_capacity
from tests.cli.test_cli import run_cli
from tests.conftest import TINY_MODEL


@pytest.fixture()
def model(tmp_path):
    path = tmp_path / "tiny-serving.json"
    path.write_text(json.dumps({**TINY_MODEL, "max_position_embeddings": 8192}))
    return str(path)


def test_a_host_bound_deployment_ranks_its_stacks_step_work_first(model):
    # one sequence at a time, arrivals almost evenly spaced: the capacity is the step's time, most of it the host's
    spec = ServeSpec(hw="h100-sxm", model=model, prompt=32, output_tokens=8, slo_ttft=0.003, max_seqs=1,
                     arrival="gamma", burstiness=0.01, check=0)
    frame = explain_capacity(spec, CapacitySpec(duration=0.5, warmup=0.05, start=64, bisect=2), factors=(0.5,),
                             workers=1)
    assert list(frame.columns) == list(COLUMNS)
    assert "the stack's host work" in frame.attrs["limited_by"] and frame.attrs["bound"] == "found"
    top = frame.iloc[0]
    assert top["quantity"] == "stack.step.fixed" and top["rank"] == 1 and top["gain"] >= 1.5
    hbm = frame[frame.quantity == "levels[hbm].bandwidth"].iloc[0]
    assert hbm["gain"] == pytest.approx(1.0)  # the chip's bandwidth is not what holds it back
    assert (frame["capacity_per_s"] <= top["capacity_per_s"]).all()
    assert "levels[hbm].capacity" in set(frame.quantity)  # the KV cache's home: the room for sequences in flight
    assert frame.attrs["capacity"] > 0 and set(frame["bound"]) <= {"found", "at least", "below"}


def test_the_command_takes_serving_keywords_as_sets_and_refuses_what_it_cannot_do(monkeypatch, capsys, model,
                                                                                  tmp_path):
    code, _, err = run_cli(monkeypatch, capsys, "explain", "--serve", "--model", model, "--set", "batchiness=3")
    assert code == 2 and "batchiness: neither a serving keyword" in err
    code, _, err = run_cli(monkeypatch, capsys, "explain", "--serve", "--model", model, "--out", str(tmp_path / "x"))
    assert code == 2 and "--output" in err and not (tmp_path / "x").exists()
    code, _, err = run_cli(monkeypatch, capsys, "explain", "--serve", "--model", model, "--batch", "4")
    assert code == 2 and "--batch" in err
    out = tmp_path / "explain.csv"
    code, stdout, err = run_cli(monkeypatch, capsys, "explain", "--serve", "--model", model, "--factor", "2",
                                "--set", "prompt=32", "--set", "output_tokens=4", "--set", "max_seqs=1", "--set",
                                "arrival=gamma", "--set", "burstiness=0.01", "--set", "slo_ttft=0.003", "--set",
                                "duration=0.3", "--set", "warmup=0.03", "--set", "start=64", "--set", "bisect=1",
                                "--set", "levels.hbm.bandwidth=3000GB/s", "--workers", "1", "-o", str(out))
    assert code == 0, err
    assert "capacity with the change (req/s)" in stdout and "3 TB/s" in stdout  # the --set chip, not the preset's
    assert list(pd.read_csv(out).columns) == list(COLUMNS)
