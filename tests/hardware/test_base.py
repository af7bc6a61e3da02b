"""A chip file that starts from a preset (``base:``) and changes what it names."""
from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from memsim import hardware
from memsim.core.errors import ConfigError
from memsim.hardware import load_chip
from memsim.run import api
from memsim.run.table import table


def _write(tmp_path, text: str, name: str = "chip.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_two_lines_give_exactly_what_set_gives_on_the_preset(tmp_path):
    path = _write(tmp_path, "base: h100-sxm\nhbm.bandwidth: 1.675 TB/s\n")
    derived = api.simulate(str(path), "llama-2-7b")
    preset = api.simulate("h100-sxm", "llama-2-7b", set={"hbm.bandwidth": "1.675 TB/s"})
    assert derived.summary.step_time_s == preset.summary.step_time_s
    assert derived.summary.energy_j == preset.summary.energy_j
    own = hardware.load(str(path))  # the same chip but for its identity: its own name, saying what it changed
    assert (own.name, own.derived_from) == ("chip", "h100-sxm + 1 change")
    assert own == dataclasses.replace(hardware.load("h100-sxm", [("hbm.bandwidth", "1.675 TB/s")]), name="chip",
                                      derived_from="h100-sxm + 1 change")
    # and the change is the only one: everything else is the preset's
    assert hardware.load(str(path)) != hardware.load("h100-sxm")


def test_sections_merge_field_by_field_and_levels_by_name(tmp_path):
    path = _write(tmp_path, """\
base: h100-sxm
compute:
  kernel_efficiency: 0.9
levels:
  - name: sram
    capacity: 456 MiB
""")
    chip, raw = load_chip(path)
    preset = hardware.load("h100-sxm")
    assert chip.compute.kernel_efficiency == 0.9
    assert dataclasses.replace(chip.compute, kernel_efficiency=preset.compute.kernel_efficiency) == preset.compute
    assert chip.scratchpad.capacity_bytes == 456 * 2**20
    assert dataclasses.replace(chip.scratchpad, capacity_bytes=preset.scratchpad.capacity_bytes) == preset.scratchpad
    assert [lv.name for lv in chip.levels] == [lv.name for lv in preset.levels]
    assert "base" not in raw  # what a run writes out is the chip itself, loadable without its base


def test_a_new_level_is_added_and_a_path_base_is_relative_to_the_file(tmp_path):
    (tmp_path / "sub").mkdir()
    _write(tmp_path, "base: h100-sxm\ncompute.kernel_efficiency: 0.7\n", "first.yaml")
    path = _write(tmp_path, "base: ../first.yaml\nexecution.op_overhead: 1 us\n", "sub/second.yaml")
    chip = hardware.load(str(path))
    assert chip.compute.kernel_efficiency == 0.7 and chip.execution.op_overhead_ps == 1_000_000
    assert (chip.name, chip.derived_from) == ("second", "first + 1 change")  # its base by the name it gives itself


def test_a_chip_file_is_named_after_itself_and_the_run_says_what_it_changed(tmp_path):
    """Not after its base preset: the header, summary.json and the report name the file's chip and
    what it starts from, counting each value the file sets (a section's field, a level's, a dotted key)."""
    path = _write(tmp_path, "base: h100-sxm\ncompute:\n  kernel_efficiency: 0.9\nlevels:\n  - name: sram\n"
                            "    capacity: 456 MiB\nhbm.bandwidth: 1.675 TB/s\n", "h100-big-sram.yaml")
    r = api.simulate(str(path), "gpt2", sensitivity=0)
    assert (r.summary.hardware, r.summary.derived_from) == ("h100-big-sram", "h100-sxm + 3 changes")
    assert table(r.summary).splitlines()[0].startswith("h100-big-sram (h100-sxm + 3 changes)  gpt2")
    written = r.summary.as_dict()
    assert list(written)[:2] == ["hardware", "derived_from"]
    named = _write(tmp_path, "base: h100-sxm\nname: mine\nhbm.latency: 1 us\n", "other.yaml")
    assert (hardware.load(str(named)).name, hardware.load(str(named)).derived_from) == ("mine", "h100-sxm + 1 change")
    preset = api.simulate("h100-sxm", "gpt2", sensitivity=0).summary  # a preset is its own: no derived_from
    assert preset.hardware == "h100-sxm" and "derived_from" not in preset.as_dict()
    # what a run writes is the chip itself, identity included: it loads back as the same chip
    out = r.write(tmp_path / "run")
    assert hardware.load(str(tmp_path / "run" / "hardware.yaml")) == r.chip and out


@pytest.mark.parametrize("text, needle", [
    ("base: no-such-chip\n", "no such preset"),
    ("base: 3\n", "expected a preset name or a path"),
    ("base: ''\n", "expected a preset name or a path"),
    ("base: missing.yaml\n", "file not found"),
    ("base: h100-sxm\ncompute:\n  kernel_efficiency: 2\n", "kernel_efficiency"),
    ("base: h100-sxm\nhbm.bandwidth: fast\n", "bandwidth"),
    ("base: h100-sxm\nnope.capacity: 1 GiB\n", "nope"),
    ("base: h100-sxm\ncompute:\n  warp_size: 32\n", "compute.warp_size"),
])
def test_a_bad_base_or_change_names_the_file_and_field(tmp_path, text, needle):
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        hardware.load(str(path))
    assert str(path) in str(err.value) and needle in str(err.value)


def test_a_base_that_leads_back_to_its_file_is_refused(tmp_path):
    _write(tmp_path, "base: b.yaml\n", "a.yaml")
    _write(tmp_path, "base: a.yaml\n", "b.yaml")
    with pytest.raises(ConfigError, match="inherits, in the end, from this file"):
        hardware.load(str(tmp_path / "a.yaml"))


def test_the_cli_runs_a_derived_chip_and_refuses_a_bad_one_in_one_line(tmp_path):
    good = _write(tmp_path, "base: a100-80gb-sxm\nsram.capacity: 40 MiB\n", "good.yaml")
    ok = subprocess.run([sys.executable, "-m", "memsim.cli.main", "run", "--hw", str(good), "--model", "gpt2"],
                        capture_output=True, text=True, check=False)
    assert ok.returncode == 0 and "step time" in ok.stdout
    bad = _write(tmp_path, "base: a100\n", "bad.yaml")
    run = subprocess.run([sys.executable, "-m", "memsim.cli.main", "run", "--hw", str(bad), "--model", "gpt2"],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 2 and run.stderr.count("\n") == 1
    assert "bad.yaml" in run.stderr and "base" in run.stderr and "Traceback" not in run.stderr


def test_a_run_reads_its_chip_file_once_and_sees_one_version_of_it(monkeypatch, tmp_path):
    """Issue 42: one memsim.simulate read the chip file three times (the chip, its estimates, its family's
    defaults) and again for each sensitivity rerun; inside a run each file is read once."""
    import memsim
    from memsim.core import files
    from memsim.hardware import loader

    chip = tmp_path / "chip.yaml"
    chip.write_text("base: h100-sxm\nhbm.bandwidth: 3 TB/s\n")
    reads = []
    real = files.load_yaml
    monkeypatch.setattr(loader, "load_yaml", lambda path, *a: reads.append(str(path)) or real(path, *a))
    memsim.simulate(str(chip), "gpt2", context=16, sensitivity=2)
    assert reads.count(str(chip)) == 1, reads
    memsim.simulate(str(chip), "gpt2", context=16)  # a new run reads it again: an edit between runs counts
    assert reads.count(str(chip)) == 2
