"""Click options generated from a declared spec's fields (``RunSpec``, ``ServeSpec``): the flag, type,
choices, default and help each field declares, so a command's options are its spec's."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

import click

from memsim.core import progress
from memsim.core.errors import MemsimError, shown
from memsim.run import runspec
from memsim.run.runspec import RunSpec, flag


def spec_options(specified: list) -> Callable:
    """A decorator adding an option for each of ``specified`` (dataclass fields made by ``runspec.param``)."""
    def decorate(fn):
        for f in reversed(specified):
            meta, name = f.metadata, flag(f)
            if meta["kind"] is bool:
                opt = click.option(name, f.name, is_flag=True, help=shown(meta["help"], flags=True))
            elif f.name == "set":
                opt = click.option(name, f.name, multiple=True, metavar="PATH=VALUE", help=shown(meta["help"], flags=True))
            else:
                kind = click.Choice(meta["choices"]) if meta["choices"] else meta["kind"]
                default = meta["cli_default"]
                opt = click.option(name, f.name, type=kind, default=default, show_default=default is not None,
                                   help=shown(meta["help"], flags=True))
            fn = opt(fn)
        return fn
    return decorate


def spec_values(kwargs: dict[str, Any], specified: list) -> dict[str, Any]:
    """Pop the fields ``specified`` out of a command's keyword arguments (a ``--no-`` flag inverted)."""
    values = {}
    for f in specified:
        if f.name in kwargs:
            value = kwargs.pop(f.name)
            values[f.name] = (not value) if flag(f).startswith("--no-") else value
    return values


def _progress(ctx: click.Context, param: click.Parameter, off: bool) -> None:
    """Bars on stderr for the rest of the command, unless ``--no-progress`` (``core.progress``)."""
    ctx.with_resource(progress.shown(not off))


# Every command that can take more than a moment: bars on stderr while a terminal watches, after two seconds.
progress_option = click.option(
    "--no-progress", is_flag=True, expose_value=False, callback=_progress, is_eager=True,
    help=f"no progress bars on stderr (a bar appears after {progress.DELAY:g} s of work, and only where stderr is a "
         "terminal)")


def run_options(command: str) -> Callable:
    """Click options generated from ``RunSpec``'s fields that ``memsim COMMAND`` takes."""
    return spec_options(runspec.options(command))


def run_values(kwargs: dict) -> dict:
    """Pop the ``RunSpec`` fields out of a command's keyword arguments (``--no-fast-forward`` inverted)."""
    return spec_values(kwargs, list(fields(RunSpec)))


def writing(option: str, target, write):
    """Run ``write``; a file system error (unwritable folder, full disk) becomes one line naming
    ``target`` and ``option``."""
    try:
        return write()
    except OSError as exc:
        raise MemsimError(f"cannot write: {exc.strerror or exc}", file=str(target), field=option) from None
