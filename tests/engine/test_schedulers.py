"""Schedulers are registered with their traits (issue 42, deliverable 3): adding one is one module, and
how its steps are timed follows its declared ``chunked`` trait, never its name."""
from __future__ import annotations

import importlib.util
import sys

import pytest

import memsim
from memsim.engine.schedulers import SCHEDULERS, chosen
from memsim.engine.sequence import Seq
from memsim.engine.serving import advance
from memsim.engine.serving_state import Limits, State

MODULE = '''
from memsim.engine.schedulers import scheduler
from memsim.engine.schedulers.common import batch, grow_decodes, swap_in, take_prefills


def {name}(state):  # the chunked policy, under a name of its own
    swap_in(state)
    decodes = grow_decodes(state)
    prefills = take_prefills(state, state.limits.max_tokens - len(decodes), chunked=True) if not state.swapped else []
    return batch(state, prefills, decodes)


scheduler("{name}", chunked={chunked})({name})
'''


def _load(tmp_path, name: str, chunked: bool) -> None:
    path = tmp_path / f"{name}.py"
    path.write_text(MODULE.format(name=name, chunked=chunked))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


@pytest.fixture()
def registered(tmp_path):
    names = ("sarathi_like", "sarathi_unchunked")
    _load(tmp_path, names[0], True)
    _load(tmp_path, names[1], False)
    yield names
    for name in names:
        SCHEDULERS.unregister(name)
        sys.modules.pop(name, None)


def test_a_scheduler_from_a_module_of_its_own_serves_and_its_trait_sets_its_timing(registered):
    kw = dict(count=12, rate=40, prompt=3000, output_tokens=16, seed=5, max_tokens=512)
    assert set(registered) <= set(chosen())
    same = memsim.serve("h100-sxm", "llama-3.2-1b", scheduler="chunked", **kw)
    mine = memsim.serve("h100-sxm", "llama-3.2-1b", scheduler=registered[0], **kw)
    unchunked = memsim.serve("h100-sxm", "llama-3.2-1b", scheduler=registered[1], **kw)
    assert mine.steps.drop(columns="shape").equals(same.steps.drop(columns="shape"))  # one policy, one trait
    assert mine.requests.equals(same.requests)
    # the same batches timed as whole steps, not as mixed ones: the chunked trait, not the name, decides
    assert not unchunked.requests.ttft_s.equals(same.requests.ttft_s)
    assert mine.summary.scheduler == registered[0]


def test_a_scheduler_of_a_role_is_not_chosen_by_name_and_an_unknown_one_is_one_line():
    assert "decode_only" in SCHEDULERS and "decode_only" not in chosen()
    for name in ("decode_only", "fifo"):
        with pytest.raises(memsim.ConfigError) as info:
            memsim.serve(scheduler=name)
        assert info.value.field == "scheduler" and "chunked, prefill_first, static" in info.value.message


def _state(preemption: str):

    seqs = [Seq(id=i, arrival_ps=0, prompt=40, output=6 + 9 * i, prefix_id=f"p{i % 3}" if i % 2 else "",
                prefix=32 if i % 2 else 0) for i in range(8)]
    state = State(limits=Limits(kv_blocks=12, block_tokens=16, prefix_caching=True, preemption=preemption,
                                swap_blocks=8))
    state.waiting.extend(seqs)
    return state, seqs


def _seen(state, seqs):
    fields = ("blocks", "prefilled", "shared", "preemptions", "recompute", "swapped", "generated")
    return ([s.id for s in state.waiting], [s.id for s in state.running], [s.id for s in state.swapped], state.free,
            state.swap_free, {k: (v.blocks, v.users) for k, v in state.prefixes.items()},
            [tuple(getattr(s, f) for f in fields) for s in seqs])


@pytest.mark.parametrize("preemption", ["recompute", "swap"])
@pytest.mark.parametrize("name", ["prefill_first", "chunked", "static"])
def test_a_policy_decides_without_changing_the_state_and_the_loop_applies_its_decision(name, preemption):
    """Ciw's rule: a policy is a function of the state that returns a decision. Deciding leaves the state as it
    was; applying the decision's actions reaches the state the policy's draft reached, step after step, through
    admissions, block growth, preemption (recomputed or swapped), swapping back and prefix caching."""
    state, seqs = _state(preemption)
    chosen_one = SCHEDULERS.get(name)
    kinds = set()
    for _ in range(40):
        before = _seen(state, seqs)
        draft = state.draft()
        batch = chosen_one.policy(draft)
        decision = chosen_one.decide(state)
        assert _seen(state, seqs) == before  # deciding changed nothing
        assert decision.batch == batch and [a.kind for a in decision.actions] == [a.kind for a in draft.actions]
        state.apply(decision, seqs)
        mine = {s.id: s for s in [*draft.running, *draft.swapped, *draft.waiting]}
        assert all(tuple(vars(mine[s.id]).values()) == tuple(vars(s).values()) for s in seqs if s.id in mine)
        assert _seen(state, seqs)[:6] == _seen(draft, seqs)[:6]  # the same queues, blocks and cached prefixes
        kinds |= {a.kind for a in decision.actions}
        if decision.batch is not None:
            advance(state, decision.batch, seqs, 0)  # the loop's: tokens, and finished sequences leave
    assert {"take", "grow", "evict"} <= kinds and ("preempt" in kinds or name == "static")
    assert "swap_back" in kinds or preemption == "recompute" or name == "static"
