"""The commands of ``memsim``, what each does and the module that defines it, declared once, with
nothing heavy imported: the full command line (``memsim.cli.main``) takes each command's help from
here and loads only the module of the command it runs (``memsim run`` never loads the sweeps',
serving's or the figures' libraries), and ``memsim --help`` and ``memsim --version`` are answered from
here (``front``) without loading the simulator and its libraries, in a few hundredths of a second."""
from __future__ import annotations

import importlib

import click

from memsim import __version__

TITLE = "memsim: where does the memory wall bite?"
CONTEXT = {"help_option_names": ["-h", "--help"]}
# Each command's help: its first sentence is the line ``memsim --help`` gives it.
COMMANDS = {
    "capacity": "Find the highest request rate a deployment serves within its TTFT and TPOT SLOs: doubled, then "
                "bisected.",
    "explain": "Rank the hardware changes that would speed a run up: each quantity scaled down and up.",
    "import": "Import a graph from another format into a memsim trace file.",
    "list": "List shipped hardware presets (family, matrix peak, memory levels), models or runtime stacks.",
    "plot": "Figures from results (needs the plot extra: matplotlib).",
    "report": "An HTML page of any folder memsim writes: a run's (summary, placement, stalls, timeline, roofline, "
              "energy), a serving run's, a capacity search's, a sweep's (with its kept points' pages) or explain's.",
    "run": "Simulate one decode or prefill step, or a whole generation, and print a summary.",
    "serve": "Simulate requests arriving at a deployment: continuous batching, a paged KV cache, latency percentiles.",
    "show": "Print a hardware preset's or a stack's YAML, comments and sources included (a file with a base: as it "
            "resolves).",
    "sweep": "Run the cartesian product of swept fields; results.csv gets one row per point.",
    "trace": "Write the operator DAG of one step as a trace file.",
}
# The module that defines each command, and the command's name there.
WHERE = {
    "capacity": ("memsim.cli.capacity", "capacity_cmd"),
    "explain": ("memsim.cli.sweeps", "explain"),
    "import": ("memsim.cli.imports", "import_"),
    "list": ("memsim.cli.catalog", "list_"),
    "plot": ("memsim.cli.figures", "plot"),
    "report": ("memsim.cli.figures", "report_cmd"),
    "run": ("memsim.cli.step", "run"),
    "serve": ("memsim.cli.serve", "serve_cmd"),
    "show": ("memsim.cli.catalog", "show"),
    "sweep": ("memsim.cli.sweeps", "sweep"),
    "trace": ("memsim.cli.step", "trace"),
}
# The command lines ``front`` answers: the group's own help and version, nothing that runs.
FRONT = (("-h",), ("--help",), ("--version",))


class Lazy(click.Group):
    """The full ``memsim`` group: a command's module is imported when the command is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return load(cmd_name) if cmd_name in WHERE else None


def load(name: str) -> click.Command:
    """The command ``name``, its module imported the first time it is asked for."""
    module, attr = WHERE[name]
    return getattr(importlib.import_module(module), attr)


def every(command: click.Command) -> dict[str, click.Command]:
    """A group's commands by name, each loaded (a command that is no group: none)."""
    if not isinstance(command, click.Group):
        return {}
    ctx = click.Context(command, info_name=command.name)
    return {name: found for name in command.list_commands(ctx) if (found := command.get_command(ctx, name)) is not None}


def group(lazy: bool = False, **attrs) -> click.Group:
    """The ``memsim`` group as both command lines build it: its help, its version option (``lazy``:
    the full command line's, which loads a command's module when it is asked for)."""
    return click.version_option(__version__, prog_name="memsim")(
        (Lazy if lazy else click.Group)("memsim", help=TITLE, context_settings=CONTEXT, **attrs))


def front(args: list[str]) -> bool:
    """Answer ``memsim --help`` or ``--version`` (True) from the declarations alone; anything else is
    the full command line's (False)."""
    if tuple(args) not in FRONT:
        return False
    light = group()
    for name, text in COMMANDS.items():
        light.add_command(click.Command(name, help=text))
    try:
        with light.make_context("memsim", list(args)) as ctx:
            light.invoke(ctx)
    except click.exceptions.Exit:
        pass
    return True
