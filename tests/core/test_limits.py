"""Every size that drives a run's cost is refused past its limit, in one line naming it, before
anything is built: ranks, chips, operators, operators x micro-batches, file sizes."""
from __future__ import annotations

import json

import pytest

import memsim
from memsim.core import limits
from memsim.core.errors import ConfigError, TraceError, run_field
from memsim.workload import read_trace, write_trace
from tests.cli.test_cli import run_cli
from tests.workload.test_graph import two_ops


def test_the_limit_is_named_with_the_value():
    limits.check(limits.MAX_RANKS, limits.MAX_RANKS, "ranks", run_field("tp"))
    with pytest.raises(ConfigError) as info:
        limits.check(limits.MAX_RANKS + 1, limits.MAX_RANKS, "ranks", run_field("tp"))
    assert info.value.field == "tp" and info.value.one_line(flags=True).startswith("--tp: ")
    assert f"{limits.MAX_RANKS + 1:,} ranks exceed memsim's limit of {limits.MAX_RANKS:,}" in info.value.message


@pytest.mark.parametrize("options,field", [
    ({"tp": limits.MAX_RANKS + 1}, "tp"),
    ({"pp": limits.MAX_CHIPS + 1}, "pp"),
    ({"chips": limits.MAX_CHIPS + 1}, "chips"),
    ({"tp": limits.MAX_RANKS, "pp": limits.MAX_CHIPS // limits.MAX_RANKS + 1}, "tp/pp"),
    ({"microbatches": limits.MAX_TASKS + 1}, "microbatches"),
])
def test_run_options_past_their_limits_are_refused_before_anything_runs(options, field):
    with pytest.raises(ConfigError) as info:
        memsim.run.api.resolve("h100-sxm", "gpt2", **options)
    assert info.value.field.endswith(field)


def test_micro_batches_times_ops_past_the_task_limit_are_refused(monkeypatch):
    """gpt2's decode step has 123 ops: 2 micro-batches are 246 tasks."""
    monkeypatch.setattr(limits, "MAX_TASKS", 245)
    with pytest.raises(ConfigError) as info:
        memsim.simulate("h100-sxm", "gpt2", pp=2, batch=2, microbatches=2)
    assert info.value.field == "microbatches" and "246 tasks (123 ops x 2 micro-batches)" in info.value.message
    monkeypatch.setattr(limits, "MAX_TASKS", 246)
    assert memsim.simulate("h100-sxm", "gpt2", pp=2, batch=2, microbatches=2).summary.step_time_s > 0


def test_a_graph_past_the_op_limit_or_with_too_many_ranks_is_refused(monkeypatch, tmp_path):
    g = two_ops()
    monkeypatch.setattr(limits, "MAX_OPS", 1)
    with pytest.raises(TraceError) as info:
        g.validate("t.json")
    assert info.value.field == "ops" and info.value.file == "t.json" and "2 ops exceed" in info.value.message
    monkeypatch.setattr(limits, "MAX_OPS", 2)
    path = tmp_path / "t.json"
    write_trace(g, path)
    data = json.loads(path.read_text())
    data["ops"][1]["kind"], data["ops"][1]["dims"] = "allreduce", {"bytes": 64, "ranks": limits.MAX_RANKS + 1}
    path.write_text(json.dumps(data))
    with pytest.raises(TraceError) as info:
        read_trace(path)
    assert info.value.field == "ops[B].dims.ranks" and "ranks exceed" in info.value.message


def test_a_file_past_the_size_limit_is_refused_unread(monkeypatch, tmp_path):
    path = tmp_path / "t.json"
    write_trace(two_ops(), path)
    monkeypatch.setattr(limits, "MAX_FILE_BYTES", path.stat().st_size - 1)
    with pytest.raises(TraceError) as info:
        read_trace(path)
    assert info.value.file == str(path) and "bytes exceed memsim's limit" in info.value.message
    monkeypatch.setattr(limits, "MAX_FILE_BYTES", path.stat().st_size)
    assert len(read_trace(path).ops) == 2


def test_the_console_names_the_limit_and_exits_2(monkeypatch, capsys, tmp_path):
    code, _out, err = run_cli(monkeypatch, capsys, "run", "--model", "gpt2", "--tp", str(limits.MAX_RANKS + 1),
                             "--out", str(tmp_path / "o"))
    assert code == 2 and err.count("\n") == 1 and "--tp" in err and f"at most {limits.MAX_RANKS}" in err
    assert not (tmp_path / "o").exists()


def test_the_docs_state_the_limits_in_force():
    from pathlib import Path

    text = " ".join((Path(__file__).resolve().parents[2] / "docs" / "usage.md").read_text().split())
    for value, what in ((limits.MAX_RANKS, "ranks in a collective"), (limits.MAX_CHIPS, "chips"),
                        (limits.MAX_LAYERS, "layers"), (limits.MAX_OPS, "ops in a step"),
                        (limits.MAX_TASKS, "ops x micro-batches")):
        assert f"{value:,} {what}" in text, what
    assert f"{limits.MAX_FILE_BYTES // 2**20} MiB any other file" in text
    assert f"{limits.MAX_YAML_BYTES // 2**20} MiB a YAML config" in text
    assert f"{limits.MAX_STEPS:,} decode steps in a generation" in text and f"{limits.MAX_POINTS:,} points in a sweep" in text
