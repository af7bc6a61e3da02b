"""The roofline's ceilings: every dtype's peak, the vector peak, each memory's bandwidth and the ridge points."""
from __future__ import annotations

import pytest

from memsim.hardware import load_chip, resolve
from memsim.report.ceilings import ceilings


def test_h100_ceilings_and_ridge_points():
    chip, _ = load_chip(resolve("h100-sxm", "hardware", (".yaml",)))
    c = ceilings(chip)
    compute = dict(c.compute)
    assert compute["bf16"] == chip.compute.peak("bf16") and compute["vector"] == chip.compute.vector_flops_per_s
    assert c.compute[0][1] == max(compute.values())  # highest first
    assert c.main == "hbm" and dict(c.memory)["hbm"] == chip.level("hbm").bandwidth_bytes_per_s
    assert c.ridge("bf16") == pytest.approx(chip.compute.peak("bf16") / chip.level("hbm").bandwidth_bytes_per_s)
    assert dict(c.memory)["ddr"] <= dict(c.memory)["link:pcie"]  # host memory as its link allows


def test_an_sram_only_chip_has_its_sram_as_main_memory():
    chip, _ = load_chip(resolve("groq-lpu", "hardware", (".yaml",)))
    assert ceilings(chip).main == "sram"
