"""The one registry type: lookups that name the known names, no name twice, sorted names, members
found in their package; and every extension point (families, lowerings, collectives, topologies,
importers) is one of it, with ``memsim import`` generated from the importers'."""
from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner

from memsim.cli import imports
from memsim.cli import main as cli
from memsim.core.errors import ConfigError
from memsim.core.registry import Registry
from memsim.hardware.families import FAMILIES
from memsim.hardware.kinds import KINDS
from memsim.hardware.topologies import TOPOLOGIES
from memsim.mapping.collectives import ALLREDUCE, COLLECTIVES
from memsim.mapping.lower import LOWERINGS
from memsim.mapping.strategy import STRATEGIES
from memsim.workload.graph import COLLECTIVE_KINDS, OP_KINDS
from memsim.workload.importers import IMPORTERS


def test_a_registry_lists_its_names_sorted_and_looks_them_up():
    colours: Registry[int] = Registry("colour", field="paint.colour")
    colours.add("red", 1)
    assert colours.register("blue")(2) == 2
    colours.add("green", 3)
    assert colours.names() == ("blue", "green", "red") == tuple(colours)
    assert colours.items() == (("blue", 2), ("green", 3), ("red", 1))
    assert colours.values() == (2, 3, 1)
    assert len(colours) == 3 and "red" in colours and "pink" not in colours
    assert colours.get("green") == colours["green"] == 3


def test_an_unknown_name_is_a_config_error_naming_the_field_and_the_known_names():
    colours: Registry[int] = Registry("colour", field="paint.colour")
    colours.add("red", 1)
    colours.add("blue", 2)
    with pytest.raises(ConfigError) as info:
        colours.get("pink")
    assert info.value.field == "paint.colour"
    assert str(info.value) == "paint.colour: 'pink' is not one of blue, red"


def test_a_name_registered_twice_is_refused():
    colours: Registry[int] = Registry("colour", field="paint.colour")
    colours.add("red", 1)
    with pytest.raises(ValueError, match="colour 'red' is registered twice"):
        colours.add("red", 2)
    assert colours["red"] == 1
    colours.unregister("red")
    assert colours.names() == ()


def test_a_registry_finds_the_members_its_package_registers(tmp_path, monkeypatch):
    package = tmp_path / "paints"
    package.mkdir()
    (package / "__init__.py").write_text("from memsim.core.registry import Registry\n"
                                         "PAINTS = Registry('paint', field='paint', package=__name__)\n")
    (package / "red.py").write_text("from paints import PAINTS\nPAINTS.add('red', 1)\n")
    (package / "blue.py").write_text("from paints import PAINTS\nPAINTS.register('blue')(2)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from paints import PAINTS  # type: ignore[import-not-found]

    assert "paints.red" not in sys.modules  # nothing is imported until the registry is read
    assert PAINTS.names() == ("blue", "red")
    for name in ("paints", "paints.red", "paints.blue"):
        monkeypatch.delitem(sys.modules, name)


REGISTRIES = {"families": FAMILIES, "memory kinds": KINDS, "strategies": STRATEGIES, "lowerings": LOWERINGS,
              "all-reduce algorithms": ALLREDUCE, "other collectives": COLLECTIVES,
              "topologies": TOPOLOGIES, "importers": IMPORTERS}


@pytest.mark.parametrize("name", REGISTRIES)
def test_every_extension_point_is_a_registry(name):
    assert isinstance(REGISTRIES[name], Registry)
    assert REGISTRIES[name].names()


def test_the_registries_cover_what_the_loader_and_the_graph_accept():
    assert {FAMILIES[f].strategy for f in FAMILIES} == set(STRATEGIES)  # each family names the strategy it runs
    assert {*LOWERINGS, *COLLECTIVE_KINDS} == set(OP_KINDS)
    assert {"allreduce", *COLLECTIVES} == set(COLLECTIVE_KINDS)


def test_memsim_import_has_one_command_per_registered_importer():
    assert tuple(sorted(imports.import_.commands)) == IMPORTERS.names() == ("chakra", "onnx", "torch")
    listed = CliRunner().invoke(cli.main, ["import", "--help"]).output.split("Commands:")[1].splitlines()
    assert tuple(line.split()[0] for line in listed if line.startswith("  ")) == IMPORTERS.names()
    for name, importer in IMPORTERS.items():
        shown = CliRunner().invoke(cli.main, ["import", name, "--help"]).output
        assert all(opt.flag.split("/")[-1] in shown for opt in importer.options if opt.flag)


def test_registering_the_importers_imports_none_of_their_libraries():
    code = ("import sys, memsim, memsim.cli.main; from memsim.workload.importers import IMPORTERS; IMPORTERS.names(); "
            "print(sorted({'onnx', 'torch', 'transformers', 'chakra'} & {m.split('.')[0] for m in sys.modules}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
