"""``-o`` writes only regular files, never over the command's own inputs (issue 20)."""
from __future__ import annotations

import os
import stat

import pytest

from memsim.atomic import atomic_write_text, check_output_file
from memsim.errors import ConfigError
from tests.test_cli import run_cli


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
