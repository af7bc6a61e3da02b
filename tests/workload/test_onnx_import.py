"""ONNX importer: a GPT-2-style graph built with onnx.helper imports and simulates."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from memsim import simulate_graph  # noqa: E402
from memsim.core.errors import ConfigError, MemsimError  # noqa: E402
from memsim.workload.importers.onnx_import import import_onnx  # noqa: E402

T, H, HEADS, VOCAB, LAYERS = 16, 64, 4, 100, 2


def _w(name, *shape):
    return numpy_helper.from_array(np.zeros(shape, dtype=np.float16), name)


def gpt2_like(path, t=T):
    nodes, inits = [], [_w("wte", VOCAB, H)]
    nodes.append(helper.make_node("Gather", ["wte", "ids"], ["x0"], name="embed"))
    x = "x0"
    for i in range(LAYERS):
        p = f"l{i}"
        inits += [_w(f"{p}.ln1.g", H), _w(f"{p}.ln1.b", H), _w(f"{p}.qkv", H, 3 * H), _w(f"{p}.proj", H, H),
                  _w(f"{p}.ln2.g", H), _w(f"{p}.ln2.b", H), _w(f"{p}.fc", H, 4 * H), _w(f"{p}.out", 4 * H, H)]
        shape4 = numpy_helper.from_array(np.array([1, t, HEADS, H // HEADS], dtype=np.int64), f"{p}.shape4")
        shape2 = numpy_helper.from_array(np.array([1, t, H], dtype=np.int64), f"{p}.shape2")
        split = numpy_helper.from_array(np.array([H, H, H], dtype=np.int64), f"{p}.split")
        inits += [shape4, shape2, split]
        nodes += [
            helper.make_node("LayerNormalization", [x, f"{p}.ln1.g", f"{p}.ln1.b"], [f"{p}.h"], axis=-1),
            helper.make_node("MatMul", [f"{p}.h", f"{p}.qkv"], [f"{p}.qkv_out"]),
            helper.make_node("Split", [f"{p}.qkv_out", f"{p}.split"], [f"{p}.q", f"{p}.k", f"{p}.v"], axis=-1),
        ]
        for n in "qkv":
            nodes += [helper.make_node("Reshape", [f"{p}.{n}", f"{p}.shape4"], [f"{p}.{n}4"]),
                      helper.make_node("Transpose", [f"{p}.{n}4"], [f"{p}.{n}t"],
                                       perm=[0, 2, 3, 1] if n == "k" else [0, 2, 1, 3])]
        nodes += [
            helper.make_node("MatMul", [f"{p}.qt", f"{p}.kt"], [f"{p}.scores"]),
            helper.make_node("Softmax", [f"{p}.scores"], [f"{p}.probs"], axis=-1),
            helper.make_node("MatMul", [f"{p}.probs", f"{p}.vt"], [f"{p}.ctx"]),
            helper.make_node("Transpose", [f"{p}.ctx"], [f"{p}.ctx_t"], perm=[0, 2, 1, 3]),
            helper.make_node("Reshape", [f"{p}.ctx_t", f"{p}.shape2"], [f"{p}.attn"]),
            helper.make_node("MatMul", [f"{p}.attn", f"{p}.proj"], [f"{p}.o"]),
            helper.make_node("Add", [x, f"{p}.o"], [f"{p}.x1"]),
            helper.make_node("LayerNormalization", [f"{p}.x1", f"{p}.ln2.g", f"{p}.ln2.b"], [f"{p}.h2"], axis=-1),
            helper.make_node("MatMul", [f"{p}.h2", f"{p}.fc"], [f"{p}.up"]),
            helper.make_node("Gelu", [f"{p}.up"], [f"{p}.act"], domain="com.microsoft"),
            helper.make_node("MatMul", [f"{p}.act", f"{p}.out"], [f"{p}.down"]),
            helper.make_node("Add", [f"{p}.x1", f"{p}.down"], [f"{p}.x2"]),
        ]
        x = f"{p}.x2"
    nodes.append(helper.make_node("MatMul", [x, "wte_t"], ["logits"]))
    inits.append(_w("wte_t", H, VOCAB))
    graph = helper.make_graph(nodes, "gpt2-like", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, t])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT16, [1, t, VOCAB])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)])
    onnx.save(model, str(path))
    return path


def analytical_matmul_flops(t=T):
    per_layer = 2 * t * H * 3 * H + 2 * HEADS * t * t * (H // HEADS) * 2 + 2 * t * H * H + 2 * 2 * t * H * 4 * H
    return LAYERS * per_layer + 2 * t * H * VOCAB


def test_gpt2_like_onnx_imports_and_simulates(tmp_path):
    graph, report = import_onnx(gpt2_like(tmp_path / "m.onnx"))
    matmuls = [op for op in graph if op.kind == "matmul"]
    assert len(matmuls) == LAYERS * 6 + 1
    assert sum(op.flops for op in matmuls) == analytical_matmul_flops()
    assert {op.kind for op in graph} == {"matmul", "elementwise", "norm", "embedding"}
    assert report.dropped["Reshape"] == LAYERS * 4 and report.dropped["Transpose"] == LAYERS * 4
    assert "Split" in report.dropped and not report.unmapped
    weights = sum(t.bytes for t in graph.tensors.values() if t.klass == "weight")
    assert weights > 2 * LAYERS * 12 * H * H
    s = simulate_graph("h100-sxm", graph).summary
    assert s.flops_total == graph.total_flops() and s.step_time_s >= s.roofline_s > 0


def test_unknown_ops_are_reported_and_bad_files_are_errors(tmp_path):
    path = gpt2_like(tmp_path / "m.onnx")
    model = onnx.load(str(path))
    model.graph.node.insert(1, helper.make_node("Celu", ["x0"], ["x0c"]))
    onnx.save(model, str(path))
    _, report = import_onnx(path)
    assert report.unmapped == {"Celu": 1}
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not onnx")
    with pytest.raises(ConfigError, match=r"bad.onnx"):
        import_onnx(bad)


def test_an_empty_onnx_graph_is_refused(tmp_path):
    path = tmp_path / "empty.onnx"
    onnx.save(helper.make_model(helper.make_graph([], "empty", [], [])), str(path))
    with pytest.raises(MemsimError) as info:
        import_onnx(path)
    assert info.value.file == str(path) and info.value.field == "ops" and "holds no ops" in info.value.message


def test_an_op_memsim_refuses_names_the_onnx_file(tmp_path):
    # A symbolic dimension of 10^31 makes a tensor past memsim's range: the tensor's own
    # check refuses it, and the error names the model file.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, "seq"])
    w = numpy_helper.from_array(np.zeros((3, 4), dtype=np.float16), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g", [x],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 4])], [w])
    path = tmp_path / "huge.onnx"
    onnx.save(helper.make_model(graph), str(path))
    with pytest.raises(MemsimError) as info:
        import_onnx(path, {"seq": 10**31})
    assert info.value.file == str(path) and "out of range" in info.value.message


def test_weights_stored_beside_the_model_are_never_read(monkeypatch, tmp_path):
    """Issue 20: a 200-byte model whose initializer points at a large sparse file: only shapes are
    read (the importer loaded the weights, 3 GiB in 10 s)."""
    import onnx
    from onnx import external_data_helper

    weight = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[65536, 16384])
    weight.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "weights.bin"), ("offset", "0"), ("length", str(4 * 65536 * 16384))):
        entry = weight.external_data.add()
        entry.key, entry.value = key, value
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 65536])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 16384])
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [x], [y], [weight])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph), str(path))
    with open(tmp_path / "weights.bin", "wb") as fh:
        fh.truncate(4 * 65536 * 16384)  # 4 GiB, sparse: nothing on disk
    assert path.stat().st_size < 1000

    def never(*args, **kwargs):
        raise AssertionError("the external weights were loaded")

    monkeypatch.setattr(external_data_helper, "load_external_data_for_model", never)
    monkeypatch.setattr(onnx, "load_external_data_for_model", never, raising=False)
    g, _ = import_onnx(path)
    [op] = g.ops.values()
    assert op.flops == 2 * 8 * 65536 * 16384 and g.tensors["w"].bytes == 4 * 65536 * 16384


def test_a_model_of_more_nodes_than_the_op_limit_is_refused_before_shape_inference(monkeypatch, tmp_path):
    from memsim.core import limits

    path = gpt2_like(tmp_path / "m.onnx")
    monkeypatch.setattr(limits, "MAX_OPS", 1)
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", lambda m: pytest.fail("shapes inferred"))
    with pytest.raises(ConfigError) as info:
        import_onnx(path)
    assert info.value.field == "graph.node" and info.value.file == str(path) and "exceed" in info.value.message


@pytest.mark.parametrize("where", ["/etc/passwd", "../outside.bin", "sub/../../outside.bin", "link/w.bin"])
def test_weights_said_to_lie_outside_the_models_folder_are_refused(tmp_path, where):
    """Deliverable 7 of issue 42: no importer names a file outside the model's own folder; a location
    that is absolute, climbs out with ``..`` or leaves through a link is one line naming the tensor."""
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "link").symlink_to(tmp_path / "elsewhere")
    weight = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4, 4])
    weight.data_location = TensorProto.EXTERNAL
    entry = weight.external_data.add()
    entry.key, entry.value = "location", where
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    path = tmp_path / "model" / "m.onnx"
    onnx.save(helper.make_model(helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [x], [y],
                                                  [weight])), str(path))
    with pytest.raises(ConfigError) as info:
        import_onnx(path)
    assert info.value.field == "graph.initializer" and "outside the model's folder" in info.value.message
    entry.value = "weights/w.bin"  # inside: imported, and never read
    onnx.save(helper.make_model(helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [x], [y],
                                                  [weight])), str(path))
    assert len(import_onnx(path)[0].ops) == 1
