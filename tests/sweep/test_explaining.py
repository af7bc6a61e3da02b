"""memsim explain as an experiment folder: the table as without one, a resume that reruns only what
did not finish, --keep, and the same refusals as a sweep's folder."""
from __future__ import annotations

import json

import pandas as pd
import pytest

import memsim
from memsim.run import explain as whatif
from tests.cli.test_cli import run_cli


def _args(chip, model, out, *more):
    return ["explain", "--hw", str(chip), "--model", str(model), "--context", "16", "--workers", "1",
            "--out", str(out), *more]


@pytest.fixture
def counted(monkeypatch):
    """How many reruns ran (workers=1 runs them here, so the count sees every one)."""
    calls: list = []
    real = whatif.outcome

    def outcome(spec, keep=None):
        calls.append(spec)
        return real(spec, keep)

    monkeypatch.setattr(whatif, "outcome", outcome)
    return calls


def test_a_folder_holds_the_table_its_experiment_and_each_rerun(monkeypatch, capsys, tmp_path, tiny_chip_path,
                                                                 tiny_model_path, counted):
    out = tmp_path / "x"
    code, stdout, err = run_cli(monkeypatch, capsys, *_args(tiny_chip_path, tiny_model_path, out))
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == [".lock", "explain.csv", "explain.json", "points.jsonl"]
    plain = memsim.explain(str(tiny_chip_path), str(tiny_model_path), context=16, workers=1)
    written = pd.read_csv(out / "explain.csv")
    assert list(written.columns) == list(plain.columns) and len(written) == len(plain) > 0
    assert (written["step_time_s"].fillna(-1) == plain["step_time_s"].fillna(-1)).all()
    rows = [json.loads(line) for line in (out / "points.jsonl").read_text().splitlines()]
    assert len(rows) == len({r["run_key"] for r in rows}) == len(counted) // 2  # the plain run ran them again
    manifest = json.loads((out / "explain.json").read_text())
    assert manifest["factors"] == [0.5, 2.0] and manifest["run"]["context"] == 16 and manifest["run"]["memsim"]
    assert f"wrote {out / 'explain.csv'}" in stdout


def test_a_run_killed_part_way_resumes_and_reruns_only_what_did_not_finish(monkeypatch, capsys, tmp_path,
                                                                           tiny_chip_path, tiny_model_path, counted):
    out = tmp_path / "x"
    assert run_cli(monkeypatch, capsys, *_args(tiny_chip_path, tiny_model_path, out))[0] == 0
    first = (out / "explain.csv").read_text()
    lines = (out / "points.jsonl").read_text().splitlines()
    total = len(counted)
    kept = lines[: len(lines) // 2]
    # As a kill leaves it: half the reruns logged, the last line cut short, no table.
    (out / "points.jsonl").write_text("\n".join(kept) + "\n" + lines[len(kept)][:20])
    (out / "explain.csv").unlink()
    counted.clear()
    assert run_cli(monkeypatch, capsys, *_args(tiny_chip_path, tiny_model_path, out))[0] == 0
    assert len(counted) == total - len(kept)
    assert (out / "explain.csv").read_text() == first
    counted.clear()
    assert run_cli(monkeypatch, capsys, *_args(tiny_chip_path, tiny_model_path, out))[0] == 0
    assert counted == []  # everything finished: nothing runs again
    assert (out / "explain.csv").read_text() == first


def test_keep_writes_each_reruns_outputs_in_the_folder(monkeypatch, capsys, tmp_path, tiny_chip_path, tiny_model_path):
    out = tmp_path / "x"
    assert run_cli(monkeypatch, capsys, *_args(tiny_chip_path, tiny_model_path, out, "--keep"))[0] == 0
    rows = [json.loads(line) for line in (out / "points.jsonl").read_text().splitlines()]
    kept = [r for r in rows if "outputs" in r]
    assert kept and all("error" not in r["outcome"] for r in kept)
    for r in kept:
        summary = json.loads((out / r["outputs"] / "summary.json").read_text())
        assert summary["step_time_s"] == r["outcome"]["step_time_s"]
    assert len(list((out / "points").iterdir())) == len(kept)


@pytest.mark.parametrize("make, needle", [
    (lambda d: (d / "notes.txt").write_text("mine"), "holds 'notes.txt', which no explain run writes"),
    (lambda d: (d / "sweep.json").write_text("{}"), "holds a sweep's results (sweep.json), another experiment"),
])
def test_a_folder_of_something_else_is_refused_in_one_line(monkeypatch, capsys, tmp_path, tiny_chip_path,
                                                           tiny_model_path, make, needle):
    out = tmp_path / "x"
    out.mkdir()
    make(out)
    before = sorted(p.name for p in out.iterdir())
    code, _, err = run_cli(monkeypatch, capsys, *_args(tiny_chip_path, tiny_model_path, out))
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in out.iterdir()) == before  # nothing written


@pytest.mark.parametrize("more, differs", [(("--context", "32"), "run"), (("--factor", "4"), "factors")])
def test_another_experiment_in_the_same_folder_is_refused(monkeypatch, capsys, tmp_path, tiny_chip_path,
                                                           tiny_model_path, more, differs):
    out = tmp_path / "x"
    assert run_cli(monkeypatch, capsys, *_args(tiny_chip_path, tiny_model_path, out))[0] == 0
    table = (out / "explain.csv").read_text()
    code, _, err = run_cli(monkeypatch, capsys, *_args(tiny_chip_path, tiny_model_path, out, *more))
    assert code == 2 and f"holds another experiment (it differs in {differs})" in err, err
    assert (out / "explain.csv").read_text() == table


def test_a_sweep_into_an_explain_folder_is_refused(monkeypatch, capsys, tmp_path, tiny_chip_path, tiny_model_path):
    out = tmp_path / "x"
    assert run_cli(monkeypatch, capsys, *_args(tiny_chip_path, tiny_model_path, out))[0] == 0
    code, _, err = run_cli(monkeypatch, capsys, "sweep", "--hw", str(tiny_chip_path), "--model", str(tiny_model_path),
                           "--set", "batch=1,2", "--out", str(out), "--workers", "1", "--no-progress")
    assert code == 2 and "holds memsim explain's results (explain.json), another experiment" in err, err
    assert not (out / "results.csv").exists()


def test_an_explain_folder_that_holds_its_inputs_and_keep_without_a_folder_are_refused(monkeypatch, capsys, tmp_path,
                                                                                       tiny_chip_path, tiny_model_path):
    code, _, err = run_cli(monkeypatch, capsys, *_args(tiny_chip_path, tiny_model_path, tmp_path))
    assert code == 2 and "--out" in err and len(err.strip().splitlines()) == 1, err
    with pytest.raises(memsim.ConfigError, match="keep"):
        memsim.explain(str(tiny_chip_path), str(tiny_model_path), context=16, keep=True)


def test_the_api_resumes_in_a_folder_as_the_cli_does(tmp_path, tiny_chip_path, tiny_model_path, counted):
    out = tmp_path / "x"
    first = memsim.explain(str(tiny_chip_path), str(tiny_model_path), context=16, workers=1, out=out)
    total, counted[:] = len(counted), []
    again = memsim.explain(str(tiny_chip_path), str(tiny_model_path), context=16, workers=1, out=out)
    assert total > 0 and counted == []
    pd.testing.assert_frame_equal(first, again)


@pytest.mark.parametrize("workers", [0, -1, 1.5, True])
def test_a_worker_count_that_is_not_a_whole_number_of_at_least_one_is_refused(tiny_chip_path, tiny_model_path,
                                                                              workers):
    with pytest.raises(memsim.ConfigError, match="whole number of at least 1"):
        memsim.explain(str(tiny_chip_path), str(tiny_model_path), context=16, workers=workers)
    with pytest.raises(memsim.ConfigError, match="whole number of at least 1"):
        memsim.sweep_frame(str(tiny_chip_path), str(tiny_model_path), sweeps={"batch": ["1"]}, workers=workers)
