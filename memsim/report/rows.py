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
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

_INT, _FLOAT, _BOOL, _TEXT = "int", "float", "bool", "text"
CHUNK = 50_000  # rows turned into text at a time


@dataclass(frozen=True)
class Rows:
    """A table: its columns' names and its rows, each a tuple in the columns' order."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    def frame(self) -> pd.DataFrame:
        """The table as a DataFrame (pandas is loaded here, and only here)."""
        import pandas as pd

        if not self.columns:
            return pd.DataFrame()
        return pd.DataFrame.from_records(list(self.rows), columns=list(self.columns))

    def csv(self) -> str:
        """The table as CSV text, as ``self.frame().to_csv(index=False)`` writes it."""
        out = io.StringIO()
        self.write_csv(out)
        return out.getvalue()

    def write_csv(self, out: TextIO) -> None:
        """Write ``csv()`` to ``out``, ``CHUNK`` rows at a time: a million-row timeline's text is never
        held whole, and neither are its cells."""
        if not self.columns:
            out.write("\n")
            return
        cells = _formatters(self.rows, len(self.columns))
        if len(self.columns) == 1:  # a lone empty cell is written "" (as the csv module does), so it reads back
            csv.writer(out, lineterminator="\n").writerows([self.columns, *((c,) for c in cells[0](
                tuple(row[0] for row in self.rows)))])
            return
        out.write(",".join(_quoted(list(self.columns))) + "\n")
        for start in range(0, len(self.rows), CHUNK):
            columns = zip(*self.rows[start:start + CHUNK])
            out.write("\n".join(map(",".join, zip(*(_quoted(cell(values)) for cell, values in zip(cells, columns)))))
                      + "\n")


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


def _formatters(rows: tuple[tuple[Any, ...], ...], width: int) -> list[Callable[[tuple[Any, ...]], list[str]]]:
    """For each column, what turns a run of its values into cells, from the types of all of them
    (worked out a chunk at a time): pandas types a column by every value in it."""
    types: list[set[type]] = [set() for _ in range(width)]
    missing = [False] * width  # a float NaN among the column's values (pandas writes it as an empty cell)
    for start in range(0, len(rows), CHUNK):
        for i, values in enumerate(zip(*rows[start:start + CHUNK])):
            seen = set(map(type, values))
            types[i] |= seen
            if not missing[i] and any(issubclass(t, float) for t in seen):
                missing[i] = any(map(math.isnan, values)) if seen == {float} else \
                    any(isinstance(v, float) and math.isnan(v) for v in values)
    return [_formatter(kinds, nan) for kinds, nan in zip(types, missing)]


def _formatter(types: set[type], missing: bool) -> Callable[[tuple[Any, ...]], list[str]]:
    """What turns a column's values into cells, given the types of all its values and whether a
    float among them is NaN: the usual columns, all of one plain type, without a call a cell."""
    if types == {int}:
        return lambda values: list(map(str, values))
    if types == {str}:
        return list
    if types == {float} and not missing:  # written as Python writes them
        return lambda values: list(map(repr, values))
    cell = _CELL[_kind(types, missing)]
    return lambda values: [cell(v) for v in values]


_SPECIAL = re.compile(r'[,"\n]')


def _quoted(cells: list[str]) -> list[str]:
    """``cells`` quoted as the csv module quotes a field (minimal quoting): those that hold a comma,
    a quote or a newline (the line terminator; a lone carriage return is not quoted), in quotes, quotes
    doubled."""
    if not _SPECIAL.search("".join(cells)):  # the usual column: one search over all of it
        return cells
    return [f'"{c.replace(chr(34), chr(34) * 2)}"' if _SPECIAL.search(c) else c for c in cells]


def _kind(types: set[type], missing: bool) -> str:
    """How pandas types a column whose values are of ``types`` (``missing``: a float among them is NaN)."""
    seen: set[str | None] = {None} if missing else set()
    for t in types:
        if t is type(None):
            seen.add(None)
        elif issubclass(t, (bool, np.bool_)):
            seen.add(_BOOL)
        elif issubclass(t, (int, np.integer)):
            seen.add(_INT)
        elif issubclass(t, (float, np.floating)):
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
