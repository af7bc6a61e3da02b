"""Build the operator DAG of one step of a transformer: decode, prefill, or a mixed step.

A step processes ``tokens`` new tokens per sequence for ``batch`` sequences on top of a
KV cache holding ``context`` tokens (decode: tokens=1, context=C; prefill: tokens=P,
context=0). A mixed step (a serving scheduler's: decodes at their own contexts beside prefill
chunks) is a list of segments, each ``sequences`` sequences of ``tokens`` new tokens on
``context`` cached ones: its GEMMs run on every segment's rows together, and each segment has
its own attention op at its own shape (as serving stacks launch prefill and decode attention
separately), each reading its share of the queries, keys and values. A speculative verify step is a
decode step of K+1 tokens on the cache: its queries attend to the cache and to each other causally,
and every one of them gets logits (the target checks each drafted token), where a prefill computes
logits for its last.
Decoders (GPT-2, Llama family with grouped-query attention) and encoders (BERT) are supported.
"""
from __future__ import annotations

import dataclasses
import math
import warnings

from memsim.core.errors import ConfigError, MemsimWarning, run_field
from memsim.workload.dtypes import nbytes, weight_storage_bytes
from memsim.workload.graph import Op, OpGraph, Read, Tensor
from memsim.workload.meta import StepMeta
from memsim.workload.models import ModelConfig
from memsim.workload.moe import moe_mlp
from memsim.workload.step import StepSpec, split

__all__ = ["StepSpec", "build_step", "shard", "split"]

# Vector operations per element, for the FLOP count of memory-bound ops.
FLOPS_PER_ELEMENT = {"add": 1, "rope": 6, "silu_mul": 5, "gelu": 8, "layernorm": 8, "rmsnorm": 5}


class Builder:
    def __init__(self, m: ModelConfig, s: StepSpec) -> None:
        self.m, self.s = m, s
        self.g = OpGraph(meta=StepMeta(model=m.name, arch=m.arch, phase=s.phase, batch=s.batch, tokens=s.tokens,
                                       context=s.context, weight_dtype=s.weight_dtype, kv_dtype=s.kv_dtype,
                                       group_size=s.group_size, tp=s.tp, expert_parallel=s.expert_parallel))
        self.rows = sum(n * t for n, t, _ in s.segments) if s.segments else s.batch * s.tokens

    # -- tensors ---------------------------------------------------------------
    def tensor(self, name: str, shape: tuple[int, ...], klass: str, dtype: str | None = None) -> str:
        """Weights default to the activation dtype (norms, biases, embeddings); projection weights
        are made with ``projection``, which applies ``--weight-dtype``."""
        dtype = dtype or {"kv": self.s.kv_dtype}.get(klass, self.s.act_dtype)
        numel = 1
        for d in shape:
            numel *= d
        self.g.add_tensor(Tensor(name, shape, dtype, klass, nbytes(numel, dtype)))
        return name

    def projection(self, name: str, shape: tuple[int, ...], role: str = "mlp") -> str:
        """A projection weight, stored as its class's format (``StepSpec.weight_format``)."""
        dtype = self.s.weight_format(role)
        self.g.add_tensor(Tensor(name, shape, dtype, "weight", weight_storage_bytes(shape, dtype, self.s.group_size)))
        return name

    def act(self, name: str, width: int, rows: int | None = None) -> str:
        return self.tensor(name, (rows or self.rows, width), "activation")

    def full(self, *names: str) -> tuple[Read, ...]:
        return tuple(Read(n, self.g.tensors[n].bytes) for n in names)

    # -- ops -------------------------------------------------------------------
    def op(self, name: str, kind: str, layer: int, flops: int, inputs: tuple[Read, ...], outputs: tuple[str, ...],
           **dims: int) -> None:
        self.g.add_op(Op(name, kind, layer, self.s.act_dtype, flops, inputs, outputs, tuple(sorted(dims.items()))))

    def matmul(self, name: str, layer: int, x: str, n: int, out: str, rows: int | None = None,
               bias: bool | None = None, role: str = "mlp") -> str:
        rows = rows or self.rows
        k = self.g.tensors[x].shape[-1]
        w = self.projection(f"{name}.weight", (k, n), role)
        self.act(out, n, rows)
        self.op(name, "matmul", layer, 2 * rows * n * k, self.full(x, w, *self.bias(name, n, bias)), (out,),
                m=rows, n=n, k=k)
        return out

    def bias(self, name: str, n: int, wanted: bool | None = None) -> tuple[str, ...]:
        """Bias vectors as the architecture has them: GPT-2 and BERT on every projection, GPT-J on
        its MLP and LM head, Qwen2 on QKV, Llama and Falcon-180B nowhere."""
        if wanted is None:
            role = name.rsplit(".", 1)[-1]
            arch = self.m.arch
            wanted = (arch in ("gpt2", "bert") and role != "lm_head") or \
                (arch == "gptj" and role in ("fc", "down", "lm_head")) or (role == "qkv" and self.m.qkv_bias)
        return (self.tensor(f"{name}.bias", (n,), "weight"),) if wanted else ()

    def vector(self, name: str, kind: str, layer: int, ins: tuple[str, ...], out: str, width: int, per_elem: int,
               weights: tuple[str, ...] = ()) -> str:
        self.act(out, width)
        elems = self.rows * width
        self.op(name, kind, layer, per_elem * elems, self.full(*ins, *weights), (out,), elements=elems)
        return out

    def norm(self, name: str, layer: int, x: str) -> str:
        h = self.m.hidden
        kind = "rmsnorm" if self.m.arch == "llama" else "layernorm"
        params = (f"{name}.weight",) if kind == "rmsnorm" else (f"{name}.weight", f"{name}.bias")
        for p in params:
            self.tensor(p, (h,), "weight")
        return self.vector(name, "norm", layer, (x,), f"{name}.out", h, FLOPS_PER_ELEMENT[kind], params)

    def attention(self, name: str, layer: int, q: str, k: str, v: str) -> str:
        """The step's attention op; a mixed step's, one per segment, each reading its share of the queries,
        keys and values. Their outputs are row blocks of one tensor: the last op writes it, after the others
        (as kernels writing slices of one buffer), so the output projection reads it once."""
        s = self.s
        if not s.segments:
            return self.attention_op(name, layer, (q, k, v), s.batch, s.tokens, s.context)
        ops: list[str] = []
        for j, (n, t, c) in enumerate(s.segments):
            share = n * t / self.rows
            reads = tuple(Read(x, math.ceil(self.g.tensors[x].bytes * share)) for x in (q, k, v))
            last = j == len(s.segments) - 1
            self.attention_op(f"{name}.s{j}", layer, reads, n, t, c, out=f"{name}.out" if last else "",
                              after=tuple(ops) if last else ())
            ops.append(f"{name}.s{j}")
        return f"{name}.out"

    def attention_op(self, name: str, layer: int, qkv: tuple[str, ...] | tuple[Read, ...], batch: int, t: int,
                     c: int, out: str | None = None, after: tuple[str, ...] = ()) -> str:
        """``batch`` sequences of ``t`` new tokens attending to ``c`` cached ones and to each other; its output
        ``out`` (default ``name.out``; empty: none, a mixed step's segment before the last)."""
        m = self.m
        hd, kvh = m.head_dim, m.kv_heads
        ins = [r if isinstance(r, Read) else Read(r, self.g.tensors[r].bytes) for r in qkv]
        if c:
            ins += self.full(self.tensor(f"{name}.k_cache", (batch, kvh, c, hd), "kv"),
                             self.tensor(f"{name}.v_cache", (batch, kvh, c, hd), "kv"))
        out = f"{name}.out" if out is None else out
        outs = [self.act(out, m.heads * hd)] if out else []
        if not m.is_encoder:  # decoders append this step's keys and values to the cache
            outs += [self.tensor(f"{name}.k_new", (batch, kvh, t, hd), "kv"),
                     self.tensor(f"{name}.v_new", (batch, kvh, t, hd), "kv")]
        causal = 0 if m.is_encoder else 1
        pairs = t * (c + t) if not causal else t * c + t * (t + 1) // 2
        flops = 4 * batch * m.heads * pairs * hd  # QK^T and PV
        self.g.add_op(Op(name, "attention", layer, self.s.act_dtype, flops, tuple(ins), tuple(outs),
                         tuple(sorted(dict(batch=batch, heads=m.heads, kv_heads=kvh, q_len=t, kv_len=c + t, head_dim=hd,
                                           causal=causal, pairs=pairs).items())), after))
        return out

    # -- model -----------------------------------------------------------------
    def embed(self, vocab: int) -> str:
        """The input embedding. With one rank it gathers every table in one op. With ``tp`` ranks
        the token table is vocabulary-parallel (Megatron's VocabParallelEmbedding): each rank holds
        ``vocab`` rows, looks up every token, masks those outside its range (on average it reads
        1/tp of the rows' bytes) and the partial outputs are summed by an all-reduce; learned
        position and segment tables stay replicated and are added after it."""
        m, s = self.m, self.s
        h = m.hidden
        row_bytes = nbytes(self.rows * h, s.act_dtype)
        ids = self.tensor("input_ids", (self.rows,), "activation", dtype="fp32")
        extra: list[str] = []
        if m.arch in ("gpt2", "bert"):  # learned absolute positions
            extra.append(self.tensor("embed.pos", (m.max_positions, h), "weight"))
        if m.arch == "bert":  # segment (token type) embeddings
            extra.append(self.tensor("embed.type", (2, h), "weight"))
        x = self.lookups(vocab, ids, extra if s.tp == 1 else [], row_bytes)
        x = self.allreduce("embed.allreduce", -1, x)
        if extra and s.tp > 1:
            out = self.act("embed.out", h)
            self.op("embed.positions", "embedding", -1, len(extra) * self.rows * h,
                    (*self.full(x), *(Read(t, row_bytes) for t in extra)), (out,), elements=self.rows * h)
            x = out
        return x

    def lookups(self, vocab: int, ids: str, extra: list[str], row_bytes: int) -> str:
        """The token table's lookup (and the ``extra`` tables', one row each). With
        ``embedding_shards`` k the table is split by vocabulary into k shards, each looked up by
        its own op (``embed.shard0`` ...) that adds its rows into the running sum of the one before:
        the pipeline stages that hold them pass it on. A token's row is in one of ``tp`` x k shards,
        so each reads that share of the rows' bytes on average."""
        s, h = self.s, self.m.hidden
        k = s.embedding_shards
        x = ""
        for i in range(k):
            rows = -(-vocab // k) if k > 1 else vocab
            shape, name = (rows, h), "embed.weight" if k == 1 else f"embed.weight.shard{i}"
            # Stored as the projections are where the vendor quantises it (execution.embedding_dtype).
            quantized = s.quantize_embeddings or "embedding" in dict(s.precision)
            table = self.projection(name, shape, "embedding") if quantized else self.tensor(name, shape, "weight")
            nbytes_ = self.g.tensors[table].bytes
            reads = [Read(ids, self.g.tensors[ids].bytes), Read(table, -(-self.rows * nbytes_ // (rows * s.tp * k)))]
            reads += [Read(x, self.g.tensors[x].bytes)] if x else [Read(t, row_bytes) for t in extra]
            last = i == k - 1
            out = self.act(("embed.out" if s.tp == 1 else "embed.partial") if last else f"embed.partial.shard{i}", h)
            dims = {"elements": self.rows * h, **({"shard": i} if k > 1 else {})}
            self.op("embed" if k == 1 else f"embed.shard{i}", "embedding", -1, self.rows * h, tuple(reads), (out,),
                    **dims)
            x = out
        return x

    def build(self) -> OpGraph:
        m, s = self.m, self.s
        h = m.hidden
        vocab = -(-m.vocab // s.tp)  # the embedding table and the LM head are split by vocabulary
        x = self.embed(vocab)
        if m.is_encoder:
            x = self.norm("embed.norm", -1, x)
        for i in range(m.layers):
            x = self.encoder_layer(i, x) if m.is_encoder else self.decoder_layer(i, x)
        if m.is_encoder or not s.logits:
            return self.g
        x = self.norm("final_norm", -1, x)
        # A prefill needs logits at the last position of each sequence only; a decode step (a
        # speculative verify step of several tokens) at every new position.
        last, rows = x, self.rows if s.phase == "decode" else s.batch  # mixed: each sequence's last
        if rows < self.rows:
            last = self.act("final_norm.last", h, s.batch)
            self.g.add_op(Op("take_last", "elementwise", -1, s.act_dtype, 0,
                             (Read(x, nbytes(s.batch * h, s.act_dtype)),), (last,), (("elements", s.batch * h),)))
        if m.tie_embeddings:  # the LM head reads this rank's shard of the embedding table
            self.act("logits", vocab, rows)
            self.op("lm_head", "matmul", -1, 2 * rows * vocab * h, self.full(last, "embed.weight"),
                    ("logits",), m=rows, n=vocab, k=h)
        else:
            self.matmul("lm_head", -1, last, vocab, "logits", rows=rows, role="lm_head")
        if s.tp > 1:
            gathered = self.act("logits.gathered", vocab * s.tp, rows)
            self.op("logits_allgather", "allgather", -1, 0, self.full("logits"), (gathered,),
                    bytes=self.g.tensors[gathered].bytes, ranks=s.tp)
        return self.g

    def qkv(self, p: str, i: int, x: str) -> tuple[str, str, str]:
        m = self.m
        hd = m.head_dim
        q_w, kv_w = m.heads * hd, m.kv_heads * hd
        w = self.projection(f"{p}.qkv.weight", (m.hidden, q_w + 2 * kv_w), "attention")
        outs = (self.act(f"{p}.q", q_w), self.act(f"{p}.k", kv_w), self.act(f"{p}.v", kv_w))
        n = q_w + 2 * kv_w
        self.op(f"{p}.qkv", "matmul", i, 2 * self.rows * n * m.hidden, self.full(x, w, *self.bias(f"{p}.qkv", n)), outs,
                m=self.rows, n=n, k=m.hidden)
        return outs

    def rope(self, p: str, i: int, q: str, k: str) -> tuple[str, str]:
        m = self.m
        q_w, kv_w = m.heads * m.head_dim, m.kv_heads * m.head_dim
        self.act(f"{p}.q_rot", q_w)
        self.act(f"{p}.k_rot", kv_w)
        elems = self.rows * (q_w + kv_w)
        self.op(f"{p}.rope", "elementwise", i, FLOPS_PER_ELEMENT["rope"] * elems, self.full(q, k),
                (f"{p}.q_rot", f"{p}.k_rot"), elements=elems)
        return f"{p}.q_rot", f"{p}.k_rot"

    def allreduce(self, name: str, layer: int, x: str) -> str:
        """Sum a row-parallel output across the tensor-parallel ranks (no-op with one rank)."""
        if self.s.tp == 1:
            return x
        t = self.g.tensors[x]
        out = self.act(f"{name}.out", t.shape[-1], t.shape[0])
        self.op(name, "allreduce", layer, (self.s.tp - 1) * math.prod(t.shape), self.full(x), (out,),
                bytes=t.bytes, ranks=self.s.tp)
        return out

    def mlp(self, p: str, i: int, h: str) -> str:
        m = self.m
        if m.experts > 1:
            out = moe_mlp(self, p, i, h)
            return out if self.s.expert_parallel else self.allreduce(f"{p}.mlp_allreduce", i, out)
        if m.gated_mlp:
            gu = self.matmul(f"{p}.gate_up", i, h, 2 * m.intermediate, f"{p}.gate_up.out")
            act = self.vector(f"{p}.act", "elementwise", i, (gu,), f"{p}.act.out", m.intermediate,
                              FLOPS_PER_ELEMENT["silu_mul"])
        else:
            up = self.matmul(f"{p}.fc", i, h, m.intermediate, f"{p}.fc.out")
            act = self.vector(f"{p}.act", "elementwise", i, (up,), f"{p}.act.out", m.intermediate,
                              FLOPS_PER_ELEMENT["gelu"])
        return self.allreduce(f"{p}.mlp_allreduce", i, self.matmul(f"{p}.down", i, act, m.hidden, f"{p}.down.out"))

    def decoder_layer(self, i: int, x: str) -> str:
        m = self.m
        p = f"L{i}"
        h = self.norm(f"{p}.attn_norm", i, x)
        q, k, v = self.qkv(p, i, h)
        if m.rotary:
            q, k = self.rope(p, i, q, k)
        a = self.attention(f"{p}.attn", i, q, k, v)
        o_proj = self.matmul(f"{p}.o_proj", i, a, m.hidden, f"{p}.o_proj.out", role="attention")
        o = self.allreduce(f"{p}.attn_allreduce", i, o_proj)
        if m.parallel_block:  # GPT-J, Falcon: x + attn(ln(x)) + mlp(ln(x))
            h2 = self.norm(f"{p}.mlp_norm", i, x) if m.arch == "falcon" else h
            d = self.mlp(p, i, h2)
            return self.vector(f"{p}.residual_add", "elementwise", i, (x, o, d), f"{p}.residual_add.out", m.hidden, 2)
        x1 = self.vector(f"{p}.attn_add", "elementwise", i, (x, o), f"{p}.attn_add.out", m.hidden, 1)
        h2 = self.norm(f"{p}.mlp_norm", i, x1)
        d = self.mlp(p, i, h2)
        return self.vector(f"{p}.mlp_add", "elementwise", i, (x1, d), f"{p}.mlp_add.out", m.hidden, 1)

    def encoder_layer(self, i: int, x: str) -> str:
        m = self.m
        p = f"L{i}"
        q, k, v = self.qkv(p, i, x)
        a = self.attention(f"{p}.attn", i, q, k, v)
        o_proj = self.matmul(f"{p}.o_proj", i, a, m.hidden, f"{p}.o_proj.out", role="attention")
        o = self.allreduce(f"{p}.attn_allreduce", i, o_proj)
        x1 = self.vector(f"{p}.attn_add", "elementwise", i, (x, o), f"{p}.attn_add.out", m.hidden, 1)
        x1 = self.norm(f"{p}.attn_norm", i, x1)
        up = self.matmul(f"{p}.fc", i, x1, m.intermediate, f"{p}.fc.out")
        act = self.vector(f"{p}.act", "elementwise", i, (up,), f"{p}.act.out", m.intermediate, FLOPS_PER_ELEMENT["gelu"])
        d = self.allreduce(f"{p}.mlp_allreduce", i, self.matmul(f"{p}.down", i, act, m.hidden, f"{p}.down.out"))
        x2 = self.vector(f"{p}.mlp_add", "elementwise", i, (x1, d), f"{p}.mlp_add.out", m.hidden, 1)
        return self.norm(f"{p}.mlp_norm", i, x2)


def build_step(model: ModelConfig, step: StepSpec) -> OpGraph:
    """The operator DAG of one step of ``model``."""
    if model.is_encoder and step.phase in ("decode", "mixed"):
        raise ConfigError(f"{model.name} is an encoder: use {run_field('phase')} prefill", field=run_field("phase"))
    longest = max((c + t for _, t, c in step.segments), default=step.context + step.tokens)
    if longest > model.max_positions:  # architects do simulate longer contexts
        warnings.warn(MemsimWarning(f"{run_field('context')}/{run_field('prompt')}: {longest} tokens exceed "
                                    f"{model.name}'s {model.max_positions} positions"), stacklevel=2)
    if step.embedding_shards > 1 and model.tie_embeddings:
        raise ConfigError(f"{model.name}'s LM head reads its whole embedding table (they are tied): the table "
                          "cannot be split over pipeline stages", field="embedding_shards")
    if step.expert_parallel and model.experts < 2:
        raise ConfigError(f"{model.name} is a dense model (it has no experts): {run_field('ep')} needs a mixture of experts",
                          field=run_field("ep"))
    if step.expert_parallel and model.experts % step.tp:
        raise ConfigError(f"{model.experts} experts do not spread over {step.tp} ranks", field=run_field("ep"))
    return Builder(shard(model, step.tp, step.expert_parallel), step).build()


def shard(model: ModelConfig, tp: int, expert_parallel: bool = False) -> ModelConfig:
    """One tensor-parallel rank's share (Megatron style): query heads, KV heads and the MLP are split
    across ranks; with more ranks than KV heads each rank keeps a replica of one. Heads that do not
    divide evenly are shared out as the stacks that run them do (tt-metal pads them, a rank's share
    of heads rounded up): the step is the busiest rank's, so it is that rank's share, ``ceil(heads /
    tp)`` query heads and the KV heads they read (24 heads over 32 chips: one head each, 8 chips'
    attention idle)."""
    if tp == 1:
        return model
    heads = -(-model.heads // tp)
    group = model.heads // model.kv_heads  # query heads that read one KV head
    kv_heads = 1 if model.kv_heads <= tp else min(model.kv_heads, -(-heads // group))
    mlp = model.intermediate if expert_parallel else -(-model.intermediate // tp)
    return dataclasses.replace(model, heads=heads, kv_heads=kv_heads, intermediate=mlp,
                               head_dim_override=model.head_dim)
