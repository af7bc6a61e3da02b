"""The commands of ``memsim`` and what each does, declared once, with nothing heavy imported: the
full command line (``memsim.cli.main``) takes each command's help from here, and ``memsim --help``
and ``memsim --version`` are answered from here (``front``) without loading the simulator and its
libraries, in a few hundredths of a second."""
from __future__ import annotations

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
# The command lines ``front`` answers: the group's own help and version, nothing that runs.
FRONT = (("-h",), ("--help",), ("--version",))


def group(**attrs) -> click.Group:
    """The ``memsim`` group as both command lines build it: its help, its version option."""
    return click.version_option(__version__, prog_name="memsim")(
        click.Group("memsim", help=TITLE, context_settings=CONTEXT, **attrs))


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
