"""Fusing an imported graph as a serving stack's compiler does (memsim.workload.fusion)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memsim.workload.fusion import fuse
from memsim.workload.graph import Op, OpGraph, Read, Tensor


def _graph(*ops: Op, tensors: dict[str, tuple[str, int]]) -> OpGraph:
    g = OpGraph()
    for name, (klass, nbytes) in tensors.items():
        g.add_tensor(Tensor(name, (nbytes // 2,), "bf16", klass, nbytes))
    for op in ops:
        g.add_op(op)
    g.validate()
    return g


def pw(name: str, reads: list[tuple[str, int]], out: str, flops: int = 10) -> Op:
    return Op(name, "elementwise", 0, "bf16", flops, tuple(Read(t, b) for t, b in reads), (out,), (("elements", 5),))


def mm(name: str, x: str, w: str, out: str, n: int = 4) -> Op:
    return Op(name, "matmul", 0, "bf16", 2 * 8 * n * 4, (Read(x, 64), Read(w, 32 * n // 4)), (out,),
              (("k", 4), ("m", 8), ("n", n)))


TENSORS = {"x": ("activation", 64), "w": ("weight", 8), "p": ("activation", 64), "m": ("activation", 16),
           "r": ("activation", 16), "y": ("activation", 64), "z": ("activation", 64), "wq": ("weight", 32),
           "q": ("activation", 64)}


def test_an_rmsnorm_chain_is_one_kernel_reading_each_input_once():
    """pow, mean, rsqrt, x * rsqrt, * weight: x is read by two members, once by the kernel."""
    g = _graph(pw("pow", [("x", 64)], "p"), pw("mean", [("p", 64)], "m"), pw("rsqrt", [("m", 16)], "r"),
               pw("mul", [("x", 64), ("r", 16)], "y"), pw("mulw", [("y", 64), ("w", 8)], "z"),
               mm("qproj", "z", "wq", "q"), tensors=TENSORS)
    fused, before = fuse(g)
    assert before == 6 and len(fused.ops) == 2
    norm = fused.ops["pow"]
    assert {(r.tensor, r.bytes) for r in norm.inputs} == {("x", 64), ("w", 8)} and norm.outputs == ("z",)
    assert fused.total_flops() == g.total_flops()
    assert set(fused.tensors) == {"x", "w", "z", "wq", "q"}  # the intermediates are gone


def test_a_merge_that_would_close_a_cycle_is_not_made():
    """a feeds a GEMM and b; the GEMM feeds b too: a and b in one kernel would wait on itself."""
    t = {"x": ("activation", 64), "a": ("activation", 64), "wq": ("weight", 32), "q": ("activation", 64),
         "b": ("activation", 64)}
    g = _graph(pw("a", [("x", 64)], "a"), mm("gemm", "a", "wq", "q"), pw("b", [("a", 64), ("q", 64)], "b"),
               tensors=t)
    fused, _ = fuse(g)
    assert set(fused.ops) == {"a", "gemm", "b"}
    fused.validate()


def test_gemms_that_share_their_input_are_one_over_concatenated_weights():
    t = {"x": ("activation", 64), "wq": ("weight", 32), "wk": ("weight", 16), "q": ("activation", 64),
         "k": ("activation", 32)}
    g = _graph(mm("q", "x", "wq", "q"), mm("k", "x", "wk", "k", n=2), tensors=t)
    fused, _ = fuse(g)
    (op,) = fused.ops.values()
    assert op.dim("n") == 6 and op.flops == g.total_flops() and op.outputs == ("q", "k")
    weight = fused.tensors[op.inputs[1].tensor]
    assert weight.klass == "weight" and weight.bytes == 48 and op.inputs[1].bytes == 32 + 16
    assert set(g.ops) == {"q", "k"}  # the input graph is left as it was


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.lists(st.integers(0, 30), min_size=1, max_size=3)), min_size=1, max_size=25))
def test_fusing_any_graph_keeps_it_acyclic_its_flops_and_its_weights(spec):
    """A random DAG of pointwise ops and GEMMs (each reads one to three earlier outputs, or the
    input): the fused graph validates (no cycle, every read produced), keeps every FLOP and
    every weight byte, and never has more operators."""
    g = OpGraph()
    g.add_tensor(Tensor("in", (32,), "bf16", "activation", 64))
    for i, (is_gemm, picks) in enumerate(spec):
        sources = ["in"] + [f"t{j}" for j in range(i)]
        reads = list(dict.fromkeys(sources[p % len(sources)] for p in picks))
        g.add_tensor(Tensor(f"t{i}", (32,), "bf16", "activation", 64))
        if is_gemm:
            g.add_tensor(Tensor(f"w{i}", (16,), "bf16", "weight", 32))
            g.add_op(mm(f"op{i}", reads[0], f"w{i}", f"t{i}"))
        else:
            g.add_op(pw(f"op{i}", [(t, 64) for t in reads], f"t{i}"))
    g.validate()
    fused, before = fuse(g)
    fused.validate()
    assert before == len(g.ops) >= len(fused.ops)
    assert fused.total_flops() == g.total_flops()
    assert fused.bytes_of("weight") == g.bytes_of("weight")


def test_control_dependencies_follow_the_ops_that_absorb_their_targets():
    """An op that waited on a GEMM merged into another, or on a pointwise op fused into a chain,
    waits on the op that now does that work; a chain does not wait on itself."""
    t = {"x": ("activation", 64), "wq": ("weight", 32), "wk": ("weight", 16), "q": ("activation", 64),
         "k": ("activation", 32), "a": ("activation", 64), "b": ("activation", 64)}
    g = _graph(mm("q", "x", "wq", "q"), mm("k", "x", "wk", "k", n=2), pw("a", [("q", 64)], "a"),
               Op("b", "elementwise", 0, "bf16", 10, (Read("a", 64),), ("b",), (("elements", 5),), ("k", "a")),
               tensors=t)
    fused, _ = fuse(g)
    fused.validate()
    assert set(fused.ops) == {"q", "a"} and fused.ops["a"].deps == ("q",)
