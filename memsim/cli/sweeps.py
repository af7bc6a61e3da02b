"""``memsim sweep`` and ``memsim explain``: many runs of one deployment, a point per swept value or a
rerun per quantity changed, on the sweeps' runner (local processes or a Dask cluster)."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from memsim.cli.commands import COMMANDS
from memsim.cli.options import progress_option, run_options, run_values, writing
from memsim.core.atomic import atomic_write_text, check_output_file
from memsim.core.errors import MemsimError
from memsim.run import api, inputs
from memsim.run import explain as whatif
from memsim.sweep import explain_serve, explaining
from memsim.sweep import runner as sweeping
from memsim.sweep import serve as serve_sweep


@click.command("sweep", help=COMMANDS["sweep"])
@run_options("sweep")
@click.option("--set", "sets", multiple=True, metavar="PATH=VALUES",
              help="swept field: PATH=V1,V2,... or PATH=A..B:x2 (or :+S); repeatable")
@click.option("--sweep", "sweep_file", help="sweep YAML: fixed fields (a run's; with --serve, a serving run's) and "
                                           "a `set:` mapping of swept fields")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="folder for results.csv")
@click.option("--workers", type=int, help="local worker processes (default: every core)")
@click.option("--scheduler", help="Dask scheduler address (tcp://host:8786): run on that cluster")
@click.option("--keep", is_flag=True, help="also write each point's full outputs under OUT/points/")
@click.option("--no-progress", is_flag=True, help="no progress bar (one is drawn only where stderr is a terminal)")
@click.option("--serve", is_flag=True, help="sweep serving runs (memsim serve's keywords and hardware fields)")
def sweep(sets, sweep_file, out, workers, scheduler, keep, no_progress, serve, **kwargs):
    base = run_values(kwargs)
    fixed: dict = {}
    listed: dict = {}
    if serve:
        if sweep_file:
            fixed, listed = sweeping.read_sweep_file(Path(sweep_file), serve_sweep.keywords())
        if not sets and not listed:
            raise MemsimError("nothing to sweep: give --set NAME=V1,V2 or --sweep FILE", field="--set")
        for line in serve_sweep.command({**serve_sweep.base_of(base), **fixed},
                                        sweeping.parse_sweeps(list(sets), known=listed), Path(out), workers,
                                        scheduler, keep, not no_progress, [Path(sweep_file)] if sweep_file else []):
            click.echo(line)
        return
    if sweep_file:
        fixed, listed = sweeping.read_sweep_file(Path(sweep_file))
        base.update(fixed)
    sweeps = sweeping.parse_sweeps(list(sets), known=listed)
    if not sweeps:
        raise MemsimError("nothing to sweep: give --set PATH=V1,V2 or --sweep FILE", field="--set")
    ctx = click.get_current_context()
    for name in sweeps:  # a run option given on the command line and swept as well: which one was meant?
        if name in ctx.params and ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE:
            raise MemsimError(f"given and also swept (--set {name}=...): give one",
                              field=f"--{name.replace('_', '-')}")
    total = sweeping.size(sweeps)
    header = f"sweeping {', '.join(f'{k} ({len(v)})' for k, v in sweeps.items())}: {total} points -> {out}"
    existed = Path(out).is_dir()
    fresh = not existed or not any(Path(out).iterdir())
    try:
        results = sweeping.run_sweep(base, sweeps, Path(out), workers, scheduler, keep, not no_progress,
                                     [Path(sweep_file)] if sweep_file else [], lambda: click.echo(header))
    except KeyboardInterrupt:
        click.echo(f"memsim: interrupted: finished points are kept in {Path(out) / 'results.csv'}; run again to "
                   "resume", err=True)
        sys.exit(130)
    failed = [r["error"] for r in results.rows if r.get("error")]
    repeats = f", {results.repeats} the same run as another point" if results.repeats else ""
    if results.rows:
        click.echo(results.table())
    click.echo(f"wrote {Path(out) / 'results.csv'}: {len(results.rows)} points ({results.skipped} already done"
               f"{repeats}), {len(failed)} failed")
    if results.rows and len(failed) == len(results.rows):
        if fresh:  # nothing but failures, in a folder this sweep began: it leaves nothing behind
            sweeping.sweep_store.discard(Path(out), existed)
            raise MemsimError(f"every point failed; the first: {failed[0]}")
        raise MemsimError(f"every point failed; the first: {failed[0]}", file=str(Path(out) / "results.csv"))


@click.command("explain", help=COMMANDS["explain"])
@progress_option
@run_options("explain")
@click.option("--factor", "factors", multiple=True, type=float,
              help="scale each quantity by this factor; repeatable (default: 0.5 and 2)")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="also write the table as this CSV (explain.csv)")
@click.option("--out", type=click.Path(file_okay=False),
              help="experiment folder: explain.csv and each rerun as it finishes; run again to resume")
@click.option("--workers", type=int, help="local worker processes (default: every core)")
@click.option("--scheduler", help="Dask scheduler address (tcp://host:8786): run the reruns on that cluster")
@click.option("--keep", is_flag=True, help="also write each rerun's full outputs under OUT/points/")
@click.option("--serve", is_flag=True, help="rank the changes by a deployment's capacity at its SLOs (memsim capacity): "
              "its serving and search keywords as --set NAME=VALUE")
def explain(factors, output, out, workers, scheduler, keep, serve, **kwargs):
    whatif.check_factors(tuple(factors) or whatif.FACTORS, "--factor")
    if serve:  # by capacity at the SLOs: its keywords as --set NAME=VALUE, as sweep --serve takes them
        frame = explain_serve.command(run_values(kwargs), tuple(factors) or whatif.FACTORS, workers, scheduler, out, keep,
                                      output)
    else:
        spec = api.resolve(**run_values(kwargs))
        if output:
            check_output_file(Path(output), "--output", inputs.files(spec))
        frame = explaining.explain_run(spec, tuple(factors) or whatif.FACTORS, workers, scheduler, out, keep)
    click.echo(explain_serve.table(frame) if serve else whatif.table(frame))
    if output:
        writing("--output", output, lambda: atomic_write_text(Path(output), frame.to_csv(index=False)))
        click.echo(f"wrote {output}")
    if out:
        click.echo(f"wrote {Path(out) / explaining.TABLE}")
