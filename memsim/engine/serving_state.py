"""What a serving instance holds between steps: its limits, its sequences, its queue and its KV blocks.

The KV cache is paged: ``Limits.kv_blocks`` blocks of ``block_tokens`` tokens each. A sequence holds
the blocks of its context. With prefix caching, a shared prefix's full blocks stay cached after its
sequences leave; a sequence shares at most its own prefix's blocks; cached prefixes no running
sequence shares are evicted, least recently used first, when blocks are wanted (vLLM's and SGLang's
rule).

A scheduler (``engine.schedulers``) decides each step on a ``Draft`` of the state (``State.draft``: its
queues and the sequences it may change copied) and returns a ``Decision``: the step's ``Batch`` and the
``Action``s that formed it, in order (admit a sequence, give it a block, preempt it, swap one back, evict
a cached prefix). The loop applies the decision to the real state (``State.apply``) through the same
effects, so the real state reaches what the draft did, and a policy is a function that can be tried
on a state without changing it. The loop (``engine.serving``) then times the batch and advances the
sequences.
"""
from __future__ import annotations

import math
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from memsim.engine.sequence import Seq

PREEMPTION = ("recompute", "swap")


@dataclass(frozen=True, kw_only=True)
class Limits:
    kv_blocks: int  # blocks the KV cache has, per rank
    block_tokens: int = 16
    max_seqs: int = 256  # sequences in one step
    max_tokens: int = 8192  # tokens computed in one step (prefill_first: a prompt counts whole; chunked: the budget)
    prefix_caching: bool = False
    preemption: str = "recompute"  # or swap: a preempted sequence's blocks go to the host level and come back
    swap_blocks: int = 0  # blocks the host level has room for (swap)
    watermark_blocks: int = 0  # blocks a new sequence must leave free to be admitted (vLLM V0's watermark)


@dataclass(frozen=True, kw_only=True)
class HostWork:
    """What a serving stack's host does every step (seconds): before its first launch, a fixed part and
    parts per sequence, per new token and per tensor-parallel rank beyond the first; after its last
    kernel, a fixed part and a part per sequence; what of it overlaps the device (``overlap``: none,
    output, full); the decode steps one scheduling round runs (``multi_step``); and a request's time in
    the front end before the scheduler sees it (``frontend_s``)."""
    fixed_s: float = 0.0
    per_sequence_s: float = 0.0
    per_token_s: float = 0.0
    per_rank_s: float = 0.0
    ranks: int = 1
    output_fixed_s: float = 0.0
    output_s: float = 0.0
    overlap: str = "none"
    multi_step: int = 1
    frontend_s: float = 0.0

    def before(self, batch: Batch) -> float:
        return (self.fixed_s + (len(batch.prefills) + len(batch.decodes)) * self.per_sequence_s
                + batch.tokens * self.per_token_s + max(0, self.ranks - 1) * self.per_rank_s)

    def after(self, batch: Batch) -> float:
        return self.output_fixed_s + (len(batch.prefills) + len(batch.decodes)) * self.output_s

    def step_s(self, device_s: float, batch: Batch, first: bool = True, last: bool = True) -> float:
        """A step's time with the host's work around it (a round of multi-step decoding pays the work before
        its first step and after its last): in series, its output work hidden behind the next step unless
        longer than the device's, or the whole of it behind the device (an overlap scheduler)."""
        before = self.before(batch) if first else 0.0
        after = self.after(batch) if last else 0.0
        if self.overlap == "full":
            return max(device_s, before + after)
        if self.overlap == "output":
            return before + max(device_s, after)
        return before + device_s + after


@dataclass(frozen=True, kw_only=True)
class Batch:
    """One step's work: each prefill's (sequence, tokens computed, context before them), each decode's
    (sequence, context before its new token), and the KV blocks swapped out to and in from the host."""
    prefills: tuple[tuple[int, int, int], ...] = ()
    decodes: tuple[tuple[int, int], ...] = ()
    swap_out: int = 0
    swap_in: int = 0

    @property
    def tokens(self) -> int:
        return sum(t for _, t, _ in self.prefills) + len(self.decodes)


@dataclass(kw_only=True)
class Prefix:
    """A cached shared prefix: its full blocks, and the running sequences that share them."""
    blocks: int
    users: int = 0


@dataclass(kw_only=True)
class State:
    """What a scheduler sees and changes: the queue, the running and swapped sequences and the free blocks."""
    limits: Limits
    waiting: deque = field(default_factory=deque)
    running: list = field(default_factory=list)
    swapped: deque = field(default_factory=deque)  # preempted to the host level, to come back in order
    free: int = 0
    swap_free: int = 0
    prefixes: OrderedDict = field(default_factory=OrderedDict)  # prefix id -> Prefix, least recently used first
    swap_out: int = 0  # blocks moved out and in while forming this step
    swap_in: int = 0

    def __post_init__(self) -> None:
        self.free = self.free or self.limits.kv_blocks
        self.swap_free = self.limits.swap_blocks

    def blocks_for(self, tokens: int) -> int:
        return math.ceil(tokens / self.limits.block_tokens)

    def own_prefix(self, seq: Seq) -> int:
        """The full blocks of ``seq``'s own shared prefix (0 without prefix caching)."""
        return seq.prefix // self.limits.block_tokens if self.limits.prefix_caching and seq.prefix_id else 0

    def admit_blocks(self, seq: Seq) -> tuple[int, int]:
        """Blocks a sequence takes to prefill, and of them those a cached prefix already holds (no more
        than its own prefix's: a longer prefix cached under its id is not its)."""
        need = self.blocks_for(seq.to_prefill)
        entry = self.prefixes.get(seq.prefix_id) if self.own_prefix(seq) else None
        return need, min(entry.blocks if entry else 0, self.own_prefix(seq), need)

    def share(self, seq: Seq, cached: int) -> None:
        """``seq`` is admitted sharing ``cached`` blocks of its prefix; where its own prefix is longer
        than the cached one, its own blocks extend the cache."""
        own = min(self.own_prefix(seq), seq.blocks)
        if not own:
            return
        entry = self.prefixes.setdefault(seq.prefix_id, Prefix(blocks=0))
        entry.blocks = max(entry.blocks, own)
        seq.shared = max(cached, own)
        entry.users += 1
        self.prefixes.move_to_end(seq.prefix_id)

    def room(self, blocks: int) -> bool:
        """Whether ``blocks`` blocks are free, once cached prefixes that no running sequence shares are
        evicted as needed, least recently used first."""
        while self.free < blocks:
            idle = next((name for name, entry in self.prefixes.items() if not entry.users), None)
            if idle is None:
                return False
            self.evict(idle)
        return True

    # The effects a decision is made of. Each changes the state; on a draft it also records itself.

    def evict(self, prefix_id: str) -> None:
        """A cached prefix no running sequence shares gives its blocks back."""
        self._did("evict", -1, prefix_id)
        self.free += self.prefixes.pop(prefix_id).blocks

    def take(self, seq: Seq, need: int, cached: int) -> Seq:
        """The sequence at the head of the queue is admitted with ``need`` blocks, ``cached`` of them its
        cached prefix's (shared; the first sequence to prefill a prefix leaves its blocks to the cache);
        at least its last token is computed."""
        seq = self._mine(self._head(seq))
        self._did("take", seq.id, "", need, cached)
        self.free -= need - cached
        seq.blocks = need
        self.share(seq, cached)
        self.running.append(seq)
        seq.prefilled = min(seq.to_prefill - 1, cached * self.limits.block_tokens)
        return seq

    def take_prefilled(self, seq: Seq, need: int) -> Seq:
        """The sequence at the head of the queue arrives prefilled (its KV cache sent to this instance)."""
        seq = self._mine(self._head(seq))
        self._did("take_prefilled", seq.id, "", need)
        self.free -= need
        seq.blocks, seq.shared = need, 0
        self.running.append(seq)
        return seq

    def grow(self, seq: Seq) -> Seq:
        """A running sequence takes one more block."""
        seq = self._running(seq)
        self._did("grow", seq.id)
        self.free -= 1
        seq.blocks += 1
        return seq

    def preempt(self, seq: Seq) -> None:
        """A running sequence stops: swapped out to the host level (``preemption: swap``, a decoding sequence,
        room there), else its blocks freed and it waits at the head of the queue to prefill its prompt and
        what it had generated again."""
        seq = self._running(seq)
        self._did("preempt", seq.id)
        own = seq.blocks - seq.shared
        seq.preemptions += 1
        if self.limits.preemption == "swap" and seq.decoding and 0 < own <= self.swap_free:
            self.running.remove(seq)
            self.free += own
            self.swap_free -= own
            self.swap_out += own
            seq.swapped, seq.blocks = own, seq.shared
            self.swapped.append(seq)
            return
        self.release(seq)
        seq.recompute = seq.generated
        seq.prefilled = 0
        self.waiting.appendleft(seq)

    def swap_back(self) -> None:
        """The oldest swapped sequence comes back with its blocks."""
        seq = self._mine(self.swapped.popleft())
        self._did("swap_back", seq.id)
        self.free -= seq.swapped
        self.swap_free += seq.swapped
        self.swap_in += seq.swapped
        seq.blocks += seq.swapped
        seq.swapped = 0
        self.running.append(seq)

    def _head(self, seq: Seq) -> Seq:
        head = self.waiting.popleft()
        assert head.id == seq.id, "an admitted sequence is the queue's head"
        return head

    def _mine(self, seq: Seq) -> Seq:
        """The sequence this state may change (a draft's own copy)."""
        return seq

    def _running(self, seq: Seq) -> Seq:
        """The running sequence this state may change, in its place in ``running``."""
        return seq

    def _did(self, kind: str, seq: int = -1, prefix: str = "", need: int = 0, cached: int = 0) -> None:
        """A draft records the effect (``Action``); the real state has nothing to record."""

    def draft(self) -> Draft:
        """A copy the scheduler may change: the queues and the cached prefixes copied, and each sequence
        copied when the scheduler first changes it (``Draft._mine``)."""
        made = Draft.__new__(Draft)  # every field set here: no __post_init__, whose defaults are a new state's
        made.limits, made.free, made.swap_free = self.limits, self.free, self.swap_free
        made.waiting, made.running, made.swapped = deque(self.waiting), list(self.running), deque(self.swapped)
        made.prefixes = OrderedDict((k, Prefix(blocks=v.blocks, users=v.users)) for k, v in self.prefixes.items())
        made.swap_out, made.swap_in, made.actions, made.copies = self.swap_out, self.swap_in, [], {}
        return made

    def apply(self, decision: Decision, seqs: Sequence[Seq]) -> None:
        """The decision's actions, in order, on this state (``seqs``: every sequence, by id); the step's swap
        counts are the batch's."""
        for a in decision.actions:
            if a.kind == "grow":
                self.grow(seqs[a.seq])
            elif a.kind == "evict":
                self.evict(a.prefix)
            elif a.kind == "take":
                self.take(seqs[a.seq], a.need, a.cached)
            elif a.kind == "take_prefilled":
                self.take_prefilled(seqs[a.seq], a.need)
            elif a.kind == "preempt":
                self.preempt(seqs[a.seq])
            else:
                self.swap_back()
        self.swaps()

    def release(self, seq: Seq) -> None:
        """A sequence leaves this instance (finished, or handed to a decode instance): its blocks are free,
        but for those of a cached prefix."""
        self.running.remove(seq)
        self.free += seq.blocks - seq.shared
        if seq.shared:
            self.prefixes[seq.prefix_id].users -= 1
        seq.blocks = seq.shared = 0

    def swaps(self) -> tuple[int, int]:
        """The blocks swapped out and in since the last step was formed."""
        out, back = self.swap_out, self.swap_in
        self.swap_out = self.swap_in = 0
        return out, back

    @property
    def load(self) -> int:
        """Sequences on this instance, for a router: waiting, running and swapped."""
        return len(self.waiting) + len(self.running) + len(self.swapped)


@dataclass(kw_only=True)
class Draft(State):
    """A state a scheduler decides on (``State.draft``): it records every effect as an ``Action``, and
    changes copies of the sequences, never the sequences themselves."""
    actions: list[Action] = field(default_factory=list)
    copies: dict[int, Seq] = field(default_factory=dict)  # sequence id -> this draft's copy

    def _mine(self, seq: Seq) -> Seq:
        if seq.id not in self.copies:
            self.copies[seq.id] = _copy(seq)
        return self.copies[seq.id]

    def _running(self, seq: Seq) -> Seq:
        if seq.id in self.copies:
            return self.copies[seq.id]
        at = self.running.index(seq)  # by identity (a sequence is itself): the scan runs in C
        self.running[at] = mine = self._mine(seq)
        return mine

    def _did(self, kind: str, seq: int = -1, prefix: str = "", need: int = 0, cached: int = 0) -> None:
        self.actions.append(Action(kind, seq, prefix, need, cached))


def _copy(seq: Seq) -> Seq:
    """A shallow copy of a sequence (its fields are numbers and text), without ``copy.copy``'s reduce
    protocol: a draft makes one for each sequence a step changes."""
    made = Seq.__new__(Seq)
    made.__dict__.update(seq.__dict__)
    return made


class Action(NamedTuple):
    """One effect of a decision: ``kind`` (take, take_prefilled, grow, preempt, swap_back, evict), the
    sequence it is about (its id) or the prefix evicted, and the blocks an admission takes. (A typed
    tuple, not a dataclass: a step makes several, and a frozen dataclass costs a microsecond each.)"""
    kind: str
    seq: int = -1
    prefix: str = ""
    need: int = 0
    cached: int = 0


class Decision(NamedTuple):
    """What a scheduler decided for a step: the batch it runs (None: nothing to run) and the actions that
    formed it, in order."""
    batch: Batch | None
    actions: tuple[Action, ...] = ()

