"""The README documents every CLI flag, config field and output column."""
from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from memsim import cli, simulate
from memsim.hardware.spec import ChipSpec, ComputeSpec, ExecutionSpec, LinkSpec, MemoryLevel, PowerSpec, SystemSpec
from memsim.report import TIMELINE_COLUMNS
from memsim.report.summary import COMBINE

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


def test_every_output_column_and_summary_key_is_documented(tiny_chip_path, tiny_model_path):
    r = simulate(str(tiny_chip_path), str(tiny_model_path), context=8)
    for col in TIMELINE_COLUMNS:
        assert f"`{col}`" in README, col
    for col in r.ops.columns:
        generic = col.replace("hbm_", "<level>_")
        assert f"`{col}`" in README or f"`{generic}`" in README, col
    for key in r.summary:
        assert f"`{key}`" in README, key


def test_the_summary_table_gives_each_key_its_combine_rule():
    table = README.split("### `summary.json`")[1].split("\n### ")[0]
    documented = {}
    for line in table.splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            for key in cells[0].split(", "):
                documented[key.strip("`")] = cells[-1]
    assert documented == {k: v for k, v in COMBINE.items() if k in documented}
    generation = README.split("### Generation")[1].split("\n## ")[0]
    for key, _rule in COMBINE.items():
        assert key in documented or f"`{key}`" in generation, key


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
