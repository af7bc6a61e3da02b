"""Shipped configs: a name resolves to `configs/KIND/NAME.SUFFIX`; a path is used as is."""
from __future__ import annotations

import sys
from pathlib import Path

from memsim.core.errors import ConfigError
from memsim.core.files import check_file

# A source checkout (or editable install) keeps configs/ beside the package; a regular install
# puts them under <prefix>/share/memsim/configs (setup.cfg data_files).
_CANDIDATES = (Path(__file__).resolve().parents[2] / "configs", Path(sys.prefix) / "share" / "memsim" / "configs")
CONFIG_ROOT = next((p for p in _CANDIDATES if (p / "hardware").is_dir()), _CANDIDATES[0])


def config_dir(kind: str) -> Path:
    return CONFIG_ROOT / kind


def resolve(name_or_path: str, kind: str, suffixes: tuple[str, ...]) -> Path:
    """Find a shipped config by name, or accept an existing path."""
    path = Path(name_or_path)
    if path.suffix in suffixes or path.exists() or "/" in name_or_path:
        check_file(path)
        return path
    for suffix in suffixes:
        candidate = config_dir(kind) / f"{name_or_path}{suffix}"
        if candidate.is_file():
            return candidate
    shipped = ", ".join(available(kind, suffixes)) or "none"
    raise ConfigError(f"no such preset (shipped: {shipped})", file=name_or_path)


def available(kind: str, suffixes: tuple[str, ...]) -> list[str]:
    root = config_dir(kind)
    return sorted(p.stem for p in root.iterdir() if p.suffix in suffixes) if root.is_dir() else []
