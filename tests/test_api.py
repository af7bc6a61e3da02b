"""The Python API: what a caller passes that is not what it takes is a memsim error, one line."""
from __future__ import annotations

import pytest

import memsim
from memsim import api


@pytest.mark.parametrize("call,field,needle", [
    (lambda: memsim.simulate("h100-sxm", "gpt2", context=8, set=5), "set", "got 5"),
    (lambda: memsim.simulate("h100-sxm", "gpt2", context=8, set=[5]), "set", "got 5"),
    (lambda: api.simulate_graph("h100-sxm", None), "graph", "got None"),
    (lambda: api.simulate_graph("h100-sxm", "gpt2"), "graph", "got 'gpt2'"),
    (lambda: api.run("gpt2"), "spec", "got 'gpt2'"),
])
def test_a_wrong_argument_is_a_memsim_error_naming_it(call, field, needle):
    """Issue 20: these raised TypeError or AttributeError from inside memsim."""
    with pytest.raises(memsim.ConfigError) as info:
        call()
    assert info.value.field == field and needle in str(info.value) and "\n" not in str(info.value)


def test_no_overrides_is_none_as_well_as_empty():
    none = memsim.simulate("h100-sxm", "gpt2", context=8, set=None).summary["step_time_s"]
    assert none == memsim.simulate("h100-sxm", "gpt2", context=8, set={}).summary["step_time_s"]


def test_a_python_caller_is_told_keyword_arguments_and_the_command_line_its_flags(monkeypatch, capsys):
    import memsim
    from tests.test_cli import run_cli

    with pytest.raises(memsim.ConfigError) as info:
        memsim.simulate(model="gpt2", batch=0)
    assert info.value.field == "batch" and "--" not in str(info.value)
    with pytest.raises(memsim.ConfigError) as info:
        memsim.simulate(model="gpt2", trace="t.json")
    assert str(info.value) == "model/trace: give exactly one of model and trace"
    code, _, err = run_cli(monkeypatch, capsys, "run", "--model", "gpt2", "--batch", "0")
    assert code == 2 and err == "memsim: error: --batch: must be at least 1, got 0\n"


def test_a_warning_about_a_file_whose_name_holds_a_newline_is_one_line(monkeypatch, capsys, tmp_path,
                                                                      tiny_model_path):
    import json

    from tests.test_cli import run_cli

    model = tmp_path / "two\nlines.json"
    config = json.loads(tiny_model_path.read_text())
    config["name"] = "two\nlines"
    model.write_text(json.dumps(config))
    _code, _, err = run_cli(monkeypatch, capsys, "run", "--model", str(model), "--context", "100000")
    warned = [line for line in err.splitlines() if "warning" in line]
    assert len(err.strip().splitlines()) == len([ln for ln in err.splitlines() if ln.startswith("memsim: ")])
    assert warned and "two lines" in warned[0], err
