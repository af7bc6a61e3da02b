"""What the schedulers share: admission against free blocks and a cached prefix, prefills within a
token budget, decodes that preempt the newest running sequence when a block is wanted, swapping back in,
and the batch a step runs."""
from __future__ import annotations

from memsim.engine.serving_state import Batch, Seq, State


def admit(state: State, seq: Seq) -> int | None:
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
            preempt(state, victim)
            gone.add(victim.id)
            if victim is seq:
                break
    return [(s.id, s.context) for s in state.running if s.decoding]


def preempt(state: State, seq: Seq) -> None:
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


def swap_in(state: State) -> None:
    """Swapped sequences come back, oldest first, while blocks are free (before any new sequence)."""
    while state.swapped and len(state.running) < state.limits.max_seqs and state.room(state.swapped[0].swapped):
        seq = state.swapped.popleft()
        state.free -= seq.swapped
        state.swap_free += seq.swapped
        state.swap_in += seq.swapped
        seq.blocks += seq.swapped
        seq.swapped = 0
        state.running.append(seq)


def batch(state: State, prefills: list | tuple = (), decodes: list | tuple = ()) -> Batch | None:
    out, back = state.swaps()
    if not prefills and not decodes:
        return None
    return Batch(prefills=tuple(prefills), decodes=tuple(decodes), swap_out=out, swap_in=back)
