"""The Galaxy: 32 Wormhole chips in a 4 x 8 Ethernet mesh, forwarding at every chip on the way."""
from __future__ import annotations

import pytest

from memsim import hardware, simulate
from memsim.hardware import topologies


def test_the_galaxy_is_the_n150s_chip_in_a_mesh_of_four_links_a_neighbour():
    galaxy, n150 = hardware.load("wormhole-galaxy"), hardware.load("wormhole-n150")
    assert galaxy.derived_from.startswith("wormhole-n150 + ")
    assert galaxy.compute == n150.compute and galaxy.levels == n150.levels  # the same ASIC
    assert galaxy.system.topology == "mesh2d" and galaxy.system.links_per_peer == 4
    mesh = topologies.TOPOLOGIES.get("mesh2d")
    graph = mesh.build(32, topologies.Wiring(galaxy.interconnect.count, galaxy.system.links_per_peer))
    assert topologies.TOPOLOGIES.get("mesh2d").dims(32) == (4, 8)
    assert len(mesh.route(graph, 0, 31)) == 3 + 7  # forwarded by every chip on the way
    assert {d["links"] for _, _, d in graph.edges(data=True)} == {4}


@pytest.mark.parametrize("model, heads", [("llama-3.1-70b", 2), ("llama-3.2-3b", 1)])
def test_the_galaxy_runs_llama_decode_over_its_32_chips(model, heads):
    """Llama-3.2-3B's 24 heads do not divide 32 chips: each chip runs one, as tt-metal pads them."""
    r = simulate("wormhole-galaxy", model, phase="decode", context=256, tp=32, weight_dtype="bfp8", sensitivity=0)
    s = r.summary
    assert s.grid.tp == 32 and s.step_time_s > s.roofline_s > 0
    assert s.stall_s.get("link:ethernet", 0) > 0  # its all-reduces cross the mesh
    attn = dict(r.graph.ops["L0.attn"].dims)
    assert (attn["heads"], attn["kv_heads"]) == (heads, 1)  # a chip's share: its query heads, one KV head
