"""A serving run on SimPy: requests arrive, a scheduler forms each step's batch from the waiting and
running sequences, the step takes the time ``step_time`` gives for its work (memsim's own engine,
through ``memsim.serve``), and each sequence's tokens and KV blocks advance with it.

The KV cache is paged: ``Limits.kv_blocks`` blocks of ``block_tokens`` tokens each. A sequence holds
the blocks of its context; admitted, it takes the blocks of its prompt (less those of a cached shared
prefix); each decode that crosses a block boundary takes one more. When a decode finds no free block
the newest running sequence is preempted by recomputation: its blocks are freed and it waits again,
at the head of the queue, to prefill its prompt and what it had generated.

Schedulers are registered policies (``SCHEDULERS``): ``prefill_first`` (iteration-level batching that
runs waiting prefills before decodes: vLLM's default before chunked prefill) and ``static`` (a batch
is admitted, prefilled together and decoded until every sequence of it is done, as ``--phase
generate``).
"""
from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import simpy

from memsim.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class Limits:
    kv_blocks: int  # blocks the KV cache has, per rank
    block_tokens: int = 16
    max_seqs: int = 256  # sequences in one step
    max_tokens: int = 8192  # tokens computed in one step (a prefill's prompt counts whole)
    prefix_caching: bool = False


@dataclass(frozen=True, kw_only=True)
class Batch:
    """One step's work: each prefill's (sequence, tokens computed, context before them) and each decode's
    (sequence, context before its new token)."""
    prefills: tuple[tuple[int, int, int], ...] = ()
    decodes: tuple[tuple[int, int], ...] = ()

    @property
    def tokens(self) -> int:
        return sum(t for _, t, _ in self.prefills) + len(self.decodes)


@dataclass(kw_only=True)
class Seq:
    id: int
    arrival_s: float
    prompt: int
    output: int
    prefix_id: str = ""
    prefix: int = 0
    generated: int = 0
    blocks: int = 0
    shared: int = 0  # of ``blocks``, those of a cached prefix it shares
    scheduled_s: float | None = None
    first_token_s: float | None = None
    end_s: float | None = None
    preemptions: int = 0
    recompute: int = 0  # tokens generated before a preemption, prefilled again with the prompt

    @property
    def context(self) -> int:
        return self.prompt + self.generated

    def row(self) -> dict:
        """A finished sequence's times: queueing, time to first token, per output token, end to end."""
        assert self.scheduled_s is not None and self.first_token_s is not None and self.end_s is not None
        return {"id": self.id, "arrival_s": self.arrival_s, "prompt_tokens": self.prompt,
                "output_tokens": self.output, "queue_s": self.scheduled_s - self.arrival_s,
                "ttft_s": self.first_token_s - self.arrival_s,
                "tpot_s": (self.end_s - self.first_token_s) / (self.output - 1) if self.output > 1 else 0.0,
                "e2e_s": self.end_s - self.arrival_s, "preemptions": self.preemptions}


@dataclass(kw_only=True)
class State:
    """What a scheduler sees and changes: the queue, the running sequences and the free blocks."""
    limits: Limits
    waiting: deque = field(default_factory=deque)
    running: list = field(default_factory=list)
    free: int = 0
    prefixes: dict = field(default_factory=dict)  # prefix id -> blocks cached
    in_system: int = 0  # arrived and not finished
    area: float = 0.0  # the integral of ``in_system`` over time (its mean, by Little's law, is rate x time in system)
    since: float = 0.0

    def count(self, now: float, change: int) -> None:
        self.area += self.in_system * (now - self.since)
        self.in_system, self.since = self.in_system + change, now

    def blocks_for(self, tokens: int) -> int:
        return math.ceil(tokens / self.limits.block_tokens)

    def admit_blocks(self, seq: Seq) -> tuple[int, int]:
        """Blocks a sequence takes to prefill, and of them those a cached prefix already holds."""
        need = self.blocks_for(seq.prompt + seq.recompute)
        cached = self.prefixes.get(seq.prefix_id, 0) if self.limits.prefix_caching and seq.prefix_id else 0
        return need, min(cached, need)


Policy = Callable[[State], Batch | None]
SCHEDULERS: dict[str, Policy] = {}


def _take_prefills(state: State, budget: int) -> Batch | None:
    """Admit waiting sequences in arrival order while sequences, tokens and blocks allow. A cached shared
    prefix is neither computed nor stored again; the first sequence to prefill a prefix leaves its blocks
    to the cache (kept for the rest of the run: no eviction)."""
    chosen: list[tuple[int, int, int]] = []
    tokens = 0
    while state.waiting and len(state.running) + len(chosen) < state.limits.max_seqs:
        seq = state.waiting[0]
        need, cached = state.admit_blocks(seq)
        todo = max(1, seq.prompt + seq.recompute - cached * state.limits.block_tokens)
        if (chosen and tokens + todo > budget) or need - cached > state.free:
            break
        state.waiting.popleft()
        state.free -= need - cached
        seq.blocks, seq.shared = need, cached
        if state.limits.prefix_caching and seq.prefix_id and seq.prefix // state.limits.block_tokens > cached:
            seq.shared = state.prefixes[seq.prefix_id] = seq.prefix // state.limits.block_tokens
        chosen.append((seq.id, todo, seq.prompt + seq.recompute - todo))
        tokens += todo
        state.running.append(seq)
    return Batch(prefills=tuple(chosen)) if chosen else None


def _decodes(state: State) -> Batch | None:
    """Every running sequence decodes one token; one that needs a block and finds none preempts the newest."""
    for seq in list(state.running):
        if seq not in state.running:
            continue
        while state.blocks_for(seq.context + 1) > seq.blocks:
            if state.free > 0:
                state.free -= 1
                seq.blocks += 1
                continue
            victim = state.running[-1]
            _preempt(state, victim)
            if victim is seq:
                break
    return Batch(decodes=tuple((s.id, s.context) for s in state.running)) if state.running else None


def _preempt(state: State, seq: Seq) -> None:
    state.running.remove(seq)
    state.free += seq.blocks - seq.shared
    seq.blocks = seq.shared = 0
    seq.recompute = seq.generated  # its prompt and what it generated are prefilled again
    seq.preemptions += 1
    state.waiting.appendleft(seq)


def prefill_first(state: State) -> Batch | None:
    return _take_prefills(state, state.limits.max_tokens) or _decodes(state)


def static(state: State) -> Batch | None:
    if not state.running:
        return _take_prefills(state, state.limits.max_tokens)
    return _decodes(state)


SCHEDULERS.update({"prefill_first": prefill_first, "static": static})


def serve(requests: Iterable, scheduler: str, limits: Limits,
          step_time: Callable[[Batch], float]) -> tuple[list[Seq], list[dict], float]:
    """Simulate every request from arrival to last token; returns the sequences (with their times), one row per
    step (start, end, sequences, tokens, blocks used, waiting) and the time integral of the requests in the
    system (arrived, not finished)."""
    if scheduler not in SCHEDULERS:
        raise ConfigError(f"unknown scheduler {scheduler!r} ({', '.join(SCHEDULERS)})", field="scheduler")
    policy = SCHEDULERS[scheduler]
    env = simpy.Environment()
    seqs = [Seq(id=r.id, arrival_s=r.arrival_s, prompt=r.prompt, output=r.output, prefix_id=r.prefix_id,
                prefix=r.prefix) for r in requests]
    state = State(limits=limits, free=limits.kv_blocks)
    for seq in seqs:
        if state.blocks_for(seq.prompt + seq.output) > limits.kv_blocks:
            raise ConfigError(f"request {seq.id} needs {state.blocks_for(seq.prompt + seq.output)} KV blocks of "
                              f"{limits.block_tokens} tokens, more than the {limits.kv_blocks} the deployment has",
                              field=f"requests[{seq.id}]")
    steps: list[dict] = []
    arrived = env.event()
    done = {"n": 0}

    def arrivals():
        nonlocal arrived
        for seq in seqs:
            if seq.arrival_s > env.now:
                yield env.timeout(seq.arrival_s - env.now)
            state.waiting.append(seq)
            state.count(env.now, +1)
            if not arrived.triggered:
                arrived.succeed()

    def run():
        nonlocal arrived
        while done["n"] < len(seqs):
            batch = policy(state)
            if batch is None:
                arrived = env.event()
                yield arrived
                continue
            start = env.now
            for seq_id, _, _ in batch.prefills:
                if seqs[seq_id].scheduled_s is None:
                    seqs[seq_id].scheduled_s = start
            yield env.timeout(step_time(batch))
            _advance(state, batch, seqs, env.now, done)
            steps.append({"start_s": start, "end_s": env.now, "prefills": len(batch.prefills),
                          "decodes": len(batch.decodes), "tokens": batch.tokens,
                          "kv_blocks_used": limits.kv_blocks - state.free, "running": len(state.running),
                          "waiting": len(state.waiting)})

    env.process(arrivals())
    env.run(until=env.process(run()))
    return seqs, steps, state.area


def _advance(state: State, batch: Batch, seqs: list[Seq], now: float, done: dict) -> None:
    """Each prefilled sequence has its first token (or, recomputed, its context back); each decode one more."""
    for seq_id, _, _ in batch.prefills:  # a prefill ends with the sequence's next token
        seq = seqs[seq_id]
        if seq.first_token_s is None:
            seq.first_token_s = now
        seq.generated += 1
        seq.recompute = 0
    for seq_id, _ in batch.decodes:
        seqs[seq_id].generated += 1
    for seq in [s for s in state.running if s.generated >= s.output]:
        seq.end_s = now
        state.running.remove(seq)
        state.free += seq.blocks - seq.shared
        state.count(now, -1)
        done["n"] += 1
