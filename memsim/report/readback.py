"""Reading a table memsim wrote back (a run's timeline and ops, a serving run's requests and steps, a
sweep's or explain's table) for a figure or a page: a file that is not such a table is one error
naming it, never a traceback from deep in a plot."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from memsim.core.errors import ConfigError
from memsim.core.files import check_file


def read_table(path: Path, what: str, columns: tuple[str, ...], numeric: tuple[str, ...] = (),
               optional: tuple[str, ...] | None = None) -> pd.DataFrame:
    """A CSV that memsim wrote (``what`` says which), read back for a figure: a file that is not a
    CSV, lacks a column, holds no rows or holds text in a ``numeric`` column is an error naming it.
    With ``optional`` given, only ``columns`` and those are read (a figure's memory follows what it draws)."""
    file = str(path)
    check_file(Path(path))
    wanted = None if optional is None else {*columns, *optional}
    try:
        df = pd.read_csv(path, usecols=None if wanted is None else (lambda c: c in wanted))
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
