"""Multi-chip systems: topologies, collectives on link resources, tensor and pipeline parallelism."""
from __future__ import annotations

import pytest

from memsim import ConfigError, engine, hardware, simulate
from memsim.core.units import PS_PER_S
from memsim.hardware import topologies
from memsim.hardware.resource import Ref
from memsim.hardware.topologies.grid import grid_shape
from memsim.mapping.collectives import ALLREDUCE, LinkCost
from memsim.mapping.collectives.ring import ring_cost
from memsim.mapping.fabric import fabric
from memsim.mapping.plan import OpTask, Plan


def _allreduce_time(chip, n: int, nbytes: int, algorithm: str = "ring") -> int:
    rounds = ALLREDUCE[algorithm].rounds(list(range(n)), nbytes)
    task = _collective("ar", rounds)
    return engine.run(_plan(chip, (task,), chips=n, tp=n)).end_ps


def _collective(name: str, rounds, **kw) -> OpTask:
    return OpTask(op=name, kind="allreduce", layer=kw.pop("layer", 0), flops=0, overhead_ps=kw.pop("overhead_ps", 0),
                  steps=(), deps=kw.pop("deps", ()), bound=Ref.link("nvlink"), rounds=tuple(rounds), **kw)


def _plan(chip, tasks, **kw) -> Plan:
    return Plan(chip=chip, tasks=tuple(tasks), homes=(), roofline_s=0.0, roofline_bound="compute", compulsory_bytes=(),
                **kw)


@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_ring_allreduce_on_a_switch_matches_the_textbook_cost(n):
    chip = hardware.load("h100-sxm", [("system.topology", "switch")])
    link = chip.interconnect
    nbytes = 64 * 2**20
    got = _allreduce_time(chip, n, nbytes) / PS_PER_S
    # Every round sends bytes/n over two hops (chip -> switch -> chip) at the achievable bandwidth
    # and pays both latencies and the protocol's (the task here has no launch).
    step = (2 * link.latency_ps + chip.system.step_latency_ps) / PS_PER_S
    expected = ring_cost(n, nbytes, LinkCost(link.effective_bandwidth, step))
    assert got == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("n", [16, 32])
def test_allreduce_on_a_2d_mesh_is_slower_than_on_a_switch(n):
    nbytes = 32 * 2**20
    switch = _allreduce_time(hardware.load("h100-sxm", [("system.topology", "switch")]), n, nbytes)
    mesh = _allreduce_time(hardware.load("h100-sxm", [("system.topology", "mesh2d")]), n, nbytes)
    torus = _allreduce_time(hardware.load("h100-sxm", [("system.topology", "torus2d")]), n, nbytes)
    # Ring neighbours that are not mesh neighbours share links on multi-hop routes.
    assert mesh > switch
    assert torus <= mesh


def test_routes_follow_the_topology():
    mesh, torus, switch = (topologies.TOPOLOGIES.get(name) for name in ("mesh2d", "torus2d", "switch"))
    g = mesh.build(16)
    assert grid_shape(16) == (4, 4)
    assert len(mesh.route(g, 0, 15)) == 6  # 3 across, 3 down
    assert mesh.route(g, 0, 3) == [(0, 1), (1, 2), (2, 3)]
    assert len(torus.route(torus.build(16), 0, 3)) == 1  # wraparound
    assert switch.route(switch.build(4), 1, 2) == [(1, "sw"), ("sw", 2)]


def test_auto_takes_one_round_for_small_messages_and_two_for_large_on_a_switch():
    """One-shot moves n - 1 whole messages in one round; two-shot a ring's bytes in two. As
    runtime kernels on a GPU, both then synchronize in a round of flags with no bytes."""
    h100 = fabric(hardware.load("h100-sxm"), 8)
    assert h100.cheapest(range(8), 8192) == "one_shot"
    assert h100.cheapest(range(8), 512 * 2**20) == "two_shot"
    data, flags = h100.allreduce(range(8), 8192)[1]
    assert {b for *_, b in data} == {8192} and {b for *_, b in flags} == {0}


def test_llama2_70b_decode_gets_faster_with_tensor_parallelism():
    runs = {tp: simulate("a100-80gb-sxm", "llama-2-70b", context=1024, tp=tp) for tp in (2, 4, 8)}
    times = [runs[tp].summary.step_time_s for tp in (2, 4, 8)]
    assert times[0] > times[1] > times[2]
    for tp, r in runs.items():
        s = r.summary
        assert s.chips == tp and s.exposed_comm_s > 0
        allreduce = r.timeline[(r.timeline.op_kind == "allreduce") & (r.timeline.kind == "transfer")]
        assert len(allreduce) > 0 and allreduce.resource.str.startswith("link:nvlink[").all()
        assert s.stall_s["link:nvlink"] == pytest.approx(s.exposed_comm_s)
        links = {k: v for k, v in s.bytes_per_link.items() if k.startswith("nvlink[")}
        assert sum(v.total for v in links.values()) > 0 and all(v.busy_s >= 0 for v in links.values())


def test_kv_heads_are_replicated_when_tp_exceeds_them():
    r = simulate("h100-sxm", "llama-3.1-8b", context=512, tp=16, system=None)
    attn = r.graph.ops["L0.attn"]
    assert attn.dim("heads") == 2 and attn.dim("kv_heads") == 1  # 8 KV heads over 16 ranks


def test_pipeline_stages_show_their_boundaries_and_sends():
    r = simulate("h100-sxm", "llama-2-7b", context=256, pp=4)
    tl = r.timeline
    assert set(tl.chip) == {"chip0", "chip1", "chip2", "chip3"}
    sends = tl[(tl.op_kind == "sendrecv") & (tl.kind == "transfer")]
    assert len(sends) == 3 * 2  # three boundaries, two hops through the switch each
    assert set(zip(sends.src, sends.dst)) == {("chip0", "chip1"), ("chip1", "chip2"), ("chip2", "chip3")}
    layer_chip = tl[tl.op == "L31.qkv"].chip.unique()
    assert list(layer_chip) == ["chip3"]
    assert r.summary.step_time_s > simulate("h100-sxm", "llama-2-7b", context=256).summary.step_time_s


def test_system_yaml_overrides_topology(tmp_path):
    path = tmp_path / "sys.yaml"
    path.write_text("topology: ring\ncollective: ring\nstep_latency: 5 us\n")
    r = simulate("h100-sxm", "llama-2-7b", context=128, tp=4, system=str(path))
    assert r.chip.system.step_latency_ps == 5_000_000  # any field of the system section
    names = {k for k, v in r.summary.bytes_per_link.items() if k.startswith("nvlink[") and v.total}
    # The ring's two channels go round both ways, over both directions of each of the ring's cables.
    cables = {(0, 1), (1, 2), (2, 3), (3, 0)}
    assert names == {f"nvlink[{a}>{b}]" for a, b in cables} | {f"nvlink[{b}>{a}]" for a, b in cables}
    path.write_text("topologie: ring\n")
    with pytest.raises(ConfigError, match="topologie"):
        simulate("h100-sxm", "llama-2-7b", tp=4, system=str(path))


def test_chips_must_match_tp_times_pp():
    with pytest.raises(ConfigError, match="chips"):
        simulate("h100-sxm", "llama-2-7b", tp=2, pp=2, chips=8)


def test_expert_parallel_moe_exchanges_tokens_with_all_to_all():
    r = simulate("h100-sxm", "mixtral-8x7b", batch=16, context=512, weight_dtype="int8", tp=8, ep=True)
    kinds = r.timeline.groupby("op_kind").size()
    assert kinds["alltoall"] > 0 and "L0.mlp_allreduce" not in set(r.timeline.op)
    experts = r.graph.tensors["L0.experts.gate_up.weight"]
    assert experts.shape[0] == 1  # one whole expert per rank
    tp_only = simulate("h100-sxm", "mixtral-8x7b", batch=16, context=512, weight_dtype="int8", tp=8)
    assert tp_only.graph.tensors["L0.experts.gate_up.weight"].shape == (8, 4096, 2 * 14336 // 8)
    with pytest.raises(ConfigError, match="experts"):
        simulate("h100-sxm", "llama-2-7b", tp=2, ep=True)


def _both(plan):
    """The plan run as built, and with every collective's transfers requested one by one."""
    from memsim.engine.scheduler import Simulation
    played = Simulation(plan, True, True)
    assert played.alone or not any(t.rounds for t in plan.tasks)
    one_by_one = Simulation(plan, True, True)
    one_by_one.alone = {}
    return played, played.run(), one_by_one.run()


@pytest.mark.parametrize("preset, topology, n", [("h100-sxm", "switch", 8), ("h100-sxm", "torus2d", 16),
                                                 ("mi300x", "fully_connected", 8), ("h100-sxm", "ring", 6)])
@pytest.mark.parametrize("algorithm", sorted(ALLREDUCE))
def test_a_collective_alone_on_its_links_is_played_as_its_transfers_would_run(preset, topology, n, algorithm):
    """Links no other stream uses are idle at each round's start, so one timeout with the
    transfers worked out once gives what requesting them one by one gives: the end, every
    row, every link's bytes and busy time."""
    chip = hardware.load(preset, [("system.topology", topology)])
    rounds = ALLREDUCE[algorithm].rounds(list(range(n)), 3 * 2**20 + 7, fabric(chip, n).shape(range(n)))
    tasks = tuple(_collective(f"ar{i}", rounds, layer=i, overhead_ps=1000, deps=(f"ar{i - 1}",) if i else (),
                              stream="comm") for i in range(3))
    sim, played, one_by_one = _both(_plan(chip, tasks, chips=n, tp=n))
    assert set(sim.alone) == {"ar0", "ar1", "ar2"}
    assert played.events < one_by_one.events
    assert (played.end_ps, played.records, played.bytes_read, played.busy_ps) == \
        (one_by_one.end_ps, one_by_one.records, one_by_one.bytes_read, one_by_one.busy_ps)


def test_collectives_of_streams_that_share_links_request_their_transfers():
    """Two pipeline stages' all-reduces on a ring share its cables: neither is alone, so their
    transfers contend as requested."""
    chip = hardware.load("h100-sxm", [("system.topology", "ring")])
    tasks = tuple(_collective(f"ar{s}", ALLREDUCE["ring"].rounds([2 * s, 2 * s + 1, (2 * s + 2) % 4], 2**20),
                              chip=2 * s, stream="comm") for s in range(2))
    from memsim.engine.scheduler import Simulation
    sim = Simulation(_plan(chip, tasks, chips=4, tp=2), True, True)
    assert sim.alone == {}


def test_a_multi_chip_run_plays_its_collectives_with_the_same_result():
    r = simulate("h100-sxm", "llama-2-7b", context=128, tp=4, pp=2)
    _, played, one_by_one = _both(r.plan)
    assert (played.end_ps, played.records, played.busy_ps) == (one_by_one.end_ps, one_by_one.records,
                                                               one_by_one.busy_ps)
