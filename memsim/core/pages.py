"""Pieces of the reference pages generated from the code (``scripts/reference.py``): a module's
description as one paragraph, and a table of declared names and what each means."""
from __future__ import annotations

from collections.abc import Mapping


def lead(doc: str | None) -> str:
    """A module docstring past its first paragraph, as one paragraph of markdown."""
    return (doc or "").split("\n\n", 1)[-1].strip().replace("\n", " ")


def meanings(rows: Mapping[str, str], head: str = "column") -> str:
    """A markdown table of ``rows`` (a name, code-quoted, and what it means) under ``head``."""
    return f"| {head} | meaning |\n|---|---|\n" + "\n".join(f"| `{name}` | {text} |" for name, text in rows.items())
