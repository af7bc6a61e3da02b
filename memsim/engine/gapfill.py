"""Gap filling: a prefetch that uses the gaps a fast-forwarded group leaves on a resource.

A prefetch yields to demand traffic. While a group of steps runs periodically, a prefetch
transfer on a resource they share is preempted every cycle and served in the gaps they leave,
so it progresses by the same time every cycle. Fast-forward may skip such cycles exactly when
that transfer is the only lower-priority work that can reach the resource, it was the same
transfer progressing at that rate over the last two cycles, it does not finish within the
skip, and its step has nothing else under way. The transfer is then served the gaps of the
skipped cycles: its end moves by the skip less those gaps.
"""
from __future__ import annotations

from typing import NamedTuple

from memsim.engine.pipeline import StepRun
from memsim.engine.resources import PREFETCH, Server, Use


class Gap(NamedTuple):
    server: Server
    use: Use  # the prefetch transfer served in the gaps
    per_cycle: int  # the service it gets per cycle
    left: int  # its service still to come, now


def observe(servers: list[Server], now: int) -> tuple[tuple[Use, int, bool] | None, ...]:
    """Per server: the prefetch transfer in service or preempted there, and its service left.
    (A loop, not a call per server: fast-forward observes after every chunk.)"""
    seen: list[tuple[Use, int, bool] | None] = []
    for server in servers:
        use = server.user
        if use is not None and use.priority >= PREFETCH:
            seen.append((use, use.end - now, True))
            continue
        for use in server.put_queue:
            if use.priority >= PREFETCH:
                seen.append((use, use.duration, False) if use.start >= 0 else None)  # a preempted one resumes first
                break
        else:
            seen.append(None)
    return tuple(seen)


def drift(history: list[tuple], i: int, q: int, server: Server, per_cycle: int) -> Gap | None:
    """The transfer on ``servers[i]`` if, over each of the last two cycles of ``q`` chunks, the
    same one progressed by the gap the group leaves, ``per_cycle``, and was in the same phase."""
    seen = [history[-1 - k * q][i] for k in (2, 1, 0)]
    if per_cycle <= 0 or any(s is None for s in seen):
        return None
    (a, left_a, on_a), (b, left_b, on_b), (c, left_c, on_c) = seen
    if not (a is b is c) or not (on_a == on_b == on_c) or left_a - left_b != per_cycle \
            or left_b - left_c != per_cycle:
        return None
    return Gap(server, c, per_cycle, left_c)


def cycles_left(gap: Gap) -> int:
    """Cycles that leave the transfer more than a cycle's service still to come."""
    return max(0, (gap.left - gap.per_cycle - 1) // gap.per_cycle)


def alone(gap: Gap, now: int, group: set[int]) -> StepRun | None:
    """The transfer's step, if it has nothing else under way that could reach the group: every
    other request of it is done or waits on a resource of the group, it is not unpacking or
    computing, and a chunk of it may land only if all it loads from are the group's resources
    (the next chunk it then asks for queues behind the transfer, as it would have)."""
    run = gap.use.step
    if run is None or run.computing or run.unpacking > now or run.consumed == run.step.count:
        return None
    inside = all(id(p.server) in group and (p.server.via is None or id(p.server.via) in group) for p in run.loads)

    def still(use: Use | None) -> bool:
        return use is not None and use is not gap.use and not (0 <= use.end < now) and \
            not (use.end < 0 and id(use.resource) in group)

    for chunk in run.pending:
        if chunk.left == 0 and not chunk.ready and not (inside and not run.step.compute_ps):
            return None
        if any(u is None or still(u) or still(v) for u, v, _, _ in chunk.transfers):  # (None: not yet requested)
            return None
    return None if any(still(u) or still(v) for batch in run.outstanding for u, v, _ in batch.uses) else run


def fill(gap: Gap, cycles: int, delta: int) -> None:
    """The transfer is served the gaps of ``cycles`` skipped cycles, ``delta`` long in all."""
    served = cycles * gap.per_cycle
    if gap.use.end >= 0:  # in service: it ends later by the time the group held the resource
        gap.server.postpone(gap.use, gap.use.end + delta - served)
    else:  # preempted: it resumes with less left
        gap.use.duration -= served
        gap.server.busy_ps += served
