"""Accelerator families: each is a mapping strategy over the same engine."""
from __future__ import annotations

import json

import pytest

from memsim import hardware, simulate
from memsim.core.errors import CapacityError
from memsim.stack import load_stack
from tests.conftest import warned

PRESETS = hardware.presets()


def test_every_family_has_a_preset():
    assert {hardware.load(p).family for p in PRESETS} == {"gpu", "wafer", "rdu", "cpu"}
    assert len(PRESETS) >= 15


@pytest.mark.parametrize("hw", PRESETS)
def test_every_preset_runs_gpt2_int8_decode_or_says_what_does_not_fit(hw):
    try:
        s = simulate(hw, "gpt2", phase="decode", context=128, weight_dtype="int8").summary
    except CapacityError as exc:
        assert "fit" in str(exc) and "\n" not in str(exc)
        return
    assert s.step_time_s >= s.roofline_s > 0


def test_wafer_keeps_llama_8b_on_wafer():
    s = simulate("wse-3", "llama-3.1-8b", context=2048).summary
    assert s.bytes_per_level["memoryx"].total == 0
    assert s.bytes_per_link["io"].total == 0
    assert s.bytes_per_level["sram"].read >= s.weight_bytes + s.kv_cache_bytes
    assert s.roofline_bound in ("sram", "compute", "pipeline hops")  # one token through 32 regions
    assert s.dominant_stall in ("sram", "link:fabric", "compute", "bubble")  # one token through 32 regions
    assert s.bytes_per_link["fabric"].total > 0


def test_wafer_streams_weights_that_do_not_fit_from_memoryx():
    with warned():
        r = simulate("wse-3", "llama-3.1-70b", context=2048)
    s = r.summary
    assert s.bytes_per_level["memoryx"].read > 0
    streamed = r.timeline[(r.timeline.src == "memoryx") & (r.timeline.kind == "transfer")]
    # Each transfer is a row on MemoryX and a row on the I/O link it is reached over.
    for resource in ("memoryx", "link:io"):
        assert streamed[streamed.resource == resource]["bytes"].sum() == s.bytes_per_level["memoryx"].read
    # The external stream (MemoryX over the wafer's I/O) is what the step waits for.
    assert s.stall_s.get("memoryx", 0) + s.stall_s.get("link:io", 0) > 0.9 * s.stall_total_s
    assert s.bytes_per_link["io"].read == s.bytes_per_level["memoryx"].read


def test_rdu_stages_weights_beyond_hbm_from_ddr():
    r = simulate("sn40l", "llama-3.1-70b", context=2048)
    tl = r.timeline
    staged_in = tl[(tl.src == "ddr") & (tl.dst == "hbm") & (tl.resource == "hbm")]["bytes"].sum()
    prefetched = tl[(tl.src == "ddr") & (tl.dst == "sram") & (tl.resource == "ddr")]["bytes"].sum()
    assert staged_in > 0 and prefetched > 0  # big GEMMs' weights go through HBM, smaller ones straight to SRAM
    assert staged_in + prefetched == r.summary.bytes_per_level["ddr"].read
    assert r.summary.stall_s["ddr"] > 0  # staging is exposed: compute waits for it
    small = simulate("sn40l", "llama-3.1-8b", context=2048)
    assert small.summary.bytes_per_level["ddr"].total == 0


@pytest.mark.parametrize("fused_kernel, pp, launches", [("layer", 1, 32), ("step", 1, 1), ("step", 2, 2)])
def test_rdu_pays_launch_overhead_once_per_fused_kernel(fused_kernel, pp, launches):
    """A kernel per decoder layer, or with kernel looping one call per pipeline stage's chip
    for all its layers; the operators outside the layers are kernels of their own either way."""
    r = simulate("sn40l", "llama-3.1-8b", context=128, pp=pp, set={"execution.fused_kernel": fused_kernel})
    overhead = r.timeline[r.timeline.cause == "overhead"]
    assert len(overhead) == launches + len({op.name for op in r.graph if op.layer < 0})
    if fused_kernel == "step":  # the first operator of each stage's first layer
        chip_of = {t.op: t.chip for t in r.plan.tasks}
        firsts = {}
        for t in r.plan.tasks:
            if t.layer >= 0:
                firsts.setdefault(t.chip, t.op)
        assert set(overhead[overhead.op.str.startswith("L")].op) == set(firsts.values())
        assert len(firsts) == pp and all(op.endswith(".attn_norm") for op in firsts.values())
        assert len({chip_of[op] for op in firsts.values()}) == pp


def test_rdu_keeps_layer_intermediates_in_sram():
    r = simulate("sn40l", "llama-3.1-8b", context=128)
    homes = dict(r.plan.homes)
    assert homes["L0.gate_up.out"] == "sram" and homes["L0.qkv.weight"] == "hbm"


def test_gpu_offloads_to_host_ddr_over_pcie():
    with warned():
        s = simulate("h100-sxm", "mixtral-8x7b", batch=8, context=512).summary  # 93 GB of bf16 weights
    assert s.bytes_per_level["ddr"].read > 0
    assert s.bytes_per_link["pcie"].read == s.bytes_per_level["ddr"].read
    assert s.dominant_stall == "link:pcie"


def test_gpu_eager_launches_cost_more_than_graphs():
    graph = simulate("h100-sxm", "gpt2", context=128, stack="ideal").summary
    eager = simulate("h100-sxm", "gpt2", context=128, stack="trtllm-0.9",
                     set={"stack.dispatch.host": "serial"}).summary
    launch = load_stack("trtllm-0.9")[0].dispatch.launch_ps
    assert launch > 0  # the host's launch call, on top of the device's per-kernel cost
    ex = hardware.load("h100-sxm").execution
    # a serial host pays each launch before its kernel: the stall `host`, beside the device's `overhead`
    assert eager.stall_s["overhead"] == pytest.approx(graph.stall_s["overhead"])
    assert eager.stall_s["host"] == pytest.approx(launch / ex.op_overhead_ps * graph.stall_s["overhead"])


def test_gpu_waves_stretch_small_gemms():
    r = simulate("a100-80gb-sxm", "llama-2-7b", phase="prefill", prompt=128, stack="ideal")  # fixed tiles
    ops = r.ops.set_index("op")
    # o_proj (32 output tiles on 108 SMs) runs at a third of the rate of the 96-tile qkv projection.
    rate = lambda op: ops.loc[op, "flops"] / ops.loc[op, "duration_s"]
    assert rate("L0.o_proj") < 0.6 * rate("L0.qkv")


def test_cpu_runs_attention_unfused():
    r = simulate("xeon-gold-6242", "gpt2", context=256)
    assert {s.label for t in r.plan.tasks if t.kind == "attention" for s in t.steps} == {"qk", "softmax", "pv"}


def _renamed(frame, old: str, new: str):
    """Rename a link in every column that names resources (hops between regions are ``link:NAME[a>b]``)."""
    return frame.replace({col: {f"^{old}": new} for col in ("resource", "src", "dst", "cause")}, regex=True)


def test_wafer_fabric_is_the_declared_link_whatever_its_name():
    base = simulate("wse-3", "gpt2", context=128)
    renamed = simulate("wse-3", "gpt2", context=128, set={"fabric.name": "mesh", "execution.fabric": "mesh"})
    # field names (execution.fabric_sync) keep their names; only the link's name changes
    found, expected = renamed.summary.as_dict(), base.summary.as_dict()
    assert found.pop("estimates") == json.loads(json.dumps(expected.pop("estimates")).replace("links[fabric]", "links[mesh]"))
    assert found == json.loads(json.dumps(expected).replace("fabric", "mesh"))
    assert renamed.timeline.equals(_renamed(base.timeline, "link:fabric", "link:mesh"))


def test_wafer_without_a_declared_fabric_runs_no_fabric_steps():
    r = simulate("wse-3", "gpt2", context=128, set={"execution.fabric": ""})
    labels = {s.label for t in r.plan.tasks for s in t.steps}
    assert not labels & {"broadcast", "reduce"}
    assert r.summary.bytes_per_link["fabric"].total == 0
    assert not any(ref.is_link for t in r.plan.tasks for s in t.steps for ref, _ in s.total_loads)
    with_fabric = simulate("wse-3", "gpt2", context=128)
    assert {"broadcast", "reduce"} <= {s.label for t in with_fabric.plan.tasks for s in t.steps}


SPILL = {"hbm.capacity": "1 GB"}  # Llama-3.2-1B's 2.5 GB of weights spill into DDR


def _staged_bytes(r) -> int:
    tl = r.timeline
    return int(tl[(tl.src == "ddr") & (tl.dst == "hbm")]["bytes"].sum())


@pytest.mark.slow
def test_rdu_stages_the_declared_levels_into_the_declared_level():
    r = simulate("sn40l", "llama-3.2-1b", context=128, set=SPILL)
    assert _staged_bytes(r) > 0 and "stage" in {s.label for t in r.plan.tasks for s in t.steps}
    # Staging follows the declared names, not the level's name or kind.
    renamed = simulate("sn40l", "llama-3.2-1b", context=128,
                       set={**SPILL, "ddr.name": "dram", "dram.kind": "external", "execution.stage_from": "dram"})
    assert renamed.summary.step_time_s == r.summary.step_time_s
    assert renamed.summary.bytes_per_level["dram"] == r.summary.bytes_per_level["ddr"]


def test_rdu_with_empty_staging_fields_stages_nothing():
    r = simulate("sn40l", "llama-3.2-1b", context=128, set={**SPILL, "execution.stage_from": ""})
    assert _staged_bytes(r) == 0
    assert "stage" not in {s.label for t in r.plan.tasks for s in t.steps}
    assert r.summary.bytes_per_level["ddr"].read > 0  # the weights are read from DDR where they live
