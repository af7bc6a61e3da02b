"""Engine: the only package that imports SimPy. Executes a Plan and records every interval."""
from __future__ import annotations

from memsim.engine.records import Cause, Interval, ResourceId
from memsim.engine.scheduler import EngineResult, run

__all__ = ["Cause", "EngineResult", "Interval", "ResourceId", "run"]
