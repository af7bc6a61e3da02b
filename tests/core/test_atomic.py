"""``-o`` writes only regular files, never over the command's own inputs (issue 20)."""
from __future__ import annotations

import os
import stat

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsim.core.atomic import atomic_write_text, check_apart, check_output_file
from memsim.core.errors import ConfigError
from tests.cli.test_cli import run_cli


def _special(tmp_path, kind):
    path = tmp_path / kind
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "link":
        (tmp_path / "real.json").write_text("{}")
        path.symlink_to(tmp_path / "real.json")
    elif kind == "fd-link":
        path.symlink_to("/proc/self/fd/1")
    return path


@pytest.mark.parametrize("kind", ["fifo", "folder", "link", "fd-link"])
def test_a_special_file_as_output_is_refused_and_left_as_it_was(monkeypatch, capsys, tmp_path, kind):
    path = _special(tmp_path, kind)
    before = os.lstat(path)
    code, _out, err = run_cli(monkeypatch, capsys, "trace", "--model", "gpt2", "--context", "16", "-o", str(path))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--output" in err, err
    assert stat.S_IFMT(os.lstat(path).st_mode) == stat.S_IFMT(before.st_mode)
    with pytest.raises(ConfigError):
        atomic_write_text(path, "x")
    assert stat.S_IFMT(os.lstat(path).st_mode) == stat.S_IFMT(before.st_mode)


def test_a_character_device_is_refused():
    with pytest.raises(ConfigError, match="not a regular file"):
        check_output_file("/dev/null", "--output")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_command_never_writes_over_its_own_input(monkeypatch, capsys, tmp_path, tiny_model_path):
    model = tmp_path / "m.json"
    model.write_text(tiny_model_path.read_text())
    code, _, err = run_cli(monkeypatch, capsys, "trace", "--model", str(model), "--context", "8", "-o", str(model))
    assert code == 2 and "is this command's input" in err, err
    assert model.read_text() == tiny_model_path.read_text()
    alias = tmp_path / "sub" / ".." / "m.json"
    (tmp_path / "sub").mkdir()
    with pytest.raises(ConfigError, match="input"):
        check_output_file(alias, "--output", [model])
    results = tmp_path / "results.csv"
    results.write_text("batch,error,step_time_s\n1,,0.5\n")
    code, _, err = run_cli(monkeypatch, capsys, "plot", "sweep", str(results), "-o", str(results))
    assert code == 2 and "is this command's input" in err, err
    assert results.read_text().startswith("batch,")


def test_a_check_creates_no_folder_and_the_write_makes_the_missing_ones(tmp_path):
    target = tmp_path / "a" / "b" / "f.json"
    check_output_file(target, "--output")
    assert list(tmp_path.iterdir()) == []
    atomic_write_text(target, "{}")
    assert target.read_text() == "{}"
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="not a folder"):
        check_output_file(tmp_path / "file" / "f.json", "--output")


@given(st.sampled_from(["same", "parent", "grandparent", "sibling", "child", "elsewhere"]),
       st.booleans())
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_an_output_that_is_or_holds_an_input_is_refused_and_no_other(tmp_path_factory, where, through_dots):
    """Wherever an output lies against an input: the input itself, a folder above it (at any depth,
    spelt with ``..`` or not) is refused; a sibling, a folder below the input's folder or another
    place is not."""
    root = tmp_path_factory.mktemp("apart")
    source = root / "a" / "b" / "in.csv"
    source.parent.mkdir(parents=True)
    source.write_text("x\n")
    target = {"same": source, "parent": source.parent, "grandparent": root / "a", "sibling": source.parent / "out.csv",
              "child": source.parent / "sub", "elsewhere": root / "c"}[where]
    if through_dots:
        target = target.parent / "." / ".." / target.parent.name / target.name
    overlaps = where in ("same", "parent", "grandparent")
    if overlaps:
        with pytest.raises(ConfigError, match="this command's input"):
            check_apart(target, "--out", [source])
    else:
        check_apart(target, "--out", [source])
    assert source.read_text() == "x\n"


def _serve_trace(folder):
    folder.mkdir(parents=True, exist_ok=True)
    trace = folder / "requests.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,16,2\n0.01,16,2\n")
    return trace


def test_every_command_refuses_to_write_over_what_it_read(monkeypatch, capsys, tmp_path, tiny_model_path):
    """Issue 42's cases, each on its own path: serve's --out holding its trace, report's -o on the run's
    data, explain's and trace's -o on the chip or model, a run or a sweep sent to the folder that holds
    the chip it reads (a run's hardware.yaml, a kept point's). Each is one line, exit 2, and what was read
    is as it was."""
    model = tmp_path / "m.json"
    model.write_text(tiny_model_path.read_text())
    run = tmp_path / "run"
    assert run_cli(monkeypatch, capsys, "run", "--model", str(model), "--context", "8", "--out", str(run))[0] == 0
    sweep = tmp_path / "sweep"
    assert run_cli(monkeypatch, capsys, "sweep", "--model", str(model), "--context", "8", "--set", "batch=1,2",
                   "--keep", "--out", str(sweep), "--no-progress")[0] == 0
    kept = next((sweep / "points").glob("*/hardware.yaml"))
    trace = _serve_trace(tmp_path / "d")
    cases = [
        ("serve", "--model", str(model), "--requests", str(trace), "--out", str(trace.parent)),
        ("report", str(run), "-o", str(run / "summary.json")),
        ("report", str(run), "-o", str(run / "timeline.csv")),
        ("explain", "--hw", str(run / "hardware.yaml"), "--model", str(model), "-o", str(run / "hardware.yaml")),
        ("trace", "--model", str(model), "--context", "8", "-o", str(model)),
        ("run", "--hw", str(run / "hardware.yaml"), "--model", str(model), "--out", str(run)),
        ("sweep", "--hw", str(kept), "--model", str(model), "--set", "batch=1,4", "--out", str(sweep), "--no-progress"),
        ("sweep", "--serve", "--hw", str(kept), "--model", str(model), "--set", "rate=1,2", "--out", str(sweep)),
    ]
    before = {p: p.read_bytes() for p in (model, trace, kept, *run.iterdir(), *sweep.iterdir()) if p.is_file()}
    for args in cases:
        code, _, err = run_cli(monkeypatch, capsys, *args)
        assert code == 2 and len(err.strip().splitlines()) == 1 and "this command's input" in err, (args, err)
    assert {p: p.read_bytes() for p in before} == before
    assert list(trace.parent.iterdir()) == [trace]


def test_the_api_writers_refuse_a_folder_holding_what_the_run_read(tmp_path, tiny_model_path):
    from memsim import serve, simulate

    trace = _serve_trace(tmp_path / "d")
    result = serve("h100-sxm", str(tiny_model_path), requests=str(trace))
    with pytest.raises(ConfigError, match="holds this command's input"):
        result.write(trace.parent)
    assert trace.read_text().startswith("arrival_s") and list(trace.parent.iterdir()) == [trace]
    run = tmp_path / "run"
    simulate("h100-sxm", str(tiny_model_path), context=8).write(run)
    chip = (run / "hardware.yaml").read_bytes()
    with pytest.raises(ConfigError, match="holds this command's input"):
        simulate(str(run / "hardware.yaml"), str(tiny_model_path), context=8).write(run)
    assert (run / "hardware.yaml").read_bytes() == chip


def test_a_serving_sweep_never_replaces_another_experiment(monkeypatch, capsys, tmp_path, tiny_model_path):
    out = tmp_path / "o"
    code, _, err = run_cli(monkeypatch, capsys, "sweep", "--model", str(tiny_model_path), "--context", "8",
                           "--set", "batch=1,2", "--out", str(out), "--no-progress")
    assert code == 0, err
    results = (out / "results.csv").read_bytes()
    code, _, err = run_cli(monkeypatch, capsys, "sweep", "--serve", "--model", str(tiny_model_path), "--set",
                           "rate=1,2", "--set", "count=3", "--out", str(out))
    assert code == 2 and "holds a sweep of runs' results" in err, err
    assert (out / "results.csv").read_bytes() == results

