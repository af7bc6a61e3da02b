"""Mapping: pure functions from (OpGraph, ChipSpec) to a Plan of pipelined tile steps."""
from __future__ import annotations

from memsim.mapping.layout import Grid
from memsim.mapping.partition import lookup_shards
from memsim.mapping.plan import OpTask, Plan, Step
from memsim.mapping.strategy import make_plan

__all__ = ["Grid", "OpTask", "Plan", "Step", "lookup_shards", "make_plan"]
