"""Engine: the only package that imports SimPy. Executes a Plan and records every interval."""
from __future__ import annotations

from memsim.engine.recorder import Interval
from memsim.engine.scheduler import EngineResult, run

__all__ = ["EngineResult", "Interval", "run"]
