"""What a serving run serves on and how it schedules, as the loop reads them: the ``Deployment`` (a chip
with its overrides, a model and its dtypes, ``tp`` ranks to an instance, and its instances: ``replicas``
that each serve whole requests, or ``prefill`` and ``decode`` instances, a prefilled sequence's KV cache
sent between them over ``handoff_link``) and the ``Policy`` (the scheduler and its limits, what the stack
leaves unset taken from the stack). Both are made from a ``ServeSpec`` (``serving.serve``)."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from memsim.core.errors import ConfigError, run_field
from memsim.engine.schedulers import chosen
from memsim.engine.serving_state import PREEMPTION
from memsim.serving.spec import MAX_BLOCK_TOKENS, MAX_INSTANCES
from memsim.stack.spec import StackSpec


@dataclass(frozen=True, kw_only=True)
class Deployment:
    hw: str = "h100-sxm"
    model: str = "llama-3.1-8b"
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    tp: int = 1
    pp: int = 1  # pipeline stages to an instance, run as pp virtual engines (vLLM's), a batch in each stage
    set: tuple = ()
    replicas: int = 1  # instances serving whole requests
    prefill: int = 0  # disaggregated: prefill instances ...
    decode: int = 0  # ... and decode instances
    handoff_link: str = ""  # the chip link a KV cache is sent over between them (default: the chip's interconnect)
    stack: str = "auto"  # the runtime stack that serves it (memsim.stack): its kernels, collectives, host work, policies
    precision: str | None = None  # a weight format per tensor class (``mlp=bfp4,attention=bfp8``), over weight_dtype

    def __post_init__(self) -> None:
        for name in ("replicas", "prefill", "decode", "pp"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_INSTANCES:
                raise ConfigError(f"must be a whole number from 0 to {MAX_INSTANCES}", field=name)
        if self.pp < 1:
            raise ConfigError("must be at least 1", field="pp")
        if (self.prefill > 0) != (self.decode > 0):
            raise ConfigError("disaggregated serving needs both prefill and decode instances",
                              field=run_field("prefill_instances"))
        if not self.prefill and self.replicas < 1:
            raise ConfigError("must be at least 1", field="replicas")

    @property
    def layout(self) -> str:
        chips = self.tp * self.pp
        unit = f"{chips} chip{'s' * (chips > 1)}" + (f" (tp {self.tp} x pp {self.pp})" if self.pp > 1 else "")
        if self.prefill:
            return f"{self.prefill} prefill + {self.decode} decode instances of {unit}"
        return f"{self.replicas} instance{'s' * (self.replicas > 1)} of {unit}"


@dataclass(frozen=True, kw_only=True)
class Policy:
    scheduler: str | None = None  # None: the stack's (``stack.serving``), as max_seqs and max_tokens
    block_tokens: int = 16
    max_seqs: int | None = None
    max_tokens: int | None = None  # chunked: the token budget of a step
    prefix_caching: bool = False
    preemption: str = "recompute"
    slo_ttft_s: float = 1.0  # goodput counts the requests that meet both
    slo_tpot_s: float = 0.1

    def __post_init__(self) -> None:
        if self.scheduler is not None and self.scheduler not in chosen():
            raise ConfigError(f"unknown scheduler {self.scheduler!r} ({', '.join(chosen())})", field=run_field("scheduler"))
        if self.preemption not in PREEMPTION:
            raise ConfigError(f"unknown preemption {self.preemption!r} ({', '.join(PREEMPTION)})", field=run_field("preemption"))
        for name, most in (("block_tokens", MAX_BLOCK_TOKENS), ("max_seqs", 1 << 20), ("max_tokens", 1 << 24)):
            value = getattr(self, name)
            if value is None and name != "block_tokens":
                continue
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= most:
                raise ConfigError(f"must be a whole number from 1 to {most:,}", field=name)
        for name in ("slo_ttft_s", "slo_tpot_s"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) > 0):
                raise ConfigError("must be a positive time in seconds", field=name)

    def resolved(self, stack: StackSpec) -> Policy:
        """The policy with what it leaves to the stack (``None``) taken from the stack's serving policies."""
        own = stack.serving
        if own.scheduler not in chosen():
            raise ConfigError(f"unknown scheduler {own.scheduler!r} ({', '.join(chosen())})",
                              field="stack.serving.scheduler")
        return dataclasses.replace(self, scheduler=self.scheduler or own.scheduler,
                                   max_seqs=self.max_seqs or min(own.max_seqs, 1 << 20),
                                   max_tokens=self.max_tokens or min(own.max_tokens, 1 << 24))
