"""A run's two tables (the timeline and the per-operator rows), each built the first time it is read:
a run whose tables nobody reads (an estimate's rerun, explain's, a sweep's point that keeps none)
never builds them, and they are most of what a short run's wall time would be."""
from __future__ import annotations

from collections.abc import Callable

import pandas as pd


class Tables:
    """A run's two tables, each built the first time it is asked for: a run whose tables nobody reads (an
    estimate's rerun, explain's, a sweep's point that keeps none) never builds them."""

    def __init__(self, timeline: Callable[[], pd.DataFrame], ops: Callable[[], pd.DataFrame]) -> None:
        self._make = {"timeline": timeline, "ops": ops}
        self._made: dict[str, pd.DataFrame] = {}

    def get(self, name: str) -> pd.DataFrame:
        if name not in self._made:
            self._made[name] = self._make[name]()
        return self._made[name]
