"""The tile and split of K a GEMM library launches (``execution.gemm_tiles``)."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsim.mapping.kerneltile import MIN_EDGE, choose, deepgemm_tile, edges, wave_factor
from memsim.run import api
from memsim.validation.microbench import gemm_graph

H200 = dict(units=132, unit_tile=128, a_bits=16, b_bits=16, acc_bytes=4,
            flops_ps=989e12 * 0.8 / 1e12, l2_bytes_ps=12.5e12 / 1e12, reduce_ps=2_470_000)


def _ps(m: int, n: int, k: int, groups: int = 1, **kw: float) -> float:
    args = {**H200, **kw}
    tile = choose(m, n, k, groups, **args)
    compute = 2 * m * n * k * groups * tile.stretch / args["flops_ps"]
    l2 = tile.l2_bytes / args["l2_bytes_ps"] if args["l2_bytes_ps"] else 0.0
    return max(compute, l2) + (args["reduce_ps"] if tile.split > 1 else 0)


def test_edges_halve_from_twice_the_unit_tile():
    assert edges(128) == (16, 32, 64, 128, 256)
    assert edges(32) == (16, 32, 64)
    assert min(edges(8)) >= 8 and MIN_EDGE == 16


def test_without_a_choice_the_units_own_tile_runs_in_waves():
    tile = choose(128, 4096, 4096, 1, **{**H200, "l2_bytes_ps": 0.0})
    assert (tile.tm, tile.tn, tile.split) == (128, 128, 1)
    assert tile.stretch == pytest.approx(wave_factor(128, 4096, 1, 132, 128))


def test_few_rows_get_tiles_that_fill_the_units():
    # measured.csv: cuBLAS runs 128 x 4096 x 4096 in 64 x 64 tiles (128 of them on 132 SMs), where
    # 128 x 128 tiles would leave 100 SMs idle
    tile = choose(128, 4096, 4096, 1, **H200)
    tiles = -(-128 // tile.tm) * -(-4096 // tile.tn) * tile.split
    assert tiles >= 64
    assert _ps(128, 4096, 4096) < 0.6 * _ps(128, 4096, 4096, l2_bytes_ps=0.0)
    # a large GEMM keeps large tiles: smaller ones would only re-read more through the L2
    big = choose(4096, 4096, 4096, 1, **H200)
    assert big.tm * big.tn >= 128 * 128


def test_a_split_of_k_costs_its_partial_sums_and_a_second_kernel():
    one = choose(1, 4096, 11008, 1, **{**H200, "unit_tile": 128})
    assert one.l2_bytes >= 11008 * 4096 * 2  # every weight passes through the L2 at least once
    split = choose(16, 256, 1 << 16, 1, **H200)
    assert split.split > 1
    assert split.l2_bytes > 2 * split.split * 16 * 256 * 4  # the partial sums, written and read back


dims = st.integers(1, 3000)


@given(dims, dims, dims, st.integers(1, 4), st.sampled_from(["m", "n", "k", "groups"]), st.integers(1, 500))
def test_more_work_never_takes_less_time(m, n, k, groups, which, more):
    grown = dict(m=m, n=n, k=k, groups=groups)
    grown[which] += more
    assert _ps(**grown) >= _ps(m, n, k, groups) - 1e-6


@given(dims, dims, dims, st.floats(1.0, 4.0), st.integers(1, 200))
def test_more_l2_bandwidth_or_more_units_never_slow_a_gemm(m, n, k, faster, units):
    assert _ps(m, n, k, l2_bytes_ps=H200["l2_bytes_ps"] * faster) <= _ps(m, n, k) + 1e-6
    per_unit = H200["flops_ps"] / H200["units"]  # a unit's rate: more units, more FLOPs a picosecond
    assert (_ps(m, n, k, units=units + 1, flops_ps=per_unit * (units + 1))
            <= _ps(m, n, k, units=units, flops_ps=per_unit * units) + 1e-6)


def _gemm_s(m: int, n: int, k: int, tiles: str) -> float:
    r = api.simulate_graph("h200-sxm", gemm_graph(m, n, k, "bf16"),
                           set={"stack.kernels.gemm_tiles": tiles}, stack="ideal")
    return r.summary.step_time_s


def test_the_field_switches_a_gpu_gemm_and_leaves_large_ones_alone():
    assert _gemm_s(128, 4096, 4096, "fill") < 0.6 * _gemm_s(128, 4096, 4096, "fixed")
    assert _gemm_s(4096, 4096, 4096, "fill") == pytest.approx(_gemm_s(4096, 4096, 4096, "fixed"), rel=0.02)


def test_a_wafer_spreads_a_gemm_over_its_cores_without_tiles():
    tile = choose(128, 4096, 4096, 1, **{**H200, "unit_tile": 0})
    assert tile.stretch == 1.0 and tile.l2_bytes == 0


def test_deepgemm_picks_its_tile_by_its_own_rule():
    # deep_gemm/jit_kernels/gemm.py get_best_configs: 64 rows for at most 64, else 128; of the
    # columns 16..128, the fewest waves, then the fullest last wave, then the narrower tile
    one_wave = deepgemm_tile(64, 2112, 7168, 1, 132, 8, 8, 4)
    assert (one_wave.tm, one_wave.tn, one_wave.split) == (64, 16, 1)  # 132 tiles: one full wave
    assert one_wave.share == 1.0
    wide = deepgemm_tile(64, 7168, 16384, 1, 132, 8, 8, 4)
    assert (wide.tm, wide.tn) == (64, 56)  # 128 tiles, one wave; 48 columns would take two
    assert deepgemm_tile(4096, 7168, 16384, 1, 132, 8, 8, 4).tm == 128
    for m, n in ((64, 2112), (64, 7168), (128, 7168), (200, 3000)):
        tile = deepgemm_tile(m, n, 4096, 1, 132, 8, 8, 4)
        waves = -(-(-(-m // tile.tm) * -(-n // tile.tn)) // 132)
        assert all(waves <= -(-(-(-m // tile.tm) * -(-n // tn)) // 132) for tn in range(16, 129, 8))


@given(st.integers(1, 3000), st.integers(16, 3000), st.integers(16, 3000))
def test_a_library_rule_never_beats_the_roofline(m, n, k):
    # a rule that counts waves may pick a slower tile for a larger shape, as the library does;
    # what holds is the roofline: the FLOPs at the full matrix rate, the operands at the HBM's peak
    # (3.35 TB/s; the result may stay in the L2)
    r = api.simulate_graph("h100-sxm", gemm_graph(m, n, k, "fp8"),
                           set={"stack.kernels.gemm_tiles": "deepgemm", "compute.kernel_efficiency": "1"},
                           stack="ideal")
    assert r.summary.step_time_s >= max(2 * m * n * k / 1979e12, (m * k + k * n) / 3.35e12)
