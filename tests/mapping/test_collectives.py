"""The collective registries: all-reduce algorithms by name, the other collectives by op kind."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsim import simulate
from memsim.errors import ConfigError
from memsim.mapping import collectives
from memsim.mapping.collectives import ALLREDUCE, AllReduce
from memsim.workload.graph import COLLECTIVE_KINDS

ALGORITHMS = sorted(ALLREDUCE)
SIZES = [1, 1000, 64 * 2**20 + 3]


def test_the_registries_cover_every_collective_op_kind():
    assert set(ALGORITHMS) == {"ring", "tree"}
    assert collectives.algorithms() == ("auto", *ALLREDUCE)
    assert {"allreduce", *collectives.COLLECTIVES} == set(COLLECTIVE_KINDS)


@pytest.mark.parametrize("name", ALGORITHMS)
@pytest.mark.parametrize("n", range(2, 10))
@pytest.mark.parametrize("nbytes", SIZES)
def test_every_allreduce_moves_at_least_the_textbook_bytes(name, n, nbytes):
    algorithm = ALLREDUCE[name]
    group = list(range(10, 10 + n))
    rounds = algorithm.rounds(group, nbytes)
    # Its own cost model: per round the slowest transfer, and one latency a round.
    critical_bytes = sum(max(b for _, _, b in r) for r in rounds)
    assert critical_bytes >= algorithm.cost(n, nbytes, 1.0, 0.0) * (1 - 1e-12)
    assert len(rounds) == round(algorithm.cost(n, 0, 1.0, 1.0))
    # Any all-reduce: each member sends and receives at least (n-1)/n of the message.
    for member in group:
        assert sum(b for r in rounds for s, _, b in r if s == member) >= (n - 1) * nbytes / n
        assert sum(b for r in rounds for _, d, b in r if d == member) >= (n - 1) * nbytes / n
    # And every member ends up having heard, directly or not, from every other.
    heard = {m: {m} for m in group}
    for r in rounds:
        before = {m: set(h) for m, h in heard.items()}
        for src, dst, _ in r:
            assert src in heard and dst in heard and src != dst
            heard[dst] |= before[src]
    assert all(h == set(group) for h in heard.values())


@given(n=st.integers(2, 64), nbytes=st.integers(1, 2**31), bw=st.floats(1e8, 1e13), latency_s=st.floats(0, 1e-4))
def test_auto_picks_the_algorithm_of_least_cost(n, nbytes, bw, latency_s):
    group = list(range(n))
    costs = {name: a.cost(n, nbytes, bw, latency_s) for name, a in ALLREDUCE.items()}
    best = collectives.cheapest(n, nbytes, bw, latency_s)
    assert costs[best] == min(costs.values())
    assert collectives.allreduce(group, nbytes, bw, latency_s) == ALLREDUCE[best].rounds(group, nbytes)


def test_a_registered_algorithm_is_chosen_by_auto_and_accepted_by_name(monkeypatch):
    def direct(group, nbytes):  # everyone sends to everyone at once: one round
        return [tuple((a, b, nbytes) for a in group for b in group if a != b)]

    monkeypatch.setitem(ALLREDUCE, "direct", AllReduce("direct", direct, lambda n, b, bw, lat: 0.0))
    assert collectives.allreduce([0, 1, 2], 64, 1e9, 1e-6) == direct([0, 1, 2], 64)
    assert "direct" in collectives.algorithms()
    r = simulate("h100-sxm", "llama-2-7b", context=64, tp=2, set={"system.collective": "direct"})
    assert r.summary["exposed_comm_s"] > 0


@pytest.mark.parametrize("tp", [1, 2])
def test_an_unknown_collective_is_a_config_error_naming_file_and_field(tp):
    with pytest.raises(ConfigError) as info:
        simulate("h100-sxm", "llama-2-7b", context=64, tp=tp, set={"system.collective": "butterfly"})
    assert info.value.field == "system.collective"
    assert info.value.file is not None and "h100-sxm.yaml" in info.value.file
    assert "'butterfly' is not one of auto, ring, tree" in str(info.value)
