"""Chakra importer (extra ``chakra``): MLCommons execution traces through ``mlc-chakra``.

COMP nodes become ``compute`` ops (their ``num_ops`` at matrix rate, their ``tensor_size``
streamed), MEM_LOAD / MEM_STORE nodes become ``compute`` ops that only move bytes, and
COMM_COLL nodes become collectives (all-reduce, all-gather, reduce-scatter, all-to-all) of
``comm_size`` bytes over ``ranks`` chips. Data dependencies become tensors passed from
producer to consumer; control dependencies become ``deps``. Other nodes are reported.
"""
from __future__ import annotations

from pathlib import Path

from memsim.errors import ConfigError
from memsim.workload.graph import Op, OpGraph, Read, Tensor
from memsim.workload.importers import ImportReport

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
    try:
        from chakra.schema.protobuf import et_def_pb2 as pb
        from chakra.src.third_party.utils.protolib import decodeMessage
    except ImportError:
        raise ConfigError("the Chakra importer needs the chakra extra (pip install '.[chakra]')",
                          field="import") from None
    if not Path(path).is_file():
        raise ConfigError("file not found", file=str(path))
    nodes = []
    with open(path, "rb") as fh:
        meta = pb.GlobalMetadata()
        if not decodeMessage(fh, meta):
            raise ConfigError("not a Chakra execution trace (no global metadata)", file=str(path))
        while True:
            node = pb.Node()
            try:
                if not decodeMessage(fh, node):
                    break
            except Exception as exc:  # protobuf raises DecodeError and friends
                raise ConfigError(f"not a Chakra execution trace: {exc}", file=str(path)) from None
            nodes.append(node)
    return pb, meta, nodes


def import_chakra(path: Path, ranks: int = 1) -> tuple[OpGraph, ImportReport]:
    pb, meta, nodes = read_nodes(path)
    file = str(path)
    g = OpGraph(meta={"model": Path(file).stem, "phase": "imported", "source": "chakra", "tp": ranks,
                      "chakra_version": meta.version})
    report = ImportReport()
    ids = {n.id for n in nodes}
    names = {n.id: f"n{n.id}.{n.name or pb.NodeType.Name(n.type)}" for n in nodes}
    kept: set[int] = set()
    for n in nodes:
        kind = pb.NodeType.Name(n.type)
        attrs = _attrs(n)
        size = int(attrs.get("tensor_size", attrs.get("comm_size", 0)))
        out = g.add_tensor(Tensor(f"{names[n.id]}.out", (max(1, size),), "int8", "activation", size)).name
        for dep in list(n.data_deps) + list(n.ctrl_deps):
            if dep not in ids:
                raise ConfigError(f"dependency on missing node {dep}", file=file, field=f"nodes[{n.id}]")
        reads = tuple(Read(f"{names[d]}.out", g.tensors[f"{names[d]}.out"].bytes) for d in n.data_deps
                      if d in kept and f"{names[d]}.out" in g.tensors)
        deps = tuple(names[d] for d in n.ctrl_deps if d in kept)
        if kind == "COMP_NODE":
            op = Op(names[n.id], "compute", -1, "bf16", int(attrs.get("num_ops", 0)), reads, (out,),
                    (("bytes", size),), deps)
        elif kind in ("MEM_LOAD_NODE", "MEM_STORE_NODE"):
            op = Op(names[n.id], "compute", -1, "bf16", 0, reads, (out,), (("bytes", size),), deps)
        elif kind == "COMM_COLL_NODE":
            comm = pb.CollectiveCommType.Name(int(attrs.get("comm_type", 0)))
            if comm not in COLLECTIVE:
                report.note(report.unmapped, f"COMM_COLL_NODE:{comm}")
                continue
            op = Op(names[n.id], COLLECTIVE[comm], -1, "bf16", 0, reads, (out,), (("bytes", size), ("ranks", ranks)),
                    deps)
        else:
            report.note(report.unmapped, kind)
            continue
        g.add_op(op)
        kept.add(n.id)
        report.note(report.mapped, kind)
    g.validate(file)
    return g, report
