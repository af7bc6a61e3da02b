"""A sequence in a serving run: one request from arrival to its last token, its progress through
prefill and decode, the KV blocks it holds and the times it reports (``Seq.row``: a line of
requests.csv), with the gap before each of its output tokens (inter-token latency)."""
from __future__ import annotations

from dataclasses import dataclass, field

from memsim.core.units import PS_PER_S


@dataclass(kw_only=True, eq=False)  # a sequence is itself: compared by identity
class Seq:
    id: int
    arrival_ps: int  # times on the loop's integer clock, in picoseconds
    prompt: int
    output: int
    prefix_id: str = ""
    prefix: int = 0
    generated: int = 0
    prefilled: int = 0  # of the prompt and ``recompute``, the tokens whose KV is computed
    blocks: int = 0
    shared: int = 0  # of ``blocks``, those of a cached prefix it shares
    scheduled_ps: int | None = None
    first_token_ps: int | None = None
    end_ps: int | None = None
    preemptions: int = 0
    recompute: int = 0  # tokens generated before a preemption, prefilled again with the prompt
    swapped: int = 0  # blocks it holds on the host level, swapped out
    handoff_ps: int = 0  # disaggregated: the time its KV cache took to reach the decode instance
    instance: int = 0  # the instance that served it (its decode instance, disaggregated)
    last_token_ps: int | None = None
    gaps: list = field(default_factory=list)  # picoseconds between each output token and the one before

    def token(self, now: int) -> None:
        """An output token at ``now``: the gap since the last one is kept (inter-token latency)."""
        if self.last_token_ps is not None:
            self.gaps.append(now - self.last_token_ps)
        self.last_token_ps = now

    @property
    def arrival_s(self) -> float:
        return self.arrival_ps / PS_PER_S

    @property
    def scheduled_s(self) -> float | None:
        return None if self.scheduled_ps is None else self.scheduled_ps / PS_PER_S

    @property
    def first_token_s(self) -> float | None:
        return None if self.first_token_ps is None else self.first_token_ps / PS_PER_S

    @property
    def end_s(self) -> float | None:
        return None if self.end_ps is None else self.end_ps / PS_PER_S

    @property
    def handoff_s(self) -> float:
        return self.handoff_ps / PS_PER_S

    @property
    def context(self) -> int:
        return self.prompt + self.generated

    @property
    def to_prefill(self) -> int:
        return self.prompt + self.recompute

    @property
    def decoding(self) -> bool:
        return self.prefilled >= self.to_prefill

    def row(self) -> dict:
        """A finished sequence's times: queueing, time to first token, per output token, end to end."""
        assert self.scheduled_ps is not None and self.first_token_ps is not None and self.end_ps is not None
        arrival, first, end = self.arrival_ps, self.first_token_ps, self.end_ps
        return {"id": self.id, "arrival_s": self.arrival_s, "prompt_tokens": self.prompt, "output_tokens": self.output,
                "prefix_id": self.prefix_id, "prefix_tokens": self.prefix,
                "queue_s": (self.scheduled_ps - arrival) / PS_PER_S, "ttft_s": (first - arrival) / PS_PER_S,
                "tpot_s": (end - first) / PS_PER_S / (self.output - 1) if self.output > 1 else 0.0,
                "e2e_s": (end - arrival) / PS_PER_S, "itl_s_max": max(self.gaps, default=0) / PS_PER_S,
                "preemptions": self.preemptions, "handoff_s": self.handoff_s, "instance": self.instance}
