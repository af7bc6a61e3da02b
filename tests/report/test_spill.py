"""Where weights and the KV cache live, and the one line that says when host memory holds them."""
from __future__ import annotations

import subprocess
import sys
import warnings

from memsim.report import spill
from memsim.run import api


def _warned(**kw) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = api.simulate(**kw)
    return result, [str(w.message) for w in caught if "host memory" in str(w.message)]


def test_weights_that_spill_to_host_memory_are_named_with_the_level_link_and_bytes():
    result, said = _warned(hw="h100-sxm", model="llama-3.1-70b")
    assert len(said) == 1
    placed = spill.bytes_by_level(result.graph, result.plan)
    on_host = placed["weight"]["ddr"]
    assert on_host > 50e9 and placed["weight"]["hbm"] + on_host == result.graph.bytes_of("weight")
    assert f"weights {on_host / 1e9:.2f} GB in ddr (over pcie)" in said[0]
    assert "KV cache" in said[0] and "\n" not in said[0]


def test_a_model_that_fits_says_nothing_and_more_chips_bring_it_home():
    assert _warned(hw="h100-sxm", model="llama-2-7b")[1] == []
    result, said = _warned(hw="h100-sxm", model="llama-3.1-70b", tp=2)
    assert said == [] and set(spill.bytes_by_level(result.graph, result.plan)["weight"]) == {"hbm"}


def test_the_cli_prints_it_once_on_stderr():
    run = subprocess.run([sys.executable, "-m", "memsim.cli.main", "run", "--hw", "h100-sxm", "--model", "llama-3.1-70b"],
                         capture_output=True, text=True, check=False)
    lines = [line for line in run.stderr.splitlines() if "host memory holds" in line]
    assert run.returncode == 0 and len(lines) == 1 and "--tp" in lines[0]
