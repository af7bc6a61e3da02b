"""A chip given from Python as a ``ChipSpec`` or a dict, as the file every later stage reads.

A run, its sensitivity reruns and a sweep's workers read the chip from a file and key their results
by its contents, so a chip built in Python is written once as YAML (``dump_chip``, which loads back
to the same spec) under the temporary folder, named by its contents: the same chip is one file.
A dict is a hardware YAML's mapping (``base:`` and dotted keys included); a relative ``base:`` path
is taken from the current folder, and without a ``name`` it is called as its base (a file would be
called after itself).
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from memsim.core.atomic import atomic_write_text
from memsim.core.errors import ConfigError
from memsim.core.units import shown
from memsim.hardware.dumps import dump_chip
from memsim.hardware.estimates import yaml_text
from memsim.hardware.spec import ChipSpec


def chip_path(hw: Any, field: str = "hw") -> str:
    """``hw`` as what ``RunSpec.hw`` takes: a preset name or path as given, a ``ChipSpec`` or dict as a file."""
    if isinstance(hw, (str, os.PathLike)):
        return str(hw)
    if isinstance(hw, ChipSpec):
        raw: Any = dump_chip(hw)
    elif isinstance(hw, dict):
        raw = dict(hw)
        base = raw.get("base")
        if isinstance(base, str) and ("/" in base or base.endswith((".yaml", ".yml"))):
            raw["base"] = str(Path(base).resolve())
        if isinstance(base, str) and "name" not in raw:  # not the temporary file's: called as its base
            raw["name"] = Path(base).stem
    else:
        raise ConfigError(f"expected a preset name, a path, a ChipSpec or a dict, got {shown(hw)}", field=field)
    try:
        text = yaml_text(raw)
    except yaml.YAMLError as exc:
        raise ConfigError(f"cannot be written as YAML: {exc}", field=field) from None
    name = str(raw.get("name") or "chip")
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in name)[:40] or "chip"
    folder = Path(tempfile.gettempdir()) / f"memsim-chips-{os.getuid() if hasattr(os, 'getuid') else 0}"
    folder.mkdir(exist_ok=True)
    path = folder / f"{safe}-{hashlib.sha256(text.encode()).hexdigest()[:16]}.yaml"
    if not path.exists():
        atomic_write_text(path, text)
    return str(path)
