"""memsim.mapping.dispatch: what a stack's dispatch adds to a step's kernels."""
from __future__ import annotations

from dataclasses import replace

import pytest

import memsim
from memsim import hardware
from memsim.core.units import PS_PER_S
from memsim.mapping.dispatch import extra_programs
from memsim.stack import load_stack
from memsim.workload.graph import COLLECTIVE_KINDS


def _stack(programs: int):
    stack = load_stack("tt-metal-traced")[0]
    return replace(stack, kernels=replace(stack.kernels, layer_programs=programs))


def test_a_layers_programs_beyond_its_operators_are_charged_to_its_first_operator_not_its_collectives():
    graph = memsim.simulate("wormhole-n150", "llama-3.2-1b", batch=4, context=128, tp=2, sensitivity=0).graph
    layers = {op.layer for op in graph if op.layer >= 0}
    per_layer = sum(1 for op in graph if op.layer == 0)
    extra = extra_programs(graph, _stack(per_layer + 5))
    assert len(extra) == len(layers) and set(extra.values()) == {5}
    order = graph.order()
    for layer in layers:  # each layer's first operator in program order that is not a collective
        first = next(op for op in order if op.layer == layer and op.kind not in COLLECTIVE_KINDS)
        assert first.name in extra
    # a layer that already runs as many programs as the stack declares gains none; 0 declares none
    assert extra_programs(graph, _stack(per_layer)) == {} and extra_programs(graph, _stack(0)) == {}


def test_a_traced_decode_pays_each_extra_program_at_the_chips_op_overhead():
    """tt-metal's traced decode (row 553: about 40 programs a layer): the step grows by the extra
    programs times the chip's per-program dispatch, the trace replaying them on the device."""
    runs = {n: memsim.simulate("wormhole-n150", "llama-3.2-1b", batch=4, context=128, tp=2, sensitivity=0,
                               stack="tt-metal-traced", set={"stack.kernels.layer_programs": str(n)})
            for n in (0, 40)}
    graph = runs[0].graph
    per_layer = sum(1 for op in graph if op.layer == 0)
    layers = len({op.layer for op in graph if op.layer >= 0})
    overhead = hardware.load("wormhole-n150").execution.op_overhead_ps / PS_PER_S
    grown = runs[40].summary.step_time_s - runs[0].summary.step_time_s
    assert grown == pytest.approx((40 - per_layer) * layers * overhead, rel=0.02)
    assert runs[40].summary.stall_s["overhead"] > runs[0].summary.stall_s["overhead"]
