"""A ring laid on a 2D mesh as a path through neighbours (``channels.grid_ring``): each round of a
ring collective on a mesh crosses one link."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memsim import hardware
from memsim.mapping.collectives.channels import grid_ring
from memsim.mapping.fabric import Fabric


@given(rows=st.integers(2, 9), cols=st.integers(2, 9))
def test_a_grid_ring_visits_every_position_once_through_neighbours(rows, cols):
    ring = grid_ring((rows, cols))
    if rows * cols % 2:  # a bipartite grid of odd size has no Hamiltonian cycle
        assert ring is None
        return
    assert ring is not None and sorted(ring) == list(range(rows * cols))
    for a, b in zip(ring, ring[1:] + ring[:1]):
        assert abs(a // cols - b // cols) + abs(a % cols - b % cols) == 1


def test_a_ring_all_reduce_on_the_galaxy_mesh_crosses_one_link_a_round():
    """32 chips as 4 x 8 without wraparound: in group order a ring's last member is 10 hops from
    its first; laid as a path through neighbours, every round is one hop."""
    chip = hardware.load("wormhole-galaxy")
    fabric = Fabric(chip, 32)
    shape = fabric.shape(range(32))
    assert shape.rings and all(len(fabric.route(a, b)) == 1
                               for ring in shape.rings for a, b in zip(ring, ring[1:] + ring[:1]))
    rounds = fabric.allreduce(range(32), 16384, "ring")[1]
    hop = chip.interconnect.latency_ps
    assert max(fabric.round_ps(r) for r in rounds) < 2 * hop + chip.system.step_latency_ps + 10**6
