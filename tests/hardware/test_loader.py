"""Hardware YAML: shipped presets, ``--set`` overrides, errors that name file and field, dump round-trip."""
from __future__ import annotations

import dataclasses
import textwrap

import pytest
import yaml

from memsim import hardware
from memsim.core.errors import ConfigError
from memsim.core.presets import config_dir
from memsim.hardware import ChipSpec, dump_chip, load_chip
from memsim.hardware.spec import LinkSpec
from memsim.report.summary_records import ABSENT

PRESETS = sorted(p.stem for p in config_dir("hardware").glob("*.yaml"))

MINIMAL = """\
name: tiny
family: gpu
description: a small test chip
compute:
  units: 4
  peak:
    bf16: 100 TFLOP/s
  vector_peak: 10 TFLOP/s
levels:
  - name: sram
    kind: sram
    capacity: 1 MiB
    bandwidth: 10 TB/s
    latency: 10 ns
  - name: hbm
    kind: hbm
    capacity: 16 GB
    bandwidth: 3.35 TB/s
    latency: 600 ns
    channels: 4
"""


def write(tmp_path, text: str, name: str = "chip.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def config_error(path, *needles: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_chip(path)
    message = str(info.value)
    assert str(path) in message
    for needle in needles:
        assert needle in message, message
    return info.value


def test_presets_are_listed():
    assert {"a100-80gb-sxm", "h100-sxm"} <= set(PRESETS)
    assert hardware.presets() == sorted(PRESETS)


@pytest.mark.parametrize("name", PRESETS)
def test_shipped_preset_loads(name):
    chip = hardware.load(name)
    assert isinstance(chip, ChipSpec)
    assert chip.name == name
    assert chip.family in ("gpu", "wafer", "rdu", "cpu")
    assert chip.scratchpad.kind == "sram"
    if name in ("h100-sxm", "a100-80gb-sxm"):
        assert chip.level("hbm").capacity_bytes == 80 * 10**9
    assert chip.compute.peak("bf16") >= chip.compute.vector_flops_per_s
    assert chip.levels[0].kind_of.on_chip  # fastest first


def test_h100_values_are_parsed_into_base_units():
    chip = hardware.load("h100-sxm")
    hbm = chip.level("hbm")
    assert hbm.bandwidth_bytes_per_s == 3_350_000_000_000
    assert hbm.latency_ps == 600_000
    assert hbm.channels == 5
    assert hbm.efficiency == 0.89  # microbench.csv row 35
    assert chip.scratchpad.capacity_bytes == 30096 * 1024
    assert chip.compute.units == 132
    assert chip.compute.peak("bf16") == 989 * 10**12
    assert chip.compute.peak("fp8") == 1979 * 10**12
    assert chip.compute.peak("int4") == 989 * 10**12  # weight-only format falls back to bf16
    assert chip.execution.op_overhead_ps == 2_470_000  # calibrated (README, Calibration)
    assert chip.execution.accumulator_bytes == 4
    assert [link.name for link in chip.links] == ["nvlink", "pcie"]
    assert chip.links[0].bandwidth_bytes_per_s == 25 * 10**9  # one NVLink4 link per direction
    assert chip.links[0].count == 18 and chip.links[0].peak_bandwidth == 450 * 10**9


def test_matrix_efficiency_is_per_dtype_times_the_stack_factor():
    chip = hardware.load("h100-sxm", [("compute.kernel_efficiency", "0.5")])
    assert chip.compute.matrix_efficiency("fp8") == pytest.approx(0.71 * 0.5)  # microbench.csv rows 7, 17, 27
    assert chip.compute.matrix_efficiency("bf16") == pytest.approx(0.80 * 0.5)  # row 2
    # a dtype without an entry takes compute.efficiency
    assert chip.compute.matrix_efficiency("int8") == pytest.approx(chip.compute.efficiency * 0.5)


def test_load_by_path_equals_load_by_name():
    path = config_dir("hardware") / "a100-80gb-sxm.yaml"
    assert hardware.load(str(path)) == hardware.load("a100-80gb-sxm")


def test_unknown_preset_lists_the_shipped_ones():
    with pytest.raises(ConfigError) as info:
        hardware.load("h200-nonexistent")
    assert "h100-sxm" in str(info.value)
    assert "h200-nonexistent" in str(info.value)


@pytest.mark.parametrize(
    ("path", "value", "get", "expected"),
    [
        ("sram.capacity", "64MiB", lambda c: c.scratchpad.capacity_bytes, 64 * 2**20),
        ("hbm.bandwidth", "4 TB/s", lambda c: c.level("hbm").bandwidth_bytes_per_s, 4 * 10**12),
        ("hbm.capacity", "1 GB", lambda c: c.level("hbm").capacity_bytes, 10**9),
        ("compute.units", "64", lambda c: c.compute.units, 64),
        ("execution.prefetch_depth", "3", lambda c: c.execution.prefetch_depth, 3),
        ("compute.peak.bf16", "500 TFLOP/s", lambda c: c.compute.peak("bf16"), 500 * 10**12),
        ("nvlink.bandwidth", "900 GB/s", lambda c: c.links[0].bandwidth_bytes_per_s, 900 * 10**9),
        ("levels.hbm.latency", "1 us", lambda c: c.level("hbm").latency_ps, 10**6),
        ("execution.kv_split", "4", lambda c: c.execution.kv_split, 4),
        ("nvlink.efficiency", "0.5", lambda c: c.links[0].effective_bandwidth, 225 * 10**9),
        ("system.step_latency", "3 us", lambda c: c.system.step_latency_ps, 3 * 10**6),
        ("sram.holds", "weight, activation", lambda c: c.scratchpad.holds, ("weight", "activation")),  # names by commas
        ("compute.native", "fp8,int8", lambda c: c.compute.native, ("fp8", "int8")),
    ],
)
def test_override_changes_exactly_one_field(path, value, get, expected):
    base = hardware.load("h100-sxm")
    chip = hardware.load("h100-sxm", [(path, value)])
    assert get(chip) == expected
    assert get(base) != expected
    # Everything else is untouched: undo the change on the base and compare whole specs.
    dumped_base, dumped_chip = dump_chip(base), dump_chip(chip)
    differences = _diff(dumped_base, dumped_chip)
    assert len(differences) == 1, differences


def _diff(a, b, where=""):
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in set(a) | set(b):
            out += _diff(a.get(key), b.get(key), f"{where}.{key}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _diff(x, y, f"{where}[{i}]")]
    return [] if a == b else [where]


def test_override_of_peak_keeps_other_dtypes():
    chip = hardware.load("h100-sxm", [("compute.peak.bf16", "1 PFLOP/s")])
    assert chip.compute.peak("bf16") == 10**15
    assert chip.compute.peak("fp16") == 989 * 10**12
    assert chip.compute.peak("fp8") == 1979 * 10**12


def test_overrides_do_not_leak_into_the_next_load():
    hardware.load("h100-sxm", [("sram.capacity", "1 MiB")])
    assert hardware.load("h100-sxm").scratchpad.capacity_bytes == 30096 * 1024


def test_overrides_apply_in_order():
    chip = hardware.load("h100-sxm", [("sram.capacity", "1 MiB"), ("sram.capacity", "2 MiB")])
    assert chip.scratchpad.capacity_bytes == 2 * 2**20


def test_override_can_add_an_optional_field():
    chip = hardware.load("h100-sxm", [("sram.efficiency", "0.5")])
    assert chip.scratchpad.efficiency == 0.5


@pytest.mark.parametrize(
    ("path", "value", "needle"),
    [
        ("nosuchlevel.capacity", "1 GB", "nosuchlevel"),
        ("sram.bandwith", "1 TB/s", "bandwith"),
        ("compute.unit", "4", "unit"),
        ("hbm.capacity", "3.35", "hbm"),
        ("hbm.bandwidth", "-1 TB/s", "bandwidth"),
        ("execution.prefetch_depth", "0", "prefetch_depth"),
        ("compute.dtype_efficiency.fp8", "1.5", "dtype_efficiency.fp8"),
        ("compute.dtype_efficiency", "0.7", "dtype_efficiency"),
        ("compute.kernel_efficiency", "0", "kernel_efficiency"),
        ("nvlink.efficiency", "1.2", "efficiency"),
        ("system.step_latency", "-1 us", "step_latency"),
        # checked by the spec constructors, as a file is
        ("compute.peak", "1 TFLOP/s", "compute.peak"),
        ("compute.peak.bf17", "1 TFLOP/s", "compute.peak.bf17"),
        ("hbm.bandwidth", "1e400 TB/s", "levels[hbm].bandwidth"),
        ("execution.streams", "compute,compute", "execution.streams"),
    ],
)
def test_bad_override_raises_config_error_naming_the_field(path, value, needle):
    with pytest.raises(ConfigError) as info:
        hardware.load("h100-sxm", [(path, value)])
    message = str(info.value)
    assert needle in message
    assert info.value.field is not None and needle in info.value.field
    assert info.value.file is not None and "set" in info.value.file  # the overrides: --set on the command line
    assert "--set" in info.value.one_line(flags=True)


def test_minimal_chip_loads_with_defaults(tmp_path):
    chip, raw = load_chip(write(tmp_path, MINIMAL))
    assert raw["name"] == "tiny"
    assert chip.links == ()
    family = chip.family_of.values()
    assert chip.execution == dataclasses.replace(hardware.ExecutionSpec(), **family)  # the defaults, its family's
    assert chip.scratchpad.channels == 1 and chip.scratchpad.scope == "chip" and chip.scratchpad.efficiency == 1.0
    assert chip.level("hbm").channels == 4
    assert chip.compute.efficiency == chip.family_of.compute_efficiency.value  # the family's, not the ideal 1.0
    assert chip.level("hbm").efficiency == chip.family_of.memory_efficiency.value


def test_unknown_field_names_file_and_dotted_field(tmp_path):
    path = write(tmp_path, MINIMAL.replace("    bandwidth: 3.35 TB/s", "    bandwith: 3.35 TB/s"))
    err = config_error(path, "bandwith", "unknown field")
    assert err.field == "levels[hbm].bandwith"
    assert err.file == str(path)


def test_unknown_top_level_section_field(tmp_path):
    path = write(tmp_path, MINIMAL.replace("  units: 4", "  units: 4\n  clock: 2 GHz"))
    err = config_error(path, "compute.clock")
    assert err.field == "compute.clock"


def test_unitless_bandwidth_names_file_and_field(tmp_path):
    path = write(tmp_path, MINIMAL.replace("bandwidth: 3.35 TB/s", "bandwidth: 3.35"))
    err = config_error(path, "levels[hbm].bandwidth", "3.35")
    assert err.field == "levels[hbm].bandwidth"


def test_quoted_unitless_bandwidth_is_refused(tmp_path):
    path = write(tmp_path, MINIMAL.replace("bandwidth: 3.35 TB/s", 'bandwidth: "3.35"'))
    config_error(path, "levels[hbm].bandwidth")


def test_negative_bandwidth_names_file_and_field(tmp_path):
    path = write(tmp_path, MINIMAL.replace("bandwidth: 3.35 TB/s", "bandwidth: -1 TB/s"))
    err = config_error(path, "levels[hbm].bandwidth", "negative")
    assert err.field == "levels[hbm].bandwidth"


def test_zero_bandwidth_is_refused(tmp_path):
    path = write(tmp_path, MINIMAL.replace("bandwidth: 3.35 TB/s", "bandwidth: 0 TB/s"))
    config_error(path, "levels[hbm].bandwidth", "positive")


def test_wrong_unit_kind_names_the_field(tmp_path):
    path = write(tmp_path, MINIMAL.replace("latency: 600 ns", "latency: 600 GB"))
    err = config_error(path, "levels[hbm].latency")
    assert err.field == "levels[hbm].latency"


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("    latency: 600 ns\n", "levels[hbm].latency"),
        ("  vector_peak: 10 TFLOP/s\n", "compute.vector_peak"),
        ("family: gpu\n", "family"),
    ],
)
def test_missing_required_field_names_file_and_field(tmp_path, line, field):
    assert line in MINIMAL
    path = write(tmp_path, MINIMAL.replace(line, "", 1))
    err = config_error(path, field, "missing")
    assert err.field == field


def test_chip_without_a_scratchpad_level_is_refused_and_its_name_is_free(tmp_path):
    text = MINIMAL.replace("  - name: sram\n    kind: sram\n", "  - name: sram\n    kind: l2\n")
    err = config_error(write(tmp_path, text), "one scratchpad level (of kind sram), not 0")
    assert err.field == "levels"
    renamed = MINIMAL.replace("  - name: sram\n    kind: sram\n", "  - name: smem\n    kind: sram\n")
    assert load_chip(write(tmp_path, renamed))[0].scratchpad.name == "smem"


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("family: gpu", "family: tpu", "family"),
        ("    kind: hbm", "    kind: flash", "levels[hbm].kind"),
        ("  units: 4", "  units: 0", "compute.units"),
        ("    channels: 4", "    channels: 0", "levels[hbm].channels"),
        ("    capacity: 16 GB", "    capacity: 0 GB", "levels[hbm].capacity"),
        ("  - name: hbm", "  - name: sram", "levels"),  # duplicate level name
    ],
)
def test_impossible_values_name_their_field(tmp_path, old, new, field):
    assert old in MINIMAL
    err = config_error(write(tmp_path, MINIMAL.replace(old, new, 1)), field)
    assert err.field == field


def test_invalid_yaml_names_file_and_line(tmp_path):
    path = write(tmp_path, "name: x\nlevels: [\n")
    config_error(path, "invalid YAML", "line")


def test_missing_file_names_file(tmp_path):
    path = tmp_path / "absent.yaml"
    with pytest.raises(ConfigError) as info:
        hardware.load(str(path))
    assert str(path) in str(info.value)


@pytest.mark.parametrize("name", PRESETS)
def test_dump_round_trips_presets(tmp_path, name):
    chip = hardware.load(name)
    path = tmp_path / "dumped.yaml"
    path.write_text(yaml.safe_dump(dump_chip(chip)))
    again, _ = load_chip(path)
    assert again == chip


def test_dump_round_trips_minimal_chip(tmp_path):
    # A chip that relies on defaults (no links, no description) must dump to a loadable file too.
    text = MINIMAL.replace("description: a small test chip\n", "")
    chip, _ = load_chip(write(tmp_path, text))
    path = tmp_path / "dumped.yaml"
    path.write_text(yaml.safe_dump(dump_chip(chip)))
    again, _ = load_chip(path)
    assert again == chip


def test_dump_round_trips_an_overridden_chip(tmp_path):
    chip = hardware.load("a100-80gb-sxm", [("sram.capacity", "1.5 MiB"), ("hbm.bandwidth", "1.234567 TB/s"),
                                           ("execution.op_overhead", "1.5 us")])
    path = tmp_path / "dumped.yaml"
    path.write_text(yaml.safe_dump(dump_chip(chip)))
    again, _ = load_chip(path)
    assert again == chip
    assert again.level("hbm").bandwidth_bytes_per_s == 1_234_567_000_000


def test_specs_are_frozen():
    chip = hardware.load("h100-sxm")
    with pytest.raises(dataclasses.FrozenInstanceError):
        chip.name = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        chip.scratchpad.capacity_bytes = 1  # type: ignore[misc]


def test_effective_bandwidth_and_chip_capacity_scale_per_unit(tmp_path):
    text = MINIMAL.replace("    latency: 10 ns\n", "    latency: 10 ns\n    scope: unit\n    efficiency: 0.5\n")
    chip, _ = load_chip(write(tmp_path, text))
    assert chip.scratchpad.scope == "unit"
    assert chip.chip_capacity(chip.scratchpad) == 4 * 2**20
    assert chip.scratchpad.effective_bandwidth(chip.compute.units) == 4 * 10 * 10**12 // 2
    hbm = chip.level("hbm")
    assert chip.chip_capacity(hbm) == 16 * 10**9
    assert hbm.effective_bandwidth(chip.compute.units) == int(3_350_000_000_000 * hbm.efficiency)  # the family's


@pytest.mark.parametrize(
    ("hw", "overrides", "field", "message"),
    [
        ("wse-3", [("execution.fabric", "fabrik")], "execution.fabric", "no link named 'fabrik' (links: fabric, io)"),
        ("h100-sxm", [("execution.fabric", "fabric")], "execution.fabric",
         "no link named 'fabric' (links: nvlink, pcie)"),
        ("sn40l", [("execution.stage_from", "ddr,dram")], "execution.stage_from",
         "no level named 'dram' (levels: sram, hbm, ddr)"),
        ("sn40l", [("execution.stage_into", "hbm3")], "execution.stage_into",
         "no level named 'hbm3' (levels: sram, hbm, ddr)"),
        ("sn40l", [("execution.stage_into", "")], "execution.stage_into",
         "required when execution.stage_from is set"),
        ("sn40l", [("execution.stage_into", "ddr")], "execution.stage_from", "'ddr' cannot be staged into itself"),
        ("h100-sxm", [("system.link", "ici")], "system.link", "no link named 'ici' (links: nvlink, pcie)"),
        ("h100-sxm", [("ddr.via", "cxl")], "levels[ddr].via", "no link named 'cxl' (links: nvlink, pcie)"),
    ],
)
def test_fields_that_name_a_link_or_level_must_name_one_of_the_chips(hw, overrides, field, message):
    with pytest.raises(ConfigError) as info:
        hardware.load(hw, overrides)
    assert info.value.field == field
    assert info.value.message == message
    assert f"{hw}.yaml (with set): {field}: {message}" in str(info.value)


def test_execution_names_in_a_file_are_checked_like_overrides(tmp_path):
    err = config_error(write(tmp_path, MINIMAL + "execution:\n  fabric: noc\n"), "no link named 'noc' (links: none)")
    assert err.field == "execution.fabric"
    err = config_error(write(tmp_path, MINIMAL + "execution:\n  stage_from: [hbm, 3]\n  stage_into: sram\n"),
                       "expected a list of names")
    assert err.field == "execution.stage_from"


def test_stage_from_is_a_list_or_comma_separated_names(tmp_path):
    chip, _ = load_chip(write(tmp_path, MINIMAL + "execution:\n  stage_from: [hbm]\n  stage_into: sram\n"))
    assert chip.execution.stage_from == ("hbm",) and chip.execution.stage_into == "sram"
    sn40l = hardware.load("sn40l")
    assert sn40l.execution.stage_from == ("ddr",) and sn40l.execution.stage_into == "hbm"
    assert hardware.load("sn40l", [("execution.stage_from", " ddr , ")]) == sn40l
    assert hardware.load("sn40l", [("execution.stage_from", "")]).execution.stage_from == ()


@pytest.mark.parametrize("name", PRESETS)
def test_presets_declare_what_their_family_treats_specially(name):
    chip = hardware.load(name)
    assert chip.execution.fabric == ("fabric" if chip.family == "wafer" else "")
    staged = {"sn40l": (("ddr",), "hbm")}.get(name, ((), ""))
    assert (chip.execution.stage_from, chip.execution.stage_into) == staged


@pytest.mark.parametrize(("value", "message"), [
    ("0", "must be from 1 (off) to 64"), ("65", "must be from 1 (off) to 64"), ("-1", "'-1' is negative"),
    ("x", "expected a whole number, got 'x'"), ("2.5", "expected a whole number"),
])
def test_comm_overlap_is_a_count_of_chunks(value, message):
    with pytest.raises(ConfigError) as info:
        hardware.load("h100-sxm", [("execution.comm_overlap", value)])
    assert info.value.field == "execution.comm_overlap"
    assert f"h100-sxm.yaml (with set): execution.comm_overlap: {message}" in str(info.value)
    assert "\n" not in str(info.value)
    assert hardware.load("h100-sxm", [("execution.comm_overlap", "4")]).execution.comm_overlap == 4


def test_comm_overlap_in_a_file_is_checked_like_an_override(tmp_path):
    err = config_error(write(tmp_path, MINIMAL + "execution:\n  comm_overlap: 0\n"), "must be from 1 (off) to 64")
    assert err.field == "execution.comm_overlap"


def test_a_link_built_in_python_is_checked_like_yaml():
    with pytest.raises(ConfigError) as info:
        LinkSpec("nvlink", 450 * 10**9, 500_000, efficiency=1.5)
    assert info.value.field == "links[nvlink].efficiency"


@pytest.mark.parametrize("preset", ["wse-3", "sn40l", "xeon-gold-6242"])
def test_a_chip_built_in_python_runs_as_its_yaml_preset(preset):
    """A ``ChipSpec`` built in Python with only the execution fields its preset's YAML writes gets
    its family's values for the rest, as the loader's chip does, and runs exactly as it."""
    import dataclasses

    from memsim import engine, mapping, workload
    from memsim.hardware.families import BY_FAMILY
    from memsim.hardware.loader import read_yaml
    from memsim.hardware.spec import ChipSpec, ExecutionSpec, yaml_fields

    loaded = hardware.load(preset)
    written = read_yaml(hardware.resolve(preset, "hardware", hardware.HW_SUFFIXES)).get("execution", {})
    by_key = yaml_fields(ExecutionSpec)
    execution = ExecutionSpec(**{by_key[k].name: getattr(loaded.execution, by_key[k].name) for k in written})
    assert any(getattr(execution, name) is None for name in BY_FAMILY)  # the family fills something in
    built = ChipSpec(name=loaded.name, family=loaded.family, compute=loaded.compute, levels=loaded.levels,
                     links=loaded.links, execution=execution, system=loaded.system, power=loaded.power,
                     description=loaded.description)
    assert built == loaded
    graph = workload.build_step(workload.model_config("llama-3.2-1b"), workload.StepSpec.make("decode", context=64))
    runs = [engine.run(mapping.make_plan(graph, chip)) for chip in (built, loaded)]
    assert runs[0].end_ps == runs[1].end_ps and runs[0].records == runs[1].records
    gpu = dataclasses.replace(built, execution=dataclasses.replace(execution, **BY_FAMILY))
    assert gpu != loaded  # the values a chip leaves out matter


def test_an_efficiency_left_out_takes_the_familys_estimate_and_the_run_says_so(tmp_path):
    from memsim import simulate
    from memsim.hardware.families import FAMILIES

    gpu = FAMILIES["gpu"]
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\nfamily: gpu\ncompute: {units: 100, peak: {bf16: 500 TFLOP/s}, vector_peak: 50 TFLOP/s}\n"
                    "levels:\n  - {name: sram, kind: sram, capacity: 20 MiB, bandwidth: 100 TB/s, latency: 10 ns}\n"
                    "  - {name: hbm, kind: hbm, capacity: 80 GB, bandwidth: 2 TB/s, latency: 500 ns}\n")
    chip, _ = load_chip(path)
    assert chip.compute.efficiency == gpu.compute_efficiency.value < 1
    assert chip.level("hbm").efficiency == gpu.memory_efficiency.value < 1
    assert chip.compute.kernel_efficiency == gpu.kernel_efficiency.value < 1  # a stack's kernels, as calibrated
    assert chip.scratchpad.efficiency == 1.0  # a scratchpad's is not a device memory's
    r = simulate(str(path), "gpt2", context=64)
    assert r.summary.estimates.defaults == ("compute.efficiency", "compute.kernel_efficiency", "levels[hbm].efficiency")
    assert "compute.efficiency" in r.summary.estimates.used
    ideal = simulate(str(path), "gpt2", context=64, set={"compute.efficiency": "1", "hbm.efficiency": "1",
                                                         "compute.kernel_efficiency": "1"})
    assert ideal.summary.estimates.defaults is ABSENT  # set by the user: theirs, not the family's
    assert ideal.summary.step_time_s < r.summary.step_time_s
    # a file that starts from a preset inherits the preset's measured values, not the family's
    derived = tmp_path / "derived.yaml"
    derived.write_text("base: h100-sxm\nhbm.bandwidth: 2 TB/s\n")
    assert load_chip(derived)[0].compute.efficiency == 0.8
