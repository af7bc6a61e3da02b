"""``memsim run`` and ``memsim trace``: one step (or a generation) of a model on a chip, simulated
and printed, or its operator DAG written. Only what a run needs is loaded: a folder's figures and page
are drawn by the ``plot`` and ``report`` commands, loaded when the folder already had them."""
from __future__ import annotations

from pathlib import Path
from typing import cast

import click

from memsim import report, workload
from memsim.cli import commands
from memsim.cli.commands import COMMANDS
from memsim.cli.options import progress_option, run_options, run_values, writing
from memsim.core.atomic import check_output_file
from memsim.core.errors import MemsimError
from memsim.run import api, inputs, steps
from memsim.run import table as console_table


@click.command("run", help=COMMANDS["run"])
@progress_option
@run_options("run")
@click.option("--out", type=click.Path(file_okay=False), help="folder for summary.json, ops.csv, timeline.csv")
@click.option("--perfetto", is_flag=True, help="also write OUT/trace.perfetto.json (ui.perfetto.dev, chrome://tracing)")
@click.option("--html", is_flag=True, help="also write OUT/report.html (memsim report; needs the report extra)")
def run(out, perfetto, html, **kwargs):
    for flag, given in (("--perfetto", perfetto), ("--html", html)):
        if given and not out:
            raise MemsimError(f"{flag} needs --out", field=flag)
    spec = api.resolve(**run_values(kwargs))
    if out:
        report.check_target(Path(out), inputs.files(spec))
        # what the folder's last run had drawn is drawn again from this one, never just deleted
        html = html or (Path(out) / report.REPORT).is_file()
        figures = any((Path(out) / name).is_file() for name in report.FIGURES)
    result = api.run(spec)
    click.echo(console_table.table(result.summary))
    if out:
        for path in writing("--out", out, lambda: result.write(out, perfetto=perfetto)):
            click.echo(f"wrote {path}")
        ctx = click.get_current_context()
        if figures:
            plot = cast(click.Group, commands.load("plot"))
            ctx.invoke(plot.commands["run"], folder=out, output=None)
        if html:
            ctx.invoke(commands.load("report"), folder=out, output=None)


@click.command("trace", help=COMMANDS["trace"])
@progress_option
@run_options("trace")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="trace file to write")
def trace(output, **kwargs):
    spec = api.resolve(**run_values(kwargs))
    if spec.phase == "generate":
        raise MemsimError("a trace holds one step: use --phase decode or prefill", field="--phase")
    check_output_file(Path(output), "--output", inputs.files(spec))
    graph = steps.load_workload(spec)
    writing("--output", output, lambda: workload.write_trace(graph, Path(output)))
    click.echo(f"wrote {output}: {len(graph.ops)} ops, {len(graph.tensors)} tensors")
