"""Binary inputs of the importers: a tiny ONNX model and a tiny Chakra trace, and Hypothesis
strategies that damage their protobuf fields and then, now and then, their bytes.

Both extras are optional: without onnx there are no ONNX seeds (the kind is skipped), and
without protobuf the Chakra kind feeds random bytes.
"""
from __future__ import annotations

import math

from hypothesis import strategies as st

from . import vocab
from .mutate import text_mutation

T, H, HEADS, VOCAB = 4, 8, 2, 16
ONNX_TYPES = (*vocab.onnx_op_types(), "Conv", "Foo", "")  # what the importer maps or drops, then what it skips
ONNX_OPS = ("op_type", "op_type", "domain", "drop_input", "add_input", "rename_input", "rename_output", "drop_node",
            "dup_node", "attr", "init_dims", "init_dtype", "drop_init", "input_dim", "input_dtype", "drop_graph_input",
            "drop_output", "opset", "ir_version", "value_info")


def onnx_seeds() -> dict[str, bytes]:
    try:
        import numpy as np
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return {}

    def w(name, *shape):
        return numpy_helper.from_array(np.zeros(shape, dtype=np.float16), name)

    def i64(name, values):
        return numpy_helper.from_array(np.array(values, dtype=np.int64), name)

    def model(seq) -> bytes:
        inits = [w("wte", VOCAB, H), w("g", H), w("b", H), w("qkv", H, 3 * H), w("proj", H, H), w("head", H, VOCAB),
                 w("bias", VOCAB), i64("split", [H, H, H]), i64("shape4", [1, T, HEADS, H // HEADS]),
                 i64("shape2", [T, H])]
        nodes = [helper.make_node("Gather", ["wte", "ids"], ["x"], name="embed"),
                 helper.make_node("LayerNormalization", ["x", "g", "b"], ["h"], axis=-1, name="ln"),
                 helper.make_node("MatMul", ["h", "qkv"], ["qkv_out"], name="qkv_mm"),
                 helper.make_node("Split", ["qkv_out", "split"], ["q", "k", "v"], axis=-1, name="split")]
        for n in "qkv":
            nodes += [helper.make_node("Reshape", [n, "shape4"], [f"{n}4"], name=f"{n}_reshape"),
                      helper.make_node("Transpose", [f"{n}4"], [f"{n}t"], perm=[0, 2, 3, 1] if n == "k" else
                                       [0, 2, 1, 3], name=f"{n}_transpose")]
        nodes += [helper.make_node("MatMul", ["qt", "kt"], ["scores"], name="scores"),
                  helper.make_node("Softmax", ["scores"], ["probs"], axis=-1, name="softmax"),
                  helper.make_node("MatMul", ["probs", "vt"], ["ctx"], name="ctx"),
                  helper.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3], name="ctx_transpose"),
                  helper.make_node("Reshape", ["ctx_t", "shape2"], ["attn"], name="attn_reshape"),
                  helper.make_node("MatMul", ["attn", "proj"], ["o"], name="proj_mm"),
                  helper.make_node("Gemm", ["o", "head", "bias"], ["logits"], name="lm_head")]
        graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, seq])],
                                  [helper.make_tensor_value_info("logits", TensorProto.FLOAT16, [T, VOCAB])], inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString()

    return {"static": model(T), "symbolic": model("seq")}


def _names(graph) -> list[str]:
    found = {i.name for i in graph.initializer} | {i.name for i in graph.input}
    for n in graph.node:
        found |= set(n.input) | set(n.output)
    return [*sorted(found), "ghost", ""]


@st.composite
def onnx_mutant(draw, seed: bytes) -> tuple[bytes, list[str]]:
    import onnx
    from onnx import helper

    m = onnx.ModelProto()
    m.ParseFromString(seed)
    g, recipe = m.graph, []

    def pick(seq):
        return seq[draw(st.integers(0, len(seq) - 1))] if len(seq) else None

    for _ in range(draw(st.sampled_from((0, 1, 1, 2, 3)))):
        op = draw(st.sampled_from(ONNX_OPS))
        node, names = pick(g.node), _names(g)
        if op == "op_type" and node is not None:
            node.op_type = draw(st.sampled_from(ONNX_TYPES))
            recipe.append(f"node {node.name}: op_type {node.op_type!r}")
        elif op == "domain" and node is not None:
            node.domain = draw(st.sampled_from(("com.microsoft", "ai.onnx.ml", "bogus", "")))
            recipe.append(f"node {node.name}: domain {node.domain!r}")
        elif op == "drop_input" and node is not None and node.input:
            k = draw(st.integers(0, len(node.input) - 1))
            recipe.append(f"node {node.name}: drop input {k} ({node.input[k]})")
            del node.input[k]
        elif op in ("add_input", "rename_input") and node is not None:
            name = draw(st.sampled_from(names))
            if op == "add_input" or not node.input:
                node.input.append(name)
            else:
                node.input[draw(st.integers(0, len(node.input) - 1))] = name
            recipe.append(f"node {node.name}: {op} {name!r}")
        elif op == "rename_output" and node is not None and node.output:
            name = draw(st.sampled_from(names))
            node.output[draw(st.integers(0, len(node.output) - 1))] = name
            recipe.append(f"node {node.name}: output renamed {name!r}")
        elif op == "drop_node" and node is not None:
            recipe.append(f"drop node {node.name}")
            g.node.remove(node)
        elif op == "dup_node" and node is not None:
            g.node.append(node)
            recipe.append(f"duplicate node {node.name}")
        elif op == "attr" and node is not None:
            key = draw(st.sampled_from(("axis", "perm", "transA", "transB", "alpha", "epsilon")))
            value = draw(st.sampled_from((-100, 100, 5, 0, 1, [5, 0], [0, 0, 0, 0], [], 1.5, "x", math.nan)))
            kept = [a for a in node.attribute if a.name != key]
            del node.attribute[:]
            node.attribute.extend([*kept, helper.make_attribute(key, value)] if value != [] else kept)
            recipe.append(f"node {node.name}: attribute {key} = {value!r}")
        elif op in ("init_dims", "init_dtype", "drop_init") and len(g.initializer):
            init = pick(g.initializer)
            if op == "init_dims":
                dims = draw(st.sampled_from(([], [0], [-1], [2 ** 40], [3, 3, 3, 3], [1] * 9, [2 ** 31, 2 ** 31])))
                del init.dims[:]
                init.dims.extend(dims)
                recipe.append(f"initializer {init.name}: dims {dims}")
            elif op == "init_dtype":
                init.data_type = draw(st.sampled_from((0, 99, 1, 10, 16, 7, 9, 8, 13, 2)))
                recipe.append(f"initializer {init.name}: data_type {init.data_type}")
            else:
                recipe.append(f"drop initializer {init.name}")
                g.initializer.remove(init)
        elif op in ("input_dim", "input_dtype", "drop_graph_input") and len(g.input):
            vi = pick(g.input)
            if op == "input_dim" and vi.type.tensor_type.shape.dim:
                d = pick(vi.type.tensor_type.shape.dim)
                value = draw(st.sampled_from((0, -5, 2 ** 40, "N", "seq", "")))
                if isinstance(value, int):
                    d.dim_value = value
                else:
                    d.dim_param = value
                recipe.append(f"input {vi.name}: dim {value!r}")
            elif op == "input_dtype":
                vi.type.tensor_type.elem_type = draw(st.sampled_from((0, 99, 8, 1)))
                recipe.append(f"input {vi.name}: elem_type {vi.type.tensor_type.elem_type}")
            else:
                recipe.append(f"drop graph input {vi.name}")
                g.input.remove(vi)
        elif op == "drop_output" and len(g.output):
            recipe.append(f"drop graph output {g.output[0].name}")
            del g.output[0]
        elif op == "opset":
            m.opset_import[0].version = draw(st.sampled_from((1, 7, 99, 10000, 0)))
            recipe.append(f"opset {m.opset_import[0].version}")
        elif op == "ir_version":
            m.ir_version = draw(st.sampled_from((0, 1, 99, 2 ** 40)))
            recipe.append(f"ir_version {m.ir_version}")
        elif op == "value_info":
            name = draw(st.sampled_from(names))
            shape = draw(st.sampled_from(([-1, 3], [0], [], [2 ** 40, 2 ** 40], ["a", 2])))
            g.value_info.append(helper.make_tensor_value_info(name, draw(st.sampled_from((1, 10, 0))), shape))
            recipe.append(f"value_info {name!r} shape {shape}")
    data = m.SerializeToString()
    if draw(st.integers(0, 3)) == 3:  # not 0: Hypothesis's first example is then the seed itself
        data, what = draw(text_mutation(data, "bin"))
        recipe.append(what)
    return data, recipe


ATTR_VALUES = (("int64_val", -1), ("int64_val", -2 ** 63), ("int64_val", 2 ** 63 - 1), ("int64_val", 0),
               ("uint64_val", 2 ** 64 - 1), ("double_val", math.nan), ("double_val", math.inf), ("double_val", -1.5),
               ("string_val", "abc"), ("string_val", "1e400"), ("string_val", ""), ("bool_val", True),
               ("float_val", 1.5), ("int32_val", 7))


def _pb():
    """Chakra's schema as memsim declares it (protobuf alone), or None without protobuf."""
    try:
        import google.protobuf  # noqa: F401
    except ImportError:
        return None
    from memsim.workload.importers.chakra_schema import schema

    return schema()


def _node(pb, i, name, kind, data=(), ctrl=(), **attrs):
    n = pb.Node(id=i, name=name, type=kind)
    n.data_deps.extend(data)
    n.ctrl_deps.extend(ctrl)
    for key, (field, value) in attrs.items():
        n.attr.append(pb.AttributeProto(name=key, **{field: value}))
    return n


def _encode(meta, nodes) -> bytes:
    from memsim.workload.importers.chakra_schema import frame

    return frame(meta, *nodes)


def chakra_seeds() -> dict[str, bytes]:
    pb = _pb()
    if pb is None:
        return {}
    i64, u64 = "int64_val", "uint64_val"
    nodes = [
        _node(pb, 0, "load_weights", pb.MEM_LOAD_NODE, tensor_size=(u64, 64 << 20)),
        _node(pb, 1, "gemm", pb.COMP_NODE, data=[0], num_ops=(i64, 2 * 4096 * 4096 * 64), tensor_size=(u64, 32 << 20)),
        _node(pb, 2, "allreduce", pb.COMM_COLL_NODE, data=[1], comm_type=(i64, pb.ALL_REDUCE),
              comm_size=(i64, 1 << 20)),
        _node(pb, 3, "gelu", pb.COMP_NODE, data=[2], num_ops=(i64, 4096 * 64 * 8), tensor_size=(u64, 1 << 20)),
        _node(pb, 4, "store", pb.MEM_STORE_NODE, data=[3], ctrl=[2], tensor_size=(u64, 1 << 20)),
        _node(pb, 5, "send", pb.COMM_SEND_NODE, data=[4], tensor_size=(u64, 1 << 20)),
    ]
    return {"ops": _encode(pb.GlobalMetadata(version="0.0.4"), nodes)}


def _decode(data: bytes):
    from memsim.workload.importers.chakra_schema import split

    pb = _pb()
    messages = split(data, "seed")
    meta = pb.GlobalMetadata.FromString(next(messages))
    return meta, [pb.Node.FromString(m) for m in messages]


@st.composite
def chakra_mutant(draw, seed: bytes) -> tuple[bytes, list[str]]:
    pb = _pb()
    meta, nodes = _decode(seed)
    recipe = []
    for _ in range(draw(st.sampled_from((0, 1, 1, 2, 3)))):
        op = draw(st.sampled_from(("type", "id", "data_dep", "ctrl_dep", "attr_value", "attr_value", "attr_drop",
                                   "attr_add", "name", "dup_node", "drop_node", "swap", "version")))
        if not nodes:
            break
        n = nodes[draw(st.integers(0, len(nodes) - 1))]
        ids = [x.id for x in nodes]
        try:
            if op == "type":
                n.type = draw(st.integers(-1, 12))
                recipe.append(f"node {n.id}: type {n.type}")
            elif op == "id":
                n.id = draw(st.sampled_from([*ids, 2 ** 64 - 1, 999]))
                recipe.append(f"node {n.name}: id {n.id}")
            elif op in ("data_dep", "ctrl_dep"):
                dep = draw(st.sampled_from([*ids, 999, n.id, 2 ** 64 - 1]))
                (n.data_deps if op == "data_dep" else n.ctrl_deps).append(dep)
                recipe.append(f"node {n.id}: {op} on {dep}")
            elif op in ("attr_value", "attr_add"):
                key = draw(st.sampled_from(("num_ops", "tensor_size", "comm_type", "comm_size", "bogus")))
                field, value = draw(st.sampled_from(ATTR_VALUES))
                if op == "attr_value" and len(n.attr):
                    key = n.attr[draw(st.integers(0, len(n.attr) - 1))].name
                kept = [a for a in n.attr if a.name != key]
                del n.attr[:]
                n.attr.extend([*kept, pb.AttributeProto(name=key, **{field: value})])
                recipe.append(f"node {n.id}: attr {key} = {field} {value!r}")
            elif op == "attr_drop" and len(n.attr):
                recipe.append(f"node {n.id}: drop attr {n.attr[0].name}")
                del n.attr[0]
            elif op == "name":
                n.name = draw(st.sampled_from(("", "é", "a.b", "x" * 1000, "\x00", "gemm", "n1.gemm")))
                recipe.append(f"node {n.id}: name {n.name!r:.40}")
            elif op == "dup_node":
                nodes.append(copy_node(pb, n))
                recipe.append(f"duplicate node {n.id}")
            elif op == "drop_node":
                nodes.remove(n)
                recipe.append(f"drop node {n.id}")
            elif op == "swap":
                i = draw(st.integers(0, len(nodes) - 1))
                j = nodes.index(n)
                nodes[i], nodes[j] = nodes[j], nodes[i]
                recipe.append(f"swap nodes {i} and {j}")
            else:
                meta.version = draw(st.sampled_from(("", "99", "é")))
                recipe.append(f"metadata version {meta.version!r}")
        except (ValueError, TypeError):  # the protobuf refused the value itself
            continue
    data = _encode(meta, nodes)
    if draw(st.integers(0, 3)) == 3:  # not 0: Hypothesis's first example is then the seed itself
        data, what = draw(text_mutation(data, "bin"))
        recipe.append(what)
    return data, recipe


def copy_node(pb, n):
    c = pb.Node()
    c.CopyFrom(n)
    return c
