"""Reports: summary fields, table columns, and all-or-nothing output folders."""
from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from memsim import hardware, simulate
from memsim.report import TIMELINE_COLUMNS


@pytest.fixture()
def result(tiny_chip_path, tiny_model_path):
    return simulate(str(tiny_chip_path), str(tiny_model_path), phase="decode", batch=2, context=32)


def test_summary_is_consistent_with_the_timeline(result):
    s, tl = result.summary, result.timeline
    assert s.step_time_s == pytest.approx(tl["end_s"].max())
    compute = tl[tl.resource == "compute"]
    stalls = compute[compute.kind == "stall"].groupby("cause")["end_s"].sum() - \
        compute[compute.kind == "stall"].groupby("cause")["start_s"].sum()
    assert s.stall_s == pytest.approx(stalls.to_dict())
    assert s.compute_busy_s + s.stall_total_s == pytest.approx(s.step_time_s)
    assert s.flops_total == compute[compute.kind == "compute"]["flops"].sum() == result.graph.total_flops()
    hbm = tl[(tl.kind == "transfer") & (tl.resource == "hbm")]
    assert s.bytes_per_level["hbm"].read == hbm[hbm.src == "hbm"]["bytes"].sum()
    assert s.bytes_per_level["hbm"].written == hbm[hbm.dst == "hbm"]["bytes"].sum()
    assert s.step_time_s >= s.roofline_s
    assert 0 < s.compute_utilization < 1


def test_tables_have_the_documented_columns(result):
    assert list(result.timeline.columns) == TIMELINE_COLUMNS
    assert set(result.timeline["kind"]) == {"compute", "transfer", "stall"}
    ops = result.ops
    for col in ["op", "op_kind", "layer", "start_s", "end_s", "duration_s", "flops", "hbm_read_bytes",
                "hbm_written_bytes", "arithmetic_intensity", "roofline_s", "bound", "tile"]:
        assert col in ops.columns
    assert len(ops) == len(result.graph.ops)
    assert (ops["end_s"] >= ops["start_s"]).all()
    assert (ops["duration_s"] >= ops["roofline_s"] * (1 - 1e-9)).all()
    gemms = ops[ops.op_kind == "matmul"]
    assert (gemms["arithmetic_intensity"] > 0).all()


def test_an_ops_bound_is_the_term_that_sets_its_roofline(result):
    """roofline_s and bound come from one model: a level-bound op's roofline is its bytes there at
    the level's peak bandwidth, and no other level's bytes take longer at theirs."""
    from memsim.hardware.rates import peak_bandwidth
    from memsim.hardware.resource import Ref

    chip, ops = result.chip, result.ops
    at_peak = {lvl.name: ops[f"{lvl.name}_read_bytes"].add(ops[f"{lvl.name}_written_bytes"]) /
               peak_bandwidth(chip, Ref.level(lvl.name)) for lvl in chip.levels if f"{lvl.name}_read_bytes" in ops}
    assert set(ops.bound) & set(at_peak), "no op is bound by a level"
    for i, row in ops.iterrows():
        if row.bound in at_peak:
            assert row.roofline_s == pytest.approx(at_peak[row.bound][i], rel=1e-9), row.op
        assert all(t[i] <= row.roofline_s * (1 + 1e-9) for t in at_peak.values()), row.op


def test_outputs_are_written_and_reload(result, tmp_path):
    out = tmp_path / "run"
    written = result.write(out)
    assert sorted(p.name for p in written) == ["hardware.yaml", "ops.csv", "summary.json", "timeline.csv"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["step_time_s"] == result.summary.step_time_s
    assert len(pd.read_csv(out / "timeline.csv")) == len(result.timeline)
    # The resolved configuration saved next to the result loads back to the same chip.
    chip, _ = hardware.load_chip(out / "hardware.yaml")
    assert chip == result.chip
    assert yaml.safe_load((out / "hardware.yaml").read_text())["name"] == "tiny"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_overrides_reach_the_saved_config(tiny_chip_path, tiny_model_path, tmp_path):
    r = simulate(str(tiny_chip_path), str(tiny_model_path), context=8, set={"sram.capacity": "128KiB"})
    r.write(tmp_path / "o")
    assert hardware.load_chip(tmp_path / "o" / "hardware.yaml")[0].scratchpad.capacity_bytes == 128 * 1024


def _adds_up(s: dict) -> None:
    """``per_chip`` adds up to the totals per level and link, and nothing was held longer than the step."""
    step = s.step_time_s
    totals: dict[str, list] = {}
    for who, resources in s.per_chip.items():
        for name, v in resources.items():
            assert v.total == v.read + v.written
            assert 0.0 <= v.busy_s <= step * (1 + 1e-12), (who, name)
            assert s.utilization[who][name] == pytest.approx(v.busy_s / step) and s.utilization[who][name] <= 1
            t = totals.setdefault(name.removeprefix("link:"), [0, 0, 0.0])
            t[0], t[1], t[2] = t[0] + v.read, t[1] + v.written, t[2] + v.busy_s
    for name, v in {**s.bytes_per_level, **s.bytes_per_link}.items():
        read, written, busy = totals.pop(name)
        assert (read, written) == (v.read, v.written) and busy == pytest.approx(v.busy_s, abs=1e-15)
    assert not totals


def test_a_two_stage_pipeline_reports_each_chips_levels_and_links():
    """Per-chip bytes, busy time and utilisation of every level and link on a ``--pp 2`` run; the
    stages split the weights, so each chip's HBM reads about half, and the send between them
    crosses the switch's link directions."""
    s = simulate("h100-sxm", "llama-2-7b", context=256, pp=2, sensitivity=0).summary
    assert set(s.per_chip) == {"chip0", "chip1", "system"}
    _adds_up(s)
    hbm = [s.per_chip[c]["hbm"] for c in ("chip0", "chip1")]
    assert all(0.4 < h.read / s.bytes_per_level["hbm"].read < 0.6 and h.busy_s > 0 for h in hbm)
    assert s.per_chip["system"]["link:nvlink[0>sw]"].read > 0


def test_a_layer_pipelined_chip_reports_each_regions_own_resources_and_the_shared_ones_once():
    s = simulate("wse-3", "llama-3.2-1b", phase="prefill", prompt=4, sensitivity=0).summary
    _adds_up(s)
    regions = [w for w in s.per_chip if ".region" in w]
    assert len(regions) > 1 and all("sram" in s.per_chip[w] for w in regions)
    assert "sram" not in s.per_chip.get("chip0", {})  # each region's own


@pytest.mark.parametrize("name", ["overhead", "bubble", "compute", "link:x"])
def test_a_level_named_like_a_cause_keeps_its_stalls_and_bytes_apart(tmp_path, tiny_model_path, name):
    """Renaming the tiny chip's ``hbm`` level changes no figure: its stalls and bytes are written
    ``level:NAME`` where its name reads as a cause, the compute units or a prefixed name."""
    from tests.conftest import TINY_CHIP
    path = tmp_path / "renamed.yaml"
    path.write_text(TINY_CHIP.replace("{name: hbm,", f"{{name: '{name}',"))
    plain = tmp_path / "plain.yaml"
    plain.write_text(TINY_CHIP)
    kw = dict(phase="decode", batch=2, context=32, sensitivity=0)
    want, got = (simulate(str(p), str(tiny_model_path), **kw).summary for p in (plain, path))
    written = f"level:{name}"
    assert got.step_time_s == want.step_time_s
    assert got.stall_s[written] == want.stall_s["hbm"] and got.stall_s["overhead"] == want.stall_s["overhead"]
    assert got.bytes_per_level[name] == want.bytes_per_level["hbm"]
    assert got.per_chip["chip0"][written] == want.per_chip["chip0"]["hbm"]
