"""Swept values: ranges only between quantities, real lists from a sweep file, repeats once (issue 20)."""
from __future__ import annotations

import warnings

import pytest

from memsim.core.errors import ConfigError, MemsimWarning
from memsim.sweep.values import expand, parse_sweeps, read_sweep_file


def test_dots_in_a_path_or_a_name_are_not_a_range():
    assert parse_sweeps(["hw=../hw/a.yaml,../hw/b.yaml"]) == {"hw": ["../hw/a.yaml", "../hw/b.yaml"]}
    assert parse_sweeps(["model=configs/models/../models/gpt2.json"])["model"] == ["configs/models/../models/gpt2.json"]
    assert expand("a..b") == ["a..b"]
    assert expand("1MiB..4MiB:x2") == ["1 MiB", "2 MiB", "4 MiB"]
    with pytest.raises(ConfigError, match="needs a step"):
        expand("1MiB..4MiB")


def test_a_sweep_file_list_holds_its_values_whole(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text('model: gpt2\nset:\n  hw: ["a,b.yaml", "c.yaml"]\n  sram.capacity: ["1MiB..4MiB:x2", 16MiB]\n'
                    '  batch: "1..3:+1"\n')
    fixed, swept = read_sweep_file(path)
    assert fixed == {"model": "gpt2"}
    assert swept == {"hw": ["a,b.yaml", "c.yaml"], "sram.capacity": ["1 MiB", "2 MiB", "4 MiB", "16MiB"],
                     "batch": ["1", "2", "3"]}
    with pytest.raises(ConfigError, match="swept twice"):
        parse_sweeps(["batch=4"], known=swept)


def test_a_value_listed_twice_is_one_point_and_said():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sweeps = parse_sweeps(["batch=1,2,3,4,5,6,1", "sram.capacity=1MiB..2MiB:x2,1MiB"])
    assert sweeps == {"batch": ["1", "2", "3", "4", "5", "6"], "sram.capacity": ["1 MiB", "2 MiB", "1MiB"]}
    said = [str(w.message) for w in caught if issubclass(w.category, MemsimWarning)]
    assert said == ["batch: '1' listed more than once: each is one point"]
