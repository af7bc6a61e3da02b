"""What the schedulers share: admission against free blocks and a cached prefix, prefills within a
token budget, decodes that preempt the newest running sequence when a block is wanted, swapping back in,
and the batch a step runs. Each works on the draft a scheduler decides on, through its effects
(``State.take``, ``grow``, ``preempt``, ``swap_back``, ``evict``), which the draft records."""
from __future__ import annotations

from memsim.engine.sequence import Seq
from memsim.engine.serving_state import Batch, State


def admit(state: State, seq: Seq) -> int | None:
    """Admit the waiting sequence at the head of the queue where its prompt's blocks are free (those of a
    cached shared prefix are shared: ``State.take``); returns the tokens before the first it computes, or
    None when the blocks are not free."""
    need, cached = state.admit_blocks(seq)
    if not state.room(need - cached + state.limits.watermark_blocks):
        return None
    return state.take(seq, need, cached).prefilled


def take_prefills(state: State, budget: int, chunked: bool = False) -> list[tuple[int, int, int]]:
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
        start = admit(state, seq)
        if start is None:
            break
        take = min(seq.to_prefill - start, left) if chunked else seq.to_prefill - start
        chosen.append((seq.id, take, start))
        left -= take
    return chosen


def grow_decodes(state: State) -> list[tuple[int, int]]:
    """Every running sequence past its prefill decodes one token; one that needs a block and finds none
    preempts the newest running sequence (``State.preempt``)."""
    gone: set[int] = set()
    tokens = state.limits.block_tokens
    for seq in list(state.running):
        if seq.id in gone or not seq.decoding:
            continue
        while seq.context + 1 > seq.blocks * tokens:
            if state.room(1):
                seq = state.grow(seq)  # a draft's copy of it, from here on
                continue
            victim = state.running[-1]
            state.preempt(victim)
            gone.add(victim.id)
            if victim.id == seq.id:
                break
    return [(s.id, s.context) for s in state.running if s.decoding]


def swap_in(state: State) -> None:
    """Swapped sequences come back, oldest first, while blocks are free (before any new sequence)."""
    while state.swapped and len(state.running) < state.limits.max_seqs and state.room(state.swapped[0].swapped):
        state.swap_back()


def batch(state: State, prefills: list | tuple = (), decodes: list | tuple = ()) -> Batch | None:
    out, back = state.swaps()
    if not prefills and not decodes:
        return None
    return Batch(prefills=tuple(prefills), decodes=tuple(decodes), swap_out=out, swap_in=back)
