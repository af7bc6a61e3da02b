"""Writing a run's outputs (all files appear together or none do), and reading its tables back."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from memsim.errors import ConfigError
from memsim.files import check_file


def write_outputs(out: Path, summary: dict[str, Any], ops: pd.DataFrame, timeline: pd.DataFrame,
                  hardware: dict[str, Any], extra: dict[str, str] | None = None) -> list[Path]:
    """Write into a temporary folder beside ``out``, then move the files into place."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        (tmp / "summary.json").write_text(json.dumps(summary, indent=2, default=_plain) + "\n")
        ops.to_csv(tmp / "ops.csv", index=False)
        timeline.to_csv(tmp / "timeline.csv", index=False)
        (tmp / "hardware.yaml").write_text(yaml.safe_dump(hardware, sort_keys=False))
        for name, text in (extra or {}).items():
            (tmp / name).write_text(text)
        out.mkdir(exist_ok=True)
        names = sorted(p.name for p in tmp.iterdir())
        for name in names:
            os.replace(tmp / name, out / name)
        return [out / n for n in names]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"cannot serialise {type(value).__name__}")


def read_table(path: Path, what: str, columns: tuple[str, ...], numeric: tuple[str, ...] = ()) -> pd.DataFrame:
    """A CSV that memsim wrote (``what`` says which), read back for a figure: a file that is not a
    CSV, lacks a column, holds no rows or holds text in a ``numeric`` column is an error naming it."""
    file = str(path)
    check_file(Path(path))
    try:
        df = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"not a CSV file ({reason[:80]})", file=file) from None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ConfigError(f"not a memsim {what}: no column {missing[0]!r}", file=file)
    if df.empty:
        raise ConfigError(f"the {what} holds no rows", file=file)
    return as_numbers(df, numeric, file)


def as_numbers(df: pd.DataFrame, columns: tuple[str, ...] | list[str], file: str) -> pd.DataFrame:
    """``df`` with ``columns`` as numbers (empty cells stay missing); text in one is an error."""
    for col in columns:
        values = pd.to_numeric(df[col], errors="coerce")
        bad = values.isna() & df[col].notna()
        if bad.any():
            row = int(bad.to_numpy().nonzero()[0][0])
            raise ConfigError(f"row {row + 2}: {str(df[col].iloc[row])[:40]!r} is not a number", file=file, field=col)
        df[col] = values
    return df
