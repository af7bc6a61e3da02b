"""Transformer shape parameters read from a Hugging Face style ``config.json``."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from memsim.core import limits
from memsim.core.errors import ConfigError
from memsim.core.files import load_json
from memsim.core.units import shown

# model_type -> the layer structure memsim builds
ARCH = {"gpt2": "gpt2", "bert": "bert", "llama": "llama", "mistral": "llama", "qwen2": "llama", "mixtral": "llama",
        "gptj": "gptj", "falcon": "falcon"}


@dataclass(frozen=True, slots=True)
class ModelConfig:
    name: str
    arch: str  # gpt2 | bert | llama: decides norms, MLP and embeddings
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    max_positions: int
    tie_embeddings: bool
    head_dim_override: int = 0  # when the config sets head_dim explicitly
    experts: int = 1  # mixture-of-experts: experts per layer (1 = dense MLP)
    experts_per_token: int = 1  # top-k routing
    qkv_bias: bool = False  # Qwen2-style bias on the QKV projection

    @property
    def head_dim(self) -> int:
        return self.head_dim_override or self.hidden // self.heads

    @property
    def is_encoder(self) -> bool:
        return self.arch == "bert"

    @property
    def gated_mlp(self) -> bool:
        return self.arch == "llama"

    @property
    def parallel_block(self) -> bool:
        """Attention and MLP read the same normalised input and their outputs are summed."""
        return self.arch in ("gptj", "falcon")

    @property
    def rotary(self) -> bool:
        return self.arch in ("llama", "gptj", "falcon")


# A shape field past this is a typo, not a model (no config comes near 2^31 layers, heads or tokens).
MAX_SHAPE = 2**31 - 1
# Layers: the largest models have a few hundred; a step's DAG holds about a dozen ops a layer.
MAX_LAYERS = limits.MAX_LAYERS


def load_model(path: Path) -> ModelConfig:
    """A Hugging Face style config.json, read strictly; the fields memsim uses are checked."""
    file = str(path)
    raw = load_json(path)
    if not isinstance(raw, dict):
        raise ConfigError("expected a JSON object", file=file)
    mtype = raw.get("model_type")
    if not isinstance(mtype, str) or mtype not in ARCH:
        raise ConfigError(f"unsupported model_type {shown(mtype)} (supported: {', '.join(ARCH)})", file=file,
                          field="model_type")
    arch = ARCH[mtype]

    def get(*keys: str, default: int | None = None) -> int:
        for key in keys:
            if key in raw and raw[key] is not None:
                value = raw[key]
                if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_SHAPE:
                    raise ConfigError(f"expected a positive integer up to {MAX_SHAPE}, got {shown(value)}", file=file,
                                      field=key)
                return value
        if default is None:
            raise ConfigError("missing required field", file=file, field=keys[0])
        return default

    def flag(key: str, default: bool) -> bool:
        value = raw.get(key)
        if value is not None and not isinstance(value, bool):
            raise ConfigError(f"expected true or false, got {shown(value)}", file=file, field=key)
        return default if value is None else value

    hidden = get("hidden_size", "n_embd")
    heads = get("num_attention_heads", "n_head")
    head_dim = get("head_dim", default=0)
    if hidden % heads and not head_dim:
        raise ConfigError(f"hidden size {hidden} is not divisible by {heads} heads", file=file, field="num_attention_heads")
    default_kv = 1 if arch == "falcon" and not flag("new_decoder_architecture", False) else heads
    kv_heads = get("num_key_value_heads", "num_kv_heads", default=default_kv)
    if heads % kv_heads:
        raise ConfigError(f"{heads} heads are not divisible into {kv_heads} KV groups", file=file, field="num_key_value_heads")
    experts = get("num_local_experts", default=1)
    experts_per_token = get("num_experts_per_tok", default=1)
    if experts_per_token > experts:
        raise ConfigError(f"{experts_per_token} experts per token but {experts} experts", file=file,
                          field="num_experts_per_tok")
    layers = get("num_hidden_layers", "n_layer")
    if layers > MAX_LAYERS:
        raise ConfigError(f"expected at most {MAX_LAYERS} layers, got {layers}", file=file,
                          field="num_hidden_layers" if "num_hidden_layers" in raw else "n_layer")
    return ModelConfig(
        name=path.stem,
        arch=arch,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        intermediate=get("intermediate_size", "n_inner", "ffn_hidden_size", default=4 * hidden),
        vocab=get("vocab_size"),
        max_positions=get("max_position_embeddings", "n_positions", default=2048),
        tie_embeddings=flag("tie_word_embeddings", arch in ("gpt2", "falcon")),
        head_dim_override=head_dim,
        experts=experts,
        experts_per_token=experts_per_token,
        qkv_bias=mtype == "qwen2",
    )
