"""Estimated preset values: the ``{estimate: VALUE, range: [LOW, HIGH]}`` form, read and checked."""
from __future__ import annotations

import pytest

from memsim import hardware
from memsim.errors import ConfigError
from memsim.hardware.loader import estimates_of, load_chip
from tests.conftest import TINY_CHIP

ESTIMATED = (TINY_CHIP
             .replace("latency: 200 ns", "latency: {estimate: 200 ns, range: [100 ns, 600 ns]}")
             .replace("peak: {bf16: 2 TFLOP/s, fp32: 1 TFLOP/s}",
                      "peak: {bf16: {estimate: 2 TFLOP/s, range: [1 TFLOP/s, 3 TFLOP/s]}, fp32: 1 TFLOP/s}")
             .replace("  op_overhead: 1 us", "  op_overhead: {estimate: 1 us, range: [0.5 us, 4 us]}"))


def _load(tmp_path, text, sets=()):
    path = tmp_path / "chip.yaml"
    path.write_text(text)
    return load_chip(path, list(sets))


def test_an_estimate_is_its_value_with_its_range_in_the_fields_units(tmp_path):
    chip, raw = _load(tmp_path, ESTIMATED)
    assert chip.level("hbm").latency_ps == 200_000
    assert chip.compute.peak("bf16") == 2 * 10**12
    assert chip.execution.op_overhead_ps == 1_000_000
    found = {e.path: e for e in estimates_of(raw)}
    assert set(found) == {"levels[hbm].latency", "compute.peak.bf16", "execution.op_overhead"}
    hbm = found["levels[hbm].latency"]
    assert (hbm.value, hbm.low, hbm.high, hbm.unit) == (200_000, 100_000, 600_000, "time")
    assert hbm.set_path == "levels.hbm.latency" and hbm.written == ("200 ns", "100 ns", "600 ns")
    assert found["compute.peak.bf16"].low == 10**12


def test_a_chip_with_estimates_equals_the_chip_with_plain_values(tmp_path):
    plain, _ = _load(tmp_path, TINY_CHIP)
    estimated, _ = _load(tmp_path, ESTIMATED)
    assert plain == estimated


def test_a_value_set_on_the_command_line_is_no_longer_an_estimate(tmp_path):
    chip, raw = _load(tmp_path, ESTIMATED, [("hbm.latency", "300 ns")])
    assert chip.level("hbm").latency_ps == 300_000
    assert "levels[hbm].latency" not in {e.path for e in estimates_of(raw)}


@pytest.mark.parametrize("form, field, message", [
    ("{estimate: 200 ns, range: [300 ns, 600 ns]}", "levels[hbm].latency.range", "must hold the estimate"),
    ("{estimate: 200 ns, range: [100 ns]}", "levels[hbm].latency.range", "a list of two values"),
    ("{estimate: 200 ns, range: [100 ns, 6 GB]}", "levels[hbm].latency.range", "not a time"),
    ("{estimate: 200, range: [100 ns, 600 ns]}", "levels[hbm].latency", "has no unit"),
    ("{estimate: 200 ns}", "levels[hbm].latency", "range: [LOW, HIGH]"),
])
def test_a_malformed_estimate_is_one_error_naming_the_file_and_field(tmp_path, form, field, message):
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, ESTIMATED.replace("{estimate: 200 ns, range: [100 ns, 600 ns]}", form))
    assert info.value.field == field and message in str(info.value)
    assert str(tmp_path / "chip.yaml") in info.value.one_line()


def test_only_a_quantity_can_be_an_estimate(tmp_path):
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, ESTIMATED.replace("name: tiny", "name: {estimate: tiny, range: [a, b]}"))
    assert info.value.field == "name"


def test_the_shipped_presets_load_with_their_estimates():
    for name in hardware.presets():
        chip, raw = hardware.load_chip(hardware.resolve(name, "hardware", hardware.HW_SUFFIXES))
        for e in estimates_of(raw):
            assert e.low <= e.value <= e.high, (name, e.path)
