"""docs/hardware-fields.md is generated from the field metadata, and holds every field."""
from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from memsim.hardware.reference import reference
from memsim.hardware.spec import ChipSpec, ComputeSpec, ExecutionSpec, LinkSpec, MemoryLevel, PowerSpec, SystemSpec

PAGE = Path(__file__).resolve().parents[2] / "docs" / "hardware-fields.md"


def test_the_page_is_current():
    assert PAGE.read_text() == reference(), "python scripts/reference.py --write"


def test_every_field_has_its_row_with_its_default():
    text = reference()
    prefixes = {ChipSpec: "", ComputeSpec: "compute.", MemoryLevel: "levels[].", LinkSpec: "links[].",
                ExecutionSpec: "execution.", SystemSpec: "system.", PowerSpec: "power."}
    for cls, prefix in prefixes.items():
        for f in fields(cls):
            if f.metadata["unit"] not in ("section", "list"):
                assert f"| `{prefix}{f.metadata['key']}` |" in text, f"{prefix}{f.metadata['key']}"
    assert "| `levels[].capacity` | size | required |" in text
    assert "| `levels[].channels` | count | `1` |" in text
    assert "| `levels[].holds` | tensor classes | family's |" in text
