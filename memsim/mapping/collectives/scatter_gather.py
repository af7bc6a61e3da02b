"""A pipeline hop between tensor-parallel stages as a scatter and an all-gather, as pure functions.

After a stage's last all-reduce every one of its ``tp`` ranks holds the whole activation, and
every rank of the next stage needs it whole. Sent as it is, each rank sends the whole activation
to its counterpart: ``tp`` copies of the same bytes cross between the stages. Megatron-LM's
scatter/gather optimisation (Narayanan et al., SC'21, section 4.1) sends each rank's ``1/tp``
slice instead and rebuilds the whole in the next stage with an all-gather over its own links;
vLLM's pipeline sends do the same (``send_tensor_dict`` with an ``all_gather_group``). It moves
``tp`` times fewer bytes between the stages and pays the all-gather's rounds within the next.

The all-gathers tried, each as rounds of moves among positions 0..n-1 of the receiving group
(``Shape`` as the all-reduces use it): ``direct`` (one round, every member sends its slice to every
other), ``ring`` (n - 1 rounds around the group) and ``hierarchical`` (across nodes, members in the
same place of every node swap slices; then within each node, directly), each ended by a barrier
where the shape asks for one.
"""
from __future__ import annotations

from collections.abc import Sequence

from memsim.mapping.collectives import (
    Moves,
    Pieces,
    Round,
    Shape,
    barrier,
    direct_all_gather,
    parallel,
    pattern,
    ring_all_gather,
    transfers,
)


def gathers(n: int, shape: Shape) -> dict[str, Moves]:
    """The all-gathers of n slices (slice i at position i) among positions 0..n-1, by name."""
    owned: dict[int, Pieces] = {i: (i,) for i in range(n)}
    out = {"direct": direct_all_gather(range(n), owned), "ring": ring_all_gather(range(n), owned)}
    k = shape.node_size(n)
    if 1 < k < n:
        nodes = [list(range(j, j + k)) for j in range(0, n, k)]
        across = parallel(*(direct_all_gather([node[p] for node in nodes], owned) for p in range(k)))
        held: dict[int, Pieces] = {m: tuple(sorted(nodes[j][m % k] for j in range(len(nodes)))) for m in range(n)}
        inside = parallel(*(direct_all_gather(node, held) for node in nodes))
        out["hierarchical"] = across + inside
    return {name: moves + barrier(n, shape) for name, moves in out.items()}


def scatter_gather(src: Sequence[int], dst: Sequence[int], nbytes: int, moves: Moves) -> tuple[Round, ...]:
    """The rounds of a hop of ``nbytes`` from the ranks ``src`` to the ranks ``dst``: rank i sends
    slice i to its counterpart, then ``dst`` all-gathers the slices by ``moves``."""
    n = len(dst)
    size = -(-nbytes // n)
    scatter: Round = tuple((a, b, size) for a, b in zip(src, dst))
    return (scatter, *transfers(dst, nbytes, n, pattern(moves)))


def whole(src: Sequence[int], dst: Sequence[int], nbytes: int) -> tuple[Round, ...]:
    """The rounds of a hop as it is: every rank sends the whole activation to its counterpart."""
    return (tuple((a, b, nbytes) for a, b in zip(src, dst)),)
