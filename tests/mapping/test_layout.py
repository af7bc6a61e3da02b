"""Pipeline stages hold only their own layers; micro-batches flow through them."""
from __future__ import annotations

import pytest

from memsim import CapacityError, ConfigError, simulate, workload


def test_each_pipeline_stage_holds_only_its_layers():
    r = simulate("a100-80gb-sxm", "llama-2-70b", context=2048, pp=2)
    s = r.summary
    assert s.bytes_per_level["ddr"].total == 0  # nothing offloaded to the host
    tl = r.timeline
    hbm = {c: tl[(tl.chip == c) & (tl.resource == "hbm")].bytes.sum() for c in ("chip0", "chip1")}
    total = s.bytes_per_level["hbm"].total
    assert all(0.4 * total < b < 0.6 * total for b in hbm.values()), hbm
    # Each chip's compute rows tile the whole step; idle time has a cause (the bubble).
    for chip in ("chip0", "chip1"):
        rows = tl[(tl.chip == chip) & (tl.resource == "compute")].sort_values("start_s")
        assert rows.start_s.iloc[0] == 0
        assert rows.end_s.max() == pytest.approx(s.step_time_s, rel=1e-12)
        assert (rows.end_s - rows.start_s).sum() == pytest.approx(s.step_time_s, rel=1e-9)
        assert (rows[rows.kind == "stall"].cause != "").all()
    assert s.stall_s["bubble"] > 0
    tp2 = simulate("a100-80gb-sxm", "llama-2-70b", context=2048, tp=2).summary.step_time_s
    assert s.step_time_s < 3 * tp2  # no host offload: same order as tensor parallelism


def test_a_stage_too_small_for_its_layers_names_the_stage(tmp_path):
    with pytest.raises(CapacityError, match="pipeline stage 0"):
        simulate("a100-80gb-sxm", "llama-2-70b", context=2048, pp=2, set={"hbm.capacity": "20GB",
                                                                            "ddr.capacity": "1GB"})


@pytest.mark.parametrize("parts", [4, 8])
def test_the_pipeline_law(parts):
    """P stages and M micro-batches take (M + P - 1) stage times (the stages are nearly equal)."""
    stages = 4
    one = simulate("h100-sxm", "llama-2-7b", phase="prefill", prompt=256, batch=1, pp=stages)
    t_stage = one.summary.step_time_s / stages
    many = simulate("h100-sxm", "llama-2-7b", phase="prefill", prompt=256, batch=parts, pp=stages,
                    microbatches=parts).summary
    assert many.step_time_s == pytest.approx((parts + stages - 1) * t_stage, rel=0.03)
    assert many.workload.batch == parts and many.workload.microbatches == parts


def test_a_prefill_splits_into_chunks_that_attend_to_the_ones_before():
    step = workload.StepSpec.make("prefill", batch=1, prompt=10)
    chunks = workload.split(step, 3)
    assert [c.tokens for c in chunks] == [3, 3, 4] and [c.context for c in chunks] == [0, 3, 6]
    assert [c.logits for c in chunks] == [False, False, True]
    model = workload.model_config("llama-3.2-1b")
    full = workload.build_step(model, step)
    parts = [workload.build_step(model, c) for c in chunks]
    attn = lambda g: sum(op.flops for op in g if op.kind == "attention")
    assert sum(attn(g) for g in parts) == attn(full)  # causal pairs add up
    assert "lm_head" in parts[-1].ops and "lm_head" not in parts[0].ops


def test_a_layer_pipelined_prefill_chunks_its_prompt_whatever_the_batch():
    """wse-3 streams a prefill through its regions in prompt chunks (``execution.pipeline_chunks``).
    When a batch that divided into the chunks was split instead, each part computed its own
    logits (the LM head's weights streamed once per part): GPT-2 with 2 tokens took 139.5 us at
    batch 2 (two parts of one sequence) and 137.5 us at batch 3 (two prompt chunks)."""
    step = workload.StepSpec.make("prefill", batch=2, prompt=2)
    assert [(c.batch, c.tokens) for c in workload.split(step, 2)] == [(1, 2), (1, 2)]  # --microbatches 2
    assert [(c.batch, c.tokens) for c in workload.split(step, 2, prompt_chunks=True)] == [(2, 1), (2, 1)]
    two, three = (simulate("wse-3", "gpt2", phase="prefill", prompt=2, batch=b).summary.step_time_s for b in (2, 3))
    assert three >= two


def test_micro_batches_must_split_the_step():
    with pytest.raises(ConfigError, match=r"^microbatches: "):
        simulate("h100-sxm", "llama-3.2-1b", context=64, batch=3, microbatches=2)


def test_the_grid_is_the_parallelism_the_mapping_is_given(tiny_graph, tiny_chip):
    """tp and pp reach the mapping in one typed value, and a grid that disagrees with the ranks
    the graph was built for is refused rather than simulated on the wrong number of chips."""
    import dataclasses

    from memsim.mapping import Grid, make_plan

    assert Grid.of(tiny_graph, 2) == Grid(tp=tiny_graph.meta.tp, pp=2)
    assert make_plan(tiny_graph, tiny_chip, Grid(pp=2)).chips == 2
    with pytest.raises(ConfigError) as info:
        make_plan(tiny_graph, tiny_chip, Grid(tp=4))
    assert info.value.field == "tp" and "one rank of 1, not of 4" in info.value.message
    two = dataclasses.replace(tiny_graph, meta=dataclasses.replace(tiny_graph.meta, tp=2))
    assert make_plan(two, tiny_chip).tp == 2  # the default grid: the ranks the graph is one of
