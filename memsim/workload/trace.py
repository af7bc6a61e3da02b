"""The versioned trace file: an ``OpGraph`` as JSON, written and read back exactly.

Schema ``memsim-trace`` version 1, declared in ``trace_schema`` (and documented from it):
``{"schema", "version", "meta", "tensors": [...], "ops": [...]}``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memsim.core import limits, units
from memsim.core.atomic import atomic_write_text
from memsim.core.errors import TraceError, about_file
from memsim.core.files import load_json
from memsim.workload.graph import Op, OpGraph, Read, Tensor
from memsim.workload.meta import StepMeta
from memsim.workload.trace_schema import FIELDS, SCHEMA, VERSION


def to_json(g: OpGraph) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "meta": g.meta.as_dict(),
        "tensors": [{"name": t.name, "shape": list(t.shape), "dtype": t.dtype, "class": t.klass, "bytes": t.bytes}
                    for t in g.tensors.values()],
        "ops": [{"name": o.name, "kind": o.kind, "layer": o.layer, "dtype": o.dtype, "flops": o.flops,
                 "inputs": [{"tensor": r.tensor, "bytes": r.bytes} for r in o.inputs],
                 "outputs": list(o.outputs), "dims": dict(o.dims), "deps": list(o.deps)}
                for o in g.ops.values()],
    }


# The keys of each object in a trace, and those that may be left out.
_KEYS = {obj: tuple(keys) for obj, keys in FIELDS.items()}
_OPTIONAL = {key for keys in FIELDS.values() for key, (required, _) in keys.items() if not required}


def _req(obj: dict, key: str, kind: type | tuple, file: str, where: str) -> Any:
    if not isinstance(obj, dict):
        raise TraceError("expected an object", file=file, field=where or None)
    if key not in obj:
        raise TraceError("missing required field", file=file, field=f"{where}.{key}" if where else key)
    value = obj[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise TraceError(f"has the wrong type ({type(value).__name__})", file=file,
                         field=f"{where}.{key}" if where else key)
    return value


def _opt(obj: dict, key: str, kind: type, file: str, where: str) -> Any:
    return _req(obj, key, kind, file, where) if obj.get(key) is not None else kind()


def _known(obj: Any, what: str, file: str, where: str) -> None:
    if not isinstance(obj, dict):
        raise TraceError("expected an object", file=file, field=where or None)
    for key in obj:
        if key not in _KEYS[what]:
            raise TraceError(f"unknown field (known: {', '.join(_KEYS[what])})", file=file,
                             field=f"{where}.{key}" if where else str(key))


def from_json(data: Any, file: str = "<trace>") -> OpGraph:
    if not isinstance(data, dict):
        raise TraceError("expected a JSON object", file=file)
    if data.get("schema") != SCHEMA:
        raise TraceError(f"not a memsim trace (schema must be {SCHEMA!r})", file=file, field="schema")
    if data.get("version") != VERSION or isinstance(data.get("version"), bool):
        raise TraceError(f"unsupported version {data.get('version')!r} (this memsim reads {VERSION})",
                         file=file, field="version")
    _known(data, "", file, "")
    with about_file(file):  # an op or tensor that refuses its own fields knows the field, not the file
        return _graph(data, file)


def _graph(data: dict, file: str) -> OpGraph:
    # counted before a single op is built: a trace of a million ops is refused in seconds
    limits.check(len(_req(data, "ops", list, file, "")), limits.MAX_OPS, "ops", "ops", file, TraceError)
    g = OpGraph(meta=StepMeta.read(_opt(data, "meta", dict, file, "")))
    for i, t in enumerate(_req(data, "tensors", list, file, "")):
        where = f"tensors[{units.label(t, str(i))}]"
        _known(t, "tensor", file, where)
        name = _req(t, "name", str, file, where)
        if name in g.tensors:
            raise TraceError("duplicate tensor name", file=file, field=where)
        g.add_tensor(Tensor(name, tuple(_req(t, "shape", list, file, where)), _req(t, "dtype", str, file, where),
                            _req(t, "class", str, file, where), _req(t, "bytes", int, file, where)))
    for i, o in enumerate(_req(data, "ops", list, file, "")):
        where = f"ops[{units.label(o, str(i))}]"
        _known(o, "op", file, where)
        name = _req(o, "name", str, file, where)
        if name in g.ops:
            raise TraceError("duplicate op name", file=file, field=where)
        reads = []
        for j, r in enumerate(_req(o, "inputs", list, file, where)):
            _known(r, "input", file, f"{where}.inputs[{j}]")
            reads.append(Read(_req(r, "tensor", str, file, f"{where}.inputs[{j}]"),
                              _req(r, "bytes", int, file, f"{where}.inputs[{j}]")))
        g.add_op(Op(name, _req(o, "kind", str, file, where), _req(o, "layer", int, file, where),
                    _req(o, "dtype", str, file, where), _req(o, "flops", int, file, where), tuple(reads),
                    tuple(_req(o, "outputs", list, file, where)),
                    tuple(sorted(_opt(o, "dims", dict, file, where).items())),
                    tuple(_opt(o, "deps", list, file, where))))
    g.validate(file)
    return g


def write_trace(g: OpGraph, path: Path) -> None:
    """Write ``g``, once it is a graph that ``read_trace`` would accept (importers call this)."""
    g.validate()
    atomic_write_text(path, json.dumps(to_json(g), indent=1) + "\n")


def read_trace(path: Path) -> OpGraph:
    """The trace in ``path``, read strictly (UTF-8 JSON, no key twice) and checked."""
    return from_json(load_json(path, TraceError), str(path))
