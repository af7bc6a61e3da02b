"""torch.export importer (extra ``torch``): a Hugging Face config built on the meta device.

The model is instantiated from ``config.json`` with transformers on the meta device (no
weights are downloaded or allocated), exported with ``torch.export`` for a prefill of
``tokens`` tokens (logits for the last position only) or one decode step after ``context``
tokens (the KV cache passed in as tensors of class ``kv``; a ``cat`` onto it is the cache
growing in place: it writes the new token's K and V only), and its ATen graph is mapped:
``linear``/``addmm``/``mm``/``bmm`` and ``_grouped_mm`` (MoE experts) to ``matmul``,
``scaled_dot_product_attention`` to ``attention``, ``embedding`` to ``embedding``, and other
tensor ops to ``elementwise``. Views, casts, expands (grouped-query attention's K/V
expansion), slices and other no-ops are dropped: their outputs alias their inputs, so the
expansion moves no bytes.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from memsim.core.errors import ConfigError, about_file
from memsim.core.files import check_file
from memsim.workload.graph import Op, OpGraph, Read, Tensor
from memsim.workload.importers import IMPORTERS, OUTPUT, Importer, ImportReport, Option, fused
from memsim.workload.meta import StepMeta

NO_OPS = {"view", "reshape", "_unsafe_view", "transpose", "t", "permute", "unsqueeze", "squeeze", "expand", "slice",
          "contiguous", "to", "_to_copy", "clone", "alias", "dropout", "_assert_tensor_metadata", "detach",
          "lift_fresh_copy", "select", "split", "split_with_sizes", "unbind", "arange", "full", "zeros", "ones",
          "scalar_tensor", "_assert_scalar", "sym_size", "sym_constrain_range_for_size", "empty"}
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float64": "fp32", "int8": "int8",
          "float8_e4m3fn": "fp8", "float8_e5m2": "fp8"}


def _short(target) -> str:
    name = getattr(target, "__name__", str(target))
    return name.split(".")[0]


def export(config_path: Path, tokens: int = 8, context: int = 0):
    """The exported program of a prefill of ``tokens`` tokens or, with ``context`` > 0, of one
    decode step after ``context`` tokens (its KV cache given as inputs), and the tied parameters."""
    try:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM
    except ImportError:
        raise ConfigError("the torch importer needs the torch extra (pip install '.[torch]')", field="import") from None
    check_file(Path(config_path))
    try:
        raw = {k: v for k, v in json.loads(Path(config_path).read_text()).items() if not k.startswith("_")}
        config = AutoConfig.for_model(**raw)
    except Exception as exc:  # transformers raises many types for unknown or malformed configs
        raise ConfigError(f"transformers cannot build this config: {exc}", file=str(config_path)) from None
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).eval()
    if context:
        ep = torch.export.export(_decode_step(model, config), _decode_inputs(torch, config, context), strict=False)
    else:
        ids = torch.zeros((1, tokens), dtype=torch.long, device="meta")
        ep = torch.export.export(model, (ids,), kwargs={"use_cache": False, "logits_to_keep": 1}, strict=False)
    # Tied parameters (GPT-2's LM head is its embedding table) are one tensor, stored once.
    first: dict[int, str] = {}
    tied = {}
    for fqn, param in model.named_parameters(remove_duplicate=False):
        tied[fqn] = first.setdefault(id(param), fqn)
    return ep, tied


def _decode_inputs(torch, config, context: int) -> tuple:
    """One new token at position ``context``, and every layer's K and V cache of ``context`` tokens."""
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    cache = [torch.zeros((1, kv_heads, context, head_dim), dtype=torch.bfloat16, device="meta")
             for _ in range(config.num_hidden_layers)]
    ids = torch.zeros((1, 1), dtype=torch.long, device="meta")
    return ids, torch.full((1, 1), context, device="meta"), cache, [c.clone() for c in cache]


def _decode_step(model, config):
    """The model's decode step with its KV cache passed in as tensors (export takes no cache object)."""
    import torch
    from transformers import DynamicCache

    class DecodeStep(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, ids, pos, keys, values):
            cache = DynamicCache(config=config)
            for layer, (k, v) in enumerate(zip(keys, values)):
                cache.update(k, v, layer)
            return self.model(ids, position_ids=pos, past_key_values=cache, use_cache=True, logits_to_keep=1).logits

    return DecodeStep()


def import_torch(config_path: Path, tokens: int = 8, context: int = 0) -> tuple[OpGraph, ImportReport]:
    ep, tied = export(config_path, tokens, context)
    with about_file(str(config_path)):  # an op or tensor that memsim's own checks refuse
        return fused(*convert(ep, Path(config_path).stem, tokens, tied, context))


def convert(ep, name: str, tokens: int, tied: dict[str, str] | None = None,
            context: int = 0) -> tuple[OpGraph, ImportReport]:
    """The graph of an exported prefill or (``context`` > 0) decode step, whose user inputs after
    the token ids and positions are the KV cache (class ``kv``)."""
    meta = StepMeta(model=name, phase="decode", batch=1, tokens=1, context=context, source="torch.export") \
        if context else StepMeta(model=name, phase="prefill", batch=1, tokens=tokens, context=0, source="torch.export")
    g = OpGraph(meta=meta)
    report = ImportReport()
    sig = ep.graph_signature
    cache = set(sig.user_inputs[2:]) if context else set()
    weights = {**sig.inputs_to_parameters, **sig.inputs_to_buffers}
    alias: dict[str, str] = {}

    def val(node):
        return node.meta.get("val")

    def tensor(node, klass: str = "activation") -> str | None:
        v = val(node)
        if not hasattr(v, "shape"):
            return None
        target = alias.get(node.name, node.name)
        if target not in g.tensors:
            shape = tuple(int(d) for d in v.shape)
            dtype = DTYPES.get(str(v.dtype).replace("torch.", ""), "fp32")
            numel = math.prod(shape)
            g.add_tensor(Tensor(target, shape, dtype, klass, numel * v.element_size()))
        return target

    def held(node) -> str:
        """The tensor an operand holds: each operand memsim counts bytes of has a shape."""
        t = tensor(node)
        if t is None:
            raise ConfigError(f"{node.name}: torch.export gave this operand no tensor shape", field="ops")
        return t

    def read(node) -> Read | None:
        """Read what the node holds: a slice of a split tensor reads only its own bytes."""
        t = tensor(node) if hasattr(node, "name") else None
        if not t:
            return None
        v = val(node)
        return Read(t, min(g.tensors[t].bytes, math.prod(int(d) for d in v.shape) * v.element_size()))

    def reads(args, unique: bool = True) -> tuple[Read, ...]:
        out: list[Read] = []
        for a in args:
            for node in a if isinstance(a, (list, tuple)) else (a,):
                r = read(node) if hasattr(node, "meta") else None
                if r is not None and not (unique and any(x.tensor == r.tensor for x in out)):
                    out.append(r)
        return tuple(out)

    owner = {fqn: node for node, fqn in weights.items()}
    for node in ep.graph.nodes:
        if node.op == "placeholder":
            kept = (tied or {}).get(weights.get(node.name, ""), weights.get(node.name))
            if kept in owner and owner[kept] != node.name:
                alias[node.name] = owner[kept]  # a tied parameter: read the tensor it shares
                continue
            tensor(node, "weight" if node.name in weights else "kv" if node.name in cache else "activation")
            continue
        if node.op != "call_function":
            continue
        op = _short(node.target)
        args = node.args
        out_val = val(node)
        if op in NO_OPS or op == "getitem" or not hasattr(out_val, "shape"):
            if args and hasattr(args[0], "name"):
                alias[node.name] = alias.get(args[0].name, args[0].name)
            report.note(report.dropped, op)
            continue
        kept = _cache_of(g, args, tensor) if op == "cat" else None
        if kept is not None:  # the KV cache grows in place, as a serving stack's does
            alias[node.name] = kept
            new = tuple(r for r in reads(args) if r.tensor != kept and r.bytes)
            if new:
                v0 = g.tensors[new[0].tensor]
                g.add_tensor(Tensor(node.name + ".new", v0.shape, v0.dtype, "kv", sum(r.bytes for r in new)))
                elements = sum(math.prod(g.tensors[r.tensor].shape) for r in new)
                g.add_op(Op(node.name, "elementwise", -1, v0.dtype, 0, new, (node.name + ".new",),
                            (("elements", elements),)))
            report.note(report.mapped, "cat (KV cache append)")
            continue
        out = held(node)  # a value with a shape, checked above
        shape = tuple(int(d) for d in out_val.shape)
        if op in ("linear", "addmm", "mm", "bmm", "matmul", "_grouped_mm"):
            x, w = (args[1], args[2]) if op == "addmm" else (args[0], args[1])
            xs, ws = tuple(val(x).shape), tuple(val(w).shape)
            k = int(xs[-1])
            n = int(ws[0]) if op == "linear" else int(ws[-1])
            groups = int(xs[0]) if op == "bmm" else 1
            m = math.prod(int(d) for d in xs[:-1]) // groups
            flops = 2 * groups * m * n * k
            g.add_op(Op(node.name, "matmul", -1, g.tensors[out].dtype, flops, reads(args), (out,),
                        (("groups", groups), ("k", k), ("m", m), ("n", n))))
        elif op == "scaled_dot_product_attention":
            q, k_node = args[0], args[1]
            qs = tuple(int(d) for d in val(q).shape)
            kv_src = g.tensors[held(k_node)].shape  # the source before any K/V expansion
            batch, heads, q_len, head_dim = qs
            kv_len = int(val(k_node).shape[-2])
            kv_heads = int(kv_src[1]) if len(kv_src) == 4 else heads
            causal = bool(node.kwargs.get("is_causal", False)) or len(args) > 3 or "attn_mask" in node.kwargs
            pairs = q_len * kv_len if not causal else q_len * (kv_len - q_len) + q_len * (q_len + 1) // 2
            g.add_op(Op(node.name, "attention", -1, g.tensors[out].dtype, 4 * batch * heads * pairs * head_dim,
                        reads(args[:3], unique=False), (out,),
                        tuple(sorted({"batch": batch, "heads": heads, "kv_heads": kv_heads, "q_len": q_len,
                                      "kv_len": kv_len, "head_dim": head_dim, "causal": int(causal),
                                      "pairs": pairs}.items()))))
        elif op == "embedding":
            table, ids = args[0], args[1]
            g.add_op(Op(node.name, "embedding", -1, g.tensors[out].dtype, 0,
                        (*reads([ids]), Read(held(table), g.tensors[out].bytes)), (out,),
                        (("elements", math.prod(shape)),)))
        else:
            kind = "norm" if op in ("layer_norm", "native_layer_norm", "rms_norm") else "elementwise"
            g.add_op(Op(node.name, kind, -1, g.tensors[out].dtype, math.prod(shape), reads(args), (out,),
                        (("elements", math.prod(shape)),)))
        report.note(report.mapped, op)
    g.validate()
    return g, report


def _cache_of(g: OpGraph, args, tensor) -> str | None:
    """The KV cache tensor a ``cat`` appends to (one of its inputs), or None."""
    parts = args[0] if args and isinstance(args[0], (list, tuple)) else ()
    return next((t for n in parts if hasattr(n, "meta") and (t := tensor(n)) and g.tensors[t].klass == "kv"), None)


IMPORTERS.add("torch", Importer(
    help="Build the model on the meta device, export it with torch.export and import the graph.",
    options=(Option(name="config_path", flag="--config", kind=Path, required=True,
                    help="Hugging Face config.json (e.g. configs/models/llama-2-7b.json)"),
             Option(name="tokens", flag="--tokens", kind=int, default=8, least=1, help="prefill length to export"),
             Option(name="context", flag="--context", kind=int, default=0, least=0,
                    help="export one decode step after this many tokens instead (0: a prefill of --tokens)"),
             OUTPUT),
    reads="config_path", run=import_torch))
