"""Shipped configs: a name resolves to `configs/KIND/NAME.SUFFIX`; a path is used as is."""
from __future__ import annotations

from pathlib import Path

from memsim.errors import ConfigError

CONFIG_ROOT = Path(__file__).resolve().parents[1] / "configs"


def config_dir(kind: str) -> Path:
    return CONFIG_ROOT / kind


def resolve(name_or_path: str, kind: str, suffixes: tuple[str, ...]) -> Path:
    """Find a shipped config by name, or accept an existing path."""
    path = Path(name_or_path)
    if path.suffix in suffixes or path.exists() or "/" in name_or_path:
        if not path.is_file():
            raise ConfigError("file not found", file=str(path))
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
