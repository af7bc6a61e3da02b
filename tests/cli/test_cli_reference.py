"""docs/cli.md is generated from the click commands, and holds every command and flag."""
from __future__ import annotations

from pathlib import Path

import click

from memsim.cli import main as cli
from memsim.cli.commands import every
from memsim.cli.reference import reference

PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _commands(group: click.Group, path: str = "memsim"):
    for name, command in every(group).items():
        yield f"{path} {name}", command
        yield from _commands(command, f"{path} {name}")


def test_the_page_is_current():
    assert PAGE.read_text() == reference(), "python scripts/reference.py --write"


def test_every_command_and_flag_is_on_the_page_with_its_help():
    text = reference()
    for path, command in _commands(cli.main):
        section = text.split(f"`{path}`\n")[1].split("\n#")[0]
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert f"`{param.opts[-1]}`" in section, f"{path} {param.opts}"
                if param.help:
                    assert param.help.split("\n")[0][:40] in section, f"{path} {param.opts}"
    assert "| `--batch` | option | integer | `1` |" in text
