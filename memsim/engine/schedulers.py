"""Serving schedulers, each a registered policy (``SCHEDULERS``): given an instance's ``State``, the next
step's ``Batch``, or None when there is nothing to run.

- ``prefill_first``: iteration-level batching that runs waiting prefills, whole, before decodes (vLLM's
  default before chunked prefill, Orca's iteration-level scheduling).
- ``chunked``: every running sequence decodes, and the token budget (``max_tokens``) left is filled with
  prefill chunks, partial prompts first, then new ones in arrival order (Sarathi-Serve; vLLM's default
  with chunked prefill). A long prompt no longer stalls the decodes for its whole prefill.
- ``static``: a batch is admitted, prefilled together and decoded until every sequence of it is done (as
  ``--phase generate``).
- ``decode_only``: a disaggregated decode instance's; its sequences arrive prefilled, with their KV cache.

When a decode finds no free block the newest running sequence is preempted: by recomputation (its blocks
are freed; it waits at the head of the queue to prefill its prompt and what it had generated) or, with
``preemption: swap`` and room on the host level, by swapping its blocks out, to be swapped back in, before
any new sequence is admitted, when blocks free up.
"""
from __future__ import annotations

from collections.abc import Callable

from memsim.engine.serving_state import Batch, Seq, State

Policy = Callable[[State], Batch | None]
SCHEDULERS: dict[str, Policy] = {}


def _admit(state: State, seq: Seq) -> int | None:
    """Take the blocks of a waiting sequence's prompt (those of a cached shared prefix are shared, and the
    first sequence to prefill a prefix leaves its blocks to the cache: ``State.share``); returns the tokens
    before the first it computes, or None when the blocks are not free."""
    need, cached = state.admit_blocks(seq)
    if not state.room(need - cached + state.limits.watermark_blocks):
        return None
    state.waiting.popleft()
    state.free -= need - cached
    seq.blocks = need
    state.share(seq, cached)
    tokens = state.limits.block_tokens
    state.running.append(seq)
    seq.prefilled = min(seq.to_prefill - 1, cached * tokens)  # at least its last token is computed
    return seq.prefilled


def _take_prefills(state: State, budget: int, chunked: bool = False) -> list[tuple[int, int, int]]:
    """Prefills for this step within ``budget`` tokens: with ``chunked``, partial prompts continue first and a
    prompt may be cut to what the budget has left; else whole prompts, at least one."""
    chosen: list[tuple[int, int, int]] = []
    left = budget
    if chunked:
        for seq in state.running:
            if not seq.decoding and left > 0:
                take = min(seq.to_prefill - seq.prefilled, left)
                chosen.append((seq.id, take, seq.prefilled))
                left -= take
    while state.waiting and left > 0 and len(state.running) < state.limits.max_seqs:
        seq = state.waiting[0]
        _, cached = state.admit_blocks(seq)
        todo = max(1, seq.to_prefill - cached * state.limits.block_tokens)
        if not chunked and chosen and todo > left:
            break
        start = _admit(state, seq)
        if start is None:
            break
        take = min(seq.to_prefill - start, left) if chunked else seq.to_prefill - start
        chosen.append((seq.id, take, start))
        left -= take
    return chosen


def _decodes(state: State) -> list[tuple[int, int]]:
    """Every running sequence past its prefill decodes one token; one that needs a block and finds none
    preempts the newest running sequence."""
    gone: set[int] = set()
    tokens = state.limits.block_tokens
    for seq in list(state.running):
        if seq.id in gone or not seq.decoding:
            continue
        while seq.context + 1 > seq.blocks * tokens:
            if state.room(1):
                state.free -= 1
                seq.blocks += 1
                continue
            victim = state.running[-1]
            _preempt(state, victim)
            gone.add(victim.id)
            if victim is seq:
                break
    return [(s.id, s.context) for s in state.running if s.decoding]


def _preempt(state: State, seq: Seq) -> None:
    own = seq.blocks - seq.shared
    seq.preemptions += 1
    if state.limits.preemption == "swap" and seq.decoding and 0 < own <= state.swap_free:
        state.running.remove(seq)
        state.free += own
        state.swap_free -= own
        state.swap_out += own
        seq.swapped, seq.blocks = own, seq.shared
        state.swapped.append(seq)
        return
    state.release(seq)
    seq.recompute = seq.generated  # its prompt and what it generated are prefilled again
    seq.prefilled = 0
    state.waiting.appendleft(seq)


def _swap_in(state: State) -> None:
    """Swapped sequences come back, oldest first, while blocks are free (before any new sequence)."""
    while state.swapped and len(state.running) < state.limits.max_seqs and state.room(state.swapped[0].swapped):
        seq = state.swapped.popleft()
        state.free -= seq.swapped
        state.swap_free += seq.swapped
        state.swap_in += seq.swapped
        seq.blocks += seq.swapped
        seq.swapped = 0
        state.running.append(seq)


def _batch(state: State, prefills: list | tuple = (), decodes: list | tuple = ()) -> Batch | None:
    out, back = state.swaps()
    if not prefills and not decodes:
        return None
    return Batch(prefills=tuple(prefills), decodes=tuple(decodes), swap_out=out, swap_in=back)


def prefill_first(state: State) -> Batch | None:
    _swap_in(state)
    if not state.swapped:
        prefills = _take_prefills(state, state.limits.max_tokens)
        if prefills:
            return _batch(state, prefills)
    return _batch(state, decodes=_decodes(state))


def chunked(state: State) -> Batch | None:
    _swap_in(state)
    decodes = _decodes(state)
    budget = state.limits.max_tokens - len(decodes)
    prefills = _take_prefills(state, budget, chunked=True) if not state.swapped else []
    return _batch(state, prefills, decodes)


def static(state: State) -> Batch | None:
    _swap_in(state)
    if not state.running and not state.swapped:
        return _batch(state, _take_prefills(state, state.limits.max_tokens))
    return _batch(state, decodes=_decodes(state))


def decode_only(state: State) -> Batch | None:
    """Sequences arrive prefilled (their KV cache sent from a prefill instance) and are admitted while blocks
    allow; one preempted here by recomputation is prefilled here again."""
    _swap_in(state)
    prefills = []
    while state.waiting and not state.swapped and len(state.running) < state.limits.max_seqs:
        seq = state.waiting[0]
        if not seq.decoding:  # recomputed here
            start = _admit(state, seq)
            if start is None:
                break
            prefills.append((seq.id, seq.to_prefill - start, start))
            continue
        need = state.blocks_for(seq.context)
        if not state.room(need):
            break
        state.waiting.popleft()
        state.free -= need
        seq.blocks, seq.shared = need, 0
        state.running.append(seq)
    return _batch(state, prefills, _decodes(state))


SCHEDULERS.update({"prefill_first": prefill_first, "chunked": chunked, "static": static})
ROLES = {"decode_only": decode_only}  # schedulers of a role, not chosen by name
