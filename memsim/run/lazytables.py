"""A run's two tables (the timeline and the per-operator rows), each built the first time it is read:
a run whose tables nobody reads (an estimate's rerun, explain's, a sweep's point that keeps none)
never builds them, and they are most of what a short run's wall time would be. They are plain rows
(``memsim.report.rows``): a run writes them without pandas, and a DataFrame is made when one is asked for."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from memsim.report.rows import Rows

if TYPE_CHECKING:
    import pandas as pd


class Tables:
    """A run's two tables, each built the first time it is asked for: a run whose tables nobody reads (an
    estimate's rerun, explain's, a sweep's point that keeps none) never builds them."""

    def __init__(self, timeline: Callable[[], Rows], ops: Callable[[], Rows]) -> None:
        self._make = {"timeline": timeline, "ops": ops}
        self._made: dict[str, Rows] = {}
        self._frames: dict[str, pd.DataFrame] = {}

    def rows(self, name: str) -> Rows:
        """The table ``name`` (``timeline`` or ``ops``) as rows."""
        if name not in self._made:
            self._made[name] = self._make[name]()
        return self._made[name]

    def get(self, name: str) -> pd.DataFrame:
        """The table ``name`` as a DataFrame."""
        if name not in self._frames:
            self._frames[name] = self.rows(name).frame()
        return self._frames[name]
