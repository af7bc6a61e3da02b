"""``memsim import``: a subcommand for each importer registered (``memsim.workload.importers``), its
options generated from what the importer declares, writing a memsim trace file."""
from __future__ import annotations

from pathlib import Path

import click

from memsim import workload
from memsim.cli.commands import COMMANDS
from memsim.cli.options import progress_option, writing
from memsim.core import limits
from memsim.core.atomic import check_output_file
from memsim.core.errors import FLAGS, MemsimError
from memsim.workload.importers import IMPORTERS, OUTPUT, Importer


def _write_import(graph, report, output: str) -> None:
    writing("--output", output, lambda: workload.write_trace(graph, Path(output)))
    for line in report.lines():
        click.echo(line)
    click.echo(f"wrote {output}: {len(graph.ops)} ops, {len(graph.tensors)} tensors")


@click.group("import", help=COMMANDS["import"])
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
