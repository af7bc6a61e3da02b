"""One declaration of a run: every run parameter once, with its type, default, help and checks.

``RunSpec`` is the single place the parameters of a simulation are declared. The CLI's
options (``memsim run``, ``memsim sweep``, ``memsim trace``), the keyword arguments of
``memsim.simulate`` and the run fields a sweep may vary are all generated from its fields'
metadata, so they cannot disagree. Hardware fields are not run parameters: they are changed
with ``set`` (``--set PATH=VALUE``), which the hardware loader checks.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any

from memsim.core import limits, units
from memsim.core.errors import FLAGS, ConfigError, run_field
from memsim.hardware.loader import number_text
from memsim.workload.dtypes import KV_DTYPES, WEIGHT_DTYPES

PHASES = ("decode", "prefill", "generate")
DEFAULT_TOKENS = 2048  # context or prompt when none is given, if the model has room for it
MAX_STEPS = limits.MAX_STEPS  # decode steps in a generation
SELF_DRAFT = "self"  # --draft self: the target drafts for itself (draft heads, n-gram lookup) at --draft-cost


def param(default: Any, help: str, *, flag: str | None = None, kind: type = str, choices: tuple = (),
          minimum: float | None = None, maximum: float = 2**31 - 1, below: float | None = None, sweepable: bool = True,
          commands: tuple[str, ...] = ("run", "sweep"), cli_default: Any = MISSING) -> Any:
    """A run parameter: its default, CLI flag, value type (str, int, float or bool), allowed values
    (``below``: an exclusive upper bound, for a probability) and where it appears. ``cli_default``:
    what ``memsim run`` uses when the flag is not given, where a person at the console wants more
    than a program calling the API does (declared here, beside the field)."""
    meta = {"help": help, "flag": flag, "kind": kind, "choices": choices, "minimum": minimum, "maximum": maximum,
            "below": below, "sweepable": sweepable, "commands": commands,
            "cli_default": default if cli_default is MISSING else cli_default}
    return field(default=default, metadata=meta)


# The run fields errors name (``errors.run_field``): flags on the command line, keywords in Python.
MODEL, TRACE, TP, PP, EP, PHASE, CHIPS, DRAFT, DRAFT_COST, DRAFT_K, ACCEPT, CONTEXT, PROMPT, GENERATE = (
    run_field(name) for name in ("model", "trace", "tp", "pp", "ep", "phase", "chips", "draft", "draft_cost",
                                 "draft_k", "accept", "context", "prompt", "generate"))

WORKLOAD = ("run", "sweep", "trace")


@dataclass(frozen=True)
class RunSpec:
    """Everything a run depends on besides the files it names. ``None`` means "derive it"."""

    hw: str = param("h100-sxm", "preset name or path to a hardware YAML")
    model: str | None = param(None, "model name in configs/models or a path to a HF config.json",
                              commands=WORKLOAD)
    trace: str | None = param(None, f"simulate a trace file instead of {MODEL}", flag="--trace")
    phase: str = param("decode", f"decode (one step), prefill (one step) or generate (a prefill and {GENERATE} "
                       "decode steps)", choices=PHASES, commands=WORKLOAD)
    batch: int = param(1, "sequences per step", kind=int, minimum=1, commands=WORKLOAD)
    context: int | None = param(None, "decode: tokens already in the KV cache (default: 2048, or fewer if the "
                                "model has fewer positions)", kind=int, minimum=0, commands=WORKLOAD)
    prompt: int | None = param(None, "prefill and generate: prompt tokens (default: 2048, or the model's "
                               "positions if fewer)", kind=int, minimum=1, commands=WORKLOAD)
    weight_dtype: str = param("bf16", "weight format", choices=WEIGHT_DTYPES, commands=WORKLOAD)
    kv_dtype: str = param("bf16", "KV-cache format", choices=KV_DTYPES, commands=WORKLOAD)
    precision: str | None = param(None, "a weight format per tensor class, as deployed stacks mix them: "
                                  "mlp=bfp4,attention=bfp8,lm_head=bf16,embedding=bf16 (classes left out take "
                                  "--weight-dtype)", commands=WORKLOAD)
    group_size: int = param(128, "int4 weights: weights per scale and zero point", kind=int, minimum=1,
                            commands=WORKLOAD)
    generate: int = param(128, "generate: decode steps after the prefill", kind=int, minimum=1, maximum=MAX_STEPS)
    samples: int = param(8, "generate: decode steps simulated; the others are interpolated", kind=int, minimum=2,
                         maximum=MAX_STEPS)
    tp: int = param(1, "tensor-parallel ranks", kind=int, minimum=1, maximum=limits.MAX_RANKS)
    pp: int = param(1, "pipeline stages", kind=int, minimum=1, maximum=limits.MAX_CHIPS)
    chips: int | None = param(None, f"chips in the system: with {TP} or {PP} it must equal tp x pp; alone, the "
                              "fastest tp x pp grid of that many chips that fits is chosen", kind=int, minimum=1,
                              maximum=limits.MAX_CHIPS)
    microbatches: int | None = param(None, "micro-batches the step flows through the pipeline in (default 1; a "
                                     "layer-pipelined chip splits a prefill into execution.pipeline_chunks)",
                                     kind=int, minimum=1, maximum=limits.MAX_TASKS)
    draft: str | None = param(None, "speculative decoding (decode, generate): the draft model (a name in "
                              "configs/models or a path to a HF config.json; it runs on the target's chips, tp "
                              f"and pp), or 'self' for a draft of {DRAFT_COST} (draft heads, n-gram lookup)")
    draft_k: int | None = param(None, f"{DRAFT}: tokens drafted per step (K); the target verifies K+1 in one step",
                                kind=int, minimum=1, maximum=MAX_STEPS)
    accept: float | None = param(None, f"{DRAFT}: probability that the target accepts a drafted token, in [0, 1)",
                                 kind=float, minimum=0, below=1)
    draft_cost: float | None = param(None, f"{DRAFT} self: one drafted token's time, bytes and energy as a fraction "
                                     "of the target's one-token decode step", kind=float, minimum=0)
    ep: bool = param(False, "mixture of experts: spread experts over the tp ranks (all-to-all)", kind=bool)
    system: str | None = param(None, "system YAML overriding the preset's system fields (topology, link, "
                               "collective, ...)")
    stack: str = param("auto", "runtime stack: what the software adds (launches, collective library, host work "
                       "per step): a name in configs/stacks (memsim list stacks), a path to a stack YAML, `ideal` "
                       "(the hardware bound) or `auto` (the chip family's default, docs/stacks.md); --set "
                       "stack.PATH=VALUE changes one of its fields")
    set: tuple[tuple[str, str], ...] = param((), "override a hardware field (or, as stack.PATH, a field of the "
                                             "stack): PATH=VALUE, repeatable",
                                             sweepable=False, commands=("run",))
    sensitivity: int | None = param(0, "name the N estimated preset values the result is most sensitive to, with "
                                    "the step time and energy at the ends of their ranges (two reruns for each "
                                    "estimate the run depends on; 0: only list them; not given: 3 where the run is "
                                    "small enough to rerun in seconds, memsim.run.sensitivity.AUTO_WORK)", kind=int,
                                    minimum=0, maximum=100, sweepable=False, commands=("run",), cli_default=None)
    fast_forward: bool = param(True, "fast-forward off: simulate every chunk and every layer instead of replaying "
                               "repeated ones (slow; for checking)", kind=bool,
                               flag="--no-fast-forward", sweepable=False, commands=("run",))

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name != "set":
                object.__setattr__(self, f.name, check(f, getattr(self, f.name)))
        object.__setattr__(self, "set", overrides(self.set))
        if (self.model is None) == (self.trace is None):
            raise ConfigError(f"give exactly one of {MODEL} and {TRACE}", field=f"{MODEL}/{TRACE}")
        if self.trace is not None:
            if self.tp != 1 or self.pp != 1 or self.ep:
                raise ConfigError(f"a trace holds one chip's step: {TP}, {PP} and {EP} do not apply to it",
                                  field=TRACE)
            if self.phase == "generate":
                raise ConfigError(f"a trace holds one step; {PHASE} generate needs {MODEL}", field=PHASE)
        limits.check(self.tp * self.pp, limits.MAX_CHIPS, f"chips ({TP} x {PP})", f"{TP}/{PP}")
        if self.chips is not None and self.chips != self.tp * self.pp and (self.tp, self.pp) != (1, 1):
            raise ConfigError(f"{self.chips} must equal {TP} x {PP} ({self.tp * self.pp}), or be given alone",
                              field=CHIPS)
        if self.trace is not None and self.chips not in (None, 1):
            raise ConfigError(f"a trace holds one chip's step: {CHIPS} does not apply to it", field=TRACE)
        self._check_speculative()

    def _check_speculative(self) -> None:
        """Speculative decoding's options, given together and only where they mean something."""
        given = [run_field(name) for name in ("draft_k", "accept", "draft_cost") if getattr(self, name) is not None]
        if self.draft is None:
            if given:
                raise ConfigError(f"applies to speculative decoding only: give {DRAFT}", field=given[0])
            return
        if self.trace is not None:
            raise ConfigError(f"a trace holds one step; speculative decoding needs {MODEL}", field=DRAFT)
        if self.phase == "prefill":
            raise ConfigError(f"a prefill drafts nothing: {DRAFT} needs {PHASE} decode or generate", field=DRAFT)
        for name in ("draft_k", "accept"):
            if getattr(self, name) is None:
                raise ConfigError(f"must be given with {DRAFT}", field=run_field(name))
        if (self.draft == SELF_DRAFT) != (self.draft_cost is not None):
            raise ConfigError(f"{DRAFT} self needs {DRAFT_COST}, and only it takes one", field=DRAFT_COST)

    @classmethod
    def make(cls, values: Mapping[str, Any]) -> RunSpec:
        """A spec from keyword values; an unknown name is a one-line error."""
        known = {f.name for f in fields(cls)}
        for name in values:
            if name not in known:
                raise ConfigError(f"unknown run parameter (known: {', '.join(sorted(known))})", field=name)
        return cls(**dict(values))

    def required_model(self) -> str:
        """The model, for what builds one (a spec of a trace has none)."""
        if self.model is None:
            raise ConfigError("needs a model: a trace holds one step", field=MODEL)
        return self.model

    def tokens(self, phase: str) -> int:
        """A resolved spec's context (``phase`` decode) or prompt (prefill, generate)."""
        tokens = self.context if phase == "decode" else self.prompt
        if tokens is None:  # ``resolved`` fills both: a spec used before it is a caller's slip
            raise ConfigError("must be given", field=CONTEXT if phase == "decode" else PROMPT)
        return tokens

    def speculation(self) -> Speculation | None:
        """Speculative decoding's options, each given; None without ``--draft``."""
        if self.draft is None:
            return None
        if self.draft_k is None or self.accept is None:  # ``_check_speculative`` rules it out
            raise ConfigError(f"must be given with {DRAFT}", field=DRAFT_K if self.draft_k is None else ACCEPT)
        return Speculation(draft=self.draft, k=self.draft_k, accept=self.accept, cost=self.draft_cost)

    def resolved(self, max_positions: int | None) -> RunSpec:
        """The spec with ``context`` and ``prompt`` defaults that fit a model of ``max_positions``."""
        room = max_positions if max_positions else DEFAULT_TOKENS
        context = self.context if self.context is not None else max(0, min(DEFAULT_TOKENS, room - 1))
        prompt = self.prompt if self.prompt is not None else max(1, min(DEFAULT_TOKENS, room))
        return replace(self, context=context, prompt=prompt)


@dataclass(frozen=True, slots=True, kw_only=True)
class Speculation:
    """A speculative spec's options: ``draft`` (a model, or ``SELF_DRAFT``), K tokens drafted per
    step, the acceptance rate and, for ``--draft self`` only, a drafted token's cost."""

    draft: str
    k: int
    accept: float
    cost: float | None


# ``memsim explain`` takes ``memsim run``'s options but the estimates' reruns: it reruns the step itself.
EXPLAIN_LEAVES = ("sensitivity",)


def options(command: str) -> list:
    """The ``RunSpec`` fields that ``memsim COMMAND`` takes as options."""
    if command == "explain":
        return [f for f in options("run") if f.name not in EXPLAIN_LEAVES]
    return [f for f in fields(RunSpec) if command in f.metadata["commands"]]


def flag(f) -> str:
    return f.metadata["flag"] or "--" + f.name.replace("_", "-")


# The flags that are not ``--`` and the field's name with dashes: errors name them on the command line.
FLAGS.update({f.name: flag(f) for f in fields(RunSpec) if flag(f) != "--" + f.name.replace("_", "-")})


def sweepable() -> dict[str, Any]:
    """Run fields a sweep may vary: name -> field (``weight-dtype`` is accepted for ``weight_dtype``)."""
    return {f.name: f for f in fields(RunSpec) if f.metadata["sweepable"]}


def parse_value(f, text: str) -> Any:
    """A swept or YAML value given as text, converted to the field's type."""
    kind = f.metadata["kind"]
    if kind is int:
        try:
            return int(str(text).strip())
        except ValueError:
            raise ConfigError(f"expected an integer, got {units.shown(text)}", field=run_field(f.name)) from None
    if kind is float:
        try:
            return float(str(text).strip())
        except ValueError:
            raise ConfigError(f"expected a number, got {units.shown(text)}", field=run_field(f.name)) from None
    if kind is bool:
        lowered = str(text).strip().lower()
        if lowered in ("true", "1", "yes", "on"):
            return True
        if lowered in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"expected true or false, got {units.shown(text)}", field=run_field(f.name))
    return str(text)


def check(f, value: Any) -> Any:
    """``value`` checked against field ``f``'s type, range and choices (ints given as whole floats become ints)."""
    kind, name = f.metadata["kind"], run_field(f.name)
    if value is None:  # "derive it", where the field (or the console) may leave it so
        if f.default is not None and f.metadata["cli_default"] is not None:
            raise ConfigError("must be given", field=name)
        return None
    if kind is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"expected true or false, got {units.shown(value)}", field=name)
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and math.isfinite(value) and value.is_integer():
                value = int(value)
            else:
                raise ConfigError(f"expected an integer, got {units.shown(value)}", field=name)
        return _in_range(f, value, name)
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(f"expected a finite number, got {units.shown(value)}", field=name)
        return _in_range(f, float(value), name)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"expected a non-empty text, got {units.shown(value)}", field=name)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(f"not valid text (an undecodable byte): {units.shown(value)}", field=name) from None
    if f.metadata["choices"] and value not in f.metadata["choices"]:
        raise ConfigError(f"{units.shown(value)} is not one of {', '.join(f.metadata['choices'])}", field=name)
    return value


def _in_range(f, value: float, name: str) -> Any:
    meta = f.metadata
    if meta["minimum"] is not None and value < meta["minimum"]:
        raise ConfigError(f"must be at least {meta['minimum']}, got {value}", field=name)
    if value > meta["maximum"]:
        raise ConfigError(f"must be at most {meta['maximum']:,}, got {value:,}", field=name)
    if meta["below"] is not None and value >= meta["below"]:
        raise ConfigError(f"must be below {meta['below']}, got {value}", field=name)
    return value


def overrides(items: Iterable[str] | Mapping[str, str] | Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """``--set`` items (``PATH=VALUE`` texts, pairs or a mapping) as pairs; a path given twice is an error."""
    if items is None:
        return ()
    if isinstance(items, str):
        items = [items]
    if not isinstance(items, (Mapping, Iterable)):
        raise ConfigError(f"expected PATH=VALUE texts, (path, value) pairs or a mapping, got {units.shown(items)}",
                          field=run_field("set"))
    pairs = []
    for item in (items.items() if isinstance(items, Mapping) else items):
        if isinstance(item, str):
            key, sep, value = item.partition("=")
            if not sep or not key.strip() or not value.strip():
                raise ConfigError(f"expected PATH=VALUE, got {units.shown(item)}", field=run_field("set"))
        elif isinstance(item, tuple) and len(item) == 2:
            key, value = item
            if isinstance(value, (int, float)) and not isinstance(value, bool):  # a quantity in base units
                value = number_text(str(key).strip(), value)
        else:
            raise ConfigError(f"expected PATH=VALUE, got {units.shown(item)}", field=run_field("set"))
        pairs.append((str(key).strip(), str(value).strip()))
    seen = set()
    for key, _ in pairs:
        if key in seen:
            raise ConfigError(f"{key} is given twice", field=run_field("set"))
        seen.add(key)
    return tuple(pairs)


def defaults() -> dict[str, Any]:
    return {f.name: f.default for f in fields(RunSpec) if f.default is not MISSING}
