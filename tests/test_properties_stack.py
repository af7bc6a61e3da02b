"""The software's physics, as hypothesis properties: a stack that costs more never gives a faster step,
``ideal`` (the same kernels, nothing added) is never slower than a stack, and a longer message never
completes sooner through a collective implementation."""
from __future__ import annotations

import dataclasses
from dataclasses import replace

from hypothesis import example, given, settings
from hypothesis import strategies as st

from memsim import engine, hardware, mapping
from memsim.mapping import fabric, system
from memsim.stack import IDEAL, load_stack
from memsim.stack.spec import DispatchSpec, KernelSpec, StackSpec, StepHostSpec
from tests.test_properties import SETTINGS, chips, graphs

HOST_FIELDS = {"dispatch": ("launch_ps", "op_ps", "graph_ps", "node_ps"),
               "step": ("fixed_ps", "per_sequence_ps", "per_token_ps", "output_ps", "output_fixed_ps")}


@st.composite
def stacks(draw) -> StackSpec:
    """A stack of random host costs: launches eager or captured, a host that runs ahead or waits, step work
    in series or overlapped."""
    eager = draw(st.booleans())
    us = st.integers(0, 20_000_000)
    return StackSpec(
        name="random",
        kernels=KernelSpec(launch="eager" if eager else "graph", prefill_launch="eager" if eager else "graph"),
        dispatch=DispatchSpec(host=draw(st.sampled_from(["ahead", "serial"])), launch_ps=draw(us), op_ps=draw(us),
                              graph_ps=draw(us), node_ps=draw(st.integers(0, 2_000_000))),
        step=StepHostSpec(fixed_ps=draw(us), per_sequence_ps=draw(us), per_token_ps=draw(st.integers(0, 100_000)),
                          output_ps=draw(us), output_fixed_ps=draw(us),
                          overlap=draw(st.sampled_from(["none", "output", "full"]))))


def _step(graph, chip, stack) -> int:
    return engine.run(mapping.make_plan(graph, chip, stack=stack)).end_ps


def _as_step(graph, batch: int):
    """The random graph as a model's decode step of ``batch`` sequences, so the host's step work applies."""
    return dataclasses.replace(graph, meta=replace(graph.meta, phase="decode", batch=batch, tokens=1))


@SETTINGS
@given(graphs(), chips(), stacks(), st.sampled_from([(s, f) for s, fs in HOST_FIELDS.items() for f in fs]),
       st.integers(1, 50_000_000), st.integers(1, 64))
def test_a_stack_that_costs_the_host_more_never_gives_a_faster_step(graph, chip, stack, field, more, batch):
    graph = _as_step(graph, batch)
    section, name = field
    costlier = replace(stack, **{section: replace(getattr(stack, section),
                                                  **{name: getattr(getattr(stack, section), name) + more})})
    assert _step(graph, chip, costlier) >= _step(graph, chip, stack)


@SETTINGS
@given(graphs(), chips(), stacks(), st.integers(0, 8), st.integers(1, 8), st.integers(1, 64))
def test_a_stack_that_runs_more_programs_a_layer_never_gives_a_faster_step(graph, chip, stack, fewer, more, batch):
    """Each of a layer's programs beyond its operators pays a kernel's dispatch (``kernels.layer_programs``),
    in a model's step (the random graph's every operator is a layer of its own)."""
    graph = _as_step(graph, batch)

    def programs(n: int) -> StackSpec:
        return replace(stack, kernels=replace(stack.kernels, layer_programs=n))

    assert _step(graph, chip, programs(fewer + more)) >= _step(graph, chip, programs(fewer))


@SETTINGS
@given(graphs(), chips(), stacks(), st.integers(1, 64))
def test_ideal_with_the_same_kernels_is_never_slower_than_a_stack(graph, chip, stack, batch):
    graph = _as_step(graph, batch)
    ideal = replace(IDEAL, kernels=stack.kernels)
    assert _step(graph, chip, ideal) <= _step(graph, chip, stack)
    assert _step(graph, chip, IDEAL) == _step(graph, chip, replace(IDEAL, name="same"))


LIBRARIES = ("nccl", "rccl", "vllm-custom-ar", "trtllm-custom-ar", "mscclpp", "tt-ccl")
PRESETS = ("h100-sxm", "a100-80gb-sxm", "mi300x", "b200", "wormhole-n150")


@settings(SETTINGS, max_examples=40)
@given(st.sampled_from(LIBRARIES), st.sampled_from(PRESETS), st.sampled_from([2, 4, 8]),
       st.integers(1, 16 << 20), st.integers(1, 16 << 20))
# once faster by a picosecond or two: a both-ways ring's channels counted on half its pieces, and a
# channel rate rounded down where a message's time is a whole number of picoseconds
@example("tt-ccl", "mi300x", 4, 877217, 4)
@example("mscclpp", "b200", 2, 115101, 2995)
@example("nccl", "h100-sxm", 4, 131020, 12)
def test_a_longer_message_never_completes_sooner_through_an_implementation(library, preset, ranks, nbytes, more):
    """Each implementation alone, and a library's tier as its tuner picks the cheapest in it (NCCL's
    protocols): at a tier's size limit a library may hand a message to a slower kernel, as vLLM's custom
    all-reduce does past 8 MiB, which is the library's rule, not a cost that falls with the bytes."""
    chip, stack = hardware.load(preset), load_stack(library)[0]
    built = fabric.fabric(chip, ranks)
    members = list(range(ranks))
    for kind in ("allreduce", "allgather", "reduce_scatter", "alltoall"):
        impls = [c for c in stack.collectives if kind in c.kinds and (not c.max_ranks or ranks <= c.max_ranks)]
        for impl in impls:
            if impl.max_bytes and nbytes + more > impl.max_bytes:
                continue
            short, long = (system.implementation_seconds(chip, impl, kind, n, members, built)
                           for n in (nbytes, nbytes + more))
            assert long >= short, (impl.name, kind, nbytes, more)
