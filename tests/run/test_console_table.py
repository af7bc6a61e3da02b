"""The console table: what a run prints, rendered from the declared summary."""
from __future__ import annotations

from memsim.run import api
from memsim.run import table as console_table


def test_a_chip_without_energy_fields_says_energy_is_not_modelled(tiny_chip_path):
    text = console_table.table(api.simulate(str(tiny_chip_path), "gpt2").summary)
    assert "energy           not modelled" in text and "compute.energy" in text
    assert "0.0000 J" not in text and "W avg" not in text  # no zero joules, no zero watts


def test_a_preset_prints_its_energy_and_power():
    text = console_table.table(api.simulate("h100-sxm", "gpt2").summary)
    assert "not modelled" not in text and " J   compute " in text and "W avg" in text
