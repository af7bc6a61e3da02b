"""Python's cycle collector during a simulation: its full collections deferred.

A run allocates hundreds of thousands of objects that live to its end (tasks, steps, records), and
CPython (3.11) starts a full collection, which walks every object alive, whenever a quarter as many
objects as the last one found have survived since: over a wafer's prefill that is most of the run's
wall time spent walking what is still in use (a third of it, measured in ``scripts/bench.py``'s
wafer target: 3.1 s against 1.9 s). Inside ``deferred`` the young generations are collected as
usual (what a run leaves behind in cycles is mostly young), and a full collection waits for the
oldest generation's threshold to be passed ``FULL_EVERY`` times instead of 10; the thresholds are
put back on leaving, whatever happened inside.
"""
from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

FULL_EVERY = 1000  # collections of the middle generation between two full ones (CPython's default: 10)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Inside, full collections are ``FULL_EVERY`` times rarer (never more frequent than outside)."""
    young, middle, full = gc.get_threshold()
    gc.set_threshold(young, middle, max(full, FULL_EVERY))
    try:
        yield
    finally:
        gc.set_threshold(young, middle, full)
