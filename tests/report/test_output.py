"""A run's output folder is replaced as a whole, or left as it was."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from memsim.errors import ConfigError
from memsim.report import output
from tests.test_cli import run_cli


def _write(out, extra=None):
    import pandas as pd

    return output.write_outputs(out, {"step_time_s": 1.0}, pd.DataFrame({"a": [1]}), pd.DataFrame({"b": [2]}),
                                {"name": "x"}, extra)


def test_a_rerun_leaves_no_file_of_the_previous_run(tmp_path):
    out = tmp_path / "run"
    _write(out, {"trace.perfetto.json": "{}"})
    assert (out / "trace.perfetto.json").exists()
    _write(out)
    assert sorted(p.name for p in out.iterdir()) == ["hardware.yaml", "ops.csv", "summary.json", "timeline.csv"]
    assert [p.name for p in tmp_path.iterdir()] == ["run"]  # no temporary folder left beside it


def test_temporary_folders_of_dead_writers_are_removed_and_live_ones_kept(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    stale = tmp_path / f".run.tmp-{dead}-abc123"
    live = tmp_path / f".run.tmp-{os.getpid()}-abc123"
    for folder in (stale, live):
        folder.mkdir()
        (folder / "summary.json").write_text("{}")
    _write(tmp_path / "run")
    assert not stale.exists() and live.exists()


def test_an_out_that_is_a_file_or_a_foreign_folder_is_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="not a folder"):
        _write(tmp_path / "file")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("x")
    with pytest.raises(ConfigError, match="holds no memsim run"):
        _write(tmp_path / "mine")
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "x"


def test_a_full_disk_is_one_line_and_leaves_the_old_run(monkeypatch, capsys, tmp_path):
    out = tmp_path / "run"
    assert run_cli(monkeypatch, capsys, "run", "--model", "gpt2", "--context", "16", "--out", str(out))[0] == 0
    before = json.loads((out / "summary.json").read_text())

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("pandas.DataFrame.to_csv", full)
    code, _, err = run_cli(monkeypatch, capsys, "run", "--model", "gpt2", "--context", "32", "--out", str(out))
    assert code == 2 and err.strip().splitlines() == [f"memsim: error: {out}: --out: cannot write: No space left "
                                                      "on device"]
    assert json.loads((out / "summary.json").read_text()) == before
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_an_unwritable_out_fails_before_the_run(monkeypatch, capsys, tmp_path):
    code, out, err = run_cli(monkeypatch, capsys, "run", "--model", "gpt2", "--context", "16", "--out",
                             "/proc/memsim-out")
    assert code == 2 and not out and len(err.strip().splitlines()) == 1 and "--out" in err
    code, out, err = run_cli(monkeypatch, capsys, "trace", "--model", "gpt2", "--context", "16", "-o",
                             "/proc/memsim-trace.json")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--output" in err
