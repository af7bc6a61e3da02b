"""The README documents every CLI flag, config field and output column."""
from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from memsim import cli, simulate
from memsim.hardware.spec import ChipSpec, ComputeSpec, ExecutionSpec, LinkSpec, MemoryLevel, PowerSpec, SystemSpec
from memsim.report import TIMELINE_COLUMNS

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_every_cli_flag_is_documented():
    for command in cli.main.commands.values():
        for param in command.params:
            for opt in param.opts:
                if opt.startswith("-"):
                    assert f"`{opt}" in README, f"{command.name} {opt}"


def test_every_config_field_is_documented():
    prefixes = {ChipSpec: "", ComputeSpec: "compute.", MemoryLevel: "levels[].", LinkSpec: "links[].",
                ExecutionSpec: "execution.", SystemSpec: "system.", PowerSpec: "power."}
    for cls, prefix in prefixes.items():
        for f in fields(cls):
            if f.metadata["unit"] not in ("section", "list"):
                assert f"| `{prefix}{f.metadata['key']}` |" in README, f"{prefix}{f.metadata['key']}"


def test_every_output_column_is_documented(tiny_chip_path, tiny_model_path):
    """(Summary keys are declared in memsim/report/summary_fields.py and documented from it:
    tests/report/test_summary_fields.py.)"""
    r = simulate(str(tiny_chip_path), str(tiny_model_path), context=8)
    for col in TIMELINE_COLUMNS:
        assert f"`{col}`" in README, col
    for col in r.ops.columns:
        generic = col.replace("hbm_", "<level>_")
        assert f"`{col}`" in README or f"`{generic}`" in README, col


def test_quick_start_has_exactly_two_commands():
    quick = README.split("## Quick start")[1].split("\n## ")[0]
    blocks = [b for b in quick.split("```bash")[1:]]
    assert len(blocks) == 2
    assert "memsim run --hw h100-sxm --model llama-2-7b" in blocks[0]
    assert "pytest" in blocks[1]


def test_quick_start_output_is_what_the_first_command_prints(monkeypatch, capsys):
    """The README's headline run is asserted, not quoted: a physics change that moves it fails here."""
    quick = README.split("## Quick start")[1].split("\n## ")[0]
    printed = quick.split("Here is what the first command prints:")[1].split("```")[1].strip("\n")
    command = quick.split("```bash")[1].split("```")[0].split("&&")[1].split()
    assert command[0] == "memsim"
    args = [a for a in command[2:]]
    out_at = args.index("--out")
    del args[out_at:out_at + 2]  # the summary is what is compared; the files are tested elsewhere
    monkeypatch.setattr("sys.argv", ["memsim", command[1], *args])
    try:
        cli.entry()
    except SystemExit as exc:
        assert exc.code == 0
    assert capsys.readouterr().out.strip("\n") == printed
