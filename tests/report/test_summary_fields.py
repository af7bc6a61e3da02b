"""The declared summary: every key summary.json holds is a field of Summary, the console table
and the generation read it, and docs/summary.md is generated from it."""
from __future__ import annotations

from pathlib import Path

import pytest

from memsim import simulate
from memsim.report.summary_fields import COMBINE, FIELDS, ONCE, RECOMPUTED, SUMMED, Summary, reference
from memsim.report.summary_records import (
    ABSENT,
    Energy,
    EngineCounts,
    Estimates,
    Grid,
    Sensitive,
    StackUsed,
    Traffic,
    Workload,
    plain,
    present,
)
from memsim.run import table as console_table

ROOT = Path(__file__).resolve().parents[2]


def test_docs_summary_page_is_generated_from_the_declaration():
    assert (ROOT / "docs" / "summary.md").read_text() == reference(), "python scripts/reference.py --write"


def test_every_field_declares_unit_help_and_rule():
    for name, f in FIELDS.items():
        assert f.metadata["unit"] and len(f.metadata["help"]) > 10, name
        assert f.metadata["combine"] in (SUMMED, ONCE, RECOMPUTED), name
    assert COMBINE == {name: f.metadata["combine"] for name, f in FIELDS.items()}


def test_a_run_writes_its_keys_in_the_declared_order(tiny_chip_path, tiny_model_path):
    s = simulate(str(tiny_chip_path), str(tiny_model_path), context=16).summary
    written = s.as_dict()
    declared = [name for name in FIELDS if name in written]
    assert list(written) == declared
    required = [name for name, f in FIELDS.items() if f.default is not ABSENT]
    assert set(required) <= set(written)
    assert "ttft_s" not in written and "estimates" in written  # a generation's key is absent from a step; api.run adds estimates
    assert s.ttft_s is ABSENT and list(present(s)) == declared


def test_a_summary_stays_an_object_with_typed_parts_until_it_is_written(tiny_chip_path, tiny_model_path):
    s = simulate(str(tiny_chip_path), str(tiny_model_path), context=16).summary
    assert isinstance(s, Summary) and isinstance(s.stack, StackUsed) and isinstance(s.grid, Grid)
    assert isinstance(s.engine, EngineCounts) and isinstance(s.energy_j, Energy)
    assert all(isinstance(v, Traffic) for v in (*s.bytes_per_level.values(), *s.bytes_per_link.values()))
    assert all(isinstance(v, Traffic) for chip in s.per_chip.values() for v in chip.values())
    with pytest.raises(TypeError):
        s["step_time_s"]  # not a dict: read its fields
    # As written: a level's traffic in its declared order, a link's without the level's split.
    level = next(iter(s.as_dict()["bytes_per_level"].values()))
    assert list(level) == ["read", "written", "total", "compulsory", "capacity", "busy_s"]
    assert all(list(v) == ["read", "written", "total", "busy_s"] for v in s.as_dict()["bytes_per_link"].values())
    assert s.as_dict()["energy_j"] == plain(s.energy_j) == {
        "total": s.energy_j.total, "dynamic": s.energy_j.dynamic, "static": s.energy_j.static,
        "compute": s.energy_j.compute, "levels": s.energy_j.levels, "links": s.energy_j.links}


def test_the_workload_and_the_estimates_are_records_written_without_what_they_lack(tiny_chip_path, tiny_model_path):
    s = simulate("h100-sxm", str(tiny_model_path), context=16, sensitivity=1).summary  # a preset: estimates
    assert isinstance(s.workload, Workload) and s.workload.context == 16 and s.workload.prompt is None
    written = s.as_dict()
    # a step's workload names what its graph's meta sets: no generation's prompt, no importer's source
    assert written["workload"] == s.workload.as_dict() and {"prompt", "source", "microbatches"}.isdisjoint(
        written["workload"])
    assert isinstance(s.estimates, Estimates) and all(isinstance(r, Sensitive) for r in s.estimates.sensitive)
    assert len(s.estimates.sensitive) == 1 and s.estimates.defaults is ABSENT
    assert list(written["estimates"]) == ["count", "used", "sensitive", "band_s"]  # declared order, absent left out
    row = written["estimates"]["sensitive"][0]
    assert list(row) == ["field", "value", "range", "step_time_s", "energy_j", "step_swing", "energy_swing"]
    assert row["range"] == list(s.estimates.sensitive[0].range) and len(row["step_time_s"]) == 2
    gen = simulate(str(tiny_chip_path), str(tiny_model_path), phase="generate", prompt=16, generate=3,
                   sensitivity=0).summary
    assert isinstance(gen.workload, Workload) and (gen.workload.phase, gen.workload.prompt,
                                                   gen.workload.generate) == ("generate", 16, 3)
    assert list(gen.as_dict()["workload"])[-2:] == ["prompt", "generate"]


def test_a_generation_combines_records_into_records_written_as_a_step_is(tiny_chip_path, tiny_model_path):
    step = simulate(str(tiny_chip_path), str(tiny_model_path), context=16).summary.as_dict()
    gen = simulate(str(tiny_chip_path), str(tiny_model_path), phase="generate", prompt=16, generate=3).summary
    assert isinstance(gen.energy_j, Energy) and isinstance(gen.engine, EngineCounts)
    assert all(isinstance(v, Traffic) for v in gen.bytes_per_level.values())
    written = gen.as_dict()
    for key in ("bytes_per_level", "bytes_per_link", "energy_j", "engine", "stack", "grid"):
        first = next(iter(step[key].values())) if key.startswith("bytes") else step[key]
        again = next(iter(written[key].values())) if key.startswith("bytes") else written[key]
        assert list(again) == list(first), key  # the same nested keys in the same order as a step's


def test_an_undeclared_or_missing_key_is_a_bug_caught_where_the_summary_is_built(tiny_chip_path, tiny_model_path):
    s = simulate(str(tiny_chip_path), str(tiny_model_path), context=16).summary
    with pytest.raises(TypeError, match="new_key"):
        Summary(**present(s), new_key=1)
    with pytest.raises(TypeError, match="step_time_s"):
        Summary(**{k: v for k, v in present(s).items() if k != "step_time_s"})


def test_the_console_table_renders_declared_keys_in_their_order(tiny_chip_path, tiny_model_path):
    assert set(console_table.RENDER) <= set(FIELDS)
    s = simulate(str(tiny_chip_path), str(tiny_model_path), phase="generate", prompt=16, generate=3).summary
    text = console_table.table(s)
    marks = ["step time", "roofline", "FLOPs", "compute busy", "generation", "stall", "energy", "power"]
    at = [text.index(m) for m in marks]
    assert at == sorted(at)
    assert text.splitlines()[0].startswith(s.hardware)
