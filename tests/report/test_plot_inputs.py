"""`memsim plot` on files that are not what memsim wrote: one line naming the file, exit 2.

The inputs are checked before matplotlib is imported, so these run without the plot extra.
"""
from __future__ import annotations

import sys

import pytest

from memsim import simulate
from memsim.cli import main as cli
from memsim.core.errors import ConfigError
from memsim.report.readback import read_table


@pytest.fixture()
def run_dir(tmp_path, tiny_chip_path, tiny_model_path):
    out = tmp_path / "run"
    simulate(str(tiny_chip_path), str(tiny_model_path), context=16).write(out)
    return out


def _plot(monkeypatch, capsys, *args) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["memsim", "plot", *args])
    with pytest.raises(SystemExit) as info:
        cli.entry()
    return info.value.code, capsys.readouterr().err


@pytest.mark.parametrize(("text", "expect"), [
    (b"", "timeline.csv: not a CSV file"),
    (b'a,b\n1,2,3,4\n"unterminated\n', "timeline.csv: not a CSV file"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe binary", "timeline.csv: not a CSV file"),
    (b"x,y\n1,2\n", "timeline.csv: not a memsim timeline: no column 'start_s'"),
    (None, "timeline.csv: the timeline holds no rows"),  # the header alone
    ("text", "timeline.csv: start_s: row 2: 'abc' is not a number"),
])
def test_plot_run_refuses_a_bad_timeline(monkeypatch, capsys, run_dir, text, expect):
    timeline = run_dir / "timeline.csv"
    header, first, *rest = timeline.read_text().splitlines(keepends=True)
    if text is None:
        timeline.write_text(header)
    elif text == "text":
        timeline.write_text(header + "abc" + first[first.index(","):] + "".join(rest))
    else:
        timeline.write_bytes(text)
    code, err = _plot(monkeypatch, capsys, "run", str(run_dir))
    assert code == 2 and len(err.strip().splitlines()) == 1 and expect in err and str(run_dir) in err, err
    assert not (run_dir / "gantt.png").exists()


def test_plot_run_refuses_a_bad_hardware_file(monkeypatch, capsys, run_dir):
    (run_dir / "hardware.yaml").write_text("name: x\nname: y\n")
    code, err = _plot(monkeypatch, capsys, "run", str(run_dir))
    assert code == 2 and "hardware.yaml: name: duplicate key 'name'" in err


@pytest.mark.parametrize(("name", "data", "expect"), [
    ("results.pdf", b"%PDF-1.4\n\xff\xfe", "not a CSV file"),
    ("results.png", b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe", "is this command's input"),  # the figure would replace it
    ("results.csv", b"", "not a CSV file"),
    ("results.json", b'{"a": 1}\n', "not a memsim sweep results.csv: no column 'error'"),
    ("results.csv", b"batch,error,step_time_s\n", "holds no rows"),
    ("results.csv", b"batch,error,step_time_s\n1,,fast\n", "step_time_s: row 2: 'fast' is not a number"),
    ("results.csv", b"error,step_time_s\n,1.0\n", "no swept field"),
])
def test_plot_sweep_refuses_a_file_that_is_not_sweep_results(monkeypatch, capsys, tmp_path, name, data, expect):
    path = tmp_path / name
    path.write_bytes(data)
    code, err = _plot(monkeypatch, capsys, "sweep", str(path))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{path}: " in err and expect in err, err


def test_read_table_reads_what_memsim_wrote(run_dir, tmp_path):
    df = read_table(run_dir / "ops.csv", "ops table", ("flops",), ("flops", "duration_s"))
    assert len(df) > 0 and df["flops"].dtype.kind in "if"
    with pytest.raises(ConfigError, match="is a directory"):
        read_table(tmp_path, "ops table", ())


def test_a_swept_size_axis_is_logarithmic_and_labelled_in_binary_units():
    import pandas as pd

    from memsim.report.plots import axis_of

    nums, log, label = axis_of(pd.Series(["256 KiB", "1 MiB", "64 MiB"]))
    assert nums == [256 * 1024, 2**20, 64 * 2**20] and log
    assert [label(v, None) for v in nums] == ["256 KiB", "1 MiB", "64 MiB"]
    nums, log, label = axis_of(pd.Series([1, 2, 4]))  # plain numbers within a decade: linear, as written
    assert nums == [1, 2, 4] and not log and label is None
