"""The command-line reference (``docs/cli.md``), generated from the click commands themselves:
every command's usage and help, and every option with its type, default and help, so the page
has every flag the code has and no other (``python scripts/reference.py --write``)."""
from __future__ import annotations

import click

from memsim.cli import main as cli
from memsim.cli.commands import every


def _type(param: click.Parameter) -> str:
    if isinstance(param, click.Option) and param.is_flag:
        return "flag"
    if isinstance(param.type, click.Choice):
        return " \\| ".join(f"`{c}`" for c in param.type.choices)
    return param.type.name


def _default(param: click.Parameter) -> str:
    default = param.default
    unset = default is None or type(default).__name__ == "Sentinel" or default == () or callable(default)
    if isinstance(param, click.Option) and param.is_flag and not param.secondary_opts:
        return "on" if default is True else "off"
    return "" if unset else f"`{default}`"


def _options(command: click.Command, ctx: click.Context) -> list[str]:
    rows = []
    for param in command.params:
        if isinstance(param, click.Argument):
            rows.append(f"| `{param.make_metavar(ctx)}` | argument | {_type(param)} | | |")
        elif isinstance(param, click.Option) and not param.hidden:
            flags = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
            text = (param.help or "").replace("|", "\\|").replace("\n", " ")
            rows.append(f"| {flags} | option | {_type(param)} | {_default(param)} | {text} |")
    if not rows:
        return []
    return ["| name | is | takes | default | meaning |", "|---|---|---|---|---|", *rows, ""]


def _command(command: click.Command, path: list[str]) -> list[str]:
    ctx = click.Context(command, info_name=" ".join(path), parent=None)
    usage = " ".join([*path, *command.collect_usage_pieces(ctx)])
    out = [f"{'#' * min(len(path) + 1, 4)} `{' '.join(path)}`", "", "```", usage, "```", ""]
    if command.help:
        out += [click.unstyle(command.help).strip(), ""]
    out += _options(command, ctx)
    for name, sub in sorted(every(command).items()):
        out += _command(sub, [*path, name])
    return out


def reference() -> str:
    head = ["# Command line", "",
            "Every command and option, generated from the click declarations in `memsim/cli/` (a module per command) by "
            "`python scripts/reference.py --write`; `tests/cli/test_cli_reference.py` keeps it current. What the "
            "commands are for, with examples: [usage.md](usage.md).", ""]
    return "\n".join(head + _command(cli.main, ["memsim"]))
