"""Lowering: kernel costs that follow shape."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memsim.mapping.lower import wave_factor

DIMS = st.integers(1, 5000)


def _time(m: int, n: int, groups: int, units: int, tile: int) -> float:
    """A GEMM's compute time in flops-at-full-rate units: its work times the wave stretch."""
    return m * n * groups * wave_factor(m, n, groups, units, tile)


@settings(max_examples=300, deadline=None)
@given(DIMS, DIMS, st.integers(1, 8), st.integers(1, 200), st.sampled_from([0, 16, 64, 128, 256]),
       st.sampled_from(["m", "n", "groups"]))
def test_more_work_is_never_faster(m, n, groups, units, tile, grow):
    """Growing a GEMM dimension by one never shortens its compute (a partial tile takes a whole
    tile's time, a partial wave its share of a wave)."""
    bigger = dict(m=m, n=n, groups=groups)
    bigger[grow] += 1
    assert _time(**bigger, units=units, tile=tile) >= _time(m, n, groups, units, tile) * (1 - 1e-12)


def test_a_partial_tile_row_costs_nothing_while_units_are_idle():
    """Llama-3.1-8B on an H100 (132 SMs, 128-wide tiles): 129 rows take what 128 rows take."""
    assert _time(129, 4096, 1, 132, 128) == _time(128, 4096, 1, 132, 128)
    assert _time(1024, 4096, 1, 132, 128) == 1024 * 4096  # 256 tiles: 1.94 waves, no stretch
