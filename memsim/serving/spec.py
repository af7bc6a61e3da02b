"""One declaration of a serving run: every parameter of ``memsim serve`` once, with its type,
default, help and checks, as ``RunSpec`` declares a run's.

``memsim serve``'s options, ``memsim.serve``'s keyword arguments (its signature is generated from
these fields), the fields a serving sweep may vary (``memsim sweep --serve --set NAME=...``) and the
names errors use are all read from ``ServeSpec``, so one parameter has one name everywhere: the
keyword is the flag without its dashes (``--output-tokens`` is ``output_tokens``). The serving run
reads the spec itself (``memsim.serving.serve``, ``memsim.serving.model``): its deployment, its
scheduling policy (``resolved``: what it leaves to the stack taken from the stack) and its requests.
"""
from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from memsim.core import limits
from memsim.core.errors import ConfigError, run_field
from memsim.engine.schedulers import chosen
from memsim.engine.serving_state import PREEMPTION
from memsim.run.runspec import check, overrides, param
from memsim.stack.spec import StackSpec
from memsim.workload.dtypes import KV_DTYPES, WEIGHT_DTYPES
from memsim.workload.requests import ARRIVALS, BURSTINESS, LENGTHS, MAX_TOKENS

SERVE = ("serve",)  # the command whose options these fields are
SERVED = ("serve", "capacity")  # the deployment and its workload's shape: a capacity search's too
THINK = ("fixed", "exponential")
MAX_INSTANCES = 1024  # instances of a deployment, of each kind
MAX_BLOCK_TOKENS = 4096  # tokens in one KV block (serving stacks use 8 to 256)
POSITIVE = 1e-9  # the least rate (requests a second) or SLO (seconds) taken: "positive", as a number


def _serve(default: Any, help: str, **kw: Any) -> Any:
    return param(default, help, commands=kw.pop("commands", SERVED), **kw)


@dataclass(frozen=True)
class ServeSpec:
    """Everything a serving run depends on besides the files it names. ``None``: the stack's value
    (scheduler, max_seqs, max_tokens) or none (a trace, a precision recipe, the handoff link)."""

    hw: str = _serve("h100-sxm", "preset name or path to a hardware YAML")
    model: str = _serve("llama-3.1-8b", "model name in configs/models or a config.json")
    weight_dtype: str = _serve("bf16", "weight format", choices=WEIGHT_DTYPES)
    kv_dtype: str = _serve("bf16", "KV-cache format", choices=KV_DTYPES)
    precision: str | None = _serve(None, "a weight format per tensor class (mlp=bfp4,attention=bfp8), over the "
                                   "weight format")
    tp: int = _serve(1, "tensor-parallel ranks: chips to an instance", kind=int, minimum=1, maximum=limits.MAX_RANKS)
    pp: int = _serve(1, "pipeline stages to an instance (run as that many virtual engines)", kind=int, minimum=1,
                     maximum=MAX_INSTANCES)
    replicas: int = _serve(1, "instances serving whole requests", kind=int, minimum=1, maximum=MAX_INSTANCES)
    prefill_instances: int = _serve(0, f"disaggregated serving: instances that prefill (with "
                                    f"{run_field('decode_instances')})", kind=int, minimum=0, maximum=MAX_INSTANCES)
    decode_instances: int = _serve(0, f"disaggregated serving: instances that decode, sent each KV cache over "
                                   f"{run_field('handoff_link')}", kind=int, minimum=0, maximum=MAX_INSTANCES)
    handoff_link: str | None = _serve(None, "chip link a KV cache is sent over (default: the chip's interconnect)")
    set: tuple[tuple[str, str], ...] = _serve((), "override a hardware field (or, as stack.PATH, a field of the "
                                              "stack): PATH=VALUE, repeatable", sweepable=False)
    stack: str = _serve("auto", "runtime stack (memsim list stacks): its kernels, collectives, host work per step "
                        "and serving policies")
    requests: str | None = _serve(None, "request trace CSV (docs/serving.md); without one, requests are drawn",
                                  sweepable=False, commands=SERVE)
    count: int = _serve(100, "drawn requests: how many", kind=int, minimum=1, maximum=limits.MAX_OPS, commands=SERVE)
    duration: float | None = _serve(None, f"drawn requests: every one that arrives in this many seconds, in place of "
                                    f"{run_field('count')}", kind=float, minimum=POSITIVE, commands=SERVE)
    rate: float = _serve(1.0, "drawn requests: arrivals a second", kind=float, minimum=POSITIVE, commands=SERVE)
    arrival: str = _serve("poisson", f"drawn requests: exponential gaps, or gamma gaps of coefficient of "
                          f"variation {run_field('burstiness')}", choices=ARRIVALS)
    burstiness: float = _serve(1.0, "gamma arrivals: the gaps' coefficient of variation", kind=float,
                               minimum=BURSTINESS[0], maximum=BURSTINESS[1])
    prompt: int = _serve(512, "drawn requests: prompt tokens (median)", kind=int, minimum=1, maximum=MAX_TOKENS)
    output_tokens: int = _serve(128, "drawn requests: output tokens (median)", kind=int, minimum=1, maximum=MAX_TOKENS)
    lengths: str = _serve("fixed", f"drawn requests: how lengths vary around {run_field('prompt')} and "
                          f"{run_field('output_tokens')}", choices=LENGTHS)
    spread: float = _serve(0.5, "uniform lengths: +- fraction; lognormal: sigma", kind=float, minimum=0, below=5)
    prefix: int = _serve(0, "drawn requests: prompt tokens every request shares", kind=int, minimum=0,
                         maximum=MAX_TOKENS)
    seed: int = _serve(0, "drawn requests: the random seed", kind=int, minimum=0, maximum=2**63 - 1)
    warmup: float = _serve(0.0, "seconds from the first arrival whose requests are served but left out of every "
                           "figure (the deployment filling up)", kind=float, minimum=0, commands=SERVE)
    users: int = _serve(0, "a closed loop: this many clients, each sending its next request when its last is done",
                        kind=int, minimum=0, maximum=1 << 20, commands=SERVE)
    think: float = _serve(0.0, "closed loop: seconds between a client's requests (the mean, if exponential)",
                          kind=float, minimum=0, commands=SERVE)
    think_dist: str = _serve("fixed", "closed loop: think times fixed, or drawn exponential", choices=THINK,
                             commands=SERVE)
    ramp: float = _serve(0.0, "closed loop: each client's first request at a time drawn uniformly over this many "
                         "seconds (0: every client at once)", kind=float, minimum=0, commands=SERVE)
    scheduler: str | None = _serve(None, f"batching policy: a registered scheduler ({', '.join(chosen())}: "
                                   "docs/serving.md; default: the stack's)")
    preemption: str = _serve("recompute", "a preempted sequence's KV cache: recomputed, or swapped to the host level",
                             choices=PREEMPTION)
    block_tokens: int = _serve(16, "tokens in one KV-cache block", kind=int, minimum=1, maximum=MAX_BLOCK_TOKENS)
    max_seqs: int | None = _serve(None, "sequences in one step at most (default: the stack's)", kind=int, minimum=1,
                                  maximum=1 << 20)
    max_tokens: int | None = _serve(None, "tokens computed in one step at most (chunked: the step's token budget; "
                                    "default: the stack's)", kind=int, minimum=1, maximum=1 << 24)
    prefix_caching: bool = _serve(False, "share the KV blocks of a common prefix", kind=bool)
    slo_ttft: float = _serve(1.0, "the SLO on time to first token (goodput; memsim capacity), s", kind=float, minimum=POSITIVE)
    slo_tpot: float = _serve(0.1, "the SLO on time per output token (goodput; memsim capacity), s", kind=float, minimum=POSITIVE)
    check: int = _serve(8, "steps whose interpolated time is checked against a full simulation", kind=int,
                        minimum=0, maximum=1000, sweepable=False, commands=())

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name != "set":
                object.__setattr__(self, f.name, check(f, getattr(self, f.name)))
        object.__setattr__(self, "set", overrides(self.set))
        if self.scheduler is not None and self.scheduler not in chosen():  # read when run: one registered late counts
            raise ConfigError(f"{self.scheduler!r} is not one of {', '.join(chosen())}", field=run_field("scheduler"))
        if self.duration is not None and (self.users or self.requests is not None):
            raise ConfigError("draws open-loop arrivals: a closed loop sends count requests, a trace gives its own",
                              field=run_field("duration"))
        if (self.prefill_instances > 0) != (self.decode_instances > 0):
            raise ConfigError(f"disaggregated serving needs both {run_field('prefill_instances')} and "
                              f"{run_field('decode_instances')}", field=run_field("prefill_instances"))

    @classmethod
    def make(cls, values: Mapping[str, Any]) -> ServeSpec:
        """A spec from keyword values; an unknown name is a one-line error."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown serving parameter (known: {', '.join(sorted(known))})", field=unknown[0])
        return cls(**dict(values))

    def drawn(self) -> dict[str, Any]:
        """The keywords of ``workload.requests.synthetic`` this spec gives."""
        return {"arrival": self.arrival, "burstiness": self.burstiness, "prompt": self.prompt,
                "output": self.output_tokens, "lengths": self.lengths, "spread": self.spread, "seed": self.seed,
                "prefix": self.prefix, "duration": self.duration}

    def trace_path(self) -> Path | None:
        return Path(self.requests) if self.requests is not None else None

    @property
    def layout(self) -> str:
        """The deployment in words: its instances and the chips of each."""
        chips = self.tp * self.pp
        unit = f"{chips} chip{'s' * (chips > 1)}" + (f" (tp {self.tp} x pp {self.pp})" if self.pp > 1 else "")
        if self.prefill_instances:
            return f"{self.prefill_instances} prefill + {self.decode_instances} decode instances of {unit}"
        return f"{self.replicas} instance{'s' * (self.replicas > 1)} of {unit}"

    def resolved(self, stack: StackSpec) -> ServeSpec:
        """The spec with what it leaves to the stack (the scheduler, ``max_seqs``, ``max_tokens``: ``None``) taken
        from the stack's serving policies."""
        own = stack.serving
        if own.scheduler not in chosen():
            raise ConfigError(f"unknown scheduler {own.scheduler!r} ({', '.join(chosen())})",
                              field="stack.serving.scheduler")
        return dataclasses.replace(self, scheduler=self.scheduler or own.scheduler,
                                   max_seqs=self.max_seqs or min(own.max_seqs, 1 << 20),
                                   max_tokens=self.max_tokens or min(own.max_tokens, 1 << 24))


def options(command: str = "serve") -> list:
    """The ``ServeSpec`` fields that ``memsim COMMAND`` takes as options."""
    return [f for f in fields(ServeSpec) if command in f.metadata["commands"]]


def sweepable() -> dict[str, Any]:
    """The fields a serving sweep may vary: name -> field."""
    return {f.name: f for f in fields(ServeSpec) if f.metadata["sweepable"]}


def signature(first: tuple[str, ...] = ("hw", "model")) -> inspect.Signature:
    """``memsim.serve``'s signature, generated from the fields: ``first`` positional, the rest keywords."""
    params = [inspect.Parameter(f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD if f.name in first else
                                inspect.Parameter.KEYWORD_ONLY, default=f.default) for f in fields(ServeSpec)]
    return inspect.Signature(sorted(params, key=lambda p: p.kind))
