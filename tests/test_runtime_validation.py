"""runtime.csv in the repository, every row it can run run on its harness's stack (memsim.validation.runtime)."""
from __future__ import annotations

import csv
import statistics

import pytest

from memsim.validation import runtime

ROWS = list(csv.DictReader(runtime.DATA.open(newline="")))


@pytest.fixture(scope="module")
def outcome():
    return runtime.outcomes()


def test_the_data_is_shipped_with_its_sources_and_every_row_is_run_or_says_why(outcome):
    done, skipped = outcome
    assert len(ROWS) == 174 and all(r["source"] for r in ROWS)
    assert {o.case.id for o in done} | {c.id for c in skipped} == {r["id"] for r in ROWS}
    assert all(c.why for c in skipped) and len(done) >= 110
    kinds = {o.case.kind for o in done}
    assert {"allreduce", "allgather", "reduce_scatter", "alltoall", "program"} <= kinds


def test_a_row_is_read_as_its_source_printed_it():
    assert runtime.size_bytes("32 KiB (32768 B)") == 32768 and runtime.size_bytes("8KB message") == 8000
    assert runtime.size_bytes("[M=6, 6144] bf16 = 73728 B") == 73728 and runtime.size_bytes("128B payload") == 128
    assert runtime.ranks_of("8x A100 SXM") == 8 and runtime.ranks_of("H200 x8 presumably") == 8
    cases = {c.id: c for c in runtime.load()}
    assert cases["412"].harness.stack == "torch-nccl-blocking" and cases["400"].harness.stack == "nccl-tests"
    assert cases["445"].hw == "wormhole-n150" and cases["541"].kind == "program"
    assert "Galaxy" in cases["553"].why or "32-chip" in cases["553"].why
    # the calls a loop timed, as its row states them (nccl-tests' -n 50, "over 100 back-to-back calls")
    assert cases["400"].calls == 50 and cases["481"].calls == 100 and cases["412"].calls == runtime.CALLS


def test_a_loop_of_more_calls_spreads_its_first_call_over_more():
    """A host-ahead loop's first call waits for the host; every later one overlaps the host's next
    call, so the average over 100 calls is nearer the steady state than over 16, and above it."""
    case = next(c for c in runtime.load() if c.id == "481")
    short, long = runtime.simulate_s(case, calls=16), runtime.simulate_s(case, calls=100)
    steady = (runtime.simulate_s(case, calls=101) * 101 - long * 100)  # the 101st call alone
    assert steady < long < short


def test_the_collective_curves_follow_the_measured_ones(outcome):
    """The bounds memsim reaches (docs/validation.md, Runtime); issue 41's target is a median of 10% and
    every row within 25%: the median holds, every row does not (the 8 x A100 nccl-tests curve, the B200's
    middle sizes)."""
    done, _ = outcome
    predicted = [abs(o.error) for o in done if o.role == "predicts"]
    assert statistics.median(abs(o.error) for o in done) <= 0.10
    assert statistics.median(predicted) <= 0.10
    by_id = {o.case.id: o for o in done}
    # the B200's floor through the same harness, its NVLink hop's latency read from row 424
    assert all(abs(by_id[str(i)].error) <= 0.10 for i in range(425, 431))
    # the H200 curve through a blocking harness, every size from 32 KiB to 64 MiB, within 12%
    assert all(abs(by_id[str(i)].error) <= 0.12 for i in range(412, 424))
    # Tenstorrent's CCLs on a ring of 8 Wormholes, 16 KiB to 64 MiB, within 20%, the reduce-scatter's
    # small messages on one direction included
    assert all(abs(by_id[str(i)].error) <= 0.2 for i in range(445, 466))
    # the custom one-shot and two-shot kernels, in sample: every size on 2 and 8 H100s within 25%
    assert all(abs(by_id[str(i)].error) <= 0.25 for i in range(475, 499))
    # tt-metal's dispatch: a program traced at the chip's op_overhead, enqueued at the host's call
    assert abs(by_id["544"].error) <= 0.05 and abs(by_id["543"].error) <= 0.2


def test_a_harness_that_waits_for_each_call_pays_the_host_and_the_kernel_in_series():
    case = next(c for c in runtime.load() if c.id == "412")
    blocking = runtime.simulate_s(case)
    eager = runtime.simulate_s(runtime.Case(**{**case.__dict__, "harness": runtime.Harness("torch-nccl-eager")}))
    graph = runtime.simulate_s(runtime.Case(**{**case.__dict__, "harness": runtime.Harness("nccl-graph",
                                                                                            loop=False)}))
    assert graph < eager < blocking
    assert blocking == pytest.approx(graph + 19.8e-6, rel=0.05)  # torch's call, the launch and NCCL's enqueue
