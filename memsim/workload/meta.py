"""What a step's graph is of: ``StepMeta``, a typed field of every ``OpGraph``.

The model and the step (phase, batch, tokens, context), the dtypes its weights and KV cache are
stored in, the tensor-parallel ranks its graph is one rank of and the experts split over them,
and where the graph came from. The builders, the importers and a trace's ``meta`` object all
make one; the mapping reads ``tp`` from it and the report writes it as the summary's
``workload``. It checks its own fields when made, like ``Op`` and ``Tensor``: a trace whose
``meta`` names a key memsim does not know (``TP`` for ``tp``) is refused, not run on one chip.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from memsim.core import limits, units
from memsim.core.errors import TraceError


@dataclass(frozen=True, slots=True, kw_only=True)
class StepMeta:
    model: str | None = None
    arch: str | None = None  # the model's architecture (llama, gpt2, bert, mixtral, ...)
    phase: str | None = None  # prefill, decode, or imported (a graph an importer read)
    batch: int | None = None  # sequences
    tokens: int | None = None  # per sequence: the step's new tokens
    context: int | None = None  # per sequence: tokens already in the KV cache
    weight_dtype: str | None = None
    kv_dtype: str | None = None
    group_size: int | None = None  # a weight-only format's quantisation group
    tp: int = 1  # tensor-parallel ranks: the graph is one rank's share
    expert_parallel: bool | None = None  # experts split over the tensor-parallel ranks
    source: str | None = None  # an importer's: onnx, torch.export, chakra
    chakra_version: str | None = None  # the Chakra schema an imported trace was written in
    benchmark: str | None = None  # a microbenchmark's kind (memsim.validation): gemm or stream

    def __post_init__(self) -> None:
        for name, least, most in (("tp", 1, limits.MAX_RANKS), ("batch", 0, None), ("tokens", 0, None),
                                  ("context", 0, None), ("group_size", 1, None)):
            value = getattr(self, name)
            if value is None and name != "tp":
                continue
            try:
                units.check_number(value, least)
            except units.UnitError as exc:
                raise TraceError(str(exc), field=f"meta.{name}") from None
            if most is not None and value > most:
                raise TraceError(f"must be at most {most}", field=f"meta.{name}")
        for name in ("model", "arch", "phase", "weight_dtype", "kv_dtype", "source", "chakra_version", "benchmark"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise TraceError(f"expected a text, got {units.shown(value)}", field=f"meta.{name}")
        if self.expert_parallel is not None and not isinstance(self.expert_parallel, bool):
            raise TraceError(f"expected true or false, got {units.shown(self.expert_parallel)}",
                             field="meta.expert_parallel")

    @classmethod
    def read(cls, raw: Any) -> StepMeta:
        """A trace's ``meta`` object; a key it does not declare is refused, naming the known ones."""
        if not isinstance(raw, dict):
            raise TraceError(f"expected an object, got {units.shown(raw)}", field="meta")
        for key in raw:
            if key not in KEYS:
                close = [k for k in KEYS if k.lower() == key.lower()]
                hint = f"did you mean {close[0]}?" if close else f"known: {', '.join(KEYS)}"
                short = len(key) <= units.MAX_LABEL
                raise TraceError(f"unknown field{'' if short else ' ' + units.shown(key)} ({hint})",
                                 field=f"meta.{key}" if short else "meta")
        return cls(**raw)

    def as_dict(self) -> dict[str, Any]:
        """The fields that are set, in the declared order: a trace's ``meta``, a summary's ``workload``."""
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}


KEYS = tuple(f.name for f in fields(StepMeta))
