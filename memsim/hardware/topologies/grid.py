"""2D grids: a mesh (``mesh2d``) and a torus (``torus2d``, a mesh with wraparound links).

N chips form the most square rows x cols grid, numbered row by row. Transfers are routed
dimension by dimension (along the row first, then along the column); on a torus each
dimension goes the shorter way round.
"""
from __future__ import annotations

import math

import networkx as nx

from memsim.hardware.topologies import Edge, Topology, register


def grid_shape(n: int) -> tuple[int, int]:
    """The most square rows x cols = n."""
    rows = int(math.isqrt(n))
    while n % rows:
        rows -= 1
    return rows, n // rows


def _links(n: int, wrap: bool) -> list[Edge]:
    rows, cols = grid_shape(n)
    pairs: list[Edge] = []
    for r in range(rows):
        for c in range(cols):
            i = r * cols + c
            # A wraparound link on a dimension of two would double the link that is there.
            if c + 1 < cols or (wrap and cols > 2):
                pairs.append((i, r * cols + (c + 1) % cols))
            if r + 1 < rows or (wrap and rows > 2):
                pairs.append((i, ((r + 1) % rows) * cols + c))
    return pairs


def _step(cur: int, target: int, size: int, wrap: bool) -> int:
    """The next coordinate from ``cur`` towards ``target`` on a dimension of ``size``."""
    if wrap:
        forward = (target - cur) % size
        back = (cur - target) % size
        return (cur + (1 if forward <= back else -1)) % size
    return cur + (1 if target > cur else -1)


def _xy_path(g: nx.DiGraph, src: int, dst: int, wrap: bool) -> list[int]:
    """Dimension-ordered routing: along the row first, then along the column."""
    rows, cols = grid_shape(g.number_of_nodes())
    r, c = divmod(src, cols)
    tr, tc = divmod(dst, cols)
    path = [src]
    while c != tc:
        c = _step(c, tc, cols, wrap)
        path.append(r * cols + c)
    while r != tr:
        r = _step(r, tr, rows, wrap)
        path.append(r * cols + c)
    return path


register(Topology("mesh2d", lambda n: _links(n, wrap=False), lambda g, s, d: _xy_path(g, s, d, wrap=False)))
register(Topology("torus2d", lambda n: _links(n, wrap=True), lambda g, s, d: _xy_path(g, s, d, wrap=True)))
