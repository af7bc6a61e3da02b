"""The README is the front door: at most 200 lines, two commands in its quick start, and the one
README text a test asserts is what the first of them prints. Flags, fields and columns are
documented in the generated reference pages (tests/test_reference.py)."""
from __future__ import annotations

from pathlib import Path

from memsim.cli import main as cli

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
QUICK = README.split("## Quick start")[1].split("\n## ")[0]


def test_the_readme_is_at_most_200_lines():
    assert len(README.splitlines()) <= 200


def test_quick_start_has_exactly_two_commands():
    """Two command blocks, each one line (their text is the README's own; what the first prints is asserted below)."""
    blocks = [b.split("```")[0].strip() for b in QUICK.split("```bash")[1:]]
    assert len(blocks) == 2 and all("\n" not in b for b in blocks)


def test_quick_start_output_is_what_the_first_command_prints(monkeypatch, capsys):
    """The README's headline run is asserted, not quoted: a physics change that moves it fails here."""
    printed = QUICK.split("Here is what the first\ncommand prints:")[1].split("```")[1].strip("\n")
    command = QUICK.split("```bash")[1].split("```")[0].split("&&")[1].split()
    assert command[0] == "memsim"
    args = list(command[2:])
    out_at = args.index("--out")
    del args[out_at:out_at + 2]  # the summary is what is compared; the files are tested elsewhere
    monkeypatch.setattr("sys.argv", ["memsim", command[1], *args])
    try:
        cli.entry()
    except SystemExit as exc:
        assert exc.code == 0
    assert capsys.readouterr().out.strip("\n") == printed


def test_every_link_of_the_readme_names_a_file_that_exists():
    import re

    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target
