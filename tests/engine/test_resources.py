"""Servers: priorities, preemption of prefetches, and the end of a prefetch's hold."""
from __future__ import annotations

from memsim.engine.resources import DEMAND, PREFETCH, Job, Server
from memsim.engine.simpy_fast import Environment
from memsim.hardware.resource import LEVEL, ResourceId


def _server(env):
    return Server(env, ResourceId(LEVEL, 0, "hbm"), channels=1, bandwidth=10**12)


def test_demand_preempts_a_prefetch_which_resumes_where_it_stopped():
    env = Environment()
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
    env = Environment()
    hbm = _server(env)
    ends = []
    hbm.request(100, Job("p", 0, "copy"), PREFETCH, then=lambda u: ends.append(("p", env.now)))

    def demand():
        yield env.timeout(100)  # after the prefetch's timer, at the same time
        hbm.request(30, Job("a", 0, "compute"), DEMAND, then=lambda u: ends.append(("a", env.now)))

    env.process(demand())
    env.run()
    assert ends == [("p", 100), ("a", 130)] and hbm.busy_ps == 130 and hbm.user is None


def _ends(first: tuple, later: list[tuple]) -> dict[str, int]:
    """When each request ends: ``first`` (name, ps, priority, store) at 0, ``later`` at 40 ps."""
    env = Environment()
    server = _server(env)
    done: dict[str, int] = {}

    def ask(name, ps, priority, store):
        server.request(ps, Job(name, 0, "compute"), priority, then=lambda u: done.setdefault(name, env.now),
                       store=store)

    ask(*first)
    env.run(until=40)
    for request in later:
        ask(*request)
    env.run()
    assert server.busy_ps == first[1] + sum(r[1] for r in later)
    return done


def test_a_load_takes_the_server_from_a_store_of_its_priority_which_resumes():
    """Reads before writes: the store resumes where it stopped, after the load."""
    assert _ends(("store", 100, DEMAND, True), [("load", 30, DEMAND, False)]) == {"load": 70, "store": 130}


def test_a_store_yields_only_to_loads_of_its_priority_or_higher():
    ends = _ends(("store", 100, DEMAND, True), [("prefetch", 30, PREFETCH, False), ("other store", 10, DEMAND, True)])
    assert ends == {"store": 100, "other store": 110, "prefetch": 140}


def test_the_names_outputs_give_besides_levels_and_links_are_the_stall_causes_and_compute():
    """``memsim.hardware.resource.OTHER_NAMES`` is what a level's name must not read as."""
    from memsim.engine.records import CauseKind
    from memsim.hardware.resource import OTHER_NAMES, ResourceKind
    assert OTHER_NAMES == {c.value for c in CauseKind} | {ResourceKind.COMPUTE.value, ResourceKind.DEQUANT.value}
    assert str(ResourceId(LEVEL, 0, "power")) == "level:power"
    assert str(ResourceId(LEVEL, 0, "hbm")) == "hbm"
    assert str(ResourceId.compute(3)) == "compute" and str(ResourceId.dequant(3)) == "dequant"
