"""Specs check their own fields: built in Python, loaded from YAML or overridden with --set."""
from __future__ import annotations

import dataclasses

import pytest
from test_loader import MINIMAL, write

from memsim import hardware
from memsim.core.errors import ConfigError
from memsim.hardware import load_chip
from memsim.hardware.spec import ChipSpec, ComputeSpec, ExecutionSpec, LinkSpec, MemoryLevel, SystemSpec

SRAM = MemoryLevel("sram", "sram", 1 << 20, 10**13, 0)
COMPUTE = ComputeSpec(units=4, peak_flops_per_s=(("bf16", 10**14),), vector_flops_per_s=10**13)


def chip(**changes) -> ChipSpec:
    return dataclasses.replace(ChipSpec("t", "gpu", COMPUTE, (SRAM,)), **changes)


def refused(make, field: str, needle: str = "") -> ConfigError:
    with pytest.raises(ConfigError) as info:
        make()
    assert info.value.field == field, str(info.value)
    assert needle in info.value.message and "\n" not in str(info.value)
    return info.value


@pytest.mark.parametrize(("make", "field", "needle"), [
    (lambda: dataclasses.replace(SRAM, capacity_bytes=0), "levels[sram].capacity", "at least 1"),
    (lambda: dataclasses.replace(SRAM, capacity_bytes=-5), "levels[sram].capacity", ""),
    (lambda: dataclasses.replace(SRAM, bandwidth_bytes_per_s=0), "levels[sram].bandwidth", "at least 1"),
    (lambda: dataclasses.replace(SRAM, latency_ps=-1), "levels[sram].latency", "negative"),
    (lambda: dataclasses.replace(SRAM, latency_ps=1.5), "levels[sram].latency", "whole number"),
    (lambda: dataclasses.replace(SRAM, channels=0), "levels[sram].channels", "at least 1"),
    (lambda: dataclasses.replace(SRAM, channels=True), "levels[sram].channels", "whole number"),
    (lambda: dataclasses.replace(SRAM, efficiency=0.0), "levels[sram].efficiency", "(0, 1]"),
    (lambda: dataclasses.replace(SRAM, efficiency=float("nan")), "levels[sram].efficiency", "finite"),
    (lambda: dataclasses.replace(SRAM, efficiency=1.5), "levels[sram].efficiency", "(0, 1]"),
    (lambda: dataclasses.replace(SRAM, kind="flash"), "levels[sram].kind", "not one of"),
    (lambda: dataclasses.replace(SRAM, scope="rack"), "levels[sram].scope", "not one of"),
    (lambda: dataclasses.replace(SRAM, holds=("weights",)), "levels[sram].holds", "not one of"),
    (lambda: dataclasses.replace(SRAM, capacity_bytes=10**400), "levels[sram].capacity", "out of range"),
    (lambda: LinkSpec("nvlink", 10**400, 0), "links[nvlink].bandwidth", "out of range"),
    (lambda: LinkSpec("nvlink", 10**9, -1), "links[nvlink].latency", "negative"),
    (lambda: LinkSpec("", 10**9, 0), "links[].name", "expected text"),
    (lambda: dataclasses.replace(COMPUTE, units=0), "compute.units", "at least 1"),
    (lambda: dataclasses.replace(COMPUTE, peak_flops_per_s=(("bf17", 10**14),)), "compute.peak.bf17", "dtype"),
    (lambda: dataclasses.replace(COMPUTE, peak_flops_per_s=(("bf16", 10**400),)), "compute.peak.bf16", "range"),
    (lambda: dataclasses.replace(COMPUTE, peak_flops_per_s=(("bf16", 0),)), "compute.peak.bf16", "at least 1"),
    (lambda: dataclasses.replace(COMPUTE, peak_flops_per_s=(("int8", 10**14),)), "compute.peak", "bf16, fp16, fp32"),
    (lambda: dataclasses.replace(COMPUTE, peak_flops_per_s=10**14), "compute.peak", "mapping of dtype"),
    (lambda: dataclasses.replace(COMPUTE, dtype_efficiency=(("fp8", 2.0),)), "compute.dtype_efficiency.fp8", ""),
    (lambda: dataclasses.replace(COMPUTE, kernel_efficiency=float("inf")), "compute.kernel_efficiency", "finite"),
    (lambda: dataclasses.replace(COMPUTE, native=("int8",)), "compute.native", "no `peak`"),
    (lambda: dataclasses.replace(COMPUTE, native=("int3",)), "compute.native", "not one of"),
    (lambda: ExecutionSpec(dequant_ops=(("int4", float("nan")),)), "execution.dequant.int4", "finite"),
    (lambda: ExecutionSpec(dequant_ops=(("int3", 1.0),)), "execution.dequant.int3", "dtype"),
    (lambda: ExecutionSpec(streams=("compute", "dma")), "execution.streams", "not one of"),
    (lambda: ExecutionSpec(streams=("compute", "compute")), "execution.streams", "twice"),
    (lambda: ExecutionSpec(streams=("copy",)), "execution.streams", "compute"),
    (lambda: ExecutionSpec(prefetch_depth=0), "execution.prefetch_depth", "at least 1"),
    (lambda: ExecutionSpec(comm_overlap=65), "execution.comm_overlap", "1 (off) to 64"),
    (lambda: ExecutionSpec(pipeline="sideways"), "execution.pipeline", "not one of"),
    (lambda: ExecutionSpec(stage_from=("ddr",)), "execution.stage_into", "required"),
    (lambda: SystemSpec(topology="hypercube"), "system.topology", "not one of"),
    (lambda: SystemSpec(step_latency_ps=-1), "system.step_latency", "negative"),
    (lambda: chip(family="tpu"), "family", "not one of"),
    (lambda: chip(levels=[SRAM]), "levels", "tuple of MemoryLevel"),
    (lambda: chip(levels=(SRAM, SRAM)), "levels", "duplicate name 'sram'"),
    (lambda: chip(levels=(dataclasses.replace(SRAM, kind="l2"),)), "levels", "one scratchpad level"),
    (lambda: chip(compute={"units": 4}), "compute", "ComputeSpec"),
    (lambda: chip(levels=(SRAM, MemoryLevel("ddr", "ddr", 1 << 30, 10**9, 0, via="pcie"))), "levels[ddr].via",
     "no link named 'pcie'"),
    (lambda: chip(system=SystemSpec(link="nvlink")), "system.link", "no link named"),
    (lambda: chip(execution=ExecutionSpec(fabric="mesh")), "execution.fabric", "no link named"),
    (lambda: chip(execution=ExecutionSpec(stage_from=("ddr",), stage_into="sram")), "execution.stage_from",
     "no level named 'ddr'"),
])
def test_a_spec_built_in_python_is_checked(make, field, needle):
    refused(make, field, needle)


def test_a_valid_spec_built_in_python_is_accepted():
    c = chip(links=(LinkSpec("pcie", 64 * 10**9, 1000),))
    assert c.compute.peak("int4") == 10**14  # no int4 peak: the bf16 rate, as documented


def test_peak_falls_back_explicitly_to_the_first_16_or_32_bit_rate():
    fp16 = dataclasses.replace(COMPUTE, peak_flops_per_s=(("fp16", 5 * 10**12), ("int8", 20 * 10**12)))
    assert fp16.peak("bf16") == 5 * 10**12 and fp16.peak("int8") == 20 * 10**12
    fp32 = dataclasses.replace(COMPUTE, peak_flops_per_s=(("fp32", 3 * 10**12), ("int8", 20 * 10**12)))
    assert fp32.peak("bf16") == 3 * 10**12  # a CPU without bf16 units runs bf16 models at its fp32 rate
    for name in ("groq-lpu", "m2-ultra", "xeon-gold-6242"):  # presets without a bf16 peak
        hw = hardware.load(name)
        assert hw.compute.peak("bf16") == max(r for d, r in hw.compute.peak_flops_per_s if d in ("fp16", "fp32"))


@pytest.mark.parametrize(("old", "new", "field", "needle"), [
    ("bandwidth: 3.35 TB/s", "bandwidth: 1e400 TB/s", "levels[hbm].bandwidth", "out of range"),
    ("bandwidth: 3.35 TB/s", "bandwidth: 1e999999999 TB/s", "levels[hbm].bandwidth", "out of range"),
    ("bf16: 100 TFLOP/s", "bf16: " + "1" + "0" * 400 + " FLOP/s", "compute.peak.bf16", "too long for a quantity"),
    ("bf16: 100 TFLOP/s", "bf16: " + "1" + "0" * 400, "compute.peak.bf16", "has no unit"),
    ("bf16: 100 TFLOP/s", "bf17: 100 TFLOP/s", "compute.peak.bf17", "not a dtype memsim knows"),
    ("bf16: 100 TFLOP/s", "int8: 100 TFLOP/s", "compute.peak", "bf16, fp16, fp32"),
    ("  units: 4", "  units: " + "9" * 40, "compute.units", "out of range"),
    ("  units: 4", "  units: 4.5", "compute.units", "whole number"),
    ("  units: 4", "  units: 4\n  efficiency: .nan", "compute.efficiency", "(0, 1]"),
    ("  units: 4", "  units: 4\n  efficiency: " + "9" * 400, "compute.efficiency", "expected a number"),
    ("    channels: 4", "    channels: true", "levels[hbm].channels", "whole number"),
    ("    kind: hbm", "    kind: [hbm]", "levels[hbm].kind", "expected text"),
    ("name: tiny", "name: 7", "name", "expected text"),
    ("    latency: 600 ns", "    latency: 600 ns\n    latency: 700 ns", "levels[hbm].latency", "duplicate key"),
    ("    channels: 4", "    channels: 4\n    holds: 7", "levels[hbm].holds", "list of names"),  # "weight" is one name
])
def test_hostile_yaml_is_one_error_naming_file_and_field(tmp_path, old, new, field, needle):
    assert old in MINIMAL
    path = write(tmp_path, MINIMAL.replace(old, new, 1))
    with pytest.raises(ConfigError) as info:
        load_chip(path)
    assert info.value.file == str(path) and info.value.field == field, str(info.value)
    assert needle in info.value.message and len(str(info.value)) < 300


def test_dequant_table_in_yaml_is_checked(tmp_path):
    path = write(tmp_path, MINIMAL + "execution:\n  dequant: {int4: .inf}\n")
    with pytest.raises(ConfigError) as info:
        load_chip(path)
    assert info.value.field == "execution.dequant.int4" and "finite" in info.value.message


@pytest.mark.parametrize("path,value,field", [
    ("hbm.bandwidth", "1B/s", "levels[hbm].bandwidth"),
    ("hbm.efficiency", "1e-30", "levels[hbm].bandwidth"),
    ("pcie.bandwidth", "1kB/s", "links[pcie].bandwidth"),
    ("compute.efficiency", "1e-15", "compute.efficiency"),
    ("compute.kernel_efficiency", "5e-324", "compute.kernel_efficiency"),
    ("compute.special_peak", "1e-9 FLOP/s", "compute.special_peak"),
])
def test_a_rate_under_the_least_memsim_keeps_exact_is_refused(path, value, field):
    """Issue 20: rates are whole numbers a second; an efficiency of 1e-15 was clamped to 1 FLOP/s,
    and the step came out faster than its own rate allows."""
    from memsim.run.api import _load_chip

    with pytest.raises(ConfigError) as info:
        _load_chip("h100-sxm", ((path, value),), None)
    assert info.value.field == field and "least rate" in info.value.message
    _load_chip("h100-sxm", ((path, {"1B/s": "2MB/s", "1kB/s": "2MB/s", "1e-9 FLOP/s": "2e6 FLOP/s"}.get(value, "1e-6")),), None)


@pytest.mark.parametrize("efficiency", [1e-2, 1e-6])
def test_no_step_is_faster_than_its_flops_at_the_derated_rate(efficiency):
    from memsim import simulate
    from memsim.mapping.roofline import op_dtype, peak_rate
    from memsim.run.api import _load_chip

    result = simulate("h100-sxm", "gpt2", context=16, sensitivity=0, set={"compute.efficiency": str(efficiency)})
    chip, _ = _load_chip("h100-sxm", (("compute.efficiency", str(efficiency)),), None)
    graph = result.graph
    eff = lambda op: chip.compute.matrix_efficiency(op_dtype(chip, op, graph)) if op.kind in ("matmul", "attention", "compute") \
        else chip.compute.efficiency
    bound = max(op.flops / (peak_rate(chip, op, graph) * eff(op)) for op in graph)
    assert result.summary.step_time_s >= sum(op.flops / (peak_rate(chip, op, graph) * eff(op)) for op in graph) >= bound
