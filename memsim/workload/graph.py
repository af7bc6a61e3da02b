"""The operator DAG: tensors, operators and the networkx graph that joins them.

An ``Op`` reads tensors (with the number of bytes it must read from each: a gather reads
only the rows it needs) and writes tensors. Edges run from the producer of a tensor to
each consumer, plus explicit control dependencies.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import networkx as nx

from memsim.errors import TraceError

TENSOR_CLASSES = ("weight", "kv", "activation")
COLLECTIVE_KINDS = ("allreduce", "allgather", "reduce_scatter", "alltoall")
# ``compute``: an op known only by its FLOPs and bytes (imported traces), run at matrix rate.
OP_KINDS = ("matmul", "attention", "elementwise", "norm", "embedding", "compute", *COLLECTIVE_KINDS)


@dataclass(frozen=True, slots=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: str
    klass: str  # weight | kv | activation
    bytes: int


@dataclass(frozen=True, slots=True)
class Read:
    tensor: str
    bytes: int


@dataclass(frozen=True, slots=True)
class Op:
    name: str
    kind: str
    layer: int  # -1 outside the repeated layers
    dtype: str  # compute dtype
    flops: int
    inputs: tuple[Read, ...]
    outputs: tuple[str, ...]
    dims: tuple[tuple[str, int], ...] = ()
    deps: tuple[str, ...] = ()  # control dependencies (op names)

    def dim(self, key: str, default: int | None = None) -> int:
        for k, v in self.dims:
            if k == key:
                return v
        if default is None:
            raise KeyError(f"{self.name} has no dim {key!r}")
        return default


@dataclass(slots=True)
class OpGraph:
    """Ops in insertion order plus the tensors they use; ``graph`` is derived on demand."""

    tensors: dict[str, Tensor] = field(default_factory=dict)
    ops: dict[str, Op] = field(default_factory=dict)
    meta: dict[str, object] = field(default_factory=dict)

    def add_tensor(self, t: Tensor) -> Tensor:
        self.tensors[t.name] = t
        return t

    def add_op(self, op: Op) -> Op:
        self.ops[op.name] = op
        return op

    def producers(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for op in self.ops.values():
            for t in op.outputs:
                out[t] = op.name
        return out

    def graph(self) -> nx.DiGraph:
        g = nx.DiGraph()
        g.add_nodes_from(self.ops)
        prod = self.producers()
        for op in self.ops.values():
            for r in op.inputs:
                if r.tensor in prod and prod[r.tensor] != op.name:
                    g.add_edge(prod[r.tensor], op.name, tensor=r.tensor)
            for d in op.deps:
                g.add_edge(d, op.name)
        return g

    def order(self) -> list[Op]:
        """A deterministic topological order: ties go to insertion order."""
        index = {name: i for i, name in enumerate(self.ops)}
        return [self.ops[n] for n in nx.lexicographical_topological_sort(self.graph(), key=index.__getitem__)]

    def validate(self, file: str = "<graph>") -> None:
        for op in self.ops.values():
            for r in op.inputs:
                if r.tensor not in self.tensors:
                    raise TraceError(f"input tensor {r.tensor!r} is not defined", file=file, field=f"ops[{op.name}].inputs")
                if r.bytes < 0:
                    raise TraceError("bytes must not be negative", file=file, field=f"ops[{op.name}].inputs[{r.tensor}]")
            for t in op.outputs:
                if t not in self.tensors:
                    raise TraceError(f"output tensor {t!r} is not defined", file=file, field=f"ops[{op.name}].outputs")
            for d in op.deps:
                if d not in self.ops:
                    raise TraceError(f"dependency {d!r} is not an op", file=file, field=f"ops[{op.name}].deps")
            if op.kind not in OP_KINDS:
                raise TraceError(f"unknown kind {op.kind!r} (known: {', '.join(OP_KINDS)})", file=file, field=f"ops[{op.name}].kind")
            if op.flops < 0:
                raise TraceError("flops must not be negative", file=file, field=f"ops[{op.name}].flops")
        for t in self.tensors.values():
            if t.klass not in TENSOR_CLASSES:
                raise TraceError(f"unknown class {t.klass!r}", file=file, field=f"tensors[{t.name}].class")
        g = self.graph()
        if not nx.is_directed_acyclic_graph(g):
            nodes = [e[0] for e in nx.find_cycle(g)]
            path = " -> ".join(nodes if len(nodes) <= 4 else [*nodes[:3], "...", nodes[-1]])
            raise TraceError(f"cycle of {len(nodes)} ops: {path} -> {nodes[0]}", file=file, field=f"ops[{nodes[0]}]")

    def subgraph(self, names: list[str]) -> "OpGraph":
        """The named ops and every tensor they read or write."""
        sub = OpGraph(meta=dict(self.meta))
        for name in names:
            op = self.ops[name]
            sub.add_op(op)
            for t in [r.tensor for r in op.inputs] + list(op.outputs):
                sub.tensors[t] = self.tensors[t]
        return sub

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops.values())

    def total_flops(self) -> int:
        return sum(op.flops for op in self.ops.values())

    def bytes_of(self, klass: str) -> int:
        return sum(t.bytes for t in self.tensors.values() if t.klass == klass)
