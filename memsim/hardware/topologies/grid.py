"""Grids: a 2D mesh (``mesh2d``), and tori with wraparound links in 2 and 3 dimensions
(``torus2d``: TPU v5e; ``torus3d``: TPU v4).

N chips form the most square (or cubic) grid, numbered with the last dimension varying
fastest. Transfers are routed dimension by dimension, the fastest-varying first (along the
row, then along the column); on a torus each dimension goes the shorter way round.

A chip has two ports per dimension, each with its share of the chip's links. On a torus
dimension of two chips both ports reach the one neighbour, so that cable bundles both ports'
links; a dimension of one leaves its ports unused.
"""
from __future__ import annotations

import math

import networkx as nx

from memsim.hardware.topologies import Cable, Topology, Wiring, register


def grid_shape(n: int) -> tuple[int, int]:
    """The most square rows x cols = n."""
    rows = math.isqrt(n)
    while n % rows:
        rows -= 1
    return rows, n // rows


def cube_shape(n: int) -> tuple[int, int, int]:
    """The most cubic a x b x c = n (a <= b <= c)."""
    a = max(d for d in range(1, round(n ** (1 / 3)) + 2) if n % d == 0 and d ** 3 <= n)
    return (a, *grid_shape(n // a))


def _coords(i: int, dims: tuple[int, ...]) -> list[int]:
    out = []
    for size in reversed(dims):
        i, c = divmod(i, size)
        out.append(c)
    return out[::-1]


def _index(coords: list[int], dims: tuple[int, ...]) -> int:
    i = 0
    for c, size in zip(coords, dims):
        i = i * size + c
    return i


def _cables(n: int, wiring: Wiring, dims: tuple[int, ...], wrap: bool) -> list[Cable]:
    what = f"a {len(dims)}D {'torus' if wrap else 'mesh'}"
    port = wiring.spread(2 * len(dims), what)
    out: list[Cable] = []
    for i in range(n):
        coords = _coords(i, dims)
        for d, size in enumerate(dims):
            nxt = [*coords[:d], coords[d] + 1, *coords[d + 1:]]
            if coords[d] + 1 < size:
                double = wrap and size == 2  # the wraparound port reaches the same neighbour
                out.append((i, _index(nxt, dims), wiring.per_peer or (2 * port if double else port)))
            elif wrap and size > 2:
                nxt[d] = 0
                out.append((i, _index(nxt, dims), port))
    return out


def _step(cur: int, target: int, size: int, wrap: bool) -> int:
    """The next coordinate from ``cur`` towards ``target`` on a dimension of ``size``."""
    if wrap:
        forward = (target - cur) % size
        back = (cur - target) % size
        return (cur + (1 if forward <= back else -1)) % size
    return cur + (1 if target > cur else -1)


def _ordered_path(src: int, dst: int, dims: tuple[int, ...], wrap: bool) -> list[int]:
    """Dimension-ordered routing, the fastest-varying dimension first."""
    cur, target = _coords(src, dims), _coords(dst, dims)
    path = [src]
    for d in reversed(range(len(dims))):
        while cur[d] != target[d]:
            cur[d] = _step(cur[d], target[d], dims[d], wrap)
            path.append(_index(cur, dims))
    return path


def _grid(name: str, shape, wrap: bool) -> Topology:
    def cables(n: int, wiring: Wiring) -> list[Cable]:
        return _cables(n, wiring, shape(n), wrap)

    def path(g: nx.DiGraph, src: int, dst: int) -> list[int]:
        return _ordered_path(src, dst, shape(g.number_of_nodes()), wrap)

    return Topology(name, cables, path, dims=shape)


register(_grid("mesh2d", grid_shape, wrap=False))
register(_grid("torus2d", grid_shape, wrap=True))
register(_grid("torus3d", cube_shape, wrap=True))
