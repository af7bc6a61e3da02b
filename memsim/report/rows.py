"""A run's table as plain rows: its columns' names and a tuple per row. A run writes its CSV files
from these without pandas (a ``memsim run`` never loads it), byte for byte as pandas writes the same
table (``DataFrame.to_csv(index=False)``), and a DataFrame is made from them when one is asked for.

Each column is written as pandas would type it from its values: whole numbers as integers; whole and
fractional numbers, or numbers beside an empty cell, as floats (``3.0``, an empty cell for a missing
one); flags alone as ``True``/``False``; anything else as its text, an empty cell for a missing one.
A float is written as Python writes it (``repr``: the shortest text that reads back the same number).
"""
from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

_INT, _FLOAT, _BOOL, _TEXT = "int", "float", "bool", "text"


@dataclass(frozen=True)
class Rows:
    """A table: its columns' names and its rows, each a tuple in the columns' order."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    @classmethod
    def of_dicts(cls, rows: Sequence[dict[str, Any]]) -> Rows:
        """Rows given as mappings (every row with the same keys, the first row's order)."""
        columns = tuple(rows[0]) if rows else ()
        return cls(columns, tuple(tuple(row[c] for c in columns) for row in rows))

    def frame(self) -> pd.DataFrame:
        """The table as a DataFrame (pandas is loaded here, and only here)."""
        import pandas as pd

        if not self.columns:
            return pd.DataFrame()
        return pd.DataFrame.from_records(list(self.rows), columns=list(self.columns))

    def csv(self) -> str:
        """The table as CSV text, as ``self.frame().to_csv(index=False)`` writes it."""
        if not self.columns:
            return "\n"
        columns = list(zip(*self.rows)) if self.rows else [() for _ in self.columns]
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(self.columns)
        writer.writerows(zip(*(_cells(values) for values in columns)))
        return out.getvalue()


def joined(parts: Iterable[tuple[Rows, float, str]]) -> Rows:
    """Tables of steps run one after another: each row's ``start_s`` and ``end_s`` shifted by its
    step's start and, where a prefix is given, its ``op`` named with it (columns: the first table's)."""
    parts = list(parts)
    columns = parts[0][0].columns
    start, end, op = (columns.index(c) for c in ("start_s", "end_s", "op"))
    rows: list[tuple[Any, ...]] = []
    for table, shift, prefix in parts:
        for row in table.rows:
            moved = list(row)
            moved[start], moved[end] = row[start] + shift, row[end] + shift
            if prefix and isinstance(row[op], str) and row[op]:
                moved[op] = prefix + row[op]
            rows.append(tuple(moved))
    return Rows(columns, tuple(rows))


def _cells(values: tuple[Any, ...]) -> list[str]:
    """A column's cells as pandas writes them, from the column's values (typed as pandas would)."""
    kinds = set(map(type, values))  # the usual columns, all of one plain type, without a call a cell
    if kinds == {int}:
        return list(map(str, values))
    if kinds == {str}:
        return list(values)
    if kinds == {float} and all(v == v for v in values):  # none missing: written as Python writes them
        return list(map(repr, values))
    cell = _CELL[_kind(values)]
    return [cell(v) for v in values]


def _kind(values: tuple[Any, ...]) -> str:
    """How pandas types a column of these values."""
    seen: set[str | None] = set()
    for v in values:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            seen.add(None)
        elif isinstance(v, (bool, np.bool_)):
            seen.add(_BOOL)
        elif isinstance(v, (int, np.integer)):
            seen.add(_INT)
        elif isinstance(v, (float, np.floating)):
            seen.add(_FLOAT)
        else:
            return _TEXT
    if seen == {_BOOL}:
        return _BOOL
    if _BOOL in seen or seen == {None}:
        return _TEXT
    return _INT if seen == {_INT} else _FLOAT


def _float(v: Any) -> str:
    return "" if v is None or v != v else repr(float(v))


def _text(v: Any) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return ""
    return str(float(v)) if isinstance(v, np.floating) else str(v)


_CELL: dict[str, Callable[[Any], str]] = {_INT: lambda v: str(int(v)), _FLOAT: _float, _BOOL: str, _TEXT: _text}
