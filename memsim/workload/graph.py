"""The operator DAG: tensors, operators and the networkx graph that joins them.

An ``Op`` reads tensors (with the number of bytes it must read from each: a gather reads
only the rows it needs) and writes tensors. Edges run from the producer of a tensor to
each consumer, plus explicit control dependencies.

Tensors and ops check their own fields when they are made (types, ranges, known kinds and
dtypes, the dims the mapping reads), wherever they come from: a trace file, an importer or
Python. ``OpGraph.validate`` checks what joins them: references, producers, cycles.
"""
from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NoReturn

import networkx as nx

from memsim.core import limits, units
from memsim.core.dtypes import DTYPES
from memsim.core.errors import TraceError
from memsim.workload.meta import StepMeta

TENSOR_CLASSES = ("weight", "kv", "activation")
COLLECTIVE_KINDS = ("allreduce", "allgather", "reduce_scatter", "alltoall")
# ``compute``: an op known only by its FLOPs and bytes (imported traces), run at matrix rate.
OP_KINDS = ("matmul", "attention", "elementwise", "norm", "embedding", "compute", *COLLECTIVE_KINDS)
# The dims the mapping reads of each kind, none of them zero, and the inputs it reads.
REQUIRED_DIMS = {"matmul": ("m", "n", "k"), "attention": ("batch", "heads", "kv_heads", "q_len", "kv_len", "head_dim"),
                 **{kind: ("bytes",) for kind in COLLECTIVE_KINDS}}
POSITIVE_DIMS = ("m", "n", "k", "groups", "batch", "heads", "kv_heads", "q_len", "kv_len", "head_dim", "ranks")
MIN_INPUTS = {"matmul": ("activation", "weight"), "attention": ("q", "k", "v")}  # the inputs it reads first


def _fail(message: str, field: str) -> NoReturn:
    raise TraceError(message, field=field)


def _whole(value: object, field: str, least: int = 0) -> int | float:
    if type(value) is int and least <= value <= units.MAX_VALUE:  # the usual case, without a call
        return value
    try:
        return units.check_number(value, least)
    except units.UnitError as exc:
        raise TraceError(str(exc), field=field) from None


def _name(value: object, field: str) -> None:
    if not isinstance(value, str) or not value:
        _fail(f"expected a name, got {units.shown(value)}", field)


def _names(value: object, field: str) -> None:
    if not isinstance(value, tuple):
        _fail(f"expected a list of names, got {units.shown(value)}", field)
    for i, item in enumerate(value):
        _name(item, f"{field}[{i}]")


def _dtype(value: object, field: str) -> None:
    if value not in DTYPES:
        _fail(f"{units.shown(value)} is not a dtype memsim knows ({', '.join(DTYPES)})", field)


@dataclass(frozen=True, slots=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: str
    klass: str  # weight | kv | activation
    bytes: int

    def __post_init__(self) -> None:
        if type(self.shape) is tuple and all(type(d) is int and 0 <= d <= units.MAX_VALUE for d in self.shape) and \
                type(self.bytes) is int and 0 <= self.bytes <= units.MAX_VALUE and self.dtype in DTYPES and \
                self.klass in TENSOR_CLASSES and isinstance(self.name, str) and self.name:
            return  # the usual case, checked at once; otherwise each field in turn, the first wrong one named
        _name(self.name, "tensors[]")
        where = units.entry("tensors", self.name)
        if not isinstance(self.shape, tuple):
            _fail(f"expected a list of whole numbers, got {units.shown(self.shape)}", f"{where}.shape")
        for d in self.shape:
            _whole(d, f"{where}.shape")
        _dtype(self.dtype, f"{where}.dtype")
        if self.klass not in TENSOR_CLASSES:
            _fail(f"unknown class {units.shown(self.klass)} (known: {', '.join(TENSOR_CLASSES)})", f"{where}.class")
        _whole(self.bytes, f"{where}.bytes")


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

    def __post_init__(self) -> None:
        if self._plainly_whole():
            return  # the usual case (a builder's op), checked at once; otherwise each field in turn, the first wrong one named
        _name(self.name, "ops[]")
        where = units.entry("ops", self.name)
        if self.kind not in OP_KINDS:
            _fail(f"unknown kind {units.shown(self.kind)} (known: {', '.join(OP_KINDS)})", f"{where}.kind")
        _whole(self.layer, f"{where}.layer", -1)
        _dtype(self.dtype, f"{where}.dtype")
        _whole(self.flops, f"{where}.flops")
        if not isinstance(self.inputs, tuple) or not all(isinstance(r, Read) for r in self.inputs):
            _fail(f"expected reads of tensors, got {units.shown(self.inputs)}", f"{where}.inputs")
        for r in self.inputs:
            _name(r.tensor, f"{where}.inputs[]")
            _whole(r.bytes, f"{where}.inputs[{r.tensor}].bytes")
        if len(self.inputs) < len(MIN_INPUTS.get(self.kind, ())):
            _fail(f"an op of kind {self.kind} reads {', '.join(MIN_INPUTS[self.kind])} first; this one reads "
                  f"{len(self.inputs)} tensors", f"{where}.inputs")
        _names(self.outputs, f"{where}.outputs")
        if not self.outputs:
            _fail("an op writes at least one tensor", f"{where}.outputs")
        _names(self.deps, f"{where}.deps")
        self._check_dims(where)

    def _plainly_whole(self) -> bool:
        """Whether every check below passes, tested at once without naming fields: it accepts only
        what they accept (a test holds it to that), and an op it refuses goes through them to be named."""
        most = units.MAX_VALUE
        if not (isinstance(self.name, str) and self.name and self.kind in OP_KINDS and type(self.layer) is int
                and -1 <= self.layer <= most and self.dtype in DTYPES and type(self.flops) is int and 0 <= self.flops <= most
                and type(self.inputs) is tuple and len(self.inputs) >= len(MIN_INPUTS.get(self.kind, ()))
                and type(self.outputs) is tuple and self.outputs and type(self.deps) is tuple and type(self.dims) is tuple):
            return False
        if not all(type(r) is Read and isinstance(r.tensor, str) and r.tensor and type(r.bytes) is int
                   and 0 <= r.bytes <= most for r in self.inputs) or \
                not all(isinstance(n, str) and n for names in (self.outputs, self.deps) for n in names):
            return False
        dims: dict[str, int] = {}
        for d in self.dims:
            if type(d) is not tuple or len(d) != 2:
                return False
            key, value = d
            if not isinstance(key, str) or not key or key in dims or type(value) is not int or value > most \
                    or value < (1 if key in POSITIVE_DIMS else 0) or (key == "ranks" and value > limits.MAX_RANKS):
                return False
            dims[key] = value
        if any(key not in dims for key in REQUIRED_DIMS.get(self.kind, ())):
            return False
        return not (self.kind == "attention" and dims["heads"] % dims["kv_heads"]) and dims.get("causal", 0) in (0, 1)

    def _check_dims(self, where: str) -> None:
        if not isinstance(self.dims, tuple) or not all(isinstance(d, tuple) and len(d) == 2 for d in self.dims):
            _fail(f"expected a mapping of names to whole numbers, got {units.shown(self.dims)}", f"{where}.dims")
        dims = dict(self.dims)
        if len(dims) != len(self.dims):
            _fail("a dim is given twice", f"{where}.dims")
        for key, value in self.dims:
            _name(key, f"{where}.dims")
            _whole(value, f"{where}.dims.{key}", 1 if key in POSITIVE_DIMS else 0)
            if key == "ranks":
                limits.check(value, limits.MAX_RANKS, "ranks", f"{where}.dims.ranks", error=TraceError)
        for key in REQUIRED_DIMS.get(self.kind, ()):
            if key not in dims:
                _fail(f"an op of kind {self.kind} needs dims {', '.join(REQUIRED_DIMS[self.kind])}; {key!r} is missing",
                      f"{where}.dims.{key}")
        if self.kind == "attention" and dims["heads"] % dims["kv_heads"]:
            _fail(f"{dims['heads']} heads do not divide into {dims['kv_heads']} KV heads", f"{where}.dims.kv_heads")
        if dims.get("causal", 0) not in (0, 1):
            _fail("must be 0 or 1", f"{where}.dims.causal")

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
    meta: StepMeta = field(default_factory=StepMeta)

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
        g: nx.DiGraph[str] = nx.DiGraph()
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
        """A deterministic topological order: of the ops whose predecessors are all placed, the
        first inserted goes next (networkx's ``lexicographical_topological_sort`` keyed by
        insertion, done here on plain lists: a 10,000-layer model's order is a hot path)."""
        names = list(self.ops)
        index = {name: i for i, name in enumerate(names)}
        prod = self.producers()
        succ: list[set[int]] = [set() for _ in names]
        for i, op in enumerate(self.ops.values()):
            for r in op.inputs:
                p = prod.get(r.tensor)
                if p is not None and p != op.name:
                    succ[index[p]].add(i)
            for d in op.deps:
                succ[index[d]].add(i)
        waiting = [0] * len(names)
        for after in succ:
            for j in after:
                waiting[j] += 1
        ready = [i for i, w in enumerate(waiting) if w == 0]
        heapq.heapify(ready)
        out = []
        while ready:
            i = heapq.heappop(ready)
            out.append(self.ops[names[i]])
            for j in succ[i]:
                waiting[j] -= 1
                if not waiting[j]:
                    heapq.heappush(ready, j)
        if len(out) != len(names):
            raise TraceError("the ops form a cycle", field="ops")  # validate() names it; order() only refuses it
        return out

    def validate(self, file: str | None = None) -> None:
        """References, producers and cycles (each op and tensor checked its own fields when made)."""
        if not self.ops:
            raise TraceError("the graph holds no ops: there is nothing to simulate", file=file, field="ops")
        limits.check(len(self.ops), limits.MAX_OPS, "ops", "ops", file, TraceError)
        producer: dict[str, str] = {}
        for op in self.ops.values():
            for t in op.outputs:
                if producer.setdefault(t, op.name) != op.name:
                    raise TraceError(f"tensor {t!r} is also written by {producer[t]!r}: each tensor has one producer",
                                     file=file, field=f"ops[{op.name}].outputs")
        for table, cls in (("tensors", Tensor), ("ops", Op)):
            for key, item in getattr(self, table).items():
                if not isinstance(item, cls) or item.name != key:
                    raise TraceError(f"holds {units.shown(item)} under this name", file=file, field=f"{table}[{key}]")
        for op in self.ops.values():
            for r in op.inputs:
                if r.tensor not in self.tensors:
                    raise TraceError(f"input tensor {r.tensor!r} is not defined", file=file, field=f"ops[{op.name}].inputs")
                if r.tensor in op.outputs:  # as a dependency on itself: the op waits for itself
                    raise TraceError(f"cycle of 1 ops: {op.name} -> {op.name} (it reads its own output {r.tensor!r})",
                                     file=file, field=f"ops[{op.name}].inputs")
            for t in op.outputs:
                if t not in self.tensors:
                    raise TraceError(f"output tensor {t!r} is not defined", file=file, field=f"ops[{op.name}].outputs")
            for d in op.deps:
                if d not in self.ops:
                    raise TraceError(f"dependency {d!r} is not an op", file=file, field=f"ops[{op.name}].deps")
        g = self.graph()
        if not nx.is_directed_acyclic_graph(g):
            nodes = [e[0] for e in nx.find_cycle(g)]
            path = " -> ".join(nodes if len(nodes) <= 4 else [*nodes[:3], "...", nodes[-1]])
            raise TraceError(f"cycle of {len(nodes)} ops: {path} -> {nodes[0]}", file=file, field=f"ops[{nodes[0]}]")

    def subgraph(self, names: list[str]) -> OpGraph:
        """The named ops and every tensor they read or write."""
        sub = OpGraph(meta=self.meta)
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
