"""Schedulers are registered with their traits (issue 42, deliverable 3): adding one is one module, and
how its steps are timed follows its declared ``chunked`` trait, never its name."""
from __future__ import annotations

import importlib.util
import sys

import pytest

import memsim
from memsim.engine.schedulers import SCHEDULERS, chosen

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
