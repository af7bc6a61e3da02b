"""Replay remembers a task only if nothing but the task touched its resources."""
from __future__ import annotations

from memsim.engine import watch
from memsim.engine.replay import Recording, Replay
from memsim.engine.resources import Job, Server
from memsim.engine.simpy_fast import Environment
from memsim.hardware.resource import LEVEL, ResourceId


def _recorded(counted_by_other: bool) -> Replay:
    env = Environment()
    hbm = Server(env, ResourceId(LEVEL, 0, "hbm"), channels=1, bandwidth=10**12)
    watches = watch.install([hbm])  # as the shortcuts do
    task, prefetch = Job("a", 0, "compute"), Job("prefetch.b", 0, "copy")
    rec = Recording(("a",), 0, [hbm], watches)
    hbm.request(1000, task)
    env.run()
    if counted_by_other:  # a prefetch whose transfers ended earlier finishes now and counts its bytes
        hbm.count(4096, True, prefetch)
    hbm.count(1000, True, task)
    replay = Replay(watches)
    replay.remember(rec, task, env.now_ps, [])
    return replay


def test_a_task_alone_is_remembered_with_its_own_bytes():
    memo = _recorded(False).memos[("a",)]
    assert memo.moved == ((1000, 0, 1000),) and memo.duration == 1000


def test_bytes_another_task_counted_meanwhile_are_not_remembered_as_its_own():
    """Found by the concurrent properties: a prefetch's bytes were replayed with the next layer's."""
    assert ("a",) not in _recorded(True).memos
