"""Progress bars: on stderr while a terminal watches and the work runs past ``DELAY``, nothing
otherwise; the long commands report through them."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

import memsim
from memsim.core import progress


@pytest.fixture()
def at_once(monkeypatch):
    """Bars from the first piece of work, as if it had run past the delay."""
    monkeypatch.setattr(progress, "DELAY", 0.0)


def test_a_bar_is_drawn_only_where_a_terminal_watches(at_once, capsys):
    for watched, terminal in ((True, True), (True, False), (False, True)):
        with progress.shown(watched, terminal=terminal), progress.bar(3, "piece", "testing") as bar:
            for _ in range(3):
                bar.update()
        err = capsys.readouterr().err
        assert ("testing" in err) is (watched and terminal)
    with progress.bar(3, "piece", "testing") as bar:  # from Python, no bar
        bar.update()
    assert capsys.readouterr().err == "" and not progress.on()


@pytest.mark.parametrize("what, call", [
    ("estimates' ranges", lambda chip, model: memsim.simulate(chip, model, context=16, sensitivity=2)),
    ("generation's steps", lambda chip, model: memsim.simulate(chip, model, phase="generate", prompt=8, generate=4)),
    ("serving", lambda chip, model: memsim.serve(chip, model, count=5, rate=10.0, prompt=8, output_tokens=4)),
    ("explain's reruns", lambda chip, model: memsim.explain(chip, model, context=16, workers=1)),
])
def test_each_long_job_reports_its_progress(what, call, at_once, capsys, tiny_chip_path, tiny_model_path):
    from tests.run.test_sensitivity import CHIP  # a chip with estimates, so the run has reruns to report

    chip = tiny_chip_path.parent / "estimated.yaml"
    chip.write_text(CHIP)
    with progress.shown(True, terminal=True):
        call(str(chip), str(tiny_model_path))
    assert what in capsys.readouterr().err


@pytest.mark.parametrize("command", [["run", "--hw"], ["serve", "--count", "2", "--prompt", "8", "--output-tokens", "2",
                                               "--hw"], ["explain", "--hw"],
                                     ["trace", "-o", "t.json"]])
def test_every_long_command_takes_no_progress(command, tmp_path, tiny_chip_path, tiny_model_path, monkeypatch):
    from memsim.cli.main import main

    monkeypatch.chdir(tmp_path)
    chip = [str(tiny_chip_path)] if command[-1] == "--hw" else []
    result = CliRunner().invoke(main, [*command, *chip, "--model", str(tiny_model_path), "--no-progress"])
    assert result.exit_code == 0, result.output
