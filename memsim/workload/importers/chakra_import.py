"""Chakra importer (extra ``chakra``): MLCommons execution traces, read with Chakra's schema (chakra_schema).

COMP nodes become ``compute`` ops (their ``num_ops`` at matrix rate, their ``tensor_size``
streamed), MEM_LOAD / MEM_STORE nodes become ``compute`` ops that only move bytes, and
COMM_COLL nodes become collectives (all-reduce, all-gather, reduce-scatter, all-to-all) of
``comm_size`` bytes over ``ranks`` chips. Data dependencies become tensors passed from
producer to consumer; control dependencies become ``deps``. Other nodes are reported, and what
depends on one of them waits for what it depended on. Nodes are taken in dependency order; a node
id given twice, a dependency on no node, a cycle, or an unknown node or collective type is an error.
"""
from __future__ import annotations

from pathlib import Path

import networkx as nx

from memsim.core import limits
from memsim.core.errors import ConfigError, about_file
from memsim.core.files import read_bytes
from memsim.workload.graph import Op, OpGraph, Read, Tensor
from memsim.workload.importers import IMPORTERS, OUTPUT, Importer, ImportReport, Option
from memsim.workload.importers.chakra_schema import schema, split
from memsim.workload.meta import StepMeta

COLLECTIVE = {"ALL_REDUCE": "allreduce", "ALL_GATHER": "allgather", "REDUCE_SCATTER": "reduce_scatter",
              "REDUCE_SCATTER_BLOCK": "reduce_scatter", "ALL_TO_ALL": "alltoall"}


def _attrs(node) -> dict:
    out = {}
    for a in node.attr:
        kind = a.WhichOneof("value")
        if kind is not None:
            out[a.name] = getattr(a, kind)
    return out


def read_nodes(path: Path):
    pb = schema()
    from google.protobuf.message import DecodeError

    file = str(path)
    messages = split(read_bytes(Path(path)), file)
    try:
        meta = pb.GlobalMetadata.FromString(next(messages))
    except StopIteration:
        raise ConfigError("not a Chakra execution trace (no global metadata)", file=file) from None
    except DecodeError as exc:
        raise ConfigError(f"not a Chakra execution trace: {exc}", file=file) from None
    nodes = []
    for i, message in enumerate(messages):
        limits.check(i + 1, limits.MAX_OPS, "nodes", "nodes", file)  # each would be an op
        try:
            nodes.append(pb.Node.FromString(message))
        except DecodeError as exc:
            raise ConfigError(f"not a Chakra execution trace: node {i}: {exc}", file=file) from None
    return pb, meta, nodes


def _order(nodes: list, file: str) -> list:
    """The nodes in an order where each comes after the nodes it depends on (file order where free);
    a node id given twice, a dependency on no node and a cycle are errors."""
    by_id = {}
    for n in nodes:
        if n.id in by_id:
            raise ConfigError(f"node id {n.id} is given twice", file=file, field=f"nodes[{n.id}]")
        by_id[n.id] = n
    g: nx.DiGraph[int] = nx.DiGraph()
    g.add_nodes_from(by_id)
    for n in nodes:
        for dep in [*n.data_deps, *n.ctrl_deps]:
            if dep not in by_id:
                raise ConfigError(f"dependency on missing node {dep}", file=file, field=f"nodes[{n.id}]")
            g.add_edge(dep, n.id)
    if not nx.is_directed_acyclic_graph(g):
        cycle = [edge[0] for edge in nx.find_cycle(g)]
        raise ConfigError(f"dependency cycle: {' -> '.join(map(str, [*cycle, cycle[0]]))}", file=file,
                          field=f"nodes[{cycle[0]}]")
    index = {n.id: i for i, n in enumerate(nodes)}
    return [by_id[i] for i in nx.lexicographical_topological_sort(g, key=index.__getitem__)]


def _size(attrs: dict, key: str, node: int, file: str) -> int:
    value = attrs.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"expected a non-negative integer, got {value!r}", file=file, field=f"nodes[{node}].{key}")
    return value


def _enum_name(enum, value: int, what: str, node: int, file: str) -> str:
    try:
        return enum.Name(value)
    except ValueError:
        raise ConfigError(f"unknown {what} {value}", file=file, field=f"nodes[{node}].{what}") from None


def import_chakra(path: Path, ranks: int = 1) -> tuple[OpGraph, ImportReport]:
    pb, meta, nodes = read_nodes(path)
    file = str(path)
    with about_file(file):  # a node whose sizes make no op (memsim's own checks)
        return _convert(pb, meta, _order(nodes, file), file, ranks)


def _convert(pb, meta, nodes: list, file: str, ranks: int) -> tuple[OpGraph, ImportReport]:
    g = OpGraph(meta=StepMeta(model=Path(file).stem, phase="imported", source="chakra", tp=ranks,
                              chakra_version=meta.version))
    report = ImportReport()
    names: dict[int, str] = {}
    kept: set[int] = set()
    # A node that is not mapped passes its dependencies on: what waits for it waits for them.
    through: dict[int, tuple[str, ...]] = {}

    def after(deps) -> tuple[str, ...]:
        out: dict[str, None] = {}
        for d in deps:
            out.update(dict.fromkeys((names[d],) if d in kept else through[d]))
        return tuple(out)

    for n in nodes:
        kind = _enum_name(pb.NodeType, n.type, "type", n.id, file)
        names[n.id] = f"n{n.id}.{n.name or kind}"
        attrs = _attrs(n)
        size = _size(attrs, "tensor_size" if "tensor_size" in attrs else "comm_size", n.id, file)
        reads = tuple(Read(f"{names[d]}.out", g.tensors[f"{names[d]}.out"].bytes) for d in n.data_deps if d in kept)
        read_from = {names[d] for d in n.data_deps if d in kept}
        deps = tuple(d for d in after([*n.ctrl_deps, *(d for d in n.data_deps if d not in kept)]) if d not in read_from)
        out = f"{names[n.id]}.out"
        if kind == "COMP_NODE":
            op = Op(names[n.id], "compute", -1, "bf16", _size(attrs, "num_ops", n.id, file), reads, (out,),
                    (("bytes", size),), deps)
        elif kind in ("MEM_LOAD_NODE", "MEM_STORE_NODE"):
            op = Op(names[n.id], "compute", -1, "bf16", 0, reads, (out,), (("bytes", size),), deps)
        elif kind == "COMM_COLL_NODE":
            comm = _enum_name(pb.CollectiveCommType, _size(attrs, "comm_type", n.id, file), "comm_type", n.id, file)
            if comm not in COLLECTIVE:
                report.note(report.unmapped, f"COMM_COLL_NODE:{comm}")
                through[n.id] = after([*n.data_deps, *n.ctrl_deps])
                continue
            op = Op(names[n.id], COLLECTIVE[comm], -1, "bf16", 0, reads, (out,), (("bytes", size), ("ranks", ranks)),
                    deps)
        else:
            report.note(report.unmapped, kind)
            through[n.id] = after([*n.data_deps, *n.ctrl_deps])
            continue
        g.add_tensor(Tensor(out, (max(1, size),), "int8", "activation", size))
        g.add_op(op)
        kept.add(n.id)
        report.note(report.mapped, kind)
    g.validate(file)
    return g, report


IMPORTERS.add("chakra", Importer(
    help="Import an MLCommons Chakra execution trace (COMP, MEM and COMM nodes, data and control deps).",
    options=(Option(name="path", metavar="TRACE_FILE", kind=Path), OUTPUT,
             Option(name="ranks", flag="--ranks", kind=int, default=1, least=1, limit=limits.MAX_RANKS,
                    help="chips its collectives span")),
    reads="path", run=import_chakra))
