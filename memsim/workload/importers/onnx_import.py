"""ONNX importer (extra ``onnx``): shapes from onnx shape inference, ops mapped to memsim kinds.

MatMul and Gemm become ``matmul`` (a batched MatMul is a group of GEMMs, one per batch entry); Softmax, activations and
arithmetic become ``elementwise``; LayerNormalization and RMS-style norms become ``norm``;
a Gather from an initializer becomes ``embedding``. Shape and layout ops (Reshape,
Transpose, Squeeze, ...) are dropped as no-ops: their outputs alias their inputs. Anything
else is skipped and reported.
"""
from __future__ import annotations

import math
from pathlib import Path

from memsim.core import limits
from memsim.core.errors import ConfigError, about_file, run_field
from memsim.core.files import check_file
from memsim.workload.dtypes import nbytes
from memsim.workload.graph import Op, OpGraph, Read, Tensor
from memsim.workload.importers import IMPORTERS, OUTPUT, Importer, ImportReport, Option, fused
from memsim.workload.meta import StepMeta

ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Erf", "Tanh", "Relu", "Gelu", "FastGelu", "Sigmoid",
               "Softmax", "Where", "Neg", "Exp", "Cast", "Max", "Min", "Reciprocal", "BiasGelu", "QuickGelu"}
NORMS = {"LayerNormalization", "SimplifiedLayerNormalization", "RMSNormalization", "SkipLayerNormalization"}
NO_OPS = {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Shape", "Constant",
          "ConstantOfShape", "Slice", "Split", "Concat", "Range", "Expand", "Dropout"}
FLOPS_PER_ELEMENT = {"Softmax": 5, "Gelu": 8, "FastGelu": 8, "Erf": 4, "Tanh": 4, "Sigmoid": 4, "Exp": 2}
DTYPES = {1: "fp32", 10: "fp16", 16: "bf16", 3: "int8", 2: "int8", 7: "fp32", 6: "fp32", 11: "fp32", 9: "int8"}


def import_onnx(path: Path, dims: dict[str, int] | None = None) -> tuple[OpGraph, ImportReport]:
    try:
        import onnx
        from onnx import shape_inference
    except ImportError:
        raise ConfigError("the ONNX importer needs the onnx extra (pip install '.[onnx]')", field="import") from None
    check_file(Path(path))
    try:
        model = onnx.load(str(path), load_external_data=False)  # shapes only: weights stored beside it stay there
    except Exception as exc:  # onnx raises several types for malformed files
        raise ConfigError(f"not a readable ONNX model: {exc}", file=str(path)) from None
    limits.check(len(model.graph.node), limits.MAX_OPS, "nodes", "graph.node", str(path))  # each would be an op
    _external_inside(model, Path(path))
    try:
        model = shape_inference.infer_shapes(model)
    except Exception as exc:
        raise ConfigError(f"not a readable ONNX model: {exc}", file=str(path)) from None
    with about_file(str(path)):  # an op or tensor that memsim's own checks refuse
        try:
            return fused(*_convert(model, str(path), dims or {}))
        except (IndexError, KeyError) as exc:  # a node without the inputs, outputs or shapes its op has
            raise ConfigError(f"malformed graph: a node lacks an input, output or shape ({exc})",
                              file=str(path)) from None


def _external_inside(model, path: Path) -> None:
    """Refuse a tensor whose stored weights lie outside the model's own folder (an absolute path, ``..``
    or a link out of it): memsim reads no weights, and no importer names a file outside the model's folder."""
    folder = path.resolve().parent
    for tensor in model.graph.initializer:
        where = next((entry.value for entry in tensor.external_data if entry.key == "location"), None)
        if where is None:
            continue
        target = (path.parent / where).resolve()
        if Path(where).is_absolute() or ".." in Path(where).parts or folder not in target.parents:
            raise ConfigError(f"tensor {tensor.name!r} stores its weights at {where!r}, outside the model's folder",
                              file=str(path), field="graph.initializer")


def _convert(model, file: str, dims: dict[str, int]) -> tuple[OpGraph, ImportReport]:
    g = OpGraph(meta=StepMeta(model=Path(file).stem, phase="imported", source="onnx"))
    report = ImportReport()
    info = {}
    for vi in [*model.graph.input, *model.graph.value_info, *model.graph.output]:
        t = vi.type.tensor_type
        shape = tuple(d.dim_value if d.HasField("dim_value") else dims.get(d.dim_param, 0) for d in t.shape.dim)
        info[vi.name] = (shape, DTYPES.get(t.elem_type, "fp32"))
    inits = {i.name for i in model.graph.initializer}
    for init in model.graph.initializer:
        info[init.name] = (tuple(init.dims), DTYPES.get(init.data_type, "fp32"))
    alias: dict[str, str] = {}

    def shape_of(name: str) -> tuple[int, ...]:
        return info.get(name, ((), "fp32"))[0]

    def tensor(name: str) -> str:
        """The memsim tensor behind ``name`` (shape and layout no-ops alias their input)."""
        target = alias.get(name, name)
        if target not in g.tensors:
            shape, dtype = info.get(target, ((), "fp32"))
            if not shape or any(d == 0 for d in shape):
                raise ConfigError(f"tensor {target!r} has an unknown shape: give its dimensions with {run_field('dims')} "
                                  "NAME=VALUE", file=file, field=target)
            klass = "weight" if target in inits else "activation"
            g.add_tensor(Tensor(target, shape, dtype, klass, nbytes(math.prod(shape), dtype)))
        return target

    def read(name: str) -> Read:
        """Read what the node's input holds: an aliased slice (a Split part) reads only its own bytes."""
        t = tensor(name)
        shape, dtype = info.get(name, (g.tensors[t].shape, g.tensors[t].dtype))
        return Read(t, min(g.tensors[t].bytes, nbytes(math.prod(shape), dtype)) if shape else g.tensors[t].bytes)

    def infer(outs: list[str], shape: tuple[int, ...], dtype: str) -> None:
        """Fill in shapes onnx could not infer (ops from other domains)."""
        for o in outs:
            if not shape_of(o):
                info[o] = (shape, dtype)

    for n, node in enumerate(model.graph.node):
        op_type = node.op_type
        name = node.name or f"{op_type}_{n}"
        ins = [i for i in node.input if i]
        outs = [o for o in node.output if o]
        if op_type in NO_OPS or (op_type == "Gather" and ins and ins[0] not in inits):
            for o in outs if ins else ():
                alias[o] = alias.get(ins[0], ins[0])
            report.note(report.dropped, op_type)
            continue
        if op_type in ("MatMul", "Gemm"):
            if len(ins) < 2 or not outs:
                raise ConfigError(f"{op_type} needs two inputs and an output", file=file, field=name)
            sa, sb = shape_of(ins[0]), shape_of(ins[1])
            if not sa or not sb:
                raise ConfigError(f"{name}: operand shapes unknown: give them with {run_field('dims')} NAME=VALUE",
                                  file=file, field=name)
            trans_b = op_type == "Gemm" and _attr(node, "transB")
            k, n_ = sa[-1], (sb[-2] if trans_b else sb[-1])
            infer(outs, (*sa[:-1], n_), info.get(ins[0], ((), "fp32"))[1])
            batch = math.prod(sa[:-2]) if len(sa) > 2 and len(sb) > 2 else 1  # batched: one GEMM per batch entry
            m = math.prod(sa[:-1]) // batch
            reads = tuple(read(i) for i in ins)
            out = tensor(outs[0])
            g.add_op(Op(name, "matmul", -1, g.tensors[out].dtype, 2 * batch * m * n_ * k, reads, (out,),
                        (("groups", batch), ("k", k), ("m", m), ("n", n_))))
        elif op_type in ELEMENTWISE or op_type in NORMS:
            shapes = [shape_of(i) for i in ins if shape_of(i)]
            infer(outs[:1], tuple(np_broadcast(shapes)), info.get(ins[0], ((), "fp32"))[1])
            reads = tuple({r.tensor: r for r in (read(i) for i in ins)}.values())
            out = tensor(outs[0])
            elems = math.prod(g.tensors[out].shape)
            kind = "norm" if op_type in NORMS else "elementwise"
            per = 8 if kind == "norm" else FLOPS_PER_ELEMENT.get(op_type, 1)
            g.add_op(Op(name, kind, -1, g.tensors[out].dtype, per * elems, reads, (out,), (("elements", elems),)))
        elif op_type == "Gather":
            table = tensor(ins[0])
            infer(outs, (*shape_of(ins[1]), g.tensors[table].shape[-1]), g.tensors[table].dtype)
            out = tensor(outs[0])
            g.add_op(Op(name, "embedding", -1, g.tensors[out].dtype, 0,
                        (read(ins[1]), Read(table, g.tensors[out].bytes)), (out,),
                        (("elements", math.prod(g.tensors[out].shape)),)))
        else:
            report.note(report.unmapped, op_type)
            for o in outs if ins else ():  # consumers read the data the skipped op would have passed on
                alias[o] = alias.get(ins[0], ins[0])
                if not shape_of(o):
                    info[o] = info.get(ins[0], ((), "fp32"))
            continue
        report.note(report.mapped, op_type)
    g.validate(file)
    return g, report


def np_broadcast(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    out: list[int] = []
    for shape in shapes:
        dims = list(shape)
        if len(dims) > len(out):
            out = [1] * (len(dims) - len(out)) + out
        dims = [1] * (len(out) - len(dims)) + dims
        out = [max(a, b) for a, b in zip(out, dims)]
    return tuple(out)


def _attr(node, name: str) -> int:
    for a in node.attribute:
        if a.name == name:
            return a.i
    return 0


def dim_values(items: tuple[str, ...]) -> dict[str, int]:
    """``--dim NAME=VALUE`` as given on the command line: the value of each symbolic dimension."""
    values = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not value.isascii() or not value.isdigit() or len(value) > 30:
            raise ConfigError(f"expected NAME=INTEGER (at most 30 digits), got {item[:60]!r}", field=run_field("dims"))
        values[key] = int(value)
    return values


IMPORTERS.add("onnx", Importer(
    help="Import an ONNX model (shapes from onnx shape inference).",
    options=(Option(name="path", metavar="MODEL_FILE", kind=Path), OUTPUT,
             Option(name="dims", flag="--dim", multiple=True, metavar="NAME=VALUE",
                    help="value of a symbolic dimension, repeatable", parse=dim_values)),
    reads="path", run=import_onnx))
