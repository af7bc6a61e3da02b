"""Chakra importer: an execution trace written here round-trips into memsim and simulates."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("google.protobuf", reason="the chakra extra (protobuf) is not installed")

from memsim import simulate_graph
from memsim.core.errors import ConfigError, MemsimError
from memsim.workload import read_trace, write_trace
from memsim.workload.importers.chakra_import import import_chakra
from memsim.workload.importers.chakra_schema import frame, schema, split

pb = schema()


def _node(i, name, kind, data=(), ctrl=(), **attrs):
    n = pb.Node(id=i, name=name, type=kind)
    n.data_deps.extend(data)
    n.ctrl_deps.extend(ctrl)
    for key, value in attrs.items():
        field = {"num_ops": "int64_val", "tensor_size": "uint64_val", "comm_type": "int64_val",
                 "comm_size": "int64_val"}[key]
        n.attr.append(pb.AttributeProto(name=key, **{field: value}))
    return n


def write_et(path):
    nodes = [
        _node(0, "load_weights", pb.MEM_LOAD_NODE, tensor_size=64 << 20),
        _node(1, "gemm", pb.COMP_NODE, data=[0], num_ops=2 * 4096 * 4096 * 64, tensor_size=32 << 20),
        _node(2, "allreduce", pb.COMM_COLL_NODE, data=[1], comm_type=pb.ALL_REDUCE, comm_size=1 << 20),
        _node(3, "gelu", pb.COMP_NODE, data=[2], num_ops=4096 * 64 * 8, tensor_size=1 << 20),
        _node(4, "store", pb.MEM_STORE_NODE, data=[3], ctrl=[2], tensor_size=1 << 20),
        _node(5, "send", pb.COMM_SEND_NODE, data=[4], tensor_size=1 << 20),
    ]
    with open(path, "wb") as fh:
        fh.write(frame(pb.GlobalMetadata(version="0.0.4")))
        for n in nodes:
            fh.write(frame(n))
    return path


def test_chakra_trace_round_trips(tmp_path):
    graph, report = import_chakra(write_et(tmp_path / "et.0.et"), ranks=4)
    assert report.mapped == {"COMP_NODE": 2, "MEM_LOAD_NODE": 1, "MEM_STORE_NODE": 1, "COMM_COLL_NODE": 1}
    assert report.unmapped == {"COMM_SEND_NODE": 1}
    kinds = {op.name: op.kind for op in graph}
    assert kinds == {"n0.load_weights": "compute", "n1.gemm": "compute", "n2.allreduce": "allreduce",
                     "n3.gelu": "compute", "n4.store": "compute"}
    assert graph.ops["n1.gemm"].flops == 2 * 4096 * 4096 * 64
    assert graph.ops["n4.store"].deps == ("n2.allreduce",)  # a control dependency
    assert [r.tensor for r in graph.ops["n3.gelu"].inputs] == ["n2.allreduce.out"]  # a data dependency
    assert graph.ops["n2.allreduce"].dim("bytes") == 1 << 20 and graph.ops["n2.allreduce"].dim("ranks") == 4
    write_trace(graph, tmp_path / "t.json")
    back = read_trace(tmp_path / "t.json")
    assert back.ops == graph.ops and back.tensors == graph.tensors
    s = simulate_graph("h100-sxm", back).summary
    assert s.chips == 4 and s.exposed_comm_s > 0 and s.flops_total == graph.total_flops()
    assert s.bytes_per_level["hbm"].total >= 64 << 20


def test_bad_chakra_files(tmp_path):
    bad = tmp_path / "bad.et"
    bad.write_bytes(b"")
    with pytest.raises(ConfigError, match=r"bad.et"):
        import_chakra(bad)
    with pytest.raises(ConfigError, match="file not found"):
        import_chakra(tmp_path / "missing.et")


def _et(path, nodes, meta=True):
    with open(path, "wb") as fh:
        if meta:
            fh.write(frame(pb.GlobalMetadata(version="0.0.4")))
        for n in nodes:
            fh.write(frame(n))
    return path


@pytest.mark.parametrize(("nodes", "field", "needle"), [
    ([], "ops", "holds no ops"),
    ([_node(0, "send", pb.COMM_SEND_NODE)], "ops", "holds no ops"),  # nothing it can map
    ([_node(0, "a", pb.COMP_NODE, num_ops=1), _node(0, "b", pb.COMP_NODE, num_ops=2)], "nodes[0]", "given twice"),
    ([_node(0, "a", pb.COMP_NODE, data=[1], num_ops=1), _node(1, "b", pb.COMP_NODE, ctrl=[0], num_ops=2)],
     "nodes[0]", "dependency cycle: 0 -> 1 -> 0"),
    ([_node(0, "a", pb.COMP_NODE, data=[7], num_ops=1)], "nodes[0]", "missing node 7"),
    ([_node(0, "ar", pb.COMM_COLL_NODE, comm_type=42, comm_size=8)], "nodes[0].comm_type", "unknown comm_type 42"),
    ([_node(0, "a", pb.COMP_NODE, num_ops=-5)], "nodes[0].num_ops", "non-negative"),
    ([_node(0, "a", 77, num_ops=5)], "nodes[0].type", "unknown type 77"),
])
def test_chakra_traces_run_would_reject_are_refused(tmp_path, nodes, field, needle):
    path = _et(tmp_path / "bad.et", nodes)
    with pytest.raises(MemsimError) as info:
        import_chakra(path)
    assert info.value.file == str(path) and info.value.field == field and needle in info.value.message


@pytest.mark.parametrize("data", [b"hello, this is not protobuf at all\n" * 4, b"\xff" * 11, b"\x05ab"])
def test_a_file_that_is_not_an_execution_trace_is_one_line(tmp_path, data):
    path = tmp_path / "text.et"
    path.write_bytes(data)
    with pytest.raises(ConfigError, match="not a Chakra execution trace") as info:
        import_chakra(path)
    assert info.value.file == str(path) and "\n" not in str(info.value)


def test_a_truncated_trace_is_refused(tmp_path):
    path = write_et(tmp_path / "et.0.et")
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(ConfigError, match="runs past the end"):
        import_chakra(path)


def test_nodes_are_taken_in_dependency_order_and_waits_pass_through_skipped_nodes(tmp_path):
    path = _et(tmp_path / "fwd.et", [
        _node(0, "late", pb.COMP_NODE, data=[1], num_ops=10),  # depends on a node later in the file
        _node(1, "early", pb.COMP_NODE, num_ops=5, tensor_size=64),
        _node(2, "send", pb.COMM_SEND_NODE, data=[0]),
        _node(3, "after_send", pb.COMP_NODE, data=[2], num_ops=1),
    ])
    graph, report = import_chakra(path)
    assert [op.name for op in graph] == ["n1.early", "n0.late", "n3.after_send"]
    assert [r.tensor for r in graph.ops["n0.late"].inputs] == ["n1.early.out"]
    assert graph.ops["n3.after_send"].deps == ("n0.late",)  # the skipped send's own wait
    assert report.unmapped == {"COMM_SEND_NODE": 1}


def test_a_trace_of_more_nodes_than_the_op_limit_is_refused_as_it_is_read(tmp_path, monkeypatch):
    from memsim.core import limits

    path = tmp_path / "et.0.et"
    write_et(path)
    monkeypatch.setattr(limits, "MAX_OPS", 2)
    with pytest.raises(ConfigError) as info:
        import_chakra(path)
    assert info.value.field == "nodes" and "3 nodes exceed memsim's limit of 2" in info.value.message


def test_a_trace_written_by_mlc_chakra_reads_with_the_declared_schema():
    """data/mlc_chakra_1.0.et was written by mlc-chakra 1.0's et_def_pb2 and protolib.encodeMessage:
    the schema memsim declares reads Chakra's own files, field for field."""
    path = Path(__file__).parent / "data" / "mlc_chakra_1.0.et"
    graph, report = import_chakra(path, ranks=2)
    assert graph.meta.chakra_version == "0.0.4"
    assert report.mapped == {"MEM_LOAD_NODE": 1, "COMP_NODE": 2, "COMM_COLL_NODE": 1}
    assert graph.ops["n1.gemm"].flops == 2 * 1024 ** 3
    assert graph.ops["n2.ar"].kind == "reduce_scatter" and dict(graph.ops["n2.ar"].dims)["bytes"] == 1 << 20
    assert graph.ops["n3.tail"].deps == ("n0.load",)


def test_a_framed_trace_splits_back_into_its_messages():
    messages = [pb.GlobalMetadata(version="x" * 300), pb.Node(id=2 ** 40, name="n")]
    assert list(split(frame(*messages), "f")) == [m.SerializeToString() for m in messages]
