"""A family's template (``base: gpu``): no preset's calibration, every value it leaves an estimate
with the family's spread."""
from __future__ import annotations

import dataclasses

import pytest

from memsim import hardware, simulate
from memsim.core.errors import ConfigError
from memsim.hardware import templates
from memsim.hardware.dumps import spec_estimates
from memsim.hardware.families import FAMILIES, FamilyEstimate, unset
from memsim.hardware.loader import apply_override, build
from memsim.hardware.spec import ChipSpec


def _file(tmp_path, text: str, name: str = "mine.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _quantities(spec, where: str = "") -> dict[str, object]:
    """Every non-zero quantity a spec holds, by YAML path (tables by entry)."""
    out: dict[str, object] = {}
    for f in dataclasses.fields(spec):
        unit, key, value = f.metadata["unit"], f.metadata["key"], getattr(spec, f.name)
        path = f"{where}.{key}" if where else key
        if unit == "section":
            out |= _quantities(value, path)
        elif unit == "list":
            for item in value:
                out |= _quantities(item, f"{path}[{item.name}]")
        elif unit in ("rates", "energies", "ratios", "ops"):
            out |= {f"{path}.{k}": v for k, v in value if v}
        elif unit in templates.QUANTITIES and isinstance(value, (int, float)) and value and not unset(value):
            out[path] = value
    return out


def test_a_base_gpu_chip_lists_every_value_it_did_not_set_as_an_estimate(tmp_path, tiny_model_file):
    path = _file(tmp_path, "base: gpu\ncompute.peak.bf16: 500 TFLOP/s\nhbm.bandwidth: 2 TB/s\n")
    chip = hardware.load(path)
    assert (chip.name, chip.derived_from, chip.family, chip.stack) == ("mine", "gpu + 2 changes", "gpu", "")
    listed = {e.path for e in spec_estimates(chip)}
    unset = set(_quantities(chip)) - {"compute.peak.bf16", "levels[hbm].bandwidth"}
    execution = {p for p in unset if p.startswith("execution.") and p.split(".")[1] in
                 ("weight_prefetch", "pipeline_chunks", "comm_overlap")}  # the family's choices, not figures
    assert unset - execution <= listed and {"compute.peak.bf16", "levels[hbm].bandwidth"}.isdisjoint(listed)
    # no preset's calibration: its efficiencies are the family's estimates
    gpu = FAMILIES["gpu"]
    assert isinstance(chip.compute.efficiency, FamilyEstimate) and chip.compute.kernel_efficiency == \
        gpu.kernel_efficiency.value and chip.compute.dtype_efficiency == ()
    r = simulate(path, tiny_model_file, phase="decode", context=64, sensitivity=0)
    assert r.summary.derived_from == "gpu + 2 changes"
    assert set(r.summary.estimates.defaults) == {"compute.efficiency", "compute.kernel_efficiency",
                                                 "levels[hbm].efficiency"}


def _template(family: str) -> ChipSpec:
    return build(ChipSpec, templates.template(family), family, "")


def test_a_template_is_its_reference_chip_with_the_familys_spread():
    presets = [hardware.load(n) for n in FAMILIES["gpu"].template]
    ref = presets[0]  # h100-sxm
    found = {e.path: e for e in spec_estimates(_template("gpu"))}
    hbm = found["levels[hbm].bandwidth"]
    assert hbm.value == ref.level("hbm").bandwidth_bytes_per_s
    assert (hbm.low, hbm.high) == (min(p.level("hbm").bandwidth_bytes_per_s for p in presets),
                                   max(p.level("hbm").bandwidth_bytes_per_s for p in presets))
    # the link that joins chips is matched by its part, whatever its name (mi300x's is xgmi)
    link = found[f"links[{ref.interconnect.name}].bandwidth"]
    assert (link.low, link.high) == (min(p.interconnect.bandwidth_bytes_per_s for p in presets),
                                     max(p.interconnect.bandwidth_bytes_per_s for p in presets))


@pytest.mark.parametrize("family", templates.names())
def test_every_end_of_every_templates_range_loads(family, tmp_path, tiny_model_file):
    """A rerun at either end of any range is a chip that loads, and each family's template runs."""
    raw = templates.template(family)
    chip = build(ChipSpec, raw, family, "")
    found = spec_estimates(chip)
    assert len(found) >= 15
    for e in found:
        assert e.low <= e.value <= e.high
        for end in e.written[1:]:
            trial = templates.template(family)
            apply_override(trial, e.set_path, end)
            build(ChipSpec, trial, family, "")
    path = _file(tmp_path, f"base: {family}\n")
    r = simulate(path, tiny_model_file, phase="decode", context=64, sensitivity=0)
    assert r.summary.step_time_s > 0 and r.summary.derived_from == f"{family} + 0 changes"
    assert templates.template(family) == raw  # each call its own copy


def test_a_base_that_names_nothing_lists_the_templates(tmp_path):
    with pytest.raises(ConfigError, match="or a family's template: cpu, gpu, rdu, wafer"):
        hardware.load(_file(tmp_path, "base: gpux\n"))
    assert templates.template("gpux") is None
