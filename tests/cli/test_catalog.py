"""``memsim list hw`` and ``memsim show hw``: the presets at a glance, and one chip as it resolves."""
from __future__ import annotations

import dataclasses

import yaml

from memsim import hardware
from memsim.cli import catalog
from memsim.core.presets import config_dir
from memsim.hardware import load_chip


def test_the_table_gives_each_preset_its_family_peak_and_levels():
    table = catalog.hardware_table(hardware.presets()).splitlines()
    assert len(table) == 1 + len(hardware.presets())
    rows = {line.split()[0]: line for line in table[1:]}
    assert set(rows) == set(hardware.presets())
    h100 = rows["h100-sxm"]
    assert " gpu " in h100 and "989 TFLOP/s bf16" in h100
    assert "hbm 80 GB @ 3.35 TB/s" in h100 and "l2 50 MB @ 12.5 TB/s" in h100
    # a per-unit SRAM is given for the whole chip: 132 SMs x 228 KiB
    assert f"sram {132 * 228 * 1024 / 1e6:.3g} MB" in h100
    assert "wafer" in rows["wse-3"] and "12.2 PFLOP/s bf16" in rows["wse-3"]
    assert "2.87 TFLOP/s fp32" in rows["xeon-gold-6242"]  # a chip without bf16 shows what it has


def test_a_preset_is_shown_as_shipped_with_its_sources():
    shown = catalog.show_hardware("h100-sxm")
    assert shown == (config_dir("hardware") / "h100-sxm.yaml").read_text()
    assert "hardware.csv" in shown and "estimate" in shown


def test_a_derived_chip_is_shown_resolved_and_loads_back_to_itself(tmp_path):
    path = tmp_path / "derived.yaml"
    path.write_text("base: h200-sxm\nhbm.capacity: 96 GB\n")
    shown = catalog.show_hardware(str(path))
    assert shown.startswith(f"# {path}, resolved") and "base:" not in shown
    again = tmp_path / "again.yaml"
    again.write_text(shown)
    own = hardware.load(str(path))
    assert load_chip(again)[0] == own == dataclasses.replace(
        hardware.load("h200-sxm", [("hbm.capacity", "96 GB")]), name="derived", derived_from="h200-sxm + 1 change")
    assert yaml.safe_load(shown)["name"] == "derived"
