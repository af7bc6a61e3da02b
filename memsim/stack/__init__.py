"""Runtime stacks: what the software that drives a chip adds to its work, declared as data.

``StackSpec`` (``spec.py``) and its loader (``loader.py``): kernels, dispatch, the collective
library, the host's work per step and the serving loop's policies of a stack, read from
``configs/stacks/*.yaml``; ``ideal`` adds nothing.
"""
from __future__ import annotations

from memsim.stack.loader import AUTO, PREFIX, default_for, dump_stack, load_stack, presets, split_sets
from memsim.stack.spec import IDEAL, CollectiveImpl, StackSpec

__all__ = ["AUTO", "IDEAL", "PREFIX", "CollectiveImpl", "StackSpec", "default_for", "dump_stack", "load_stack",
           "presets", "split_sets"]
