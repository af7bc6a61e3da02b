"""One declaration of a run: the CLI, the Python API and the sweep take the same parameters."""
from __future__ import annotations

import inspect
from dataclasses import fields

import click
import pytest

from memsim import RunSpec
from memsim.cli.commands import load
from memsim.core.errors import ConfigError, MemsimWarning
from memsim.run import api, runspec
from memsim.sweep import runner as sweeping
from tests.cli.test_cli import run_cli
from tests.conftest import keyword


def _cli_params(command: str) -> dict[str, click.Parameter]:
    return {p.name: p for p in load(command).params}


@pytest.mark.parametrize("command", ["run", "sweep", "trace"])
def test_cli_options_are_runspec_fields_with_the_same_defaults(command):
    params = _cli_params(command)
    for f in runspec.options(command):
        assert f.name in params, f"memsim {command} lacks {f.name}"
        p = params[f.name]
        assert runspec.flag(f) in p.opts
        if f.metadata["kind"] is not bool and f.name != "set":
            assert p.default == f.metadata["cli_default"], f.name  # the field's default unless it declares another
            assert f.metadata["cli_default"] == f.default or f.name == "sensitivity", f.name
        if f.metadata["choices"]:
            assert tuple(p.type.choices) == f.metadata["choices"]
    declared = {f.name for f in fields(RunSpec)}
    own = {"run": {"out", "perfetto", "html", "no_progress"}, "trace": {"output", "no_progress"},
           "sweep": {"sets", "sweep_file", "out", "workers", "scheduler", "keep", "no_progress", "serve"}}[command]
    assert set(params) - {"help"} <= declared | own


def test_sweepable_fields_are_the_declared_ones():
    assert set(sweeping.RUN_FIELDS) == {f.name for f in fields(RunSpec) if f.metadata["sweepable"]}
    assert "set" not in sweeping.RUN_FIELDS and "batch" in sweeping.RUN_FIELDS


def test_the_api_and_the_cli_resolve_the_same_defaults(monkeypatch, capsys):
    # gpt2 has 1024 learned positions: the default context must fit it, in the API and the CLI alike.
    spec = api.resolve(model="gpt2")
    assert (spec.context, spec.prompt) == (1023, 1024)
    assert api.resolve(model="llama-2-7b").context == 2048
    code, out, err = run_cli(monkeypatch, capsys, "run", "--model", "gpt2")
    assert code == 0 and "context=1023" in out and not err
    assert api.simulate(model="gpt2").summary.workload.context == 1023
    assert inspect.signature(api.simulate).parameters["hw"].default == RunSpec.hw


def test_a_context_beyond_the_models_positions_runs_with_a_one_line_warning(monkeypatch, capsys):
    code, out, err = run_cli(monkeypatch, capsys, "run", "--model", "gpt2", "--context", "4096")
    assert code == 0 and "context=4096" in out
    assert err.strip().splitlines() == ["memsim: warning: --context/--prompt: 4097 tokens exceed gpt2's 1024 "
                                        "positions"]
    with pytest.warns(MemsimWarning):
        api.simulate(model="gpt2", context=4096)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"batch": "lots"}, "--batch"),
    ({"batch": 0}, "--batch"),
    ({"batch": 1.5}, "--batch"),
    ({"batch": True}, "--batch"),
    ({"context": -1}, "--context"),
    ({"phase": "train"}, "--phase"),
    ({"weight_dtype": "bf17"}, "--weight-dtype"),
    ({"ep": "yes"}, "--ep"),
    ({"tp": 2, "pp": 2, "chips": 3}, "--chips"),
    ({"hw": ""}, "--hw"),
    ({"memoize": False}, "memoize"),
    ({"set": ["sram.capacity=1MiB", "sram.capacity=2MiB"]}, "--set"),
    ({"set": ["sram.capacity"]}, "--set"),
])
def test_bad_run_parameters_name_their_field(kwargs, field):
    with pytest.raises(ConfigError) as info:
        api.simulate(model="gpt2", **kwargs)
    assert info.value.field == keyword(field)  # a Python caller is told the keyword argument


def test_a_trace_refuses_options_that_would_be_ignored(tmp_path):
    for extra in ({"tp": 2}, {"pp": 2}, {"ep": True}, {"phase": "generate"}):
        with pytest.raises(ConfigError):
            RunSpec(trace=str(tmp_path / "t.json"), **extra)
    with pytest.raises(ConfigError, match="exactly one"):
        RunSpec(model="gpt2", trace="t.json")
    with pytest.raises(ConfigError, match="exactly one"):
        RunSpec()


def test_set_accepts_texts_pairs_or_a_mapping_and_keeps_them_as_pairs():
    as_text = RunSpec(model="gpt2", set=("sram.capacity=1MiB", "hbm.bandwidth = 2 TB/s"))
    as_map = RunSpec(model="gpt2", set={"sram.capacity": "1MiB", "hbm.bandwidth": "2 TB/s"})
    assert as_text.set == as_map.set == (("sram.capacity", "1MiB"), ("hbm.bandwidth", "2 TB/s"))


def test_a_trace_that_does_not_fit_is_blamed_on_the_trace(monkeypatch, capsys, tmp_path):
    trace = tmp_path / "big.json"
    assert run_cli(monkeypatch, capsys, "trace", "--model", "llama-2-7b", "--batch", "512", "--context", "4000",
                   "-o", str(trace))[0] == 0
    code, _, err = run_cli(monkeypatch, capsys, "run", "--trace", str(trace))
    assert code == 2 and err.startswith(f"memsim: error: {trace}: ops: weights and KV cache need")
