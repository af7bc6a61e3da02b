"""Servers: priorities, preemption of prefetches, and the end of a prefetch's hold."""
from __future__ import annotations

import simpy

from memsim.engine.records import LEVEL, ResourceId
from memsim.engine.resources import DEMAND, PREFETCH, Job, Server


def _server(env):
    return Server(env, ResourceId(LEVEL, 0, "hbm"), channels=1, channel_bw=10**12)


def test_demand_preempts_a_prefetch_which_resumes_where_it_stopped():
    env = simpy.Environment()
    hbm = _server(env)
    done = {}
    hbm.request(100, Job("p", 0, "copy"), PREFETCH, then=lambda u: done.setdefault("p", env.now))
    env.run(until=40)
    hbm.request(30, Job("a", 0, "compute"), DEMAND, then=lambda u: done.setdefault("a", env.now))
    env.run()
    assert done == {"a": 70, "p": 130} and hbm.busy_ps == 130


def test_a_prefetch_whose_hold_ends_as_demand_arrives_is_not_preempted():
    """Found by the concurrent properties: the prefetch was preempted after its hold had ended,
    released the server a second time and crashed the run."""
    env = simpy.Environment()
    hbm = _server(env)
    ends = []
    hbm.request(100, Job("p", 0, "copy"), PREFETCH, then=lambda u: ends.append(("p", env.now)))

    def demand():
        yield env.timeout(100)  # after the prefetch's timer, at the same time
        hbm.request(30, Job("a", 0, "compute"), DEMAND, then=lambda u: ends.append(("a", env.now)))

    env.process(demand())
    env.run()
    assert ends == [("p", 100), ("a", 130)] and hbm.busy_ps == 130 and hbm.user is None
