"""A run's output folder is replaced as a whole, or left as it was."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from memsim.core.errors import ConfigError
from memsim.report import output
from memsim.report.rows import Rows
from tests.cli.test_cli import run_cli


def _write(out, extra=None):
    return output.write_outputs(out, {"step_time_s": 1.0}, Rows(("a",), ((1,),)), Rows(("b",), ((2,),)),
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
                          text=True, check=True).stdout.strip()
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

    monkeypatch.setattr("memsim.report.rows.Rows.write_csv", full)
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


# --- issue 20: memsim replaces only what it wrote, and no instant of the swap loses both runs ---

def _step(out) -> float:
    return json.loads((out / "summary.json").read_text())["step_time_s"]


def _write_step(out, step: float):
    return output.write_outputs(out, {"step_time_s": step}, Rows(("a",), ((1,),)), Rows(("b",), ((2,),)),
                                {"name": "x"})


def _whole(out, tmp_path) -> float:
    """The run in ``out``, checked whole (every file of one run, nothing beside it); its step."""
    assert sorted(p.name for p in out.iterdir()) == ["hardware.yaml", "ops.csv", "summary.json", "timeline.csv"]
    return _step(out)


@pytest.mark.parametrize("failing", [1, 2])
@pytest.mark.parametrize("error", [OSError(5, "Input/output error"), KeyboardInterrupt()])
def test_a_swap_that_fails_at_either_rename_leaves_the_old_run_whole(monkeypatch, tmp_path, failing, error):
    out = tmp_path / "run"
    _write_step(out, 1.0)
    real, calls = os.replace, []

    def replace(src, dst):
        calls.append(src)
        if len(calls) == failing:
            raise error
        return real(src, dst)

    monkeypatch.setattr(output.os, "replace", replace)
    with pytest.raises(type(error)):
        _write_step(out, 2.0)
    monkeypatch.setattr(output.os, "replace", real)
    assert _whole(out, tmp_path) == 1.0
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_inside_the_swap_waits_until_the_new_run_is_in_place(monkeypatch, tmp_path, signum):
    out = tmp_path / "run"
    _write_step(out, 1.0)
    real = os.replace

    def replace(src, dst):
        os.kill(os.getpid(), signum)  # lands between the two renames
        return real(src, dst)

    def term(signum, frame):
        raise SystemExit(143)

    previous = signal.signal(signal.SIGTERM, term)
    try:
        monkeypatch.setattr(output.os, "replace", replace)
        with pytest.raises((KeyboardInterrupt, SystemExit)):
            _write_step(out, 2.0)
    finally:
        signal.signal(signal.SIGTERM, previous)
    monkeypatch.setattr(output.os, "replace", real)
    assert _whole(out, tmp_path) == 2.0
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_a_writer_killed_between_the_renames_leaves_the_old_run_for_the_next_to_put_back(tmp_path):
    out = tmp_path / "run"
    _write_step(out, 1.0)
    child = ("import os, sys; from memsim.report import output; from memsim.report.rows import Rows\n"
             "real = os.replace\n"
             "def replace(src, dst):\n"
             "    real(src, dst)\n"
             "    os._exit(9)  # killed outright after the first rename\n"
             "output.os.replace = replace\n"
             f"output.write_outputs({str(out)!r}, {{'step_time_s': 2.0}}, Rows(('a',), ((1,),)), "
             "Rows(('b',), ((2,),)), {'name': 'x'})\n")
    assert subprocess.run([sys.executable, "-c", child], check=False).returncode == 9
    assert not out.exists()  # the window: the old run is aside, the new one not yet in
    assert sorted(p.name.split("-")[0] for p in tmp_path.iterdir()) == [".run.old", ".run.tmp"]
    output.remove_stale(out)
    assert _whole(out, tmp_path) == 1.0
    assert [p.name for p in tmp_path.iterdir()] == ["run"]
    _write_step(out, 3.0)
    assert _whole(out, tmp_path) == 3.0


def test_an_out_holding_the_runs_own_inputs_is_refused_and_they_stay(monkeypatch, capsys, tmp_path, tiny_chip_path,
                                                                     tiny_model_path):
    run_x = tmp_path / "runX"
    run_x.mkdir()
    (run_x / "myhw.yaml").write_text(tiny_chip_path.read_text())
    (run_x / "mymodel.json").write_text(tiny_model_path.read_text())
    code, _, err = run_cli(monkeypatch, capsys, "run", "--hw", str(run_x / "myhw.yaml"), "--model",
                           str(run_x / "mymodel.json"), "--out", str(run_x))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--out" in err
    assert sorted(p.name for p in run_x.iterdir()) == ["myhw.yaml", "mymodel.json"]
    # a run folder of memsim's own, whose hardware.yaml is given back as this run's input
    prev = tmp_path / "prev"
    assert run_cli(monkeypatch, capsys, "run", "--hw", str(tiny_chip_path), "--model", str(tiny_model_path),
                   "--out", str(prev))[0] == 0
    kept = (prev / "hardware.yaml").read_text()
    code, _, err = run_cli(monkeypatch, capsys, "run", "--hw", str(prev / "hardware.yaml"), "--model",
                           str(tiny_model_path), "--out", str(prev))
    assert code == 2 and "holds this command's input" in err, err
    assert (prev / "hardware.yaml").read_text() == kept


def test_an_out_holding_any_file_a_run_does_not_write_is_refused(tmp_path):
    out = tmp_path / "run"
    _write_step(out, 1.0)
    (out / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match=r"'notes.txt', which no memsim run writes"):
        _write_step(out, 2.0)
    assert (out / "notes.txt").read_text() == "mine" and _step(out) == 1.0
    link = tmp_path / "link"
    link.symlink_to(out)
    with pytest.raises(ConfigError, match="is a link"):
        output.check_target(link)


def test_a_failed_run_creates_no_folder(monkeypatch, capsys, tmp_path):
    target = tmp_path / "newp" / "a" / "b" / "out"
    output.check_target(target)
    assert not (tmp_path / "newp").exists() and list(tmp_path.iterdir()) == []
    code, _, err = run_cli(monkeypatch, capsys, "run", "--model", "no-such-model", "--out", str(target))
    assert code == 2 and not (tmp_path / "newp").exists(), err
    assert list(tmp_path.iterdir()) == []
