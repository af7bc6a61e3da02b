"""``static``: a batch is admitted, prefilled together and decoded until every sequence of it is done
(as ``--phase generate``)."""
from __future__ import annotations

from memsim.engine.schedulers import scheduler
from memsim.engine.schedulers.common import batch, grow_decodes, swap_in, take_prefills
from memsim.engine.serving_state import Batch, State


@scheduler("static")
def static(state: State) -> Batch | None:
    swap_in(state)
    if not state.running and not state.swapped:
        return batch(state, take_prefills(state, state.limits.max_tokens))
    return batch(state, decodes=grow_decodes(state))
