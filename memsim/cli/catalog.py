"""``memsim list`` and ``memsim show``: the shipped chips at a glance (``memsim list hw``) and one chip
as it resolves (``memsim show hw``); the models and stacks likewise.

A row gives what a reader choosing a chip asks first: its family, its matrix peak, and its memory
levels from the fastest out, each with its capacity and bandwidth. ``show`` prints a preset as
shipped, comments and sources included; a file that starts from a preset (``base:``) is printed
as it resolves, every field it inherits written out.
"""
from __future__ import annotations

from pathlib import Path

import click

from memsim import hardware, workload
from memsim.cli.commands import COMMANDS
from memsim.hardware import rates
from memsim.hardware.estimates import yaml_text
from memsim.hardware.loader import BASE, read_yaml
from memsim.hardware.resource import Ref
from memsim.stack import dump_stack, load_stack
from memsim.stack import presets as stack_presets
from memsim.stack.loader import stack_path


def _rounded(value: float, unit: str) -> str:
    """Three significant figures in the largest decimal unit at most ``value``: 1307.4e12 -> 1.31 P."""
    for name, mult in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= mult:
            return f"{value / mult:.3g} {name}{unit}"
    return f"{value:.3g} {unit}"


def hardware_row(chip: hardware.ChipSpec) -> tuple[str, str, str, str]:
    """(name, family, matrix peak of bf16, fp16 or fp32, whichever it gives first, else its first
    dtype, and its levels as NAME CAPACITY @ PEAK BANDWIDTH, whole-chip figures, a host level's as its link allows)."""
    table = dict(chip.compute.peak_flops_per_s)
    dtype = next((d for d in ("bf16", "fp16", "fp32") if d in table), next(iter(table), ""))
    peak = _rounded(table[dtype], "FLOP/s") if dtype else "-"
    levels = "; ".join(f"{lv.name} {_rounded(chip.chip_capacity(lv), 'B')} @ "
                       f"{_rounded(rates.peak_bandwidth(chip, Ref.level(lv.name)), 'B/s')}" for lv in chip.levels)
    return chip.name, chip.family, f"{peak} {dtype}".strip(), levels


def hardware_table(names: list[str]) -> str:
    rows = [("preset", "family", "matrix peak", "memory levels (capacity @ peak bandwidth)")]
    rows += [hardware_row(hardware.load(name)) for name in names]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}".rstrip() for r in rows)


def show_hardware(name_or_path: str) -> str:
    """A chip's YAML as it resolves: a file without ``base:`` as written, comments and sources
    included; one with a base, every field written out, under a line that says where it came from."""
    path = hardware.resolve(name_or_path, "hardware", hardware.HW_SUFFIXES)
    base = read_yaml(path).get(BASE)
    if base is None:
        return Path(path).read_text(encoding="utf-8-sig")
    head = f"# {path}, resolved: every field of its base ({base}) that it does not set\n"
    return head + yaml_text(hardware.dump_chip(hardware.load(str(path))))


def stacks_table(names: list[str]) -> str:
    """The shipped stacks: each one's launches, collective library and host work a step, and what it is."""
    rows = [("stack", "decode launches", "collectives", "host step work", "description")]
    for name in names:
        stack = load_stack(name)[0]
        impls = ", ".join(dict.fromkeys(c.name.split("-")[0] for c in stack.collectives)) or "the chip's"
        step = stack.step
        work = f"{step.fixed_ps / 1e9:g} ms + {step.per_sequence_ps / 1e6:g} us/seq ({step.overlap} overlap)" \
            if step.fixed_ps or step.per_sequence_ps else "none"
        rows.append((name, stack.kernels.launch, impls, work, stack.description))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join("  ".join(f"{c:<{w}}" for c, w in zip(r[:4], widths)) + "  " + r[4] for r in rows)


def show_stack(name_or_path: str) -> str:
    """A stack's YAML as it resolves: a file without ``base:`` as written, comments and sources
    included; one with a base, every field written out (``ideal``: its fields, all defaults)."""
    path = stack_path(name_or_path)
    if path is not None and BASE not in read_yaml(path):
        return Path(path).read_text(encoding="utf-8-sig")
    head = f"# {path or name_or_path}, resolved: every field its bases give it\n"
    return head + yaml_text(dump_stack(load_stack(name_or_path)[0]))


@click.command("list", help=COMMANDS["list"])
@click.argument("what", type=click.Choice(["hw", "models", "stacks"]))
def list_(what):
    if what == "hw":
        click.echo(hardware_table(hardware.presets()))
    elif what == "stacks":
        click.echo(stacks_table(["ideal", *stack_presets()]))
    else:
        for name in workload.models():
            click.echo(name)


@click.command("show", help=COMMANDS["show"])
@click.argument("what", type=click.Choice(["hw", "stack"]))
@click.argument("name", metavar="NAME|PATH")
def show(what, name):
    click.echo(show_hardware(name) if what == "hw" else show_stack(name), nl=False)
