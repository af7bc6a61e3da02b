"""The trace file: exact round-trip of an OpGraph, and TraceErrors for malformed traces."""
from __future__ import annotations

import json

import pytest

from memsim.core.errors import TraceError
from memsim.workload import Op, OpGraph, Read, StepMeta, StepSpec, Tensor, build_step, model_config, read_trace, write_trace
from memsim.workload.trace import SCHEMA, VERSION, from_json, to_json


def small_graph() -> OpGraph:
    """x -> A -> a -> B -> b, with a control dependency C after A."""
    g = OpGraph(meta=StepMeta(model="hand", batch=2))
    g.add_tensor(Tensor("x", (2, 8), "bf16", "activation", 32))
    g.add_tensor(Tensor("w", (8, 8), "int4", "weight", 32))
    g.add_tensor(Tensor("a", (2, 8), "bf16", "activation", 32))
    g.add_tensor(Tensor("b", (2, 8), "bf16", "activation", 32))
    g.add_tensor(Tensor("kv", (2, 1, 4, 8), "fp8", "kv", 64))
    g.add_tensor(Tensor("c", (2, 8), "bf16", "activation", 32))
    g.add_op(Op("A", "matmul", 0, "bf16", 256, (Read("x", 32), Read("w", 32)), ("a",),
                (("k", 8), ("m", 2), ("n", 8))))
    g.add_op(Op("B", "elementwise", 0, "bf16", 16, (Read("a", 32),), ("b",), (("elements", 16),)))
    g.add_op(Op("C", "attention", 1, "bf16", 1024, (Read("b", 32), Read("kv", 16), Read("kv", 16)), ("c",),
                (("batch", 2), ("head_dim", 8), ("heads", 1), ("kv_heads", 1), ("kv_len", 4), ("q_len", 1)),
                deps=("A",)))
    return g


def trace_data(**changes) -> dict:
    data = to_json(small_graph())
    data.update(changes)
    return data


def write_json(tmp_path, data) -> object:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(data))
    return path


def assert_same_graph(a: OpGraph, b: OpGraph) -> None:
    assert list(a.tensors) == list(b.tensors)
    assert a.tensors == b.tensors
    assert list(a.ops) == list(b.ops)
    assert a.ops == b.ops
    assert a.meta == b.meta


def test_hand_built_graph_round_trips(tmp_path):
    g = small_graph()
    path = tmp_path / "sub" / "t.json"
    write_trace(g, path)
    back = read_trace(path)
    assert_same_graph(g, back)
    assert back.ops["C"].deps == ("A",)
    assert back.ops["A"].inputs[1] == Read("w", 32)
    assert back.tensors["kv"].shape == (2, 1, 4, 8)
    assert [o.name for o in back.order()] == [o.name for o in g.order()]


@pytest.mark.parametrize("build", [
    lambda: build_step(model_config("gpt2"), StepSpec.make("decode", batch=2, context=17, kv_dtype="int8")),
    lambda: build_step(model_config("gpt2"), StepSpec.make("prefill", prompt=9)),
    lambda: build_step(model_config("llama-3.1-8b"), StepSpec.make("decode", context=3, weight_dtype="int4")),
    lambda: build_step(model_config("bert-base"), StepSpec.make("prefill", prompt=5)),
])
def test_built_graph_round_trips(tmp_path, build):
    g = build()
    path = tmp_path / "t.json"
    write_trace(g, path)
    back = read_trace(path)
    assert_same_graph(g, back)
    assert back.total_flops() == g.total_flops()
    assert back.bytes_of("weight") == g.bytes_of("weight")
    # Writing the read-back graph gives the same file.
    again = tmp_path / "again.json"
    write_trace(back, again)
    assert again.read_text() == path.read_text()


def test_written_file_has_schema_and_version(tmp_path):
    path = tmp_path / "t.json"
    write_trace(small_graph(), path)
    data = json.loads(path.read_text())
    assert data["schema"] == SCHEMA == "memsim-trace"
    assert data["version"] == VERSION == 1
    assert [t["class"] for t in data["tensors"]] == ["activation", "weight", "activation", "activation", "kv",
                                                      "activation"]
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]  # no temporary files left behind


def test_cycle_through_tensors_is_refused(tmp_path):
    data = trace_data()
    # B now also feeds A: A reads b, B reads a.
    data["ops"][0]["inputs"].append({"tensor": "b", "bytes": 32})
    with pytest.raises(TraceError) as info:
        read_trace(write_json(tmp_path, data))
    assert "cycle" in str(info.value)
    assert str(tmp_path / "trace.json") in str(info.value)


def test_cycle_through_deps_is_refused(tmp_path):
    data = trace_data()
    data["ops"][0]["deps"] = ["C"]  # C already waits for A
    with pytest.raises(TraceError) as info:
        read_trace(write_json(tmp_path, data))
    assert "cycle" in str(info.value)


def test_self_dependency_is_a_cycle():
    data = trace_data()
    data["ops"][1]["deps"] = ["B"]
    with pytest.raises(TraceError, match="cycle"):
        from_json(data)


def test_an_op_that_reads_its_own_output_is_a_cycle(tmp_path):
    """Reading its own output is waiting for itself, as a dependency on itself is (issue 20: it was
    accepted, the self-edge dropped)."""
    data = trace_data()
    op = data["ops"][1]
    op["inputs"].append({"tensor": op["outputs"][0], "bytes": 4})
    with pytest.raises(TraceError) as info:
        read_trace(write_json(tmp_path, data))
    assert "cycle of 1 ops" in str(info.value) and f"ops[{op['name']}].inputs" in str(info.value)


def test_dangling_input_names_the_op(tmp_path):
    data = trace_data()
    data["ops"][1]["inputs"] = [{"tensor": "ghost", "bytes": 4}]
    with pytest.raises(TraceError) as info:
        read_trace(write_json(tmp_path, data))
    message = str(info.value)
    assert "ghost" in message
    assert info.value.field is not None and "B" in info.value.field
    assert "ops[B]" in message


def test_dangling_output_and_dependency_are_refused():
    data = trace_data()
    data["ops"][0]["outputs"] = ["nowhere"]
    with pytest.raises(TraceError, match="nowhere"):
        from_json(data)
    data = trace_data()
    data["ops"][2]["deps"] = ["Z"]
    with pytest.raises(TraceError) as info:
        from_json(data)
    assert "Z" in str(info.value) and "ops[C]" in str(info.value)


@pytest.mark.parametrize(("changes", "field"), [
    ({"schema": "chakra"}, "schema"),
    ({"schema": None}, "schema"),
    ({"version": 2}, "version"),
    ({"version": "1"}, "version"),
    ({"version": None}, "version"),
])
def test_wrong_schema_or_version_is_refused(tmp_path, changes, field):
    data = trace_data(**changes)
    with pytest.raises(TraceError) as info:
        read_trace(write_json(tmp_path, data))
    assert info.value.field == field
    assert str(tmp_path / "trace.json") in str(info.value)


def test_missing_file_is_a_trace_error(tmp_path):
    path = tmp_path / "absent.json"
    with pytest.raises(TraceError) as info:
        read_trace(path)
    assert str(path) in str(info.value)


def test_invalid_json_is_a_trace_error(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"schema": "memsim-trace", ')
    with pytest.raises(TraceError) as info:
        read_trace(path)
    assert str(path) in str(info.value)


def test_not_an_object_is_a_trace_error():
    with pytest.raises(TraceError):
        from_json([1, 2, 3])


@pytest.mark.parametrize(("mutate", "needle"), [
    (lambda d: d["ops"][0].pop("flops"), "ops[A].flops"),
    (lambda d: d["ops"][0].update(flops="many"), "ops[A].flops"),
    (lambda d: d["ops"][0].update(flops=True), "ops[A].flops"),
    (lambda d: d["ops"][0].update(flops=-1), "ops[A].flops"),
    (lambda d: d["ops"][0].update(kind="conv"), "ops[A].kind"),
    (lambda d: d["tensors"][1].pop("bytes"), "tensors[w].bytes"),
    (lambda d: d["tensors"][1].update({"class": "param"}), "tensors[w]"),
    (lambda d: d["ops"][1]["inputs"][0].update(bytes=-4), "ops[B]"),
    (lambda d: d["ops"][1].update(dims={"elements": 1.5}), "ops[B].dims"),
    (lambda d: d["tensors"].append(dict(d["tensors"][0])), "tensors[x]"),
    (lambda d: d["ops"].append(dict(d["ops"][0])), "ops[A]"),
    (lambda d: d.pop("ops"), "ops"),
])
def test_malformed_entries_name_their_field(mutate, needle):
    data = trace_data()
    mutate(data)
    with pytest.raises(TraceError) as info:
        from_json(data, "x.json")
    assert needle in str(info.value)
    assert str(info.value).startswith("x.json: ")
