"""Writing a run's outputs (the folder is replaced as a whole, or left as it was), and reading its
tables back.

The files are written into a temporary folder beside ``out`` and swapped in with renames, so a
re-run leaves no file of the previous run behind (an old ``trace.perfetto.json``), and a run
killed while writing leaves the old folder intact. Temporary folders carry the writer's pid;
a later run removes those whose writer is gone.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from memsim.atomic import umask
from memsim.errors import ConfigError
from memsim.files import check_file

MARKER = "summary.json"  # a folder holding it is a memsim run the next run may replace


def write_outputs(out: Path, summary: dict[str, Any], ops: pd.DataFrame, timeline: pd.DataFrame,
                  hardware: dict[str, Any], extra: dict[str, str] | None = None) -> list[Path]:
    """Write every output into a temporary folder beside ``out``, then swap it in for ``out``."""
    given, out = Path(out), Path(out).absolute()
    _check_target(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(out)
    tmp = _temp_folder(out, "tmp")
    old = None
    try:
        (tmp / MARKER).write_text(json.dumps(summary, indent=2, default=_plain) + "\n")
        ops.to_csv(tmp / "ops.csv", index=False)
        timeline.to_csv(tmp / "timeline.csv", index=False)
        (tmp / "hardware.yaml").write_text(yaml.safe_dump(hardware, sort_keys=False))
        for name, text in (extra or {}).items():
            (tmp / name).write_text(text)
        names = sorted(p.name for p in tmp.iterdir())
        os.chmod(tmp, 0o777 & ~umask())
        if out.exists():
            old = _temp_folder(out, "old")
            os.replace(out, old)
        os.replace(tmp, out)
        return [given / n for n in names]
    finally:
        for leftover in (tmp, old):
            if leftover is not None and leftover.exists():
                shutil.rmtree(leftover, ignore_errors=True)


def check_target(out: Path) -> None:
    """Refuse an ``--out`` that is a file, a folder of other things, or cannot be written, before a
    run spends its time."""
    out = Path(out).absolute()
    _check_target(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        _temp_folder(out, "tmp").rmdir()
    except OSError as exc:
        raise ConfigError(f"cannot write here: {exc.strerror or exc}", file=str(out), field="--out") from None


def _check_target(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise ConfigError("exists and is not a folder", file=str(out), field="--out")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise ConfigError("is not empty and holds no memsim run: give a new or empty folder", file=str(out),
                          field="--out")
    if out == Path.cwd() or out in Path.cwd().parents:
        raise ConfigError("is the working folder or holds it: give a folder below it", file=str(out), field="--out")


def _temp_folder(out: Path, kind: str) -> Path:
    """A new folder beside ``out`` named for its kind (``tmp``, ``old``) and this process's pid."""
    return Path(tempfile.mkdtemp(prefix=f".{out.name}.{kind}-{os.getpid()}-", dir=out.parent))


def remove_stale(out: Path) -> None:
    """Remove temporary folders beside ``out`` left by writers that died mid-write."""
    if not out.parent.is_dir():
        return
    for entry in out.parent.glob(f".{out.name}.*-*-*"):
        kind, _, rest = entry.name[len(out.name) + 2:].partition("-")
        pid = rest.partition("-")[0]
        if kind in ("tmp", "old") and pid.isdigit() and not _alive(int(pid)) and entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        pass
    return True


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
