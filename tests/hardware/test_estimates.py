"""Estimated preset values: the ``{estimate: VALUE, range: [LOW, HIGH]}`` form, read and checked."""
from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

from memsim import hardware
from memsim.core.errors import ConfigError
from memsim.hardware import loader
from memsim.hardware.dumps import spec_estimates
from memsim.hardware.loader import load_chip
from memsim.run import machine
from memsim.run.api import estimates
from tests.conftest import TINY_CHIP

PRESETS = Path(__file__).resolve().parents[2] / "configs" / "hardware"
# A field's line of a preset: its key, its value and its comment (no value on a section's line).
FIELD = re.compile(r"^\s*(?:- )?(?P<key>\w+):(?P<value>[^#]*?)\s*(?:#\s?(?P<comment>.*))?$")
DATA_FORM = re.compile(r"^\{estimate: [^{}\[\],]+, range: \[[^\[\],]+, [^\[\],]+\]\}$")
# Fields whose comment says "estimate" but that are no quantity, so take no range: a system
# section whose topology (and so the rest of it) is not published.
NOT_QUANTITIES = {("gb10", "system"), ("m2-ultra", "system"), ("sn40l", "system"), ("wormhole-n150", "system"),
                  ("xeon-gold-6242", "system")}

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
    chip, _ = _load(tmp_path, ESTIMATED)
    assert chip.level("hbm").latency_ps == 200_000
    assert chip.compute.peak("bf16") == 2 * 10**12
    assert chip.execution.op_overhead_ps == 1_000_000
    found = {e.path: e for e in spec_estimates(chip)}
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
    chip, _ = _load(tmp_path, ESTIMATED, [("hbm.latency", "300 ns")])
    assert chip.level("hbm").latency_ps == 300_000
    assert "levels[hbm].latency" not in {e.path for e in spec_estimates(chip)}


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


@pytest.mark.parametrize("name", hardware.presets())
def test_every_estimate_of_a_preset_has_its_range_in_the_data_and_says_why(name):
    """Read as text: a quantity whose comment says "estimate" is written with its range, and an
    estimate's line says why; the loader finds each one, its range holding its value."""
    written, exceptions = 0, set()
    for n, line in enumerate((PRESETS / f"{name}.yaml").read_text(encoding="utf-8").splitlines(), 1):
        m = FIELD.match(line)
        if not m or line.lstrip().startswith("#"):
            continue
        value, comment, where = m["value"].strip(), m["comment"] or "", f"{name}.yaml:{n}"
        if value.startswith("{estimate"):
            written += 1
            assert DATA_FORM.match(value), f"{where}: write {{estimate: VALUE, range: [LOW, HIGH]}}"
            assert "estimate" in comment, f"{where}: an estimate's comment says why it is what it is"
        elif "estimate" in comment.lower():
            assert (name, m["key"]) in NOT_QUANTITIES and not value, f"{where}: marked estimate without a range"
            exceptions.add((name, m["key"]))
    assert exceptions == {e for e in NOT_QUANTITIES if e[0] == name}  # no exception outlives its line
    found = estimates(name, stack="ideal")  # the chip's own (a stack's: tests/stack/test_stacks.py)
    chip = machine.load_chip(name, ())[0]
    left = chip.family_estimates()  # and those its family fills in
    assert {e.path for e in found} >= set(left)
    if chip.derived_from:  # a preset with a base: its own estimates and those of its base it keeps
        base = chip.derived_from.split(" + ")[0]
        assert len(found) >= written and {e.path for e in found} <= {e.path for e in estimates(base, stack="ideal")}
    else:
        assert len(found) == written + len(left)
    for e in found:
        assert e.low <= e.value <= e.high, (name, e.path)


@pytest.mark.parametrize("name", hardware.presets())
def test_either_end_of_a_presets_range_loads_with_its_other_values(name, monkeypatch):
    """What a sensitivity rerun sets: each end alone, everything else as it is (a clock's range
    must not cross the ridge clock, a static power's the TDP)."""
    monkeypatch.setattr(loader, "read_yaml", functools.lru_cache(None)(loader.read_yaml))
    path = hardware.resolve(name, "hardware", hardware.HW_SUFFIXES)
    for e in estimates(name, stack="ideal"):
        for end in e.written[1:]:
            load_chip(path, [(e.set_path, end)])
