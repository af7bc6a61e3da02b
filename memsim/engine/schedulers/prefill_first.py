"""``prefill_first``: iteration-level batching that runs waiting prefills, whole, before decodes (vLLM's
default before chunked prefill, Orca's iteration-level scheduling)."""
from __future__ import annotations

from memsim.engine.schedulers import scheduler
from memsim.engine.schedulers.common import batch, grow_decodes, swap_in, take_prefills
from memsim.engine.serving_state import Batch, State


@scheduler("prefill_first")
def prefill_first(state: State) -> Batch | None:
    swap_in(state)
    if not state.swapped:
        prefills = take_prefills(state, state.limits.max_tokens)
        if prefills:
            return batch(state, prefills)
    return batch(state, decodes=grow_decodes(state))
