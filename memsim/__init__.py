"""memsim: a trace-driven, discrete-event memory-hierarchy simulator for AI accelerators."""
from __future__ import annotations

__version__ = "0.1.0"

from memsim.api import Result, simulate, simulate_graph  # noqa: E402
from memsim.runspec import RunSpec  # noqa: E402
from memsim.errors import CapacityError, ConfigError, MemsimError, TraceError  # noqa: E402

__all__ = ["CapacityError", "ConfigError", "MemsimError", "Result", "RunSpec", "TraceError", "simulate", "simulate_graph", "__version__"]
