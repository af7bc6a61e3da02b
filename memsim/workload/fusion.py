"""Fusing an imported graph's operators as a serving stack's compiler does, as a pure function.

An exported graph (torch.export, ONNX) has one operator per framework call: an RMSNorm is five
elementwise ops, a rotary embedding six, and the Q, K and V projections are three GEMMs. A
serving stack runs them as a few kernels, each launched once and reading its inputs once:
Inductor and XLA fuse chains of pointwise ops into one kernel (a producer into its consumer,
keeping an output that others still read), and put pointwise kernels that read the same tensor
side by side (the rotary embedding of Q and of K); vLLM and TensorRT-LLM load the Q, K and V
projections (and gate and up) as one GEMM over their concatenated weights. ``fuse`` does the
same to an ``OpGraph``:

- **pointwise chains**: an elementwise or norm op joins the group of an elementwise or norm op
  whose output it reads; the group reads each outside tensor once (at the largest of its
  members' reads) and writes the tensors read outside it (or by nobody);
- **siblings**: pointwise groups that read the same activation join;
- **GEMMs that share their input**: matmuls that read the same activation with the same rows,
  depth and dtypes become one over a weight that concatenates theirs.

A merge that would put a group on both ends of a path through another op (a cycle) is not made.
The FLOPs and the bytes of every tensor read from outside are kept; the intermediates vanish.
"""
from __future__ import annotations

import dataclasses
from collections import defaultdict

import networkx as nx

from memsim.workload.graph import Op, OpGraph, Read, Tensor

POINTWISE = ("elementwise", "norm")
SIBLINGS = 4  # earlier readers of a tensor a pointwise kernel tries to join: its own layer's are the nearest


class _Groups:
    """Ops merged into groups on the graph of groups, refusing a merge that closes a cycle."""

    def __init__(self, graph: OpGraph, exact: bool = False) -> None:
        self.exact = exact
        self.dag = graph.graph()
        self.members: dict[str, list[str]] = {name: [name] for name in graph.ops}
        self.of: dict[str, str] = {name: name for name in graph.ops}
        index = {op.name: i for i, op in enumerate(graph.order())}
        self.first = dict(index)  # a group's earliest member in a topological order of the ops
        self.last = dict(index)  # and its latest

    def merge(self, a: str, b: str) -> bool:
        """Join the groups of ``a`` and ``b``, unless a path between them runs through another op."""
        a, b = self.of[a], self.of[b]
        if a == b:
            return True
        if self._detour(a, b) or self._detour(b, a):
            return False
        nx.contracted_nodes(self.dag, a, b, self_loops=False, copy=False)
        for name in self.members.pop(b):
            self.of[name] = a
            self.members[a].append(name)
        self.first[a], self.last[a] = min(self.first[a], self.first.pop(b)), max(self.last[a], self.last.pop(b))
        return True

    def _detour(self, x: str, y: str) -> bool:
        """Whether a path from group ``x`` to group ``y`` passes through another group. The search
        skips groups whose first member comes after ``y``'s last (unless ``exact``): on a path of
        single ops none does; a group spread wide could, which ``fuse`` checks afterwards."""
        bound = len(self.of) if self.exact else self.last[y]
        seen = {x}
        todo = [z for z in self.dag.successors(x) if z != y]
        while todo:
            z = todo.pop()
            if z in seen or self.first[z] > bound:
                continue
            if self.dag.has_edge(z, y):
                return True
            seen.add(z)
            todo.extend(self.dag.successors(z))
        return False


def fuse(graph: OpGraph) -> tuple[OpGraph, int]:
    """The graph with its pointwise chains, siblings and shared-input GEMMs fused, and how many
    operators it had before."""
    before = len(graph.ops)
    graph = _gemms(graph)
    groups = _grouped(graph, exact=False)
    if not nx.is_directed_acyclic_graph(groups.dag):  # the quick search missed a path: search it all
        groups = _grouped(graph, exact=True)
    return _rebuild(graph, groups), before


def _grouped(graph: OpGraph, exact: bool) -> _Groups:
    """The pointwise chains and siblings of ``graph`` as groups."""
    groups = _Groups(graph, exact)
    producer = graph.producers()
    pointwise = {name for name, op in graph.ops.items() if op.kind in POINTWISE}
    for op in graph.order():
        if op.name not in pointwise:
            continue
        for r in op.inputs:
            p = producer.get(r.tensor)
            if p in pointwise and p != op.name:
                groups.merge(p, op.name)
    readers: dict[str, list[str]] = defaultdict(list)
    for name in (op.name for op in graph if op.name in pointwise):  # in the graph's order
        for r in graph.ops[name].inputs:
            if graph.tensors[r.tensor].klass == "activation":
                readers[r.tensor].append(name)
    for names in readers.values():
        for i, name in enumerate(names):  # the nearest earlier reader it can join (the same layer's)
            any(groups.merge(prev, name) for prev in reversed(names[max(0, i - SIBLINGS):i]))
    return groups


def _rebuild(graph: OpGraph, groups: _Groups) -> OpGraph:
    """One op per group, in the order of its first member."""
    readers: dict[str, set[str]] = defaultdict(set)
    for op in graph:
        for r in op.inputs:
            readers[r.tensor].add(groups.of[op.name])
    out = OpGraph(meta=graph.meta)
    kept: set[str] = set()
    done: set[str] = set()
    for op in graph:
        head = groups.of[op.name]
        if head in done:
            continue
        done.add(head)
        members = [graph.ops[n] for n in groups.members[head]]
        fused = members[0] if len(members) == 1 else _one(members, head, readers)
        out.add_op(_depending(fused, groups.of))
        kept.update(r.tensor for r in fused.inputs)
        kept.update(fused.outputs)
    for name, t in graph.tensors.items():
        if name in kept:
            out.add_tensor(t)
    return out


def _depending(op: Op, rename: dict[str, str]) -> Op:
    """``op`` with its control dependencies on the ops that now stand for them (none on itself)."""
    deps = tuple(dict.fromkeys(d for d in (rename.get(d, d) for d in op.deps) if d != op.name))
    return op if deps == op.deps else dataclasses.replace(op, deps=deps)


def _one(members: list[Op], head: str, readers: dict[str, set[str]]) -> Op:
    """A group of pointwise ops as one: outside reads once each, outputs read outside it or by nobody."""
    written = {t for op in members for t in op.outputs}
    reads: dict[str, int] = {}
    for op in members:
        for r in op.inputs:
            if r.tensor not in written:
                reads[r.tensor] = max(reads.get(r.tensor, 0), r.bytes)
    outputs = tuple(t for op in members for t in op.outputs if readers[t] - {head} or not readers[t])
    elements = max(op.dim("elements", 0) for op in members)
    first = members[0]
    kind = "norm" if any(op.kind == "norm" for op in members) else "elementwise"
    deps = tuple(dict.fromkeys(d for op in members for d in op.deps))  # ``_depending`` drops its own
    return Op(first.name, kind, first.layer, first.dtype, sum(op.flops for op in members),
              tuple(Read(t, b) for t, b in reads.items()), outputs or (members[-1].outputs[0],),
              (("elements", elements),) if elements else (), deps)


def _gemms(graph: OpGraph) -> OpGraph:
    """Matmuls that read the same activation (the same rows, depth, groups and dtypes, no other
    inputs) as one over their weights concatenated; each keeps its own output tensor."""
    sets: dict[tuple, list[Op]] = defaultdict(list)
    for op in graph:
        if op.kind != "matmul" or len(op.inputs) != 2:
            continue
        w = graph.tensors[op.inputs[1].tensor]
        if w.klass != "weight":
            continue
        key = (op.inputs[0].tensor, op.dim("m"), op.dim("k"), op.dim("groups", 1), op.dtype, w.dtype)
        sets[key].append(op)
    merged: dict[str, Op] = {}
    made: dict[str, Tensor] = {}  # the concatenated weights
    gone: dict[str, str] = {}  # a GEMM merged into another -> that one
    for ops in sets.values():
        if len(ops) < 2:
            continue
        weights = [graph.tensors[op.inputs[1].tensor] for op in ops]
        n = sum(op.dim("n") for op in ops)
        name = "+".join(w.name for w in weights)
        weight = Tensor(name, (ops[0].dim("k"), n), weights[0].dtype, "weight", sum(w.bytes for w in weights))
        first = ops[0]
        dims = tuple((k, n if k == "n" else v) for k, v in first.dims)
        merged[first.name] = Op(first.name, "matmul", first.layer, first.dtype, sum(op.flops for op in ops),
                                (first.inputs[0], Read(name, sum(op.inputs[1].bytes for op in ops))),
                                tuple(t for op in ops for t in op.outputs), dims,
                                tuple(dict.fromkeys(d for op in ops for d in op.deps)))
        gone.update((op.name, first.name) for op in ops[1:])
        made[name] = weight
    if not merged:
        return graph
    out = OpGraph(meta=graph.meta)
    for t in (*graph.tensors.values(), *made.values()):
        out.add_tensor(t)
    for op in graph:
        if op.name not in gone:
            out.add_op(_depending(merged.get(op.name, op), gone))
    used = {r.tensor for op in out for r in op.inputs} | {t for op in out for t in op.outputs}
    out.tensors = {k: v for k, v in out.tensors.items() if k in used}
    return out
