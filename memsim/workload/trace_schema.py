"""The trace file's schema (``memsim-trace``), declared once: every key of each object with what it
holds. ``trace`` reads and checks files against it, and ``docs/trace-schema.md`` is generated from
it (``reference``; ``python scripts/reference.py --write``)."""
from __future__ import annotations

from dataclasses import fields

from memsim.workload.meta import StepMeta

SCHEMA = "memsim-trace"
VERSION = 1

# object (as an error names it) -> key -> (required, meaning)
FIELDS: dict[str, dict[str, tuple[bool, str]]] = {
    "": {
        "schema": (True, f"`{SCHEMA}`"),
        "version": (True, f"`{VERSION}`"),
        "meta": (False, "what the step is of (below); every key may be left out"),
        "tensors": (True, "the tensors, each an object (below)"),
        "ops": (True, "the operators, each an object (below), in any order that respects their dependencies"),
    },
    "tensor": {
        "name": (True, "unique"),
        "shape": (True, "list of dimensions"),
        "dtype": (True, "`fp32`, `bf16`, `fp16`, `fp8`, `int8` or `int4`"),
        "class": (True, "`weight`, `kv` or `activation`: where placement may put it"),
        "bytes": (True, "storage size"),
    },
    "op": {
        "name": (True, "unique"),
        "kind": (True, "`matmul`, `attention`, `elementwise`, `norm`, `embedding`, `compute` (known only by its "
                       "FLOPs and `bytes`, as imported from Chakra), or a collective: `allreduce`, `allgather`, "
                       "`reduce_scatter`, `alltoall`"),
        "layer": (True, "-1 outside the repeated layers"),
        "dtype": (True, "compute dtype"),
        "flops": (True, "its FLOPs"),
        "inputs": (True, "the tensors read, each `{tensor, bytes}`: the bytes the op must read of it (an embedding "
                         "gather reads only its rows). A `matmul` reads the activation first and the weight second; "
                         "an `attention` reads q, k, v, then `k_cache` and `v_cache` when there is a cache"),
        "outputs": (True, "the tensors written (an `attention`: its output first, then the keys and values it "
                          "appends to the cache)"),
        "dims": (False, "the shapes the mapping needs: `matmul` `m`, `n`, `k`; `attention` `batch`, `heads`, "
                        "`kv_heads`, `q_len`, `kv_len`, `head_dim`, `causal`, `pairs`; `elementwise`, `norm`, "
                        "`embedding` `elements`; a collective `bytes`, `ranks`"),
        "deps": (False, "extra control dependencies, as op names (data dependencies follow from the tensors)"),
    },
    "input": {"tensor": (True, "a tensor's name"), "bytes": (True, "bytes read of it")},
}


def reference() -> str:
    """``docs/trace-schema.md``, from the declaration (and ``StepMeta``'s fields for ``meta``)."""
    out = [f"# Trace file (schema `{SCHEMA}`, version {VERSION})", "",
           "Generated from `memsim/workload/trace_schema.py` by `python scripts/reference.py --write`; "
           "`tests/workload/test_trace_schema.py` keeps it current. A trace is JSON; `memsim trace` writes one, "
           "`memsim run --trace FILE` runs one, and the importers write them. On reading, memsim checks the schema, "
           "the version, every key and type, unique names, that every referenced tensor or op exists and that the "
           "graph is acyclic: any failure is one line naming the file and the field.", ""]
    titles = {"": "the file", "tensor": "`tensors[]`", "op": "`ops[]`", "input": "`ops[].inputs[]`"}
    for obj, keys in FIELDS.items():
        out += [f"## {titles[obj]}", "", "| key | required | meaning |", "|---|---|---|"]
        out += [f"| `{k}` | {'yes' if req else 'no'} | {meaning} |" for k, (req, meaning) in keys.items()]
        out.append("")
    out += ["## `meta`", "", "| key |", "|---|", *(f"| `{f.name}` |" for f in fields(StepMeta)), ""]
    return "\n".join(out)
