"""Command line: parse, call the pipeline, print and write. User errors: one line, exit 2.

Each command lives in a module of its own (``memsim.cli.commands.WHERE``), imported only when that
command runs: ``memsim run`` loads the simulator, not the sweeps', serving's or the figures' libraries."""
from __future__ import annotations

import os
import sys
import warnings

import click

from memsim.cli import commands
from memsim.cli.console import by_interrupt, interrupted
from memsim.core.errors import MemsimError, MemsimWarning, flags_named


@click.pass_context
def _main(ctx: click.Context) -> None:
    ctx.with_resource(flags_named())  # errors name this command line's flags, not keyword arguments


main = commands.group(lazy=True, callback=_main)  # its help, its version and each command's help: commands.py


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    if issubclass(category, MemsimWarning):
        click.echo(f"memsim: warning: {message}".replace("\n", " "), err=True)  # a file name may hold a newline
    else:
        _PLAIN_WARNING(message, category, filename, lineno, file, line)


_PLAIN_WARNING = warnings.showwarning


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
