"""Placement of tensors in memory levels, and the roofline's compulsory traffic."""
from __future__ import annotations

import textwrap

import pytest

from memsim import hardware
from memsim.core.errors import CapacityError, MemsimWarning
from memsim.hardware import load_chip
from memsim.hardware.resource import Ref
from memsim.mapping.placement import place
from memsim.mapping.roofline import compulsory_bytes, compute_seconds, roofline
from memsim.workload import StepSpec, build_step, model_config

TWO_TIER = """\
name: two-tier
family: gpu
compute:
  units: 2
  peak: {bf16: 100 TFLOP/s}
  vector_peak: 10 TFLOP/s
levels:
  - {name: sram, kind: sram, capacity: 4 MiB, bandwidth: 20 TB/s, latency: 10 ns}
  - {name: hbm, kind: hbm, capacity: HBM_CAP, bandwidth: 2 TB/s, latency: 500 ns}
  - {name: ddr, kind: ddr, capacity: 64 GB, bandwidth: 200 GB/s, latency: 900 ns}
"""


def gpt2_decode(batch: int = 2, context: int = 64, **kw):
    return build_step(model_config("gpt2"), StepSpec.make("decode", batch=batch, context=context, **kw))


def two_tier(tmp_path, hbm_cap: str):
    path = tmp_path / "two.yaml"
    path.write_text(textwrap.dedent(TWO_TIER).replace("HBM_CAP", hbm_cap))
    return load_chip(path)[0]


def test_every_tensor_gets_a_home_and_persistent_ones_go_to_hbm():
    g = gpt2_decode()
    chip = hardware.load("h100-sxm")
    homes = place(g, chip)
    assert set(homes) == set(g.tensors)
    for t in g.tensors.values():
        if t.klass in ("weight", "kv"):
            assert homes[t.name] == "hbm", t.name
    assert "sram" not in homes.values()  # the scratchpad only stages tiles
    # Small activations stay in L2 between kernels; big ones go to HBM.
    assert all(homes[t.name] in ("l2", "hbm") for t in g.tensors.values() if t.klass == "activation")
    assert homes["L0.attn_norm.out"] == "l2"


def test_llama_on_h100_is_placed_in_hbm():
    g = build_step(model_config("llama-2-7b"), StepSpec.make("decode", batch=4, context=1024))
    homes = place(g, hardware.load("h100-sxm"))
    assert all(homes[n] == "hbm" for n, t in g.tensors.items() if t.klass in ("weight", "kv"))


def test_placement_does_not_touch_its_inputs():
    g = gpt2_decode()
    before = (dict(g.tensors), dict(g.ops), g.meta)
    chip = hardware.load("h100-sxm")
    place(g, chip)
    assert (g.tensors, g.ops, g.meta) == before
    assert chip == hardware.load("h100-sxm")


def test_model_too_big_for_hbm_raises_capacity_error():
    g = build_step(model_config("llama-2-7b"), StepSpec.make("decode"))
    chip = hardware.load("h100-sxm", [("hbm.capacity", "1 GB"), ("ddr.capacity", "1 GB")])
    with pytest.raises(CapacityError) as info:
        place(g, chip)
    message = str(info.value)
    assert "13.48" in message  # GB the weights and KV need
    assert "hbm" in message and "ddr" in message and info.value.field == "levels"


def test_weights_beyond_hbm_are_offloaded_to_host_ddr():
    g = build_step(model_config("llama-2-7b"), StepSpec.make("decode"))
    homes = place(g, hardware.load("h100-sxm", [("hbm.capacity", "4 GB")]))
    assert {homes[t.name] for t in g.tensors.values() if t.klass == "weight"} == {"hbm", "ddr"}


def test_kv_cache_can_be_what_does_not_fit():
    # gpt2 weights (~0.25 GB) fit in 1 GB, but a long context at a large batch does not: the
    # error blames the options that sized the cache, not the chip's levels.
    chip = hardware.load("h100-sxm", [("hbm.capacity", "1 GB"), ("ddr.capacity", "1 GB")])
    place(gpt2_decode(batch=1, context=64), chip)
    with pytest.raises(CapacityError) as info:
        place(gpt2_decode(batch=64, context=1000), chip)
    assert info.value.field == "batch/context" and info.value.one_line(flags=True).endswith(
        "lower --batch or --context (batch 64, context 1000)")
    assert "the weights alone fit" in info.value.message and "batch 64, context 1000" in info.value.message
    prefill = build_step(model_config("gpt2"), StepSpec.make("prefill", batch=2048, prompt=1000))
    with pytest.raises(CapacityError) as info:
        place(prefill, chip)
    assert info.value.field == "batch/prompt" and "batch 2048, prompt 1000" in info.value.message


def test_persistent_tensors_spill_to_the_next_level(tmp_path):
    g = gpt2_decode(batch=8, context=1000)
    weights, kv = g.bytes_of("weight"), g.bytes_of("kv")
    hbm_cap = weights + kv // 2  # weights fit, about half the cache does
    chip = two_tier(tmp_path, f"{hbm_cap} B")
    assert [lvl.name for lvl in chip.levels if lvl.home_for("weight")] == ["hbm", "ddr"]
    homes = place(g, chip)
    in_hbm = sum(t.bytes for t in g.tensors.values() if t.klass in ("weight", "kv") and homes[t.name] == "hbm")
    in_ddr = sum(t.bytes for t in g.tensors.values() if t.klass in ("weight", "kv") and homes[t.name] == "ddr")
    assert in_hbm <= hbm_cap
    assert in_hbm + in_ddr == weights + kv
    assert in_ddr > 0
    # Weights are placed before the cache, so all of them land in the fast level, but for a table
    # that only lookups read (a row per token): it goes last, the first to stay in host memory.
    assert all(homes[n] == "hbm" for n, t in g.tensors.items() if t.klass == "weight" and n != "embed.pos")
    assert homes["embed.pos"] == "ddr"
    # Activations live in the first off-chip level.
    assert all(homes[n] == "hbm" for n, t in g.tensors.items() if t.klass == "activation")


def test_nothing_spills_when_the_fast_level_is_big_enough(tmp_path):
    g = gpt2_decode(batch=8, context=1000)
    homes = place(g, two_tier(tmp_path, "80 GB"))
    assert "ddr" not in homes.values()


def test_scratchpad_only_chip_keeps_everything_in_sram(tmp_path):
    text = textwrap.dedent(TWO_TIER).replace("HBM_CAP", "1 GB")
    lines = [ln for ln in text.splitlines() if "name: hbm" not in ln and "name: ddr" not in ln]
    text = "\n".join(lines).replace("capacity: 4 MiB", "capacity: 1 GB, holds: [weight, kv, activation]")
    path = tmp_path / "wafer.yaml"
    path.write_text(text + "\n")
    chip = load_chip(path)[0]
    assert [lvl.name for lvl in chip.levels if lvl.home_for("weight")] == ["sram"]
    homes = place(gpt2_decode(), chip)
    assert set(homes.values()) == {"sram"}


def test_per_unit_capacity_counts_for_the_whole_chip(tmp_path):
    g = gpt2_decode()
    need = g.bytes_of("weight") + g.bytes_of("kv")
    per_unit = need // 2 + 1  # two units: fits only when summed over units
    text = textwrap.dedent(TWO_TIER).replace("HBM_CAP", f"{per_unit} B, scope: unit")
    text = "\n".join(ln for ln in text.splitlines() if "name: ddr" not in ln) + "\n"
    path = tmp_path / "unit.yaml"
    path.write_text(text)
    chip = load_chip(path)[0]
    assert chip.chip_capacity(chip.level("hbm")) == 2 * per_unit
    homes = place(g, chip)
    assert set(homes.values()) == {"hbm"}


def _weight_and_kv_traffic(g) -> int:
    reads = sum(r.bytes for op in g for r in op.inputs if g.tensors[r.tensor].klass in ("weight", "kv"))
    writes = sum(g.tensors[o].bytes for op in g for o in op.outputs if g.tensors[o].klass == "kv")
    return reads + writes


@pytest.mark.parametrize("graph_fn", [
    lambda: gpt2_decode(batch=2, context=64),
    lambda: build_step(model_config("gpt2"), StepSpec.make("prefill", prompt=128)),
    lambda: build_step(model_config("llama-2-7b"), StepSpec.make("decode", batch=1, context=256)),
])
def test_compulsory_bytes_cover_weights_and_kv(graph_fn):
    g = graph_fn()
    chip = hardware.load("h100-sxm")
    homes = place(g, chip)
    need = compulsory_bytes(g, homes)
    assert "hbm" in need and set(need) <= {"hbm", "l2"}
    weight_reads = sum(r.bytes for op in g for r in op.inputs if g.tensors[r.tensor].klass == "weight")
    assert need["hbm"] >= weight_reads
    assert need["hbm"] >= _weight_and_kv_traffic(g)
    # Every non-embedding weight is read whole at least once.
    gathered = {"embed.weight", "embed.pos"}
    assert need["hbm"] >= g.bytes_of("weight") - sum(g.tensors[n].bytes for n in gathered if n in g.tensors)
    # Intermediate activations are not compulsory: only external inputs and final outputs add to the minimum.
    activations = sum(t.bytes for t in g.tensors.values() if t.klass == "activation")
    assert need["hbm"] < _weight_and_kv_traffic(g) + activations


def test_llama_decode_compulsory_is_dominated_by_weights():
    g = build_step(model_config("llama-2-7b"), StepSpec.make("decode", batch=1, context=256))
    chip = hardware.load("h100-sxm")
    need = compulsory_bytes(g, place(g, chip))["hbm"]
    assert g.bytes_of("weight") * 0.98 <= need <= g.bytes_of("weight") * 1.05


def test_roofline_bound_and_time():
    chip = hardware.load("h100-sxm")
    g = build_step(model_config("llama-2-7b"), StepSpec.make("decode", batch=1, context=256))
    homes = place(g, chip)
    seconds, bound, need = roofline(g, chip, homes)
    assert bound == Ref.level("hbm")  # batch-1 decode is memory bound
    assert seconds == pytest.approx(need["hbm"] / chip.level("hbm").bandwidth_bytes_per_s)
    assert seconds >= compute_seconds(g, chip)
    assert 3.9e-3 < seconds < 4.2e-3  # ~13.5 GB at 3.35 TB/s


def test_roofline_prefill_is_compute_bound():
    chip = hardware.load("h100-sxm")
    g = build_step(model_config("llama-2-7b"), StepSpec.make("prefill", batch=8, prompt=1024))
    seconds, bound, need = roofline(g, chip, place(g, chip))
    assert bound == "compute"
    assert seconds == pytest.approx(compute_seconds(g, chip))
    assert seconds >= need["hbm"] / chip.level("hbm").bandwidth_bytes_per_s


def test_faster_memory_never_raises_the_roofline():
    g = gpt2_decode(batch=1, context=64)
    slow = hardware.load("h100-sxm")
    fast = hardware.load("h100-sxm", [("hbm.bandwidth", "10 TB/s")])
    assert roofline(g, fast, place(g, fast))[0] <= roofline(g, slow, place(g, slow))[0]
    assert compulsory_bytes(g, place(g, fast)) == compulsory_bytes(g, place(g, slow))


def _sn40l_holding(capacity: str):
    return hardware.load("sn40l", [("sram.capacity", capacity), ("sram.holds", "weight,activation")])


def test_a_scratchpad_holding_weights_keeps_what_tiles_and_staging_need():
    """sn40l with `holds: [weight, activation]`: GPT-2 fits beside its tiles, so all its weights
    live in SRAM and nothing is staged; Llama-3.2-1B does not, so the tiles keep their least-traffic
    tile, the staging area half of the rest (less than two LM heads) and the weights the other
    half, smallest first."""
    from memsim.mapping.lower import tile_floor
    from memsim.mapping.placement import sram_split

    g = gpt2_decode(batch=1, context=512)
    chip = _sn40l_holding("520MB")
    homes = place(g, chip)
    weights = [t for t in g.tensors.values() if t.klass == "weight"]
    assert all(homes[t.name] == "sram" for t in weights)
    assert all(homes[t.name] == "hbm" for t in g.tensors.values() if t.klass == "kv")  # KV is not a class it holds
    assert sram_split(g, chip, homes) == (520 * 10**6 - sum(t.bytes for t in weights), 0)

    big = build_step(model_config("llama-3.2-1b"), StepSpec.make("decode", batch=1, context=512))
    homes = place(big, chip)
    resident = [t for t in big.tensors.values() if homes[t.name] == "sram" and t.klass == "weight"]
    streamed = [t for t in big.tensors.values() if homes[t.name] == "hbm" and t.klass == "weight"]
    assert resident and streamed
    tiles = max(tile_floor(op, big, chip) for op in big)
    room, staging = sram_split(big, chip, homes)
    assert staging == room - tiles == (520 * 10**6 - tiles) // 2
    assert sum(t.bytes for t in resident) <= 520 * 10**6 - room
    assert max(t.bytes for t in resident) <= min(t.bytes for t in streamed)  # the smallest first


def test_more_sram_keeps_a_superset_resident_and_never_less_room():
    from memsim.mapping.placement import sram_split

    g = build_step(model_config("llama-3.2-1b"), StepSpec.make("decode", batch=1, context=512))
    before, room = set(), 0
    for mib in (1, 3, 8, 30, 100, 333, 1000, 2000, 3000):
        chip = _sn40l_holding(f"{mib}MiB")
        homes = place(g, chip)
        resident = {n for n, h in homes.items() if h == "sram" and g.tensors[n].klass == "weight"}
        assert before <= resident
        spills = any(h != "sram" for n, h in homes.items() if g.tensors[n].klass == "weight")
        now = sram_split(g, chip, homes)[0]
        assert now >= room or not spills  # once all weights are resident nothing needs staging
        before, room = resident, now
    assert not spills and len(before) == sum(t.klass == "weight" for t in g.tensors.values())


def test_an_sram_only_chip_puts_its_weights_in_the_reserve_too():
    """groq-lpu: SRAM is the only memory, so the weights go there whatever tiles would like, and the
    tiles get what is left (the staging area none: nothing is left to prefetch)."""
    from memsim.mapping.placement import sram_split
    from memsim.workload import StepSpec as Spec

    g = build_step(model_config("gpt2"), Spec.make("decode", batch=1, context=64, weight_dtype="int8"))
    chip = hardware.load("groq-lpu")
    homes = place(g, chip)
    assert set(homes.values()) == {"sram"}
    persistent = sum(t.bytes for t in g.tensors.values() if t.klass in ("weight", "kv"))
    assert sram_split(g, chip, homes)[0] == chip.scratchpad.capacity_bytes - persistent


def test_an_activation_that_fits_no_level_is_refused_like_weights():
    """Issue 20: a 10 TB activation was given the last level of an 80 GB H100 anyway."""
    import dataclasses

    chip = hardware.load("h100-sxm")
    graph = gpt2_decode()
    name = next(t.name for t in graph.tensors.values() if t.klass == "activation")
    assert place(graph, chip)[name] in {lvl.name for lvl in chip.levels}
    graph.tensors[name] = dataclasses.replace(graph.tensors[name], bytes=10 * 10**12)
    with pytest.raises(CapacityError) as info:
        place(graph, chip)
    assert info.value.field == f"tensors[{name}]" and "fits in no memory level" in info.value.message


SRAM_CHIP = """name: sram-chip
family: {family}
compute: {{units: 100, peak: {{bf16: 500 TFLOP/s}}, vector_peak: 50 TFLOP/s}}
levels:
  - {{name: sram, kind: sram, capacity: 32 GB, bandwidth: 100 TB/s, latency: 10 ns{holds}}}
  - {{name: ddr, kind: ddr, capacity: 512 GB, bandwidth: 200 GB/s, latency: 100 ns}}
"""


@pytest.mark.parametrize("family", ["gpu", "rdu"])
def test_a_chip_whose_memory_is_its_sram_keeps_the_weights_there_without_a_holds_line(tmp_path, family):
    from memsim import simulate

    path = tmp_path / "chip.yaml"
    path.write_text(SRAM_CHIP.format(family=family, holds=""))
    r = simulate(str(path), "llama-3.1-8b", context=2048)
    assert set(r.summary.placement["weight"]) == {"sram"} and set(r.summary.placement["kv"]) == {"sram"}
    assert r.summary.placement["weight"]["sram"] == r.summary.weight_bytes_stored
    staged = tmp_path / "staged.yaml"  # the same chip told that its SRAM only stages tiles
    staged.write_text(SRAM_CHIP.format(family=family, holds=", holds: []"))
    with pytest.warns(MemsimWarning, match=r"sram \(32.00 GB\) is a home for nothing while 16.06 GB of weights live in"):
        slow = simulate(str(staged), "llama-3.1-8b", context=2048)
    assert set(slow.summary.placement["weight"]) == {"ddr"}
    assert slow.summary.step_time_s > 10 * r.summary.step_time_s


def test_a_gpu_with_device_memory_keeps_its_shared_memory_for_tiles(tmp_path):
    """Shared memory belongs to one kernel at a time: even a model that fits it lives in HBM."""
    from memsim import simulate

    r = simulate("h100-sxm", "llama-2-7b", context=16, set={"sram.capacity": "64GB"})
    assert set(r.summary.placement["weight"]) == {"hbm"}


def test_a_scratchpad_kept_for_activations_by_design_is_not_warned_about():
    """sn40l's SRAM holds activations, as SambaNova describes it: a choice, not an idle level."""
    import warnings

    from memsim import simulate

    with warnings.catch_warnings():
        warnings.simplefilter("error", MemsimWarning)
        r = simulate("sn40l", "gpt2", context=64)
    assert set(r.summary.placement["weight"]) == {"hbm"}
