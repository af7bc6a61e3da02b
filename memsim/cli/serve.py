"""``memsim serve``: its options, generated from ``ServeSpec``, and the call to ``memsim.serving.serve``
(``cli.py`` adds it to the command line)."""
from __future__ import annotations

from pathlib import Path

import click

from memsim.cli.commands import COMMANDS
from memsim.cli.options import progress_option, spec_options, spec_values
from memsim.core.errors import MemsimError, run_field
from memsim.run.chipfile import chip_path
from memsim.run.inputs import files
from memsim.serving.report import check_out, summary_table
from memsim.serving.serve import serve_spec
from memsim.serving.spec import ServeSpec, options


@click.command("serve", help=COMMANDS["serve"])
@progress_option
@spec_options(options())
@click.option("--out", type=click.Path(file_okay=False), help="folder for requests.csv, steps.csv and serve.json")
def serve_cmd(out, **kwargs):
    values = spec_values(kwargs, options())
    spec = ServeSpec.make({**values, "hw": chip_path(values["hw"])})
    if out:
        check_out(Path(out), files(spec))
    result = serve_spec(spec)
    click.echo(summary_table(result.summary, spec))
    if out:
        try:
            paths = result.write(out)
        except OSError as exc:
            raise MemsimError(f"cannot write: {exc.strerror or exc}", file=str(out), field=run_field("out")) from None
        for path in paths:
            click.echo(f"wrote {path}")
