"""The versioned trace file: an ``OpGraph`` as JSON, written and read back exactly.

Schema ``memsim-trace`` version 1 (documented in the README):
``{"schema", "version", "meta", "tensors": [...], "ops": [...]}``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memsim.atomic import atomic_write_text
from memsim.errors import TraceError
from memsim.workload.graph import Op, OpGraph, Read, Tensor

SCHEMA = "memsim-trace"
VERSION = 1


def to_json(g: OpGraph) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "meta": dict(g.meta),
        "tensors": [{"name": t.name, "shape": list(t.shape), "dtype": t.dtype, "class": t.klass, "bytes": t.bytes}
                    for t in g.tensors.values()],
        "ops": [{"name": o.name, "kind": o.kind, "layer": o.layer, "dtype": o.dtype, "flops": o.flops,
                 "inputs": [{"tensor": r.tensor, "bytes": r.bytes} for r in o.inputs],
                 "outputs": list(o.outputs), "dims": dict(o.dims), "deps": list(o.deps)}
                for o in g.ops.values()],
    }


def _req(obj: dict, key: str, kind: type | tuple, file: str, where: str) -> Any:
    if not isinstance(obj, dict):
        raise TraceError("expected an object", file=file, field=where)
    if key not in obj:
        raise TraceError("missing required field", file=file, field=f"{where}.{key}")
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise TraceError(f"has the wrong type ({type(value).__name__})", file=file, field=f"{where}.{key}")
    return value


def from_json(data: Any, file: str = "<trace>") -> OpGraph:
    if not isinstance(data, dict):
        raise TraceError("expected a JSON object", file=file)
    if data.get("schema") != SCHEMA:
        raise TraceError(f"not a memsim trace (schema must be {SCHEMA!r})", file=file, field="schema")
    if data.get("version") != VERSION:
        raise TraceError(f"unsupported version {data.get('version')!r} (this memsim reads {VERSION})",
                         file=file, field="version")
    g = OpGraph(meta=dict(data.get("meta") or {}))
    for i, t in enumerate(_req(data, "tensors", list, file, "")):
        where = f"tensors[{t.get('name', i) if isinstance(t, dict) else i}]"
        name = _req(t, "name", str, file, where)
        if name in g.tensors:
            raise TraceError("duplicate tensor name", file=file, field=where)
        g.add_tensor(Tensor(name, tuple(_req(t, "shape", list, file, where)), _req(t, "dtype", str, file, where),
                            _req(t, "class", str, file, where), _req(t, "bytes", int, file, where)))
    for i, o in enumerate(_req(data, "ops", list, file, "")):
        where = f"ops[{o.get('name', i) if isinstance(o, dict) else i}]"
        name = _req(o, "name", str, file, where)
        if name in g.ops:
            raise TraceError("duplicate op name", file=file, field=where)
        reads = tuple(Read(_req(r, "tensor", str, file, f"{where}.inputs"), _req(r, "bytes", int, file, f"{where}.inputs"))
                      for r in _req(o, "inputs", list, file, where))
        dims = o.get("dims") or {}
        if not isinstance(dims, dict) or not all(isinstance(v, int) for v in dims.values()):
            raise TraceError("dims must map names to integers", file=file, field=f"{where}.dims")
        g.add_op(Op(name, _req(o, "kind", str, file, where), _req(o, "layer", int, file, where),
                    _req(o, "dtype", str, file, where), _req(o, "flops", int, file, where), reads,
                    tuple(_req(o, "outputs", list, file, where)), tuple(sorted(dims.items())),
                    tuple(o.get("deps") or ())))
    g.validate(file)
    return g


def write_trace(g: OpGraph, path: Path) -> None:
    atomic_write_text(path, json.dumps(to_json(g), indent=1) + "\n")


def read_trace(path: Path) -> OpGraph:
    file = str(path)
    if not path.is_file():
        raise TraceError("file not found", file=file)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise TraceError(f"invalid JSON at line {exc.lineno}: {exc.msg}", file=file) from None
    return from_json(data, file)
