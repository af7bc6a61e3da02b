"""Communication overlap: a GEMM and the all-reduce of its output cut into chunks that pipeline.

With ``execution.comm_overlap = K`` in a tensor-parallel run, a row-parallel GEMM whose output
an all-reduce sums is cut into up to K parts, each a K-th of its output tiles (of its weights,
FLOPs and stores), and the all-reduce into as many chunks, each a K-th of the message, chunk i
waiting only for part i. The chunks go over the links on the comm stream while the compute
stream computes the next parts: a two-stage pipeline.

The GEMM stays one kernel that signals its output tiles group by group (as Flux and T3 do): it
pays its launch once and its tiles run as the whole GEMM's would. Each chunk pays the
collective's latencies again, so the count used is the one, up to K, whose pipeline the
textbook costs say is fastest: a latency-bound all-reduce (a decode's) stays whole. These are
pure functions; ``strategy`` and ``system`` build the tasks.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

from memsim.mapping.plan import Step


def split(total: int, parts: int) -> list[int]:
    """``total`` in ``parts`` near-equal whole shares that add up to it exactly."""
    q, r = divmod(total, parts)
    return [q + (i < r) for i in range(parts)]


def chunk_count(limit: int, gemm_s: float, comm_s: Callable[[int], float]) -> int:
    """The count of chunks, at most ``limit``, with the shortest two-stage pipeline: k GEMM parts
    of ``gemm_s / k`` each, and k collective chunks of ``comm_s(k)`` each, chunk i starting after
    part i and chunk i - 1 (the fewest chunks on a tie)."""
    def span(k: int) -> float:
        g, c = gemm_s / k, comm_s(k)
        return g + c + (k - 1) * max(g, c)
    return min(range(1, max(1, limit) + 1), key=span)


def chunk_bytes(nbytes: int, parts: int, members: int) -> list[int]:
    """A collective's message cut into ``parts`` chunks whose pieces (its algorithm cuts a
    message into ``members`` pieces of ⌈bytes / members⌉) add up to the whole message's
    exactly, so the chunks move the same bytes over every link as the whole. Needs
    ``parts <= ⌈nbytes / members⌉``."""
    if parts == 1:
        return [nbytes]
    shares = split(-(-nbytes // members), parts)
    if not shares[-1]:
        raise ValueError(f"{nbytes} bytes over {members} members cannot make {parts} chunks")
    head = [s * members for s in shares[:-1]]
    return [*head, nbytes - sum(head)]


def split_steps(steps: tuple[Step, ...], parts: int) -> list[tuple[Step, ...]]:
    """An op's steps cut into ``parts`` consecutive parts: each step's chunks, bytes, FLOPs and
    compute time shared out exactly (a step of fewer chunks than parts has its chunk cut)."""
    return [tuple(_part(s, i, parts) for s in steps) for i in range(parts)]


def _part(step: Step, i: int, parts: int) -> Step:
    count = max(1, split(step.count, parts)[i])

    def share(total: int) -> int:
        return split(total, parts)[i]

    def totals(pairs: tuple) -> tuple:
        return tuple((ref, share(b)) for ref, b in pairs if share(b))

    loads, stores = totals(step.total_loads), totals(step.total_stores)
    compute = -(-share(step.compute_ps * step.count) // count)
    return dataclasses.replace(
        step, count=count, loads=tuple((r, -(-b // count)) for r, b in loads),
        stores=tuple((r, -(-b // count)) for r, b in stores),
        compute_ps=compute, throttle_ps=min(compute, -(-share(step.throttle_ps * step.count) // count)),
        feed_ps=min(compute, -(-share(step.feed_ps * step.count) // count)),
        flops=share(step.flops), total_loads=loads,
        total_stores=stores, unpack_ps=-(-share(step.unpack_ps * step.count) // count),
        compute_fj=share(step.compute_fj), unpack_fj=share(step.unpack_fj))
