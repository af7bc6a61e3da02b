"""``memsim --help`` and ``--version`` are answered from the commands' declarations without
loading the simulator; the full command line takes each command's help from the same table."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from memsim.cli import commands


def _printed(code: str, args: list[str]) -> str:
    run = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True,
                         env={**os.environ, "COLUMNS": "100"})
    return run.stdout


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["--version"]])
def test_the_front_door_answers_as_the_full_command_line_does(args):
    front = _printed("import sys\nfrom memsim.cli.commands import front\nassert front(sys.argv[1:])", args)
    full = _printed("import sys\nfrom memsim.cli.main import main\nmain(sys.argv[1:], prog_name='memsim')", args)
    assert front == full and "memsim" in front


def test_every_command_is_declared_once_with_its_help():
    from memsim.cli.main import main

    assert set(commands.every(main)) == set(commands.COMMANDS) == set(commands.WHERE)
    for name, cmd in commands.every(main).items():
        assert cmd.help == commands.COMMANDS[name]
    assert not commands.front(["run", "--help"]) and not commands.front([])  # a command's own help is its own


def test_help_and_version_load_none_of_the_simulators_libraries():
    """What makes them quick: nothing past click (the command line's parsing) is imported."""
    code = ("import sys\nfrom memsim.cli.console import entry\nsys.argv = ['memsim', '--version']\n"
            "try:\n    entry()\nexcept SystemExit:\n    pass\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'pandas', 'numpy', 'simpy', 'networkx', 'yaml'}),"
            " sorted(m for m in sys.modules if m.startswith('memsim.') and m not in"
            " ('memsim.cli', 'memsim.cli.console', 'memsim.cli.commands')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["memsim, version 0.1.0", "[] []"]


def test_a_run_loads_its_commands_module_and_none_of_the_others_libraries(tmp_path):
    """``memsim run`` (its folder written) imports neither pandas nor the sweeps', serving's, figures'
    or importers' modules: only what a run needs is loaded (``commands.WHERE``)."""
    code = ("import sys\nfrom memsim.cli import console\nconsole.finished = lambda: None  # to print below\n"
            "entry = console.entry\n"
            f"sys.argv = ['memsim', 'run', '--hw', 'h100-sxm', '--model', 'gpt2', '--context', '16', '--out', "
            f"{str(tmp_path / 'run')!r}]\n"
            "try:\n    entry()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pandas', 'matplotlib', 'plotly', 'dask')"
            " or m.startswith(('memsim.sweep', 'memsim.serving', 'memsim.cli.sweeps', 'memsim.cli.figures', "
            "'memsim.cli.imports', 'memsim.report.plots', 'memsim.report.readback', 'memsim.workload.importers.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == "[]" and (tmp_path / "run" / "timeline.csv").is_file()


def test_a_command_is_loaded_only_when_asked_for():
    code = ("import sys\nfrom memsim.cli.main import main\nimport click\n"
            "ctx = click.Context(main)\nbefore = 'memsim.cli.sweeps' in sys.modules\n"
            "main.get_command(ctx, 'sweep')\nprint(before, 'memsim.cli.sweeps' in sys.modules, "
            "main.get_command(ctx, 'nothing'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True", "None"]


def test_a_finished_command_ends_at_once_with_its_output_flushed(tmp_path):
    """The console script ends a finished command without CPython's teardown: what it printed is all
    there, its folder is whole, and the exit code is 0."""
    code = ("import sys\nfrom memsim.cli.console import entry\n"
            f"sys.argv = ['memsim', 'run', '--hw', 'h100-sxm', '--model', 'gpt2', '--context', '16', '--out', "
            f"{str(tmp_path / 'run')!r}]\nentry()\nprint('after the command')\n")
    run = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert run.returncode == 0 and "after the command" not in run.stdout
    assert run.stdout.splitlines()[0].startswith("h100-sxm  gpt2") and run.stdout.rstrip().endswith("timeline.csv")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["hardware.yaml", "ops.csv", "summary.json",
                                                                    "timeline.csv"]
