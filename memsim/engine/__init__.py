"""Engine: the only package that imports SimPy. Executes a Plan and records every interval.

A plain simulation (``scheduler``, ``pipeline``, ``resources``, ``system``) on SimPy, reached past
its public API only in ``simpy_fast``; the exact shortcuts, fast-forward and replay, are
installed by ``shortcuts`` only when ``run`` is asked for them.
"""
from __future__ import annotations

from memsim.engine.records import Cause, CauseKind, Interval
from memsim.engine.scheduler import EngineResult, run
from memsim.hardware.resource import ResourceId

__all__ = ["Cause", "CauseKind", "EngineResult", "Interval", "ResourceId", "run"]
