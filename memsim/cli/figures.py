"""``memsim plot`` and ``memsim report``: the figures and the HTML page of a folder memsim wrote, read
back from its files (``memsim run --out`` draws them again where the folder had them)."""
from __future__ import annotations

from pathlib import Path

import click

from memsim import report
from memsim.cli.commands import COMMANDS
from memsim.cli.options import writing
from memsim.core.atomic import check_output_file
from memsim.report import folders as report_folders
from memsim.report import plots, run_plots, serve_plots


@click.group("plot", help=COMMANDS["plot"])
def plot():
    pass  # its subcommands: its help is commands.COMMANDS'


@plot.command("sweep")
@click.argument("results", type=click.Path(dir_okay=False))
@click.option("--x", "x_field", help="swept field on the x axis (default: the first)")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="figure file (default: beside RESULTS)")
def plot_sweep(results, x_field, output):
    """Step time and bytes per level against a swept field."""
    check_output_file(Path(output or Path(results).with_suffix(".png")), "--output", [Path(results)])
    path = writing("--output", output or results,
                    lambda: plots.plot_sweep(Path(results), x_field, Path(output) if output else None))
    click.echo(f"wrote {path}")


@plot.command("explain")
@click.argument("table", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="figure file (default: beside TABLE)")
def plot_explain(table, output):
    """A tornado plot of memsim explain's CSV: the step time at each change, ranked."""
    check_output_file(Path(output or Path(table).with_suffix(".png")), "--output", [Path(table)])
    path = writing("--output", output or table, lambda: plots.plot_explain(Path(table), Path(output) if output else None))
    click.echo(f"wrote {path}")


@plot.command("run")
@click.argument("folder", type=click.Path(file_okay=False))
@click.option("-o", "--output", type=click.Path(file_okay=False), help="folder for the figures (default: FOLDER)")
def plot_run(folder, output):
    """Gantt chart, roofline chart, stall breakdown and energy breakdown of a run's --out folder."""
    _plot_run(folder, output)


def _plot_run(folder: str, output: str | None, kind: str = "run") -> None:
    """The figures of a run's (``kind`` run) or a serving run's (serve) folder."""
    figures, draw, read = ((run_plots.FIGURES, run_plots.plot_run, report.DATA) if kind == "run" else
                           (serve_plots.FIGURES, serve_plots.plot_serve, serve_plots.FILES))
    where = Path(output or folder)
    for name in figures:
        check_output_file(where / name, "--output" if output else "FOLDER", [Path(folder) / n for n in read])
    for path in writing("--output" if output else "FOLDER", str(where), lambda: draw(Path(folder), where)):
        click.echo(f"wrote {path}")


@plot.command("serve")
@click.argument("folder", type=click.Path(file_okay=False))
@click.option("-o", "--output", type=click.Path(file_okay=False), help="folder for the figures (default: FOLDER)")
def plot_serve(folder, output):
    """Latency CDFs, KV-cache occupancy and batch size over time of a serve --out folder."""
    _plot_run(folder, output, "serve")


@click.command("report", help=COMMANDS["report"])
@click.argument("folder", type=click.Path(file_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="page to write (default: FOLDER/report.html)")
def report_cmd(folder, output):
    _report(folder, output)


def _report(folder: str, output: str | None) -> None:
    path = Path(output) if output else Path(folder) / report.REPORT
    check_output_file(path, "--output" if output else "FOLDER", report_folders.inputs(Path(folder)))
    for written in writing("--output" if output else "FOLDER", str(path),
                            lambda: report_folders.write(Path(folder), Path(output) if output else None)):
        click.echo(f"wrote {written}")
