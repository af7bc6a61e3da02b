"""A chip built in Python is the chip read from YAML: the same spec, the same estimates (its file's
and its family's), the same step time and energy, however it was built."""
from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from memsim import hardware, simulate
from memsim.hardware import estimates
from memsim.hardware.dumps import dump_chip, spec_estimates
from memsim.hardware.families import FAMILIES, ByFamily, FamilyEstimate, unset
from memsim.hardware.loader import read_chip
from memsim.hardware.spec import ChipSpec, ComputeSpec, MemoryLevel

PRESETS = hardware.presets()


def rebuilt(value: Any, drop: frozenset[str] = frozenset(), where: str = "") -> Any:
    """``value`` constructed anew field by field, as a user writes it in Python: every value it
    declares (an estimate as one, with its range), none its family fills in, and none in ``drop``
    (dotted paths, a level by name: ``levels.hbm.efficiency``)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        kwargs = {}
        for f in dataclasses.fields(value):
            v, path = getattr(value, f.name), f"{where}{f.name}"
            if unset(v) or path in drop:
                continue
            if isinstance(v, tuple) and v and all(dataclasses.is_dataclass(x) for x in v):
                kwargs[f.name] = tuple(rebuilt(x, drop, f"{path}.{x.name}.") for x in v)
            else:
                kwargs[f.name] = rebuilt(v, drop, f"{path}.")
        return type(value)(**kwargs)
    if isinstance(value, estimates.Estimated):
        return estimates.estimated(estimates.plain(value), value.low, value.high, value.written)
    if isinstance(value, tuple):
        return tuple(rebuilt(x, drop, where) for x in value)
    return value


def _runs(hw: Any, model: str) -> tuple:
    r = simulate(hw, model, phase="decode", context=64, sensitivity=0)
    e = r.summary.estimates
    return r.summary.step_time_s, r.summary.energy_j, e.count, e.used, e.defaults


@pytest.mark.parametrize("name", PRESETS)
def test_a_preset_rebuilt_in_python_is_the_preset(name):
    loaded = hardware.load(name)
    chip = rebuilt(loaded)
    assert chip == loaded
    assert spec_estimates(chip) == spec_estimates(loaded)  # its file's estimates, and its family's
    assert chip.family_estimates() == loaded.family_estimates()
    assert dump_chip(chip) == dump_chip(loaded)


# The efficiencies a chip may leave to its family, as (field in Python, key in YAML).
LEFT = (("compute.efficiency", "efficiency"), ("compute.kernel_efficiency", "kernel_efficiency"))


@settings(max_examples=12)
@given(name=st.sampled_from(PRESETS), data=st.data())
def test_efficiencies_left_out_in_python_or_yaml_are_the_familys_alike(name, data, tmp_path_factory,
                                                                       tiny_model_file):
    """Leave any of a preset's efficiencies out, in its YAML or in Python: the two chips are one,
    take their family's estimates and list them, and run alike."""
    raw = read_chip(hardware.resolve(name, "hardware", hardware.HW_SUFFIXES))
    loaded = hardware.load(name)
    levels = [lvl.name for lvl in loaded.levels]
    drop = data.draw(st.frozensets(st.sampled_from([p for p, _ in LEFT] + [f"levels.{n}.efficiency" for n in levels])))
    for path in drop:
        if path.startswith("compute."):
            raw["compute"].pop(path.split(".")[1], None)
        else:
            next(lvl for lvl in raw["levels"] if lvl["name"] == path.split(".")[1]).pop("efficiency", None)
    file = tmp_path_factory.mktemp("chip") / f"{name}.yaml"
    file.write_text(yaml.safe_dump(raw, sort_keys=False))
    from_yaml, in_python = hardware.load(str(file)), rebuilt(loaded, drop)
    assert in_python == from_yaml
    assert spec_estimates(in_python) == spec_estimates(from_yaml)
    family = FAMILIES[loaded.family]
    for path, e in in_python.family_estimates().items():  # each left out is its family's estimate
        assert e in (family.compute_efficiency, family.kernel_efficiency, family.memory_efficiency), path
    assert _runs(in_python, tiny_model_file) == _runs(str(file), tiny_model_file)


def test_a_chip_built_in_python_from_scratch_lists_its_familys_estimates(tmp_path, tiny_model_file):
    """Built with no efficiency at all, a GPU streams at its family's estimates, not at 100% of peak,
    and a run lists each of them, as the same chip written in YAML does."""
    chip = ChipSpec(name="mine", family="gpu", compute=ComputeSpec(
        units=100, peak_flops_per_s=(("bf16", 500 * 10**12),), vector_flops_per_s=50 * 10**12),
        levels=(MemoryLevel("sram", "sram", 20 * 2**20, 100 * 10**12, 10_000),
                MemoryLevel("hbm", "hbm", 80 * 10**9, 2 * 10**12, 500_000)))
    gpu = FAMILIES["gpu"]
    assert isinstance(chip.compute.efficiency, FamilyEstimate) and chip.compute.efficiency == gpu.compute_efficiency.value
    assert chip.compute.kernel_efficiency == gpu.kernel_efficiency.value
    assert chip.level("hbm").efficiency == gpu.memory_efficiency.value < 1
    assert isinstance(chip.scratchpad.efficiency, ByFamily) and chip.scratchpad.efficiency == 1.0  # not an estimate
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\nfamily: gpu\ncompute: {units: 100, peak: {bf16: 500 TFLOP/s}, vector_peak: 50 TFLOP/s}\n"
                    "levels:\n  - {name: sram, kind: sram, capacity: 20 MiB, bandwidth: 100 TB/s, latency: 10 ns}\n"
                    "  - {name: hbm, kind: hbm, capacity: 80 GB, bandwidth: 2 TB/s, latency: 500 ns}\n")
    assert hardware.load(str(path)) == chip
    python, written = _runs(chip, tiny_model_file), _runs(str(path), tiny_model_file)
    assert python == written
    assert python[4] == ("compute.efficiency", "compute.kernel_efficiency", "levels[hbm].efficiency")
    # changed with dataclasses.replace: what it sets is its own, what it leaves stays its family's
    faster = dataclasses.replace(chip, compute=dataclasses.replace(chip.compute, efficiency=0.9))
    assert list(faster.family_estimates()) == ["compute.kernel_efficiency", "levels[hbm].efficiency"]
    # and moved to another family, it takes that family's estimates
    cpu = dataclasses.replace(chip, family="cpu")
    assert cpu.compute.efficiency == FAMILIES["cpu"].compute_efficiency.value
    assert cpu.compute.kernel_efficiency == 1.0 and "compute.kernel_efficiency" not in cpu.family_estimates()
