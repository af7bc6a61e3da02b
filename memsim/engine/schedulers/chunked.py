"""``chunked``: every running sequence decodes, and the token budget (``max_tokens``) left is filled with
prefill chunks, partial prompts first, then new ones in arrival order (Sarathi-Serve; vLLM's default with
chunked prefill)."""
from __future__ import annotations

from memsim.engine.schedulers import scheduler
from memsim.engine.schedulers.common import batch, grow_decodes, swap_in, take_prefills
from memsim.engine.serving_state import Batch, State


@scheduler("chunked", chunked=True)
def chunked(state: State) -> Batch | None:
    swap_in(state)
    decodes = grow_decodes(state)
    budget = state.limits.max_tokens - len(decodes)
    prefills = take_prefills(state, budget, chunked=True) if not state.swapped else []
    return batch(state, prefills, decodes)
