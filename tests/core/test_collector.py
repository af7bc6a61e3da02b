"""Full collections are deferred during a simulation and the collector's thresholds put back after."""
from __future__ import annotations

import gc

import pytest

from memsim.core import collector


def test_full_collections_are_deferred_inside_and_the_thresholds_put_back():
    before = gc.get_threshold()
    with collector.deferred():
        young, middle, full = gc.get_threshold()
        assert (young, middle) == before[:2] and full == max(before[2], collector.FULL_EVERY)
        with collector.deferred():
            assert gc.get_threshold()[2] == full
        assert gc.get_threshold()[2] == full
    assert gc.get_threshold() == before


def test_the_thresholds_are_put_back_after_an_error():
    before = gc.get_threshold()
    with pytest.raises(ZeroDivisionError), collector.deferred():
        raise ZeroDivisionError
    assert gc.get_threshold() == before


def test_a_run_is_simulated_with_full_collections_deferred(monkeypatch):
    import memsim
    from memsim.run import api

    seen = []
    real = api._simulate
    monkeypatch.setattr(api, "_simulate", lambda spec: seen.append(gc.get_threshold()[2]) or real(spec))
    memsim.simulate("h100-sxm", "gpt2", context=16)
    assert seen and all(full >= collector.FULL_EVERY for full in seen)
    assert gc.get_threshold()[2] < collector.FULL_EVERY
