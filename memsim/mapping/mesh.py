"""A wafer's fabric from its geometry: the block of the core mesh a region occupies, and what one
traversal of that block costs.

The compute units form a 2D mesh of ``execution.fabric_rows`` x ``fabric_cols``, each joined to
its neighbours by the link ``execution.fabric`` names. A layer's region, a share of the units, is
the most nearly square block of that many units the mesh holds (a square as long as its side fits
the mesh's shorter side, then as tall as the mesh): a square keeps the farthest unit closest,
and blocks of the same shape tile the wafer in a row-by-row snake, so that consecutive regions
are neighbours. A matrix operator broadcasts its input across its block and reduces its output
across it; each traversal

- crosses the block's diameter, ``rows + cols - 2`` hops, at the link's latency per hop;
- streams the vector's slice per row of the block (the vector split over the block's rows, as a
  mesh GEMV splits it: each row's cores hold a slice of the matrix's input or output dimension)
  through one link, ``fabric_width`` bytes per hop time;
- and ends with ``fabric_sync``: the receivers learn that the whole vector is in.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from memsim.hardware.spec import ChipSpec


@dataclass(frozen=True, slots=True)
class Block:
    """A rectangle of the mesh: ``rows`` <= ``cols`` units."""

    rows: int
    cols: int

    @property
    def hops(self) -> int:
        """Its diameter: the hops from one corner to the opposite one."""
        return self.rows + self.cols - 2


def block(mesh_rows: int, mesh_cols: int, share: Fraction) -> Block:
    """The most nearly square block of ``share`` of a ``mesh_rows`` x ``mesh_cols`` mesh's units."""
    short, long = sorted((mesh_rows, mesh_cols))
    units = max(1, min(short * long, round(share * short * long)))
    rows = max(1, min(short, round(math.sqrt(units))))
    return Block(rows, min(long, -(-units // rows)))


def traversal_ps(region: Block, nbytes: int, hop_ps: int, width: int, sync_ps: int) -> int:
    """One traversal of ``region`` by a vector of ``nbytes``: its diameter at ``hop_ps`` a hop, its
    slice per row through one link at ``width`` bytes a hop time, and one synchronisation."""
    slice_bytes = -(-nbytes // region.rows)
    return region.hops * hop_ps + -(-slice_bytes // width) * hop_ps + sync_ps


def region_block(chip: ChipSpec, share: Fraction) -> Block | None:
    """The block of ``chip``'s mesh a region with ``share`` of its units occupies (None: no mesh)."""
    ex = chip.execution
    if not (ex.fabric and ex.fabric_rows):
        return None
    return block(ex.fabric_rows, ex.fabric_cols, share)


def traversal_latency_ps(chip: ChipSpec, share: Fraction, nbytes: int) -> int:
    """What a traversal of a region with ``share`` of ``chip``'s units by ``nbytes`` costs beyond
    its bytes at the fabric's bandwidth; without a mesh, the link's latency once."""
    link = chip.link(chip.execution.fabric)
    region = region_block(chip, share)
    if region is None:
        return link.latency_ps
    ex = chip.execution
    return traversal_ps(region, nbytes, link.latency_ps, ex.fabric_width_bytes, ex.fabric_sync_ps)
