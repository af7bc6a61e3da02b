"""Ops and tensors check their own fields; a graph checks what joins them. Built in Python or read."""
from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memsim import simulate_graph
from memsim.core import limits
from memsim.core.errors import TraceError
from memsim.workload import Op, OpGraph, Read, StepMeta, StepSpec, Tensor, build_step, model_config, read_trace, write_trace
from memsim.workload.graph import OP_KINDS

MATMUL_DIMS = (("k", 8), ("m", 2), ("n", 8))
ATTN_DIMS = (("batch", 1), ("head_dim", 8), ("heads", 2), ("kv_heads", 1), ("kv_len", 4), ("q_len", 1))
READS = (Read("x", 32), Read("w", 128))


def refused(make, field: str, needle: str = "") -> TraceError:
    with pytest.raises(TraceError) as info:
        make()
    assert info.value.field == field, str(info.value)
    assert needle in info.value.message
    return info.value


@pytest.mark.parametrize(("make", "field", "needle"), [
    (lambda: Tensor("t", (2, 8), "bf16", "activation", -1), "tensors[t].bytes", "negative"),
    (lambda: Tensor("t", (2, 8), "bf16", "activation", 10**31), "tensors[t].bytes", "out of range"),
    (lambda: Tensor("t", (2, 8), "bf16", "activation", 1.5), "tensors[t].bytes", "whole number"),
    (lambda: Tensor("t", (2, -8), "bf16", "activation", 4), "tensors[t].shape", "negative"),
    (lambda: Tensor("t", [2, 8], "bf16", "activation", 4), "tensors[t].shape", "list of whole numbers"),
    (lambda: Tensor("t", (2, 8), "bf17", "activation", 4), "tensors[t].dtype", "not a dtype"),
    (lambda: Tensor("t", (2, 8), "bf16", "param", 4), "tensors[t].class", "unknown class"),
    (lambda: Tensor("", (2, 8), "bf16", "activation", 4), "tensors[]", "expected a name"),
    (lambda: Op("A", "matmul", 0, "bf16", 256, READS, ("a",)), "ops[A].dims.m", "needs dims m, n, k"),
    (lambda: Op("A", "matmul", 0, "bf16", 256, READS, ("a",), (("k", -5), ("m", 2), ("n", 8))), "ops[A].dims.k",
     "at least 1"),
    (lambda: Op("A", "matmul", 0, "bf16", 256, READS[:1], ("a",), MATMUL_DIMS), "ops[A].inputs", "activation, weight"),
    (lambda: Op("A", "matmul", 0, "bf17", 256, READS, ("a",), MATMUL_DIMS), "ops[A].dtype", "not a dtype"),
    (lambda: Op("A", "matmul", 0, "bf16", -1, READS, ("a",), MATMUL_DIMS), "ops[A].flops", "negative"),
    (lambda: Op("A", "matmul", 0, "bf16", 10**40, READS, ("a",), MATMUL_DIMS), "ops[A].flops", "out of range"),
    (lambda: Op("A", "matmul", -2, "bf16", 256, READS, ("a",), MATMUL_DIMS), "ops[A].layer", "at least -1"),
    (lambda: Op("A", "matmul", 0, "bf16", 256, READS, (), MATMUL_DIMS), "ops[A].outputs", "at least one"),
    (lambda: Op("A", "matmul", 0, "bf16", 256, (Read("x", -4), READS[1]), ("a",), MATMUL_DIMS),
     "ops[A].inputs[x].bytes", "negative"),
    (lambda: Op("A", "conv", 0, "bf16", 256, READS, ("a",)), "ops[A].kind", "unknown kind"),
    (lambda: Op("A", "matmul", 0, "bf16", 256, READS, ("a",), (*MATMUL_DIMS, ("k", 9))), "ops[A].dims", "twice"),
    (lambda: Op("A", "attention", 0, "bf16", 256, READS * 2, ("a",), (("heads", 0), *ATTN_DIMS[3:])),
     "ops[A].dims.heads", "at least 1"),
    (lambda: Op("A", "attention", 0, "bf16", 256, READS * 2, ("a",), ATTN_DIMS[1:]), "ops[A].dims.batch", "missing"),
    (lambda: Op("A", "attention", 0, "bf16", 256, READS, ("a",), ATTN_DIMS), "ops[A].inputs", "q, k, v"),
    (lambda: Op("A", "attention", 0, "bf16", 256, READS * 2, ("a",), (*ATTN_DIMS, ("causal", 2))),
     "ops[A].dims.causal", "0 or 1"),
    (lambda: Op("A", "attention", 0, "bf16", 256, READS * 2, ("a",),
                tuple((k, 3) if k == "kv_heads" else (k, v) for k, v in ATTN_DIMS)), "ops[A].dims.kv_heads", "divide"),
    (lambda: Op("A", "allreduce", 0, "bf16", 0, READS, ("a",)), "ops[A].dims.bytes", "missing"),
    (lambda: Op("A", "elementwise", 0, "bf16", 0, READS, ("a",), deps=["B"]), "ops[A].deps", "list of names"),
])
def test_ops_and_tensors_check_their_fields_when_made(make, field, needle):
    refused(make, field, needle)


def two_ops() -> OpGraph:
    g = OpGraph(meta=StepMeta(model="hand", tp=1))
    for t in (Tensor("x", (2, 8), "bf16", "activation", 32), Tensor("w", (8, 8), "bf16", "weight", 128),
              Tensor("a", (2, 8), "bf16", "activation", 32), Tensor("b", (2, 8), "bf16", "activation", 32)):
        g.add_tensor(t)
    g.add_op(Op("A", "matmul", 0, "bf16", 256, READS, ("a",), MATMUL_DIMS))
    g.add_op(Op("B", "elementwise", 0, "bf16", 16, (Read("a", 32),), ("b",), (("elements", 16),)))
    return g


def test_a_graph_checks_what_joins_its_ops():
    two_ops().validate()
    with pytest.raises(TraceError, match="holds no ops"):
        OpGraph().validate("g.json")
    g = two_ops()
    g.add_op(Op("C", "elementwise", 0, "bf16", 16, (Read("a", 32),), ("b",)))
    refused(g.validate, "ops[C].outputs", "also written by 'B'")
    g = two_ops()
    g.tensors["y"] = g.tensors["x"]
    refused(g.validate, "tensors[y]", "under this name")
    refused(lambda: StepMeta(tp=0), "meta.tp", "at least 1")
    # a billion chips would be simulated one by one
    refused(lambda: StepMeta(tp=10**9), "meta.tp", f"at most {limits.MAX_RANKS}")


def test_write_trace_refuses_a_graph_run_would_reject(tmp_path):
    with pytest.raises(TraceError, match="holds no ops"):
        write_trace(OpGraph(), tmp_path / "empty.json")
    assert not (tmp_path / "empty.json").exists()


def test_simulate_graph_refuses_an_empty_graph():
    with pytest.raises(TraceError, match="holds no ops"):
        simulate_graph("h100-sxm", OpGraph())


def test_a_hand_built_graph_that_passes_simulates(tmp_path):
    write_trace(two_ops(), tmp_path / "t.json")
    assert simulate_graph("h100-sxm", read_trace(tmp_path / "t.json")).summary.flops_total == 272


@pytest.mark.parametrize(("mutate", "field", "needle"), [
    (lambda d: d.update(ops=[]), "ops", "holds no ops"),
    (lambda d: d["ops"][0].pop("dims"), "ops[A].dims.m", "needs dims"),
    (lambda d: d["ops"][0]["dims"].update(k=-5), "ops[A].dims.k", "at least 1"),
    (lambda d: d["ops"][0].update(dtype="bf17"), "ops[A].dtype", "not a dtype"),
    (lambda d: d["tensors"][0].update(bytes=-1), "tensors[x].bytes", "negative"),
    (lambda d: d["ops"][0].update(dim={"k": 1}), "ops[A].dim", "unknown field"),
    (lambda d: d["tensors"][0].update(size=4), "tensors[x].size", "unknown field"),
    (lambda d: d["ops"][0]["inputs"][0].update(offset=0), "ops[A].inputs[0].offset", "unknown field"),
    (lambda d: d.update(extra=1), "extra", "unknown field"),
    (lambda d: d.update(meta="abc"), "meta", "wrong type"),
    (lambda d: d["meta"].update(tp="x"), "meta.tp", "whole number"),
    (lambda d: d["meta"].update(TP=4), "meta.TP", "did you mean tp?"),  # ran on one chip without a word
    (lambda d: d["meta"].update(chips=4), "meta.chips", "known: model, arch, phase"),
    (lambda d: d["meta"].update(phase=3), "meta.phase", "expected a text"),
    (lambda d: d["ops"][1].update(deps="A"), "ops[B].deps", "wrong type"),
    (lambda d: d["ops"][0].update(flops=1e300), "ops[A].flops", "wrong type"),
    (lambda d: d.update(version=True), "version", "unsupported version"),
])
def test_a_trace_file_is_checked_like_a_graph_built_in_python(tmp_path, mutate, field, needle):
    path = tmp_path / "t.json"
    write_trace(two_ops(), path)
    data = json.loads(path.read_text())
    mutate(data)
    path.write_text(json.dumps(data))
    err = refused(lambda: read_trace(path), field, needle)
    assert err.file == str(path)


def test_order_is_networkx_lexicographical_order_by_insertion():
    """``OpGraph.order`` is networkx's lexicographical topological sort keyed by insertion, on
    random DAGs (with deps) and on a model's step."""
    import networkx as nx
    from hypothesis import given, settings

    from tests.test_properties import graphs

    def reference(g):
        index = {name: i for i, name in enumerate(g.ops)}
        return list(nx.lexicographical_topological_sort(g.graph(), key=index.__getitem__))

    @settings(max_examples=50, deadline=None)
    @given(graphs())
    def check(g):
        assert [op.name for op in g.order()] == reference(g)

    check()
    g = two_ops()
    g.add_op(Op("C", "elementwise", 0, "bf16", 16, (Read("x", 32),), ("c",), deps=("B",)))
    g.add_tensor(Tensor("c", (2, 8), "bf16", "activation", 32))
    assert [op.name for op in g.order()] == reference(g) == ["A", "B", "C"]


NAMES = st.one_of(st.sampled_from(["a", "b", "x0", "L0.q"]), st.just(""), st.integers(0, 3), st.none())
WHOLE = st.one_of(st.integers(-3, 10**31), st.sampled_from([0, 1, 2, 4, 1.0, 2.5, True, float("nan"), "4"]))
DIM_NAMES = st.sampled_from(["m", "n", "k", "batch", "heads", "kv_heads", "q_len", "kv_len", "head_dim", "bytes",
                             "causal", "ranks", "elements", "", 7])
BASES = [  # well-formed ops of several kinds, each then changed in one field
    dict(name="mm", kind="matmul", layer=0, dtype="bf16", flops=8, inputs=(Read("x", 2), Read("w", 4)),
         outputs=("y",), dims=(("k", 2), ("m", 1), ("n", 2)), deps=()),
    dict(name="at", kind="attention", layer=3, dtype="bf16", flops=9, inputs=(Read("q", 2), Read("k", 2), Read("v", 2)),
         outputs=("o",), dims=(("batch", 1), ("causal", 1), ("head_dim", 2), ("heads", 4), ("kv_heads", 2),
                               ("kv_len", 8), ("q_len", 1)), deps=("mm",)),
    dict(name="ar", kind="allreduce", layer=-1, dtype="fp8", flops=0, inputs=(Read("y", 2),), outputs=("z",),
         dims=(("bytes", 2), ("ranks", 8)), deps=()),
]
CHANGES = {"name": NAMES, "kind": st.sampled_from([*OP_KINDS, "conv", 3]), "layer": WHOLE,
           "dtype": st.sampled_from(["bf16", "fp8", "f16x", None]), "flops": WHOLE,
           "inputs": st.lists(st.one_of(st.builds(Read, NAMES, WHOLE), st.just("raw")), max_size=4).map(tuple),
           "outputs": st.one_of(st.lists(NAMES, max_size=3).map(tuple), st.just(["y"])),
           "deps": st.one_of(st.lists(NAMES, max_size=2).map(tuple), st.just("mm")),
           "dims": st.one_of(st.lists(st.tuples(DIM_NAMES, WHOLE), max_size=8).map(tuple),
                             st.just((("m", 1),)), st.just([("m", 1)]), st.just((("m", 1, 2),)))}


def _unchecked(**fields) -> Op:
    op = object.__new__(Op)  # made without its checks: the quick one is asked alone
    for name, value in fields.items():
        object.__setattr__(op, name, value)
    return op


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(BASES), st.data())
def test_the_quick_check_of_an_op_accepts_only_what_the_full_checks_accept(base, data):
    """A builder's op is accepted at once (``Op._plainly_whole``); any op it accepts, every field's own
    check accepts too, so nothing the full checks refuse gets through."""
    assert _unchecked(**base)._plainly_whole()
    field = data.draw(st.sampled_from(sorted(CHANGES)))
    changed = {**base, field: data.draw(CHANGES[field])}
    if _unchecked(**changed)._plainly_whole():
        Op(**changed)  # raises if any check refuses it
    else:
        with contextlib.suppress(TraceError):  # refused by the quick check: the full checks name what, if anything
            Op(**changed)


def test_every_op_and_tensor_a_model_builds_is_accepted_by_the_quick_checks():
    for model in ("llama-3.1-8b", "gpt2", "mixtral-8x7b", "bert-base"):
        graph = build_step(model_config(model), StepSpec.make("prefill", batch=2, prompt=16))
        assert all(op._plainly_whole() for op in graph.ops.values())
