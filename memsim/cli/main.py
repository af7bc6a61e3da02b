"""Command line: parse, call the pipeline, print and write. User errors: one line, exit 2."""
from __future__ import annotations

import os
import sys
import warnings
from dataclasses import fields
from pathlib import Path

import click

from memsim import hardware, report, workload
from memsim.cli import catalog, commands
from memsim.cli.capacity import capacity_cmd
from memsim.cli.commands import COMMANDS
from memsim.cli.console import by_interrupt, interrupted
from memsim.cli.options import progress_option, spec_options, spec_values
from memsim.cli.serve import serve_cmd
from memsim.core import limits
from memsim.core.atomic import atomic_write_text, check_output_file
from memsim.core.errors import FLAGS, MemsimError, MemsimWarning, flags_named
from memsim.report import folders as report_folders
from memsim.report import plots, run_plots, serve_plots
from memsim.run import api, inputs, runspec, steps
from memsim.run import explain as whatif
from memsim.run import table as console_table
from memsim.run.runspec import RunSpec
from memsim.stack import presets as stack_presets
from memsim.sweep import explain_serve, explaining
from memsim.sweep import runner as sweeping
from memsim.sweep import serve as serve_sweep
from memsim.workload.importers import IMPORTERS, OUTPUT, Importer


def _spec_options(command: str):
    """Click options generated from ``RunSpec``'s fields that ``memsim COMMAND`` takes."""
    return spec_options(runspec.options(command))


def _spec_values(kwargs: dict) -> dict:
    """Pop the ``RunSpec`` fields out of a command's keyword arguments (``--no-fast-forward`` inverted)."""
    return spec_values(kwargs, list(fields(RunSpec)))


@click.pass_context
def _main(ctx: click.Context) -> None:
    ctx.with_resource(flags_named())  # errors name this command line's flags, not keyword arguments


main = commands.group(callback=_main)  # its help and version, and each command's help: commands.py


@main.command(help=COMMANDS["run"])
@progress_option
@_spec_options("run")
@click.option("--out", type=click.Path(file_okay=False), help="folder for summary.json, ops.csv, timeline.csv")
@click.option("--perfetto", is_flag=True, help="also write OUT/trace.perfetto.json (ui.perfetto.dev, chrome://tracing)")
@click.option("--html", is_flag=True, help="also write OUT/report.html (memsim report; needs the report extra)")
def run(out, perfetto, html, **kwargs):
    for flag, given in (("--perfetto", perfetto), ("--html", html)):
        if given and not out:
            raise MemsimError(f"{flag} needs --out", field=flag)
    spec = api.resolve(**_spec_values(kwargs))
    if out:
        report.check_target(Path(out), inputs.files(spec))
        # what the folder's last run had drawn is drawn again from this one, never just deleted
        html = html or (Path(out) / report.REPORT).is_file()
        figures = any((Path(out) / name).is_file() for name in report.FIGURES)
    result = api.run(spec)
    click.echo(format_summary(result.summary))
    if out:
        for path in _writing("--out", out, lambda: result.write(out, perfetto=perfetto)):
            click.echo(f"wrote {path}")
        if figures:
            _plot_run(out, None)
        if html:
            _report(out, None)


@main.command(help=COMMANDS["sweep"])
@_spec_options("sweep")
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
    base = _spec_values(kwargs)
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


@main.command(help=COMMANDS["explain"])
@progress_option
@_spec_options("explain")
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
        frame = explain_serve.command(_spec_values(kwargs), tuple(factors) or whatif.FACTORS, workers, scheduler, out, keep,
                                      output)
    else:
        spec = api.resolve(**_spec_values(kwargs))
        if output:
            check_output_file(Path(output), "--output", inputs.files(spec))
        frame = explaining.explain_run(spec, tuple(factors) or whatif.FACTORS, workers, scheduler, out, keep)
    click.echo(explain_serve.table(frame) if serve else whatif.table(frame))
    if output:
        _writing("--output", output, lambda: atomic_write_text(Path(output), frame.to_csv(index=False)))
        click.echo(f"wrote {output}")
    if out:
        click.echo(f"wrote {Path(out) / explaining.TABLE}")


@main.group(help=COMMANDS["plot"])
def plot():
    pass  # its subcommands: its help is commands.COMMANDS'


@plot.command("sweep")
@click.argument("results", type=click.Path(dir_okay=False))
@click.option("--x", "x_field", help="swept field on the x axis (default: the first)")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="figure file (default: beside RESULTS)")
def plot_sweep(results, x_field, output):
    """Step time and bytes per level against a swept field."""
    check_output_file(Path(output or Path(results).with_suffix(".png")), "--output", [Path(results)])
    path = _writing("--output", output or results,
                    lambda: plots.plot_sweep(Path(results), x_field, Path(output) if output else None))
    click.echo(f"wrote {path}")


@plot.command("explain")
@click.argument("table", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="figure file (default: beside TABLE)")
def plot_explain(table, output):
    """A tornado plot of memsim explain's CSV: the step time at each change, ranked."""
    check_output_file(Path(output or Path(table).with_suffix(".png")), "--output", [Path(table)])
    path = _writing("--output", output or table, lambda: plots.plot_explain(Path(table), Path(output) if output else None))
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
    for path in _writing("--output" if output else "FOLDER", str(where), lambda: draw(Path(folder), where)):
        click.echo(f"wrote {path}")


@plot.command("serve")
@click.argument("folder", type=click.Path(file_okay=False))
@click.option("-o", "--output", type=click.Path(file_okay=False), help="folder for the figures (default: FOLDER)")
def plot_serve(folder, output):
    """Latency CDFs, KV-cache occupancy and batch size over time of a serve --out folder."""
    _plot_run(folder, output, "serve")


@main.command("report", help=COMMANDS["report"])
@click.argument("folder", type=click.Path(file_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="page to write (default: FOLDER/report.html)")
def report_cmd(folder, output):
    _report(folder, output)


def _report(folder: str, output: str | None) -> None:
    path = Path(output) if output else Path(folder) / report.REPORT
    check_output_file(path, "--output" if output else "FOLDER", report_folders.inputs(Path(folder)))
    for written in _writing("--output" if output else "FOLDER", str(path),
                            lambda: report_folders.write(Path(folder), Path(output) if output else None)):
        click.echo(f"wrote {written}")


@main.command(help=COMMANDS["trace"])
@progress_option
@_spec_options("trace")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="trace file to write")
def trace(output, **kwargs):
    spec = api.resolve(**_spec_values(kwargs))
    if spec.phase == "generate":
        raise MemsimError("a trace holds one step: use --phase decode or prefill", field="--phase")
    check_output_file(Path(output), "--output", inputs.files(spec))
    graph = steps.load_workload(spec)
    _writing("--output", output, lambda: workload.write_trace(graph, Path(output)))
    click.echo(f"wrote {output}: {len(graph.ops)} ops, {len(graph.tensors)} tensors")


def _writing(option: str, target, write):
    """Run ``write``; a file system error (unwritable folder, full disk) becomes one line naming
    ``target`` and ``option``."""
    try:
        return write()
    except OSError as exc:
        raise MemsimError(f"cannot write: {exc.strerror or exc}", file=str(target), field=option) from None


def _write_import(graph, report, output: str) -> None:
    _writing("--output", output, lambda: workload.write_trace(graph, Path(output)))
    for line in report.lines():
        click.echo(line)
    click.echo(f"wrote {output}: {len(graph.ops)} ops, {len(graph.tensors)} tensors")


@main.group("import", help=COMMANDS["import"])
def import_():
    pass  # a subcommand each importer registers: its help is commands.COMMANDS'


def _import_command(name: str, importer: Importer) -> click.Command:
    """``memsim import NAME``, generated from what the importer registered."""
    def convert(output: str, **given):
        values = {}
        for opt in importer.options:
            if opt.name == OUTPUT.name:
                continue
            value = given[opt.name]
            if opt.least is not None and value < opt.least:
                raise MemsimError(f"must be at least {opt.least}", field=opt.flag)
            if opt.limit is not None:
                limits.check(value, opt.limit, opt.name, opt.flag)
            if opt.parse is not None:
                value = opt.parse(value)
            values[opt.name] = Path(value) if opt.kind is Path else value
        check_output_file(Path(output), "--output", [values[importer.reads]])
        graph, report = importer.run(**values)
        _write_import(graph, report, output)

    params: list[click.Parameter] = []
    for opt in importer.options:
        kind = click.Path(dir_okay=False) if opt.kind is Path else opt.kind
        if opt.flag:  # an importer's error names the option by its keyword; the command line, by its flag
            FLAGS.setdefault(opt.name, opt.flag.split("/")[-1])
            params.append(click.Option([*opt.flag.split("/"), opt.name], type=kind, required=opt.required,
                                       default=opt.default, show_default=opt.default is not None,
                                       multiple=opt.multiple, metavar=opt.metavar, help=opt.help))
        else:
            params.append(click.Argument([opt.name], type=kind, metavar=opt.metavar))
    return progress_option(click.Command(name, callback=convert, params=params, help=importer.help))


for _name, _importer in IMPORTERS.items():
    import_.add_command(_import_command(_name, _importer))


@main.command("list", help=COMMANDS["list"])
@click.argument("what", type=click.Choice(["hw", "models", "stacks"]))
def list_(what):
    if what == "hw":
        click.echo(catalog.hardware_table(hardware.presets()))
    elif what == "stacks":
        click.echo(catalog.stacks_table(["ideal", *stack_presets()]))
    else:
        for name in workload.models():
            click.echo(name)


@main.command("show", help=COMMANDS["show"])
@click.argument("what", type=click.Choice(["hw", "stack"]))
@click.argument("name", metavar="NAME|PATH")
def show(what, name):
    click.echo(catalog.show_hardware(name) if what == "hw" else catalog.show_stack(name), nl=False)


def format_summary(s: report.Summary) -> str:
    return console_table.table(s)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    if issubclass(category, MemsimWarning):
        click.echo(f"memsim: warning: {message}".replace("\n", " "), err=True)  # a file name may hold a newline
    else:
        _PLAIN_WARNING(message, category, filename, lineno, file, line)


_PLAIN_WARNING = warnings.showwarning


main.add_command(serve_cmd)
main.add_command(capacity_cmd)


def entry() -> None:
    """Console script: turn user errors into one line and exit code 2."""
    warnings.showwarning = _show_warning
    try:
        with flags_named(), warnings.catch_warnings():
            warnings.simplefilter("default", MemsimWarning)  # a warning is a line the user reads, each once
            _invoke()
    except BrokenPipeError:  # the reader of stdout left (``memsim list hw | head -1``): nothing more to say
        sys.stdout = open(os.devnull, "w")
        sys.exit(1)
    except MemsimError as exc:
        _fail(exc.one_line(flags=True))
    except (click.exceptions.Abort, KeyboardInterrupt):
        interrupted()
    except click.ClickException as exc:
        click.echo(f"memsim: error: {exc.format_message()}".replace("\n", " "), err=True)
        sys.exit(exc.exit_code)
    except OSError as exc:  # a file that cannot be read or written
        _fail(f"{exc.filename}: {exc.strerror}" if exc.filename else str(exc))
    except Exception as exc:  # a bug must still not print a traceback at a user
        if by_interrupt(exc):  # a Ctrl-C that a library wrapped in an error of its own
            interrupted()
        if os.environ.get("MEMSIM_DEBUG"):
            raise
        _fail(f"internal error, please report it: {type(exc).__name__}: {exc} (MEMSIM_DEBUG=1 shows the traceback)")


def _invoke() -> None:
    """Run the command line as click's ``main`` does, less its own catch of Ctrl-C, which writes
    a blank line before ours."""
    if any(name.startswith("_MEMSIM_COMPLETE") for name in os.environ):  # shell completion
        main.main()
        return
    try:
        with main.make_context("memsim", sys.argv[1:]) as ctx:
            main.invoke(ctx)
    except click.exceptions.Exit as exc:  # --help, --version
        if exc.exit_code:
            sys.exit(exc.exit_code)
    except click.exceptions.NoArgsIsHelpError as exc:  # ``memsim`` alone: its help, as --help shows it
        click.echo(exc.ctx.get_help() if exc.ctx else main.get_help(click.Context(main, info_name="memsim")))


def _fail(line: str) -> None:
    click.echo(f"memsim: error: {line}".replace("\n", " "), err=True)
    sys.exit(2)


if __name__ == "__main__":
    entry()
