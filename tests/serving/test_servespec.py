"""ServeSpec: one declaration of a serving run, from which `memsim serve`'s options, `memsim.serve`'s
signature and a serving sweep's fields are read (issue 42, deliverable 2)."""
from __future__ import annotations

import inspect
from dataclasses import fields

import click
import pytest

import memsim
from memsim.cli import main as cli
from memsim.cli.serve import serve_cmd
from memsim.core.errors import ConfigError
from memsim.serving.spec import ServeSpec, options, sweepable
from memsim.sweep import serve as serve_sweep


def test_the_command_line_the_api_and_the_sweep_read_one_declaration():
    declared = {f.name: f for f in fields(ServeSpec)}
    params = {p.name: p for p in serve_cmd.params if isinstance(p, click.Option) and p.name not in ("out", "no_progress")}
    assert set(params) == {f.name for f in options()}  # every option is a field, and every serve field an option
    for name, p in params.items():
        assert p.opts == ["--" + name.replace("_", "-")], p.opts  # one name: the keyword is the flag
        f = declared[name]
        assert p.is_flag if f.metadata["kind"] is bool else (p.default == f.default or name == "set")
        assert not f.metadata["choices"] or list(p.type.choices) == list(f.metadata["choices"])
    help_text = serve_cmd.get_help(click.Context(serve_cmd))
    assert all("--" + name.replace("_", "-") in help_text for name in params)
    signature = inspect.signature(memsim.serve)
    assert list(signature.parameters) == list(declared)
    assert all(signature.parameters[n].default == declared[n].default for n in declared)
    assert serve_sweep.keywords() == sweepable()
    assert set(sweepable()) == {n for n, f in declared.items() if f.metadata["sweepable"]}


@pytest.mark.parametrize("name", [f.name for f in fields(ServeSpec) if f.metadata["minimum"] is not None])
def test_a_value_below_its_declared_least_is_refused_naming_the_keyword_or_the_flag(monkeypatch, capsys, name):
    f = next(f for f in fields(ServeSpec) if f.name == name)
    low = f.metadata["minimum"] - (1 if f.metadata["kind"] is int else max(abs(f.metadata["minimum"]), 1e-9))
    with pytest.raises(ConfigError) as info:
        ServeSpec.make({name: low})
    assert info.value.field == name and "must be at least" in info.value.message
    monkeypatch.setattr("sys.argv", ["memsim", "serve", "--" + name.replace("_", "-"), str(low)])
    with pytest.raises(SystemExit) as exit_:
        cli.entry()
    err = capsys.readouterr().err
    if f.metadata["commands"]:  # an option of the command (``check`` is the API's alone)
        assert exit_.value.code == 2 and f"--{name.replace('_', '-')}: must be at least" in err, err


def test_an_old_or_unknown_keyword_is_one_line_naming_it():
    for old in ("output", "slo_ttft_s", "think_s", "prefill"):
        with pytest.raises(ConfigError, match="unknown serving parameter") as info:
            memsim.serve(**{old: 1})
        assert info.value.field == old
