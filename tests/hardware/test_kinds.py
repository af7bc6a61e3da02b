"""Memory kinds as declared records: one registry that every question about a level's kind reads,
a memory kind added by one file, the scratchpad found by its kind, not its name."""
from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

from memsim import simulate
from memsim.core.errors import ConfigError
from memsim.hardware import load_chip
from memsim.hardware.families import FAMILIES
from memsim.hardware.kinds import CHIP, CORE, DEVICE, HOST, KINDS, LevelKind
from memsim.hardware.reference import kinds_table
from tests.conftest import TINY_CHIP

ROOT = Path(__file__).resolve().parents[2]

MODULE = '''
from memsim.hardware.kinds import {domain}, {extra}LevelKind, register

register(LevelKind(name="{name}", domain={domain}, help="a kind a test adds"{fields}))
'''


def _register(tmp_path: Path, name: str, domain: str, fields: str = "", extra: str = "") -> None:
    path = tmp_path / f"kind_{name}.py"
    path.write_text(MODULE.format(name=name, domain=domain, fields=fields, extra=extra))
    spec = importlib.util.spec_from_file_location(f"kind_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)


@pytest.fixture()
def added(tmp_path):
    """Two kinds from modules of their own: a device memory (magnetic RAM, streamed at the family's
    memory efficiency) and a scratchpad named otherwise (a GPU's shared memory)."""
    _register(tmp_path, "mram", "DEVICE", ", efficiency=MEMORY", "MEMORY, ")
    _register(tmp_path, "smem", "CHIP", ", scratchpad=True, holds=(), clock=CORE", "CORE, ")
    yield
    for name in ("mram", "smem"):
        KINDS.unregister(name)
        sys.modules.pop(f"kind_{name}", None)


def _chip(tmp_path: Path, text: str) -> str:
    path = tmp_path / "chip.yaml"
    path.write_text(text)
    return str(path)


def test_a_memory_kind_is_one_file_and_a_chip_of_it_runs(tmp_path, tiny_model_path, added):
    base = simulate(_chip(tmp_path, TINY_CHIP), str(tiny_model_path), context=16, sensitivity=0)
    plain = base.summary
    # the device memory a new kind: it takes the gpu family's memory efficiency where its file gives none
    text = TINY_CHIP.replace("{name: hbm, kind: hbm,", "{name: mram, kind: mram,").replace(", efficiency: 0.9}", "}")
    chip, _ = load_chip(_chip(tmp_path, text))
    assert chip.level("mram").kind_of.domain == DEVICE and chip.level("mram").efficiency < 1  # the family's estimate
    r = simulate(_chip(tmp_path, text), str(tiny_model_path), context=16, sensitivity=0)
    assert r.summary.bytes_per_level["mram"].total == plain.bytes_per_level["hbm"].total > 0
    assert r.summary.estimates.defaults == ("levels[mram].efficiency",)  # named as the family's estimate
    # the scratchpad is the level whose kind says so, whatever it is named
    renamed = TINY_CHIP.replace("{name: sram, kind: sram,", "{name: shared, kind: smem,")
    s = simulate(_chip(tmp_path, renamed), str(tiny_model_path), context=16, sensitivity=0)
    assert s.chip.scratchpad.name == "shared"
    assert s.summary.step_time_s == plain.step_time_s
    assert s.summary.bytes_per_level["shared"] == plain.bytes_per_level["sram"]
    # a load that is not a direct copy lands in the scratchpad, by its name
    ends = lambda r: set(r.timeline.dst.dropna()) | set(r.timeline.src.dropna())
    assert "sram" in ends(base) and "shared" in ends(s) and "sram" not in ends(s)


def test_a_chip_has_exactly_one_scratchpad(tmp_path, added):
    with pytest.raises(ConfigError, match=r"one scratchpad level .* not 0") as info:
        load_chip(_chip(tmp_path, TINY_CHIP.replace("kind: sram,", "kind: l2,")))
    assert info.value.field == "levels"
    two = TINY_CHIP.replace("  - {name: hbm,", "  - {name: shared, kind: smem, capacity: 64 KiB, bandwidth: 1 TB/s, "
                                               "latency: 10 ns}\n  - {name: hbm,")
    with pytest.raises(ConfigError, match="not 2: sram, shared"):
        load_chip(_chip(tmp_path, two))


def test_an_unknown_kind_names_every_registered_one(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_chip(_chip(tmp_path, TINY_CHIP.replace("kind: hbm,", "kind: hbm3,")))
    assert info.value.field == "levels[hbm].kind" and all(k in info.value.message for k in KINDS.names())


def test_every_kind_is_declared_whole_and_listed_in_the_reference():
    table = kinds_table()
    for kind in KINDS.values():
        assert kind.domain in (CHIP, DEVICE, HOST) and len(kind.help) > 20
        assert f"| `{kind.name}` | {kind.domain} |" in table
    assert sum(k.scratchpad for k in KINDS.values()) >= 1
    assert all(k.clock == CORE for k in KINDS.values() if k.on_chip)  # the shipped on-chip kinds are clocked with the core
    with pytest.raises(ValueError, match="domain"):
        LevelKind(name="x", domain="board", help="where?")


def _string_tuples(tree: ast.AST) -> list[tuple[int, set[str]]]:
    """The tuples, lists and sets of string literals in a module, with their lines."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and node.elts and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            out.append((node.lineno, {e.value for e in node.elts}))
    return out


@pytest.mark.parametrize("registry", [KINDS, FAMILIES], ids=["kinds", "families"])
def test_no_list_of_kind_or_family_names_outside_their_registry(registry):
    """A module that asks about a level's kind or a chip's family reads its ``LevelKind`` or
    ``Family``; a tuple of two or more of their names (``("hbm", "gddr", "lpddr")``,
    ``("wafer", "rdu")``) anywhere in memsim is a second, silent registry."""
    known = set(registry.names())
    found = []
    for path in sorted((ROOT / "memsim").rglob("*.py")):
        if {"kinds", "families"} & set(path.parts[-2:-1]):
            continue
        tree = ast.parse(path.read_text())
        found += [f"{path.relative_to(ROOT)}:{line}: {sorted(names & known)}"
                  for line, names in _string_tuples(tree) if len(names & known) >= 2]
        found += [f"{path.relative_to(ROOT)}:{line}: keys {sorted(names & known)}"
                  for line, names in _string_keys(tree) if len(names & known) >= 2]
    assert not found, found


def _string_keys(tree: ast.AST) -> list[tuple[int, set[str]]]:
    """The dicts keyed by string literals in a module, with their lines."""
    return [(node.lineno, {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)})
            for node in ast.walk(tree) if isinstance(node, ast.Dict)]
