"""`memsim plot run`: the energy figure, its checks on summary.json, and the palette that tells
compute, transfers and every stall cause apart."""
from __future__ import annotations

import itertools
import json
import math
import shutil
import sys

import pytest

from memsim import simulate
from memsim.cli import main as cli
from memsim.core.errors import ConfigError
from memsim.report.run_plots import FIXED_COLORS, colours, read_energy

CAUSES = ["hbm", "l2", "sram", "ddr", "gddr", "l1", "l3", "link:pcie", "link:nvlink", "tile_buffer", "dequant",
          "overhead", "dependency", "bubble", "power"]
LABELS = ["compute", "transfer", *CAUSES, "static", "stall:compute", "mystery", "another"]


def _rgb(color: str) -> tuple[float, ...]:
    return tuple(int(color[i:i + 2], 16) / 255 for i in (1, 3, 5))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("plots") / "run"
    simulate("a100-80gb-sxm", "gpt2", phase="decode", batch=1, context=64).write(out)
    return out


def test_colours_tell_compute_transfers_and_every_stall_cause_apart():
    palette = colours(LABELS)
    assert list(palette) == LABELS
    for (a, ca), (b, cb) in itertools.combinations(palette.items(), 2):
        assert math.dist(_rgb(ca), _rgb(cb)) > 0.15, (a, ca, b, cb)
    assert palette["compute"] != palette["transfer"]
    green = [k for k in ("compute", "transfer") if _rgb(palette[k])[1] > max(_rgb(palette[k])[0::2])]
    assert len(green) <= 1  # not both green


def test_colours_are_fixed_and_deterministic():
    assert colours(["power", "compute"]) == {"power": FIXED_COLORS["power"], "compute": FIXED_COLORS["compute"]}
    many = [f"link:x{i}" for i in range(40)]
    assert colours(many) == colours(list(reversed(many)))  # the set decides, not the order
    assert len(set(colours(many).values())) == 40


def test_plot_run_draws_the_energy_figure(run_dir):
    pytest.importorskip("matplotlib", reason="figures need the plot extra")
    from click.testing import CliRunner

    result = CliRunner().invoke(cli.main, ["plot", "run", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert f"wrote {run_dir / 'energy.png'}" in result.output
    png = run_dir / "energy.png"
    assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 5000


def test_read_energy_splits_the_run(run_dir):
    summary = json.loads((run_dir / "summary.json").read_text())
    data = read_energy(run_dir / "summary.json")
    assert next(iter(data["parts"])) == "compute" and list(data["parts"])[-1] == "static"
    assert "hbm" in data["parts"] and "sram" not in data["parts"]  # levels that drew no energy are left out
    assert sum(data["parts"].values()) == pytest.approx(summary["energy_j"]["total"])
    assert data["avg_power_w"] == pytest.approx(summary["avg_power_w"])


def test_an_old_run_without_energy_has_no_energy_figure(run_dir, tmp_path):
    summary = json.loads((run_dir / "summary.json").read_text())
    del summary["energy_j"]
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(summary))
    assert read_energy(path) is None
    assert read_energy(tmp_path / "absent.json") is None


@pytest.mark.parametrize(("change", "field"), [
    (lambda s: s["energy_j"].update(compute="lots"), "energy_j.compute"),
    (lambda s: s["energy_j"]["levels"].update(hbm=[1]), "energy_j.levels.hbm"),
    (lambda s: s["energy_j"]["links"].update(pcie=True), "energy_j.links.pcie"),
    (lambda s: s["energy_j"].pop("static"), "energy_j.static"),
    (lambda s: s["energy_j"].update(levels=3), "energy_j.levels"),
    (lambda s: s.update(energy_j="12 J"), "energy_j"),
    (lambda s: s["energy_j"].update(total=-1.0), "energy_j.total"),
    (lambda s: s.update(avg_power_w="hot"), "avg_power_w"),
])
def test_a_malformed_energy_is_a_config_error(run_dir, tmp_path, change, field):
    summary = json.loads((run_dir / "summary.json").read_text())
    change(summary)
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(summary))
    with pytest.raises(ConfigError) as info:
        read_energy(path)
    assert info.value.file == str(path) and info.value.field == field
    assert str(info.value).startswith(f"{path}: {field}: ")


def test_plot_run_refuses_a_malformed_energy_before_drawing(monkeypatch, capsys, run_dir, tmp_path):
    folder = tmp_path / "bad"
    shutil.copytree(run_dir, folder)
    for png in folder.glob("*.png"):
        png.unlink()
    summary = json.loads((folder / "summary.json").read_text())
    summary["energy_j"]["compute"] = "n/a"
    (folder / "summary.json").write_text(json.dumps(summary))
    monkeypatch.setattr(sys, "argv", ["memsim", "plot", "run", str(folder)])
    with pytest.raises(SystemExit) as info:
        cli.entry()
    err = capsys.readouterr().err
    assert info.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{folder / 'summary.json'}: energy_j.compute: 'n/a' is not a number" in err
    assert not list(folder.glob("*.png"))
