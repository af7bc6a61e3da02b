"""System topology: N chips and the links between them, as a networkx graph.

Every directed edge is one link direction with the bandwidth and latency of the chip's
interconnect link. A switch topology routes through a switch node; rings, 2D meshes and
tori join neighbours directly. Routes are shortest paths (dimension-ordered on grids), and
a transfer occupies every link on its route.
"""
from __future__ import annotations

import math

import networkx as nx

SWITCH = "sw"


def grid_shape(n: int) -> tuple[int, int]:
    """The most square rows x cols = n."""
    rows = int(math.isqrt(n))
    while n % rows:
        rows -= 1
    return rows, n // rows


def build(topology: str, n: int) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    pairs: list[tuple] = []
    if n == 1:
        return g
    if topology == "switch":
        pairs = [(i, SWITCH) for i in range(n)]
    elif topology == "ring":
        pairs = [(i, (i + 1) % n) for i in range(n if n > 2 else 1)]
    else:
        rows, cols = grid_shape(n)
        wrap = topology == "torus2d"
        for r in range(rows):
            for c in range(cols):
                i = r * cols + c
                if c + 1 < cols or (wrap and cols > 2):
                    pairs.append((i, r * cols + (c + 1) % cols))
                if r + 1 < rows or (wrap and rows > 2):
                    pairs.append((i, ((r + 1) % rows) * cols + c))
    for a, b in pairs:
        g.add_edge(a, b)
        g.add_edge(b, a)
    return g


def route(g: nx.DiGraph, src: int, dst: int, topology: str) -> list[tuple]:
    """The links (directed edges) a transfer from ``src`` to ``dst`` crosses."""
    if src == dst:
        return []
    if topology in ("mesh2d", "torus2d"):
        path = _xy_path(g, src, dst, topology)
    else:
        path = nx.shortest_path(g, src, dst)
    return list(zip(path, path[1:]))


def _xy_path(g: nx.DiGraph, src: int, dst: int, topology: str) -> list[int]:
    """Dimension-ordered routing: along the row first, then along the column."""
    rows, cols = grid_shape(g.number_of_nodes())
    r, c = divmod(src, cols)
    tr, tc = divmod(dst, cols)
    path = [src]
    for size, get, step in ((cols, lambda: c, "c"), (rows, lambda: r, "r")):
        target = tc if step == "c" else tr
        while (c if step == "c" else r) != target:
            cur = c if step == "c" else r
            fwd = (target - cur) % size
            back = (cur - target) % size
            if topology == "torus2d":
                delta = 1 if fwd <= back else -1
                nxt = (cur + delta) % size
            else:
                nxt = cur + (1 if target > cur else -1)
            if step == "c":
                c = nxt
            else:
                r = nxt
            path.append(r * cols + c)
    return path
