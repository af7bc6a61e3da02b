"""The example trace ships current, and memsim's own requests.csv serves again as a trace."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from memsim import serve
from memsim.core.errors import ConfigError
from memsim.workload.requests import COLUMNS, WRITTEN, read_requests, requests_csv, synthetic

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("example_requests", ROOT / "scripts" / "example_requests.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_trace_is_what_its_script_draws():
    script = _script()
    assert script.PATH.read_text() == script.text()  # python scripts/example_requests.py --write
    requests = read_requests(script.PATH)
    assert len(requests) == script.EXAMPLE["n"] and all(r.prefix == 64 for r in requests)


def test_a_trace_written_reads_back_to_the_same_requests(tmp_path):
    drawn = synthetic(30, 5.0, lengths="lognormal", seed=3, prefix=16)
    path = tmp_path / "trace.csv"
    path.write_text(requests_csv(drawn))
    assert read_requests(path) == drawn


def test_a_runs_requests_csv_serves_again_as_the_same_trace(tmp_path, tiny_chip_path, tiny_model_path):
    trace = tmp_path / "trace.csv"
    trace.write_text(requests_csv(synthetic(12, 20.0, prompt=24, output=6, lengths="lognormal", seed=1, prefix=8)))
    first = serve(str(tiny_chip_path), str(tiny_model_path), requests=str(trace), max_seqs=8)
    first.write(tmp_path / "run")
    again = serve(str(tiny_chip_path), str(tiny_model_path), requests=str(tmp_path / "run" / "requests.csv"),
                  max_seqs=8)
    assert again.requests.equals(first.requests)
    written = set(first.requests.columns)
    assert written == set(COLUMNS) | set(WRITTEN)  # what serve writes is a trace's columns and its outcome


def test_a_column_that_is_neither_a_traces_nor_written_by_memsim_is_refused(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens,latency\n0,5,5,1\n")
    with pytest.raises(ConfigError, match="unknown column 'latency'"):
        read_requests(path)
