"""Communication overlap: a row-parallel GEMM and its all-reduce cut into chunks that pipeline."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsim import hardware, simulate
from memsim.hardware.families import FAMILIES
from memsim.mapping import overlap
from memsim.mapping.collectives import ALLREDUCE, LinkCost
from memsim.mapping.plan import COMM, COMPUTE

# The tiny chip's PCIe joins two ranks with little latency, so a prefill's all-reduces are worth cutting.
FAST_LINK = {"pcie.latency": "10 ns"}
PREFILL = dict(phase="prefill", prompt=512, tp=2)


def run(chip, model, k: int, **kw):
    return simulate(str(chip), str(model), **PREFILL, set={**FAST_LINK, "execution.comm_overlap": str(k)}, **kw)


@given(st.integers(0, 10**9), st.integers(1, 64))
def test_split_shares_add_up_exactly(total, parts):
    shares = overlap.split(total, parts)
    assert sum(shares) == total and max(shares) - min(shares) <= 1


@given(st.integers(1, 10**9), st.integers(2, 16), st.integers(1, 64))
def test_chunks_move_the_whole_messages_bytes_over_every_link(nbytes, members, parts):
    group = list(range(members))
    for algorithm in ALLREDUCE.values():
        pieces = algorithm.moves(members)[0]  # a message is cut into pieces of ⌈bytes / pieces⌉
        n_parts = min(parts, -(-nbytes // pieces))
        chunks = overlap.chunk_bytes(nbytes, n_parts, pieces)
        assert sum(chunks) == nbytes and len(chunks) == n_parts and min(chunks) > 0
        whole = algorithm.rounds(group, nbytes)
        cut = [algorithm.rounds(group, c) for c in chunks]
        for i, round_ in enumerate(whole):  # transfer by transfer, the chunks' bytes add up to the whole's
            for j, (src, dst, b) in enumerate(round_):
                assert sum(c[i][j][2] for c in cut) == b and all(c[i][j][:2] == (src, dst) for c in cut)


def test_the_chunk_count_weighs_hidden_gemm_time_against_extra_latency():
    ring = ALLREDUCE["ring"]
    nvlink = LinkCost(450e9, 2e-6)
    latency_bound = overlap.chunk_count(4, 10e-6, lambda k: ring.cost(8, 16384 / k, nvlink))
    bandwidth_bound = overlap.chunk_count(4, 50e-6, lambda k: ring.cost(2, 8 * 2**20 / k, nvlink))
    assert latency_bound == 1 and bandwidth_bound == 4
    assert overlap.chunk_count(1, 1.0, lambda k: 1.0 / k) == 1


def test_split_steps_share_out_bytes_flops_and_time(tiny_plan):
    for task in tiny_plan.tasks:
        if not task.steps:
            continue
        for k in (2, 3, 7):
            parts = overlap.split_steps(task.steps, k)
            for n, whole in enumerate(task.steps):
                pieces = [p[n] for p in parts]
                for field in ("total_loads", "total_stores"):
                    summed: dict = {}
                    for piece in pieces:
                        for ref, b in getattr(piece, field):
                            summed[ref] = summed.get(ref, 0) + b
                    assert summed == {r: b for r, b in getattr(whole, field) if b}
                assert sum(p.flops for p in pieces) == whole.flops
                busy = sum(p.compute_ps * p.count for p in pieces)
                assert whole.compute_ps * whole.count <= busy <= whole.compute_ps * whole.count + k * whole.count


def test_a_gemm_and_its_all_reduce_are_cut_into_chunks_that_pipeline(tiny_chip_path, tiny_model_path):
    tasks = {t.op: t for t in run(tiny_chip_path, tiny_model_path, 4).plan.tasks}
    parts = [tasks[f"L0.down/{i}"] for i in range(4)]
    chunks = [tasks[f"L0.mlp_allreduce/{i}"] for i in range(4)]
    assert "L0.down" not in tasks and "L0.mlp_allreduce" not in tasks
    assert all(p.stream == COMPUTE and p.graph_op == "L0.down" for p in parts)
    assert all(c.stream == COMM and c.graph_op == "L0.mlp_allreduce" for c in chunks)
    assert [c.deps for c in chunks] == [(p.op,) for p in parts]  # chunk i waits for part i only
    assert "L0.mlp_allreduce/3" in tasks["L0.mlp_add"].deps  # the consumer waits for the whole sum
    assert [bool(t.overhead_ps) for t in parts + chunks] == [True, False, False, False] * 2  # launched once


def test_overlap_hides_communication_behind_the_gemm(tiny_chip_path, tiny_model_path):
    off, on = run(tiny_chip_path, tiny_model_path, 1), run(tiny_chip_path, tiny_model_path, 4)
    s_off, s_on = off.summary, on.summary
    assert s_on.step_time_s < s_off.step_time_s
    assert s_on.exposed_comm_s < s_off.exposed_comm_s
    assert s_on.step_time_s >= s_on.roofline_s == s_off.roofline_s  # the roofline counts uncut collectives
    # No more is saved than the cut GEMMs took: only they run while the chunks are sent.
    cut = {t.graph_op for t in on.plan.tasks if t.graph_op and t.op != t.graph_op and t.stream == COMPUTE}
    gemm_s = off.ops[off.ops.op.isin(cut)].duration_s.sum()
    assert 0 < s_off.step_time_s - s_on.step_time_s < gemm_s
    # The timeline shows chunks on the links while the compute stream works on the GEMM's later parts.
    tl = on.timeline
    sends = tl[(tl.stream == "comm") & (tl.kind == "transfer") & (tl.op == "L0.mlp_allreduce/0")]
    later = tl[(tl.kind == "compute") & tl.op.isin(["L0.down/2", "L0.down/3"])]
    assert len(sends) and len(later)
    assert sends.start_s.min() < later.end_s.max() and later.start_s.min() < sends.end_s.max()
    last = tl[(tl.kind == "transfer") & (tl.op == "L0.mlp_allreduce/3")]
    assert last.start_s.min() >= tl[(tl.kind == "compute") & (tl.op == "L0.down/3")].end_s.max()


def test_cutting_moves_the_same_bytes_everywhere(tiny_chip_path, tiny_model_path):
    off, on = run(tiny_chip_path, tiny_model_path, 1).summary, run(tiny_chip_path, tiny_model_path, 4).summary
    assert on.bytes_per_level == off.bytes_per_level
    assert {k: v.total for k, v in on.bytes_per_link.items()} == \
        {k: v.total for k, v in off.bytes_per_link.items()}
    assert on.flops_total == off.flops_total
    assert on.ops > off.ops


def test_one_chunk_or_one_rank_leaves_the_plan_as_it_was(tiny_chip_path, tiny_model_path):
    default = simulate(str(tiny_chip_path), str(tiny_model_path), **PREFILL, set=FAST_LINK)
    assert default.chip.execution.comm_overlap == 1  # the gpu family's default
    assert run(tiny_chip_path, tiny_model_path, 1).plan.tasks == default.plan.tasks
    single = dict(phase="prefill", prompt=512, set={"execution.comm_overlap": "8"})
    assert simulate(str(tiny_chip_path), str(tiny_model_path), **single).plan.tasks == \
        simulate(str(tiny_chip_path), str(tiny_model_path), phase="prefill", prompt=512).plan.tasks


def test_a_latency_bound_decode_all_reduce_stays_whole(tiny_chip_path, tiny_model_path):
    plan = simulate(str(tiny_chip_path), str(tiny_model_path), context=64, tp=2,
                    set={"execution.comm_overlap": "8"}).plan
    assert not any("/" in t.op for t in plan.tasks)


def test_shortcuts_stay_exact_with_chunks(tiny_chip_path, tiny_model_path):
    fast = run(tiny_chip_path, tiny_model_path, 4)
    full = run(tiny_chip_path, tiny_model_path, 4, fast_forward=False)
    assert fast.summary.step_time_s == full.summary.step_time_s
    assert fast.summary.stall_s == pytest.approx(full.summary.stall_s, rel=1e-12, abs=1e-15)
    assert fast.summary.bytes_per_level == full.summary.bytes_per_level


def test_family_defaults_follow_real_machines():
    assert {f: FAMILIES[f].values()["comm_overlap"] for f in FAMILIES} == {"gpu": 1, "cpu": 1, "rdu": 4, "wafer": 1}
    for name in ("h100-sxm", "sn40l", "groq-lpu", "wse-3", "xeon-gold-6242"):
        chip = hardware.load(name)
        assert chip.execution.comm_overlap == chip.family_of.values()["comm_overlap"]


def test_a_real_prefill_gains_from_overlap():
    """Llama-3.2-1B prefill of 2048 tokens on two h100-sxm: the MLP's down projection (about
    50 µs) hides most of its 8 MiB all-reduce."""
    kw = dict(phase="prefill", prompt=2048, tp=2)
    off = simulate("h100-sxm", "llama-3.2-1b", **kw).summary
    on = simulate("h100-sxm", "llama-3.2-1b", **kw, set={"execution.comm_overlap": "4"}).summary
    assert on.step_time_s < 0.97 * off.step_time_s
    assert on.exposed_comm_s < 0.75 * off.exposed_comm_s
    assert on.step_time_s >= on.roofline_s
    assert on.bytes_per_level == off.bytes_per_level
