"""Families as declared records: a family added by one file, its traits read from its record."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from memsim import simulate
from memsim.hardware import load_chip
from memsim.hardware.families import ALWAYS, BY_FAMILY, FAMILIES, Efficiency, Family
from memsim.hardware.reference import families_table
from memsim.mapping.strategy import STRATEGIES
from memsim.stack.loader import default_for
from tests.conftest import TINY_CHIP

# A family of its own, in one file: dataflow-like execution values, its own efficiency estimates,
# weights kept on chip, and a mapping strategy of its own registered beside it (here the gpu's
# kernel-per-operator plan under another name).
MODULE = '''
from memsim.hardware.families import ALWAYS, Efficiency, Family, register
from memsim.mapping.families.gpu import plan_gpu
from memsim.mapping.strategy import STRATEGIES

register(Family(
    name="npu", help="a test's neural processing unit: kernels per operator, weights kept on chip",
    execution=(("weight_prefetch", 2), ("comm_overlap", 2)),
    compute_efficiency=Efficiency(value=0.6, low=0.4, high=0.8, source="a test's estimate of its GEMMs"),
    memory_efficiency=Efficiency(value=0.7, low=0.5, high=0.9, source="a test's estimate of its DRAM"),
    weights_on_chip=ALWAYS, stack="ideal", strategy="npu-plan"))
STRATEGIES.add("npu-plan", plan_gpu)
'''


@pytest.fixture()
def npu(tmp_path):
    path = tmp_path / "family_npu.py"
    path.write_text(MODULE)
    spec = importlib.util.spec_from_file_location("family_npu", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield FAMILIES["npu"]
    FAMILIES.unregister("npu")
    STRATEGIES.unregister("npu-plan")
    sys.modules.pop(spec.name, None)


def _chip(tmp_path: Path, text: str) -> str:
    path = tmp_path / "chip.yaml"
    path.write_text(text)
    return str(path)


def test_a_family_is_one_file_and_a_chip_of_it_runs(tmp_path, tiny_model_path, npu):
    text = (TINY_CHIP.replace("family: gpu", "family: npu").replace("  efficiency: 0.9\n", "")
            .replace(", efficiency: 0.9}", "}").replace("64 KiB", "8 MiB"))
    chip, _ = load_chip(_chip(tmp_path, text))
    assert chip.family_of is npu
    assert chip.execution.weight_prefetch == 2 and chip.execution.comm_overlap == 2  # its execution values
    assert chip.execution.pipeline == BY_FAMILY["pipeline"]  # and what every family shares
    assert chip.compute.efficiency == 0.6 and chip.level("hbm").efficiency == 0.7  # its estimates
    r = simulate(_chip(tmp_path, text), str(tiny_model_path), context=16, sensitivity=0)
    assert r.summary.family == "npu" and r.summary.step_time_s > 0
    assert r.summary.estimates.defaults == ("compute.efficiency", "levels[hbm].efficiency")
    assert r.summary.placement["weight"].get("sram", 0) > 0  # weights kept on chip, as its record says
    assert default_for("npu") == "ideal"
    assert "| `npu` |" in families_table()
    gpu = simulate(_chip(tmp_path, text.replace("family: npu", "family: gpu")), str(tiny_model_path), context=16,
                   sensitivity=0)
    assert gpu.summary.placement["weight"].get("sram", 0) == 0  # a gpu's scratchpad only stages tiles


def test_a_family_record_is_checked_when_declared():
    good = Efficiency(value=0.5, low=0.4, high=0.6, source="a measured row somewhere")
    with pytest.raises(ValueError, match="low <= value"):
        Efficiency(value=0.9, low=0.4, high=0.6, source="a measured row somewhere")
    with pytest.raises(ValueError, match="execution names only"):
        Family(name="x", help="?", execution=(("streamz", ()),), compute_efficiency=good, memory_efficiency=good,
               weights_on_chip=ALWAYS, stack="ideal")
    assert Family(name="x", help="?", execution=(), compute_efficiency=good, memory_efficiency=good,
                  weights_on_chip=ALWAYS, stack="ideal").strategy == "x"  # its own strategy by default


def test_every_shipped_family_has_a_strategy_a_stack_and_sourced_estimates():
    for family in FAMILIES.values():
        assert family.strategy in STRATEGIES
        assert len(family.compute_efficiency.source) > 20 and len(family.memory_efficiency.source) > 20
        assert family.values().keys() == BY_FAMILY.keys()
