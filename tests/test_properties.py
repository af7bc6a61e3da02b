"""Physics as properties over random small DAGs and random hardware (hypothesis).

- a run is never faster than its roofline bound and never moves fewer bytes than it must;
- in single-stream mode, doubling every bandwidth never makes a run slower;
- the same inputs give identical outputs, and fast-forward/replay change nothing.

The random chips run in single-stream mode (``streams: [compute]``): one operator at a time.
The concurrent mode's properties are in ``test_properties_concurrent.py``.
"""
from __future__ import annotations

import os
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from memsim import engine, mapping
from memsim.core.units import PS_PER_S
from memsim.hardware.spec import ChipSpec, ComputeSpec, ExecutionSpec, MemoryLevel
from memsim.stack.spec import DispatchSpec, KernelSpec, StackSpec
from memsim.workload.dtypes import nbytes
from memsim.workload.graph import Op, OpGraph, Read, Tensor
from memsim.workload.meta import StepMeta

SETTINGS = settings(max_examples=int(os.environ.get("MEMSIM_EXAMPLES", "60")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def chips(draw) -> ChipSpec:
    units = draw(st.integers(1, 64))
    peak = draw(st.integers(10**11, 10**15))
    return ChipSpec(
        name="random",
        family="gpu",
        compute=ComputeSpec(units=units, peak_flops_per_s=(("bf16", peak),),
                            vector_flops_per_s=draw(st.integers(10**10, 10**14)),
                            special_flops_per_s=draw(st.one_of(st.just(0), st.integers(10**9, 10**13))),
                            efficiency=draw(st.floats(0.3, 1.0))),
        levels=(
            MemoryLevel("sram", "sram", draw(st.integers(16 * 1024, 8 * 2**20)), draw(st.integers(10**11, 10**14)),
                        draw(st.integers(0, 50_000)), draw(st.integers(1, 8)), "chip"),
            MemoryLevel("hbm", "hbm", 2**34, draw(st.integers(10**9, 10**13)), draw(st.integers(0, 2_000_000)),
                        draw(st.integers(1, 8)), "chip", draw(st.floats(0.3, 1.0))),
        ),
        execution=ExecutionSpec(op_overhead_ps=draw(st.integers(0, 5_000_000)), streams=("compute",),
                                prefetch_depth=draw(st.integers(1, 3))),
    )


@st.composite
def stacks(draw) -> StackSpec:
    """A runtime stack: its attention kernel, how its host launches kernels and what it costs."""
    eager = draw(st.booleans())
    return StackSpec(name="random", kernels=KernelSpec(attention=draw(st.sampled_from(["fused", "unfused"])),
                                                       launch="eager" if eager else "graph",
                                                       prefill_launch="eager" if eager else "graph"),
                     dispatch=DispatchSpec(host=draw(st.sampled_from(["ahead", "serial"])),
                                           launch_ps=draw(st.integers(0, 10_000_000)),
                                           node_ps=draw(st.integers(0, 1_000_000))))


@st.composite
def graphs(draw) -> OpGraph:
    """A random DAG of matmuls, attention and elementwise ops over small tensors."""
    dtype = draw(st.sampled_from(["bf16", "fp16"]))
    wdtype = draw(st.sampled_from(["bf16", "int8", "int4"]))
    g = OpGraph(meta=StepMeta(model="random"))
    rows = draw(st.integers(1, 64))
    width = draw(st.sampled_from([16, 32, 64, 96]))

    def tensor(name, shape, klass, dt):
        numel = 1
        for d in shape:
            numel *= d
        g.add_tensor(Tensor(name, shape, dt, klass, nbytes(numel, dt)))
        return name

    acts = [tensor("x", (rows, width), "activation", dtype)]
    for i in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["matmul", "elementwise", "attention"]))
        src = draw(st.sampled_from(acts))
        out = tensor(f"t{i}", (rows, width), "activation", dtype)
        if kind == "matmul":
            w = tensor(f"w{i}", (width, width), "weight", wdtype)
            op = Op(f"op{i}", "matmul", i, dtype, 2 * rows * width * width,
                    (Read(src, g.tensors[src].bytes), Read(w, g.tensors[w].bytes)), (out,),
                    (("k", width), ("m", rows), ("n", width)))
        elif kind == "attention":
            ctx = draw(st.integers(1, 64))
            kc = tensor(f"k{i}", (1, 2, ctx, width // 4), "kv", dtype)
            vc = tensor(f"v{i}", (1, 2, ctx, width // 4), "kv", dtype)
            pairs = rows * ctx
            op = Op(f"op{i}", "attention", i, dtype, 4 * 4 * pairs * (width // 4),
                    tuple(Read(t, g.tensors[t].bytes) for t in (src, kc, vc)), (out,),
                    tuple(sorted({"batch": 1, "heads": 4, "kv_heads": 2, "q_len": rows, "kv_len": ctx,
                                  "head_dim": width // 4, "causal": 0, "pairs": pairs}.items())))
        else:
            other = draw(st.sampled_from(acts))
            ins = tuple(Read(t, g.tensors[t].bytes) for t in dict.fromkeys((src, other)))
            op = Op(f"op{i}", "elementwise", i, dtype, rows * width, ins, (out,), (("elements", rows * width),))
        g.add_op(op)
        acts.append(out)
    g.validate()
    return g


def _double_bandwidth(chip: ChipSpec) -> ChipSpec:
    levels = tuple(replace(lvl, bandwidth_bytes_per_s=2 * lvl.bandwidth_bytes_per_s) for lvl in chip.levels)
    links = tuple(replace(lk, bandwidth_bytes_per_s=2 * lk.bandwidth_bytes_per_s) for lk in chip.links)
    return replace(chip, levels=levels, links=links)


@SETTINGS
@given(graphs(), chips(), stacks())
def test_never_faster_than_roofline_and_never_fewer_bytes(graph, chip, stack):
    plan = mapping.make_plan(graph, chip, stack=stack)
    result = engine.run(plan)
    assert result.end_ps >= int(plan.roofline_s * PS_PER_S)
    moved = {lvl: r + w for (lvl, r), (_, w) in zip(result.bytes_read, result.bytes_written)}
    for lvl, need in plan.compulsory_bytes:
        assert moved[lvl] >= need


@SETTINGS
@given(graphs(), chips(), stacks())
def test_more_bandwidth_never_slower_in_single_stream_mode(graph, chip, stack):
    """One operator at a time, each a pipeline of its own chunks: every transfer's duration
    only shrinks and no two operators contend, so no task can start or end later."""
    assert chip.execution.streams == ("compute",)
    slow = engine.run(mapping.make_plan(graph, chip, stack=stack)).end_ps
    fast = engine.run(mapping.make_plan(graph, _double_bandwidth(chip), stack=stack)).end_ps
    assert fast <= slow


@SETTINGS
@given(graphs(), chips(), stacks())
def test_faster_special_function_units_never_slower(graph, chip, stack):
    """Attention's exponentials on faster special-function units shorten only its compute."""
    assume(chip.compute.special_flops_per_s)
    faster = replace(chip, compute=replace(chip.compute, special_flops_per_s=2 * chip.compute.special_flops_per_s))
    slow = engine.run(mapping.make_plan(graph, chip, stack=stack)).end_ps
    assert engine.run(mapping.make_plan(graph, faster, stack=stack)).end_ps <= slow


@pytest.mark.slow  # two runs and a chunk-by-chunk one of each example
@SETTINGS
@given(graphs(), chips(), stacks())
def test_identical_outputs_and_exact_shortcuts(graph, chip, stack):
    plan = mapping.make_plan(graph, chip, stack=stack)
    a, b = engine.run(plan), engine.run(plan)
    assert a == b
    full = engine.run(plan, fast_forward=False, memoize=False)
    assert full.end_ps == a.end_ps
    assert full.bytes_read == a.bytes_read and full.bytes_written == a.bytes_written


@settings(SETTINGS, max_examples=10)
@given(graphs(), chips(), stacks())
def test_identical_outputs_and_exact_shortcuts_on_a_few_cases(graph, chip, stack):
    """The default run's few cases of the property above, which the slow run searches in full."""
    test_identical_outputs_and_exact_shortcuts.hypothesis.inner_test(graph, chip, stack)


def _channels(chip: ChipSpec, counts: tuple[int, ...]) -> ChipSpec:
    return replace(chip, levels=tuple(replace(lvl, channels=n) for lvl, n in zip(chip.levels, counts)))


@SETTINGS
@given(graphs(), chips(), stacks(), st.tuples(*[st.one_of(st.integers(1, 64), st.integers(2**20, 2**31 - 1))] * 2),
       st.sampled_from([("compute",), ("compute", "copy")]))
def test_channel_count_at_equal_bandwidth_changes_nothing(graph, chip, stack, counts, streams):
    """A level's channels at the same total bandwidth only stripe its transfers: a whole chip's
    step takes the same time (within 0.1%) with one channel or two billion, single-stream or not."""
    chip = replace(chip, execution=replace(chip.execution, streams=streams))
    one = engine.run(mapping.make_plan(graph, _channels(chip, (1, 1)), stack=stack)).end_ps
    many = engine.run(mapping.make_plan(graph, _channels(chip, counts), stack=stack)).end_ps
    assert abs(many - one) <= one / 1000
