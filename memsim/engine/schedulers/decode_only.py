"""``decode_only``: a disaggregated decode instance's; its sequences arrive prefilled, with their KV
cache."""
from __future__ import annotations

from memsim.engine.schedulers import scheduler
from memsim.engine.schedulers.common import admit, batch, grow_decodes, swap_in
from memsim.engine.serving_state import Batch, State


@scheduler("decode_only", role="decode")
def decode_only(state: State) -> Batch | None:
    """Sequences arrive prefilled (their KV cache sent from a prefill instance) and are admitted while blocks
    allow; one preempted here by recomputation is prefilled here again."""
    swap_in(state)
    prefills = []
    while state.waiting and not state.swapped and len(state.running) < state.limits.max_seqs:
        seq = state.waiting[0]
        if not seq.decoding:  # recomputed here
            start = admit(state, seq)
            if start is None:
                break
            prefills.append((seq.id, seq.to_prefill - start, start))
            continue
        need = state.blocks_for(seq.context)
        if not state.room(need):
            break
        state.take_prefilled(seq, need)
    return batch(state, prefills, grow_decodes(state))
