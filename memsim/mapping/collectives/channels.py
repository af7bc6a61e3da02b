"""Ring channels over fully connected members: rings that share no link direction.

Where every pair of a group's members has a cable of its own (an xGMI mesh, a Groq node), one
ring uses one of each member's n - 1 links; NCCL and RCCL run several ring channels at once so
that every link carries one. The rings here are directed Hamiltonian cycles on positions
0..n-1, no two using the same ordered pair: n - 1 of them use every link direction once,
which exists for every n but 4 and 6 (Tillson, 1980), where n - 2 is the most. They are found
by a depth-first search, bounded; past the bound the rotations i -> i + s (s coprime to n)
are used, which are fewer.
"""
from __future__ import annotations

import functools
import math

_BUDGET = 200_000  # search steps before settling for the rotations


@functools.lru_cache(maxsize=64)
def disjoint_rings(n: int) -> tuple[tuple[int, ...], ...]:
    """Directed Hamiltonian cycles of positions 0..n-1 that share no ordered pair, as many as found."""
    if n < 3:
        return (tuple(range(n)),)
    want = n - 2 if n in (4, 6) else n - 1
    found = _search(n, want)
    if found is None:
        return tuple(tuple((i * s) % n for i in range(n)) for s in range(1, n) if math.gcd(s, n) == 1)
    return found


def _search(n: int, want: int) -> tuple[tuple[int, ...], ...] | None:
    used: set[tuple[int, int]] = set()
    rings: list[tuple[int, ...]] = []
    steps = 0

    def cycles(path: list[int], seen: set[int]):
        nonlocal steps
        steps += 1
        if steps > _BUDGET:
            return
        cur = path[-1]
        if len(path) == n:
            if (cur, path[0]) not in used:
                yield path
            return
        for nxt in range(n):
            if nxt not in seen and (cur, nxt) not in used:
                seen.add(nxt)
                used.add((cur, nxt))
                yield from cycles([*path, nxt], seen)
                seen.discard(nxt)
                used.discard((cur, nxt))

    def more(k: int) -> bool:
        if k == want:
            return True
        for path in cycles([0], {0}):  # its arcs stay in ``used`` while the deeper search runs
            close = (path[-1], path[0])
            used.add(close)
            rings.append(tuple(path))
            if more(k + 1):
                return True
            rings.pop()
            used.discard(close)
            if steps > _BUDGET:
                return False
        return False

    return tuple(rings) if more(0) else None


def grid_ring(dims: tuple[int, ...]) -> tuple[int, ...] | None:
    """A ring over a 2D grid of positions (``dims`` = rows, cols; row-major, the last varying
    fastest) whose neighbours are grid neighbours, so each of its rounds crosses one link: along
    row 0, back and forth over columns 1.. of the other rows, and up column 0 (a boustrophedon). A
    grid with an odd number of positions has none (it is bipartite): None, as for other shapes."""
    if len(dims) != 2 or min(dims) < 2 or dims[0] * dims[1] % 2:
        return None
    rows, cols = dims
    if rows % 2:  # the snake needs an even number of rows: walk the transpose
        ring = grid_ring((cols, rows))
        return tuple((p % rows) * cols + p // rows for p in ring) if ring else None
    out = [c for c in range(cols)]
    for r in range(1, rows):
        across = range(1, cols) if r % 2 == 0 else range(cols - 1, 0, -1)
        out += [r * cols + c for c in across]
    out += [r * cols for r in range(rows - 1, 0, -1)]
    return tuple(out)
