"""The engine: exact fast-forward and replay, full stall attribution, determinism."""
from __future__ import annotations

from dataclasses import replace

import pytest

from memsim import engine, mapping, workload
from memsim.engine.fastforward import MIN_PREFIX


def _compute_rows(result):
    return sorted((r for r in result.records if str(r.resource) == "compute"), key=lambda r: (r.start_ps, r.end_ps))


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_fast_forward_and_replay_are_exact(tiny_graph, tiny_chip, depth):
    chip = replace(tiny_chip, execution=replace(tiny_chip.execution, prefetch_depth=depth))
    plan = mapping.make_plan(tiny_graph, chip)
    assert any(s.count > 4 * MIN_PREFIX for t in plan.tasks for s in t.steps), "nothing to fast-forward"
    full = engine.run(plan, fast_forward=False, memoize=False)
    fast = engine.run(plan, fast_forward=True, memoize=True)
    assert fast.end_ps == full.end_ps
    assert fast.bytes_read == full.bytes_read and fast.bytes_written == full.bytes_written
    assert [s[1:] for s in fast.spans] == [s[1:] for s in full.spans]
    assert fast.replayed_tasks > 0 and fast.events < full.events


def test_every_idle_moment_of_compute_has_a_cause(tiny_plan):
    result = engine.run(tiny_plan)
    rows = _compute_rows(result)
    t = 0
    for r in rows:  # compute and stall rows tile [0, end] with no gap and no overlap
        assert r.start_ps == t, r
        t = r.end_ps
        assert (r.kind == "stall") == bool(r.cause)
    assert t == result.end_ps
    causes = {str(r.cause) for r in rows if r.kind == "stall"}
    assert {"overhead", "hbm"} <= causes


def test_no_double_buffering_shows_tile_buffer_stalls(tiny_graph, tiny_chip):
    single = replace(tiny_chip, execution=replace(tiny_chip.execution, prefetch_depth=1))
    one = engine.run(mapping.make_plan(tiny_graph, single))
    two = engine.run(mapping.make_plan(tiny_graph, tiny_chip))
    stall = lambda res, c: sum(r.end_ps - r.start_ps for r in res.records if str(r.cause) == c)
    assert stall(one, "tile_buffer") > 0
    assert stall(two, "tile_buffer") < stall(one, "tile_buffer")
    assert two.end_ps < one.end_ps


def test_runs_are_deterministic(tiny_plan):
    assert engine.run(tiny_plan) == engine.run(tiny_plan)


def test_identical_layers_are_simulated_once(tiny_model_path, tiny_chip):
    model = workload.load_model(tiny_model_path)
    counts = {}
    for layers in (2, 8):
        g = workload.build_step(replace(model, layers=layers), workload.StepSpec.make("decode", 1, context=16))
        counts[layers] = engine.run(mapping.make_plan(g, tiny_chip)).simulated_tasks
    assert counts[8] == counts[2]


def test_event_count_grows_linearly_with_layers(tiny_model_path, tiny_chip):
    model = workload.load_model(tiny_model_path)
    events = []
    for layers in (4, 8, 16):
        g = workload.build_step(replace(model, layers=layers), workload.StepSpec.make("decode", 1, context=16))
        events.append(engine.run(mapping.make_plan(g, tiny_chip)).events)
    assert events[2] - events[1] == 2 * (events[1] - events[0])


def test_bytes_moved_cover_the_plan(tiny_plan):
    result = engine.run(tiny_plan)
    planned: dict[str, list[int]] = {}
    for t in tiny_plan.tasks:
        for lvl, (r, w) in t.bytes_by_level().items():
            planned.setdefault(str(lvl), [0, 0])
            planned[str(lvl)][0] += r
            planned[str(lvl)][1] += w
    assert {k: v for k, v in result.bytes_read if v} == {k: v[0] for k, v in planned.items()}
    transfers = sum(r.bytes for r in result.records if r.kind == "transfer")
    assert transfers == sum(v for _, v in result.bytes_read) + sum(v for _, v in result.bytes_written)


def test_a_fast_forwarded_step_s_transfer_rows_end_where_they_do_chunk_by_chunk():
    """The chunks in flight when fast-forward skips come after the skipped ones: they keep their
    place (``Chunk.index``), so the last one still widens its levels' rows. (They kept their old
    index, and GPT-2's LM head on h100-sxm showed its HBM row ending 0.15 us early.)"""
    from memsim import simulate

    def rows(fast: bool):
        result = simulate("h100-sxm", "gpt2", context=128, fast_forward=fast).engine
        return sorted((str(r.resource), r.start_ps, r.end_ps, r.bytes) for r in result.records
                      if r.op == "lm_head" and r.kind == "transfer")

    fast, full = rows(True), rows(False)
    assert len(fast) == 3 and fast == full
