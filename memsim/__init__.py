"""memsim: a trace-driven, discrete-event memory-hierarchy simulator for AI accelerators.

The public names load on first use (PEP 562), so ``import memsim`` is quick and the console
script can catch a Ctrl-C that lands while the libraries load.
"""
from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_HOME = {"Result": "memsim.run.api", "simulate": "memsim.run.api", "simulate_graph": "memsim.run.api",
         "explain": "memsim.sweep.explaining",
         "sweep_frame": "memsim.sweep.runner", "serve": "memsim.serving.serve",
         "RunSpec": "memsim.run.runspec", "ServeSpec": "memsim.serving.spec", "CapacityError": "memsim.core.errors",
         "ConfigError": "memsim.core.errors", "MemsimError": "memsim.core.errors", "TraceError": "memsim.core.errors"}

ALIASES = {"serve": "simulate_serving"}  # a public name that is not its module's

__all__ = ["CapacityError", "ConfigError", "MemsimError", "Result", "RunSpec", "ServeSpec", "TraceError", "__version__",
           "explain", "serve", "simulate", "simulate_graph", "sweep_frame"]


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'memsim' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name]), ALIASES.get(name, name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})
