"""A pipeline hop as whole sends or as a scatter and an all-gather (memsim.mapping.collectives.scatter_gather)."""
from __future__ import annotations

from collections import Counter

import pytest

from memsim import hardware, simulate
from memsim.mapping import fabric, system
from memsim.mapping.collectives import Shape
from memsim.mapping.collectives.scatter_gather import gathers, scatter_gather, whole


def shapes(n: int) -> list[Shape]:
    return [Shape(), Shape(barrier=True)] + [Shape(node=k) for k in range(2, n) if n % k == 0]


@pytest.mark.parametrize("n", range(2, 17))
def test_every_gather_leaves_every_member_every_slice_once(n):
    for shape in shapes(n):
        for name, moves in gathers(n, shape).items():
            held = {m: Counter({m: 1}) for m in range(n)}  # slice i starts at position i
            for moved in moves:
                before = {m: Counter(c) for m, c in held.items()}
                for mv in moved:
                    assert not mv.reduce and mv.src != mv.dst
                    for p in mv.pieces:
                        assert before[mv.src][p], (name, n, shape)  # it sends only what it has
                        held[mv.dst][p] = 1
            assert all(set(c) == set(range(n)) for c in held.values()), (name, n, shape)


def test_a_scatter_moves_a_slice_per_rank_between_the_stages_and_the_gather_stays_in_the_next():
    src, dst = [0, 1, 2, 3], [4, 5, 6, 7]
    rounds = scatter_gather(src, dst, 4096 + 1, gathers(4, Shape())["direct"])
    assert rounds[0] == ((0, 4, 1025), (1, 5, 1025), (2, 6, 1025), (3, 7, 1025))
    assert all(a in dst and b in dst for r in rounds[1:] for a, b, _ in r)
    assert sum(n for r in rounds[1:] for a, _, n in r if a == 4) == 3 * 1025  # its slice to the three others
    assert whole(src, dst, 4096) == (((0, 4, 4096), (1, 5, 4096), (2, 6, 4096), (3, 7, 4096)),)


def test_the_hop_is_the_cheaper_of_the_two_on_the_system_as_built():
    groq = hardware.load("groq-lpu")
    chips = 16 * 36
    rounds = system.hop_rounds(groq, chips, 1, 2, 16, 16384)
    net = fabric.fabric(groq, chips)
    sent = whole(range(16, 32), range(32, 48), 16384)
    assert len(rounds) > 1 and rounds[0][0] == (16, 32, 1024)  # Groq's dragonfly: eight ranks share a global cable
    assert net.seconds(rounds, launch=False) < net.seconds(sent, launch=False)
    h100 = hardware.load("h100-sxm")  # an NVSwitch: a whole 16 KiB send beats a scatter and a gather's rounds
    assert system.hop_rounds(h100, 8, 0, 1, 4, 16384) == whole(range(4), range(4, 8), 16384)
    assert system.hop_rounds(groq, chips, 1, 2, 1, 16384) == whole([1], [2], 16384)  # no tensor parallelism


def test_a_sliced_hop_runs_in_the_engine_no_faster_than_its_least_time():
    r = simulate("groq-lpu", "llama-2-70b", weight_dtype="int8", context=128, tp=16, pp=36)
    tl = r.timeline
    sends = tl[(tl.op_kind == "sendrecv") & (tl.kind == "transfer")]
    # The scatter crosses between stages (chips 0-15 to 16-31); the gather stays within stage 1.
    assert sends.bytes.min() < 16384 and (sends[sends.op == "send.stage0-1"].end_s.max()
                                          - sends[sends.op == "send.stage0-1"].start_s.min()) > 0
    hops = system.hop_seconds(r.plan.tasks, r.plan.routes)
    took = sends.groupby("op").apply(lambda s: s.end_s.max() - s.start_s.min())
    assert took["send.stage0-1"] >= hops[0] * (1 - 1e-9)
