"""The one module that goes past SimPy's public API, and the SimPy versions it was checked against."""
from __future__ import annotations

import pytest
import simpy

from memsim.engine import simpy_fast
from memsim.engine.simpy_fast import Environment, Timer


def test_simpy_is_a_version_the_engine_was_checked_against():
    assert simpy.__version__ in simpy_fast.TESTED, (
        f"SimPy {simpy.__version__}: memsim/engine/simpy_fast.py was checked against {sorted(simpy_fast.TESTED)}. "
        "Check again what its docstring says it relies on (Environment._queue, _eid, _now and step; Event._ok, "
        "_value and callbacks; Put.__init__ and BaseResource._env) in the new SimPy's core.py, events.py and "
        "resources/base.py, run tests/engine and tests/test_golden.py, then add the version to TESTED.")


def test_the_integer_clock_follows_both_run_loops():
    env = Environment()
    seen = []

    def ticker():
        for _ in range(3):
            yield env.timeout(5)
            seen.append((env.now, env.now_ps))

    env.process(ticker())
    env.run(until=7)  # SimPy's loop, through step
    assert env.now_ps == 7 and seen == [(5, 5)]
    Timer(env, 12, lambda event: seen.append(("timer", env.now_ps)))
    env.run()  # the engine's loop
    assert seen == [(5, 5), (10, 10), ("timer", 12), (15, 15)] and env.now_ps == env.now == 15


def test_a_failed_event_stops_the_run_as_simpy_does():
    env = Environment()
    env.event().fail(ValueError("lost"))
    with pytest.raises(ValueError, match="lost"):
        env.run()


def test_shift_moves_only_the_events_of_the_step():
    env = Environment()
    mine, other, order = object(), object(), []
    Timer(env, 10, lambda event: order.append(("mine", env.now_ps)), mine)
    Timer(env, 20, lambda event: order.append(("other", env.now_ps)), other)
    env.shift(mine, 15)
    env.run()
    assert order == [("other", 20), ("mine", 25)]
