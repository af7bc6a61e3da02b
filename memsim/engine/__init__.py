"""Engine: the only package that imports SimPy. Executes a Plan and records every interval."""
from __future__ import annotations

from memsim.engine.records import Cause, CauseKind, Interval
from memsim.engine.scheduler import EngineResult, run
from memsim.hardware.resource import ResourceId

__all__ = ["Cause", "CauseKind", "EngineResult", "Interval", "ResourceId", "run"]
